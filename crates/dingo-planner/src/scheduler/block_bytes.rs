//! The sizes of the blocks a schedule reads, kept once per schedule
//! instead of once per read.

use super::ChunkRead;
use dingo_types::BlockId;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// The size in bytes of every block a [`super::Schedule`] reads.
///
/// Nearly every block of a cluster is a full block of one size (the
/// simulator's are all one size), so a quantum of millions of reads
/// repeated the same eight bytes in each. Here the first size recorded is
/// kept once and only blocks of another size (a file's shorter last
/// block, a cluster with several block sizes) are listed, so asking for
/// a read's size costs one comparison while the list is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockBytes {
    /// The size of the first block recorded.
    usual_bytes: Option<u64>,
    /// Blocks whose size is not `usual_bytes`.
    other_bytes: FxHashMap<BlockId, u64>,
}

impl BlockBytes {
    /// Records that `block` holds `bytes` bytes.
    pub fn record(&mut self, block: BlockId, bytes: u64) {
        match self.usual_bytes {
            Some(usual) if usual == bytes => {}
            Some(_) => {
                self.other_bytes.insert(block, bytes);
            }
            None => self.usual_bytes = Some(bytes),
        }
    }

    /// The size of `block`, which must have been recorded (an unrecorded
    /// block reads as the usual size, or 0 when nothing was recorded).
    pub fn of(&self, block: BlockId) -> u64 {
        let usual = self.usual_bytes.unwrap_or(0);
        if self.other_bytes.is_empty() { usual } else { self.other_bytes.get(&block).copied().unwrap_or(usual) }
    }

    pub fn clear(&mut self) {
        self.usual_bytes = None;
        self.other_bytes.clear();
    }

    /// Records the sizes `from` holds for the blocks of `reads`: the
    /// reads another schedule made, copied into this one.
    pub(crate) fn absorb(&mut self, from: &BlockBytes, reads: &[ChunkRead]) {
        let Some(from_usual) = from.usual_bytes else { return };
        if from.other_bytes.is_empty() && self.usual_bytes.is_none_or(|usual| usual == from_usual) {
            self.usual_bytes = Some(from_usual);
            return;
        }
        for read in reads {
            self.record(read.block(), from.of(read.block()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{DiskId, GroupId};

    fn read(block: u64) -> ChunkRead {
        ChunkRead::new(BlockId(block), 0, DiskId(0), GroupId(0), true)
    }

    #[test]
    fn sizes_are_kept_once_and_exceptions_by_block() {
        let mut sizes = BlockBytes::default();
        assert_eq!(sizes.of(BlockId(1)), 0, "nothing recorded");
        sizes.record(BlockId(1), 64);
        sizes.record(BlockId(2), 64);
        assert!(sizes.other_bytes.is_empty(), "one size needs no list");
        sizes.record(BlockId(3), 10);
        assert_eq!([1, 2, 3].map(|b| sizes.of(BlockId(b))), [64, 64, 10]);
        sizes.clear();
        assert_eq!(sizes, BlockBytes::default());
    }

    #[test]
    fn absorbing_another_schedules_sizes_gives_what_recording_them_gives() {
        // Pieces of one schedule made apart, then joined in order, against
        // the same reads recorded one by one.
        let sizes_of = |block: u64| {
            if block.is_multiple_of(7) {
                10 + block
            } else if block < 20 {
                64
            } else {
                32
            }
        };
        let pieces: [&[u64]; 4] = [&[], &[1, 2, 7], &[21, 22, 14], &[3, 28]];
        let mut joined = BlockBytes::default();
        let mut recorded = BlockBytes::default();
        for piece in pieces {
            let mut apart = BlockBytes::default();
            for &b in piece {
                apart.record(BlockId(b), sizes_of(b));
                recorded.record(BlockId(b), sizes_of(b));
            }
            let reads: Vec<ChunkRead> = piece.iter().map(|&b| read(b)).collect();
            joined.absorb(&apart, &reads);
        }
        assert_eq!(joined, recorded);
        for b in pieces.concat() {
            assert_eq!(joined.of(BlockId(b)), sizes_of(b));
        }
    }
}
