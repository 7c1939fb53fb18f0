//! A computed-placement cluster model.
//!
//! Block ids are laid out in *regions*, one per redundancy scheme: a region
//! holds whole files of `file_blocks` data blocks, then, for erasure-coded
//! regions, the parity blocks of its stripes. A file is therefore a
//! contiguous id range, and the stripe of a data block is arithmetic.
//!
//! Placement is Ceph-like: stripe `s` of a scheme goes to placement group
//! `s mod pgs`, and each placement group names `width` disks on distinct
//! nodes. Member `i` of a stripe (copy `i` of a replicated block) lives on
//! the group's `i`-th disk. The inverse — every chunk on a disk — walks the
//! disk's placement groups, so both directions cost no per-block memory.

mod deletion;
mod layout;
mod placement;
mod spec;
mod topology;

pub use dingo_types::Redundancy;
pub use layout::StripeLoc;
pub use spec::{ModelError, ModelSpec, REPLICATED_3, RS_6_9, RS_30_33, StripeShape};

use crate::rng::SplitMix64;
use dingo_types::{BlockId, BlockRange, DiskId};
use fixedbitset::FixedBitSet;
use layout::{INDEX_SHIFT, Region};
use placement::PgSlot;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Scheme {
    redundancy: Redundancy,
    pgs: u64,
    /// `pgs × width` disk ids: placement group `p`'s member `i` is at `p * width + i`.
    pg_disks: Vec<u32>,
    /// Stripes placed so far: the next region's first global stripe index.
    stripes_so_far: u64,
    /// Chunks of this scheme's live blocks.
    live_chunks: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterModel {
    spec: ModelSpec,
    disks: u32,
    nodes: u32,
    schemes: Vec<Scheme>,
    regions: Vec<Region>,
    /// CSR index disk → placement-group slots.
    disk_slot_offsets: Vec<u32>,
    disk_slots: Vec<PgSlot>,
    /// `regions[i].first`, kept apart so the block → region search stays in
    /// a few cache lines however many regions churn has added.
    region_firsts: Vec<u64>,
    /// `regions[i].first_file`, for the file → region search.
    region_first_files: Vec<u64>,
    /// `region_index[b >> INDEX_SHIFT]`: the region holding the first block
    /// id of that bucket, so a lookup scans from there instead of searching.
    region_index: Vec<u32>,
    /// One bit per file deleted whole ([`Self::delete_files`]): a block's
    /// state is a bit test, not a search of `deleted`.
    #[serde(with = "dingo_planner::bits_serde")]
    dead_files: FixedBitSet,
    /// Blocks deleted one by one ([`Self::delete_blocks`]).
    loose_deleted: RoaringTreemap,
    /// `with_copy[c]`: blocks that have a copy number `c` (c ≥ 1).
    with_copy: Vec<RoaringTreemap>,
    deleted: RoaringTreemap,
    /// Chunks of blocks not deleted (raw bytes in use / block size).
    live_chunks: u64,
    /// The same, per disk (by disk id): the capacity skew rebalancing acts on.
    disk_live_chunks: Vec<u64>,
    failed: Vec<bool>,
}

impl ClusterModel {
    pub fn new(spec: ModelSpec) -> Result<Self, ModelError> {
        if spec.block_bytes == 0 || spec.drive_bytes == 0 || spec.disks_per_node == 0 || spec.file_blocks == 0 {
            return Err(ModelError::Invalid("block size, drive size, disks per node and file blocks must be positive"));
        }
        if !(0.0..=1.0).contains(&spec.fill) {
            return Err(ModelError::Invalid("fill must be between 0 and 1"));
        }
        let disks = u32::try_from(spec.raw_capacity / spec.drive_bytes)
            .map_err(|_| ModelError::Invalid("too many disks"))?
            .max(1);
        let nodes = disks.div_ceil(spec.disks_per_node);
        let disks = nodes * spec.disks_per_node;
        let mut rng = SplitMix64::new(spec.seed);
        let mut schemes = Vec::new();
        for &(redundancy, _) in &spec.layout {
            let width = redundancy.stripe_width();
            if width > nodes {
                return Err(ModelError::TooFewNodes { needed: width, nodes });
            }
            if u64::from(spec.file_blocks) % redundancy.data_per_stripe() != 0 {
                return Err(ModelError::FileNotWholeStripes {
                    file_blocks: spec.file_blocks,
                    data: redundancy.data_per_stripe(),
                });
            }
            let pgs = (u64::from(disks) * u64::from(spec.pgs_per_disk) / u64::from(width)).max(1);
            let mut pg_disks = Vec::with_capacity((pgs * u64::from(width)) as usize);
            let mut chosen_nodes = Vec::with_capacity(width as usize);
            for _ in 0..pgs {
                chosen_nodes.clear();
                while chosen_nodes.len() < width as usize {
                    let node = rng.below(u64::from(nodes)) as u32;
                    if !chosen_nodes.contains(&node) {
                        chosen_nodes.push(node);
                    }
                }
                for &node in &chosen_nodes {
                    pg_disks.push(node * spec.disks_per_node + rng.below(u64::from(spec.disks_per_node)) as u32);
                }
            }
            schemes.push(Scheme { redundancy, pgs, pg_disks, stripes_so_far: 0, live_chunks: 0 });
        }
        let mut model = ClusterModel {
            disks,
            nodes,
            schemes,
            regions: Vec::new(),
            disk_slot_offsets: Vec::new(),
            disk_slots: Vec::new(),
            region_firsts: Vec::new(),
            region_first_files: Vec::new(),
            region_index: Vec::new(),
            dead_files: FixedBitSet::new(),
            loose_deleted: RoaringTreemap::new(),
            with_copy: Vec::new(),
            deleted: RoaringTreemap::new(),
            live_chunks: 0,
            disk_live_chunks: vec![0; disks as usize],
            failed: vec![false; disks as usize],
            spec,
        };
        model.index_disk_slots();
        let used = model.spec.raw_capacity as f64 * model.spec.fill;
        let file_bytes = model.spec.block_bytes as f64 * f64::from(model.spec.file_blocks);
        for scheme in 0..model.schemes.len() {
            let (redundancy, share) = model.spec.layout[scheme];
            let files = (used * share / redundancy.overhead() / file_bytes) as u64;
            model.add_files(scheme, files);
        }
        Ok(model)
    }

    /// Appends a region of `files` new files stored with scheme `scheme`;
    /// returns the range of the new files' indexes.
    pub fn add_files(&mut self, scheme: usize, files: u64) -> std::ops::Range<u64> {
        let first_file = self.file_count();
        if files == 0 {
            return first_file..first_file;
        }
        let redundancy = self.schemes[scheme].redundancy;
        let data_blocks = files * u64::from(self.spec.file_blocks);
        let stripes = data_blocks / redundancy.data_per_stripe();
        let parity_blocks = match redundancy {
            Redundancy::Replicated(copies) => {
                for c in 1..copies {
                    let c = usize::from(c);
                    if self.with_copy.len() <= c {
                        self.with_copy.resize_with(c + 1, RoaringTreemap::new);
                    }
                }
                0
            }
            Redundancy::Ec { parity, .. } => stripes * u64::from(parity),
        };
        let first = self.block_count();
        if let Redundancy::Replicated(copies) = redundancy {
            for c in 1..copies {
                self.with_copy[usize::from(c)].insert_range(first..first + data_blocks);
            }
        }
        let stripe_base = self.schemes[scheme].stripes_so_far;
        self.schemes[scheme].stripes_so_far += stripes;
        self.live_chunks += stripes * u64::from(redundancy.stripe_width());
        self.schemes[scheme].live_chunks += stripes * u64::from(redundancy.stripe_width());
        self.region_firsts.push(first);
        self.region_first_files.push(first_file);
        let end = first + data_blocks + parity_blocks;
        // Buckets starting in the new region point at it (regions are
        // appended in id order, so earlier buckets are already indexed).
        while ((self.region_index.len() as u64) << INDEX_SHIFT) < end {
            self.region_index.push(self.regions.len() as u32);
        }
        self.dead_files.grow((first_file + files) as usize);
        let region = Region {
            first,
            scheme,
            first_file,
            files,
            data_blocks,
            stripes,
            end: first + data_blocks + parity_blocks,
            redundancy,
            pg_offset: stripe_base % self.schemes[scheme].pgs,
        };
        self.count_placed(&region);
        self.regions.push(region);
        first_file..first_file + files
    }

    /// Adds a new region's chunks to the per-disk counts: stripe `s` is in
    /// placement group `(pg_offset + s) % pgs`, so each group holds
    /// `stripes / pgs` stripes, one more for the first `stripes % pgs` after
    /// the offset. One step per group (or per stripe, if fewer), not per chunk.
    fn count_placed(&mut self, region: &Region) {
        let scheme = &self.schemes[region.scheme];
        let width = region.redundancy.stripe_width() as usize;
        if region.stripes < scheme.pgs {
            for stripe in 0..region.stripes {
                for &disk in layout::stripe_disks(&self.schemes, region, stripe) {
                    self.disk_live_chunks[disk as usize] += 1;
                }
            }
            return;
        }
        let (each, extra) = (region.stripes / scheme.pgs, region.stripes % scheme.pgs);
        for (pg, disks) in scheme.pg_disks.chunks_exact(width).enumerate() {
            let after_offset = (pg as u64 + scheme.pgs - region.pg_offset) % scheme.pgs;
            let stripes = each + u64::from(after_offset < extra);
            for &disk in disks {
                self.disk_live_chunks[disk as usize] += stripes;
            }
        }
    }

    /// Chunks of live blocks stored on `disk` (failed or not).
    pub fn disk_live_chunks(&self, disk: DiskId) -> u64 {
        self.disk_live_chunks[disk.0 as usize]
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Blocks ever created (data and parity), live or deleted.
    pub fn block_count(&self) -> u64 {
        self.regions.last().map_or(0, |r| r.end)
    }

    pub fn file_count(&self) -> u64 {
        self.regions.last().map_or(0, |r| r.first_file + r.files)
    }

    /// Chunks stored (all copies and stripe members), live or deleted.
    pub fn chunk_count(&self) -> u64 {
        self.regions
            .iter()
            .map(|r| match self.schemes[r.scheme].redundancy {
                Redundancy::Replicated(copies) => r.data_blocks * u64::from(copies),
                Redundancy::Ec { .. } => r.end - r.first,
            })
            .sum()
    }

    /// The data blocks of file `file`.
    pub fn file_blocks(&self, file: u64) -> BlockRange {
        let r = &self.regions[self.file_region(file)];
        debug_assert!(file < r.first_file + r.files, "file {file} does not exist");
        let len = self.spec.file_blocks;
        BlockRange { start: BlockId(r.first + (file - r.first_file) * u64::from(len)), len }
    }

    /// The scheme index of file `file`.
    pub fn file_scheme(&self, file: u64) -> usize {
        self.regions[self.file_region(file)].scheme
    }

    fn file_region(&self, file: u64) -> usize {
        self.region_first_files.partition_point(|&f| f <= file) - 1
    }

    /// Every block id of file `file`: its data blocks and, for an
    /// erasure-coded file, the parity blocks of its stripes. Files are whole
    /// stripes, so both are contiguous ranges (the parity range may be empty).
    pub fn file_block_ranges(&self, file: u64) -> [std::ops::Range<u64>; 2] {
        let r = &self.regions[self.file_region(file)];
        let data = self.file_blocks(file);
        let parity = match self.schemes[r.scheme].redundancy {
            Redundancy::Replicated(_) => 0..0,
            Redundancy::Ec { data: k, parity } => {
                let first_stripe = (data.start.0 - r.first) / u64::from(k);
                let stripes = u64::from(data.len) / u64::from(k);
                let start = r.parity_first() + first_stripe * u64::from(parity);
                start..start + stripes * u64::from(parity)
            }
        };
        [data.start.0..data.end(), parity]
    }

    /// File-id ranges of every region stored with scheme `scheme`, oldest first.
    pub fn scheme_file_ranges(&self, scheme: usize) -> impl Iterator<Item = std::ops::Range<u64>> + '_ {
        self.regions.iter().filter(move |r| r.scheme == scheme).map(|r| r.first_file..r.first_file + r.files)
    }

    /// Chunks of live blocks: raw bytes in use divided by the block size.
    pub fn live_chunks(&self) -> u64 {
        self.live_chunks
    }

    /// Chunks of the live blocks stored with scheme `scheme`.
    pub fn scheme_live_chunks(&self, scheme: usize) -> u64 {
        self.schemes[scheme].live_chunks
    }

    pub fn scheme_count(&self) -> usize {
        self.schemes.len()
    }

    pub fn scheme(&self, scheme: usize) -> Redundancy {
        self.schemes[scheme].redundancy
    }

    pub fn fail_disk(&mut self, disk: DiskId) {
        self.failed[disk.0 as usize] = true;
    }

    /// Puts a replacement in for a failed disk: its chunks (rebuilt by
    /// reconstruction) are readable again.
    pub fn replace_disk(&mut self, disk: DiskId) {
        self.failed[disk.0 as usize] = false;
    }

    pub fn is_failed(&self, disk: DiskId) -> bool {
        self.failed[disk.0 as usize]
    }
}

#[cfg(test)]
mod tests;
