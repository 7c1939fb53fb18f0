//! The storage subcommands: `meta`, `node`, `cluster
//! up|status|health|mark-dead|mark-live|drain|decommission`,
//! `fs put|get|ls|rm|stat`. Daemons run until Ctrl-C or SIGTERM.

mod cluster;
mod fs;

pub use cluster::{ClusterCommand, run_cluster};
pub use fs::{FsCommand, run_fs};

use anyhow::Result;
use clap::Args;
use dingo_auth::ServerCredentials;
use dingo_client::DEFAULT_META_ADDR;
use dingo_cluster::StorageConfig;
use dingo_daemon::{keep_freed_memory, shutdown_signal};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MetaArgs {
    /// Directory of the metadata database.
    #[arg(long)]
    pub data: PathBuf,
    /// gRPC listen address [default: 127.0.0.1:7400].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Prometheus /metrics address.
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub serve: ServerCredentials,
}

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// A disk directory; repeat for several disks.
    #[arg(long = "disk", required = true)]
    pub disks: Vec<PathBuf>,
    /// Metadata service address.
    #[arg(long, default_value = DEFAULT_META_ADDR)]
    pub meta: String,
    /// gRPC listen address.
    #[arg(long, default_value = "127.0.0.1:7410")]
    pub listen: SocketAddr,
    /// Address others reach this node at [default: the listen address].
    #[arg(long)]
    pub advertise: Option<String>,
    /// Prometheus /metrics address.
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Capacity of each disk, e.g. 10GB [default: the filesystem's size].
    #[arg(long, value_parser = dingo_types::parse_bytes)]
    pub capacity: Option<u64>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub serve: ServerCredentials,
}

pub async fn run_meta(a: MetaArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let security = cfg.credentials(&a.serve).security()?;
    dingo_meta::run(cfg.meta.meta_config(a.data, a.listen, a.metrics)?, security, shutdown_signal()).await?;
    Ok(())
}

pub async fn run_node(a: NodeArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let credentials = cfg.credentials(&a.serve);
    let endpoints = dingo_node::config_file::NodeEndpoints {
        listen: a.listen,
        advertise: a.advertise,
        meta: a.meta,
        meta_access: credentials.auth.access()?,
        metrics: a.metrics,
    };
    let config = cfg.node.node_config(a.disks, a.capacity, endpoints)?;
    dingo_node::run(config, credentials.security()?, shutdown_signal()).await?;
    Ok(())
}
