//! Identifiers. All are small `Copy` newtypes so they cannot be mixed up.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest block id a declaration may name. The top byte of a `u64` is kept
/// free so that a [`crate::Member`] packs into one `u64` key (see
/// [`crate::Member::key`]).
pub const MAX_BLOCK_ID: u64 = (1 << 56) - 1;

/// Most copies (replicas) one block may have. Copy indexes are `0..MAX_COPIES`.
pub const MAX_COPIES: u8 = 16;

/// A block: the unit the distributed store tracks, immutable once sealed.
/// Erasure-coded stripes are made of blocks too (data and parity members).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlockId(pub u64);

/// One disk (a directory on a storage node, or a simulated drive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DiskId(pub u32);

/// One storage node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// A redundancy group: an erasure-coded stripe, or a replicated block on its
/// own. Blocks of one group are read together by reconstruction and are the
/// unit the dispatcher groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupId(pub u64);

/// Handle of a declaration, unique within one planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeclarationId(pub u64);

/// One stored copy of a block: copy `copy` of `block`. An erasure-coded member
/// has a single copy, number 0; an `r`-way replicated block has copies `0..r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    pub block: BlockId,
    pub copy: u8,
}

/// The ids a command line names parse from their bare number (`7`).
macro_rules! from_number {
    ($($id:ident),*) => {$(
        impl std::str::FromStr for $id {
            type Err = std::num::ParseIntError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map($id)
            }
        }
    )*};
}
from_number!(DiskId, NodeId, DeclarationId);

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {}", self.0)
    }
}

impl fmt::Display for DiskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "disk {}", self.0)
    }
}

impl fmt::Display for DeclarationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "declaration {}", self.0)
    }
}

impl fmt::Display for ChunkRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "copy {} of block {}", self.copy, self.block.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_from_their_bare_number_only() {
        assert_eq!("7".parse::<DiskId>(), Ok(DiskId(7)));
        assert_eq!("12".parse::<NodeId>(), Ok(NodeId(12)));
        assert_eq!("18446744073709551615".parse::<DeclarationId>(), Ok(DeclarationId(u64::MAX)));
        assert!("disk 7".parse::<DiskId>().is_err());
        assert!("4294967296".parse::<NodeId>().is_err());
        assert!("-1".parse::<DiskId>().is_err());
    }
}
