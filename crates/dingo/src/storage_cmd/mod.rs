//! The storage subcommands: `meta`, `node`, `cluster
//! up|status|health|mark-dead|mark-live|drain|decommission`,
//! `fs put|get|ls|rm|stat`. Daemons run until Ctrl-C or SIGTERM; their
//! flags and configuration are `dingo_cluster`'s.

mod cluster;
mod fs;

pub use cluster::{ClusterCommand, run_cluster};
pub use fs::{FsCommand, run_fs};

use anyhow::Result;
use dingo_cluster::{MetaFlags, NodeFlags};
use dingo_daemon::{keep_freed_memory, shutdown_signal};

pub async fn run_meta(a: MetaFlags) -> Result<()> {
    keep_freed_memory();
    let (config, security) = a.config()?;
    dingo_meta::run(config, security, shutdown_signal()).await?;
    Ok(())
}

pub async fn run_node(a: NodeFlags) -> Result<()> {
    keep_freed_memory();
    let (config, security) = a.config()?;
    dingo_node::run(config, security, shutdown_signal()).await?;
    Ok(())
}
