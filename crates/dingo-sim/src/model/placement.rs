//! The inverse of placement: every chunk a disk holds, found by walking
//! the disk's placement-group slots, and every chunk of a range of blocks.

use super::layout::Locator;
use super::{ClusterModel, Redundancy, StripeShape};
use dingo_types::{DiskId, MemberBitmap};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

/// One placement-group slot of a disk: member `position` of group `pg` of
/// scheme `scheme`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
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

    /// Live chunks placed on `disks`, whether or not they have failed,
    /// appended to each copy number's bitmap in block order. Several disks
    /// are split in two halves, listed on two threads and joined: a set
    /// union, the same for any split. The world lists them
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

    /// Emits the chunks in block order, so that none are collected and
    /// sorted: placement group `p` holds a region's stripes `s` with
    /// `(pg_offset + s) % pgs == p`, so each slot's stripes are an
    /// arithmetic progression of step `pgs`, and taking period after period
    /// the slots in order of their first stripe (then position) visits the
    /// stripes in ascending order. Within a region a stripe's member
    /// blocks ascend with the position (data before parity for erasure
    /// coding, whose parity blocks all follow the data), and regions are
    /// appended in block order. Collecting and radix-sorting the ids was
    /// 10 % of the 10 PB check's samples; listing in order, 6.6 % in its
    /// first form (session 17 profiles).
    fn placed_chunks_serial(&self, disks: &[DiskId]) -> MemberBitmap {
        // Every slot of the listed disks, per scheme, as (pg, position);
        // a disk listed twice adds nothing.
        let mut slots: Vec<Vec<(u64, u32)>> = vec![Vec::new(); self.schemes.len()];
        for disk in disks {
            let d = disk.0 as usize;
            for slot in &self.disk_slots[self.disk_slot_offsets[d] as usize..self.disk_slot_offsets[d + 1] as usize] {
                slots[usize::from(slot.scheme)].push((u64::from(slot.pg), u32::from(slot.position)));
            }
        }
        for scheme_slots in &mut slots {
            scheme_slots.sort_unstable();
            scheme_slots.dedup();
        }
        let mut copies: Vec<RoaringTreemap> = Vec::new();
        let mut by_first_stripe: Vec<(u64, u32)> = Vec::new();
        let mut phase: Vec<(u64, u32)> = Vec::new();
        for (index, region) in self.regions.iter().enumerate() {
            let scheme = &self.schemes[region.scheme];
            let pgs = scheme.pgs;
            // The region's first stripe in each slot's group: groups from
            // `pg_offset` on come first, in the order of `slots`.
            let sorted = &slots[region.scheme];
            let split = sorted.partition_point(|&(pg, _)| pg < region.pg_offset);
            by_first_stripe.clear();
            by_first_stripe.extend(
                sorted[split..]
                    .iter()
                    .chain(&sorted[..split])
                    .map(|&(pg, position)| ((pg + pgs - region.pg_offset) % pgs, position)),
            );
            // One ascending stream per (copy number, phase): each copy of a
            // replicated scheme; data then parity positions of a code.
            let phases: &[(u8, std::ops::Range<u32>)] = match scheme.redundancy {
                Redundancy::Replicated(n) => &(0..n).map(|c| (c, u32::from(c)..u32::from(c) + 1)).collect::<Vec<_>>(),
                Redundancy::Ec { data, parity } => {
                    &[(0, 0..u32::from(data)), (0, u32::from(data)..u32::from(data) + u32::from(parity))]
                }
            };
            for (copy, positions) in phases {
                phase.clear();
                phase.extend(by_first_stripe.iter().filter(|(_, position)| positions.contains(position)));
                if phase.is_empty() {
                    continue;
                }
                let copy = usize::from(*copy);
                if copies.len() <= copy {
                    copies.resize_with(copy + 1, RoaringTreemap::new);
                }
                let (phase, stripes) = (&phase, region.stripes);
                let blocks = (0..stripes)
                    .step_by(usize::try_from(pgs).expect("placement groups fit a usize"))
                    .flat_map(|period| {
                        phase
                            .iter()
                            .map(move |&(first, position)| (period + first, position))
                            .take_while(move |&(stripe, _)| stripe < stripes)
                    })
                    .map(|(stripe, position)| (self.member_block(region, stripe, position), stripe, position))
                    // A bit test per chunk: subtracting the deleted blocks
                    // afterwards cost more than collecting.
                    .filter(|&(block, stripe, position)| {
                        !self.deleted_at(block, &Locator { region: index, stripe, position })
                    })
                    .map(|(block, _, _)| block);
                // One check of the maximum per stream, then plain pushes.
                copies[copy].append(blocks).expect("chunks are emitted in ascending block order");
            }
        }
        let mut out = MemberBitmap::new();
        for (copy, blocks) in copies.iter().enumerate() {
            out.insert_copies(copy as u8, blocks);
        }
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
