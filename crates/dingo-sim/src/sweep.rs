//! Sweeps: one parameter of a base configuration varied over a list of
//! values, every point a full simulation, and the summary of the results
//! (with each mode's IO wall when the drive size varies).

use crate::sim::{Mode, SimConfig, SimResult, io_wall_search};
use crate::summary::ModeSummary;
use dingo_types::{ByteSizeError, TaskKind, format_bytes, parse_bytes};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use thiserror::Error;

/// The parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SweepKind {
    /// Maintenance demand in MB/s per TB (default 1.0 to 3.5).
    Demand,
    /// ×factor of garbage collection, rebalancing and scrubbing, each alone (default 1, 2, 4).
    Intensity,
    /// Deadline in days of garbage collection and transcoding, each alone (default 1, 3, 5, 7).
    Deadline,
    /// Diurnal swing of the planner's budget (default 0, 0.25, 0.5, 0.75).
    Diurnal,
    /// Cache per disk (default 256MB, 1GB, 4GB, 16GB).
    Cache,
    /// Drive size (default 16TB to 96TB); finds each mode's IO wall.
    DriveSize,
    /// The planner's budget as a supply in MB/s per TB (default 0.5 to 3);
    /// use with --leftover fill for the thesis' Fig. 6.15.
    Supply,
}

impl SweepKind {
    /// The values a sweep tries when the caller names none: numbers, or
    /// sizes for `Cache` and `DriveSize`.
    pub fn default_values(self) -> &'static [&'static str] {
        match self {
            SweepKind::Demand => &["1.0", "1.5", "2.0", "2.5", "3.0", "3.5"],
            SweepKind::Intensity => &["1", "2", "4"],
            SweepKind::Deadline => &["1", "3", "5", "7"],
            SweepKind::Diurnal => &["0", "0.25", "0.5", "0.75"],
            SweepKind::Cache => &["256MB", "1GB", "4GB", "16GB"],
            SweepKind::DriveSize => &["16TB", "24TB", "32TB", "48TB", "64TB", "96TB"],
            SweepKind::Supply => &["0.5", "0.75", "1.0", "1.5", "2.0", "3.0"],
        }
    }

    /// What the x axis shows, with its unit.
    pub fn x_label(self) -> &'static str {
        match self {
            SweepKind::Demand => "maintenance demand (MB/s per TB)",
            SweepKind::Intensity => "task intensity (× its share of the demand)",
            SweepKind::Deadline => "deadline (days)",
            SweepKind::Diurnal => "diurnal budget swing (amplitude)",
            SweepKind::Cache => "cache per disk (GB)",
            SweepKind::DriveSize => "drive size (TB)",
            SweepKind::Supply => "planner supply (MB/s per TB)",
        }
    }

    /// The tasks varied one at a time, each its own line; empty when the
    /// parameter is cluster-wide.
    pub fn tasks(self) -> &'static [TaskKind] {
        match self {
            SweepKind::Intensity => &[TaskKind::GarbageCollection, TaskKind::Rebalancing, TaskKind::Scrubbing],
            SweepKind::Deadline => &[TaskKind::GarbageCollection, TaskKind::Transcoding],
            _ => &[],
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum SweepError {
    #[error("`{0}` is not a number")]
    NotANumber(String),
    #[error("`{0}` must be a non-negative number")]
    Negative(String),
    #[error(transparent)]
    Size(#[from] ByteSizeError),
    #[error("deadlines must be a positive number of days")]
    BadDeadline,
    #[error("the supply must be positive")]
    ZeroSupply,
}

/// One point of a sweep: its configuration and where it goes on the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// The line it belongs to: the task varied, for intensity and deadline sweeps.
    pub line: Option<TaskKind>,
    /// The value on the x axis, in [`SweepKind::x_label`]'s unit.
    pub x: f64,
    pub config: SimConfig,
}

fn number(s: &str) -> Result<f64, SweepError> {
    let v: f64 = s.trim().parse().map_err(|_| SweepError::NotANumber(s.to_string()))?;
    if !v.is_finite() || v < 0.0 {
        return Err(SweepError::Negative(s.to_string()));
    }
    Ok(v)
}

/// The points of a sweep of `kind` over `values` around `base`: per task
/// then per value for the per-task kinds, per value otherwise.
pub fn points(kind: SweepKind, values: &[impl AsRef<str>], base: &SimConfig) -> Result<Vec<SweepPoint>, SweepError> {
    let mut out = Vec::new();
    for &task in kind.tasks() {
        for v in values {
            let x = number(v.as_ref())?;
            let mut config = base.clone();
            if kind == SweepKind::Intensity {
                config.intensity[task.index()] = x;
            } else {
                config.mix.timing[task.index()].deadline = Duration::try_from_secs_f64(x * 86_400.0)
                    .ok()
                    .filter(|_| x > 0.0)
                    .ok_or(SweepError::BadDeadline)?;
            }
            out.push(SweepPoint { line: Some(task), x, config });
        }
    }
    if !kind.tasks().is_empty() {
        return Ok(out);
    }
    for v in values {
        let v = v.as_ref();
        let mut config = base.clone();
        let x = match kind {
            SweepKind::Demand => {
                config.demand_mb_s_per_tb = number(v)?;
                config.demand_mb_s_per_tb
            }
            SweepKind::Diurnal => {
                config.diurnal_amplitude = number(v)?;
                config.diurnal_amplitude
            }
            SweepKind::Cache => {
                config.cache_per_disk = parse_bytes(v)?;
                config.cache_per_disk as f64 / 1e9
            }
            SweepKind::DriveSize => {
                config.cluster.drive_bytes = parse_bytes(v)?;
                config.cluster.drive_bytes as f64 / 1e12
            }
            SweepKind::Supply => {
                let supply = number(v)?;
                if supply <= 0.0 {
                    return Err(SweepError::ZeroSupply);
                }
                config.supply_mb_s_per_tb = Some(supply);
                supply
            }
            SweepKind::Intensity | SweepKind::Deadline => unreachable!("per-task kinds returned above"),
        };
        out.push(SweepPoint { line: None, x, config });
    }
    Ok(out)
}

/// The simulations to run at once: as asked, else one per core.
pub fn jobs_or_cores(jobs: Option<NonZeroUsize>) -> usize {
    jobs.or_else(|| std::thread::available_parallelism().ok()).map_or(1, NonZeroUsize::get)
}

/// Which configurations of a list are the same.
pub struct Distinct {
    /// `first_index[d]`: the first index naming distinct configuration `d`,
    /// the one [`run_distinct`] simulates.
    pub first_index: Vec<usize>,
    /// `distinct_of[i]`: the distinct configuration index `i` names.
    pub distinct_of: Vec<usize>,
}

impl Distinct {
    pub fn of(configs: &[&SimConfig]) -> Distinct {
        let mut first_index: Vec<usize> = Vec::new();
        let distinct_of = (0..configs.len())
            .map(|i| {
                first_index.iter().position(|&f| configs[f] == configs[i]).unwrap_or_else(|| {
                    first_index.push(i);
                    first_index.len() - 1
                })
            })
            .collect();
        Distinct { first_index, distinct_of }
    }
}

/// Simulates each configuration with `simulate(index, config)` and returns
/// the results in the configurations' order; identical configurations (×1
/// of every task, say) are simulated once, by the first index that names
/// them. Up to `jobs` simulations run at once, each on a thread of its own:
/// every simulation is seeded by its configuration alone, so the results do
/// not depend on `jobs`. The first error stops further simulations from
/// starting and is returned.
///
/// Written on `std::thread::scope` rather than with rayon: a shared counter
/// hands out the distinct configurations, a dozen lines for the one
/// parallel loop the simulator's drivers have.
pub fn run_distinct<'a, E: Send>(
    configs: impl IntoIterator<Item = &'a SimConfig>,
    jobs: usize,
    simulate: impl Fn(usize, &SimConfig) -> Result<SimResult, E> + Sync,
) -> Result<Vec<SimResult>, E> {
    let configs: Vec<&SimConfig> = configs.into_iter().collect();
    let Distinct { first_index, distinct_of } = Distinct::of(&configs);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // Each worker takes the next distinct configuration until none is left
    // or one has failed; it returns what it simulated, by distinct index.
    let worker = || {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let d = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = first_index.get(d) else { break };
            let result = simulate(i, configs[i]);
            failed.fetch_or(result.is_err(), Ordering::Relaxed);
            done.push((d, result));
        }
        done
    };
    let mut done = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..jobs.clamp(1, first_index.len().max(1))).map(|_| scope.spawn(worker)).collect();
        let mut done = worker();
        for helper in helpers {
            done.extend(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        done
    });
    // Distinct configurations are handed out in order, so after a failure
    // every one not simulated comes after a failed one: sorted, the first
    // error is met before any gap.
    done.sort_by_key(|(d, _)| *d);
    let mut distinct = Vec::with_capacity(done.len());
    for (d, result) in done {
        assert_eq!(d, distinct.len(), "distinct configuration {d} was simulated, an earlier one was not");
        distinct.push(result?);
    }
    Ok(distinct_of.into_iter().map(|d| distinct[d].clone()).collect())
}

/// One point's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointSummary {
    pub task: Option<&'static str>,
    pub value: f64,
    pub modes: BTreeMap<&'static str, ModeSummary>,
    pub savings_vs_imperative: Option<f64>,
    pub gap_to_optimal: Option<f64>,
    pub over_budget_quanta: u64,
}

impl PointSummary {
    /// The mean disk-head utilisation of `mode` at this point, if simulated.
    pub fn utilization(&self, mode: Mode) -> Option<f64> {
        self.modes.get(mode.name()).map(|m| m.utilization)
    }

    /// Declarative's missed deadlines (0 if not simulated).
    pub fn declarative_misses(&self) -> u64 {
        self.modes.get(Mode::Declarative.name()).map_or(0, |m| m.deadline_misses)
    }

    /// The point as table cells: task, value, each mode's utilisation,
    /// savings, gap to optimal (percentages, `-` if absent), declarative's
    /// misses, quanta over budget.
    pub fn cells(&self) -> [String; 9] {
        let percent = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        [
            self.task.unwrap_or("-").to_string(),
            self.value.to_string(),
            percent(self.utilization(Mode::Imperative)),
            percent(self.utilization(Mode::Declarative)),
            percent(self.utilization(Mode::Optimal)),
            percent(self.savings_vs_imperative),
            percent(self.gap_to_optimal),
            self.declarative_misses().to_string(),
            self.over_budget_quanta.to_string(),
        ]
    }
}

/// A sweep's results; field order is the JSON's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepSummary {
    pub sweep: SweepKind,
    pub mix: String,
    pub capacity_bytes: u64,
    pub points: Vec<PointSummary>,
    /// Drive-size sweeps: per mode, the largest simulated drive size under
    /// 50 % utilisation with no missed deadline (`None`: not even the smallest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_wall_drive_bytes: Option<BTreeMap<&'static str, Option<u64>>>,
}

/// Summarises `results`, in the order of `points`.
pub fn summarize(kind: SweepKind, base: &SimConfig, points: &[SweepPoint], results: &[SimResult]) -> SweepSummary {
    let point_summaries = points
        .iter()
        .zip(results)
        .map(|(p, r)| PointSummary {
            task: p.line.map(TaskKind::name),
            value: p.x,
            modes: r.mode_summaries(),
            savings_vs_imperative: r.comparisons.savings_vs_imperative,
            gap_to_optimal: r.comparisons.gap_to_optimal,
            over_budget_quanta: r.over_budget_quanta,
        })
        .collect();
    let io_wall_drive_bytes = (kind == SweepKind::DriveSize).then(|| {
        Mode::ALL
            .iter()
            .map(|&mode| {
                let samples: Vec<(u64, f64, u64)> = results
                    .iter()
                    .filter_map(|r| r.modes.get(mode).map(|m| (r.drive_bytes, m.utilization, m.deadline_misses)))
                    .collect();
                (mode.name(), io_wall_search(&samples))
            })
            .collect()
    });
    SweepSummary {
        sweep: kind,
        mix: base.mix.name.clone(),
        capacity_bytes: base.cluster.raw_capacity,
        points: point_summaries,
        io_wall_drive_bytes,
    }
}

/// A wall as text: a size, or that even the smallest size was over the line.
pub fn wall_text(wall: Option<u64>) -> String {
    wall.map_or("below the smallest size".into(), format_bytes)
}

impl SweepSummary {
    /// The sweep as a text table: per point, each mode's utilisation, the
    /// comparisons and declarative's misses; then the walls.
    pub fn table(&self) -> String {
        let mut out =
            format!("sweep {} ({} mix, {})\n", self.sweep.x_label(), self.mix, format_bytes(self.capacity_bytes));
        let _ = writeln!(
            out,
            "  {:<20} {:>8} {:>12} {:>12} {:>12} {:>9} {:>8} {:>7}",
            "task", "value", "imperative", "declarative", "optimal", "savings", "gap", "misses"
        );
        for p in &self.points {
            let [task, value, imperative, declarative, optimal, savings, gap, misses, _] = p.cells();
            let _ = writeln!(
                out,
                "  {task:<20} {value:>8} {imperative:>12} {declarative:>12} {optimal:>12} {savings:>9} {gap:>8} {misses:>7}"
            );
        }
        for (mode, wall) in self.io_wall_drive_bytes.iter().flatten() {
            let _ = writeln!(out, "  IO wall ({mode}): {}", wall_text(*wall));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sim_result;

    #[test]
    fn cluster_wide_points_set_one_field_each() {
        let base = SimConfig::default();
        let cache = points(SweepKind::Cache, &["256MB", "4GB"], &base).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache[0].config.cache_per_disk, 256_000_000);
        assert_eq!((cache[1].x, cache[1].line), (4.0, None));
        assert_eq!(SimConfig { cache_per_disk: base.cache_per_disk, ..cache[1].config.clone() }, base);
        let supply = points(SweepKind::Supply, &["1.5"], &base).unwrap();
        assert_eq!(supply[0].config.supply_mb_s_per_tb, Some(1.5));
        let drives = points(SweepKind::DriveSize, &["16TB"], &base).unwrap();
        assert_eq!((drives[0].config.cluster.drive_bytes, drives[0].x), (16_000_000_000_000, 16.0));
    }

    #[test]
    fn per_task_points_vary_one_task_at_a_time() {
        let base = SimConfig::default();
        let intensity = points(SweepKind::Intensity, &["1", "4"], &base).unwrap();
        assert_eq!(intensity.len(), 3 * 2);
        let gc = TaskKind::GarbageCollection.index();
        assert_eq!(intensity[1].line, Some(TaskKind::GarbageCollection));
        assert_eq!(intensity[1].config.intensity[gc], 4.0);
        assert_eq!(intensity[1].config.intensity.iter().filter(|&&f| f != 1.0).count(), 1);
        let deadline = points(SweepKind::Deadline, &["2"], &base).unwrap();
        let t = TaskKind::Transcoding.index();
        assert_eq!(deadline[1].config.mix.timing[t].deadline, Duration::from_secs(2 * 86_400));
        assert_eq!(deadline[1].config.mix.timing[gc], base.mix.timing[gc], "only the line's task changes");
    }

    #[test]
    fn bad_values_are_refused() {
        let base = SimConfig::default();
        assert_eq!(points(SweepKind::Demand, &["x"], &base), Err(SweepError::NotANumber("x".into())));
        assert_eq!(points(SweepKind::Diurnal, &["-1"], &base), Err(SweepError::Negative("-1".into())));
        assert_eq!(points(SweepKind::Deadline, &["0"], &base), Err(SweepError::BadDeadline));
        // Regression: a huge deadline panicked in `Duration::from_secs_f64`.
        assert_eq!(points(SweepKind::Deadline, &["1e300"], &base), Err(SweepError::BadDeadline));
        assert_eq!(points(SweepKind::Supply, &["0"], &base), Err(SweepError::ZeroSupply));
        assert!(matches!(points(SweepKind::Cache, &["lots"], &base), Err(SweepError::Size(_))));
    }

    #[test]
    fn every_default_value_parses() {
        let base = SimConfig::default();
        for kind in [
            SweepKind::Demand,
            SweepKind::Intensity,
            SweepKind::Deadline,
            SweepKind::Diurnal,
            SweepKind::Cache,
            SweepKind::DriveSize,
            SweepKind::Supply,
        ] {
            let n = points(kind, kind.default_values(), &base).unwrap().len();
            assert_eq!(n, kind.default_values().len() * kind.tasks().len().max(1), "{kind:?}");
        }
    }

    #[test]
    fn identical_configurations_run_once() {
        let base = SimConfig::default();
        let points = points(SweepKind::Intensity, &["1", "2"], &base).unwrap();
        // The simulated index stands in the result, to check the order.
        let simulate = |i: usize, _: &SimConfig| Ok::<_, ()>(SimResult { seed: i as u64, ..sim_result() });
        for jobs in [1, 2, 3, 8] {
            let simulated = std::sync::Mutex::new(Vec::new());
            let results = run_distinct(points.iter().map(|p| &p.config), jobs, |i, c| {
                simulated.lock().unwrap().push(i);
                simulate(i, c)
            })
            .unwrap();
            // The ×1 point of every task is the base configuration: point 0.
            let seeds: Vec<u64> = results.iter().map(|r| r.seed).collect();
            assert_eq!(seeds, [0, 1, 0, 3, 0, 5], "jobs {jobs}");
            let mut simulated = simulated.into_inner().unwrap();
            simulated.sort();
            assert_eq!(simulated, [0, 1, 3, 5], "jobs {jobs}");
        }
    }

    #[test]
    fn the_first_error_is_returned_and_stops_later_simulations() {
        let base = SimConfig::default();
        let points = points(SweepKind::Demand, &["1", "2", "3", "4", "5", "6"], &base).unwrap();
        for jobs in [1, 2] {
            let started = AtomicUsize::new(0);
            let outcome = run_distinct(points.iter().map(|p| &p.config), jobs, |i, _| {
                started.fetch_add(1, Ordering::Relaxed);
                if i >= 1 { Err(i) } else { Ok(sim_result()) }
            });
            assert_eq!(outcome.unwrap_err(), 1, "jobs {jobs}");
            // Each worker stops at its first failure.
            assert!(started.into_inner() <= 1 + jobs, "jobs {jobs}");
        }
    }

    #[test]
    fn the_summary_has_a_point_per_result_and_walls_for_drive_sizes() {
        let base = SimConfig::default();
        let points = points(SweepKind::DriveSize, &["16TB", "32TB"], &base).unwrap();
        let mut small = sim_result();
        small.drive_bytes = 16;
        let mut large = sim_result();
        large.drive_bytes = 32;
        // Over the line at the larger drive in imperative mode only.
        large.modes.imperative.as_mut().unwrap().utilization = 0.6;
        let summary = summarize(SweepKind::DriveSize, &base, &points, &[small, large]);
        assert_eq!(summary.points.len(), 2);
        assert_eq!(summary.points[1].value, 32.0);
        assert_eq!(summary.points[1].utilization(Mode::Imperative), Some(0.6));
        let table = summary.table();
        assert!(table.contains("  IO wall (imperative): 16 B"), "{table}");
        assert_eq!(table.lines().count(), 2 + 2 + 3, "{table}");
        let walls = summary.io_wall_drive_bytes.unwrap();
        assert_eq!(walls["imperative"], Some(16));
        assert_eq!(walls["declarative"], Some(32));
        let cache = super::points(SweepKind::Cache, &["1GB"], &base).unwrap();
        assert!(summarize(SweepKind::Cache, &base, &cache, &[sim_result()]).io_wall_drive_bytes.is_none());
    }
}
