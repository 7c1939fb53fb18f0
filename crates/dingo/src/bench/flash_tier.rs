//! `dingo bench flash-tier`: the node's flash tier replayed under a
//! demo-like load (`dingo_flash::tier::bench`): DRAM only, a zoned tier, the
//! same tier on a conventional SSD; with `--live`, measured on running
//! local clusters instead (`dingo_demo::flash_tier`).

use crate::output::ExperimentArgs;
use anyhow::Context;
use clap::Args;
use dingo_demo::flash_tier::{FlashTierLiveConfig, run as run_live};
use dingo_flash::tier::bench::{FlashTierBenchConfig, run_flash_tier_bench};
use std::path::PathBuf;

#[derive(Args)]
pub struct FlashTierBenchArgs {
    #[command(flatten)]
    run: ExperimentArgs,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the demo's declarative timeline on real local clusters, each
    /// node's pinned region shrunk, with DRAM only and with `[node.flash]`.
    #[arg(long)]
    live: bool,
    /// With --live: repetitions of the pair (the report gives medians).
    #[arg(long, default_value_t = 1, requires = "live")]
    runs: u32,
    /// With --live: each node's pinned region [default: 2MB].
    #[arg(long, value_parser = crate::storage_cmd::parse_size, requires = "live")]
    pinned: Option<u64>,
    /// With --live: where the clusters' data go.
    #[arg(long, default_value = "./dingo-flash-tier", requires = "live")]
    out: PathBuf,
    /// With --live: keep the clusters' data directories afterwards.
    #[arg(long, requires = "live")]
    keep_data: bool,
}

pub async fn run(args: &FlashTierBenchArgs) -> anyhow::Result<()> {
    if !args.live {
        let config = FlashTierBenchConfig { seed: args.seed, ..FlashTierBenchConfig::standard(args.run.quick) };
        return args.run.show(&run_flash_tier_bench(&config).map_err(anyhow::Error::msg)?);
    }
    let exe = std::env::current_exe().context("cannot find the dingo executable")?;
    let standard = FlashTierLiveConfig::standard(args.run.quick, exe, args.out.clone());
    let config = FlashTierLiveConfig {
        seed: args.seed,
        runs: args.runs.max(1),
        keep_data: args.keep_data,
        node_pinned_bytes: args.pinned.unwrap_or(standard.node_pinned_bytes),
        ..standard
    };
    let report = run_live(&config, |run, arm| {
        if !args.run.json {
            eprintln!("run {run}: the timeline with {} ...", arm.name());
        }
    })
    .await?;
    args.run.show(&report)
}
