//! The planner's read-only view of the cluster. Implemented by the real
//! metadata service and by the simulator's cluster model; the planner never
//! holds a copy of the block table itself.

use crate::declaration::BlockRange;
use crate::disk::DiskModel;
use crate::ids::{BlockId, ChunkRef, DiskId, GroupId};
use crate::member::{Member, MemberBitmap};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Life cycle of a block. Only sealed blocks can be declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockState {
    Open,
    Sealed,
    Deleted,
}

/// What the planner needs to know about one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub size: u64,
    /// Copies stored: `r` for an `r`-way replicated block, 1 for an EC member.
    pub copies: u8,
    /// The redundancy group (stripe) the block belongs to.
    pub group: GroupId,
    pub state: BlockState,
}

/// Why a block cannot be declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum BlockProblem {
    #[error("{0} does not exist")]
    Unknown(BlockId),
    #[error("{0} is not sealed yet; only sealed blocks can be declared")]
    Unsealed(BlockId),
    #[error("{0} is deleted")]
    Deleted(BlockId),
    #[error("{0} does not exist (the block has fewer copies)")]
    NoSuchCopy(ChunkRef),
}

/// Cluster state as the planner sees it at one instant.
///
/// Disk ids are dense: `0..disk_count()`.
pub trait Topology {
    /// The block, or `None` if no such block was ever created.
    fn block(&self, id: BlockId) -> Option<BlockInfo>;

    /// The disk holding copy `chunk.copy` of the block, or `None` if that copy
    /// is lost (its disk failed) or does not exist.
    fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId>;

    /// The block and, in `disks` (cleared first, indexed by copy number),
    /// the disk of each copy (`None` for a lost copy); `None` if no such
    /// block was ever created. The planner resolves every read this way:
    /// implementations that locate a block by computation or search
    /// override it to locate the block once for all its copies.
    fn block_copies(&self, id: BlockId, disks: &mut Vec<Option<DiskId>>) -> Option<BlockInfo> {
        disks.clear();
        let info = self.block(id)?;
        disks.extend((0..info.copies).map(|copy| self.copy_disk(ChunkRef { block: id, copy })));
        Some(info)
    }

    /// [`Self::block_copies`] of each block of `blocks`, in order: the
    /// blocks' infos in `infos` (cleared first; `None` for a block never
    /// created) and their copies' disks in `disks` (cleared first), each
    /// existing block's `copies` entries after the previous block's. The
    /// planner resolves a range set (a stretch of a file) this way:
    /// implementations that locate a block by computation or search
    /// override it to locate the range once, not every block.
    fn range_copies(
        &self,
        blocks: std::ops::Range<u64>,
        infos: &mut Vec<Option<BlockInfo>>,
        disks: &mut Vec<Option<DiskId>>,
    ) {
        infos.clear();
        disks.clear();
        let mut one = Vec::new();
        for b in blocks {
            infos.push(self.block_copies(BlockId(b), &mut one));
            disks.extend_from_slice(&one);
        }
    }

    fn disk_count(&self) -> u32;

    fn disk_model(&self, disk: DiskId) -> DiskModel;

    /// Every chunk stored on `disk`, as exact-copy members.
    fn chunks_on_disk(&self, disk: DiskId) -> MemberBitmap;

    /// Every chunk of every live sealed block, as exact-copy members.
    fn all_chunks(&self) -> MemberBitmap;

    /// Checks that a member names a live, sealed block (and an existing copy).
    fn check_member(&self, member: Member) -> Result<(), BlockProblem> {
        let block = member.block();
        let info = self.block(block).ok_or(BlockProblem::Unknown(block))?;
        match info.state {
            BlockState::Open => return Err(BlockProblem::Unsealed(block)),
            BlockState::Deleted => return Err(BlockProblem::Deleted(block)),
            BlockState::Sealed => {}
        }
        match member {
            Member::Copy(c) if c.copy >= info.copies => Err(BlockProblem::NoSuchCopy(c)),
            _ => Ok(()),
        }
    }

    /// Checks every block of a range. Implementations with a compact block
    /// table override this to avoid a lookup per block.
    fn check_range(&self, range: BlockRange) -> Result<(), BlockProblem> {
        range.blocks().try_for_each(|b| self.check_member(Member::Any(b)))
    }

    /// Checks every member of a bitmap. Overridable like [`Self::check_range`].
    fn check_members(&self, members: &MemberBitmap) -> Result<(), BlockProblem> {
        members.iter().try_for_each(|m| self.check_member(m))
    }
}
