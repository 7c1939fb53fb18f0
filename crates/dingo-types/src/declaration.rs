//! Declarations: what a task will read, how much of it it needs, and by when.

use crate::ids::{BlockId, DiskId};
use crate::member::{Member, MemberBitmap};
use crate::task::TaskKind;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Members a task needs together (a stripe, a file, one block), or any
/// `needed` of them (the survivors of a stripe, any `k` of which rebuild a
/// lost member): the planner picks which, those read anyway first, and
/// delivers the set with the members it picked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockSet {
    pub members: Vec<Member>,
    /// `None`: every member. `Some(n)`: any `n` of them, `1 ≤ n ≤ members`.
    #[serde(default)]
    pub needed: Option<u32>,
}

impl BlockSet {
    pub fn new(members: Vec<Member>) -> Self {
        BlockSet { members, needed: None }
    }

    /// A set of the given blocks, any copy of each.
    pub fn any_of(blocks: impl IntoIterator<Item = BlockId>) -> Self {
        BlockSet::new(blocks.into_iter().map(Member::Any).collect())
    }

    /// Any `needed` of `members`.
    pub fn choose(members: Vec<Member>, needed: u32) -> Self {
        BlockSet { members, needed: Some(needed) }
    }
}

/// A half-open range of block ids `[start, start + len)`, read as one set
/// with any copy of each block — the compact form of "all blocks of file F".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockRange {
    pub start: BlockId,
    pub len: u32,
}

impl BlockRange {
    /// One past the last block id, or `None` if that does not fit a `u64`
    /// (a range from the network can name any start).
    pub fn checked_end(self) -> Option<u64> {
        self.start.0.checked_add(u64::from(self.len))
    }

    /// One past the last block id. Saturates rather than wraps, so an
    /// unchecked range past `u64::MAX` never turns into a short one;
    /// validation refuses such ranges ([`Self::checked_end`]).
    pub fn end(self) -> u64 {
        self.start.0.saturating_add(u64::from(self.len))
    }

    pub fn blocks(self) -> impl Iterator<Item = BlockId> {
        (self.start.0..self.end()).map(BlockId)
    }
}

/// The sets a declaration names. Huge declarations use the compact forms:
/// they cost bits per member, not a heap object per set.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadSets {
    /// Explicit sets, for small or irregular declarations (stripes to rebuild).
    Sets(Vec<BlockSet>),
    /// One set per range, any copy of each block (files). Ranges must be
    /// sorted by start and must not overlap.
    Ranges(Vec<BlockRange>),
    /// One set per member (rebalancing candidates, fsck's first blocks).
    EachMember(MemberBitmap),
    /// One set per chunk stored on the disk, that exact copy (scrub a disk).
    ChunksOnDisk(DiskId),
    /// One set per chunk in the cluster, that exact copy (scrub everything).
    AllChunks,
}

/// A request to read `read_sets` (all of them, exactly `sets_needed` of
/// them, or any of them totalling `bytes_needed`) before `deadline`.
#[derive(Clone, Debug, PartialEq)]
pub struct Declaration {
    pub task: TaskKind,
    pub read_sets: ReadSets,
    /// `None`: every set is needed (unless `bytes_needed` says otherwise).
    /// `Some(n)`: exactly `n` sets, chosen by the planner (data flexibility).
    pub sets_needed: Option<u64>,
    /// Byte-denominated data flexibility ("move at least `n` bytes out of
    /// these candidates"): `Some(n)` needs any sets whose live blocks total
    /// at least `n` bytes, chosen by the planner (the cheapest: those riding
    /// on reads scheduled anyway first); the declaration is done once `n`
    /// bytes were delivered and the other sets are never read. At most one
    /// of `sets_needed` and `bytes_needed` is set.
    pub bytes_needed: Option<u64>,
    pub deadline: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_past_u64_max_has_no_end_and_never_wraps() {
        let near_max = BlockRange { start: BlockId(u64::MAX - 1), len: 4 };
        assert_eq!(near_max.checked_end(), None);
        assert_eq!(near_max.end(), u64::MAX, "saturates instead of wrapping to 2");
        let fine = BlockRange { start: BlockId(10), len: 3 };
        assert_eq!((fine.checked_end(), fine.end()), (Some(13), 13));
        assert_eq!(fine.blocks().map(|b| b.0).collect::<Vec<_>>(), vec![10, 11, 12]);
    }
}
