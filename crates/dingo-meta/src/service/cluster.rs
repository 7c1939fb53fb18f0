//! The service's in-memory view of the cluster: node liveness and reported
//! usage (soft state, rebuilt from heartbeats) and mirrors of the durable
//! DEAD and drain marks.

use dingo_proto::v1::DiskUsage;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// What the service knows about a node without asking the database.
pub(super) struct Soft {
    pub(super) addr: String,
    /// Last registration or heartbeat; `None` since this process started.
    pub(super) last_seen: Option<Instant>,
    /// Latest reported usage per disk id.
    pub(super) usage: HashMap<u32, DiskUsage>,
    /// When each disk was last in a heartbeat: a node leaves out a disk
    /// that fails its health probe. Missing: not since this process started.
    pub(super) disk_seen: HashMap<u32, Instant>,
}

impl Soft {
    /// Takes over the disks of `previous` (the node's state before it
    /// registered again) that it no longer has, with their last usage and
    /// when they were last reported.
    pub(super) fn keep_absent(&mut self, previous: Soft) {
        let Soft { usage, mut disk_seen, .. } = previous;
        for (disk, u) in usage {
            if let std::collections::hash_map::Entry::Vacant(e) = self.usage.entry(disk) {
                e.insert(u);
                if let Some(seen) = disk_seen.remove(&disk) {
                    self.disk_seen.insert(disk, seen);
                }
            }
        }
    }

    /// Whether the node's last registration or heartbeat reported `disk`
    /// (a node leaves out a disk that fails its health probe, and a disk it
    /// no longer has).
    pub(super) fn reported(&self, disk: u32) -> bool {
        self.last_seen.is_some_and(|last| self.disk_seen.get(&disk).is_some_and(|&seen| seen >= last))
    }
}

/// A node or a disk, by id.
#[derive(Clone, Copy, Debug)]
pub(super) enum Device {
    Node(u32),
    Disk(u32),
}

/// The in-memory view of the cluster.
pub(super) struct Cluster {
    pub(super) nodes: HashMap<u32, Soft>,
    /// Mirrors of the durable `dead_disks` and `dead_nodes` tables.
    pub(super) dead_disks: HashSet<u32>,
    pub(super) dead_nodes: HashSet<u32>,
    /// Disks and nodes DRAINING or DECOMMISSIONED (durable in `drain_*`):
    /// both take no new chunks, so placement needs no finer view.
    pub(super) drained_disks: HashSet<u32>,
    pub(super) drained_nodes: HashSet<u32>,
}

impl Cluster {
    /// Disks whose chunks are lost: dead disks and every disk of a dead node.
    pub(super) fn lost_disks(&self) -> HashSet<u32> {
        let of_dead_nodes = self.dead_nodes.iter().filter_map(|n| self.nodes.get(n)).flat_map(|s| s.usage.keys());
        self.dead_disks.iter().chain(of_dead_nodes).copied().collect()
    }

    /// The node a disk is registered on.
    pub(super) fn owner(&self, disk: u32) -> Option<u32> {
        self.nodes.iter().find(|(_, s)| s.usage.contains_key(&disk)).map(|(&n, _)| n)
    }

    /// Whether new chunks may go to `disk` of `node` as far as the
    /// administrative states go (not DEAD, DRAINING or DECOMMISSIONED).
    pub(super) fn takes_chunks(&self, node: u32, disk: u32) -> bool {
        !self.dead_nodes.contains(&node)
            && !self.drained_nodes.contains(&node)
            && !self.dead_disks.contains(&disk)
            && !self.drained_disks.contains(&disk)
    }
}
