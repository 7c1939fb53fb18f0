//! Where a block id sits: regions of whole files per scheme, stripes
//! within a region, and the placement group (hence the disks) of a stripe.

use super::{ClusterModel, Redundancy, Scheme, StripeShape};
use dingo_types::{BlockId, ChunkRef, DiskId, Member};
use serde::{Deserialize, Serialize};

/// Block ids per bucket of the block → region index: `1 << INDEX_SHIFT`.
pub(super) const INDEX_SHIFT: u32 = 16;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Region {
    pub(super) first: u64,
    pub(super) scheme: usize,
    pub(super) first_file: u64,
    pub(super) files: u64,
    pub(super) data_blocks: u64,
    pub(super) stripes: u64,
    pub(super) end: u64,
    /// The scheme's redundancy, and the index within the scheme of the
    /// region's first stripe modulo its placement groups: what a block
    /// lookup needs without going to the scheme.
    pub(super) redundancy: Redundancy,
    pub(super) pg_offset: u64,
}

impl Region {
    pub(super) fn parity_first(&self) -> u64 {
        self.first + self.data_blocks
    }
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
pub(super) struct Locator {
    pub(super) region: usize,
    pub(super) stripe: u64,
    pub(super) position: u32,
}

impl ClusterModel {
    pub(super) fn locate(&self, b: u64) -> Option<Locator> {
        let mut region = *self.region_index.get((b >> INDEX_SHIFT) as usize)? as usize;
        while self.region_firsts.get(region + 1).is_some_and(|&next| next <= b) {
            region += 1;
        }
        (b < self.regions[region].end).then(|| self.locate_in(region, b))
    }

    /// Where block `b` of region `region` sits; `b` must be in it.
    pub(super) fn locate_in(&self, region: usize, b: u64) -> Locator {
        let r = &self.regions[region];
        let redundancy = r.redundancy;
        let local = b - r.first;
        let (stripe, position) = if local < r.data_blocks {
            let k = redundancy.data_per_stripe();
            (local / k, (local % k) as u32)
        } else {
            let Redundancy::Ec { data, parity } = redundancy else { unreachable!("replicated has no parity") };
            let p = local - r.data_blocks;
            (p / u64::from(parity), u32::from(data) + (p % u64::from(parity)) as u32)
        };
        Locator { region, stripe, position }
    }

    /// The locator of block `b + 1`, given `loc`, that of block `b`, when
    /// both are in the region: a step, where [`Self::locate_in`] divides.
    pub(super) fn next_locator(&self, b: u64, loc: Locator) -> Locator {
        let r = &self.regions[loc.region];
        let next = b + 1;
        if next == r.data_blocks + r.first {
            // From the data blocks into the parity blocks.
            return self.locate_in(loc.region, next);
        }
        let (first, width) = match r.redundancy {
            Redundancy::Replicated(_) => (0, 1),
            Redundancy::Ec { data, .. } if next < r.first + r.data_blocks => (0, u32::from(data)),
            Redundancy::Ec { data, parity } => (u32::from(data), u32::from(data) + u32::from(parity)),
        };
        if loc.position + 1 == width {
            Locator { stripe: loc.stripe + 1, position: first, ..loc }
        } else {
            Locator { position: loc.position + 1, ..loc }
        }
    }

    /// The block at member `position` of stripe `stripe` of `region`.
    pub(super) fn member_block(&self, region: &Region, stripe: u64, position: u32) -> u64 {
        match self.schemes[region.scheme].redundancy {
            Redundancy::Replicated(_) => region.first + stripe,
            Redundancy::Ec { data, parity } => {
                if position < u32::from(data) {
                    region.first + stripe * u64::from(data) + u64::from(position)
                } else {
                    region.parity_first() + stripe * u64::from(parity) + u64::from(position - u32::from(data))
                }
            }
        }
    }

    pub(super) fn placement_disk(&self, region: &Region, stripe: u64, position: u32) -> u32 {
        self.placement_disks(region, stripe)[position as usize]
    }

    /// The disks of stripe `stripe` of `region`, by member position (copy
    /// number for replication): those of placement group
    /// `(pg_offset + stripe) % pgs`.
    pub(super) fn placement_disks(&self, region: &Region, stripe: u64) -> &[u32] {
        stripe_disks(&self.schemes, region, stripe)
    }

    /// For each block of `blocks`, in `out` (cleared first): its first live
    /// copy and that copy's disk, as `Topology::block_copies` lists them;
    /// `None` if the block does not exist or every copy is lost. One
    /// region lookup per region the range crosses, not one per block, and
    /// from there a step from block to block: a stripe's disks are looked
    /// up once for its run of blocks, with no division per block.
    pub fn first_live_copies(&self, blocks: std::ops::Range<u64>, out: &mut Vec<Option<(u8, DiskId)>>) {
        out.clear();
        let mut b = blocks.start;
        while b < blocks.end {
            let Some(mut loc) = self.locate(b) else {
                out.resize(out.len() + (blocks.end - b) as usize, None);
                return;
            };
            let region = &self.regions[loc.region];
            let end = region.end.min(blocks.end);
            let live = |disk: u32| !self.failed[disk as usize];
            let mut placed = self.placement_disks(region, loc.stripe);
            loop {
                out.push(match region.redundancy {
                    Redundancy::Replicated(_) => {
                        placed.iter().position(|&d| live(d)).map(|copy| (copy as u8, DiskId(placed[copy])))
                    }
                    Redundancy::Ec { .. } => {
                        let disk = placed[loc.position as usize];
                        live(disk).then_some((0, DiskId(disk)))
                    }
                });
                b += 1;
                if b == end {
                    break;
                }
                let next = self.next_locator(b - 1, loc);
                if next.stripe != loc.stripe {
                    placed = self.placement_disks(region, next.stripe);
                }
                loc = next;
            }
        }
    }

    /// What reconstruction reads to rebuild a lost chunk of `block`,
    /// appended to `out`: the block itself ("any copy") if a copy of a
    /// replicated block is on a live disk, or the first `k` other members
    /// of an erasure-coded stripe on live disks, in position order. False
    /// (nothing appended) if there are not enough. The stripe is located
    /// once, where asking each member's disk located every member again.
    pub fn stripe_survivors(&self, block: BlockId, out: &mut Vec<Member>) -> bool {
        self.survivors_into(block, false, out, |member, _, _| member).is_some()
    }

    /// Every live survivor of `block`'s stripe (for an erasure-coded block;
    /// a replicated block's one "any copy" member, as
    /// [`Self::stripe_survivors`]), and how many of them rebuild it (`k`);
    /// `None` (nothing appended) if fewer than that are live.
    pub fn stripe_all_survivors(&self, block: BlockId, out: &mut Vec<Member>) -> Option<u32> {
        self.survivors_into(block, true, out, |member, _, _| member)
    }

    /// [`Self::stripe_survivors`], each member with the chunk a read of it
    /// takes and that chunk's disk: the first live copy of a replicated
    /// block, the erasure-coded member's only copy (what `block_copies`
    /// gives for each member, without locating each again).
    pub fn stripe_survivor_reads(&self, block: BlockId, out: &mut Vec<(ChunkRef, DiskId)>) -> bool {
        self.survivors_into(block, false, out, |_, chunk, disk| (chunk, disk)).is_some()
    }

    /// The survivors of [`Self::stripe_survivors`] (with `all`, of
    /// [`Self::stripe_all_survivors`]), each made an item of `out` by `item`
    /// from the member, its chunk to read and that chunk's disk; returns how
    /// many rebuild the block, `None` if fewer are live.
    fn survivors_into<T>(
        &self,
        block: BlockId,
        all: bool,
        out: &mut Vec<T>,
        item: impl Fn(Member, ChunkRef, DiskId) -> T,
    ) -> Option<u32> {
        let start = out.len();
        let loc = self.locate(block.0)?;
        let region = &self.regions[loc.region];
        let placed = self.placement_disks(region, loc.stripe);
        let live = |disk: u32| !self.failed[disk as usize];
        let needed = match region.redundancy {
            Redundancy::Replicated(_) => {
                let copy = placed.iter().position(|&disk| live(disk))?;
                let chunk = ChunkRef { block, copy: copy as u8 };
                out.push(item(Member::Any(block), chunk, DiskId(placed[copy])));
                return Some(1);
            }
            Redundancy::Ec { data, .. } => usize::from(data),
        };
        for (position, &disk) in (0..).zip(placed) {
            if !all && out.len() - start == needed {
                break;
            }
            let b = self.member_block(region, loc.stripe, position);
            if b != block.0 && live(disk) {
                let chunk = ChunkRef { block: BlockId(b), copy: 0 };
                out.push(item(Member::Any(BlockId(b)), chunk, DiskId(disk)));
            }
        }
        if out.len() - start >= needed {
            Some(needed as u32)
        } else {
            out.truncate(start);
            None
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
            Redundancy::Replicated(copies) => {
                StripeLoc { region: loc.region, stripe: loc.stripe, width: 1, data: 1, copies }
            }
            r @ Redundancy::Ec { data, .. } => StripeLoc {
                region: loc.region,
                stripe: loc.stripe,
                width: r.stripe_width(),
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
            Redundancy::Replicated(_) => vec![block],
            r @ Redundancy::Ec { .. } => {
                (0..r.stripe_width()).map(|p| BlockId(self.member_block(region, loc.stripe, p))).collect()
            }
        }
    }
}

/// [`ClusterModel::placement_disks`], borrowing only the schemes (so the
/// model's counts can change meanwhile).
pub(super) fn stripe_disks<'a>(schemes: &'a [Scheme], region: &Region, stripe: u64) -> &'a [u32] {
    let scheme = &schemes[region.scheme];
    let pg = (region.pg_offset + stripe) % scheme.pgs;
    let width = region.redundancy.stripe_width() as usize;
    let first = pg as usize * width;
    &scheme.pg_disks[first..first + width]
}
