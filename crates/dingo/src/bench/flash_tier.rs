//! `dingo bench flash-tier`: the node's flash tier replayed under a
//! demo-like load (`dingo_flash::tier::bench`): DRAM only, a zoned tier, the
//! same tier on a conventional SSD.

use clap::Args;
use dingo_flash::tier::bench::{FlashTierBenchConfig, TierRun, run_flash_tier_bench};

#[derive(Args)]
pub struct FlashTierBenchArgs {
    /// Ten simulated minutes instead of two hours.
    #[arg(long)]
    quick: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: &FlashTierBenchArgs) -> anyhow::Result<()> {
    let config = FlashTierBenchConfig { seed: args.seed, ..FlashTierBenchConfig::standard(args.quick) };
    let r = run_flash_tier_bench(&config).map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let gb = |b: u64| b as f64 / 1e9;
    println!("{:<28} {:>10} {:>10} {:>13}", "", "DRAM only", "zoned", "conventional");
    for (name, get) in [
        ("planned disk reads, GB", (|t| t.planned_disk_read_bytes) as fn(&TierRun) -> u64),
        ("pin-overflow re-reads, GB", |t| t.pin_overflow_reread_bytes),
        ("foreground disk reads, GB", |t| t.foreground_disk_read_bytes),
        ("flash device writes, GB", |t| t.device.map_or(0, |d| d.nand_write_bytes)),
    ] {
        println!(
            "{name:<28} {:>10.2} {:>10.2} {:>13.2}",
            gb(get(&r.dram_only)),
            gb(get(&r.zoned)),
            gb(get(&r.conventional))
        );
    }
    println!(
        "pin-overflow re-reads cut {:.1} %; write amplification zoned {:.3}, conventional {:.3}; \
         zoned writes {:.0} % of the budget",
        r.pin_overflow_reread_reduction * 100.0,
        r.zoned_write_amplification,
        r.conventional_write_amplification,
        r.zoned_writes_of_budget * 100.0
    );
    Ok(())
}
