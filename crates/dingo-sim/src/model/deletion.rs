//! Deletion: whole files (one bit each) and loose blocks, and the live
//! chunk counts they change.

use super::layout::{Locator, stripe_disks};
use super::{ClusterModel, Redundancy, StripeShape};
use roaring::RoaringTreemap;

impl ClusterModel {
    /// Whether file `file` exists and is not deleted (its first block, for
    /// files whose blocks were deleted one by one).
    pub fn file_live(&self, file: u64) -> bool {
        file < self.file_count()
            && !self.file_dead(file)
            && (self.loose_deleted.is_empty() || !self.loose_deleted.contains(self.file_blocks(file).start.0))
    }

    pub(super) fn file_dead(&self, file: u64) -> bool {
        self.dead_files.contains(file as usize)
    }

    /// Whether the block at `loc` is deleted.
    pub(super) fn deleted_at(&self, b: u64, loc: &Locator) -> bool {
        let r = &self.regions[loc.region];
        let data_index = match r.redundancy {
            Redundancy::Replicated(_) => loc.stripe,
            Redundancy::Ec { data, .. } => loc.stripe * u64::from(data),
        };
        self.file_dead(r.first_file + data_index / u64::from(self.spec.file_blocks))
            || (!self.loose_deleted.is_empty() && self.loose_deleted.contains(b))
    }

    pub(super) fn mark_dead(&mut self, file: u64) {
        self.dead_files.insert(file as usize);
    }

    /// Deletes whole files (rewritten by GC or transcoding, or removed by
    /// their owner); returns every block id that went, for
    /// [`dingo_planner::Planner::note_deleted`]. Files already deleted are skipped.
    pub fn delete_files(&mut self, files: &[u64]) -> RoaringTreemap {
        let mut gone = RoaringTreemap::new();
        for &file in files {
            if !self.file_live(file) {
                continue;
            }
            let redundancy = self.schemes[self.file_scheme(file)].redundancy;
            let [data, parity] = self.file_block_ranges(file);
            let stripes = (data.end - data.start) / redundancy.data_per_stripe();
            let first = self.locate(data.start).expect("a live file's blocks exist");
            let region = self.regions[first.region];
            for stripe in first.stripe..first.stripe + stripes {
                for &disk in stripe_disks(&self.schemes, &region, stripe) {
                    self.disk_live_chunks[disk as usize] -= 1;
                }
            }
            self.live_chunks -= stripes * u64::from(redundancy.stripe_width());
            let scheme = self.file_scheme(file);
            self.schemes[scheme].live_chunks -= stripes * u64::from(redundancy.stripe_width());
            self.mark_dead(file);
            gone.insert_range(data);
            gone.insert_range(parity);
        }
        self.deleted |= &gone;
        gone
    }

    /// Marks blocks deleted. Prefer [`Self::delete_files`] for whole files;
    /// a file counts as deleted once its first block is.
    pub fn delete_blocks(&mut self, blocks: &RoaringTreemap) {
        let new = blocks - &self.deleted;
        for b in &new {
            let Some(loc) = self.locate(b) else { continue };
            let region = &self.regions[loc.region];
            // A replicated block's copies are its stripe's members; an
            // erasure-coded block is the one member at its position.
            let disks = stripe_disks(&self.schemes, region, loc.stripe);
            let on = match region.redundancy {
                Redundancy::Replicated(_) => disks,
                Redundancy::Ec { .. } => &disks[loc.position as usize..=loc.position as usize],
            };
            for &disk in on {
                self.disk_live_chunks[disk as usize] -= 1;
            }
            let scheme = &mut self.schemes[self.regions[loc.region].scheme];
            let chunks = match scheme.redundancy {
                Redundancy::Replicated(copies) => u64::from(copies),
                Redundancy::Ec { .. } => 1,
            };
            scheme.live_chunks -= chunks;
            self.live_chunks -= chunks;
        }
        self.loose_deleted |= &new;
        self.deleted |= new;
    }

    pub fn deleted(&self) -> &RoaringTreemap {
        &self.deleted
    }
}
