//! `dingo bench flash-tier`: the node's flash tier replayed under a
//! demo-like load (`dingo_flash::tier::bench`): DRAM only, a zoned tier, the
//! same tier on a conventional SSD; with `--live`, measured on running
//! local clusters instead (`dingo_demo::flash_tier`).

use crate::output::ExperimentArgs;
use anyhow::Context;
use clap::Args;
use dingo_demo::flash_tier::{FlashTierLiveConfig, LiveFlags, run as run_live};
use dingo_flash::tier::bench::{FlashTierBenchConfig, run_flash_tier_bench};

#[derive(Args)]
pub struct FlashTierBenchArgs {
    #[command(flatten)]
    run: ExperimentArgs,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    live: LiveFlags,
}

pub async fn run(args: &FlashTierBenchArgs) -> anyhow::Result<()> {
    if !args.live.live {
        let config = FlashTierBenchConfig { seed: args.seed, ..FlashTierBenchConfig::standard(args.run.quick) };
        return args.run.show(&run_flash_tier_bench(&config).map_err(anyhow::Error::msg)?);
    }
    let exe = std::env::current_exe().context("cannot find the dingo executable")?;
    let config = FlashTierLiveConfig::from_flags(&args.live, args.run.quick, args.seed, exe);
    let report = run_live(&config, |run, arm| {
        if !args.run.json {
            eprintln!("run {run}: the timeline with {} ...", arm.name());
        }
    })
    .await?;
    args.run.show(&report)
}
