//! `dingo bench flash`: the flash cache engines (`dingo_flash::bench`)
//! compared on a synthetic trace under equal DRAM and device-write budgets,
//! or on a Twitter or CacheLib kvcache trace CSV the user has.

use crate::output::ExperimentArgs;
use anyhow::Context;
use clap::Args;
use dingo_flash::bench::{BenchOptions, BenchSize, run_bench, run_bench_on, write_report};
use dingo_flash::trace::{TraceFormat, read_trace_file};
use std::path::PathBuf;

#[derive(Args)]
pub struct FlashBenchArgs {
    #[command(flatten)]
    run: ExperimentArgs,
    /// Write flash.json, flash-runs.csv, flash.md and the figures (SVG and PNG) here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replay this Twitter cache-trace CSV instead of the synthetic trace.
    #[arg(long, conflicts_with = "kvcache_trace")]
    twitter_trace: Option<PathBuf>,
    /// Replay this CacheLib kvcache trace CSV (with its header) instead of the synthetic trace.
    #[arg(long)]
    kvcache_trace: Option<PathBuf>,
    /// Read at most this many requests of the trace.
    #[arg(long)]
    max_requests: Option<u64>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

pub fn run(args: &FlashBenchArgs) -> anyhow::Result<()> {
    let size = if args.run.quick { BenchSize::Quick } else { BenchSize::Full };
    let options = BenchOptions { size, seed: args.seed };
    let file = match (&args.twitter_trace, &args.kvcache_trace) {
        (Some(path), _) => Some((path, TraceFormat::Twitter)),
        (None, Some(path)) => Some((path, TraceFormat::Kvcache)),
        (None, None) => None,
    };
    let report = match file {
        Some((path, format)) => {
            let trace = read_trace_file(path, format, args.max_requests)?;
            run_bench_on(&options, &path.display().to_string(), &trace)
        }
        None => run_bench(&options),
    };
    if let Some(dir) = &args.out {
        write_report(&report, dir).with_context(|| format!("writing {}", dir.display()))?;
        dingo_report::flash::write_flash_figures(dir, &report)?;
    }
    args.run.show(&report)
}
