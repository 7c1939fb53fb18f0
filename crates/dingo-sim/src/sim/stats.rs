//! What each mode records: per-task totals, a time series per quantum, and
//! the summary figures (utilisation, IO wall) derived from them.

use dingo_types::{DiskId, DiskModel, TaskKind, format_bytes};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How the maintenance reads are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each task reads its own data at its own steady pace through a plain LRU cache.
    Imperative,
    /// Tasks declare; the real planner schedules and dispatches; a pinned cache catches the reuse.
    Declarative,
    /// Lower bound: every distinct block any job needs, read once; no budget, no deadline.
    Optimal,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Imperative, Mode::Declarative, Mode::Optimal];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Imperative => "imperative",
            Mode::Declarative => "declarative",
            Mode::Optimal => "optimal",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes one task read over the run in one mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskTotals {
    pub task: String,
    /// Bytes of the sets the task got (every member it read).
    pub logical_bytes: u64,
    /// Bytes it read from disk.
    pub disk_bytes: u64,
    /// Bytes it got from the cache, read from disk by another read.
    pub free_bytes: u64,
    /// `free_bytes` by the task whose read brought the chunk in, by [`TaskKind::index`].
    pub free_bytes_from: [u64; TaskKind::COUNT],
    /// Bytes it did not read because the blocks were deleted first.
    pub elided_bytes: u64,
    pub deadline_misses: u64,
}

/// One quantum of one mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuantumPoint {
    /// Start of the quantum, in hours from the start of the run.
    pub start_hours: f64,
    pub logical_bytes: u64,
    pub disk_bytes: u64,
    /// Disk-head time over all disks, in microseconds.
    pub head_time_us: u64,
    /// Disk-head time of the busiest disk, in microseconds.
    pub max_disk_head_time_us: u64,
    pub deadline_misses: u64,
    /// Declarative only: the quantum's cluster-wide byte budget.
    pub budget_bytes: Option<u64>,
    /// Declarative only: disk bytes the planner scheduled (the realised
    /// `disk_bytes` adds reads the pinned cache could not absorb).
    pub planned_disk_bytes: Option<u64>,
    /// Declarative only: most bytes pinned on one disk at once.
    pub max_disk_pinned_bytes: Option<u64>,
}

/// Accumulates one mode's reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recorder {
    model: DiskModel,
    /// The last request size and its head time: every read of a run is one
    /// block, so this saves a division per read.
    memo: (u64, u64),
    pub tasks: [TaskTotals; TaskKind::COUNT],
    pub series: Vec<QuantumPoint>,
    /// Head time per disk in the current quantum.
    disk_us: Vec<u64>,
    current: QuantumPoint,
}

impl Recorder {
    pub fn new(disks: u32, model: DiskModel) -> Recorder {
        Recorder {
            model,
            memo: (0, model.head_time_us(0)),
            tasks: TaskKind::ALL.map(|t| TaskTotals { task: t.name().to_string(), ..TaskTotals::default() }),
            series: Vec::new(),
            disk_us: vec![0; disks as usize],
            current: QuantumPoint::default(),
        }
    }

    /// A read of `bytes` by `task`: from disk `disk`, or free from the cache
    /// where `owner`'s read brought it.
    pub fn read(&mut self, task: TaskKind, bytes: u64, source: Source) {
        match source {
            Source::Disk(disk) => self.disk_reads(task, [(disk, bytes)]),
            Source::Cache(owner) => {
                let t = &mut self.tasks[task.index()];
                t.logical_bytes += bytes;
                t.free_bytes += bytes;
                t.free_bytes_from[owner.index()] += bytes;
                self.current.logical_bytes += bytes;
            }
        }
    }

    /// Reads by `task` that all go to disk, as `(disk, bytes)`: what
    /// [`Self::read`] records for each, with the totals added once for the
    /// run rather than read by read.
    pub fn disk_reads(&mut self, task: TaskKind, reads: impl IntoIterator<Item = (DiskId, u64)>) {
        let mut total = 0;
        for (disk, bytes) in reads {
            total += bytes;
            let us = self.head_time_us(bytes);
            self.disk_us[disk.0 as usize] += us;
        }
        let t = &mut self.tasks[task.index()];
        t.logical_bytes += total;
        t.disk_bytes += total;
        self.current.logical_bytes += total;
        self.current.disk_bytes += total;
    }

    /// Bytes a task logically needed, with no disk placement (optimal mode).
    pub fn logical(&mut self, task: TaskKind, bytes: u64) {
        self.tasks[task.index()].logical_bytes += bytes;
        self.current.logical_bytes += bytes;
    }

    /// Bytes `task` did not read because they were deleted first (not
    /// counted for data-flexible tasks, which read as much either way).
    pub fn elided(&mut self, task: TaskKind, bytes: u64) {
        if !super::world::data_flexible(task) {
            self.tasks[task.index()].elided_bytes += bytes;
        }
    }

    pub fn missed(&mut self, task: TaskKind, declarations: u64) {
        self.tasks[task.index()].deadline_misses += declarations;
        self.current.deadline_misses += declarations;
    }

    /// Head time of one request of `bytes` on any disk (one model for all).
    pub fn head_time_us(&mut self, bytes: u64) -> u64 {
        if self.memo.0 != bytes {
            self.memo = (bytes, self.model.head_time_us(bytes));
        }
        self.memo.1
    }

    pub fn disk_count(&self) -> usize {
        self.disk_us.len()
    }

    /// The current quantum's point, to fill in mode-specific fields.
    pub fn current(&mut self) -> &mut QuantumPoint {
        &mut self.current
    }

    /// Closes the quantum that started at `start_hours`.
    pub fn end_quantum(&mut self, start_hours: f64) {
        let mut point = std::mem::take(&mut self.current);
        point.start_hours = start_hours;
        point.head_time_us = self.disk_us.iter().sum();
        point.max_disk_head_time_us = self.disk_us.iter().copied().max().unwrap_or(0);
        self.disk_us.fill(0);
        self.series.push(point);
    }
}

/// Where a read was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Disk(DiskId),
    /// The cache, holding a chunk that this task's read brought in.
    Cache(TaskKind),
}

/// The figures of one mode over the whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeResult {
    pub mode: Mode,
    pub logical_bytes: u64,
    pub disk_bytes: u64,
    pub free_bytes: u64,
    pub elided_bytes: u64,
    /// Disk-head time of all maintenance reads, in microseconds.
    pub head_time_us: u64,
    /// Mean fraction of disk time the run's maintenance reads take: head
    /// time over (disks × the time the work is worth). From a cold start
    /// that is the horizon: work declared in it and finished after counts,
    /// so this is one horizon's worth of work. From a warm start the jobs
    /// in flight at the start are read too, and the horizon is stretched by
    /// their share of the declared bytes.
    pub utilization: f64,
    /// Busiest disk in the busiest quantum, as a fraction of the quantum.
    pub peak_disk_utilization: f64,
    pub deadline_misses: u64,
    /// Largest drive size (bytes) at which these reads stay under 50 % of
    /// disk time, extrapolating `utilization` linearly in drive size (per-disk
    /// work grows with the data a disk holds); `None` if nothing was read.
    pub io_wall_drive_bytes: Option<u64>,
    /// Cache per disk, in bytes: the configured LRU (imperative); the most
    /// bytes the cache directives asked one disk to pin at once, refused
    /// ones included (declarative).
    pub cache_bytes_per_disk: u64,
    pub tasks: Vec<TaskTotals>,
    pub series: Vec<QuantumPoint>,
}

/// Maintenance may use at most this fraction of disk time (the paper's IO-wall line).
pub const WALL_UTILIZATION: f64 = 0.5;

impl ModeResult {
    pub fn new(
        mode: Mode,
        recorder: Recorder,
        disks: u32,
        work_secs: f64,
        quantum_secs: f64,
        drive_bytes: u64,
    ) -> Self {
        let mut total = TaskTotals::default();
        for t in &recorder.tasks {
            total.logical_bytes += t.logical_bytes;
            total.disk_bytes += t.disk_bytes;
            total.free_bytes += t.free_bytes;
            total.elided_bytes += t.elided_bytes;
            total.deadline_misses += t.deadline_misses;
        }
        let head_time_us: u64 = recorder.series.iter().map(|p| p.head_time_us).sum();
        let utilization = head_time_us as f64 / 1e6 / (f64::from(disks) * work_secs);
        let peak = recorder.series.iter().map(|p| p.max_disk_head_time_us).max().unwrap_or(0);
        ModeResult {
            mode,
            logical_bytes: total.logical_bytes,
            disk_bytes: total.disk_bytes,
            free_bytes: total.free_bytes,
            elided_bytes: total.elided_bytes,
            head_time_us,
            utilization,
            peak_disk_utilization: peak as f64 / 1e6 / quantum_secs,
            deadline_misses: total.deadline_misses,
            io_wall_drive_bytes: io_wall(drive_bytes, utilization),
            cache_bytes_per_disk: 0,
            tasks: recorder.tasks.to_vec(),
            series: recorder.series,
        }
    }

    pub fn task(&self, task: TaskKind) -> &TaskTotals {
        &self.tasks[task.index()]
    }
}

/// The drive size at which utilisation `utilization`, measured with
/// `drive_bytes` drives, reaches [`WALL_UTILIZATION`]: a disk's maintenance
/// work is proportional to the data it holds at a fixed demand per TB.
pub fn io_wall(drive_bytes: u64, utilization: f64) -> Option<u64> {
    (utilization > 0.0).then(|| (drive_bytes as f64 * WALL_UTILIZATION / utilization) as u64)
}

/// The largest drive size whose measured utilisation stays within
/// [`WALL_UTILIZATION`] (and which met its deadlines), from
/// `(drive bytes, utilisation, deadline misses)` points; `None` if none does.
/// Points are sorted by drive size first; the search stops at the first
/// size over the line, so a later dip under it (noise) does not count.
pub fn io_wall_search(points: &[(u64, f64, u64)]) -> Option<u64> {
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.0);
    sorted.iter().take_while(|&&(_, util, misses)| util <= WALL_UTILIZATION && misses == 0).last().map(|p| p.0)
}

impl fmt::Display for ModeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<12} logical {:>11}  disk {:>11}  free {:>11}  elided {:>11}  utilisation {:>5.1} %  misses {}",
            self.mode.name(),
            format_bytes(self.logical_bytes),
            format_bytes(self.disk_bytes),
            format_bytes(self.free_bytes),
            format_bytes(self.elided_bytes),
            self.utilization * 100.0,
            self.deadline_misses
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_reads_record_what_their_reads_record_one_by_one() {
        let (mut one_by_one, mut at_once) = (Recorder::new(3, DiskModel::HDD), Recorder::new(3, DiskModel::HDD));
        let reads = [(DiskId(2), 10), (DiskId(0), 10), (DiskId(2), 4_000_000), (DiskId(1), 10)];
        for task in [TaskKind::Scrubbing, TaskKind::Fsck] {
            for &(disk, bytes) in &reads {
                one_by_one.read(task, bytes, Source::Disk(disk));
            }
            at_once.disk_reads(task, reads);
        }
        one_by_one.read(TaskKind::Fsck, 7, Source::Cache(TaskKind::Scrubbing));
        at_once.read(TaskKind::Fsck, 7, Source::Cache(TaskKind::Scrubbing));
        for r in [&mut one_by_one, &mut at_once] {
            r.end_quantum(0.0);
        }
        assert_eq!(one_by_one.tasks, at_once.tasks);
        assert_eq!(one_by_one.series, at_once.series);
        assert!(at_once.series[0].max_disk_head_time_us > 0);
    }

    #[test]
    fn the_io_wall_scales_inversely_with_utilisation() {
        assert_eq!(io_wall(24_000_000_000_000, 0.25), Some(48_000_000_000_000));
        assert_eq!(io_wall(24_000_000_000_000, 0.0), None);
    }

    #[test]
    fn the_wall_search_takes_the_last_size_under_the_line() {
        let tb = 1_000_000_000_000;
        let points = [(48 * tb, 0.55, 0), (16 * tb, 0.2, 0), (32 * tb, 0.4, 0), (64 * tb, 0.45, 0)];
        assert_eq!(io_wall_search(&points), Some(32 * tb));
        assert_eq!(io_wall_search(&[(16 * tb, 0.2, 3)]), None, "missed deadlines do not count");
        assert_eq!(io_wall_search(&[]), None);
    }
}
