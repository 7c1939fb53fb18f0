//! A byte limit that may be lifted: the one spelling of "unlimited" in
//! configuration files, next to exact sizes.

use crate::bytes::{ByteSizeError, from_string, parse_bytes};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// `"unlimited"` or a byte size such as `"64MB"`; anything else is an
/// error, never read as unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteLimit {
    Unlimited,
    Bytes(u64),
}

/// The literal that lifts a limit.
pub const UNLIMITED: &str = "unlimited";

impl ByteLimit {
    /// The limit in bytes, `None` if unlimited.
    pub fn bytes(self) -> Option<u64> {
        match self {
            ByteLimit::Unlimited => None,
            ByteLimit::Bytes(b) => Some(b),
        }
    }
}

impl FromStr for ByteLimit {
    type Err = ByteSizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == UNLIMITED {
            return Ok(ByteLimit::Unlimited);
        }
        parse_bytes(s).map(ByteLimit::Bytes)
    }
}

/// `unlimited`, or the exact byte count (TOML integers stop at `i64::MAX`,
/// so it is written as a string).
impl fmt::Display for ByteLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ByteLimit::Unlimited => f.write_str(UNLIMITED),
            ByteLimit::Bytes(b) => write!(f, "{b}"),
        }
    }
}

impl Serialize for ByteLimit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_string(deserializer, "\"unlimited\" or a byte size as a string, such as \"64MB\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Config {
        limit: ByteLimit,
    }

    #[test]
    fn reads_unlimited_and_sizes() {
        assert_eq!("unlimited".parse(), Ok(ByteLimit::Unlimited));
        assert_eq!("64MB".parse(), Ok(ByteLimit::Bytes(64_000_000)));
        assert_eq!(ByteLimit::Unlimited.bytes(), None);
        let text = toml::to_string(&Config { limit: ByteLimit::Bytes(u64::MAX) }).unwrap();
        assert_eq!(toml::from_str::<Config>(&text).unwrap().limit, ByteLimit::Bytes(u64::MAX));
        let text = toml::to_string(&Config { limit: ByteLimit::Unlimited }).unwrap();
        assert_eq!(text.trim(), "limit = \"unlimited\"");
        assert_eq!(toml::from_str::<Config>(&text).unwrap().limit, ByteLimit::Unlimited);
    }

    // Regression: the planner read an unparsable group cache as unlimited.
    #[test]
    fn anything_else_is_an_error_not_unlimited() {
        assert!("-1".parse::<ByteLimit>().is_err());
        assert!("infinite".parse::<ByteLimit>().is_err());
        assert!(toml::from_str::<Config>("limit = \"lots\"").is_err());
        assert!(toml::from_str::<Config>("limit = 5").is_err(), "a bare number is more likely a unit left out");
    }
}
