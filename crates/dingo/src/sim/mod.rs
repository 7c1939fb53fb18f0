//! `dingo sim run|sweep|paper`: the datacenter simulator (`dingo_sim`) from
//! the command line, with a progress bar; the files of `--out` are written
//! by `dingo_report`.

mod paper;
mod sweep;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use dingo_planner::LeftoverPolicy;
use dingo_sim::ClusterSpec;
use dingo_sim::mix::Mix;
use dingo_sim::sim::{Mode, Modes, SimConfig, SimResult, Simulation};
use dingo_sim::summary::RunCost;
use dingo_types::{TaskKind, parse_bytes};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum SimCommand {
    /// Simulate one cluster over the horizon in one or all modes.
    Run(RunArgs),
    /// Simulate a series of clusters varying one parameter.
    Sweep(sweep::SweepArgs),
    /// Regenerate every simulator figure of the Declarative IO paper's
    /// evaluation and the thesis' supply and cache studies, with a page
    /// that puts each published number beside the measured one.
    Paper(paper::PaperArgs),
}

pub fn run(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Run(args) => run_one(&args),
        SimCommand::Sweep(args) => sweep::run(&args),
        SimCommand::Paper(args) => paper::run(&args),
    }
}

/// The cluster, workload and planner settings shared by `run` and `sweep`.
#[derive(Args, Clone)]
pub struct ScenarioArgs {
    /// Built-in task mix: cluster-1 or cluster-2 (thesis Table 6.2), or bench.
    #[arg(long, default_value = "cluster-1")]
    preset: String,
    /// A mix TOML file to use instead of the preset (see docs/SIMULATOR.md).
    #[arg(long, conflicts_with = "preset")]
    mix: Option<PathBuf>,
    /// Raw capacity of the cluster (e.g. 100PB, 1EB).
    #[arg(long, default_value = "100PB", value_parser = parse_bytes)]
    capacity: u64,
    /// Drive size.
    #[arg(long, default_value = "24TB", value_parser = parse_bytes)]
    drive_size: u64,
    /// Disks per storage node (members of a stripe sit on distinct nodes).
    #[arg(long, default_value_t = 36)]
    disks_per_node: u32,
    /// Horizon in days; jobs started before it run to their deadlines.
    #[arg(long, default_value_t = 30.0)]
    days: f64,
    /// Scheduling quantum (the simulation step) in hours.
    #[arg(long, default_value_t = 3.0)]
    quantum_hours: f64,
    /// Total maintenance read demand in MB/s per TB of raw capacity.
    #[arg(long, default_value_t = 2.0)]
    demand: f64,
    /// Cache per disk: the LRU (imperative) and the pinned region (declarative).
    #[arg(long, default_value = "4GB", value_parser = parse_bytes)]
    cache_per_disk: u64,
    /// The planner's cluster-wide budget per quantum, as a multiple of the demand.
    #[arg(long, default_value_t = 1.5, conflicts_with = "supply")]
    budget_factor: f64,
    /// The planner's cluster-wide budget as a supply in MB/s per TB of raw
    /// capacity (instead of --budget-factor).
    #[arg(long)]
    supply: Option<f64>,
    /// What the planner does with budget its declarations do not need this
    /// quantum: leave it unused (the paper) or fill it, earliest deadline first (the thesis).
    #[arg(long, value_enum, default_value = "unused")]
    leftover: LeftoverArg,
    /// Fraction of the files that form the object/KV store garbage collection rewrites.
    #[arg(long, default_value_t = 0.2)]
    gc_subset: f64,
    /// Disk-head time per disk the planner may use, as a fraction of each quantum.
    #[arg(long, default_value_t = 0.5)]
    disk_share: f64,
    /// Diurnal swing of the budget, 0 (flat) to below 1.
    #[arg(long, default_value_t = 0.0)]
    diurnal: f64,
    /// Multiply one task's demand: TASK=FACTOR (repeatable), e.g. garbage-collection=2.
    #[arg(long = "intensity", value_name = "TASK=FACTOR", value_parser = task_value)]
    intensity: Vec<(TaskKind, f64)>,
    /// Override one task's deadline: TASK=DAYS (repeatable), e.g. transcoding=1.
    #[arg(long = "deadline", value_name = "TASK=DAYS", value_parser = task_value)]
    deadline: Vec<(TaskKind, f64)>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn task_value(s: &str) -> Result<(TaskKind, f64), String> {
    let (task, value) = s.split_once('=').ok_or_else(|| format!("expected TASK=NUMBER, got `{s}`"))?;
    let task: TaskKind = task.trim().parse()?;
    let value: f64 = value.trim().parse().map_err(|_| format!("`{value}` is not a number"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("`{value}` must be a non-negative number"));
    }
    Ok((task, value))
}

impl ScenarioArgs {
    pub fn config(&self, modes: Modes) -> anyhow::Result<SimConfig> {
        let mix = match &self.mix {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                Mix::from_toml(&text).with_context(|| format!("in {}", path.display()))?
            }
            None => Mix::preset(&self.preset)?,
        };
        if !(self.days > 0.0 && self.quantum_hours > 0.0 && self.days * 24.0 >= self.quantum_hours) {
            bail!("--days and --quantum-hours must be positive, and the horizon at least one quantum");
        }
        let mut config = SimConfig {
            cluster: ClusterSpec {
                raw_capacity: self.capacity,
                drive_bytes: self.drive_size,
                disks_per_node: self.disks_per_node,
                seed: self.seed,
                ..ClusterSpec::default()
            },
            mix,
            demand_mb_s_per_tb: self.demand,
            quantum: Duration::from_secs_f64(self.quantum_hours * 3600.0),
            horizon: Duration::from_secs_f64(self.days * 86_400.0),
            cache_per_disk: self.cache_per_disk,
            budget_factor: self.budget_factor,
            supply_mb_s_per_tb: self.supply,
            leftover: match self.leftover {
                LeftoverArg::Unused => LeftoverPolicy::Unused,
                LeftoverArg::Fill => LeftoverPolicy::Fill,
            },
            gc_subset_fraction: self.gc_subset,
            disk_share: self.disk_share,
            diurnal_amplitude: self.diurnal,
            modes,
            ..SimConfig::default()
        };
        for &(task, factor) in &self.intensity {
            config.intensity[task.index()] = factor;
        }
        for &(task, days) in &self.deadline {
            if days <= 0.0 {
                bail!("the deadline of {task} must be positive");
            }
            config.mix.timing[task.index()].deadline = Duration::from_secs_f64(days * 86_400.0);
        }
        Ok(config)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LeftoverArg {
    Unused,
    Fill,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    All,
    Imperative,
    Declarative,
    Optimal,
}

impl ModeArg {
    fn modes(self) -> Modes {
        match self {
            ModeArg::All => Modes::ALL,
            ModeArg::Imperative => Modes::only(Mode::Imperative),
            ModeArg::Declarative => Modes::only(Mode::Declarative),
            ModeArg::Optimal => Modes::only(Mode::Optimal),
        }
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Which modes to simulate.
    #[arg(long, value_enum, default_value = "all")]
    mode: ModeArg,
    /// Write summary.json, result.json, quanta.csv, tasks.csv, the figures
    /// (SVG and PNG) and report.html into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON summary object instead of a table (and no progress bar).
    #[arg(long)]
    json: bool,
}

/// A progress bar on stderr, hidden when `quiet` or stderr is not a terminal.
pub fn progress_bar(len: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} quanta, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

/// Runs one simulation, advancing `bar` by one per quantum.
pub fn simulate(config: SimConfig, bar: &ProgressBar) -> anyhow::Result<SimResult> {
    let sim = Simulation::new(config)?;
    bar.set_length(u64::from(sim.expected_quanta()));
    bar.set_position(0);
    let result = sim.run(|s| {
        let done = u64::from(s.quanta_done());
        if done > bar.length().unwrap_or(0) {
            bar.set_length(done);
        }
        bar.set_position(done);
    })?;
    Ok(result)
}

/// What the run so far cost this process.
pub fn run_cost(started: Instant) -> RunCost {
    RunCost { wall_seconds: started.elapsed().as_secs_f64(), peak_rss_bytes: crate::bench::peak_rss_bytes() }
}

fn run_one(args: &RunArgs) -> anyhow::Result<()> {
    let config = args.scenario.config(args.mode.modes())?;
    let started = Instant::now();
    let bar = progress_bar(0, args.json);
    bar.set_message(format!("{} {}", config.mix.name, dingo_types::format_bytes(config.cluster.raw_capacity)));
    let result = simulate(config, &bar)?;
    bar.finish_and_clear();
    let summary = result.summary(run_cost(started));
    if let Some(dir) = &args.out {
        dingo_report::run::write_run(dir, &result, &summary)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", result.table());
        let cost = summary.cost;
        println!("  {:.1} s, peak RSS {}", cost.wall_seconds, dingo_types::format_bytes(cost.peak_rss_bytes));
        if let Some(dir) = &args.out {
            println!("  report: {}", dir.join("report.html").display());
        }
    }
    Ok(())
}
