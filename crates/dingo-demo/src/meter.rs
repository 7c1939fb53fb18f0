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
    s.pinned_hits = stats.cache.map_or(0, |c| c.pinned_hits);
    s.overflow_evictions = stats.cache.map_or(0, |c| c.overflow_evictions);
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
}
