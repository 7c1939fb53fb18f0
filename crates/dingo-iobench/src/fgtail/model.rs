//! The fg-tail experiment's model (PAIO Fig. 5-9 analog): open-loop
//! foreground bursts over steady, paced maintenance. What the real run and
//! its virtual-time twin share: the load ([`FgTailSpec`],
//! [`Phase`], [`foreground_arrivals_us`]), the statistics ([`Recorder`],
//! [`RunSummary`]), and the twin itself ([`simulate`]), which drives the
//! same policy code with a simulated clock.

use crate::stats::percentile_ms;
use crate::twin::{Load, drive};
use dingo_iosched::{Class, ClassfulConfig, Policy, PolicyKind, Request};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One experiment's load, per disk.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FgTailSpec {
    pub duration_s: u64,
    /// The run opens with a valley this long (PAIO: 300 s, P:385).
    pub first_valley_s: u64,
    /// Then peaks and valleys alternate (PAIO: 100 s / 10 s).
    pub peak_s: u64,
    pub valley_s: u64,
    /// Foreground head-time utilisation in valleys and peaks, ppm
    /// (PAIO: 5 vs 20 kops/s).
    pub valley_util_ppm: u64,
    pub peak_util_ppm: u64,
    /// Foreground read size, bytes.
    pub fg_read_bytes: u64,
    /// Maintenance chunk read size, bytes.
    pub maintenance_read_bytes: u64,
    /// Maintenance declarations per disk, each its own channel.
    pub maintenance_streams: u32,
    /// Reads each declaration keeps outstanding at most.
    pub maintenance_outstanding: u32,
    /// Head-time share the maintenance needs to meet its deadline, ppm.
    pub maintenance_share_ppm: u64,
    /// Maintenance is issued a quantum at a time, like the planner
    /// service's dispatch groups; µs.
    pub quantum_us: u64,
    /// The maintenance work is paced to end by this fraction (ppm) of the
    /// run; the deadline is `deadline_ppm` of it.
    pub pace_ppm: u64,
    /// The maintenance deadline, as a fraction (ppm) of the run: its work
    /// is sized to finish by then at `maintenance_share_ppm`.
    pub deadline_ppm: u64,
    /// Disk model: positioning µs and transfer bytes/s.
    pub positioning_us: u64,
    pub transfer_bytes_per_sec: u64,
}

impl FgTailSpec {
    /// The full run: the design study's E1 load scaled from PAIO (180 s).
    pub fn full() -> Self {
        FgTailSpec {
            duration_s: 180,
            first_valley_s: 30,
            peak_s: 10,
            valley_s: 3,
            valley_util_ppm: 150_000,
            peak_util_ppm: 550_000,
            fg_read_bytes: 256 << 10,
            maintenance_read_bytes: 4 << 20,
            maintenance_streams: 2,
            maintenance_outstanding: 2,
            maintenance_share_ppm: 300_000,
            quantum_us: 1_000_000,
            pace_ppm: 900_000,
            deadline_ppm: 950_000,
            // The demo's HDD (docs/DEMO.md): slow enough that a local
            // cluster moves well under 300 MB/s, so head time, not CPU,
            // decides latency.
            positioning_us: 8_000,
            transfer_bytes_per_sec: 60_000_000,
        }
    }

    /// A one-minute run with the same shape.
    pub fn quick() -> Self {
        FgTailSpec { duration_s: 60, first_valley_s: 10, ..Self::full() }
    }

    pub fn cost_us(&self, bytes: u64) -> u64 {
        let transfer = (u128::from(bytes) * 1_000_000).div_ceil(u128::from(self.transfer_bytes_per_sec.max(1)));
        self.positioning_us + u64::try_from(transfer).unwrap_or(u64::MAX)
    }

    pub fn phase_at(&self, t_us: u64) -> Phase {
        let t_s = t_us / 1_000_000;
        if t_s < self.first_valley_s {
            return Phase::Valley;
        }
        let cycle = (self.peak_s + self.valley_s).max(1);
        if (t_s - self.first_valley_s) % cycle < self.peak_s { Phase::Peak } else { Phase::Valley }
    }

    /// Maintenance reads each declaration must finish by the deadline.
    pub fn maintenance_reads_per_stream(&self) -> u64 {
        let work_us = u128::from(self.duration_s) * 1_000_000 * u128::from(self.pace_ppm) / 1_000_000
            * u128::from(self.maintenance_share_ppm)
            / 1_000_000;
        let per_read = u128::from(self.cost_us(self.maintenance_read_bytes)) * u128::from(self.maintenance_streams);
        u64::try_from(work_us / per_read.max(1)).unwrap_or(u64::MAX)
    }

    /// When declaration read `i` is due to be issued: evenly paced so the
    /// work ends at `pace_ppm` of the run, released at the start of its
    /// quantum.
    pub fn maintenance_issue_us(&self, i: u64) -> u64 {
        let horizon_us = self.duration_s * self.pace_ppm;
        let n = self.maintenance_reads_per_stream().max(1);
        let paced = u64::try_from(u128::from(i) * u128::from(horizon_us) / u128::from(n)).unwrap_or(u64::MAX);
        paced - paced % self.quantum_us.max(1)
    }

    pub fn deadline_us(&self) -> u64 {
        self.duration_s * self.deadline_ppm
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Valley,
    Peak,
}

/// Poisson foreground arrivals on one disk (µs from the start), with the
/// rate of the phase each falls in. Seeded: the same seed gives the same
/// load to both policies.
pub fn foreground_arrivals_us(spec: &FgTailSpec, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let cost = spec.cost_us(spec.fg_read_bytes) as f64;
    let end = spec.duration_s * 1_000_000;
    let mut out = Vec::new();
    let mut t = 0.0f64;
    loop {
        let util = match spec.phase_at(t as u64) {
            Phase::Peak => spec.peak_util_ppm,
            Phase::Valley => spec.valley_util_ppm,
        } as f64
            / 1e6;
        let mean_gap_us = cost / util.max(1e-6);
        // Exponential gap; 1 - u is in (0, 1], so the log is finite.
        t += -(1.0 - rng.f64()).ln() * mean_gap_us;
        if t >= end as f64 {
            return out;
        }
        out.push(t as u64);
    }
}

/// Statistics of one second of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SecondStats {
    pub second: u64,
    pub phase: Option<Phase>,
    pub fg_reads: u64,
    pub fg_p99_ms: f64,
    pub maintenance_bytes: u64,
}

/// What one run of one policy measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunSummary {
    pub fg_reads: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// p99 of the foreground reads that arrived during peaks.
    pub peak_p99_ms: f64,
    /// Mean absolute deviation of the per-second p99 (PAIO's variability).
    pub p99_mad_ms: f64,
    pub maintenance_bytes: u64,
    /// Maintenance declarations that had not read all their bytes by the
    /// deadline.
    pub deadline_misses: u64,
    pub fg_errors: u64,
    pub series: Vec<SecondStats>,
}

/// Collects completions (times in µs from the run's start) into a summary.
#[derive(Debug, Default)]
pub struct Recorder {
    fg: Vec<(u64, u64, Phase)>,
    maintenance: Vec<(u64, u64)>,
    fg_errors: u64,
}

impl Recorder {
    pub fn foreground(&mut self, arrival_us: u64, latency_us: u64, phase: Phase) {
        self.fg.push((arrival_us, latency_us, phase));
    }

    pub fn foreground_error(&mut self) {
        self.fg_errors += 1;
    }

    pub fn maintenance(&mut self, done_us: u64, bytes: u64) {
        self.maintenance.push((done_us, bytes));
    }

    /// `reads_done_by_deadline[k]` counts declaration `k`'s reads finished
    /// by the deadline.
    pub fn summary(&self, spec: &FgTailSpec, reads_done_by_deadline: &[u64]) -> RunSummary {
        let all: Vec<u64> = self.fg.iter().map(|f| f.1).collect();
        let peak: Vec<u64> = self.fg.iter().filter(|f| f.2 == Phase::Peak).map(|f| f.1).collect();
        let mut seconds: BTreeMap<u64, (Vec<u64>, u64)> = BTreeMap::new();
        for &(at, lat, _) in &self.fg {
            seconds.entry(at / 1_000_000).or_default().0.push(lat);
        }
        for &(at, bytes) in &self.maintenance {
            seconds.entry(at / 1_000_000).or_default().1 += bytes;
        }
        let series: Vec<SecondStats> = seconds
            .into_iter()
            .map(|(second, (lat, bytes))| SecondStats {
                second,
                phase: Some(spec.phase_at(second * 1_000_000)),
                fg_reads: lat.len() as u64,
                fg_p99_ms: percentile_ms(&lat, 0.99),
                maintenance_bytes: bytes,
            })
            .collect();
        let p99s: Vec<f64> = series.iter().filter(|s| s.fg_reads > 0).map(|s| s.fg_p99_ms).collect();
        let mean = p99s.iter().sum::<f64>() / p99s.len().max(1) as f64;
        let mad = p99s.iter().map(|p| (p - mean).abs()).sum::<f64>() / p99s.len().max(1) as f64;
        let needed = spec.maintenance_reads_per_stream();
        RunSummary {
            fg_reads: all.len() as u64,
            p50_ms: percentile_ms(&all, 0.5),
            p99_ms: percentile_ms(&all, 0.99),
            peak_p99_ms: percentile_ms(&peak, 0.99),
            p99_mad_ms: mad,
            maintenance_bytes: self.maintenance.iter().map(|m| m.1).sum(),
            deadline_misses: reads_done_by_deadline.iter().filter(|&&d| d < needed).count() as u64,
            fg_errors: self.fg_errors,
            series,
        }
    }
}

/// What a request in the twin is.
#[derive(Clone, Copy)]
enum Job {
    Foreground { arrival_us: u64 },
    Maintenance { stream: usize },
}

/// Runs the experiment on `disks` independent simulated disks with `kind`,
/// driving the same policy code as the node with a simulated clock.
pub fn simulate(spec: &FgTailSpec, kind: PolicyKind, config: ClassfulConfig, disks: u32, seed: u64) -> RunSummary {
    let mut rec = Recorder::default();
    let mut done_by_deadline = Vec::new();
    for disk in 0..disks {
        let arrivals = foreground_arrivals_us(spec, seed.wrapping_add(u64::from(disk)));
        done_by_deadline.extend(simulate_disk(spec, kind, config, &arrivals, &mut rec));
    }
    rec.summary(spec, &done_by_deadline)
}

/// One simulated disk's load: its foreground arrivals and the paced
/// maintenance declarations.
struct DiskLoad<'a> {
    spec: &'a FgTailSpec,
    arrivals: &'a [u64],
    rec: &'a mut Recorder,
    jobs: HashMap<u64, Job>,
    next_id: u64,
    next_fg: usize,
    per_stream: u64,
    issued: Vec<u64>,
    outstanding: Vec<u32>,
    done_by_deadline: Vec<u64>,
}

impl Load for DiskLoad<'_> {
    fn admit(&mut self, policy: &mut dyn Policy, now: u64) {
        let spec = self.spec;
        while self.next_fg < self.arrivals.len() && self.arrivals[self.next_fg] <= now {
            let cost_us = spec.cost_us(spec.fg_read_bytes);
            let id = self.next_id;
            self.next_id += 1;
            self.jobs.insert(id, Job::Foreground { arrival_us: self.arrivals[self.next_fg] });
            // Ids are fresh, so enqueue cannot fail.
            let _ = policy.enqueue(now, Request { id, class: Class::Foreground, cost_us, planned: true });
            self.next_fg += 1;
        }
        for s in 0..self.issued.len() {
            while self.issued[s] < self.per_stream
                && self.outstanding[s] < spec.maintenance_outstanding
                && spec.maintenance_issue_us(self.issued[s]) <= now
            {
                let id = self.next_id;
                self.next_id += 1;
                self.jobs.insert(id, Job::Maintenance { stream: s });
                let cost_us = spec.cost_us(spec.maintenance_read_bytes);
                let _ = policy.enqueue(
                    now,
                    Request { id, class: Class::BestEffort { channel: s as u64 }, cost_us, planned: true },
                );
                self.issued[s] += 1;
                self.outstanding[s] += 1;
            }
        }
    }

    fn complete(&mut self, id: u64, now: u64) {
        match self.jobs.remove(&id) {
            Some(Job::Foreground { arrival_us }) => {
                self.rec.foreground(arrival_us, now - arrival_us, self.spec.phase_at(arrival_us));
            }
            Some(Job::Maintenance { stream }) => {
                self.outstanding[stream] -= 1;
                self.rec.maintenance(now, self.spec.maintenance_read_bytes);
                if now <= self.spec.deadline_us() {
                    self.done_by_deadline[stream] += 1;
                }
            }
            None => {}
        }
    }

    fn next_event_us(&self, _now: u64) -> Option<u64> {
        let fg = self.arrivals.get(self.next_fg).copied();
        let maintenance = (0..self.issued.len())
            .filter(|&s| self.issued[s] < self.per_stream && self.outstanding[s] < self.spec.maintenance_outstanding)
            .map(|s| self.spec.maintenance_issue_us(self.issued[s]));
        fg.into_iter().chain(maintenance).min()
    }
}

/// One simulated disk; returns each declaration's reads done by the deadline.
fn simulate_disk(
    spec: &FgTailSpec,
    kind: PolicyKind,
    config: ClassfulConfig,
    arrivals: &[u64],
    rec: &mut Recorder,
) -> Vec<u64> {
    let streams = spec.maintenance_streams as usize;
    let mut load = DiskLoad {
        spec,
        arrivals,
        rec,
        jobs: HashMap::new(),
        next_id: 0,
        next_fg: 0,
        per_stream: spec.maintenance_reads_per_stream(),
        issued: vec![0; streams],
        outstanding: vec![0; streams],
        done_by_deadline: vec![0; streams],
    };
    drive(kind.build(config).as_mut(), &mut load, spec.duration_s * 1_000_000);
    load.done_by_deadline
}
