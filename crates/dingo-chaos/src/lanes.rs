//! The fault lanes: three threads that inject seeded random faults while
//! the workload runs, each keeping its faults within what the redundancy
//! survives.
//!
//! - the **node lane** impairs one storage node at a time (SIGKILL and
//!   restart, SIGSTOP/SIGCONT, one of its disks made unwritable) and waits
//!   until it serves again before the next;
//! - the **control lane** kills and restarts, or stops and continues, the
//!   metadata service or the planner, one at a time (they hold no chunks);
//! - the **damage lane** flips, truncates or deletes chunk files of
//!   acknowledged files, at most one chunk per redundancy group over the
//!   whole campaign (both `replicated:3` and `ec:2+2` survive two lost
//!   chunks: one damaged, one on the impaired node).

use crate::damage::{self, Damage, Unwritable};
use crate::fault::{FaultCounts, FaultKind};
use crate::workload::Oracle;
use dingo_client::Client;
use dingo_cluster::{LocalCluster, PlannerProcess};
use dingo_types::ChunkRef;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// How long a restarted or continued node may take to serve again.
const NODE_BACK_TIMEOUT: Duration = Duration::from_secs(60);
/// A lane never gets more than this many faults ahead of the slowest kind,
/// so every kind ends up with about as many faults as the others.
const LEAD: u64 = 5;

/// A corruption planted in a chunk file.
#[derive(Clone, Debug, Serialize)]
pub struct Planted {
    pub kind: FaultKind,
    pub chunk: ChunkRef,
    pub disk: u32,
    pub path: PathBuf,
}

/// What the lanes share.
pub struct Lanes {
    pub cluster: Mutex<LocalCluster>,
    pub planner: Mutex<PlannerProcess>,
    pub client: Client,
    pub oracle: Oracle,
    pub rt: tokio::runtime::Handle,
    pub counts: Mutex<FaultCounts>,
    pub planted: Mutex<Vec<Planted>>,
    /// Daemons that exited on their own, restarts that failed.
    pub incidents: Mutex<Vec<String>>,
    /// Disk id → (its directory, the node's index in the cluster).
    pub disks: HashMap<u32, (PathBuf, usize)>,
    pub stop: AtomicBool,
    /// The lanes wait for each other before their threads end: a daemon
    /// dies with the thread that started it (`PR_SET_PDEATHSIG`), and one
    /// lane's daemons must not die while another lane still injects.
    pub done: Barrier,
}

impl Lanes {
    fn incident(&self, what: String) {
        tracing::error!("{what}");
        self.incidents.lock().expect("incidents lock").push(what);
    }

    fn count(&self, kind: FaultKind) {
        tracing::info!(fault = kind.name(), "injected");
        self.counts.lock().expect("counts lock").add(kind);
    }

    fn pick(&self, kinds: &[FaultKind], rng: &mut fastrand::Rng) -> FaultKind {
        self.counts.lock().expect("counts lock").least_of(kinds, rng)
    }

    /// Waits while this lane's kinds are ahead of the slowest kind.
    fn pace(&self, kinds: &[FaultKind]) {
        while !self.stopping() {
            let c = self.counts.lock().expect("counts lock").clone();
            let mine = kinds.iter().map(|&k| c.get(k)).min().unwrap_or(0);
            if mine <= c.min() + LEAD {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Reports daemons that exited on their own, as incidents, and restarts
    /// the planner and, with `restart_nodes` (only the node lane, which
    /// alone kills nodes), nodes that are not running.
    fn check_daemons(&self, restart_nodes: bool) {
        let mut cluster = self.cluster.lock().expect("cluster lock");
        let died = cluster.check_running();
        for e in died {
            self.incident(format!("a daemon exited on its own: {e}"));
        }
        let stopped: Vec<usize> =
            (0..cluster.node_count()).filter(|&i| restart_nodes && !cluster.node_started(i)).collect();
        for i in stopped {
            if let Err(e) = cluster.start_node(i) {
                self.incident(format!("node {i} did not restart: {e}"));
            }
        }
        drop(cluster);
        let mut planner = self.planner.lock().expect("planner lock");
        if let Err(e) = planner.check_running() {
            self.incident(format!("the planner exited on its own: {e}"));
            if let Err(e) = planner.restart() {
                self.incident(format!("the planner did not restart: {e}"));
            }
        }
    }

    /// Waits until node `i` answers RPCs again.
    fn wait_node_back(&self, i: usize) {
        let addr = self.cluster.lock().expect("cluster lock").node_addr(i).to_string();
        let deadline = Instant::now() + NODE_BACK_TIMEOUT;
        loop {
            let ok = self.rt.block_on(async {
                matches!(tokio::time::timeout(Duration::from_secs(2), self.client.node_stats(&addr)).await, Ok(Ok(_)))
            });
            if ok {
                return;
            }
            if Instant::now() > deadline {
                self.incident(format!("node {i} ({addr}) did not serve again within {NODE_BACK_TIMEOUT:?}"));
                return;
            }
            // A node that exited on its own is restarted (an incident).
            self.check_daemons(true);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn outage(rng: &mut fastrand::Rng) -> Duration {
    Duration::from_millis(rng.u64(100..800))
}

fn gap(rng: &mut fastrand::Rng) -> Duration {
    Duration::from_millis(rng.u64(20..200))
}

const NODE_KINDS: [FaultKind; 3] = [FaultKind::KillNode, FaultKind::StopCont, FaultKind::UnwritableDisk];
const CONTROL_KINDS: [FaultKind; 3] = [FaultKind::KillMeta, FaultKind::KillPlanner, FaultKind::StopCont];
const DAMAGE_KINDS: [FaultKind; 3] = [FaultKind::ByteFlip, FaultKind::Truncate, FaultKind::DeleteChunk];

/// One storage node impaired at a time.
pub fn node_lane(lanes: &Lanes, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4e4f_4445);
    let nodes = lanes.cluster.lock().expect("cluster lock").node_count();
    while !lanes.stopping() {
        lanes.pace(&NODE_KINDS);
        if lanes.stopping() {
            break;
        }
        let kind = lanes.pick(&NODE_KINDS, &mut rng);
        let i = rng.usize(..nodes);
        let down = outage(&mut rng);
        match kind {
            FaultKind::KillNode => {
                lanes.cluster.lock().expect("cluster lock").kill_node(i);
                std::thread::sleep(down);
                if let Err(e) = lanes.cluster.lock().expect("cluster lock").start_node(i) {
                    lanes.incident(format!("node {i} did not restart: {e}"));
                }
            }
            FaultKind::StopCont => {
                lanes.cluster.lock().expect("cluster lock").signal_node(i, libc::SIGSTOP);
                std::thread::sleep(down);
                lanes.cluster.lock().expect("cluster lock").signal_node(i, libc::SIGCONT);
            }
            _ => {
                let disks: Vec<PathBuf> =
                    lanes.disks.values().filter(|(_, n)| *n == i).map(|(p, _)| p.clone()).collect();
                let disk = &disks[rng.usize(..disks.len())];
                match Unwritable::make(disk) {
                    Ok(guard) => {
                        std::thread::sleep(down * 2);
                        if let Err(e) = guard.restore() {
                            lanes.incident(format!("{} stayed unwritable: {e}", disk.display()));
                        }
                    }
                    Err(e) => {
                        lanes.incident(format!("cannot make {} unwritable: {e}", disk.display()));
                        continue;
                    }
                }
            }
        }
        lanes.count(kind);
        lanes.wait_node_back(i);
        lanes.check_daemons(true);
        std::thread::sleep(gap(&mut rng));
    }
    lanes.done.wait();
}

/// The metadata service or the planner, one at a time.
pub fn control_lane(lanes: &Lanes, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4354_524c);
    while !lanes.stopping() {
        lanes.pace(&CONTROL_KINDS);
        if lanes.stopping() {
            break;
        }
        let kind = lanes.pick(&CONTROL_KINDS, &mut rng);
        let down = outage(&mut rng);
        match kind {
            FaultKind::KillMeta => {
                lanes.cluster.lock().expect("cluster lock").kill_meta();
                std::thread::sleep(down);
                if let Err(e) = lanes.cluster.lock().expect("cluster lock").start_meta() {
                    lanes.incident(format!("the metadata service did not restart: {e}"));
                }
            }
            FaultKind::KillPlanner => {
                lanes.planner.lock().expect("planner lock").kill();
                std::thread::sleep(down);
                if let Err(e) = lanes.planner.lock().expect("planner lock").restart() {
                    lanes.incident(format!("the planner did not restart: {e}"));
                }
            }
            _ if rng.bool() => {
                lanes.cluster.lock().expect("cluster lock").signal_meta(libc::SIGSTOP);
                std::thread::sleep(down);
                lanes.cluster.lock().expect("cluster lock").signal_meta(libc::SIGCONT);
            }
            _ => {
                lanes.planner.lock().expect("planner lock").signal(libc::SIGSTOP);
                std::thread::sleep(down);
                lanes.planner.lock().expect("planner lock").signal(libc::SIGCONT);
            }
        }
        lanes.count(kind);
        lanes.check_daemons(false);
        std::thread::sleep(gap(&mut rng));
    }
    lanes.done.wait();
}

/// Damage to chunk files of acknowledged files, one chunk per redundancy
/// group.
pub fn damage_lane(lanes: &Lanes, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4441_4d47);
    let mut damaged_groups: HashSet<u64> = HashSet::new();
    while !lanes.stopping() {
        lanes.pace(&DAMAGE_KINDS);
        std::thread::sleep(gap(&mut rng));
        if lanes.stopping() {
            break;
        }
        let Some(w) = lanes.oracle.pick(&mut rng) else { continue };
        let info = lanes.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), lanes.client.stat(&w.path)).await.ok().and_then(Result::ok)
        });
        let Some(info) = info else { continue };
        let fresh: Vec<_> = info.blocks.iter().filter(|b| !damaged_groups.contains(&b.group)).collect();
        if fresh.is_empty() {
            continue;
        }
        let block = fresh[rng.usize(..fresh.len())];
        let live: Vec<_> = block.chunks.iter().filter(|c| !c.lost).collect();
        if live.is_empty() {
            continue;
        }
        let loc = live[rng.usize(..live.len())];
        let Some((disk_dir, _)) = lanes.disks.get(&loc.disk) else { continue };
        let Ok(chunk) = dingo_client::copy_of(block, loc.copy) else { continue };
        let path = damage::chunk_path(disk_dir, block.id, loc.copy);
        let kind = lanes.pick(&DAMAGE_KINDS, &mut rng);
        let damage = match kind {
            FaultKind::ByteFlip => {
                Damage::Flip { offset: damage::checked_offset(block.size, &mut rng), mask: rng.u8(1..=255) }
            }
            FaultKind::Truncate => Damage::Truncate { len: damage::truncated_len(block.size, &mut rng) },
            _ => Damage::Delete,
        };
        // A chunk moved or rebuilt since the stat is not there: try another.
        if let Err(e) = damage::apply(&path, damage) {
            tracing::debug!("cannot damage {}: {e}", path.display());
            continue;
        }
        damaged_groups.insert(block.group);
        lanes.planted.lock().expect("planted lock").push(Planted { kind, chunk, disk: loc.disk, path });
        lanes.count(kind);
    }
    lanes.done.wait();
}
