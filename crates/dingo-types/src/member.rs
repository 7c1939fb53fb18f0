//! Members of block sets: a logical block ("any copy will do") or one exact
//! copy ("the copy on this disk", as scrubbing needs), and a compact bitmap
//! of members for declarations that name millions of them.

use crate::ids::{BlockId, ChunkRef, MAX_BLOCK_ID, MAX_COPIES};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One member of a block set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Member {
    /// The block, read from whichever copy the planner picks.
    Any(BlockId),
    /// Exactly this copy of the block.
    Copy(ChunkRef),
}

/// Tag in the top byte of a member key that marks [`Member::Any`]. Not
/// 0xFF: keys travel to clients in languages without unsigned 64-bit
/// integers (Java's `long`, JavaScript's safe-integer range for block ids),
/// and below 2^63 they are the same number signed or unsigned. Above every
/// copy number, so exact copies sort before "any copy".
const ANY_TAG: u64 = 0x7F;

impl Member {
    pub fn block(self) -> BlockId {
        match self {
            Member::Any(b) => b,
            Member::Copy(c) => c.block,
        }
    }

    /// Packs the member into one `u64`: the block id in the low 56 bits, the
    /// copy number (or `0x7F` for "any copy") in the top byte. Always below
    /// 2^63.
    pub fn key(self) -> u64 {
        match self {
            Member::Any(b) => (ANY_TAG << 56) | (b.0 & MAX_BLOCK_ID),
            Member::Copy(c) => (u64::from(c.copy) << 56) | (c.block.0 & MAX_BLOCK_ID),
        }
    }

    /// Inverse of [`Member::key`].
    pub fn from_key(key: u64) -> Member {
        let block = BlockId(key & MAX_BLOCK_ID);
        match key >> 56 {
            ANY_TAG => Member::Any(block),
            copy => Member::Copy(ChunkRef { block, copy: copy as u8 }),
        }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Member::Any(b) => write!(f, "any copy of block {}", b.0),
            Member::Copy(c) => c.fmt(f),
        }
    }
}

/// A set of members stored as one roaring bitmap of block ids per kind
/// ("any copy", copy 0, copy 1, ...). A whole-cluster scrub — billions of
/// exact copies — costs a few bits per member, and far less while the
/// remaining members form long runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberBitmap {
    any: RoaringTreemap,
    /// `copies[c]` holds the blocks whose copy `c` is a member.
    copies: Vec<RoaringTreemap>,
}

impl MemberBitmap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Blocks named as "any copy".
    pub fn any(&self) -> &RoaringTreemap {
        &self.any
    }

    /// Blocks whose exact copy `copy` is a member.
    pub fn copy(&self, copy: u8) -> Option<&RoaringTreemap> {
        self.copies.get(usize::from(copy))
    }

    /// Number of copy bitmaps kept (the highest copy number plus one).
    pub fn copy_slots(&self) -> u8 {
        self.copies.len() as u8
    }

    fn copy_mut(&mut self, copy: u8) -> &mut RoaringTreemap {
        assert!(copy < MAX_COPIES, "copy {copy} out of range");
        let slot = usize::from(copy);
        if self.copies.len() <= slot {
            self.copies.resize_with(slot + 1, RoaringTreemap::new);
        }
        &mut self.copies[slot]
    }

    /// Adds a member; returns whether it was new.
    pub fn insert(&mut self, member: Member) -> bool {
        match member {
            Member::Any(b) => self.any.insert(b.0),
            Member::Copy(c) => self.copy_mut(c.copy).insert(c.block.0),
        }
    }

    /// Adds every block of `blocks` as "any copy".
    pub fn insert_any_range(&mut self, blocks: std::ops::Range<u64>) {
        self.any.insert_range(blocks);
    }

    /// Adds copy `copy` of every block in `blocks`.
    pub fn insert_copy_range(&mut self, copy: u8, blocks: std::ops::Range<u64>) {
        self.copy_mut(copy).insert_range(blocks);
    }

    /// Adds every block of `blocks` as "any copy".
    pub fn insert_any(&mut self, blocks: &RoaringTreemap) {
        self.any |= blocks;
    }

    /// Adds copy `copy` of every block in `blocks`.
    pub fn insert_copies(&mut self, copy: u8, blocks: &RoaringTreemap) {
        *self.copy_mut(copy) |= blocks;
    }

    pub fn remove(&mut self, member: Member) -> bool {
        match member {
            Member::Any(b) => self.any.remove(b.0),
            Member::Copy(c) => self.copies.get_mut(usize::from(c.copy)).is_some_and(|m| m.remove(c.block.0)),
        }
    }

    pub fn contains(&self, member: Member) -> bool {
        match member {
            Member::Any(b) => self.any.contains(b.0),
            Member::Copy(c) => self.copy(c.copy).is_some_and(|m| m.contains(c.block.0)),
        }
    }

    pub fn len(&self) -> u64 {
        self.any.len() + self.copies.iter().map(RoaringTreemap::len).sum::<u64>()
    }

    pub fn is_empty(&self) -> bool {
        self.any.is_empty() && self.copies.iter().all(RoaringTreemap::is_empty)
    }

    /// Every member, "any copy" members first, then copy 0, copy 1, ...;
    /// ascending block id within each kind. The order is part of the
    /// contract: the planner walks declarations in it, deterministically.
    pub fn iter(&self) -> impl Iterator<Item = Member> + '_ {
        let any = self.any.iter().map(|b| Member::Any(BlockId(b)));
        let copies = self.copies.iter().enumerate().flat_map(|(copy, blocks)| {
            blocks.iter().map(move |b| Member::Copy(ChunkRef { block: BlockId(b), copy: copy as u8 }))
        });
        any.chain(copies)
    }

    /// Every distinct block named by any member.
    pub fn blocks(&self) -> RoaringTreemap {
        let mut all = self.any.clone();
        for c in &self.copies {
            all |= c;
        }
        all
    }

    /// Removes every member whose block is in `blocks`; returns how many went.
    pub fn remove_blocks(&mut self, blocks: &RoaringTreemap) -> u64 {
        let before = self.len();
        self.any -= blocks;
        for c in &mut self.copies {
            *c -= blocks;
        }
        before - self.len()
    }

    /// The members whose [`Member::key`]s are `keys`, which must be strictly
    /// ascending (panics otherwise): each bitmap is built by appending, where
    /// inserting millions of keys one by one searches for each.
    pub fn from_sorted_keys(keys: &[u64]) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        for run in keys.chunk_by(|a, b| a >> 56 == b >> 56) {
            let blocks = RoaringTreemap::from_sorted_iter(run.iter().map(|&k| k & MAX_BLOCK_ID))
                .expect("member keys in strictly ascending order");
            match run[0] >> 56 {
                ANY_TAG => out.any = blocks,
                copy => *out.copy_mut(copy as u8) = blocks,
            }
        }
        out
    }

    /// Removes every member of `other`; returns how many went.
    pub fn subtract(&mut self, other: &MemberBitmap) -> u64 {
        let before = self.len();
        self.any -= &other.any;
        for (mine, theirs) in self.copies.iter_mut().zip(&other.copies) {
            *mine -= theirs;
        }
        before - self.len()
    }

    /// Approximate memory held, from the bitmaps' serialized size.
    pub fn heap_bytes(&self) -> u64 {
        self.any.serialized_size() as u64 + self.copies.iter().map(|c| c.serialized_size() as u64).sum::<u64>()
    }
}

impl FromIterator<Member> for MemberBitmap {
    fn from_iter<I: IntoIterator<Item = Member>>(iter: I) -> Self {
        let mut bitmap = MemberBitmap::new();
        for m in iter {
            bitmap.insert(m);
        }
        bitmap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn member() -> impl Strategy<Value = Member> {
        prop_oneof![
            (0..=MAX_BLOCK_ID).prop_map(|b| Member::Any(BlockId(b))),
            (0..=MAX_BLOCK_ID, 0..MAX_COPIES).prop_map(|(b, copy)| Member::Copy(ChunkRef { block: BlockId(b), copy })),
        ]
    }

    proptest! {
        #[test]
        fn key_round_trips(m in member()) {
            prop_assert_eq!(Member::from_key(m.key()), m);
        }

        /// Keys fit a signed 64-bit integer (Java, JavaScript clients), and
        /// exact copies order before "any copy" of the same block.
        #[test]
        fn keys_are_below_2_pow_63_and_copies_sort_first(b in 0..=MAX_BLOCK_ID, copy in 0..MAX_COPIES) {
            let any = Member::Any(BlockId(b)).key();
            let exact = Member::Copy(ChunkRef { block: BlockId(b), copy }).key();
            prop_assert!(any <= i64::MAX as u64 && exact < any);
        }

        #[test]
        fn bitmap_behaves_like_a_set(ms in proptest::collection::vec(member(), 0..64)) {
            let bitmap: MemberBitmap = ms.iter().copied().collect();
            let set: std::collections::BTreeSet<Member> = ms.iter().copied().collect();
            prop_assert_eq!(bitmap.len(), set.len() as u64);
            for m in &set {
                prop_assert!(bitmap.contains(*m));
            }
            let listed: std::collections::BTreeSet<Member> = bitmap.iter().collect();
            prop_assert_eq!(listed, set);
        }
    }

    #[test]
    fn from_sorted_keys_matches_inserting_one_by_one() {
        let members = [
            Member::Copy(ChunkRef { block: BlockId(7), copy: 0 }),
            Member::Copy(ChunkRef { block: BlockId(9), copy: 0 }),
            Member::Copy(ChunkRef { block: BlockId(1 << 40), copy: 2 }),
            Member::Any(BlockId(3)),
            Member::Any(BlockId(5)),
        ];
        let keys: Vec<u64> = members.iter().map(|m| m.key()).collect();
        assert!(keys.is_sorted());
        let built = MemberBitmap::from_sorted_keys(&keys);
        assert_eq!(built.iter().collect::<Vec<_>>(), MemberBitmap::from_iter(members).iter().collect::<Vec<_>>());
        assert!(MemberBitmap::from_sorted_keys(&[]).is_empty());
    }

    #[test]
    #[should_panic(expected = "ascending")]
    fn from_sorted_keys_rejects_unsorted_keys() {
        let keys = [Member::Any(BlockId(5)).key(), Member::Any(BlockId(3)).key()];
        MemberBitmap::from_sorted_keys(&keys);
    }

    #[test]
    fn subtract_removes_exactly_the_other_members() {
        let mut a = MemberBitmap::new();
        a.insert_any_range(0..10);
        let original = a.clone();
        let mut b = MemberBitmap::new();
        b.insert_copy_range(3, 100..110);
        a.insert_copies(3, b.copy(3).unwrap());
        assert_eq!(a.len(), 20);
        assert_eq!(a.subtract(&b), 10);
        assert_eq!(a.iter().collect::<Vec<_>>(), original.iter().collect::<Vec<_>>());
    }

    #[test]
    fn remove_blocks_drops_every_kind_of_member() {
        let mut bitmap = MemberBitmap::new();
        bitmap.insert_any_range(0..10);
        bitmap.insert_copy_range(2, 5..15);
        let gone: RoaringTreemap = (5..8).collect();
        assert_eq!(bitmap.remove_blocks(&gone), 6);
        assert!(!bitmap.contains(Member::Any(BlockId(6))));
        assert!(bitmap.contains(Member::Copy(ChunkRef { block: BlockId(9), copy: 2 })));
    }
}
