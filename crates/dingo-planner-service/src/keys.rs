//! The server's side of the wire mapping: set keys (a range's wire key is
//! its start block, the core's is its index) and the wire form of the
//! core's callbacks.

use dingo_proto::planner as pb;
use dingo_types::ReadSets;

/// How a declaration's wire set keys map to the core's: the same, except
/// for ranges, whose wire key is the start block and whose core key is the
/// range's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    Same,
    RangeStarts(Vec<u64>),
}

impl Keys {
    pub(crate) fn of(read_sets: &ReadSets) -> Keys {
        match read_sets {
            ReadSets::Ranges(r) => Keys::RangeStarts(r.iter().map(|r| r.start.0).collect()),
            _ => Keys::Same,
        }
    }

    pub(crate) fn to_wire(&self, core: u64) -> u64 {
        match self {
            Keys::Same => core,
            Keys::RangeStarts(starts) => starts[core as usize],
        }
    }

    /// `None` if `wire` names no set.
    pub(crate) fn to_core(&self, wire: u64) -> Option<u64> {
        match self {
            Keys::Same => Some(wire),
            Keys::RangeStarts(starts) => starts.binary_search(&wire).ok().map(|i| i as u64),
        }
    }
}

/// The wire callback of one core callback (delivery id and quantum filled
/// in by the caller); `node_of` names the node serving a disk.
pub(crate) fn callback_to_wire<'t>(
    cb: &dingo_planner::Callback,
    keys: &Keys,
    node_of: impl Fn(dingo_types::DiskId) -> Option<&'t str>,
) -> pb::Callback {
    pb::Callback {
        delivery: 0,
        declaration: cb.declaration.0,
        task: cb.task.name().to_string(),
        overloaded: cb.overloaded,
        sets: cb
            .sets
            .iter()
            .map(|s| pb::DeliveredSet {
                key: keys.to_wire(s.key),
                reads: s
                    .reads
                    .iter()
                    .map(|r| pb::ChunkRead {
                        block: r.block.0,
                        copy: u32::from(r.copy),
                        disk: r.disk.0,
                        bytes: r.bytes,
                        physical: r.physical,
                        node_addr: node_of(r.disk).unwrap_or_default().to_string(),
                    })
                    .collect(),
            })
            .collect(),
        redelivery: false,
        quantum_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, BlockRange};

    #[test]
    fn range_keys_are_start_blocks_on_the_wire() {
        let keys = Keys::of(&ReadSets::Ranges(vec![
            BlockRange { start: BlockId(10), len: 2 },
            BlockRange { start: BlockId(20), len: 2 },
        ]));
        assert_eq!(keys.to_wire(1), 20);
        assert_eq!(keys.to_core(20), Some(1));
        assert_eq!(keys.to_core(11), None);
        assert_eq!(Keys::Same.to_core(7), Some(7));
    }
}
