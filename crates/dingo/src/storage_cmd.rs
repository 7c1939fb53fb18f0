//! The storage subcommands: `meta`, `node`, `cluster
//! up|status|health|mark-dead|mark-live|drain|decommission`,
//! `fs put|get|ls|rm|stat`. Daemons run until Ctrl-C or SIGTERM.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use dingo_client::{Client, Device, DeviceState, DrainEvent, Redundancy, ReplicaChoice};
use dingo_cluster::{ClusterSpec, LocalCluster, StorageConfig, UpRequest};
use dingo_proto::v1::FileInfo;
use dingo_daemon::{keep_freed_memory, shutdown_signal};
use dingo_types::{ByteSize, format_bytes};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_META: &str = dingo_meta::config_file::DEFAULT_LISTEN;

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
}

#[derive(Args, Debug)]
pub struct DecommissionArgs {
    #[command(flatten)]
    pub target: MarkArgs,
    /// Start the drain and return at once.
    #[arg(long)]
    pub no_wait: bool,
    /// How often to report progress while waiting, e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = crate::task_cmd::parse_duration)]
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

/// Where the metadata service is and how long to wait for it.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Metadata service address.
    #[arg(long, env = "DINGO_META", default_value = DEFAULT_META)]
    pub meta: String,
    /// Deadline of each metadata operation, retries included (e.g. 10s).
    #[arg(long, env = "DINGO_TIMEOUT", default_value = "10s", value_parser = crate::task_cmd::parse_duration)]
    pub timeout: Duration,
    /// How foreground reads choose a copy: "steering" (by weight, away from
    /// disks that report congestion) or "random" (the baseline).
    #[arg(long, env = "DINGO_REPLICA_CHOICE", default_value = "steering", value_parser = parse_replica_choice)]
    pub replica_choice: ReplicaChoice,
}

fn parse_replica_choice(s: &str) -> std::result::Result<ReplicaChoice, String> {
    s.parse()
}

impl ClientArgs {
    pub fn client(&self) -> Result<Client> {
        anyhow::ensure!(!self.timeout.is_zero(), "--timeout must be positive");
        Ok(Client::new(&self.meta)?.with_deadline(self.timeout).with_replica_choice(self.replica_choice))
    }
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
    /// Do not start the maintenance supervisor (`dingo maintain`).
    #[arg(long)]
    pub no_maintain: bool,
    /// Options for the maintenance supervisor, e.g. "--interval 2s --scrub-every 1d".
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub maintain_args: String,
}

#[derive(Subcommand, Debug)]
pub enum FsCommand {
    /// Store a local file (`-` for stdin), streaming it in bounded memory.
    /// Interrupted (Ctrl-C, SIGTERM) or failed, it removes what it wrote.
    Put {
        /// Local file, or `-` for stdin.
        local: PathBuf,
        /// Path in the store, e.g. /data/file.
        path: String,
        /// replicated:R or ec:K+M.
        #[arg(long, default_value = "replicated:3", value_parser = str::parse::<Redundancy>)]
        redundancy: Redundancy,
        /// Block size, 64KB .. 1GB (e.g. 8MB).
        #[arg(long, default_value = "8MB", value_parser = parse_size)]
        block_size: u64,
        /// Replace an existing file (deleted first; not atomic).
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Read a file, or a range of it, to a local file or stdout (`-`). A
    /// local file is replaced only once all of it was read.
    Get {
        path: String,
        #[arg(default_value = "-")]
        local: PathBuf,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Bytes to read [default: to the end].
        #[arg(long)]
        len: Option<u64>,
        /// Read a file that is still open (only its committed bytes).
        #[arg(long)]
        open: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List files under a prefix.
    Ls {
        #[arg(default_value = "/")]
        prefix: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Delete a file (also an open one).
    Rm {
        path: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show a file's blocks and their chunk locations.
    Stat {
        path: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Lease recovery: close an open file whose writer is gone, sealing it
    /// at its last committed length, or removing it if nothing was
    /// committed. Refused while the lease is live unless --force.
    Recover {
        path: String,
        /// Recover even though the writer's lease has not expired.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Parses a size such as `500MB` exactly (a clap value parser).
pub fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<ByteSize>().map(ByteSize::bytes).map_err(|e| e.to_string())
}

pub async fn run_meta(a: MetaArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    dingo_meta::run(cfg.meta.meta_config(a.data, a.listen, a.metrics)?, shutdown_signal()).await?;
    Ok(())
}

pub async fn run_node(a: NodeArgs) -> Result<()> {
    keep_freed_memory();
    let cfg = StorageConfig::load(a.config.as_deref())?;
    let disks = cfg.node.disk_specs(a.disks, a.capacity)?;
    dingo_node::run(
        dingo_node::NodeConfig {
            listen: a.listen,
            advertise: a.advertise,
            meta: a.meta,
            metrics: a.metrics,
            disks,
            cache_bytes: cfg.node.cache_bytes(),
            pinned_bytes: cfg.node.pinned_bytes(),
            heartbeat: cfg.node.heartbeat(),
            orphan_grace: cfg.node.orphan_grace(),
            fault_injection: cfg.node.fault_injection,
            flash: cfg.node.flash_settings(),
        },
        shutdown_signal(),
    )
    .await?;
    Ok(())
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
    }
}

async fn cluster_up(a: ClusterUpArgs) -> Result<()> {
    let request = UpRequest {
        nodes: a.nodes,
        disks_per_node: a.disks_per_node,
        data: a.data,
        base_port: a.base_port,
        config: a.config,
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

fn state_name(state: DeviceState) -> &'static str {
    match state {
        DeviceState::Live => "LIVE",
        DeviceState::Dead => "DEAD",
        DeviceState::Draining => "DRAINING",
        DeviceState::Decommissioned => "DECOMMISSIONED",
    }
}

async fn cluster_status(client: &ClientArgs, json: bool) -> Result<()> {
    let s = client.client()?.cluster_status().await?;
    if json {
        let nodes: Vec<serde_json::Value> = s
            .nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "id": n.id, "addr": n.addr, "alive": n.alive,
                    "state": state_name(n.state()),
                    "heartbeat_age_ms": (n.heartbeat_age_ms != u64::MAX).then_some(n.heartbeat_age_ms),
                    "disks": n.disks.iter().map(|d| serde_json::json!({
                        "id": d.id, "state": state_name(d.state()), "used": d.used,
                        "capacity": d.capacity, "chunks": d.chunks, "path": d.path,
                        "drain_chunks_left": d.drain_chunks_left, "drain_bytes_left": d.drain_bytes_left,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", serde_json::json!({ "files": s.files, "blocks": s.blocks, "nodes": nodes }));
        return Ok(());
    }
    outln!("{} file(s), {} block record(s)", s.files, s.blocks);
    outln!("{:<5} {:<22} {:<6} {:<14} {:>8}  disks", "node", "address", "hb", "state", "hb age");
    for n in &s.nodes {
        let age = if n.heartbeat_age_ms == u64::MAX {
            "-".into()
        } else {
            format!("{:.1}s", n.heartbeat_age_ms as f64 / 1000.0)
        };
        let hb = if n.alive { "alive" } else { "silent" };
        outln!("{:<5} {:<22} {:<6} {:<14} {:>8}", n.id, n.addr, hb, state_name(n.state()), age);
        for d in &n.disks {
            let left = if d.state() == DeviceState::Draining {
                format!("  ({} chunk(s), {} left to move)", d.drain_chunks_left, format_bytes(d.drain_bytes_left))
            } else {
                String::new()
            };
            outln!(
                "        disk {:<4} {:<14} {:>12} used of {:>12}  {:>6} chunks  {}{left}",
                d.id,
                state_name(d.state()),
                format_bytes(d.used),
                format_bytes(d.capacity),
                d.chunks,
                d.path
            );
        }
    }
    Ok(())
}

async fn cluster_health(client: &ClientArgs, json: bool) -> Result<()> {
    let h = client.client()?.health().await?;
    if json {
        outln!("{}", serde_json::to_string(&h)?);
        return Ok(());
    }
    let ids = |v: &[u32]| if v.is_empty() { String::new() } else { format!(" {v:?}") };
    outln!("{}", h.status);
    outln!(
        "nodes: {} live, {} silent{}, {} dead{}, {} draining{}, {} decommissioned{}",
        h.nodes_live.len(),
        h.nodes_silent.len(),
        ids(&h.nodes_silent),
        h.nodes_dead.len(),
        ids(&h.nodes_dead),
        h.nodes_draining.len(),
        ids(&h.nodes_draining),
        h.nodes_decommissioned.len(),
        ids(&h.nodes_decommissioned)
    );
    let draining: Vec<u32> = h.disks_draining.iter().map(|d| d.disk).collect();
    outln!(
        "disks: {} live, {} dead{}, {} draining{}, {} decommissioned{}",
        h.disks_live,
        h.disks_dead.len(),
        ids(&h.disks_dead),
        draining.len(),
        ids(&draining),
        h.disks_decommissioned.len(),
        ids(&h.disks_decommissioned)
    );
    outln!("data:  {} file(s), {} sealed block(s)", h.files, h.blocks);
    outln!(
        "redundancy: {} block(s) under-replicated, {} lost; {} chunk(s) lost, {} corrupt",
        h.under_replicated,
        h.lost_blocks,
        h.lost_chunks,
        h.corrupt_chunks
    );
    outln!("files: {} open, {} with an expired lease", h.open_files, h.expired_leases);
    outln!("repair outstanding: {} chunk(s)", h.repair_outstanding);
    outln!(
        "moves outstanding (draining): {} chunk(s), {}",
        h.moves_outstanding,
        format_bytes(h.move_bytes_outstanding)
    );
    Ok(())
}

impl MarkArgs {
    fn device(&self) -> Result<Device> {
        match (self.node, self.disk) {
            (Some(n), None) => Ok(Device::Node(n)),
            (None, Some(d)) => Ok(Device::Disk(d)),
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

/// A file's state for listings: sealed, open, or open with its lease
/// expired (lease recovery will close it).
fn file_state(f: &FileInfo) -> &'static str {
    match (f.sealed, f.lease_expiry_ms < dingo_daemon::now_ms()) {
        (true, _) => "sealed",
        (false, false) => "open",
        (false, true) => "open, lease expired",
    }
}

fn file_json(f: &FileInfo, blocks: bool) -> serde_json::Value {
    let r = Redundancy::try_from(f.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default();
    let mut v = serde_json::json!({
        "path": f.path, "size": f.size, "redundancy": r, "block_size": f.block_size,
        "sealed": f.sealed, "state": file_state(f), "created_ms": f.created_ms,
    });
    if blocks {
        v["blocks"] = f
            .blocks
            .iter()
            .map(|b| {
                serde_json::json!({
                    "id": b.id, "group": b.group, "member": b.ec_index, "size": b.size,
                    "chunks": b.chunks.iter().map(|c| serde_json::json!({
                        "copy": c.copy, "disk": c.disk, "node": c.node, "addr": c.addr, "lost": c.lost,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
    }
    v
}

/// A progress bar on stderr for `total` bytes (a spinner if unknown),
/// drawn only when stderr is a terminal.
fn progress_bar(total: Option<u64>, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(t) => ProgressBar::new(t).with_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{msg} {spinner} {decimal_bytes} {decimal_bytes_per_sec}")
                .expect("valid template"),
        ),
    };
    bar.set_message(what.to_string());
    bar
}

/// Exits quietly when stdout was closed under us (`dingo fs get x | head`).
fn quiet_on_closed_pipe(e: dingo_client::ClientError) -> anyhow::Error {
    if let dingo_client::ClientError::Output(io) = &e
        && io.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
    e.into()
}

pub async fn run_fs(cmd: FsCommand) -> Result<()> {
    keep_freed_memory();
    match cmd {
        FsCommand::Put { local, path, redundancy, block_size, overwrite, client } => {
            let client = client.client()?;
            let (reader, total): (Box<dyn tokio::io::AsyncRead + Unpin + Send>, Option<u64>) = if local.as_os_str()
                == "-"
            {
                (Box::new(tokio::io::stdin()), None)
            } else {
                let f =
                    tokio::fs::File::open(&local).await.with_context(|| format!("cannot read {}", local.display()))?;
                let len = f.metadata().await.ok().map(|m| m.len());
                (Box::new(f), len)
            };
            let bar = progress_bar(total, &path);
            let put = client.put_from(&path, redundancy, block_size, overwrite, reader, |n| bar.set_position(n));
            let size = tokio::select! {
                r = put => r?,
                _ = shutdown_signal() => {
                    bar.abandon();
                    // The writer stops here; what it wrote goes with the file.
                    let gone = client.delete(&path).await;
                    match gone {
                        Ok(_) => bail!("interrupted: {path} removed"),
                        Err(e) => bail!("interrupted; {path} could not be removed ({e}): `dingo fs rm {path}`"),
                    }
                }
            };
            bar.finish_and_clear();
            outln!("{path}: {} stored ({redundancy})", format_bytes(size));
        }
        FsCommand::Get { path, local, offset, len, open, client } => {
            let client = client.client()?;
            if local.as_os_str() == "-" {
                let file = client.stat_complete(&path, open).await?;
                let len = len.unwrap_or_else(|| file.size.saturating_sub(offset));
                let mut out = std::io::stdout().lock();
                client.read_to(&file, offset, len, &mut out, |_| {}).await.map_err(quiet_on_closed_pipe)?;
            } else {
                let bar = progress_bar(None, &path);
                client.download(&path, &local, offset, len, open, |n| bar.set_position(n)).await?;
                bar.finish_and_clear();
            }
        }
        FsCommand::Ls { prefix, json, client } => {
            let files = client.client()?.list(&prefix).await?;
            if json {
                let v: Vec<serde_json::Value> = files.iter().map(|f| file_json(f, false)).collect();
                outln!("{}", serde_json::Value::Array(v));
                return Ok(());
            }
            for f in &files {
                let r = Redundancy::try_from(f.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default();
                outln!("{:>12}  {:<14} {:<20} {}", format_bytes(f.size), r, file_state(f), f.path);
            }
        }
        FsCommand::Rm { path, client } => {
            let blocks = client.client()?.delete(&path).await?;
            outln!("{path}: deleted ({blocks} block(s))");
        }
        FsCommand::Recover { path, force, client } => match client.client()?.recover(&path, force).await? {
            Some(size) => outln!("{path}: sealed at {} ({size} bytes committed)", format_bytes(size)),
            None => outln!("{path}: removed (nothing had been committed)"),
        },
        FsCommand::Stat { path, json, client } => {
            let f = client.client()?.stat(&path).await?;
            if json {
                outln!("{}", file_json(&f, true));
                return Ok(());
            }
            let r = Redundancy::try_from(f.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default();
            outln!(
                "{}: {} ({} bytes), {r}, block size {}, {}",
                f.path,
                format_bytes(f.size),
                f.size,
                format_bytes(f.block_size),
                file_state(&f)
            );
            for b in &f.blocks {
                let chunks: Vec<String> = b
                    .chunks
                    .iter()
                    .map(|c| {
                        format!("copy {} disk {} @ {}{}", c.copy, c.disk, c.addr, if c.lost { " (lost)" } else { "" })
                    })
                    .collect();
                outln!(
                    "  block {} group {} member {} size {}: {}",
                    b.id,
                    b.group,
                    b.ec_index,
                    format_bytes(b.size),
                    chunks.join(", ")
                );
            }
        }
    }
    Ok(())
}
