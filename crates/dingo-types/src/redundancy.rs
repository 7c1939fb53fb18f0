//! How a file is protected: the one definition every crate uses (the wire
//! form and its conversions are `dingo-proto`'s).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How a file is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Redundancy {
    /// `r` full copies on distinct nodes.
    Replicated(u8),
    /// Reed-Solomon with `data` data members and `parity` parity members.
    Ec { data: u8, parity: u8 },
}

impl Redundancy {
    /// Chunks written per block (replicated) or per stripe (EC).
    pub fn width(self) -> usize {
        match self {
            Redundancy::Replicated(r) => usize::from(r),
            Redundancy::Ec { data, parity } => usize::from(data) + usize::from(parity),
        }
    }

    /// This scheme if it can work: 1 to [`crate::MAX_COPIES`] copies, or
    /// at least one data and one parity member and at most 64 in all.
    pub fn validated(self) -> Result<Self, String> {
        match self {
            Redundancy::Replicated(r) if (1..=crate::MAX_COPIES).contains(&r) => Ok(self),
            Redundancy::Replicated(r) => Err(format!("replication factor {r} must be 1..={}", crate::MAX_COPIES)),
            Redundancy::Ec { data, parity }
                if data >= 1 && parity >= 1 && usize::from(data) + usize::from(parity) <= 64 =>
            {
                Ok(self)
            }
            Redundancy::Ec { data, parity } => {
                Err(format!("erasure code {data}+{parity}: need ≥ 1 data, ≥ 1 parity and at most 64 members"))
            }
        }
    }
}

impl fmt::Display for Redundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Redundancy::Replicated(r) => write!(f, "replicated:{r}"),
            Redundancy::Ec { data, parity } => write!(f, "ec:{data}+{parity}"),
        }
    }
}

/// Accepts `replicated:3` (or `r3`) and `ec:6+3` (or `rs6+3`).
impl FromStr for Redundancy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid redundancy `{s}`; expected e.g. replicated:3 or ec:6+3");
        let parsed = if let Some(r) =
            s.strip_prefix("replicated:").or_else(|| s.strip_prefix('r').filter(|r| !r.starts_with('s')))
        {
            Redundancy::Replicated(r.parse().map_err(|_| bad())?)
        } else if let Some(km) = s.strip_prefix("ec:").or_else(|| s.strip_prefix("rs")) {
            let (k, m) = km.split_once('+').ok_or_else(bad)?;
            Redundancy::Ec { data: k.parse().map_err(|_| bad())?, parity: m.parse().map_err(|_| bad())? }
        } else {
            return Err(bad());
        };
        parsed.validated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redundancy_parses_and_round_trips() {
        assert_eq!("replicated:3".parse(), Ok(Redundancy::Replicated(3)));
        assert_eq!("r2".parse(), Ok(Redundancy::Replicated(2)));
        assert_eq!("ec:6+3".parse(), Ok(Redundancy::Ec { data: 6, parity: 3 }));
        assert_eq!("rs4+2".parse(), Ok(Redundancy::Ec { data: 4, parity: 2 }));
        for r in [Redundancy::Replicated(3), Redundancy::Ec { data: 6, parity: 3 }] {
            assert_eq!(r.to_string().parse(), Ok(r));
        }
    }

    #[test]
    fn redundancy_rejects_nonsense() {
        for bad in ["", "replicated:0", "replicated:99", "ec:0+2", "ec:3", "ec:6+0", "mirror", "rsx+1"] {
            let e = bad.parse::<Redundancy>().unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
