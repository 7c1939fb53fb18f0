//! Per-quantum, per-task accounting (DESIGN §3 "Accounting").

use dingo_types::TaskKind;
use serde::{Deserialize, Serialize};

/// What one task got in one quantum.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    /// Bytes of live members in the sets delivered to the task.
    pub logical_bytes: u64,
    /// Bytes the task's sets newly scheduled from disk.
    pub disk_bytes: u64,
    /// Bytes delivered that another set had already scheduled this quantum
    /// (split by the task that paid in [`crate::Dispatch::free_bytes_from`]).
    pub free_bytes: u64,
    /// Bytes not read because their blocks were deleted.
    pub elided_bytes: u64,
    pub sets_delivered: u64,
    pub sets_elided: u64,
    /// Deliveries flagged `overloaded`.
    pub overloaded_sets: u64,
    /// Declarations that passed their deadline unfinished this quantum.
    pub deadline_misses: u64,
    /// Outstanding sets after this quantum (the queue length).
    pub queued_sets: u64,
    pub outstanding_declarations: u64,
}

impl TaskStats {
    /// Adds `other` into `self` (for totals over tasks or quanta). Queue
    /// lengths are snapshots, so they add across tasks but the caller keeps
    /// the last one across quanta.
    pub fn add(&mut self, other: &TaskStats) {
        self.logical_bytes += other.logical_bytes;
        self.disk_bytes += other.disk_bytes;
        self.free_bytes += other.free_bytes;
        self.elided_bytes += other.elided_bytes;
        self.sets_delivered += other.sets_delivered;
        self.sets_elided += other.sets_elided;
        self.overloaded_sets += other.overloaded_sets;
        self.deadline_misses += other.deadline_misses;
        self.queued_sets += other.queued_sets;
        self.outstanding_declarations += other.outstanding_declarations;
    }
}

/// Accounting of one quantum.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuantumReport {
    /// Per task, indexed by [`TaskKind::index`].
    pub tasks: [TaskStats; TaskKind::COUNT],
    /// Disk-head time scheduled on the busiest disk, in microseconds.
    pub max_disk_head_time_us: u64,
    /// Disk-head time scheduled over all disks, in microseconds.
    pub total_head_time_us: u64,
    /// Whether the cluster-wide byte budget stopped the first pass.
    pub budget_exhausted: bool,
}

impl QuantumReport {
    pub fn task(&self, task: TaskKind) -> &TaskStats {
        &self.tasks[task.index()]
    }

    pub(crate) fn task_mut(&mut self, task: TaskKind) -> &mut TaskStats {
        &mut self.tasks[task.index()]
    }

    /// Sum over tasks.
    pub fn total(&self) -> TaskStats {
        let mut total = TaskStats::default();
        for t in &self.tasks {
            total.add(t);
        }
        total
    }
}
