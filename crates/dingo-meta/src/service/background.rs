//! The service's periodic work: lease recovery and dropping the open blocks
//! of expired writers, and marking silent nodes and disks DEAD.

use super::cluster::Device;
use super::{MetaService, blocking};
use crate::db;
use dingo_daemon::now_ms;
use dingo_types::{DiskId, NodeId};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

impl MetaService {
    /// Every `period`, recovers the files of writers whose lease expired
    /// ([`crate::db::MetaDb::recover_expired_leases`]: sealed at their committed
    /// length, or removed if empty) and drops any other open blocks of
    /// expired writers ([`crate::db::MetaDb::drop_expired_writes`]), so a writer that
    /// died leaves neither an open file nor chunks behind. Runs until aborted.
    pub async fn drop_expired_writes_every(self: Arc<Self>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let db = self.db.clone();
            match blocking(move || db.recover_expired_leases(now_ms())).await {
                Ok(done) => {
                    for (path, r) in &done {
                        tracing::info!(path, recovered = ?r, "lease expired: file recovered");
                    }
                    self.leases_recovered.fetch_add(done.len() as u64, Relaxed);
                }
                Err(e) => tracing::warn!("cannot recover expired leases: {}", e.message()),
            }
            let db = self.db.clone();
            match blocking(move || db.drop_expired_writes(now_ms())).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(blocks = n, "dropped the open blocks of writers whose lease expired");
                    self.expired_open_blocks.fetch_add(n, Relaxed);
                }
                Err(e) => tracing::warn!("cannot drop the open blocks of expired writers: {}", e.message()),
            }
        }
    }

    /// Nodes not marked DEAD that have been silent for `after` (counted
    /// from the service's start for a node not heard from since).
    fn silent_for(&self, after: Duration) -> Vec<u32> {
        let cluster = self.cluster();
        cluster
            .nodes
            .iter()
            .filter(|(id, s)| {
                !cluster.dead_nodes.contains(id) && s.last_seen.unwrap_or(self.started).elapsed() >= after
            })
            .map(|(&id, _)| id)
            .collect()
    }

    /// Disks not marked DEAD that the heartbeats of their node (itself
    /// still heard from) have left out for `after`: the node's health
    /// probe fails on them (unmounted, unreadable label, read-only).
    pub(super) fn silent_disks(&self, after: Duration) -> Vec<u32> {
        let cluster = self.cluster();
        let mut out = Vec::new();
        for (node, s) in &cluster.nodes {
            if cluster.dead_nodes.contains(node) || s.last_seen.is_none_or(|t| t.elapsed() >= after) {
                continue;
            }
            let silent = |d: &u32| s.disk_seen.get(d).copied().unwrap_or(self.started).elapsed() >= after;
            out.extend(s.usage.keys().filter(|d| !cluster.dead_disks.contains(d) && silent(d)));
        }
        out
    }

    /// Marks DEAD (durably, as `SetNodeState` and `SetDiskState` do) every
    /// node silent for `after`, and every disk its live node has left out
    /// of its heartbeats for as long, checking every `period`; their chunks
    /// become lost, which is what starts reconstruction. Runs until aborted.
    pub async fn mark_silent_nodes_dead_every(self: Arc<Self>, after: Duration, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for node in self.silent_for(after) {
                self.mark_dead(Device::Node(node), after).await;
            }
            for disk in self.silent_disks(after) {
                self.mark_dead(Device::Disk(disk), after).await;
            }
        }
    }

    /// Marks a silent device DEAD, unless it is decommissioned: a
    /// decommissioned device holds nothing, and stopping it is the point.
    async fn mark_dead(&self, device: Device, silent_for: Duration) {
        let db = self.db.clone();
        let mark = move || {
            let drains = db.drain_states()?;
            let state = match device {
                Device::Node(n) => drains.nodes.get(&NodeId(n)),
                Device::Disk(d) => drains.disks.get(&DiskId(d)),
            };
            if state == Some(&db::DeviceState::Decommissioned) {
                return Ok(false);
            }
            match device {
                Device::Node(n) => db.set_node_state(NodeId(n), db::DeviceState::Dead),
                Device::Disk(d) => db.set_disk_state(DiskId(d), db::DeviceState::Dead),
            }
            .map(|()| true)
        };
        match blocking(mark).await {
            Ok(false) => {}
            Ok(true) => {
                let mut cluster = self.cluster();
                match device {
                    Device::Node(n) => cluster.dead_nodes.insert(n),
                    Device::Disk(d) => cluster.dead_disks.insert(d),
                };
                self.auto_dead.fetch_add(1, Relaxed);
                tracing::warn!(?device, ?silent_for, "missed its heartbeats: marked DEAD");
            }
            Err(e) => tracing::warn!(?device, "cannot mark a silent device dead: {}", e.message()),
        }
    }
}
