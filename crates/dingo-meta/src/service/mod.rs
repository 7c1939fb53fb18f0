//! The `Meta` gRPC service: durable operations go to [`MetaDb`]; node
//! liveness and reported disk usage are soft state rebuilt from heartbeats.
//! Disks and nodes marked DEAD are durable (in redb) and mirrored here: a
//! chunk on a dead disk, or on any disk of a dead node, is *lost* — never
//! read, never placed on. Draining and decommissioned disks and nodes are
//! mirrored too: nothing new is placed on them, their chunks stay readable.

mod background;
mod cluster;
mod metrics;
mod pending;
mod rpc;
mod wire;

use crate::db::{self, ChunkKey, Lease, MetaDb};
use crate::error::MetaError;
use crate::placement::{Candidate, check_drain};
use cluster::{Cluster, Soft};
use dingo_daemon::now_ms;
use dingo_proto::v1::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Status;

pub struct MetaService {
    db: Arc<MetaDb>,
    cluster: Mutex<Cluster>,
    /// Corrupt chunks reported by nodes' heartbeats since start.
    corrupt_reports: AtomicU64,
    /// Open blocks of writers whose lease expired, dropped since start.
    expired_open_blocks: AtomicU64,
    /// Files whose lease was recovered (sealed or removed), since start.
    leases_recovered: AtomicU64,
    /// Nodes marked DEAD for missing heartbeats, since start.
    auto_dead: AtomicU64,
    /// Chunks nodes reported corrupt or missing, until they are found
    /// elsewhere.
    corrupt: Mutex<HashSet<ChunkKey>>,
    /// Copies placed for moves and rebuilds, not committed yet.
    pending: Mutex<pending::Pending>,
    /// A node is dead after this long without a heartbeat.
    dead_after: Duration,
    lease_ttl: Duration,
    /// When the service started: the silence of a node not heard from
    /// since counts from here.
    started: Instant,
}

/// Runs a database operation off the async workers (redb commits fsync).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, MetaError> + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Status::internal(e.to_string()))?.map_err(Status::from)
}

/// The state a request sets: UNSPECIFIED (a field left unset) and
/// unknown numbers are refused rather than guessed.
fn wire_state(what: &str, id: u32, state: i32) -> Result<db::DeviceState, Status> {
    wire::device_state_from_wire(state).ok_or_else(|| {
        let why =
            if state == 0 { "the state is DEVICE_STATE_UNSPECIFIED (0): set one" } else { "unknown device state" };
        Status::invalid_argument(format!("{what} {id}: {why} {state}"))
    })
}

/// Mirrors a state the database accepted for one disk or node.
fn apply_state(state: db::DeviceState, id: u32, dead: &mut HashSet<u32>, drained: &mut HashSet<u32>) {
    match state {
        db::DeviceState::Live => {
            dead.remove(&id);
            drained.remove(&id);
        }
        db::DeviceState::Dead => {
            dead.insert(id);
            drained.remove(&id);
        }
        db::DeviceState::Draining | db::DeviceState::Decommissioned => {
            drained.insert(id);
        }
    }
}

fn new_lease(ttl: Duration) -> Lease {
    Lease { id: fastrand::u64(1..), expiry_ms: now_ms() + ttl.as_millis() as u64 }
}

impl MetaService {
    pub fn new(db: MetaDb, dead_after: Duration, lease_ttl: Duration) -> Result<Self, MetaError> {
        let nodes = db
            .nodes()?
            .into_iter()
            .map(|n| {
                let usage = n
                    .disks
                    .iter()
                    .map(|d| {
                        (d.id, DiskUsage { disk: d.id, capacity: d.capacity_bytes, used: d.used_bytes, chunks: 0 })
                    })
                    .collect();
                (n.id, Soft { addr: n.addr, last_seen: None, usage, disk_seen: HashMap::new() })
            })
            .collect();
        let (dead_disks, dead_nodes) = db.dead()?;
        let drains = db.drain_states()?;
        let cluster = Cluster {
            nodes,
            dead_disks: dead_disks.into_iter().map(|d| d.0).collect(),
            dead_nodes: dead_nodes.into_iter().map(|n| n.0).collect(),
            drained_disks: drains.disks.into_keys().map(|d| d.0).collect(),
            drained_nodes: drains.nodes.into_keys().map(|n| n.0).collect(),
        };
        Ok(MetaService {
            db: Arc::new(db),
            cluster: Mutex::new(cluster),
            corrupt_reports: AtomicU64::new(0),
            expired_open_blocks: AtomicU64::new(0),
            leases_recovered: AtomicU64::new(0),
            auto_dead: AtomicU64::new(0),
            corrupt: Mutex::new(HashSet::new()),
            pending: Mutex::new(pending::Pending::default()),
            dead_after,
            lease_ttl,
            started: Instant::now(),
        })
    }

    fn cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locked after [`MetaService::cluster`] when both are needed.
    fn pending(&self) -> std::sync::MutexGuard<'_, pending::Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The copies nodes reported corrupt or missing, sorted, less `gone`:
    /// those no block record places any more (rebuilt elsewhere, or
    /// deleted), which are forgotten.
    fn corrupt_still_placed(&self, gone: &[ChunkKey]) -> Vec<ChunkKey> {
        let mut set = self.corrupt.lock().unwrap_or_else(|p| p.into_inner());
        for g in gone {
            set.remove(g);
        }
        let mut v: Vec<ChunkKey> = set.iter().copied().collect();
        v.sort_unstable();
        v
    }

    fn alive(&self, s: &Soft) -> bool {
        s.last_seen.is_some_and(|t| t.elapsed() < self.dead_after)
    }

    /// Fills in node addresses and the `lost` flag of chunk locations.
    fn with_addrs(&self, blocks: &mut [BlockRecord]) {
        let cluster = self.cluster();
        let lost = cluster.lost_disks();
        for c in blocks.iter_mut().flat_map(|b| b.chunks.iter_mut()) {
            c.addr = cluster.nodes.get(&c.node).map(|s| s.addr.clone()).unwrap_or_default();
            c.lost = lost.contains(&c.disk);
        }
    }

    /// Nodes that may receive chunks — heartbeating, not marked dead,
    /// draining or decommissioned, not in `exclude` — with the free bytes of
    /// their disks that take chunks and were in the node's last report (less
    /// what placed, uncommitted copies will take).
    fn candidates(&self, exclude: &[u32]) -> Vec<Candidate> {
        let cluster = self.cluster();
        let pending = self.pending();
        cluster
            .nodes
            .iter()
            .filter(|(id, s)| self.alive(s) && !exclude.contains(id))
            .map(|(&node, s)| Candidate {
                node,
                disks: s
                    .usage
                    .values()
                    .filter(|u| cluster.takes_chunks(node, u.disk) && s.reported(u.disk))
                    .map(|u| (u.disk, u.capacity.saturating_sub(u.used).saturating_sub(pending.bytes_on(u.disk))))
                    .collect(),
            })
            .collect()
    }

    /// Refuses to drain `what` (`drained(node, disk)`: whether the drain
    /// covers that disk) if too few live nodes with a disk taking chunks
    /// would remain for some file's redundancy.
    async fn check_drain(&self, what: String, drained: impl Fn(u32, u32) -> bool) -> Result<(), Status> {
        let db = self.db.clone();
        let files = blocking(move || db.redundancies()).await?;
        let eligible = {
            let cluster = self.cluster();
            cluster
                .nodes
                .iter()
                .filter(|&(&node, s)| {
                    self.alive(s)
                        && s.usage.keys().any(|&d| cluster.takes_chunks(node, d) && s.reported(d) && !drained(node, d))
                })
                .count()
        };
        check_drain(&what, eligible, &files)?;
        Ok(())
    }

    /// Checks that `disk` may receive a copy of a chunk of `bytes` now held
    /// on node `holder`; returns its node.
    fn check_target(&self, disk: u32, holder: u32, bytes: u64) -> Result<u32, Status> {
        let node =
            self.cluster().owner(disk).ok_or_else(|| Status::invalid_argument(format!("disk {disk} is unknown")))?;
        if node == holder {
            return Err(Status::invalid_argument(format!(
                "disk {disk} is on node {node}, which already holds this chunk; copies go to other nodes"
            )));
        }
        let candidates = self.candidates(&[]);
        let Some(free) = candidates.iter().flat_map(|c| &c.disks).find(|d| d.0 == disk).map(|d| d.1) else {
            return Err(Status::failed_precondition(format!(
                "disk {disk} or its node {node} is dead, draining or decommissioned"
            )));
        };
        if free < bytes {
            return Err(Status::resource_exhausted(format!("disk {disk} has {free} bytes free, {bytes} needed")));
        }
        Ok(node)
    }

    fn ttl_ms(&self) -> u64 {
        self.lease_ttl.as_millis() as u64
    }
}
