//! The read path: whole-file and ranged reads, steered replica choice with
//! fallback, degraded reads of erasure-coded data, and atomic downloads.

use crate::error::{ChunkFault, ClientError, fault, read_fault};
use crate::{Client, IoTag, MODEL_REFRESH, PIECE, READ_PARALLELISM, ReplicaChoice, Result, SteerState, ec};
use bytes::Bytes;
use dingo_iosched::steering::random_order;
use dingo_proto::Redundancy;
use dingo_proto::v1::*;
use dingo_types::{ChunkRef, DiskModel};
use futures::{Stream, StreamExt, TryStreamExt};

/// Stripe members a foreground degraded read asks for beyond the `k` it
/// needs, so that one slow or hung member does not hold the read (the
/// spare costs one member read, `1/k` more disk bytes, on the rare
/// degraded read). Maintenance reads ask for exactly `k`: they are not
/// waited on by a user, and their disk bytes are what the planner saves.
const FOREGROUND_SPARE_MEMBERS: usize = 1;

impl Client {
    /// Reads a range of the file at `path` (see [`Client::stat_complete`]
    /// for `allow_open`) into the local file `local`, atomically: the data
    /// goes to a temporary file beside it, renamed over `local` only once
    /// all of it is written and synced. On failure `local` is untouched and
    /// the temporary file removed. `len` `None`: to the end. `progress` is
    /// called with the bytes written so far. Returns the bytes written.
    pub async fn download(
        &self,
        path: &str,
        local: &std::path::Path,
        offset: u64,
        len: Option<u64>,
        allow_open: bool,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        let file = self.stat_complete(path, allow_open).await?;
        let len = len.unwrap_or_else(|| file.size.saturating_sub(offset));
        let local_err = |what: &str, e: std::io::Error| ClientError::Local(format!("{what} {}: {e}", local.display()));
        let dir = match local.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let name = local.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".dingo-part")
            .tempfile_in(dir)
            .map_err(|e| local_err("cannot create a temporary file beside", e))?;
        let mut out = tmp.as_file();
        let n = self.read_to(&file, offset, len, &mut out, progress).await?;
        out.sync_all().map_err(|e| local_err("cannot write", e))?;
        tmp.persist(local).map_err(|e| local_err("cannot rename the temporary file to", e.error))?;
        Ok(n)
    }

    /// Reads a range of `file` into `out`, piece by piece in file order
    /// (bounded memory). `progress` is called with the bytes written so far.
    pub async fn read_to(
        &self,
        file: &FileInfo,
        offset: u64,
        len: u64,
        out: &mut impl std::io::Write,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        let mut pieces = self.read_pieces(file, offset, len, IoTag::Foreground)?;
        let mut done = 0;
        while let Some(piece) = pieces.try_next().await? {
            out.write_all(&piece).map_err(ClientError::Output)?;
            done += piece.len() as u64;
            progress(done);
        }
        out.flush().map_err(ClientError::Output)?;
        Ok(done)
    }

    /// Reads a range of one exact chunk copy from the node at `addr`: no
    /// fallback, as scrubbing a specific copy needs.
    pub async fn read_chunk(&self, addr: &str, chunk: ChunkRef, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        Ok(self.read_chunk_signalled(addr, chunk, offset, len, tag).await?.0)
    }

    /// [`Client::read_chunk`], also returning whether the node said the
    /// chunk's disk is congested (in any reply, for reads in pieces).
    async fn read_chunk_signalled(
        &self,
        addr: &str,
        chunk: ChunkRef,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, bool)> {
        let mut out = bytes::BytesMut::new();
        let mut pos = offset;
        let mut congested = false;
        loop {
            let n = (offset + len - pos).min(PIECE as u64);
            let req = ReadChunkRequest { chunk: Some(chunk.into()), offset: pos, len: n, io_class: Some(tag.into()) };
            let sent = std::time::Instant::now();
            let reply = self.node(addr)?.read_chunk(req).await?.into_inner();
            if matches!(tag, IoTag::Foreground) {
                let rpc_ms = sent.elapsed().as_secs_f64() * 1e3;
                tracing::debug!(%chunk, node = addr, len = n, rpc_ms, "foreground chunk read");
            }
            congested |= reply.congestion.is_some_and(|c| c.congested);
            if n == len {
                return Ok((reply.data, congested));
            }
            out.extend_from_slice(&reply.data);
            pos += n;
            if pos == offset + len {
                return Ok((out.freeze(), congested));
            }
        }
    }

    /// Reads `len` bytes at `offset` of a file.
    pub async fn read(&self, path: &str, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        let file = self.stat(path).await?;
        self.read_file(&file, offset, len, tag).await
    }

    /// Reads the whole file.
    pub async fn read_all(&self, path: &str, tag: IoTag) -> Result<Bytes> {
        let file = self.stat(path).await?;
        self.read_file(&file, 0, file.size, tag).await
    }

    /// Reads a range of a file already looked up with [`Client::stat`].
    pub async fn read_file(&self, file: &FileInfo, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        Ok(self.read_file_traced(file, offset, len, tag).await?.0)
    }

    /// Reads a range of a file as a stream of pieces in file order (each at
    /// most one block or 8 MiB), with several pieces in flight. Unlike
    /// [`Client::read_file`] it never copies the data into one buffer, so a
    /// caller that consumes pieces as they come reads any size in bounded
    /// memory.
    pub fn read_pieces<'a>(
        &'a self,
        file: &'a FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<impl Stream<Item = Result<Bytes>> + 'a> {
        Ok(self.traced_pieces(file, offset, len, tag)?.map_ok(|(piece, _disk)| piece))
    }

    /// Reads `len` bytes at `offset` of a file already looked up, a range
    /// inside one block, and says which disk served it (`None`: rebuilt
    /// from the rest of its EC stripe). For experiments that attribute
    /// latency to disks.
    pub async fn read_traced(
        &self,
        file: &FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, Option<u32>)> {
        if offset.checked_add(len).is_none_or(|end| end > file.size) {
            return Err(ClientError::PastEnd { path: file.path.clone(), offset, len, size: file.size });
        }
        let mut extents = extents(file, offset, len)?;
        match (extents.pop(), extents.is_empty()) {
            (Some(e), true) => self.read_extent_from(e, tag).await,
            _ => Err(ClientError::Invalid(format!("{} bytes at offset {offset} span more than one block", len))),
        }
    }

    /// [`Client::read_file`], also saying which disk served each piece
    /// (`None`: rebuilt from the rest of its EC stripe), in file order. For
    /// experiments that tell degraded reads from direct ones.
    pub async fn read_file_traced(
        &self,
        file: &FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, Vec<Option<u32>>)> {
        let pieces: Vec<(Bytes, Option<u32>)> = self.traced_pieces(file, offset, len, tag)?.try_collect().await?;
        let disks = pieces.iter().map(|p| p.1).collect();
        let data = match pieces.len() {
            1 => pieces.into_iter().next().expect("one").0,
            _ => pieces.iter().map(|p| &p.0[..]).collect::<Vec<&[u8]>>().concat().into(),
        };
        Ok((data, disks))
    }

    /// The pieces of a range in file order, each with the disk that served
    /// it, several in flight.
    fn traced_pieces<'a>(
        &'a self,
        file: &'a FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<impl Stream<Item = Result<(Bytes, Option<u32>)>> + 'a> {
        if offset.checked_add(len).is_none_or(|end| end > file.size) {
            return Err(ClientError::PastEnd { path: file.path.clone(), offset, len, size: file.size });
        }
        let extents = extents(file, offset, len)?;
        Ok(futures::stream::iter(extents.into_iter().map(move |e| self.read_extent_from(e, tag)))
            .buffered(READ_PARALLELISM))
    }

    /// The order in which to try the copies of `b` for a read of `len`
    /// bytes tagged `tag`: steered for foreground reads, else a random
    /// start, then the others in order.
    async fn copy_order(&self, b: &BlockRecord, len: u64, tag: IoTag) -> Vec<usize> {
        let steer = matches!(tag, IoTag::Foreground) && self.replica_choice == ReplicaChoice::Steering;
        if steer {
            self.ensure_models(b).await;
        }
        let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
        if steer {
            let disks: Vec<u32> = b.chunks.iter().map(|c| c.disk).collect();
            let now_us = st.now_us();
            let SteerState { policy, rng, .. } = &mut *st;
            return policy.order(&disks, len, now_us, rng);
        }
        random_order(b.chunks.len(), &mut st.rng)
    }

    /// Fetches the disks' models for the steering weights on first use,
    /// and again (at most every [`MODEL_REFRESH`]) when `b` has a copy on a
    /// disk without one. Without an answer, disks count as the default HDD.
    async fn ensure_models(&self, b: &BlockRecord) {
        let due = {
            let st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
            let unknown = b.chunks.iter().any(|c| !st.policy.knows(c.disk));
            unknown && st.models_fetched.is_none_or(|t| t.elapsed() >= MODEL_REFRESH)
        };
        if !due {
            return;
        }
        let asked = std::time::Instant::now();
        let status = self.cluster_status().await;
        tracing::debug!(ms = asked.elapsed().as_secs_f64() * 1e3, "fetched disk models for steering");
        let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
        st.models_fetched = Some(std::time::Instant::now());
        match status {
            Ok(status) => {
                for d in status.nodes.iter().flat_map(|n| &n.disks) {
                    if let Some(m) = d.model.filter(|m| m.transfer_bytes_per_sec > 0) {
                        let model = DiskModel {
                            positioning_us: m.positioning_us,
                            transfer_bytes_per_sec: m.transfer_bytes_per_sec,
                        };
                        st.policy.set_model(d.id, model);
                    }
                }
            }
            Err(e) => tracing::debug!("no disk models for replica steering: {e}"),
        }
    }

    async fn read_extent_from(&self, e: Extent<'_>, tag: IoTag) -> Result<(Bytes, Option<u32>)> {
        let b = e.block;
        let order = self.copy_order(b, e.len, tag).await;
        let mut errors = Vec::new();
        for i in order {
            let c = &b.chunks[i];
            let chunk = chunk_at(b, c);
            if c.lost {
                errors.push(format!("{chunk} is on a disk or node marked dead"));
                continue;
            }
            match self.read_chunk_signalled(&c.addr, chunk, e.offset, e.len, tag).await {
                Ok((d, congested)) => {
                    let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
                    let now_us = st.now_us();
                    st.policy.on_reply(c.disk, congested, now_us);
                    return Ok((d, Some(c.disk)));
                }
                Err(err) => {
                    tracing::warn!(%chunk, node = %c.addr, "read failed, trying redundancy: {err}");
                    errors.push(format!("{chunk} on {}: {err}", c.addr));
                }
            }
        }
        if let Some(stripe) = e.stripe {
            let full = self.rebuild_member(stripe, e.member, tag).await.map_err(|err| {
                ClientError::Unreadable(format!(
                    "block {} unreadable ({}) and not rebuildable: {err}",
                    b.id,
                    errors.join("; ")
                ))
            })?;
            return Ok((full.slice(e.offset as usize..(e.offset + e.len) as usize), None));
        }
        Err(ClientError::Unreadable(format!("block {} has no readable copy: {}", b.id, errors.join("; "))))
    }

    /// Degraded read: rebuilds data member `want` of a stripe from any `k`
    /// other members. A foreground read asks for
    /// [`FOREGROUND_SPARE_MEMBERS`] more than it needs and decodes from the
    /// first `k` to arrive.
    async fn rebuild_member(&self, stripe: &[BlockRecord], want: usize, tag: IoTag) -> Result<Bytes> {
        let order: Vec<usize> = (0..stripe.len()).filter(|&j| j != want).collect();
        let spare = if matches!(tag, IoTag::Foreground) { FOREGROUND_SPARE_MEMBERS } else { 0 };
        Ok(self.rebuild_stripe_member(stripe, want, &order, spare, tag).await?.into())
    }

    /// Rebuilds member `want` (data or parity) of a stripe, reading whole
    /// members in the order `order` (member indexes) until `k` are in hand:
    /// `k + spare` reads in flight at a time, a failed read replaced by the
    /// next member at once, the reads still in flight dropped once `k`
    /// have arrived.
    pub(crate) async fn rebuild_stripe_member(
        &self,
        stripe: &[BlockRecord],
        want: usize,
        order: &[usize],
        spare: usize,
        tag: IoTag,
    ) -> Result<Vec<u8>> {
        let (k, m) = match dingo_proto::redundancy(stripe[0].redundancy.as_ref()) {
            Ok(Redundancy::Ec { data, parity }) if stripe.len() == usize::from(data) + usize::from(parity) => {
                (usize::from(data), usize::from(parity))
            }
            _ => return Err(ClientError::Unreadable(format!("block {} is not in a complete stripe", stripe[0].id))),
        };
        let read_member = |j: usize| async move {
            let b = &stripe[j];
            let chunk = ChunkRef { block: dingo_types::BlockId(b.id), copy: 0 };
            let r = match locate(b, chunk) {
                Ok(c) => {
                    self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
                }
                Err(e) => Err(e),
            };
            (j, r)
        };
        let mut members: Vec<Option<Bytes>> = vec![None; k + m];
        let (mut have, mut next) = (0, 0);
        let mut errors = Vec::new();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        while have < k {
            while in_flight.len() < k - have + spare && next < order.len() {
                in_flight.push(read_member(order[next]));
                next += 1;
            }
            let Some((j, r)) = in_flight.next().await else { break };
            match r {
                Ok(d) => {
                    members[j] = Some(d);
                    have += 1;
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        // A spare still in flight is not needed: dropping it cancels the call.
        drop(in_flight);
        if have < k {
            return Err(ClientError::Unreadable(format!(
                "only {have} of the {k} members needed are readable: {}",
                errors.join("; ")
            )));
        }
        let sizes: Vec<usize> = stripe.iter().map(|b| b.size as usize).collect();
        // Decoding megabytes takes milliseconds of CPU: off the async
        // threads, which serve every other read of this client meanwhile.
        let rebuilt = tokio::task::spawn_blocking(move || {
            let view: Vec<Option<&[u8]>> = members.iter().map(|m| m.as_deref()).collect();
            ec::rebuild(&view, k, m, &sizes, want)
        })
        .await
        .map_err(|e| ClientError::Unreadable(format!("decoding stopped: {e}")))?;
        Ok(rebuilt?)
    }
}

/// The location of a readable `chunk` in its block's record.
pub(crate) fn locate(b: &BlockRecord, chunk: ChunkRef) -> Result<&ChunkLocation> {
    if b.state() == BlockState::Deleted {
        return Err(fault(chunk, ChunkFault::Missing, "its block is deleted"));
    }
    let c = b
        .chunks
        .iter()
        .find(|c| c.copy == u32::from(chunk.copy))
        .ok_or_else(|| fault(chunk, ChunkFault::Missing, "its block has no such copy"))?;
    if c.lost {
        return Err(fault(chunk, ChunkFault::Unavailable, format!("disk {} or its node is marked dead", c.disk)));
    }
    Ok(c)
}

pub(crate) fn chunk_at(b: &BlockRecord, c: &ChunkLocation) -> ChunkRef {
    ChunkRef { block: dingo_types::BlockId(b.id), copy: c.copy as u8 }
}

/// A piece of a read: `len` bytes at `offset` of one block. EC data members
/// carry their stripe (all `k + m` blocks) for degraded reads.
struct Extent<'f> {
    block: &'f BlockRecord,
    offset: u64,
    len: u64,
    stripe: Option<&'f [BlockRecord]>,
    member: usize,
}

/// A block holding file bytes: `block` starts at `offset` in the file.
/// EC data members carry their stripe (all `k + m` blocks) and their index
/// in it, for degraded reads.
pub struct DataBlock<'f> {
    pub offset: u64,
    pub block: &'f BlockRecord,
    stripe: Option<&'f [BlockRecord]>,
    member: usize,
}

/// The blocks that hold a file's bytes, in file order: every block of a
/// replicated file, the data members of each EC stripe (parity members hold
/// no file bytes).
pub fn data_blocks(file: &FileInfo) -> Result<Vec<DataBlock<'_>>> {
    let redundancy = dingo_proto::redundancy(file.redundancy.as_ref()).map_err(ClientError::Unreadable)?;
    // (block, its stripe, member index) in logical order.
    let blocks: Vec<(&BlockRecord, Option<&[BlockRecord]>, usize)> = match redundancy {
        Redundancy::Replicated(_) => file.blocks.iter().map(|b| (b, None, 0)).collect(),
        Redundancy::Ec { data, parity } => {
            let width = usize::from(data) + usize::from(parity);
            if !file.blocks.len().is_multiple_of(width) {
                return Err(ClientError::Unreadable(format!("{} has an incomplete stripe", file.path)));
            }
            file.blocks
                .chunks(width)
                .flat_map(|s| s[..usize::from(data)].iter().enumerate().map(move |(i, b)| (b, Some(s), i)))
                .collect()
        }
    };
    let mut offset = 0;
    Ok(blocks
        .into_iter()
        .map(|(block, stripe, member)| {
            let d = DataBlock { offset, block, stripe, member };
            offset += block.size;
            d
        })
        .collect())
}

/// Splits a file range into per-block extents of at most [`PIECE`] bytes.
fn extents(file: &FileInfo, offset: u64, len: u64) -> Result<Vec<Extent<'_>>> {
    let end = offset + len;
    let mut out = Vec::new();
    for d in data_blocks(file)? {
        let (b_start, b_end) = (d.offset, d.offset + d.block.size);
        let (s, e) = (offset.max(b_start), end.min(b_end));
        let mut at = s;
        while at < e {
            let n = (e - at).min(PIECE as u64);
            out.push(Extent { block: d.block, offset: at - b_start, len: n, stripe: d.stripe, member: d.member });
            at += n;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `redundancy` whose blocks have `sizes`, ids from 0.
    fn file(redundancy: Redundancy, sizes: &[u64]) -> FileInfo {
        let blocks: Vec<BlockRecord> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| BlockRecord { id: i as u64, size, ..Default::default() })
            .collect();
        let size = sizes.iter().sum();
        FileInfo { path: "/f".into(), redundancy: Some(redundancy.into()), size, blocks, ..Default::default() }
    }

    /// `(block id, offset in block, len, stripe member)` of each extent.
    fn pieces(file: &FileInfo, offset: u64, len: u64) -> Vec<(u64, u64, u64, usize)> {
        extents(file, offset, len).unwrap().iter().map(|e| (e.block.id, e.offset, e.len, e.member)).collect()
    }

    #[test]
    fn a_replicated_range_is_cut_at_block_boundaries() {
        let f = file(Redundancy::Replicated(3), &[10, 20, 5]);
        let offsets: Vec<u64> = data_blocks(&f).unwrap().iter().map(|d| d.offset).collect();
        assert_eq!(offsets, [0, 10, 30]);
        assert_eq!(pieces(&f, 5, 20), [(0, 5, 5, 0), (1, 0, 15, 0)]);
        assert_eq!(pieces(&f, 30, 5), [(2, 0, 5, 0)]);
        assert!(pieces(&f, 35, 0).is_empty());
    }

    #[test]
    fn an_erasure_coded_file_reads_only_its_data_members() {
        // Two 2+1 stripes: blocks 0, 1 (data) and 2 (parity); 3, 4 and 5.
        let f = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10, 10, 7, 3, 7]);
        let data: Vec<(u64, u64, usize)> =
            data_blocks(&f).unwrap().iter().map(|d| (d.block.id, d.offset, d.member)).collect();
        assert_eq!(data, [(0, 0, 0), (1, 10, 1), (3, 20, 0), (4, 27, 1)]);
        assert_eq!(pieces(&f, 15, 13), [(1, 5, 5, 1), (3, 0, 7, 0), (4, 0, 1, 1)]);
        let e = extents(&f, 0, 1).unwrap();
        assert_eq!(e[0].stripe.map(|s| s.len()), Some(3), "a data member carries its stripe");
        let incomplete = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10]);
        assert!(data_blocks(&incomplete).is_err_and(|e| e.to_string().contains("incomplete stripe")));
    }

    #[test]
    fn a_large_block_is_read_in_pieces() {
        let mib = 1 << 20;
        let f = file(Redundancy::Replicated(1), &[20 * mib]);
        assert_eq!(pieces(&f, 0, 20 * mib), [(0, 0, 8 * mib, 0), (0, 8 * mib, 8 * mib, 0), (0, 16 * mib, 4 * mib, 0)]);
    }
}
