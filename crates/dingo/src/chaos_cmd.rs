//! `dingo chaos`: a randomized fault campaign against a local cluster
//! (`dingo_chaos`); prints its report and fails if a check failed.

use anyhow::Result;
use dingo_chaos::ChaosConfig;
use dingo_types::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ChaosArgs {
    /// How long faults are injected, e.g. 10m (the heal and checks follow).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    duration: Duration,
    /// Seed of the faults and the workload (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Directory of the cluster (default: a temporary one, removed if
    /// every check passed).
    #[arg(long)]
    data: Option<PathBuf>,
}

pub async fn run(a: ChaosArgs) -> Result<()> {
    let seed = a.seed.unwrap_or_else(dingo_daemon::now_ms);
    let mut cfg = ChaosConfig::new(std::env::current_exe()?, a.duration, seed);
    cfg.data = a.data;
    let report = dingo_chaos::run(&cfg).await?;
    if a.json {
        crate::output::json(&report)?;
    } else {
        outln!("{report}");
    }
    anyhow::ensure!(report.passed, "the campaign's checks failed; reproduce with `{}`", report.reproduce());
    Ok(())
}
