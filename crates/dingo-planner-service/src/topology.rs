//! The planner's view of the real cluster, read from the metadata service:
//! the dense block table (`BlockTable` pages) and the nodes and disks
//! (`ClusterStatus`).
//!
//! Refreshing re-reads the whole block table: a few RPC pages and
//! ~40 bytes plus one small vector per block, which keeps a quantum's
//! refresh in the milliseconds up to about a million blocks (the demo has
//! thousands). Larger clusters want an incremental feed of changes.
//!
//! Block states only move forward (open → sealed → deleted), so a stale
//! snapshot applied after a newer one never resurrects a deleted block.

use dingo_client::{Client, ClientError};
use dingo_proto::v1::{BlockRow, BlockState as PbState, ClusterStatusReply, DeviceState};
use dingo_types::{
    BlockId, BlockInfo, BlockState, ChunkRef, DiskId, DiskModel, GroupId, Member, MemberBitmap, Topology,
};
use roaring::RoaringTreemap;
use std::collections::BTreeMap;

/// Rows fetched per `BlockTable` call.
const PAGE: u32 = 50_000;

/// A disk id in a row for a copy that has no disk.
const NO_DISK: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    size: u64,
    group: u64,
    state: BlockState,
    /// Disk of copy `i` at index `i`; [`NO_DISK`] when unknown.
    disks: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Disk {
    model: DiskModel,
    /// Address of the node holding the disk; empty if none.
    addr: String,
    alive: bool,
}

/// One fetch of the metadata service's state.
pub struct Snapshot {
    pub rows: Vec<BlockRow>,
    pub cluster: ClusterStatusReply,
}

/// Reads the whole block table and the cluster status.
pub async fn fetch(client: &Client) -> Result<Snapshot, ClientError> {
    let cluster = client.cluster_status().await?;
    let mut rows = Vec::new();
    let mut start = 0;
    loop {
        let page = client.block_table(dingo_types::BlockId(start), PAGE).await?;
        rows.extend(page.rows);
        if page.next >= page.end || page.next <= start {
            break;
        }
        start = page.next;
    }
    Ok(Snapshot { rows, cluster })
}

/// Blocks indexed by id (the metadata service's ids are dense from 0) and
/// disks indexed by id. A copy on a dead disk, or on a disk of a dead node
/// (no heartbeats, or marked dead), counts as lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaTopology {
    blocks: Vec<Option<Row>>,
    disks: Vec<Disk>,
}

fn state_of(row: &BlockRow) -> BlockState {
    match row.state() {
        // A row without a state (from a newer service) is not readable
        // yet: like an open block, it is never scheduled.
        PbState::Open | PbState::Unspecified => BlockState::Open,
        PbState::Sealed => BlockState::Sealed,
        PbState::Deleted => BlockState::Deleted,
    }
}

fn rank(s: BlockState) -> u8 {
    match s {
        BlockState::Open => 0,
        BlockState::Sealed => 1,
        BlockState::Deleted => 2,
    }
}

impl MetaTopology {
    /// Applies a snapshot; returns the blocks that became deleted with it
    /// (for `Planner::note_deleted`).
    pub fn apply(&mut self, snap: Snapshot) -> RoaringTreemap {
        let mut newly_deleted = RoaringTreemap::new();
        for r in snap.rows {
            let Ok(i) = usize::try_from(r.id) else { continue };
            if self.blocks.len() <= i {
                self.blocks.resize(i + 1, None);
            }
            let state = state_of(&r);
            let slot = &mut self.blocks[i];
            if let Some(old) = slot.as_ref()
                && rank(old.state) > rank(state)
            {
                continue;
            }
            if state == BlockState::Deleted && slot.as_ref().is_none_or(|old| old.state != BlockState::Deleted) {
                newly_deleted.insert(r.id);
            }
            *slot = Some(Row { size: r.size, group: r.group, state, disks: r.disks });
        }
        let max_disk = snap.cluster.nodes.iter().flat_map(|n| &n.disks).map(|d| d.id as usize + 1).max().unwrap_or(0);
        let max_row_disk = self
            .blocks
            .iter()
            .flatten()
            .flat_map(|r| r.disks.iter().filter(|&&d| d != NO_DISK))
            .map(|&d| d as usize + 1)
            .max()
            .unwrap_or(0);
        let mut disks = vec![Disk::default(); max_disk.max(max_row_disk)];
        for n in &snap.cluster.nodes {
            for d in &n.disks {
                let model = d
                    .model
                    .filter(|m| m.transfer_bytes_per_sec > 0)
                    .map(|m| DiskModel {
                        positioning_us: m.positioning_us,
                        transfer_bytes_per_sec: m.transfer_bytes_per_sec,
                    })
                    .unwrap_or_default();
                // Marked dead by an operator (or a task) counts at once,
                // before heartbeats time out.
                let alive = n.alive && n.state() != DeviceState::Dead && d.state() != DeviceState::Dead;
                disks[d.id as usize] = Disk { model, addr: n.addr.clone(), alive };
            }
        }
        self.disks = disks;
        newly_deleted
    }

    /// Every deleted block (after a restart, to elide restored sets).
    pub fn deleted(&self) -> RoaringTreemap {
        self.ids_where(|r| r.state == BlockState::Deleted)
    }

    fn ids_where(&self, keep: impl Fn(&Row) -> bool) -> RoaringTreemap {
        let mut out = RoaringTreemap::new();
        for (id, r) in self.blocks.iter().enumerate() {
            if r.as_ref().is_some_and(&keep) {
                out.insert(id as u64);
            }
        }
        out
    }

    /// Address of the node holding `disk`, if it is known and alive.
    pub fn node_of(&self, disk: DiskId) -> Option<&str> {
        self.disks.get(disk.0 as usize).filter(|d| d.alive && !d.addr.is_empty()).map(|d| d.addr.as_str())
    }

    /// The live disks of each node, by node address.
    pub fn live_disks_by_node(&self) -> BTreeMap<&str, Vec<DiskId>> {
        let mut nodes: BTreeMap<&str, Vec<DiskId>> = BTreeMap::new();
        for (id, d) in self.disks.iter().enumerate() {
            if d.alive && !d.addr.is_empty() {
                nodes.entry(d.addr.as_str()).or_default().push(DiskId(id as u32));
            }
        }
        nodes
    }

    pub fn block_count(&self) -> u64 {
        self.blocks.len() as u64
    }

    fn row(&self, id: BlockId) -> Option<&Row> {
        self.blocks.get(usize::try_from(id.0).ok()?)?.as_ref()
    }

    fn live_disk(&self, disk: u32) -> Option<DiskId> {
        (disk != NO_DISK && self.disks.get(disk as usize).is_some_and(|d| d.alive)).then_some(DiskId(disk))
    }

    fn chunks_where(&self, keep: impl Fn(DiskId) -> bool) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        for (id, r) in self.blocks.iter().enumerate() {
            let Some(r) = r.as_ref().filter(|r| r.state == BlockState::Sealed) else { continue };
            for (copy, &disk) in r.disks.iter().enumerate() {
                if self.live_disk(disk).is_some_and(&keep) {
                    out.insert(Member::Copy(ChunkRef { block: BlockId(id as u64), copy: copy as u8 }));
                }
            }
        }
        out
    }
}

impl Topology for MetaTopology {
    fn block(&self, id: BlockId) -> Option<BlockInfo> {
        self.row(id).map(|r| BlockInfo {
            size: r.size,
            copies: u8::try_from(r.disks.len()).unwrap_or(u8::MAX),
            group: GroupId(r.group),
            state: r.state,
        })
    }

    fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId> {
        self.live_disk(*self.row(chunk.block)?.disks.get(usize::from(chunk.copy))?)
    }

    fn disk_count(&self) -> u32 {
        self.disks.len() as u32
    }

    fn disk_model(&self, disk: DiskId) -> DiskModel {
        self.disks.get(disk.0 as usize).map(|d| d.model).unwrap_or_default()
    }

    fn chunks_on_disk(&self, disk: DiskId) -> MemberBitmap {
        self.chunks_where(|d| d == disk)
    }

    fn all_chunks(&self) -> MemberBitmap {
        self.chunks_where(|_| true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use dingo_proto::v1::{DiskModel as PbModel, DiskStatus, NodeStatus};

    pub(crate) fn row(id: u64, state: PbState, disks: &[u32]) -> BlockRow {
        BlockRow { id, size: 1000, state: state as i32, group: id, disks: disks.to_vec() }
    }

    /// Two nodes with two disks each (disks 0,1 on node 0; 2,3 on node 1).
    pub(crate) fn cluster(node1_alive: bool) -> ClusterStatusReply {
        let disk = |id| DiskStatus {
            id,
            model: Some(PbModel { positioning_us: 5, transfer_bytes_per_sec: 7 }),
            ..Default::default()
        };
        ClusterStatusReply {
            nodes: vec![
                NodeStatus {
                    id: 0,
                    addr: "n0".into(),
                    alive: true,
                    disks: vec![disk(0), disk(1)],
                    ..Default::default()
                },
                NodeStatus {
                    id: 1,
                    addr: "n1".into(),
                    alive: node1_alive,
                    disks: vec![disk(2), disk(3)],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn snapshot_rows_become_blocks_and_dead_nodes_lose_their_copies() {
        let mut t = MetaTopology::default();
        let rows = vec![row(0, PbState::Sealed, &[0, 2]), row(1, PbState::Open, &[1]), row(2, PbState::Deleted, &[3])];
        let deleted = t.apply(Snapshot { rows, cluster: cluster(true) });
        assert_eq!(deleted.iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(t.block(BlockId(0)).unwrap().copies, 2);
        assert_eq!(t.block(BlockId(1)).unwrap().state, BlockState::Open);
        assert_eq!(t.disk_model(DiskId(3)), DiskModel { positioning_us: 5, transfer_bytes_per_sec: 7 });
        assert_eq!(t.copy_disk(ChunkRef { block: BlockId(0), copy: 1 }), Some(DiskId(2)));
        assert_eq!(t.all_chunks().len(), 2, "only the sealed block's copies");
        assert_eq!(t.node_of(DiskId(2)), Some("n1"));
        let nodes = |t: &MetaTopology| -> Vec<(String, Vec<DiskId>)> {
            t.live_disks_by_node().into_iter().map(|(a, d)| (a.to_string(), d)).collect()
        };
        let both: Vec<(String, Vec<DiskId>)> =
            vec![("n0".into(), vec![DiskId(0), DiskId(1)]), ("n1".into(), vec![DiskId(2), DiskId(3)])];
        assert_eq!(nodes(&t), both);
        // Node 1 dies; block 1 is sealed; a stale row for block 2 arrives.
        let rows = vec![row(1, PbState::Sealed, &[1]), row(2, PbState::Sealed, &[3]), row(3, PbState::Deleted, &[0])];
        let deleted = t.apply(Snapshot { rows, cluster: cluster(false) });
        assert_eq!(deleted.iter().collect::<Vec<_>>(), vec![3]);
        assert_eq!(t.block(BlockId(2)).unwrap().state, BlockState::Deleted, "never resurrected");
        assert_eq!(t.copy_disk(ChunkRef { block: BlockId(0), copy: 1 }), None, "its node is dead");
        assert_eq!(t.node_of(DiskId(2)), None);
        assert_eq!(nodes(&t), both[..1], "a dead node gets no budget");
        assert_eq!(t.chunks_on_disk(DiskId(1)).len(), 1);
        assert_eq!(t.deleted().len(), 2);
    }
}
