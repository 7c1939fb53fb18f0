//! Planner time. The planner never reads a clock: every call takes the
//! current [`Timestamp`] as an argument, so runs replay exactly.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Milliseconds since an epoch chosen by the caller (Unix time for the
/// service, the start of the run for the simulator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_millis(d)))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

/// Whole milliseconds of a duration, saturating at `u64::MAX`.
pub fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={:.3}s", self.0 as f64 / 1000.0)
    }
}
