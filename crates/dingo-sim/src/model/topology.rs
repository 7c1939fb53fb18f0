//! The model as the planner sees it: [`Topology`] over computed placement.

use super::layout::Locator;
use super::{ClusterModel, Redundancy};
use dingo_types::{
    BlockId, BlockInfo, BlockProblem, BlockRange, BlockState, ChunkRef, DiskId, DiskModel, GroupId, MemberBitmap,
    Topology,
};

impl ClusterModel {
    /// What [`Topology::block`] says of block `id`, found at `loc`.
    pub(super) fn block_at(&self, id: BlockId, loc: &Locator) -> BlockInfo {
        let region = &self.regions[loc.region];
        let (copies, group) = match region.redundancy {
            Redundancy::Replicated(copies) => (copies, GroupId(id.0)),
            Redundancy::Ec { data, .. } => (1, GroupId(region.first + loc.stripe * u64::from(data))),
        };
        let state = if self.deleted_at(id.0, loc) { BlockState::Deleted } else { BlockState::Sealed };
        BlockInfo { size: self.spec.block_bytes, copies, group, state }
    }
}

impl ClusterModel {
    /// [`Topology::block_copies`] of block `id`, found at `loc`, with its
    /// copies' disks appended to `disks`.
    fn push_copies(&self, id: BlockId, loc: &Locator, disks: &mut Vec<Option<DiskId>>) -> BlockInfo {
        let info = self.block_at(id, loc);
        let region = &self.regions[loc.region];
        let live = |disk: u32| (!self.failed[disk as usize]).then_some(DiskId(disk));
        let placed = self.placement_disks(region, loc.stripe);
        match region.redundancy {
            Redundancy::Replicated(_) => disks.extend(placed.iter().map(|&disk| live(disk))),
            Redundancy::Ec { .. } => disks.push(live(placed[loc.position as usize])),
        }
        info
    }
}

impl Topology for ClusterModel {
    fn block(&self, id: BlockId) -> Option<BlockInfo> {
        self.locate(id.0).map(|loc| self.block_at(id, &loc))
    }

    fn block_copies(&self, id: BlockId, disks: &mut Vec<Option<DiskId>>) -> Option<BlockInfo> {
        disks.clear();
        let loc = self.locate(id.0)?;
        Some(self.push_copies(id, &loc, disks))
    }

    fn range_copies(
        &self,
        blocks: std::ops::Range<u64>,
        infos: &mut Vec<Option<BlockInfo>>,
        disks: &mut Vec<Option<DiskId>>,
    ) {
        infos.clear();
        disks.clear();
        let mut b = blocks.start;
        while b < blocks.end {
            let Some(mut loc) = self.locate(b) else {
                infos.push(None);
                b += 1;
                continue;
            };
            // The rest of the range in this region, one step a block.
            let end = self.regions[loc.region].end.min(blocks.end);
            loop {
                infos.push(Some(self.push_copies(BlockId(b), &loc, disks)));
                if b + 1 == end {
                    break;
                }
                loc = self.next_locator(b, loc);
                b += 1;
            }
            b = end;
        }
    }

    fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId> {
        let loc = self.locate(chunk.block.0)?;
        let region = &self.regions[loc.region];
        let position = match self.schemes[region.scheme].redundancy {
            Redundancy::Replicated(copies) if chunk.copy < copies => u32::from(chunk.copy),
            Redundancy::Ec { .. } if chunk.copy == 0 => loc.position,
            _ => return None,
        };
        let disk = self.placement_disk(region, loc.stripe, position);
        (!self.failed[disk as usize]).then_some(DiskId(disk))
    }

    fn disk_count(&self) -> u32 {
        self.disks
    }

    fn disk_model(&self, _disk: DiskId) -> DiskModel {
        self.spec.disk_model
    }

    fn chunks_on_disk(&self, disk: DiskId) -> MemberBitmap {
        if self.failed[disk.0 as usize] { MemberBitmap::new() } else { self.placed_chunks(&[disk]) }
    }

    fn all_chunks(&self) -> MemberBitmap {
        let mut out = self.chunks_of_blocks(0..self.block_count());
        let failed: Vec<DiskId> = (0..self.disks).filter(|&d| self.failed[d as usize]).map(DiskId).collect();
        out.subtract(&self.placed_chunks(&failed));
        out
    }

    fn check_range(&self, range: BlockRange) -> Result<(), BlockProblem> {
        if range.end() > self.block_count() {
            return Err(BlockProblem::Unknown(BlockId(range.start.0.max(self.block_count()))));
        }
        if self.deleted.range_cardinality(range.start.0..range.end()) > 0 {
            let mut it = self.deleted.iter();
            it.advance_to(range.start.0);
            return Err(BlockProblem::Deleted(BlockId(it.next().unwrap_or(range.start.0))));
        }
        Ok(())
    }

    fn check_members(&self, members: &MemberBitmap) -> Result<(), BlockProblem> {
        let blocks = members.blocks();
        if let Some(max) = blocks.max().filter(|&m| m >= self.block_count()) {
            return Err(BlockProblem::Unknown(BlockId(max)));
        }
        if let Some(b) = (&blocks & &self.deleted).min() {
            return Err(BlockProblem::Deleted(BlockId(b)));
        }
        for copy in 1..members.copy_slots() {
            let named = members.copy(copy).expect("below copy_slots");
            let missing = match self.with_copy.get(usize::from(copy)) {
                Some(have) => named - have,
                None => named.clone(),
            };
            if let Some(b) = missing.min() {
                return Err(BlockProblem::NoSuchCopy(ChunkRef { block: BlockId(b), copy }));
            }
        }
        Ok(())
    }
}
