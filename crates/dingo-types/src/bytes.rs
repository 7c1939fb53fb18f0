//! Byte sizes as storage people write them: `256MB`, `100PB`, `1EB`
//! (decimal; `KiB`, `MiB`, ... are binary). Parsing is `parse-size`'s, which
//! is exact to the last byte over the whole `u64` range; formatting picks
//! the largest decimal unit.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

const UNITS: [(&str, u64); 7] = [
    ("EB", 1_000_000_000_000_000_000),
    ("PB", 1_000_000_000_000_000),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid size `{input}`: {reason} (examples: 4096, 256MB, 1.5TB, 100PB, 1EB)")]
pub struct ByteSizeError {
    input: String,
    reason: String,
}

/// Parses a size such as `100PB`, `1.5 TB`, `64KiB` or `4096` (bytes).
pub fn parse_bytes(input: &str) -> Result<u64, ByteSizeError> {
    // parse-size reads a leading '-' as an unknown unit; say what is wrong.
    if input.trim_start().starts_with('-') {
        return Err(ByteSizeError { input: input.to_string(), reason: "must not be negative".into() });
    }
    parse_size::parse_size(input).map_err(|e| ByteSizeError { input: input.to_string(), reason: e.to_string() })
}

/// Formats bytes with the largest decimal unit that keeps the number ≥ 1.
pub fn format_bytes(bytes: u64) -> String {
    let (unit, scale) = UNITS.iter().find(|(_, scale)| bytes >= *scale).copied().unwrap_or(("B", 1));
    if scale == 1 { format!("{bytes} B") } else { format!("{:.2} {unit}", bytes as f64 / scale as f64) }
}

/// An exact byte count in a config file or on a command line: read from a
/// size string (`"256MB"`, `"4096"`), written as the exact count (a string,
/// as TOML integers stop at `i64::MAX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = ByteSizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_bytes(s).map(ByteSize)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_string(deserializer, "a byte size as a string, such as \"256MB\" or \"4096\"")
    }
}

/// Deserializes a `T` from a string through its `FromStr`. Only strings: a
/// bare number in a config file is more likely a unit left out than a size
/// in bytes.
pub(crate) fn from_string<'de, D, T>(deserializer: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err: fmt::Display>,
{
    struct Visitor<T>(&'static str, std::marker::PhantomData<T>);
    impl<T: FromStr<Err: fmt::Display>> serde::de::Visitor<'_> for Visitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
            v.parse().map_err(E::custom)
        }
    }
    deserializer.deserialize_str(Visitor(expecting, std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_units() {
        assert_eq!(parse_bytes("1EB"), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_bytes("100PB"), Ok(100_000_000_000_000_000));
        assert_eq!(parse_bytes("256mb"), Ok(256_000_000));
        assert_eq!(parse_bytes("1.5 TB"), Ok(1_500_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
    }

    #[test]
    fn parses_exactly_above_two_to_the_53() {
        // Regression: parsing went through f64, which read this as ...992.
        assert_eq!(parse_bytes("9007199254740993"), Ok(9_007_199_254_740_993));
        assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_bytes("9.007199254740993PB"), Ok(9_007_199_254_740_993));
    }

    #[test]
    fn rejects_garbage_with_a_helpful_message() {
        let e = parse_bytes("lots").unwrap_err().to_string();
        assert!(e.contains("invalid size `lots`") && e.contains("100PB"), "{e}");
        let e = parse_bytes("-3GB").unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
        assert!(parse_bytes("GB").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("100000EB").is_err());
        assert!(parse_bytes("18446744073709551616").is_err());
    }

    #[test]
    fn formats_with_the_largest_unit() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(256_000_000), "256.00 MB");
        assert_eq!(format_bytes(1_000_000_000_000_000_000), "1.00 EB");
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Holder {
        size: ByteSize,
    }

    #[test]
    fn byte_sizes_round_trip_through_serde_exactly() {
        let h: Holder = serde_json::from_str(r#"{"size": "1.5MB"}"#).unwrap();
        assert_eq!(h.size, ByteSize(1_500_000));
        let h: Holder = serde_json::from_str(r#"{"size": "4096"}"#).unwrap();
        assert_eq!(h.size, ByteSize(4096));
        let e = serde_json::from_str::<Holder>(r#"{"size": 4096}"#).unwrap_err().to_string();
        assert!(e.contains("as a string"), "{e}");
        let max = Holder { size: ByteSize(u64::MAX) };
        let text = serde_json::to_string(&max).unwrap();
        assert_eq!(text, r#"{"size":"18446744073709551615"}"#);
        assert_eq!(serde_json::from_str::<Holder>(&text).unwrap(), max);
        let e = serde_json::from_str::<Holder>(r#"{"size": "lots"}"#).unwrap_err().to_string();
        assert!(e.contains("invalid size"), "{e}");
    }
}
