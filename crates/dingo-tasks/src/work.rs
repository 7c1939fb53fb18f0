//! What a maintenance job is made of, and how one unit of it is carried out.
//!
//! A [`Job`] is one task's batch of work with a deadline: a list of work
//! items, each the block set it must read plus the [`Action`] to take once
//! the set is read. Both drivers run the same items through [`execute`]: the
//! imperative one in its own order and at its own pace, the declarative one
//! when the planner calls back, reading exactly the copies the planner
//! scheduled (which is what lets a read hit the pinned cache).

use crate::objects::{self, Tombstones};
use crate::report::Progress;
use bytes::Bytes;
use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy};
use dingo_planner_client::wire::FileSegment;
use dingo_proto::v1::{BlockRecord, BlockState, FileInfo};
use dingo_types::{BlockId, BlockSet, ChunkRef, Member, TaskKind};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

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
    /// File scrubbing: read every data block of the file, any copy (the
    /// planner's first), verifying checksums; rebuild a corrupt copy from a
    /// good one. `blocks` are the file's data blocks when planned (a
    /// snapshot: if the file is deleted or replaced since, there is nothing
    /// to do).
    FileScrub { path: String, file: u64, blocks: Vec<u64> },
    /// Fsck: check file `file` (its id when planned) at `path` against the
    /// metadata, and read its data blocks holding bytes `0..first_bytes`,
    /// checking what the nodes hold against the block records. Reports
    /// what does not match; repairs nothing.
    Fsck { path: String, file: u64, first_bytes: u64 },
    /// Garbage collection: read data file `file` at `path` in full, write
    /// its live records (those `dead` does not name) to `to`, delete it.
    Collect { path: String, file: u64, to: String, dead: Arc<Tombstones> },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Scrub { chunk, disk } => write!(f, "scrub {chunk} on disk {disk}"),
            Action::Rebuild { lost, .. } => write!(f, "rebuild {lost}"),
            Action::Move(c) => write!(f, "move {c}"),
            Action::Transcode { from, to, redundancy } => write!(f, "transcode {from} -> {to} ({redundancy})"),
            Action::FileScrub { path, .. } => write!(f, "scrub file {path}"),
            Action::Fsck { path, .. } => write!(f, "fsck {path}"),
            Action::Collect { path, to, .. } => write!(f, "collect garbage of {path} into {to}"),
        }
    }
}

impl Action {
    /// The file bytes a file-level action reads, as declared to the planner
    /// through `DeclareFiles` (length 0: to the end of the file).
    pub fn file_segment(&self) -> Option<FileSegment> {
        let seg = |path: &str, length| FileSegment { path: path.to_string(), offset: 0, length };
        match self {
            Action::FileScrub { path, .. } | Action::Collect { path, .. } => Some(seg(path, 0)),
            Action::Fsck { path, first_bytes, .. } => Some(seg(path, *first_bytes)),
            Action::Scrub { .. } | Action::Rebuild { .. } | Action::Move(_) | Action::Transcode { .. } => None,
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
    /// One set per item, declared by file segment through `DeclareFiles`
    /// ([`Action::file_segment`]): the planner resolves the blocks when the
    /// job is declared (a snapshot). A set key is the index into `items`.
    Files,
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
            Declared::Items | Declared::Files => self.items.get(usize::try_from(key).ok()?).map(|i| i.action.clone()),
            Declared::ChunksOnDisk(disk) => match Member::from_key(key) {
                Member::Copy(chunk) => Some(Action::Scrub { chunk, disk }),
                Member::Any(_) => None,
            },
        }
    }
}

/// What carrying out one action did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes the task read (whatever served them: disk or cache).
    pub logical_bytes: u64,
    /// Bytes the task wrote (rebuilt, moved or re-encoded chunks).
    pub written_bytes: u64,
    /// The data was gone (deleted meanwhile): nothing to do.
    pub skipped: bool,
    /// Corrupt or missing chunks found and rebuilt.
    pub repaired: u64,
    /// Inconsistencies found and left as they are (fsck), each saying
    /// what and where.
    pub findings: Vec<String>,
    /// Logical bytes of dead records dropped (garbage collection).
    pub freed_bytes: u64,
}

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct ActionError {
    pub action: String,
    #[source]
    pub source: ClientError,
}

/// Block records the metadata service returns per `GetBlocks` call.
const MAX_RECORDS_PER_CALL: usize = 65_536;

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
        Action::FileScrub { path, file, blocks } => file_scrub(client, path, *file, blocks, copies, tag).await,
        Action::Fsck { path, file, first_bytes } => fsck(client, path, *file, *first_bytes, copies, tag).await,
        Action::Collect { path, file, to, dead } => collect(client, path, *file, to, dead, copies, tag).await,
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
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: 1, ..Outcome::default() })
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
            Ok(Outcome { logical_bytes: rec.size, written_bytes: rec.size, repaired: 1, ..Outcome::default() })
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
    let data = read_file_with(client, &file, copies, tag).await?;
    let read = data.len() as u64;
    // Write the new encoding first: until it is sealed the old file stays.
    if client.stat(to).await.is_ok() {
        // A previous attempt finished writing but not deleting.
        client.delete(to).await?;
    }
    client.put(to, redundancy, file.block_size, data).await?;
    client.delete(from).await?;
    Ok(Outcome { logical_bytes: read, written_bytes: stored_bytes(redundancy, read), ..Outcome::default() })
}

/// Bytes stored for `logical` file bytes written with `redundancy`.
fn stored_bytes(redundancy: Redundancy, logical: u64) -> u64 {
    match redundancy {
        Redundancy::Ec { data: k, parity: m } => logical * u64::from(k + m) / u64::from(k),
        Redundancy::Replicated(r) => logical * u64::from(r),
    }
}

/// Reads a whole file: the copies the planner scheduled (and pinned) when
/// given, else the client's own choice. A task that needs the bytes, not
/// those copies, reads any other copy (or degraded) when a scheduled one is
/// unreadable (its node died since the plan).
async fn read_file_with(
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
            Some(&copy) => client.read_copy(d.block.id, copy, 0, d.block.size, tag).await.map_err(|e| (copy, e)),
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

fn is_sealed(rec: &BlockRecord) -> bool {
    rec.state == BlockState::Sealed as i32
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
        match client.read_copy(rec.id, copy, 0, rec.size, tag).await {
            Ok(_) => return Ok(GoodRead { copy, bad }),
            Err(e) if is_corrupt(&e) || matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }) => {
                bad.push((copy, e))
            }
            Err(e) => unavailable = Some(e),
        }
    }
    Err(NoGoodCopy { bad, unavailable })
}

/// Chunk of copy `copy` of `rec`.
fn chunk(rec: &BlockRecord, copy: u32) -> ChunkRef {
    ChunkRef { block: BlockId(rec.id), copy: copy as u8 }
}

fn deleted(block: u64) -> ClientError {
    ClientError::Rpc(tonic::Status::not_found(format!("block {block} is deleted")))
}

async fn file_scrub(
    client: &Client,
    path: &str,
    file_id: u64,
    blocks: &[u64],
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let mut recs = Vec::with_capacity(blocks.len());
    for batch in blocks.chunks(MAX_RECORDS_PER_CALL) {
        recs.extend(client.blocks(batch).await?);
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

/// What the metadata of `file` says that cannot be right, without reading
/// any data: blocks out of order or not the file's, wrong states, copies
/// or stripe members missing or lost, sizes that do not add up.
pub fn check_metadata(file: &FileInfo) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |m: String| out.push(format!("{}: {m}", file.path));
    if !file.sealed {
        note("not sealed".into());
    }
    let redundancy = match Redundancy::try_from(file.redundancy.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            note(format!("unreadable redundancy: {e}"));
            return out;
        }
    };
    let ids: Vec<u64> = file.blocks.iter().map(|b| b.id).collect();
    if ids != file.block_ids {
        note(format!("block list {:?} does not match the block records {ids:?}", file.block_ids));
    }
    for b in &file.blocks {
        if !is_sealed(b) {
            note(format!("block {} is {:?}, not sealed", b.id, b.state()));
        }
        if b.file != file.id {
            note(format!("block {} belongs to file {}, not {}", b.id, b.file, file.id));
        }
        if b.redundancy != file.redundancy {
            note(format!("block {} has redundancy {:?}, the file {:?}", b.id, b.redundancy, file.redundancy));
        }
        if b.size > file.block_size {
            note(format!("block {} holds {} bytes, more than the block size {}", b.id, b.size, file.block_size));
        }
        let lost = b.chunks.iter().filter(|c| c.lost).count();
        if lost > 0 {
            note(format!("block {}: {lost} of {} copies lost (disk or node dead)", b.id, b.chunks.len()));
        }
    }
    let data_bytes: u64 = match redundancy {
        Redundancy::Replicated(r) => {
            for b in &file.blocks {
                let mut copies: Vec<u32> = b.chunks.iter().map(|c| c.copy).collect();
                copies.sort_unstable();
                if copies != (0..u32::from(r)).collect::<Vec<_>>() {
                    note(format!("block {} has copies {copies:?}, expected 0..{r}", b.id));
                }
                let mut nodes: Vec<u32> = b.chunks.iter().map(|c| c.node).collect();
                nodes.sort_unstable();
                nodes.dedup();
                if nodes.len() != b.chunks.len() {
                    note(format!("block {} has two copies on one node", b.id));
                }
                if b.group != b.id || b.ec_index != 0 {
                    note(format!("block {} of a replicated file has group {} member {}", b.id, b.group, b.ec_index));
                }
            }
            file.blocks.iter().map(|b| b.size).sum()
        }
        Redundancy::Ec { data, parity } => {
            let (k, width) = (usize::from(data), usize::from(data) + usize::from(parity));
            if !file.blocks.len().is_multiple_of(width) {
                note(format!("{} blocks is not a whole number of {data}+{parity} stripes", file.blocks.len()));
            }
            for stripe in file.blocks.chunks(width) {
                for (i, b) in stripe.iter().enumerate() {
                    if b.group != stripe[0].id || b.ec_index as usize != i {
                        note(format!(
                            "block {} is member {} of group {}, expected {i} of {}",
                            b.id, b.ec_index, b.group, stripe[0].id
                        ));
                    }
                    if b.chunks.len() != 1 || b.chunks[0].copy != 0 {
                        note(format!("stripe member {} has {} chunks, expected copy 0 only", b.id, b.chunks.len()));
                    }
                }
                if stripe.len() < width {
                    continue;
                }
                let shard = stripe[k].size;
                if let Some(p) = stripe[k..].iter().find(|p| p.size != shard) {
                    note(format!(
                        "parity block {} holds {} bytes, parity {} holds {shard}",
                        p.id, p.size, stripe[k].id
                    ));
                }
                if let Some(d) = stripe[..k].iter().find(|d| d.size > shard) {
                    note(format!(
                        "data block {} holds {} bytes, more than its stripe's parity ({shard})",
                        d.id, d.size
                    ));
                }
            }
            file.blocks.chunks(width).flat_map(|s| s.iter().take(k)).map(|b| b.size).sum()
        }
    };
    if data_bytes != file.size {
        note(format!("data blocks hold {data_bytes} bytes, the file's size is {}", file.size));
    }
    out
}

/// Reads one block the way fsck does: a copy in full, then one byte past
/// its recorded size (which must not exist). Returns what does not match.
async fn fsck_block(
    client: &Client,
    file: &FileInfo,
    d: &dingo_client::DataBlock<'_>,
    first: Option<u32>,
    tag: IoTag,
) -> Result<Vec<String>, ClientError> {
    let (path, rec) = (&file.path, d.block);
    let mut order: Vec<(bool, bool, u32)> =
        rec.chunks.iter().map(|c| (Some(c.copy) != first, c.lost, c.copy)).collect();
    order.sort_unstable();
    let mut findings = Vec::new();
    let mut unavailable = None;
    for (_, _, copy) in order {
        let at = format!("{path}: block {} copy {copy}", rec.id);
        match client.read_copy(rec.id, copy, 0, rec.size, tag).await {
            Ok(_) => {
                match client.read_copy(rec.id, copy, rec.size, 1, tag).await {
                    Ok(_) => findings.push(format!("{at} holds more than the {} bytes its record says", rec.size)),
                    Err(e) if e.code() == Some(tonic::Code::OutOfRange) => {}
                    // Unreachable since the first read: what was read matched.
                    Err(e) => tracing::debug!("{at}: probe past the end: {e}"),
                }
                return Ok(findings);
            }
            Err(e) if e.code() == Some(tonic::Code::OutOfRange) => {
                findings.push(format!("{at} holds fewer than the {} bytes its record says ({e})", rec.size))
            }
            Err(e) if is_corrupt(&e) => findings.push(format!("{at} does not match its checksums ({e})")),
            Err(e @ ClientError::Chunk { fault: ChunkFault::Missing, .. }) => {
                if !is_sealed(&block_record(client, BlockId(rec.id)).await?) {
                    return Err(e);
                }
                findings.push(format!("{at} is missing on its node ({e})"));
            }
            Err(e) => unavailable = Some(e),
        }
    }
    // Every copy answered and was inconsistent: that is the finding. If
    // some could not be reached, the check is not done: try again later —
    // unless it is the only copy of an EC member, whose node is down: then
    // read it degraded from its stripe (which checks the members read), and
    // leave the member to reconstruction.
    match unavailable {
        Some(e) if rec.chunks.len() == 1 && findings.is_empty() => {
            tracing::debug!(block = rec.id, "reading an unreachable member degraded: {e}");
            client.read_file(file, d.offset, rec.size, tag).await?;
            Ok(findings)
        }
        Some(e) => Err(e),
        None => Ok(findings),
    }
}

async fn fsck(
    client: &Client,
    path: &str,
    file_id: u64,
    first_bytes: u64,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let file = client.stat(path).await?;
    if file.id != file_id {
        // Replaced since it was planned: the file checked is gone.
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    let mut out = Outcome { findings: check_metadata(&file), ..Outcome::default() };
    let blocks = match dingo_client::data_blocks(&file) {
        Ok(b) => b,
        Err(e) => {
            out.findings.push(format!("{path}: cannot lay out its data blocks: {e}"));
            return Ok(out);
        }
    };
    for d in blocks.iter().take_while(|d| d.offset < first_bytes) {
        out.findings.extend(fsck_block(client, &file, d, copies.get(&BlockId(d.block.id)).copied(), tag).await?);
        out.logical_bytes += d.block.size;
    }
    Ok(out)
}

async fn collect(
    client: &Client,
    path: &str,
    file_id: u64,
    to: &str,
    dead: &Tombstones,
    copies: &ScheduledCopies,
    tag: IoTag,
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
    let redundancy = Redundancy::try_from(file.redundancy.as_ref()).map_err(ClientError::Invalid)?;
    if collected.live_records > 0 {
        // Live records first, sealed; only then the old file goes.
        let mut to = to.to_string();
        loop {
            match client.stat(&to).await {
                Err(e) if e.code() == Some(tonic::Code::NotFound) => {
                    client.put(&to, redundancy, file.block_size, collected.live.clone()).await?;
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

/// Builds the planner's view of one item's set from its action, so the
/// declared set and the executed action never disagree.
pub fn set_of(action: &Action, file_blocks: &[u64]) -> BlockSet {
    match action {
        Action::Scrub { chunk: c, .. } | Action::Move(c) => BlockSet::new(vec![Member::Copy(*c)]),
        Action::Rebuild { sources, .. } => BlockSet::any_of(sources.iter().map(|s| s.block)),
        Action::Transcode { .. } | Action::FileScrub { .. } | Action::Fsck { .. } | Action::Collect { .. } => {
            BlockSet::any_of(file_blocks.iter().map(|&b| BlockId(b)))
        }
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
    fn file_jobs_are_declared_by_segment_and_keyed_by_item() {
        let scrub = Action::FileScrub { path: "/a".into(), file: 1, blocks: vec![4, 5] };
        let fsck = Action::Fsck { path: "/b".into(), file: 2, first_bytes: 300 };
        assert_eq!(scrub.file_segment(), Some(FileSegment { path: "/a".into(), offset: 0, length: 0 }));
        assert_eq!(fsck.file_segment(), Some(FileSegment { path: "/b".into(), offset: 0, length: 300 }));
        assert_eq!(Action::Move(ChunkRef { block: BlockId(1), copy: 0 }).file_segment(), None);
        let mut j = job(Declared::Files);
        j.items = [scrub.clone(), fsck.clone()]
            .into_iter()
            .map(|action| WorkItem { set: set_of(&action, &[1]), action, bytes: 1 })
            .collect();
        assert_eq!(j.action_for_key(1), Some(fsck));
        assert_eq!(j.action_for_key(2), None);
    }

    fn location(copy: u32, node: u32) -> dingo_proto::v1::ChunkLocation {
        dingo_proto::v1::ChunkLocation { copy, disk: node, node, ..Default::default() }
    }

    /// A sealed replicated(2) file of two blocks of 100 and 50 bytes.
    fn file() -> FileInfo {
        let redundancy = Some(Redundancy::Replicated(2).into());
        let block = |id, size| BlockRecord {
            id,
            file: 9,
            size,
            state: BlockState::Sealed as i32,
            group: id,
            ec_index: 0,
            redundancy,
            chunks: vec![location(0, 1), location(1, 2)],
        };
        FileInfo {
            id: 9,
            path: "/f".into(),
            redundancy,
            block_size: 100,
            size: 150,
            sealed: true,
            block_ids: vec![3, 4],
            blocks: vec![block(3, 100), block(4, 50)],
            ..Default::default()
        }
    }

    #[test]
    fn metadata_checks_find_what_does_not_add_up() {
        assert_eq!(check_metadata(&file()), Vec::<String>::new());
        let mut f = file();
        f.size = 160;
        assert_eq!(check_metadata(&f), vec!["/f: data blocks hold 150 bytes, the file's size is 160"]);
        let mut f = file();
        f.blocks[1].chunks[1] = location(1, 1);
        f.blocks[0].file = 8;
        f.block_ids.reverse();
        assert_eq!(
            check_metadata(&f),
            vec![
                "/f: block list [4, 3] does not match the block records [3, 4]",
                "/f: block 3 belongs to file 8, not 9",
                "/f: block 4 has two copies on one node",
            ]
        );
        let mut f = file();
        f.blocks[0].chunks.pop();
        f.blocks[1].chunks[0].lost = true;
        f.blocks[1].size = 120;
        f.size = 220;
        assert_eq!(
            check_metadata(&f),
            vec![
                "/f: block 4 holds 120 bytes, more than the block size 100",
                "/f: block 4: 1 of 2 copies lost (disk or node dead)",
                "/f: block 3 has copies [0], expected 0..2",
            ]
        );
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
