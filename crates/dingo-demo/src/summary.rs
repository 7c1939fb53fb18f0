//! The comparison of the two runs, as `summary.json` and `dingo demo
//! --json` print it. Fields are declared in alphabetical order, the order
//! the summary has always been written in.

use crate::{ForegroundLatency, ModeResult, NodeSample, Scale, TASKS};
use dingo_client::IoTag;
use dingo_tasks::JobReport;
use dingo_types::{DeclarationId, TaskKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// Both modes and how they compare.
#[derive(Clone, Debug, Serialize)]
pub struct DemoSummary {
    /// Deadline misses of both runs together.
    pub deadline_misses: u64,
    pub declarative: ModeSummary,
    /// Declarative over imperative maintenance disk bytes (NaN, written as
    /// null, if the imperative run read nothing).
    pub disk_ratio: f64,
    /// The declarative run's foreground read latency.
    pub fg_p50_ms: f64,
    pub fg_p99_ms: f64,
    /// Declarative over imperative foreground p99.
    pub fg_p99_ratio: f64,
    pub imperative: ModeSummary,
    /// The larger relative gap, over both runs, between the nodes' disk
    /// counters and the kernel's `read_bytes`.
    pub kernel_counter_gap: f64,
    /// `1 - disk_ratio`.
    pub savings: f64,
    pub scale: Scale,
    /// Both runs ran every task, and every job did all its work.
    pub work_complete: bool,
}

/// One mode's totals.
#[derive(Clone, Debug, Serialize)]
pub struct ModeSummary {
    /// Logical bytes the disks did not have to read.
    pub achieved_free_bytes: u64,
    /// Disk bytes of every IO class.
    pub all_disk_bytes: u64,
    pub deadline_misses: u64,
    /// Maintenance disk bytes.
    pub disk_bytes: u64,
    /// Foreground latency per kind of read: `replica`, `ec_member`, and
    /// `ec_degraded` (rebuilt from the rest of its stripe).
    pub fg_by_kind: BTreeMap<String, ForegroundLatency>,
    pub fg_failures: u64,
    pub fg_p50_ms: f64,
    pub fg_p99_ms: f64,
    pub fg_reads: u64,
    pub foreground_disk_bytes: u64,
    pub kernel_read_bytes: u64,
    /// Bytes the tasks' work covered, whether read from disk or not.
    pub logical_bytes: u64,
    pub pinned_hits: u64,
    pub pinned_overflow_evictions: u64,
    /// Free bytes the planner scheduled (declarative mode only).
    pub planned_free_bytes: Option<u64>,
    /// The planner's lower bound on the disk bytes the declared work
    /// needed (declarative mode only).
    pub read_lower_bound_bytes: Option<u64>,
    /// Per task, by task name.
    pub tasks: BTreeMap<String, TaskSummary>,
    pub wall_seconds: f64,
    pub work_complete: bool,
}

/// One task's jobs in one mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskSummary {
    pub complete: bool,
    pub deadline_misses: u64,
    pub disk_bytes: u64,
    pub failed: u64,
    pub items_done: u64,
    pub items_needed: u64,
    pub items_skipped: u64,
    pub jobs: u64,
    pub jobs_cancelled: u64,
    pub logical_bytes: u64,
}

impl TaskSummary {
    fn new(r: &ModeResult, task: TaskKind) -> TaskSummary {
        let jobs: Vec<&JobReport> = r.jobs.iter().filter(|j| j.task == task.name()).collect();
        let count = |f: fn(&JobReport) -> bool| jobs.iter().filter(|j| f(j)).count() as u64;
        TaskSummary {
            complete: jobs.iter().all(|j| j.complete()),
            deadline_misses: count(JobReport::missed_deadline),
            disk_bytes: task_disk_bytes(&r.disk, task),
            failed: jobs.iter().map(|j| j.failed).sum(),
            items_done: jobs.iter().map(|j| j.items_done).sum(),
            items_needed: jobs.iter().map(|j| j.items_needed).sum(),
            items_skipped: jobs.iter().map(|j| j.items_skipped).sum(),
            jobs: jobs.len() as u64,
            jobs_cancelled: count(|j| j.cancelled),
            logical_bytes: jobs.iter().map(|j| j.logical_bytes).sum(),
        }
    }
}

/// Disk bytes `task` read: its IO class's counter.
fn task_disk_bytes(s: &NodeSample, task: TaskKind) -> u64 {
    s.disk_bytes_by_class[IoTag::Maintenance { task, declaration: DeclarationId(0) }.class_index()]
}

impl ModeSummary {
    pub fn new(r: &ModeResult) -> ModeSummary {
        let tasks: BTreeMap<String, TaskSummary> =
            TASKS.iter().map(|&t| (t.name().to_string(), TaskSummary::new(r, t))).collect();
        let logical_bytes: u64 = tasks.values().map(|t| t.logical_bytes).sum();
        // Every task of the timeline ran, and every job of each did all its work.
        let work_complete = tasks.values().all(|t| t.jobs > 0 && t.complete);
        let maintenance = r.disk.maintenance_disk_bytes();
        ModeSummary {
            achieved_free_bytes: logical_bytes.saturating_sub(maintenance),
            all_disk_bytes: r.disk.disk_bytes(),
            deadline_misses: r.jobs.iter().filter(|j| j.missed_deadline()).count() as u64,
            disk_bytes: maintenance,
            fg_by_kind: r.foreground_by_kind.clone(),
            fg_failures: r.foreground.failures,
            fg_p50_ms: r.foreground.p50_ms,
            fg_p99_ms: r.foreground.p99_ms,
            fg_reads: r.foreground.reads,
            foreground_disk_bytes: r.disk.disk_bytes_by_class[IoTag::Foreground.class_index()],
            kernel_read_bytes: r.disk.kernel_read_bytes,
            logical_bytes,
            pinned_hits: r.disk.pinned_hits,
            pinned_overflow_evictions: r.disk.overflow_evictions,
            planned_free_bytes: r.planned_free_bytes,
            read_lower_bound_bytes: r.read_lower_bound_bytes,
            tasks,
            wall_seconds: r.wall_seconds,
            work_complete,
        }
    }
}

/// Relative gap between the nodes' disk counters and the kernel's.
fn counter_gap(s: &NodeSample) -> f64 {
    let k = s.kernel_read_bytes as f64;
    if k == 0.0 { f64::INFINITY } else { (s.disk_bytes() as f64 - k).abs() / k }
}

impl DemoSummary {
    pub fn new(scale: &Scale, imperative: &ModeResult, declarative: &ModeResult) -> DemoSummary {
        let (imp, dec) = (ModeSummary::new(imperative), ModeSummary::new(declarative));
        let ratio = if imp.disk_bytes > 0 { dec.disk_bytes as f64 / imp.disk_bytes as f64 } else { f64::NAN };
        DemoSummary {
            deadline_misses: imp.deadline_misses + dec.deadline_misses,
            disk_ratio: ratio,
            fg_p50_ms: dec.fg_p50_ms,
            fg_p99_ms: dec.fg_p99_ms,
            fg_p99_ratio: if imp.fg_p99_ms > 0.0 { dec.fg_p99_ms / imp.fg_p99_ms } else { f64::NAN },
            kernel_counter_gap: counter_gap(&imperative.disk).max(counter_gap(&declarative.disk)),
            savings: 1.0 - ratio,
            scale: scale.clone(),
            work_complete: imp.work_complete && dec.work_complete,
            imperative: imp,
            declarative: dec,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_tasks::{Declared, Job, Scheduling};

    fn result(mode: Scheduling, task: TaskKind, logical_bytes: u64, disk_bytes: u64) -> ModeResult {
        let job = Job::new(task, "j".into(), Vec::new(), Declared::Items, 10);
        let mut report = JobReport::new(&job, mode, 0);
        report.logical_bytes = logical_bytes;
        report.finished_ms = Some(5);
        let mut disk = NodeSample { kernel_read_bytes: disk_bytes, ..NodeSample::default() };
        disk.disk_bytes_by_class[task_class(task)] = disk_bytes;
        ModeResult {
            mode,
            jobs: vec![report],
            disk,
            foreground: ForegroundLatency { p50_ms: 1.0, p99_ms: 4.0, reads: 3, failures: 0 },
            foreground_by_kind: Default::default(),
            series: Vec::new(),
            events: Vec::new(),
            planned_free_bytes: (mode == Scheduling::Declarative).then_some(40),
            read_lower_bound_bytes: None,
            planned_series: Vec::new(),
            fg_series: Vec::new(),
            planner_metrics: None,
            wall_seconds: 1.0,
        }
    }

    fn task_class(task: TaskKind) -> usize {
        IoTag::Maintenance { task, declaration: DeclarationId(0) }.class_index()
    }

    #[test]
    fn the_summary_compares_the_modes_under_the_documented_keys() {
        let imp = result(Scheduling::Imperative, TaskKind::Scrubbing, 100, 100);
        let dec = result(Scheduling::Declarative, TaskKind::Scrubbing, 100, 60);
        let s = DemoSummary::new(&Scale::quick(), &imp, &dec);
        assert!((s.disk_ratio - 0.6).abs() < 1e-9 && (s.savings - 0.4).abs() < 1e-9);
        assert_eq!((s.declarative.achieved_free_bytes, s.declarative.planned_free_bytes), (40, Some(40)));
        assert!(!s.work_complete, "seven tasks ran no job at all");
        assert!(s.declarative.tasks["scrubbing"].complete);
        assert_eq!(s.declarative.tasks["scrubbing"].disk_bytes, 60);
        assert_eq!(s.declarative.tasks["transcoding"].jobs, 0);
        let v = serde_json::to_value(&s).unwrap();
        let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&v),
            [
                "deadline_misses",
                "declarative",
                "disk_ratio",
                "fg_p50_ms",
                "fg_p99_ms",
                "fg_p99_ratio",
                "imperative",
                "kernel_counter_gap",
                "savings",
                "scale",
                "work_complete"
            ]
        );
        assert_eq!(
            keys(&v["imperative"]),
            [
                "achieved_free_bytes",
                "all_disk_bytes",
                "deadline_misses",
                "disk_bytes",
                "fg_by_kind",
                "fg_failures",
                "fg_p50_ms",
                "fg_p99_ms",
                "fg_reads",
                "foreground_disk_bytes",
                "kernel_read_bytes",
                "logical_bytes",
                "pinned_hits",
                "pinned_overflow_evictions",
                "planned_free_bytes",
                "read_lower_bound_bytes",
                "tasks",
                "wall_seconds",
                "work_complete"
            ]
        );
        assert_eq!(
            keys(&v["imperative"]["tasks"]),
            [
                "file-scrubbing",
                "fsck",
                "garbage-collection",
                "georeplication",
                "rebalancing",
                "reconstruction",
                "scrubbing",
                "transcoding"
            ]
        );
        assert!(v["imperative"]["planned_free_bytes"].is_null());
        // Nothing read imperatively: the ratio is undefined, written as null.
        let idle = result(Scheduling::Imperative, TaskKind::Scrubbing, 0, 0);
        assert!(serde_json::to_value(DemoSummary::new(&Scale::quick(), &idle, &dec)).unwrap()["disk_ratio"].is_null());
    }

    #[test]
    fn work_is_complete_only_when_every_task_ran_and_nothing_failed() {
        let mut r = result(Scheduling::Declarative, TaskKind::Scrubbing, 1, 1);
        let template = r.jobs[0].clone();
        for t in TASKS.into_iter().filter(|&t| t != TaskKind::Scrubbing) {
            r.jobs.push(JobReport { task: t.name().to_string(), ..template.clone() });
        }
        assert!(ModeSummary::new(&r).work_complete);
        r.jobs[3].failed = 1;
        assert!(!ModeSummary::new(&r).work_complete, "a failed item");
        r.jobs[3].failed = 0;
        r.jobs[5].finished_ms = None;
        assert!(!ModeSummary::new(&r).work_complete, "an unfinished job");
    }

    #[test]
    fn the_table_lines_up_both_modes() {
        let imp = result(Scheduling::Imperative, TaskKind::Scrubbing, 100, 100);
        let dec = result(Scheduling::Declarative, TaskKind::Scrubbing, 100, 60);
        let text = DemoSummary::new(&Scale::quick(), &imp, &dec).to_string();
        let row = format!("{:<16} {:>14} {:>14} {:>14} {:>14}\n", "scrubbing", "100 B", "100 B", "100 B", "60 B");
        assert!(text.contains(&row), "{text}");
        assert!(text.contains("declarative / imperative disk bytes: 0.600 (savings 40.0 %)\n"), "{text}");
    }
}
