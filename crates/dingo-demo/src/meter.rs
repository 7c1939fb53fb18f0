//! Disk reads from the nodes' own counters, cross-checked against the
//! kernel's per-process `read_bytes`, summed over the cluster.

use crate::{DemoError, Result};
use dingo_client::{Client, IoTag};
use dingo_cluster::LocalCluster;
use serde::Serialize;
use std::collections::HashMap;

/// Counters of one node, or sums over nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeSample {
    /// Bytes read from the node's disks, per IO class
    /// ([`IoTag::class_index`]).
    pub disk_bytes_by_class: [u64; IoTag::CLASSES],
    /// Bytes the kernel says the node process read from storage.
    pub kernel_read_bytes: u64,
    /// Reads served from the pinned cache region.
    pub pinned_hits: u64,
    /// Pinned pages evicted early because the pinned region overflowed.
    pub overflow_evictions: u64,
    /// Bytes of pinned pages read from disk again, while pinned, after an
    /// overflow pushed them out of DRAM (and flash did not have them).
    pub pinned_reread_bytes: u64,
    /// Cache pages served from the flash tier.
    pub flash_hits: u64,
    /// The flash tier's counters (zero without `[node.flash]`).
    pub flash: FlashSample,
}

/// A node's flash-tier counters, or their sum over nodes (the zone count
/// and the budget are the largest of any node).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlashSample {
    pub evicted_written_bytes: u64,
    pub pinned_written_bytes: u64,
    /// What the host asked the flash device to write, and what its media
    /// wrote.
    pub host_written_bytes: u64,
    pub device_written_bytes: u64,
    /// The host writes of the node that wrote most (in a sum over nodes).
    pub max_node_host_written_bytes: u64,
    pub refused_over_budget_bytes: u64,
    pub refused_no_space_bytes: u64,
    pub pinned_zones_reclaimed_early: u64,
    /// Pages not offered to flash because its writer was behind.
    pub dropped_queue_full_bytes: u64,
    /// Most zones open at once (since the node started: not a difference).
    pub max_open_zones: u32,
    pub max_active_zones: u32,
    pub write_budget_bytes_per_day: u64,
}

impl FlashSample {
    fn from_wire(f: &dingo_proto::v1::FlashTierStats) -> FlashSample {
        FlashSample {
            evicted_written_bytes: f.evicted_written_bytes,
            pinned_written_bytes: f.pinned_written_bytes,
            host_written_bytes: f.host_written_bytes,
            max_node_host_written_bytes: f.host_written_bytes,
            device_written_bytes: f.device_written_bytes,
            refused_over_budget_bytes: f.refused_over_budget_bytes,
            refused_no_space_bytes: f.refused_no_space_bytes,
            pinned_zones_reclaimed_early: f.pinned_zones_reclaimed_early,
            dropped_queue_full_bytes: f.dropped_queue_full_bytes,
            max_open_zones: f.max_open_zones,
            max_active_zones: f.max_active_zones,
            write_budget_bytes_per_day: f.write_budget_bytes_per_day,
        }
    }

    /// The cumulative counters (not the peaks and settings).
    fn counters(&mut self) -> [&mut u64; 8] {
        [
            &mut self.evicted_written_bytes,
            &mut self.pinned_written_bytes,
            &mut self.host_written_bytes,
            &mut self.device_written_bytes,
            &mut self.refused_over_budget_bytes,
            &mut self.refused_no_space_bytes,
            &mut self.pinned_zones_reclaimed_early,
            &mut self.dropped_queue_full_bytes,
        ]
    }

    fn minus(&self, base: &FlashSample) -> FlashSample {
        let (mut out, mut base) = (*self, *base);
        for (o, b) in out.counters().into_iter().zip(base.counters()) {
            *o = o.saturating_sub(*b);
        }
        out.max_node_host_written_bytes = out.host_written_bytes;
        out
    }

    fn add(&mut self, other: &FlashSample) {
        let mut other = *other;
        for (o, b) in self.counters().into_iter().zip(other.counters()) {
            *o += *b;
        }
        self.max_node_host_written_bytes = self.max_node_host_written_bytes.max(other.max_node_host_written_bytes);
        self.max_open_zones = self.max_open_zones.max(other.max_open_zones);
        self.max_active_zones = self.max_active_zones.max(other.max_active_zones);
        self.write_budget_bytes_per_day = self.write_budget_bytes_per_day.max(other.write_budget_bytes_per_day);
    }
}

impl NodeSample {
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes_by_class.iter().sum()
    }

    pub fn maintenance_disk_bytes(&self) -> u64 {
        self.disk_bytes_by_class[1..].iter().sum()
    }

    /// Counts since `base`.
    pub fn minus(&self, base: &NodeSample) -> NodeSample {
        let mut out = NodeSample {
            kernel_read_bytes: self.kernel_read_bytes.saturating_sub(base.kernel_read_bytes),
            pinned_hits: self.pinned_hits.saturating_sub(base.pinned_hits),
            overflow_evictions: self.overflow_evictions.saturating_sub(base.overflow_evictions),
            pinned_reread_bytes: self.pinned_reread_bytes.saturating_sub(base.pinned_reread_bytes),
            flash_hits: self.flash_hits.saturating_sub(base.flash_hits),
            flash: self.flash.minus(&base.flash),
            ..NodeSample::default()
        };
        for (i, o) in out.disk_bytes_by_class.iter_mut().enumerate() {
            *o = self.disk_bytes_by_class[i].saturating_sub(base.disk_bytes_by_class[i]);
        }
        out
    }

    fn add(&mut self, other: &NodeSample) {
        for (i, o) in self.disk_bytes_by_class.iter_mut().enumerate() {
            *o += other.disk_bytes_by_class[i];
        }
        self.kernel_read_bytes += other.kernel_read_bytes;
        self.pinned_hits += other.pinned_hits;
        self.overflow_evictions += other.overflow_evictions;
        self.pinned_reread_bytes += other.pinned_reread_bytes;
        self.flash_hits += other.flash_hits;
        self.flash.add(&other.flash);
    }
}

/// `read_bytes` of `/proc/PID/io`: bytes this process caused to be fetched
/// from the storage layer.
pub fn kernel_read_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/io");
    let text = crate::io(|| format!("cannot read {path}"), std::fs::read_to_string(&path))?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| DemoError::Timeline(format!("no read_bytes in {path}")))
}

async fn sample_node(client: &Client, addr: &str, pid: u32) -> Result<NodeSample> {
    let stats =
        client.node_stats(addr).await.map_err(|source| DemoError::NodeStats { addr: addr.to_string(), source })?;
    let mut s = NodeSample { kernel_read_bytes: kernel_read_bytes(pid)?, ..NodeSample::default() };
    for d in &stats.disks {
        for c in &d.classes {
            let class = (0..IoTag::CLASSES).find(|&i| IoTag::class_name_of(i) == c.class_name);
            if let Some(i) = class {
                s.disk_bytes_by_class[i] += c.bytes;
            }
        }
    }
    let cache = stats.cache.unwrap_or_default();
    s.pinned_hits = cache.pinned_hits;
    s.overflow_evictions = cache.overflow_evictions;
    s.pinned_reread_bytes = cache.pinned_reread_bytes;
    s.flash_hits = cache.flash_hits;
    s.flash = stats.flash.as_ref().map(FlashSample::from_wire).unwrap_or_default();
    Ok(s)
}

/// Disk reads of the cluster since a baseline, kept across node deaths: a
/// node's last sample before it died still counts.
#[derive(Default)]
pub struct Meter {
    baseline: HashMap<String, NodeSample>,
    last: HashMap<String, NodeSample>,
}

impl Meter {
    /// Samples every running node; the first sample of a node present at
    /// the start is its baseline.
    pub async fn sample(&mut self, client: &Client, cluster: &LocalCluster, nodes: usize) -> Result<()> {
        for i in 0..nodes {
            let Some(pid) = cluster.node_pid(i) else { continue };
            let addr = cluster.node_addr(i).to_string();
            let s = sample_node(client, &addr, pid).await?;
            self.last.insert(addr, s);
        }
        Ok(())
    }

    /// Makes the current samples the zero point.
    pub fn reset_baseline(&mut self) {
        self.baseline = self.last.clone();
    }

    /// Sums over nodes since the baseline.
    pub fn totals(&self) -> NodeSample {
        let mut out = NodeSample::default();
        for (addr, s) in &self.last {
            out.add(&s.minus(self.baseline.get(addr).unwrap_or(&NodeSample::default())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_kernel_counters_are_readable() {
        // This test process exists, so its counters must parse.
        kernel_read_bytes(std::process::id()).unwrap();
    }

    #[test]
    fn totals_keep_dead_nodes_and_subtract_baselines() {
        let mut m = Meter::default();
        let s = |b: u64| NodeSample {
            disk_bytes_by_class: [b; IoTag::CLASSES],
            kernel_read_bytes: b,
            ..NodeSample::default()
        };
        m.last.insert("a".into(), s(10));
        m.reset_baseline();
        m.last.insert("a".into(), s(15));
        m.last.insert("new".into(), s(3));
        let t = m.totals();
        assert_eq!(t.kernel_read_bytes, 8);
        assert_eq!(t.disk_bytes(), 8 * IoTag::CLASSES as u64);
        assert_eq!(t.maintenance_disk_bytes(), 8 * (IoTag::CLASSES as u64 - 1));
    }

    #[test]
    fn flash_counters_subtract_and_sum_but_zone_peaks_take_the_largest() {
        let f = |bytes: u64, zones: u32| FlashSample {
            host_written_bytes: bytes,
            device_written_bytes: bytes,
            max_open_zones: zones,
            max_active_zones: 4,
            ..FlashSample::default()
        };
        let mut m = Meter::default();
        m.last.insert("a".into(), NodeSample { flash: f(100, 1), ..NodeSample::default() });
        m.last.insert("b".into(), NodeSample { flash: f(0, 0), ..NodeSample::default() });
        m.reset_baseline();
        m.last.insert("a".into(), NodeSample { flash: f(150, 3), pinned_reread_bytes: 7, ..NodeSample::default() });
        m.last.insert("b".into(), NodeSample { flash: f(20, 2), ..NodeSample::default() });
        let t = m.totals();
        assert_eq!((t.flash.host_written_bytes, t.flash.device_written_bytes), (70, 70));
        assert_eq!(t.flash.max_node_host_written_bytes, 50);
        assert_eq!((t.flash.max_open_zones, t.flash.max_active_zones, t.pinned_reread_bytes), (3, 4, 7));
    }
}
