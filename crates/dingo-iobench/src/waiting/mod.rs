//! waiting (Practical scrubbing Fig. 15 / Table III analog): scrubbing
//! through the Waiting gate, tuned online for mean-slowdown goals of 1, 2
//! and 4 ms, against a fixed-rate scrubber on the classful scheduler without
//! the gate, on local clusters with HDD emulation. The paper's own baseline
//! (CFQ-like: 64 KB requests after 10 ms of idle time, never tuned) is
//! weaker than that one; it runs on a cluster of its own and is reported
//! beside it, with its twin on the same seeds.
//!
//! Every disk gets the seeded foreground of the virtual-time twin
//! ([`model`]) and one job: foreground only (the reference
//! latencies), a fixed-rate scrubber at one of five rates, a Waiting
//! scrubber that always has work, or planner-like pinned groups read by two
//! declarations (the free-bytes check). The runs (three by default) are
//! seeds, run side by side on separate disks of the same cluster, each cluster
//! with its own reference disks; clusters run one after the other: the
//! baseline (gate off) first, then one per goal, then the CFQ-like one.

mod disks;
pub mod model;

use crate::BenchError;
use crate::harness::Options;
use crate::output::{Chart, Experiment, Tone};
use crate::stats::median;
use dingo_iosched::waiting::GateParams;
use dingo_report::plots::{LineChart, Series};
use disks::{ClusterGate, one_cluster};
use model::{Background, FgRead, WaitSpec, interpolate_at};
use serde::Serialize;
use std::fmt;

/// The runs the command makes: three seeds, side by side.
pub const RUNS: u32 = 3;

/// One goal's figures: medians over the runs.
#[derive(Clone, Debug, Serialize)]
pub struct GoalResult {
    pub goal_ms: f64,
    /// Waiting (the mechanism).
    pub slowdown_ms: f64,
    pub scrub_mb_s: f64,
    /// The fixed-rate scrubber's MB/s at the mechanism's slowdown, on its
    /// measured curve (upper envelope, interpolated from the origin).
    pub fixed_rate_scrub_mb_s_at_equal_slowdown: f64,
    /// True when the mechanism's slowdown lies beyond the fixed-rate sweep.
    pub fixed_rate_extrapolated: bool,
    pub scrub_mb_s_ratio: f64,
    pub planned_free_bytes: u64,
    pub achieved_free_bytes: u64,
    pub achieved_free_bytes_ratio: f64,
    /// Per run.
    pub slowdown_ms_runs: Vec<f64>,
    pub scrub_mb_s_runs: Vec<f64>,
    /// Each run's gate `(s, t)` at the end, as its node reported it, and the
    /// twin's on the same seed.
    pub gate_runs: Vec<Option<GateParams>>,
    pub twin_gate_runs: Vec<Option<GateParams>>,
    pub cpu_utilisation: f64,
    pub twin_slowdown_ms: f64,
    pub twin_scrub_mb_s: f64,
    pub twin_achieved_free_bytes_ratio: f64,
}

/// One rate of the fixed-rate scrubber (the baseline): medians.
#[derive(Clone, Debug, Serialize)]
pub struct FixedRateResult {
    pub share_of_head_time: f64,
    pub slowdown_ms: f64,
    pub scrub_mb_s: f64,
    pub twin_slowdown_ms: f64,
    pub twin_scrub_mb_s: f64,
}

/// Practical scrubbing's own baseline (Table III's CFQ rows: 64 KB
/// requests after 10 ms idle, never tuned): medians of the runs, and of the
/// twin on the same seeds.
#[derive(Clone, Debug, Serialize)]
pub struct CfqLikeResult {
    pub slowdown_ms: f64,
    pub scrub_mb_s: f64,
    pub slowdown_ms_runs: Vec<f64>,
    pub scrub_mb_s_runs: Vec<f64>,
    /// Each run's gate at the end, as its node reported it: CFQ's
    /// parameters, unchanged.
    pub gate_runs: Vec<Option<GateParams>>,
    pub cpu_utilisation: f64,
    /// The best Waiting MB/s measured at a slowdown no larger than the
    /// baseline's, over the baseline's MB/s (`None`: no such point).
    pub waiting_scrub_mb_s_ratio_at_equal_slowdown: Option<f64>,
    pub twin_slowdown_ms: f64,
    pub twin_scrub_mb_s: f64,
    /// The twin's best Waiting MB/s at a slowdown no larger than the
    /// baseline's, over the baseline's MB/s (`None`: no such point).
    pub twin_waiting_scrub_mb_s_ratio_at_equal_slowdown: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Bars {
    pub slowdown_at_most_1_25_goal: bool,
    /// Against the paper's baseline (CFQ-like), measured and in the twin.
    pub scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: bool,
    pub twin_scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: bool,
    /// Against our stronger baseline, measured.
    pub scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: bool,
    pub achieved_free_bytes_at_least_0_9_of_planned: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: &'static str,
    pub runs: u32,
    pub spec: WaitSpec,
    pub mechanism: Vec<GoalResult>,
    pub baseline: Vec<FixedRateResult>,
    pub baseline_cpu_utilisation: f64,
    pub paper_baseline: CfqLikeResult,
    pub bars_met: Bars,
    pub head_time_bound: String,
    #[serde(skip)]
    pub series: Vec<SeriesRow>,
}

/// One second of one disk.
#[derive(Clone, Debug)]
pub struct SeriesRow {
    pub cluster: String,
    pub job: String,
    pub run: u32,
    pub second: u64,
    pub fg_reads: u64,
    pub fg_mean_ms: f64,
    pub scrub_bytes: u64,
}

pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let spec = if opts.quick { WaitSpec::quick() } else { WaitSpec::full() };
    let work = opts.work("dingo-waiting-")?;
    let seeds: Vec<u64> = (0..u64::from(opts.runs)).map(|r| opts.seed + r).collect();
    let fgs: Vec<Vec<FgRead>> = seeds.iter().map(|&s| model::foreground(&spec, s)).collect();
    let mut series = Vec::new();

    // The baseline: per run, the reference and every fixed rate.
    let mut jobs = Vec::new();
    for run in 0..opts.runs {
        jobs.push((Background::Reference, run));
        for &share_ppm in &spec.fixed_rate_shares_ppm {
            jobs.push((Background::FixedRate { share_ppm }, run));
        }
    }
    progress(&format!(
        "baseline cluster: {} disks (reference + fixed rates, {} runs), {} s",
        jobs.len(),
        opts.runs,
        spec.duration_s
    ));
    let (base, base_cpu) =
        one_cluster(opts, &spec, ClusterGate::Off, &jobs, &fgs, &work.path().join("baseline"), &mut series).await?;
    let reference =
        |run: u32| base.iter().find(|d| d.job == Background::Reference && d.run == run).map(|d| &d.measured);
    let mut baseline = Vec::new();
    for &share_ppm in &spec.fixed_rate_shares_ppm {
        let (mut slow, mut mb) = (Vec::new(), Vec::new());
        for d in base.iter().filter(|d| d.job == Background::FixedRate { share_ppm }) {
            let r = reference(d.run).ok_or_else(|| BenchError::Setup("no reference disk".into()))?;
            slow.push(model::mean_slowdown_ms(&spec, &fgs[d.run as usize], &d.measured, r));
            mb.push(d.measured.scrub_mb_s(&spec));
        }
        let twin: Vec<(f64, f64)> = fgs
            .iter()
            .map(|fg| {
                let r = model::simulate(&spec, fg, Background::Reference);
                let f = model::simulate(&spec, fg, Background::FixedRate { share_ppm });
                (model::mean_slowdown_ms(&spec, fg, &f, &r), f.scrub_mb_s(&spec))
            })
            .collect();
        baseline.push(FixedRateResult {
            share_of_head_time: share_ppm as f64 / 1e6,
            slowdown_ms: median(slow),
            scrub_mb_s: median(mb),
            twin_slowdown_ms: median(twin.iter().map(|t| t.0).collect()),
            twin_scrub_mb_s: median(twin.iter().map(|t| t.1).collect()),
        });
        progress(&format!(
            "  fixed rate {:.1} %: slowdown {:.2} ms, scrub {:.1} MB/s",
            share_ppm as f64 / 1e4,
            baseline.last().map_or(0.0, |b| b.slowdown_ms),
            baseline.last().map_or(0.0, |b| b.scrub_mb_s)
        ));
    }
    let curve: Vec<(f64, f64)> = baseline.iter().map(|b| (b.slowdown_ms, b.scrub_mb_s)).collect();

    let mut mechanism = Vec::new();
    for &goal_us in &spec.goals_us {
        // Each cluster has its own reference disks: latencies of different
        // clusters differ by more than a goal when the machine is busy.
        let jobs: Vec<(Background, u32)> = (0..opts.runs)
            .flat_map(|run| {
                [
                    (Background::Reference, run),
                    (Background::Waiting { goal_us }, run),
                    (Background::Groups { goal_us }, run),
                ]
            })
            .collect();
        progress(&format!(
            "goal {} ms cluster: {} disks (reference, Waiting, pinned groups; {} runs)",
            goal_us as f64 / 1e3,
            jobs.len(),
            opts.runs
        ));
        let dir = work.path().join(format!("goal-{goal_us}"));
        let gate = ClusterGate::Tuned { goal_us };
        let (disks, cpu) = one_cluster(opts, &spec, gate, &jobs, &fgs, &dir, &mut series).await?;
        let (mut slow, mut mb, mut gates) = (Vec::new(), Vec::new(), Vec::new());
        let (mut planned, mut achieved) = (Vec::new(), Vec::new());
        let own_reference =
            |run: u32| disks.iter().find(|d| d.job == Background::Reference && d.run == run).map(|d| &d.measured);
        for d in &disks {
            match d.job {
                Background::Waiting { .. } => {
                    let r = own_reference(d.run).ok_or_else(|| BenchError::Setup("no reference disk".into()))?;
                    slow.push(model::mean_slowdown_ms(&spec, &fgs[d.run as usize], &d.measured, r));
                    mb.push(d.measured.scrub_mb_s(&spec));
                    gates.push(d.measured.gate);
                }
                Background::Groups { .. } => {
                    planned.push(d.measured.planned_free_bytes as f64);
                    achieved.push(d.measured.achieved_free_bytes as f64);
                }
                Background::Reference | Background::FixedRate { .. } | Background::CfqLike => {}
            }
        }
        let twin: Vec<(f64, f64, f64, Option<GateParams>)> = fgs
            .iter()
            .map(|fg| {
                let r = model::simulate(&spec, fg, Background::Reference);
                let w = model::simulate(&spec, fg, Background::Waiting { goal_us });
                let g = model::simulate(&spec, fg, Background::Groups { goal_us });
                let free = g.achieved_free_bytes as f64 / g.planned_free_bytes.max(1) as f64;
                (model::mean_slowdown_ms(&spec, fg, &w, &r), w.scrub_mb_s(&spec), free, w.gate)
            })
            .collect();
        let slowdown_ms = median(slow.clone());
        let scrub_mb_s = median(mb.clone());
        let (at_equal, extrapolated) = interpolate_at(&curve, slowdown_ms);
        let free_ratios: Vec<f64> = planned.iter().zip(&achieved).map(|(p, a)| a / p.max(1.0)).collect();
        let result = GoalResult {
            goal_ms: goal_us as f64 / 1e3,
            slowdown_ms,
            scrub_mb_s,
            fixed_rate_scrub_mb_s_at_equal_slowdown: at_equal,
            fixed_rate_extrapolated: extrapolated,
            scrub_mb_s_ratio: if at_equal > 0.0 { scrub_mb_s / at_equal } else { f64::INFINITY },
            planned_free_bytes: median(planned) as u64,
            achieved_free_bytes: median(achieved) as u64,
            achieved_free_bytes_ratio: median(free_ratios),
            slowdown_ms_runs: slow,
            scrub_mb_s_runs: mb,
            gate_runs: gates,
            twin_gate_runs: twin.iter().map(|t| t.3).collect(),
            cpu_utilisation: cpu,
            twin_slowdown_ms: median(twin.iter().map(|t| t.0).collect()),
            twin_scrub_mb_s: median(twin.iter().map(|t| t.1).collect()),
            twin_achieved_free_bytes_ratio: median(twin.iter().map(|t| t.2).collect()),
        };
        progress(&format!(
            "  slowdown {:.2} ms, scrub {:.1} MB/s (fixed rate {:.1} at equal slowdown), free bytes {:.2}, CPU {:.0} %",
            result.slowdown_ms,
            result.scrub_mb_s,
            result.fixed_rate_scrub_mb_s_at_equal_slowdown,
            result.achieved_free_bytes_ratio,
            cpu * 100.0
        ));
        mechanism.push(result);
    }
    let paper_baseline =
        cfq_like_cluster(opts, &spec, &fgs, &work.path().join("cfq-like"), &mut series, &mechanism).await?;
    progress(&format!(
        "CFQ-like cluster: slowdown {:.2} ms, scrub {:.1} MB/s, CPU {:.0} %",
        paper_baseline.slowdown_ms,
        paper_baseline.scrub_mb_s,
        paper_baseline.cpu_utilisation * 100.0
    ));
    let bars_met = Bars {
        slowdown_at_most_1_25_goal: mechanism.iter().all(|g| g.slowdown_ms <= 1.25 * g.goal_ms),
        scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: paper_baseline
            .waiting_scrub_mb_s_ratio_at_equal_slowdown
            .is_some_and(|r| r >= 3.0),
        twin_scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: paper_baseline
            .twin_waiting_scrub_mb_s_ratio_at_equal_slowdown
            .is_some_and(|r| r >= 3.0),
        scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: mechanism
            .iter()
            .all(|g| !g.fixed_rate_extrapolated && g.scrub_mb_s >= 3.0 * g.fixed_rate_scrub_mb_s_at_equal_slowdown),
        achieved_free_bytes_at_least_0_9_of_planned: mechanism.iter().all(|g| g.achieved_free_bytes_ratio >= 0.9),
    };
    Ok(Report {
        experiment: "waiting",
        runs: opts.runs,
        head_time_bound: format!(
            "per disk: foreground about 15 % of head time, maintenance at most what the head has left ({} disk model: \
             {} ms + {} MB/s); keep CPU utilisation well under 60 % so head time, not CPU, sets latency",
            "the demo's",
            spec.positioning_us / 1000,
            spec.transfer_bytes_per_sec / 1_000_000
        ),
        spec,
        mechanism,
        baseline,
        baseline_cpu_utilisation: base_cpu,
        paper_baseline,
        bars_met,
        series,
    })
}

/// The paper's baseline on a cluster of its own (each run's reference disk
/// beside its CFQ-like scrubber), compared with the goals' measured Waiting
/// points; the twin on the same seeds beside it.
async fn cfq_like_cluster(
    opts: &Options,
    spec: &WaitSpec,
    fgs: &[Vec<FgRead>],
    dir: &std::path::Path,
    series: &mut Vec<SeriesRow>,
    mechanism: &[GoalResult],
) -> Result<CfqLikeResult, BenchError> {
    let jobs: Vec<(Background, u32)> =
        (0..opts.runs).flat_map(|run| [(Background::Reference, run), (Background::CfqLike, run)]).collect();
    let (disks, cpu) = one_cluster(opts, spec, ClusterGate::CfqLike, &jobs, fgs, dir, series).await?;
    let (mut slow, mut mb, mut gates) = (Vec::new(), Vec::new(), Vec::new());
    for d in disks.iter().filter(|d| d.job == Background::CfqLike) {
        let r = disks
            .iter()
            .find(|r| r.job == Background::Reference && r.run == d.run)
            .ok_or_else(|| BenchError::Setup("no reference disk".into()))?;
        slow.push(model::mean_slowdown_ms(spec, &fgs[d.run as usize], &d.measured, &r.measured));
        mb.push(d.measured.scrub_mb_s(spec));
        gates.push(d.measured.gate);
    }
    let twin: Vec<(f64, f64)> = fgs
        .iter()
        .map(|fg| {
            let r = model::simulate(spec, fg, Background::Reference);
            let c = model::simulate(spec, fg, Background::CfqLike);
            (model::mean_slowdown_ms(spec, fg, &c, &r), c.scrub_mb_s(spec))
        })
        .collect();
    let measured = (median(slow.clone()), median(mb.clone()));
    let twin_baseline = (median(twin.iter().map(|c| c.0).collect()), median(twin.iter().map(|c| c.1).collect()));
    let points: Vec<(f64, f64)> = mechanism.iter().map(|g| (g.slowdown_ms, g.scrub_mb_s)).collect();
    let twin_points: Vec<(f64, f64)> = mechanism.iter().map(|g| (g.twin_slowdown_ms, g.twin_scrub_mb_s)).collect();
    Ok(CfqLikeResult {
        slowdown_ms: measured.0,
        scrub_mb_s: measured.1,
        slowdown_ms_runs: slow,
        scrub_mb_s_runs: mb,
        gate_runs: gates,
        cpu_utilisation: cpu,
        waiting_scrub_mb_s_ratio_at_equal_slowdown: model::ratio_at_baseline_slowdown(&points, measured),
        twin_slowdown_ms: twin_baseline.0,
        twin_scrub_mb_s: twin_baseline.1,
        twin_waiting_scrub_mb_s_ratio_at_equal_slowdown: model::ratio_at_baseline_slowdown(&twin_points, twin_baseline),
    })
}

impl Experiment for Report {
    fn name(&self) -> &'static str {
        self.experiment
    }

    /// Per-second series of every disk.
    fn series_csv(&self) -> String {
        let mut out = String::from("cluster,job,run,second,fg_reads,fg_mean_ms,scrub_bytes\n");
        for r in &self.series {
            out.push_str(&format!(
                "{},{},{},{},{},{:.2},{}\n",
                r.cluster, r.job, r.run, r.second, r.fg_reads, r.fg_mean_ms, r.scrub_bytes
            ));
        }
        out
    }

    /// Scrub MB/s against mean slowdown: Waiting's goals and the fixed-rate
    /// sweep, measured and twin (Practical scrubbing Fig. 15).
    fn charts(&self) -> Vec<Chart> {
        let line = |name: &str, tone, dashed, points: Vec<(f64, f64)>| Series {
            name: name.into(),
            color: Tone::color(tone),
            points,
            dashed,
        };
        let sorted = |mut v: Vec<(f64, f64)>| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        let fixed = sorted(self.baseline.iter().map(|b| (b.slowdown_ms, b.scrub_mb_s)).collect());
        let fixed_twin = sorted(self.baseline.iter().map(|b| (b.twin_slowdown_ms, b.twin_scrub_mb_s)).collect());
        let chart = LineChart {
            title: "Scrub throughput against foreground slowdown".into(),
            x_label: "mean foreground slowdown (ms)".into(),
            y_label: "scrub MB/s per disk".into(),
            series: vec![
                line(
                    "Waiting (goals 1, 2, 4 ms)",
                    Tone::Mechanism,
                    false,
                    self.mechanism.iter().map(|g| (g.slowdown_ms, g.scrub_mb_s)).collect(),
                ),
                line(
                    "Waiting, twin",
                    Tone::Mechanism,
                    true,
                    self.mechanism.iter().map(|g| (g.twin_slowdown_ms, g.twin_scrub_mb_s)).collect(),
                ),
                line("fixed rate", Tone::Baseline, false, fixed),
                line("fixed rate, twin", Tone::Baseline, true, fixed_twin),
                line(
                    "CFQ-like (the paper's baseline)",
                    Tone::Tenant(2),
                    false,
                    vec![(self.paper_baseline.slowdown_ms, self.paper_baseline.scrub_mb_s)],
                ),
                line(
                    "CFQ-like, twin",
                    Tone::Tenant(3),
                    false,
                    vec![(self.paper_baseline.twin_slowdown_ms, self.paper_baseline.twin_scrub_mb_s)],
                ),
            ],
            hline: None,
            markers: Vec::new(),
        };
        vec![Chart { file_stem: "waiting-slowdown", chart }]
    }
}

/// Gates as `1024 KiB / 150 ms`, comma-separated (`-` for none).
fn gates(runs: &[Option<GateParams>]) -> String {
    let one = |g: &Option<GateParams>| {
        g.map_or("-".to_string(), |g| format!("{} KiB / {:.0} ms", g.size_bytes >> 10, g.threshold_us as f64 / 1e3))
    };
    runs.iter().map(one).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "waiting: {} s per cluster, median of {} runs side by side ({})",
            self.spec.duration_s, self.runs, self.head_time_bound
        )?;
        for b in &self.baseline {
            writeln!(
                f,
                "fixed rate {:>4.1} % of head time: slowdown {:>5.2} ms, scrub {:>5.1} MB/s (twin {:.2} ms, {:.1} MB/s)",
                b.share_of_head_time * 100.0,
                b.slowdown_ms,
                b.scrub_mb_s,
                b.twin_slowdown_ms,
                b.twin_scrub_mb_s
            )?;
        }
        for g in &self.mechanism {
            writeln!(
                f,
                "Waiting goal {} ms: slowdown {:.2} ms (bar <= {:.2}), scrub {:.1} MB/s = {:.1} x fixed rate at equal \
                 slowdown{} (bar >= 3), free bytes {:.2} of planned (bar >= 0.9), CPU {:.0} %; twin {:.2} ms, {:.1} \
                 MB/s, {:.2}",
                g.goal_ms,
                g.slowdown_ms,
                1.25 * g.goal_ms,
                g.scrub_mb_s,
                g.scrub_mb_s_ratio,
                if g.fixed_rate_extrapolated { " (extrapolated)" } else { "" },
                g.achieved_free_bytes_ratio,
                g.cpu_utilisation * 100.0,
                g.twin_slowdown_ms,
                g.twin_scrub_mb_s,
                g.twin_achieved_free_bytes_ratio
            )?;
            writeln!(
                f,
                "  gate (s, t) at the end per run: {}; twin {}",
                gates(&g.gate_runs),
                gates(&g.twin_gate_runs)
            )?;
        }
        let c = &self.paper_baseline;
        let ratio = |r: Option<f64>| r.map_or("no point".to_string(), |r| format!("{r:.2} x"));
        writeln!(
            f,
            "the paper's baseline, CFQ-like (64 KB after 10 ms idle, never tuned): slowdown {:.2} ms, scrub {:.1} \
             MB/s, CPU {:.0} %; Waiting at no more slowdown: {} (bar >= 3); twin {:.2} ms, {:.1} MB/s, {}",
            c.slowdown_ms,
            c.scrub_mb_s,
            c.cpu_utilisation * 100.0,
            ratio(c.waiting_scrub_mb_s_ratio_at_equal_slowdown),
            c.twin_slowdown_ms,
            c.twin_scrub_mb_s,
            ratio(c.twin_waiting_scrub_mb_s_ratio_at_equal_slowdown)
        )?;
        writeln!(f, "  gate (s, t) at the end per run: {}", gates(&c.gate_runs))?;
        write!(f, "bars met: {:?}", self.bars_met)
    }
}

pub(crate) fn job_name(job: Background) -> String {
    match job {
        Background::Reference => "reference".into(),
        Background::Waiting { goal_us } => format!("waiting-{goal_us}us"),
        Background::FixedRate { share_ppm } => format!("fixed-rate-{share_ppm}ppm"),
        Background::Groups { goal_us } => format!("groups-{goal_us}us"),
        Background::CfqLike => "cfq-like".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::DiskRun;

    #[test]
    fn per_second_rows_average_latency_by_arrival_and_sum_scrub_by_completion() {
        let spec = WaitSpec::quick();
        let fg = [FgRead { at_us: 100_000, bytes: 65_536 }, FgRead { at_us: 900_000, bytes: 65_536 }];
        let m = DiskRun {
            fg_latency_us: vec![Some(10_000), Some(30_000)],
            scrub_done: vec![(1_500_000, 4 << 20)],
            ..DiskRun::default()
        };
        let rows = disks::per_second(&spec, &fg, &m, "baseline", Background::FixedRate { share_ppm: 50_000 }, 2);
        assert_eq!(rows.len() as u64, spec.duration_s);
        assert_eq!((rows[0].fg_reads, rows[0].fg_mean_ms, rows[0].scrub_bytes), (2, 20.0, 0));
        assert_eq!((rows[1].fg_reads, rows[1].scrub_bytes), (0, 4 << 20));
        let report = Report {
            experiment: "waiting",
            runs: 1,
            spec: spec.clone(),
            mechanism: Vec::new(),
            baseline: Vec::new(),
            baseline_cpu_utilisation: 0.0,
            paper_baseline: CfqLikeResult {
                slowdown_ms: 4.5,
                scrub_mb_s: 5.5,
                slowdown_ms_runs: vec![4.5],
                scrub_mb_s_runs: vec![5.5],
                gate_runs: vec![Some(GateParams { size_bytes: 64 << 10, threshold_us: 10_000 })],
                cpu_utilisation: 0.2,
                waiting_scrub_mb_s_ratio_at_equal_slowdown: None,
                twin_slowdown_ms: 4.0,
                twin_scrub_mb_s: 6.0,
                twin_waiting_scrub_mb_s_ratio_at_equal_slowdown: None,
            },
            bars_met: Bars {
                slowdown_at_most_1_25_goal: false,
                scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: false,
                twin_scrub_mb_s_at_least_3x_cfq_like_at_equal_slowdown: false,
                scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: false,
                achieved_free_bytes_at_least_0_9_of_planned: false,
            },
            head_time_bound: String::new(),
            series: rows,
        };
        let csv = report.series_csv();
        assert!(csv.contains("baseline,fixed-rate-50000ppm,2,0,2,20.00,0\n"), "{csv}");
        assert_eq!(csv.lines().count() as u64, 1 + spec.duration_s);
        // Each run's gate, as the node reported it, goes into the report.
        let goal = GoalResult {
            goal_ms: 1.0,
            slowdown_ms: 1.1,
            scrub_mb_s: 9.0,
            fixed_rate_scrub_mb_s_at_equal_slowdown: 3.0,
            fixed_rate_extrapolated: false,
            scrub_mb_s_ratio: 3.0,
            planned_free_bytes: 8,
            achieved_free_bytes: 8,
            achieved_free_bytes_ratio: 1.0,
            slowdown_ms_runs: vec![1.1],
            scrub_mb_s_runs: vec![9.0],
            gate_runs: vec![Some(GateParams { size_bytes: 1 << 20, threshold_us: 150_000 })],
            twin_gate_runs: vec![None],
            cpu_utilisation: 0.2,
            twin_slowdown_ms: 1.0,
            twin_scrub_mb_s: 8.0,
            twin_achieved_free_bytes_ratio: 1.0,
        };
        let report = Report { mechanism: vec![goal], ..report };
        let json = crate::output::json(&report).unwrap();
        assert!(json.contains("\"goal_ms\": 1.0") && json.contains("\"size_bytes\": 1048576"), "{json}");
        assert!(report.to_string().contains("gate (s, t) at the end per run: 1024 KiB / 150 ms; twin -"), "{report}");
        // The paper's baseline is measured, with the gate its node reported.
        assert!(
            json.contains("\"slowdown_ms_runs\": [\n      4.5") && json.contains("\"size_bytes\": 65536"),
            "{json}"
        );
        assert!(report.to_string().contains("slowdown 4.50 ms, scrub 5.5 MB/s"), "{report}");
        assert!(report.to_string().contains("per run: 64 KiB / 10 ms"), "{report}");
    }
}
