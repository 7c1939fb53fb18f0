//! The online lower bound on the disk reads the declared work needs
//! ([`dingo_planner::ReadLowerBound`]), fed with every declaration that
//! needs all its sets, as the service accepted it. It is soft state: it
//! covers what was declared since the service started, plus, after a
//! restart, what the restored declarations have left to deliver. A
//! cancelled declaration's undelivered members are taken out again.

use super::State;
use crate::records::Phase;
use dingo_types::{BlockId, BlockState, ChunkRef, Declaration, DeclarationId, Member, ReadSets, Topology};

/// Blocks with open windows the bound tracks at once, at most (about
/// 100 bytes each); members beyond are left out, which keeps it a bound.
pub(crate) const MAX_BOUND_BLOCKS: usize = 4 << 20;

impl State {
    /// Adds the members of `decl` (accepted as `id`, with scrubs resolved
    /// to their chunks), declared at `now_ms`.
    pub(super) fn bound_declared(&mut self, id: DeclarationId, decl: &Declaration, now_ms: u64) {
        if decl.sets_needed.is_some() || decl.bytes_needed.is_some() {
            return;
        }
        let deadline_ms = decl.deadline.as_millis();
        let members: Box<dyn Iterator<Item = Member> + '_> = match &decl.read_sets {
            // A set needing only some of its members needs none of them in particular.
            ReadSets::Sets(sets) => {
                Box::new(sets.iter().filter(|s| s.needed.is_none()).flat_map(|s| s.members.iter().copied()))
            }
            ReadSets::Ranges(ranges) => Box::new(ranges.iter().flat_map(|r| r.blocks().map(Member::Any))),
            ReadSets::EachMember(bitmap) => Box::new(bitmap.iter()),
            // Resolved to their chunks before they get here.
            ReadSets::ChunksOnDisk(_) | ReadSets::AllChunks => Box::new(std::iter::empty()),
        };
        for m in members {
            if let Some(info) = self.topo.block(m.block()) {
                self.lower_bound.need(id, m, info.size, now_ms, deadline_ms);
            }
        }
    }

    /// Adds what the restored declaration `id` (needing all its sets, due
    /// at `deadline_ms`) has left to deliver, as if declared at `now_ms`
    /// (the restart): what was delivered before was read, if at all, by the
    /// service's previous run, whose reads this run does not count.
    pub(super) fn bound_restored(&mut self, id: DeclarationId, deadline_ms: u64, now_ms: u64) {
        let mut members = Vec::new();
        self.planner.undelivered_members(id, &mut members);
        // A late declaration is still read, from now on.
        let deadline_ms = deadline_ms.max(now_ms);
        for m in members {
            if let Some(info) = self.topo.block(m.block()) {
                self.lower_bound.need(id, m, info.size, now_ms, deadline_ms);
            }
        }
    }

    /// Takes out the members declaration `id` (being cancelled) was never
    /// delivered: they will not be read. Call before the core drops it.
    pub(super) fn bound_cancelled(&mut self, id: DeclarationId) {
        let mut members = Vec::new();
        self.planner.undelivered_members(id, &mut members);
        for m in members {
            self.lower_bound.forget(id, m);
        }
    }

    /// Retires the blocks whose windows all closed before `now_ms` and
    /// whose declarations can no longer be cancelled.
    pub(super) fn bound_retire(&mut self, now_ms: u64) {
        let (topo, decls) = (&self.topo, &self.decls);
        let open = |id: DeclarationId| decls.get(&id.0).is_some_and(|d| d.phase == Phase::Live);
        self.lower_bound.retire(now_ms, open, |b| gone(topo, b), |b, c| lost(topo, b, c));
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
