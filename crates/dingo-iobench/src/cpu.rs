//! Machine-wide CPU utilisation from `/proc/stat`: the experiments must stay
//! head-time bound, so they report how busy the cores were.

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_is_a_fraction() {
        let Some(a) = CpuTimes::now() else { return };
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let u = a.utilisation_until(CpuTimes::now().unwrap());
        assert!((0.0..=1.0).contains(&u), "{u}");
    }
}
