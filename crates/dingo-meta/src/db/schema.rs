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
use super::tables::{
    BLOCKS, COUNTERS, DEAD_DISKS, DEAD_NODES, DISK_CHUNKS, DISK_UUIDS, DRAIN_DISKS, DRAIN_NODES, FILES, NODE_ADDRS,
    NODES, OPEN_BLOCKS, OPEN_FILES, PENDING_DELETES,
};
use super::{MetaDb, chunks, decode};
use crate::error::MetaError;
use prost::Message;
use redb::{Database, ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use std::path::Path;

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

/// Rewrites every value of `table` as a record of type `M`. `owned` keeps a
/// key past the read; `put` writes a value back under it.
fn rewrite<K, O, M>(
    tx: &WriteTransaction,
    table: TableDefinition<K, &'static [u8]>,
    owned: impl Fn(K::SelfType<'_>) -> O,
    put: impl Fn(&mut redb::Table<'_, K, &'static [u8]>, &O, &[u8]) -> Result<(), redb::StorageError>,
) -> Result<(), MetaError>
where
    K: redb::Key + 'static,
    O: std::fmt::Debug,
    M: Message + Default,
{
    let mut t = tx.open_table(table)?;
    let mut rewritten = Vec::new();
    for e in t.iter()? {
        let (k, v) = e?;
        let key = owned(k.value());
        let bytes = reencode::<M>(v.value(), table.name(), &key)?;
        rewritten.push((key, bytes));
    }
    for (k, v) in rewritten {
        put(&mut t, &k, &v)?;
    }
    Ok(())
}

/// Format 1 → 2: the record types changed owner, not layout (see the module
/// docs), so each record is decoded and written back.
fn migrate_records(tx: &WriteTransaction) -> Result<(), MetaError> {
    rewrite::<_, _, FileRecord>(tx, FILES, str::to_string, |t, k, v| t.insert(k.as_str(), v).map(drop))?;
    rewrite::<_, _, BlockRecord>(tx, BLOCKS, |k| k, |t, &k, v| t.insert(k, v).map(drop))?;
    rewrite::<_, _, NodeRecord>(tx, NODES, |k| k, |t, &k, v| t.insert(k, v).map(drop))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::records::{ChunkPlacement, DeviceState, DiskModelRecord, DiskRecord, RedundancyRecord};
    use crate::db::{ChunkKey, MIN_BLOCK_SIZE};
    use dingo_proto::v1;
    use dingo_types::{BlockId, DiskId, NodeId};
    use redb::ReadableDatabase;

    fn disks(ids: &[u32]) -> Vec<DiskId> {
        ids.iter().copied().map(DiskId).collect()
    }

    /// A format 1 database as the code before format 2 wrote it: the values
    /// of `files`, `blocks` and `nodes` are `dingo.v1` wire messages, there is
    /// no `schema_version`, and (as in a database older than the indexes)
    /// the index tables are left to be built. Should the wire messages
    /// change, freeze these values as bytes first.
    fn write_format_1(dir: &Path) {
        let db = Database::create(dir.join("meta.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        let r2 = v1::Redundancy { replicas: 2, data: 0, parity: 0 };
        let ec = v1::Redundancy { replicas: 0, data: 2, parity: 1 };
        let loc = |copy, disk| v1::ChunkLocation { copy, disk, node: 0, ..Default::default() };
        let files = [
            v1::FileInfo {
                id: 0,
                path: "/sealed".into(),
                redundancy: Some(r2),
                block_size: MIN_BLOCK_SIZE,
                size: 100,
                sealed: true,
                block_ids: vec![0],
                created_ms: 5,
                ..Default::default()
            },
            v1::FileInfo {
                id: 1,
                path: "/open".into(),
                redundancy: Some(ec),
                block_size: MIN_BLOCK_SIZE,
                lease: 42,
                lease_expiry_ms: 9000,
                created_ms: 6,
                ..Default::default()
            },
        ];
        for f in &files {
            tx.open_table(FILES).unwrap().insert(f.path.as_str(), f.encode_to_vec().as_slice()).unwrap();
        }
        // Format 1 stored the wire's numbers of its day, which began at 0 =
        // OPEN / LIVE; today's wire begins at 0 = UNSPECIFIED, so the
        // fixture spells format 1's numbers out.
        const OPEN: i32 = 0;
        const SEALED: i32 = 1;
        const DELETED: i32 = 2;
        const DRAINING: i32 = 2;
        let block = |id, file, size, state: i32, group, ec_index, redundancy, chunks| v1::BlockRecord {
            id,
            file,
            size,
            state,
            group,
            ec_index,
            redundancy: Some(redundancy),
            chunks,
        };
        let blocks = [
            block(0, 0, 100, SEALED, 0, 0, r2, vec![loc(0, 0), loc(1, 1)]),
            block(1, 1, 0, OPEN, 1, 0, ec, vec![loc(0, 1)]),
            block(2, 1, 0, DELETED, 1, 1, ec, vec![loc(0, 0)]),
        ];
        for b in &blocks {
            tx.open_table(BLOCKS).unwrap().insert(b.id, b.encode_to_vec().as_slice()).unwrap();
        }
        let model = v1::DiskModel { positioning_us: 8000, transfer_bytes_per_sec: 100_000_000 };
        let node = v1::NodeStatus {
            id: 0,
            addr: "h:1".into(),
            disks: vec![
                v1::DiskStatus {
                    id: 0,
                    path: "/d0".into(),
                    capacity: 1000,
                    used: 10,
                    model: Some(model),
                    uuid: "u0".into(),
                    ..Default::default()
                },
                v1::DiskStatus {
                    id: 1,
                    path: "/d1".into(),
                    capacity: 2000,
                    used: 20,
                    uuid: "u1".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        tx.open_table(NODES).unwrap().insert(0, node.encode_to_vec().as_slice()).unwrap();
        tx.open_table(NODE_ADDRS).unwrap().insert("h:1", 0).unwrap();
        for (uuid, id) in [("u0", 0), ("u1", 1)] {
            tx.open_table(DISK_UUIDS).unwrap().insert(uuid, id).unwrap();
        }
        for (name, next) in [("next_block", 3), ("next_file", 2), ("next_node", 1), ("next_disk", 2)] {
            tx.open_table(COUNTERS).unwrap().insert(name, next).unwrap();
        }
        tx.open_table(PENDING_DELETES).unwrap().insert((0, 2, 0), ()).unwrap();
        tx.open_table(DEAD_DISKS).unwrap().insert(1, ()).unwrap();
        tx.open_table(DRAIN_NODES).unwrap().insert(0, DRAINING).unwrap();
        tx.commit().unwrap();
    }

    fn placement(copy: u32, disk: u32) -> ChunkPlacement {
        ChunkPlacement { copy, disk, node: 0 }
    }

    #[test]
    fn a_format_1_database_migrates_with_every_record_intact() {
        let dir = tempfile::tempdir().unwrap();
        write_format_1(dir.path());
        let db = MetaDb::open(dir.path()).unwrap();
        let r2 = Some(RedundancyRecord { replicas: 2, data: 0, parity: 0 });
        let ec = Some(RedundancyRecord { replicas: 0, data: 2, parity: 1 });
        let (sealed, sealed_blocks) = db.stat("/sealed").unwrap();
        assert_eq!(
            sealed,
            FileRecord {
                id: 0,
                path: "/sealed".into(),
                redundancy: r2,
                block_size: MIN_BLOCK_SIZE,
                size: 100,
                sealed: true,
                block_ids: vec![0],
                lease: 0,
                lease_expiry_ms: 0,
                created_ms: 5,
            }
        );
        assert_eq!(
            db.file("/open").unwrap(),
            FileRecord {
                id: 1,
                path: "/open".into(),
                redundancy: ec,
                block_size: MIN_BLOCK_SIZE,
                size: 0,
                sealed: false,
                block_ids: vec![],
                lease: 42,
                lease_expiry_ms: 9000,
                created_ms: 6,
            }
        );
        let block = |id, file, size, state: BlockState, group, ec_index, redundancy, chunks| {
            let mut b = BlockRecord { id, file, size, state: 0, group, ec_index, redundancy, chunks };
            b.set_state(state);
            b
        };
        let blocks = vec![
            block(0, 0, 100, BlockState::Sealed, 0, 0, r2, vec![placement(0, 0), placement(1, 1)]),
            block(1, 1, 0, BlockState::Open, 1, 0, ec, vec![placement(0, 1)]),
            block(2, 1, 0, BlockState::Deleted, 1, 1, ec, vec![placement(0, 0)]),
        ];
        assert_eq!(sealed_blocks, blocks[..1]);
        assert_eq!(db.get_blocks(&[BlockId(0), BlockId(1), BlockId(2)]).unwrap(), blocks);
        assert_eq!(db.blocks(BlockId(0), 10).unwrap(), (blocks, 3));
        let model = Some(DiskModelRecord { positioning_us: 8000, transfer_bytes_per_sec: 100_000_000 });
        let disk = |id, path: &str, capacity_bytes, used_bytes, model, uuid: &str| DiskRecord {
            id,
            path: path.into(),
            capacity_bytes,
            used_bytes,
            model,
            uuid: uuid.into(),
        };
        let node = NodeRecord {
            id: 0,
            addr: "h:1".into(),
            disks: vec![disk(0, "/d0", 1000, 10, model, "u0"), disk(1, "/d1", 2000, 20, None, "u1")],
        };
        assert_eq!(db.nodes().unwrap(), vec![node]);
        assert_eq!(db.dead().unwrap(), (vec![DiskId(1)], vec![]));
        assert_eq!(db.drain_states().unwrap().nodes, [(NodeId(0), DeviceState::Draining)].into());
        assert_eq!(db.sync_deletes(&[], &disks(&[0])).unwrap(), vec![ChunkKey::new(0, 2, 0)]);
        // The indexes were built from the migrated records.
        assert_eq!(db.sealed_chunks_on(&disks(&[0, 1])).unwrap(), vec![ChunkKey::new(0, 0, 0), ChunkKey::new(1, 0, 1)]);
        assert_eq!(db.open_files().unwrap(), vec![("/open".to_string(), 9000)]);
        assert_eq!(db.drop_expired_writes(9001).unwrap(), 1, "the open block was indexed");
        // Counters carried over: the next ids continue where they were.
        assert_eq!(db.register_node("h:2", &[]).unwrap(), (NodeId(1), vec![]));
        drop(db);
        let version = |dir: &Path| {
            let db = Database::create(dir.join("meta.redb")).unwrap();
            let tx = db.begin_read().unwrap();
            tx.open_table(COUNTERS).unwrap().get(SCHEMA_VERSION).unwrap().map(|v| v.value())
        };
        assert_eq!(version(dir.path()), Some(SCHEMA_VERSION_CURRENT));
        assert_eq!(MetaDb::open(dir.path()).unwrap().nodes().unwrap().len(), 2, "a migrated database reopens");
    }

    #[test]
    fn a_newer_format_is_refused_and_a_damaged_record_is_named() {
        let newer = tempfile::tempdir().unwrap();
        drop(MetaDb::open(newer.path()).unwrap());
        let db = Database::create(newer.path().join("meta.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(COUNTERS).unwrap().insert(SCHEMA_VERSION, SCHEMA_VERSION_CURRENT + 1).unwrap();
        tx.commit().unwrap();
        drop(db);
        let e = MetaDb::open(newer.path()).err().unwrap().to_string();
        assert!(e.contains("format 3, written by a newer DINGO"), "{e}");

        let damaged = tempfile::tempdir().unwrap();
        write_format_1(damaged.path());
        let db = Database::create(damaged.path().join("meta.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(BLOCKS).unwrap().insert(1, [0xff_u8, 0xff, 0xff].as_slice()).unwrap();
        tx.commit().unwrap();
        drop(db);
        let e = MetaDb::open(damaged.path()).err().unwrap().to_string();
        assert!(e.contains("format 1 record 1 of table blocks is undecodable"), "{e}");
    }
}
