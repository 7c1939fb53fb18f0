//! The durable state of the metadata service, in one redb database.
//!
//! Tables (values of `files`, `blocks` and `nodes` are this crate's prost
//! records, [`records`]; the format and its migrations are in [`schema`]):
//! - `counters`: `&str → u64`: `next_block`, `next_file`, `next_node`,
//!   `next_disk`, `schema_version` and the index-built marks.
//! - `files`: path → [`FileRecord`] (its block ids in file order).
//! - `blocks`: block id → [`BlockRecord`]. Ids are dense; deleted blocks keep
//!   their record (state `Deleted`) so the block table stays dense.
//! - `nodes`: node id → [`NodeRecord`] (address and disks; liveness is not stored).
//! - `node_addrs`: address → node id; `disk_uuids`: disk label → disk id.
//! - `pending_deletes`: [`ChunkKey`] `(disk, block, copy) → ()`: chunks the
//!   disk's node must delete; removed when the node confirms.
//! - `disk_chunks`: [`ChunkKey`] `→ ()`: index of the chunk locations of every
//!   block not deleted (open or sealed), kept in step with `blocks` in the
//!   same transactions; built from `blocks` when first missing.
//! - `dead_disks`, `dead_nodes`: id → `()`: disks and nodes marked DEAD.
//! - `drain_disks`, `drain_nodes`: id → [`DeviceState`] number: disks and
//!   nodes DRAINING or DECOMMISSIONED. A draining one becomes
//!   DECOMMISSIONED in the transaction that removes the last `disk_chunks`
//!   entry of its disk(s) (see `db/nodes.rs`).
//! - `open_blocks`: `(path, block id) → ()`: blocks allocated to a writer and neither
//!   committed nor abandoned yet. Once that writer's lease is gone — another
//!   writer took the file over, the file was sealed or deleted, or the lease
//!   expired (see [`MetaDb::drop_expired_writes`]) — they can never be
//!   committed, so they are deleted and their chunks freed on the nodes.
//!   Built from `blocks` when first missing.
//! - `open_files`: path → `()`: unsealed files.
//!
//! Every mutation is one write transaction committed with redb's default
//! immediate durability before the RPC answers, so an acknowledged change
//! survives a crash at any point. redb checksums its pages; a record that
//! does not decode is reported as an internal error, never guessed at.

mod chunks;
mod namespace;
mod nodes;
pub mod records;
pub mod schema;
mod tables;

pub use chunks::MAX_GET_BLOCKS;
pub use namespace::{Lease, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, Recovered, check_path};
pub use nodes::{DiskRegistration, DrainStates};
pub use records::{
    BlockRecord, BlockState, ChunkPlacement, DeviceState, DiskModelRecord, DiskRecord, FileRecord, NodeRecord,
    RedundancyRecord,
};
pub use tables::ChunkKey;

use crate::error::MetaError;
use prost::Message;
use redb::{Database, ReadableTable, WriteTransaction};

pub struct MetaDb {
    db: Database,
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, MetaError> {
    M::decode(bytes).map_err(|e| MetaError::Internal(format!("undecodable record: {e}")))
}

fn next_id(tx: &WriteTransaction, name: &str) -> Result<u64, MetaError> {
    let mut t = tx.open_table(tables::COUNTERS)?;
    let id = t.get(name)?.map_or(0, |v| v.value());
    t.insert(name, id + 1)?;
    Ok(id)
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
