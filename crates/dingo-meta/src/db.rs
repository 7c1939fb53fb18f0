//! The durable state of the metadata service, in one redb database.
//!
//! Tables (values are prost-encoded `dingo_proto::v1` messages):
//! - `counters`: `&str → u64`: `next_block`, `next_file`, `next_node`, `next_disk`.
//! - `files`: path → `FileInfo` (with `block_ids`, without `blocks`).
//! - `blocks`: block id → `BlockRecord`. Ids are dense; deleted blocks keep
//!   their record (state `DELETED`) so the block table stays dense.
//! - `nodes`: node id → `NodeStatus` (address and disks; liveness is not stored).
//! - `node_addrs`: address → node id; `disk_uuids`: disk label → disk id.
//! - `pending_deletes`: `(disk, block, copy) → ()`: chunks the disk's node
//!   must delete; removed when the node confirms.
//! - `disk_chunks`: `(disk, block, copy) → ()`: index of the chunk locations
//!   of every block not deleted (open or sealed), kept in step with `blocks`
//!   in the same transactions; built from `blocks` when first missing.
//! - `dead_disks`, `dead_nodes`: id → `()`: disks and nodes marked DEAD.
//! - `drain_disks`, `drain_nodes`: id → `DeviceState` number: disks and
//!   nodes DRAINING or DECOMMISSIONED. A draining one becomes
//!   DECOMMISSIONED in the transaction that removes the last `disk_chunks`
//!   entry of its disk(s) (see [`settle_drain`]).
//! - `open_blocks`: `(path, block id) → ()`: blocks allocated to a writer and neither
//!   committed nor abandoned yet. Once that writer's lease is gone — another
//!   writer took the file over, the file was sealed or deleted, or the lease
//!   expired (see [`MetaDb::drop_expired_writes`]) — they can never be
//!   committed, so they are deleted and their chunks freed on the nodes.
//!   Built from `blocks` when first missing.
//!
//! Every mutation is one write transaction committed with redb's default
//! immediate durability before the RPC answers, so an acknowledged change
//! survives a crash at any point.

use crate::error::MetaError;
use dingo_proto::Redundancy;
use dingo_proto::v1::{
    BlockRecord, BlockState, ChunkLocation, DeviceState, DiskRegistration, DiskStatus, FileInfo, NodeStatus,
};
use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
const BLOCKS: TableDefinition<u64, &[u8]> = TableDefinition::new("blocks");
const NODES: TableDefinition<u32, &[u8]> = TableDefinition::new("nodes");
const NODE_ADDRS: TableDefinition<&str, u32> = TableDefinition::new("node_addrs");
const DISK_UUIDS: TableDefinition<&str, u32> = TableDefinition::new("disk_uuids");
const PENDING_DELETES: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("pending_deletes");
const DISK_CHUNKS: TableDefinition<(u32, u64, u32), ()> = TableDefinition::new("disk_chunks");
const DEAD_DISKS: TableDefinition<u32, ()> = TableDefinition::new("dead_disks");
const DEAD_NODES: TableDefinition<u32, ()> = TableDefinition::new("dead_nodes");
/// Values are `DeviceState` numbers: DRAINING or DECOMMISSIONED.
const DRAIN_DISKS: TableDefinition<u32, i32> = TableDefinition::new("drain_disks");
const DRAIN_NODES: TableDefinition<u32, i32> = TableDefinition::new("drain_nodes");
const OPEN_BLOCKS: TableDefinition<(&str, u64), ()> = TableDefinition::new("open_blocks");
/// Smallest block size a file may have: one checksum segment. Smaller
/// blocks only multiply block records, which stay (deleted) for good.
pub const MIN_BLOCK_SIZE: u64 = 64 << 10;
pub const MAX_BLOCK_SIZE: u64 = 1 << 30;
const OPEN_FILES: TableDefinition<&str, ()> = TableDefinition::new("open_files");
/// Set in `counters` once `open_files` has been built.
const OPEN_FILES_BUILT: &str = "open_files_built";
/// Set in `counters` once `disk_chunks` has been built.
const DISK_INDEX_BUILT: &str = "disk_chunks_built";
/// Set in `counters` once `open_blocks` has been built.
const OPEN_INDEX_BUILT: &str = "open_blocks_built";
/// Most blocks one `get_blocks` call returns.
pub const MAX_GET_BLOCKS: usize = 65_536;

/// Disk or node ids DRAINING or DECOMMISSIONED, with their state.
pub type DrainStates = HashMap<u32, DeviceState>;

/// A writer's lease on a file.
#[derive(Clone, Copy, Debug)]
pub struct Lease {
    pub id: u64,
    pub expiry_ms: u64,
}

pub struct MetaDb {
    db: Database,
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, MetaError> {
    M::decode(bytes).map_err(|e| MetaError::Internal(format!("undecodable record: {e}")))
}

fn next_id(tx: &WriteTransaction, name: &str) -> Result<u64, MetaError> {
    let mut t = tx.open_table(COUNTERS)?;
    let id = t.get(name)?.map_or(0, |v| v.value());
    t.insert(name, id + 1)?;
    Ok(id)
}

fn get_file(tx: &WriteTransaction, path: &str) -> Result<FileInfo, MetaError> {
    let t = tx.open_table(FILES)?;
    let v = t.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?;
    decode(v.value())
}

fn put_file(tx: &WriteTransaction, f: &FileInfo) -> Result<(), MetaError> {
    tx.open_table(FILES)?.insert(f.path.as_str(), f.encode_to_vec().as_slice())?;
    Ok(())
}

fn get_block(tx: &WriteTransaction, id: u64) -> Result<BlockRecord, MetaError> {
    let t = tx.open_table(BLOCKS)?;
    let v = t.get(id)?.ok_or(MetaError::NoSuchBlock(id))?;
    decode(v.value())
}

fn put_block(tx: &WriteTransaction, b: &BlockRecord) -> Result<(), MetaError> {
    tx.open_table(BLOCKS)?.insert(b.id, b.encode_to_vec().as_slice())?;
    Ok(())
}

/// Marks a block deleted and queues its chunks for deletion.
fn delete_block(tx: &WriteTransaction, mut b: BlockRecord) -> Result<(), MetaError> {
    b.set_state(BlockState::Deleted);
    let mut pending = tx.open_table(PENDING_DELETES)?;
    let mut index = tx.open_table(DISK_CHUNKS)?;
    for c in &b.chunks {
        pending.insert((c.disk, b.id, c.copy), ())?;
        index.remove((c.disk, b.id, c.copy))?;
    }
    drop((pending, index));
    put_block(tx, &b)?;
    for c in &b.chunks {
        settle_drain(tx, c.disk)?;
    }
    Ok(())
}

/// Whether any block record still places a chunk on `disk`.
fn disk_holds_chunks(tx: &WriteTransaction, disk: u32) -> Result<bool, MetaError> {
    Ok(tx.open_table(DISK_CHUNKS)?.range((disk, 0, 0)..=(disk, u64::MAX, u32::MAX))?.next().is_some())
}

fn device_state(v: i32) -> DeviceState {
    DeviceState::try_from(v).unwrap_or(DeviceState::Draining)
}

/// Called whenever a chunk location leaves `disk`: a draining disk, or a
/// draining node owning it, that no block record places a chunk on any
/// more becomes DECOMMISSIONED in the same transaction, so the state
/// changes exactly when the last chunk leaves.
fn settle_drain(tx: &WriteTransaction, disk: u32) -> Result<(), MetaError> {
    let disk_draining =
        tx.open_table(DRAIN_DISKS)?.get(disk)?.is_some_and(|v| device_state(v.value()) == DeviceState::Draining);
    if disk_draining && !disk_holds_chunks(tx, disk)? {
        tx.open_table(DRAIN_DISKS)?.insert(disk, DeviceState::Decommissioned as i32)?;
        tracing::info!(disk, "drained disk is DECOMMISSIONED");
    }
    let mut draining_nodes = Vec::new();
    for e in tx.open_table(DRAIN_NODES)?.iter()? {
        let (k, v) = e?;
        if device_state(v.value()) == DeviceState::Draining {
            draining_nodes.push(k.value());
        }
    }
    for node in draining_nodes {
        let disks: Vec<u32> = match tx.open_table(NODES)?.get(node)? {
            Some(v) => decode::<NodeStatus>(v.value())?.disks.iter().map(|d| d.id).collect(),
            None => continue,
        };
        if !disks.contains(&disk) {
            continue;
        }
        let mut empty = true;
        for d in disks {
            empty &= !disk_holds_chunks(tx, d)?;
        }
        if empty {
            tx.open_table(DRAIN_NODES)?.insert(node, DeviceState::Decommissioned as i32)?;
            tracing::info!(node, "drained node is DECOMMISSIONED");
        }
    }
    Ok(())
}

/// Sets the administrative state of a disk or node in `tx`:
/// LIVE clears DEAD and any drain, DEAD replaces a drain, DRAINING is
/// refused for a dead device and left alone on a decommissioned one.
/// `disks`: the disks the device's drain covers (itself, or a node's).
fn set_state_in(
    tx: &WriteTransaction,
    (dead_table, drain_table): (TableDefinition<u32, ()>, TableDefinition<u32, i32>),
    what: &str,
    id: u32,
    disks: &[u32],
    state: DeviceState,
) -> Result<(), MetaError> {
    let mut dead = tx.open_table(dead_table)?;
    let mut drain = tx.open_table(drain_table)?;
    match state {
        DeviceState::Live => {
            dead.remove(id)?;
            drain.remove(id)?;
        }
        DeviceState::Dead => {
            dead.insert(id, ())?;
            drain.remove(id)?;
        }
        DeviceState::Draining => {
            if dead.get(id)?.is_some() {
                return Err(MetaError::Invalid(format!(
                    "{what} {id} is DEAD: its chunks are lost and being rebuilt elsewhere, there is nothing to \
                     drain (mark it LIVE first if it is back)"
                )));
            }
            if drain.get(id)?.is_none_or(|v| device_state(v.value()) != DeviceState::Decommissioned) {
                drain.insert(id, DeviceState::Draining as i32)?;
            }
        }
        DeviceState::Decommissioned => {
            return Err(MetaError::Invalid(format!(
                "{what} {id}: DECOMMISSIONED cannot be set; drain the {what} and it follows once empty"
            )));
        }
    }
    drop((dead, drain));
    // An empty device is decommissioned at once.
    for &d in disks {
        settle_drain(tx, d)?;
    }
    if state == DeviceState::Draining && disks.is_empty() {
        tx.open_table(drain_table)?.insert(id, DeviceState::Decommissioned as i32)?;
    }
    Ok(())
}

/// Deletes the open blocks of `path` (allocations of a writer whose lease
/// is gone) and queues their chunks for deletion. Returns how many.
fn drop_open_blocks(tx: &WriteTransaction, path: &str) -> Result<u64, MetaError> {
    let mut ids = Vec::new();
    for e in tx.open_table(OPEN_BLOCKS)?.range((path, 0)..=(path, u64::MAX))? {
        ids.push(e?.0.value().1);
    }
    for &id in &ids {
        tx.open_table(OPEN_BLOCKS)?.remove((path, id))?;
        delete_block(tx, get_block(tx, id)?)?;
    }
    Ok(ids.len() as u64)
}

/// Fills `open_files` from `files` (databases written before it existed).
fn build_open_files(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut open = tx.open_table(OPEN_FILES)?;
    for e in tx.open_table(FILES)?.iter()? {
        let f: FileInfo = decode(e?.1.value())?;
        if !f.sealed {
            open.insert(f.path.as_str(), ())?;
        }
    }
    Ok(())
}

/// What recovering an unsealed file's lease did.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Recovered {
    /// Sealed at its last committed (acknowledged) length.
    Sealed { size: u64 },
    /// Nothing was ever committed: the file was removed.
    Removed,
}

/// Recovers the lease of `path` inside `tx` (see [`MetaDb::recover_file`]).
fn recover_in(tx: &WriteTransaction, path: &str) -> Result<Recovered, MetaError> {
    let mut f = get_file(tx, path)?;
    drop_open_blocks(tx, path)?;
    tx.open_table(OPEN_FILES)?.remove(path)?;
    if f.block_ids.is_empty() {
        tx.open_table(FILES)?.remove(path)?;
        return Ok(Recovered::Removed);
    }
    f.sealed = true;
    f.lease = 0;
    f.lease_expiry_ms = 0;
    put_file(tx, &f)?;
    Ok(Recovered::Sealed { size: f.size })
}

/// Fills `disk_chunks` from `blocks` (databases written before it existed).
fn build_disk_index(tx: &WriteTransaction) -> Result<(), MetaError> {
    let mut index = tx.open_table(DISK_CHUNKS)?;
    let blocks = tx.open_table(BLOCKS)?;
    for e in blocks.iter()? {
        let b: BlockRecord = decode(e?.1.value())?;
        if b.state() != BlockState::Deleted {
            for c in &b.chunks {
                index.insert((c.disk, b.id, c.copy), ())?;
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
        let f: FileInfo = decode(e?.1.value())?;
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
            None => delete_block(tx, b)?,
        }
    }
    Ok(())
}

fn disk_known(tx: &redb::ReadTransaction, disk: u32) -> Result<bool, MetaError> {
    for e in tx.open_table(DISK_UUIDS)?.iter()? {
        if e?.1.value() == disk {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Checks the lease and that the file is still open; renews the lease.
fn leased_file(tx: &WriteTransaction, path: &str, lease: u64, now_ms: u64, ttl_ms: u64) -> Result<FileInfo, MetaError> {
    let mut f = get_file(tx, path)?;
    if f.sealed {
        return Err(MetaError::Sealed(path.to_string()));
    }
    if f.lease != lease || f.lease_expiry_ms < now_ms {
        return Err(MetaError::LeaseLost(path.to_string()));
    }
    f.lease_expiry_ms = now_ms + ttl_ms;
    Ok(f)
}

/// Checks a path: absolute, no empty, `.` or `..` components, bounded length.
pub fn check_path(path: &str) -> Result<(), MetaError> {
    let bad = |why: &str| Err(MetaError::InvalidPath(format!("`{path}`: {why}")));
    if !path.starts_with('/') || path.len() < 2 {
        return bad("must be absolute, like /dir/file");
    }
    if path.len() > 4096 {
        return bad("longer than 4096 bytes");
    }
    if path[1..].split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return bad("empty, `.` or `..` component");
    }
    Ok(())
}

impl MetaDb {
    pub fn open(dir: &Path) -> Result<Self, MetaError> {
        let ctx = |e: &dyn std::fmt::Display| MetaError::Internal(format!("metadata directory {}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(|e| ctx(&e))?;
        let db = Database::create(dir.join("meta.redb")).map_err(|e| ctx(&e))?;
        // Create every table so that readers never meet a missing one.
        let tx = db.begin_write()?;
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

    /// Registers (or re-registers) the node at `addr` and its disks; returns
    /// the node id and one disk id per disk. Ids are stable across restarts:
    /// the node by address, each disk by its label.
    pub fn register_node(&self, addr: &str, disks: &[DiskRegistration]) -> Result<(u32, Vec<u32>), MetaError> {
        let tx = self.db.begin_write()?;
        let existing = tx.open_table(NODE_ADDRS)?.get(addr)?.map(|v| v.value());
        let node = match existing {
            Some(id) => id,
            None => {
                let id = u32::try_from(next_id(&tx, "next_node")?)
                    .map_err(|_| MetaError::Internal("too many nodes".into()))?;
                tx.open_table(NODE_ADDRS)?.insert(addr, id)?;
                id
            }
        };
        let mut ids = Vec::new();
        let mut statuses = Vec::new();
        for d in disks {
            let known = tx.open_table(DISK_UUIDS)?.get(d.uuid.as_str())?.map(|v| v.value());
            let id = match known {
                Some(id) => id,
                None => {
                    let id = u32::try_from(next_id(&tx, "next_disk")?)
                        .map_err(|_| MetaError::Internal("too many disks".into()))?;
                    tx.open_table(DISK_UUIDS)?.insert(d.uuid.as_str(), id)?;
                    id
                }
            };
            ids.push(id);
            statuses.push(DiskStatus {
                id,
                path: d.path.clone(),
                capacity: d.capacity,
                used: d.used,
                chunks: 0,
                model: d.model,
                uuid: d.uuid.clone(),
                ..Default::default()
            });
        }
        // A disk that moved here from another node leaves that node's record.
        let mut nodes = tx.open_table(NODES)?;
        let others: Vec<(u32, NodeStatus)> = nodes
            .iter()?
            .map(|e| e.map_err(MetaError::from).and_then(|(k, v)| Ok((k.value(), decode::<NodeStatus>(v.value())?))))
            .collect::<Result<_, _>>()?;
        for (id, mut n) in others {
            if id != node && n.disks.iter().any(|d| ids.contains(&d.id)) {
                n.disks.retain(|d| !ids.contains(&d.id));
                nodes.insert(id, n.encode_to_vec().as_slice())?;
            }
        }
        let status = NodeStatus { id: node, addr: addr.to_string(), disks: statuses, ..Default::default() };
        nodes.insert(node, status.encode_to_vec().as_slice())?;
        drop(nodes);
        tx.commit()?;
        Ok((node, ids))
    }

    pub fn nodes(&self) -> Result<Vec<NodeStatus>, MetaError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(NODES)?;
        t.iter()?.map(|e| decode(e?.1.value())).collect()
    }

    pub fn create_file(
        &self,
        path: &str,
        redundancy: Redundancy,
        block_size: u64,
        lease: Lease,
        now_ms: u64,
    ) -> Result<FileInfo, MetaError> {
        check_path(path)?;
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(MetaError::Invalid(format!(
                "block size {block_size} must be 64 KiB .. 1 GiB (65536 .. 1073741824 bytes): every block is a \
                 record kept for good"
            )));
        }
        let tx = self.db.begin_write()?;
        if tx.open_table(FILES)?.get(path)?.is_some() {
            return Err(MetaError::Exists(path.to_string()));
        }
        let f = FileInfo {
            id: next_id(&tx, "next_file")?,
            path: path.to_string(),
            redundancy: Some(redundancy.into()),
            block_size,
            lease: lease.id,
            lease_expiry_ms: lease.expiry_ms,
            created_ms: now_ms,
            ..Default::default()
        };
        put_file(&tx, &f)?;
        tx.open_table(OPEN_FILES)?.insert(path, ())?;
        tx.commit()?;
        Ok(f)
    }

    /// Hands the single-writer lease of an unsealed file to a new writer, if
    /// no other writer holds a live one.
    pub fn open_for_append(&self, path: &str, lease: Lease, now_ms: u64) -> Result<FileInfo, MetaError> {
        let tx = self.db.begin_write()?;
        let mut f = get_file(&tx, path)?;
        if f.sealed {
            return Err(MetaError::Sealed(path.to_string()));
        }
        if f.lease_expiry_ms >= now_ms {
            return Err(MetaError::LeaseHeld { path: path.to_string(), ms_left: f.lease_expiry_ms - now_ms });
        }
        // The previous writer's lease expired: its open blocks are orphans.
        drop_open_blocks(&tx, path)?;
        f.lease = lease.id;
        f.lease_expiry_ms = lease.expiry_ms;
        put_file(&tx, &f)?;
        tx.commit()?;
        Ok(f)
    }

    /// Creates the blocks of one write unit (a replicated block, or an EC
    /// stripe) at the given placement: `placement[i]` lists the
    /// `(copy, disk, node)` chunks of block `i`.
    pub fn allocate(
        &self,
        path: &str,
        lease: u64,
        now_ms: u64,
        ttl_ms: u64,
        placement: &[Vec<ChunkLocation>],
    ) -> Result<Vec<BlockRecord>, MetaError> {
        let tx = self.db.begin_write()?;
        let f = leased_file(&tx, path, lease, now_ms, ttl_ms)?;
        let redundancy = Redundancy::try_from(f.redundancy.as_ref()).map_err(MetaError::Internal)?;
        let mut blocks = Vec::new();
        for (i, chunks) in placement.iter().enumerate() {
            let id = next_id(&tx, "next_block")?;
            let group = blocks.first().map_or(id, |b: &BlockRecord| b.id);
            let mut b = BlockRecord {
                id,
                file: f.id,
                group,
                ec_index: if matches!(redundancy, Redundancy::Ec { .. }) { i as u32 } else { 0 },
                redundancy: f.redundancy,
                chunks: chunks
                    .iter()
                    .map(|c| ChunkLocation { addr: String::new(), lost: false, ..c.clone() })
                    .collect(),
                ..Default::default()
            };
            b.set_state(BlockState::Open);
            put_block(&tx, &b)?;
            tx.open_table(OPEN_BLOCKS)?.insert((path, id), ())?;
            let mut index = tx.open_table(DISK_CHUNKS)?;
            for c in &b.chunks {
                index.insert((c.disk, b.id, c.copy), ())?;
            }
            blocks.push(b);
        }
        put_file(&tx, &f)?;
        tx.commit()?;
        Ok(blocks)
    }

    /// Appends written blocks to the file; the acknowledgement point of a write.
    pub fn commit(
        &self,
        path: &str,
        lease: u64,
        now_ms: u64,
        ttl_ms: u64,
        sizes: &[(u64, u64)],
    ) -> Result<u64, MetaError> {
        let tx = self.db.begin_write()?;
        let mut f = leased_file(&tx, path, lease, now_ms, ttl_ms)?;
        let data_members = match Redundancy::try_from(f.redundancy.as_ref()).map_err(MetaError::Internal)? {
            Redundancy::Replicated(_) => u32::MAX,
            Redundancy::Ec { data, .. } => u32::from(data),
        };
        for &(id, size) in sizes {
            let mut b = get_block(&tx, id)?;
            if b.file != f.id || b.state() != BlockState::Open {
                return Err(MetaError::Invalid(format!("block {id} is not an open block of {path}")));
            }
            b.size = size;
            b.set_state(BlockState::Sealed);
            tx.open_table(OPEN_BLOCKS)?.remove((path, id))?;
            if b.ec_index < data_members {
                f.size += size;
            }
            put_block(&tx, &b)?;
            f.block_ids.push(id);
        }
        put_file(&tx, &f)?;
        tx.commit()?;
        Ok(f.size)
    }

    /// Gives up open blocks whose write failed; their chunks get deleted.
    pub fn abandon(&self, path: &str, lease: u64, now_ms: u64, ttl_ms: u64, ids: &[u64]) -> Result<(), MetaError> {
        let tx = self.db.begin_write()?;
        let f = leased_file(&tx, path, lease, now_ms, ttl_ms)?;
        for &id in ids {
            let b = get_block(&tx, id)?;
            if b.file != f.id || b.state() != BlockState::Open {
                return Err(MetaError::Invalid(format!("block {id} is not an open block of {path}")));
            }
            tx.open_table(OPEN_BLOCKS)?.remove((path, id))?;
            delete_block(&tx, b)?;
        }
        put_file(&tx, &f)?;
        tx.commit()?;
        Ok(())
    }

    pub fn seal(&self, path: &str, lease: u64, now_ms: u64) -> Result<u64, MetaError> {
        let tx = self.db.begin_write()?;
        let mut f = leased_file(&tx, path, lease, now_ms, 0)?;
        // Left by write attempts the writer neither committed nor abandoned.
        drop_open_blocks(&tx, path)?;
        f.sealed = true;
        f.lease = 0;
        f.lease_expiry_ms = 0;
        put_file(&tx, &f)?;
        tx.open_table(OPEN_FILES)?.remove(path)?;
        tx.commit()?;
        Ok(f.size)
    }

    /// Lease recovery (HDFS' `recoverLease`): closes an unsealed file whose
    /// writer is gone. Blocks allocated but never committed are dropped;
    /// the file is sealed at its last committed length, or removed if
    /// nothing was committed. Refused while the writer's lease is live,
    /// unless `force`; a sealed file is left as it is.
    pub fn recover_file(&self, path: &str, now_ms: u64, force: bool) -> Result<Recovered, MetaError> {
        let tx = self.db.begin_write()?;
        let f = get_file(&tx, path)?;
        if f.sealed {
            return Ok(Recovered::Sealed { size: f.size });
        }
        if !force && f.lease_expiry_ms >= now_ms {
            return Err(MetaError::LeaseHeld { path: path.to_string(), ms_left: f.lease_expiry_ms - now_ms });
        }
        let r = recover_in(&tx, path)?;
        tx.commit()?;
        Ok(r)
    }

    /// Recovers every unsealed file whose lease expired before `now_ms`
    /// (see [`MetaDb::recover_file`]); returns what was done to which.
    pub fn recover_expired_leases(&self, now_ms: u64) -> Result<Vec<(String, Recovered)>, MetaError> {
        let expired: Vec<String> = {
            let tx = self.db.begin_read()?;
            let files = tx.open_table(FILES)?;
            let mut paths = Vec::new();
            for e in tx.open_table(OPEN_FILES)?.iter()? {
                let key = e?.0;
                let path = key.value();
                let f: Option<FileInfo> = files.get(path)?.map(|v| decode(v.value())).transpose()?;
                if f.is_some_and(|f| !f.sealed && f.lease_expiry_ms < now_ms) {
                    paths.push(path.to_string());
                }
            }
            paths
        };
        if expired.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.db.begin_write()?;
        let mut done = Vec::new();
        for path in expired {
            // Checked again: the writer may have renewed or sealed since.
            let f = tx.open_table(FILES)?.get(path.as_str())?.map(|v| decode::<FileInfo>(v.value())).transpose()?;
            if f.is_some_and(|f| !f.sealed && f.lease_expiry_ms < now_ms) {
                let r = recover_in(&tx, &path)?;
                done.push((path, r));
            }
        }
        tx.commit()?;
        Ok(done)
    }

    /// Unsealed files: `(path, lease expiry ms)`.
    pub fn open_files(&self) -> Result<Vec<(String, u64)>, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        let mut out = Vec::new();
        for e in tx.open_table(OPEN_FILES)?.iter()? {
            let key = e?.0;
            if let Some(v) = files.get(key.value())? {
                let f: FileInfo = decode(v.value())?;
                out.push((f.path, f.lease_expiry_ms));
            }
        }
        Ok(out)
    }

    /// The file record alone, without its blocks.
    pub fn file(&self, path: &str) -> Result<FileInfo, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        decode(files.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?.value())
    }

    /// The file with its blocks in order (chunk addresses not yet filled).
    pub fn stat(&self, path: &str) -> Result<FileInfo, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        let mut f: FileInfo = decode(files.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?.value())?;
        let blocks = tx.open_table(BLOCKS)?;
        for id in &f.block_ids {
            let b = blocks.get(*id)?.ok_or_else(|| MetaError::Internal(format!("block {id} of {path} missing")))?;
            f.blocks.push(decode(b.value())?);
        }
        Ok(f)
    }

    /// Files whose path starts with `prefix`, in path order.
    pub fn list(&self, prefix: &str) -> Result<Vec<FileInfo>, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        let mut out = Vec::new();
        for e in files.range(prefix..)? {
            let (k, v) = e?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    /// Removes a file; its blocks become `DELETED` and their chunks are
    /// queued for deletion on their nodes. Returns the number of blocks.
    pub fn delete(&self, path: &str) -> Result<u64, MetaError> {
        let tx = self.db.begin_write()?;
        let f = get_file(&tx, path)?;
        for id in &f.block_ids {
            delete_block(&tx, get_block(&tx, *id)?)?;
        }
        drop_open_blocks(&tx, path)?;
        tx.open_table(FILES)?.remove(path)?;
        tx.open_table(OPEN_FILES)?.remove(path)?;
        tx.commit()?;
        Ok(f.block_ids.len() as u64)
    }

    /// Deletes the open blocks of every file whose writer's lease expired
    /// before `now_ms` (the writer died or stalled: an expired lease can
    /// never commit), queueing their chunks for deletion. Returns how many.
    pub fn drop_expired_writes(&self, now_ms: u64) -> Result<u64, MetaError> {
        // A file deleted without its open blocks cannot exist; it would count as expired.
        let expired = |f: Option<FileInfo>| f.is_none_or(|f| f.lease_expiry_ms < now_ms);
        let candidates: std::collections::BTreeSet<String> = {
            let tx = self.db.begin_read()?;
            let files = tx.open_table(FILES)?;
            let mut paths = std::collections::BTreeSet::new();
            let mut last: Option<String> = None;
            // Keys sort by path: each file's open blocks come together.
            for e in tx.open_table(OPEN_BLOCKS)?.iter()? {
                let key = e?.0;
                let path = key.value().0;
                if last.as_deref() == Some(path) {
                    continue;
                }
                if expired(files.get(path)?.map(|v| decode(v.value())).transpose()?) {
                    paths.insert(path.to_string());
                }
                last = Some(path.to_string());
            }
            paths
        };
        if candidates.is_empty() {
            return Ok(0);
        }
        let tx = self.db.begin_write()?;
        let mut dropped = 0;
        for path in &candidates {
            // Checked again: another writer may have taken the file over since.
            let file = tx.open_table(FILES)?.get(path.as_str())?.map(|v| decode(v.value())).transpose()?;
            if expired(file) {
                dropped += drop_open_blocks(&tx, path)?;
            }
        }
        tx.commit()?;
        Ok(dropped)
    }

    /// Of `chunks` (disk, block, copy), those that no block record places
    /// on that disk: orphans, such as a chunk write that landed after its
    /// open block was dropped, or a moved copy whose move was refused.
    pub fn unknown_chunks(&self, chunks: &[(u32, u64, u32)]) -> Result<Vec<(u32, u64, u32)>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let mut unknown = Vec::new();
        for &c in chunks {
            if index.get(c)?.is_none() {
                unknown.push(c);
            }
        }
        Ok(unknown)
    }

    /// Confirms deletions a node made, and returns those still pending on
    /// `disks`.
    pub fn sync_deletes(
        &self,
        confirmed: &[(u32, u64, u32)],
        disks: &[u32],
    ) -> Result<Vec<(u32, u64, u32)>, MetaError> {
        if !confirmed.is_empty() {
            let tx = self.db.begin_write()?;
            let mut t = tx.open_table(PENDING_DELETES)?;
            for k in confirmed {
                t.remove(k)?;
            }
            drop(t);
            tx.commit()?;
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(PENDING_DELETES)?;
        let mut out = Vec::new();
        for &d in disks {
            for e in t.range((d, 0, 0)..=(d, u64::MAX, u32::MAX))? {
                out.push(e?.0.value());
            }
        }
        Ok(out)
    }

    /// Blocks with ids in `start..start + limit`, and the next id to assign.
    pub fn blocks(&self, start: u64, limit: u32) -> Result<(Vec<BlockRecord>, u64), MetaError> {
        let tx = self.db.begin_read()?;
        let end = tx.open_table(COUNTERS)?.get("next_block")?.map_or(0, |v| v.value());
        let t = tx.open_table(BLOCKS)?;
        let stop = start.saturating_add(u64::from(limit)).min(end);
        let mut out = Vec::new();
        for e in t.range(start..stop)? {
            out.push(decode(e?.1.value())?);
        }
        Ok((out, end))
    }

    /// Blocks by id, in the order given (deleted ones too).
    pub fn get_blocks(&self, ids: &[u64]) -> Result<Vec<BlockRecord>, MetaError> {
        if ids.len() > MAX_GET_BLOCKS {
            return Err(MetaError::Invalid(format!("{} blocks asked for; at most {MAX_GET_BLOCKS}", ids.len())));
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(BLOCKS)?;
        ids.iter().map(|&id| decode(t.get(id)?.ok_or(MetaError::NoSuchBlock(id))?.value())).collect()
    }

    /// A block and every block of its redundancy group (itself if
    /// replicated; the whole stripe, in member order, if erasure-coded).
    pub fn redundancy_group(&self, id: u64) -> Result<(BlockRecord, Vec<BlockRecord>), MetaError> {
        let b = self.get_blocks(&[id])?.remove(0);
        let width = match Redundancy::try_from(b.redundancy.as_ref()).map_err(MetaError::Internal)? {
            Redundancy::Replicated(_) => return Ok((b.clone(), vec![b])),
            r => r.width() as u64,
        };
        // A stripe's blocks get consecutive ids from its first one.
        let group = self.get_blocks(&(b.group..b.group + width).collect::<Vec<_>>())?;
        Ok((b, group))
    }

    /// `(disk, block, copy)` of the chunks of sealed blocks on `disks`.
    pub fn sealed_chunks_on(&self, disks: &[u32]) -> Result<Vec<(u32, u64, u32)>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let blocks = tx.open_table(BLOCKS)?;
        let mut out = Vec::new();
        for &d in disks {
            for e in index.range((d, 0, 0)..=(d, u64::MAX, u32::MAX))? {
                let key = e?.0.value();
                let b = blocks.get(key.1)?.ok_or(MetaError::NoSuchBlock(key.1))?;
                if decode::<BlockRecord>(b.value())?.state() == BlockState::Sealed {
                    out.push(key);
                }
            }
        }
        Ok(out)
    }

    /// Whether a disk id was ever registered.
    pub fn disk_known(&self, disk: u32) -> Result<bool, MetaError> {
        disk_known(&self.db.begin_read()?, disk)
    }

    /// Disks and nodes marked dead.
    pub fn dead(&self) -> Result<(Vec<u32>, Vec<u32>), MetaError> {
        let tx = self.db.begin_read()?;
        let keys = |t: redb::ReadOnlyTable<u32, ()>| -> Result<Vec<u32>, MetaError> {
            t.iter()?.map(|e| Ok(e?.0.value())).collect()
        };
        Ok((keys(tx.open_table(DEAD_DISKS)?)?, keys(tx.open_table(DEAD_NODES)?)?))
    }

    /// Disks and nodes DRAINING or DECOMMISSIONED, with their state.
    pub fn drain_states(&self) -> Result<(DrainStates, DrainStates), MetaError> {
        let tx = self.db.begin_read()?;
        let states = |t: redb::ReadOnlyTable<u32, i32>| -> Result<DrainStates, MetaError> {
            t.iter()?.map(|e| e.map(|(k, v)| (k.value(), device_state(v.value()))).map_err(MetaError::from)).collect()
        };
        Ok((states(tx.open_table(DRAIN_DISKS)?)?, states(tx.open_table(DRAIN_NODES)?)?))
    }

    /// Sets a registered disk's state (see [`set_state_in`]).
    pub fn set_disk_state(&self, disk: u32, state: DeviceState) -> Result<(), MetaError> {
        if !self.disk_known(disk)? {
            return Err(MetaError::Invalid(format!("disk {disk} is not registered")));
        }
        let tx = self.db.begin_write()?;
        set_state_in(&tx, (DEAD_DISKS, DRAIN_DISKS), "disk", disk, &[disk], state)?;
        tx.commit()?;
        Ok(())
    }

    /// Sets a registered node's state (see [`set_state_in`]); a drain
    /// covers every disk registered on the node.
    pub fn set_node_state(&self, node: u32, state: DeviceState) -> Result<(), MetaError> {
        let tx = self.db.begin_write()?;
        let disks: Vec<u32> = match tx.open_table(NODES)?.get(node)? {
            Some(v) => decode::<NodeStatus>(v.value())?.disks.iter().map(|d| d.id).collect(),
            None => return Err(MetaError::Invalid(format!("node {node} is not registered"))),
        };
        set_state_in(&tx, (DEAD_NODES, DRAIN_NODES), "node", node, &disks, state)?;
        tx.commit()?;
        Ok(())
    }

    /// Per disk of `disks`: the chunks block records (open or sealed) still
    /// place there, and their bytes.
    pub fn placed_on(&self, disks: &[u32]) -> Result<HashMap<u32, (u64, u64)>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let blocks = tx.open_table(BLOCKS)?;
        let mut out = HashMap::new();
        for &d in disks {
            let (mut chunks, mut bytes) = (0, 0);
            for e in index.range((d, 0, 0)..=(d, u64::MAX, u32::MAX))? {
                let block = e?.0.value().1;
                let b = blocks.get(block)?.ok_or(MetaError::NoSuchBlock(block))?;
                chunks += 1;
                bytes += decode::<BlockRecord>(b.value())?.size;
            }
            out.insert(d, (chunks, bytes));
        }
        Ok(out)
    }

    /// The distinct redundancies of the files in the namespace.
    pub fn redundancies(&self) -> Result<Vec<Redundancy>, MetaError> {
        let tx = self.db.begin_read()?;
        let mut seen = BTreeSet::new();
        for e in tx.open_table(FILES)?.iter()? {
            let f: FileInfo = decode(e?.1.value())?;
            if let Some(r) = f.redundancy {
                seen.insert((r.replicas, r.data, r.parity));
            }
        }
        seen.into_iter()
            .map(|(replicas, data, parity)| {
                let wire = dingo_proto::v1::Redundancy { replicas, data, parity };
                Redundancy::try_from(Some(&wire)).map_err(MetaError::Internal)
            })
            .collect()
    }

    /// Moves copy `copy` of sealed block `block` from `old_disk` to
    /// `new_disk` (on `new_node`) and queues the old copy for deletion, in one
    /// transaction. If the block is no longer sealed or the copy no longer on
    /// `old_disk`, nothing moves, the new copy is queued for deletion instead
    /// (unless it is a current location) and a `Conflict` is returned.
    pub fn replace_chunk(
        &self,
        block: u64,
        copy: u32,
        old_disk: u32,
        new_disk: u32,
        new_node: u32,
    ) -> Result<BlockRecord, MetaError> {
        if old_disk == new_disk {
            return Err(MetaError::Invalid(format!(
                "copy {copy} of block {block}: old and new disk are both {new_disk}"
            )));
        }
        let tx = self.db.begin_write()?;
        let mut b = get_block(&tx, block)?;
        let current = b.chunks.iter().position(|c| c.copy == copy);
        let refusal = if b.state() != BlockState::Sealed {
            Some(format!("block {block} is {}", b.state().as_str_name()))
        } else {
            match current {
                None => Some(format!("block {block} has no copy {copy}")),
                Some(i) if b.chunks[i].disk != old_disk => {
                    Some(format!("copy {copy} of block {block} moved to disk {} meanwhile", b.chunks[i].disk))
                }
                Some(_) => None,
            }
        };
        if let Some(why) = refusal {
            if !b.chunks.iter().any(|c| c.copy == copy && c.disk == new_disk) || b.state() == BlockState::Deleted {
                tx.open_table(PENDING_DELETES)?.insert((new_disk, block, copy), ())?;
                tx.commit()?;
            }
            return Err(MetaError::Conflict(format!("{why}; the new copy on disk {new_disk} is dropped")));
        }
        let c = &mut b.chunks[current.expect("checked above")];
        (c.disk, c.node) = (new_disk, new_node);
        put_block(&tx, &b)?;
        let mut index = tx.open_table(DISK_CHUNKS)?;
        index.remove((old_disk, block, copy))?;
        index.insert((new_disk, block, copy), ())?;
        let mut pending = tx.open_table(PENDING_DELETES)?;
        pending.insert((old_disk, block, copy), ())?;
        // The new copy exists, so any older deletion order for that place
        // has been carried out; it must never hit the new copy.
        pending.remove((new_disk, block, copy))?;
        drop((index, pending));
        settle_drain(&tx, old_disk)?;
        tx.commit()?;
        Ok(b)
    }

    /// Number of files and of block records.
    pub fn counts(&self) -> Result<(u64, u64), MetaError> {
        let tx = self.db.begin_read()?;
        Ok((tx.open_table(FILES)?.len()?, tx.open_table(BLOCKS)?.len()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R3: Redundancy = Redundancy::Replicated(3);

    fn lease(id: u64) -> Lease {
        Lease { id, expiry_ms: 10_000 }
    }

    fn loc(copy: u32, disk: u32) -> ChunkLocation {
        ChunkLocation { copy, disk, node: disk, ..Default::default() }
    }

    #[test]
    fn namespace_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = MetaDb::open(dir.path()).unwrap();
            db.create_file("/a/b", R3, 1 << 20, lease(7), 0).unwrap();
            let blocks = db.allocate("/a/b", 7, 1, 60_000, &[vec![loc(0, 0), loc(1, 1), loc(2, 2)]]).unwrap();
            assert_eq!(db.commit("/a/b", 7, 2, 60_000, &[(blocks[0].id, 123)]).unwrap(), 123);
            db.seal("/a/b", 7, 3).unwrap();
        }
        let db = MetaDb::open(dir.path()).unwrap();
        let f = db.stat("/a/b").unwrap();
        assert!(f.sealed);
        assert_eq!((f.size, f.blocks.len(), f.blocks[0].chunks.len()), (123, 1, 3));
        assert_eq!(f.blocks[0].state(), BlockState::Sealed);
        assert_eq!(db.list("/a/").unwrap().len(), 1);
        assert_eq!(db.list("/b").unwrap().len(), 0);
    }

    #[test]
    fn leases_and_sealing_are_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
        assert!(matches!(db.create_file("/f", R3, 1 << 16, lease(2), 0), Err(MetaError::Exists(_))));
        assert!(matches!(db.allocate("/f", 2, 0, 1000, &[vec![]]), Err(MetaError::LeaseLost(_))));
        assert!(matches!(db.open_for_append("/f", lease(2), 5), Err(MetaError::LeaseHeld { .. })));
        // Once the lease expires another writer may take over.
        db.open_for_append("/f", Lease { id: 2, expiry_ms: 50_000 }, 20_000).unwrap();
        assert!(matches!(db.seal("/f", 1, 20_001), Err(MetaError::LeaseLost(_))));
        db.seal("/f", 2, 20_001).unwrap();
        assert!(matches!(db.open_for_append("/f", lease(3), 0), Err(MetaError::Sealed(_))));
        assert!(matches!(db.allocate("/f", 2, 0, 1000, &[vec![]]), Err(MetaError::Sealed(_))));
    }

    #[test]
    fn expired_leases_are_recovered_by_sealing_or_removing() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        // Leases expiring at 1000, 1000 (renewed by allocate and commit) and 9000.
        db.create_file("/empty", R3, 1 << 16, Lease { id: 1, expiry_ms: 1000 }, 0).unwrap();
        db.create_file("/partial", R3, 1 << 16, lease(2), 0).unwrap();
        db.create_file("/live", R3, 1 << 16, Lease { id: 3, expiry_ms: 9000 }, 0).unwrap();
        let b = db.allocate("/partial", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
        db.commit("/partial", 2, 0, 1000, &[(b[0].id, 60)]).unwrap();
        let uncommitted = db.allocate("/partial", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
        assert_eq!(db.open_files().unwrap().len(), 3);
        assert!(db.recover_expired_leases(1000).unwrap().is_empty(), "not expired yet");
        assert!(matches!(db.recover_file("/live", 1000, false), Err(MetaError::LeaseHeld { .. })));
        let mut done = db.recover_expired_leases(1001).unwrap();
        done.sort();
        assert_eq!(
            done,
            vec![("/empty".to_string(), Recovered::Removed), ("/partial".to_string(), Recovered::Sealed { size: 60 })]
        );
        assert!(matches!(db.stat("/empty"), Err(MetaError::NotFound(_))));
        let f = db.stat("/partial").unwrap();
        assert!(f.sealed && f.size == 60 && f.blocks.len() == 1);
        assert_eq!(db.get_blocks(&[uncommitted[0].id]).unwrap()[0].state(), BlockState::Deleted);
        // A writer whose file was recovered under it has lost its lease.
        assert!(matches!(db.commit("/partial", 2, 1002, 1000, &[]), Err(MetaError::Sealed(_))));
        // Forced recovery of a live lease (the operator knows the writer is gone).
        assert_eq!(db.recover_file("/live", 1001, true).unwrap(), Recovered::Removed);
        assert!(db.open_files().unwrap().is_empty());
        // Sealed and deleted files leave the open index.
        db.create_file("/s", R3, 1 << 16, lease(4), 0).unwrap();
        db.seal("/s", 4, 1).unwrap();
        db.create_file("/d", R3, 1 << 16, lease(5), 0).unwrap();
        db.delete("/d").unwrap();
        assert!(db.open_files().unwrap().is_empty());
    }

    #[test]
    fn deletion_queues_chunk_deletes_until_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
        let b = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4), loc(1, 5)]]).unwrap();
        db.commit("/f", 1, 0, 1000, &[(b[0].id, 10)]).unwrap();
        let b2 = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
        db.abandon("/f", 1, 0, 1000, &[b2[0].id]).unwrap();
        assert_eq!(db.sync_deletes(&[], &[4]).unwrap(), vec![(4, b2[0].id, 0)]);
        assert_eq!(db.delete("/f").unwrap(), 1);
        assert!(matches!(db.stat("/f"), Err(MetaError::NotFound(_))));
        let pending = db.sync_deletes(&[(4, b2[0].id, 0)], &[4, 5]).unwrap();
        assert_eq!(pending, vec![(4, b[0].id, 0), (5, b[0].id, 1)]);
        let (rows, end) = db.blocks(0, 10).unwrap();
        assert_eq!(end, 2);
        assert!(rows.iter().all(|r| r.state() == BlockState::Deleted));
    }

    /// Regression: a writer that died between allocate and commit left its
    /// blocks open, and their chunks on the nodes, forever.
    #[test]
    fn open_blocks_of_a_gone_writer_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let state = |db: &MetaDb, id: u64| db.get_blocks(&[id]).unwrap()[0].state();
        let allocate = |db: &MetaDb, path: &str, lease: u64, now: u64, disk: u32| {
            db.allocate(path, lease, now, 1000, &[vec![loc(0, disk)]]).unwrap()[0].id
        };
        let (committed, orphan, taken_over, deleted, sealed);
        {
            let db = MetaDb::open(dir.path()).unwrap();
            // Lease expiry at now + ttl = 1000.
            db.create_file("/died", R3, 1 << 16, lease(1), 0).unwrap();
            committed = allocate(&db, "/died", 1, 0, 1);
            orphan = allocate(&db, "/died", 1, 0, 1);
            db.commit("/died", 1, 0, 1000, &[(committed, 10)]).unwrap();
            assert_eq!(db.drop_expired_writes(1000).unwrap(), 0, "the lease is still live");
            for (path, lease_id) in [("/taken", 2), ("/deleted", 3), ("/sealed", 4)] {
                db.create_file(path, R3, 1 << 16, lease(lease_id), 0).unwrap();
            }
            taken_over = allocate(&db, "/taken", 2, 0, 2);
            deleted = allocate(&db, "/deleted", 3, 0, 3);
            sealed = allocate(&db, "/sealed", 4, 0, 4);
            db.open_for_append("/taken", Lease { id: 5, expiry_ms: 9_000_000 }, 5000).unwrap();
            db.delete("/deleted").unwrap();
            db.seal("/sealed", 4, 10).unwrap();
            for id in [taken_over, deleted, sealed] {
                assert_eq!(state(&db, id), BlockState::Deleted, "block {id}");
            }
        }
        // The open block survives a restart and is dropped once its lease is gone.
        let db = MetaDb::open(dir.path()).unwrap();
        assert_eq!(state(&db, orphan), BlockState::Open);
        assert_eq!(db.drop_expired_writes(1001).unwrap(), 1);
        assert_eq!((state(&db, orphan), state(&db, committed)), (BlockState::Deleted, BlockState::Sealed));
        assert_eq!(db.stat("/died").unwrap().size, 10);
        assert_eq!(db.drop_expired_writes(5000).unwrap(), 0, "each block is dropped once");
        let pending = db.sync_deletes(&[], &[1, 2, 3, 4]).unwrap();
        assert_eq!(pending, vec![(1, orphan, 0), (2, taken_over, 0), (3, deleted, 0), (4, sealed, 0)]);
        // The new writer of a taken-over file keeps its own open blocks.
        let fresh = allocate(&db, "/taken", 5, 6000, 2);
        assert_eq!(db.drop_expired_writes(6500).unwrap(), 0);
        assert_eq!(state(&db, fresh), BlockState::Open);
    }

    #[test]
    fn chunks_no_block_places_are_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
        let open = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 1), loc(1, 2)]]).unwrap()[0].id;
        let gone = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 1)]]).unwrap()[0].id;
        db.abandon("/f", 1, 0, 1000, &[gone]).unwrap();
        let asked = [(1, open, 0), (2, open, 1), (2, open, 0), (1, gone, 0), (1, 999, 0)];
        assert_eq!(db.unknown_chunks(&asked).unwrap(), vec![(2, open, 0), (1, gone, 0), (1, 999, 0)]);
    }

    #[test]
    fn node_and_disk_ids_are_stable() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        let disk = |u: &str| DiskRegistration { uuid: u.into(), ..Default::default() };
        let (n1, d1) = db.register_node("h:1", &[disk("a"), disk("b")]).unwrap();
        let (n2, d2) = db.register_node("h:2", &[disk("c")]).unwrap();
        assert_eq!((n1, n2, d1, d2), (0, 1, vec![0, 1], vec![2]));
        assert_eq!(db.register_node("h:1", &[disk("b"), disk("a")]).unwrap(), (0, vec![1, 0]));
        // Disk "c" moves to node 0.
        db.register_node("h:1", &[disk("a"), disk("c")]).unwrap();
        let nodes = db.nodes().unwrap();
        assert!(nodes[1].disks.is_empty());
    }

    #[test]
    fn bad_paths_are_refused() {
        for p in ["", "/", "a/b", "/a//b", "/a/../b", "/a/./b", "/a/"] {
            assert!(matches!(check_path(p), Err(MetaError::InvalidPath(_))), "{p}");
        }
        check_path("/a/b.txt").unwrap();
    }

    /// A sealed file `/f` with one replicated block on disks 4, 5, 6.
    fn sealed_block(db: &MetaDb) -> u64 {
        db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
        let b = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4), loc(1, 5), loc(2, 6)]]).unwrap();
        db.commit("/f", 1, 0, 1000, &[(b[0].id, 10)]).unwrap();
        b[0].id
    }

    #[test]
    fn chunks_are_indexed_by_disk_and_replaced_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        let id = sealed_block(&db);
        // An open block's chunks are not listed.
        db.create_file("/g", R3, 1 << 16, lease(2), 0).unwrap();
        db.allocate("/g", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
        assert_eq!(db.sealed_chunks_on(&[4, 7]).unwrap(), vec![(4, id, 0)]);

        let b = db.replace_chunk(id, 0, 4, 7, 7).unwrap();
        assert_eq!((b.chunks[0].disk, b.chunks[0].node), (7, 7));
        assert_eq!(db.sealed_chunks_on(&[4, 7]).unwrap(), vec![(7, id, 0)]);
        assert_eq!(db.sync_deletes(&[], &[4]).unwrap(), vec![(4, id, 0)], "old copy queued for deletion");
        // A second replace from the old place finds the chunk moved: the new
        // copy it made is dropped, the location stays.
        let e = db.replace_chunk(id, 0, 4, 8, 8).unwrap_err();
        assert!(matches!(e, MetaError::Conflict(_)) && e.to_string().contains("moved to disk 7"), "{e}");
        assert_eq!(db.sync_deletes(&[], &[8]).unwrap(), vec![(8, id, 0)]);
        assert_eq!(db.get_blocks(&[id]).unwrap()[0].chunks[0].disk, 7);
        // Once the block is deleted, nothing moves and its chunks leave the index.
        db.delete("/f").unwrap();
        assert!(matches!(db.replace_chunk(id, 1, 5, 9, 9), Err(MetaError::Conflict(_))));
        assert_eq!(db.sync_deletes(&[], &[9]).unwrap(), vec![(9, id, 1)]);
        assert!(db.sealed_chunks_on(&[5, 6, 7]).unwrap().is_empty());
        assert!(matches!(db.get_blocks(&[id, 99]), Err(MetaError::NoSuchBlock(99))));
    }

    #[test]
    fn the_open_block_index_is_built_for_older_databases() {
        let dir = tempfile::tempdir().unwrap();
        let (open, of_deleted_file) = {
            let db = MetaDb::open(dir.path()).unwrap();
            db.create_file("/writing", R3, 1 << 16, lease(1), 0).unwrap();
            db.create_file("/deleted", R3, 1 << 16, lease(2), 0).unwrap();
            let open = db.allocate("/writing", 1, 0, 1000, &[vec![loc(0, 1)]]).unwrap()[0].id;
            let of_deleted_file = db.allocate("/deleted", 2, 0, 1000, &[vec![loc(0, 2)]]).unwrap()[0].id;
            // Forget the index, as a database from before it existed whose
            // file was deleted without its open blocks.
            let tx = db.db.begin_write().unwrap();
            tx.delete_table(OPEN_BLOCKS).unwrap();
            tx.open_table(COUNTERS).unwrap().remove(OPEN_INDEX_BUILT).unwrap();
            tx.open_table(FILES).unwrap().remove("/deleted").unwrap();
            tx.commit().unwrap();
            (open, of_deleted_file)
        };
        let db = MetaDb::open(dir.path()).unwrap();
        let state = |id| db.get_blocks(&[id]).unwrap()[0].state();
        assert_eq!((state(open), state(of_deleted_file)), (BlockState::Open, BlockState::Deleted));
        assert_eq!(db.drop_expired_writes(1001).unwrap(), 1);
        assert_eq!(state(open), BlockState::Deleted);
        assert_eq!(db.sync_deletes(&[], &[1, 2]).unwrap(), vec![(1, open, 0), (2, of_deleted_file, 0)]);
    }

    #[test]
    fn the_disk_index_is_built_for_older_databases_and_dead_marks_persist() {
        let dir = tempfile::tempdir().unwrap();
        let id = {
            let db = MetaDb::open(dir.path()).unwrap();
            let id = sealed_block(&db);
            // Forget the index, as a database from before it existed.
            let tx = db.db.begin_write().unwrap();
            tx.delete_table(DISK_CHUNKS).unwrap();
            tx.open_table(COUNTERS).unwrap().remove(DISK_INDEX_BUILT).unwrap();
            tx.commit().unwrap();
            let disk = |u: &str| DiskRegistration { uuid: u.into(), ..Default::default() };
            db.register_node("h:1", &[disk("a"), disk("b")]).unwrap();
            db.set_disk_state(1, DeviceState::Dead).unwrap();
            db.set_node_state(0, DeviceState::Dead).unwrap();
            assert!(db.set_disk_state(9, DeviceState::Dead).unwrap_err().to_string().contains("not registered"));
            assert!(db.set_node_state(3, DeviceState::Dead).is_err());
            id
        };
        let db = MetaDb::open(dir.path()).unwrap();
        assert_eq!(db.sealed_chunks_on(&[4, 5, 6]).unwrap(), vec![(4, id, 0), (5, id, 1), (6, id, 2)]);
        assert_eq!(db.dead().unwrap(), (vec![1], vec![0]));
        db.set_node_state(0, DeviceState::Live).unwrap();
        assert_eq!(db.dead().unwrap(), (vec![1], vec![]));
    }

    #[test]
    fn a_stripe_is_its_blocks_redundancy_group() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        let ec = Redundancy::Ec { data: 2, parity: 1 };
        db.create_file("/e", ec, 1 << 16, lease(1), 0).unwrap();
        let b = db.allocate("/e", 1, 0, 1000, &[vec![loc(0, 1)], vec![loc(0, 2)], vec![loc(0, 3)]]).unwrap();
        let (one, group) = db.redundancy_group(b[1].id).unwrap();
        assert_eq!(one.ec_index, 1);
        assert_eq!(group.iter().map(|g| g.id).collect::<Vec<_>>(), b.iter().map(|g| g.id).collect::<Vec<_>>());
    }

    /// Three nodes (0, 1, 2) with disks (0, 1), (2, 3), (4, 5).
    fn three_nodes(db: &MetaDb) {
        let disk = |u: String| DiskRegistration { uuid: u, ..Default::default() };
        for n in 0..3 {
            db.register_node(&format!("h:{n}"), &[disk(format!("{n}a")), disk(format!("{n}b"))]).unwrap();
        }
    }

    fn committed(db: &MetaDb, path: &str, lease_id: u64, disks: [u32; 3]) -> u64 {
        db.create_file(path, R3, 1 << 16, lease(lease_id), 0).unwrap();
        let chunks = disks.iter().enumerate().map(|(c, &d)| ChunkLocation {
            copy: c as u32,
            disk: d,
            node: d / 2,
            ..Default::default()
        });
        let b = db.allocate(path, lease_id, 0, 1000, &[chunks.collect()]).unwrap();
        db.commit(path, lease_id, 0, 1000, &[(b[0].id, 10)]).unwrap();
        b[0].id
    }

    #[test]
    fn a_drain_ends_exactly_when_the_last_chunk_leaves_and_survives_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = MetaDb::open(dir.path()).unwrap();
            three_nodes(&db);
            let a = committed(&db, "/a", 1, [0, 2, 4]);
            let b = committed(&db, "/b", 2, [0, 3, 5]);
            db.set_disk_state(0, DeviceState::Draining).unwrap();
            let disk0 = |db: &MetaDb| db.drain_states().unwrap().0.get(&0).copied();
            assert_eq!(disk0(&db), Some(DeviceState::Draining));
            assert_eq!(db.placed_on(&[0]).unwrap()[&0], (2, 20));
            db.replace_chunk(a, 0, 0, 1, 0).unwrap();
            assert_eq!(disk0(&db), Some(DeviceState::Draining), "block /b still places a chunk there");
            db.replace_chunk(b, 0, 0, 1, 0).unwrap();
            assert_eq!(disk0(&db), Some(DeviceState::Decommissioned));
            assert_eq!(db.placed_on(&[0]).unwrap()[&0], (0, 0));
            // Draining again keeps it decommissioned; it cannot be set directly.
            db.set_disk_state(0, DeviceState::Draining).unwrap();
            assert_eq!(disk0(&db), Some(DeviceState::Decommissioned));
            let e = db.set_disk_state(1, DeviceState::Decommissioned).unwrap_err().to_string();
            assert!(e.contains("DECOMMISSIONED cannot be set"), "{e}");

            // A node drains through its disks; deleting the last file empties it.
            db.set_node_state(1, DeviceState::Draining).unwrap();
            db.delete("/a").unwrap();
            assert_eq!(db.drain_states().unwrap().1[&1], DeviceState::Draining, "disk 3 still holds /b");
            // An empty node is decommissioned at once; LIVE cancels a drain.
            db.set_node_state(2, DeviceState::Draining).unwrap();
            db.set_node_state(2, DeviceState::Live).unwrap();
            // A dead device has nothing to drain.
            db.set_disk_state(5, DeviceState::Dead).unwrap();
            let e = db.set_disk_state(5, DeviceState::Draining).unwrap_err().to_string();
            assert!(e.contains("disk 5 is DEAD"), "{e}");
        }
        let db = MetaDb::open(dir.path()).unwrap();
        let (disks, nodes) = db.drain_states().unwrap();
        assert_eq!(disks, HashMap::from([(0, DeviceState::Decommissioned)]));
        assert_eq!(nodes, HashMap::from([(1, DeviceState::Draining)]));
        db.delete("/b").unwrap();
        assert_eq!(db.drain_states().unwrap().1[&1], DeviceState::Decommissioned);
        db.set_disk_state(0, DeviceState::Live).unwrap();
        assert!(db.drain_states().unwrap().0.is_empty());
        assert_eq!(db.dead().unwrap(), (vec![5], vec![]));
    }

    #[test]
    fn an_open_block_holds_a_drain_until_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = MetaDb::open(dir.path()).unwrap();
        three_nodes(&db);
        db.create_file("/w", R3, 1 << 16, lease(1), 0).unwrap();
        let open = db.allocate("/w", 1, 0, 1000, &[vec![loc(0, 2)]]).unwrap()[0].id;
        db.set_node_state(1, DeviceState::Draining).unwrap();
        assert_eq!(db.drain_states().unwrap().1[&1], DeviceState::Draining);
        db.abandon("/w", 1, 0, 1000, &[open]).unwrap();
        assert_eq!(db.drain_states().unwrap().1[&1], DeviceState::Decommissioned);
    }
}
