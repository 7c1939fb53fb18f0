//! The storage subcommands: `meta`, `node`, `cluster up|status`,
//! `fs put|get|ls|rm|stat`. Daemons run until Ctrl-C or SIGTERM.

use crate::storage_config::StorageConfig;
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Args, Subcommand};
use dingo_client::{Client, DeviceState, IoTag, Redundancy};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_types::{format_bytes, parse_bytes};
use futures::TryStreamExt;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_META: &str = "127.0.0.1:7400";

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
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start the metadata service and N nodes as processes on loopback.
    Up(ClusterUpArgs),
    /// Nodes, disks, usage and liveness.
    Status {
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
}

#[derive(Args, Debug)]
pub struct ClusterUpArgs {
    #[arg(long)]
    pub nodes: Option<u32>,
    #[arg(long)]
    pub disks_per_node: Option<u32>,
    /// Data directory of the whole cluster.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// First port (meta); 0 picks free ports [default: 7400].
    #[arg(long)]
    pub base_port: Option<u16>,
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum FsCommand {
    /// Store a local file (`-` for stdin).
    Put {
        local: PathBuf,
        path: String,
        /// replicated:R or ec:K+M.
        #[arg(long, default_value = "replicated:3", value_parser = str::parse::<Redundancy>)]
        redundancy: Redundancy,
        #[arg(long, default_value = "8MB", value_parser = parse_size)]
        block_size: u64,
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
    /// Read a file, or a range of it, to a local file or stdout (`-`).
    Get {
        path: String,
        #[arg(default_value = "-")]
        local: PathBuf,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Bytes to read [default: to the end].
        #[arg(long)]
        len: Option<u64>,
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
    /// List files under a prefix.
    Ls {
        #[arg(default_value = "/")]
        prefix: String,
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
    /// Delete a file.
    Rm {
        path: String,
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
    /// Show a file's blocks and their chunk locations.
    Stat {
        path: String,
        #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
        meta: String,
    },
}

/// Parses a decimal size such as `500MB` (a clap value parser).
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| e.to_string())
}

/// Keeps freed memory in the process. Storage daemons and clients allocate
/// and free multi-megabyte buffers (gRPC messages) at a high rate; glibc's
/// defaults hand such memory back to the kernel at once (a fresh `mmap` per
/// large allocation, heap trimming), so every new buffer faults in and zeroes
/// fresh pages — a large share of the CPU time of bulk transfers on loopback.
/// Called first by every storage command; process-wide.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator parameters; 32 MiB is glibc's
    // largest mmap threshold.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

pub async fn run_meta(a: MetaArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let listen = match (a.listen, &cfg.meta.listen) {
        (Some(l), _) => l,
        (None, Some(l)) => l.parse().with_context(|| format!("meta.listen `{l}` is not an address"))?,
        (None, None) => DEFAULT_META.parse()?,
    };
    let metrics = match (a.metrics, &cfg.meta.metrics) {
        (Some(m), _) => Some(m),
        (None, Some(m)) => Some(m.parse().with_context(|| format!("meta.metrics `{m}` is not an address"))?),
        (None, None) => None,
    };
    dingo_meta::run(
        dingo_meta::MetaConfig {
            listen,
            data_dir: a.data,
            metrics,
            dead_after: Duration::from_millis(cfg.meta.dead_after_ms.unwrap_or(5000)),
            lease_ttl: Duration::from_millis(cfg.meta.lease_ttl_ms.unwrap_or(60_000)),
        },
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

pub async fn run_node(a: NodeArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let capacity = match a.capacity {
        Some(c) => Some(c),
        None => cfg.node.disk_capacity()?,
    };
    let disks = a.disks.into_iter().map(|path| dingo_node::DiskSpec { path, capacity, hdd: cfg.node.hdd }).collect();
    dingo_node::run(
        dingo_node::NodeConfig {
            listen: a.listen,
            advertise: a.advertise,
            meta: a.meta,
            metrics: a.metrics,
            disks,
            cache_bytes: cfg.node.cache_bytes()?,
            pinned_bytes: cfg.node.pinned_bytes()?,
            heartbeat: cfg.node.heartbeat(),
            orphan_grace: cfg.node.orphan_grace(),
        },
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

pub async fn run_cluster(cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Up(a) => cluster_up(a).await,
        ClusterCommand::Status { meta } => cluster_status(&meta).await,
    }
}

async fn cluster_up(a: ClusterUpArgs) -> Result<()> {
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let nodes = a.nodes.or(cfg.cluster.nodes).unwrap_or(3);
    let disks_per_node = a.disks_per_node.or(cfg.cluster.disks_per_node).unwrap_or(1);
    if nodes == 0 || disks_per_node == 0 {
        bail!("a cluster needs at least one node and one disk per node");
    }
    let data = a.data.or(cfg.cluster.data).context("--data DIR (or cluster.data in --config) is required")?;
    let spec = ClusterSpec {
        exe: std::env::current_exe().context("cannot find the dingo executable")?,
        data,
        nodes,
        disks_per_node,
        base_port: a.base_port.or(cfg.cluster.base_port).unwrap_or(7400),
        config: a.config,
        node_args: Vec::new(),
    };
    let mut cluster = LocalCluster::start(spec)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    println!(
        "cluster up: metadata service at {} with {nodes} node(s); logs in {}; Ctrl-C stops it",
        cluster.meta_addr(),
        cluster.log_dir().display()
    );
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = check.tick() => {
                for e in cluster.check_running() {
                    eprintln!("warning: {e}");
                }
            }
        }
    }
    println!("stopping cluster");
    cluster.stop();
    Ok(())
}

async fn cluster_status(meta: &str) -> Result<()> {
    let s = Client::new(meta)?.cluster_status().await.with_context(|| format!("metadata service at {meta}"))?;
    println!("{} file(s), {} block record(s)", s.files, s.blocks);
    println!("{:<5} {:<22} {:<6} {:<5} {:>8}  disks", "node", "address", "hb", "state", "hb age");
    let state = |dead: bool| if dead { "DEAD" } else { "LIVE" };
    for n in &s.nodes {
        let age = if n.heartbeat_age_ms == u64::MAX {
            "-".into()
        } else {
            format!("{:.1}s", n.heartbeat_age_ms as f64 / 1000.0)
        };
        let hb = if n.alive { "alive" } else { "silent" };
        println!("{:<5} {:<22} {:<6} {:<5} {:>8}", n.id, n.addr, hb, state(n.state() == DeviceState::Dead), age);
        for d in &n.disks {
            println!(
                "        disk {:<4} {:<5} {:>12} used of {:>12}  {:>6} chunks  {}",
                d.id,
                state(d.state() == DeviceState::Dead),
                format_bytes(d.used),
                format_bytes(d.capacity),
                d.chunks,
                d.path
            );
        }
    }
    Ok(())
}

pub async fn run_fs(cmd: FsCommand) -> Result<()> {
    keep_freed_memory();
    match cmd {
        FsCommand::Put { local, path, redundancy, block_size, meta } => {
            let data = if local.as_os_str() == "-" {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut v).context("cannot read stdin")?;
                v
            } else {
                std::fs::read(&local).with_context(|| format!("cannot read {}", local.display()))?
            };
            let size = Client::new(&meta)?.put(&path, redundancy, block_size, Bytes::from(data)).await?;
            println!("{path}: {} stored ({redundancy})", format_bytes(size));
        }
        FsCommand::Get { path, local, offset, len, meta } => {
            let client = Client::new(&meta)?;
            let file = client.stat(&path).await?;
            let len = len.unwrap_or_else(|| file.size.saturating_sub(offset));
            let mut out: Box<dyn Write> = if local.as_os_str() == "-" {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(std::fs::File::create(&local).with_context(|| format!("cannot create {}", local.display()))?)
            };
            let mut pieces = client.read_pieces(&file, offset, len, IoTag::Foreground)?;
            while let Some(piece) = pieces.try_next().await? {
                out.write_all(&piece).with_context(|| format!("cannot write {}", local.display()))?;
            }
            out.flush().with_context(|| format!("cannot write {}", local.display()))?;
        }
        FsCommand::Ls { prefix, meta } => {
            for f in Client::new(&meta)?.list(&prefix).await? {
                let r = Redundancy::try_from(f.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default();
                let state = if f.sealed { "sealed" } else { "open" };
                println!("{:>14}  {:<14} {:<6} {}", f.size, r, state, f.path);
            }
        }
        FsCommand::Rm { path, meta } => {
            let blocks = Client::new(&meta)?.delete(&path).await?;
            println!("{path}: deleted ({blocks} block(s))");
        }
        FsCommand::Stat { path, meta } => {
            let f = Client::new(&meta)?.stat(&path).await?;
            let r = Redundancy::try_from(f.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default();
            println!(
                "{}: {} bytes, {r}, block size {}, {}",
                f.path,
                f.size,
                f.block_size,
                if f.sealed { "sealed" } else { "open" }
            );
            for b in &f.blocks {
                let chunks: Vec<String> =
                    b.chunks.iter().map(|c| format!("copy {} disk {} @ {}", c.copy, c.disk, c.addr)).collect();
                println!(
                    "  block {} group {} member {} size {}: {}",
                    b.id,
                    b.group,
                    b.ec_index,
                    b.size,
                    chunks.join(", ")
                );
            }
        }
    }
    Ok(())
}
