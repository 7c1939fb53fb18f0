//! A simulated cluster, its workload and the planner's settings as one
//! typed set of options: what `dingo sim run` and `dingo sim sweep` take on
//! the command line (with the `clap` feature), and what a program sets to
//! get the same [`SimConfig`].

use crate::ModelSpec;
use crate::mix::{Mix, MixError};
use crate::sim::{Modes, SimConfig};
use dingo_planner::LeftoverPolicy;
use dingo_types::TaskKind;
#[cfg(feature = "clap")]
use dingo_types::parse_bytes;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error("reading {}", path.display())]
    ReadMix { path: PathBuf, source: std::io::Error },
    #[error("in {}", path.display())]
    MixFile { path: PathBuf, source: MixError },
    #[error(transparent)]
    Preset(MixError),
    #[error(
        "--days and --quantum-hours must be positive numbers that fit a duration, and the horizon at least one quantum"
    )]
    Horizon,
    #[error("the deadline of {0} must be a positive number of days")]
    Deadline(TaskKind),
}

/// The cluster, workload and planner settings of a simulation.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Scenario {
    /// Built-in task mix: cluster-1 or cluster-2 (thesis Table 6.2), or bench.
    #[cfg_attr(feature = "clap", arg(long, default_value = "cluster-1"))]
    pub preset: String,
    /// A mix TOML file to use instead of the preset (see docs/SIMULATOR.md).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "preset"))]
    pub mix: Option<PathBuf>,
    /// Raw capacity of the cluster (e.g. 100PB, 1EB).
    #[cfg_attr(feature = "clap", arg(long = "capacity", value_name = "CAPACITY", default_value = "100PB", value_parser = parse_bytes))]
    pub capacity_bytes: u64,
    /// Drive size.
    #[cfg_attr(feature = "clap", arg(long = "drive-size", value_name = "DRIVE_SIZE", default_value = "24TB", value_parser = parse_bytes))]
    pub drive_bytes: u64,
    /// Disks per storage node (members of a stripe sit on distinct nodes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 36))]
    pub disks_per_node: u32,
    /// Horizon in days; jobs started before it run to their deadlines.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 30.0))]
    pub days: f64,
    /// Scheduling quantum (the simulation step) in hours.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3.0))]
    pub quantum_hours: f64,
    /// Total maintenance read demand in MB/s per TB of raw capacity.
    #[cfg_attr(feature = "clap", arg(long = "demand", value_name = "DEMAND", default_value_t = 2.0))]
    pub demand_mb_s_per_tb: f64,
    /// Cache per disk: the LRU (imperative) and the pinned region (declarative).
    #[cfg_attr(feature = "clap", arg(long = "cache-per-disk", value_name = "CACHE_PER_DISK", default_value = "4GB", value_parser = parse_bytes))]
    pub cache_per_disk_bytes: u64,
    /// The planner's cluster-wide budget per quantum, as a multiple of the demand.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.5, conflicts_with = "supply_mb_s_per_tb"))]
    pub budget_factor: f64,
    /// The planner's cluster-wide budget as a supply in MB/s per TB of raw
    /// capacity (instead of --budget-factor).
    #[cfg_attr(feature = "clap", arg(long = "supply", value_name = "SUPPLY"))]
    pub supply_mb_s_per_tb: Option<f64>,
    /// What the planner does with budget its declarations do not need this
    /// quantum: leave it unused (the paper) or fill it, earliest deadline first (the thesis).
    #[cfg_attr(feature = "clap", arg(long, default_value = "unused", value_parser = leftover_parser()))]
    pub leftover: LeftoverPolicy,
    /// Fraction of the files that form the object/KV store garbage collection rewrites.
    #[cfg_attr(feature = "clap", arg(long = "gc-subset", value_name = "GC_SUBSET", default_value_t = 0.2))]
    pub gc_subset_fraction: f64,
    /// Reconstruction of an erasure-coded chunk reads any k of its stripe's
    /// n − 1 survivors, the planner's choice (default: the first k live ones).
    #[cfg_attr(feature = "clap", arg(long))]
    pub rebuild_any_k: bool,
    /// Start from a cold cluster (every task's first event at the start)
    /// instead of in steady state (every task's open jobs already in flight).
    #[cfg_attr(feature = "clap", arg(long))]
    pub cold_start: bool,
    /// Disk-head time per disk the planner may use, as a fraction of each quantum.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.5))]
    pub disk_share: f64,
    /// Diurnal swing of the budget, 0 (flat) to below 1.
    #[cfg_attr(feature = "clap", arg(long = "diurnal", value_name = "DIURNAL", default_value_t = 0.0))]
    pub diurnal_amplitude: f64,
    /// Multiply one task's demand: TASK=FACTOR (repeatable), e.g. garbage-collection=2.
    #[cfg_attr(feature = "clap", arg(long = "intensity", value_name = "TASK=FACTOR", value_parser = task_value))]
    pub intensity: Vec<(TaskKind, f64)>,
    /// Override one task's deadline: TASK=DAYS (repeatable), e.g. transcoding=1.
    #[cfg_attr(feature = "clap", arg(long = "deadline", value_name = "TASK=DAYS", value_parser = task_value))]
    pub deadline_days: Vec<(TaskKind, f64)>,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
}

/// `unused` or `fill`, listed in the help as clap lists an enum's values.
#[cfg(feature = "clap")]
fn leftover_parser() -> impl clap::builder::TypedValueParser<Value = LeftoverPolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["unused", "fill"]).map(|s| match s.as_str() {
        "fill" => LeftoverPolicy::Fill,
        _ => LeftoverPolicy::Unused,
    })
}

/// Parses `TASK=NUMBER` with a non-negative number.
pub fn task_value(s: &str) -> Result<(TaskKind, f64), String> {
    let (task, value) = s.split_once('=').ok_or_else(|| format!("expected TASK=NUMBER, got `{s}`"))?;
    let task: TaskKind = task.trim().parse()?;
    let value: f64 = value.trim().parse().map_err(|_| format!("`{value}` is not a number"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("`{value}` must be a non-negative number"));
    }
    Ok((task, value))
}

impl Scenario {
    /// The simulation of this scenario in `modes`.
    pub fn config(&self, modes: Modes) -> Result<SimConfig, ScenarioError> {
        let mix = match &self.mix {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ScenarioError::ReadMix { path: path.clone(), source })?;
                Mix::from_toml(&text).map_err(|source| ScenarioError::MixFile { path: path.clone(), source })?
            }
            None => Mix::preset(&self.preset).map_err(ScenarioError::Preset)?,
        };
        if !(self.days > 0.0 && self.quantum_hours > 0.0 && self.days * 24.0 >= self.quantum_hours) {
            return Err(ScenarioError::Horizon);
        }
        // Checked conversions: NaN or a span past `Duration::MAX` is an
        // error, not a panic.
        let quantum = Duration::try_from_secs_f64(self.quantum_hours * 3600.0).map_err(|_| ScenarioError::Horizon)?;
        let horizon = Duration::try_from_secs_f64(self.days * 86_400.0).map_err(|_| ScenarioError::Horizon)?;
        let mut config = SimConfig {
            cluster: ModelSpec {
                raw_capacity: self.capacity_bytes,
                drive_bytes: self.drive_bytes,
                disks_per_node: self.disks_per_node,
                seed: self.seed,
                ..ModelSpec::default()
            },
            mix,
            demand_mb_s_per_tb: self.demand_mb_s_per_tb,
            quantum,
            horizon,
            cache_per_disk: self.cache_per_disk_bytes,
            budget_factor: self.budget_factor,
            supply_mb_s_per_tb: self.supply_mb_s_per_tb,
            leftover: self.leftover,
            gc_subset_fraction: self.gc_subset_fraction,
            rebuild_any_k: self.rebuild_any_k,
            warm_start: !self.cold_start,
            disk_share: self.disk_share,
            diurnal_amplitude: self.diurnal_amplitude,
            modes,
            ..SimConfig::default()
        };
        for &(task, factor) in &self.intensity {
            config.intensity[task.index()] = factor;
        }
        for &(task, days) in &self.deadline_days {
            config.mix.timing[task.index()].deadline = Duration::try_from_secs_f64(days * 86_400.0)
                .ok()
                .filter(|_| days > 0.0)
                .ok_or(ScenarioError::Deadline(task))?;
        }
        Ok(config)
    }
}

#[cfg(all(test, feature = "clap"))]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        scenario: Scenario,
    }

    fn parse(args: &[&str]) -> Result<Scenario, clap::Error> {
        Cli::try_parse_from(std::iter::once("sim").chain(args.iter().copied())).map(|c| c.scenario)
    }

    #[test]
    fn flags_reach_the_config() {
        let s = parse(&["--capacity", "2PB", "--leftover", "fill", "--deadline", "transcoding=1", "--days", "3"]);
        let config = s.unwrap().config(Modes::ALL).unwrap();
        assert_eq!(config.cluster.raw_capacity, 2_000_000_000_000_000);
        assert_eq!(config.leftover, LeftoverPolicy::Fill);
        assert_eq!(config.horizon, Duration::from_secs(3 * 86_400));
        assert_eq!(config.mix.timing[TaskKind::Transcoding.index()].deadline, Duration::from_secs(86_400));
    }

    #[test]
    fn bad_scenarios_are_refused() {
        assert!(parse(&["--leftover", "spend"]).is_err());
        assert!(parse(&["--intensity", "scrubbing=-1"]).is_err());
        assert!(parse(&["--supply", "3", "--budget-factor", "2"]).is_err());
        let short = parse(&["--days", "0.05"]).unwrap();
        assert!(matches!(short.config(Modes::ALL), Err(ScenarioError::Horizon)));
        let zero = parse(&["--deadline", "scrubbing=0"]).unwrap();
        assert!(matches!(zero.config(Modes::ALL), Err(ScenarioError::Deadline(TaskKind::Scrubbing))));
        // Regression: spans past `Duration::MAX` panicked instead of being refused.
        let huge = parse(&["--days", "1e300"]).unwrap();
        assert!(matches!(huge.config(Modes::ALL), Err(ScenarioError::Horizon)));
        let huge = parse(&["--deadline", "scrubbing=1e300"]).unwrap();
        assert!(matches!(huge.config(Modes::ALL), Err(ScenarioError::Deadline(TaskKind::Scrubbing))));
    }
}
