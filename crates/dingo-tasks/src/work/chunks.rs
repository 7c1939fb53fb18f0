//! Chunk-level work: scrubbing one copy, rebuilding a lost chunk from its
//! stripe or another copy, moving a chunk off a disk.

use super::{DeletionNotice, Outcome, ScheduledCopies, block_record, is_corrupt, is_gone, is_unavailable};
use dingo_client::{Client, ClientError, IoTag};
use dingo_proto::v1::BlockRecord;
use dingo_types::{BlockId, ChunkRef, Member};

pub(super) async fn scrub(client: &Client, chunk: ChunkRef, disk: u32, tag: IoTag) -> Result<Outcome, ClientError> {
    // Whether the block still places this copy on this disk, and the disk
    // (or its node) is not marked dead. A copy moved elsewhere is scrubbed
    // there; a copy on a dead disk is lost, and rebuilding it is
    // reconstruction's work: both are skipped, not failed.
    let here =
        |rec: &BlockRecord| rec.chunks.iter().any(|l| l.copy == u32::from(chunk.copy) && l.disk == disk && !l.lost);
    let rec = block_record(client, chunk.block).await?;
    if !here(&rec) {
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    match client.read_copy(chunk, 0, rec.size, tag).await {
        // The disk may have died since the record was read (a node killed
        // mid-scrub): look again before calling it a failure.
        Err(e) if is_unavailable(&e) && !here(&block_record(client, chunk.block).await?) => {
            Ok(Outcome { skipped: true, ..Outcome::default() })
        }
        Ok(data) => Ok(Outcome { logical_bytes: data.len() as u64, ..Outcome::default() }),
        // The block still places this copy on this disk (checked above), so
        // a node without its file lost it: rebuild it like a corrupt one.
        // If the block was deleted meanwhile, the rebuild finds it gone.
        Err(e) if is_corrupt(&e) || is_gone(&e) => {
            tracing::warn!(%chunk, "scrubbing found a bad chunk ({e}); rebuilding it from redundancy");
            client.rebuild_chunk(chunk, &[], tag).await?;
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: 1, ..Outcome::default() })
        }
        Err(e) => Err(e),
    }
}

/// `sources` in the order a rebuild should try them: those the planner
/// scheduled first, as the copy it scheduled (never the lost one itself),
/// then the rest as listed. The client reads the first sources that
/// suffice, so a rebuild reads what the planner chose and pinned.
fn planned_first(lost: ChunkRef, sources: &[ChunkRef], copies: &ScheduledCopies) -> Vec<ChunkRef> {
    let scheduled = |s: &ChunkRef| match copies.get(&s.block) {
        Some(&copy) if (ChunkRef { block: s.block, copy: copy as u8 }) != lost => {
            Some(ChunkRef { block: s.block, copy: copy as u8 })
        }
        _ => None,
    };
    let unscheduled = sources.iter().filter(|s| scheduled(s).is_none()).copied();
    sources.iter().filter_map(scheduled).chain(unscheduled).collect()
}

pub(super) async fn rebuild(
    client: &Client,
    lost: ChunkRef,
    sources: &[ChunkRef],
    needed: u32,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let sources = planned_first(lost, sources, copies);
    // One metadata call for the sizes of the lost block and the sources
    // read (returned in the order asked); a deleted block fails the
    // rebuild below.
    let read = sources.iter().take(needed as usize);
    let ids: Vec<BlockId> = std::iter::once(lost.block).chain(read.map(|s| s.block)).collect();
    let sizes: Vec<u64> = client.blocks(&ids).await?.iter().map(|r| r.size).collect();
    match client.rebuild_chunk(lost, &sources, tag).await {
        // A source the planner chose is unreadable (its node died since the
        // plan): let the client pick other copies or members.
        Err(e) if !copies.is_empty() && !is_gone(&e) => {
            tracing::debug!(%lost, "rebuilding from other sources: {e}");
            client.rebuild_chunk(lost, &[], tag).await?;
        }
        other => {
            other?;
        }
    }
    let written = sizes.first().copied().unwrap_or(0);
    Ok(Outcome { logical_bytes: sizes.iter().skip(1).sum(), written_bytes: written, ..Outcome::default() })
}

pub(super) async fn move_chunk(
    client: &Client,
    chunk: ChunkRef,
    tag: IoTag,
    notice: &dyn DeletionNotice,
) -> Result<Outcome, ClientError> {
    let rec = block_record(client, chunk.block).await?;
    // Told once moved: the copy a scrub of the old disk declared is gone
    // from it, and reading the new copy would check nothing of that disk
    // (the topology alone cannot tell, as the copy still exists).
    let moved = || notice.will_delete(vec![Member::Copy(chunk)]);
    match client.move_chunk(chunk, None, tag).await {
        Ok(_) => {
            moved();
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, ..Outcome::default() })
        }
        // A damaged copy cannot be moved, and would keep a drain from
        // finishing: rebuild it from redundancy (also away from its node).
        Err(e) if is_corrupt(&e) => {
            tracing::warn!(%chunk, "a chunk to move is corrupt ({e}); rebuilding it from redundancy");
            client.rebuild_chunk(chunk, &[], tag).await?;
            moved();
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: 1, ..Outcome::default() })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::BlockId;

    fn c(block: u64, copy: u8) -> ChunkRef {
        ChunkRef { block: BlockId(block), copy }
    }

    #[test]
    fn a_rebuild_tries_the_planners_sources_first() {
        // A stripe's survivors 1..=5; the planner scheduled 4 and 2.
        let sources = [c(1, 0), c(2, 0), c(3, 0), c(4, 0), c(5, 0)];
        let copies: ScheduledCopies = [(BlockId(4), 0), (BlockId(2), 0)].into_iter().collect();
        assert_eq!(planned_first(c(9, 0), &sources, &copies), [c(2, 0), c(4, 0), c(1, 0), c(3, 0), c(5, 0)]);
        // Imperative: nothing scheduled, the order as listed.
        assert_eq!(planned_first(c(9, 0), &sources, &ScheduledCopies::new()), sources);
    }

    #[test]
    fn a_replicated_rebuild_reads_the_scheduled_copy_never_the_lost_one() {
        let copies: ScheduledCopies = [(BlockId(7), 0)].into_iter().collect();
        assert_eq!(planned_first(c(7, 2), &[c(7, 1)], &copies), [c(7, 0)]);
        // The planner "scheduled" the lost copy itself: the listed one stays.
        let copies: ScheduledCopies = [(BlockId(7), 2)].into_iter().collect();
        assert_eq!(planned_first(c(7, 2), &[c(7, 1)], &copies), [c(7, 1)]);
    }
}
