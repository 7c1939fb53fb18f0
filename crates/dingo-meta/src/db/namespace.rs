//! The namespace: files, their blocks in order, single-writer leases, lease
//! recovery and deletion.

use super::chunks::{delete_block, get_block, insert_block, put_block};
use super::records::{BlockRecord, BlockState, ChunkPlacement, FileRecord};
use super::tables::{BLOCKS, FILES, OPEN_BLOCKS, OPEN_FILES};
use super::{MetaDb, decode, next_id};
use crate::error::MetaError;
use dingo_proto::Redundancy;
use dingo_types::BlockId;
use prost::Message;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::collections::BTreeSet;

/// Smallest block size a file may have: one checksum segment. Smaller
/// blocks only multiply block records, which stay (deleted) for good.
pub const MIN_BLOCK_SIZE: u64 = 64 << 10;
pub const MAX_BLOCK_SIZE: u64 = 1 << 30;

/// A writer's lease on a file.
#[derive(Clone, Copy, Debug)]
pub struct Lease {
    pub id: u64,
    pub expiry_ms: u64,
}

/// What recovering an unsealed file's lease did.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Recovered {
    /// Sealed at its last committed (acknowledged) length.
    Sealed { size: u64 },
    /// Nothing was ever committed: the file was removed.
    Removed,
}

fn get_file(tx: &WriteTransaction, path: &str) -> Result<FileRecord, MetaError> {
    let t = tx.open_table(FILES)?;
    let v = t.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?;
    decode(v.value())
}

fn put_file(tx: &WriteTransaction, f: &FileRecord) -> Result<(), MetaError> {
    tx.open_table(FILES)?.insert(f.path.as_str(), f.encode_to_vec().as_slice())?;
    Ok(())
}

/// The file at `path` in `tx`, if any.
fn find_file(tx: &WriteTransaction, path: &str) -> Result<Option<FileRecord>, MetaError> {
    tx.open_table(FILES)?.get(path)?.map(|v| decode(v.value())).transpose()
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

/// Checks the lease and that the file is still open; renews the lease.
fn leased_file(
    tx: &WriteTransaction,
    path: &str,
    lease: u64,
    now_ms: u64,
    ttl_ms: u64,
) -> Result<FileRecord, MetaError> {
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

/// An open block of the file at `path` (by `file` id), or an error.
fn open_block_of(tx: &WriteTransaction, f: &FileRecord, path: &str, id: u64) -> Result<BlockRecord, MetaError> {
    let b = get_block(tx, id)?;
    if b.file != f.id || b.state() != BlockState::Open {
        return Err(MetaError::Invalid(format!("block {id} is not an open block of {path}")));
    }
    Ok(b)
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
    pub fn create_file(
        &self,
        path: &str,
        redundancy: Redundancy,
        block_size: u64,
        lease: Lease,
        now_ms: u64,
    ) -> Result<FileRecord, MetaError> {
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
        let f = FileRecord {
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
    pub fn open_for_append(&self, path: &str, lease: Lease, now_ms: u64) -> Result<FileRecord, MetaError> {
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
    /// stripe) at the given placement: `placement[i]` lists the chunks of
    /// block `i`.
    pub fn allocate(
        &self,
        path: &str,
        lease: u64,
        now_ms: u64,
        ttl_ms: u64,
        placement: &[Vec<ChunkPlacement>],
    ) -> Result<Vec<BlockRecord>, MetaError> {
        let tx = self.db.begin_write()?;
        let f = leased_file(&tx, path, lease, now_ms, ttl_ms)?;
        let redundancy = f.redundancy()?;
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
                chunks: chunks.clone(),
                ..Default::default()
            };
            b.set_state(BlockState::Open);
            insert_block(&tx, &b)?;
            tx.open_table(OPEN_BLOCKS)?.insert((path, id), ())?;
            blocks.push(b);
        }
        put_file(&tx, &f)?;
        tx.commit()?;
        Ok(blocks)
    }

    /// Appends written blocks, given as `(block id, size)`, to the file; the
    /// acknowledgement point of a write.
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
        let data_members = match f.redundancy()? {
            Redundancy::Replicated(_) => u32::MAX,
            Redundancy::Ec { data, .. } => u32::from(data),
        };
        for &(id, size) in sizes {
            let mut b = open_block_of(&tx, &f, path, id)?;
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
    pub fn abandon(&self, path: &str, lease: u64, now_ms: u64, ttl_ms: u64, ids: &[BlockId]) -> Result<(), MetaError> {
        let tx = self.db.begin_write()?;
        let f = leased_file(&tx, path, lease, now_ms, ttl_ms)?;
        for &BlockId(id) in ids {
            let b = open_block_of(&tx, &f, path, id)?;
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
        let expired = |f: &FileRecord| !f.sealed && f.lease_expiry_ms < now_ms;
        let candidates: Vec<String> = self.open_file_records()?.into_iter().filter(expired).map(|f| f.path).collect();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.db.begin_write()?;
        let mut done = Vec::new();
        for path in candidates {
            // Checked again: the writer may have renewed or sealed since.
            if find_file(&tx, &path)?.is_some_and(|f| expired(&f)) {
                let r = recover_in(&tx, &path)?;
                done.push((path, r));
            }
        }
        tx.commit()?;
        Ok(done)
    }

    /// The records of the unsealed files.
    fn open_file_records(&self) -> Result<Vec<FileRecord>, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        let mut out = Vec::new();
        for e in tx.open_table(OPEN_FILES)?.iter()? {
            let key = e?.0;
            if let Some(v) = files.get(key.value())? {
                out.push(decode(v.value())?);
            }
        }
        Ok(out)
    }

    /// Unsealed files: `(path, lease expiry ms)`.
    pub fn open_files(&self) -> Result<Vec<(String, u64)>, MetaError> {
        Ok(self.open_file_records()?.into_iter().map(|f| (f.path, f.lease_expiry_ms)).collect())
    }

    /// The file record alone, without its blocks.
    pub fn file(&self, path: &str) -> Result<FileRecord, MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        decode(files.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?.value())
    }

    /// The file and its blocks in file order.
    pub fn stat(&self, path: &str) -> Result<(FileRecord, Vec<BlockRecord>), MetaError> {
        let tx = self.db.begin_read()?;
        let files = tx.open_table(FILES)?;
        let f: FileRecord = decode(files.get(path)?.ok_or_else(|| MetaError::NotFound(path.to_string()))?.value())?;
        let blocks = tx.open_table(BLOCKS)?;
        let mut out = Vec::with_capacity(f.block_ids.len());
        for id in &f.block_ids {
            let b = blocks.get(*id)?.ok_or_else(|| MetaError::Internal(format!("block {id} of {path} missing")))?;
            out.push(decode(b.value())?);
        }
        Ok((f, out))
    }

    /// Files whose path starts with `prefix`, in path order.
    pub fn list(&self, prefix: &str) -> Result<Vec<FileRecord>, MetaError> {
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

    /// Removes a file; its blocks become `Deleted` and their chunks are
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
        let expired = |f: Option<FileRecord>| f.is_none_or(|f| f.lease_expiry_ms < now_ms);
        let candidates: BTreeSet<String> = {
            let tx = self.db.begin_read()?;
            let files = tx.open_table(FILES)?;
            let mut paths = BTreeSet::new();
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
            if expired(find_file(&tx, path)?) {
                dropped += drop_open_blocks(&tx, path)?;
            }
        }
        tx.commit()?;
        Ok(dropped)
    }

    /// The distinct redundancies of the files in the namespace.
    pub fn redundancies(&self) -> Result<Vec<Redundancy>, MetaError> {
        let tx = self.db.begin_read()?;
        let mut seen = BTreeSet::new();
        for e in tx.open_table(FILES)?.iter()? {
            let f: FileRecord = decode(e?.1.value())?;
            if let Some(r) = f.redundancy {
                seen.insert((r.replicas, r.data, r.parity));
            }
        }
        seen.into_iter()
            .map(|(replicas, data, parity)| super::RedundancyRecord { replicas, data, parity }.redundancy())
            .collect()
    }

    /// Number of files and of block records.
    pub fn counts(&self) -> Result<(u64, u64), MetaError> {
        let tx = self.db.begin_read()?;
        Ok((tx.open_table(FILES)?.len()?, tx.open_table(BLOCKS)?.len()?))
    }
}
