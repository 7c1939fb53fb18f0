//! What the experiments read from Linux's `/proc`: machine-wide CPU
//! utilisation (the IO-control experiments must stay head-time bound, so
//! they report how busy the cores were), a process's CPU time (the storage
//! benchmark's CPU seconds per GB). (A process's peak resident set is
//! `dingo_sim::cost::peak_rss_bytes`.)
//!
//! Hand-written rather than the `procfs` crate: one-line parsers of
//! stable kernel formats do not justify its dependency tree (rustix, flags,
//! optional compression) in every build of the command.

use std::io;

/// Busy and total jiffies of all cores since boot.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    busy: u64,
    total: u64,
}

impl CpuTimes {
    /// `None` where `/proc/stat` is unavailable.
    pub fn now() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> =
            text.lines().next()?.strip_prefix("cpu ")?.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some(CpuTimes { busy: total - idle, total })
    }

    /// Fraction of all cores busy between `self` and `later`.
    pub fn utilisation_until(self, later: CpuTimes) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 { 0.0 } else { later.busy.saturating_sub(self.busy) as f64 / total as f64 }
    }

    /// Fraction of all cores busy from `before` until now; 0 where
    /// `/proc/stat` is unavailable.
    pub fn utilisation_since(before: Option<CpuTimes>) -> f64 {
        match (before, CpuTimes::now()) {
            (Some(a), Some(b)) => a.utilisation_until(b),
            _ => 0.0,
        }
    }
}

/// CPU seconds (user + system, all threads) process `pid` (or `"self"`) has
/// used so far, from `/proc/<pid>/stat`.
pub fn process_cpu_seconds(pid: &str) -> io::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path)?;
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {what}"));
    // Fields after the parenthesised command name start at field 3 (state);
    // utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or_else(|| bad("no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> io::Result<u64> {
        fields.get(i).and_then(|f| f.parse().ok()).ok_or_else(|| bad(&format!("bad field {}", i + 3)))
    };
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11)? + ticks(12)?) as f64 / hz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn utilisation_is_a_fraction() {
        let Some(a) = CpuTimes::now() else { return };
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        std::thread::sleep(Duration::from_millis(20));
        let u = a.utilisation_until(CpuTimes::now().unwrap());
        assert!((0.0..=1.0).contains(&u), "{u}");
        assert!((0.0..=1.0).contains(&CpuTimes::utilisation_since(Some(a))));
        assert_eq!(CpuTimes::utilisation_since(None), 0.0);
    }

    #[test]
    fn own_cpu_time_is_read_and_grows() {
        // Spinning must show up as CPU time within seconds (the clock ticks at ~10 ms).
        let before = process_cpu_seconds("self").unwrap();
        let mut x = 0u64;
        let t = Instant::now();
        while process_cpu_seconds("self").unwrap() == before {
            assert!(t.elapsed() < Duration::from_secs(10), "CPU time did not grow");
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        assert!(process_cpu_seconds("0").is_err());
    }
}
