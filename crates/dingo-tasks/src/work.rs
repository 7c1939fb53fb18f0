//! What a maintenance job is made of, and how one unit of it is carried out.
//!
//! A [`Job`] is one task's batch of work with a deadline: a list of work
//! items, each the block set it must read plus the [`Action`] to take once
//! the set is read. Both drivers run the same items through [`execute`]: the
//! imperative one in its own order and at its own pace, the declarative one
//! when the planner calls back, reading exactly the copies the planner
//! scheduled (which is what lets a read hit the pinned cache).

use crate::report::Progress;
use bytes::Bytes;
use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy};
use dingo_proto::v1::BlockRecord;
use dingo_types::{BlockId, BlockSet, ChunkRef, Member, TaskKind};
use std::collections::HashMap;
use std::fmt;

/// One unit of maintenance work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Read this exact copy in full on the disk being scrubbed, verifying
    /// its checksums; rebuild it from redundancy if it is corrupt or its
    /// node lost its file. A copy
    /// no longer on that disk (moved away) is not this scrub's business.
    Scrub { chunk: ChunkRef, disk: u32 },
    /// Recreate a lost chunk on a live disk from `sources` (another replica,
    /// or `k` members of its stripe).
    Rebuild { lost: ChunkRef, sources: Vec<ChunkRef> },
    /// Move this copy to the emptiest eligible disk (rebuild it from
    /// redundancy instead if it is corrupt).
    Move(ChunkRef),
    /// Read file `from` in full, write it as `to` with redundancy
    /// `redundancy`, then delete `from`.
    Transcode { from: String, to: String, redundancy: Redundancy },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Scrub { chunk, disk } => write!(f, "scrub {chunk} on disk {disk}"),
            Action::Rebuild { lost, .. } => write!(f, "rebuild {lost}"),
            Action::Move(c) => write!(f, "move {c}"),
            Action::Transcode { from, to, redundancy } => write!(f, "transcode {from} -> {to} ({redundancy})"),
        }
    }
}

/// A block set to read and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkItem {
    pub set: BlockSet,
    pub action: Action,
    /// Logical bytes the action reads (for pacing and reports).
    pub bytes: u64,
}

/// How a job's sets are declared to the planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Declared {
    /// Explicit sets; a callback's set key is the index into `items`.
    Items,
    /// Every chunk on this disk, that exact copy (scrubbing a disk): one
    /// compact declaration however many chunks the disk holds; a set key is
    /// the chunk's member key. `items` is the imperative walk of the same
    /// chunks in on-disk order.
    ChunksOnDisk(u32),
}

/// One task's batch of work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub task: TaskKind,
    /// What this job is, for reports ("disk 3", "node 2 failure", ...).
    pub label: String,
    pub items: Vec<WorkItem>,
    pub declared: Declared,
    /// `None`: every item. `Some(n)`: any `n` of them (data-flexibility).
    pub sets_needed: Option<u64>,
    /// Unix milliseconds by which the work must be complete.
    pub deadline_ms: u64,
    /// Counts finished items as the job runs, for whoever shows progress.
    pub progress: Option<Progress>,
}

impl Job {
    /// Items the job must complete.
    pub fn needed(&self) -> u64 {
        self.sets_needed.unwrap_or(self.items.len() as u64)
    }

    /// The action for a set key of a planner callback, if the key is valid
    /// for this job.
    pub fn action_for_key(&self, key: u64) -> Option<Action> {
        match self.declared {
            Declared::Items => self.items.get(usize::try_from(key).ok()?).map(|i| i.action.clone()),
            Declared::ChunksOnDisk(disk) => match Member::from_key(key) {
                Member::Copy(chunk) => Some(Action::Scrub { chunk, disk }),
                Member::Any(_) => None,
            },
        }
    }
}

/// What carrying out one action did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes the task read (whatever served them: disk or cache).
    pub logical_bytes: u64,
    /// Bytes the task wrote (rebuilt, moved or re-encoded chunks).
    pub written_bytes: u64,
    /// The data was gone (deleted meanwhile): nothing to do.
    pub skipped: bool,
    /// A corrupt or missing chunk was found and rebuilt.
    pub repaired: bool,
}

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct ActionError {
    pub action: String,
    #[source]
    pub source: ClientError,
}

/// Chunk reads the planner scheduled for a set: block id → copy to read.
pub type ScheduledCopies = HashMap<BlockId, u32>;

/// The data was deleted (or the copy is no longer where it was).
fn is_gone(e: &ClientError) -> bool {
    matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }) || e.code() == Some(tonic::Code::NotFound)
}

fn is_corrupt(e: &ClientError) -> bool {
    matches!(e, ClientError::Chunk { fault: ChunkFault::Corrupt, .. })
}

fn is_unavailable(e: &ClientError) -> bool {
    matches!(e, ClientError::Chunk { fault: ChunkFault::Unavailable, .. })
}

/// Carries out `action`, reading with `tag`. `copies` are the copies the
/// planner scheduled (declarative mode); empty means the task chooses.
pub async fn execute(
    client: &Client,
    action: &Action,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ActionError> {
    let wrap = |source| ActionError { action: action.to_string(), source };
    let result = match action {
        Action::Scrub { chunk, disk } => scrub(client, *chunk, *disk, tag).await,
        Action::Rebuild { lost, sources } => rebuild(client, *lost, sources, copies, tag).await,
        Action::Move(chunk) => move_chunk(client, *chunk, tag).await,
        Action::Transcode { from, to, redundancy } => transcode(client, from, to, *redundancy, copies, tag).await,
    };
    match result {
        Err(e) if is_gone(&e) => Ok(Outcome { skipped: true, ..Outcome::default() }),
        // A balancer skips a chunk whose disk just died; reconstruction
        // brings it back elsewhere.
        Err(e) if matches!(action, Action::Move(_)) && is_unavailable(&e) => {
            Ok(Outcome { skipped: true, ..Outcome::default() })
        }
        other => other.map_err(wrap),
    }
}

/// The current record of `block`, or `NotFound` if it is gone or deleted.
async fn block_record(client: &Client, block: BlockId) -> Result<BlockRecord, ClientError> {
    let rec = client.blocks(&[block.0]).await?.into_iter().next();
    match rec {
        Some(r) if r.state == dingo_proto::v1::BlockState::Sealed as i32 => Ok(r),
        _ => Err(ClientError::Rpc(tonic::Status::not_found(format!("block {} is deleted", block.0)))),
    }
}

async fn scrub(client: &Client, chunk: ChunkRef, disk: u32, tag: IoTag) -> Result<Outcome, ClientError> {
    let rec = block_record(client, chunk.block).await?;
    if !rec.chunks.iter().any(|l| l.copy == u32::from(chunk.copy) && l.disk == disk) {
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    match client.read_copy(chunk.block.0, u32::from(chunk.copy), 0, rec.size, tag).await {
        Ok(data) => Ok(Outcome { logical_bytes: data.len() as u64, ..Outcome::default() }),
        // The block still places this copy on this disk (checked above), so
        // a node without its file lost it: rebuild it like a corrupt one.
        // If the block was deleted meanwhile, the rebuild finds it gone.
        Err(e) if is_corrupt(&e) || is_gone(&e) => {
            tracing::warn!(%chunk, "scrubbing found a bad chunk ({e}); rebuilding it from redundancy");
            client.rebuild_chunk(chunk, &[], tag).await?;
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: true, ..Outcome::default() })
        }
        Err(e) => Err(e),
    }
}

async fn rebuild(
    client: &Client,
    lost: ChunkRef,
    sources: &[ChunkRef],
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    // The planner may have picked other copies of the same source blocks
    // (never the lost one itself).
    let sources: Vec<ChunkRef> = sources
        .iter()
        .map(|s| match copies.get(&s.block) {
            Some(&copy) if (ChunkRef { block: s.block, copy: copy as u8 }) != lost => {
                ChunkRef { block: s.block, copy: copy as u8 }
            }
            _ => *s,
        })
        .collect();
    // One metadata call for the sizes of the lost block and the sources
    // (returned in the order asked); a deleted block fails the rebuild below.
    let ids: Vec<u64> = std::iter::once(lost.block.0).chain(sources.iter().map(|s| s.block.0)).collect();
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

async fn move_chunk(client: &Client, chunk: ChunkRef, tag: IoTag) -> Result<Outcome, ClientError> {
    let rec = block_record(client, chunk.block).await?;
    match client.move_chunk(chunk, None, tag).await {
        Ok(_) => Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, ..Outcome::default() }),
        // A damaged copy cannot be moved, and would keep a drain from
        // finishing: rebuild it from redundancy (also away from its node).
        Err(e) if is_corrupt(&e) => {
            tracing::warn!(%chunk, "a chunk to move is corrupt ({e}); rebuilding it from redundancy");
            client.rebuild_chunk(chunk, &[], tag).await?;
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: true, ..Outcome::default() })
        }
        Err(e) => Err(e),
    }
}

async fn transcode(
    client: &Client,
    from: &str,
    to: &str,
    redundancy: Redundancy,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let file = client.stat(from).await?;
    let data: Bytes = if copies.is_empty() {
        client.read_file(&file, 0, file.size, tag).await?
    } else {
        // Read the copies the planner scheduled (and pinned). Transcoding
        // needs the bytes, not those copies: if one is unreadable (its node
        // died since the plan) any copy, or a degraded read, will do.
        let blocks = dingo_client::data_blocks(&file)?;
        let mut parts = Vec::with_capacity(blocks.len());
        for d in blocks {
            let scheduled = match copies.get(&BlockId(d.block.id)) {
                Some(&copy) => client.read_copy(d.block.id, copy, 0, d.block.size, tag).await.map_err(|e| (copy, e)),
                None => Err((0, ClientError::Invalid("not scheduled".into()))),
            };
            parts.push(match scheduled {
                Ok(part) => part,
                Err((copy, e)) => {
                    tracing::debug!(block = d.block.id, copy, "reading another copy: {e}");
                    client.read_file(&file, d.offset, d.block.size, tag).await?
                }
            });
        }
        parts.concat().into()
    };
    let read = data.len() as u64;
    // Write the new encoding first: until it is sealed the old file stays.
    if client.stat(to).await.is_ok() {
        // A previous attempt finished writing but not deleting.
        client.delete(to).await?;
    }
    client.put(to, redundancy, file.block_size, data).await?;
    client.delete(from).await?;
    let written = match redundancy {
        Redundancy::Ec { data: k, parity: m } => read * u64::from(k + m) / u64::from(k),
        Redundancy::Replicated(r) => read * u64::from(r),
    };
    Ok(Outcome { logical_bytes: read, written_bytes: written, ..Outcome::default() })
}

/// Builds the planner's view of one item's set from its action, so the
/// declared set and the executed action never disagree.
pub fn set_of(action: &Action, file_blocks: &[u64]) -> BlockSet {
    match action {
        Action::Scrub { chunk: c, .. } | Action::Move(c) => BlockSet::new(vec![Member::Copy(*c)]),
        Action::Rebuild { sources, .. } => BlockSet::any_of(sources.iter().map(|s| s.block)),
        Action::Transcode { .. } => BlockSet::any_of(file_blocks.iter().map(|&b| BlockId(b))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(declared: Declared) -> Job {
        let c = ChunkRef { block: BlockId(7), copy: 2 };
        Job {
            task: TaskKind::Scrubbing,
            label: "t".into(),
            items: vec![WorkItem {
                set: set_of(&Action::Scrub { chunk: c, disk: 3 }, &[]),
                action: Action::Scrub { chunk: c, disk: 3 },
                bytes: 10,
            }],
            declared,
            sets_needed: None,
            deadline_ms: 0,
            progress: None,
        }
    }

    #[test]
    fn keys_map_to_actions() {
        let c = ChunkRef { block: BlockId(7), copy: 2 };
        let items = job(Declared::Items);
        assert_eq!(items.action_for_key(0), Some(Action::Scrub { chunk: c, disk: 3 }));
        assert_eq!(items.action_for_key(1), None);
        let disk = job(Declared::ChunksOnDisk(3));
        assert_eq!(disk.action_for_key(Member::Copy(c).key()), Some(Action::Scrub { chunk: c, disk: 3 }));
        assert_eq!(disk.action_for_key(Member::Any(BlockId(7)).key()), None);
    }

    #[test]
    fn sets_follow_actions() {
        let c = ChunkRef { block: BlockId(7), copy: 1 };
        assert_eq!(set_of(&Action::Move(c), &[]).members, vec![Member::Copy(c)]);
        let sources = vec![ChunkRef { block: BlockId(1), copy: 0 }, ChunkRef { block: BlockId(2), copy: 0 }];
        let rebuild = Action::Rebuild { lost: c, sources };
        assert_eq!(set_of(&rebuild, &[]).members, vec![Member::Any(BlockId(1)), Member::Any(BlockId(2))]);
    }
}
