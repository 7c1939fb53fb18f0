//! The storage configuration file (`--config FILE`, TOML). Every field is
//! optional; command-line flags override the file. Unknown keys are errors,
//! so a typo is reported rather than silently ignored.
//!
//! ```toml
//! [meta]
//! listen = "127.0.0.1:7400"
//! metrics = "127.0.0.1:7401"
//! dead_after_ms = 5000
//! lease_ttl_ms = 60000
//!
//! [node]
//! heartbeat_ms = 1000
//! orphan_grace_ms = 3600000  # delete chunks no block places here after this age
//! cache = "256MB"          # general cache region
//! pinned = "64MB"          # pinned cache region
//! disk_capacity = "10GB"   # per disk; default: the filesystem's size
//! hdd = { positioning_us = 10000, transfer_bytes_per_sec = 150000000 }
//!
//! [cluster]
//! nodes = 4
//! disks_per_node = 2
//! data = "/var/lib/dingo"
//! base_port = 7400         # 0: any free ports
//! ```

use anyhow::{Context, Result};
use dingo_types::{DiskModel, parse_bytes};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    #[serde(default)]
    pub meta: MetaSection,
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub cluster: ClusterSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaSection {
    pub listen: Option<String>,
    pub metrics: Option<String>,
    pub dead_after_ms: Option<u64>,
    pub lease_ttl_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    pub heartbeat_ms: Option<u64>,
    pub orphan_grace_ms: Option<u64>,
    pub cache: Option<String>,
    pub pinned: Option<String>,
    pub disk_capacity: Option<String>,
    pub hdd: Option<DiskModel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    pub nodes: Option<u32>,
    pub disks_per_node: Option<u32>,
    pub data: Option<PathBuf>,
    pub base_port: Option<u16>,
}

impl StorageConfig {
    /// Loads `path`, or the defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let Some(path) = path else { return Ok(Self::default()) };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read config file {}", path.display()))?;
        let cfg: StorageConfig =
            toml::from_str(&text).with_context(|| format!("malformed config file {}", path.display()))?;
        cfg.node.validate().with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(cfg)
    }
}

impl NodeSection {
    fn validate(&self) -> Result<()> {
        self.cache_bytes()?;
        self.pinned_bytes()?;
        self.disk_capacity()?;
        anyhow::ensure!(
            self.orphan_grace_ms.is_none_or(|ms| ms >= 100),
            "node.orphan_grace_ms must be at least 100: chunks younger than this may still be on their way to being recorded"
        );
        if let Some(h) = self.hdd {
            anyhow::ensure!(h.transfer_bytes_per_sec > 0, "node.hdd.transfer_bytes_per_sec must be positive");
        }
        Ok(())
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.unwrap_or(1000).max(10))
    }

    /// Age after which a chunk no block record places on its disk is
    /// deleted; default one hour.
    pub fn orphan_grace(&self) -> Duration {
        Duration::from_millis(self.orphan_grace_ms.unwrap_or(3_600_000))
    }

    pub fn cache_bytes(&self) -> Result<u64> {
        size(self.cache.as_deref(), "node.cache", 256_000_000)
    }

    pub fn pinned_bytes(&self) -> Result<u64> {
        size(self.pinned.as_deref(), "node.pinned", 64_000_000)
    }

    pub fn disk_capacity(&self) -> Result<Option<u64>> {
        self.disk_capacity.as_deref().map(|s| size(Some(s), "node.disk_capacity", 0)).transpose()
    }
}

fn size(value: Option<&str>, key: &str, default: u64) -> Result<u64> {
    value.map_or(Ok(default), |v| parse_bytes(v).with_context(|| key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StorageConfig> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        StorageConfig::load(Some(&p))
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            "[meta]\nlisten = \"127.0.0.1:1\"\n[node]\ncache = \"1MB\"\nhdd = { positioning_us = 5, transfer_bytes_per_sec = 9 }\n[cluster]\nnodes = 3\n",
        )
        .unwrap();
        assert_eq!(c.node.cache_bytes().unwrap(), 1_000_000);
        assert_eq!(c.node.hdd.unwrap().positioning_us, 5);
        assert_eq!(c.cluster.nodes, Some(3));
    }

    #[test]
    fn mistakes_are_reported_clearly() {
        let e = format!("{:#}", parse("[node]\ncahce = \"1MB\"\n").unwrap_err());
        assert!(e.contains("malformed config") && e.contains("cahce"), "{e}");
        let e = format!("{:#}", parse("[node]\ncache = \"lots\"\n").unwrap_err());
        assert!(e.contains("node.cache") && e.contains("invalid size"), "{e}");
        let e = format!("{:#}", parse("[node]\norphan_grace_ms = 0\n").unwrap_err());
        assert!(e.contains("node.orphan_grace_ms must be at least 100"), "{e}");
        assert_eq!(parse("[node]\norphan_grace_ms = 100\n").unwrap().node.orphan_grace(), Duration::from_millis(100));
        let e = format!("{:#}", parse("[cluster\n").unwrap_err());
        assert!(e.contains("malformed config"), "{e}");
        let e = format!("{:#}", StorageConfig::load(Some(Path::new("/nonexistent/c.toml"))).unwrap_err());
        assert!(e.contains("cannot read config file"), "{e}");
    }
}
