//! Turning the cluster's state into jobs: what each task must do now.
//!
//! Planning only reads metadata; it is the same for both modes, so the
//! imperative and the declarative run of a task do the same work.

use crate::georep::RemoteSite;
use crate::objects::{self, Tombstones};
pub use crate::pick::FilePick;
use crate::pick::pick_files;
use crate::work::{Action, Declared, Job, WorkItem, set_of};
use dingo_client::{Client, ClientError, DeviceState, IoTag, Redundancy};
use dingo_proto::v1::{BlockRecord, ClusterStatusReply, FileInfo};
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, TaskKind};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Block records fetched per metadata request.
const RECORD_BATCH: usize = 1024;

/// Records of `ids`, by id (deleted or unknown blocks are absent).
async fn records(
    client: &Client,
    ids: impl IntoIterator<Item = u64>,
) -> Result<HashMap<u64, BlockRecord>, ClientError> {
    let ids: Vec<BlockId> = ids.into_iter().collect::<HashSet<_>>().into_iter().map(BlockId).collect();
    let mut out = HashMap::with_capacity(ids.len());
    for batch in ids.chunks(RECORD_BATCH) {
        for r in client.blocks(batch).await? {
            if r.state == dingo_proto::v1::BlockState::Sealed as i32 {
                out.insert(r.id, r);
            }
        }
    }
    Ok(out)
}

/// One move per chunk (rebalancing, draining); every chunk's block is in `recs`.
fn move_items(chunks: Vec<ChunkRef>, recs: &HashMap<u64, BlockRecord>) -> Vec<WorkItem> {
    chunks
        .into_iter()
        .map(|c| {
            let action = Action::Move(c);
            WorkItem { set: set_of(&action, &[]), action, bytes: recs[&c.block.0].size }
        })
        .collect()
}

/// Disks of live nodes that hold data (neither DEAD nor DECOMMISSIONED),
/// with capacity and used bytes.
fn live_disks(status: &ClusterStatusReply) -> Vec<(u32, u64, u64)> {
    status
        .nodes
        .iter()
        .filter(|n| n.alive)
        .flat_map(|n| n.disks.iter())
        .filter(|d| !matches!(d.state(), DeviceState::Dead | DeviceState::Decommissioned))
        .map(|d| (d.id, d.capacity, d.used))
        .collect()
}

/// Moves every chunk of a sealed block off the DRAINING disks (their own
/// state or their node's) of `status`, through the rebalancing move: the
/// metadata service places each new copy on a node that takes chunks and
/// holds the fewest others of its block or stripe. `None` when no disk is
/// draining or nothing is left on them. Chunks of blocks still open are
/// not movable yet; they come in a later round once committed.
pub async fn draining(
    client: &Client,
    status: &ClusterStatusReply,
    deadline_ms: u64,
) -> Result<Option<Job>, ClientError> {
    let disks: Vec<u32> = status
        .nodes
        .iter()
        .flat_map(|n| n.disks.iter())
        .filter(|d| d.state() == DeviceState::Draining)
        .map(|d| d.id)
        .collect();
    let mut chunks = Vec::new();
    for &disk in &disks {
        chunks.extend(client.chunks_on_disk(DiskId(disk)).await?);
    }
    let recs = records(client, chunks.iter().map(|c| c.block.0)).await?;
    chunks.retain(|c| recs.contains_key(&c.block.0));
    if chunks.is_empty() {
        return Ok(None);
    }
    chunks.sort_unstable();
    let items = move_items(chunks, &recs);
    Ok(Some(Job::new(TaskKind::Rebalancing, format!("drain disk(s) {disks:?}"), items, Declared::Items, deadline_ms)))
}

/// One scrubbing job per live disk: every chunk on it, that exact copy, in
/// on-disk (chunk id) order.
pub async fn scrubbing(client: &Client, deadline_ms: u64) -> Result<Vec<Job>, ClientError> {
    let status = client.cluster_status().await?;
    let mut jobs = Vec::new();
    for (disk, _, _) in live_disks(&status) {
        let mut chunks = client.chunks_on_disk(DiskId(disk)).await?;
        chunks.sort_unstable();
        let recs = records(client, chunks.iter().map(|c| c.block.0)).await?;
        let items = chunks
            .into_iter()
            .filter_map(|c| {
                let bytes = recs.get(&c.block.0)?.size;
                let action = Action::Scrub { chunk: c, disk };
                Some(WorkItem { set: set_of(&action, &[]), action, bytes })
            })
            .collect();
        jobs.push(Job::new(
            TaskKind::Scrubbing,
            format!("disk {disk}"),
            items,
            Declared::ChunksOnDisk(disk),
            deadline_ms,
        ));
    }
    Ok(jobs)
}

/// Rebuilds every lost chunk: a replicated block from another copy, an EC
/// member from any `k` of the surviving members of its stripe (declared as
/// a set needing `k` of them, so the planner chooses which).
pub async fn reconstruction(client: &Client, label: &str, deadline_ms: u64) -> Result<Job, ClientError> {
    let lost: Vec<ChunkRef> = client.lost_chunks().await?;
    let lost_set: HashSet<ChunkRef> = lost.iter().copied().collect();
    let recs = records(client, lost.iter().map(|c| c.block.0)).await?;
    // Every member of every stripe that lost one.
    let stripe_ids = recs.values().filter(|r| is_ec(r)).flat_map(|r| {
        let width = dingo_proto::redundancy(r.redundancy.as_ref()).ok().map_or(0, |x| x.width() as u64);
        r.group..r.group + width
    });
    let stripes = records(client, stripe_ids).await?;
    let mut items = Vec::new();
    for chunk in lost {
        let Some(rec) = recs.get(&chunk.block.0) else { continue };
        let (sources, needed): (Vec<ChunkRef>, u32) = match dingo_proto::redundancy(rec.redundancy.as_ref()).ok() {
            Some(Redundancy::Ec { data, parity }) => {
                let width = u64::from(data) + u64::from(parity);
                let survivors = (rec.group..rec.group + width)
                    .filter(|&b| b != rec.id)
                    .filter_map(|b| stripes.get(&b).filter(|m| m.group == rec.group))
                    .map(|m| ChunkRef { block: BlockId(m.id), copy: 0 })
                    .filter(|c| !lost_set.contains(c))
                    .collect();
                (survivors, u32::from(data))
            }
            _ => {
                let other = rec
                    .chunks
                    .iter()
                    .map(|l| ChunkRef { block: chunk.block, copy: l.copy as u8 })
                    .filter(|c| *c != chunk && !lost_set.contains(c))
                    .take(1)
                    .collect();
                (other, 1)
            }
        };
        if sources.is_empty() {
            tracing::error!(%chunk, "lost chunk has no surviving source; it cannot be rebuilt");
            continue;
        }
        // What a rebuild reads: `needed` sources (a stripe's members are
        // all of one size).
        let bytes = sources
            .iter()
            .take(needed as usize)
            .filter_map(|s| stripes.get(&s.block.0).or(recs.get(&s.block.0)))
            .map(|r| r.size)
            .sum();
        let action = Action::Rebuild { lost: chunk, sources, needed };
        items.push(WorkItem { set: set_of(&action, &[]), action, bytes });
    }
    Ok(Job::new(TaskKind::Reconstruction, label.to_string(), items, Declared::Items, deadline_ms))
}

fn is_ec(r: &BlockRecord) -> bool {
    matches!(dingo_proto::redundancy(r.redundancy.as_ref()).ok(), Some(Redundancy::Ec { .. }))
}

/// Moves bytes from over-full to under-full disks: every chunk on a disk
/// more than `threshold` (a fraction, e.g. 0.1) above the mean utilisation
/// is a candidate; enough of them are needed to bring the under-full disks
/// up to the mean. `None` when nothing is skewed.
pub async fn rebalancing(
    client: &Client,
    threshold: f64,
    seed: u64,
    deadline_ms: u64,
) -> Result<Option<Job>, ClientError> {
    let status = client.cluster_status().await?;
    let disks = live_disks(&status);
    let (cap, used): (u64, u64) = disks.iter().fold((0, 0), |(c, u), d| (c + d.1, u + d.2));
    if cap == 0 {
        return Ok(None);
    }
    let mean = used as f64 / cap as f64;
    let util = |d: &(u32, u64, u64)| d.2 as f64 / d.1.max(1) as f64;
    let deficit: f64 =
        disks.iter().filter(|d| util(d) < mean - threshold).map(|d| mean * d.1 as f64 - d.2 as f64).sum();
    let mut candidates = Vec::new();
    for d in disks.iter().filter(|d| util(d) > mean + threshold) {
        candidates.extend(client.chunks_on_disk(DiskId(d.0)).await?);
    }
    if deficit <= 0.0 || candidates.is_empty() {
        return Ok(None);
    }
    let recs = records(client, candidates.iter().map(|c| c.block.0)).await?;
    candidates.retain(|c| recs.contains_key(&c.block.0));
    candidates.sort_unstable();
    // The imperative balancer's own order: a seeded shuffle.
    fastrand::Rng::with_seed(seed).shuffle(&mut candidates);
    // Byte-denominated: the deficit in bytes, whichever chunks make it up
    // (no estimate of a count from the mean chunk size).
    let candidate_bytes: u64 = candidates.iter().map(|c| recs[&c.block.0].size).sum();
    let needed_bytes = (deficit.ceil() as u64).clamp(1, candidate_bytes.max(1));
    let items = move_items(candidates, &recs);
    let label = format!("{needed_bytes} bytes off disks above {:.0} % full", (mean + threshold) * 100.0);
    let job = Job::new(TaskKind::Rebalancing, label, items, Declared::Items, deadline_ms);
    Ok(Some(Job { bytes_needed: Some(needed_bytes), ..job }))
}

/// Re-encodes files: each `(from, to)` pair is read in full, written as
/// `to` with `redundancy`, and `from` deleted. Files already gone are left
/// out.
pub async fn transcoding(
    client: &Client,
    files: &[(String, String)],
    redundancy: Redundancy,
    label: &str,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let mut items = Vec::new();
    for (from, to) in files {
        let file = match client.stat(from).await {
            Ok(f) => f,
            Err(e) if e.code() == Some(tonic::Code::NotFound) => continue,
            Err(e) => return Err(e),
        };
        items.push(whole_file_item(&file, Action::Transcode { from: from.clone(), to: to.clone(), redundancy }));
    }
    Ok(Job::new(TaskKind::Transcoding, label.to_string(), items, Declared::Items, deadline_ms))
}

/// Ids of the blocks holding a file's bytes, in file order: every block
/// of a replicated file, the data members of an erasure-coded one.
fn data_block_ids(file: &FileInfo) -> Vec<u64> {
    let data_members = match dingo_proto::redundancy(file.redundancy.as_ref()) {
        Ok(Redundancy::Ec { data, .. }) => u32::from(data),
        _ => u32::MAX,
    };
    file.blocks.iter().filter(|b| b.ec_index < data_members).map(|b| b.id).collect()
}

/// The item of `action`, which reads all of `file`.
fn whole_file_item(file: &FileInfo, action: Action) -> WorkItem {
    WorkItem { set: set_of(&action, &data_block_ids(file)), action, bytes: file.size }
}

/// File scrubbing: every data block of each picked file under `prefix`,
/// read (any copy) and verified; one set per file, declared by path.
pub async fn file_scrubbing(
    client: &Client,
    prefix: &str,
    pick: FilePick,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let items = pick_files(client, prefix, pick)
        .await?
        .iter()
        .map(|f| whole_file_item(f, Action::FileScrub { path: f.path.clone(), file: f.id, blocks: data_block_ids(f) }))
        .collect();
    Ok(Job::new(TaskKind::FileScrubbing, prefix.to_string(), items, Declared::Files, deadline_ms))
}

/// Fsck: each picked file under `prefix` checked against the metadata,
/// reading its first `first_blocks` data blocks (the simulator's fsck reads
/// 2); one set per file, declared as the segment those blocks hold.
pub async fn fsck(
    client: &Client,
    prefix: &str,
    pick: FilePick,
    first_blocks: usize,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let items = pick_files(client, prefix, pick)
        .await?
        .into_iter()
        .map(|f| {
            let first: Vec<&BlockRecord> = {
                let ids: HashSet<u64> = data_block_ids(&f).into_iter().take(first_blocks).collect();
                f.blocks.iter().filter(|b| ids.contains(&b.id)).collect()
            };
            let first_bytes: u64 = first.iter().map(|b| b.size).sum();
            let blocks: Vec<u64> = first.iter().map(|b| b.id).collect();
            let action = Action::Fsck { path: f.path.clone(), file: f.id, first_bytes };
            WorkItem { set: set_of(&action, &blocks), action, bytes: first_bytes }
        })
        .filter(|i| i.bytes > 0)
        .collect();
    Ok(Job::new(TaskKind::Fsck, prefix.to_string(), items, Declared::Files, deadline_ms))
}

/// Georeplication: each picked file under `prefix` not yet recorded as
/// copied to `site` is read in full and copied there (same path, same
/// redundancy); one set per file, declared by path.
pub async fn georeplication(
    client: &Client,
    site: &Arc<RemoteSite>,
    prefix: &str,
    pick: FilePick,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let files = pick_files(client, prefix, pick).await?;
    let picked = files.len();
    let items: Vec<WorkItem> = files
        .iter()
        .filter(|f| !site.ledger.contains(&f.path, f.id))
        .map(|f| whole_file_item(f, Action::Georeplicate { path: f.path.clone(), file: f.id, site: site.clone() }))
        .collect();
    let mut label = format!("{prefix} to {}", site.addr());
    if items.len() < picked {
        label += &format!(" ({} of {picked} files copied before)", picked - items.len());
    }
    Ok(Job::new(TaskKind::Georeplication, label, items, Declared::Files, deadline_ms))
}

/// Garbage collection of the object-store area `area` (layout and record
/// format: [`objects`]): the liveness snapshot is every tombstone file of
/// the area, read now; each picked data file is read in full, its live
/// records rewritten to its next generation, and it is deleted. One set
/// per data file, declared by path. A tombstone file that does not parse
/// stops planning with an error naming it (no liveness, no collection).
pub async fn garbage_collection(
    client: &Client,
    area: &str,
    pick: FilePick,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let tag = IoTag::Maintenance { task: TaskKind::GarbageCollection, declaration: DeclarationId(0) };
    let mut dead = Tombstones::default();
    for f in pick_files(client, &objects::tombstone_prefix(area), FilePick::ALL).await? {
        let data = client.read_file(&f, 0, f.size, tag).await?;
        dead.add_file(&data).map_err(|e| ClientError::Invalid(format!("tombstone file {}: {e}", f.path)))?;
    }
    let dead = Arc::new(dead);
    let items = pick_files(client, &objects::data_prefix(area), pick)
        .await?
        .iter()
        .map(|f| {
            let to = objects::next_generation(&f.path);
            whole_file_item(f, Action::Collect { path: f.path.clone(), file: f.id, to, dead: dead.clone() })
        })
        .collect();
    Ok(Job::new(TaskKind::GarbageCollection, area.to_string(), items, Declared::Files, deadline_ms))
}
