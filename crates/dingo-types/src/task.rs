//! The maintenance tasks DINGO knows (DESIGN §4). Accounting is kept per kind.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A kind of maintenance task. The order is the order of report columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    Reconstruction,
    Scrubbing,
    GarbageCollection,
    Transcoding,
    Rebalancing,
    Georeplication,
    FileScrubbing,
    Fsck,
}

impl TaskKind {
    pub const ALL: [TaskKind; 8] = [
        TaskKind::Reconstruction,
        TaskKind::Scrubbing,
        TaskKind::GarbageCollection,
        TaskKind::Transcoding,
        TaskKind::Rebalancing,
        TaskKind::Georeplication,
        TaskKind::FileScrubbing,
        TaskKind::Fsck,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// Dense index `0..COUNT`, for per-task arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Reconstruction => "reconstruction",
            TaskKind::Scrubbing => "scrubbing",
            TaskKind::GarbageCollection => "garbage-collection",
            TaskKind::Transcoding => "transcoding",
            TaskKind::Rebalancing => "rebalancing",
            TaskKind::Georeplication => "georeplication",
            TaskKind::FileScrubbing => "file-scrubbing",
            TaskKind::Fsck => "fsck",
        }
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TaskKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskKind::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            let names: Vec<_> = TaskKind::ALL.iter().map(|t| t.name()).collect();
            format!("unknown task `{s}`; expected one of {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indexes_are_dense() {
        for (i, t) in TaskKind::ALL.into_iter().enumerate() {
            assert_eq!(t.index(), i);
            assert_eq!(t.name().parse::<TaskKind>(), Ok(t));
        }
        assert!("defrag".parse::<TaskKind>().unwrap_err().contains("unknown task"));
    }
}
