//! The metadata service's Prometheus page.

use super::MetaService;
use dingo_daemon::metrics::MetricsText;
use dingo_proto::v1::DiskUsage;
use std::sync::atomic::Ordering::Relaxed;

impl MetaService {
    /// Prometheus page of the metadata service.
    pub fn render_metrics(&self) -> String {
        let mut m = MetricsText::new();
        let cluster = self.cluster();
        let soft = &cluster.nodes;
        let alive = soft.values().filter(|s| self.alive(s)).count();
        m.family("dingo_meta_nodes", "gauge", "Registered nodes by liveness.");
        m.sample("dingo_meta_nodes", &[("state", "alive")], alive);
        m.sample("dingo_meta_nodes", &[("state", "dead")], soft.len() - alive);
        m.family("dingo_meta_marked_dead", "gauge", "Disks and nodes marked DEAD.");
        m.sample("dingo_meta_marked_dead", &[("kind", "disk")], cluster.dead_disks.len());
        m.sample("dingo_meta_marked_dead", &[("kind", "node")], cluster.dead_nodes.len());
        m.family("dingo_meta_drained", "gauge", "Disks and nodes DRAINING or DECOMMISSIONED (taking no new chunks).");
        m.sample("dingo_meta_drained", &[("kind", "disk")], cluster.drained_disks.len());
        m.sample("dingo_meta_drained", &[("kind", "node")], cluster.drained_nodes.len());
        m.family("dingo_meta_corrupt_chunk_reports_total", "counter", "Corrupt chunks reported by nodes.");
        m.sample("dingo_meta_corrupt_chunk_reports_total", &[], self.corrupt_reports.load(Relaxed));
        m.family(
            "dingo_meta_expired_open_blocks_dropped_total",
            "counter",
            "Blocks allocated to writers whose lease expired before they committed them.",
        );
        m.sample("dingo_meta_expired_open_blocks_dropped_total", &[], self.expired_open_blocks.load(Relaxed));
        m.family("dingo_meta_nodes_marked_dead_total", "counter", "Nodes marked DEAD for missing heartbeats.");
        m.sample("dingo_meta_nodes_marked_dead_total", &[], self.auto_dead.load(Relaxed));
        m.family("dingo_meta_leases_recovered_total", "counter", "Open files closed by lease recovery.");
        m.sample("dingo_meta_leases_recovered_total", &[], self.leases_recovered.load(Relaxed));
        for (name, help, get) in [
            (
                "dingo_meta_disk_capacity_bytes",
                "Disk capacity as last reported.",
                (|u: &DiskUsage| u.capacity) as fn(&DiskUsage) -> u64,
            ),
            ("dingo_meta_disk_used_bytes", "Disk bytes used as last reported.", |u| u.used),
            ("dingo_meta_disk_chunks", "Chunks on the disk as last reported.", |u| u.chunks),
        ] {
            m.family(name, "gauge", help);
            for (node, s) in soft.iter() {
                for u in s.usage.values() {
                    m.sample(name, &[("node", &node.to_string()), ("disk", &u.disk.to_string())], get(u));
                }
            }
        }
        drop(cluster);
        if let Ok((files, blocks)) = self.db.counts() {
            m.family("dingo_meta_files", "gauge", "Files in the namespace.").sample("dingo_meta_files", &[], files);
            m.family("dingo_meta_blocks", "gauge", "Block records (including deleted).").sample(
                "dingo_meta_blocks",
                &[],
                blocks,
            );
        }
        m.finish()
    }
}
