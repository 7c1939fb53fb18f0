//! What `dingo sim run`, `resume` and `sweep` do, as library calls: the
//! options (with the `clap` feature, also their flags), the simulations
//! with a progress callback per quantum (and checkpoints every so many
//! minutes), and their results. The command line only draws the progress
//! and prints.

use crate::cost::RunCost;
use crate::scenario::{Scenario, ScenarioError};
use crate::sim::{CheckpointError, Mode, Modes, SimConfig, SimError, SimResult, Simulation};
use crate::sweep::{self, SweepError, SweepKind, SweepPoint, SweepSummary};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("the checkpoint interval must be a non-negative number of minutes")]
    CheckpointInterval,
}

/// Where a sweep stands, reported after each simulated quantum of any of
/// its points (several run at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Points started and points finished, of `runs` distinct points.
    pub runs_started: usize,
    pub runs_done: usize,
    pub runs: usize,
    /// Quanta simulated, over every point.
    pub quanta_done: u64,
    /// The started points' horizons (more once jobs run on to their
    /// deadlines) and, for each point not started, their mean.
    pub quanta_expected: u64,
}

/// The quanta each started point has simulated and expects, by point.
struct SweepTally {
    quanta: Vec<Option<(u64, u64)>>,
    runs_done: usize,
    runs: usize,
}

impl SweepTally {
    fn progress(&self) -> Progress {
        let started: Vec<(u64, u64)> = self.quanta.iter().flatten().copied().collect();
        let expected: u64 = started.iter().map(|q| q.1).sum();
        let not_started = self.runs.saturating_sub(started.len()) as u64;
        Progress {
            runs_started: started.len(),
            runs_done: self.runs_done,
            runs: self.runs,
            quanta_done: started.iter().map(|q| q.0).sum(),
            quanta_expected: expected + not_started * expected / (started.len().max(1) as u64),
        }
    }
}

/// Simulates `config`, calling `progress(done, expected)` before the first
/// quantum and after each.
pub fn simulate(config: SimConfig, mut progress: impl FnMut(u64, u64)) -> Result<SimResult, SimError> {
    let sim = Simulation::new(config)?;
    progress(0, u64::from(sim.expected_quanta()));
    sim.run(|s| {
        let done = u64::from(s.quanta_done());
        progress(done, u64::from(s.expected_quanta()).max(done));
    })
}

/// Where a run writes its checkpoint, and how often.
#[derive(Clone, Debug)]
pub struct Checkpoints {
    pub path: PathBuf,
    /// Wall time between checkpoints; each is written at the end of the
    /// first quantum past it.
    pub every: Duration,
}

impl Checkpoints {
    fn new(path: PathBuf, minutes: f64) -> Result<Checkpoints, RunError> {
        let every = Duration::try_from_secs_f64(minutes * 60.0).map_err(|_| RunError::CheckpointInterval)?;
        Ok(Checkpoints { path, every })
    }
}

/// What one process does of a run: the simulation from wherever it
/// stands (its start, or a checkpoint) to its end.
pub struct Segment {
    pub sim: Simulation,
    pub checkpoints: Option<Checkpoints>,
}

impl Segment {
    /// Runs to the end, calling `progress(done, expected)` before the next
    /// quantum and after each, writing a checkpoint as `checkpoints` asks.
    /// Returns the result and what the whole run cost, earlier processes
    /// included.
    pub fn finish(self, mut progress: impl FnMut(u64, u64)) -> Result<(SimResult, RunCost), RunError> {
        let Segment { mut sim, checkpoints } = self;
        let meter = sim.cost_meter();
        progress(u64::from(sim.quanta_done()), u64::from(sim.expected_quanta()));
        let mut last_checkpoint = Instant::now();
        while sim.step()? {
            let done = u64::from(sim.quanta_done());
            progress(done, u64::from(sim.expected_quanta()).max(done));
            if let Some(c) = checkpoints.as_ref().filter(|c| last_checkpoint.elapsed() >= c.every) {
                sim.save_checkpoint(&c.path)?;
                last_checkpoint = Instant::now();
            }
        }
        Ok((sim.finish(), meter.cost()))
    }
}

/// What a run, a resumed run or a sweep prints (`dingo sim run`, `resume`, `sweep`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RunOutput {
    /// Write the data (JSON, CSV), the figures (SVG and PNG) and
    /// report.html into this directory.
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of a table (and a progress line a minute on stderr, not a bar).
    #[cfg_attr(feature = "clap", arg(long))]
    pub json: bool,
}

/// The modes a run simulates, as a command line names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ModeChoice {
    #[default]
    All,
    Imperative,
    Declarative,
    Optimal,
}

impl From<ModeChoice> for Modes {
    fn from(choice: ModeChoice) -> Modes {
        match choice {
            ModeChoice::All => Modes::ALL,
            ModeChoice::Imperative => Modes::only(Mode::Imperative),
            ModeChoice::Declarative => Modes::only(Mode::Declarative),
            ModeChoice::Optimal => Modes::only(Mode::Optimal),
        }
    }
}

/// One cluster over the horizon in one or all modes (`dingo sim run`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RunOptions {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub scenario: Scenario,
    /// Which modes to simulate.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "all"))]
    pub mode: ModeChoice,
    /// Write the whole simulation to this file every `--checkpoint-every`
    /// minutes, for `dingo sim resume` to continue the run in another process.
    #[cfg_attr(feature = "clap", arg(long))]
    pub checkpoint: Option<PathBuf>,
    /// Minutes of wall time between checkpoints.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 30.0, requires = "checkpoint"))]
    pub checkpoint_every: f64,
}

impl RunOptions {
    /// The simulation these options describe.
    pub fn config(&self) -> Result<SimConfig, ScenarioError> {
        self.scenario.config(self.mode.into())
    }

    /// The simulation at its start, and its checkpoints if asked for.
    pub fn start(&self) -> Result<Segment, RunError> {
        let checkpoints = self.checkpoint.clone().map(|path| Checkpoints::new(path, self.checkpoint_every));
        Ok(Segment { sim: Simulation::new(self.config()?)?, checkpoints: checkpoints.transpose()? })
    }
}

/// A run continued from its checkpoint (`dingo sim resume`), which it
/// goes on writing to the same file.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ResumeOptions {
    /// The checkpoint that `dingo sim run --checkpoint` (or an earlier resume) wrote.
    pub checkpoint: PathBuf,
    /// Minutes of wall time between checkpoints.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 30.0))]
    pub checkpoint_every: f64,
}

impl ResumeOptions {
    /// The simulation as the checkpoint left it, and its next checkpoints.
    pub fn start(&self) -> Result<Segment, RunError> {
        let checkpoints = Checkpoints::new(self.checkpoint.clone(), self.checkpoint_every)?;
        Ok(Segment { sim: Simulation::load_checkpoint(&self.checkpoint)?, checkpoints: Some(checkpoints) })
    }
}

/// A series of clusters varying one parameter (`dingo sim sweep`), every
/// mode simulated at each point.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SweepOptions {
    /// The parameter to vary.
    #[cfg_attr(feature = "clap", arg(value_enum))]
    pub what: SweepKind,
    /// Comma-separated values to try instead of the defaults (sizes for
    /// cache and drive-size, e.g. 16TB,32TB).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub values: Vec<String>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub scenario: Scenario,
    /// Points simulated at once (default: the machine's cores); the results do not depend on it.
    #[cfg_attr(feature = "clap", arg(long))]
    pub jobs: Option<NonZeroUsize>,
}

/// A sweep's points, their results (in the same order) and their summary.
#[derive(Clone, Debug)]
pub struct SweepRun {
    pub points: Vec<SweepPoint>,
    pub results: Vec<SimResult>,
    pub summary: SweepSummary,
}

impl SweepOptions {
    /// Simulates every point (identical points once), the values given or
    /// else the parameter's defaults.
    pub fn run(&self, progress: impl FnMut(Progress) + Send) -> Result<SweepRun, RunError> {
        let base = self.scenario.config(Modes::ALL)?;
        let points = if self.values.is_empty() {
            sweep::points(self.what, self.what.default_values(), &base)?
        } else {
            sweep::points(self.what, &self.values, &base)?
        };
        let configs: Vec<&SimConfig> = points.iter().map(|p| &p.config).collect();
        let tally = SweepTally {
            quanta: vec![None; points.len()],
            runs_done: 0,
            runs: sweep::Distinct::of(&configs).first_index.len(),
        };
        let state = Mutex::new((tally, progress));
        let lock = || state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let results = sweep::run_distinct(configs, sweep::jobs_or_cores(self.jobs), |point, config| {
            let result = simulate(config.clone(), |quanta_done, quanta_expected| {
                let (tally, report) = &mut *lock();
                tally.quanta[point] = Some((quanta_done, quanta_expected));
                report(tally.progress());
            });
            // A run that fails may not have started (a configuration the
            // simulation refuses); the sweep ends with its error.
            if result.is_ok() {
                let (tally, report) = &mut *lock();
                tally.runs_done += 1;
                report(tally.progress());
            }
            result
        })?;
        let summary = sweep::summarize(self.what, &base, &points, &results);
        Ok(SweepRun { points, results, summary })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Scenario {
        Scenario {
            preset: "cluster-1".into(),
            mix: None,
            capacity_bytes: 1_000_000_000_000_000,
            drive_bytes: 24_000_000_000_000,
            disks_per_node: 1,
            days: 0.5,
            quantum_hours: 3.0,
            demand_mb_s_per_tb: 2.0,
            cache_per_disk_bytes: 4_000_000_000,
            budget_factor: 1.5,
            supply_mb_s_per_tb: None,
            leftover: dingo_planner::LeftoverPolicy::Unused,
            gc_subset_fraction: 0.2,
            rebuild_any_k: false,
            cold_start: false,
            disk_share: 0.5,
            diurnal_amplitude: 0.0,
            intensity: Vec::new(),
            deadline_days: Vec::new(),
            seed: 1,
        }
    }

    #[test]
    fn a_run_reports_every_quantum_and_simulates_only_the_chosen_mode() {
        let options =
            RunOptions { scenario: small(), mode: ModeChoice::Declarative, checkpoint: None, checkpoint_every: 30.0 };
        let mut seen = Vec::new();
        let result = simulate(options.config().unwrap(), |done, expected| seen.push((done, expected))).unwrap();
        assert_eq!(seen.first().map(|p| p.0), Some(0));
        let &(done, expected) = seen.last().unwrap();
        assert!(done >= 4 && done == expected, "the last report is the run's length: {seen:?}");
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
        assert!(seen.iter().all(|&(done, expected)| done <= expected), "{seen:?}");
        assert!(result.modes.declarative.is_some());
        assert!(result.modes.imperative.is_none() && result.modes.optimal.is_none());
    }

    #[test]
    fn a_sweep_simulates_each_distinct_point_once_and_refuses_bad_values() {
        let values = vec!["1".into(), "1.0".into(), "2".into()];
        // Two points at once (that the results do not depend on the job
        // count is `run_distinct`'s test).
        let options = SweepOptions { what: SweepKind::Demand, values, scenario: small(), jobs: NonZeroUsize::new(2) };
        let mut seen = Vec::new();
        let sweep = options.run(|p| seen.push(p)).unwrap();
        assert_eq!(sweep.points.len(), 3);
        assert_eq!(sweep.results.len(), 3);
        assert_eq!(sweep.results[0], sweep.results[1], "the second point equals the first");
        assert_ne!(sweep.results[0], sweep.results[2]);
        assert!(seen.iter().all(|p| p.runs == 2 && p.runs_done <= p.runs_started), "{seen:?}");
        let last = seen.last().unwrap();
        assert_eq!((last.runs_started, last.runs_done), (2, 2));
        assert_eq!(last.quanta_done, last.quanta_expected);
        assert!(seen.windows(2).all(|w| w[0].quanta_done <= w[1].quanta_done), "{seen:?}");
        // Regression: a point the simulation refuses (too few nodes for a
        // stripe) never started, so it is not counted done.
        let refused = SweepOptions { scenario: Scenario { disks_per_node: 36, ..small() }, ..options.clone() };
        let mut reports = Vec::new();
        assert!(matches!(refused.run(|p| reports.push(p)), Err(RunError::Sim(_))));
        assert!(reports.iter().all(|p| p.runs_done <= p.runs_started), "{reports:?}");
        let bad = SweepOptions { values: vec!["-1".into()], ..options };
        assert!(matches!(bad.run(|_| {}), Err(RunError::Sweep(SweepError::Negative(_)))));
    }
}
