//! The Declarative IO paper's simulator evaluation (seed 000 §6.2-6.4) and
//! the thesis' supply and cache studies (seed 001 Fig. 6.15-6.16) as one
//! list of runs, and the table that puts each published number beside the
//! one measured here. `dingo sim paper` runs it and draws the figures.
//!
//! Cluster A is the `cluster-1` preset, cluster B `cluster-2` (the thesis'
//! Table 6.2 mixes; the paper's own Fig. 17 breakdowns are not in its text).
//! Every run uses 48 TB drives, as the paper's Fig. 16a and 18 do.

use crate::ModelSpec;
use crate::mix::Mix;
use crate::sim::{SimConfig, SimError, SimResult, Simulation};
use crate::summary::RunCost;
use crate::sweep::run_distinct;
use dingo_planner::LeftoverPolicy;
use dingo_types::TaskKind;
use serde::Serialize;
use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::Duration;

const TB: u64 = 1_000_000_000_000;
const PB: u64 = 1_000 * TB;
const DAY: f64 = 86_400.0;

/// Scale of the reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct PaperOptions {
    /// Capacity of the two headline runs (Fig. 16, 17, Takeaways 4, 6, 7).
    pub capacity_bytes: u64,
    /// Capacity of every sensitivity run (Fig. 18-21, thesis 6.15-6.16).
    pub sweep_capacity_bytes: u64,
    pub disks_per_node: u32,
    pub days: f64,
    /// Fewer points per sweep (the CI form).
    pub quick: bool,
    pub seed: u64,
}

impl PaperOptions {
    /// The paper's settings: 100 PB headline runs; sweeps at 10 PB, which
    /// gives the 100 PB figures to within a few points (see
    /// docs/REPRODUCTION.md) at a tenth of the time.
    pub fn full() -> PaperOptions {
        PaperOptions {
            capacity_bytes: 100 * PB,
            sweep_capacity_bytes: 10 * PB,
            disks_per_node: 2,
            days: 30.0,
            quick: false,
            seed: 1,
        }
    }

    /// A small cluster and a short horizon, every figure still produced.
    pub fn quick() -> PaperOptions {
        PaperOptions {
            capacity_bytes: 2 * PB,
            sweep_capacity_bytes: 2 * PB,
            disks_per_node: 1,
            days: 3.0,
            quick: true,
            seed: 1,
        }
    }
}

/// The scale `dingo sim paper` asks for: the full or the quick form, with
/// its capacities and seed overridden (with the `clap` feature, the flags).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PaperScale {
    /// Small clusters, a short horizon and few points per sweep (minutes; the CI form).
    #[cfg_attr(feature = "clap", arg(long))]
    pub quick: bool,
    /// Capacity of the two headline runs (default 100PB; 2PB with --quick).
    #[cfg_attr(feature = "clap", arg(long = "capacity", value_name = "CAPACITY", value_parser = dingo_types::parse_bytes))]
    pub capacity_bytes: Option<u64>,
    /// Capacity of the sensitivity runs (default 10PB; 2PB with --quick).
    #[cfg_attr(feature = "clap", arg(long = "sweep-capacity", value_name = "SWEEP_CAPACITY", value_parser = dingo_types::parse_bytes))]
    pub sweep_capacity_bytes: Option<u64>,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Simulations run at once (default: the machine's cores); the results do not depend on it.
    #[cfg_attr(feature = "clap", arg(long))]
    pub jobs: Option<NonZeroUsize>,
}

impl Default for PaperScale {
    /// The full form at seed 1, as `dingo sim paper` runs by default.
    fn default() -> Self {
        PaperScale { quick: false, capacity_bytes: None, sweep_capacity_bytes: None, seed: 1, jobs: None }
    }
}

impl PaperScale {
    /// The simulations to run at once: as asked, else one per core.
    pub fn jobs(&self) -> usize {
        crate::sweep::jobs_or_cores(self.jobs)
    }

    /// [`PaperOptions::full`] or [`PaperOptions::quick`] with what was given.
    pub fn options(&self) -> PaperOptions {
        let form = if self.quick { PaperOptions::quick() } else { PaperOptions::full() };
        PaperOptions {
            capacity_bytes: self.capacity_bytes.unwrap_or(form.capacity_bytes),
            sweep_capacity_bytes: self.sweep_capacity_bytes.unwrap_or(form.sweep_capacity_bytes),
            seed: self.seed,
            ..form
        }
    }
}

/// Cluster A or B of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Cluster {
    A,
    B,
}

impl Cluster {
    pub fn preset(self) -> &'static str {
        match self {
            Cluster::A => "cluster-1",
            Cluster::B => "cluster-2",
        }
    }
}

/// One simulation of the reproduction.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedRun {
    /// The figure it serves (`fig16`, `fig18`, ..., `thesis-6.15`).
    pub figure: &'static str,
    pub cluster: Cluster,
    /// What it varies, e.g. `demand`, `gc-intensity`, `supply`.
    pub parameter: &'static str,
    /// The value of that parameter.
    pub x: f64,
    #[serde(skip)]
    pub config: SimConfig,
}

/// The runs, in order. Identical configurations are run once (see [`run`]).
pub fn plan(options: &PaperOptions) -> Vec<PlannedRun> {
    let base = |cluster: Cluster, capacity: u64| {
        let mut config = SimConfig {
            cluster: ModelSpec {
                raw_capacity: capacity,
                drive_bytes: 48 * TB,
                disks_per_node: options.disks_per_node,
                seed: options.seed,
                ..ModelSpec::default()
            },
            mix: Mix::preset(cluster.preset()).expect("built-in preset"),
            horizon: Duration::from_secs_f64(options.days * DAY),
            ..SimConfig::default()
        };
        // A short horizon keeps 30-day tasks inside it (the quick form).
        config.squeeze_into_horizon();
        config
    };
    let pick = |full: &[f64], quick: &[f64]| if options.quick { quick.to_vec() } else { full.to_vec() };
    let mut runs = Vec::new();
    let mut push =
        |figure, cluster, parameter, x, config| runs.push(PlannedRun { figure, cluster, parameter, x, config });
    for cluster in [Cluster::A, Cluster::B] {
        push("fig16", cluster, "demand", 2.0, base(cluster, options.capacity_bytes));
    }
    let sweep = |cluster| base(cluster, options.sweep_capacity_bytes);
    for cluster in [Cluster::A, Cluster::B] {
        for demand in pick(&[1.0, 2.0, 3.0, 3.5], &[1.0, 3.0]) {
            push("fig18", cluster, "demand", demand, SimConfig { demand_mb_s_per_tb: demand, ..sweep(cluster) });
        }
    }
    for (cluster, task, factors) in [
        (Cluster::B, TaskKind::Scrubbing, pick(&[1.0, 2.0, 4.0], &[1.0, 4.0])),
        (Cluster::A, TaskKind::Rebalancing, pick(&[1.0, 2.0, 4.0], &[1.0, 4.0])),
        (Cluster::A, TaskKind::GarbageCollection, pick(&[1.0, 2.0, 4.0], &[1.0, 2.0])),
    ] {
        for factor in factors {
            let mut config = sweep(cluster);
            config.intensity[task.index()] = factor;
            push("fig19", cluster, intensity_name(task), factor, config);
        }
    }
    for task in [TaskKind::Transcoding, TaskKind::GarbageCollection] {
        for days in pick(&[1.0, 3.0, 5.0, 7.0], &[1.0, 5.0]) {
            let mut config = sweep(Cluster::A);
            config.mix.timing[task.index()].deadline = Duration::from_secs_f64(days * DAY);
            push("fig20", Cluster::A, deadline_name(task), days, config);
        }
    }
    // A budget that binds: supply equal to the demand, swinging ±50 %.
    let diurnal = SimConfig { diurnal_amplitude: 0.5, supply_mb_s_per_tb: Some(2.0), ..sweep(Cluster::A) };
    push("fig21", Cluster::A, "diurnal-amplitude", 0.5, diurnal);
    // Thesis: demand 1.21 (cluster 1) and 1.6 (cluster 2) MB/s/TB, the
    // planner filling its budget (T:2053-2057), supply varied.
    for (cluster, demand) in [(Cluster::A, 1.21), (Cluster::B, 1.6)] {
        for supply in pick(&[0.5, 0.75, 1.0, 1.5, 2.0], &[0.75, 1.5]) {
            let config = SimConfig {
                demand_mb_s_per_tb: demand,
                supply_mb_s_per_tb: Some(supply),
                leftover: LeftoverPolicy::Fill,
                ..sweep(cluster)
            };
            push("thesis-6.15", cluster, "supply", supply, config);
        }
    }
    for cache_gb in pick(&[0.256, 1.0, 4.0], &[0.256, 4.0]) {
        let config = SimConfig {
            demand_mb_s_per_tb: 1.21,
            supply_mb_s_per_tb: Some(0.75),
            leftover: LeftoverPolicy::Fill,
            cache_per_disk: (cache_gb * 1e9) as u64,
            ..sweep(Cluster::A)
        };
        push("thesis-6.16", Cluster::A, "cache-gb-per-disk", cache_gb, config);
    }
    runs
}

fn intensity_name(task: TaskKind) -> &'static str {
    match task {
        TaskKind::Scrubbing => "scrubbing-intensity",
        TaskKind::Rebalancing => "rebalancing-intensity",
        _ => "gc-intensity",
    }
}

fn deadline_name(task: TaskKind) -> &'static str {
    if task == TaskKind::Transcoding { "transcoding-deadline-days" } else { "gc-deadline-days" }
}

/// Every run's result, in [`plan`]'s order.
pub struct PaperRuns {
    pub options: PaperOptions,
    pub runs: Vec<(PlannedRun, SimResult)>,
}

/// Runs the plan, up to `jobs` simulations at once (the results do not
/// depend on it); `progress(started, n, run)` is called as each simulation
/// starts, with the number started so far.
pub fn run(
    options: &PaperOptions,
    jobs: usize,
    progress: impl FnMut(usize, usize, &PlannedRun) + Send,
) -> Result<PaperRuns, SimError> {
    let planned = plan(options);
    let progress = Mutex::new((0, progress));
    let results = run_distinct(planned.iter().map(|p| &p.config), jobs, |i, config| {
        {
            let mut guard = progress.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let (started, report) = &mut *guard;
            report(*started, planned.len(), &planned[i]);
            *started += 1;
        }
        Simulation::new(config.clone())?.run(|_| {})
    })?;
    Ok(PaperRuns { options: options.clone(), runs: planned.into_iter().zip(results).collect() })
}

/// The figures of the sensitivity runs that are one chart each:
/// `(figure, parameter, x-axis label)`.
pub const SWEEP_FIGURES: [(&str, &str, &str); 8] = [
    ("fig18", "demand", "maintenance demand (MB/s per TB)"),
    ("fig19", "scrubbing-intensity", "scrubbing intensity (×)"),
    ("fig19", "rebalancing-intensity", "rebalancing intensity (×)"),
    ("fig19", "gc-intensity", "garbage-collection intensity (×)"),
    ("fig20", "transcoding-deadline-days", "transcoding deadline (days)"),
    ("fig20", "gc-deadline-days", "garbage-collection deadline (days)"),
    ("thesis-6.15", "supply", "planner supply (MB/s per TB)"),
    ("thesis-6.16", "cache-gb-per-disk", "cache per disk (GB)"),
];

/// The runs drawn as single runs (every figure of a run): the headline
/// runs and the diurnal one.
pub const SINGLE_RUN_FIGURES: [&str; 2] = ["fig16", "fig21"];

/// What `dingo sim paper --json` prints and `paper.json` holds.
#[derive(Clone, Debug, Serialize)]
pub struct PaperSummary {
    pub options: PaperOptions,
    pub rows: Vec<Row>,
    #[serde(flatten)]
    pub cost: RunCost,
}

/// One published number beside the measured one.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub figure: String,
    pub quantity: String,
    pub published: String,
    pub measured: String,
    /// The measured figure as a number (a fraction for percentages), where it is one.
    pub measured_value: Option<f64>,
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1} %", v * 100.0))
}

impl PaperRuns {
    pub fn of(&self, figure: &str, cluster: Cluster) -> impl Iterator<Item = &(PlannedRun, SimResult)> {
        self.runs.iter().filter(move |(p, _)| p.figure == figure && p.cluster == cluster)
    }

    fn at(&self, figure: &str, cluster: Cluster, parameter: &str, x: f64) -> Option<&SimResult> {
        self.of(figure, cluster).find(|(p, _)| p.parameter == parameter && (p.x - x).abs() < 1e-9).map(|(_, r)| r)
    }

    /// The published-vs-measured table.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut row = |figure: &str, quantity: String, published: &str, value: Option<f64>, measured: String| {
            rows.push(Row {
                figure: figure.into(),
                quantity,
                published: published.into(),
                measured,
                measured_value: value,
            })
        };
        for (cluster, dingo_util, wall, savings) in [
            (Cluster::A, "34.8 % (\"as low as\")", "64 TB (1.7×)", "up to 45 % (28-51 % over both)"),
            (Cluster::B, "not stated (58 TB wall ⇒ about 41 %)", "58 TB (1.5×)", "28-51 % over both clusters"),
        ] {
            let Some(r) = self.of("fig16", cluster).next().map(|(_, r)| r) else { continue };
            let name = format!("cluster {cluster:?}");
            let util = |m: Option<&crate::sim::ModeResult>| m.map(|m| m.utilization);
            let imp = util(r.modes.imperative.as_ref());
            let decl = util(r.modes.declarative.as_ref());
            row("Fig. 16a", format!("{name}: imperative utilisation, 2 MB/s/TB, 48 TB"), "64 %", imp, pct(imp));
            row("Fig. 16a", format!("{name}: DINGO utilisation"), dingo_util, decl, pct(decl));
            let c = &r.comparisons;
            let skip = c.savings_vs_imperative_skip_deleted;
            row(
                "Takeaway 3/4",
                format!("{name}: savings vs imperative"),
                savings,
                c.savings_vs_imperative,
                format!("{} (vs skip-deleted imperative: {})", pct(c.savings_vs_imperative), pct(skip)),
            );
            let tb =
                |m: Option<&crate::sim::ModeResult>| m.and_then(|m| m.io_wall_drive_bytes).map(|b| b as f64 / 1e12);
            let (imp_wall, decl_wall) = (tb(r.modes.imperative.as_ref()), tb(r.modes.declarative.as_ref()));
            let ratio = imp_wall.zip(decl_wall).map(|(i, d)| d / i);
            row(
                "Fig. 16b",
                format!("{name}: IO wall, imperative / DINGO"),
                &format!("36 TB / {wall}"),
                decl_wall,
                format!(
                    "{:.1} TB / {:.1} TB ({:.2}×)",
                    imp_wall.unwrap_or(0.0),
                    decl_wall.unwrap_or(0.0),
                    ratio.unwrap_or(0.0)
                ),
            );
            let elide = c.gap_to_optimal_elide_deleted;
            row(
                "Takeaway 4",
                format!("{name}: gap to optimal"),
                "within 5 %",
                c.gap_to_optimal,
                format!("{} (vs elide-deleted optimal: {})", pct(c.gap_to_optimal), pct(elide)),
            );
            let rebal = r.modes.declarative.as_ref().map(|d| d.task(TaskKind::Rebalancing));
            let paid = rebal.filter(|t| t.logical_bytes > 0).map(|t| t.disk_bytes as f64 / t.logical_bytes as f64);
            row(
                "Takeaway 6",
                format!("{name}: rebalancing reads paid from disk"),
                "0 (\"completely free\")",
                paid,
                pct(paid),
            );
            let scrub = r.churn.scrub_deleted_fraction;
            row(
                "Takeaway 7",
                format!("{name}: scrubbing's declared bytes deleted before read"),
                "about 26 %",
                scrub,
                pct(scrub),
            );
        }
        for (cluster, published) in
            [(Cluster::A, "39-51 %, more at higher demand"), (Cluster::B, "28-46 %, more at higher demand")]
        {
            let points: Vec<String> = self
                .of("fig18", cluster)
                .map(|(p, r)| format!("{}: {}", p.x, pct(r.comparisons.savings_vs_imperative)))
                .collect();
            let first = self.of("fig18", cluster).next().and_then(|(_, r)| r.comparisons.savings_vs_imperative);
            row(
                "Fig. 18",
                format!("cluster {cluster:?}: savings by demand (MB/s/TB)"),
                published,
                first,
                points.join(", "),
            );
        }
        for (demand, published) in [(1.0, "22 %"), (3.0, "over 90 %")] {
            let imp = self
                .at("fig18", Cluster::A, "demand", demand)
                .and_then(|r| r.modes.imperative.as_ref())
                .map(|m| m.utilization);
            row("Fig. 18", format!("imperative utilisation at {demand} MB/s/TB"), published, imp, pct(imp));
        }
        let decl_disk =
            |r: Option<&SimResult>| r.and_then(|r| r.modes.declarative.as_ref()).map(|m| m.disk_bytes as f64);
        let imp_disk = |r: Option<&SimResult>| r.and_then(|r| r.modes.imperative.as_ref()).map(|m| m.disk_bytes as f64);
        let top = |parameter: &str, cluster| {
            self.of("fig19", cluster).filter(|(p, _)| p.parameter == parameter).map(|(p, _)| p.x).fold(1.0, f64::max)
        };
        let base_b = self.at("fig19", Cluster::B, "scrubbing-intensity", 1.0);
        let scrub_top = top("scrubbing-intensity", Cluster::B);
        let more = decl_disk(self.at("fig19", Cluster::B, "scrubbing-intensity", scrub_top))
            .zip(decl_disk(base_b))
            .map(|(hi, lo)| hi / lo - 1.0);
        row(
            "Fig. 19",
            format!("cluster B: extra DINGO IO to scrub ×{scrub_top}"),
            "virtually none (×4)",
            more,
            pct(more),
        );
        let rebal_top = top("rebalancing-intensity", Cluster::A);
        let r4 = self.at("fig19", Cluster::A, "rebalancing-intensity", rebal_top);
        let below = decl_disk(r4).zip(imp_disk(r4)).map(|(d, i)| 1.0 - d / i);
        row(
            "Fig. 19",
            format!("cluster A: rebalancing ×{rebal_top}, DINGO IO below imperative's"),
            "45 % (×4)",
            below,
            pct(below),
        );
        let gc2 = self.at("fig19", Cluster::A, "gc-intensity", 2.0);
        let gc1 = self.at("fig19", Cluster::A, "gc-intensity", 1.0);
        let ratio = decl_disk(gc2).zip(imp_disk(gc1)).map(|(d, i)| d / i);
        row(
            "Fig. 19",
            "cluster A: DINGO IO with GC ×2 over imperative IO with GC ×1".into(),
            "about 1 (same IO)",
            ratio,
            ratio.map_or("–".into(), |v| format!("{v:.2}")),
        );
        let util = |r: Option<&SimResult>| r.and_then(|r| r.modes.declarative.as_ref()).map(|m| m.utilization);
        let days: Vec<f64> = self
            .of("fig20", Cluster::A)
            .filter(|(p, _)| p.parameter == "transcoding-deadline-days")
            .map(|(p, _)| p.x)
            .collect();
        if let (Some(&lo), Some(&hi)) = (days.first(), days.last()) {
            let drop = util(self.at("fig20", Cluster::A, "transcoding-deadline-days", hi))
                .zip(util(self.at("fig20", Cluster::A, "transcoding-deadline-days", lo)))
                .map(|(h, l)| 1.0 - h / l);
            row(
                "Fig. 20",
                format!("cluster A: DINGO utilisation, transcoding deadline {lo} d → {hi} d"),
                "about 7 % lower (1 → 7 d)",
                drop,
                format!("{} lower", pct(drop)),
            );
        }
        if let Some((_, r)) = self.of("fig21", Cluster::A).next() {
            let series = r.modes.declarative.as_ref().map(|m| &m.series);
            let peak = series.and_then(|s| {
                s.iter()
                    .filter_map(|p| Some(p.planned_disk_bytes? as f64 / p.budget_bytes?.max(1) as f64))
                    .reduce(f64::max)
            });
            row(
                "Fig. 21",
                "diurnal supply (±50 %): most of a quantum's budget scheduled; quanta over it".into(),
                "always under the quota",
                peak,
                format!("{} of the budget at most; {} quanta over", pct(peak), r.over_budget_quanta),
            );
        }
        for (cluster, published) in [
            (Cluster::A, "up to 40 % at supply 1.0; up to 70 % at very low supply; 0.5 misses deadlines (demand 1.21)"),
            (Cluster::B, "as cluster 1 (demand 1.6)"),
        ] {
            let points: Vec<String> = self
                .of("thesis-6.15", cluster)
                .map(|(p, r)| {
                    let misses = r.modes.declarative.as_ref().map_or(0, |m| m.deadline_misses);
                    format!("{}: {} ({misses} misses)", p.x, pct(r.comparisons.savings_vs_imperative))
                })
                .collect();
            let first = self.of("thesis-6.15", cluster).next().and_then(|(_, r)| r.comparisons.savings_vs_imperative);
            row(
                "Thesis Fig. 6.15",
                format!("cluster {cluster:?}: savings by supply (MB/s/TB)"),
                published,
                first,
                points.join(", "),
            );
        }
        let points: Vec<String> = self
            .of("thesis-6.16", Cluster::A)
            .map(|(p, r)| format!("{} GB: {}", p.x, pct(r.comparisons.savings_vs_imperative)))
            .collect();
        let first = self.of("thesis-6.16", Cluster::A).next().and_then(|(_, r)| r.comparisons.savings_vs_imperative);
        row(
            "Thesis Fig. 6.16",
            "cluster A: savings by cache per disk (supply 0.75)".into(),
            "8 MB per disk (one 8 MB block) suffices",
            first,
            points.join(", "),
        );
        rows
    }

    /// The published-vs-measured table with what the runs cost.
    pub fn summary(&self, cost: RunCost) -> PaperSummary {
        PaperSummary { options: self.options.clone(), rows: self.rows(), cost }
    }

    /// Per cluster that has points of `parameter` in `figure`: `(x, result)` by x.
    pub fn sweep_points(&self, figure: &str, parameter: &str) -> Vec<(Cluster, Vec<(f64, &SimResult)>)> {
        [Cluster::A, Cluster::B]
            .into_iter()
            .map(|cluster| {
                let points =
                    self.of(figure, cluster).filter(|(p, _)| p.parameter == parameter).map(|(p, r)| (p.x, r)).collect();
                (cluster, points)
            })
            .filter(|(_, points): &(Cluster, Vec<_>)| !points.is_empty())
            .collect()
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        let o = &self.options;
        let mut out = format!(
            "# Declarative IO paper: published vs measured\n\nHeadline runs at {} PB, sensitivity runs at {} PB, {} days, 48 TB drives, seed {}{}.\n\n",
            o.capacity_bytes / PB,
            o.sweep_capacity_bytes / PB,
            o.days,
            o.seed,
            if o.quick { " (quick form: small cluster, short horizon, few points; not the paper's scale)" } else { "" }
        );
        out.push_str("| figure | quantity | published | measured |\n|---|---|---|---|\n");
        for r in self.rows() {
            let _ = writeln!(out, "| {} | {} | {} | {} |", r.figure, r.quantity, r.published, r.measured);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_covers_every_figure_and_the_quick_form_is_smaller() {
        let full = plan(&PaperOptions::full());
        let quick = plan(&PaperOptions::quick());
        for figure in ["fig16", "fig18", "fig19", "fig20", "fig21", "thesis-6.15", "thesis-6.16"] {
            assert!(full.iter().any(|p| p.figure == figure), "{figure}");
            assert!(quick.iter().any(|p| p.figure == figure), "{figure}");
        }
        assert!(quick.len() < full.len());
        assert!(full.iter().all(|p| p.config.cluster.drive_bytes == 48 * TB));
        let headline = full.iter().filter(|p| p.figure == "fig16").count();
        assert_eq!(headline, 2);
        assert!(full.iter().filter(|p| p.figure == "fig16").all(|p| p.config.cluster.raw_capacity == 100 * PB));
        let supply = full.iter().find(|p| p.figure == "thesis-6.15").unwrap();
        assert_eq!(supply.config.leftover, LeftoverPolicy::Fill);
    }

    #[test]
    fn a_scale_overrides_only_what_it_gives() {
        let quick = PaperScale { quick: true, capacity_bytes: Some(3 * PB), seed: 7, ..PaperScale::default() };
        let options = quick.options();
        assert!(options.quick);
        assert_eq!((options.capacity_bytes, options.sweep_capacity_bytes, options.seed), (3 * PB, 2 * PB, 7));
        assert_eq!(PaperScale::default().options().capacity_bytes, 100 * PB);
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(PaperScale::default().jobs(), cores);
        assert_eq!(PaperScale { jobs: NonZeroUsize::new(3), ..PaperScale::default() }.jobs(), 3);
    }
}
