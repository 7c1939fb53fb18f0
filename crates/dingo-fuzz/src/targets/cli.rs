//! The command line's value parsers: sizes (`parse_bytes`, `ByteSize`,
//! `ByteLimit`), durations, redundancy and task names. An accepted value
//! must print as text that parses back to the same value.

use crate::Target;
use dingo_proto::Redundancy;
use dingo_types::{ByteLimit, ByteSize, TaskKind, format_duration, parse_bytes, parse_duration};

pub struct CliStrings;

const SEEDS: [&str; 24] = [
    "500MB",
    "1.5GiB",
    "100PB",
    "1EB",
    "0",
    "12345",
    "7 KB",
    "unlimited",
    "2h",
    "90s",
    "1d",
    "250ms",
    "7d",
    "1h30m",
    "replicated:3",
    "r2",
    "ec:6+3",
    "rs3+2",
    "ec:2+2",
    "scrubbing",
    "gc",
    "garbage-collection",
    "file-scrubbing",
    "0.5TB",
];

impl Target for CliStrings {
    fn name(&self) -> &'static str {
        "cli-strings"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        SEEDS.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn run(&mut self, input: &[u8]) {
        let s = String::from_utf8_lossy(input);
        let s = s.as_ref();
        if let Ok(n) = parse_bytes(s) {
            assert_eq!(parse_bytes(&n.to_string()), Ok(n), "{s:?}");
        }
        if let Ok(b) = s.parse::<ByteSize>() {
            assert_eq!(b.to_string().parse::<ByteSize>().ok(), Some(b), "{s:?} printed as {b}");
        }
        if let Ok(l) = s.parse::<ByteLimit>() {
            assert_eq!(l.to_string().parse::<ByteLimit>().ok(), Some(l), "{s:?} printed as {l}");
        }
        if let Ok(d) = parse_duration(s) {
            let text = format_duration(d);
            if let Ok(back) = parse_duration(&text) {
                // The text form may round below a second; never by more.
                assert!(back.abs_diff(d) < std::time::Duration::from_secs(1), "{s:?}: {d:?} printed as {text}");
            }
        }
        if let Ok(r) = s.parse::<Redundancy>() {
            assert_eq!(r.to_string().parse::<Redundancy>(), Ok(r), "{s:?}");
            // Every accepted redundancy converts to the wire form and back.
            let wire = dingo_proto::v1::Redundancy::from(r);
            assert_eq!(dingo_proto::redundancy(Some(&wire)), Ok(r), "{s:?}");
        }
        if let Ok(t) = s.parse::<TaskKind>() {
            assert_eq!(t.name().parse::<TaskKind>().ok(), Some(t), "{s:?}");
        }
    }
}
