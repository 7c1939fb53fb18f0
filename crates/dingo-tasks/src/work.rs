//! What a maintenance job is made of, and how one unit of it is carried out.
//!
//! A [`Job`] is one task's batch of work with a deadline: a list of work
//! items, each the block set it must read plus the [`Action`] to take once
//! the set is read. Both drivers run the same items through [`execute`]: the
//! imperative one in its own order and at its own pace, the declarative one
//! when the planner calls back, reading exactly the copies the planner
//! scheduled (which is what lets a read hit the pinned cache).

mod chunks;
mod files;
mod fsck;
mod georep;

pub use fsck::check_metadata;

use crate::georep::RemoteSite;
use crate::objects::Tombstones;
use chunks::{move_chunk, rebuild, scrub};
use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy};
use dingo_planner_client::wire::FileSegment;
use dingo_proto::v1::{BlockRecord, BlockState};
use dingo_types::{BlockId, BlockSet, ChunkRef, Member, TaskKind};
use files::{collect, file_scrub, transcode};
use fsck::fsck;
use georep::georeplicate;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One unit of maintenance work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Read this exact copy in full on the disk being scrubbed, verifying
    /// its checksums; rebuild it from redundancy if it is corrupt or its
    /// node lost its file. A copy
    /// no longer on that disk (moved away) is not this scrub's business.
    Scrub { chunk: ChunkRef, disk: u32 },
    /// Recreate a lost chunk on a live disk from any `needed` of `sources`
    /// (another replica; or any `k` of the surviving members of its stripe,
    /// so the planner may pick those on idle disks or read anyway).
    Rebuild { lost: ChunkRef, sources: Vec<ChunkRef>, needed: u32 },
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
    /// Georeplication: read file `file` at `path` in full, write it to the
    /// same path on the remote `site`, read it back there to verify it is
    /// identical, and record it in the site's progress file. A file
    /// already recorded is not copied again.
    Georeplicate { path: String, file: u64, site: Arc<RemoteSite> },
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
            Action::Georeplicate { path, site, .. } => write!(f, "georeplicate {path} to {}", site.addr()),
        }
    }
}

impl Action {
    /// The file bytes a file-level action reads, as declared to the planner
    /// through `DeclareFiles` (length 0: to the end of the file).
    pub fn file_segment(&self) -> Option<FileSegment> {
        let seg = |path: &str, length| FileSegment { path: path.to_string(), offset: 0, length };
        match self {
            Action::FileScrub { path, .. } | Action::Collect { path, .. } | Action::Georeplicate { path, .. } => {
                Some(seg(path, 0))
            }
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
    /// `None`: every item (unless `bytes_needed`). `Some(n)`: any `n` of
    /// them (data flexibility).
    pub sets_needed: Option<u64>,
    /// Byte-denominated data flexibility: any items whose bytes total at
    /// least this many (rebalancing: "move at least N bytes"); the planner
    /// picks the cheapest, the imperative walk takes them in its order.
    /// Never together with `sets_needed`.
    pub bytes_needed: Option<u64>,
    /// Unix milliseconds by which the work must be complete.
    pub deadline_ms: u64,
    /// Counts finished items as the job runs, for whoever shows progress.
    pub progress: Option<Progress>,
}

impl Job {
    /// A job that needs every item, declared as `declared` says, with no
    /// progress counter yet.
    pub fn new(task: TaskKind, label: String, items: Vec<WorkItem>, declared: Declared, deadline_ms: u64) -> Job {
        Job { task, label, items, declared, sets_needed: None, bytes_needed: None, deadline_ms, progress: None }
    }

    /// Items the job must complete: with `bytes_needed`, the first items in
    /// the job's order that total that many bytes (the imperative walk's
    /// count; the planner may pick others).
    pub fn needed(&self) -> u64 {
        match (self.sets_needed, self.bytes_needed) {
            (Some(sets), _) => sets,
            (None, Some(bytes)) => {
                let mut total = 0u64;
                let covering = self.items.iter().take_while(|item| {
                    let short = total < bytes;
                    total = total.saturating_add(item.bytes);
                    short
                });
                covering.count() as u64
            }
            (None, None) => self.items.len() as u64,
        }
    }

    /// Whether the job needs only some of its items.
    pub fn is_flexible(&self) -> bool {
        self.sets_needed.is_some() || self.bytes_needed.is_some()
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

/// Told, before an action deletes data, what it is about to delete: whole
/// blocks as [`Member::Any`], single copies as exact-copy members. The
/// declarative agent passes it on to the planner (anticipatory elision:
/// other tasks' sets of that data are then never read). It is called once
/// the action has read what it deletes and has decided to delete it (a
/// moved copy: once moved), and must not block.
pub trait DeletionNotice: Send + Sync {
    fn will_delete(&self, members: Vec<Member>);
}

/// Tells no one (imperative runs: there is no planner to tell).
pub struct NoNotice;

impl DeletionNotice for NoNotice {
    fn will_delete(&self, _: Vec<Member>) {}
}

/// Carries out `action`, reading with `tag`. `copies` are the copies the
/// planner scheduled (declarative mode); empty means the task chooses.
pub async fn execute(
    client: &Client,
    action: &Action,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ActionError> {
    execute_noting(client, action, copies, tag, &NoNotice).await
}

/// [`execute`], telling `notice` what the action is about to delete.
pub async fn execute_noting(
    client: &Client,
    action: &Action,
    copies: &ScheduledCopies,
    tag: IoTag,
    notice: &dyn DeletionNotice,
) -> Result<Outcome, ActionError> {
    let wrap = |source| ActionError { action: action.to_string(), source };
    let result = match action {
        Action::Scrub { chunk, disk } => scrub(client, *chunk, *disk, tag).await,
        Action::Rebuild { lost, sources, needed } => rebuild(client, *lost, sources, *needed, copies, tag).await,
        Action::Move(chunk) => move_chunk(client, *chunk, tag, notice).await,
        Action::Transcode { from, to, redundancy } => {
            transcode(client, (from, to), *redundancy, copies, tag, notice).await
        }
        Action::FileScrub { path, file, blocks } => file_scrub(client, path, *file, blocks, copies, tag).await,
        Action::Fsck { path, file, first_bytes } => fsck(client, path, *file, *first_bytes, copies, tag).await,
        Action::Collect { path, file, to, dead } => collect(client, path, *file, (to, dead), copies, tag, notice).await,
        Action::Georeplicate { path, file, site } => georeplicate(client, path, *file, site, copies, tag).await,
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

/// Attempts at one action before it counts as failed.
pub const ACTION_ATTEMPTS: u32 = 4;
/// Pause before the second attempt; doubled before each further one, so
/// the attempts span a few seconds: long enough for a node that just died
/// to be marked dead and its copies read elsewhere, or for a machine
/// busy with other work to answer.
const RETRY_PAUSE_MS: u64 = 500;

/// [`execute`], retried with growing pauses until it succeeds or has
/// failed [`ACTION_ATTEMPTS`] times (then the last error).
pub async fn execute_with_retries(
    client: &Client,
    action: &Action,
    copies: &ScheduledCopies,
    tag: IoTag,
    notice: &dyn DeletionNotice,
) -> Result<Outcome, ActionError> {
    let mut attempt = 1;
    loop {
        match execute_noting(client, action, copies, tag, notice).await {
            Ok(o) => return Ok(o),
            Err(e) if attempt >= ACTION_ATTEMPTS => return Err(e),
            Err(e) => {
                let pause = RETRY_PAUSE_MS << (attempt - 1);
                tracing::debug!(attempt, pause_ms = pause, "{e}; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                attempt += 1;
            }
        }
    }
}

/// The current record of `block`, or `NotFound` if it is gone or deleted.
async fn block_record(client: &Client, block: BlockId) -> Result<BlockRecord, ClientError> {
    let rec = client.blocks(&[block]).await?.into_iter().next();
    match rec {
        Some(r) if r.state == dingo_proto::v1::BlockState::Sealed as i32 => Ok(r),
        _ => Err(ClientError::Rpc(tonic::Status::not_found(format!("block {} is deleted", block.0)))),
    }
}

fn is_sealed(rec: &BlockRecord) -> bool {
    rec.state == BlockState::Sealed as i32
}

/// Chunk of copy `copy` of `rec`.
fn chunk(rec: &BlockRecord, copy: u32) -> ChunkRef {
    ChunkRef { block: BlockId(rec.id), copy: copy as u8 }
}

fn deleted(block: u64) -> ClientError {
    ClientError::Rpc(tonic::Status::not_found(format!("block {block} is deleted")))
}

/// Builds the planner's view of one item's set from its action, so the
/// declared set and the executed action never disagree.
pub fn set_of(action: &Action, file_blocks: &[u64]) -> BlockSet {
    match action {
        Action::Scrub { chunk: c, .. } | Action::Move(c) => BlockSet::new(vec![Member::Copy(*c)]),
        Action::Rebuild { sources, needed, .. } => {
            let all = BlockSet::any_of(sources.iter().map(|s| s.block));
            if (*needed as usize) < all.members.len() { BlockSet::choose(all.members, *needed) } else { all }
        }
        Action::Transcode { .. }
        | Action::FileScrub { .. }
        | Action::Fsck { .. }
        | Action::Collect { .. }
        | Action::Georeplicate { .. } => BlockSet::any_of(file_blocks.iter().map(|&b| BlockId(b))),
    }
}

/// A running job's items finished so far (done, skipped or failed) and
/// bytes read, for a progress display. Cheap to clone; all clones share the
/// counters. Two handles are equal when they are the same counters.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<[AtomicU64; 2]>);

impl Progress {
    pub fn items(&self) -> u64 {
        self.0[0].load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.0[1].load(Ordering::Relaxed)
    }

    pub(crate) fn add(&self, items: u64, bytes: u64) {
        self.0[0].fetch_add(items, Ordering::Relaxed);
        self.0[1].fetch_add(bytes, Ordering::Relaxed);
    }
}

impl PartialEq for Progress {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Progress {}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(declared: Declared) -> Job {
        let c = ChunkRef { block: BlockId(7), copy: 2 };
        let action = Action::Scrub { chunk: c, disk: 3 };
        let items = vec![WorkItem { set: set_of(&action, &[]), action, bytes: 10 }];
        Job::new(TaskKind::Scrubbing, "t".into(), items, declared, 0)
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

    #[test]
    fn sets_follow_actions() {
        let c = ChunkRef { block: BlockId(7), copy: 1 };
        assert_eq!(set_of(&Action::Move(c), &[]).members, vec![Member::Copy(c)]);
        let sources = vec![ChunkRef { block: BlockId(1), copy: 0 }, ChunkRef { block: BlockId(2), copy: 0 }];
        let all = BlockSet::new(vec![Member::Any(BlockId(1)), Member::Any(BlockId(2))]);
        let rebuild = Action::Rebuild { lost: c, sources: sources.clone(), needed: 2 };
        assert_eq!(set_of(&rebuild, &[]), all);
        // Any one of the two survivors: the planner chooses.
        let rebuild = Action::Rebuild { lost: c, sources, needed: 1 };
        assert_eq!(set_of(&rebuild, &[]), BlockSet::choose(all.members, 1));
    }
}
