//! `dingo bench flash`: the flash cache engines (`dingo_flash::bench`)
//! compared on a synthetic trace under equal DRAM and device-write budgets,
//! or on a Twitter cache-trace CSV the user has.

use anyhow::Context;
use clap::Args;
use dingo_flash::bench::{BenchOptions, BenchSize, markdown, run_bench, run_bench_on, write_report};
use std::path::PathBuf;

#[derive(Args)]
pub struct FlashBenchArgs {
    /// The small form (seconds; what CI runs) instead of the full one (minutes).
    #[arg(long)]
    quick: bool,
    /// Print the report as one JSON object instead of the Markdown page.
    #[arg(long)]
    json: bool,
    /// Write flash.json, flash-runs.csv and flash.md here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replay this Twitter cache-trace CSV instead of the synthetic trace.
    #[arg(long)]
    twitter_trace: Option<PathBuf>,
    /// Read at most this many requests of the trace.
    #[arg(long)]
    max_requests: Option<u64>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

pub fn run(args: &FlashBenchArgs) -> anyhow::Result<()> {
    let options = BenchOptions { size: if args.quick { BenchSize::Quick } else { BenchSize::Full }, seed: args.seed };
    let report = match &args.twitter_trace {
        Some(path) => {
            let trace = dingo_flash::trace::read_twitter_file(path, args.max_requests)?;
            run_bench_on(&options, &path.display().to_string(), &trace)
        }
        None => run_bench(&options),
    };
    if let Some(dir) = &args.out {
        write_report(&report, dir).with_context(|| format!("writing {}", dir.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", markdown(&report));
    }
    Ok(())
}
