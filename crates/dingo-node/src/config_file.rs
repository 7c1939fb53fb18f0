//! The `[node]` and `[node.io]` tables of the storage configuration file:
//! every key is optional, command-line flags override them, unknown keys
//! are errors.
//!
//! ```toml
//! [node]
//! heartbeat_ms = 1000       # at least 10; meta.dead_after_ms at least twice this
//! orphan_grace_ms = 3600000  # delete chunks no block places here after this age
//! cache = "256MB"          # general cache region
//! pinned = "64MB"          # pinned cache region
//! disk_capacity = "10GB"   # per disk, at least 1MB; default: the filesystem's size
//! hdd = { positioning_us = 10000, transfer_bytes_per_sec = 150000000 }
//! # per-disk models (index in --disk order) in place of `hdd`: a mixed node
//! disk_models = [{ disk = 1, positioning_us = 14000, transfer_bytes_per_sec = 90000000 }]
//! fault_injection = false  # accept InjectSlowdown RPCs (tests and experiments)
//!
//! [node.flash]             # flash tier under the DRAM cache (off when absent)
//! path = "/ssd/dingo-flash.img"  # emptied at start: it is a cache
//!                          # (a relative path is inside the first --disk directory)
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
//! # or fixed and never tuned (CFQ's idle class, Practical scrubbing's baseline):
//! # waiting = { size = "64KiB", threshold_ms = 10 }
//! shares = [{ declaration = 7, share = 0.3 }]  # fair-queueing weight of a declaration
//! ```

use crate::{DiskSpec, IoSettings, Slowdown, WaitingSettings};
use dingo_iosched::PolicyKind;
use dingo_iosched::waiting::WaitingConfig;
use dingo_types::{ByteSize, DiskModel};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// Default of `node.heartbeat_ms`.
pub const DEFAULT_HEARTBEAT_MS: u64 = 1000;
/// Default of `node.orphan_grace_ms`: one hour.
pub const DEFAULT_ORPHAN_GRACE_MS: u64 = 3_600_000;
/// Default of `node.cache`.
pub const DEFAULT_CACHE_BYTES: u64 = 256_000_000;
/// Default of `node.pinned`.
pub const DEFAULT_PINNED_BYTES: u64 = 64_000_000;
/// Smallest disk capacity accepted: room for a few chunks.
pub const MIN_DISK_CAPACITY_BYTES: u64 = 1_000_000;
/// Smallest `node.io.segment`: one page of direct IO.
const MIN_SEGMENT_BYTES: u64 = 4096;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orphan_grace_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_capacity: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hdd: Option<DiskModel>,
    /// Disks emulated with a model of their own instead of `hdd`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk_models: Vec<DiskModelEntry>,
    /// Accept `InjectSlowdown` calls (tests and experiments only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fault_injection: bool,
    #[serde(default)]
    pub io: IoSection,
    /// A flash tier under the DRAM cache; off when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flash: Option<FlashSection>,
}

/// `[node.flash]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashSection {
    pub path: PathBuf,
    pub zones: u32,
    /// Cache pages (64 KiB) per zone.
    pub zone_pages: u32,
    #[serde(default = "default_max_active_zones")]
    pub max_active_zones: u32,
    #[serde(default = "default_pin_bucket_ms")]
    pub pin_bucket_ms: u64,
    /// Device bytes the tier may write per day, e.g. "1TB".
    pub write_budget_per_day: ByteSize,
}

fn default_max_active_zones() -> u32 {
    4
}

fn default_pin_bucket_ms() -> u64 {
    10_000
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util_target: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdown: Vec<SlowdownEntry>,
    /// The Waiting gate on best effort; absent: off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<WaitingEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<ShareEntry>,
}

/// `[node.io] waiting`: either a mean-slowdown goal and tuner timing, or a
/// fixed request size and idle threshold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitingEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_slowdown_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retune_s: Option<f64>,
    /// A fixed gate's request size (with `threshold_ms`, without `goal_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_ms: Option<f64>,
}

/// `[node.io] shares`: one declaration's guaranteed share of head time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareEntry {
    pub declaration: u64,
    pub share: f64,
}

/// `[node] disk_models`: one disk's emulated HDD model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskModelEntry {
    /// Index of the disk in the node's `--disk` list.
    pub disk: usize,
    pub positioning_us: u64,
    pub transfer_bytes_per_sec: u64,
}

/// One injected slowdown (`[node.io] slowdown`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowdownEntry {
    /// Index of the disk in the node's `--disk` list.
    pub disk: usize,
    pub factor: f64,
    #[serde(default)]
    pub after_ms: u64,
    pub for_ms: u64,
}

/// A `[node]` value that cannot work; the message names the key.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct NodeConfigError(String);

fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), NodeConfigError> {
    if ok { Ok(()) } else { Err(NodeConfigError(message())) }
}

/// Refuses a disk capacity that cannot hold a chunk.
pub fn check_capacity(bytes: u64) -> Result<(), NodeConfigError> {
    ensure(bytes >= MIN_DISK_CAPACITY_BYTES, || {
        format!(
            "a disk capacity of {bytes} bytes cannot hold a chunk; use at least 1MB (or leave it out: the \
             filesystem's size)"
        )
    })
}

/// Where a node listens, is reached, finds the metadata service (and how
/// it calls it) and serves `/metrics`: the parts of its configuration that
/// come from the command line, not the `[node]` table.
pub struct NodeEndpoints {
    pub listen: SocketAddr,
    /// Address others use for this node; default: the bound listen address.
    pub advertise: Option<String>,
    pub meta: String,
    pub meta_access: dingo_auth::ClusterAccess,
    pub metrics: Option<SocketAddr>,
}

impl NodeSection {
    /// Refuses values that cannot work, naming the key and the reason.
    pub fn validate(&self) -> Result<(), NodeConfigError> {
        ensure(self.orphan_grace_ms.is_none_or(|ms| ms >= 100), || {
            "node.orphan_grace_ms must be at least 100: chunks younger than this may still be on their way to \
             being recorded"
                .into()
        })?;
        ensure(self.heartbeat_ms.is_none_or(|ms| ms >= 10), || {
            "node.heartbeat_ms must be at least 10: more frequent heartbeats only load the metadata service".into()
        })?;
        if let Some(c) = self.disk_capacity {
            check_capacity(c.bytes()).map_err(|e| NodeConfigError(format!("node.disk_capacity: {e}")))?;
        }
        if let Some(h) = self.hdd {
            ensure(h.transfer_bytes_per_sec > 0, || "node.hdd.transfer_bytes_per_sec must be positive".into())?;
        }
        for (i, m) in self.disk_models.iter().enumerate() {
            ensure(m.transfer_bytes_per_sec > 0, || {
                format!("node.disk_models: disk {}: transfer_bytes_per_sec must be positive", m.disk)
            })?;
            ensure(!self.disk_models[..i].iter().any(|o| o.disk == m.disk), || {
                format!("node.disk_models: disk {} has two models", m.disk)
            })?;
        }
        self.io_settings(0)?;
        Ok(())
    }

    /// Scheduler settings of the node's disk number `disk` (`[node.io]`).
    pub fn io_settings(&self, disk: usize) -> Result<IoSettings, NodeConfigError> {
        let io = &self.io;
        let mut s = IoSettings::default();
        if let Some(name) = &io.scheduler {
            s.scheduler = match name.as_str() {
                "fifo" => PolicyKind::Fifo,
                "classful" => PolicyKind::Classful,
                other => {
                    return Err(NodeConfigError(format!(
                        "node.io.scheduler = \"{other}\" is not a scheduler; use \"fifo\" or \"classful\""
                    )));
                }
            };
        }
        if let Some(segment) = io.segment {
            s.segment_bytes = segment.bytes();
            ensure(s.segment_bytes >= MIN_SEGMENT_BYTES, || "node.io.segment must be at least 4KiB".into())?;
        }
        let share = |v: Option<f64>, key: &str, default: u64| -> Result<u64, NodeConfigError> {
            let Some(v) = v else { return Ok(default) };
            ensure((0.0..=1.0).contains(&v), || format!("{key} = {v} must be a fraction of head time in [0, 1]"))?;
            Ok((v * 1e6).round() as u64)
        };
        s.min_share_ppm = share(io.min_share, "node.io.min_share", s.min_share_ppm)?;
        s.util_target_ppm = share(io.util_target, "node.io.util_target", s.util_target_ppm)?;
        if let Some(w) = &io.waiting {
            ensure(s.scheduler == PolicyKind::Classful, || {
                "node.io.waiting needs scheduler = \"classful\" (the FIFO queue has no best-effort class to gate)"
                    .into()
            })?;
            let positive = |v: f64, key: &str| -> Result<f64, NodeConfigError> {
                ensure(v.is_finite() && v > 0.0, || format!("node.io.waiting.{key} = {v} must be a positive number"))?;
                Ok(v)
            };
            s.waiting = Some(match (w.goal_ms, w.size, w.threshold_ms) {
                (Some(goal_ms), None, None) => {
                    let default = WaitingConfig::default();
                    let scaled = |v: Option<f64>, key: &str, scale: f64, default: u64| match v {
                        None => Ok(default),
                        Some(v) => Ok((positive(v, key)? * scale) as u64),
                    };
                    WaitingSettings::Tuned {
                        goal_us: (positive(goal_ms, "goal_ms")? * 1e3) as u64,
                        max_slowdown_us: scaled(w.max_slowdown_ms, "max_slowdown_ms", 1e3, default.max_slowdown_us)?,
                        window_us: scaled(w.window_s, "window_s", 1e6, default.window_us)?,
                        retune_us: scaled(w.retune_s, "retune_s", 1e6, default.retune_us)?,
                    }
                }
                (None, Some(size), Some(threshold_ms)) => {
                    ensure(w.max_slowdown_ms.is_none() && w.window_s.is_none() && w.retune_s.is_none(), || {
                        "node.io.waiting: a fixed gate (size, threshold_ms) is never tuned: drop max_slowdown_ms, \
                         window_s and retune_s"
                            .into()
                    })?;
                    ensure(size.bytes() >= MIN_SEGMENT_BYTES, || "node.io.waiting.size must be at least 4KiB".into())?;
                    let threshold_us = (positive(threshold_ms, "threshold_ms")? * 1e3) as u64;
                    WaitingSettings::Fixed { size_bytes: size.bytes(), threshold_us }
                }
                _ => {
                    return Err(NodeConfigError(
                        "node.io.waiting needs either goal_ms (a tuned gate) or both size and threshold_ms (a fixed \
                         gate), not both"
                            .into(),
                    ));
                }
            });
        }
        for e in &io.shares {
            ensure(e.declaration > 0, || {
                "node.io.shares: declaration 0 is the imperative tasks, not a declaration".into()
            })?;
            s.shares.push((e.declaration, share(Some(e.share), "node.io.shares.share", 0)?.max(1)));
        }
        for f in &io.slowdown {
            ensure(f.factor.is_finite() && f.factor >= 0.001, || {
                format!("node.io.slowdown: factor {} must be a positive number", f.factor)
            })?;
            ensure(f.for_ms > 0, || "node.io.slowdown: for_ms must be positive".into())?;
            if f.disk == disk {
                s.slowdown = Some(Slowdown {
                    factor_permille: (f.factor * 1000.0).round() as u64,
                    after: Duration::from_millis(f.after_ms),
                    lasting: Duration::from_millis(f.for_ms),
                });
            }
        }
        Ok(s)
    }

    /// The node's disks at `paths`, in order; `capacity` (a command-line
    /// flag) overrides `disk_capacity`.
    pub fn disk_specs(&self, paths: Vec<PathBuf>, capacity: Option<u64>) -> Result<Vec<DiskSpec>, NodeConfigError> {
        let capacity = match capacity {
            Some(c) => {
                check_capacity(c)?;
                Some(c)
            }
            None => self.disk_capacity.map(ByteSize::bytes),
        };
        if let Some(m) = self.disk_models.iter().find(|m| m.disk >= paths.len()) {
            return Err(NodeConfigError(format!(
                "node.disk_models: disk {} but the node has {} disks (indexes count from 0 in --disk order)",
                m.disk,
                paths.len()
            )));
        }
        paths
            .into_iter()
            .enumerate()
            .map(|(i, path)| Ok(DiskSpec { path, capacity, hdd: self.disk_model(i), io: self.io_settings(i)? }))
            .collect()
    }

    /// The emulated model of disk number `disk`: its own, else `hdd`.
    fn disk_model(&self, disk: usize) -> Option<DiskModel> {
        match self.disk_models.iter().find(|m| m.disk == disk) {
            Some(m) => {
                Some(DiskModel { positioning_us: m.positioning_us, transfer_bytes_per_sec: m.transfer_bytes_per_sec })
            }
            None => self.hdd,
        }
    }

    /// The flash tier's settings, if `[node.flash]` is present.
    pub fn flash_settings(&self) -> Option<crate::FlashSettings> {
        self.flash.as_ref().map(|f| crate::FlashSettings {
            path: f.path.clone(),
            zones: f.zones,
            zone_bytes: u64::from(f.zone_pages) * crate::chunk::SEGMENT,
            max_active_zones: f.max_active_zones,
            pin_bucket_ms: f.pin_bucket_ms,
            write_budget_bytes_per_day: f.write_budget_per_day.bytes(),
        })
    }

    /// [`Self::flash_settings`] for a node with these disks: a relative
    /// path is taken inside the first disk's directory, so the one
    /// configuration file of a local cluster gives each node its own file.
    pub fn flash_settings_on(&self, disk_paths: &[PathBuf]) -> Option<crate::FlashSettings> {
        let mut flash = self.flash_settings()?;
        if let Some(first_disk) = disk_paths.first()
            && flash.path.is_relative()
        {
            flash.path = first_disk.join(&flash.path);
        }
        Some(flash)
    }

    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.unwrap_or(DEFAULT_HEARTBEAT_MS))
    }

    /// Age after which a chunk no block record places on its disk is
    /// deleted.
    pub fn orphan_grace(&self) -> Duration {
        Duration::from_millis(self.orphan_grace_ms.unwrap_or(DEFAULT_ORPHAN_GRACE_MS))
    }

    pub fn cache_bytes(&self) -> u64 {
        self.cache.map_or(DEFAULT_CACHE_BYTES, ByteSize::bytes)
    }

    pub fn pinned_bytes(&self) -> u64 {
        self.pinned.map_or(DEFAULT_PINNED_BYTES, ByteSize::bytes)
    }

    /// The whole node: these settings, the disks at `disk_paths` (each
    /// `capacity` bytes, or its filesystem's size) and its `endpoints`.
    pub fn node_config(
        &self,
        disk_paths: Vec<PathBuf>,
        capacity: Option<u64>,
        endpoints: NodeEndpoints,
    ) -> Result<crate::NodeConfig, NodeConfigError> {
        let NodeEndpoints { listen, advertise, meta, meta_access, metrics } = endpoints;
        let flash = self.flash_settings_on(&disk_paths);
        Ok(crate::NodeConfig {
            listen,
            advertise,
            meta,
            meta_access,
            metrics,
            disks: self.disk_specs(disk_paths, capacity)?,
            cache_bytes: self.cache_bytes(),
            pinned_bytes: self.pinned_bytes(),
            heartbeat: self.heartbeat(),
            orphan_grace: self.orphan_grace(),
            fault_injection: self.fault_injection,
            flash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_table_sets_each_disks_scheduler_and_fault() {
        let section = NodeSection {
            io: IoSection {
                scheduler: Some("fifo".into()),
                segment: Some(ByteSize(512_000)),
                min_share: Some(0.1),
                slowdown: vec![SlowdownEntry { disk: 1, factor: 5.0, after_ms: 10, for_ms: 20 }],
                ..IoSection::default()
            },
            ..NodeSection::default()
        };
        let specs = section.disk_specs(vec!["a".into(), "b".into()], None).unwrap();
        let (d0, d1) = (&specs[0].io, &specs[1].io);
        assert_eq!(d0.scheduler, PolicyKind::Fifo);
        assert_eq!((d0.segment_bytes, d0.min_share_ppm), (512_000, 100_000));
        assert_eq!(d0.slowdown, None);
        let s = d1.slowdown.unwrap();
        assert_eq!(
            (s.factor_permille, s.after, s.lasting),
            (5000, Duration::from_millis(10), Duration::from_millis(20))
        );
        let default = NodeSection::default().io_settings(0).unwrap();
        assert_eq!(default.scheduler, PolicyKind::Classful);
        assert_eq!(default.waiting, None);
        let section = NodeSection {
            io: IoSection {
                waiting: Some(WaitingEntry {
                    goal_ms: Some(1.5),
                    window_s: Some(30.0),
                    retune_s: Some(5.0),
                    ..WaitingEntry::default()
                }),
                shares: vec![ShareEntry { declaration: 3, share: 0.25 }],
                ..IoSection::default()
            },
            ..NodeSection::default()
        };
        let d = section.io_settings(0).unwrap();
        let tuned = WaitingSettings::Tuned {
            goal_us: 1_500,
            max_slowdown_us: 50_000,
            window_us: 30_000_000,
            retune_us: 5_000_000,
        };
        assert_eq!(d.waiting, Some(tuned));
        assert_eq!(d.shares, vec![(3, 250_000)]);
        // A fixed gate: CFQ's idle class.
        let fixed = |entry: WaitingEntry| {
            let io = IoSection { waiting: Some(entry), ..IoSection::default() };
            NodeSection { io, ..NodeSection::default() }.io_settings(0).map(|s| s.waiting)
        };
        let cfq =
            WaitingEntry { size: Some("64KiB".parse().unwrap()), threshold_ms: Some(10.0), ..WaitingEntry::default() };
        assert_eq!(
            fixed(cfq.clone()).unwrap(),
            Some(WaitingSettings::Fixed { size_bytes: 65_536, threshold_us: 10_000 })
        );
        // Mixing the two forms, or half of the fixed one, is refused by name.
        for (entry, message) in [
            (WaitingEntry { goal_ms: Some(1.0), ..cfq.clone() }, "either goal_ms"),
            (WaitingEntry { threshold_ms: None, ..cfq.clone() }, "both size and threshold_ms"),
            (WaitingEntry::default(), "either goal_ms"),
            (WaitingEntry { retune_s: Some(5.0), ..cfq.clone() }, "never tuned"),
            (WaitingEntry { size: Some("1KiB".parse().unwrap()), ..cfq.clone() }, "size must be at least 4KiB"),
            (WaitingEntry { threshold_ms: Some(-1.0), ..cfq.clone() }, "threshold_ms = -1 must be a positive number"),
        ] {
            let e = fixed(entry).unwrap_err().to_string();
            assert!(e.contains(message), "{e}");
        }
    }

    #[test]
    fn a_disk_with_a_model_of_its_own_replaces_the_nodes() {
        let hdd = DiskModel { positioning_us: 10_000, transfer_bytes_per_sec: 150_000_000 };
        let slow = DiskModelEntry { disk: 2, positioning_us: 14_000, transfer_bytes_per_sec: 90_000_000 };
        let section = NodeSection { hdd: Some(hdd), disk_models: vec![slow.clone()], ..NodeSection::default() };
        section.validate().unwrap();
        let specs = section.disk_specs(vec!["a".into(), "b".into(), "c".into()], None).unwrap();
        let models: Vec<_> = specs.iter().map(|s| s.hdd).collect();
        let own = DiskModel { positioning_us: 14_000, transfer_bytes_per_sec: 90_000_000 };
        assert_eq!(models, [Some(hdd), Some(hdd), Some(own)]);
        // Without `hdd`, only the listed disk is emulated.
        let section = NodeSection { disk_models: vec![slow.clone()], ..NodeSection::default() };
        let specs = section.disk_specs(vec!["a".into(), "b".into(), "c".into()], None).unwrap();
        assert_eq!(specs.iter().map(|s| s.hdd).collect::<Vec<_>>(), [None, None, Some(own)]);
        // Mistakes name the key and the disk.
        let e = section.disk_specs(vec!["a".into(), "b".into()], None).unwrap_err().to_string();
        assert!(e.contains("node.disk_models: disk 2 but the node has 2 disks"), "{e}");
        let twice = NodeSection { disk_models: vec![slow.clone(), slow.clone()], ..NodeSection::default() };
        assert!(twice.validate().unwrap_err().to_string().contains("disk 2 has two models"));
        let zero = DiskModelEntry { transfer_bytes_per_sec: 0, ..slow };
        let e = NodeSection { disk_models: vec![zero], ..NodeSection::default() }.validate().unwrap_err();
        assert!(e.to_string().contains("disk 2: transfer_bytes_per_sec must be positive"), "{e}");
    }

    #[test]
    fn a_relative_flash_path_is_inside_the_first_disk() {
        let flash = |path: &str| FlashSection {
            path: path.into(),
            zones: 4,
            zone_pages: 2,
            max_active_zones: 4,
            pin_bucket_ms: 1000,
            write_budget_per_day: ByteSize(1 << 30),
        };
        let disks: Vec<PathBuf> = vec!["/n3/d0".into(), "/n3/d1".into()];
        let on = |path: &str| {
            let section = NodeSection { flash: Some(flash(path)), ..NodeSection::default() };
            section.flash_settings_on(&disks).unwrap().path
        };
        assert_eq!(on("flash.img"), PathBuf::from("/n3/d0/flash.img"));
        assert_eq!(on("/ssd/f.img"), PathBuf::from("/ssd/f.img"));
        assert!(NodeSection::default().flash_settings_on(&disks).is_none());
    }

    #[test]
    fn capacity_flag_overrides_and_is_checked() {
        let section = NodeSection { disk_capacity: Some(ByteSize(3_000_000)), ..NodeSection::default() };
        assert_eq!(section.disk_specs(vec!["a".into()], None).unwrap()[0].capacity, Some(3_000_000));
        assert_eq!(section.disk_specs(vec!["a".into()], Some(5_000_000)).unwrap()[0].capacity, Some(5_000_000));
        let e = section.disk_specs(vec!["a".into()], Some(5)).unwrap_err().to_string();
        assert!(e.contains("cannot hold a chunk"), "{e}");
        assert_eq!((section.cache_bytes(), section.pinned_bytes()), (DEFAULT_CACHE_BYTES, DEFAULT_PINNED_BYTES));
    }
}
