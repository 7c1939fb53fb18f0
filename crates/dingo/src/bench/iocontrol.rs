//! `dingo bench iocontrol <experiment>`: the node-level IO-control experiments (`dingo_iobench`, docs/IO_CONTROL.md),
//! mechanism against today's behaviour on a local cluster with HDD emulation.

use crate::output::ExperimentArgs;
use clap::{Args, Subcommand};
use dingo_iobench::harness::Options;
use dingo_iobench::output::{self, Experiment};
use dingo_iobench::{fairness, fgtail, steering, waiting};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum IoControlCommand {
    /// Foreground tail latency under maintenance (PAIO Fig. 5-9 analog): classful scheduler against the FIFO disk queue.
    ///
    /// Three minutes of load per run, one with --quick; writes fg-tail.json and fg-tail-series.csv.
    FgTail(Seeded),
    /// Replica steering around a slow disk (Sandook Fig. 7c/9 analog): weighted replica choice with congestion signals
    /// against random.
    ///
    /// One minute of load per run, half with --quick; writes steering.json, steering-series.csv and plots.
    Steering(Seeded),
    /// Idle-time scrubbing (Practical scrubbing Fig. 15 / Table III analog): the Waiting gate tuned for 1, 2 and 4 ms
    /// of mean slowdown against a fixed-rate scrubber.
    ///
    /// Three runs side by side, 60 s of load per cluster, 40 with --quick; writes waiting.json, waiting-series.csv and
    /// waiting-slowdown.{svg,png}.
    Waiting {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Per-tenant guarantees with tenants joining and leaving (PAIO Fig. 10 analog): declarations with shares against
    /// the FIFO queue.
    ///
    /// Three runs side by side, 10 s phases, 5 s with --quick; writes fairness.json, fairness-series.csv and
    /// fairness-tenants.{svg,png}.
    Fairness(Common),
}

#[derive(Args)]
pub struct Common {
    #[command(flatten)]
    run: ExperimentArgs,
    /// Write the JSON, the per-second series as CSV and the plots here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where the clusters keep their data.
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

#[derive(Args)]
pub struct Seeded {
    #[command(flatten)]
    common: Common,
    /// Runs per policy; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

pub async fn run(cmd: IoControlCommand) -> anyhow::Result<()> {
    use IoControlCommand as C;
    let progress = |line: &str| eprintln!("{line}");
    let options = |c: &Common, runs, seed| -> anyhow::Result<Options> {
        Ok(Options { exe: std::env::current_exe()?, work_dir: c.dir.clone(), quick: c.run.quick, runs, seed })
    };
    match cmd {
        C::FgTail(a) => show(&a.common, &fgtail::run(&options(&a.common, a.runs, a.seed)?, progress).await?),
        C::Steering(a) => show(&a.common, &steering::run(&options(&a.common, a.runs, a.seed)?, progress).await?),
        C::Waiting { common: c, seed } => show(&c, &waiting::run(&options(&c, waiting::RUNS, seed)?, progress).await?),
        C::Fairness(c) => show(&c, &fairness::run(&options(&c, fairness::RUNS, 0)?, progress).await?),
    }
}

/// Writes the files if asked, then prints the report as JSON or text.
fn show(c: &Common, report: &impl Experiment) -> anyhow::Result<()> {
    if let Some(dir) = &c.out {
        output::write_files(report, dir)?;
    }
    c.run.show(report)
}
