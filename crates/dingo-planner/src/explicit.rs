//! The compact store of arbitrary sets ([`dingo_types::ReadSets::Sets`]):
//! a reconstruction declaration names, for every chunk a failed disk
//! lost, the `k` survivors of its stripe, so at 1 EB these stores hold
//! billions of members for days. About 9 bytes a member instead of 20:
//!
//! - members: each set's first member key whole, the others as
//!   differences from the previous one (a stripe's blocks have
//!   consecutive ids within its data and within its parity: one byte each, but for the jump between them);
//! - the block → set index, sorted by block: the low 32 bits of each
//!   block and its set (8 bytes a pair), the high bits once per run of
//!   blocks that share them. It covers every outstanding set and may
//!   still name done ones: [`ExplicitSets::reindex`] rebuilds it over the
//!   outstanding sets (the caller, `Sets`, does once half of those it was
//!   built for are done), so a lookup by block costs what is outstanding,
//!   not what was declared.
//! - when no block is in two indexed sets, as in a rebuild (one set per
//!   stripe), the index keeps one entry per *run* of consecutive blocks
//!   of a set, at its first block ([`IndexKeys::Runs`]): a declared
//!   block's only set is the one whose run starts last at or below it. A
//!   stripe's data blocks are one run and its parity blocks another, so a
//!   30-of-33 rebuild set takes 2 or 3 entries instead of 32.

use crate::search::{gallop, intersection};
use dingo_types::{BlockSet, Member};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ExplicitSets {
    /// The first member key of each set.
    firsts: Vec<u64>,
    /// `deltas[ends[i - 1]..ends[i]]` (from 0 for set 0): the other members
    /// of set `i`, each as the zigzag varint of its difference from the
    /// member before.
    ends: Vec<u32>,
    deltas: Vec<u8>,
    /// What an index entry's block is.
    index_keys: IndexKeys,
    /// `(high 32 bits, first index position)` of each run of index entries
    /// whose blocks share their high bits, ascending.
    index_highs: Vec<(u32, u32)>,
    /// Index entries sorted by block, then set: the block's low 32 bits.
    index_lows: Vec<u32>,
    index_sets: Vec<u32>,
    /// Every block named by a set the index covers.
    declared_blocks: RoaringTreemap,
    /// How many sets the index covers.
    indexed_sets: usize,
    /// Each set's `needed` ([`BlockSet::needed`]), 0 for every member;
    /// empty if no set has one (most declarations).
    needed: Vec<u32>,
}

impl ExplicitSets {
    /// The caller guarantees fewer than 4G members and 4 GB of deltas
    /// (validation's limits).
    pub(crate) fn new(sets: &[BlockSet]) -> ExplicitSets {
        let mut firsts = Vec::with_capacity(sets.len());
        let mut ends = Vec::with_capacity(sets.len());
        let mut deltas = Vec::new();
        for set in sets {
            let mut previous = None;
            for m in &set.members {
                let key = m.key();
                match previous {
                    None => firsts.push(key),
                    Some(p) => push_varint(&mut deltas, zigzag(key.wrapping_sub(p) as i64)),
                }
                previous = Some(key);
            }
            if previous.is_none() {
                // Validation rejects empty sets; keep indexes aligned anyway.
                firsts.push(u64::MAX);
            }
            ends.push(u32::try_from(deltas.len()).expect("validated member count"));
        }
        deltas.shrink_to_fit();
        let needed = if sets.iter().any(|s| s.needed.is_some()) {
            sets.iter().map(|s| s.needed.unwrap_or(0)).collect()
        } else {
            Vec::new()
        };
        let mut store = ExplicitSets {
            firsts,
            ends,
            deltas,
            index_keys: IndexKeys::Members,
            index_highs: Vec::new(),
            index_lows: Vec::new(),
            index_sets: Vec::new(),
            declared_blocks: RoaringTreemap::new(),
            indexed_sets: 0,
            needed,
        };
        store.reindex(0..sets.len() as u64);
        store
    }

    /// Makes the block → set index over `sets` (ascending): by runs if
    /// no block is in two of them, else by member.
    fn build_index(&mut self, sets: &[u32]) {
        let mut blocks = Vec::new();
        // (first block, last block, set) of every run of consecutive blocks.
        let mut runs: Vec<(u64, u64, u32)> = Vec::new();
        for &set in sets {
            self.blocks(set as usize, &mut blocks);
            for (i, &b) in blocks.iter().enumerate() {
                match runs.last_mut() {
                    Some(run) if i > 0 && run.1 + 1 == b => run.1 = b,
                    _ => runs.push((b, b, set)),
                }
            }
        }
        // A stable radix sort: runs starting at the same block (which
        // overlap, so take the member index) keep their ascending order.
        radsort::sort_by_key(&mut runs, |&(first, _, _)| first);
        if runs.windows(2).all(|w| w[0].1 < w[1].0) {
            self.index_keys = IndexKeys::Runs;
            self.set_entries(runs.iter().map(|&(first, _, set)| (first, set)));
            // Disjoint and ascending: their blocks ascend too.
            let declared = runs.iter().flat_map(|&(first, last, _)| first..=last);
            self.declared_blocks = RoaringTreemap::from_sorted_iter(declared).expect("disjoint ascending runs");
        } else {
            drop(runs);
            self.index_keys = IndexKeys::Members;
            let mut index: Vec<(u64, u32)> = Vec::new();
            for &set in sets {
                self.blocks(set as usize, &mut blocks);
                index.extend(blocks.iter().map(|&b| (b, set)));
            }
            // Entries were pushed set by set, so a stable sort by block
            // alone orders them by (block, set); a radix sort, since a
            // failed disk's reconstruction names millions of members.
            radsort::sort_by_key(&mut index, |&(block, _)| block);
            self.declared_blocks =
                RoaringTreemap::from_sorted_iter(dedup_blocks(&index)).expect("sorted and deduplicated");
            self.set_entries(index.into_iter());
        }
        self.indexed_sets = sets.len();
    }

    /// Makes `entries` (sorted by block, then set) the index's.
    fn set_entries(&mut self, entries: impl ExactSizeIterator<Item = (u64, u32)>) {
        self.index_highs.clear();
        self.index_lows = Vec::with_capacity(entries.len());
        self.index_sets = Vec::with_capacity(entries.len());
        for (position, (block, set)) in entries.enumerate() {
            let high = (block >> 32) as u32;
            if self.index_highs.last().is_none_or(|&(h, _)| h != high) {
                self.index_highs.push((high, position as u32));
            }
            self.index_lows.push(block as u32);
            self.index_sets.push(set);
        }
        self.index_highs.shrink_to_fit();
    }

    /// The distinct blocks of set `i`, ascending, into `out` (cleared).
    fn blocks(&self, i: usize, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.member_keys(i).map(|key| Member::from_key(key).block().0));
        out.sort_unstable();
        out.dedup();
    }

    /// How many sets the block → set index covers.
    pub(crate) fn indexed_sets(&self) -> u64 {
        self.indexed_sets as u64
    }

    /// Rebuilds the block → set index over the `outstanding` sets only:
    /// the done sets' entries cost every lookup by block
    /// ([`Self::sets_on`]) and their memory until the declaration ends.
    pub(crate) fn reindex(&mut self, outstanding: impl Iterator<Item = u64>) {
        let sets: Vec<u32> = outstanding.map(|set| set as u32).collect();
        self.build_index(&sets);
    }

    /// How many members set `i` needs, if not every one.
    pub(crate) fn needed(&self, i: usize) -> Option<u32> {
        self.needed.get(i).copied().filter(|&n| n > 0)
    }

    pub(crate) fn len(&self) -> usize {
        self.firsts.len()
    }

    /// Appends the members of set `i` to `out`.
    pub(crate) fn members(&self, i: usize, out: &mut Vec<Member>) {
        out.extend(self.member_keys(i).map(Member::from_key));
    }

    /// The member keys of set `i`, in its order.
    fn member_keys(&self, i: usize) -> impl Iterator<Item = u64> + '_ {
        let first = Some(self.firsts[i]).filter(|&key| key != u64::MAX);
        let from = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let mut bytes = &self.deltas[from..self.ends[i] as usize];
        let mut key = first.unwrap_or(0);
        first.into_iter().chain(std::iter::from_fn(move || {
            if bytes.is_empty() {
                return None;
            }
            key = key.wrapping_add(unzigzag(read_varint(&mut bytes)) as u64);
            Some(key)
        }))
    }

    /// Calls `found` with every set the index covers (every outstanding
    /// one, and maybe some done ones) naming a block of `blocks`, block by
    /// block in ascending order (a set naming several comes once for each).
    /// Linear in the intersection: the index is searched forward from the
    /// last hit.
    pub(crate) fn sets_on(&self, blocks: &RoaringTreemap, found: impl FnMut(u32)) {
        match self.index_keys {
            IndexKeys::Members => self.sets_on_by_member(blocks, found),
            IndexKeys::Runs => self.sets_on_by_run(blocks, found),
        }
    }

    fn sets_on_by_run(&self, blocks: &RoaringTreemap, mut found: impl FnMut(u32)) {
        // `run`: the first run whose high bits are not below the block's;
        // `from`: how many entries start at or below the block. Both only
        // move forward as the blocks ascend.
        let mut run = 0;
        let mut from = 0;
        for b in intersection(&self.declared_blocks, blocks).iter() {
            let (high, low) = ((b >> 32) as u32, b as u32);
            if self.index_highs.get(run).is_some_and(|&(h, _)| h < high) {
                run += self.index_highs[run..].partition_point(|&(h, _)| h < high);
                from = self.index_highs.get(run).map_or(self.index_lows.len(), |&(_, start)| start as usize);
            }
            if self.index_highs.get(run).is_some_and(|&(h, _)| h == high) {
                let end = self.index_highs.get(run + 1).map_or(self.index_lows.len(), |&(_, start)| start as usize);
                from += gallop(&self.index_lows[from..end], |l| l <= low);
            }
            // A declared block lies in some indexed set's run, which
            // starts at or below it: `from` is at least 1.
            found(self.index_sets[from - 1]);
        }
    }

    fn sets_on_by_member(&self, blocks: &RoaringTreemap, mut found: impl FnMut(u32)) {
        let mut run = 0;
        let mut from = 0;
        for b in intersection(&self.declared_blocks, blocks).iter() {
            let (high, low) = ((b >> 32) as u32, b as u32);
            if self.index_highs[run].0 != high {
                run += self.index_highs[run..].partition_point(|&(h, _)| h < high);
                from = self.index_highs[run].1 as usize;
            }
            let end = self.index_highs.get(run + 1).map_or(self.index_lows.len(), |&(_, start)| start as usize);
            let lows = &self.index_lows[from..end];
            from += gallop(lows, |l| l < low);
            let to = from + gallop(&self.index_lows[from..end], |l| l == low);
            self.index_sets[from..to].iter().for_each(|&set| found(set));
            from = to;
        }
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        (self.firsts.capacity() * 8
            + self.ends.capacity() * 4
            + self.deltas.capacity()
            + self.index_highs.capacity() * 8
            + self.index_lows.capacity() * 4
            + self.index_sets.capacity() * 4
            + self.needed.capacity() * 4
            + self.declared_blocks.serialized_size()) as u64
    }
}

/// What the block → set index's entries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum IndexKeys {
    /// One entry per distinct (block, set) pair.
    Members,
    /// One entry per run of consecutive blocks of a set, at its first
    /// block; no block is in two indexed sets, so runs are disjoint.
    Runs,
}

fn dedup_blocks(index: &[(u64, u32)]) -> impl Iterator<Item = u64> + '_ {
    index.iter().enumerate().filter(|&(i, &(b, _))| i == 0 || index[i - 1].0 != b).map(|(_, &(b, _))| b)
}

// Zigzag LEB128, written here: a dozen lines, where the crates that have
// it (prost's encoding module, integer-encoding) would bring a protobuf or
// an IO-trait dependency into the pure planner core for two functions.

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(bytes: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[0];
        *bytes = &bytes[1..];
        v |= u64::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, ChunkRef};
    use proptest::prelude::*;

    fn member(block: u64, copy: Option<u8>) -> Member {
        match copy {
            Some(copy) => Member::Copy(ChunkRef { block: BlockId(block), copy }),
            None => Member::Any(BlockId(block)),
        }
    }

    /// Blocks around the 2^32 boundary and far apart, any copy or exact.
    fn arb_sets() -> impl Strategy<Value = Vec<BlockSet>> {
        let block = prop_oneof![0u64..64, (1u64 << 32) - 8..(1u64 << 32) + 8, (1u64 << 40)..(1u64 << 40) + 4];
        let m = (block, proptest::option::of(0u8..3)).prop_map(|(b, c)| member(b, c));
        let set = (prop::collection::vec(m, 1..6), proptest::option::of(1u32..6)).prop_map(|(members, needed)| {
            let needed = needed.map(|n| n.min(members.len() as u32));
            BlockSet { members, needed }
        });
        prop::collection::vec(set, 0..30)
    }

    proptest! {
        #[test]
        fn members_and_sets_on_blocks_match_the_plain_lists(sets in arb_sets(), probe in prop::collection::vec(
            prop_oneof![0u64..64, (1u64 << 32) - 8..(1u64 << 32) + 8, (1u64 << 40)..(1u64 << 40) + 4], 0..20)) {
            let store = ExplicitSets::new(&sets);
            prop_assert_eq!(store.len(), sets.len());
            for (i, set) in sets.iter().enumerate() {
                let mut out = Vec::new();
                store.members(i, &mut out);
                prop_assert_eq!(&out, &set.members);
                prop_assert_eq!(store.needed(i), set.needed);
            }
            let blocks: RoaringTreemap = probe.iter().copied().collect();
            let mut got = Vec::new();
            store.sets_on(&blocks, |s| got.push(s));
            got.sort_unstable();
            got.dedup();
            let want: Vec<u32> = (0..sets.len() as u32)
                .filter(|&i| sets[i as usize].members.iter().any(|m| blocks.contains(m.block().0)))
                .collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn a_reindexed_store_finds_exactly_the_outstanding_sets(sets in arb_sets(), done_mask in any::<u32>(), probe in
            prop::collection::vec(prop_oneof![0u64..64, (1u64 << 32) - 8..(1u64 << 32) + 8], 0..20)) {
            let mut store = ExplicitSets::new(&sets);
            let outstanding: Vec<u64> = (0..sets.len() as u64).filter(|&i| done_mask & (1 << i) == 0).collect();
            // Reindexed as `Sets` does: once fewer than half are left.
            let reindexed = outstanding.len() * 2 < sets.len();
            if reindexed {
                store.reindex(outstanding.iter().copied());
            }
            let blocks: RoaringTreemap = probe.iter().copied().collect();
            let mut got = Vec::new();
            store.sets_on(&blocks, |s| got.push(u64::from(s)));
            got.sort_unstable();
            got.dedup();
            let touches = |i: u64| sets[i as usize].members.iter().any(|m| blocks.contains(m.block().0));
            let want: Vec<u64> = outstanding.iter().copied().filter(|&i| touches(i)).collect();
            if reindexed {
                prop_assert_eq!(got, want, "the index covers the outstanding sets only");
            } else {
                prop_assert!(want.iter().all(|i| got.contains(i)), "every outstanding set touching is found");
            }
            for &i in &outstanding {
                let mut out = Vec::new();
                store.members(i as usize, &mut out);
                prop_assert_eq!(&out, &sets[i as usize].members);
            }
        }
    }

    /// Stripes as a rebuild names them: disjoint runs of consecutive
    /// blocks (one left out, the lost chunk's), any copy or exact, from a
    /// base below 2^32 so some cross it, listed in any order.
    fn arb_stripes() -> impl Strategy<Value = Vec<BlockSet>> {
        let stripe = (0u64..5, 1u64..8, any::<u64>(), proptest::option::of(0u8..3));
        (prop_oneof![Just(0u64), Just((1u64 << 32) - 20)], prop::collection::vec(stripe, 0..12), any::<u64>()).prop_map(
            |(base, stripes, order)| {
                let mut next = base;
                let mut sets: Vec<BlockSet> = stripes
                    .into_iter()
                    .map(|(gap, len, lost, copy)| {
                        let start = next + gap;
                        next = start + len;
                        let lost = (len > 1).then(|| start + lost % len);
                        let members = (start..start + len).filter(|&b| Some(b) != lost).map(|b| member(b, copy));
                        BlockSet { members: members.collect(), needed: None }
                    })
                    .collect();
                let len = sets.len().max(1);
                sets.rotate_left(order as usize % len);
                sets
            },
        )
    }

    proptest! {
        #[test]
        fn disjoint_stripes_are_indexed_by_run_and_found_as_by_member(sets in arb_stripes(), done_mask in any::<u32>(),
            probe in prop::collection::vec(prop_oneof![0u64..64, (1u64 << 32) - 24..(1u64 << 32) + 40], 0..30)) {
            let mut store = ExplicitSets::new(&sets);
            prop_assert_eq!(store.index_keys, IndexKeys::Runs);
            prop_assert!(store.index_lows.len() <= 2 * sets.len(), "at most two runs a stripe");
            let blocks: RoaringTreemap = probe.iter().copied().collect();
            let touches = |i: u64| sets[i as usize].members.iter().any(|m| blocks.contains(m.block().0));
            let mut got = Vec::new();
            store.sets_on(&blocks, |s| got.push(u64::from(s)));
            got.sort_unstable();
            got.dedup();
            let want: Vec<u64> = (0..sets.len() as u64).filter(|&i| touches(i)).collect();
            prop_assert_eq!(&got, &want);
            let outstanding: Vec<u64> = (0..sets.len() as u64).filter(|&i| done_mask & (1 << i) == 0).collect();
            store.reindex(outstanding.iter().copied());
            prop_assert_eq!(store.index_keys, IndexKeys::Runs);
            got.clear();
            store.sets_on(&blocks, |s| got.push(u64::from(s)));
            got.sort_unstable();
            got.dedup();
            let want: Vec<u64> = outstanding.iter().copied().filter(|&i| touches(i)).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn sets_sharing_a_block_are_indexed_by_member() {
        let sets = [BlockSet::any_of([BlockId(1), BlockId(5)]), BlockSet::any_of([BlockId(5)])];
        let store = ExplicitSets::new(&sets);
        assert_eq!(store.index_keys, IndexKeys::Members);
        let mut got = Vec::new();
        store.sets_on(&[3u64, 5].into_iter().collect(), |s| got.push(s));
        assert_eq!(got, [0, 1]);
    }

    #[test]
    fn interleaved_sets_with_no_shared_block_are_indexed_by_run() {
        let sets = [BlockSet::any_of([BlockId(1), BlockId(2), BlockId(5)]), BlockSet::any_of([BlockId(3)])];
        let store = ExplicitSets::new(&sets);
        assert_eq!(store.index_keys, IndexKeys::Runs);
        assert_eq!(store.index_lows, [1, 3, 5]);
        let mut got = Vec::new();
        store.sets_on(&[2u64, 3, 4, 5].into_iter().collect(), |s| got.push(s));
        assert_eq!(got, [0, 1, 0]);
    }

    #[test]
    fn a_stripe_costs_about_a_byte_a_member_after_its_first() {
        let sets: Vec<BlockSet> = (0..1000u64).map(|s| BlockSet::any_of((s * 40..s * 40 + 30).map(BlockId))).collect();
        let store = ExplicitSets::new(&sets);
        assert_eq!(store.deltas.len(), 1000 * 29);
        let mut out = Vec::new();
        store.members(999, &mut out);
        assert_eq!(out, sets[999].members);
    }

    #[test]
    fn varints_round_trip_extremes() {
        for v in [0i64, 1, -1, 63, -64, 64, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut buf = Vec::new();
            push_varint(&mut buf, zigzag(v));
            let mut bytes = &buf[..];
            assert_eq!(unzigzag(read_varint(&mut bytes)), v);
            assert!(bytes.is_empty());
        }
    }
}
