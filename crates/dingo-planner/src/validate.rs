//! Declaration validation: every check runs before the planner changes
//! anything, so a rejected declaration leaves no trace.

use crate::config::Limits;
use crate::error::DeclareError;
// Past it a block cannot be held in a schedule ([`crate::ChunkRead`]), so the
// planner knows no such block, whatever the topology says.
use crate::scheduler::MAX_SCHEDULED_BLOCK_ID;
use crate::sets::Sets;
use dingo_types::{BlockId, BlockProblem, BlockRange, BlockSet, Declaration, ReadSets, Timestamp, Topology};
use rustc_hash::FxHashSet;

/// Checks `decl` against the topology and limits and builds its compact
/// set store. `ChunksOnDisk` and `AllChunks` are resolved here: a
/// declaration is a snapshot of the blocks that exist when it is made.
pub(crate) fn validate(
    decl: &Declaration,
    topo: &impl Topology,
    now: Timestamp,
    limits: &Limits,
) -> Result<Sets, DeclareError> {
    check(decl, topo, now, limits)?;
    finish(decl, Sets::build(&decl.read_sets, topo), topo)
}

/// [`validate`] of a declaration the caller gives up: a member bitmap
/// becomes the set store itself instead of a copy of it.
pub(crate) fn validate_owned(
    decl: Declaration,
    topo: &impl Topology,
    now: Timestamp,
    limits: &Limits,
) -> Result<(Sets, Declaration), DeclareError> {
    check(&decl, topo, now, limits)?;
    let Declaration { task, read_sets, sets_needed, bytes_needed, deadline } = decl;
    let (sets, read_sets) = match read_sets {
        ReadSets::EachMember(members) => (Sets::singletons(members), ReadSets::EachMember(Default::default())),
        other => (Sets::build(&other, topo), other),
    };
    let decl = Declaration { task, read_sets, sets_needed, bytes_needed, deadline };
    Ok((finish(&decl, sets, topo)?, decl))
}

/// Every check of [`validate`] that comes before building the set store.
fn check(decl: &Declaration, topo: &impl Topology, now: Timestamp, limits: &Limits) -> Result<(), DeclareError> {
    if decl.deadline <= now {
        return Err(DeclareError::DeadlineNotInFuture { deadline: decl.deadline, now });
    }
    match &decl.read_sets {
        ReadSets::Sets(sets) => check_explicit(sets, topo, limits)?,
        ReadSets::Ranges(ranges) => check_ranges(ranges, topo, limits)?,
        ReadSets::EachMember(members) => {
            if let Some(max) = members.blocks().max().filter(|&b| b > MAX_SCHEDULED_BLOCK_ID) {
                return Err(DeclareError::BadMember(BlockProblem::Unknown(dingo_types::BlockId(max))));
            }
            topo.check_members(members).map_err(DeclareError::BadMember)?;
        }
        ReadSets::ChunksOnDisk(disk) => {
            if disk.0 >= topo.disk_count() {
                return Err(DeclareError::UnknownDisk(*disk));
            }
        }
        ReadSets::AllChunks => {}
    }
    Ok(())
}

/// Checks the set store built for `decl` against its count of sets (or
/// bytes) needed.
fn finish(decl: &Declaration, sets: Sets, topo: &impl Topology) -> Result<Sets, DeclareError> {
    let available = sets.remaining_count();
    if available == 0 {
        return Err(DeclareError::NoSets);
    }
    match (decl.sets_needed, decl.bytes_needed) {
        (Some(_), Some(_)) => Err(DeclareError::SetsAndBytesNeeded),
        (Some(0), None) => Err(DeclareError::ZeroSetsNeeded),
        (Some(needed), None) if needed > available => Err(DeclareError::TooManySetsNeeded { needed, available }),
        (None, Some(0)) => Err(DeclareError::ZeroBytesNeeded),
        (None, Some(needed)) => {
            let available = total_bytes(&sets, topo);
            if needed > available { Err(DeclareError::TooManyBytesNeeded { needed, available }) } else { Ok(sets) }
        }
        _ => Ok(sets),
    }
}

/// Bytes of every set's blocks (a block named by two sets counts twice:
/// each set delivers it).
fn total_bytes(sets: &Sets, topo: &impl Topology) -> u64 {
    let (mut keys, mut members) = (Vec::new(), Vec::new());
    let (mut from, mut bytes) = (0, 0u64);
    loop {
        keys.clear();
        sets.next_keys(from, 4096, &mut keys);
        let Some(&last) = keys.last() else { return bytes };
        for &key in &keys {
            members.clear();
            sets.members(key, &mut members);
            bytes = bytes.saturating_add(crate::declaration::live_bytes(&members, topo));
        }
        from = last + 1;
    }
}

fn too_large(what: &'static str, count: u64, limit: u64) -> Result<(), DeclareError> {
    if count > limit { Err(DeclareError::TooLarge { what, count, limit }) } else { Ok(()) }
}

fn check_explicit(sets: &[BlockSet], topo: &impl Topology, limits: &Limits) -> Result<(), DeclareError> {
    if sets.is_empty() {
        return Err(DeclareError::NoSets);
    }
    too_large("sets", sets.len() as u64, limits.max_explicit_sets)?;
    let total: u64 = sets.iter().map(|s| s.members.len() as u64).sum();
    too_large("members", total, limits.max_explicit_members)?;
    let mut seen = FxHashSet::default();
    for (i, set) in sets.iter().enumerate() {
        let set_index = i as u64;
        if set.members.is_empty() {
            return Err(DeclareError::EmptySet { set: set_index });
        }
        too_large("members in one set", set.members.len() as u64, limits.max_set_members)?;
        if let Some(needed) = set.needed
            && (needed == 0 || needed as usize > set.members.len())
        {
            return Err(DeclareError::BadSetNeeded { set: set_index, needed, members: set.members.len() as u64 });
        }
        seen.clear();
        for &member in &set.members {
            if !seen.insert(member) {
                return Err(DeclareError::DuplicateMember { set: set_index, member });
            }
            if member.block().0 > MAX_SCHEDULED_BLOCK_ID {
                return Err(DeclareError::BadBlock { set: set_index, problem: BlockProblem::Unknown(member.block()) });
            }
            topo.check_member(member).map_err(|problem| DeclareError::BadBlock { set: set_index, problem })?;
        }
    }
    Ok(())
}

fn check_ranges(ranges: &[BlockRange], topo: &impl Topology, limits: &Limits) -> Result<(), DeclareError> {
    if ranges.is_empty() {
        return Err(DeclareError::NoSets);
    }
    too_large("ranges", ranges.len() as u64, limits.max_ranges)?;
    let mut previous_end = 0;
    for (i, range) in ranges.iter().enumerate() {
        let index = i as u64;
        if range.len == 0 {
            return Err(DeclareError::EmptyRange { index });
        }
        too_large("blocks in one range", u64::from(range.len), limits.max_set_members)?;
        if i > 0 && range.start.0 < previous_end {
            return Err(DeclareError::OverlappingRanges { index });
        }
        // Checked before anything adds to `start`: a range from the network
        // can end past `u64::MAX`.
        let in_bounds = range.start.0 <= MAX_SCHEDULED_BLOCK_ID
            && range.checked_end().is_some_and(|end| end - 1 <= MAX_SCHEDULED_BLOCK_ID);
        if !in_bounds {
            let first_beyond = BlockId(range.start.0.max(MAX_SCHEDULED_BLOCK_ID + 1));
            return Err(DeclareError::BadBlock { set: index, problem: BlockProblem::Unknown(first_beyond) });
        }
        topo.check_range(*range).map_err(|problem| DeclareError::BadBlock { set: index, problem })?;
        previous_end = range.end();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableTopology;
    use dingo_types::{DiskId, DiskModel, GroupId, TaskKind};

    #[test]
    fn a_range_past_the_last_block_id_is_an_unknown_block_not_a_panic() {
        let mut topo = TableTopology::new(1, DiskModel::HDD);
        topo.insert(BlockId(0), 1, GroupId(0), &[DiskId(0)]);
        let ranges = |start: u64, len: u32| Declaration {
            task: TaskKind::Transcoding,
            read_sets: ReadSets::Ranges(vec![BlockRange { start: BlockId(start), len }]),
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(10),
        };
        let unknown = |block: u64| DeclareError::BadBlock { set: 0, problem: BlockProblem::Unknown(BlockId(block)) };
        let check = |d: &Declaration| check(d, &topo, Timestamp(1), &Limits::default());
        // The review's case: `start + len` overflows u64.
        assert_eq!(check(&ranges(u64::MAX - 1, 4)), Err(unknown(u64::MAX - 1)));
        assert_eq!(check(&ranges(MAX_SCHEDULED_BLOCK_ID + 1, 1)), Err(unknown(MAX_SCHEDULED_BLOCK_ID + 1)));
        assert_eq!(
            check(&ranges(MAX_SCHEDULED_BLOCK_ID, 2)),
            Err(unknown(MAX_SCHEDULED_BLOCK_ID + 1)),
            "ends one past the last id"
        );
        assert_eq!(check(&ranges(0, 1)), Ok(()));
        // Below the ids a member key can carry (2^56) but past what a
        // schedule holds: refused here, not a panic when it is scheduled.
        let member = Declaration {
            read_sets: ReadSets::Sets(vec![BlockSet::new(vec![dingo_types::Member::Any(BlockId(1 << 48))])]),
            ..ranges(0, 1)
        };
        assert_eq!(check(&member), Err(unknown(1 << 48)));
    }
}
