//! When `Declare` needs the metadata service's newest topology: the
//! planner's copy lags it by up to a quantum, so a declaration naming a
//! block written since, or a disk just added, would be refused on stale
//! state. The service (`service.rs`) and the deterministic simulation
//! (`dingo-planner-dst`) both follow these rules.

use dingo_planner::DeclareError;
use dingo_types::{BlockProblem, Declaration, ReadSets};

/// Disk and cluster scrubs are resolved against the topology, so they are
/// declared on a fresh one.
pub fn refresh_first(decl: &Declaration) -> bool {
    matches!(decl.read_sets, ReadSets::ChunksOnDisk(_) | ReadSets::AllChunks)
}

/// Refusals a refreshed topology may turn into acceptance (an unknown or
/// unsealed block, an unknown disk): the declaration is tried once more
/// after a refresh.
pub fn may_be_stale(e: &DeclareError) -> bool {
    let stale = |p: &BlockProblem| matches!(p, BlockProblem::Unknown(_) | BlockProblem::Unsealed(_));
    match e {
        DeclareError::BadBlock { problem, .. } | DeclareError::BadMember(problem) => stale(problem),
        DeclareError::UnknownDisk(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, BlockSet, DiskId, TaskKind, Timestamp};

    #[test]
    fn scrubs_refresh_first_and_only_staleness_is_retried() {
        let decl = |read_sets| Declaration {
            task: TaskKind::Scrubbing,
            read_sets,
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(1),
        };
        assert!(refresh_first(&decl(ReadSets::ChunksOnDisk(DiskId(3)))));
        assert!(refresh_first(&decl(ReadSets::AllChunks)));
        assert!(!refresh_first(&decl(ReadSets::Sets(vec![BlockSet::any_of([BlockId(1)])]))));
        let bad = |problem| DeclareError::BadMember(problem);
        assert!(may_be_stale(&bad(BlockProblem::Unknown(BlockId(9)))));
        assert!(may_be_stale(&bad(BlockProblem::Unsealed(BlockId(9)))));
        assert!(may_be_stale(&DeclareError::UnknownDisk(DiskId(7))));
        assert!(!may_be_stale(&bad(BlockProblem::Deleted(BlockId(9)))));
        assert!(!may_be_stale(&DeclareError::NoSets));
    }
}
