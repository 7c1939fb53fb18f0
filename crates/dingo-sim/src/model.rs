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

use crate::rng::SplitMix64;
use dingo_types::{
    BlockId, BlockInfo, BlockProblem, BlockRange, BlockState, ChunkRef, DiskId, DiskModel, GroupId, MemberBitmap,
    Topology,
};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Block ids per bucket of the block → region index: `1 << INDEX_SHIFT`.
const INDEX_SHIFT: u32 = 16;

/// How a scheme stores data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Redundancy {
    Replicated { copies: u8 },
    ErasureCoded { data: u8, parity: u8 },
}

impl Redundancy {
    pub const REPLICATED_3: Redundancy = Redundancy::Replicated { copies: 3 };
    pub const RS_6_9: Redundancy = Redundancy::ErasureCoded { data: 6, parity: 3 };
    pub const RS_30_33: Redundancy = Redundancy::ErasureCoded { data: 30, parity: 3 };

    /// Disks one stripe (or one replicated block) spans.
    pub fn width(self) -> u32 {
        match self {
            Redundancy::Replicated { copies } => u32::from(copies),
            Redundancy::ErasureCoded { data, parity } => u32::from(data) + u32::from(parity),
        }
    }

    /// Data blocks per stripe (1 for replication).
    pub fn data_per_stripe(self) -> u64 {
        match self {
            Redundancy::Replicated { .. } => 1,
            Redundancy::ErasureCoded { data, .. } => u64::from(data),
        }
    }

    /// Raw bytes stored per logical byte.
    pub fn overhead(self) -> f64 {
        f64::from(self.width()) / self.data_per_stripe() as f64
    }
}

/// Parameters of a model cluster. Defaults follow the paper's simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    pub raw_capacity: u64,
    pub drive_bytes: u64,
    pub disks_per_node: u32,
    /// Fraction of raw capacity in use.
    pub fill: f64,
    pub block_bytes: u64,
    /// Data blocks per file (7.5 GB files of 256 MB blocks: 30).
    pub file_blocks: u32,
    /// Schemes with their share of the used raw capacity.
    pub layout: Vec<(Redundancy, f64)>,
    pub disk_model: DiskModel,
    /// Placement groups each disk takes part in (more: smoother balance).
    pub pgs_per_disk: u32,
    pub seed: u64,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            raw_capacity: 100_000_000_000_000_000,
            drive_bytes: 24_000_000_000_000,
            disks_per_node: 36,
            fill: 0.8,
            block_bytes: 256_000_000,
            file_blocks: 30,
            layout: vec![(Redundancy::REPLICATED_3, 0.25), (Redundancy::RS_6_9, 0.375), (Redundancy::RS_30_33, 0.375)],
            disk_model: DiskModel::HDD,
            pgs_per_disk: 64,
            seed: 1,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    #[error(
        "the cluster needs at least {needed} nodes for a stripe of width {needed}, but has {nodes}; \
         use more capacity or fewer disks per node"
    )]
    TooFewNodes { needed: u32, nodes: u32 },
    #[error("files of {file_blocks} blocks do not fill whole stripes of {data} data blocks")]
    FileNotWholeStripes { file_blocks: u32, data: u64 },
    #[error("{0}")]
    Invalid(&'static str),
}

#[derive(Clone, Debug)]
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

#[derive(Clone, Copy, Debug)]
struct Region {
    first: u64,
    scheme: usize,
    first_file: u64,
    files: u64,
    data_blocks: u64,
    stripes: u64,
    /// Global index (within the scheme) of the region's first stripe.
    stripe_base: u64,
    end: u64,
    /// The scheme's redundancy, and `stripe_base` modulo its placement
    /// groups: what a block lookup needs without going to the scheme.
    redundancy: Redundancy,
    pg_offset: u64,
}

impl Region {
    fn parity_first(&self) -> u64 {
        self.first + self.data_blocks
    }
}

/// One placement-group slot of a disk: member `position` of group `pg` of
/// scheme `scheme`.
#[derive(Clone, Copy, Debug)]
struct PgSlot {
    scheme: u8,
    position: u8,
    pg: u32,
}

/// The stripe (redundancy group) of a block: `width` members (1 for a
/// replicated block, its own group), `data` of which rebuild one, and the
/// copies each member has.
#[derive(Clone, Copy, Debug)]
pub struct StripeLoc {
    region: usize,
    stripe: u64,
    pub width: u32,
    pub data: usize,
    pub copies: u8,
}

/// Where a block sits: its region, stripe within the region, and member
/// position within the stripe.
#[derive(Clone, Copy, Debug)]
struct Locator {
    region: usize,
    stripe: u64,
    position: u32,
}

#[derive(Clone, Debug)]
pub struct ClusterModel {
    spec: ClusterSpec,
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
    dead_files: Vec<u64>,
    /// Blocks deleted one by one ([`Self::delete_blocks`]).
    loose_deleted: RoaringTreemap,
    /// `with_copy[c]`: blocks that have a copy number `c` (c ≥ 1).
    with_copy: Vec<RoaringTreemap>,
    deleted: RoaringTreemap,
    /// Chunks of blocks not deleted (raw bytes in use / block size).
    live_chunks: u64,
    failed: Vec<bool>,
}

impl ClusterModel {
    pub fn new(spec: ClusterSpec) -> Result<Self, ModelError> {
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
            let width = redundancy.width();
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
            dead_files: Vec::new(),
            loose_deleted: RoaringTreemap::new(),
            with_copy: Vec::new(),
            deleted: RoaringTreemap::new(),
            live_chunks: 0,
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

    fn index_disk_slots(&mut self) {
        let mut per_disk: Vec<Vec<PgSlot>> = vec![Vec::new(); self.disks as usize];
        for (s, scheme) in self.schemes.iter().enumerate() {
            let width = scheme.redundancy.width() as usize;
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
            Redundancy::Replicated { copies } => {
                for c in 1..copies {
                    let c = usize::from(c);
                    if self.with_copy.len() <= c {
                        self.with_copy.resize_with(c + 1, RoaringTreemap::new);
                    }
                }
                0
            }
            Redundancy::ErasureCoded { parity, .. } => stripes * u64::from(parity),
        };
        let first = self.block_count();
        if let Redundancy::Replicated { copies } = redundancy {
            for c in 1..copies {
                self.with_copy[usize::from(c)].insert_range(first..first + data_blocks);
            }
        }
        let stripe_base = self.schemes[scheme].stripes_so_far;
        self.schemes[scheme].stripes_so_far += stripes;
        self.live_chunks += stripes * u64::from(redundancy.width());
        self.schemes[scheme].live_chunks += stripes * u64::from(redundancy.width());
        self.region_firsts.push(first);
        self.region_first_files.push(first_file);
        let end = first + data_blocks + parity_blocks;
        // Buckets starting in the new region point at it (regions are
        // appended in id order, so earlier buckets are already indexed).
        while ((self.region_index.len() as u64) << INDEX_SHIFT) < end {
            self.region_index.push(self.regions.len() as u32);
        }
        self.dead_files.resize((first_file + files).div_ceil(64) as usize, 0);
        self.regions.push(Region {
            first,
            scheme,
            first_file,
            files,
            data_blocks,
            stripes,
            stripe_base,
            end: first + data_blocks + parity_blocks,
            redundancy,
            pg_offset: stripe_base % self.schemes[scheme].pgs,
        });
        first_file..first_file + files
    }

    pub fn spec(&self) -> &ClusterSpec {
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
                Redundancy::Replicated { copies } => r.data_blocks * u64::from(copies),
                Redundancy::ErasureCoded { .. } => r.end - r.first,
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
            Redundancy::Replicated { .. } => 0..0,
            Redundancy::ErasureCoded { data: k, parity } => {
                let first_stripe = (data.start.0 - r.first) / u64::from(k);
                let stripes = u64::from(data.len) / u64::from(k);
                let start = r.parity_first() + first_stripe * u64::from(parity);
                start..start + stripes * u64::from(parity)
            }
        };
        [data.start.0..data.end(), parity]
    }

    /// Whether file `file` exists and is not deleted (its first block, for
    /// files whose blocks were deleted one by one).
    pub fn file_live(&self, file: u64) -> bool {
        file < self.file_count()
            && !self.file_dead(file)
            && (self.loose_deleted.is_empty() || !self.loose_deleted.contains(self.file_blocks(file).start.0))
    }

    fn file_dead(&self, file: u64) -> bool {
        self.dead_files[(file / 64) as usize] & (1 << (file % 64)) != 0
    }

    /// Whether the block at `loc` is deleted.
    fn deleted_at(&self, b: u64, loc: &Locator) -> bool {
        let r = &self.regions[loc.region];
        let data_index = match r.redundancy {
            Redundancy::Replicated { .. } => loc.stripe,
            Redundancy::ErasureCoded { data, .. } => loc.stripe * u64::from(data),
        };
        self.file_dead(r.first_file + data_index / u64::from(self.spec.file_blocks))
            || (!self.loose_deleted.is_empty() && self.loose_deleted.contains(b))
    }

    /// What [`Topology::block`] says of block `id`, found at `loc`.
    fn block_at(&self, id: BlockId, loc: &Locator) -> BlockInfo {
        let region = &self.regions[loc.region];
        let (copies, group) = match region.redundancy {
            Redundancy::Replicated { copies } => (copies, GroupId(id.0)),
            Redundancy::ErasureCoded { data, .. } => (1, GroupId(region.first + loc.stripe * u64::from(data))),
        };
        let state = if self.deleted_at(id.0, loc) { BlockState::Deleted } else { BlockState::Sealed };
        BlockInfo { size: self.spec.block_bytes, copies, group, state }
    }

    fn mark_dead(&mut self, file: u64) {
        self.dead_files[(file / 64) as usize] |= 1 << (file % 64);
    }

    /// File-id ranges of every region stored with scheme `scheme`, oldest first.
    pub fn scheme_file_ranges(&self, scheme: usize) -> impl Iterator<Item = std::ops::Range<u64>> + '_ {
        self.regions.iter().filter(move |r| r.scheme == scheme).map(|r| r.first_file..r.first_file + r.files)
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
            self.live_chunks -= stripes * u64::from(redundancy.width());
            let scheme = self.file_scheme(file);
            self.schemes[scheme].live_chunks -= stripes * u64::from(redundancy.width());
            self.mark_dead(file);
            gone.insert_range(data);
            gone.insert_range(parity);
        }
        self.deleted |= &gone;
        gone
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

    /// Marks blocks deleted. Prefer [`Self::delete_files`] for whole files;
    /// a file counts as deleted once its first block is.
    pub fn delete_blocks(&mut self, blocks: &RoaringTreemap) {
        let new = blocks - &self.deleted;
        for b in &new {
            let Some(loc) = self.locate(b) else { continue };
            let scheme = &mut self.schemes[self.regions[loc.region].scheme];
            let chunks = match scheme.redundancy {
                Redundancy::Replicated { copies } => u64::from(copies),
                Redundancy::ErasureCoded { .. } => 1,
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

    fn locate(&self, b: u64) -> Option<Locator> {
        let mut region = *self.region_index.get((b >> INDEX_SHIFT) as usize)? as usize;
        while self.region_firsts.get(region + 1).is_some_and(|&next| next <= b) {
            region += 1;
        }
        let r = &self.regions[region];
        if b >= r.end {
            return None;
        }
        let redundancy = r.redundancy;
        let local = b - r.first;
        let (stripe, position) = if local < r.data_blocks {
            let k = redundancy.data_per_stripe();
            (local / k, (local % k) as u32)
        } else {
            let Redundancy::ErasureCoded { data, parity } = redundancy else {
                unreachable!("replicated has no parity")
            };
            let p = local - r.data_blocks;
            (p / u64::from(parity), u32::from(data) + (p % u64::from(parity)) as u32)
        };
        Some(Locator { region, stripe, position })
    }

    /// The block at member `position` of stripe `stripe` of `region`.
    fn member_block(&self, region: &Region, stripe: u64, position: u32) -> u64 {
        match self.schemes[region.scheme].redundancy {
            Redundancy::Replicated { .. } => region.first + stripe,
            Redundancy::ErasureCoded { data, parity } => {
                if position < u32::from(data) {
                    region.first + stripe * u64::from(data) + u64::from(position)
                } else {
                    region.parity_first() + stripe * u64::from(parity) + u64::from(position - u32::from(data))
                }
            }
        }
    }

    fn placement_disk(&self, region: &Region, stripe: u64, position: u32) -> u32 {
        self.placement_disks(region, stripe)[position as usize]
    }

    /// The disks of stripe `stripe` of `region`, by member position (copy
    /// number for replication). `(stripe_base + stripe) % pgs` is taken as
    /// `(pg_offset + stripe) % pgs`, the same number.
    fn placement_disks(&self, region: &Region, stripe: u64) -> &[u32] {
        let scheme = &self.schemes[region.scheme];
        let pg = (region.pg_offset + stripe) % scheme.pgs;
        let width = region.redundancy.width() as usize;
        let first = pg as usize * width;
        &scheme.pg_disks[first..first + width]
    }

    /// For each block of `blocks`, in `out` (cleared first): its first live
    /// copy and that copy's disk, as [`Topology::block_copies`] lists them;
    /// `None` if the block does not exist or every copy is lost. One
    /// region lookup per region the range crosses, not one per block.
    pub fn first_live_copies(&self, blocks: std::ops::Range<u64>, out: &mut Vec<Option<(u8, DiskId)>>) {
        out.clear();
        let mut b = blocks.start;
        while b < blocks.end {
            let Some(loc) = self.locate(b) else {
                out.resize(out.len() + (blocks.end - b) as usize, None);
                return;
            };
            let region = &self.regions[loc.region];
            let end = region.end.min(blocks.end);
            while b < end {
                let local = b - region.first;
                let (stripe, position) = match region.redundancy {
                    Redundancy::Replicated { .. } => (local, None),
                    Redundancy::ErasureCoded { data, parity } => {
                        if local < region.data_blocks {
                            (local / u64::from(data), Some((local % u64::from(data)) as usize))
                        } else {
                            let p = local - region.data_blocks;
                            (p / u64::from(parity), Some(usize::from(data) + (p % u64::from(parity)) as usize))
                        }
                    }
                };
                let placed = self.placement_disks(region, stripe);
                let live = |disk: u32| !self.failed[disk as usize];
                out.push(match position {
                    None => placed.iter().position(|&d| live(d)).map(|copy| (copy as u8, DiskId(placed[copy]))),
                    Some(p) => live(placed[p]).then_some((0, DiskId(placed[p]))),
                });
                b += 1;
            }
        }
    }

    /// The scheme storing `block`, if it exists.
    pub fn redundancy_of(&self, block: BlockId) -> Option<Redundancy> {
        self.locate(block.0).map(|loc| self.schemes[self.regions[loc.region].scheme].redundancy)
    }

    /// The stripe holding `block`, to list its members with
    /// [`Self::stripe_member`] without collecting them.
    pub fn stripe_of(&self, block: BlockId) -> Option<StripeLoc> {
        let loc = self.locate(block.0)?;
        let region = &self.regions[loc.region];
        Some(match region.redundancy {
            Redundancy::Replicated { copies } => {
                StripeLoc { region: loc.region, stripe: loc.stripe, width: 1, data: 1, copies }
            }
            r @ Redundancy::ErasureCoded { data, .. } => StripeLoc {
                region: loc.region,
                stripe: loc.stripe,
                width: r.width(),
                data: usize::from(data),
                copies: 1,
            },
        })
    }

    /// Member `position` of the stripe at `loc`, as [`Self::group_blocks`]
    /// orders them (a replicated block's only member is itself).
    pub fn stripe_member(&self, loc: &StripeLoc, position: u32) -> BlockId {
        BlockId(self.member_block(&self.regions[loc.region], loc.stripe, position))
    }

    /// Every block of the stripe (redundancy group) holding `block`, data
    /// members first; a replicated block is its own group.
    pub fn group_blocks(&self, block: BlockId) -> Vec<BlockId> {
        let Some(loc) = self.locate(block.0) else { return Vec::new() };
        let region = &self.regions[loc.region];
        match self.schemes[region.scheme].redundancy {
            Redundancy::Replicated { .. } => vec![block],
            r @ Redundancy::ErasureCoded { .. } => {
                (0..r.width()).map(|p| BlockId(self.member_block(region, loc.stripe, p))).collect()
            }
        }
    }

    /// Live chunks placed on `disks`, whether or not they have failed.
    /// Collects block ids per copy number and turns them into bitmaps in
    /// sorted batches (repeated inserts of scattered ids would be
    /// quadratic; one list of a whole-cluster scrub would take gigabytes).
    pub fn placed_chunks(&self, disks: &[DiskId]) -> MemberBitmap {
        let mut pending: Vec<Vec<u64>> = Vec::new();
        let mut pending_len = 0;
        let mut out = MemberBitmap::new();
        for disk in disks {
            let d = disk.0 as usize;
            let slots = &self.disk_slots[self.disk_slot_offsets[d] as usize..self.disk_slot_offsets[d + 1] as usize];
            for slot in slots {
                let scheme = &self.schemes[usize::from(slot.scheme)];
                let copy = match scheme.redundancy {
                    Redundancy::Replicated { .. } => slot.position,
                    Redundancy::ErasureCoded { .. } => 0,
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
    fn chunks_of_blocks(&self, blocks: std::ops::Range<u64>) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        for r in &self.regions {
            let (from, to) = (r.first.max(blocks.start), r.end.min(blocks.end));
            if from >= to {
                continue;
            }
            match self.schemes[r.scheme].redundancy {
                Redundancy::Replicated { copies } => {
                    for c in 0..copies {
                        out.insert_copy_range(c, from..to);
                    }
                }
                Redundancy::ErasureCoded { .. } => out.insert_copy_range(0, from..to),
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

impl Topology for ClusterModel {
    fn block(&self, id: BlockId) -> Option<BlockInfo> {
        self.locate(id.0).map(|loc| self.block_at(id, &loc))
    }

    fn block_copies(&self, id: BlockId, disks: &mut Vec<Option<DiskId>>) -> Option<BlockInfo> {
        disks.clear();
        let loc = self.locate(id.0)?;
        let info = self.block_at(id, &loc);
        let region = &self.regions[loc.region];
        let live = |disk: u32| (!self.failed[disk as usize]).then_some(DiskId(disk));
        let placed = self.placement_disks(region, loc.stripe);
        match region.redundancy {
            Redundancy::Replicated { .. } => disks.extend(placed.iter().map(|&disk| live(disk))),
            Redundancy::ErasureCoded { .. } => disks.push(live(placed[loc.position as usize])),
        }
        Some(info)
    }

    fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId> {
        let loc = self.locate(chunk.block.0)?;
        let region = &self.regions[loc.region];
        let position = match self.schemes[region.scheme].redundancy {
            Redundancy::Replicated { copies } if chunk.copy < copies => u32::from(chunk.copy),
            Redundancy::ErasureCoded { .. } if chunk.copy == 0 => loc.position,
            _ => return None,
        };
        let disk = self.placement_disk(region, loc.stripe, position);
        (!self.failed[disk as usize]).then_some(DiskId(disk))
    }

    fn disk_count(&self) -> u32 {
        self.disks
    }

    fn disk_model(&self, _disk: DiskId) -> DiskModel {
        self.spec.disk_model
    }

    fn chunks_on_disk(&self, disk: DiskId) -> MemberBitmap {
        if self.failed[disk.0 as usize] { MemberBitmap::new() } else { self.placed_chunks(&[disk]) }
    }

    fn all_chunks(&self) -> MemberBitmap {
        let mut out = self.chunks_of_blocks(0..self.block_count());
        let failed: Vec<DiskId> = (0..self.disks).filter(|&d| self.failed[d as usize]).map(DiskId).collect();
        out.subtract(&self.placed_chunks(&failed));
        out
    }

    fn check_range(&self, range: BlockRange) -> Result<(), BlockProblem> {
        if range.end() > self.block_count() {
            return Err(BlockProblem::Unknown(BlockId(range.start.0.max(self.block_count()))));
        }
        if self.deleted.range_cardinality(range.start.0..range.end()) > 0 {
            let mut it = self.deleted.iter();
            it.advance_to(range.start.0);
            return Err(BlockProblem::Deleted(BlockId(it.next().unwrap_or(range.start.0))));
        }
        Ok(())
    }

    fn check_members(&self, members: &MemberBitmap) -> Result<(), BlockProblem> {
        let blocks = members.blocks();
        if let Some(max) = blocks.max().filter(|&m| m >= self.block_count()) {
            return Err(BlockProblem::Unknown(BlockId(max)));
        }
        if let Some(b) = (&blocks & &self.deleted).min() {
            return Err(BlockProblem::Deleted(BlockId(b)));
        }
        for copy in 1..members.copy_slots() {
            let named = members.copy(copy).expect("below copy_slots");
            let missing = match self.with_copy.get(usize::from(copy)) {
                Some(have) => named - have,
                None => named.clone(),
            };
            if let Some(b) = missing.min() {
                return Err(BlockProblem::NoSuchCopy(ChunkRef { block: BlockId(b), copy }));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::Member;

    fn small() -> ClusterModel {
        // 2 PB of 24 TB drives, 2 per node: 84 disks on 42 nodes.
        let spec = ClusterSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, ..ClusterSpec::default() };
        ClusterModel::new(spec).unwrap()
    }

    #[test]
    fn fill_and_layout_follow_the_spec() {
        let m = small();
        let raw_used = m.chunk_count() as f64 * m.spec().block_bytes as f64;
        let target = m.spec().raw_capacity as f64 * m.spec().fill;
        assert!((raw_used - target).abs() / target < 0.01, "{raw_used} vs {target}");
        assert_eq!(m.disk_count(), 84);
    }

    #[test]
    fn chunks_on_a_disk_are_exactly_the_chunks_placed_there() {
        let m = small();
        let mut seen = 0;
        for d in 0..m.disk_count() {
            for member in m.chunks_on_disk(DiskId(d)).iter() {
                let Member::Copy(chunk) = member else { panic!("disk chunks are exact copies") };
                assert_eq!(m.copy_disk(chunk), Some(DiskId(d)));
                seen += 1;
            }
        }
        assert_eq!(seen, m.chunk_count());
        assert_eq!(m.all_chunks().len(), m.chunk_count());
    }

    #[test]
    fn members_of_a_group_sit_on_distinct_nodes() {
        let m = small();
        let per_node = m.spec().disks_per_node;
        for b in (0..m.block_count()).step_by(97) {
            let block = BlockId(b);
            let info = m.block(block).unwrap();
            let mut nodes: Vec<u32> = if info.copies > 1 {
                (0..info.copies).map(|c| m.copy_disk(ChunkRef { block, copy: c }).unwrap().0 / per_node).collect()
            } else {
                let group = m.group_blocks(block);
                assert!(group.iter().all(|&g| m.block(g).unwrap().group == info.group));
                group.iter().map(|&g| m.copy_disk(ChunkRef { block: g, copy: 0 }).unwrap().0 / per_node).collect()
            };
            let n = nodes.len();
            nodes.sort_unstable();
            nodes.dedup();
            assert_eq!(nodes.len(), n, "{block} shares a node within its group");
        }
    }

    #[test]
    fn failed_disks_and_deletions_hide_chunks_and_checks_catch_them() {
        let mut m = small();
        let before = m.all_chunks().len();
        let on_disk = m.chunks_on_disk(DiskId(5)).len();
        m.fail_disk(DiskId(5));
        assert_eq!(m.all_chunks().len(), before - on_disk);
        let file = m.file_blocks(0);
        m.delete_blocks(&(file.start.0..file.end()).collect());
        assert_eq!(m.check_range(file), Err(BlockProblem::Deleted(file.start)));
        assert_eq!(m.block(file.start).unwrap().state, BlockState::Deleted);
        let past_end = BlockRange { start: BlockId(m.block_count()), len: 1 };
        assert!(matches!(m.check_range(past_end), Err(BlockProblem::Unknown(_))));
    }

    #[test]
    fn block_copies_agrees_with_block_and_copy_disk() {
        let mut m = small();
        m.fail_disk(DiskId(5));
        let file = m.file_blocks(0);
        m.delete_blocks(&(file.start.0..file.end()).collect());
        let mut disks = Vec::new();
        let mut lost = 0;
        for b in (0..m.block_count() + 2).map(BlockId) {
            let info = m.block_copies(b, &mut disks);
            assert_eq!(info, m.block(b), "{b}");
            let expected: Vec<_> =
                (0..info.map_or(0, |i| i.copies)).map(|copy| m.copy_disk(ChunkRef { block: b, copy })).collect();
            assert_eq!(disks, expected, "{b}");
            lost += disks.iter().filter(|d| d.is_none()).count();
        }
        assert!(lost > 0, "the failed disk's copies show as lost");
        // The batched lookup of first live copies agrees, across regions
        // and past the last block.
        let mut firsts = Vec::new();
        m.first_live_copies(0..m.block_count() + 2, &mut firsts);
        for (b, first) in (0..m.block_count() + 2).zip(&firsts) {
            m.block_copies(BlockId(b), &mut disks);
            let expected = (0..).zip(&disks).find_map(|(copy, d)| d.map(|d| (copy, d)));
            assert_eq!(*first, expected, "{b}");
        }
    }

    #[test]
    fn too_few_nodes_for_a_stripe_is_a_clear_error() {
        let spec = ClusterSpec { raw_capacity: 100_000_000_000_000, ..ClusterSpec::default() };
        let err = ClusterModel::new(spec).unwrap_err();
        assert!(err.to_string().contains("at least 3 nodes"), "{err}");
    }

    #[test]
    fn deleting_files_removes_exactly_their_data_and_parity_chunks() {
        let mut m = small();
        assert_eq!(m.live_chunks(), m.chunk_count());
        // One file of each scheme: its ranges cover the stripes of its blocks.
        let files: Vec<u64> = (0..m.scheme_count()).map(|s| m.scheme_file_ranges(s).next().unwrap().start).collect();
        let mut expected = RoaringTreemap::new();
        let mut chunks = 0;
        for &f in &files {
            for b in m.file_blocks(f).blocks() {
                expected.extend(m.group_blocks(b).into_iter().map(|g| g.0));
            }
            let range = m.file_blocks(f);
            chunks += match m.scheme(m.file_scheme(f)) {
                Redundancy::Replicated { copies } => u64::from(range.len) * u64::from(copies),
                r => u64::from(range.len) / r.data_per_stripe() * u64::from(r.width()),
            };
        }
        let gone = m.delete_files(&files);
        assert_eq!(gone, expected);
        for b in 0..m.block_count() {
            let deleted = m.block(BlockId(b)).unwrap().state == BlockState::Deleted;
            assert_eq!(deleted, gone.contains(b), "block {b}");
        }
        assert_eq!(m.live_chunks(), m.chunk_count() - chunks);
        assert!(files.iter().all(|&f| !m.file_live(f)));
        assert!(m.delete_files(&files).is_empty(), "deleting twice deletes nothing");
        assert_eq!(m.live_chunks(), m.chunk_count() - chunks);
    }

    #[test]
    fn added_files_land_in_a_new_region_of_their_scheme_and_replaced_disks_come_back() {
        let mut m = small();
        let before = m.live_chunks();
        let new = m.add_files(1, 4);
        assert_eq!(m.scheme_file_ranges(1).last(), Some(new.clone()));
        assert!(new.clone().all(|f| m.file_live(f) && m.file_scheme(f) == 1));
        let r = m.scheme(1);
        assert_eq!(
            m.live_chunks() - before,
            4 * u64::from(m.spec().file_blocks) / r.data_per_stripe() * u64::from(r.width())
        );
        let chunk = ChunkRef { block: m.file_blocks(new.start).start, copy: 0 };
        let disk = m.copy_disk(chunk).unwrap();
        m.fail_disk(disk);
        assert_eq!(m.copy_disk(chunk), None);
        m.replace_disk(disk);
        assert_eq!(m.copy_disk(chunk), Some(disk));
    }
}
