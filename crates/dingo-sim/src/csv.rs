//! The simulator's CSV files: a run's per-quantum series and per-task
//! totals, a sweep's points and the paper reproduction's runs.
//!
//! Written with `format!` rather than the `csv` crate: every column is a
//! number, a mode, a task or a figure name, none of which can hold a comma
//! or a quote, so there is nothing to escape.

use crate::paper::PaperRuns;
use crate::sim::{Mode, SimResult};
use crate::sweep::SweepPoint;
use dingo_types::TaskKind;
use std::fmt::Write as _;

/// Columns of [`quanta_csv`].
pub const QUANTA_COLUMNS: &str = "mode,quantum,start_hours,logical_bytes,disk_bytes,head_time_us,utilization,\
max_disk_utilization,deadline_misses,budget_bytes,planned_disk_bytes,max_disk_pinned_bytes";

/// Columns of [`sweep_csv`].
pub const SWEEP_COLUMNS: &str = "task,value,mode,logical_bytes,disk_bytes,utilization,deadline_misses,\
savings_vs_imperative,gap_to_optimal,over_budget_quanta";

/// Columns of [`paper_runs_csv`].
pub const PAPER_RUNS_COLUMNS: &str = "figure,cluster,parameter,value,imperative_utilization,\
declarative_utilization,optimal_utilization,savings_vs_imperative,savings_vs_imperative_skip_deleted,\
gap_to_optimal,gap_to_optimal_elide_deleted,declarative_deadline_misses,over_budget_quanta,scrub_deleted_fraction";

fn optional<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn fraction(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.6}"))
}

/// One row per mode and quantum: what was read, the head time and, for
/// declarative, the budget, the plan and the pins.
pub fn quanta_csv(r: &SimResult) -> String {
    let mut out = format!("{QUANTA_COLUMNS}\n");
    for m in r.modes.iter() {
        for (i, p) in m.series.iter().enumerate() {
            let util = p.head_time_us as f64 / 1e6 / (f64::from(r.disks) * r.quantum_secs);
            let peak = p.max_disk_head_time_us as f64 / 1e6 / r.quantum_secs;
            let _ = writeln!(
                out,
                "{},{i},{},{},{},{},{util:.6},{peak:.6},{},{},{},{}",
                m.mode,
                p.start_hours,
                p.logical_bytes,
                p.disk_bytes,
                p.head_time_us,
                p.deadline_misses,
                optional(p.budget_bytes),
                optional(p.planned_disk_bytes),
                optional(p.max_disk_pinned_bytes)
            );
        }
    }
    out
}

/// The header of [`tasks_csv`]: totals, then free bytes by the task whose
/// read brought them in.
pub fn tasks_columns() -> String {
    let mut out = String::from("mode,task,logical_bytes,disk_bytes,free_bytes,elided_bytes,deadline_misses");
    for t in TaskKind::ALL {
        let _ = write!(out, ",free_from_{}", t.name());
    }
    out
}

/// One row per mode and task.
pub fn tasks_csv(r: &SimResult) -> String {
    let mut out = tasks_columns();
    out.push('\n');
    for m in r.modes.iter() {
        for t in &m.tasks {
            let _ = write!(
                out,
                "{},{},{},{},{},{},{}",
                m.mode, t.task, t.logical_bytes, t.disk_bytes, t.free_bytes, t.elided_bytes, t.deadline_misses
            );
            for f in t.free_bytes_from {
                let _ = write!(out, ",{f}");
            }
            out.push('\n');
        }
    }
    out
}

/// One row per sweep point and mode; `results` in the order of `points`.
pub fn sweep_csv(points: &[SweepPoint], results: &[SimResult]) -> String {
    let mut out = format!("{SWEEP_COLUMNS}\n");
    for (p, r) in points.iter().zip(results) {
        for m in r.modes.iter() {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{:.6},{},{},{},{}",
                p.line.map_or("", |t| t.name()),
                p.x,
                m.mode,
                m.logical_bytes,
                m.disk_bytes,
                m.utilization,
                m.deadline_misses,
                fraction(r.comparisons.savings_vs_imperative),
                fraction(r.comparisons.gap_to_optimal),
                r.over_budget_quanta
            );
        }
    }
    out
}

/// One row per run of the paper reproduction.
pub fn paper_runs_csv(runs: &PaperRuns) -> String {
    let mut out = format!("{PAPER_RUNS_COLUMNS}\n");
    for (p, r) in &runs.runs {
        let util = |m: Mode| fraction(r.modes.get(m).map(|m| m.utilization));
        let c = &r.comparisons;
        let _ = writeln!(
            out,
            "{},{:?},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.figure,
            p.cluster,
            p.parameter,
            p.x,
            util(Mode::Imperative),
            util(Mode::Declarative),
            util(Mode::Optimal),
            fraction(c.savings_vs_imperative),
            fraction(c.savings_vs_imperative_skip_deleted),
            fraction(c.gap_to_optimal),
            fraction(c.gap_to_optimal_elide_deleted),
            r.modes.declarative.as_ref().map_or(0, |m| m.deadline_misses),
            r.over_budget_quanta,
            fraction(r.churn.scrub_deleted_fraction),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sim_result;
    use crate::paper::{Cluster, PaperOptions, PlannedRun};
    use crate::sim::SimConfig;

    /// Every row has as many fields as the header.
    fn assert_rectangular(csv: &str) -> Vec<Vec<&str>> {
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        let width = rows[0].len();
        for row in &rows {
            assert_eq!(row.len(), width, "{row:?} in\n{csv}");
        }
        rows
    }

    #[test]
    fn quanta_rows_follow_the_header() {
        let csv = quanta_csv(&sim_result());
        let rows = assert_rectangular(&csv);
        assert_eq!(rows.len(), 1 + 3 * 2, "a row per mode and quantum");
        assert_eq!(rows[0].len(), 12);
        // Second quantum of imperative: 3.6 s of head time over 2 disks × 3 h.
        assert_eq!(rows[2][..3], ["imperative", "1", "3"]);
        assert_eq!(rows[2][6], format!("{:.6}", 3.6 / (2.0 * 10_800.0)));
        assert_eq!(rows[2][9], "", "imperative has no budget");
        assert_eq!(rows[3][0], "declarative");
        assert_eq!(rows[3][9], "99");
    }

    #[test]
    fn tasks_rows_have_a_free_column_per_task() {
        let csv = tasks_csv(&sim_result());
        let rows = assert_rectangular(&csv);
        assert_eq!(rows.len(), 1 + 3 * TaskKind::COUNT);
        assert_eq!(rows[0].len(), 7 + TaskKind::COUNT);
        assert_eq!(rows[0][7], "free_from_reconstruction");
        assert_eq!(rows[1][..3], ["imperative", "reconstruction", "10"]);
    }

    #[test]
    fn sweep_rows_name_the_task_and_the_value() {
        let r = sim_result();
        let points = [
            SweepPoint { line: None, x: 4.0, config: SimConfig::default() },
            SweepPoint { line: Some(TaskKind::Transcoding), x: 2.5, config: SimConfig::default() },
        ];
        let csv = sweep_csv(&points, &[r.clone(), r]);
        let rows = assert_rectangular(&csv);
        assert_eq!(rows.len(), 1 + 2 * 3);
        assert_eq!(rows[1][..3], ["", "4", "imperative"]);
        assert_eq!(rows[4][..3], ["transcoding", "2.5", "imperative"]);
        assert_eq!(rows[1][7], "0.400000", "savings: 1 - 600 / 1000");
    }

    #[test]
    fn paper_rows_carry_each_mode_utilisation() {
        let run = PlannedRun {
            figure: "fig18",
            cluster: Cluster::B,
            parameter: "demand",
            x: 3.0,
            config: SimConfig::default(),
        };
        let csv = paper_runs_csv(&PaperRuns { options: PaperOptions::quick(), runs: vec![(run, sim_result())] });
        let rows = assert_rectangular(&csv);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][..7], ["fig18", "B", "demand", "3", "0.500000", "0.300000", "0.250000"]);
        assert_eq!(rows[1][13], "0.250000");
    }
}
