//! Size and pace of a demo run, and the storage configuration they imply.

use dingo_cluster::StorageConfig;
use dingo_iosched::PolicyKind;
use dingo_types::{ByteSize, DiskModel};
use serde::Serialize;
use std::time::Duration;

/// A node not heard from this long is taken for silent (the node that dies
/// mid-timeline must be noticed well within the window).
const DEAD_AFTER_MS: u64 = 3000;
/// Node heartbeat interval, a sixth of [`DEAD_AFTER_MS`].
const HEARTBEAT_MS: u64 = 500;

/// Size and pace of a demo run.
#[derive(Clone, Debug, Serialize)]
pub struct Scale {
    pub nodes: u32,
    pub disks_per_node: u32,
    pub block_size: u64,
    /// Blocks per file (an EC file of 3 blocks is one RS 3+2 stripe).
    pub blocks_per_file: u64,
    pub replicated_files: u32,
    pub ec_files: u32,
    /// The timeline's length `T`.
    pub window: Duration,
    /// Planner quantum (declarative mode).
    pub quantum: Duration,
    /// Planner budget, bytes per second of wall time.
    pub budget_bytes_per_sec: u64,
    pub hdd: DiskModel,
    /// Disks are sized so the initial data fills this fraction.
    pub fill: f64,
    pub foreground_interval: Duration,
    /// Transcoding rounds; each transcodes 1/(rounds+1) of the replicated files.
    pub transcode_rounds: u32,
    /// Rebalancing candidates: disks this far above the mean utilisation.
    pub rebalance_threshold: f64,
    /// Pinned cache region per node, as the planner plans for it (its
    /// dispatch groups pin at most a quarter of it).
    pub pinned_bytes: u64,
    /// The pinned region each node really has, when smaller than
    /// `pinned_bytes` (the flash-tier experiment's shrunk DRAM).
    pub node_pinned_bytes: Option<u64>,
    /// Each node's `[node.flash]` table (a relative path is a file in the
    /// node's first disk directory); none: DRAM only.
    pub flash: Option<dingo_node::config_file::FlashSection>,
    /// The emulated disks' IO scheduler in both modes (FIFO is the
    /// baseline the classful scheduler's bars compare against).
    pub scheduler: PolicyKind,
    /// Data files of the object-store area garbage collection rewrites
    /// (each `file_bytes` of records): a fifth of all files, the
    /// simulator's object-store subset.
    pub gc_files: u32,
    /// Share of the area's records that are dead (named by a tombstone).
    pub gc_dead_fraction: f64,
    /// Files file scrubbing reads in full and verifies.
    pub file_scrub_files: u32,
    /// Files fsck checks, and the blocks it reads at the start of each.
    pub fsck_files: u32,
    pub fsck_blocks: usize,
    /// Files georeplication copies to the second cluster.
    pub georep_files: u32,
    /// Nodes (with `disks_per_node` disks each) of that second cluster.
    pub remote_nodes: u32,
}

impl Scale {
    pub fn default_run() -> Scale {
        Scale {
            nodes: 6,
            disks_per_node: 2,
            block_size: 4_000_000,
            blocks_per_file: 3,
            replicated_files: 32,
            ec_files: 96,
            window: Duration::from_secs(150),
            quantum: Duration::from_secs(5),
            budget_bytes_per_sec: 120_000_000,
            hdd: DiskModel { positioning_us: 8_000, transfer_bytes_per_sec: 60_000_000 },
            fill: 0.75,
            foreground_interval: Duration::from_millis(250),
            transcode_rounds: 4,
            rebalance_threshold: 0.05,
            pinned_bytes: 256_000_000,
            node_pinned_bytes: None,
            flash: None,
            scheduler: PolicyKind::Classful,
            gc_files: 32,
            gc_dead_fraction: 0.3,
            file_scrub_files: 16,
            fsck_files: 12,
            fsck_blocks: 2,
            georep_files: 16,
            remote_nodes: 3,
        }
    }

    /// Small enough for CI: same timeline, fewer files, shorter window.
    pub fn quick() -> Scale {
        Scale {
            replicated_files: 8,
            ec_files: 24,
            window: Duration::from_secs(40),
            quantum: Duration::from_secs(2),
            gc_files: 8,
            file_scrub_files: 4,
            fsck_files: 3,
            georep_files: 4,
            ..Scale::default_run()
        }
    }

    pub fn file_bytes(&self) -> u64 {
        self.block_size * self.blocks_per_file
    }

    /// Bytes stored on disks once loaded (all copies and parity; the
    /// object-store area is erasure-coded like most of the data).
    pub fn physical_bytes(&self) -> u64 {
        let f = self.file_bytes();
        u64::from(self.replicated_files) * f * 3 + u64::from(self.ec_files + self.gc_files) * f * 5 / 3
    }

    /// General cache region per node: 1 % of the data a node stores, as
    /// a datacenter node's page cache is a sliver of its disks (the
    /// foreground reader must not end up caching the whole data set).
    pub fn general_cache_bytes(&self) -> u64 {
        (self.physical_bytes() / u64::from(self.nodes) / 100).max(1_000_000)
    }

    pub fn disk_capacity(&self) -> u64 {
        let disks = u64::from(self.nodes * self.disks_per_node);
        (self.physical_bytes() as f64 / disks as f64 / self.fill) as u64
    }

    /// A point of the timeline, as a fraction of the window.
    pub fn at(&self, fraction: f64) -> Duration {
        self.window.mul_f64(fraction)
    }

    /// The storage daemons' configuration: HDD emulation, cache regions
    /// and disk capacity at this scale, and fast failure detection.
    pub fn storage_config(&self) -> StorageConfig {
        let mut cfg = StorageConfig::default();
        cfg.meta.dead_after_ms = Some(DEAD_AFTER_MS);
        cfg.node.heartbeat_ms = Some(HEARTBEAT_MS);
        cfg.node.cache = Some(ByteSize(self.general_cache_bytes()));
        cfg.node.pinned = Some(ByteSize(self.node_pinned_bytes.unwrap_or(self.pinned_bytes)));
        cfg.node.flash.clone_from(&self.flash);
        cfg.node.disk_capacity = Some(ByteSize(self.disk_capacity()));
        cfg.node.hdd = Some(self.hdd);
        cfg.node.io.scheduler = Some(self.scheduler.name().to_string());
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_config_is_valid_and_sized_to_the_data() {
        for scale in [Scale::quick(), Scale::default_run()] {
            let cfg = scale.storage_config();
            cfg.validate().unwrap();
            let capacity = cfg.node.disk_capacity.unwrap().bytes();
            let disks = u64::from(scale.nodes * scale.disks_per_node);
            // The data fills `fill` of the disks, so they hold it with room to spare.
            assert!(capacity * disks > scale.physical_bytes());
            assert_eq!(cfg.node.pinned_bytes(), scale.pinned_bytes);
            assert_eq!(cfg.node.hdd, Some(scale.hdd));
            assert_eq!(cfg.node.io.scheduler.as_deref(), Some("classful"));
        }
    }
}
