//! Blocks and their chunk locations: the block table, the per-disk chunk
//! index, deletion queues, orphan checks and chunk moves.

use super::nodes::settle_drain;
use super::records::{BlockRecord, BlockState, ChunkPlacement};
use super::tables::{BLOCKS, COUNTERS, ChunkKey, DISK_CHUNKS, PENDING_DELETES};
use super::{MetaDb, decode};
use crate::error::MetaError;
use dingo_proto::Redundancy;
use dingo_types::{BlockId, DiskId, NodeId};
use prost::Message;
use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use std::collections::HashMap;

/// Most blocks one `get_blocks` call returns.
pub const MAX_GET_BLOCKS: usize = 65_536;

/// The key of chunk `c` of block `b`.
pub(super) fn key_of(b: &BlockRecord, c: &ChunkPlacement) -> ChunkKey {
    ChunkKey::new(c.disk, b.id, c.copy)
}

pub(super) fn get_block(tx: &WriteTransaction, id: u64) -> Result<BlockRecord, MetaError> {
    let t = tx.open_table(BLOCKS)?;
    let v = t.get(id)?.ok_or(MetaError::NoSuchBlock(id))?;
    decode(v.value())
}

pub(super) fn put_block(tx: &WriteTransaction, b: &BlockRecord) -> Result<(), MetaError> {
    tx.open_table(BLOCKS)?.insert(b.id, b.encode_to_vec().as_slice())?;
    Ok(())
}

/// Stores a new block and indexes its chunks.
pub(super) fn insert_block(tx: &WriteTransaction, b: &BlockRecord) -> Result<(), MetaError> {
    put_block(tx, b)?;
    let mut index = tx.open_table(DISK_CHUNKS)?;
    for c in &b.chunks {
        index.insert(key_of(b, c).tuple(), ())?;
    }
    Ok(())
}

/// Marks a block deleted and queues its chunks for deletion.
pub(super) fn delete_block(tx: &WriteTransaction, mut b: BlockRecord) -> Result<(), MetaError> {
    b.set_state(BlockState::Deleted);
    let mut pending = tx.open_table(PENDING_DELETES)?;
    let mut index = tx.open_table(DISK_CHUNKS)?;
    for c in &b.chunks {
        pending.insert(key_of(&b, c).tuple(), ())?;
        index.remove(key_of(&b, c).tuple())?;
    }
    drop((pending, index));
    put_block(tx, &b)?;
    for c in &b.chunks {
        settle_drain(tx, c.disk)?;
    }
    Ok(())
}

impl MetaDb {
    /// Of `chunks`, those that no block record places on their disk:
    /// orphans, such as a chunk write that landed after its open block was
    /// dropped, or a moved copy whose move was refused.
    pub fn unknown_chunks(&self, chunks: &[ChunkKey]) -> Result<Vec<ChunkKey>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let mut unknown = Vec::new();
        for &c in chunks {
            if index.get(c.tuple())?.is_none() {
                unknown.push(c);
            }
        }
        Ok(unknown)
    }

    /// Confirms deletions a node made, and returns those still pending on
    /// `disks`.
    pub fn sync_deletes(&self, confirmed: &[ChunkKey], disks: &[DiskId]) -> Result<Vec<ChunkKey>, MetaError> {
        if !confirmed.is_empty() {
            let tx = self.db.begin_write()?;
            let mut t = tx.open_table(PENDING_DELETES)?;
            for k in confirmed {
                t.remove(k.tuple())?;
            }
            drop(t);
            tx.commit()?;
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(PENDING_DELETES)?;
        let mut out = Vec::new();
        for &DiskId(d) in disks {
            for e in t.range(ChunkKey::disk_range(d))? {
                out.push(ChunkKey::from_tuple(e?.0.value()));
            }
        }
        Ok(out)
    }

    /// Blocks with ids in `start..start + limit`, and the next id to assign.
    pub fn blocks(&self, start: BlockId, limit: u32) -> Result<(Vec<BlockRecord>, u64), MetaError> {
        let start = start.0;
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
    pub fn get_blocks(&self, ids: &[BlockId]) -> Result<Vec<BlockRecord>, MetaError> {
        if ids.len() > MAX_GET_BLOCKS {
            return Err(MetaError::Invalid(format!("{} blocks asked for; at most {MAX_GET_BLOCKS}", ids.len())));
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(BLOCKS)?;
        ids.iter().map(|&BlockId(id)| decode(t.get(id)?.ok_or(MetaError::NoSuchBlock(id))?.value())).collect()
    }

    /// A block and every block of its redundancy group (itself if
    /// replicated; the whole stripe, in member order, if erasure-coded).
    pub fn redundancy_group(&self, id: BlockId) -> Result<(BlockRecord, Vec<BlockRecord>), MetaError> {
        let b = self.get_blocks(&[id])?.remove(0);
        let width = match b.redundancy()? {
            Redundancy::Replicated(_) => return Ok((b.clone(), vec![b])),
            r => r.width() as u64,
        };
        // A stripe's blocks get consecutive ids from its first one.
        let group = self.get_blocks(&(b.group..b.group + width).map(BlockId).collect::<Vec<_>>())?;
        Ok((b, group))
    }

    /// The chunks of sealed blocks on `disks`.
    pub fn sealed_chunks_on(&self, disks: &[DiskId]) -> Result<Vec<ChunkKey>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let blocks = tx.open_table(BLOCKS)?;
        let mut out = Vec::new();
        for &DiskId(d) in disks {
            for e in index.range(ChunkKey::disk_range(d))? {
                let key = ChunkKey::from_tuple(e?.0.value());
                let b = blocks.get(key.block.0)?.ok_or(MetaError::NoSuchBlock(key.block.0))?;
                if decode::<BlockRecord>(b.value())?.state() == BlockState::Sealed {
                    out.push(key);
                }
            }
        }
        Ok(out)
    }

    /// Per disk of `disks`: the chunks block records (open or sealed) still
    /// place there, and their bytes.
    pub fn placed_on(&self, disks: &[DiskId]) -> Result<HashMap<DiskId, (u64, u64)>, MetaError> {
        let tx = self.db.begin_read()?;
        let index = tx.open_table(DISK_CHUNKS)?;
        let blocks = tx.open_table(BLOCKS)?;
        let mut out = HashMap::new();
        for &d in disks {
            let (mut chunks, mut bytes) = (0, 0);
            for e in index.range(ChunkKey::disk_range(d.0))? {
                let block = e?.0.value().1;
                let b = blocks.get(block)?.ok_or(MetaError::NoSuchBlock(block))?;
                chunks += 1;
                bytes += decode::<BlockRecord>(b.value())?.size;
            }
            out.insert(d, (chunks, bytes));
        }
        Ok(out)
    }

    /// Moves the chunk `old` (a copy of a sealed block on its disk) to
    /// `new_disk` (on `new_node`) and queues the old copy for deletion, in one
    /// transaction. If the block is no longer sealed or the copy no longer on
    /// `old.disk`, nothing moves, the new copy is queued for deletion instead
    /// (unless it is a current location) and a `Conflict` is returned.
    pub fn replace_chunk(
        &self,
        old: ChunkKey,
        DiskId(new_disk): DiskId,
        NodeId(new_node): NodeId,
    ) -> Result<BlockRecord, MetaError> {
        let (block, copy, old_disk) = (old.block.0, old.copy, old.disk.0);
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
        let new = ChunkKey { disk: DiskId(new_disk), ..old };
        if let Some(why) = refusal {
            if !b.chunks.iter().any(|c| c.copy == copy && c.disk == new_disk) || b.state() == BlockState::Deleted {
                tx.open_table(PENDING_DELETES)?.insert(new.tuple(), ())?;
                tx.commit()?;
            }
            return Err(MetaError::Conflict(format!("{why}; the new copy on disk {new_disk} is dropped")));
        }
        let c = &mut b.chunks[current.expect("checked above")];
        (c.disk, c.node) = (new_disk, new_node);
        put_block(&tx, &b)?;
        let mut index = tx.open_table(DISK_CHUNKS)?;
        index.remove(old.tuple())?;
        index.insert(new.tuple(), ())?;
        let mut pending = tx.open_table(PENDING_DELETES)?;
        pending.insert(old.tuple(), ())?;
        // The new copy exists, so any older deletion order for that place
        // has been carried out; it must never hit the new copy.
        pending.remove(new.tuple())?;
        drop((index, pending));
        settle_drain(&tx, old_disk)?;
        tx.commit()?;
        Ok(b)
    }
}
