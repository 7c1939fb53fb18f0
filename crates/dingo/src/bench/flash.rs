//! `dingo bench flash`: `dingo_flash::bench` on a synthetic trace, or on a
//! Twitter or CacheLib kvcache trace CSV, and its figures.

use crate::output::ExperimentArgs;
use anyhow::Context;
use clap::Args;
use dingo_flash::bench::{BenchOptions, BenchSize, run_bench, run_bench_on_file, write_report};
use dingo_flash::trace::TraceFormat;
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
    let twitter = args.twitter_trace.as_ref().map(|path| (path, TraceFormat::Twitter));
    let report = match twitter.or(args.kvcache_trace.as_ref().map(|path| (path, TraceFormat::Kvcache))) {
        Some((path, format)) => run_bench_on_file(&options, path, format, args.max_requests)?,
        None => run_bench(&options),
    };
    if let Some(dir) = &args.out {
        write_report(&report, dir).with_context(|| format!("writing {}", dir.display()))?;
        dingo_report::flash::write_flash_figures(dir, &report)?;
    }
    args.run.show(&report)
}
