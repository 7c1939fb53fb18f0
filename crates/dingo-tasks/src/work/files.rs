//! File-level work: transcoding a file, scrubbing a file's blocks, and
//! garbage-collecting an object-store file.

use super::{
    DeletionNotice, MAX_RECORDS_PER_CALL, Outcome, ScheduledCopies, block_record, chunk, deleted, is_corrupt, is_sealed,
};
use crate::objects::{self, Tombstones};
use bytes::Bytes;
use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy};
use dingo_proto::v1::{BlockRecord, FileInfo};
use dingo_types::{BlockId, Member};

pub(super) async fn transcode(
    client: &Client,
    (from, to): (&str, &str),
    redundancy: Redundancy,
    copies: &ScheduledCopies,
    tag: IoTag,
    notice: &dyn DeletionNotice,
) -> Result<Outcome, ClientError> {
    let file = client.stat(from).await?;
    let data = read_file_with(client, &file, copies, tag).await?;
    let read = data.len() as u64;
    // Read: the old file goes once the new one is written.
    notice.will_delete(whole_blocks(&file));
    // Write the new encoding first: until it is sealed the old file stays.
    if client.stat(to).await.is_ok() {
        // A previous attempt finished writing but not deleting.
        client.delete(to).await?;
    }
    client.put_tagged(to, redundancy, file.block_size, data, tag).await?;
    client.delete(from).await?;
    Ok(Outcome { logical_bytes: read, written_bytes: stored_bytes(redundancy, read), ..Outcome::default() })
}

/// Every block of `file`, whole (what deleting the file deletes).
fn whole_blocks(file: &FileInfo) -> Vec<Member> {
    file.block_ids.iter().map(|&b| Member::Any(BlockId(b))).collect()
}

/// Bytes stored for `logical` file bytes written with `redundancy`.
pub(super) fn stored_bytes(redundancy: Redundancy, logical: u64) -> u64 {
    match redundancy {
        Redundancy::Ec { data: k, parity: m } => logical * u64::from(k + m) / u64::from(k),
        Redundancy::Replicated(r) => logical * u64::from(r),
    }
}

/// Reads a whole file: the copies the planner scheduled (and pinned) when
/// given, else the client's own choice. A task that needs the bytes, not
/// those copies, reads any other copy (or degraded) when a scheduled one is
/// unreadable (its node died since the plan).
pub(super) async fn read_file_with(
    client: &Client,
    file: &FileInfo,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Bytes, ClientError> {
    if copies.is_empty() {
        return client.read_file(file, 0, file.size, tag).await;
    }
    let blocks = dingo_client::data_blocks(file)?;
    let mut parts = Vec::with_capacity(blocks.len());
    for d in blocks {
        let scheduled = match copies.get(&BlockId(d.block.id)) {
            Some(&copy) => match dingo_client::copy_of(d.block, copy) {
                Ok(chunk) => client.read_copy(chunk, 0, d.block.size, tag).await.map_err(|e| (copy, e)),
                Err(e) => Err((copy, e)),
            },
            None => Err((0, ClientError::Invalid("not scheduled".into()))),
        };
        parts.push(match scheduled {
            Ok(part) => part,
            Err((copy, e)) => {
                tracing::debug!(block = d.block.id, copy, "reading another copy: {e}");
                client.read_file(file, d.offset, d.block.size, tag).await?
            }
        });
    }
    Ok(parts.concat().into())
}

/// A good copy of a block read in full, and the copies found bad on the
/// way (corrupt, or missing from a node the block still places them on).
struct GoodRead {
    copy: u32,
    bad: Vec<(u32, ClientError)>,
}

/// Why no copy of a block could be read.
struct NoGoodCopy {
    bad: Vec<(u32, ClientError)>,
    /// The last error of a copy that could not be reached (dead or silent
    /// node): trying later may succeed.
    unavailable: Option<ClientError>,
}

/// Reads every copy of `rec` in turn — `first` (the planner's choice) if
/// given, then the others in copy order, lost ones last — until one reads
/// in full with good checksums. The node verifies every segment it reads
/// from disk, so a good read is a checked one.
async fn read_any_copy(
    client: &Client,
    rec: &BlockRecord,
    first: Option<u32>,
    tag: IoTag,
) -> Result<GoodRead, NoGoodCopy> {
    let mut order: Vec<(bool, bool, u32)> =
        rec.chunks.iter().map(|c| (Some(c.copy) != first, c.lost, c.copy)).collect();
    order.sort_unstable();
    let (mut bad, mut unavailable) = (Vec::new(), None);
    for (_, _, copy) in order {
        let read = match dingo_client::copy_of(rec, copy) {
            Ok(chunk) => client.read_copy(chunk, 0, rec.size, tag).await,
            Err(e) => Err(e),
        };
        match read {
            Ok(_) => return Ok(GoodRead { copy, bad }),
            Err(e) if is_corrupt(&e) || matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }) => {
                bad.push((copy, e))
            }
            Err(e) => unavailable = Some(e),
        }
    }
    Err(NoGoodCopy { bad, unavailable })
}

pub(super) async fn file_scrub(
    client: &Client,
    path: &str,
    file_id: u64,
    blocks: &[u64],
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let mut recs = Vec::with_capacity(blocks.len());
    for batch in blocks.chunks(MAX_RECORDS_PER_CALL) {
        recs.extend(client.blocks(&batch.iter().copied().map(BlockId).collect::<Vec<_>>()).await?);
    }
    // The file was deleted or rewritten since it was planned: its snapshot
    // is gone (the planner elides such sets; this is the race after it).
    if let Some(r) = recs.iter().find(|r| !is_sealed(r)) {
        return Err(deleted(r.id));
    }
    let mut out = Outcome::default();
    for rec in &recs {
        let read = read_any_copy(client, rec, copies.get(&BlockId(rec.id)).copied(), tag).await;
        out.logical_bytes += rec.size;
        let (bad, source) = match read {
            Ok(good) => (good.bad, vec![chunk(rec, good.copy)]),
            // The only copy of an EC member is bad: decode it from its
            // stripe (the client picks the members).
            Err(NoGoodCopy { bad, unavailable: None }) if rec.chunks.len() == 1 && !bad.is_empty() => (bad, vec![]),
            // The only copy of an EC member cannot be reached (its node is
            // down): read it degraded, from its stripe, which verifies the
            // members read; reconstruction restores the member itself.
            Err(NoGoodCopy { bad, unavailable: Some(e) }) if rec.chunks.len() == 1 && bad.is_empty() => {
                tracing::debug!(block = rec.id, "reading an unreachable member degraded: {e}");
                let file = client.stat(path).await?;
                if file.id != file_id {
                    return Err(deleted(rec.id));
                }
                let blocks = dingo_client::data_blocks(&file)?;
                let d = blocks.iter().find(|d| d.block.id == rec.id).ok_or_else(|| deleted(rec.id))?;
                client.read_file(&file, d.offset, d.block.size, tag).await?;
                continue;
            }
            Err(NoGoodCopy { bad, unavailable }) => {
                // A block deleted while being read is gone, not damaged.
                if !is_sealed(&block_record(client, BlockId(rec.id)).await?) {
                    return Err(deleted(rec.id));
                }
                return Err(unavailable.unwrap_or_else(|| {
                    let why: Vec<String> = bad.iter().map(|(_, e)| e.to_string()).collect();
                    ClientError::Unreadable(format!("no good copy of block {}: {}", rec.id, why.join("; ")))
                }));
            }
        };
        for (copy, e) in bad {
            tracing::warn!(block = rec.id, copy, "file scrubbing found a bad copy ({e}); rebuilding it");
            client.rebuild_chunk(chunk(rec, copy), &source, tag).await?;
            out.repaired += 1;
            out.written_bytes += rec.size;
        }
    }
    Ok(out)
}

pub(super) async fn collect(
    client: &Client,
    path: &str,
    file_id: u64,
    (to, dead): (&str, &Tombstones),
    copies: &ScheduledCopies,
    tag: IoTag,
    notice: &dyn DeletionNotice,
) -> Result<Outcome, ClientError> {
    let file = client.stat(path).await?;
    if file.id != file_id {
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    let data = read_file_with(client, &file, copies, tag).await?;
    // A file that does not parse is left untouched: better keep garbage
    // than drop a record.
    let collected = objects::collect(&data, dead)
        .map_err(|e| ClientError::Invalid(format!("{path} is not a well-formed data file, left as it is: {e}")))?;
    let mut out = Outcome { logical_bytes: data.len() as u64, ..Outcome::default() };
    if collected.dead_records == 0 {
        return Ok(out);
    }
    let redundancy = dingo_proto::redundancy(file.redundancy.as_ref()).map_err(ClientError::Invalid)?;
    // Read, and with dead records: the old file goes once the live ones
    // are written.
    notice.will_delete(whole_blocks(&file));
    if collected.live_records > 0 {
        // Live records first, sealed; only then the old file goes.
        let mut to = to.to_string();
        loop {
            match client.stat(&to).await {
                Err(e) if e.code() == Some(tonic::Code::NotFound) => {
                    client.put_tagged(&to, redundancy, file.block_size, collected.live.clone(), tag).await?;
                    out.written_bytes = stored_bytes(redundancy, collected.live.len() as u64);
                    break;
                }
                Err(e) => return Err(e),
                // A previous attempt wrote exactly these records but did not
                // delete the old file: only that is left to do.
                Ok(existing)
                    if existing.sealed
                        && existing.size == collected.live.len() as u64
                        && client.read_file(&existing, 0, existing.size, tag).await? == collected.live =>
                {
                    break;
                }
                // Another file has the name: never touch it, take the next.
                Ok(_) => to = objects::next_generation(&to),
            }
        }
        tracing::debug!(from = path, %to, live = collected.live_records, dead = collected.dead_records, "collected");
    }
    client.delete(path).await?;
    out.freed_bytes = collected.dead_bytes;
    Ok(out)
}
