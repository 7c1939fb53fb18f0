//! Imperative mode, today's behaviour: each job reads its own sets in its
//! own order (ascending block id) at a steady pace that finishes at its
//! deadline. "Any copy" reads go to the first copy (the primary).
//!
//! One walk is accounted two ways:
//! - the paper's baseline ([`Imperative::recorder`]): one disk byte per
//!   declared logical byte, deleted or not, no cache (paper §6.2: its 64 %
//!   utilisation at 48 TB is the whole nominal demand, and Fig. 17 counts
//!   deleted bytes as DINGO's savings);
//! - the skip-deleted variant ([`Imperative::skip_deleted`]): a set whose
//!   blocks were deleted before the walk reached it is skipped (counted as
//!   avoided), and reads that hit a plain per-disk LRU of the configured
//!   size are free.
//!
//! Both pace the same walk: a deleted set uses its place in the quota. A
//! data-flexible job (any `n` of its candidates) skips deleted candidates
//! in both, since it still has to read `n`.

use super::stats::{Recorder, Source};
use super::world::{Job, JobSets, World};
use dingo_types::{BlockId, BlockInfo, BlockState, ChunkRef, DiskId, Member, TaskKind, Timestamp, Topology};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A plain LRU per disk: `ways` chunks each.
///
/// Each disk's line is `ways` entries of a chunk key and the task that read
/// it in, linked in recency order. Most accesses miss, and a miss compares
/// every key of the line, so the keys sit together (two cache lines for
/// 15 ways); the links make finding the least recent entry a lookup, where
/// comparing times of last use scanned the line a second time. Hand-written:
/// an LRU crate keeps one map for all keys, where this needs `disks` tiny
/// lines with a fixed eviction order among the empty entries.
#[derive(Debug, Serialize, Deserialize)]
struct Lru {
    ways: usize,
    /// `disks × ways` chunk keys; `u64::MAX` is empty.
    keys: Vec<u64>,
    owners: Vec<TaskKind>,
    /// Per entry, the next more recent and the next less recent entry of
    /// its line (indexes within the line; `ways` is at most 4096).
    newer: Vec<u16>,
    older: Vec<u16>,
    /// Per line, its most and its least recent entry.
    newest: Vec<u16>,
    oldest: Vec<u16>,
}

impl Lru {
    fn new(disks: u32, ways: usize) -> Lru {
        assert!(ways <= usize::from(u16::MAX), "an LRU line of {ways} ways");
        let entries = disks as usize * ways;
        // Empty entries are evicted first, the lowest index first: the line
        // starts ordered from entry `ways - 1` (newest) to entry 0 (oldest).
        let way = |i: usize| (i % ways.max(1)) as u16;
        let last = ways.saturating_sub(1) as u16;
        Lru {
            ways,
            keys: vec![u64::MAX; entries],
            owners: vec![TaskKind::Reconstruction; entries],
            newer: (0..entries).map(|i| way(i).saturating_add(1).min(last)).collect(),
            older: (0..entries).map(|i| way(i).saturating_sub(1)).collect(),
            newest: vec![last; disks as usize],
            oldest: vec![0; disks as usize],
        }
    }

    /// Looks `key` up on `disk` and makes it most recent; `Some(owner)` on
    /// a hit. A miss evicts the least recently used chunk (an empty entry
    /// first).
    fn access(&mut self, disk: DiskId, key: u64, task: TaskKind) -> Option<TaskKind> {
        if self.ways == 0 {
            return None;
        }
        let line = disk.0 as usize;
        let start = line * self.ways;
        let hit = self.keys[start..start + self.ways].iter().position(|&k| k == key);
        let way = match hit {
            Some(way) => way,
            None => {
                let way = usize::from(self.oldest[line]);
                self.keys[start + way] = key;
                self.owners[start + way] = task;
                way
            }
        };
        self.make_newest(line, way as u16);
        hit.map(|way| self.owners[start + way])
    }

    /// Moves entry `way` of line `line` to the front of its recency order.
    fn make_newest(&mut self, line: usize, way: u16) {
        let newest = self.newest[line];
        if newest == way {
            return;
        }
        let start = line * self.ways;
        let at = |w: u16| start + usize::from(w);
        // Unlink: `way` has a newer entry, since it is not the newest.
        let newer = self.newer[at(way)];
        if self.oldest[line] == way {
            self.oldest[line] = newer;
        } else {
            let older = self.older[at(way)];
            self.newer[at(older)] = newer;
            self.older[at(newer)] = older;
        }
        // Relink in front.
        self.older[at(way)] = newest;
        self.newer[at(newest)] = way;
        self.newest[line] = way;
    }
}

/// Progress of one job.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Walk {
    /// Next set index (files, stripes) or member key to look at.
    cursor: u64,
    /// Sets still to read.
    left: u64,
    deadline: Timestamp,
}

#[derive(Serialize, Deserialize)]
pub struct Imperative {
    /// The paper's baseline: every declared byte from disk.
    pub recorder: Recorder,
    /// Deleted sets skipped, LRU hits free.
    pub skip_deleted: Recorder,
    lru: Lru,
    walks: BTreeMap<u32, Walk>,
    quantum: Duration,
    /// Scratch buffers, refilled for each read (not part of a checkpoint).
    /// The disks of the copies of the block being read.
    #[serde(skip)]
    copy_disks: Vec<Option<DiskId>>,
    /// Scratch: the first live copy of each block of a file range.
    #[serde(skip)]
    firsts: Vec<Option<(u8, DiskId)>>,
    /// Scratch: the reads of one stripe set.
    #[serde(skip)]
    survivor_reads: Vec<(ChunkRef, DiskId)>,
}

impl Imperative {
    pub fn new(disks: u32, lru_ways: usize, quantum: Duration, recorder: Recorder) -> Imperative {
        Imperative {
            skip_deleted: recorder.clone(),
            recorder,
            lru: Lru::new(disks, lru_ways),
            walks: BTreeMap::new(),
            quantum,
            copy_disks: Vec::new(),
            firsts: Vec::new(),
            survivor_reads: Vec::new(),
        }
    }

    pub fn start(&mut self, job: &Job) {
        self.walks.insert(job.id, Walk { cursor: 0, left: job.sets_to_read(), deadline: job.deadline });
    }

    /// Every job reads its share of the quantum starting at `now`.
    pub fn run_quantum(&mut self, world: &World, now: Timestamp) {
        let quantum_ms = self.quantum.as_millis().max(1) as u64;
        let ids: Vec<u32> = self.walks.keys().copied().collect();
        for id in ids {
            let mut walk = self.walks[&id];
            let quanta_left = walk.deadline.0.saturating_sub(now.0).div_ceil(quantum_ms).max(1);
            let quota = walk.left.div_ceil(quanta_left);
            let job = world.job(id);
            let taken = self.read_sets(world, job, &mut walk, quota);
            walk.left -= taken;
            if walk.left == 0 || taken < quota {
                // Done, or nothing readable is left (everything else was deleted).
                self.walks.remove(&id);
            } else {
                self.walks.insert(id, walk);
            }
        }
    }

    /// Reads up to `quota` sets of `job` from the cursor on; returns how many.
    fn read_sets(&mut self, world: &World, job: &Job, walk: &mut Walk, quota: u64) -> u64 {
        let model = &world.model;
        let deleted = model.deleted();
        let block_bytes = model.spec().block_bytes;
        let mut taken = 0;
        match &job.sets {
            JobSets::Files { files, .. } => {
                while taken < quota && (walk.cursor as usize) < files.len() {
                    let r = job.sets.file_range(model, walk.cursor as usize);
                    walk.cursor += 1;
                    let gone = deleted.contains(r.start.0);
                    if gone {
                        self.skip_deleted.elided(job.task, u64::from(r.len) * block_bytes);
                    }
                    // "Any copy": the first live copy, as `read_resolved` picks it.
                    let mut firsts = std::mem::take(&mut self.firsts);
                    model.first_live_copies(r.start.0..r.end(), &mut firsts);
                    // The paper's accounting, the range as one run.
                    let disks = firsts.iter().flatten().map(|&(_, disk)| (disk, block_bytes));
                    self.recorder.disk_reads(job.task, disks);
                    if !gone {
                        for (b, first) in r.blocks().zip(&firsts) {
                            if let &Some((copy, disk)) = first {
                                self.cached_read(job.task, ChunkRef { block: b, copy }, disk, block_bytes);
                            }
                        }
                    }
                    self.firsts = firsts;
                    taken += 1;
                }
            }
            JobSets::Rebuilds { blocks, .. } => {
                let sets = blocks.len() as u64;
                while taken < quota && walk.cursor < sets {
                    let mut reads = std::mem::take(&mut self.survivor_reads);
                    reads.clear();
                    job.sets.rebuild_reads(model, walk.cursor as usize, &mut reads);
                    walk.cursor += 1;
                    let gone = reads.iter().all(|(chunk, _)| deleted.contains(chunk.block.0));
                    if gone {
                        self.skip_deleted.elided(job.task, reads.len() as u64 * block_bytes);
                    }
                    // The paper's accounting, the stripe's reads as one run.
                    self.recorder.disk_reads(job.task, reads.iter().map(|&(_, disk)| (disk, block_bytes)));
                    if !gone {
                        for &(chunk, disk) in &reads {
                            self.cached_read(job.task, chunk, disk, block_bytes);
                        }
                    }
                    self.survivor_reads = reads;
                    taken += 1;
                }
            }
            JobSets::Members(members) => {
                // Walk order: "any copy" members, then copy 0, 1, ...; the
                // cursor is (slot << 56) | block, slot 0 meaning "any copy".
                let slots = u64::from(members.copy_slots()) + 1;
                while taken < quota && (walk.cursor >> 56) < slots {
                    let slot = walk.cursor >> 56;
                    let bitmap = if slot == 0 { Some(members.any()) } else { members.copy(slot as u8 - 1) };
                    let start = walk.cursor & dingo_types::MAX_BLOCK_ID;
                    walk.cursor = (slot + 1) << 56;
                    let Some(bitmap) = bitmap else { continue };
                    let mut it = bitmap.iter();
                    it.advance_to(start);
                    for b in it {
                        // The block's state, not a search of the deleted set:
                        // a whole-cluster scrub reads millions a quantum.
                        let info = model.block_copies(BlockId(b), &mut self.copy_disks);
                        let gone = info.is_some_and(|info| info.state == BlockState::Deleted);
                        if gone {
                            if job.sets_needed.is_some() {
                                continue;
                            }
                            self.skip_deleted.elided(job.task, block_bytes);
                        }
                        let member = match slot {
                            0 => Member::Any(BlockId(b)),
                            s => Member::Copy(ChunkRef { block: BlockId(b), copy: s as u8 - 1 }),
                        };
                        if let Some(info) = info {
                            self.read_resolved(job.task, member, &info, gone);
                        }
                        taken += 1;
                        if taken == quota {
                            walk.cursor = (slot << 56) | (b + 1);
                            break;
                        }
                    }
                }
            }
        }
        taken
    }

    /// Reads `member`, whose block and copies' disks were just resolved
    /// into `info` and `self.copy_disks`: always from disk in the paper's
    /// accounting; in the skip-deleted one, not at all if its set is
    /// `gone` (already counted as avoided), else through the LRU.
    fn read_resolved(&mut self, task: TaskKind, member: Member, info: &BlockInfo, gone: bool) {
        let (chunk, disk) = match member {
            Member::Copy(c) => match self.copy_disks.get(usize::from(c.copy)).copied().flatten() {
                Some(disk) => (c, disk),
                None => return,
            },
            Member::Any(block) => {
                let Some((copy, disk)) =
                    (0..).zip(&self.copy_disks).find_map(|(copy, disk)| disk.map(|disk| (copy, disk)))
                else {
                    return;
                };
                (ChunkRef { block, copy }, disk)
            }
        };
        self.read_chunk(task, chunk, disk, info.size, gone);
    }

    /// Reads `chunk` from `disk`, as [`Self::read_resolved`] describes.
    fn read_chunk(&mut self, task: TaskKind, chunk: ChunkRef, disk: DiskId, bytes: u64, gone: bool) {
        self.recorder.read(task, bytes, Source::Disk(disk));
        if !gone {
            self.cached_read(task, chunk, disk, bytes);
        }
    }

    /// The skip-deleted accounting's read of `chunk` (of a set not deleted)
    /// from `disk`: free if the disk's LRU holds it.
    fn cached_read(&mut self, task: TaskKind, chunk: ChunkRef, disk: DiskId, bytes: u64) {
        let source = match self.lru.access(disk, Member::Copy(chunk).key(), task) {
            Some(owner) => Source::Cache(owner),
            None => Source::Disk(disk),
        };
        self.skip_deleted.read(task, bytes, source);
    }

    /// Whether jobs are still reading.
    pub fn busy(&self) -> bool {
        !self.walks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lru_keeps_the_most_recent_chunks_per_disk() {
        let mut lru = Lru::new(2, 2);
        let (d0, d1) = (DiskId(0), DiskId(1));
        assert_eq!(lru.access(d0, 1, TaskKind::Scrubbing), None);
        assert_eq!(lru.access(d0, 2, TaskKind::Fsck), None);
        assert_eq!(lru.access(d0, 1, TaskKind::Fsck), Some(TaskKind::Scrubbing));
        assert_eq!(lru.access(d0, 3, TaskKind::Fsck), None, "evicts 2, the least recent");
        assert_eq!(lru.access(d0, 2, TaskKind::Fsck), None);
        assert_eq!(lru.access(d1, 1, TaskKind::Fsck), None, "caches are per disk");
        assert_eq!(Lru::new(1, 0).access(d0, 1, TaskKind::Fsck), None);
    }

    #[test]
    fn the_lru_answers_as_a_line_kept_in_recency_order() {
        // The reference: each line ordered most recent first.
        let (disks, ways) = (3, 5);
        let mut reference: Vec<Vec<(u64, TaskKind)>> = vec![Vec::new(); disks];
        let mut lru = Lru::new(disks as u32, ways);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (disk, key) = ((state % disks as u64) as usize, (state >> 8) % 12);
            let task = TaskKind::ALL[step % TaskKind::COUNT];
            let line = &mut reference[disk];
            let expected = match line.iter().position(|&(k, _)| k == key) {
                Some(i) => {
                    let hit = line.remove(i);
                    line.insert(0, hit);
                    Some(hit.1)
                }
                None => {
                    line.insert(0, (key, task));
                    line.truncate(ways);
                    None
                }
            };
            assert_eq!(lru.access(DiskId(disk as u32), key, task), expected, "step {step}");
        }
    }
}
