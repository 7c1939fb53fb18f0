//! Replica steering for foreground reads (Sandook, S:304-328): the client
//! picks a copy at random with weight `base × cc` per disk, where
//!
//! - `base` comes from the disk's model: the inverse of the head time the
//!   read would take there (a disk twice as fast gets twice the reads; the
//!   model-based stand-in for Sandook's profile weights, S:304-316);
//! - `cc ∈ [floor, 1]` is congestion control (S:324-328): halved at most
//!   once per RTT while replies from the disk carry the congestion signal,
//!   then restored additively over time, `increase` of the base per RTT.
//!
//! Pure and deterministic: time is a `u64` of µs passed in, randomness a
//! caller's seeded generator. Maintenance reads are never steered: the
//! client keeps declared reads on the copy the planner chose.

use dingo_types::DiskModel;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How a client chooses among the copies of a block for foreground reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaChoice {
    /// Uniformly at random, then the others in order: the baseline.
    Random,
    /// By weight: model-based, cut on congestion signals ([`Steering`]).
    #[default]
    Steering,
}

impl ReplicaChoice {
    pub fn name(self) -> &'static str {
        match self {
            ReplicaChoice::Random => "random",
            ReplicaChoice::Steering => "steering",
        }
    }
}

impl std::str::FromStr for ReplicaChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(ReplicaChoice::Random),
            "steering" => Ok(ReplicaChoice::Steering),
            other => Err(format!("\"{other}\" is not a replica choice; use \"random\" or \"steering\"")),
        }
    }
}

/// Congestion-control parameters (design study §5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SteeringConfig {
    /// Factor per RTT while signalled, ppm: Sandook halves (S:326).
    pub decrease_ppm: u64,
    /// Restored per RTT once the signal stops, ppm of the base weight. The
    /// paper adds 1 % (S:328), the released code 5 %
    /// (`congestion_control.h`); 5 % suits HDD time scales (study §5.5).
    pub increase_ppm: u64,
    /// Lowest `cc`, ppm: the code's 0.001.
    pub floor_ppm: u64,
    /// The RTT that paces both, µs: the code's 50 ms congestion-control
    /// window; a 256 KiB HDD read takes 12-15 ms.
    pub rtt_us: u64,
}

impl Default for SteeringConfig {
    fn default() -> Self {
        SteeringConfig { decrease_ppm: 500_000, increase_ppm: 20_000, floor_ppm: 1_000, rtt_us: 50_000 }
    }
}

#[derive(Clone, Copy, Debug)]
struct DiskWeight {
    /// `cc` as of `at_us`.
    cc: f64,
    at_us: u64,
    last_decrease_us: Option<u64>,
}

/// One client's weights.
#[derive(Clone, Debug)]
pub struct Steering {
    config: SteeringConfig,
    models: HashMap<u32, DiskModel>,
    cc: HashMap<u32, DiskWeight>,
}

impl Steering {
    pub fn new(config: SteeringConfig) -> Self {
        Steering { config, models: HashMap::new(), cc: HashMap::new() }
    }

    /// Disk `disk` serves requests per `model` (from the cluster status).
    /// Disks without a model are taken for [`DiskModel::default`].
    pub fn set_model(&mut self, disk: u32, model: DiskModel) {
        self.models.insert(disk, model);
    }

    pub fn knows(&self, disk: u32) -> bool {
        self.models.contains_key(&disk)
    }

    /// The disk's congestion factor at `now_us`, in `[floor, 1]`: `cc` as
    /// of the last signal plus `increase` per RTT after the first quiet one.
    pub fn cc(&self, disk: u32, now_us: u64) -> f64 {
        match self.cc.get(&disk) {
            None => 1.0,
            Some(w) => {
                // The increase starts once a whole RTT passed without a
                // signal: an RTT that brought one earns none.
                let quiet_us = now_us.saturating_sub(w.at_us).saturating_sub(self.config.rtt_us);
                let rtts = quiet_us as f64 / self.config.rtt_us.max(1) as f64;
                (w.cc + rtts * self.config.increase_ppm as f64 / 1e6).min(1.0)
            }
        }
    }

    /// The disk's weight for a read of `bytes`: model-based base × `cc`.
    pub fn weight(&self, disk: u32, bytes: u64, now_us: u64) -> f64 {
        let model = self.models.get(&disk).copied().unwrap_or_default();
        1.0 / model.head_time_us(bytes).max(1) as f64 * self.cc(disk, now_us)
    }

    /// A reply from `disk` arrived at `now_us`. A congestion signal halves
    /// the disk's `cc` if the last cut is at least an RTT old, and in any
    /// case holds off the additive increase (it restarts from this reply).
    pub fn on_reply(&mut self, disk: u32, congested: bool, now_us: u64) {
        if !congested {
            return;
        }
        let mut cc = self.cc(disk, now_us);
        let entry = self.cc.entry(disk).or_insert(DiskWeight { cc, at_us: now_us, last_decrease_us: None });
        if entry.last_decrease_us.is_none_or(|t| now_us.saturating_sub(t) >= self.config.rtt_us) {
            cc *= self.config.decrease_ppm as f64 / 1e6;
            entry.last_decrease_us = Some(now_us);
        }
        entry.cc = cc.max(self.config.floor_ppm as f64 / 1e6);
        entry.at_us = now_us;
    }

    /// The order in which to try the copies on `disks` for a read of
    /// `bytes`: the first drawn at random by weight, the rest by weight,
    /// heaviest first (fallback on errors). Indexes into `disks`.
    pub fn order(&self, disks: &[u32], bytes: u64, now_us: u64, rng: &mut fastrand::Rng) -> Vec<usize> {
        let weights: Vec<f64> = disks.iter().map(|&d| self.weight(d, bytes, now_us)).collect();
        let mut order: Vec<usize> = (0..disks.len()).collect();
        order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
        let total: f64 = weights.iter().sum();
        if total > 0.0 && disks.len() > 1 {
            let mut x = rng.f64() * total;
            let pick = (0..disks.len())
                .find(|&i| {
                    x -= weights[i];
                    x < 0.0
                })
                .unwrap_or(order[0]);
            order.retain(|&i| i != pick);
            order.insert(0, pick);
        }
        order
    }
}

/// The random baseline's order: a random start, then the others in order.
pub fn random_order(n: usize, rng: &mut fastrand::Rng) -> Vec<usize> {
    let start = if n > 1 { rng.usize(..n) } else { 0 };
    (0..n).map(|i| (start + i) % n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;

    #[test]
    fn a_signal_halves_once_per_rtt_and_the_weight_comes_back_linearly() {
        let mut s = Steering::new(SteeringConfig::default());
        s.on_reply(7, true, 0);
        assert_eq!(s.cc(7, 0), 0.5);
        // A second signal within the RTT does not cut again...
        s.on_reply(7, true, 20 * MS);
        assert_eq!(s.cc(7, 20 * MS), 0.5);
        // ...one an RTT after the first cut does.
        s.on_reply(7, true, 50 * MS);
        assert_eq!(s.cc(7, 50 * MS), 0.25);
        // Then, after one quiet RTT, +2 % per 50 ms: back to 1 after
        // 1 + 0.75 / 0.02 = 38.5 RTTs.
        assert!((s.cc(7, 50 * MS + 6 * 50 * MS) - 0.35).abs() < 1e-9);
        assert!(s.cc(7, 1975 * MS - 1) < 1.0);
        assert_eq!(s.cc(7, 1975 * MS), 1.0);
        // Replies without a signal change nothing.
        s.on_reply(7, false, 120 * MS);
        assert!((s.cc(7, 120 * MS) - 0.258).abs() < 1e-9);
    }

    #[test]
    fn the_weight_never_falls_below_the_floor() {
        let mut s = Steering::new(SteeringConfig::default());
        for i in 0..40 {
            s.on_reply(1, true, i * 50 * MS);
        }
        assert_eq!(s.cc(1, 39 * 50 * MS), 0.001);
    }

    #[test]
    fn base_weights_follow_the_disk_models() {
        let mut s = Steering::new(SteeringConfig::default());
        s.set_model(1, DiskModel { positioning_us: 10_000, transfer_bytes_per_sec: 100_000_000 });
        s.set_model(2, DiskModel { positioning_us: 5_000, transfer_bytes_per_sec: 100_000_000 });
        // 1 MB: 20 ms vs 15 ms.
        let ratio = s.weight(2, 1_000_000, 0) / s.weight(1, 1_000_000, 0);
        assert!((ratio - 20.0 / 15.0).abs() < 1e-9, "{ratio}");
        let mut rng = fastrand::Rng::with_seed(3);
        let firsts = (0..30_000).filter(|_| s.order(&[1, 2], 1_000_000, 0, &mut rng)[0] == 0).count();
        // Expected share of disk 1: 15/35.
        assert!((firsts as f64 / 30_000.0 - 15.0 / 35.0).abs() < 0.015, "{firsts}");
    }

    #[test]
    fn a_congested_disk_is_chosen_less_and_tried_last() {
        let mut s = Steering::new(SteeringConfig::default());
        for i in 0..5 {
            s.on_reply(3, true, i * 50 * MS);
        }
        let mut rng = fastrand::Rng::with_seed(1);
        let now = 200 * MS;
        let orders: Vec<Vec<usize>> = (0..10_000).map(|_| s.order(&[3, 4, 5], 4096, now, &mut rng)).collect();
        let first_slow = orders.iter().filter(|o| o[0] == 0).count();
        // cc = 1/32: share (1/32) / (2 + 1/32) ≈ 1.5 %.
        assert!(first_slow < 300, "{first_slow}");
        assert!(orders.iter().filter(|o| o[0] != 0).all(|o| o[2] == 0));
    }

    #[test]
    fn replica_choice_parses_its_names() {
        assert_eq!("random".parse::<ReplicaChoice>(), Ok(ReplicaChoice::Random));
        assert_eq!("steering".parse::<ReplicaChoice>().map(ReplicaChoice::name), Ok("steering"));
        assert!("nearest".parse::<ReplicaChoice>().unwrap_err().contains("not a replica choice"));
    }
}
