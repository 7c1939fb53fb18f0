//! Compact storage of a declaration's outstanding sets.
//!
//! A set is named by a `u64` *key* whose meaning depends on the form:
//! - [`Sets::Singletons`]: the key is the member's [`Member::key`];
//! - [`Sets::Ranges`] and [`Sets::Explicit`]: the key is the set's index.
//!
//! Invariant: a key is in `remaining` exactly while its set is outstanding
//! (neither delivered nor elided). `declared_blocks` (and an explicit
//! store's index) covers the blocks of every outstanding set and may still
//! cover done ones: taking a set costs one removal from `remaining`,
//! lookups by block filter out the sets no longer outstanding, and the
//! cover is rebuilt over the outstanding sets once half of those it was
//! built for are done, so that lookups cost what is outstanding.

use crate::explicit::ExplicitSets;
use crate::search::{gallop, intersection};
use dingo_types::{BlockId, BlockRange, BlockSet, ChunkRef, Member, MemberBitmap, ReadSets, Topology};
use fixedbitset::FixedBitSet;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Sets {
    /// One set per member. `remaining` doubles as the member list.
    Singletons { remaining: MemberBitmap },
    /// One set per block range, any copy of each block.
    /// `covered`: how many ranges `declared_blocks` was built over.
    Ranges { starts: Vec<u64>, lens: Lens, remaining: Outstanding, declared_blocks: RoaringTreemap, covered: u64 },
    /// Arbitrary sets, by index ([`ExplicitSets`]).
    Explicit { sets: ExplicitSets, remaining: Outstanding },
}

impl Sets {
    /// The compact store of `read_sets`, with no checks: the caller has
    /// validated them (or is restoring sets validated earlier). A
    /// `ChunksOnDisk` disk must exist in `topo`.
    pub(crate) fn build(read_sets: &ReadSets, topo: &impl Topology) -> Sets {
        match read_sets {
            ReadSets::Sets(sets) => Sets::explicit(sets),
            ReadSets::Ranges(ranges) => Sets::ranges(ranges),
            ReadSets::EachMember(members) => Sets::singletons(members.clone()),
            ReadSets::ChunksOnDisk(disk) => Sets::singletons(topo.chunks_on_disk(*disk)),
            ReadSets::AllChunks => Sets::singletons(topo.all_chunks()),
        }
    }

    pub(crate) fn singletons(members: MemberBitmap) -> Sets {
        Sets::Singletons { remaining: members }
    }

    /// `ranges` must be sorted by start and disjoint (checked by validation).
    pub(crate) fn ranges(ranges: &[BlockRange]) -> Sets {
        Sets::Ranges {
            starts: ranges.iter().map(|r| r.start.0).collect(),
            lens: Lens::of(ranges),
            remaining: Outstanding::all(ranges.len()),
            declared_blocks: blocks_of(ranges.iter().map(|r| r.start.0..r.end())),
            covered: ranges.len() as u64,
        }
    }

    /// Validation guarantees fewer than 4G members in all.
    pub(crate) fn explicit(sets: &[BlockSet]) -> Sets {
        let sets = ExplicitSets::new(sets);
        let remaining = Outstanding::all(sets.len());
        Sets::Explicit { sets, remaining }
    }

    pub(crate) fn remaining_count(&self) -> u64 {
        match self {
            Sets::Singletons { remaining } => remaining.len(),
            Sets::Ranges { remaining, .. } | Sets::Explicit { remaining, .. } => remaining.len(),
        }
    }

    /// The blocks of set `key` if this is a range store.
    pub(crate) fn range(&self, key: u64) -> Option<std::ops::Range<u64>> {
        match self {
            Sets::Ranges { starts, lens, .. } => {
                let start = starts[key as usize];
                Some(start..start + u64::from(lens.get(key as usize)))
            }
            _ => None,
        }
    }

    /// Appends the members of set `key` to `out`.
    pub(crate) fn members(&self, key: u64, out: &mut Vec<Member>) {
        match self {
            Sets::Singletons { .. } => out.push(Member::from_key(key)),
            Sets::Ranges { starts, lens, .. } => {
                let (start, len) = (starts[key as usize], lens.get(key as usize));
                out.extend((start..start + u64::from(len)).map(|b| Member::Any(BlockId(b))));
            }
            Sets::Explicit { sets, .. } => sets.members(key as usize, out),
        }
    }

    /// How many of set `key`'s members it needs, if not every one
    /// ([`dingo_types::BlockSet::needed`]).
    pub(crate) fn needed(&self, key: u64) -> Option<u32> {
        match self {
            Sets::Explicit { sets, .. } => sets.needed(key as usize),
            Sets::Singletons { .. } | Sets::Ranges { .. } => None,
        }
    }

    /// Keys of remaining sets with at least one block in `blocks`, ascending.
    /// With `copies`, an exact-copy singleton counts only if its copy is in
    /// `copies[copy]`; without, any member on one of `blocks` counts. Cost is
    /// linear in the intersection, not in the declaration.
    pub(crate) fn touching(&self, blocks: &RoaringTreemap, copies: Option<&[RoaringTreemap]>, out: &mut Vec<u64>) {
        out.clear();
        match self {
            Sets::Singletons { remaining } => {
                for copy in 0..remaining.copy_slots() {
                    let mine = remaining.copy(copy).expect("slot below copy_slots");
                    let Some(sched) = copies.map_or(Some(blocks), |c| c.get(usize::from(copy))) else {
                        continue;
                    };
                    out.extend(
                        intersection(mine, sched)
                            .iter()
                            .map(|b| Member::Copy(ChunkRef { block: BlockId(b), copy }).key()),
                    );
                }
                out.extend(intersection(remaining.any(), blocks).iter().map(|b| Member::Any(BlockId(b)).key()));
            }
            Sets::Ranges { starts, lens, remaining, .. } if remaining.len() <= RANGE_PROBE_LIMIT => {
                // Few ranges left: merge them with `blocks`, where
                // intersecting the declared blocks would copy a bitmap
                // container of `blocks` for every container the ranges
                // span. Both ascend, so one iterator moves forward and
                // seeks only past a scheduled block below the next range:
                // at most min(ranges, blocks) seeks, not one per range.
                let mut scheduled = blocks.iter();
                let mut next = scheduled.next();
                for idx in remaining.iter() {
                    let start = starts[idx as usize];
                    if next.is_some_and(|b| b < start) {
                        scheduled.advance_to(start);
                        next = scheduled.next();
                    }
                    let Some(b) = next else { break };
                    if b < start + u64::from(lens.get(idx as usize)) {
                        out.push(idx);
                    }
                }
            }
            Sets::Ranges { starts, lens, remaining, declared_blocks, .. } => {
                // Blocks come in ascending order and a range holds many:
                // search for the next range only past the current one's end.
                let mut current_end = 0;
                let mut idx = 0;
                for b in intersection(declared_blocks, blocks).iter() {
                    if b < current_end {
                        continue;
                    }
                    idx += gallop(&starts[idx..], |s| s <= b) - 1;
                    current_end = starts[idx] + u64::from(lens.get(idx));
                    if remaining.contains(idx as u64) {
                        out.push(idx as u64);
                    }
                }
            }
            Sets::Explicit { sets, remaining } => {
                sets.sets_on(blocks, |set| {
                    if remaining.contains(u64::from(set)) {
                        out.push(u64::from(set));
                    }
                });
                out.sort_unstable();
                out.dedup();
            }
        }
    }

    /// Appends up to `max` remaining keys that are `>= from` in walk order
    /// (ascending key) to `out`.
    pub(crate) fn next_keys(&self, from: u64, max: usize, out: &mut Vec<u64>) {
        match self {
            Sets::Singletons { remaining } => {
                // Keys order exact copies (top byte = copy number) before
                // "any copy" members (top byte 0x7F).
                let from_member = Member::from_key(from);
                let from_slot = from >> 56;
                for copy in 0..remaining.copy_slots() {
                    if u64::from(copy) < from_slot {
                        continue;
                    }
                    let start = if u64::from(copy) == from_slot { from_member.block().0 } else { 0 };
                    let mut it = remaining.copy(copy).expect("slot below copy_slots").iter();
                    it.advance_to(start);
                    for b in it {
                        if out.len() >= max {
                            return;
                        }
                        out.push(Member::Copy(ChunkRef { block: BlockId(b), copy }).key());
                    }
                }
                let start = if matches!(from_member, Member::Any(_)) { from_member.block().0 } else { 0 };
                let mut it = remaining.any().iter();
                it.advance_to(start);
                out.extend(it.take(max.saturating_sub(out.len())).map(|b| Member::Any(BlockId(b)).key()));
            }
            Sets::Ranges { remaining, .. } | Sets::Explicit { remaining, .. } => remaining.next_keys(from, max, out),
        }
    }

    /// Removes set `key` from the outstanding sets (it was delivered or
    /// elided). Returns false if it was not outstanding.
    pub(crate) fn remove(&mut self, key: u64) -> bool {
        let removed = match self {
            Sets::Singletons { remaining } => remaining.remove(Member::from_key(key)),
            Sets::Ranges { remaining, .. } | Sets::Explicit { remaining, .. } => remaining.remove(key),
        };
        self.shrink_cover();
        removed
    }

    /// Removes the outstanding sets `keys` (strictly ascending, as
    /// [`Self::touching`] lists them); returns how many were outstanding.
    /// Singletons go in one bitmap subtraction: removing members one by one
    /// from run-compressed containers (a whole-cluster scrub) splits a run
    /// each time.
    pub(crate) fn remove_all(&mut self, keys: &[u64]) -> u64 {
        match self {
            Sets::Singletons { remaining } => remaining.subtract(&MemberBitmap::from_sorted_keys(keys)),
            Sets::Ranges { remaining, .. } | Sets::Explicit { remaining, .. } => {
                let removed = keys.iter().map(|&k| u64::from(remaining.remove(k))).sum();
                self.shrink_cover();
                removed
            }
        }
    }

    /// Rebuilds the cover of the outstanding sets' blocks (see the module
    /// invariant) once fewer than half of the sets it covers are left. Each
    /// rebuild reads half the sets the last one covered, so the work stays
    /// linear in the sets declared.
    fn shrink_cover(&mut self) {
        match self {
            Sets::Singletons { .. } => {}
            Sets::Ranges { starts, lens, remaining, declared_blocks, covered } => {
                let left = remaining.len();
                if left * 2 < *covered {
                    let outstanding = remaining.iter().map(|i| {
                        let start = starts[i as usize];
                        start..start + u64::from(lens.get(i as usize))
                    });
                    *declared_blocks = blocks_of(outstanding);
                    *covered = left;
                }
            }
            Sets::Explicit { sets, remaining } => {
                if remaining.len() * 2 < sets.indexed_sets() {
                    sets.reindex(remaining.iter());
                }
            }
        }
    }

    /// Approximate memory held, for the planner's own accounting.
    pub(crate) fn heap_bytes(&self) -> u64 {
        match self {
            Sets::Singletons { remaining } => remaining.heap_bytes(),
            Sets::Ranges { starts, lens, remaining, declared_blocks, .. } => {
                (starts.capacity() * 8 + lens.heap_bytes()) as u64
                    + remaining.heap_bytes()
                    + declared_blocks.serialized_size() as u64
            }
            Sets::Explicit { sets, remaining } => sets.heap_bytes() + remaining.heap_bytes(),
        }
    }
}

/// The lengths of a range store's ranges: one number when they are all
/// the same (whole files, file prefixes), which saves 4 bytes a range.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Lens {
    Uniform(u32),
    Each(Vec<u32>),
}

impl Lens {
    fn of(ranges: &[BlockRange]) -> Lens {
        match ranges.first() {
            Some(first) if ranges.iter().all(|r| r.len == first.len) => Lens::Uniform(first.len),
            _ => Lens::Each(ranges.iter().map(|r| r.len).collect()),
        }
    }

    #[inline]
    fn get(&self, i: usize) -> u32 {
        match self {
            Lens::Uniform(len) => *len,
            Lens::Each(lens) => lens[i],
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Lens::Uniform(_) => 0,
            Lens::Each(lens) => lens.capacity() * 4,
        }
    }
}

/// Outstanding ranges up to which [`Sets::touching`] probes each range
/// instead of intersecting bitmaps.
const RANGE_PROBE_LIMIT: u64 = 1 << 16;

/// The outstanding sets of a range or explicit store, by index: one bit
/// per set declared (a set itself takes at least 12 bytes), so a lookup or
/// a removal is one word, where a roaring bitmap of a shrinking range
/// searches split runs.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Outstanding {
    #[serde(with = "crate::bits_serde")]
    bits: FixedBitSet,
    count: u64,
}

impl Outstanding {
    fn all(sets: usize) -> Outstanding {
        let mut bits = FixedBitSet::with_capacity(sets);
        bits.insert_range(..);
        Outstanding { bits, count: sets as u64 }
    }

    fn len(&self) -> u64 {
        self.count
    }

    fn contains(&self, set: u64) -> bool {
        usize::try_from(set).is_ok_and(|i| self.bits.contains(i))
    }

    /// Returns whether `set` was outstanding.
    fn remove(&mut self, set: u64) -> bool {
        let was = self.contains(set);
        if was {
            self.bits.set(set as usize, false);
            self.count -= 1;
        }
        was
    }

    /// Appends outstanding sets `>= from`, ascending, until `out` holds `max`.
    fn next_keys(&self, from: u64, max: usize, out: &mut Vec<u64>) {
        let words = self.bits.as_slice();
        let Ok(from) = usize::try_from(from) else { return };
        const BITS: usize = usize::BITS as usize;
        let mut word = from / BITS;
        // Bits below `from` in its word are masked off.
        let mut bits = words.get(word).map_or(0, |&w| w & (usize::MAX << (from % BITS)));
        while out.len() < max {
            if bits == 0 {
                word += 1;
                match words.get(word) {
                    Some(&w) => bits = w,
                    None => return,
                }
                continue;
            }
            out.push((word * BITS + bits.trailing_zeros() as usize) as u64);
            bits &= bits - 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits.ones().map(|i| i as u64)
    }

    fn heap_bytes(&self) -> u64 {
        std::mem::size_of_val(self.bits.as_slice()) as u64
    }
}

/// The blocks of `ranges`, which ascend.
fn blocks_of(ranges: impl Iterator<Item = std::ops::Range<u64>>) -> RoaringTreemap {
    let mut blocks = RoaringTreemap::new();
    for r in ranges {
        blocks.insert_range(r);
    }
    blocks.optimize();
    blocks
}

/// Whether `bitmap` holds nothing in `range` (one seek; counting the range
/// would scan whole bitmap containers).
pub(crate) fn none_in(bitmap: &RoaringTreemap, range: std::ops::Range<u64>) -> bool {
    let mut it = bitmap.iter();
    it.advance_to(range.start);
    it.next().is_none_or(|b| b >= range.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, len: u32) -> BlockRange {
        BlockRange { start: BlockId(start), len }
    }

    #[test]
    fn outstanding_walks_from_any_key_and_counts_removals() {
        let mut sets = Outstanding::all(200);
        assert!(sets.remove(3) && sets.remove(64) && sets.remove(130));
        assert!(!sets.remove(3), "removed once");
        assert!(!sets.remove(200) && !sets.remove(u64::MAX), "out of range");
        assert_eq!(sets.len(), 197);
        let mut out = Vec::new();
        sets.next_keys(62, 4, &mut out);
        assert_eq!(out, vec![62, 63, 65, 66]);
        out.clear();
        sets.next_keys(128, 100, &mut out);
        assert_eq!(out.len(), 71);
        assert_eq!(out[..3], [128, 129, 131]);
        assert_eq!(out.last(), Some(&199));
        out.clear();
        sets.next_keys(500, 10, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn ranges_find_sets_touching_scheduled_blocks() {
        let mut sets = Sets::ranges(&[range(0, 4), range(10, 4), range(20, 4)]);
        let scheduled: RoaringTreemap = [2, 3, 21].into_iter().collect();
        let mut out = Vec::new();
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, vec![0, 2]);
        assert!(sets.remove(0));
        assert!(!sets.remove(0), "a set is removed once");
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, vec![2]);
        assert_eq!(sets.remaining_count(), 2);
    }

    #[test]
    fn ranges_touching_is_the_same_probed_or_intersected() {
        // Just over the probe limit, then under it once some are taken.
        let count = RANGE_PROBE_LIMIT + 1;
        let ranges: Vec<BlockRange> = (0..count).map(|i| range(i * 10, 3)).collect();
        let mut sets = Sets::ranges(&ranges);
        let scheduled: RoaringTreemap = (0..count * 10).filter(|b| b % 7 == 0).collect();
        let touched = |i: u64| (i * 10..i * 10 + 3).any(|b| b % 7 == 0);
        let mut out = Vec::new();
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, (0..count).filter(|&i| touched(i)).collect::<Vec<_>>(), "intersected");
        for key in (0..count).step_by(2) {
            sets.remove(key);
        }
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, (1..count).step_by(2).filter(|&i| touched(i)).collect::<Vec<_>>(), "probed");
    }

    #[test]
    fn a_range_store_covers_only_its_outstanding_ranges_once_most_are_taken() {
        // Still over the probe limit once two thirds are taken, so lookups
        // intersect the rebuilt cover.
        let count = 3 * RANGE_PROBE_LIMIT + 3;
        let ranges: Vec<BlockRange> = (0..count).map(|i| range(i * 10, 3)).collect();
        let mut sets = Sets::ranges(&ranges);
        for key in (0..count).filter(|i| i % 3 != 0) {
            assert!(sets.remove(key));
        }
        // Rebuilt once, when fewer than half the ranges were left; it still
        // covers some taken since, never an outstanding one less.
        let Sets::Ranges { declared_blocks, covered, .. } = &sets else { unreachable!() };
        let rebuilt_at = count / 2;
        assert_eq!((*covered, declared_blocks.len()), (rebuilt_at, 3 * rebuilt_at));
        let scheduled: RoaringTreemap = (0..count * 10).filter(|b| b % 7 == 0).collect();
        let touched = |i: u64| (i * 10..i * 10 + 3).any(|b| b % 7 == 0);
        let mut out = Vec::new();
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, (0..count).step_by(3).filter(|&i| touched(i)).collect::<Vec<_>>());
    }

    #[test]
    fn explicit_sets_keep_shared_blocks_until_the_last_set_goes() {
        let a = BlockSet::any_of([BlockId(1), BlockId(2)]);
        let b = BlockSet::any_of([BlockId(2), BlockId(3)]);
        let mut sets = Sets::explicit(&[a, b]);
        let scheduled: RoaringTreemap = [2].into_iter().collect();
        let mut out = Vec::new();
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, vec![0, 1]);
        sets.remove(0);
        sets.touching(&scheduled, None, &mut out);
        assert_eq!(out, vec![1], "block 2 is still needed by set 1");
    }

    #[test]
    fn singletons_walk_copies_before_any_members_and_resume_from_a_key() {
        let mut members = MemberBitmap::new();
        members.insert_any_range(0..3);
        members.insert_copy_range(1, 5..7);
        let sets = Sets::singletons(members);
        let mut out = Vec::new();
        sets.next_keys(0, 100, &mut out);
        let walked: Vec<Member> = out.iter().map(|&k| Member::from_key(k)).collect();
        assert_eq!(walked[0], Member::Copy(ChunkRef { block: BlockId(5), copy: 1 }));
        assert_eq!(walked[2], Member::Any(BlockId(0)));
        assert_eq!(walked.len(), 5);
        out.clear();
        sets.next_keys(Member::Copy(ChunkRef { block: BlockId(6), copy: 1 }).key(), 2, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(Member::from_key(out[1]), Member::Any(BlockId(0)));
    }

    #[test]
    fn singleton_copies_are_free_only_when_that_exact_copy_is_scheduled() {
        let mut members = MemberBitmap::new();
        members.insert_copy_range(1, 0..4);
        let sets = Sets::singletons(members);
        let scheduled_blocks: RoaringTreemap = [0, 1].into_iter().collect();
        let copies = vec![scheduled_blocks.clone(), [1].into_iter().collect()];
        let mut out = Vec::new();
        sets.touching(&scheduled_blocks, Some(&copies), &mut out);
        assert_eq!(out, vec![Member::Copy(ChunkRef { block: BlockId(1), copy: 1 }).key()]);
    }
}
