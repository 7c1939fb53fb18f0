//! Planner configuration and per-quantum budgets.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the scheduler does with budget left after every declaration got
/// its rate and every fully free set was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeftoverPolicy {
    /// Leave it unused: preserves future overlap and frees IO for
    /// foreground work (the paper's default).
    #[default]
    Unused,
    /// Spend it on more sets, earliest deadline first.
    Fill,
}

/// Explicit limits on what one declaration may hold, so a single caller
/// cannot exhaust the planner's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Sets in an explicit [`dingo_types::ReadSets::Sets`] declaration.
    pub max_explicit_sets: u64,
    /// Members in one explicit set, and in one range.
    pub max_set_members: u64,
    /// Members across all explicit sets of one declaration.
    pub max_explicit_members: u64,
    /// Ranges in one [`dingo_types::ReadSets::Ranges`] declaration.
    pub max_ranges: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_explicit_sets: 1 << 20, max_set_members: 4096, max_explicit_members: 1 << 24, max_ranges: 1 << 28 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerConfig {
    /// Length of one scheduling quantum.
    pub quantum: Duration,
    pub leftover: LeftoverPolicy,
    /// How many dispatch rounds to spread one quantum's schedule over.
    pub dispatch_rounds: u32,
    /// Cache bytes one dispatch group may pin (blocks read by two or more
    /// sets of the group).
    pub group_cache_bytes: u64,
    /// Cache bytes one dispatch group may pin on one disk: its share of
    /// the disk's pinned region on its node, past which the node refuses
    /// pins and their readers go to disk again.
    pub group_disk_cache_bytes: u64,
    /// How long after the end of its round a pinned chunk stays pinned, to
    /// absorb slow readers.
    pub pin_grace: Duration,
    pub limits: Limits,
    /// Threads serving the free pass (sets whose reads another set already
    /// scheduled) at once, and the declarations of
    /// [`crate::Planner::note_deleted`]; the results are the same for any
    /// count.
    #[serde(default = "default_free_pass_threads")]
    pub free_pass_threads: u32,
    /// Optional per-task caps on disk reads, under the cluster budget.
    #[serde(default)]
    pub task_caps: TaskCaps,
}

/// Per-task rate caps (the HDFS prototype's `declarative.<task>.rate`):
/// bytes per second of disk reads one task may be scheduled, on top of
/// the cluster budget. Only physical reads count; reads riding on another
/// task's are free and never capped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCaps(pub std::collections::BTreeMap<dingo_types::TaskKind, u64>);

impl TaskCaps {
    /// Each task's cap over one `quantum`, indexed by task (`u64::MAX`
    /// for an uncapped task).
    pub fn per_quantum(&self, quantum: Duration) -> [u64; dingo_types::TaskKind::COUNT] {
        let mut caps = [u64::MAX; dingo_types::TaskKind::COUNT];
        for (task, &bytes_per_sec) in &self.0 {
            let bytes = u128::from(bytes_per_sec) * quantum.as_millis() / 1000;
            caps[task.index()] = u64::try_from(bytes).unwrap_or(u64::MAX);
        }
        caps
    }
}

/// Two: the simulator's main thread plus one helper, the cores of the
/// project machine.
fn default_free_pass_threads() -> u32 {
    2
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            quantum: Duration::from_secs(3600),
            leftover: LeftoverPolicy::Unused,
            dispatch_rounds: 60,
            group_cache_bytes: 64 << 30,
            group_disk_cache_bytes: u64::MAX,
            pin_grace: Duration::from_secs(60),
            limits: Limits::default(),
            free_pass_threads: default_free_pass_threads(),
            task_caps: TaskCaps::default(),
        }
    }
}

/// IO the planner may schedule in one quantum. Only physical reads (chunks
/// newly scheduled this quantum) count against it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Bytes read from disk across the cluster. `u64::MAX` for no limit.
    pub cluster_bytes: u64,
    /// Disk-head time per disk, in microseconds.
    pub disk_head_time_us: DiskBudget,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskBudget {
    /// The same head time on every disk. `u64::MAX` for no limit.
    Uniform(u64),
    /// Head time per disk, indexed by disk id (a hot disk gets less).
    /// Disks past the end of the list get none.
    PerDisk(Vec<u64>),
}

impl Budget {
    pub const UNLIMITED: Budget = Budget { cluster_bytes: u64::MAX, disk_head_time_us: DiskBudget::Uniform(u64::MAX) };

    /// A cluster-wide byte budget with no per-disk limit.
    pub fn cluster_bytes(bytes: u64) -> Budget {
        Budget { cluster_bytes: bytes, disk_head_time_us: DiskBudget::Uniform(u64::MAX) }
    }

    pub fn disk_limit_us(&self, disk: u32) -> u64 {
        match &self.disk_head_time_us {
            DiskBudget::Uniform(us) => *us,
            DiskBudget::PerDisk(list) => list.get(disk as usize).copied().unwrap_or(0),
        }
    }
}
