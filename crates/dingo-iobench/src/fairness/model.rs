//! The fairness experiment's model (PAIO Fig. 10 analog): four tenants —
//! best-effort declarations with guaranteed shares of head time — join and
//! leave one disk; the classful scheduler weights them by their shares
//! (PAIO algorithm 2's per-instance guarantees), the FIFO queue serves them
//! in arrival order. What the real run ([`super`]) and the
//! twin ([`simulate`]) share: the schedule ([`FairSpec`]) and the
//! statistics ([`Completions`], [`windows`]).

use crate::twin::{Load, drive};
use dingo_iosched::{Class, ClassfulConfig, Policy, PolicyKind, Request};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Debug, Serialize)]
pub struct FairSpec {
    /// Seven phases of this length: tenants join at 0, 1, 2 and 3 phases
    /// and leave in reverse order, so 1, 2, 3, 4, 3, 2, 1 are active.
    pub phase_s: u64,
    /// Guaranteed shares of head time, ppm: PAIO's 150/200/300/350 MiB/s
    /// of 1 GiB/s (P:414, P:426).
    pub shares_ppm: [u64; 4],
    /// Each tenant reads whole chunks of this size, keeping this many
    /// outstanding while active (it always wants more than its share).
    pub read_bytes: u64,
    pub outstanding: u32,
    /// Windows over which guarantees are checked, s, starting at each
    /// phase change and every second after while inside the phase.
    pub window_s: u64,
    pub positioning_us: u64,
    pub transfer_bytes_per_sec: u64,
}

impl FairSpec {
    pub fn full() -> Self {
        FairSpec {
            phase_s: 10,
            shares_ppm: [150_000, 200_000, 300_000, 350_000],
            // One segment: a read is one scheduling unit, so head time and
            // bytes are in proportion.
            read_bytes: 1 << 20,
            outstanding: 4,
            window_s: 5,
            positioning_us: 8_000,
            transfer_bytes_per_sec: 60_000_000,
        }
    }

    /// One 5 s window per phase.
    pub fn quick() -> Self {
        FairSpec { phase_s: 5, ..Self::full() }
    }

    pub fn duration_s(&self) -> u64 {
        7 * self.phase_s
    }

    /// When tenant `t` is active, s: `[join, leave)`.
    pub fn active_s(&self, t: usize) -> (u64, u64) {
        (t as u64 * self.phase_s, (7 - t as u64) * self.phase_s)
    }

    pub fn cost_us(&self, bytes: u64) -> u64 {
        let transfer = (u128::from(bytes) * 1_000_000).div_ceil(u128::from(self.transfer_bytes_per_sec.max(1)));
        self.positioning_us + u64::try_from(transfer).unwrap_or(u64::MAX)
    }

    /// Tenant `t`'s guarantee in MB/s: its share of the disk's rate for
    /// back-to-back reads of `read_bytes`.
    pub fn guarantee_mb_s(&self, t: usize) -> f64 {
        let full = self.read_bytes as f64 / (self.cost_us(self.read_bytes) as f64 / 1e6) / 1e6;
        full * self.shares_ppm[t] as f64 / 1e6
    }

    /// The node's classful configuration (segments of one read).
    pub fn classful(&self) -> ClassfulConfig {
        ClassfulConfig {
            segment_us: self.cost_us(self.read_bytes),
            reposition_us: self.positioning_us,
            ..ClassfulConfig::default()
        }
    }

    /// Windows `(start_s, end_s)` checked: inside a phase, from its change.
    pub fn windows(&self) -> Vec<(u64, u64)> {
        (0..7)
            .flat_map(|p| {
                let start = p * self.phase_s;
                (0..=self.phase_s.saturating_sub(self.window_s)).map(move |k| (start + k, start + k + self.window_s))
            })
            .collect()
    }
}

/// Completed reads: (tenant, completion µs from the start, bytes).
#[derive(Clone, Debug, Default)]
pub struct Completions(pub Vec<(usize, u64, u64)>);

/// One tenant in one window.
#[derive(Clone, Debug, Serialize)]
pub struct WindowStat {
    pub start_s: u64,
    pub tenant: usize,
    pub mb_s: f64,
    pub guarantee_mb_s: f64,
    /// mb_s / guarantee.
    pub ratio: f64,
}

/// Each active tenant's throughput in each checked window.
pub fn windows(spec: &FairSpec, done: &Completions) -> Vec<WindowStat> {
    let mut out = Vec::new();
    for (start, end) in spec.windows() {
        for t in 0..4 {
            let (join, leave) = spec.active_s(t);
            if start < join || end > leave {
                continue;
            }
            let bytes: u64 = done
                .0
                .iter()
                .filter(|&&(who, at, _)| who == t && (start * 1_000_000..end * 1_000_000).contains(&at))
                .map(|c| c.2)
                .sum();
            let mb_s = bytes as f64 / (end - start) as f64 / 1e6;
            let guarantee_mb_s = spec.guarantee_mb_s(t);
            out.push(WindowStat { start_s: start, tenant: t, mb_s, guarantee_mb_s, ratio: mb_s / guarantee_mb_s });
        }
    }
    out
}

/// The four tenants on the simulated disk: each keeps `outstanding` reads
/// queued while active.
struct Tenants<'a> {
    spec: &'a FairSpec,
    cost_us: u64,
    owner: HashMap<u64, usize>,
    outstanding: [u32; 4],
    next_id: u64,
    done: Completions,
}

impl Load for Tenants<'_> {
    fn admit(&mut self, policy: &mut dyn Policy, now: u64) {
        for (t, outstanding) in self.outstanding.iter_mut().enumerate() {
            let (join, leave) = self.spec.active_s(t);
            let active = (join * 1_000_000..leave * 1_000_000).contains(&now);
            while active && *outstanding < self.spec.outstanding {
                self.owner.insert(self.next_id, t);
                let class = Class::BestEffort { channel: t as u64 + 1 };
                // Ids are fresh, so the policy cannot refuse.
                let _ = policy.enqueue(now, Request { id: self.next_id, class, cost_us: self.cost_us, planned: true });
                self.next_id += 1;
                *outstanding += 1;
            }
        }
    }

    fn complete(&mut self, id: u64, now: u64) {
        if let Some(t) = self.owner.remove(&id) {
            self.outstanding[t] -= 1;
            self.done.0.push((t, now, self.spec.read_bytes));
        }
    }

    fn next_event_us(&self, now: u64) -> Option<u64> {
        (0..4).map(|t| self.spec.active_s(t).0 * 1_000_000).filter(|&join| join > now).min()
    }
}

/// Runs the schedule on one simulated disk with `kind` (tenant `t` is
/// declaration channel `t + 1`, with its share).
pub fn simulate(spec: &FairSpec, kind: PolicyKind) -> Completions {
    let mut policy = kind.build(spec.classful());
    for t in 0..4 {
        policy.set_channel_share(t as u64 + 1, spec.shares_ppm[t]);
    }
    let mut tenants = Tenants {
        spec,
        cost_us: spec.cost_us(spec.read_bytes),
        owner: HashMap::new(),
        outstanding: [0; 4],
        next_id: 0,
        done: Completions::default(),
    };
    drive(policy.as_mut(), &mut tenants, spec.duration_s() * 1_000_000);
    tenants.done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seven_phases_with_one_to_four_tenants() {
        let spec = FairSpec::full();
        let active = |s: u64| (0..4).filter(|&t| (spec.active_s(t).0..spec.active_s(t).1).contains(&s)).count();
        let counts: Vec<usize> = (0..7).map(|p| active(p * spec.phase_s)).collect();
        assert_eq!(counts, vec![1, 2, 3, 4, 3, 2, 1]);
        assert_eq!(spec.windows().len(), 7 * 6);
        assert_eq!(FairSpec::quick().windows(), (0..7).map(|p| (p * 5, p * 5 + 5)).collect::<Vec<_>>());
        // The guarantees add up to the disk.
        let sum: f64 = (0..4).map(|t| spec.guarantee_mb_s(t)).sum();
        assert!((sum - 1e-6 * spec.read_bytes as f64 / (spec.cost_us(spec.read_bytes) as f64 / 1e6)).abs() < 1e-9);
    }
}
