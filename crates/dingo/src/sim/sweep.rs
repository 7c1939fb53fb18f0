//! `dingo sim sweep`: `dingo_sim::sweep` from the command line.

use super::{progress_bar, simulate};
use clap::Args;
use dingo_sim::scenario::Scenario;
use dingo_sim::sim::Modes;
use dingo_sim::sweep::{self, SweepKind};
use std::path::PathBuf;

#[derive(Args)]
pub struct SweepArgs {
    /// The parameter to vary.
    #[arg(value_enum)]
    what: SweepKind,
    /// Comma-separated values to try instead of the defaults (sizes for
    /// cache and drive-size, e.g. 16TB,32TB).
    #[arg(long, value_delimiter = ',')]
    values: Vec<String>,
    #[command(flatten)]
    scenario: Scenario,
    /// Write sweep.json, sweep.csv, the figures and report.html here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of a table (and no progress bar).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let base = args.scenario.config(Modes::ALL)?;
    let points = if args.values.is_empty() {
        sweep::points(args.what, args.what.default_values(), &base)?
    } else {
        sweep::points(args.what, &args.values, &base)?
    };
    let bar = progress_bar(0, args.json);
    let results = sweep::run_distinct(points.iter().map(|p| &p.config), |i, config| {
        bar.set_message(format!("point {}/{}", i + 1, points.len()));
        simulate(config.clone(), &bar)
    })?;
    bar.finish_and_clear();
    let summary = sweep::summarize(args.what, &base, &points, &results);
    if let Some(dir) = &args.out {
        dingo_report::sweep::write_sweep(dir, args.what, &points, &results, &summary)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", summary.table());
        if let Some(dir) = &args.out {
            println!("report: {}", dir.join("report.html").display());
        }
    }
    Ok(())
}
