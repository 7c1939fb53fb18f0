//! `dingo cluster ...`: a local cluster's start, status, health, and the
//! state of its nodes and disks (mark dead or live, drain, decommission).

use super::ClientArgs;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use dingo_client::{Client, ClusterView, Device, DeviceState, DiskSlowdown, DrainEvent, state_name};
use dingo_cluster::{ClusterSpec, LocalCluster, UpRequest};
use dingo_daemon::shutdown_signal;
use dingo_types::{DiskId, NodeId, format_bytes};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start the metadata service and N nodes as processes on loopback.
    Up(ClusterUpArgs),
    /// Nodes, disks, usage and liveness.
    Status {
        #[command(flatten)]
        client: ClientArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Health at a glance: nodes and disks by state, blocks with reduced or
    /// no redundancy, corrupt chunks, open files, repair outstanding.
    Health {
        #[command(flatten)]
        client: ClientArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Mark a node or disk DEAD: its chunks count as lost and are rebuilt
    /// elsewhere (by `dingo maintain`, or `dingo task reconstruct`).
    MarkDead(MarkArgs),
    /// Mark a node or disk LIVE again (also cancels a drain).
    MarkLive(MarkArgs),
    /// Drain a node or disk: nothing new is placed there, reads go on, `dingo
    /// maintain` moves its chunks to other nodes, and it becomes
    /// DECOMMISSIONED once empty (then it can be stopped). Refused for a dead
    /// device, or if too few nodes would remain for some file's redundancy.
    Drain(MarkArgs),
    /// Drain a node or disk and wait, reporting progress, until it is
    /// DECOMMISSIONED.
    Decommission(DecommissionArgs),
    /// Fault injection: slow one disk's emulated head by a factor for a
    /// while. Its node must allow it (`fault_injection = true` under
    /// `[node]`).
    SlowDisk(SlowDiskArgs),
}

#[derive(Args, Debug)]
pub struct SlowDiskArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The disk's id (as `cluster status` lists it).
    #[arg(long)]
    pub disk: u32,
    /// How many times slower, at least 1.
    #[arg(long)]
    pub factor: f64,
    /// From how long after the call, e.g. 2s.
    #[arg(long, default_value = "0s", value_parser = dingo_types::parse_duration)]
    pub after: Duration,
    /// For how long, e.g. 30s.
    #[arg(long = "for", value_parser = dingo_types::parse_duration)]
    pub lasting: Duration,
}

#[derive(Args, Debug)]
pub struct DecommissionArgs {
    #[command(flatten)]
    pub target: MarkArgs,
    /// Start the drain and return at once.
    #[arg(long)]
    pub no_wait: bool,
    /// How often to report progress while waiting, e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = dingo_types::parse_duration)]
    pub progress_every: Duration,
}

// Exactly one of the two, checked in `device()`: as a clap group it cannot
// also be flattened into `DecommissionArgs` (clap then demands an unnamed
// argument).
#[derive(Args, Debug)]
pub struct MarkArgs {
    /// Node id (as `cluster status` shows it).
    #[arg(long)]
    pub node: Option<u32>,
    /// Disk id.
    #[arg(long)]
    pub disk: Option<u32>,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Args, Debug)]
pub struct ClusterUpArgs {
    /// Storage nodes to start [default: 3, or cluster.nodes].
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Disk directories per node [default: 1, or cluster.disks_per_node].
    #[arg(long)]
    pub disks_per_node: Option<u32>,
    /// Data directory of the whole cluster (required here or as cluster.data).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// First port (meta); 0 picks free ports [default: 7400].
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Storage config file (TOML; see docs/STORAGE.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Serve every daemon's gRPC over TLS, with a throwaway authority and
    /// certificate made in DATA/tls/ (callers pass --ca DATA/tls/ca.pem).
    #[arg(long)]
    pub tls: bool,
    /// Do not start the maintenance supervisor (`dingo maintain`).
    #[arg(long)]
    pub no_maintain: bool,
    /// Options for the maintenance supervisor, e.g. "--interval 2s --scrub-every 1d".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub maintain_args: String,
}

pub async fn run_cluster(cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Up(a) => cluster_up(a).await,
        ClusterCommand::Status { client, json } => cluster_status(&client, json).await,
        ClusterCommand::Health { client, json } => cluster_health(&client, json).await,
        ClusterCommand::MarkDead(m) => mark(m, DeviceState::Dead).await,
        ClusterCommand::MarkLive(m) => mark(m, DeviceState::Live).await,
        ClusterCommand::Drain(m) => mark(m, DeviceState::Draining).await,
        ClusterCommand::Decommission(a) => decommission(a).await,
        ClusterCommand::SlowDisk(a) => {
            let slowdown = DiskSlowdown { disk: DiskId(a.disk), factor: a.factor, after: a.after, lasting: a.lasting };
            a.client.client()?.inject_slowdown(slowdown).await?;
            println!("disk {} slowed {}x from {:?} for {:?}", a.disk, a.factor, a.after, a.lasting);
            Ok(())
        }
    }
}

async fn cluster_up(a: ClusterUpArgs) -> Result<()> {
    let request = UpRequest {
        nodes: a.nodes,
        disks_per_node: a.disks_per_node,
        data: a.data,
        base_port: a.base_port,
        config: a.config,
        tls: a.tls,
    };
    let spec = ClusterSpec::for_up(std::env::current_exe().context("cannot find the dingo executable")?, request)?;
    let nodes = spec.nodes;
    let mut cluster = LocalCluster::start(spec)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    if !a.no_maintain {
        let args: Vec<String> = a.maintain_args.split_whitespace().map(String::from).collect();
        cluster.start_maintainer(&args)?;
    }
    println!(
        "cluster up: metadata service at {} with {nodes} node(s){}; logs in {}; Ctrl-C stops it",
        cluster.meta_addr(),
        if a.no_maintain { "" } else { " and the maintenance supervisor" },
        cluster.log_dir().display()
    );
    // What other `dingo` commands need to reach this cluster.
    let auth = &cluster.credentials().auth;
    if let Some(secret) = &auth.secret_file {
        println!("  credentials: export DINGO_SECRET_FILE={}", secret.display());
    }
    if let Some(ca) = &auth.ca {
        println!("  TLS:         export DINGO_CA={}", ca.display());
    }
    // Directory and log names count from 0 in start order; the metadata
    // service numbers nodes in registration order.
    for (i, id) in cluster.node_ids().await {
        println!(
            "  node{i} (logs/node{i}.log, {}/node{i}/) is node {id} at {}",
            cluster.data_dir().display(),
            cluster.node_addr(i)
        );
    }
    cluster.watch_until(shutdown_signal(), |e| eprintln!("warning: {e}")).await;
    println!("stopping cluster");
    cluster.stop();
    Ok(())
}

async fn cluster_status(client: &ClientArgs, json: bool) -> Result<()> {
    let view = ClusterView::from(&client.client()?.cluster_status().await?);
    crate::output::print(&view, json)
}

async fn cluster_health(client: &ClientArgs, json: bool) -> Result<()> {
    crate::output::print(&client.client()?.health().await?, json)
}

impl MarkArgs {
    fn device(&self) -> Result<Device> {
        match (self.node, self.disk) {
            (Some(n), None) => Ok(Device::Node(NodeId(n))),
            (None, Some(d)) => Ok(Device::Disk(DiskId(d))),
            _ => bail!("give either --node N or --disk D"),
        }
    }
}

async fn set_state(client: &Client, device: Device, state: DeviceState) -> Result<()> {
    client.set_device_state(device, state).await.with_context(|| format!("cannot mark {device} {}", state_name(state)))
}

async fn mark(m: MarkArgs, state: DeviceState) -> Result<()> {
    let client = m.client.client()?;
    let device = m.device()?;
    set_state(&client, device, state).await?;
    outln!("{device} marked {}", state_name(state));
    Ok(())
}

async fn decommission(a: DecommissionArgs) -> Result<()> {
    anyhow::ensure!(!a.progress_every.is_zero(), "--progress-every must be positive");
    let client = a.target.client.client()?;
    let device = a.target.device()?;
    set_state(&client, device, DeviceState::Draining).await?;
    let drain = client.drain_progress(device).await?;
    if drain.state != DeviceState::Decommissioned {
        outln!(
            "{device} is DRAINING: {} chunk(s), {} to move off it",
            drain.chunks_left,
            format_bytes(drain.bytes_left)
        );
        if a.no_wait {
            outln!("`dingo maintain` moves them; follow with `dingo cluster health`");
            return Ok(());
        }
        client
            .wait_decommissioned(device, a.progress_every, |event| match event {
                DrainEvent::Draining(d) => {
                    outln!("{device} is DRAINING: {} chunk(s), {} left", d.chunks_left, format_bytes(d.bytes_left))
                }
                DrainEvent::Stalled(for_) => eprintln!(
                    "warning: no chunk left {device} for {} s; is `dingo maintain` running? (`dingo cluster health`)",
                    for_.as_secs()
                ),
            })
            .await?;
    }
    outln!("{device} is DECOMMISSIONED: it holds no chunk and can be stopped");
    Ok(())
}
