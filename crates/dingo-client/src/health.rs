//! The cluster's health at a glance, like `ceph -s` or `hdfs fsck /`:
//! nodes and disks by state, blocks whose redundancy is reduced or gone,
//! chunks reported corrupt, open files and expired leases, drains in
//! progress, and the repair and move work outstanding. Computed from the metadata service's cluster status
//! and block table (one pass, paged), plus the records of damaged blocks.
//! Also the progress of one device's drain, and waiting for its end.

use crate::{Client, ClientError, DeviceState, Redundancy, Result};
use dingo_proto::v1::BlockState;
use dingo_types::{BlockId, DiskId, NodeId};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Block-table rows fetched per request.
const PAGE: u32 = 65_536;

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Health {
    /// `HEALTH_OK`, `HEALTH_WARN` (reduced redundancy, silent or dead
    /// nodes, silent disks, corrupt chunks, expired leases, chunks still to move off
    /// draining devices) or `HEALTH_ERR` (data lost).
    pub status: String,
    /// Heartbeating and LIVE.
    pub nodes_live: Vec<NodeId>,
    /// Not heartbeating, LIVE or DRAINING.
    pub nodes_silent: Vec<NodeId>,
    pub nodes_dead: Vec<NodeId>,
    /// Marked DRAINING: chunks are moving off them (see `disks_draining`).
    pub nodes_draining: Vec<NodeId>,
    /// Drained: they hold no chunk and may be stopped (silent or not).
    pub nodes_decommissioned: Vec<NodeId>,
    /// LIVE disks on LIVE nodes.
    pub disks_live: u64,
    /// LIVE disks their heartbeating node left out of its last report
    /// (failing its health probe, or no longer on the node): marked DEAD
    /// after `mark_dead_after_ms` unless reported again.
    pub disks_silent: Vec<DiskId>,
    /// Disks marked DEAD, or on a node marked DEAD.
    pub disks_dead: Vec<DiskId>,
    /// Disks DRAINING themselves or on a draining node, with what is left.
    pub disks_draining: Vec<DrainProgress>,
    /// Disks DECOMMISSIONED themselves or on a decommissioned node.
    pub disks_decommissioned: Vec<DiskId>,
    pub files: u64,
    /// Sealed blocks (EC members count one each).
    pub blocks: u64,
    /// Blocks (or EC stripes' members) with a lost copy that are still
    /// readable: reconstruction will restore them.
    pub under_replicated: u64,
    /// Blocks with no readable copy left (replicated: every copy lost; EC:
    /// more members of the stripe lost than it has parity).
    pub lost_blocks: u64,
    /// Chunks on dead disks or nodes: what reconstruction must rebuild.
    pub lost_chunks: u64,
    /// Chunks reported corrupt or missing by their nodes, not rebuilt yet.
    pub corrupt_chunks: u64,
    pub open_files: u64,
    /// Open files whose writer's lease expired (recovered shortly).
    pub expired_leases: u64,
    /// Chunks to rebuild: lost plus corrupt.
    pub repair_outstanding: u64,
    /// Chunks still to move off draining disks, and their bytes.
    pub moves_outstanding: u64,
    pub move_bytes_outstanding: u64,
}

/// A draining disk and what block records still place on it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DrainProgress {
    pub disk: DiskId,
    pub node: NodeId,
    pub chunks_left: u64,
    pub bytes_left: u64,
}

impl Health {
    fn classify(&mut self) {
        self.repair_outstanding = self.lost_chunks + self.corrupt_chunks;
        self.moves_outstanding = self.disks_draining.iter().map(|d| d.chunks_left).sum();
        self.move_bytes_outstanding = self.disks_draining.iter().map(|d| d.bytes_left).sum();
        // Like Ceph's misplaced objects: not healthy-idle while chunks must
        // still move, though no redundancy is reduced.
        let warn = self.moves_outstanding > 0
            || !self.nodes_silent.is_empty()
            || !self.disks_silent.is_empty()
            || !self.nodes_dead.is_empty()
            || self.under_replicated > 0
            || self.corrupt_chunks > 0
            || self.expired_leases > 0;
        self.status = if self.lost_blocks > 0 {
            "HEALTH_ERR"
        } else if warn {
            "HEALTH_WARN"
        } else {
            "HEALTH_OK"
        }
        .into();
    }
}

impl Client {
    /// The cluster's health (see [`Health`]).
    pub async fn health(&self) -> Result<Health> {
        let status = self.cluster_status().await?;
        let mut h = Health {
            files: status.files,
            corrupt_chunks: status.corrupt.len() as u64,
            open_files: status.open_files,
            expired_leases: status.expired_leases,
            ..Health::default()
        };
        let mut dead_disks = HashSet::new();
        for n in &status.nodes {
            match (n.state(), n.alive) {
                (DeviceState::Dead, _) => h.nodes_dead.push(NodeId(n.id)),
                (DeviceState::Decommissioned, _) => h.nodes_decommissioned.push(NodeId(n.id)),
                // A state this client does not know (from a newer service)
                // is not taken for live.
                (DeviceState::Unspecified, _) | (_, false) => h.nodes_silent.push(NodeId(n.id)),
                (DeviceState::Draining, true) => h.nodes_draining.push(NodeId(n.id)),
                (DeviceState::Live, true) => h.nodes_live.push(NodeId(n.id)),
            }
            for d in &n.disks {
                match d.state() {
                    DeviceState::Dead => {
                        dead_disks.insert(d.id);
                    }
                    DeviceState::Decommissioned => h.disks_decommissioned.push(DiskId(d.id)),
                    DeviceState::Draining => h.disks_draining.push(DrainProgress {
                        disk: DiskId(d.id),
                        node: NodeId(n.id),
                        chunks_left: d.drain_chunks_left,
                        bytes_left: d.drain_bytes_left,
                    }),
                    DeviceState::Live if d.left_out => h.disks_silent.push(DiskId(d.id)),
                    DeviceState::Live => h.disks_live += 1,
                    DeviceState::Unspecified => {}
                }
            }
        }
        h.disks_dead = dead_disks.iter().copied().map(DiskId).collect();
        h.disks_dead.sort_unstable();
        // One pass over the block table: blocks with a copy on a dead disk.
        let mut damaged = Vec::new();
        let mut start = 0;
        loop {
            let page = self.block_table(BlockId(start), PAGE).await?;
            for row in &page.rows {
                if row.state() != BlockState::Sealed {
                    continue;
                }
                h.blocks += 1;
                let lost = row.disks.iter().filter(|d| dead_disks.contains(d)).count() as u64;
                if lost > 0 {
                    h.lost_chunks += lost;
                    damaged.push(BlockId(row.id));
                }
            }
            if page.rows.is_empty() || page.next >= page.end {
                break;
            }
            start = page.next;
        }
        // Replicated blocks are judged alone, EC stripes as a whole.
        let mut stripes: BTreeMap<u64, (u8, u64)> = BTreeMap::new();
        for batch in damaged.chunks(crate::GET_BLOCKS_MAX) {
            for b in self.blocks(batch).await? {
                let lost = b.chunks.iter().filter(|c| c.lost).count();
                match dingo_proto::redundancy(b.redundancy.as_ref()) {
                    Ok(Redundancy::Ec { parity, .. }) => {
                        let s = stripes.entry(b.group).or_insert((parity, 0));
                        s.1 += 1;
                    }
                    _ if lost >= b.chunks.len() => h.lost_blocks += 1,
                    _ => h.under_replicated += 1,
                }
            }
        }
        for (parity, lost_members) in stripes.into_values() {
            if lost_members > u64::from(parity) {
                h.lost_blocks += lost_members;
            } else {
                h.under_replicated += lost_members;
            }
        }
        h.classify();
        Ok(h)
    }
}

/// A node or a disk, by the metadata service's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Node(NodeId),
    Disk(DiskId),
}

/// A node or a disk as a command line names one (`--node N` or `--disk
/// D`, with the `clap` feature). Exactly one, checked by
/// [`DeviceFlags::device`]: as a clap group the pair could not also be
/// flattened into a larger set of flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DeviceFlags {
    /// Node id (as `cluster status` shows it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub node: Option<NodeId>,
    /// Disk id.
    #[cfg_attr(feature = "clap", arg(long))]
    pub disk: Option<DiskId>,
}

impl DeviceFlags {
    /// The device named, or an error unless exactly one was.
    pub fn device(&self) -> Result<Device> {
        match (self.node, self.disk) {
            (Some(n), None) => Ok(Device::Node(n)),
            (None, Some(d)) => Ok(Device::Disk(d)),
            _ => Err(ClientError::Invalid("give either --node N or --disk D".into())),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Node(n) => write!(f, "node {}", n.0),
            Device::Disk(d) => write!(f, "disk {}", d.0),
        }
    }
}

/// A device's state and what its drain has left to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainStatus {
    pub state: DeviceState,
    pub chunks_left: u64,
    pub bytes_left: u64,
}

/// What is left, as `3 chunk(s), 12.0 MB left`.
impl std::fmt::Display for DrainStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} chunk(s), {} left", self.chunks_left, dingo_types::format_bytes(self.bytes_left))
    }
}

/// What [`Client::wait_decommissioned`] reports while it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainEvent {
    /// The drain goes on with this much left.
    Draining(DrainStatus),
    /// No chunk has left the device for this long (said once per wait).
    Stalled(Duration),
}

#[derive(Debug, Error)]
pub enum DrainError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{0} is not registered")]
    NotRegistered(Device),
    #[error("the drain of {0} was cancelled: it is LIVE again")]
    Cancelled(Device),
    #[error("{0} was marked DEAD during its drain: its remaining chunks are lost and get rebuilt from redundancy")]
    Died(Device),
}

/// How long a drain may make no progress before the wait says so once.
pub const DRAIN_STALLED_AFTER: Duration = Duration::from_secs(60);

impl Client {
    /// Marks `device` (a node or a disk) `state`.
    pub async fn set_device_state(&self, device: Device, state: DeviceState) -> Result<()> {
        match device {
            Device::Node(n) => self.set_node_state(n, state).await,
            Device::Disk(d) => self.set_disk_state(d, state).await,
        }
    }

    /// `device`'s state and what its drain has left (nothing unless it is
    /// DRAINING).
    pub async fn drain_progress(&self, device: Device) -> Result<DrainStatus, DrainError> {
        let status = self.cluster_status().await?;
        let disks: Vec<_> = match device {
            Device::Node(id) => {
                let n = status.nodes.iter().find(|n| n.id == id.0).ok_or(DrainError::NotRegistered(device))?;
                if n.state() != DeviceState::Draining {
                    return Ok(DrainStatus { state: n.state(), chunks_left: 0, bytes_left: 0 });
                }
                n.disks.iter().collect()
            }
            Device::Disk(id) => status.nodes.iter().flat_map(|n| &n.disks).filter(|d| d.id == id.0).collect(),
        };
        let state = match device {
            Device::Node(_) => DeviceState::Draining,
            Device::Disk(_) => disks.first().ok_or(DrainError::NotRegistered(device))?.state(),
        };
        Ok(DrainStatus {
            state,
            chunks_left: disks.iter().map(|d| d.drain_chunks_left).sum(),
            bytes_left: disks.iter().map(|d| d.drain_bytes_left).sum(),
        })
    }

    /// Drains `device`: marks it DRAINING and reports what is left; then,
    /// given `wait`, polls every `wait` until it is DECOMMISSIONED (see
    /// [`Client::wait_decommissioned`]). Returns whether it is.
    pub async fn decommission(
        &self,
        device: Device,
        wait: Option<Duration>,
        mut report: impl FnMut(DrainEvent),
    ) -> Result<bool, DrainError> {
        if wait.is_some_and(|every| every.is_zero()) {
            return Err(ClientError::Invalid("the interval between progress reports must be positive".into()).into());
        }
        self.set_device_state(device, DeviceState::Draining).await?;
        let drain = self.drain_progress(device).await?;
        if drain.state == DeviceState::Decommissioned {
            return Ok(true);
        }
        report(DrainEvent::Draining(drain));
        let Some(every) = wait else { return Ok(false) };
        self.wait_decommissioned(device, every, report).await?;
        Ok(true)
    }

    /// Polls `device`'s drain every `every` (first after one interval) until it is DECOMMISSIONED,
    /// reporting each step to `report`; an error if the drain was
    /// cancelled or the device marked DEAD meanwhile.
    pub async fn wait_decommissioned(
        &self,
        device: Device,
        every: Duration,
        mut report: impl FnMut(DrainEvent),
    ) -> Result<(), DrainError> {
        let mut stall = StallWatch::new(Instant::now());
        loop {
            tokio::time::sleep(every).await;
            let status = self.drain_progress(device).await?;
            match status.state {
                DeviceState::Decommissioned => return Ok(()),
                DeviceState::Live => return Err(DrainError::Cancelled(device)),
                DeviceState::Dead => return Err(DrainError::Died(device)),
                DeviceState::Draining => report(DrainEvent::Draining(status)),
                DeviceState::Unspecified => {
                    let why = "the metadata service reported no device state".to_string();
                    return Err(DrainError::Client(ClientError::Invalid(why)));
                }
            }
            if stall.stalled(status.chunks_left, Instant::now()) {
                report(DrainEvent::Stalled(DRAIN_STALLED_AFTER));
            }
        }
    }
}

/// Notices, once, a drain whose chunk count stopped falling for
/// [`DRAIN_STALLED_AFTER`].
struct StallWatch {
    fewest_chunks: u64,
    since: Instant,
    warned: bool,
}

impl StallWatch {
    fn new(now: Instant) -> StallWatch {
        StallWatch { fewest_chunks: u64::MAX, since: now, warned: false }
    }

    fn stalled(&mut self, chunks_left: u64, now: Instant) -> bool {
        if chunks_left < self.fewest_chunks {
            (self.fewest_chunks, self.since) = (chunks_left, now);
            return false;
        }
        if self.warned || now.duration_since(self.since) < DRAIN_STALLED_AFTER {
            return false;
        }
        self.warned = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_status_says_what_is_left() {
        let d = DrainStatus { state: DeviceState::Draining, chunks_left: 3, bytes_left: 12_000_000 };
        assert_eq!(d.to_string(), format!("3 chunk(s), {} left", dingo_types::format_bytes(12_000_000)));
    }

    #[test]
    fn device_flags_name_exactly_one_device() {
        let node = DeviceFlags { node: Some(NodeId(2)), disk: None };
        assert_eq!(node.device().unwrap(), Device::Node(NodeId(2)));
        assert_eq!(DeviceFlags { node: None, disk: Some(DiskId(5)) }.device().unwrap(), Device::Disk(DiskId(5)));
        for bad in [DeviceFlags::default(), DeviceFlags { disk: Some(DiskId(5)), ..node }] {
            let err = bad.device().unwrap_err().to_string();
            assert!(err.contains("--node N or --disk D"), "{err}");
        }
    }

    #[test]
    fn a_stalled_drain_is_reported_once() {
        let t0 = Instant::now();
        let mut w = StallWatch::new(t0);
        assert!(!w.stalled(10, t0));
        assert!(!w.stalled(10, t0 + DRAIN_STALLED_AFTER / 2));
        assert!(!w.stalled(9, t0 + DRAIN_STALLED_AFTER), "progress restarts the clock");
        assert!(w.stalled(9, t0 + 2 * DRAIN_STALLED_AFTER));
        assert!(!w.stalled(9, t0 + 3 * DRAIN_STALLED_AFTER), "said once");
    }

    #[test]
    fn status_follows_the_worst_finding() {
        let mut h = Health::default();
        h.classify();
        assert_eq!(h.status, "HEALTH_OK");
        h.under_replicated = 2;
        h.lost_chunks = 2;
        h.classify();
        assert_eq!((h.status.as_str(), h.repair_outstanding), ("HEALTH_WARN", 2));
        h.lost_blocks = 1;
        h.classify();
        assert_eq!(h.status, "HEALTH_ERR");
    }

    #[test]
    fn a_drain_warns_until_nothing_is_left_to_move() {
        let mut h = Health {
            nodes_decommissioned: vec![NodeId(3)],
            disks_decommissioned: vec![DiskId(4)],
            ..Health::default()
        };
        h.disks_draining = vec![DrainProgress { disk: DiskId(5), node: NodeId(2), chunks_left: 2, bytes_left: 20 }];
        h.classify();
        assert_eq!((h.status.as_str(), h.moves_outstanding, h.move_bytes_outstanding), ("HEALTH_WARN", 2, 20));
        h.disks_draining[0].chunks_left = 0;
        h.disks_draining[0].bytes_left = 0;
        h.classify();
        assert_eq!(h.status, "HEALTH_OK", "a decommissioned node is no warning");
    }
}
