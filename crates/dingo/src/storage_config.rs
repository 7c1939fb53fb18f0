//! The storage configuration file (`--config FILE`, TOML). Every field is
//! optional; command-line flags override the file. Unknown keys are errors,
//! so a typo is reported rather than silently ignored.
//!
//! ```toml
//! [meta]
//! listen = "127.0.0.1:7400"
//! metrics = "127.0.0.1:7401"
//! dead_after_ms = 5000     # a node silent this long is not alive (>= 2 x node.heartbeat_ms)
//! lease_ttl_ms = 60000     # >= 1000; an expired lease is recovered (file sealed or removed)
//! mark_dead_after_ms = 600000  # a node silent, or a disk its node leaves out of heartbeats, this long is marked DEAD (its chunks get rebuilt); 0: never
//!
//! [node]
//! heartbeat_ms = 1000       # at least 10; meta.dead_after_ms at least twice this
//! orphan_grace_ms = 3600000  # delete chunks no block places here after this age
//! cache = "256MB"          # general cache region
//! pinned = "64MB"          # pinned cache region
//! disk_capacity = "10GB"   # per disk, at least 1MB; default: the filesystem's size
//! hdd = { positioning_us = 10000, transfer_bytes_per_sec = 150000000 }
//! fault_injection = false  # accept InjectSlowdown RPCs (tests and experiments)
//!
//! [node.flash]             # flash tier under the DRAM cache (off when absent)
//! path = "/ssd/dingo-flash.img"  # emptied at start: it is a cache
//! zones = 64
//! zone_pages = 256         # 64 KiB cache pages per zone (16 MiB zones)
//! max_active_zones = 4
//! pin_bucket_ms = 10000    # pins ending within this share zones
//! write_budget_per_day = "1TB"
//!
//! [node.io]                # how emulated HDD heads schedule requests (docs/IO_CONTROL.md)
//! scheduler = "classful"   # default (PAIO-style); "fifo" is the old single queue
//! segment = "1MB"          # largest maintenance unit a foreground read can wait behind
//! min_share = 0.05         # head time guaranteed to queued maintenance
//! util_target = 1.0        # head-time utilisation the control loop aims at
//! # fault injection: the node's disk #0 (in --disk order) 5x slower from 4.5 s to 6.8 s
//! slowdown = [{ disk = 0, factor = 5.0, after_ms = 4500, for_ms = 2300 }]
//! # Waiting gate on best effort (off when absent): fire after idle time,
//! # (size, threshold) tuned every retune_s on the last window_s of foreground
//! waiting = { goal_ms = 2.0, max_slowdown_ms = 50, window_s = 600, retune_s = 300 }
//! shares = [{ declaration = 7, share = 0.3 }]  # fair-queueing weight of a declaration
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
    pub mark_dead_after_ms: Option<u64>,
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
    /// Accept `InjectSlowdown` calls (tests and experiments only).
    #[serde(default)]
    pub fault_injection: bool,
    #[serde(default)]
    pub io: IoSection,
    /// A flash tier under the DRAM cache; off when absent.
    pub flash: Option<FlashSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashSection {
    pub path: std::path::PathBuf,
    pub zones: u32,
    /// Cache pages (64 KiB) per zone.
    pub zone_pages: u32,
    #[serde(default = "default_max_active_zones")]
    pub max_active_zones: u32,
    #[serde(default = "default_pin_bucket_ms")]
    pub pin_bucket_ms: u64,
    /// Device bytes the tier may write per day, e.g. "1TB".
    pub write_budget_per_day: String,
}

fn default_max_active_zones() -> u32 {
    4
}

fn default_pin_bucket_ms() -> u64 {
    10_000
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoSection {
    pub scheduler: Option<String>,
    pub segment: Option<String>,
    pub min_share: Option<f64>,
    pub util_target: Option<f64>,
    #[serde(default)]
    pub slowdown: Vec<SlowdownEntry>,
    /// The Waiting gate on best effort; absent: off.
    pub waiting: Option<WaitingEntry>,
    #[serde(default)]
    pub shares: Vec<ShareEntry>,
}

/// `[node.io] waiting`: the gate's mean-slowdown goal and tuner timing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitingEntry {
    pub goal_ms: f64,
    pub max_slowdown_ms: Option<f64>,
    pub window_s: Option<f64>,
    pub retune_s: Option<f64>,
}

/// `[node.io] shares`: one declaration's guaranteed share of head time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareEntry {
    pub declaration: u64,
    pub share: f64,
}

/// One injected slowdown (`[node.io] slowdown`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowdownEntry {
    /// Index of the disk in the node's `--disk` list.
    pub disk: usize,
    pub factor: f64,
    #[serde(default)]
    pub after_ms: u64,
    pub for_ms: u64,
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
        cfg.validate().with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(cfg)
    }

    /// Refuses values that cannot work, naming the key and the reason.
    fn validate(&self) -> Result<()> {
        self.node.validate()?;
        if let Some(ms) = self.meta.dead_after_ms {
            let hb = self.node.heartbeat().as_millis() as u64;
            anyhow::ensure!(
                ms >= 2 * hb && ms >= 100,
                "meta.dead_after_ms = {ms} is too short: a node heartbeats every {hb} ms (node.heartbeat_ms), so \
                 live nodes would be taken for silent; use at least {} ms",
                (2 * hb).max(100)
            );
        }
        if let Some(ms) = self.meta.lease_ttl_ms {
            anyhow::ensure!(
                ms >= MIN_LEASE_TTL_MS,
                "meta.lease_ttl_ms = {ms} is too short: a writer renews its lease once per write unit, so leases \
                 would expire mid-write; use at least {MIN_LEASE_TTL_MS} ms"
            );
        }
        if let Some(ms) = self.meta.mark_dead_after_ms {
            let silent = self.meta.dead_after_ms.unwrap_or(DEFAULT_DEAD_AFTER_MS);
            anyhow::ensure!(
                ms == 0 || ms >= silent,
                "meta.mark_dead_after_ms = {ms} must be at least meta.dead_after_ms ({silent}): a node is first \
                 silent, then marked dead"
            );
        }
        anyhow::ensure!(self.cluster.nodes != Some(0), "cluster.nodes must be at least 1");
        anyhow::ensure!(self.cluster.disks_per_node != Some(0), "cluster.disks_per_node must be at least 1");
        Ok(())
    }
}

/// Default of `meta.dead_after_ms`.
pub const DEFAULT_DEAD_AFTER_MS: u64 = 5000;
/// Default of `meta.mark_dead_after_ms`: ten minutes, like HDFS' default.
pub const DEFAULT_MARK_DEAD_AFTER_MS: u64 = 600_000;
/// Shortest lease lifetime accepted (`meta.lease_ttl_ms`).
const MIN_LEASE_TTL_MS: u64 = 1000;
/// Smallest disk capacity accepted: room for a few chunks.
pub const MIN_DISK_CAPACITY: u64 = 1_000_000;

impl NodeSection {
    fn validate(&self) -> Result<()> {
        self.cache_bytes()?;
        self.pinned_bytes()?;
        self.disk_capacity()?;
        anyhow::ensure!(
            self.orphan_grace_ms.is_none_or(|ms| ms >= 100),
            "node.orphan_grace_ms must be at least 100: chunks younger than this may still be on their way to being recorded"
        );
        anyhow::ensure!(
            self.heartbeat_ms.is_none_or(|ms| ms >= 10),
            "node.heartbeat_ms must be at least 10: more frequent heartbeats only load the metadata service"
        );
        if let Some(c) = self.disk_capacity()? {
            check_capacity(c).context("node.disk_capacity")?;
        }
        if let Some(h) = self.hdd {
            anyhow::ensure!(h.transfer_bytes_per_sec > 0, "node.hdd.transfer_bytes_per_sec must be positive");
        }
        self.io_settings(0)?;
        Ok(())
    }

    /// Scheduler settings of the node's disk number `disk` (`[node.io]`).
    pub fn io_settings(&self, disk: usize) -> Result<dingo_node::IoSettings> {
        let io = &self.io;
        let mut s = dingo_node::IoSettings::default();
        if let Some(name) = &io.scheduler {
            s.scheduler = match name.as_str() {
                "fifo" => dingo_iosched::PolicyKind::Fifo,
                "classful" => dingo_iosched::PolicyKind::Classful,
                other => {
                    anyhow::bail!("node.io.scheduler = \"{other}\" is not a scheduler; use \"fifo\" or \"classful\"")
                }
            };
        }
        if let Some(seg) = &io.segment {
            s.segment_bytes = parse_bytes(seg).context("node.io.segment")?;
            anyhow::ensure!(s.segment_bytes >= 4096, "node.io.segment must be at least 4KiB");
        }
        let share = |v: Option<f64>, key: &str, default: u64| -> Result<u64> {
            let Some(v) = v else { return Ok(default) };
            anyhow::ensure!((0.0..=1.0).contains(&v), "{key} = {v} must be a fraction of head time in [0, 1]");
            Ok((v * 1e6).round() as u64)
        };
        s.min_share_ppm = share(io.min_share, "node.io.min_share", s.min_share_ppm)?;
        s.util_target_ppm = share(io.util_target, "node.io.util_target", s.util_target_ppm)?;
        if let Some(w) = &io.waiting {
            anyhow::ensure!(
                s.scheduler == dingo_iosched::PolicyKind::Classful,
                "node.io.waiting needs scheduler = \"classful\" (the FIFO queue has no best-effort class to gate)"
            );
            let positive = |v: f64, key: &str| -> Result<f64> {
                anyhow::ensure!(v.is_finite() && v > 0.0, "node.io.waiting.{key} = {v} must be a positive number");
                Ok(v)
            };
            let mut g = dingo_node::WaitingSettings {
                goal_us: (positive(w.goal_ms, "goal_ms")? * 1e3) as u64,
                ..Default::default()
            };
            if let Some(v) = w.max_slowdown_ms {
                g.max_slowdown_us = (positive(v, "max_slowdown_ms")? * 1e3) as u64;
            }
            if let Some(v) = w.window_s {
                g.window_us = (positive(v, "window_s")? * 1e6) as u64;
            }
            if let Some(v) = w.retune_s {
                g.retune_us = (positive(v, "retune_s")? * 1e6) as u64;
            }
            s.waiting = Some(g);
        }
        for e in &io.shares {
            anyhow::ensure!(
                e.declaration > 0,
                "node.io.shares: declaration 0 is the imperative tasks, not a declaration"
            );
            s.shares.push((e.declaration, share(Some(e.share), "node.io.shares.share", 0)?.max(1)));
        }
        for f in &io.slowdown {
            anyhow::ensure!(
                f.factor.is_finite() && f.factor >= 0.001,
                "node.io.slowdown: factor {} must be a positive number",
                f.factor
            );
            anyhow::ensure!(f.for_ms > 0, "node.io.slowdown: for_ms must be positive");
            if f.disk == disk {
                s.slowdown = Some(dingo_node::Slowdown {
                    factor_permille: (f.factor * 1000.0).round() as u64,
                    after: Duration::from_millis(f.after_ms),
                    lasting: Duration::from_millis(f.for_ms),
                });
            }
        }
        Ok(s)
    }

    /// The flash tier's settings, if `[node.flash]` is present.
    pub fn flash_settings(&self) -> Result<Option<dingo_node::FlashSettings>> {
        let Some(f) = &self.flash else { return Ok(None) };
        Ok(Some(dingo_node::FlashSettings {
            path: f.path.clone(),
            zones: f.zones,
            zone_bytes: u64::from(f.zone_pages) * dingo_node::chunk::SEGMENT,
            max_active_zones: f.max_active_zones,
            pin_bucket_ms: f.pin_bucket_ms,
            write_budget_bytes_per_day: parse_bytes(&f.write_budget_per_day)
                .context("node.flash.write_budget_per_day")?,
        }))
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.unwrap_or(1000))
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

/// Refuses a disk capacity that cannot hold a chunk.
pub fn check_capacity(bytes: u64) -> Result<()> {
    anyhow::ensure!(
        bytes >= MIN_DISK_CAPACITY,
        "a disk capacity of {bytes} bytes cannot hold a chunk; use at least 1MB (or leave it out: the filesystem's size)"
    );
    Ok(())
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
    fn io_section_sets_each_disks_scheduler_and_fault() {
        let c = parse(
            "[node.io]\nscheduler = \"fifo\"\nsegment = \"512KB\"\nmin_share = 0.1\n\
             slowdown = [{ disk = 1, factor = 5.0, after_ms = 10, for_ms = 20 }]\n",
        )
        .unwrap();
        let d0 = c.node.io_settings(0).unwrap();
        let d1 = c.node.io_settings(1).unwrap();
        assert_eq!(d0.scheduler, dingo_iosched::PolicyKind::Fifo);
        assert_eq!((d0.segment_bytes, d0.min_share_ppm), (512_000, 100_000));
        assert_eq!(d0.slowdown, None);
        let s = d1.slowdown.unwrap();
        assert_eq!(
            (s.factor_permille, s.after, s.lasting),
            (5000, Duration::from_millis(10), Duration::from_millis(20))
        );
        let default = StorageConfig::default().node.io_settings(0).unwrap();
        assert_eq!(default.scheduler, dingo_iosched::PolicyKind::Classful);
        assert_eq!(default.waiting, None);
        let c = parse(
            "[node.io]\nwaiting = { goal_ms = 1.5, retune_s = 5, window_s = 30 }\n\
             shares = [{ declaration = 3, share = 0.25 }]\n",
        )
        .unwrap();
        let d = c.node.io_settings(0).unwrap();
        let w = d.waiting.unwrap();
        assert_eq!((w.goal_us, w.retune_us, w.window_us, w.max_slowdown_us), (1_500, 5_000_000, 30_000_000, 50_000));
        assert_eq!(d.shares, vec![(3, 250_000)]);
    }

    #[test]
    fn flash_section_sets_the_tier_and_fault_injection_is_off_by_default() {
        let c = parse("[node]\n").unwrap();
        assert!(!c.node.fault_injection);
        assert!(c.node.flash_settings().unwrap().is_none());
        let c = parse(
            "[node]\nfault_injection = true\n[node.flash]\npath = \"/f\"\nzones = 8\nzone_pages = 4\n\
             write_budget_per_day = \"2TB\"\n",
        )
        .unwrap();
        assert!(c.node.fault_injection);
        let f = c.node.flash_settings().unwrap().unwrap();
        assert_eq!((f.zones, f.zone_bytes, f.max_active_zones), (8, 4 * 65_536, 4));
        assert_eq!(f.write_budget_bytes_per_day, 2_000_000_000_000);
        assert!(parse("[node.flash]\npath = \"/f\"\nzones = 8\n").is_err(), "zone_pages is required");
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
        for (text, key) in [
            ("[meta]\ndead_after_ms = 0\n", "meta.dead_after_ms = 0 is too short"),
            ("[meta]\ndead_after_ms = 1500\n[node]\nheartbeat_ms = 1000\n", "meta.dead_after_ms = 1500"),
            ("[meta]\nlease_ttl_ms = 0\n", "meta.lease_ttl_ms = 0 is too short"),
            ("[node]\ndisk_capacity = \"0\"\n", "node.disk_capacity"),
            ("[node]\nheartbeat_ms = 0\n", "node.heartbeat_ms must be at least 10"),
            ("[node.io]\nscheduler = \"lifo\"\n", "node.io.scheduler = \"lifo\""),
            ("[node.io]\nmin_share = 1.5\n", "node.io.min_share"),
            ("[node.io]\nslowdown = [{ disk = 0, factor = 0.0, for_ms = 5 }]\n", "node.io.slowdown"),
            ("[node.io]\nwaiting = { goal_ms = 0 }\n", "node.io.waiting.goal_ms = 0"),
            ("[node.io]\nscheduler = \"fifo\"\nwaiting = { goal_ms = 1 }\n", "node.io.waiting needs scheduler"),
            ("[node.io]\nshares = [{ declaration = 1, share = 1.5 }]\n", "node.io.shares.share = 1.5"),
            ("[cluster]\nnodes = 0\n", "cluster.nodes must be at least 1"),
        ] {
            let e = format!("{:#}", parse(text).unwrap_err());
            assert!(e.contains(key) && e.contains("invalid config file"), "{text}: {e}");
        }
        parse(
            "[meta]\ndead_after_ms = 1000\nlease_ttl_ms = 1000\n[node]\nheartbeat_ms = 200\ndisk_capacity = \"3MB\"\n",
        )
        .unwrap();
        let e = format!("{:#}", parse("[cluster\n").unwrap_err());
        assert!(e.contains("malformed config"), "{e}");
        let e = format!("{:#}", StorageConfig::load(Some(Path::new("/nonexistent/c.toml"))).unwrap_err());
        assert!(e.contains("cannot read config file"), "{e}");
    }
}
