//! The steering experiment (Sandook Fig. 7c / Fig. 9 analog): open-loop
//! foreground reads of 3-way replicated blocks while one disk runs 5×
//! slower, first for a 2.3 s window (Sandook's GC burst, S:466-468), later
//! persistently. This module holds what the real run (`dingo bench
//! iocontrol steering`) and its virtual-time twin share: the load
//! ([`SteerSpec`], [`arrivals`]), the statistics ([`Recorder`],
//! [`SteerSummary`]), the bars ([`SteerBars`]), and the twin itself
//! ([`simulate`]), which drives the same scheduler, congestion detector and
//! steering code as the node and the client with a simulated clock.

use crate::stats::percentile_ms;
use dingo_iosched::congestion::{CongestionConfig, CongestionDetector};
use dingo_iosched::steering::{ReplicaChoice, Steering, SteeringConfig, random_order};
use dingo_iosched::{Class, ClassfulConfig, Decision, Policy, PolicyKind, Request, Unit};
use dingo_types::DiskModel;
use serde::Serialize;
use std::collections::HashMap;

/// One experiment's load and faults. Disks are numbered
/// `node × disks_per_node + d`; every block has one copy on each node.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SteerSpec {
    pub duration_s: u64,
    pub nodes: u32,
    pub disks_per_node: u32,
    /// Blocks the reads pick from (uniformly).
    pub blocks: u32,
    pub block_bytes: u64,
    /// Foreground read size, bytes (a piece of a block).
    pub read_bytes: u64,
    /// Foreground head-time utilisation each disk would see with the load
    /// spread evenly, ppm.
    pub util_ppm: u64,
    /// The injected slowdown, ‰ of the disk's service time.
    pub factor_permille: u64,
    /// The transient fault: `transient_disk` slow from `transient_at_ms`
    /// for `transient_ms`.
    pub transient_disk: u32,
    pub transient_at_ms: u64,
    pub transient_ms: u64,
    /// The persistent fault: `persistent_disk` slow from
    /// `persistent_at_ms` to the end.
    pub persistent_disk: u32,
    pub persistent_at_ms: u64,
    /// Excluded from the pre-fault reference at the start, ms.
    pub warmup_ms: u64,
    /// The persistent p99 counts reads from this long after its onset, ms.
    pub settle_ms: u64,
    /// The recovered share counts reads from this long after the
    /// transient fault ends until the persistent one, ms.
    pub recovery_ms: u64,
    /// Disk model: the demo's HDD.
    pub positioning_us: u64,
    pub transfer_bytes_per_sec: u64,
}

impl SteerSpec {
    /// A minute: 10 s before the transient fault, 2.3 s of it (Sandook's
    /// GC burst, S:466-468), recovery until 25 s, then one disk slow until
    /// the end.
    pub fn full() -> Self {
        SteerSpec {
            duration_s: 60,
            nodes: 3,
            disks_per_node: 2,
            blocks: 96,
            block_bytes: 1 << 20,
            read_bytes: 256 << 10,
            util_ppm: 300_000,
            factor_permille: 5_000,
            // Both faults on the last node, so the bench can give that node
            // its own config; one disk each.
            transient_disk: 4,
            transient_at_ms: 10_500,
            transient_ms: 2_300,
            persistent_disk: 5,
            persistent_at_ms: 25_000,
            warmup_ms: 1_000,
            settle_ms: 2_000,
            recovery_ms: 3_000,
            positioning_us: 8_000,
            transfer_bytes_per_sec: 60_000_000,
        }
    }

    /// Half a minute with the same shape.
    pub fn quick() -> Self {
        SteerSpec { duration_s: 30, transient_at_ms: 6_500, persistent_at_ms: 16_000, ..Self::full() }
    }

    pub fn disks(&self) -> u32 {
        self.nodes * self.disks_per_node
    }

    pub fn model(&self) -> DiskModel {
        DiskModel { positioning_us: self.positioning_us, transfer_bytes_per_sec: self.transfer_bytes_per_sec }
    }

    /// Service-time factor (‰) of a request enqueued on `disk` at `t_us`.
    pub fn slowdown_permille(&self, disk: u32, t_us: u64) -> u64 {
        let t_ms = t_us / 1000;
        let transient = disk == self.transient_disk
            && (self.transient_at_ms..self.transient_at_ms + self.transient_ms).contains(&t_ms);
        let persistent = disk == self.persistent_disk && t_ms >= self.persistent_at_ms;
        if transient || persistent { self.factor_permille } else { 1000 }
    }

    /// Mean gap between reads, µs.
    fn mean_gap_us(&self) -> f64 {
        let service = self.model().head_time_us(self.read_bytes) as f64;
        service / (self.util_ppm as f64 / 1e6 * f64::from(self.disks())).max(1e-9)
    }
}

/// One foreground read: when, which block, which piece of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub at_us: u64,
    pub block: u32,
    pub offset: u64,
}

/// Poisson arrivals over the whole run, seeded: both policies get the
/// same reads.
pub fn arrivals(spec: &SteerSpec, seed: u64) -> Vec<Arrival> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let pieces = (spec.block_bytes / spec.read_bytes).max(1);
    let end = (spec.duration_s * 1_000_000) as f64;
    let mut out = Vec::new();
    let mut t = 0.0f64;
    loop {
        // Exponential gap; 1 - u is in (0, 1], so the log is finite.
        t += -(1.0 - rng.f64()).ln() * spec.mean_gap_us();
        if t >= end {
            return out;
        }
        out.push(Arrival {
            at_us: t as u64,
            block: rng.u32(..spec.blocks.max(1)),
            offset: rng.u64(..pieces) * spec.read_bytes,
        });
    }
}

/// Statistics of one second of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SteerSecond {
    pub second: u64,
    pub reads: u64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// Share of the second's reads (by arrival) served by the transient
    /// and the persistent slow disk.
    pub transient_disk_share: f64,
    pub persistent_disk_share: f64,
}

/// What one run of one policy measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SteerSummary {
    pub reads: u64,
    pub errors: u64,
    /// p90 of the reads arriving between the warm-up and the transient
    /// fault.
    pub pre_fault_p90_ms: f64,
    /// Largest p90 of a 1 s window from the second the transient fault
    /// starts in to the persistent fault, and its ratio to the pre-fault
    /// p90.
    pub fault_max_p90_ms: f64,
    pub fault_max_p90_ratio: f64,
    /// The transient slow disk's share of reads before the fault, in the
    /// half second ending 1 s after its onset, and after it recovered.
    pub pre_fault_share: f64,
    pub share_1s_after_onset: f64,
    pub recovered_share: f64,
    /// 1 − share 1 s after onset / pre-fault share.
    pub share_drop: f64,
    /// Recovered share / pre-fault share.
    pub share_recovery: f64,
    /// Percentiles of reads arriving once the persistent fault settled.
    pub persistent_p50_ms: f64,
    pub persistent_p90_ms: f64,
    pub persistent_p99_ms: f64,
    pub series: Vec<SteerSecond>,
}

/// Collects finished reads (times in µs from the run's start).
#[derive(Debug, Default)]
pub struct Recorder {
    reads: Vec<(u64, u64, u32)>,
    errors: u64,
}

impl Recorder {
    /// A read that arrived at `arrival_us`, took `latency_us`, and was
    /// served by `disk`.
    pub fn read(&mut self, arrival_us: u64, latency_us: u64, disk: u32) {
        self.reads.push((arrival_us, latency_us, disk));
    }

    pub fn error(&mut self) {
        self.errors += 1;
    }

    pub fn summary(&self, spec: &SteerSpec) -> SteerSummary {
        let ms = |m: u64| m * 1000;
        let in_range = |from_us: u64, to_us: u64| self.reads.iter().filter(move |r| (from_us..to_us).contains(&r.0));
        let latencies = |from_us, to_us| in_range(from_us, to_us).map(|r| r.1).collect::<Vec<u64>>();
        let share = |from_us, to_us, disk| {
            let (mut n, mut on) = (0u64, 0u64);
            for r in in_range(from_us, to_us) {
                n += 1;
                on += u64::from(r.2 == disk);
            }
            if n == 0 { 0.0 } else { on as f64 / n as f64 }
        };
        let onset = ms(spec.transient_at_ms);
        let persistent = ms(spec.persistent_at_ms);
        let end = spec.duration_s * 1_000_000;
        let seconds = spec.duration_s;
        let series: Vec<SteerSecond> = (0..seconds)
            .map(|s| {
                let (a, b) = (s * 1_000_000, (s + 1) * 1_000_000);
                let lat = latencies(a, b);
                SteerSecond {
                    second: s,
                    reads: lat.len() as u64,
                    p90_ms: percentile_ms(&lat, 0.90),
                    p99_ms: percentile_ms(&lat, 0.99),
                    transient_disk_share: share(a, b, spec.transient_disk),
                    persistent_disk_share: share(a, b, spec.persistent_disk),
                }
            })
            .collect();
        let pre_fault_p90_ms = percentile_ms(&latencies(ms(spec.warmup_ms), onset), 0.90);
        let fault_max_p90_ms = series
            .iter()
            .filter(|s| s.second >= onset / 1_000_000 && (s.second + 1) * 1_000_000 <= persistent)
            .map(|s| s.p90_ms)
            .fold(0.0, f64::max);
        let pre_fault_share = share(ms(spec.warmup_ms), onset, spec.transient_disk);
        let share_1s_after_onset = share(onset + 500_000, onset + 1_000_000, spec.transient_disk);
        let recovered_from = ms(spec.transient_at_ms + spec.transient_ms + spec.recovery_ms);
        let recovered_share = share(recovered_from, persistent, spec.transient_disk);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let steady = latencies(persistent + ms(spec.settle_ms), end);
        SteerSummary {
            reads: self.reads.len() as u64,
            errors: self.errors,
            pre_fault_p90_ms,
            fault_max_p90_ms,
            fault_max_p90_ratio: ratio(fault_max_p90_ms, pre_fault_p90_ms),
            pre_fault_share,
            share_1s_after_onset,
            recovered_share,
            share_drop: 1.0 - ratio(share_1s_after_onset, pre_fault_share),
            share_recovery: ratio(recovered_share, pre_fault_share),
            persistent_p50_ms: percentile_ms(&steady, 0.50),
            persistent_p90_ms: percentile_ms(&steady, 0.90),
            persistent_p99_ms: percentile_ms(&steady, 0.99),
            series,
        }
    }
}

/// The bars, steering against random.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SteerBars {
    /// Steering's p90 ≤ 1.5 × its pre-fault p90 in every 1 s window.
    pub p90_within_1_5x_of_pre_fault: bool,
    /// Random's p90 rises ≥ 3 × in some window.
    pub random_p90_rises_3x: bool,
    /// The slow disk's share falls ≥ 50 % within 1 s...
    pub slow_share_falls_half_within_1s: bool,
    /// ...and comes back to ≥ 80 % of what it was.
    pub slow_share_recovers: bool,
    /// With one persistently slow disk, p99 ≤ 0.5 × random's.
    pub persistent_p99_at_most_half_of_random: bool,
}

impl SteerBars {
    pub fn evaluate(steering: &SteerSummary, random: &SteerSummary) -> Self {
        SteerBars {
            p90_within_1_5x_of_pre_fault: steering.fault_max_p90_ratio <= 1.5,
            random_p90_rises_3x: random.fault_max_p90_ratio >= 3.0,
            slow_share_falls_half_within_1s: steering.share_drop >= 0.5,
            slow_share_recovers: steering.share_recovery >= 0.8,
            persistent_p99_at_most_half_of_random: steering.persistent_p99_ms <= 0.5 * random.persistent_p99_ms,
        }
    }

    pub fn all(&self) -> bool {
        self.p90_within_1_5x_of_pre_fault
            && self.random_p90_rises_3x
            && self.slow_share_falls_half_within_1s
            && self.slow_share_recovers
            && self.persistent_p99_at_most_half_of_random
    }
}

/// The twin's block layout: each block's copy on node `n` is on one of its
/// disks, at random (the metadata service spreads them likewise).
pub fn layout(spec: &SteerSpec, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5EED_1A70);
    (0..spec.blocks)
        .map(|_| (0..spec.nodes).map(|n| n * spec.disks_per_node + rng.u32(..spec.disks_per_node.max(1))).collect())
        .collect()
}

/// One simulated disk: the node's scheduler and congestion detector.
struct SimDisk {
    policy: Box<dyn Policy>,
    detector: CongestionDetector,
    busy: Option<(Unit, u64)>,
    /// Per queued request: (arrival µs, head time µs, profile head time µs).
    queued: HashMap<u64, (u64, u64, u64)>,
}

/// Runs the experiment in virtual time with replica choice `choice`: the
/// same classful scheduler and congestion detector as the node, the same
/// steering as the client, replies reaching the client as the head
/// finishes (no network delay).
pub fn simulate(spec: &SteerSpec, choice: ReplicaChoice, seed: u64) -> SteerSummary {
    let model = spec.model();
    let config = ClassfulConfig {
        segment_us: model.head_time_us(1 << 20),
        reposition_us: model.positioning_us,
        ..ClassfulConfig::default()
    };
    let mut disks: Vec<SimDisk> = (0..spec.disks())
        .map(|_| SimDisk {
            policy: PolicyKind::Classful.build(config),
            detector: CongestionDetector::new(CongestionConfig::default()),
            busy: None,
            queued: HashMap::new(),
        })
        .collect();
    let mut steering = Steering::new(SteeringConfig::default());
    for d in 0..spec.disks() {
        steering.set_model(d, model);
    }
    let copies = layout(spec, seed);
    let reads = arrivals(spec, seed);
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(31).wrapping_add(7));
    let mut rec = Recorder::default();
    let end_us = spec.duration_s * 1_000_000;
    let profile_us = model.head_time_us(spec.read_bytes);
    let mut next = 0usize;
    let mut id = 0u64;
    loop {
        let completion = disks.iter().enumerate().filter_map(|(d, s)| s.busy.map(|b| (b.1, d))).min();
        let arrival = reads.get(next).map(|a| a.at_us);
        let now = match (completion, arrival) {
            (Some((t, _)), Some(a)) => t.min(a),
            (Some((t, _)), None) => t,
            (None, Some(a)) => a,
            (None, None) => break,
        };
        if now > end_us {
            break;
        }
        // Completions first at equal times: the head is free before new work.
        if let Some((t, d)) = completion
            && t == now
        {
            let disk = &mut disks[d];
            let (unit, _) = disk.busy.take().expect("busy");
            if unit.last
                && let Some((arrived, cost, profile)) = disk.queued.remove(&unit.id)
            {
                disk.detector.observe(now, cost, profile);
                steering.on_reply(d as u32, disk.detector.state().congested, now);
                rec.read(arrived, now - arrived, d as u32);
            }
            start_next(disk, now);
            continue;
        }
        let a = reads[next];
        next += 1;
        let candidates = &copies[a.block as usize];
        let order = match choice {
            ReplicaChoice::Random => random_order(candidates.len(), &mut rng),
            ReplicaChoice::Steering => steering.order(candidates, spec.read_bytes, now, &mut rng),
        };
        let d = candidates[order[0]];
        let cost = profile_us * spec.slowdown_permille(d, now) / 1000;
        let disk = &mut disks[d as usize];
        disk.queued.insert(id, (now, cost, profile_us));
        // Ids are fresh, so the policy cannot refuse the request.
        let _ = disk.policy.enqueue(now, Request { id, class: Class::Foreground, cost_us: cost, planned: true });
        id += 1;
        if disk.busy.is_none() {
            start_next(disk, now);
        }
    }
    rec.summary(spec)
}

/// Asks an idle disk's policy for its next unit. Foreground work is never
/// throttled, so the policy serves or idles.
fn start_next(disk: &mut SimDisk, now: u64) {
    if let Decision::Serve(unit) = disk.policy.next(now) {
        disk.busy = Some((unit, now + unit.cost_us));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_seeded_and_offer_the_planned_load() {
        let spec = SteerSpec::quick();
        let a = arrivals(&spec, 5);
        assert_eq!(a, arrivals(&spec, 5));
        let offered_us = a.len() as f64 * spec.model().head_time_us(spec.read_bytes) as f64;
        let util = offered_us / (spec.duration_s as f64 * 1e6 * f64::from(spec.disks()));
        assert!((util - 0.3).abs() < 0.03, "{util}");
        assert!(a.iter().all(|r| r.offset + spec.read_bytes <= spec.block_bytes && r.block < spec.blocks));
    }

    #[test]
    fn the_slowdown_windows_hit_their_disks_only() {
        let spec = SteerSpec::quick();
        assert_eq!(spec.slowdown_permille(spec.transient_disk, 6_499_999), 1_000);
        assert_eq!(spec.slowdown_permille(spec.transient_disk, 6_500_000), 5_000);
        assert_eq!(spec.slowdown_permille(spec.transient_disk, 8_800_000), 1_000);
        assert_eq!(spec.slowdown_permille(spec.persistent_disk, 8_000_000), 1_000);
        assert_eq!(spec.slowdown_permille(spec.persistent_disk, 29_000_000), 5_000);
        assert_eq!(spec.slowdown_permille(0, 7_000_000), 1_000);
    }

    #[test]
    fn the_summary_measures_windows_and_shares() {
        let spec = SteerSpec::quick();
        let mut rec = Recorder::default();
        // Before the fault: 10 ms reads, one in four on the slow disk.
        for i in 0..400u64 {
            let disk = if i % 4 == 0 { spec.transient_disk } else { 0 };
            rec.read(1_000_000 + i * 12_000, 10_000, disk);
        }
        // During the fault's first second (from 6.5 s): 30 ms, none on the
        // slow disk in the half second ending 1 s after onset.
        for i in 0..100u64 {
            rec.read(6_500_000 + i * 10_000, 30_000, 0);
        }
        let s = rec.summary(&spec);
        assert_eq!(s.pre_fault_p90_ms, 10.0);
        assert_eq!(s.fault_max_p90_ms, 30.0);
        assert_eq!(s.fault_max_p90_ratio, 3.0);
        assert_eq!(s.pre_fault_share, 0.25);
        assert_eq!(s.share_1s_after_onset, 0.0);
        assert_eq!(s.share_drop, 1.0);
        assert_eq!(s.series.len(), 30);
        assert_eq!((s.series[6].reads, s.series[7].reads), (50, 50));
    }
}
