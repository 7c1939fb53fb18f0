//! fg-tail (PAIO Fig. 5-9 analog): open-loop foreground bursts over paced
//! maintenance on a 3-node × 2-disk local cluster with HDD emulation, the
//! classful scheduler against the FIFO baseline.
//!
//! Each disk gets exactly the load of the virtual-time twin
//! ([`model::simulate`]): Poisson foreground reads of
//! 256 KiB at a chunk on that disk, peaks and valleys per
//! [`FgTailSpec`]; two maintenance declarations that read whole 4 MiB
//! chunks there, released a quantum at a time and paced to finish before
//! their deadline, with two reads outstanding each.

pub mod model;

use crate::BenchError;
use crate::cluster::{self, DiskTarget, since_start_us, write_data};
use crate::harness::{Options, alternate};
use crate::output::{Chart, Experiment, Tone};
use crate::proc::CpuTimes;
use crate::stats::median;
use dingo_client::{Client, IoTag};
use dingo_iosched::{ClassfulConfig, PolicyKind};
use dingo_report::plots::{LineChart, Series};
use dingo_types::{DeclarationId, TaskKind};
use model::{FgTailSpec, Phase, Recorder, RunSummary, foreground_arrivals_us, simulate};
use serde::Serialize;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

const NODES: u32 = 3;
const DISKS_PER_NODE: u32 = 2;
/// Files written per disk: enough distinct chunks that maintenance and
/// foreground reads spread over the disk.
const FILES_PER_DISK: u32 = 4;

/// One policy's figures: medians over the runs, and each run.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub policy: &'static str,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub peak_p99_ms: f64,
    pub p99_mad_ms: f64,
    pub maintenance_bytes: u64,
    /// Largest over the runs.
    pub deadline_misses: u64,
    pub fg_reads: u64,
    pub fg_errors: u64,
    /// Machine-wide CPU utilisation (all cores) during the runs, median.
    pub cpu_utilisation: f64,
    #[serde(skip)]
    pub runs: Vec<RunSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: &'static str,
    pub runs: u32,
    pub spec: FgTailSpec,
    pub disks: u32,
    pub mechanism: PolicyResult,
    pub baseline: PolicyResult,
    /// mechanism / baseline.
    pub peak_p99_ratio: f64,
    pub p99_ratio: f64,
    pub maintenance_bytes_ratio: f64,
    /// The issue's bars on the medians.
    pub bars_met: Bars,
    /// The virtual-time twin's figures for the same load and seed.
    pub twin_mechanism: RunSummary,
    pub twin_baseline: RunSummary,
    pub head_time_bound: String,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bars {
    pub peak_p99_at_most_a_third_of_baseline: bool,
    pub p99_at_most_half_of_baseline: bool,
    pub maintenance_bytes_at_least_0_9_of_baseline: bool,
    pub no_deadline_misses: bool,
}

/// Runs the experiment: `runs` runs of each policy, alternating.
pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let spec = if opts.quick { FgTailSpec::quick() } else { FgTailSpec::full() };
    let work = opts.work("dingo-iocontrol-")?;
    let policies = [PolicyKind::Classful, PolicyKind::Fifo].map(|k| (k, k.name()));
    let [mech, base] = alternate(
        opts,
        work.path(),
        policies,
        spec.duration_s,
        async |kind, seed, dir: &Path| one_run(opts, &spec, kind, seed, dir).await,
        |s: &RunSummary, cpu| {
            format!(
                "  p99 {:.1} ms, peak p99 {:.1} ms, maintenance {} MB, misses {}, CPU {:.0} %",
                s.p99_ms,
                s.peak_p99_ms,
                s.maintenance_bytes / 1_000_000,
                s.deadline_misses,
                cpu * 100.0
            )
        },
        &mut progress,
    )
    .await?;
    let mechanism = aggregate("classful", mech.summaries, &mech.cpu_utilisation);
    let baseline = aggregate("fifo", base.summaries, &base.cpu_utilisation);
    let disks = NODES * DISKS_PER_NODE;
    let cfg = ClassfulConfig {
        segment_us: spec.cost_us(1 << 20),
        reposition_us: spec.positioning_us,
        ..ClassfulConfig::default()
    };
    let twin_mechanism = simulate(&spec, PolicyKind::Classful, cfg, disks, opts.seed);
    let twin_baseline = simulate(&spec, PolicyKind::Fifo, cfg, disks, opts.seed);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let peak_p99_ratio = ratio(mechanism.peak_p99_ms, baseline.peak_p99_ms);
    let p99_ratio = ratio(mechanism.p99_ms, baseline.p99_ms);
    let maintenance_bytes_ratio = ratio(mechanism.maintenance_bytes as f64, baseline.maintenance_bytes as f64);
    Ok(Report {
        experiment: "fg-tail",
        runs: opts.runs,
        spec,
        disks,
        bars_met: Bars {
            peak_p99_at_most_a_third_of_baseline: peak_p99_ratio <= 1.0 / 3.0,
            p99_at_most_half_of_baseline: p99_ratio <= 0.5,
            maintenance_bytes_at_least_0_9_of_baseline: maintenance_bytes_ratio >= 0.9,
            no_deadline_misses: mechanism.deadline_misses == 0,
        },
        peak_p99_ratio,
        p99_ratio,
        maintenance_bytes_ratio,
        twin_mechanism: RunSummary { series: Vec::new(), ..twin_mechanism },
        twin_baseline: RunSummary { series: Vec::new(), ..twin_baseline },
        head_time_bound: format!(
            "offered head time per disk: foreground {}-{} %, maintenance {} %; keep CPU utilisation well under 60 % \
             (2 shared cores) so that head time, not CPU, sets latency",
            spec.valley_util_ppm / 10_000,
            spec.peak_util_ppm / 10_000,
            spec.maintenance_share_ppm / 10_000
        ),
        mechanism,
        baseline,
    })
}

fn aggregate(policy: &'static str, runs: Vec<RunSummary>, cpu: &[f64]) -> PolicyResult {
    let m = |f: fn(&RunSummary) -> f64| median(runs.iter().map(f).collect());
    PolicyResult {
        policy,
        p50_ms: m(|r| r.p50_ms),
        p99_ms: m(|r| r.p99_ms),
        peak_p99_ms: m(|r| r.peak_p99_ms),
        p99_mad_ms: m(|r| r.p99_mad_ms),
        maintenance_bytes: m(|r| r.maintenance_bytes as f64) as u64,
        deadline_misses: runs.iter().map(|r| r.deadline_misses).max().unwrap_or(0),
        fg_reads: m(|r| r.fg_reads as f64) as u64,
        fg_errors: runs.iter().map(|r| r.fg_errors).sum(),
        cpu_utilisation: median(cpu.to_vec()),
        runs,
    }
}

impl Experiment for Report {
    fn name(&self) -> &'static str {
        self.experiment
    }

    fn series_csv(&self) -> String {
        let mut out = String::from("policy,run,second,phase,fg_reads,fg_p99_ms,maintenance_bytes\n");
        for r in [&self.mechanism, &self.baseline] {
            for (i, run) in r.runs.iter().enumerate() {
                for s in &run.series {
                    let phase = match s.phase {
                        Some(Phase::Peak) => "peak",
                        _ => "valley",
                    };
                    out.push_str(&format!(
                        "{},{i},{},{phase},{},{:.2},{}\n",
                        r.policy, s.second, s.fg_reads, s.fg_p99_ms, s.maintenance_bytes
                    ));
                }
            }
        }
        out
    }

    /// The first run of each policy per second, classful solid and FIFO
    /// dashed, each peak's start marked (PAIO Fig. 5-9): the foreground p99,
    /// and the maintenance MB/s it costs.
    fn charts(&self) -> Vec<Chart> {
        let cycle_s = (self.spec.peak_s + self.spec.valley_s).max(1);
        let peaks: Vec<(f64, String)> = (self.spec.first_valley_s..self.spec.duration_s)
            .step_by(cycle_s as usize)
            .map(|s| (s as f64, "peak".to_string()))
            .collect();
        let chart = |title: &str, y_label: &str, y: fn(&model::SecondStats) -> f64| {
            let series = [(&self.mechanism, Tone::Mechanism, false), (&self.baseline, Tone::Baseline, true)]
                .into_iter()
                .filter_map(|(p, tone, dashed)| {
                    let run = p.runs.first()?;
                    Some(Series {
                        name: p.policy.to_string(),
                        color: tone.color(),
                        points: run.series.iter().map(|s| (s.second as f64, y(s))).collect(),
                        dashed,
                    })
                })
                .collect();
            LineChart {
                title: title.into(),
                x_label: "seconds".into(),
                y_label: y_label.into(),
                series,
                hline: None,
                markers: peaks.clone(),
            }
        };
        vec![
            Chart {
                file_stem: "fg-tail-p99",
                chart: chart("Foreground p99 per second, bursts over paced maintenance", "p99 ms", |s| s.fg_p99_ms),
            },
            Chart {
                file_stem: "fg-tail-maintenance",
                chart: chart("Maintenance read per second", "MB/s", |s| s.maintenance_bytes as f64 / 1e6),
            },
        ]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fg-tail: {} disks, {} s per run, median of {} runs ({})",
            self.disks, self.spec.duration_s, self.runs, self.head_time_bound
        )?;
        for r in [&self.mechanism, &self.baseline] {
            writeln!(
                f,
                "{:<9} foreground p50 {:>6.1} ms, p99 {:>6.1} ms, peak p99 {:>6.1} ms; maintenance {} MB, deadline \
                 misses {}, CPU {:.0} %",
                r.policy,
                r.p50_ms,
                r.p99_ms,
                r.peak_p99_ms,
                r.maintenance_bytes / 1_000_000,
                r.deadline_misses,
                r.cpu_utilisation * 100.0
            )?;
        }
        writeln!(
            f,
            "classful / fifo: peak p99 {:.2} (bar <= 0.33), p99 {:.2} (bar <= 0.5), maintenance bytes {:.2} (bar >= 0.9)",
            self.peak_p99_ratio, self.p99_ratio, self.maintenance_bytes_ratio
        )?;
        write!(
            f,
            "virtual-time twin: peak p99 {:.1} vs {:.1} ms, p99 {:.1} vs {:.1} ms",
            self.twin_mechanism.peak_p99_ms,
            self.twin_baseline.peak_p99_ms,
            self.twin_mechanism.p99_ms,
            self.twin_baseline.p99_ms
        )
    }
}

async fn one_run(
    opts: &Options,
    spec: &FgTailSpec,
    kind: PolicyKind,
    seed: u64,
    dir: &Path,
) -> Result<(RunSummary, f64), BenchError> {
    // No node cache: every read reaches the emulated head.
    let config = cluster::node_config(0, spec.positioning_us, spec.transfer_bytes_per_sec, kind);
    let cluster = cluster::start(&opts.exe, dir, NODES, DISKS_PER_NODE, &config).await?;
    let client = cluster.client()?;
    let targets = write_data(&client, spec.maintenance_read_bytes, "/fgtail", FILES_PER_DISK).await?;

    let rec = Arc::new(Mutex::new(Recorder::default()));
    let streams = spec.maintenance_streams as usize;
    let done_by_deadline = Arc::new(Mutex::new(vec![0u64; targets.len() * streams]));
    let start = Instant::now() + Duration::from_millis(200);
    let cpu_before = CpuTimes::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (d, target) in targets.into_iter().enumerate() {
        let target = Arc::new(target);
        let arrivals = foreground_arrivals_us(spec, seed.wrapping_add(d as u64));
        tasks.spawn(foreground(client.clone(), *spec, target.clone(), arrivals, start, rec.clone(), seed + d as u64));
        for s in 0..streams {
            let declaration = DeclarationId(1 + (d * streams + s) as u64);
            let slot = d * streams + s;
            tasks.spawn(maintenance(
                client.clone(),
                *spec,
                target.clone(),
                declaration,
                start,
                rec.clone(),
                done_by_deadline.clone(),
                slot,
            ));
        }
    }
    tokio::time::sleep_until(start + Duration::from_secs(spec.duration_s)).await;
    // Reads still in flight at the end are not counted, as in the twin.
    tasks.shutdown().await;
    let cpu = CpuTimes::utilisation_since(cpu_before);
    drop(cluster);
    let rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
    let done = done_by_deadline.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok((rec.summary(spec, &done), cpu))
}

/// Issues the foreground reads of one disk at their arrival times, without
/// waiting for earlier ones (open loop).
async fn foreground(
    client: Client,
    spec: FgTailSpec,
    target: Arc<DiskTarget>,
    arrivals: Vec<u64>,
    start: Instant,
    rec: Arc<Mutex<Recorder>>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut reads = tokio::task::JoinSet::new();
    let pieces = (spec.maintenance_read_bytes / spec.fg_read_bytes).max(1);
    for at in arrivals {
        tokio::time::sleep_until(start + Duration::from_micros(at)).await;
        let chunk = target.chunks[rng.usize(..target.chunks.len())];
        let offset = rng.u64(..pieces) * spec.fg_read_bytes;
        let (client, target, rec) = (client.clone(), target.clone(), rec.clone());
        reads.spawn(async move {
            let r = client.read_chunk(&target.addr, chunk, offset, spec.fg_read_bytes, IoTag::Foreground).await;
            let latency_us = since_start_us(start).saturating_sub(at);
            let mut rec = rec.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok(_) => rec.foreground(at, latency_us, spec.phase_at(at)),
                Err(_) => rec.foreground_error(),
            }
        });
        // Reap finished reads so the set stays small.
        while reads.try_join_next().is_some() {}
    }
    while reads.join_next().await.is_some() {}
}

/// One maintenance declaration on one disk: whole-chunk reads released at
/// their paced issue times, at most `maintenance_outstanding` at once.
#[allow(clippy::too_many_arguments)]
async fn maintenance(
    client: Client,
    spec: FgTailSpec,
    target: Arc<DiskTarget>,
    declaration: DeclarationId,
    start: Instant,
    rec: Arc<Mutex<Recorder>>,
    done_by_deadline: Arc<Mutex<Vec<u64>>>,
    slot: usize,
) {
    let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration };
    let permits = Arc::new(Semaphore::new(spec.maintenance_outstanding as usize));
    let mut reads = tokio::task::JoinSet::new();
    for i in 0..spec.maintenance_reads_per_stream() {
        tokio::time::sleep_until(start + Duration::from_micros(spec.maintenance_issue_us(i))).await;
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        let chunk = target.chunks[(i as usize + slot) % target.chunks.len()];
        let (client, target, rec, done) = (client.clone(), target.clone(), rec.clone(), done_by_deadline.clone());
        reads.spawn(async move {
            let r = client.read_chunk(&target.addr, chunk, 0, spec.maintenance_read_bytes, tag).await;
            drop(permit);
            let now = since_start_us(start);
            if r.is_ok() {
                rec.lock().unwrap_or_else(|p| p.into_inner()).maintenance(now, spec.maintenance_read_bytes);
                if now <= spec.deadline_us() {
                    done.lock().unwrap_or_else(|p| p.into_inner())[slot] += 1;
                }
            }
        });
        while reads.try_join_next().is_some() {}
    }
    while reads.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p99_ms: f64, bytes: u64, misses: u64) -> RunSummary {
        RunSummary { p99_ms, maintenance_bytes: bytes, deadline_misses: misses, ..RunSummary::default() }
    }

    #[test]
    fn figures_are_medians_and_misses_the_worst_run() {
        let r = aggregate("classful", vec![run(9.0, 5, 0), run(1.0, 7, 2), run(4.0, 6, 0)], &[0.3, 0.1, 0.2]);
        assert_eq!((r.p99_ms, r.maintenance_bytes, r.deadline_misses), (4.0, 6, 2));
        assert_eq!(r.cpu_utilisation, 0.2);
    }

    #[test]
    fn the_series_has_one_row_per_run_and_second_and_the_plots_mark_each_peak() {
        let spec = FgTailSpec::quick();
        let mut rec = Recorder::default();
        rec.foreground(500_000, 20_000, Phase::Valley);
        rec.maintenance(1_500_000, 4 << 20);
        let summary = rec.summary(&spec, &[0]);
        let policy = aggregate("fifo", vec![summary], &[0.1]);
        let report = Report {
            experiment: "fg-tail",
            runs: 1,
            spec,
            disks: 1,
            mechanism: policy.clone(),
            baseline: policy,
            peak_p99_ratio: 1.0,
            p99_ratio: 1.0,
            maintenance_bytes_ratio: 1.0,
            bars_met: Bars {
                peak_p99_at_most_a_third_of_baseline: false,
                p99_at_most_half_of_baseline: false,
                maintenance_bytes_at_least_0_9_of_baseline: true,
                no_deadline_misses: true,
            },
            twin_mechanism: RunSummary::default(),
            twin_baseline: RunSummary::default(),
            head_time_bound: String::new(),
        };
        let csv = report.series_csv();
        assert_eq!(csv.lines().count(), 1 + 2 * 2, "{csv}");
        assert!(csv.contains("fifo,0,0,valley,1,20.00,0"), "{csv}");
        assert!(csv.contains("fifo,0,1,valley,0,0.00,4194304"), "{csv}");
        // Two plots of both policies' first run, each peak marked: the quick
        // run's peaks start at 10, 23, 36 and 49 s.
        let charts = report.charts();
        assert_eq!(charts.iter().map(|c| c.file_stem).collect::<Vec<_>>(), ["fg-tail-p99", "fg-tail-maintenance"]);
        let p99 = &charts[0].chart;
        assert_eq!(p99.markers.iter().map(|m| m.0).collect::<Vec<_>>(), [10.0, 23.0, 36.0, 49.0]);
        assert_eq!(p99.series.len(), 2);
        assert_eq!(p99.series[1].points, [(0.0, 20.0), (1.0, 0.0)]);
        assert_eq!(charts[1].chart.series[0].points[1], (1.0, 4.194304));
        let dir = tempfile::tempdir().unwrap();
        crate::output::write_files(&report, dir.path()).unwrap();
        assert!(dir.path().join("fg-tail-p99.png").is_file() && dir.path().join("fg-tail-maintenance.svg").is_file());
    }
}
