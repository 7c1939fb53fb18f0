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
use std::collections::BTreeMap;
use std::time::Duration;

/// A plain LRU per disk: `ways` chunks each.
#[derive(Debug)]
struct Lru {
    ways: usize,
    /// `disks × ways` entries of (chunk key, task that read it in, time of
    /// last use); `u64::MAX` is empty, with time 0. Times, not an order
    /// kept by moving entries: a hit or a miss writes one entry instead of
    /// shifting the line.
    lines: Vec<(u64, TaskKind, u64)>,
    clock: u64,
}

impl Lru {
    fn new(disks: u32, ways: usize) -> Lru {
        Lru { ways, lines: vec![(u64::MAX, TaskKind::Reconstruction, 0); disks as usize * ways], clock: 0 }
    }

    /// Looks `key` up on `disk` and makes it most recent; `Some(owner)` on
    /// a hit. A miss evicts the least recently used chunk (an empty entry
    /// first).
    fn access(&mut self, disk: DiskId, key: u64, task: TaskKind) -> Option<TaskKind> {
        if self.ways == 0 {
            return None;
        }
        self.clock += 1;
        let start = disk.0 as usize * self.ways;
        let line = &mut self.lines[start..start + self.ways];
        // (index, time of last use) of the least recent entry so far.
        let mut oldest = (0, u64::MAX);
        for (i, entry) in line.iter_mut().enumerate() {
            if entry.0 == key {
                entry.2 = self.clock;
                return Some(entry.1);
            }
            if entry.2 < oldest.1 {
                oldest = (i, entry.2);
            }
        }
        line[oldest.0] = (key, task, self.clock);
        None
    }
}

/// Progress of one job.
#[derive(Clone, Copy, Debug)]
struct Walk {
    /// Next set index (files, stripes) or member key to look at.
    cursor: u64,
    /// Sets still to read.
    left: u64,
    deadline: Timestamp,
}

pub struct Imperative {
    /// The paper's baseline: every declared byte from disk.
    pub recorder: Recorder,
    /// Deleted sets skipped, LRU hits free.
    pub skip_deleted: Recorder,
    lru: Lru,
    walks: BTreeMap<u32, Walk>,
    quantum: Duration,
    /// Scratch: the disks of the copies of the block being read.
    copy_disks: Vec<Option<DiskId>>,
    /// Scratch: the first live copy of each block of a file range.
    firsts: Vec<Option<(u8, DiskId)>>,
    /// Scratch: the members of one stripe set.
    members: Vec<Member>,
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
            members: Vec::new(),
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
                    for (b, first) in r.blocks().zip(&firsts) {
                        if let &Some((copy, disk)) = first {
                            self.read_chunk(job.task, ChunkRef { block: b, copy }, disk, block_bytes, gone);
                        }
                    }
                    self.firsts = firsts;
                    taken += 1;
                }
            }
            JobSets::Rebuilds { blocks, .. } => {
                let sets = blocks.len() as u64;
                while taken < quota && walk.cursor < sets {
                    let mut members = std::mem::take(&mut self.members);
                    members.clear();
                    job.sets.rebuild(model, walk.cursor as usize, &mut members);
                    walk.cursor += 1;
                    let gone = members.iter().all(|m| deleted.contains(m.block().0));
                    if gone {
                        self.skip_deleted.elided(job.task, members.len() as u64 * block_bytes);
                    }
                    for &m in &members {
                        self.read(world, job.task, m, gone);
                    }
                    self.members = members;
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

    /// Reads `member` of a set that was deleted (`gone`) or not.
    fn read(&mut self, world: &World, task: TaskKind, member: Member, gone: bool) {
        if let Some(info) = world.model.block_copies(member.block(), &mut self.copy_disks) {
            self.read_resolved(task, member, &info, gone);
        }
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
        if gone {
            return;
        }
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
