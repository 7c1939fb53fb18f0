//! What a run costs the machine — wall time and peak memory — summed over
//! the processes it spans: a run resumed from a checkpoint adds its wall
//! time to the earlier processes' and reports the largest peak of them all.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What a run cost: wall time and peak memory, over every process it spans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunCost {
    pub wall_seconds: f64,
    pub peak_rss_bytes: u64,
}

/// A run's cost so far: what the earlier processes' checkpoint carried,
/// plus this process since the meter started.
#[derive(Clone, Copy, Debug)]
pub struct CostMeter {
    earlier: RunCost,
    started: Instant,
}

impl CostMeter {
    /// A meter of this process from `started`, after `earlier` (zero for
    /// a fresh run).
    pub fn since(earlier: RunCost, started: Instant) -> CostMeter {
        CostMeter { earlier, started }
    }

    /// The wall seconds of every process so far and the largest peak RSS.
    pub fn cost(&self) -> RunCost {
        RunCost {
            wall_seconds: self.earlier.wall_seconds + self.started.elapsed().as_secs_f64(),
            peak_rss_bytes: self.earlier.peak_rss_bytes.max(peak_rss_bytes()),
        }
    }
}

impl Default for CostMeter {
    fn default() -> CostMeter {
        CostMeter::since(RunCost::default(), Instant::now())
    }
}

/// Hands the heap's free pages back to the kernel (glibc's `malloc_trim`;
/// nothing on other C libraries). glibc keeps freed memory for reuse; at
/// 1 EB that kept memory, not the state, grew by gigabytes over a few
/// quanta and set the month's peak (docs/SIMULATOR.md).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns whole free pages to the kernel; it
    // takes each arena's lock like any allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Peak resident set size of this process (`VmHWM`); 0 where `/proc` is
/// unavailable. Every command that reports a peak RSS reads it here.
///
/// The largest reading so far is returned, so a peak never goes down: the
/// kernel's figure comes from approximate per-CPU RSS counters and can
/// read lower than an earlier reading (once in CI, a checkpoint's resumed
/// peak was below the one read just before it was saved).
pub fn peak_rss_bytes() -> u64 {
    static HIGHEST: AtomicU64 = AtomicU64::new(0);
    let now = status_bytes("VmHWM:");
    HIGHEST.fetch_max(now, Ordering::Relaxed).max(now)
}

/// Resident set size of this process now (`VmRSS`); 0 where `/proc` is
/// unavailable.
pub fn resident_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// A kB line of `/proc/self/status`, in bytes: parsed here rather than
/// through the `procfs` crate and its dependencies.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_adds_up_and_the_peak_is_the_largest() {
        let earlier = RunCost { wall_seconds: 100.0, peak_rss_bytes: u64::MAX };
        let cost = CostMeter::since(earlier, Instant::now()).cost();
        assert!(cost.wall_seconds >= 100.0 && cost.wall_seconds < 200.0, "{cost:?}");
        assert_eq!(cost.peak_rss_bytes, u64::MAX, "an earlier process's peak was larger");
        let fresh = CostMeter::default().cost();
        assert!(fresh.wall_seconds < 100.0);
        assert!(fresh.peak_rss_bytes > 0, "this process's own peak");
        let now = resident_bytes();
        assert!(now > 0 && now <= peak_rss_bytes(), "resident {now}, peak {}", peak_rss_bytes());
    }
}
