//! `dingo bench io`: the storage benchmark (`dingo_iobench::storage`):
//! client and raw disk throughput, EC encode/decode speed.

use clap::Args;
use dingo_iobench::storage::{self, StorageOptions};
use dingo_types::parse_bytes;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BenchIoArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Bytes written and read per redundancy kind and for the raw test.
    #[arg(long, default_value = "1GB", value_parser = parse_bytes)]
    pub size: u64,
    /// Directory (on the filesystem to test) for the cluster's data.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Rounds of measurements; each figure is the median over rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: u32,
}

pub async fn run(a: BenchIoArgs) -> anyhow::Result<()> {
    dingo_daemon::keep_freed_memory();
    let opts = StorageOptions { exe: std::env::current_exe()?, dir: a.dir, bytes: a.size, trials: a.trials };
    crate::output::print(&storage::run(&opts).await?, a.json)
}
