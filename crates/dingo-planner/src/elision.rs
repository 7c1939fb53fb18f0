//! Eliding outstanding sets whose data is gone or about to go: every
//! member's block deleted (the topology says so), or named in a deletion a
//! task announced it is about to make (anticipatory elision: the authors'
//! HDFS prototype marks blocks it is transcoding as deleted when it
//! dispatches them, so scrubs skip them).
//!
//! Invariant: a set is elided only when each of its members is gone or
//! announced: a deleted block; an announced whole block ([`Member::Any`]);
//! or, for an exact-copy member, that very copy announced. An announced
//! copy does not cover an "any copy" member: the block's other copies
//! stay readable.

use crate::declaration::DeclState;
use dingo_types::{BlockState, Member, MemberBitmap, Topology};
use roaring::RoaringTreemap;

/// Bytes of member `m` if it is gone or announced (`announced` may be
/// empty); `None` if it is still to be read.
fn gone_bytes(m: Member, topo: &impl Topology, announced: &MemberBitmap) -> Option<u64> {
    let info = topo.block(m.block());
    let size = info.as_ref().map_or(0, |i| i.size);
    let deleted = info.is_none_or(|i| i.state == BlockState::Deleted);
    let whole_block = announced.contains(Member::Any(m.block()));
    let this_copy = matches!(m, Member::Copy(_)) && announced.contains(m);
    (deleted || whole_block || this_copy).then_some(size)
}

/// Elides the outstanding sets of `d` that touch `blocks` and whose every
/// member is gone or in `announced`; returns how many, and their bytes.
pub(crate) fn elide_gone(
    d: &mut DeclState,
    topo: &impl Topology,
    blocks: &RoaringTreemap,
    announced: &MemberBitmap,
    keys: &mut Vec<u64>,
    members: &mut Vec<Member>,
) -> (u64, u64) {
    d.sets.touching(blocks, None, keys);
    let mut elided_bytes = 0;
    keys.retain(|&key| {
        members.clear();
        d.sets.members(key, members);
        let mut bytes = 0;
        let all_gone = members.iter().all(|&m| gone_bytes(m, topo, announced).inspect(|b| bytes += b).is_some());
        if all_gone {
            elided_bytes += bytes;
        }
        all_gone
    });
    let elided = d.sets.remove_all(keys);
    assert_eq!(elided, keys.len() as u64, "touching named a set of {} not outstanding", d.id);
    d.elided += elided;
    (elided, elided_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableTopology;
    use dingo_types::{BlockId, ChunkRef, DiskId, DiskModel, GroupId};

    #[test]
    fn an_announced_copy_covers_that_copy_only_and_a_block_covers_every_member() {
        let mut topo = TableTopology::new(3, DiskModel::HDD);
        topo.insert(BlockId(1), 10, GroupId(1), &[DiskId(0), DiskId(1)]);
        topo.insert(BlockId(2), 10, GroupId(2), &[DiskId(1), DiskId(2)]);
        topo.set_state(BlockId(2), BlockState::Deleted);
        let copy = |b, copy| Member::Copy(ChunkRef { block: BlockId(b), copy });
        let announced: MemberBitmap = [copy(1, 0)].into_iter().collect();
        assert_eq!(gone_bytes(copy(1, 0), &topo, &announced), Some(10));
        assert_eq!(gone_bytes(copy(1, 1), &topo, &announced), None, "the other copy stays");
        assert_eq!(gone_bytes(Member::Any(BlockId(1)), &topo, &announced), None, "copy 1 can be read");
        assert_eq!(gone_bytes(Member::Any(BlockId(2)), &topo, &announced), Some(10), "deleted");
        let whole: MemberBitmap = [Member::Any(BlockId(1))].into_iter().collect();
        assert_eq!(gone_bytes(copy(1, 1), &topo, &whole), Some(10));
        assert_eq!(gone_bytes(Member::Any(BlockId(9)), &topo, &MemberBitmap::new()), Some(0), "unknown is gone");
    }
}
