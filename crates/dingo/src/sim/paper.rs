//! `dingo sim paper`: `dingo_sim::paper`'s runs from the command line, the
//! figures and pages written by `dingo_report::paper`.

use super::{progress_bar, run_cost};
use clap::Args;
use dingo_sim::paper::PaperOptions;
use dingo_types::parse_bytes;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct PaperArgs {
    /// Small clusters, a short horizon and few points per sweep (minutes; the CI form).
    #[arg(long)]
    quick: bool,
    /// Capacity of the two headline runs (default 100PB; 2PB with --quick).
    #[arg(long, value_parser = parse_bytes)]
    capacity: Option<u64>,
    /// Capacity of the sensitivity runs (default 10PB; 2PB with --quick).
    #[arg(long, value_parser = parse_bytes)]
    sweep_capacity: Option<u64>,
    /// Where to write the figures, data and pages.
    #[arg(long, default_value = "sim-paper")]
    out: PathBuf,
    /// Print one JSON object (per figure, the published and measured values) instead of the table.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: &PaperArgs) -> anyhow::Result<()> {
    let mut options = if args.quick { PaperOptions::quick() } else { PaperOptions::full() };
    options.capacity_bytes = args.capacity.unwrap_or(options.capacity_bytes);
    options.sweep_capacity_bytes = args.sweep_capacity.unwrap_or(options.sweep_capacity_bytes);
    options.seed = args.seed;
    let started = Instant::now();
    let bar = progress_bar(0, args.json);
    let runs = dingo_sim::paper::run(&options, |i, n, p| {
        bar.set_length(n as u64);
        bar.set_position(i as u64);
        bar.set_message(format!("{} cluster {:?} {}={}", p.figure, p.cluster, p.parameter, p.x));
    })?;
    bar.finish_and_clear();
    let summary = runs.summary(run_cost(started));
    dingo_report::paper::write_paper(&args.out, &runs, &summary)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", runs.markdown());
        println!("\n{:.0} s; pages: {}", summary.cost.wall_seconds, args.out.join("paper.html").display());
    }
    Ok(())
}
