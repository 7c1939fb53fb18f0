//! An online lower bound on the disk bytes the declared work needs (the
//! authors' HDFS prototype logs one; SPEC's optimal exists only in the
//! simulator). A read of a block serves every declaration whose window
//! `[declared, deadline]` contains it, so the reads one block needs are at
//! least the fewest points stabbing all its windows.
//!
//! Windows arrive in order of their start (declarations come in time
//! order), and for that order the greedy rule is optimal: keep the open
//! group's earliest deadline; a window starting after it opens a new
//! group (one more read), otherwise it joins the group and may pull the
//! group's deadline in. Exact-copy members (scrubbing) of different copies
//! are different reads; a read of any copy serves an any-copy member; so a
//! block needs at least `max(Σ over copies of the copy's groups, groups
//! over all its windows)` reads.
//!
//! Only members every way of doing the work reads count: declarations
//! that need a subset of their sets (`sets_needed`) add nothing. A block
//! deleted before it was read, or a copy lost, may have saved its last
//! group's read, so that group is not counted for it. The bound assumes
//! no declaration is cancelled.

use dingo_types::{BlockId, Member};
use std::collections::HashMap;

/// One chain of stabbing groups: how many, and the open one's deadline.
#[derive(Clone, Copy, Debug, Default)]
struct Chain {
    groups: u64,
    /// Earliest deadline of the open group (meaningless while `groups` is 0).
    deadline_ms: u64,
}

impl Chain {
    fn add(&mut self, start_ms: u64, deadline_ms: u64) {
        if self.groups > 0 && start_ms <= self.deadline_ms {
            self.deadline_ms = self.deadline_ms.min(deadline_ms);
        } else {
            self.groups += 1;
            self.deadline_ms = deadline_ms;
        }
    }

    /// Groups, less the last if it may have been saved.
    fn needed(&self, last_saved: bool) -> u64 {
        self.groups.saturating_sub(u64::from(last_saved))
    }
}

/// What is tracked of one block with a window still open.
#[derive(Clone, Debug, Default)]
struct Tracked {
    bytes: u64,
    all: Chain,
    /// Exact-copy chains, by copy number (few: a block has at most a few copies).
    copies: Vec<(u8, Chain)>,
    /// Latest deadline of any window: the block can be retired after it.
    last_deadline_ms: u64,
}

impl Tracked {
    fn reads(&self, gone: bool, copy_lost: impl Fn(u8) -> bool) -> u64 {
        let exact: u64 = self.copies.iter().map(|(c, chain)| chain.needed(gone || copy_lost(*c))).sum();
        exact.max(self.all.needed(gone))
    }
}

/// The bound, kept as windows arrive.
#[derive(Clone, Debug, Default)]
pub struct ReadLowerBound {
    blocks: HashMap<BlockId, Tracked>,
    /// Bytes of blocks whose windows have all closed.
    retired_bytes: u64,
    /// Members not tracked because `max_blocks` were already tracked.
    untracked: u64,
    max_blocks: usize,
}

impl ReadLowerBound {
    /// A bound tracking at most `max_blocks` blocks with open windows at
    /// once (memory); members beyond are left out, which keeps it a bound.
    pub fn new(max_blocks: usize) -> ReadLowerBound {
        ReadLowerBound { max_blocks, ..ReadLowerBound::default() }
    }

    /// `member` (of a block of `bytes`) must be read within
    /// `[declared_ms, deadline_ms]`. Calls come in order of `declared_ms`.
    pub fn need(&mut self, member: Member, bytes: u64, declared_ms: u64, deadline_ms: u64) {
        let block = member.block();
        if !self.blocks.contains_key(&block) && self.blocks.len() >= self.max_blocks {
            self.untracked += 1;
            return;
        }
        let t = self.blocks.entry(block).or_default();
        t.bytes = bytes;
        t.last_deadline_ms = t.last_deadline_ms.max(deadline_ms);
        t.all.add(declared_ms, deadline_ms);
        if let Member::Copy(chunk) = member {
            let i = match t.copies.iter().position(|(c, _)| *c == chunk.copy) {
                Some(i) => i,
                None => {
                    t.copies.push((chunk.copy, Chain::default()));
                    t.copies.len() - 1
                }
            };
            t.copies[i].1.add(declared_ms, deadline_ms);
        }
    }

    /// Retires blocks whose every window closed before `now_ms`: no later
    /// window can share a read with them. `gone(block)` says the block was
    /// deleted, `lost(block, copy)` that a copy is lost.
    pub fn retire(&mut self, now_ms: u64, gone: impl Fn(BlockId) -> bool, lost: impl Fn(BlockId, u8) -> bool) {
        let mut retired = 0;
        self.blocks.retain(|&b, t| {
            if t.last_deadline_ms >= now_ms {
                return true;
            }
            retired += t.bytes * t.reads(gone(b), |c| lost(b, c));
            false
        });
        self.retired_bytes += retired;
    }

    /// Bytes the work declared so far needs from disk, at least (blocks
    /// still open counted as they stand now).
    pub fn bytes(&self, gone: impl Fn(BlockId) -> bool, lost: impl Fn(BlockId, u8) -> bool) -> u64 {
        let open: u64 = self.blocks.iter().map(|(&b, t)| t.bytes * t.reads(gone(b), |c| lost(b, c))).sum();
        self.retired_bytes + open
    }

    /// Blocks with windows still open.
    pub fn tracked_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Members left out for lack of room.
    pub fn untracked_members(&self) -> u64 {
        self.untracked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::ChunkRef;
    use proptest::prelude::*;

    const B: BlockId = BlockId(7);
    fn copy(c: u8) -> Member {
        Member::Copy(ChunkRef { block: B, copy: c })
    }
    fn never(_: BlockId) -> bool {
        false
    }
    fn none_lost(_: BlockId, _: u8) -> bool {
        false
    }

    #[test]
    fn overlapping_windows_share_a_read_and_disjoint_ones_do_not() {
        let mut lb = ReadLowerBound::new(10);
        lb.need(Member::Any(B), 100, 0, 50);
        lb.need(Member::Any(B), 100, 10, 80);
        assert_eq!(lb.bytes(never, none_lost), 100, "one read at 10..50 serves both");
        lb.need(Member::Any(B), 100, 60, 90);
        assert_eq!(lb.bytes(never, none_lost), 200, "the group closed at 50");
        lb.retire(91, never, none_lost);
        assert_eq!((lb.tracked_blocks(), lb.bytes(never, none_lost)), (0, 200));
        assert_eq!(lb.bytes(|_| true, none_lost), 200, "retired bytes stay");
    }

    #[test]
    fn different_copies_are_different_reads_and_any_rides_on_them() {
        let mut lb = ReadLowerBound::new(10);
        lb.need(copy(0), 10, 0, 100);
        lb.need(copy(1), 10, 0, 100);
        lb.need(Member::Any(B), 10, 5, 100);
        assert_eq!(lb.bytes(never, none_lost), 20);
        assert_eq!(lb.bytes(never, |_, c| c == 1), 10, "a lost copy's read may be saved");
        assert_eq!(lb.bytes(|_| true, none_lost), 0, "a deleted block's last reads may be saved");
    }

    #[test]
    fn a_full_bound_leaves_new_blocks_out() {
        let mut lb = ReadLowerBound::new(1);
        lb.need(Member::Any(B), 10, 0, 5);
        lb.need(Member::Any(BlockId(8)), 10, 0, 5);
        lb.need(Member::Any(B), 10, 0, 5);
        assert_eq!((lb.bytes(never, none_lost), lb.untracked_members()), (10, 1));
    }

    /// The fewest points stabbing every window, offline: sort by deadline,
    /// stab at a deadline whenever a window is not yet stabbed.
    fn optimal_stabs(mut windows: Vec<(u64, u64)>) -> u64 {
        windows.sort_by_key(|w| w.1);
        let mut last: Option<u64> = None;
        let mut stabs = 0;
        for (s, d) in windows {
            if last.is_none_or(|p| p < s) {
                last = Some(d);
                stabs += 1;
            }
        }
        stabs
    }

    proptest! {
        /// For windows arriving in order of start, the online count is the
        /// offline optimum, per copy and over all windows.
        #[test]
        fn online_groups_are_the_optimal_stabbing(
            mut windows in prop::collection::vec((0u64..1000, 0u64..300, 0u8..3), 1..40)
        ) {
            windows.sort_by_key(|w| w.0);
            let mut lb = ReadLowerBound::new(10);
            for &(s, len, c) in &windows {
                lb.need(copy(c), 1, s, s + len);
            }
            let all = optimal_stabs(windows.iter().map(|&(s, l, _)| (s, s + l)).collect());
            let exact: u64 = (0..3)
                .map(|c| optimal_stabs(windows.iter().filter(|w| w.2 == c).map(|&(s, l, _)| (s, s + l)).collect()))
                .sum();
            prop_assert_eq!(lb.bytes(never, none_lost), exact.max(all));
            lb.retire(u64::MAX, never, none_lost);
            prop_assert_eq!(lb.bytes(never, none_lost), exact.max(all));
        }
    }
}
