//! The tables of the metadata database and the key of its chunk tables:
//! what every part of `db` reads and writes. (The format version and the
//! migrations are `schema`'s.)

use crate::error::MetaError;
use dingo_types::{BlockId, DiskId};
use redb::{ReadableTable, TableDefinition, WriteTransaction};

pub(super) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
pub(super) const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
pub(super) const BLOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("blocks");
pub(super) const NODES: TableDefinition<u32, &[u8]> = TableDefinition::new("nodes");
pub(super) const NODE_ADDRS: TableDefinition<&str, u32> = TableDefinition::new("node_addrs");
pub(super) const DISK_UUIDS: TableDefinition<&str, u32> = TableDefinition::new("disk_uuids");
/// Keys are `(disk, block, copy)`, see [`ChunkKey`].
pub(super) const PENDING_DELETES: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("pending_deletes");
pub(super) const DISK_CHUNKS: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("disk_chunks");
pub(super) const DEAD_DISKS: TableDefinition<u32, ()> = TableDefinition::new("dead_disks");
pub(super) const DEAD_NODES: TableDefinition<u32, ()> = TableDefinition::new("dead_nodes");
/// Values are [`super::DeviceState`] numbers: DRAINING or DECOMMISSIONED.
pub(super) const DRAIN_DISKS: TableDefinition<u32, i32> = TableDefinition::new("drain_disks");
pub(super) const DRAIN_NODES: TableDefinition<u32, i32> = TableDefinition::new("drain_nodes");
pub(super) const OPEN_BLOCKS: TableDefinition<(&str, u64), ()> = TableDefinition::new("open_blocks");
pub(super) const OPEN_FILES: TableDefinition<&str, ()> = TableDefinition::new("open_files");

/// One chunk where it is stored: copy `copy` of `block` on `disk`. The key
/// of the `disk_chunks` and `pending_deletes` tables, ordered by disk first
/// so that a disk's chunks are one range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    pub disk: DiskId,
    pub block: BlockId,
    pub copy: u32,
}

impl ChunkKey {
    pub fn new(disk: u32, block: u64, copy: u32) -> Self {
        ChunkKey { disk: DiskId(disk), block: BlockId(block), copy }
    }

    /// The table key.
    pub(super) fn tuple(self) -> (u32, u64, u32) {
        (self.disk.0, self.block.0, self.copy)
    }

    pub(super) fn from_tuple((disk, block, copy): (u32, u64, u32)) -> Self {
        ChunkKey::new(disk, block, copy)
    }

    /// The table-key range of every chunk on `disk`.
    pub(super) fn disk_range(disk: u32) -> std::ops::RangeInclusive<(u32, u64, u32)> {
        (disk, 0, 0)..=(disk, u64::MAX, u32::MAX)
    }
}

/// Whether any block record still places a chunk on `disk`.
pub(super) fn disk_holds_chunks(tx: &WriteTransaction, disk: u32) -> Result<bool, MetaError> {
    Ok(tx.open_table(DISK_CHUNKS)?.range(ChunkKey::disk_range(disk))?.next().is_some())
}
