//! Maintenance primitives: exact-copy reads, chunk lists per disk and of
//! dead devices, administrative states, and rebuilding or moving one chunk
//! with its new location committed atomically.

use crate::error::{ChunkFault, ClientError, chunk_of, fault, read_fault};
use crate::read::{chunk_at, locate};
use crate::{Client, IoTag, Result, Retry, WRITE_ATTEMPTS};
use bytes::Bytes;
use dingo_proto::Redundancy;
use dingo_proto::v1::*;
use dingo_types::{BlockId, ChunkRef, DiskId, NodeId};
use std::time::Duration;

/// Copy `copy` of the block `block` records, as the chunk [`Client::read_copy`]
/// reads (the wire's copy numbers are `u32`, a chunk's a `u8`).
pub fn copy_of(block: &BlockRecord, copy: u32) -> Result<ChunkRef> {
    chunk_of(&ChunkId { block: block.id, copy })
}

impl Client {
    /// Block records by id (deleted ones too), in the order given, with chunk
    /// addresses and `lost` flags filled in. At most 65 536 ids per call.
    pub async fn blocks(&self, ids: &[BlockId]) -> Result<Vec<BlockRecord>> {
        let ids = ids.iter().map(|b| b.0).collect();
        Ok(meta_call!(self, Retry::Always, get_blocks, GetBlocksRequest { ids }).await?.blocks)
    }

    async fn block(&self, id: BlockId) -> Result<BlockRecord> {
        self.blocks(&[id]).await?.pop().ok_or_else(|| ClientError::Unreadable(format!("{id} not returned")))
    }

    /// Reads `len` bytes at `offset` of exactly `chunk`, one copy of one
    /// block (an EC member has copy 0, its block id naming the member),
    /// tagged `tag`. No fallback: a failure is a [`ClientError::Chunk`]
    /// whose [`ChunkFault`] tells a damaged copy (`Corrupt`: checksum
    /// mismatch) from a missing or unreachable one. A range past the copy's
    /// end is an `OUT_OF_RANGE` [`ClientError::Rpc`].
    pub async fn read_copy(&self, chunk: ChunkRef, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        let b = self.block(chunk.block).await?;
        let c = locate(&b, chunk)?;
        self.read_chunk(&c.addr, chunk, offset, len, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
    }

    /// Chunks of sealed blocks located on `disk`, per the metadata service.
    pub async fn chunks_on_disk(&self, disk: DiskId) -> Result<Vec<ChunkRef>> {
        let r = meta_call!(self, Retry::Always, chunks_on_disk, ChunksOnDiskRequest { disk: disk.0 }).await?;
        r.chunks.iter().map(chunk_of).collect()
    }

    /// Marks a disk LIVE or DEAD (durably). A dead disk's chunks are lost:
    /// never read or placed on again, listed by [`Client::lost_chunks`].
    pub async fn set_disk_state(&self, disk: DiskId, state: DeviceState) -> Result<()> {
        let request = SetDiskStateRequest { disk: disk.0, state: state.into() };
        meta_call!(self, Retry::Always, set_disk_state, request).await?;
        Ok(())
    }

    /// Marks a node LIVE or DEAD (durably); a dead node's disks are lost.
    pub async fn set_node_state(&self, node: NodeId, state: DeviceState) -> Result<()> {
        let request = SetNodeStateRequest { node: node.0, state: state.into() };
        meta_call!(self, Retry::Always, set_node_state, request).await?;
        Ok(())
    }

    pub async fn mark_disk_dead(&self, disk: DiskId) -> Result<()> {
        self.set_disk_state(disk, DeviceState::Dead).await
    }

    pub async fn mark_node_dead(&self, node: NodeId) -> Result<()> {
        self.set_node_state(node, DeviceState::Dead).await
    }

    /// Chunks to rebuild: those of sealed blocks whose disk is marked dead
    /// or whose disk's node is marked dead, and copies their nodes reported
    /// corrupt or missing (a read or a scrub failed on them, or the node
    /// restarted without their files).
    pub async fn lost_chunks(&self) -> Result<Vec<ChunkRef>> {
        let r = meta_call!(self, Retry::Always, lost_chunks, LostChunksRequest {}).await?;
        r.chunks.iter().map(|c| chunk_of(c.chunk.as_ref().unwrap_or(&ChunkId::default()))).collect()
    }

    /// A sealed block and the current location of `chunk` in it.
    async fn sealed_location(&self, chunk: ChunkRef) -> Result<(BlockRecord, ChunkLocation)> {
        let b = self.block(chunk.block).await?;
        match b.state() {
            BlockState::Sealed => {}
            BlockState::Deleted => return Err(fault(chunk, ChunkFault::Missing, "its block is deleted")),
            BlockState::Open => return Err(ClientError::Invalid(format!("block {} is still being written", b.id))),
            BlockState::Unspecified => return Err(ClientError::Invalid(format!("block {} has no state", b.id))),
        }
        let c = b
            .chunks
            .iter()
            .find(|c| c.copy == u32::from(chunk.copy))
            .cloned()
            .ok_or_else(|| fault(chunk, ChunkFault::Missing, "its block has no such copy"))?;
        Ok((b, c))
    }

    /// Recreates the content of a lost or corrupt `chunk` from redundancy —
    /// any other good copy of a replicated block; any `k` other members of an
    /// EC stripe, decoded — reading `sources` if given (the planner's choice,
    /// tried in order) or choosing itself. The new copy goes to a disk the
    /// metadata service picks (live; on a node holding no other chunk of the
    /// block or stripe when possible; weighted by free space), its location
    /// replaces the old one atomically (failing cleanly if the block was
    /// deleted or the chunk moved meanwhile, the new copy then being
    /// deleted), and the old copy is deleted if its node answers. All source
    /// reads and the new copy's write carry `tag`. Returns the new location.
    pub async fn rebuild_chunk(&self, chunk: ChunkRef, sources: &[ChunkRef], tag: IoTag) -> Result<ChunkLocation> {
        let (b, old) = self.sealed_location(chunk).await?;
        let redundancy = dingo_proto::redundancy(b.redundancy.as_ref()).map_err(ClientError::Invalid)?;
        if sources.contains(&chunk) {
            return Err(ClientError::Invalid(format!("{chunk} cannot be a source for rebuilding itself")));
        }
        let data: Bytes = match redundancy {
            Redundancy::Replicated(_) => {
                let mut copies: Vec<&ChunkLocation> = b.chunks.iter().filter(|c| c.copy != old.copy).collect();
                fastrand::shuffle(&mut copies);
                if !sources.is_empty() {
                    copies = sources
                        .iter()
                        .map(|s| {
                            b.chunks.iter().find(|c| s.block == chunk.block && c.copy == u32::from(s.copy)).ok_or_else(
                                || ClientError::Invalid(format!("{s} is not a copy of block {}", chunk.block.0)),
                            )
                        })
                        .collect::<Result<_>>()?;
                }
                self.read_any_copy(&b, &copies, tag).await?
            }
            Redundancy::Ec { data, parity } => {
                let members = b.group..b.group + u64::from(data) + u64::from(parity);
                let stripe = self.blocks(&members.map(BlockId).collect::<Vec<_>>()).await?;
                let want = b.ec_index as usize;
                let order: Vec<usize> = if sources.is_empty() {
                    (0..stripe.len()).filter(|&j| j != want).collect()
                } else {
                    sources
                        .iter()
                        .map(|s| {
                            stripe.iter().position(|m| m.id == s.block.0 && s.copy == 0).ok_or_else(|| {
                                ClientError::Invalid(format!("{s} is not a member of the stripe of {chunk}"))
                            })
                        })
                        .collect::<Result<_>>()?
                };
                self.rebuild_stripe_member(&stripe, want, &order, 0, tag).await?.into()
            }
        };
        if data.len() as u64 != b.size {
            return Err(ClientError::Unreadable(format!(
                "{chunk}: rebuilt {} bytes, block has {}",
                data.len(),
                b.size
            )));
        }
        self.relocate(chunk, &old, data, None, false, tag).await
    }

    /// The whole content of the first readable copy among `copies`.
    async fn read_any_copy(&self, b: &BlockRecord, copies: &[&ChunkLocation], tag: IoTag) -> Result<Bytes> {
        let mut errors = Vec::new();
        for c in copies {
            let chunk = chunk_at(b, c);
            let r = match locate(b, chunk) {
                Ok(c) => {
                    self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(d) => return Ok(d),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(ClientError::Unreadable(format!("block {} has no readable source copy: {}", b.id, errors.join("; "))))
    }

    /// Moves the exact copy `chunk` (read and written tagged `tag`) to `to_disk`, or to
    /// the disk with the most free space on a node holding no other chunk of
    /// the block or stripe (when possible); commits the new location as
    /// [`Client::rebuild_chunk`] does and deletes the old copy. A damaged
    /// copy fails with [`ChunkFault::Corrupt`]: rebuild it instead.
    pub async fn move_chunk(&self, chunk: ChunkRef, to_disk: Option<DiskId>, tag: IoTag) -> Result<ChunkLocation> {
        let (b, old) = self.sealed_location(chunk).await?;
        let c = locate(&b, chunk)?;
        let data = self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))?;
        self.relocate(chunk, &old, data, to_disk, true, tag).await
    }

    /// Writes `data` as a new copy of `chunk` (tagged `tag`, like the reads
    /// that produced it) on `to_disk` or a disk the metadata service picks
    /// (retrying elsewhere if a node fails), replaces the location `old`
    /// with it, then deletes the old copy (best effort).
    async fn relocate(
        &self,
        chunk: ChunkRef,
        old: &ChunkLocation,
        data: Bytes,
        to_disk: Option<DiskId>,
        emptiest: bool,
        tag: IoTag,
    ) -> Result<ChunkLocation> {
        let mut exclude = Vec::new();
        let mut last = String::new();
        for _ in 0..WRITE_ATTEMPTS {
            let req = PlaceChunkRequest {
                chunk: Some(chunk.into()),
                disk: to_disk.map(|d| d.0),
                exclude_nodes: exclude.clone(),
                emptiest,
            };
            let new = meta_call!(self, Retry::IfNotSent, place_chunk, req).await?;
            if let Err(e) = self.write_chunk(&new.addr, chunk, new.disk, data.clone(), tag).await {
                last = format!("{chunk} on {}: {e}", new.addr);
                tracing::warn!("writing a new copy failed: {last}");
                if to_disk.is_some() {
                    break;
                }
                exclude.push(new.node);
                continue;
            }
            let req = ReplaceChunkRequest { chunk: Some(chunk.into()), old_disk: old.disk, new_disk: new.disk };
            if let Err(s) = meta_call!(self, Retry::IfNotSent, replace_chunk, req).await {
                // The metadata service queued the new copy for deletion too.
                self.delete_copy(&new.addr, chunk, new.disk).await;
                return Err(s);
            }
            self.delete_copy(&old.addr, chunk, old.disk).await;
            return Ok(new);
        }
        Err(ClientError::WriteFailed { path: chunk.to_string(), last })
    }

    /// Deletes copy `chunk` on disk `disk` of the node at `addr` if the node
    /// answers within a moment. Best effort: the metadata service has queued
    /// the deletion for the node's next heartbeat anyway.
    async fn delete_copy(&self, addr: &str, chunk: ChunkRef, disk: u32) {
        let Ok(mut node) = self.node(addr) else { return };
        let req = DeleteChunkRequest { chunk: Some(chunk.into()), disk: Some(disk) };
        match tokio::time::timeout(Duration::from_secs(2), node.delete_chunk(req)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(%chunk, node = addr, "delete failed: {}", e.message()),
            Err(_) => tracing::debug!(%chunk, node = addr, "delete timed out"),
        }
    }
}
