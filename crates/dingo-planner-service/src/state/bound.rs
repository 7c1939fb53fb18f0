//! The online lower bound on the disk reads the declared work needs
//! ([`dingo_planner::ReadLowerBound`]), fed with every declaration that
//! needs all its sets, as the service accepted it (soft state: it covers
//! the declarations made since the service started).

use super::State;
use dingo_types::{BlockId, BlockState, ChunkRef, Declaration, Member, ReadSets, Topology};

/// Blocks with open windows the bound tracks at once, at most (about
/// 100 bytes each); members beyond are left out, which keeps it a bound.
pub(crate) const MAX_BOUND_BLOCKS: usize = 4 << 20;

impl State {
    /// Adds `decl`'s members (with scrubs resolved to their chunks),
    /// declared at `now_ms`.
    pub(super) fn bound_declared(&mut self, decl: &Declaration, now_ms: u64) {
        if decl.sets_needed.is_some() {
            return;
        }
        let deadline_ms = decl.deadline.as_millis();
        let members: Box<dyn Iterator<Item = Member> + '_> = match &decl.read_sets {
            ReadSets::Sets(sets) => Box::new(sets.iter().flat_map(|s| s.members.iter().copied())),
            ReadSets::Ranges(ranges) => Box::new(ranges.iter().flat_map(|r| r.blocks().map(Member::Any))),
            ReadSets::EachMember(bitmap) => Box::new(bitmap.iter()),
            // Resolved to their chunks before they get here.
            ReadSets::ChunksOnDisk(_) | ReadSets::AllChunks => Box::new(std::iter::empty()),
        };
        for m in members {
            if let Some(info) = self.topo.block(m.block()) {
                self.lower_bound.need(m, info.size, now_ms, deadline_ms);
            }
        }
    }

    /// Retires the blocks whose windows all closed before `now_ms`.
    pub(super) fn bound_retire(&mut self, now_ms: u64) {
        let topo = &self.topo;
        self.lower_bound.retire(now_ms, |b| gone(topo, b), |b, c| lost(topo, b, c));
    }

    /// The bound now, in bytes.
    pub(crate) fn read_lower_bound_bytes(&self) -> u64 {
        let topo = &self.topo;
        self.lower_bound.bytes(|b| gone(topo, b), |b, c| lost(topo, b, c))
    }
}

fn gone(topo: &impl Topology, block: BlockId) -> bool {
    topo.block(block).is_none_or(|i| i.state == BlockState::Deleted)
}

fn lost(topo: &impl Topology, block: BlockId, copy: u8) -> bool {
    topo.copy_disk(ChunkRef { block, copy }).is_none()
}
