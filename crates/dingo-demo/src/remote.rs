//! The remote site of the demo's georeplication: a second, small local
//! DINGO cluster with its own secret, and the job's handle on it.

use crate::{Result, Scale};
use dingo_cluster::{LocalCluster, StorageConfig};
use dingo_tasks::georep::{GeorepConfig, RemoteSite};
use dingo_tasks::plan::FilePick;
use dingo_types::ByteSize;
use std::path::Path;
use std::sync::Arc;

/// The remote cluster's node caches: it only stores copies and reads each
/// back once to verify it, so a small cache is enough.
const REMOTE_CACHE_BYTES: u64 = 8_000_000;

/// A running remote site.
pub struct Remote {
    cluster: LocalCluster,
    pub site: Arc<RemoteSite>,
}

impl Remote {
    /// Starts the remote cluster under `dir` (its disks are not emulated
    /// HDDs: only the local cluster's reads are measured) and connects to
    /// it as a georeplication job of files under `prefix` would, keeping
    /// its progress in `dir`.
    pub async fn start(exe: &Path, dir: &Path, scale: &Scale, prefix: &str) -> Result<Remote> {
        let mut cfg = StorageConfig::default();
        cfg.node.cache = Some(ByteSize(REMOTE_CACHE_BYTES));
        cfg.node.pinned = Some(ByteSize(REMOTE_CACHE_BYTES));
        let cluster =
            crate::start_cluster(exe, dir, ("remote.toml", &cfg), scale.remote_nodes, scale.disks_per_node).await?;
        let site = RemoteSite::connect(&GeorepConfig {
            remote_meta: cluster.meta_addr().to_string(),
            remote_auth: cluster.credentials().auth.clone(),
            prefix: prefix.to_string(),
            state_dir: dir.join("progress"),
            pick: FilePick::ALL,
        })
        .await?;
        Ok(Remote { cluster, site: Arc::new(site) })
    }

    pub fn stop(&mut self) {
        self.cluster.stop();
    }
}
