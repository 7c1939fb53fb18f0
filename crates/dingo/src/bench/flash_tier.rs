//! `dingo bench flash-tier`: the node's flash tier replayed under a
//! demo-like load (`dingo_flash::tier::bench`): DRAM only, a zoned tier, the
//! same tier on a conventional SSD.

use crate::output::ExperimentArgs;
use clap::Args;
use dingo_flash::tier::bench::{FlashTierBenchConfig, run_flash_tier_bench};

#[derive(Args)]
pub struct FlashTierBenchArgs {
    #[command(flatten)]
    run: ExperimentArgs,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: &FlashTierBenchArgs) -> anyhow::Result<()> {
    let config = FlashTierBenchConfig { seed: args.seed, ..FlashTierBenchConfig::standard(args.run.quick) };
    args.run.show(&run_flash_tier_bench(&config).map_err(anyhow::Error::msg)?)
}
