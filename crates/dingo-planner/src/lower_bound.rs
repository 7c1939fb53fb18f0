//! An online lower bound on the disk bytes the declared work needs (the
//! authors' HDFS prototype logs one; the optimal mode of DESIGN §5 exists
//! only in the simulator). A read of a block serves every declaration whose
//! window `[declared, deadline]` contains it, so the reads one block needs
//! are at least the fewest points stabbing all its windows.
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
//! that need a subset of their sets (`sets_needed`, `bytes_needed`) add
//! nothing. A block deleted before it was read, or a copy lost, may have
//! saved its last group's read, so that group is not counted for it.
//!
//! A cancelled declaration's members that were never delivered are
//! forgotten ([`ReadLowerBound::forget`]), so the bound counts only reads
//! that still happen. Windows are therefore kept per declaration, and the
//! groups are counted from them on demand; a block is retired (its count
//! frozen) only when every window closed and no declaration with a window
//! on it can still be cancelled.

use dingo_types::{BlockId, DeclarationId, Member};
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

/// One member's window: a read of the block (of `copy`, if set) within
/// `[start_ms, deadline_ms]`, for declaration `decl`.
#[derive(Clone, Copy, Debug)]
struct Window {
    decl: DeclarationId,
    copy: Option<u8>,
    start_ms: u64,
    deadline_ms: u64,
}

/// What is tracked of one block with a window still open.
#[derive(Clone, Debug, Default)]
struct Tracked {
    bytes: u64,
    /// In arrival order, which is the order of their starts.
    windows: Vec<Window>,
}

impl Tracked {
    fn reads(&self, gone: bool, copy_lost: impl Fn(u8) -> bool) -> u64 {
        let mut all = Chain::default();
        // Exact-copy chains, by copy number (few: a block has a few copies).
        let mut copies: Vec<(u8, Chain)> = Vec::new();
        for w in &self.windows {
            all.add(w.start_ms, w.deadline_ms);
            if let Some(c) = w.copy {
                let i = copies.iter().position(|(copy, _)| *copy == c).unwrap_or_else(|| {
                    copies.push((c, Chain::default()));
                    copies.len() - 1
                });
                copies[i].1.add(w.start_ms, w.deadline_ms);
            }
        }
        let exact: u64 = copies.iter().map(|(c, chain)| chain.needed(gone || copy_lost(*c))).sum();
        exact.max(all.needed(gone))
    }

    /// Latest deadline of any window: the block can be retired after it.
    fn last_deadline_ms(&self) -> u64 {
        self.windows.iter().map(|w| w.deadline_ms).max().unwrap_or(0)
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
    /// `[declared_ms, deadline_ms]` for declaration `decl`. Calls come in
    /// order of `declared_ms`.
    pub fn need(&mut self, decl: DeclarationId, member: Member, bytes: u64, declared_ms: u64, deadline_ms: u64) {
        let block = member.block();
        if !self.blocks.contains_key(&block) && self.blocks.len() >= self.max_blocks {
            self.untracked += 1;
            return;
        }
        let t = self.blocks.entry(block).or_default();
        t.bytes = bytes;
        let copy = match member {
            Member::Copy(chunk) => Some(chunk.copy),
            Member::Any(_) => None,
        };
        t.windows.push(Window { decl, copy, start_ms: declared_ms, deadline_ms });
    }

    /// Drops the window `decl` had for `member` (a member of a cancelled
    /// declaration that will not be read). Nothing happens if the block is
    /// not tracked: blocks of a declaration that can still be cancelled are
    /// never retired ([`Self::retire`]), so only untracked ones are missing.
    pub fn forget(&mut self, decl: DeclarationId, member: Member) {
        let block = member.block();
        let copy = match member {
            Member::Copy(chunk) => Some(chunk.copy),
            Member::Any(_) => None,
        };
        let Some(t) = self.blocks.get_mut(&block) else { return };
        if let Some(i) = t.windows.iter().position(|w| w.decl == decl && w.copy == copy) {
            t.windows.remove(i);
        }
        if t.windows.is_empty() {
            self.blocks.remove(&block);
        }
    }

    /// Retires blocks whose every window closed before `now_ms` and whose
    /// declarations are all past cancelling (`open(decl)` false): no later
    /// window can share a read with them, and no window of theirs can be
    /// forgotten. `gone(block)` says the block was deleted, `lost(block,
    /// copy)` that a copy is lost.
    pub fn retire(
        &mut self,
        now_ms: u64,
        open: impl Fn(DeclarationId) -> bool,
        gone: impl Fn(BlockId) -> bool,
        lost: impl Fn(BlockId, u8) -> bool,
    ) {
        let mut retired = 0;
        self.blocks.retain(|&b, t| {
            if t.last_deadline_ms() >= now_ms || t.windows.iter().any(|w| open(w.decl)) {
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
    const D: DeclarationId = DeclarationId(1);
    fn closed(_: DeclarationId) -> bool {
        false
    }

    #[test]
    fn a_cancelled_declarations_unread_members_are_forgotten() {
        let (d1, d2) = (DeclarationId(1), DeclarationId(2));
        let mut lb = ReadLowerBound::new(10);
        lb.need(d1, Member::Any(B), 100, 0, 50);
        lb.need(d2, Member::Any(B), 100, 60, 90);
        lb.need(d2, Member::Any(BlockId(8)), 10, 60, 90);
        assert_eq!(lb.bytes(never, none_lost), 210, "two groups on B, one on 8");
        lb.forget(d2, Member::Any(B));
        lb.forget(d2, Member::Any(BlockId(8)));
        assert_eq!(lb.bytes(never, none_lost), 100, "only d1's read is left");
        assert_eq!(lb.tracked_blocks(), 1, "a block with no window left is dropped");
        lb.forget(d2, Member::Any(BlockId(99)));
        assert_eq!(lb.bytes(never, none_lost), 100, "forgetting an untracked member changes nothing");
    }

    #[test]
    fn a_block_of_a_declaration_that_can_still_be_cancelled_is_not_retired() {
        let mut lb = ReadLowerBound::new(10);
        lb.need(D, Member::Any(B), 100, 0, 50);
        lb.retire(60, |_| true, never, none_lost);
        assert_eq!(lb.tracked_blocks(), 1, "its declaration is late but still open");
        lb.forget(D, Member::Any(B));
        assert_eq!(lb.bytes(never, none_lost), 0, "cancelled after its deadline: nothing to read");
        lb.need(D, Member::Any(B), 100, 70, 80);
        lb.retire(90, closed, never, none_lost);
        assert_eq!((lb.tracked_blocks(), lb.bytes(never, none_lost)), (0, 100));
    }

    #[test]
    fn overlapping_windows_share_a_read_and_disjoint_ones_do_not() {
        let mut lb = ReadLowerBound::new(10);
        lb.need(D, Member::Any(B), 100, 0, 50);
        lb.need(D, Member::Any(B), 100, 10, 80);
        assert_eq!(lb.bytes(never, none_lost), 100, "one read at 10..50 serves both");
        lb.need(D, Member::Any(B), 100, 60, 90);
        assert_eq!(lb.bytes(never, none_lost), 200, "the group closed at 50");
        lb.retire(91, closed, never, none_lost);
        assert_eq!((lb.tracked_blocks(), lb.bytes(never, none_lost)), (0, 200));
        assert_eq!(lb.bytes(|_| true, none_lost), 200, "retired bytes stay");
    }

    #[test]
    fn different_copies_are_different_reads_and_any_rides_on_them() {
        let mut lb = ReadLowerBound::new(10);
        lb.need(D, copy(0), 10, 0, 100);
        lb.need(D, copy(1), 10, 0, 100);
        lb.need(D, Member::Any(B), 10, 5, 100);
        assert_eq!(lb.bytes(never, none_lost), 20);
        assert_eq!(lb.bytes(never, |_, c| c == 1), 10, "a lost copy's read may be saved");
        assert_eq!(lb.bytes(|_| true, none_lost), 0, "a deleted block's last reads may be saved");
    }

    #[test]
    fn a_full_bound_leaves_new_blocks_out() {
        let mut lb = ReadLowerBound::new(1);
        lb.need(D, Member::Any(B), 10, 0, 5);
        lb.need(D, Member::Any(BlockId(8)), 10, 0, 5);
        lb.need(D, Member::Any(B), 10, 0, 5);
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
                lb.need(D, copy(c), 1, s, s + len);
            }
            let all = optimal_stabs(windows.iter().map(|&(s, l, _)| (s, s + l)).collect());
            let exact: u64 = (0..3)
                .map(|c| optimal_stabs(windows.iter().filter(|w| w.2 == c).map(|&(s, l, _)| (s, s + l)).collect()))
                .sum();
            prop_assert_eq!(lb.bytes(never, none_lost), exact.max(all));
            lb.retire(u64::MAX, closed, never, none_lost);
            prop_assert_eq!(lb.bytes(never, none_lost), exact.max(all));
        }
    }
}
