//! The tables of the metadata database, the format version, and what
//! opening a database written by an older version does to it.
//!
//! Format 1 (no `schema_version` counter) stored the `dingo.v1` wire
//! messages as the values of `files`, `blocks` and `nodes`. Format 2 stores
//! this crate's own records ([`super::records`]), which keep format 1's field
//! numbers: migrating decodes every record as a format 2 one (an undecodable
//! record stops the open, naming its table and key), writes it back without
//! the wire-only fields, and sets the version, all in one transaction. The
//! indexes added over time (`disk_chunks`, `open_blocks`, `open_files`) are
//! built from the records when first missing.

use super::records::{BlockRecord, BlockState, FileRecord, NodeRecord};
use super::{MetaDb, chunks, decode};
use crate::error::MetaError;
use prost::Message;
use redb::{Database, ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use std::path::Path;

pub(super) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
pub(super) const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
pub(super) const BLOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("blocks");
pub(super) const NODES: TableDefinition<u32, &[u8]> = TableDefinition::new("nodes");
pub(super) const NODE_ADDRS: TableDefinition<&str, u32> = TableDefinition::new("node_addrs");
pub(super) const DISK_UUIDS: TableDefinition<&str, u32> = TableDefinition::new("disk_uuids");
/// Keys are `(disk, block, copy)`, see [`super::ChunkKey`].
pub(super) const PENDING_DELETES: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("pending_deletes");
pub(super) const DISK_CHUNKS: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("disk_chunks");
pub(super) const DEAD_DISKS: TableDefinition<u32, ()> = TableDefinition::new("dead_disks");
pub(super) const DEAD_NODES: TableDefinition<u32, ()> = TableDefinition::new("dead_nodes");
/// Values are [`super::DeviceState`] numbers: DRAINING or DECOMMISSIONED.
pub(super) const DRAIN_DISKS: TableDefinition<u32, i32> = TableDefinition::new("drain_disks");
pub(super) const DRAIN_NODES: TableDefinition<u32, i32> = TableDefinition::new("drain_nodes");
pub(super) const OPEN_BLOCKS: TableDefinition<(&str, u64), ()> = TableDefinition::new("open_blocks");
pub(super) const OPEN_FILES: TableDefinition<&str, ()> = TableDefinition::new("open_files");

/// Counter holding the format version; absent in format 1.
pub(super) const SCHEMA_VERSION: &str = "schema_version";
/// The format this code writes.
pub const SCHEMA_VERSION_CURRENT: u64 = 2;
/// Set in `counters` once `open_files` has been built.
pub(super) const OPEN_FILES_BUILT: &str = "open_files_built";
/// Set in `counters` once `disk_chunks` has been built.
pub(super) const DISK_INDEX_BUILT: &str = "disk_chunks_built";
/// Set in `counters` once `open_blocks` has been built.
pub(super) const OPEN_INDEX_BUILT: &str = "open_blocks_built";

impl MetaDb {
    /// Opens (or creates) `dir/meta.redb`, migrating an older format and
    /// building missing indexes. A database of a newer format is refused.
    pub fn open(dir: &Path) -> Result<Self, MetaError> {
        let ctx = |e: &dyn std::fmt::Display| MetaError::Internal(format!("metadata directory {}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(|e| ctx(&e))?;
        let db = Database::create(dir.join("meta.redb")).map_err(|e| ctx(&e))?;
        let tx = db.begin_write()?;
        // Create every table so that readers never meet a missing one.
        tx.open_table(COUNTERS)?;
        tx.open_table(FILES)?;
        tx.open_table(BLOCKS)?;
        tx.open_table(NODES)?;
        tx.open_table(NODE_ADDRS)?;
        tx.open_table(DISK_UUIDS)?;
        tx.open_table(PENDING_DELETES)?;
        tx.open_table(DISK_CHUNKS)?;
        tx.open_table(DEAD_DISKS)?;
        tx.open_table(DEAD_NODES)?;
        tx.open_table(DRAIN_DISKS)?;
        tx.open_table(DRAIN_NODES)?;
        tx.open_table(OPEN_BLOCKS)?;
        tx.open_table(OPEN_FILES)?;
        let version = tx.open_table(COUNTERS)?.get(SCHEMA_VERSION)?.map_or(1, |v| v.value());
        match version {
            1 => {
                migrate_records(&tx)?;
                tx.open_table(COUNTERS)?.insert(SCHEMA_VERSION, SCHEMA_VERSION_CURRENT)?;
            }
            SCHEMA_VERSION_CURRENT => {}
            newer => {
                return Err(ctx(&format!(
                    "meta.redb is in format {newer}, written by a newer DINGO; this one reads formats 1 to \
                     {SCHEMA_VERSION_CURRENT}"
                )));
            }
        }
        type Build = fn(&WriteTransaction) -> Result<(), MetaError>;
        for (built, build) in [
            (DISK_INDEX_BUILT, build_disk_index as Build),
            (OPEN_INDEX_BUILT, build_open_index),
            (OPEN_FILES_BUILT, build_open_files),
        ] {
            if tx.open_table(COUNTERS)?.get(built)?.is_none() {
                build(&tx)?;
                tx.open_table(COUNTERS)?.insert(built, 1)?;
            }
        }
        tx.commit()?;
        Ok(MetaDb { db })
    }
}

/// A format 1 value as a format 2 record of type `M`, encoded.
fn reencode<M: Message + Default>(bytes: &[u8], table: &str, key: &dyn std::fmt::Debug) -> Result<Vec<u8>, MetaError> {
    let record = M::decode(bytes)
        .map_err(|e| MetaError::Internal(format!("format 1 record {key:?} of table {table} is undecodable: {e}")))?;
    Ok(record.encode_to_vec())
}

/// Format 1 → 2: the record types changed owner, not layout (see the module
/// docs), so each record is decoded and written back.
fn migrate_records(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut files = tx.open_table(FILES)?;
    let mut rewritten = Vec::new();
    for e in files.iter()? {
        let (k, v) = e?;
        rewritten.push((k.value().to_string(), reencode::<FileRecord>(v.value(), FILES.name(), &k.value())?));
    }
    for (k, v) in rewritten {
        files.insert(k.as_str(), v.as_slice())?;
    }
    let mut blocks = tx.open_table(BLOCKS)?;
    let mut rewritten = Vec::new();
    for e in blocks.iter()? {
        let (k, v) = e?;
        rewritten.push((k.value(), reencode::<BlockRecord>(v.value(), BLOCKS.name(), &k.value())?));
    }
    for (k, v) in rewritten {
        blocks.insert(k, v.as_slice())?;
    }
    let mut nodes = tx.open_table(NODES)?;
    let mut rewritten = Vec::new();
    for e in nodes.iter()? {
        let (k, v) = e?;
        rewritten.push((k.value(), reencode::<NodeRecord>(v.value(), NODES.name(), &k.value())?));
    }
    for (k, v) in rewritten {
        nodes.insert(k, v.as_slice())?;
    }
    Ok(())
}

/// Fills `disk_chunks` from `blocks` (databases written before it existed).
fn build_disk_index(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut index = tx.open_table(DISK_CHUNKS)?;
    let blocks = tx.open_table(BLOCKS)?;
    for e in blocks.iter()? {
        let b: BlockRecord = decode(e?.1.value())?;
        if b.state() != BlockState::Deleted {
            for c in &b.chunks {
                index.insert(chunks::key_of(&b, c).tuple(), ())?;
            }
        }
    }
    Ok(())
}

/// Fills `open_blocks` from `blocks` (databases written before it existed).
/// An open block whose file is gone can never be committed: it is dropped.
fn build_open_index(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut paths = std::collections::HashMap::new();
    for e in tx.open_table(FILES)?.iter()? {
        let f: FileRecord = decode(e?.1.value())?;
        paths.insert(f.id, f.path);
    }
    let mut open = Vec::new();
    for e in tx.open_table(BLOCKS)?.iter()? {
        let b: BlockRecord = decode(e?.1.value())?;
        if b.state() == BlockState::Open {
            open.push(b);
        }
    }
    for b in open {
        match paths.get(&b.file) {
            Some(path) => {
                tx.open_table(OPEN_BLOCKS)?.insert((path.as_str(), b.id), ())?;
            }
            None => chunks::delete_block(tx, b)?,
        }
    }
    Ok(())
}

/// Fills `open_files` from `files` (databases written before it existed).
fn build_open_files(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut open = tx.open_table(OPEN_FILES)?;
    for e in tx.open_table(FILES)?.iter()? {
        let f: FileRecord = decode(e?.1.value())?;
        if !f.sealed {
            open.insert(f.path.as_str(), ())?;
        }
    }
    Ok(())
}
