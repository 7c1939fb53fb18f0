//! The storage subcommands: `meta`, `node`, `cluster
//! up|status|health|mark-dead|mark-live|drain|decommission`,
//! `fs put|get|ls|rm|stat`. Daemons run until Ctrl-C or SIGTERM.

mod cluster;
mod fs;

pub use cluster::{ClusterCommand, run_cluster};
pub use fs::{FsCommand, run_fs};

use anyhow::Result;
use clap::Args;
use dingo_auth::{AuthSection, ClusterAccess, ServerSecurity, ServerTlsFiles};
use dingo_client::{Client, ReplicaChoice};
use dingo_cluster::StorageConfig;
use dingo_daemon::{keep_freed_memory, shutdown_signal};
use dingo_types::ByteSize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_META: &str = dingo_meta::config_file::DEFAULT_LISTEN;

/// How a command reaches the storage services: the cluster secret and,
/// when they serve TLS, the authority to trust. Each overrides the
/// config's `[auth]` table.
#[derive(Args, Debug, Clone)]
pub struct AccessArgs {
    /// File holding the cluster secret every storage call carries (mode
    /// 0600; `dingo cluster up` writes DATA/cluster.secret).
    #[arg(long, global = true, env = "DINGO_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// Call the storage services over TLS, trusting the certificate
    /// authority in this PEM file.
    #[arg(long, global = true, env = "DINGO_CA")]
    pub ca: Option<PathBuf>,
}

impl AccessArgs {
    /// The `[auth]` table `auth` with these flags over it.
    pub fn over(&self, auth: &AuthSection) -> AuthSection {
        auth.overridden(self.secret_file.clone(), self.ca.clone())
    }

    pub fn access(&self) -> Result<ClusterAccess> {
        Ok(self.over(&AuthSection::default()).access()?)
    }
}

/// What a daemon serves with: the config's `[auth]` and `[tls]` under
/// these flags.
#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub access: AccessArgs,
    /// Serve gRPC over TLS with this certificate chain (PEM) [config: tls.cert].
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM) [config: tls.key].
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl ServeArgs {
    /// The secret to require and the TLS files to serve with.
    fn security(&self, cfg: &StorageConfig) -> Result<ServerSecurity> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(ServerTlsFiles { cert: cert.clone(), key: key.clone() }),
            _ => cfg.tls.clone(),
        };
        Ok(ServerSecurity { secret: self.access.over(&cfg.auth).secret()?, tls })
    }
}

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
    pub serve: ServeArgs,
}

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// A disk directory; repeat for several disks.
    #[arg(long = "disk", required = true)]
    pub disks: Vec<PathBuf>,
    /// Metadata service address.
    #[arg(long, default_value = DEFAULT_META)]
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
    #[arg(long, value_parser = parse_size)]
    pub capacity: Option<u64>,
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Where the metadata service is and how long to wait for it.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Metadata service address.
    #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
    pub meta: String,
    /// Deadline of each metadata operation, retries included (e.g. 10s).
    #[arg(long, env = "DINGO_TIMEOUT", default_value = "10s", value_parser = dingo_types::parse_duration)]
    pub timeout: Duration,
    /// How foreground reads choose a copy: "steering" (by weight, away from
    /// disks that report congestion) or "random" (the baseline).
    #[arg(long, env = "DINGO_REPLICA_CHOICE", default_value = "steering", value_parser = parse_replica_choice)]
    pub replica_choice: ReplicaChoice,
    #[command(flatten)]
    pub access: AccessArgs,
}

fn parse_replica_choice(s: &str) -> std::result::Result<ReplicaChoice, String> {
    s.parse()
}

impl ClientArgs {
    pub fn client(&self) -> Result<Client> {
        anyhow::ensure!(!self.timeout.is_zero(), "--timeout must be positive");
        let client = Client::new(&self.meta, &self.access.access()?)?;
        Ok(client.with_deadline(self.timeout).with_replica_choice(self.replica_choice))
    }
}

/// Parses a size such as `500MB` exactly (a clap value parser).
pub fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<ByteSize>().map(ByteSize::bytes).map_err(|e| e.to_string())
}

pub async fn run_meta(a: MetaArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let security = a.serve.security(&cfg)?;
    dingo_meta::run(cfg.meta.meta_config(a.data, a.listen, a.metrics)?, security, shutdown_signal()).await?;
    Ok(())
}

pub async fn run_node(a: NodeArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let security = a.serve.security(&cfg)?;
    let meta_access = a.serve.access.over(&cfg.auth).access()?;
    let endpoints = dingo_node::config_file::NodeEndpoints {
        listen: a.listen,
        advertise: a.advertise,
        meta: a.meta,
        meta_access,
        metrics: a.metrics,
    };
    let config = cfg.node.node_config(a.disks, a.capacity, endpoints)?;
    dingo_node::run(config, security, shutdown_signal()).await?;
    Ok(())
}
