//! `dingo cluster up`: a cluster spec from flags and the config file's
//! `[cluster]` table, and watching the daemons until told to stop.

use crate::config_file::StorageConfig;
use crate::{ClusterError, ClusterSpec, LocalCluster};
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

/// What the command line asked for; `None` falls back to the config file's
/// `[cluster]` table, then to the defaults.
#[derive(Clone, Debug, Default)]
pub struct UpRequest {
    pub nodes: Option<u32>,
    pub disks_per_node: Option<u32>,
    pub data: Option<PathBuf>,
    pub base_port: Option<u16>,
    /// The storage config file, also passed to every daemon.
    pub config: Option<PathBuf>,
    /// Serve TLS, with certificates made at start.
    pub tls: bool,
}

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
}
