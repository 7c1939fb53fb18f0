//! Reader for the public Twitter cache traces (`twitter/cache-trace`): CSV
//! lines `timestamp,anonymized key,key size,value size,client id,operation,TTL`.
//!
//! Reads become requests; the object's size is key plus value. Writes and
//! deletes are skipped: the engines model a look-aside cache that fills on
//! a miss. Keys are hashed to 64-bit ids.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::hash::mix64;
use crate::object::Object;

/// A line that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {reason}")]
    Malformed { line: u64, reason: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads up to `limit` requests (all if `None`).
pub fn read_twitter_csv(reader: impl BufRead, limit: Option<u64>) -> Result<Vec<Object>, TraceError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        if limit.is_some_and(|l| out.len() as u64 >= l) {
            break;
        }
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let number = i as u64 + 1;
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < 6 {
            let reason = format!("{} fields, want at least 6", fields.len());
            return Err(TraceError::Malformed { line: number, reason });
        }
        if !matches!(fields[5], "get" | "gets") {
            continue;
        }
        let size = |field: &str| {
            field
                .parse::<u32>()
                .map_err(|e| TraceError::Malformed { line: number, reason: format!("size {field:?}: {e}") })
        };
        // Both sizes are u32 in the trace, but their sum need not be.
        let size_bytes = size(fields[2])?.checked_add(size(fields[3])?).ok_or_else(|| TraceError::Malformed {
            line: number,
            reason: format!("object of {} + {} bytes is over 4 GiB", fields[2], fields[3]),
        })?;
        let size_bytes = size_bytes.max(1);
        out.push(Object { key: key_id(fields[1]), size_bytes });
    }
    Ok(out)
}

/// A trace file that cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TraceFileError {
    #[error("opening {}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("reading {}", path.display())]
    Read { path: PathBuf, source: TraceError },
    #[error("{} holds fewer than two requests", path.display())]
    TooShort { path: PathBuf },
}

/// Reads up to `limit` requests of the trace file at `path`; a benchmark
/// needs at least two (one to warm up, one to measure).
pub fn read_twitter_file(path: &Path, limit: Option<u64>) -> Result<Vec<Object>, TraceFileError> {
    let file = std::fs::File::open(path).map_err(|source| TraceFileError::Open { path: path.into(), source })?;
    let trace = read_twitter_csv(BufReader::new(file), limit)
        .map_err(|source| TraceFileError::Read { path: path.into(), source })?;
    if trace.len() < 2 {
        return Err(TraceFileError::TooShort { path: path.into() });
    }
    Ok(trace)
}

/// A stable 64-bit id for a key string (FNV-1a, then mixed).
fn key_id(key: &str) -> u64 {
    let fnv = key.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3));
    mix64(fnv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gets_become_requests_and_the_rest_is_skipped() {
        let csv = "0,q:abc,20,300,1,get,0\n1,q:abc,20,300,1,set,0\n2,q:xyz,10,0,2,gets,0\n\n3,q:abc,20,300,1,get,0\n";
        let trace = read_twitter_csv(csv.as_bytes(), None).unwrap();
        assert_eq!(trace.len(), 3);
        assert_eq!(trace[0], trace[2]);
        assert_eq!(trace[0].size_bytes, 320);
        assert_eq!(trace[1].size_bytes, 10);
        assert_ne!(trace[0].key, trace[1].key);
        assert_eq!(read_twitter_csv(csv.as_bytes(), Some(1)).unwrap().len(), 1);
    }

    #[test]
    fn a_file_needs_two_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        std::fs::write(&path, "0,k,1,2,3,get,0\n1,k,1,2,3,set,0\n").unwrap();
        assert!(matches!(read_twitter_file(&path, None), Err(TraceFileError::TooShort { .. })));
        std::fs::write(&path, "0,k,1,2,3,get,0\n1,k,1,2,3,get,0\n").unwrap();
        assert_eq!(read_twitter_file(&path, None).unwrap().len(), 2);
        let missing = dir.path().join("missing.csv");
        assert!(matches!(read_twitter_file(&missing, None), Err(TraceFileError::Open { .. })));
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let err = read_twitter_csv("0,k,1,2,3,get,0\n1,k,x,2,3,get,0\n".as_bytes(), None).unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
    }

    #[test]
    fn sizes_whose_sum_overflows_are_malformed_not_a_panic() {
        let err = read_twitter_csv("0,k,4294967295,1,3,get,0\n".as_bytes(), None).unwrap_err();
        assert!(err.to_string().contains("over 4 GiB"), "{err}");
    }

    proptest::proptest! {
        /// The trace is untrusted input: any text is read or refused, never
        /// a panic.
        #[test]
        fn any_text_is_read_or_refused(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "[0-9]{1,3},[a-z:]{0,4},[0-9]{1,11},[0-9]{1,11},[0-9],(get|gets|set),[0-9]",
                    ".{0,40}",
                ],
                0..8,
            ),
        ) {
            let text = lines.join("\n");
            if let Ok(trace) = read_twitter_csv(text.as_bytes(), None) {
                proptest::prop_assert!(trace.len() <= lines.len());
                proptest::prop_assert!(trace.iter().all(|o| o.size_bytes >= 1));
            }
        }
    }
}
