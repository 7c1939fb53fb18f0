//! Per-disk IO scheduling policies for DINGO's storage nodes (DESIGN §6, PAIO).
//!
//! The core is pure and deterministic, like the planner core: it never does
//! IO and never reads a clock. Time is a `u64` of microseconds passed in by
//! the caller; requests arrive through [`Policy::enqueue`] with their cost in
//! disk-head time, and [`Policy::next`] says what the (non-preemptive) head
//! serves next. The node drives it with the wall clock; the test suite and
//! the IO-control experiments' virtual-time twins (in `dingo-iobench`, beside
//! the real runs they mirror, so this crate holds only policy) with a
//! simulated one.
//!
//! Two policies:
//! - [`Fifo`]: today's behaviour, whole requests in arrival order.
//! - [`Classful`]: foreground first, token buckets in head time for the
//!   maintenance classes, a guaranteed minimum maintenance share, max-min
//!   fair sharing among best-effort declarations (weighted by their shares
//!   where given), and maintenance requests cut into segments; optionally
//!   the Waiting gate ([`waiting`]) on best effort.

mod bucket;
mod classful;
pub mod congestion;
mod fifo;
pub mod steering;
pub mod waiting;

pub use classful::{Classful, ClassfulConfig, DEFAULT_CHANNEL_SHARE_PPM};
pub use fifo::Fifo;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The scheduling class of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Client reads and writes: served first.
    Foreground,
    /// Maintenance that must not wait: reconstruction's reads and writes.
    High,
    /// Every other maintenance read or write; `channel` is its declaration (or, for
    /// imperative tasks, one channel per task kind). Channels share the
    /// best-effort rate max-min fairly.
    BestEffort { channel: u64 },
}

impl Class {
    /// Metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Class::Foreground => "foreground",
            Class::High => "high",
            Class::BestEffort { .. } => "best_effort",
        }
    }

    /// Dense index for per-class counters: 0, 1 or 2 as in [`Class::LABELS`].
    pub fn index(self) -> usize {
        match self {
            Class::Foreground => 0,
            Class::High => 1,
            Class::BestEffort { .. } => 2,
        }
    }

    pub const LABELS: [&'static str; 3] = ["foreground", "high", "best_effort"];
}

/// One request as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Caller-chosen, unique among queued requests.
    pub id: u64,
    pub class: Class,
    /// Head time the whole request needs, µs.
    pub cost_us: u64,
    /// Whether the planner's budget counts it ([`Policy::set_planned`]):
    /// declared maintenance reads. Writes and imperative tasks' reads are
    /// served as maintenance but were never in the budget.
    pub planned: bool,
}

/// A piece of a request the head serves without interruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub id: u64,
    pub class: Class,
    /// Head time of this unit, µs (including any re-positioning).
    pub cost_us: u64,
    /// Whether this unit completes its request.
    pub last: bool,
}

/// What the head does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Serve this unit now; ask again when it is done.
    Serve(Unit),
    /// Work is queued but throttled; ask again at `until_us` or on arrival.
    Wait { until_us: u64 },
    /// Nothing queued.
    Idle,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchedError {
    #[error("request {0} is already queued")]
    DuplicateId(u64),
}

/// A per-disk scheduling policy.
///
/// Contract: the caller calls [`Policy::next`] only when the head is free,
/// and serves a returned unit for exactly its `cost_us` before calling again;
/// `now_us` never decreases.
pub trait Policy: Send {
    fn enqueue(&mut self, now_us: u64, request: Request) -> Result<(), SchedError>;
    fn next(&mut self, now_us: u64) -> Decision;
    /// Requests queued or partly served.
    fn queued(&self) -> usize;
    /// Gives best-effort channel `channel` a share of head time (ppm) that
    /// fair queueing weights it by; policies without channels ignore it.
    fn set_channel_share(&mut self, _channel: u64, _share_ppm: u64) {}
    /// The Waiting gate's state, for policies that have one.
    fn gate(&self, _now_us: u64) -> Option<waiting::GateState> {
        None
    }
    /// The planner scheduled `head_time_us` of maintenance on this disk for
    /// its quantum, which ends at `until_us`: serve at least that by then,
    /// ahead of foreground if need be (replaces any earlier budget).
    /// Policies without classes ignore it (FIFO serves maintenance in
    /// arrival order, never holding it back).
    fn set_planned(&mut self, _now_us: u64, _head_time_us: u64, _until_us: u64) {}
    /// Head time of the current budget not yet served, while its quantum
    /// lasts; `None` without one.
    fn planned_left_us(&self, _now_us: u64) -> Option<u64> {
        None
    }
}

/// Which policy a disk uses (`[node.io] scheduler`).
///
/// Classful is the default: the storage, tasks, planner, drain, operator and
/// demo process tests pass with it; see `docs/IO_CONTROL.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    Fifo,
    #[default]
    Classful,
}

impl PolicyKind {
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Fifo => "fifo",
            PolicyKind::Classful => "classful",
        }
    }

    /// A fresh policy of this kind.
    pub fn build(self, config: ClassfulConfig) -> Box<dyn Policy> {
        match self {
            PolicyKind::Fifo => Box::new(Fifo::default()),
            PolicyKind::Classful => Box::new(Classful::new(config)),
        }
    }
}

/// By [`PolicyKind::name`].
impl std::str::FromStr for PolicyKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        [PolicyKind::Classful, PolicyKind::Fifo]
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| format!("`{name}` is not a scheduler; use classful or fifo"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_kind_parses_from_its_name_only() {
        for kind in [PolicyKind::Fifo, PolicyKind::Classful] {
            assert_eq!(kind.name().parse::<PolicyKind>(), Ok(kind));
        }
        let err = "cfq".parse::<PolicyKind>().unwrap_err();
        assert!(err.contains("classful or fifo"), "{err}");
    }
}
