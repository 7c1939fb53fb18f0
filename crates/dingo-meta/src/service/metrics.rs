//! The metadata service's `/metrics` page, read from its state at scrape
//! time.

use super::MetaService;
use dingo_daemon::metrics::Page;
use dingo_daemon::metrics::Registry;
use dingo_proto::v1::DiskUsage;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

impl MetaService {
    /// The registry `GET /metrics` encodes: the service's families, read on
    /// each scrape.
    pub fn metrics_registry(self: Arc<Self>) -> Registry {
        dingo_daemon::metrics::registry(move |m| self.write_metrics(m))
    }

    /// Writes the metadata service's metric families.
    pub fn write_metrics(&self, m: &mut Page<'_>) -> fmt::Result {
        let cluster = self.cluster();
        let soft = &cluster.nodes;
        let alive = soft.values().filter(|s| self.alive(s)).count();
        m.gauges(
            "dingo_meta_nodes",
            "Registered nodes by liveness.",
            [([("state", "alive")], alive), ([("state", "dead")], soft.len() - alive)],
        )?;
        m.gauges(
            "dingo_meta_marked_dead",
            "Disks and nodes marked DEAD.",
            [([("kind", "disk")], cluster.dead_disks.len()), ([("kind", "node")], cluster.dead_nodes.len())],
        )?;
        m.gauges(
            "dingo_meta_drained",
            "Disks and nodes DRAINING or DECOMMISSIONED (taking no new chunks).",
            [([("kind", "disk")], cluster.drained_disks.len()), ([("kind", "node")], cluster.drained_nodes.len())],
        )?;
        for (name, help, value) in [
            ("dingo_meta_corrupt_chunk_reports_total", "Corrupt chunks reported by nodes.", &self.corrupt_reports),
            (
                "dingo_meta_expired_open_blocks_dropped_total",
                "Blocks allocated to writers whose lease expired before they committed them.",
                &self.expired_open_blocks,
            ),
            ("dingo_meta_nodes_marked_dead_total", "Nodes marked DEAD for missing heartbeats.", &self.auto_dead),
            ("dingo_meta_leases_recovered_total", "Open files closed by lease recovery.", &self.leases_recovered),
        ] {
            m.counter(name, help, value.load(Relaxed))?;
        }
        for (name, help, get) in [
            (
                "dingo_meta_disk_capacity_bytes",
                "Disk capacity as last reported.",
                (|u: &DiskUsage| u.capacity) as fn(&DiskUsage) -> u64,
            ),
            ("dingo_meta_disk_used_bytes", "Disk bytes used as last reported.", |u| u.used),
            ("dingo_meta_disk_chunks", "Chunks on the disk as last reported.", |u| u.chunks),
        ] {
            let samples = soft.iter().flat_map(|(node, s)| {
                s.usage.values().map(move |u| ([("node", node.to_string()), ("disk", u.disk.to_string())], get(u)))
            });
            m.gauges(name, help, samples)?;
        }
        drop(cluster);
        if let Ok((files, blocks)) = self.db.counts() {
            m.gauge("dingo_meta_files", "Files in the namespace.", files)?;
            m.gauge("dingo_meta_blocks", "Block records (including deleted).", blocks)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::db::MetaDb;
    use crate::service::MetaService;
    use std::sync::Arc;
    use std::time::Duration;

    /// The families on the page, in order, with their types: what the
    /// hand-written encoder this replaced served (scrapers, dashboards and
    /// the process tests depend on the names).
    #[test]
    fn the_page_keeps_its_families_names_and_types() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        let svc = Arc::new(MetaService::new(db, Duration::from_secs(60), Duration::from_secs(60)).unwrap());
        let page = dingo_daemon::metrics::encode(&svc.metrics_registry()).expect("the page encodes");
        let families: Vec<&str> = page.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        let expected = [
            "dingo_meta_nodes gauge",
            "dingo_meta_marked_dead gauge",
            "dingo_meta_drained gauge",
            "dingo_meta_corrupt_chunk_reports_total counter",
            "dingo_meta_expired_open_blocks_dropped_total counter",
            "dingo_meta_nodes_marked_dead_total counter",
            "dingo_meta_leases_recovered_total counter",
            "dingo_meta_disk_capacity_bytes gauge",
            "dingo_meta_disk_used_bytes gauge",
            "dingo_meta_disk_chunks gauge",
            "dingo_meta_files gauge",
            "dingo_meta_blocks gauge",
        ];
        assert_eq!(families, expected, "{page}");
        assert!(page.contains("\ndingo_meta_nodes{state=\"alive\"} 0\n"), "{page}");
        assert!(page.contains("\ndingo_meta_files 0\n"), "{page}");
    }
}
