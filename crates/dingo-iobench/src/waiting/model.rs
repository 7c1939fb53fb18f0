//! The waiting experiment's model (Practical scrubbing Fig. 15 / Table III analog):
//! a bursty foreground with heavy-tailed idle gaps on one disk, and
//! scrubbing through the Waiting gate tuned for a mean-slowdown goal,
//! against two baselines: the paper's (CFQ-like: 64 KB scrub requests after
//! 10 ms of idle time, Table III) and a stronger one of our own, a
//! fixed-rate scrubber on the classful scheduler without the gate.
//! What the real run ([`super`]) and its virtual-time twin
//! ([`simulate`]) share: the load ([`WaitSpec`], [`foreground`]), the
//! per-disk jobs ([`Background`]), and the statistics ([`DiskRun`],
//! [`mean_slowdown_ms`], [`interpolate_at`]).

use crate::twin::{Load, drive};
use dingo_iosched::waiting::{GateParams, WaitingConfig};
use dingo_iosched::{Class, ClassfulConfig, Policy, PolicyKind, Request};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// Foreground read sizes are multiples of this (the node's checksum segment).
pub const FG_STEP_BYTES: u64 = 64 << 10;

/// The experiment's load and parameters, per disk.
#[derive(Clone, Debug, Serialize)]
pub struct WaitSpec {
    pub duration_s: u64,
    /// Figures count foreground arrivals and scrub completions from here
    /// to `duration_s − tail_s`; the gate tunes in the meantime.
    pub warmup_s: u64,
    pub tail_s: u64,
    /// Foreground: bursts of 1..=`burst_max` reads of 64 KiB-256 KiB
    /// (uniform in 64 KiB steps: the node reads whole 64 KiB checksum
    /// segments), 1-5 ms apart, separated by idle gaps from a 3-phase
    /// hyper-exponential (study §5.7 E4, scaled to a one-minute run).
    pub burst_max: u32,
    pub fg_min_bytes: u64,
    pub fg_max_bytes: u64,
    pub gap_means_us: [u64; 3],
    pub gap_weights_ppm: [u64; 3],
    /// Scrub reads whole chunks of this size.
    pub scrub_read_bytes: u64,
    /// Reads the Waiting scrubber keeps outstanding (it always has work).
    pub scrub_outstanding: u32,
    pub goals_us: Vec<u64>,
    /// The fixed-rate scrubber's rates, as shares of the disk's
    /// back-to-back chunk-read rate.
    pub fixed_rate_shares_ppm: Vec<u64>,
    /// The gate's tuner: history replayed and how often.
    pub window_us: u64,
    pub retune_us: u64,
    /// Planner-like dispatch for the free-bytes check: every `group_us`
    /// a group of `group_chunks` chunks, read by two declarations in
    /// opposite orders, pinned until the next group plus `pin_grace_us`
    /// (the planner service's default grace, PLANNER_SERVICE.md); groups
    /// are released while their pins expire within the run.
    pub group_us: u64,
    pub group_chunks: u32,
    pub pin_grace_us: u64,
    pub positioning_us: u64,
    pub transfer_bytes_per_sec: u64,
}

impl WaitSpec {
    pub fn full() -> Self {
        WaitSpec {
            duration_s: 60,
            warmup_s: 15,
            tail_s: 2,
            burst_max: 6,
            fg_min_bytes: FG_STEP_BYTES,
            fg_max_bytes: 256 << 10,
            gap_means_us: [20_000, 200_000, 1_500_000],
            gap_weights_ppm: [500_000, 350_000, 150_000],
            scrub_read_bytes: 4 << 20,
            scrub_outstanding: 2,
            goals_us: vec![1_000, 2_000, 4_000],
            fixed_rate_shares_ppm: vec![25_000, 50_000, 100_000, 200_000, 400_000],
            window_us: 30_000_000,
            retune_us: 5_000_000,
            group_us: 2_000_000,
            group_chunks: 2,
            pin_grace_us: 5_000_000,
            // The demo's HDD, as in fg-tail.
            positioning_us: 8_000,
            transfer_bytes_per_sec: 60_000_000,
        }
    }

    /// Half as long, the same shape.
    pub fn quick() -> Self {
        WaitSpec { duration_s: 40, warmup_s: 12, window_us: 20_000_000, retune_us: 4_000_000, ..Self::full() }
    }

    /// Half an hour of the same load with the node's tuner timing (600 s of
    /// trace, retuned every 300 s): the figures start once the window is
    /// full and the gate has tuned twice.
    pub fn long() -> Self {
        WaitSpec { duration_s: 1800, warmup_s: 600, window_us: 600_000_000, retune_us: 300_000_000, ..Self::full() }
    }

    pub fn cost_us(&self, bytes: u64) -> u64 {
        self.waiting(0).cost_us(bytes)
    }

    /// The gate's configuration for `goal_us`.
    pub fn waiting(&self, goal_us: u64) -> WaitingConfig {
        WaitingConfig {
            goal_us,
            window_us: self.window_us,
            retune_us: self.retune_us,
            positioning_us: self.positioning_us,
            transfer_bytes_per_sec: self.transfer_bytes_per_sec,
            ..WaitingConfig::default()
        }
    }

    /// The node's scheduler configuration, with the gate for `goal_us`.
    pub fn classful(&self, goal_us: Option<u64>) -> ClassfulConfig {
        ClassfulConfig {
            segment_us: self.cost_us(1 << 20),
            reposition_us: self.positioning_us,
            waiting: goal_us.map(|g| self.waiting(g)),
            ..ClassfulConfig::default()
        }
    }

    /// The node's scheduler configuration for `job`'s disk: the CFQ-like
    /// baseline gets the gate with CFQ's fixed parameters.
    pub fn classful_for(&self, job: Background) -> ClassfulConfig {
        match job {
            Background::CfqLike => ClassfulConfig {
                waiting: Some(self.waiting(0).fixed(CFQ_REQUEST_BYTES, CFQ_THRESHOLD_US)),
                ..self.classful(None)
            },
            _ => self.classful(job.goal_us()),
        }
    }

    /// Interval between a fixed-rate scrubber's chunk reads at `share_ppm`.
    pub fn fixed_rate_interval_us(&self, share_ppm: u64) -> u64 {
        self.cost_us(self.scrub_read_bytes) * 1_000_000 / share_ppm.max(1)
    }

    /// The planner's budget for one group's quantum: the head time of one
    /// disk read of each of its chunks.
    pub fn group_budget_us(&self) -> u64 {
        u64::from(self.group_chunks) * self.cost_us(self.scrub_read_bytes)
    }

    /// Whether group `g` is released: its pins expire within the run.
    pub fn group_released(&self, g: u64) -> bool {
        (g + 1) * self.group_us + self.pin_grace_us <= self.duration_s * 1_000_000
    }

    /// Window the figures cover, µs.
    pub fn measured_us(&self) -> (u64, u64) {
        (self.warmup_s * 1_000_000, (self.duration_s - self.tail_s) * 1_000_000)
    }
}

/// One foreground read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FgRead {
    pub at_us: u64,
    pub bytes: u64,
}

/// The seeded foreground of one disk: the same seed gives the same reads to
/// every configuration, so slowdown is a paired difference.
pub fn foreground(spec: &WaitSpec, seed: u64) -> Vec<FgRead> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let end = spec.duration_s * 1_000_000;
    let mut out = Vec::new();
    let mut t = 0u64;
    loop {
        // Idle gap: pick a phase by weight, then an exponential length.
        let pick = rng.u64(..1_000_000);
        let mut acc = 0;
        let mut mean = spec.gap_means_us[2];
        for (m, w) in spec.gap_means_us.iter().zip(spec.gap_weights_ppm) {
            acc += w;
            if pick < acc {
                mean = *m;
                break;
            }
        }
        t += (-(1.0 - rng.f64()).ln() * mean as f64) as u64;
        for _ in 0..rng.u32(1..=spec.burst_max) {
            if t >= end {
                return out;
            }
            let steps = rng.u64(spec.fg_min_bytes / FG_STEP_BYTES..=spec.fg_max_bytes / FG_STEP_BYTES);
            out.push(FgRead { at_us: t, bytes: steps * FG_STEP_BYTES });
            t += rng.u64(1_000..=5_000);
        }
    }
}

/// What runs on one disk besides its foreground.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Background {
    /// Foreground only: the reference latencies.
    Reference,
    /// A scrubber that always has work, through the gate.
    Waiting { goal_us: u64 },
    /// Chunk reads issued at a fixed interval, classful without the gate.
    FixedRate { share_ppm: u64 },
    /// Planner-like pinned groups read by two declarations, through the
    /// gate, with the planner's per-quantum budget for their disk reads.
    Groups { goal_us: u64 },
    /// Practical scrubbing's own baseline (Table III's CFQ rows, W:331-340,
    /// W:374-405): a scrubber that always has work, in 64 KB requests
    /// fired once the disk has been free of foreground for a fixed 10 ms,
    /// never tuned. The gate with those fixed parameters stands in for
    /// CFQ's idle class.
    CfqLike,
}

/// The CFQ baseline's request size and idle threshold (Table III, W:374-405).
pub const CFQ_REQUEST_BYTES: u64 = 64 << 10;
pub const CFQ_THRESHOLD_US: u64 = 10_000;

impl Background {
    pub fn goal_us(self) -> Option<u64> {
        match self {
            Background::Waiting { goal_us } | Background::Groups { goal_us } => Some(goal_us),
            Background::Reference | Background::FixedRate { .. } | Background::CfqLike => None,
        }
    }
}

/// What one disk measured.
#[derive(Clone, Debug, Default)]
pub struct DiskRun {
    /// Latency of each foreground read (`None`: did not complete), µs.
    pub fg_latency_us: Vec<Option<u64>>,
    /// (completion µs, bytes) of every maintenance read.
    pub scrub_done: Vec<(u64, u64)>,
    /// Groups: bytes the pins made free by plan, and bytes read from memory.
    pub planned_free_bytes: u64,
    pub achieved_free_bytes: u64,
    /// A Waiting disk's gate `(s, t)` at the end of the run (the real run
    /// reads it from the node's stats).
    pub gate: Option<GateParams>,
}

impl DiskRun {
    /// Scrub MB/s over the measured window.
    pub fn scrub_mb_s(&self, spec: &WaitSpec) -> f64 {
        let (from, to) = spec.measured_us();
        let bytes: u64 = self.scrub_done.iter().filter(|d| (from..to).contains(&d.0)).map(|d| d.1).sum();
        bytes as f64 / ((to - from) as f64 / 1e6) / 1e6
    }
}

/// Mean over the foreground reads arriving in the measured window of the
/// latency with maintenance minus the reference latency, ms.
pub fn mean_slowdown_ms(spec: &WaitSpec, fg: &[FgRead], with: &DiskRun, reference: &DiskRun) -> f64 {
    let (from, to) = spec.measured_us();
    let (mut sum, mut n) = (0i128, 0u64);
    for (i, r) in fg.iter().enumerate() {
        if !(from..to).contains(&r.at_us) {
            continue;
        }
        if let (Some(Some(a)), Some(Some(b))) = (with.fg_latency_us.get(i), reference.fg_latency_us.get(i)) {
            sum += i128::from(*a) - i128::from(*b);
            n += 1;
        }
    }
    if n == 0 { 0.0 } else { sum as f64 / n as f64 / 1000.0 }
}

/// The most `y` a curve of measured `(x, y)` points reaches at `x`: the
/// upper envelope (the best `y` of any point at or below each `x`), from the
/// origin (no scrubbing, no slowdown), linearly interpolated; beyond the
/// last point, the best `y` (and `true`: extrapolated). Measured mean
/// slowdown is noisy, so the envelope credits the baseline with its best.
pub fn interpolate_at(points: &[(f64, f64)], x: f64) -> (f64, bool) {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best = 0.0f64;
    let mut envelope = Vec::new();
    for (px, py) in sorted {
        if py > best {
            best = py;
            envelope.push((px, py));
        }
    }
    let mut prev = (0.0, 0.0);
    for &(px, py) in &envelope {
        if x <= px {
            let f = if px > prev.0 { (x - prev.0) / (px - prev.0) } else { 1.0 };
            return (prev.1 + f * (py - prev.1), false);
        }
        prev = (px, py);
    }
    (prev.1, !envelope.is_empty())
}

/// Practical scrubbing's comparison with its CFQ baseline (Table III):
/// the mechanism's best scrub MB/s among its `(slowdown, MB/s)` points at
/// a slowdown no larger than the baseline's, over the baseline's MB/s. So
/// the mechanism is credited only with what it reached while slowing
/// foreground no more than the baseline did. `None` if no point qualifies.
pub fn ratio_at_baseline_slowdown(mechanism: &[(f64, f64)], baseline: (f64, f64)) -> Option<f64> {
    let best = mechanism.iter().filter(|p| p.0 <= baseline.0).map(|p| p.1).reduce(f64::max)?;
    Some(if baseline.1 > 0.0 { best / baseline.1 } else { f64::INFINITY })
}

/// Who a maintenance request in the twin belongs to.
#[derive(Clone, Copy)]
enum Owner {
    Fg(usize),
    Scrub,
    /// A group read by reader 0 or 1 of `chunk`.
    Group {
        reader: usize,
        chunk: u64,
    },
}

/// The pinned-cache state of one group chunk in the twin.
#[derive(Clone, Copy, Default)]
struct PinState {
    until_us: u64,
    /// When a disk read that fills the pin completes (None: not filling).
    filled_at_us: Option<u64>,
}

/// One disk's load in the twin: its foreground and its job.
struct DiskLoad<'a> {
    spec: &'a WaitSpec,
    fg: &'a [FgRead],
    job: Background,
    run: DiskRun,
    owners: HashMap<u64, Owner>,
    next_id: u64,
    next_fg: usize,
    scrub_outstanding: u32,
    fixed_issued: u64,
    /// Groups: per reader, the chunks still to read and whether one is in
    /// flight (a read waiting on another's fill counts as in flight).
    readers: [VecDeque<u64>; 2],
    reading: [Option<(u64, Option<u64>)>; 2],
    pins: HashMap<u64, PinState>,
    groups_released: u64,
}

impl DiskLoad<'_> {
    fn enqueue(&mut self, policy: &mut dyn Policy, now: u64, class: Class, bytes: u64, owner: Owner) {
        let id = self.next_id;
        self.next_id += 1;
        self.owners.insert(id, owner);
        // Ids are fresh, so the policy cannot refuse.
        let _ = policy.enqueue(now, Request { id, class, cost_us: self.spec.cost_us(bytes), planned: true });
    }

    /// Releases the groups due by `now` and lets each reader start its
    /// next chunk: from memory if it is pinned and filled (or filling),
    /// else from the disk.
    fn admit_groups(&mut self, policy: &mut dyn Policy, now: u64) {
        let (spec, chunk) = (self.spec, self.spec.scrub_read_bytes);
        while self.groups_released * spec.group_us <= now && spec.group_released(self.groups_released) {
            let g = self.groups_released;
            let until_us = (g + 1) * spec.group_us + spec.pin_grace_us;
            let ids: Vec<u64> = (0..u64::from(spec.group_chunks)).map(|c| g * 1000 + c).collect();
            for &c in &ids {
                self.pins.insert(c, PinState { until_us, filled_at_us: None });
            }
            self.readers[0].extend(ids.iter().copied());
            self.readers[1].extend(ids.iter().rev().copied());
            // Free by plan: every chunk's second read.
            self.run.planned_free_bytes += u64::from(spec.group_chunks) * chunk;
            // The planner's budget for the quantum: one disk read of each
            // chunk (the second is served from the pin), due by the next
            // group, as the planner service sends it (`Node.QuantumBudget`).
            policy.set_planned(now, spec.group_budget_us(), (g + 1) * spec.group_us);
            self.groups_released += 1;
        }
        for r in 0..2 {
            // A read waiting for another's fill finishes with it.
            if let Some((_, Some(done))) = self.reading[r]
                && done <= now
            {
                self.reading[r] = None;
            }
            if self.reading[r].is_some() {
                continue;
            }
            let Some(c) = self.readers[r].pop_front() else { continue };
            let pin = self.pins.get(&c).copied().unwrap_or_default();
            match pin.filled_at_us {
                // Pinned and filled or filling: served from memory
                // (the node makes a concurrent reader wait for the fill).
                Some(done) if now <= pin.until_us => {
                    self.run.achieved_free_bytes += chunk;
                    self.reading[r] = Some((c, Some(done.max(now))));
                }
                _ => {
                    let class = Class::BestEffort { channel: 2 + r as u64 };
                    self.enqueue(policy, now, class, chunk, Owner::Group { reader: r, chunk: c });
                    self.reading[r] = Some((c, None));
                    if now <= pin.until_us
                        && let Some(p) = self.pins.get_mut(&c)
                    {
                        // Filling: done when the read completes.
                        p.filled_at_us = Some(u64::MAX);
                    }
                }
            }
        }
    }
}

impl Load for DiskLoad<'_> {
    fn admit(&mut self, policy: &mut dyn Policy, now: u64) {
        let chunk = self.spec.scrub_read_bytes;
        while self.next_fg < self.fg.len() && self.fg[self.next_fg].at_us <= now {
            let (bytes, owner) = (self.fg[self.next_fg].bytes, Owner::Fg(self.next_fg));
            self.enqueue(policy, now, Class::Foreground, bytes, owner);
            self.next_fg += 1;
        }
        match self.job {
            Background::Reference => {}
            Background::Waiting { .. } | Background::CfqLike => {
                while self.scrub_outstanding < self.spec.scrub_outstanding {
                    self.enqueue(policy, now, Class::BestEffort { channel: 1 }, chunk, Owner::Scrub);
                    self.scrub_outstanding += 1;
                }
            }
            Background::FixedRate { share_ppm } => {
                let interval = self.spec.fixed_rate_interval_us(share_ppm);
                while self.fixed_issued * interval <= now {
                    self.enqueue(policy, now, Class::BestEffort { channel: 1 }, chunk, Owner::Scrub);
                    self.fixed_issued += 1;
                }
            }
            Background::Groups { .. } => self.admit_groups(policy, now),
        }
    }

    fn complete(&mut self, id: u64, now: u64) {
        let chunk = self.spec.scrub_read_bytes;
        match self.owners.remove(&id) {
            Some(Owner::Fg(i)) => self.run.fg_latency_us[i] = Some(now - self.fg[i].at_us),
            Some(Owner::Scrub) => {
                self.scrub_outstanding = self.scrub_outstanding.saturating_sub(1);
                self.run.scrub_done.push((now, chunk));
            }
            Some(Owner::Group { reader, chunk: c }) => {
                self.run.scrub_done.push((now, chunk));
                self.reading[reader] = None;
                if let Some(p) = self.pins.get_mut(&c)
                    && p.filled_at_us == Some(u64::MAX)
                {
                    p.filled_at_us = Some(now);
                    // Readers waiting on this fill finish now.
                    for w in self.reading.iter_mut() {
                        if let Some((wc, Some(done))) = w
                            && *wc == c
                            && *done == u64::MAX
                        {
                            *done = now;
                        }
                    }
                }
            }
            None => {}
        }
    }

    fn next_event_us(&self, now: u64) -> Option<u64> {
        let fg = self.fg.get(self.next_fg).map(|r| r.at_us);
        let job = match self.job {
            Background::FixedRate { share_ppm } => {
                Some(self.fixed_issued * self.spec.fixed_rate_interval_us(share_ppm))
            }
            Background::Groups { .. } => {
                let release =
                    self.spec.group_released(self.groups_released).then(|| self.groups_released * self.spec.group_us);
                let fills = self.reading.iter().flatten().filter_map(|(_, done)| *done).filter(|&d| d != u64::MAX);
                release.into_iter().chain(fills.map(|d| d.max(now))).min()
            }
            Background::Reference | Background::Waiting { .. } | Background::CfqLike => None,
        };
        fg.into_iter().chain(job).min()
    }
}

/// Runs one disk with `job` in virtual time, driving the node's policy.
pub fn simulate(spec: &WaitSpec, fg: &[FgRead], job: Background) -> DiskRun {
    simulate_on(spec, fg, job, PolicyKind::Classful)
}

/// [`simulate`] on the scheduler `kind` (FIFO: the node before issue 15).
pub fn simulate_on(spec: &WaitSpec, fg: &[FgRead], job: Background, kind: PolicyKind) -> DiskRun {
    let mut policy = kind.build(spec.classful_for(job));
    let end_us = spec.duration_s * 1_000_000;
    let mut load = DiskLoad {
        spec,
        fg,
        job,
        run: DiskRun { fg_latency_us: vec![None; fg.len()], ..DiskRun::default() },
        owners: HashMap::new(),
        next_id: 0,
        next_fg: 0,
        scrub_outstanding: 0,
        fixed_issued: 0,
        readers: [VecDeque::new(), VecDeque::new()],
        reading: [None, None],
        pins: HashMap::new(),
        groups_released: 0,
    };
    drive(policy.as_mut(), &mut load, end_us);
    load.run.gate = policy.gate(end_us).map(|g| g.params);
    load.run
}

/// The twin's figures for one seed: per goal, (mean slowdown ms, scrub
/// MB/s, achieved/planned free bytes); per fixed rate, (slowdown, MB/s);
/// the CFQ-like baseline's (slowdown, MB/s).
#[derive(Clone, Debug, Serialize)]
pub struct TwinResult {
    pub waiting: Vec<(u64, f64, f64, f64)>,
    pub fixed_rate: Vec<(u64, f64, f64)>,
    pub cfq_like: (f64, f64),
}

/// The whole experiment on one seed in virtual time.
pub fn twin(spec: &WaitSpec, seed: u64) -> TwinResult {
    let fg = foreground(spec, seed);
    let reference = simulate(spec, &fg, Background::Reference);
    let waiting = spec
        .goals_us
        .iter()
        .map(|&goal_us| {
            let w = simulate(spec, &fg, Background::Waiting { goal_us });
            let g = simulate(spec, &fg, Background::Groups { goal_us });
            let free = g.achieved_free_bytes as f64 / g.planned_free_bytes.max(1) as f64;
            (goal_us, mean_slowdown_ms(spec, &fg, &w, &reference), w.scrub_mb_s(spec), free)
        })
        .collect();
    let fixed_rate = spec
        .fixed_rate_shares_ppm
        .iter()
        .map(|&share_ppm| {
            let f = simulate(spec, &fg, Background::FixedRate { share_ppm });
            (share_ppm, mean_slowdown_ms(spec, &fg, &f, &reference), f.scrub_mb_s(spec))
        })
        .collect();
    let c = simulate(spec, &fg, Background::CfqLike);
    let cfq_like = (mean_slowdown_ms(spec, &fg, &c, &reference), c.scrub_mb_s(spec));
    TwinResult { waiting, fixed_rate, cfq_like }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_foreground_is_seeded_bursty_and_in_the_studys_utilisation_range() {
        let spec = WaitSpec::full();
        let a = foreground(&spec, 7);
        assert_eq!(a, foreground(&spec, 7));
        assert_ne!(a, foreground(&spec, 8));
        for seed in 1..=3 {
            let busy_us: u64 = foreground(&spec, seed).iter().map(|r| spec.cost_us(r.bytes)).sum();
            let util = busy_us as f64 / (spec.duration_s * 1_000_000) as f64;
            assert!((0.10..=0.30).contains(&util), "{util}");
        }
        assert!(a.windows(2).all(|w| w[0].at_us <= w[1].at_us));
    }

    #[test]
    fn the_paper_style_ratio_credits_only_points_at_or_below_the_baselines_slowdown() {
        let mech = [(1.0, 7.0), (1.5, 12.0), (3.5, 18.0), (5.0, 30.0)];
        assert_eq!(ratio_at_baseline_slowdown(&mech, (4.0, 6.0)), Some(3.0));
        assert_eq!(ratio_at_baseline_slowdown(&mech, (1.2, 7.0)), Some(1.0));
        assert_eq!(ratio_at_baseline_slowdown(&mech, (0.5, 6.0)), None);
    }

    #[test]
    fn the_cfq_like_baseline_fires_64_kb_requests_after_10_ms_idle_and_never_retunes() {
        let spec = WaitSpec::quick();
        let gate = spec.classful_for(Background::CfqLike).waiting.unwrap();
        assert_eq!((gate.initial_size_bytes, gate.initial_threshold_us, gate.retune_us), (65_536, 10_000, u64::MAX));
        assert_eq!(spec.classful_for(Background::FixedRate { share_ppm: 1 }).waiting, None);
        let fg = foreground(&spec, 1);
        let c = simulate(&spec, &fg, Background::CfqLike);
        // 64 KB per 9.1 ms request at most: under the 7.2 MB/s a free disk gives.
        let mb_s = c.scrub_mb_s(&spec);
        assert!(mb_s > 1.0 && mb_s < 7.3, "{mb_s}");
    }

    #[test]
    fn interpolation_starts_at_the_origin_and_flags_extrapolation() {
        let pts = [(3.0, 20.0), (1.0, 10.0), (2.5, 5.0)];
        assert_eq!(interpolate_at(&pts, 0.5), (5.0, false));
        // (2.5, 5) lies under the envelope and is ignored.
        assert_eq!(interpolate_at(&pts, 2.0), (15.0, false));
        assert_eq!(interpolate_at(&pts, 4.0), (20.0, true));
    }

    #[test]
    fn the_reference_has_no_scrub_and_fixed_rate_scrubs_at_its_rate() {
        let spec = WaitSpec::quick();
        let fg = foreground(&spec, 1);
        let r = simulate(&spec, &fg, Background::Reference);
        assert!(r.scrub_done.is_empty() && r.fg_latency_us.iter().all(Option::is_some));
        assert_eq!(mean_slowdown_ms(&spec, &fg, &r, &r), 0.0);
        let f = simulate(&spec, &fg, Background::FixedRate { share_ppm: 100_000 });
        // 10 % of the 78 ms chunk read's 53.8 MB/s.
        let want = 0.1 * spec.scrub_read_bytes as f64 / (spec.cost_us(spec.scrub_read_bytes) as f64 / 1e6) / 1e6;
        assert!((f.scrub_mb_s(&spec) - want).abs() < 0.1 * want, "{} vs {want}", f.scrub_mb_s(&spec));
    }
}
