//! The inverse of placement: every chunk a disk holds, found by walking
//! the disk's placement-group slots, and every chunk of a range of blocks.

use super::layout::Locator;
use super::{ClusterModel, Redundancy, StripeShape};
use dingo_types::{DiskId, MemberBitmap};
use roaring::RoaringTreemap;

/// One placement-group slot of a disk: member `position` of group `pg` of
/// scheme `scheme`.
#[derive(Clone, Copy, Debug)]
pub(super) struct PgSlot {
    pub(super) scheme: u8,
    pub(super) position: u8,
    pub(super) pg: u32,
}

impl ClusterModel {
    pub(super) fn index_disk_slots(&mut self) {
        let mut per_disk: Vec<Vec<PgSlot>> = vec![Vec::new(); self.disks as usize];
        for (s, scheme) in self.schemes.iter().enumerate() {
            let width = scheme.redundancy.stripe_width() as usize;
            for (i, &disk) in scheme.pg_disks.iter().enumerate() {
                per_disk[disk as usize].push(PgSlot {
                    scheme: s as u8,
                    position: (i % width) as u8,
                    pg: (i / width) as u32,
                });
            }
        }
        self.disk_slot_offsets = Vec::with_capacity(per_disk.len() + 1);
        self.disk_slot_offsets.push(0);
        for slots in per_disk {
            self.disk_slots.extend(slots);
            self.disk_slot_offsets.push(self.disk_slots.len() as u32);
        }
    }

    /// Live chunks placed on `disks`, whether or not they have failed.
    /// Collects block ids per copy number and turns them into bitmaps in
    /// sorted batches (repeated inserts of scattered ids would be
    /// quadratic; one list of a whole-cluster scrub would take gigabytes).
    /// Several disks are split in two halves, listed on two threads and
    /// joined: a set union, the same for any split. The world lists them
    /// on the simulation's critical path (scrubbing's and rebalancing's
    /// disks every quantum).
    pub fn placed_chunks(&self, disks: &[DiskId]) -> MemberBitmap {
        if disks.len() < 2 {
            return self.placed_chunks_serial(disks);
        }
        let (front, back) = disks.split_at(disks.len() / 2);
        let (mut out, other) = std::thread::scope(|s| {
            let back = s.spawn(|| self.placed_chunks_serial(back));
            let front = self.placed_chunks_serial(front);
            (front, back.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        out.insert_any(other.any());
        for copy in 0..other.copy_slots() {
            out.insert_copies(copy, other.copy(copy).expect("below copy_slots"));
        }
        out
    }

    fn placed_chunks_serial(&self, disks: &[DiskId]) -> MemberBitmap {
        let mut pending: Vec<Vec<u64>> = Vec::new();
        let mut pending_len = 0;
        let mut out = MemberBitmap::new();
        for disk in disks {
            let d = disk.0 as usize;
            let slots = &self.disk_slots[self.disk_slot_offsets[d] as usize..self.disk_slot_offsets[d + 1] as usize];
            for slot in slots {
                let scheme = &self.schemes[usize::from(slot.scheme)];
                let copy = match scheme.redundancy {
                    Redundancy::Replicated(_) => slot.position,
                    Redundancy::Ec { .. } => 0,
                };
                if pending.len() <= usize::from(copy) {
                    pending.resize_with(usize::from(copy) + 1, Vec::new);
                }
                for (index, region) in self.regions.iter().enumerate() {
                    if region.scheme != usize::from(slot.scheme) {
                        continue;
                    }
                    let pg = u64::from(slot.pg);
                    let mut stripe = (pg + scheme.pgs - region.stripe_base % scheme.pgs) % scheme.pgs;
                    let position = u32::from(slot.position);
                    while stripe < region.stripes {
                        let block = self.member_block(region, stripe, position);
                        // A bit test per chunk: subtracting the deleted
                        // blocks afterwards cost more than collecting.
                        if !self.deleted_at(block, &Locator { region: index, stripe, position }) {
                            pending[usize::from(copy)].push(block);
                            pending_len += 1;
                        }
                        stripe += scheme.pgs;
                    }
                }
            }
            if pending_len >= PLACED_CHUNKS_BATCH {
                flush_sorted(&mut pending, &mut out);
                pending_len = 0;
            }
        }
        flush_sorted(&mut pending, &mut out);
        out
    }

    /// Exact-copy members of every live chunk of live blocks in `blocks`.
    pub(super) fn chunks_of_blocks(&self, blocks: std::ops::Range<u64>) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        for r in &self.regions {
            let (from, to) = (r.first.max(blocks.start), r.end.min(blocks.end));
            if from >= to {
                continue;
            }
            match self.schemes[r.scheme].redundancy {
                Redundancy::Replicated(copies) => {
                    for c in 0..copies {
                        out.insert_copy_range(c, from..to);
                    }
                }
                Redundancy::Ec { .. } => out.insert_copy_range(0, from..to),
            }
        }
        out.remove_blocks(&self.deleted);
        out
    }
}

/// Block ids [`ClusterModel::placed_chunks`] collects before it merges
/// them into its bitmaps (8 bytes each: 128 MB).
const PLACED_CHUNKS_BATCH: usize = 1 << 24;

/// Merges the block ids collected per copy number into `out` and empties the lists.
fn flush_sorted(pending: &mut [Vec<u64>], out: &mut MemberBitmap) {
    for (copy, blocks) in pending.iter_mut().enumerate() {
        if blocks.is_empty() {
            continue;
        }
        // A radix sort: the lists run to millions of ids, where a
        // comparison sort took most of a rebalancing job's set-up.
        radsort::sort(blocks);
        blocks.dedup();
        let bitmap = RoaringTreemap::from_sorted_iter(blocks.drain(..)).expect("sorted and deduplicated");
        out.insert_copies(copy as u8, &bitmap);
    }
}
