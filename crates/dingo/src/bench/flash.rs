//! `dingo bench flash`: `dingo_flash::bench` on a synthetic trace, or on a
//! Twitter or CacheLib kvcache trace CSV, and its figures; or (`--real`)
//! the real engines against the simulator.

use crate::output::ExperimentArgs;
use anyhow::Context;
use clap::Args;
use dingo_flash::bench::{BenchChoice, BenchOptions, BenchSize, run_bench, run_bench_on_file, write_report};
use dingo_flash::real::run_real_cross_checks;
use std::path::PathBuf;

#[derive(Args)]
pub struct FlashBenchArgs {
    #[command(flatten)]
    run: ExperimentArgs,
    /// Write flash.json, flash-runs.csv, flash.md and the figures (SVG and PNG) here.
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    choice: BenchChoice,
}

pub fn run(args: &FlashBenchArgs) -> anyhow::Result<()> {
    let choice = &args.choice;
    if let Some(requests) = choice.real {
        return args.run.show(&run_real_cross_checks(requests as usize, choice.seed, args.out.as_deref())?);
    }
    let size = if args.run.quick { BenchSize::Quick } else { BenchSize::Full };
    let options = BenchOptions { size, seed: choice.seed };
    let report = match choice.trace_file() {
        Some((path, format)) => run_bench_on_file(&options, path, format, choice.max_requests)?,
        None => run_bench(&options),
    };
    if let Some(dir) = &args.out {
        write_report(&report, dir).with_context(|| format!("writing {}", dir.display()))?;
        dingo_report::flash::write_flash_figures(dir, &report)?;
    }
    args.run.show(&report)
}
