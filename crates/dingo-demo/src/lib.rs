//! The Declarative IO paper's HDFS-cluster experiment on a local DINGO
//! cluster (`dingo demo`). The same scripted timeline (node added, node
//! failed, scrubbing, periodic transcoding, a foreground reader) runs twice
//! from the same data and seed, once with imperative tasks and once with
//! declarative ones through the planner service, and the disk reads are
//! compared.
//!
//! [`run`] gives both runs' measurements ([`ModeResult`]) and their typed
//! comparison ([`DemoSummary`]); [`DemoRun::write_outputs`] saves the
//! summary, the per-interval series and the job reports.
//!
//! [`flash_tier`] runs the same timeline declaratively with each node's
//! pinned region shrunk, with and without the node flash tier.

mod area;
mod figure;
pub mod flash_tier;
mod foreground;
mod meter;
mod outputs;
mod planner;
mod remote;
mod scale;
mod scenario;
mod summary;
mod table;

pub use foreground::{Foreground, ForegroundLatency, ReadKind};
pub use meter::{FlashSample, Meter, NodeSample, kernel_read_bytes};
pub use scale::Scale;
pub use scenario::{ModeResult, PREFIX};
pub use summary::{DemoSummary, ModeSummary, TaskSummary};

use dingo_tasks::Scheduling;
use dingo_types::TaskKind;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The tasks the demo runs: all eight.
pub const TASKS: [TaskKind; TaskKind::COUNT] = TaskKind::ALL;

#[derive(Debug, Error)]
pub enum DemoError {
    #[error(transparent)]
    Cluster(#[from] dingo_cluster::ClusterError),
    #[error(transparent)]
    Config(#[from] dingo_cluster::config_file::ConfigFileError),
    #[error(transparent)]
    Client(#[from] dingo_client::ClientError),
    #[error("node stats of {addr}: {source}")]
    NodeStats { addr: String, source: dingo_client::ClientError },
    #[error(transparent)]
    Planner(#[from] dingo_planner_client::PlannerClientError),
    #[error(transparent)]
    Task(#[from] dingo_tasks::declarative::DeclarativeError),
    #[error(transparent)]
    Georep(#[from] dingo_tasks::georep::GeorepError),
    #[error("cannot build the object-store area: {0}")]
    Records(#[from] dingo_tasks::objects::RecordError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("cannot encode {what}: {source}")]
    Encode { what: String, source: serde_json::Error },
    #[error("credentials: {0}")]
    Auth(#[from] dingo_auth::AuthError),
    #[error("{0}")]
    Timeline(String),
    #[error(transparent)]
    Figure(#[from] dingo_report::ReportError),
    #[error("{mode} run: {source}")]
    Run { mode: Scheduling, source: Box<DemoError> },
}

pub type Result<T, E = DemoError> = std::result::Result<T, E>;

/// `Err(DemoError::Io)` naming `what` was being done.
fn io<T>(what: impl FnOnce() -> String, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|source| DemoError::Io { what: what(), source })
}

/// What to run and where.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// The `dingo` executable, started for every daemon.
    pub exe: PathBuf,
    pub scale: Scale,
    pub seed: u64,
    /// Output folder; each run's cluster lives in `data-<mode>` under it.
    pub out: PathBuf,
    /// Keep the clusters' data directories afterwards.
    pub keep_data: bool,
}

/// The flags of `dingo demo` besides the shared experiment ones.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DemoFlags {
    /// Output folder: summary, per-interval series, plots, cluster data.
    #[cfg_attr(feature = "clap", arg(long, default_value = "./dingo-demo"))]
    pub out: PathBuf,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Keep the clusters' data directories afterwards.
    #[cfg_attr(feature = "clap", arg(long))]
    pub keep_data: bool,
    /// The emulated disks' IO scheduler: `classful`, or `fifo` for the
    /// baseline.
    #[cfg_attr(feature = "clap", arg(long, default_value = "classful"))]
    pub scheduler: dingo_iosched::PolicyKind,
}

impl DemoConfig {
    /// The demo at its default (or quick) scale, as `flags` say, started
    /// with the `dingo` executable `exe`.
    pub fn from_flags(flags: &DemoFlags, quick: bool, exe: PathBuf) -> DemoConfig {
        let scale = if quick { Scale::quick() } else { Scale::default_run() };
        DemoConfig {
            exe,
            scale: Scale { scheduler: flags.scheduler, ..scale },
            seed: flags.seed,
            out: flags.out.clone(),
            keep_data: flags.keep_data,
        }
    }
}

/// Both runs and their comparison.
#[derive(Clone, Debug)]
pub struct DemoRun {
    pub imperative: ModeResult,
    pub declarative: ModeResult,
    pub summary: DemoSummary,
}

/// Runs the timeline with imperative, then with declarative tasks; calls
/// `starting` before each run.
pub async fn run(config: &DemoConfig, mut starting: impl FnMut(Scheduling)) -> Result<DemoRun> {
    io(|| format!("cannot create {}", config.out.display()), std::fs::create_dir_all(&config.out))?;
    let demo = scenario::Demo { exe: config.exe.clone(), scale: config.scale.clone(), seed: config.seed };
    let mut one = async |mode: Scheduling| -> Result<ModeResult> {
        starting(mode);
        let data = data_dir(&config.out, mode);
        let r = demo.run(mode, &data).await.map_err(|e| DemoError::Run { mode, source: Box::new(e) })?;
        if !config.keep_data {
            let _ = std::fs::remove_dir_all(&data);
        }
        Ok(r)
    };
    let imperative = one(Scheduling::Imperative).await?;
    let declarative = one(Scheduling::Declarative).await?;
    let summary = DemoSummary::new(&config.scale, &imperative, &declarative);
    Ok(DemoRun { imperative, declarative, summary })
}

/// Starts a local cluster of `nodes` × `disks_per_node` from `exe` under
/// `dir/cluster`, configured by `cfg` (written to `dir/<config_name>`),
/// and waits until it serves.
async fn start_cluster(
    exe: &Path,
    dir: &Path,
    (config_name, cfg): (&str, &dingo_cluster::StorageConfig),
    nodes: u32,
    disks_per_node: u32,
) -> Result<dingo_cluster::LocalCluster> {
    io(|| format!("cannot create {}", dir.display()), std::fs::create_dir_all(dir))?;
    let config = dir.join(config_name);
    cfg.write(&config)?;
    let mut cluster = dingo_cluster::LocalCluster::start(dingo_cluster::ClusterSpec {
        exe: exe.to_path_buf(),
        data: dir.join("cluster"),
        nodes,
        disks_per_node,
        base_port: 0,
        config: Some(config),
        node_args: Vec::new(),
        tls: false,
    })?;
    cluster.wait_ready(std::time::Duration::from_secs(30)).await?;
    Ok(cluster)
}

fn data_dir(out: &Path, mode: Scheduling) -> PathBuf {
    out.join(format!("data-{mode}"))
}
