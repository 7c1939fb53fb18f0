//! Task mixes: how the maintenance read demand is split across the eight
//! tasks, and each task's event period and deadline. A mix is a TOML file
//! (see `mixes/*.toml` in this crate); the presets are those files, built in.

use dingo_types::TaskKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

/// When a task declares and how long each declaration may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// Time between two events (declarations) of the task.
    pub period: Duration,
    /// Time from an event to its deadline.
    pub deadline: Duration,
}

/// The paper's Table 2 (period, deadline) for each task.
pub fn default_timing(task: TaskKind) -> Timing {
    let (period, deadline) = match task {
        // Reconstruction follows disk failures; the period is how often one
        // happens in the steady state the planner benchmark models.
        TaskKind::Reconstruction => (6 * HOUR, 36 * HOUR),
        TaskKind::Scrubbing => (30 * DAY, 30 * DAY),
        TaskKind::GarbageCollection => (6 * HOUR, 5 * DAY),
        TaskKind::Transcoding => (12 * HOUR, 5 * DAY),
        TaskKind::Rebalancing => (DAY, 5 * DAY),
        TaskKind::Georeplication => (30 * DAY, 30 * DAY),
        TaskKind::FileScrubbing => (30 * DAY, 30 * DAY),
        TaskKind::Fsck => (15 * DAY, 7 * DAY),
    };
    Timing { period: Duration::from_secs(period), deadline: Duration::from_secs(deadline) }
}

const PRESETS: [(&str, &str); 3] = [
    ("cluster-1", include_str!("../mixes/cluster-1.toml")),
    ("cluster-2", include_str!("../mixes/cluster-2.toml")),
    ("bench", include_str!("../mixes/bench.toml")),
];

#[derive(Debug, Error)]
pub enum MixError {
    #[error("invalid mix file: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("invalid mix `{name}`: {reason}")]
    Invalid { name: String, reason: String },
    #[error("unknown preset `{0}`; the presets are cluster-1, cluster-2 and bench (or give a mix TOML file)")]
    UnknownPreset(String),
}

/// Share of the maintenance read demand per task, indexed by
/// [`TaskKind::index`] (shares sum to 1), and each task's timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub name: String,
    /// Where the numbers come from.
    pub source: String,
    pub shares: [f64; TaskKind::COUNT],
    pub timing: [Timing; TaskKind::COUNT],
}

/// The TOML form of a mix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MixFile {
    name: String,
    #[serde(default)]
    source: String,
    /// Any non-negative numbers (percent by convention); normalised.
    shares: BTreeMap<TaskKind, f64>,
    #[serde(default)]
    timing: BTreeMap<TaskKind, TimingFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimingFile {
    period_hours: Option<f64>,
    deadline_hours: Option<f64>,
}

impl Mix {
    /// Parses a mix TOML file (see `mixes/cluster-1.toml` for the format).
    pub fn from_toml(text: &str) -> Result<Mix, MixError> {
        let file: MixFile = toml::from_str(text)?;
        let invalid = |reason: String| MixError::Invalid { name: file.name.clone(), reason };
        let mut shares = [0.0; TaskKind::COUNT];
        for (&task, &share) in &file.shares {
            if !share.is_finite() || share < 0.0 {
                return Err(invalid(format!("the share of {task} must be a non-negative number, not {share}")));
            }
            shares[task.index()] = share;
        }
        let total: f64 = shares.iter().sum();
        if total <= 0.0 {
            return Err(invalid("the shares sum to 0; give at least one task a positive share".into()));
        }
        let mut timing = TaskKind::ALL.map(default_timing);
        for (&task, t) in &file.timing {
            let slot = &mut timing[task.index()];
            for (hours, field, what) in
                [(t.period_hours, &mut slot.period, "period"), (t.deadline_hours, &mut slot.deadline, "deadline")]
            {
                if let Some(h) = hours {
                    // `try_from` refuses NaN, infinities and spans past
                    // `Duration::MAX` (a huge `1e300` would panic otherwise).
                    *field =
                        Duration::try_from_secs_f64(h * HOUR as f64).ok().filter(|_| h > 0.0).ok_or_else(|| {
                            invalid(format!("the {what} of {task} must be a positive number of hours, not {h}"))
                        })?;
                }
            }
        }
        Ok(Mix { name: file.name, source: file.source, shares: shares.map(|s| s / total), timing })
    }

    /// A built-in preset by name: `cluster-1`, `cluster-2` or `bench`.
    pub fn preset(name: &str) -> Result<Mix, MixError> {
        let (_, text) =
            PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| MixError::UnknownPreset(name.to_string()))?;
        Mix::from_toml(text)
    }

    /// The TOML text of a built-in preset, to start a custom mix from.
    pub fn preset_toml(name: &str) -> Option<&'static str> {
        PRESETS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
    }

    /// Thesis Table 6.2, cluster 1 (seven tasks; no georeplication).
    pub fn cluster_1() -> Mix {
        Mix::preset("cluster-1").expect("built-in preset parses")
    }

    /// Thesis Table 6.2, cluster 2 (seven tasks; no georeplication).
    pub fn cluster_2() -> Mix {
        Mix::preset("cluster-2").expect("built-in preset parses")
    }

    /// The planner benchmark's mix: cluster 1 with a 4 % georeplication
    /// share added (our choice, so all eight tasks of DESIGN §4 declare),
    /// renormalised.
    pub fn bench() -> Mix {
        Mix::preset("bench").expect("built-in preset parses")
    }

    pub fn share(&self, task: TaskKind) -> f64 {
        self.shares[task.index()]
    }

    pub fn timing(&self, task: TaskKind) -> Timing {
        self.timing[task.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_sum_to_one_and_match_table_6_2() {
        for (name, _) in PRESETS {
            let mix = Mix::preset(name).unwrap();
            assert_eq!(mix.name, name);
            assert!(!mix.source.is_empty(), "{name} must say where its numbers come from");
            assert!((mix.shares.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{name}");
            assert_eq!(mix.timing, TaskKind::ALL.map(default_timing));
        }
        let c1 = Mix::cluster_1();
        assert!((c1.share(TaskKind::GarbageCollection) - 0.42).abs() < 1e-9);
        assert_eq!(c1.share(TaskKind::Georeplication), 0.0);
        assert!((Mix::cluster_2().share(TaskKind::Scrubbing) - 0.20).abs() < 1e-9);
        assert!(Mix::bench().share(TaskKind::Georeplication) > 0.0);
    }

    #[test]
    fn a_custom_mix_normalises_and_overrides_timing() {
        let mix =
            Mix::from_toml("name = \"mine\"\n[shares]\nscrubbing = 1\nfsck = 3\n[timing.fsck]\ndeadline_hours = 24\n")
                .unwrap();
        assert_eq!(mix.share(TaskKind::Fsck), 0.75);
        assert_eq!(mix.timing(TaskKind::Fsck).deadline, Duration::from_secs(DAY));
        assert_eq!(mix.timing(TaskKind::Fsck).period, default_timing(TaskKind::Fsck).period);
    }

    #[test]
    fn bad_mixes_get_clear_errors() {
        let err = |text: &str| Mix::from_toml(text).unwrap_err().to_string();
        assert!(err("name = \"x\"\n[shares]\ndefrag = 1\n").contains("defrag"));
        assert!(err("name = \"x\"\n[shares]\nfsck = -1\n").contains("non-negative"));
        assert!(err("name = \"x\"\n[shares]\nfsck = 0\n").contains("sum to 0"));
        assert!(err("name = \"x\"\n[shares]\nfsck = 1\n[timing.fsck]\nperiod_hours = 0\n").contains("positive"));
        // Regression: a finite but huge span panicked in `Duration::from_secs_f64`.
        assert!(err("name = \"x\"\n[shares]\nfsck = 1\n[timing.fsck]\nperiod_hours = 1e300\n").contains("positive"));
        assert!(Mix::preset("cluster-9").unwrap_err().to_string().contains("cluster-1"));
    }
}
