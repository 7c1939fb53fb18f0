//! fairness (PAIO Fig. 10 analog): four tenants — scrub declarations with
//! guaranteed shares of head time (`[node.io] shares`) — join and leave one
//! disk, on the classful scheduler against the FIFO queue, on a local
//! cluster with HDD emulation. The schedule, the guarantees and the window
//! statistics are the virtual-time twin's ([`model`]).
//! The runs (three by default) run side by side on one-disk nodes (each disk
//! its own tenants and declarations); the two policies one after the other.

pub mod model;

use crate::BenchError;
use crate::cluster::{self, DiskTarget, scrub_tag, since_start_us, write_data};
use crate::harness::Options;
use crate::output::{Chart, Experiment, Tone};
use crate::proc::CpuTimes;
use crate::stats::median;
use dingo_client::Client;
use dingo_iosched::PolicyKind;
use dingo_report::plots::{LineChart, Series};
use model::{Completions, FairSpec, WindowStat, simulate, windows};
use serde::Serialize;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The runs the command makes: three, side by side.
pub const RUNS: u32 = 3;
const FILES_PER_DISK: u32 = 8;

/// One policy's figures.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub policy: &'static str,
    /// Lowest share of its guarantee any active tenant got in a checked
    /// window: median over the runs, and each run.
    pub min_guarantee_ratio: f64,
    pub min_guarantee_ratio_runs: Vec<f64>,
    /// (window, tenant) pairs below 95 % of the guarantee, largest over runs.
    pub windows_below_95_percent: usize,
    pub windows_checked: usize,
    pub cpu_utilisation: f64,
    pub twin_min_guarantee_ratio: f64,
    #[serde(skip)]
    pub runs: Vec<Vec<WindowStat>>,
    #[serde(skip)]
    pub completions: Vec<Completions>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: &'static str,
    pub runs: u32,
    pub spec: FairSpec,
    pub guarantees_mb_s: Vec<f64>,
    pub mechanism: PolicyResult,
    pub baseline: PolicyResult,
    pub bars_met: Bars,
    pub head_time_bound: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Bars {
    pub every_active_tenant_at_least_95_percent_of_its_guarantee: bool,
    pub baseline_misses: bool,
}

pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let spec = if opts.quick { FairSpec::quick() } else { FairSpec::full() };
    let work = opts.work("dingo-fairness-")?;
    let mut results = Vec::new();
    for kind in [PolicyKind::Classful, PolicyKind::Fifo] {
        progress(&format!("{}: {} runs side by side, {} s", kind.name(), opts.runs, spec.duration_s()));
        let (runs, cpu) = one_cluster(opts, &spec, kind, &work.path().join(kind.name())).await?;
        let stats: Vec<Vec<WindowStat>> = runs.iter().map(|c| windows(&spec, c)).collect();
        let mins: Vec<f64> = stats.iter().map(|w| w.iter().map(|s| s.ratio).fold(f64::INFINITY, f64::min)).collect();
        let twin = windows(&spec, &simulate(&spec, kind)).iter().map(|s| s.ratio).fold(f64::INFINITY, f64::min);
        let r = PolicyResult {
            policy: kind.name(),
            min_guarantee_ratio: median(mins.clone()),
            min_guarantee_ratio_runs: mins,
            windows_below_95_percent: stats
                .iter()
                .map(|w| w.iter().filter(|s| s.ratio < 0.95).count())
                .max()
                .unwrap_or(0),
            windows_checked: stats.first().map_or(0, Vec::len),
            cpu_utilisation: cpu,
            twin_min_guarantee_ratio: twin,
            runs: stats,
            completions: runs,
        };
        progress(&format!(
            "  lowest share of a guarantee {:.3} (runs {:?}), {} of {} windows below 95 %, CPU {:.0} %",
            r.min_guarantee_ratio,
            r.min_guarantee_ratio_runs,
            r.windows_below_95_percent,
            r.windows_checked,
            cpu * 100.0
        ));
        results.push(r);
    }
    let baseline = results.pop().ok_or_else(|| BenchError::Setup("two policies".into()))?;
    let mechanism = results.pop().ok_or_else(|| BenchError::Setup("two policies".into()))?;
    Ok(Report {
        experiment: "fairness",
        runs: opts.runs,
        guarantees_mb_s: (0..4).map(|t| spec.guarantee_mb_s(t)).collect(),
        bars_met: Bars {
            every_active_tenant_at_least_95_percent_of_its_guarantee: mechanism.min_guarantee_ratio >= 0.95,
            baseline_misses: baseline.min_guarantee_ratio < 0.95,
        },
        head_time_bound: format!(
            "one disk per run, {} tenants reading {} KiB chunks: at most {:.0} MB/s per disk; keep CPU utilisation well \
             under 60 % so head time, not CPU, sets throughput",
            4,
            spec.read_bytes >> 10,
            spec.read_bytes as f64 / (spec.cost_us(spec.read_bytes) as f64 / 1e6) / 1e6
        ),
        spec,
        mechanism,
        baseline,
    })
}

impl Experiment for Report {
    fn name(&self) -> &'static str {
        self.experiment
    }

    /// Per-second MB/s of each tenant in every run.
    fn series_csv(&self) -> String {
        let mut out = String::from("policy,run,second,tenant,mb_s,guarantee_mb_s\n");
        for r in [&self.mechanism, &self.baseline] {
            for (run, c) in r.completions.iter().enumerate() {
                for second in 0..self.spec.duration_s() {
                    for t in 0..4 {
                        let (join, leave) = self.spec.active_s(t);
                        if !(join..leave).contains(&second) {
                            continue;
                        }
                        let bytes = tenant_bytes(c, t, second);
                        out.push_str(&format!(
                            "{},{run},{second},{},{:.2},{:.2}\n",
                            r.policy,
                            t + 1,
                            bytes as f64 / 1e6,
                            self.spec.guarantee_mb_s(t)
                        ));
                    }
                }
            }
        }
        out
    }

    /// Each tenant's MB/s per second in the first run, classful solid, FIFO
    /// dashed (PAIO Fig. 10).
    fn charts(&self) -> Vec<Chart> {
        let mut series = Vec::new();
        for (p, dashed) in [(&self.mechanism, false), (&self.baseline, true)] {
            let Some(c) = p.completions.first() else { continue };
            for t in 0..4 {
                let (join, leave) = self.spec.active_s(t);
                let points = (join..leave).map(|s| (s as f64, tenant_bytes(c, t, s) as f64 / 1e6)).collect();
                series.push(Series {
                    name: format!("{} tenant {} (guarantee {:.1} MB/s)", p.policy, t + 1, self.guarantees_mb_s[t]),
                    color: Tone::Tenant(t).color(),
                    points,
                    dashed,
                });
            }
        }
        let chart = LineChart {
            title: "Tenants joining and leaving: MB/s per tenant".into(),
            x_label: "seconds".into(),
            y_label: "MB/s read per tenant".into(),
            series,
            hline: None,
            markers: (1..7).map(|p| ((p * self.spec.phase_s) as f64, format!("phase {}", p + 1))).collect(),
        };
        vec![Chart { file_stem: "fairness-tenants", chart }]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fairness: 7 phases of {} s, guarantees {:?} MB/s, median of {} runs side by side ({})",
            self.spec.phase_s,
            self.guarantees_mb_s.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>(),
            self.runs,
            self.head_time_bound
        )?;
        for r in [&self.mechanism, &self.baseline] {
            writeln!(
                f,
                "{:<9} lowest share of a guarantee in a {} s window {:.3} (runs {:?}; twin {:.3}), {} of {} windows \
                 below 95 %, CPU {:.0} %",
                r.policy,
                self.spec.window_s,
                r.min_guarantee_ratio,
                r.min_guarantee_ratio_runs,
                r.twin_min_guarantee_ratio,
                r.windows_below_95_percent,
                r.windows_checked,
                r.cpu_utilisation * 100.0
            )?;
        }
        write!(f, "bars met: {:?}", self.bars_met)
    }
}

/// Bytes tenant `t` read in second `second`.
fn tenant_bytes(c: &Completions, t: usize, second: u64) -> u64 {
    c.0.iter().filter(|&&(who, at, _)| who == t && at / 1_000_000 == second).map(|x| x.2).sum()
}

/// Tenant `t` of run `run`: its declaration id (shares are per declaration).
fn declaration(run: u32, t: usize) -> u64 {
    1 + u64::from(run) * 4 + t as u64
}

async fn one_cluster(
    opts: &Options,
    spec: &FairSpec,
    kind: PolicyKind,
    dir: &Path,
) -> Result<(Vec<Completions>, f64), BenchError> {
    let shares: Vec<String> = (0..opts.runs)
        .flat_map(|run| {
            (0..4).map(move |t| {
                format!("{{ declaration = {}, share = {} }}", declaration(run, t), spec.shares_ppm[t] as f64 / 1e6)
            })
        })
        .collect();
    let shares =
        if kind == PolicyKind::Classful { format!("shares = [{}]\n", shares.join(", ")) } else { String::new() };
    let config = cluster::node_config(0, spec.positioning_us, spec.transfer_bytes_per_sec, kind)
        + &format!("segment = \"{}\"\n{shares}", spec.read_bytes);
    // One disk a node: chunks can only move between nodes to even out
    // placement.
    let cluster = cluster::start(&opts.exe, dir, opts.runs, 1, &config).await?;
    let client = cluster.client()?;
    let targets = write_data(&client, spec.read_bytes, "/fairness", FILES_PER_DISK).await?;
    let start = Instant::now() + Duration::from_millis(300);
    let cpu_before = CpuTimes::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut recs = Vec::new();
    for (run, target) in targets.into_iter().take(opts.runs as usize).enumerate() {
        let rec = Arc::new(Mutex::new(Completions::default()));
        let target = Arc::new(target);
        for t in 0..4 {
            let decl = declaration(run as u32, t);
            tasks.spawn(tenant(client.clone(), spec.clone(), target.clone(), t, decl, start, rec.clone()));
        }
        recs.push(rec);
    }
    tokio::time::sleep_until(start + Duration::from_secs(spec.duration_s())).await;
    tasks.shutdown().await;
    let cpu = CpuTimes::utilisation_since(cpu_before);
    drop(cluster);
    let _ = std::fs::remove_dir_all(dir);
    let runs = recs.iter().map(|r| std::mem::take(&mut *r.lock().unwrap_or_else(|p| p.into_inner()))).collect();
    Ok((runs, cpu))
}

/// One tenant: while active, `outstanding` whole-chunk reads in flight.
async fn tenant(
    client: Client,
    spec: FairSpec,
    target: Arc<DiskTarget>,
    t: usize,
    declaration: u64,
    start: Instant,
    rec: Arc<Mutex<Completions>>,
) {
    let (join, leave) = spec.active_s(t);
    let tag = scrub_tag(declaration);
    let permits = Arc::new(Semaphore::new(spec.outstanding as usize));
    let leave_at = start + Duration::from_secs(leave);
    tokio::time::sleep_until(start + Duration::from_secs(join)).await;
    let mut reads = tokio::task::JoinSet::new();
    for i in 0usize.. {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p,
            _ = tokio::time::sleep_until(leave_at) => break,
        };
        let Ok(permit) = permit else { break };
        if Instant::now() >= leave_at {
            break;
        }
        let chunk = target.chunks[(i + t) % target.chunks.len()];
        let (client, target, rec, bytes) = (client.clone(), target.clone(), rec.clone(), spec.read_bytes);
        reads.spawn(async move {
            let r = client.read_chunk(&target.addr, chunk, 0, bytes, tag).await;
            drop(permit);
            if r.is_ok() {
                rec.lock().unwrap_or_else(|p| p.into_inner()).0.push((t, since_start_us(start), bytes));
            }
        });
        while reads.try_join_next().is_some() {}
    }
    // Reads in flight at the leave still complete and count, as in the twin.
    while reads.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_has_a_row_per_active_tenant_and_second() {
        let spec = FairSpec::quick();
        let done = Completions(vec![(0, 500_000, 1 << 20), (0, 700_000, 1 << 20), (3, 16_000_000, 1 << 20)]);
        let result = |policy| PolicyResult {
            policy,
            min_guarantee_ratio: 0.0,
            min_guarantee_ratio_runs: Vec::new(),
            windows_below_95_percent: 0,
            windows_checked: 0,
            cpu_utilisation: 0.0,
            twin_min_guarantee_ratio: 0.0,
            runs: Vec::new(),
            completions: vec![done.clone()],
        };
        let report = Report {
            experiment: "fairness",
            runs: 1,
            guarantees_mb_s: Vec::new(),
            mechanism: result("classful"),
            baseline: result("fifo"),
            bars_met: Bars { every_active_tenant_at_least_95_percent_of_its_guarantee: false, baseline_misses: false },
            head_time_bound: String::new(),
            spec: spec.clone(),
        };
        let csv = report.series_csv();
        // Active tenant-seconds: 5 s phases with 1, 2, 3, 4, 3, 2, 1 tenants.
        let per_policy = 5 * (1 + 2 + 3 + 4 + 3 + 2 + 1);
        assert_eq!(csv.lines().count(), 1 + 2 * per_policy, "{csv}");
        assert!(csv.contains(&format!(
            "classful,0,0,1,{:.2},{:.2}\n",
            2.0 * (1 << 20) as f64 / 1e6,
            spec.guarantee_mb_s(0)
        )));
        assert!(csv.contains("fifo,0,16,4,1.05,"), "{csv}");
    }
}
