//! `dingo cluster up`: a cluster spec from flags and the config file's
//! `[cluster]` table, starting it, its summary for the user, and watching
//! the daemons until told to stop.

use crate::config_file::StorageConfig;
use crate::{ClusterError, ClusterSpec, LocalCluster};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// Nodes started when neither a flag nor `cluster.nodes` says.
pub const DEFAULT_NODES: u32 = 3;
/// Disks per node when neither a flag nor `cluster.disks_per_node` says.
pub const DEFAULT_DISKS_PER_NODE: u32 = 1;
/// First port when neither a flag nor `cluster.base_port` says.
pub const DEFAULT_BASE_PORT: u16 = 7400;
/// How often [`LocalCluster::watch_until`] looks for exited daemons.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What `dingo cluster up` was asked for; `None` falls back to the config
/// file's `[cluster]` table, then to the defaults. With the `clap` feature,
/// also the command's flags.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct UpRequest {
    /// Storage nodes to start [default: 3, or cluster.nodes].
    #[cfg_attr(feature = "clap", arg(long))]
    pub nodes: Option<u32>,
    /// Disk directories per node [default: 1, or cluster.disks_per_node].
    #[cfg_attr(feature = "clap", arg(long))]
    pub disks_per_node: Option<u32>,
    /// Data directory of the whole cluster (required here or as cluster.data).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
    /// First port (meta); 0 picks free ports [default: 7400].
    #[cfg_attr(feature = "clap", arg(long))]
    pub base_port: Option<u16>,
    /// Storage config file (TOML; see docs/STORAGE.md), also passed to
    /// every daemon.
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    /// Serve every daemon's gRPC over TLS, with a throwaway authority and
    /// certificate made in DATA/tls/ (callers pass --ca DATA/tls/ca.pem).
    #[cfg_attr(feature = "clap", arg(long))]
    pub tls: bool,
    /// Do not start the maintenance supervisor (`dingo maintain`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_maintain: bool,
    /// Options for the maintenance supervisor, e.g. "--interval 2s --scrub-every 1d".
    #[cfg_attr(feature = "clap", arg(long, default_value = "", allow_hyphen_values = true))]
    pub maintain_args: String,
}

/// How long [`LocalCluster::up`] waits for every daemon to be ready.
const UP_READY_TIMEOUT: Duration = Duration::from_secs(30);

impl ClusterSpec {
    /// The cluster `request` describes, started with the `dingo` executable
    /// `exe`.
    pub fn for_up(exe: PathBuf, request: UpRequest) -> Result<ClusterSpec, ClusterError> {
        let cfg = StorageConfig::load(request.config.as_deref())?;
        let nodes = request.nodes.or(cfg.cluster.nodes).unwrap_or(DEFAULT_NODES);
        let disks_per_node = request.disks_per_node.or(cfg.cluster.disks_per_node).unwrap_or(DEFAULT_DISKS_PER_NODE);
        if nodes == 0 || disks_per_node == 0 {
            return Err(ClusterError::Empty);
        }
        Ok(ClusterSpec {
            exe,
            data: request.data.or(cfg.cluster.data).ok_or(ClusterError::NoDataDir)?,
            nodes,
            disks_per_node,
            base_port: request.base_port.or(cfg.cluster.base_port).unwrap_or(DEFAULT_BASE_PORT),
            config: request.config,
            node_args: Vec::new(),
            tls: request.tls,
        })
    }
}

impl LocalCluster {
    /// `dingo cluster up`: the cluster `request` describes, started with the
    /// `dingo` executable `exe` and ready, with its maintenance supervisor
    /// unless `request.no_maintain`.
    pub async fn up(exe: PathBuf, request: UpRequest) -> Result<LocalCluster, ClusterError> {
        let maintain_args = (!request.no_maintain)
            .then(|| request.maintain_args.split_whitespace().map(String::from).collect::<Vec<_>>());
        let mut cluster = LocalCluster::start(ClusterSpec::for_up(exe, request)?)?;
        cluster.wait_ready(UP_READY_TIMEOUT).await?;
        if let Some(args) = maintain_args {
            cluster.start_maintainer(&args)?;
        }
        Ok(cluster)
    }

    /// What a user needs to reach this cluster and find its parts.
    pub async fn summary(&self) -> UpSummary {
        let auth = &self.credentials().auth;
        let nodes = self.node_ids().await.into_iter().map(|(index, id)| (index, id, self.node_addr(index).to_string()));
        UpSummary {
            meta_addr: self.meta_addr().to_string(),
            node_count: self.node_count(),
            maintaining: self.maintainer.is_some(),
            log_dir: self.log_dir(),
            data_dir: self.data_dir().to_path_buf(),
            secret_file: auth.secret_file.clone(),
            ca: auth.ca.clone(),
            nodes: nodes.collect(),
        }
    }

    /// The metadata service's ids of the nodes registered so far, as
    /// `(index in start order, node id)`.
    pub async fn node_ids(&self) -> Vec<(usize, u32)> {
        let mut ids = Vec::new();
        for i in 0..self.node_count() {
            if let Ok(id) = self.node_id(i).await {
                ids.push((i, id));
            }
        }
        ids
    }

    /// Reports each daemon that exited on its own to `warn` until `stop`
    /// resolves.
    pub async fn watch_until(&mut self, stop: impl Future<Output = ()>, mut warn: impl FnMut(ClusterError)) {
        let mut check = tokio::time::interval(WATCH_INTERVAL);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = check.tick() => self.check_running().into_iter().for_each(&mut warn),
            }
        }
    }
}

/// A started cluster as `dingo cluster up` reports it: where the metadata
/// service is, the credentials other commands need, and which start-order
/// directory is which node id (the metadata service numbers nodes in
/// registration order).
#[derive(Clone, Debug)]
pub struct UpSummary {
    pub meta_addr: String,
    pub node_count: usize,
    pub maintaining: bool,
    pub log_dir: PathBuf,
    pub data_dir: PathBuf,
    pub secret_file: Option<PathBuf>,
    pub ca: Option<PathBuf>,
    /// `(index in start order, node id, address)` of each registered node.
    pub nodes: Vec<(usize, u32, String)>,
}

impl fmt::Display for UpSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cluster up: metadata service at {} with {} node(s){}; logs in {}",
            self.meta_addr,
            self.node_count,
            if self.maintaining { " and the maintenance supervisor" } else { "" },
            self.log_dir.display()
        )?;
        if let Some(secret) = &self.secret_file {
            writeln!(f, "  credentials: export DINGO_SECRET_FILE={}", secret.display())?;
        }
        if let Some(ca) = &self.ca {
            writeln!(f, "  TLS:         export DINGO_CA={}", ca.display())?;
        }
        for (i, id, addr) in &self.nodes {
            writeln!(f, "  node{i} (logs/node{i}.log, {}/node{i}/) is node {id} at {addr}", self.data_dir.display())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c.toml");
        std::fs::write(&config, "[cluster]\nnodes = 5\ndata = \"/from/file\"\n").unwrap();
        let request = UpRequest { disks_per_node: Some(2), config: Some(config.clone()), ..UpRequest::default() };
        let spec = ClusterSpec::for_up("dingo".into(), request.clone()).unwrap();
        assert_eq!((spec.nodes, spec.disks_per_node, spec.base_port), (5, 2, DEFAULT_BASE_PORT));
        assert_eq!((spec.data, spec.config), (PathBuf::from("/from/file"), Some(config)));
        let spec = ClusterSpec::for_up("dingo".into(), UpRequest { nodes: Some(1), ..request }).unwrap();
        assert_eq!(spec.nodes, 1);
        let e = ClusterSpec::for_up("dingo".into(), UpRequest::default()).unwrap_err().to_string();
        assert!(e.contains("--data DIR"), "{e}");
        let request = UpRequest { nodes: Some(0), data: Some("d".into()), ..UpRequest::default() };
        assert!(matches!(ClusterSpec::for_up("dingo".into(), request), Err(ClusterError::Empty)));
    }

    #[test]
    fn the_summary_names_the_address_credentials_and_each_node() {
        let summary = UpSummary {
            meta_addr: "127.0.0.1:7400".into(),
            node_count: 2,
            maintaining: true,
            log_dir: "/d/logs".into(),
            data_dir: "/d".into(),
            secret_file: Some("/d/cluster.secret".into()),
            ca: None,
            nodes: vec![(0, 1, "127.0.0.1:7401".into()), (1, 2, "127.0.0.1:7402".into())],
        };
        let text = summary.to_string();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "cluster up: metadata service at 127.0.0.1:7400 with 2 node(s) and the maintenance supervisor; logs in /d/logs",
                "  credentials: export DINGO_SECRET_FILE=/d/cluster.secret",
                "  node0 (logs/node0.log, /d/node0/) is node 1 at 127.0.0.1:7401",
                "  node1 (logs/node1.log, /d/node1/) is node 2 at 127.0.0.1:7402",
            ]
        );
    }

    #[test]
    fn clients_look_for_the_metadata_service_where_it_listens_by_default() {
        assert_eq!(dingo_client::DEFAULT_META_ADDR, dingo_meta::config_file::DEFAULT_LISTEN);
    }
}
