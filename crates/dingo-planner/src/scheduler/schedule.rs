//! What the scheduler hands out for one quantum: the declarations it
//! served, the sets it chose and their chunk reads.

use super::BlockBytes;
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, GroupId, TaskKind, Timestamp};
use serde::{Deserialize, Serialize};

/// One physical or free read of one chunk, as scheduled. Its size is
/// kept by the schedule ([`Schedule::read_bytes`]), not by the read.
///
/// The chunk is held as its two fields rather than a [`ChunkRef`], whose
/// seven bytes of padding would make this 32 bytes instead of 24: a
/// quantum of a 1 EB cluster holds hundreds of millions of reads, two
/// schedules at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRead {
    pub block: BlockId,
    pub copy: u8,
    pub disk: DiskId,
    pub group: GroupId,
    /// True for the one read per chunk that goes to disk this quantum;
    /// false when another set already scheduled the chunk (a free read).
    pub physical: bool,
}

const _: () = assert!(std::mem::size_of::<ChunkRead>() <= 24, "a schedule holds millions of reads");

/// A declaration as scheduled in one quantum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledDecl {
    pub id: DeclarationId,
    pub task: TaskKind,
    pub deadline: Timestamp,
    /// Sets it needed this quantum to stay on pace.
    pub quota: u64,
    /// Sets it got.
    pub taken: u64,
    /// It got less than its quota, or its deadline has passed: its
    /// deliveries carry `overloaded = true`.
    pub overloaded: bool,
}

/// One delivered set: declaration `decl` (an index into
/// [`Schedule::decls`]), set `key`, and its reads, which start at
/// `first_read` and run to the next set's (16 bytes: a read count would
/// add 8 with padding, for millions of sets a quantum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledSet {
    pub decl: u32,
    pub first_read: u32,
    pub key: u64,
}

/// The sets chosen for one quantum, in the order they were chosen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub start: Timestamp,
    pub decls: Vec<ScheduledDecl>,
    pub sets: Vec<ScheduledSet>,
    pub reads: Vec<ChunkRead>,
    /// The size of each block `reads` names.
    pub block_bytes: BlockBytes,
}

impl ChunkRead {
    pub fn chunk(&self) -> ChunkRef {
        ChunkRef { block: self.block, copy: self.copy }
    }
}

impl Schedule {
    /// The reads of set `set` (an index into `sets`).
    pub fn reads_of(&self, set: usize) -> &[ChunkRead] {
        let end = self.sets.get(set + 1).map_or(self.reads.len(), |next| next.first_read as usize);
        &self.reads[self.sets[set].first_read as usize..end]
    }

    /// The bytes `read` (one of `reads`) reads.
    pub fn read_bytes(&self, read: &ChunkRead) -> u64 {
        self.block_bytes.of(read.block)
    }

    pub fn physical_bytes(&self) -> u64 {
        self.reads.iter().filter(|r| r.physical).map(|r| self.read_bytes(r)).sum()
    }

    pub fn free_bytes(&self) -> u64 {
        self.reads.iter().filter(|r| !r.physical).map(|r| self.read_bytes(r)).sum()
    }

    /// Empties the schedule, keeping its vectors' memory for reuse.
    pub fn clear(&mut self) {
        self.decls.clear();
        self.sets.clear();
        self.reads.clear();
        self.block_bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_records_are_compact_and_sets_find_their_reads() {
        assert_eq!(std::mem::size_of::<ChunkRead>(), 24);
        assert_eq!(std::mem::size_of::<ScheduledSet>(), 16);
        let read = |block: u64, copy: u8| ChunkRead {
            block: BlockId(block),
            copy,
            disk: DiskId(0),
            group: GroupId(block),
            physical: true,
        };
        let schedule = Schedule {
            reads: vec![read(1, 2), read(2, 0), read(3, 1)],
            sets: vec![
                ScheduledSet { decl: 0, first_read: 0, key: 7 },
                ScheduledSet { decl: 1, first_read: 1, key: 8 },
            ],
            ..Schedule::default()
        };
        assert_eq!(schedule.reads_of(0), &[read(1, 2)]);
        assert_eq!(schedule.reads_of(1), &[read(2, 0), read(3, 1)], "the last set runs to the end");
        assert_eq!(read(1, 2).chunk(), ChunkRef { block: BlockId(1), copy: 2 });
    }
}
