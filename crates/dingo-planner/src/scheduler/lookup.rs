//! Lookups while resolving a set: which copy of a block this quantum has
//! scheduled already, which copy to read otherwise, the blocks of a range
//! set looked up at once, and how many of a set's members are free.

use super::QuantumState;
use crate::sets::{Sets, none_in};
use dingo_types::{BlockId, BlockInfo, BlockState, DiskId, Member, Topology};

impl<T: Topology> QuantumState<'_, T> {
    /// The copy of `b` already scheduled this quantum, if any.
    pub(super) fn scheduled_copy(&self, b: BlockId) -> Option<u8> {
        if !self.scheduled.blocks.contains(b.0) {
            return None;
        }
        self.scheduled.copies.iter().position(|s| s.contains(b.0)).map(|c| c as u8)
    }

    /// Fills `range_copies` with the copy of each block of `range` already
    /// scheduled this quantum ([`Self::scheduled_copy`] of each): one seek
    /// per copy number instead of up to one membership test per copy and
    /// block (a range set is a stretch of a file, tens of blocks).
    pub(super) fn find_range_copies(&mut self, range: std::ops::Range<u64>) {
        self.range_copies.clear();
        self.range_copies.resize((range.end - range.start) as usize, None);
        // A range with no block scheduled yet (most walks) needs one seek.
        if none_in(&self.scheduled.blocks, range.clone()) {
            return;
        }
        // Highest copy first, so that the lowest scheduled copy wins.
        for (copy, scheduled) in self.scheduled.copies.iter().enumerate().rev() {
            let mut blocks = scheduled.iter();
            blocks.advance_to(range.start);
            for b in blocks.take_while(|&b| b < range.end) {
                self.range_copies[(b - range.start) as usize] = Some(copy as u8);
            }
        }
    }

    /// For an "any copy" member not yet scheduled, whose copies' disks are
    /// in `copy_disks`: the live copy on the disk with the most head-time
    /// budget left (lowest copy number on ties).
    pub(super) fn pick_copy(&self) -> Option<(u8, DiskId)> {
        (0..).zip(&self.copy_disks).filter_map(|(copy, disk)| disk.map(|disk| (copy, disk))).max_by_key(
            |&(copy, disk)| {
                let left =
                    self.budget.disk_limit_us(disk.0).saturating_sub(self.scheduled.disk_used_us[disk.0 as usize]);
                (left, std::cmp::Reverse(copy))
            },
        )
    }

    /// Block `b` and its copies' disks, into `copy_disks`: from the range
    /// looked up at once (`range_infos`, `range_disks`) when the set is
    /// the range starting at `range_start`, whose blocks are asked for in
    /// order, `range_disks_at` being where block `b`'s disks start.
    pub(super) fn block_copies(
        &mut self,
        b: BlockId,
        range_start: Option<u64>,
        range_disks_at: &mut usize,
    ) -> Option<BlockInfo> {
        let Some(start) = range_start else { return self.topo.block_copies(b, &mut self.copy_disks) };
        let info = self.range_infos[(b.0 - start) as usize];
        if let Some(info) = info {
            let copies = &self.range_disks[*range_disks_at..*range_disks_at + usize::from(info.copies)];
            self.copy_disks.clear();
            self.copy_disks.extend_from_slice(copies);
            *range_disks_at += copies.len();
        }
        info
    }

    /// Free members of a range set (blocks scheduled this quantum, which
    /// are all live) and, if `check_all`, whether every live member is free
    /// (else `false`). One range count instead of a lookup per member.
    pub(super) fn range_free(&self, range: std::ops::Range<u64>, check_all: bool) -> (u64, bool) {
        let len = range.end - range.start;
        let free = self.scheduled.blocks.range_cardinality(range.clone());
        let all_free = free == len
            || (check_all
                && range.clone().all(|b| {
                    self.scheduled.blocks.contains(b)
                        || self.topo.block(BlockId(b)).is_none_or(|info| info.state == BlockState::Deleted)
                }));
        (free, all_free)
    }

    /// Free live members of set `key`; with `only_free`, `None` as soon as
    /// one live member is not free (most sets in the free pass fail early),
    /// or, for a set needing only some members, unless that many are free.
    pub(super) fn free_members(&mut self, sets: &Sets, key: u64, only_free: bool) -> Option<u64> {
        self.members.clear();
        sets.members(key, &mut self.members);
        if let Some(needed) = sets.needed(key) {
            let free = self.members.iter().filter(|&&m| self.is_scheduled(m)).count() as u64;
            return (!only_free || free >= u64::from(needed)).then_some(free);
        }
        let mut free = 0;
        for &m in &self.members {
            // Scheduled blocks are live; only the others need a lookup.
            if self.is_scheduled(m) {
                free += 1;
            } else if only_free && self.topo.block(m.block()).is_some_and(|info| info.state != BlockState::Deleted) {
                return None;
            }
        }
        Some(free)
    }

    /// Whether member `m` is scheduled this quantum (any copy of its block,
    /// or its exact copy).
    pub(super) fn is_scheduled(&self, m: Member) -> bool {
        match m {
            Member::Any(b) => self.scheduled.blocks.contains(b.0),
            Member::Copy(c) => self.scheduled.copies.get(usize::from(c.copy)).is_some_and(|s| s.contains(c.block.0)),
        }
    }
}
