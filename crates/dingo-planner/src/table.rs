//! [`TableTopology`]: a topology kept as an explicit block table. Fits
//! clusters of up to millions of blocks (the local store, tests); the
//! simulator's cluster model computes placement instead of storing it.

use dingo_types::{
    BlockId, BlockInfo, BlockState, ChunkRef, DiskId, DiskModel, GroupId, Member, MemberBitmap, Topology,
};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
struct TableBlock {
    size: u64,
    group: GroupId,
    state: BlockState,
    /// Disk of each copy; `None` once the copy is lost.
    disks: Vec<Option<DiskId>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableTopology {
    disks: Vec<DiskModel>,
    blocks: BTreeMap<BlockId, TableBlock>,
}

impl TableTopology {
    /// `disks` disks with the same model.
    pub fn new(disks: u32, model: DiskModel) -> Self {
        TableTopology { disks: vec![model; disks as usize], blocks: BTreeMap::new() }
    }

    /// Adds (or replaces) a sealed block with one copy per entry of `disks`.
    /// Panics on an unknown disk: the table must stay consistent.
    pub fn insert(&mut self, block: BlockId, size: u64, group: GroupId, disks: &[DiskId]) {
        assert!(disks.iter().all(|d| (d.0 as usize) < self.disks.len()), "unknown disk in {disks:?}");
        let disks = disks.iter().copied().map(Some).collect();
        self.blocks.insert(block, TableBlock { size, group, state: BlockState::Sealed, disks });
    }

    /// Changes a block's state; returns false for an unknown block.
    pub fn set_state(&mut self, block: BlockId, state: BlockState) -> bool {
        self.blocks.get_mut(&block).map(|b| b.state = state).is_some()
    }

    /// Marks every copy on `disk` lost.
    pub fn fail_disk(&mut self, disk: DiskId) {
        for b in self.blocks.values_mut() {
            for d in &mut b.disks {
                if *d == Some(disk) {
                    *d = None;
                }
            }
        }
    }

    fn chunks_where(&self, keep: impl Fn(DiskId) -> bool) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        for (&block, b) in &self.blocks {
            if b.state != BlockState::Sealed {
                continue;
            }
            for (copy, disk) in b.disks.iter().enumerate() {
                if disk.is_some_and(&keep) {
                    out.insert(Member::Copy(ChunkRef { block, copy: copy as u8 }));
                }
            }
        }
        out
    }
}

impl Topology for TableTopology {
    fn block(&self, id: BlockId) -> Option<BlockInfo> {
        self.blocks.get(&id).map(|b| BlockInfo {
            size: b.size,
            copies: b.disks.len() as u8,
            group: b.group,
            state: b.state,
        })
    }

    fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId> {
        self.blocks.get(&chunk.block)?.disks.get(usize::from(chunk.copy)).copied().flatten()
    }

    fn disk_count(&self) -> u32 {
        self.disks.len() as u32
    }

    fn disk_model(&self, disk: DiskId) -> DiskModel {
        self.disks[disk.0 as usize]
    }

    fn chunks_on_disk(&self, disk: DiskId) -> MemberBitmap {
        self.chunks_where(|d| d == disk)
    }

    fn all_chunks(&self) -> MemberBitmap {
        self.chunks_where(|_| true)
    }
}
