//! What the scheduler hands out for one quantum: the declarations it
//! served, the sets it chose and their chunk reads.

use super::BlockBytes;
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, GroupId, TaskKind, Timestamp};
use serde::{Deserialize, Serialize};

/// One physical or free read of one chunk, as scheduled. Its size is
/// kept by the schedule ([`Schedule::read_bytes`]), not by the read.
///
/// Packed in 16 bytes (a quantum of a 1 EB cluster holds over a hundred
/// million reads, and the free pass holds a second copy of its share while
/// it plans): its fields as plain integers would take 24 with padding.
/// Hence the limits below, asserted by [`ChunkRead::new`]: block and group
/// ids under 2^48 ([`MAX_SCHEDULED_BLOCK_ID`], which the planner checks
/// declarations against), disks under 2^24 ([`MAX_SCHEDULED_DISKS`]),
/// copies under 2^7 (more than [`dingo_types::MAX_COPIES`]).
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ReadFields", try_from = "ReadFields")]
pub struct ChunkRead {
    /// Bits 0-47 the block, 48-95 the group, 96-119 the disk, 120-126 the
    /// copy, 127 whether the read is physical.
    packed: u128,
}

/// Largest block (and group) id a schedule can hold; the planner rejects
/// declarations naming a larger one.
pub const MAX_SCHEDULED_BLOCK_ID: u64 = (1 << ID_BITS) - 1;
/// Disks a schedule can name: ids `0..MAX_SCHEDULED_DISKS`.
pub const MAX_SCHEDULED_DISKS: u32 = 1 << DISK_BITS;

const ID_BITS: u32 = 48;
const DISK_BITS: u32 = 24;
const COPY_BITS: u32 = 7;
const GROUP_SHIFT: u32 = ID_BITS;
const DISK_SHIFT: u32 = 2 * ID_BITS;
const COPY_SHIFT: u32 = DISK_SHIFT + DISK_BITS;
const PHYSICAL_SHIFT: u32 = COPY_SHIFT + COPY_BITS;
const _: () = assert!(PHYSICAL_SHIFT == 127, "the fields fill the 128 bits exactly");
const _: () = assert!((dingo_types::MAX_COPIES as u32) <= 1 << COPY_BITS);
const _: () = assert!(std::mem::size_of::<ChunkRead>() == 16, "a schedule holds millions of reads");

impl ChunkRead {
    /// A read of copy `copy` of `block` (in redundancy group `group`) on
    /// `disk`; `physical`: the one read per chunk that goes to disk this
    /// quantum, false when another set already scheduled the chunk (a free
    /// read).
    ///
    /// Panics past the limits of the type's doc: the planner validates
    /// declared blocks, and a group is one of its blocks' ids.
    pub fn new(block: BlockId, copy: u8, disk: DiskId, group: GroupId, physical: bool) -> ChunkRead {
        Self::checked(block, copy, disk, group, physical).unwrap_or_else(|problem| panic!("{problem}"))
    }

    /// [`Self::new`], with an error past the limits instead of a panic.
    fn checked(block: BlockId, copy: u8, disk: DiskId, group: GroupId, physical: bool) -> Result<ChunkRead, String> {
        if block.0 > MAX_SCHEDULED_BLOCK_ID || group.0 > MAX_SCHEDULED_BLOCK_ID {
            return Err(format!("block {} or group {} is past the largest schedulable id", block.0, group.0));
        }
        if disk.0 >= MAX_SCHEDULED_DISKS || u32::from(copy) >= 1 << COPY_BITS {
            return Err(format!("disk {} or copy {copy} is past the schedulable ones", disk.0));
        }
        let packed = u128::from(block.0)
            | u128::from(group.0) << GROUP_SHIFT
            | u128::from(disk.0) << DISK_SHIFT
            | u128::from(copy) << COPY_SHIFT
            | u128::from(physical) << PHYSICAL_SHIFT;
        Ok(ChunkRead { packed })
    }

    fn field(&self, shift: u32, bits: u32) -> u64 {
        ((self.packed >> shift) & ((1 << bits) - 1)) as u64
    }

    pub fn block(&self) -> BlockId {
        BlockId(self.field(0, ID_BITS))
    }

    pub fn copy(&self) -> u8 {
        self.field(COPY_SHIFT, COPY_BITS) as u8
    }

    pub fn disk(&self) -> DiskId {
        DiskId(self.field(DISK_SHIFT, DISK_BITS) as u32)
    }

    /// The redundancy group (stripe) of the block.
    pub fn group(&self) -> GroupId {
        GroupId(self.field(GROUP_SHIFT, ID_BITS))
    }

    /// True for the one read per chunk that goes to disk this quantum;
    /// false when another set already scheduled the chunk (a free read).
    pub fn physical(&self) -> bool {
        self.packed >> PHYSICAL_SHIFT == 1
    }

    /// The same read, physical or free as `physical` says.
    pub fn with_physical(self, physical: bool) -> ChunkRead {
        let kept = self.packed & !(1 << PHYSICAL_SHIFT);
        ChunkRead { packed: kept | u128::from(physical) << PHYSICAL_SHIFT }
    }

    pub fn chunk(&self) -> ChunkRef {
        ChunkRef { block: self.block(), copy: self.copy() }
    }
}

impl std::fmt::Debug for ChunkRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        ReadFields::from(*self).fmt(f)
    }
}

/// [`ChunkRead`]'s fields unpacked: its serialized form, so a schedule
/// written out reads as plain fields and one read back is checked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename = "ChunkRead")]
struct ReadFields {
    block: BlockId,
    copy: u8,
    disk: DiskId,
    group: GroupId,
    physical: bool,
}

impl From<ChunkRead> for ReadFields {
    fn from(r: ChunkRead) -> ReadFields {
        ReadFields { block: r.block(), copy: r.copy(), disk: r.disk(), group: r.group(), physical: r.physical() }
    }
}

impl TryFrom<ReadFields> for ChunkRead {
    type Error = String;

    fn try_from(f: ReadFields) -> Result<ChunkRead, String> {
        ChunkRead::checked(f.block, f.copy, f.disk, f.group, f.physical)
    }
}

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

impl Schedule {
    /// The reads of set `set` (an index into `sets`).
    pub fn reads_of(&self, set: usize) -> &[ChunkRead] {
        let end = self.sets.get(set + 1).map_or(self.reads.len(), |next| next.first_read as usize);
        &self.reads[self.sets[set].first_read as usize..end]
    }

    /// The bytes `read` (one of `reads`) reads.
    pub fn read_bytes(&self, read: &ChunkRead) -> u64 {
        self.block_bytes.of(read.block())
    }

    pub fn physical_bytes(&self) -> u64 {
        self.reads.iter().filter(|r| r.physical()).map(|r| self.read_bytes(r)).sum()
    }

    pub fn free_bytes(&self) -> u64 {
        self.reads.iter().filter(|r| !r.physical()).map(|r| self.read_bytes(r)).sum()
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
        assert_eq!(std::mem::size_of::<ChunkRead>(), 16);
        assert_eq!(std::mem::size_of::<ScheduledSet>(), 16);
        let read = |block: u64, copy: u8| ChunkRead::new(BlockId(block), copy, DiskId(0), GroupId(block), true);
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

    #[test]
    fn a_packed_read_gives_back_every_field_up_to_its_limit() {
        let fields = [
            (0, 0, 0, 0, false),
            (1, 3, 5, 1, true),
            (MAX_SCHEDULED_BLOCK_ID, 127, MAX_SCHEDULED_DISKS - 1, MAX_SCHEDULED_BLOCK_ID, true),
            (MAX_SCHEDULED_BLOCK_ID, 0, 0, 0, false),
            (0, 127, 0, MAX_SCHEDULED_BLOCK_ID, false),
        ];
        for (block, copy, disk, group, physical) in fields {
            let r = ChunkRead::new(BlockId(block), copy, DiskId(disk), GroupId(group), physical);
            assert_eq!(
                (r.block(), r.copy(), r.disk(), r.group(), r.physical()),
                (BlockId(block), copy, DiskId(disk), GroupId(group), physical)
            );
            let flipped = r.with_physical(!physical);
            assert_eq!(
                (flipped.block(), flipped.copy(), flipped.disk(), flipped.group()),
                (r.block(), r.copy(), r.disk(), r.group())
            );
            assert_eq!(flipped.physical(), !physical);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<ChunkRead>(&json).unwrap(), r, "{json}");
        }
    }

    #[test]
    fn a_read_past_the_limits_is_refused() {
        let too_far = MAX_SCHEDULED_BLOCK_ID + 1;
        let json = format!(r#"{{"block":{too_far},"copy":0,"disk":0,"group":0,"physical":true}}"#);
        let err = serde_json::from_str::<ChunkRead>(&json).unwrap_err().to_string();
        assert!(err.contains("past the largest schedulable id"), "{err}");
        let json = format!(r#"{{"block":0,"copy":0,"disk":{MAX_SCHEDULED_DISKS},"group":0,"physical":true}}"#);
        assert!(serde_json::from_str::<ChunkRead>(&json).is_err());
        let panicked = std::panic::catch_unwind(|| ChunkRead::new(BlockId(too_far), 0, DiskId(0), GroupId(0), true));
        assert!(panicked.is_err(), "a block id past the limit would alias another");
    }
}
