//! The storage configuration file (`--config FILE`, TOML) that a local
//! cluster's daemons share: `[meta]` (`dingo_meta::config_file`), `[node]`
//! and `[node.io]` (`dingo_node::config_file`) and `[cluster]`, read by
//! `dingo cluster up`, and `[auth]` and `[tls]`, read by every daemon.
//! Every key is optional; command-line flags override the file. Unknown
//! keys are errors, so a typo is reported rather than silently ignored.
//!
//! ```toml
//! [auth]                   # credentials (dingo_auth::AuthSection)
//! secret_file = "/etc/dingo/cluster.secret"  # the cluster secret, mode 0600
//! ca = "/etc/dingo/ca.pem"                   # the services serve TLS: trust this authority
//!
//! [tls]                    # serve gRPC over TLS (the metadata service, the nodes)
//! cert = "/etc/dingo/cert.pem"
//! key = "/etc/dingo/key.pem"
//!
//! [cluster]
//! nodes = 4
//! disks_per_node = 2
//! data = "/var/lib/dingo"
//! base_port = 7400         # 0: any free ports
//! ```

use dingo_meta::config_file::{MetaConfigError, MetaSection};
use dingo_node::config_file::{NodeConfigError, NodeSection};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    #[serde(default)]
    pub meta: MetaSection,
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub cluster: ClusterSection,
    #[serde(default)]
    pub auth: dingo_auth::AuthSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<dingo_auth::ServerTlsFiles>,
}

/// `[cluster]`: what `dingo cluster up` starts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disks_per_node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_port: Option<u16>,
}

#[derive(Debug, Error)]
pub enum ConfigFileError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("malformed config file {}: {source}", path.display())]
    Malformed { path: PathBuf, source: toml::de::Error },
    #[error("invalid config file {}: {source}", path.display())]
    Invalid { path: PathBuf, source: InvalidValue },
    #[error("cannot write config file {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot encode the storage config: {0}")]
    Encode(#[from] toml::ser::Error),
}

/// A value that parses but cannot work.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum InvalidValue {
    #[error(transparent)]
    Meta(#[from] MetaConfigError),
    #[error(transparent)]
    Node(#[from] NodeConfigError),
    #[error("cluster.{0} must be at least 1")]
    Zero(&'static str),
}

impl StorageConfig {
    /// The `[auth]` and `[tls]` tables with a command line's `flags` over
    /// them: what a daemon serves and calls with.
    pub fn credentials(&self, flags: &dingo_auth::ServerCredentials) -> dingo_auth::ServerCredentials {
        dingo_auth::ServerCredentials { auth: self.auth.clone(), tls: self.tls.clone() }.overridden(flags)
    }

    /// Loads `path`, or the defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigFileError> {
        let Some(path) = path else { return Ok(Self::default()) };
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigFileError::Read { path: path.to_path_buf(), source })?;
        let cfg: StorageConfig =
            toml::from_str(&text).map_err(|source| ConfigFileError::Malformed { path: path.to_path_buf(), source })?;
        cfg.validate().map_err(|source| ConfigFileError::Invalid { path: path.to_path_buf(), source })?;
        Ok(cfg)
    }

    /// Writes the file that [`StorageConfig::load`] reads back as `self`.
    pub fn write(&self, path: &Path) -> Result<(), ConfigFileError> {
        let text = toml::to_string(self)?;
        std::fs::write(path, text).map_err(|source| ConfigFileError::Write { path: path.to_path_buf(), source })
    }

    /// Refuses values that cannot work, naming the key and the reason.
    pub fn validate(&self) -> Result<(), InvalidValue> {
        self.node.validate()?;
        self.meta.validate(self.node.heartbeat())?;
        if self.cluster.nodes == Some(0) {
            return Err(InvalidValue::Zero("nodes"));
        }
        if self.cluster.disks_per_node == Some(0) {
            return Err(InvalidValue::Zero("disks_per_node"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{ByteSize, DiskModel};
    use std::time::Duration;

    fn parse(text: &str) -> Result<StorageConfig, ConfigFileError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        StorageConfig::load(Some(&p))
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            "[meta]\nlisten = \"127.0.0.1:1\"\n[node]\ncache = \"1MB\"\nhdd = { positioning_us = 5, transfer_bytes_per_sec = 9 }\n\
             disk_models = [{ disk = 1, positioning_us = 7, transfer_bytes_per_sec = 3 }]\n[cluster]\nnodes = 3\n",
        )
        .unwrap();
        assert_eq!(c.node.cache_bytes(), 1_000_000);
        assert_eq!(c.node.hdd.unwrap().positioning_us, 5);
        assert_eq!((c.node.disk_models[0].disk, c.node.disk_models[0].positioning_us), (1, 7));
        assert_eq!(c.cluster.nodes, Some(3));
        let c = parse(
            "[node.io]\nscheduler = \"fifo\"\nsegment = \"512KB\"\n\
             slowdown = [{ disk = 1, factor = 5.0, after_ms = 10, for_ms = 20 }]\n\
             [node]\nheartbeat_ms = 200\n",
        )
        .unwrap();
        assert_eq!(c.node.io_settings(0).unwrap().segment_bytes, 512_000);
        assert!(c.node.io_settings(1).unwrap().slowdown.is_some());
    }

    #[test]
    fn flash_section_sets_the_tier_and_fault_injection_is_off_by_default() {
        let c = parse("[node]\n").unwrap();
        assert!(!c.node.fault_injection);
        assert!(c.node.flash_settings().is_none());
        let c = parse(
            "[node]\nfault_injection = true\n[node.flash]\npath = \"/f\"\nzones = 8\nzone_pages = 4\n\
             write_budget_per_day = \"2TB\"\n",
        )
        .unwrap();
        assert!(c.node.fault_injection);
        let f = c.node.flash_settings().unwrap();
        assert_eq!((f.zones, f.zone_bytes, f.max_active_zones), (8, 4 * 65_536, 4));
        assert_eq!(f.write_budget_bytes_per_day, 2_000_000_000_000);
        assert!(parse("[node.flash]\npath = \"/f\"\nzones = 8\n").is_err(), "zone_pages is required");
    }

    #[test]
    fn a_written_config_reads_back_the_same() {
        let mut cfg = StorageConfig::default();
        cfg.meta.dead_after_ms = Some(3000);
        cfg.node.heartbeat_ms = Some(500);
        cfg.node.cache = Some(ByteSize(12_345_678));
        cfg.node.pinned = Some(ByteSize(u64::MAX));
        cfg.node.disk_capacity = Some(ByteSize(9_007_199_254_740_993));
        cfg.node.hdd = Some(DiskModel { positioning_us: 8_000, transfer_bytes_per_sec: 60_000_000 });
        cfg.cluster.base_port = Some(0);
        cfg.auth.secret_file = Some("/s".into());
        cfg.tls = Some(dingo_auth::ServerTlsFiles { cert: "/c".into(), key: "/k".into() });
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("storage.toml");
        cfg.write(&p).unwrap();
        assert_eq!(StorageConfig::load(Some(&p)).unwrap(), cfg);
    }

    #[test]
    fn mistakes_are_reported_clearly() {
        let e = parse("[node]\ncahce = \"1MB\"\n").unwrap_err().to_string();
        assert!(e.contains("malformed config") && e.contains("cahce"), "{e}");
        // A bare number is refused: more likely a unit left out than bytes.
        let e = parse("[node]\ncache = 12\n").unwrap_err().to_string();
        assert!(e.contains("malformed config") && e.contains("as a string"), "{e}");
        let e = parse("[node]\ncache = \"lots\"\n").unwrap_err().to_string();
        assert!(e.contains("cache") && e.contains("invalid size"), "{e}");
        let e = parse("[node]\norphan_grace_ms = 0\n").unwrap_err().to_string();
        assert!(e.contains("node.orphan_grace_ms must be at least 100"), "{e}");
        assert_eq!(parse("[node]\norphan_grace_ms = 100\n").unwrap().node.orphan_grace(), Duration::from_millis(100));
        for (text, key) in [
            ("[meta]\ndead_after_ms = 0\n", "meta.dead_after_ms = 0 is too short"),
            ("[meta]\ndead_after_ms = 1500\n[node]\nheartbeat_ms = 1000\n", "meta.dead_after_ms = 1500"),
            ("[meta]\nlease_ttl_ms = 0\n", "meta.lease_ttl_ms = 0 is too short"),
            ("[node]\ndisk_capacity = \"0\"\n", "node.disk_capacity"),
            ("[node]\nheartbeat_ms = 0\n", "node.heartbeat_ms must be at least 10"),
            ("[node.io]\nscheduler = \"lifo\"\n", "node.io.scheduler = \"lifo\""),
            ("[node.io]\nsegment = \"1KB\"\n", "node.io.segment must be at least 4KiB"),
            ("[node.io]\nmin_share = 1.5\n", "node.io.min_share"),
            ("[node.io]\nslowdown = [{ disk = 0, factor = 0.0, for_ms = 5 }]\n", "node.io.slowdown"),
            ("[node.io]\nwaiting = { goal_ms = 0 }\n", "node.io.waiting.goal_ms = 0"),
            ("[node.io]\nscheduler = \"fifo\"\nwaiting = { goal_ms = 1 }\n", "node.io.waiting needs scheduler"),
            ("[node.io]\nwaiting = { size = \"64KiB\" }\n", "node.io.waiting needs either goal_ms"),
            ("[node.io]\nshares = [{ declaration = 1, share = 1.5 }]\n", "node.io.shares.share = 1.5"),
            ("[cluster]\nnodes = 0\n", "cluster.nodes must be at least 1"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("invalid config file"), "{text}: {e}");
        }
        parse(
            "[meta]\ndead_after_ms = 1000\nlease_ttl_ms = 1000\n[node]\nheartbeat_ms = 200\ndisk_capacity = \"3MB\"\n",
        )
        .unwrap();
        let e = parse("[cluster\n").unwrap_err().to_string();
        assert!(e.contains("malformed config"), "{e}");
        let e = StorageConfig::load(Some(Path::new("/nonexistent/c.toml"))).unwrap_err().to_string();
        assert!(e.contains("cannot read config file"), "{e}");
    }
}
