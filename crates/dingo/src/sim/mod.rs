//! `dingo sim run|sweep|paper`: the datacenter simulator (`dingo_sim`) from
//! the command line, with a progress bar; the files of `--out` are written
//! by `dingo_report`.

mod paper;
mod sweep;

use clap::{Args, Subcommand, ValueEnum};
use dingo_sim::scenario::Scenario;
use dingo_sim::sim::{Mode, Modes, SimConfig, SimResult, Simulation};
use dingo_sim::summary::RunCost;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

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
    scenario: Scenario,
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
