//! The datacenter simulator: a time-driven cluster over a horizon (default
//! 30 days of 3-hour quanta) on which the eight maintenance tasks start
//! jobs, read in three modes over the same events:
//!
//! - [`Mode::Imperative`]: each job at its own steady pace, one disk byte
//!   per declared byte (the paper's baseline; a skip-deleted variant with a
//!   plain LRU is reported beside it);
//! - [`Mode::Declarative`]: the real planner ([`dingo_planner::Planner`]) with
//!   its dispatcher and a pinned cache of the configured size;
//! - [`Mode::Optimal`]: the lower bound, every distinct block read once (the
//!   paper's definition; a variant that also elides sets deleted before
//!   their deadline is reported beside it).
//!
//! One [`World`] drives all three, so every mode sees the same failures,
//! files and jobs. The run goes on past the horizon, without new work,
//! until every job started before it has closed, so all modes do the same
//! logical work.

pub mod checkpoint;
mod declarative;
mod files;
mod imperative;
mod optimal;
mod result;
pub mod stats;
pub mod world;

pub use checkpoint::CheckpointError;
pub use result::{Churn, Comparisons, ModeResults, SimResult, Variants};
pub use stats::{Mode, ModeResult, QuantumPoint, TaskTotals, WALL_UTILIZATION, io_wall, io_wall_search};
pub use world::{Job, JobSets, PAPER_DEMAND_MB_S_PER_TB, World};

use crate::cost::CostMeter;
use crate::mix::Mix;
use crate::model::{ModelError, ModelSpec};
use declarative::Declarative;
use dingo_planner::{Budget, DeclareError, DiskBudget, LeftoverPolicy, PlannerConfig};
use dingo_types::{TaskKind, Timestamp, Topology};
use imperative::Imperative;
use optimal::{Optimal, OptimalRule};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use stats::Recorder;
use std::time::Duration;
use thiserror::Error;

/// Above this resident set, each quantum ends by handing the heap's free
/// pages back ([`crate::cost::release_free_memory`]), and so does the
/// planning thread once it has joined the last replay: at 1 EB the first
/// cut a resumed stretch's peak by 9 % at no cost in time and the second
/// another 0.4 GB (session 22, one run each), but at 100 PB
/// (3.4 GB) it cost 7.5 % of the wall time in page faults for a peak
/// that was never a problem (docs/SIMULATOR.md, session 21).
const TRIM_ABOVE_RESIDENT_BYTES: u64 = 8 << 30;

/// Hands the heap's free pages back if the process is over
/// [`TRIM_ABOVE_RESIDENT_BYTES`] resident.
pub(crate) fn release_free_memory_if_large() {
    if crate::cost::resident_bytes() > TRIM_ABOVE_RESIDENT_BYTES {
        crate::cost::release_free_memory();
    }
}

/// Which modes a run simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modes {
    pub imperative: bool,
    pub declarative: bool,
    pub optimal: bool,
}

impl Modes {
    pub const ALL: Modes = Modes { imperative: true, declarative: true, optimal: true };

    pub fn only(mode: Mode) -> Modes {
        Modes {
            imperative: mode == Mode::Imperative,
            declarative: mode == Mode::Declarative,
            optimal: mode == Mode::Optimal,
        }
    }
}

/// Everything a run depends on. Same config, same results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Capacity, drive size, fill, blocks, files, layout, disk model, seed.
    pub cluster: ModelSpec,
    pub mix: Mix,
    /// Maintenance read demand in MB/s per TB of raw capacity.
    pub demand_mb_s_per_tb: f64,
    /// Multiplier of each task's demand, by [`TaskKind::index`] (1: as the mix says).
    pub intensity: [f64; TaskKind::COUNT],
    pub quantum: Duration,
    pub horizon: Duration,
    /// Cache per disk: the LRU in imperative mode, the pinned region in declarative mode.
    pub cache_per_disk: u64,
    /// The planner's cluster-wide byte budget per quantum, as a multiple of
    /// the total demand over one quantum (unless `supply_mb_s_per_tb` is set).
    pub budget_factor: f64,
    /// The planner's cluster-wide budget as a supply in MB/s per TB of raw
    /// capacity (the thesis' Fig. 6.15 axis); overrides `budget_factor`.
    pub supply_mb_s_per_tb: Option<f64>,
    /// What the planner does with budget its declarations do not need.
    pub leftover: LeftoverPolicy,
    /// Disk-head time each disk may spend on maintenance per quantum, as a
    /// fraction of the quantum.
    pub disk_share: f64,
    /// Diurnal swing of the budget: budget × (1 + a·sin(2π·t/24 h)), 0 ≤ a < 1.
    pub diurnal_amplitude: f64,
    /// Rebalancing declares this many candidate chunks per chunk it must move.
    pub rebalance_candidates: f64,
    /// Blocks fsck reads at the start of each file it checks.
    pub fsck_blocks: u32,
    /// Fraction of the files designated as the object/KV store that garbage
    /// collection rewrites (paper appendix A.2 names the subset, not its
    /// size: 20 % is our choice, see docs/REPRODUCTION.md).
    pub gc_subset_fraction: f64,
    /// Reconstruction of an erasure-coded chunk may read any `k` of its
    /// stripe's `n − 1` survivors, chosen by the planner (off: the first `k`
    /// live ones, as the paper's simulator does).
    pub rebuild_any_k: bool,
    /// Start in steady state: at the run's first instant every task already
    /// has the jobs it would have open after running for ever (off: every
    /// task's first event at the start, a cold cluster).
    pub warm_start: bool,
    pub modes: Modes,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cluster: ModelSpec::default(),
            mix: Mix::cluster_1(),
            demand_mb_s_per_tb: 2.0,
            intensity: [1.0; TaskKind::COUNT],
            quantum: Duration::from_secs(3 * 3600),
            horizon: Duration::from_secs(30 * 24 * 3600),
            cache_per_disk: 4_000_000_000,
            budget_factor: 1.5,
            supply_mb_s_per_tb: None,
            leftover: LeftoverPolicy::Unused,
            disk_share: 0.5,
            diurnal_amplitude: 0.0,
            rebalance_candidates: 4.0,
            fsck_blocks: 2,
            gc_subset_fraction: 0.2,
            rebuild_any_k: false,
            warm_start: true,
            modes: Modes::ALL,
        }
    }
}

#[derive(Debug, Error)]
pub enum SimError {
    #[error("building the cluster")]
    Model(#[from] ModelError),
    #[error("invalid simulation: {0}")]
    Invalid(String),
    #[error("the planner rejected a {task} declaration (a simulator bug): {error}")]
    Declare { task: TaskKind, error: DeclareError },
}

impl SimConfig {
    fn validate(&self) -> Result<(), SimError> {
        let bad = |what: &str| Err(SimError::Invalid(what.to_string()));
        if !(self.demand_mb_s_per_tb.is_finite() && self.demand_mb_s_per_tb > 0.0) {
            return bad("the demand must be a positive number of MB/s per TB");
        }
        if self.intensity.iter().any(|i| !i.is_finite() || *i < 0.0) {
            return bad("task intensities must be non-negative");
        }
        if self.quantum.as_millis() == 0 || self.horizon < self.quantum {
            return bad("the quantum must be positive and the horizon at least one quantum");
        }
        if !(self.budget_factor > 0.0 && self.disk_share > 0.0 && self.disk_share <= 1.0) {
            return bad("the budget factor must be positive and the disk share in (0, 1]");
        }
        if self.supply_mb_s_per_tb.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return bad("the supply must be a positive number of MB/s per TB");
        }
        if !(self.gc_subset_fraction > 0.0 && self.gc_subset_fraction <= 1.0) {
            return bad("the garbage-collection subset must be a fraction in (0, 1]");
        }
        if !(0.0..1.0).contains(&self.diurnal_amplitude) {
            return bad("the diurnal amplitude must be in [0, 1)");
        }
        if self.rebalance_candidates.is_nan() || self.rebalance_candidates < 1.0 {
            return bad("rebalancing must declare at least one candidate per chunk it moves");
        }
        if !(self.modes.imperative || self.modes.declarative || self.modes.optimal) {
            return bad("choose at least one mode");
        }
        Ok(())
    }

    /// Fits a short horizon (tests, quick runs): every task whose deadline
    /// is past the horizon gets the horizon as its deadline and at most one
    /// event per horizon. Scrubbing keeps its period, so its pace stays the
    /// coverage one (its one event covers the part of the cluster that pace
    /// reaches in the horizon), where a period cut to the horizon would
    /// scrub the whole cluster in it.
    pub fn squeeze_into_horizon(&mut self) {
        for task in TaskKind::ALL {
            let t = &mut self.mix.timing[task.index()];
            if t.deadline > self.horizon {
                if task != TaskKind::Scrubbing {
                    t.period = self.horizon.min(t.period);
                }
                t.deadline = self.horizon;
            }
        }
    }

    /// Total maintenance read demand, in bytes per second, with
    /// intensities (scrubbing's nominal share taken as the mix's: the
    /// budget's scale, not what the world generates).
    pub fn demand_bytes_per_sec(&self) -> f64 {
        let per_tb = self.demand_mb_s_per_tb * 1e6 * self.cluster.raw_capacity as f64 / 1e12;
        TaskKind::ALL.iter().map(|t| per_tb * self.mix.share(*t) * self.intensity[t.index()]).sum()
    }

    /// The planner's budget for the quantum starting at `start`.
    pub fn budget(&self, start: Timestamp) -> Budget {
        let q = self.quantum.as_secs_f64();
        let middle_hours = (start.as_millis() as f64 / 1000.0 + q / 2.0) / 3600.0;
        let swing = 1.0 + self.diurnal_amplitude * (2.0 * std::f64::consts::PI * middle_hours / 24.0).sin();
        let per_sec = match self.supply_mb_s_per_tb {
            Some(supply) => supply * 1e6 * self.cluster.raw_capacity as f64 / 1e12,
            None => self.demand_bytes_per_sec() * self.budget_factor,
        };
        Budget {
            cluster_bytes: (per_sec * q * swing) as u64,
            disk_head_time_us: DiskBudget::Uniform((q * 1e6 * self.disk_share * swing) as u64),
        }
    }

    fn quanta(&self, d: Duration) -> u32 {
        u32::try_from(d.as_millis().div_ceil(self.quantum.as_millis())).unwrap_or(u32::MAX)
    }
}

/// One run in progress. Call [`Simulation::step`] until it returns false,
/// then [`Simulation::finish`]; between two steps the whole run may be
/// saved and resumed in another process ([`checkpoint`]).
#[derive(Serialize, Deserialize)]
pub struct Simulation {
    config: SimConfig,
    world: World,
    imperative: Option<Imperative>,
    declarative: Option<Declarative>,
    optimal: Option<Optimal>,
    optimal_elide: Option<Optimal>,
    quantum: u32,
    horizon_quanta: u32,
    /// The quanta of the horizon and the longest deadline: a bound on the
    /// run's length, drain included (see [`Self::expected_quanta`]).
    expected_quanta: u32,
    /// Hard stop, in case declarative work never finishes.
    max_quanta: u32,
    /// Fraction of the files of day 0 deleted by the end of the horizon.
    initial_files_deleted: Option<f64>,
    /// Layout (share of raw bytes per scheme) and fill at the start and at
    /// the end of the horizon.
    layout: [(Vec<f64>, f64); 2],
    done: bool,
    /// What the run has cost so far, this process included: a checkpoint
    /// carries the earlier processes' share in its header.
    #[serde(skip)]
    meter: CostMeter,
}

impl Simulation {
    pub fn new(config: SimConfig) -> Result<Simulation, SimError> {
        // The run's cost includes building the cluster.
        let meter = CostMeter::default();
        config.validate()?;
        let world = World::new(&config)?;
        let disks = world.model.disk_count();
        let disk_model = world.model.spec().disk_model;
        let recorder = || Recorder::new(disks, disk_model);
        let block = world.model.spec().block_bytes;
        let imperative = config.modes.imperative.then(|| {
            let ways = usize::try_from(config.cache_per_disk / block).unwrap_or(usize::MAX).min(4096);
            Imperative::new(disks, ways, config.quantum, recorder())
        });
        let declarative = config.modes.declarative.then(|| {
            let rounds = (config.quantum.as_secs() / 30).clamp(1, 100_000) as u32;
            let planner = PlannerConfig {
                quantum: config.quantum,
                dispatch_rounds: rounds,
                leftover: config.leftover,
                // A group pins at most half the cluster's cache, leaving room
                // for the previous group's pins in their grace period, and
                // at most one disk's region on a disk: pins go as their
                // readers finish, and half a region split components more
                // often than pins overlapped (10 PB, 48 TB drives: 0.6
                // points less saving, 2.4 % reads beyond the plan against
                // 0.5 %).
                group_cache_bytes: (config.cache_per_disk / 2).saturating_mul(u64::from(disks)).max(block),
                group_disk_cache_bytes: config.cache_per_disk.max(block),
                ..PlannerConfig::default()
            };
            Declarative::new(planner, disks, config.cache_per_disk, recorder())
        });
        let optimal = config.modes.optimal.then(|| Optimal::new(OptimalRule::EachBlockOnce, recorder(), block));
        let optimal_elide =
            config.modes.optimal.then(|| Optimal::new(OptimalRule::ElideDeletedBeforeDeadline, recorder(), block));
        let layout = (world.layout(), world.fill());
        let horizon_quanta = config.quanta(config.horizon);
        let longest = TaskKind::ALL
            .iter()
            .filter(|t| world.task_rate(**t) > 0.0)
            .map(|t| config.quanta(world.deadline(*t)))
            .max()
            .unwrap_or(0);
        Ok(Simulation {
            expected_quanta: horizon_quanta + longest,
            max_quanta: horizon_quanta + 2 * longest + horizon_quanta,
            config,
            world,
            imperative,
            declarative,
            optimal,
            optimal_elide,
            quantum: 0,
            horizon_quanta,
            initial_files_deleted: None,
            layout: [layout.clone(), layout],
            done: false,
            meter,
        })
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub fn world(&self) -> &World {
        &self.world
    }

    /// Quanta the run is expected to take, including the drain after the
    /// horizon. Before the horizon, a bound: the horizon plus the longest
    /// deadline. From the horizon on no job starts, so the run ends once
    /// the last open job has closed (a 1 EB month: 361 quanta, not the
    /// bound's 480).
    pub fn expected_quanta(&self) -> u32 {
        if self.quantum < self.horizon_quanta {
            return self.expected_quanta;
        }
        let Some(last) = self.world.last_deadline() else { return self.quantum };
        let closing = self.config.quanta(last.since(self.world.start()));
        // The quantum that closes it, then the one that finds nothing left.
        closing.saturating_add(1).max(self.quantum)
    }

    /// What the run has cost so far, over every process it ran in; the
    /// meter outlives [`Self::finish`].
    pub fn cost_meter(&self) -> CostMeter {
        self.meter
    }

    /// Quanta simulated so far.
    pub fn quanta_done(&self) -> u32 {
        self.quantum
    }

    /// Simulates one quantum. Returns false once the run is over.
    pub fn step(&mut self) -> Result<bool, SimError> {
        if self.done {
            return Ok(false);
        }
        let q = self.quantum;
        let since_start = u64::from(q) * self.config.quantum.as_millis() as u64;
        let now = self.world.start().saturating_add(Duration::from_millis(since_start));
        let new_work = q < self.horizon_quanta;
        if !new_work && !self.busy() {
            self.done = true;
            return Ok(false);
        }
        let in_flight = if q == 0 && self.config.warm_start { self.world.warm_start() } else { Vec::new() };
        // Optimal settles the closed jobs later, on another thread, against
        // the blocks deleted as of now: those deleted then but not in this
        // quantum's advance (deletions only add up).
        let closed = self.world.close_due(now);
        let mut events = self.world.advance(now, new_work);
        if !in_flight.is_empty() {
            events.started.splice(0..0, in_flight);
        }
        if q == self.horizon_quanta {
            self.initial_files_deleted = Some(self.world.initial_files_deleted_fraction());
            self.layout[1] = (self.world.layout(), self.world.fill());
        }
        if let Some(imp) = &mut self.imperative {
            for &id in &events.started {
                imp.start(self.world.job(id));
            }
        }
        // The modes only read the world from here on: declare and plan the
        // declarative quantum on this thread while another runs the
        // imperative jobs and settles optimal's closed jobs (the previous
        // plan's replay runs on a third, see `Declarative::run_quantum`).
        let (world, budget) = (&self.world, self.config.budget(now));
        let deleted_now = &events.deleted;
        let hours = since_start as f64 / 3.6e6;
        let (imperative, optimal) = (self.imperative.as_mut(), self.optimal.as_mut());
        let optimal_elide = self.optimal_elide.as_mut();
        // Optimal's two rules and imperative mode share nothing: two
        // threads, so that neither holds up the end of the planning.
        let other_modes = move || {
            let settle = || {
                if let (Some(opt), Some(elide)) = (optimal, optimal_elide) {
                    for job in &closed {
                        let rebuilt = optimal::Rebuilt::of(job, &world.model);
                        let deleted = world.model.deleted();
                        opt.close_rebuilt(job, &world.model, deleted, deleted_now, rebuilt.as_ref());
                        elide.close_rebuilt(job, &world.model, deleted, deleted_now, rebuilt.as_ref());
                    }
                }
            };
            std::thread::scope(|s| {
                if !closed.is_empty() {
                    s.spawn(settle);
                }
                if let Some(imp) = imperative {
                    imp.run_quantum(world, now);
                }
            });
        };
        match &mut self.declarative {
            Some(decl) => {
                let started = events.started.iter().map(|&id| world.job(id));
                let declare = |planner: &mut _| Declarative::declare_jobs(planner, &world.model, deleted_now, started);
                decl.run_quantum(&world.model, now, &budget, hours, declare, other_modes)
                    .map_err(|(task, error)| SimError::Declare { task, error })?;
            }
            None => other_modes(),
        }
        for recorder in self.recorders() {
            recorder.end_quantum(hours);
        }
        self.quantum += 1;
        if self.quantum >= self.max_quanta {
            self.done = true;
        }
        release_free_memory_if_large();
        Ok(!self.done)
    }

    fn busy(&self) -> bool {
        self.world.open_jobs() > 0
            || self.declarative.as_ref().is_some_and(Declarative::busy)
            || self.imperative.as_ref().is_some_and(Imperative::busy)
    }

    /// Recorders closed at the end of each step (declarative mode closes
    /// its own when it replays a quantum).
    fn recorders(&mut self) -> impl Iterator<Item = &mut Recorder> {
        let imp = self.imperative.as_mut().map(|m| [&mut m.recorder, &mut m.skip_deleted]);
        let opt = [self.optimal.as_mut(), self.optimal_elide.as_mut()].map(|m| m.map(|m| &mut m.recorder));
        imp.into_iter().flatten().chain(opt.into_iter().flatten())
    }

    /// Runs every remaining quantum, calling `progress` after each.
    pub fn run(mut self, mut progress: impl FnMut(&Simulation)) -> Result<SimResult, SimError> {
        while self.step()? {
            progress(&self);
        }
        Ok(self.finish())
    }

    /// The results. Optimal's jobs still open (only if the hard stop hit)
    /// are settled now.
    pub fn finish(mut self) -> SimResult {
        let still_open = self.world.close_due(Timestamp(u64::MAX));
        for opt in [&mut self.optimal, &mut self.optimal_elide].into_iter().flatten() {
            for job in &still_open {
                opt.close(job, &self.world.model, self.world.model.deleted(), &RoaringTreemap::new());
            }
        }
        let model = &self.world.model;
        let disks = model.disk_count();
        let horizon = self.config.horizon.as_secs_f64();
        // Utilisation is the work's: from a warm start the modes also read
        // the jobs in flight at the start, so the time that work is worth at
        // the demand's rate is the horizon stretched by their share.
        let [generated, declared] = [World::generated_bytes, World::declared_bytes]
            .map(|bytes| TaskKind::ALL.iter().map(|&t| bytes(&self.world, t)).sum::<f64>());
        let work_secs = if generated > 0.0 { horizon * declared / generated } else { horizon };
        let quantum = self.config.quantum.as_secs_f64();
        let drive = model.spec().drive_bytes;
        let block = model.spec().block_bytes;
        let new = |mode, recorder| ModeResult::new(mode, recorder, disks, work_secs, quantum, drive);
        let lru_bytes = self.config.cache_per_disk;
        let (imperative, imperative_skip_deleted) = match self.imperative {
            Some(m) => {
                let mut variant = new(Mode::Imperative, m.skip_deleted);
                variant.cache_bytes_per_disk = lru_bytes;
                (Some(new(Mode::Imperative, m.recorder)), Some(variant))
            }
            None => (None, None),
        };
        let mut over_budget_quanta = 0;
        let mut refused_pin_bytes = 0;
        let declarative = self.declarative.map(|m| {
            let replay = m.finish();
            over_budget_quanta = replay.over_budget_quanta;
            refused_pin_bytes = replay.cache.refused_bytes;
            let wanted = replay.cache.max_disk_wanted;
            let mut r = new(Mode::Declarative, replay.recorder);
            r.cache_bytes_per_disk = wanted;
            r
        });
        let head_time_us = model.spec().disk_model.head_time_us(block);
        let optimal_result = |m: Optimal| {
            let disk_bytes = m.disk_bytes();
            let mut r = new(Mode::Optimal, m.recorder);
            r.disk_bytes = disk_bytes;
            r.head_time_us = disk_bytes / block * head_time_us;
            r.utilization = r.head_time_us as f64 / 1e6 / (f64::from(disks) * work_secs);
            r.io_wall_drive_bytes = io_wall(drive, r.utilization);
            r
        };
        let optimal = self.optimal.map(optimal_result);
        let optimal_elide_deleted = self.optimal_elide.map(optimal_result);
        let demand_realised = TaskKind::ALL
            .iter()
            .filter(|&&t| self.world.nominal_bytes(t) > 0.0)
            .map(|&t| (t.name().to_string(), self.world.generated_bytes(t) / self.world.nominal_bytes(t)))
            .collect();
        let scrub = TaskKind::Scrubbing;
        let scrub_deleted_fraction = declarative
            .as_ref()
            .filter(|_| self.world.declared_bytes(scrub) > 0.0)
            .map(|d| d.task(scrub).elided_bytes as f64 / self.world.declared_bytes(scrub));
        let [start, end] = self.layout;
        let churn = Churn {
            scrub_deleted_fraction,
            initial_files_deleted_fraction: self.initial_files_deleted.unwrap_or(0.0),
            layout_start: start.0,
            layout_end: end.0,
            fill_start: start.1,
            fill_end: end.1,
        };
        let modes = ModeResults { imperative, declarative, optimal };
        let variants = Variants { imperative_skip_deleted, optimal_elide_deleted };
        SimResult {
            mix: self.config.mix.name.clone(),
            mix_source: self.config.mix.source.clone(),
            capacity_bytes: model.spec().raw_capacity,
            drive_bytes: drive,
            disks,
            days: horizon / 86_400.0,
            quantum_secs: quantum,
            quanta: self.quantum,
            demand_mb_s_per_tb: self.config.demand_mb_s_per_tb,
            cache_per_disk_bytes: self.config.cache_per_disk,
            seed: model.spec().seed,
            comparisons: Comparisons::new(&modes, &variants),
            modes,
            variants,
            demand_realised,
            churn,
            over_budget_quanta,
            refused_pin_bytes,
        }
    }
}
