//! `dingo cluster ...`: a local cluster's start, status, health, and the
//! state of its nodes and disks (mark dead or live, drain, decommission).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use dingo_client::{ClientConfig, ClusterView, DeviceFlags, DeviceState, DiskSlowdown, DrainEvent, state_name};
use dingo_cluster::{LocalCluster, UpRequest};
use dingo_daemon::shutdown_signal;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start the metadata service and N nodes as processes on loopback.
    Up(UpRequest),
    /// Nodes, disks, usage and liveness.
    Status {
        #[command(flatten)]
        client: ClientConfig,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Health at a glance: nodes and disks by state, blocks with reduced or
    /// no redundancy, corrupt chunks, open files, repair outstanding.
    Health {
        #[command(flatten)]
        client: ClientConfig,
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
    SlowDisk {
        #[command(flatten)]
        slowdown: DiskSlowdown,
        #[command(flatten)]
        client: ClientConfig,
    },
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

#[derive(Args, Debug)]
pub struct MarkArgs {
    #[command(flatten)]
    pub device: DeviceFlags,
    #[command(flatten)]
    pub client: ClientConfig,
}

pub async fn run_cluster(cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Up(a) => cluster_up(a).await,
        ClusterCommand::Status { client, json } => {
            crate::output::print(&ClusterView::from(&client.connect()?.cluster_status().await?), json)
        }
        ClusterCommand::Health { client, json } => crate::output::print(&client.connect()?.health().await?, json),
        ClusterCommand::MarkDead(m) => mark(m, DeviceState::Dead).await,
        ClusterCommand::MarkLive(m) => mark(m, DeviceState::Live).await,
        ClusterCommand::Drain(m) => mark(m, DeviceState::Draining).await,
        ClusterCommand::Decommission(a) => decommission(a).await,
        ClusterCommand::SlowDisk { slowdown, client } => {
            client.connect()?.inject_slowdown(slowdown).await?;
            outln!("{slowdown}");
            Ok(())
        }
    }
}

async fn cluster_up(request: UpRequest) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the dingo executable")?;
    let mut cluster = LocalCluster::up(exe, request).await?;
    outln!("{}Ctrl-C stops the cluster", cluster.summary().await);
    cluster.watch_until(shutdown_signal(), |e| eprintln!("warning: {e}")).await;
    outln!("stopping cluster");
    cluster.stop();
    Ok(())
}

async fn mark(m: MarkArgs, state: DeviceState) -> Result<()> {
    let (client, device) = (m.client.connect()?, m.device.device()?);
    let marked = client.set_device_state(device, state).await;
    marked.with_context(|| format!("cannot mark {device} {}", state_name(state)))?;
    outln!("{device} marked {}", state_name(state));
    Ok(())
}

async fn decommission(a: DecommissionArgs) -> Result<()> {
    let (client, device) = (a.target.client.connect()?, a.target.device.device()?);
    let wait = (!a.no_wait).then_some(a.progress_every);
    let done = client.decommission(device, wait, |event| match event {
        DrainEvent::Draining(d) => outln!("{device} is DRAINING: {d}"),
        DrainEvent::Stalled(for_) => eprintln!(
            "warning: no chunk left {device} for {} s; is `dingo maintain` running? (`dingo cluster health`)",
            for_.as_secs()
        ),
    });
    if done.await.with_context(|| format!("cannot decommission {device}"))? {
        outln!("{device} is DECOMMISSIONED: it holds no chunk and can be stopped");
    } else {
        outln!("`dingo maintain` moves them; follow with `dingo cluster health`");
    }
    Ok(())
}
