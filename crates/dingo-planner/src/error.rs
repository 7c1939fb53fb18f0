//! Errors returned to callers of the planner. Every rejected call leaves the
//! planner unchanged.

use dingo_types::{BlockProblem, DeclarationId, DiskId, Member, Timestamp};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeclareError {
    #[error("the declaration names no sets")]
    NoSets,
    #[error("set {set} is empty; every set must name at least one block")]
    EmptySet { set: u64 },
    #[error("set {set} needs {needed} of its {members} members; give 1 up to the member count, or omit it to need all")]
    BadSetNeeded { set: u64, needed: u32, members: u64 },
    #[error("sets_needed is 0; omit it to need every set, or give a count of at least 1")]
    ZeroSetsNeeded,
    #[error("sets_needed is {needed} but the declaration names only {available} sets")]
    TooManySetsNeeded { needed: u64, available: u64 },
    #[error("bytes_needed is 0; omit it to need every set, or give at least 1 byte")]
    ZeroBytesNeeded,
    #[error("bytes_needed is {needed} but the declaration's sets hold only {available} bytes")]
    TooManyBytesNeeded { needed: u64, available: u64 },
    #[error("sets_needed and bytes_needed are both set; a declaration needs a count of sets or of bytes, not both")]
    SetsAndBytesNeeded,
    #[error("deadline {deadline} is not after the current time {now}")]
    DeadlineNotInFuture { deadline: Timestamp, now: Timestamp },
    #[error("set {set}: {problem}")]
    BadBlock { set: u64, problem: BlockProblem },
    #[error("{0}")]
    BadMember(BlockProblem),
    #[error("set {set} names {member} twice")]
    DuplicateMember { set: u64, member: Member },
    #[error("ranges must be sorted by start and must not overlap: range {index} starts before the previous one ends")]
    OverlappingRanges { index: u64 },
    #[error("range {index} is empty")]
    EmptyRange { index: u64 },
    #[error("the declaration has {count} {what}; the limit is {limit}")]
    TooLarge { what: &'static str, count: u64, limit: u64 },
    #[error("{0} does not exist")]
    UnknownDisk(DiskId),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CancelError {
    #[error("{0} is not outstanding (unknown, finished or cancelled)")]
    UnknownDeclaration(DeclarationId),
}

/// Why [`crate::Planner::restore`] refused a declaration. Nothing changes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RestoreError {
    #[error("{0} is already outstanding")]
    AlreadyOutstanding(DeclarationId),
    #[error("{id}: set key {key} is not an outstanding set of the declaration (unknown or listed twice)")]
    UnknownSet { id: DeclarationId, key: u64 },
    #[error("{0} does not exist")]
    UnknownDisk(DiskId),
}
