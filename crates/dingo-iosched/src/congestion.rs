//! The node's congestion signal (Sandook's SSD agent, S:228-232, S:322):
//! per disk, compare what the head actually took with what the disk's
//! profile (its `DiskModel`) says it should take, and flag the disk when it
//! runs more than a threshold above its profile.
//!
//! One emulated head serves one request at a time and every microsecond a
//! request waits is service of the requests ahead of it, so latency above
//! the profile at a given load is service time above the profile: the
//! detector keeps exponentially decayed sums of observed and profile head
//! time of completed requests (time constant `window_us`), and their ratio
//! is the disk's slowness. Pure and deterministic: time comes in as µs.

/// Detector parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CongestionConfig {
    /// Time constant of the decayed sums, µs. Sandook averages over 10 ms
    /// (S:228) for µs SSD requests; HDD requests take 10-80 ms, so 200 ms
    /// (design study §5.6).
    pub window_us: u64,
    /// Congested above `1 + threshold` × the profile, ppm: Sandook's 10 %
    /// (S:230).
    pub threshold_ppm: u64,
    /// Cleared again at or below `1 + clear` × the profile, ppm: hysteresis,
    /// like the code's stable factor below the congestion level.
    pub clear_ppm: u64,
}

impl Default for CongestionConfig {
    fn default() -> Self {
        CongestionConfig { window_us: 200_000, threshold_ppm: 100_000, clear_ppm: 50_000 }
    }
}

/// What a read reply carries about its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Congestion {
    pub congested: bool,
    /// Observed over profile head time, ‰ (1000: as fast as the profile).
    pub slowness_permille: u64,
}

/// One disk's detector.
#[derive(Clone, Debug)]
pub struct CongestionDetector {
    config: CongestionConfig,
    observed_us: f64,
    profile_us: f64,
    last_us: u64,
    congested: bool,
}

impl CongestionDetector {
    pub fn new(config: CongestionConfig) -> Self {
        CongestionDetector { config, observed_us: 0.0, profile_us: 0.0, last_us: 0, congested: false }
    }

    /// A request completed at `now_us` after `observed_us` of head time
    /// where the profile predicts `profile_us`.
    pub fn observe(&mut self, now_us: u64, observed_us: u64, profile_us: u64) {
        let decay = (-(now_us.saturating_sub(self.last_us) as f64) / self.config.window_us.max(1) as f64).exp();
        self.last_us = self.last_us.max(now_us);
        self.observed_us = self.observed_us * decay + observed_us as f64;
        self.profile_us = self.profile_us * decay + profile_us as f64;
        let ratio_ppm = self.ratio_ppm();
        if ratio_ppm > 1_000_000 + self.config.threshold_ppm {
            self.congested = true;
        } else if ratio_ppm <= 1_000_000 + self.config.clear_ppm {
            self.congested = false;
        }
    }

    fn ratio_ppm(&self) -> u64 {
        if self.profile_us <= 0.0 { 1_000_000 } else { (self.observed_us / self.profile_us * 1e6).round() as u64 }
    }

    /// The signal now. Time alone changes nothing: both sums decay alike,
    /// so only completed requests move the ratio.
    pub fn state(&self) -> Congestion {
        Congestion { congested: self.congested, slowness_permille: self.ratio_ppm().div_ceil(1000) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_as_fast_as_its_profile_is_never_congested() {
        let mut d = CongestionDetector::new(CongestionConfig::default());
        for i in 0..100 {
            d.observe(i * 10_000, 12_000, 12_000);
        }
        assert_eq!(d.state(), Congestion { congested: false, slowness_permille: 1000 });
    }

    #[test]
    fn the_first_request_of_a_5x_slowdown_signals_and_recovery_clears_it() {
        let mut d = CongestionDetector::new(CongestionConfig::default());
        let mut t = 0;
        for _ in 0..50 {
            t += 30_000;
            d.observe(t, 12_000, 12_000);
        }
        t += 60_000;
        d.observe(t, 60_000, 12_000);
        assert!(d.state().congested, "{:?}", d.state());
        // Fast requests again: cleared once they outweigh the slow one.
        let mut cleared_after = None;
        for i in 1..=100 {
            t += 30_000;
            d.observe(t, 12_000, 12_000);
            if !d.state().congested {
                cleared_after = Some(i);
                break;
            }
        }
        let n = cleared_after.expect("cleared");
        assert!((2..=40).contains(&n), "cleared after {n} fast requests");
    }

    #[test]
    fn hysteresis_holds_between_the_two_levels() {
        let mut d = CongestionDetector::new(CongestionConfig::default());
        d.observe(0, 1_200, 1_000);
        assert!(d.state().congested);
        // 1.07: below the threshold, above the clear level.
        let mut d2 = d.clone();
        for i in 1..40 {
            d2.observe(i * 1_000_000, 1_070, 1_000);
        }
        assert!(d2.state().congested);
        d.observe(5_000_000, 1_000, 1_000);
        assert!(!d.state().congested);
    }
}
