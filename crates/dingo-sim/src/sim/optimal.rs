//! Optimal mode, the lower bound: with no budget and no deadlines, every
//! distinct block any job needs over the run is read once. A block read
//! for "any copy" and as one exact copy costs one read; exact copies asked
//! for by scrubbing count once each.
//!
//! A job is settled when its window closes. Under the paper's rule
//! ([`OptimalRule::EachBlockOnce`], §6.2: it "knows all future
//! declarations" and ignores budgets and deadlines) every declared block
//! counts; under [`OptimalRule::ElideDeletedBeforeDeadline`] sets whose
//! blocks were all deleted by the deadline are elided too (any schedule
//! could have waited that long), a stricter bound in a world that churns.
//! A data-flexible job (rebalancing: any `n` of its candidates) takes its
//! candidates that someone reads anyway for free, counted against every
//! read of the whole run, and pays only for the rest. A rebuild set that
//! needs any `k` of its stripe's survivors (`--rebuild-any-k`) takes for
//! free the survivors read by jobs settled before it and reads the first
//! unread ones for the rest: greedy at its close, so it is not credited
//! with survivors that jobs settled later read (a bound slightly above
//! the true minimum for those sets).

use super::stats::Recorder;
use super::world::{Job, JobSets};
use crate::model::ClusterModel;
use dingo_types::{MemberBitmap, TaskKind};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Which deletions the bound may take credit for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OptimalRule {
    /// None: each distinct declared block is read once (the paper's definition).
    EachBlockOnce,
    /// Sets deleted before their deadline are not read.
    ElideDeletedBeforeDeadline,
}

#[derive(Serialize, Deserialize)]
pub struct Optimal {
    rule: OptimalRule,
    pub recorder: Recorder,
    /// Every read so far: blocks read for "any copy", and per copy number
    /// the blocks whose exact copy is read.
    reads: MemberBitmap,
    /// Flexible jobs not covered yet: (task, candidates still needed,
    /// candidates no read has covered yet).
    pending: Vec<(TaskKind, u64, MemberBitmap)>,
    /// Members of `pending`'s candidates, and what was left of them at the
    /// last settling ([`Self::settle_pending`]).
    pending_members: u64,
    pending_members_settled: u64,
    block_bytes: u64,
}

/// A reconstruction job's sets, listed once for both rules: the members
/// of each set (`members[ends[i - 1]..ends[i]]`, block ids) and every
/// block any of them names.
pub struct Rebuilt {
    members: Vec<u64>,
    ends: Vec<u32>,
    /// Members each set needs when it needs only some (`any_k`); empty
    /// when every set needs all its members.
    needed: Vec<u32>,
    blocks: RoaringTreemap,
}

impl Rebuilt {
    /// The sets of `job` if it is a reconstruction job.
    pub fn of(job: &Job, model: &ClusterModel) -> Option<Rebuilt> {
        let JobSets::Rebuilds { blocks: lost, any_k, .. } = &job.sets else { return None };
        let (mut members, mut ends, mut set) = (Vec::new(), Vec::with_capacity(lost.len()), Vec::new());
        let mut needed = Vec::new();
        for i in 0..lost.len() {
            set.clear();
            let k = job.sets.rebuild(model, i, &mut set);
            if *any_k {
                needed.push(k as u32);
            }
            members.extend(set.iter().map(|m| m.block().0));
            ends.push(u32::try_from(members.len()).expect("under 4G members in one reconstruction job"));
        }
        // A radix sort: a failed disk's stripes name millions of blocks.
        let mut sorted = members.clone();
        radsort::sort(&mut sorted);
        sorted.dedup();
        let blocks = RoaringTreemap::from_sorted_iter(sorted).expect("sorted and deduplicated");
        Some(Rebuilt { members, ends, needed, blocks })
    }
}

/// Pending candidates below this many are not worth settling early
/// (a few megabytes of bitmaps).
const SETTLE_FLOOR_MEMBERS: u64 = 1 << 20;

impl Optimal {
    pub fn new(rule: OptimalRule, recorder: Recorder, block_bytes: u64) -> Optimal {
        Optimal {
            rule,
            recorder,
            reads: MemberBitmap::new(),
            pending: Vec::new(),
            pending_members: 0,
            pending_members_settled: 0,
            block_bytes,
        }
    }

    /// Settles a job whose window closed. The blocks deleted by then (used
    /// only by [`OptimalRule::ElideDeletedBeforeDeadline`]) are `deleted`
    /// but those in `since`: the world may have moved on from the close
    /// already, and deletions only add up, so this needs no copy of the
    /// cluster's deleted blocks as they were.
    pub fn close(&mut self, job: &Job, model: &ClusterModel, deleted: &RoaringTreemap, since: &RoaringTreemap) {
        self.close_rebuilt(job, model, deleted, since, Rebuilt::of(job, model).as_ref());
    }

    /// [`Self::close`] with a reconstruction job's sets already listed
    /// (`rebuilt`, required for one): both rules settle the same jobs, so
    /// the survivors of a failed disk's stripes are listed once for both.
    pub fn close_rebuilt(
        &mut self,
        job: &Job,
        model: &ClusterModel,
        deleted: &RoaringTreemap,
        since: &RoaringTreemap,
        rebuilt: Option<&Rebuilt>,
    ) {
        let elide = self.rule == OptimalRule::ElideDeletedBeforeDeadline;
        let gone_by_deadline = |b: u64| elide && deleted.contains(b) && !since.contains(b);
        let bb = self.block_bytes;
        match &job.sets {
            JobSets::Files { files, .. } => {
                for r in (0..files.len()).map(|i| job.sets.file_range(model, i)) {
                    if gone_by_deadline(r.start.0) {
                        self.recorder.elided(job.task, u64::from(r.len) * bb);
                    } else {
                        self.reads.insert_any_range(r.start.0..r.end());
                        self.recorder.logical(job.task, u64::from(r.len) * bb);
                    }
                }
            }
            JobSets::Rebuilds { .. } => {
                let rebuilt = rebuilt.expect("a reconstruction job is settled with its sets listed");
                // Blocks deleted by the deadline, if this rule may elide them.
                let mut gone = RoaringTreemap::new();
                if elide {
                    gone = &rebuilt.blocks & deleted;
                    gone -= since;
                }
                if !rebuilt.needed.is_empty() {
                    self.close_any_k(job.task, rebuilt, &gone);
                    return;
                }
                // A set is elided when none of its members is read.
                let (mut read, mut elided) = (0, 0);
                let mut from = 0;
                for &end in &rebuilt.ends {
                    let set = &rebuilt.members[from..end as usize];
                    from = end as usize;
                    let live =
                        if gone.is_empty() { set.len() } else { set.iter().filter(|&&b| !gone.contains(b)).count() };
                    if live == 0 {
                        elided += set.len() as u64;
                    } else {
                        read += live as u64;
                    }
                }
                self.recorder.elided(job.task, elided * bb);
                self.recorder.logical(job.task, read * bb);
                if gone.is_empty() {
                    self.reads.insert_any(&rebuilt.blocks);
                } else {
                    self.reads.insert_any(&(&rebuilt.blocks - &gone));
                }
            }
            JobSets::Members(members) => {
                // Copied only if some member is to be elided.
                let mut gone_blocks = RoaringTreemap::new();
                if elide {
                    gone_blocks = members.blocks();
                    gone_blocks &= deleted;
                    gone_blocks -= since;
                }
                let live = if gone_blocks.is_empty() {
                    Cow::Borrowed(members)
                } else {
                    let mut live = members.clone();
                    live.remove_blocks(&gone_blocks);
                    Cow::Owned(live)
                };
                let gone = members.len() - live.len();
                match job.sets_needed {
                    None => {
                        self.recorder.elided(job.task, gone * bb);
                        self.recorder.logical(job.task, live.len() * bb);
                        self.reads.insert_any(live.any());
                        for c in 0..live.copy_slots() {
                            self.reads.insert_copies(c, live.copy(c).expect("below copy_slots"));
                        }
                    }
                    Some(needed) => {
                        let needed = needed.min(live.len());
                        self.recorder.logical(job.task, needed * bb);
                        let unread = self.unread(&live);
                        let free = live.len() - unread.len();
                        if free < needed {
                            self.pending_members += unread.len();
                            self.pending.push((job.task, needed - free, unread));
                            self.settle_pending(deleted, since);
                        }
                    }
                }
            }
        }
    }

    /// Settles the pending flexible jobs against the reads so far, once
    /// their candidates have doubled since the last time: candidates read
    /// since are dropped and count against what the job still needs, and
    /// a job they cover is dropped. Reads only add up, so settling early
    /// changes no figure; it keeps a month of unread candidates from piling
    /// up until the end (half a gigabyte at 100 PB), at an amortised cost
    /// of one pass over each candidate.
    ///
    /// Under [`OptimalRule::ElideDeletedBeforeDeadline`] the unread
    /// candidates deleted by now (`deleted` but `since`) are dropped too,
    /// without counting against what the job needs: every job still to
    /// settle has its deadline after their deletion, so none of them will
    /// read them, and they can never be free. (Under the paper's rule a
    /// later job may still read a deleted block it declared, so they stay.)
    fn settle_pending(&mut self, deleted: &RoaringTreemap, since: &RoaringTreemap) {
        if self.pending_members <= SETTLE_FLOOR_MEMBERS.max(2 * self.pending_members_settled) {
            return;
        }
        let dead = (self.rule == OptimalRule::ElideDeletedBeforeDeadline).then(|| deleted - since);
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain_mut(|(_, needed, candidates)| {
            let mut unread = self.unread(candidates);
            *needed = needed.saturating_sub(candidates.len() - unread.len());
            if let Some(dead) = &dead {
                unread.remove_blocks(dead);
            }
            *candidates = unread;
            *needed > 0
        });
        self.pending = pending;
        self.pending_members = self.pending.iter().map(|(_, _, candidates)| candidates.len()).sum();
        self.pending_members_settled = self.pending_members;
    }

    /// The members of `m` that no read so far covers.
    /// Settles rebuild sets each needing any `k` of their survivors: the
    /// survivors read already are free, the first unread live ones are
    /// read for the rest; a set whose survivors are all `gone` is elided.
    fn close_any_k(&mut self, task: TaskKind, rebuilt: &Rebuilt, gone: &RoaringTreemap) {
        let (mut read, mut elided) = (0, 0);
        let mut chosen = Vec::new();
        let mut from = 0;
        for (&end, &needed) in rebuilt.ends.iter().zip(&rebuilt.needed) {
            let set = &rebuilt.members[from..end as usize];
            from = end as usize;
            let live = || set.iter().copied().filter(|&b| !gone.contains(b));
            let live_count = live().count();
            if live_count == 0 {
                // Elided: the members it would have read.
                elided += u64::from(needed);
                continue;
            }
            let needed = (needed as usize).min(live_count);
            read += needed as u64;
            let free = live().filter(|&b| self.was_read(b)).count();
            chosen.extend(live().filter(|&b| !self.was_read(b)).take(needed.saturating_sub(free)));
        }
        self.recorder.elided(task, elided * self.block_bytes);
        self.recorder.logical(task, read * self.block_bytes);
        radsort::sort(&mut chosen);
        chosen.dedup();
        self.reads.insert_any(&RoaringTreemap::from_sorted_iter(chosen).expect("sorted and deduplicated"));
    }

    /// Whether block `b` has been read, for any copy or as an exact copy.
    fn was_read(&self, b: u64) -> bool {
        self.reads.any().contains(b)
            || (0..self.reads.copy_slots()).any(|c| self.reads.copy(c).is_some_and(|r| r.contains(b)))
    }

    fn unread(&self, m: &MemberBitmap) -> MemberBitmap {
        let mut out = MemberBitmap::new();
        let mut any = m.any() - self.reads.any();
        for c in 0..self.reads.copy_slots() {
            any -= self.reads.copy(c).expect("below copy_slots");
        }
        out.insert_any(&any);
        for c in 0..m.copy_slots() {
            let mut left = m.copy(c).expect("below copy_slots") - self.reads.any();
            if let Some(read) = self.reads.copy(c) {
                left -= read;
            }
            out.insert_copies(c, &left);
        }
        out
    }

    /// Disk bytes of the whole run: distinct reads, plus what flexible jobs
    /// could not get for free from them.
    pub fn disk_bytes(&self) -> u64 {
        let mut exact = RoaringTreemap::new();
        let mut reads = 0;
        for c in 0..self.reads.copy_slots() {
            let copy = self.reads.copy(c).expect("below copy_slots");
            reads += copy.len();
            exact |= copy;
        }
        reads += self.reads.any().difference_len(&exact);
        for (_, needed, unread) in &self.pending {
            let still_unread = self.unread(unread).len();
            let free = unread.len() - still_unread;
            reads += needed.saturating_sub(free);
        }
        reads * self.block_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;
    use dingo_types::{BlockId, ChunkRef, DiskModel, Member, Timestamp};

    fn job(task: TaskKind, sets: JobSets, needed: Option<u64>) -> Job {
        Job::for_test(task, sets, needed, Timestamp(0))
    }

    /// A small cluster whose first files are replicated: file `f` is
    /// blocks `30 f..30 f + 30`.
    fn model() -> ClusterModel {
        let spec = ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, ..ModelSpec::default() };
        let m = ClusterModel::new(spec).unwrap();
        assert_eq!(m.file_blocks(4).start, BlockId(120));
        m
    }

    /// The first `blocks` blocks of file `file`.
    fn file(file: u64, blocks: u32) -> JobSets {
        JobSets::Files { files: vec![file], max_blocks: blocks }
    }

    #[test]
    fn overlapping_reads_count_once_and_exact_copies_count_each() {
        let m = model();
        let mut opt = Optimal::new(OptimalRule::ElideDeletedBeforeDeadline, Recorder::new(1, DiskModel::HDD), 10);
        opt.close(
            &job(TaskKind::GarbageCollection, file(0, 4), None),
            &m,
            &RoaringTreemap::new(),
            &RoaringTreemap::new(),
        );
        opt.close(&job(TaskKind::FileScrubbing, file(0, 4), None), &m, &RoaringTreemap::new(), &RoaringTreemap::new());
        assert_eq!(opt.disk_bytes(), 40);
        let scrub: MemberBitmap =
            [0u8, 1].iter().map(|&copy| Member::Copy(ChunkRef { block: BlockId(1), copy })).collect();
        opt.close(
            &job(TaskKind::Scrubbing, JobSets::Members(scrub), None),
            &m,
            &RoaringTreemap::new(),
            &RoaringTreemap::new(),
        );
        assert_eq!(opt.disk_bytes(), 50, "copy 0 rides on the file read, copy 1 is one more read");
    }

    #[test]
    fn flexible_jobs_pay_only_for_candidates_nobody_reads_and_deleted_sets_are_elided() {
        let m = model();
        let mut opt = Optimal::new(OptimalRule::ElideDeletedBeforeDeadline, Recorder::new(1, DiskModel::HDD), 10);
        let candidates: MemberBitmap =
            (0..6u64).map(|b| Member::Copy(ChunkRef { block: BlockId(b), copy: 0 })).collect();
        opt.close(
            &job(TaskKind::Rebalancing, JobSets::Members(candidates), Some(3)),
            &m,
            &RoaringTreemap::new(),
            &RoaringTreemap::new(),
        );
        assert_eq!(opt.disk_bytes(), 30);
        // A later file read covers two candidates: only one more is needed.
        opt.close(&job(TaskKind::Fsck, file(0, 2), None), &m, &RoaringTreemap::new(), &RoaringTreemap::new());
        assert_eq!(opt.disk_bytes(), 20 + 10);
        let gone: RoaringTreemap = (120..124).collect();
        opt.close(&job(TaskKind::GarbageCollection, file(4, 4), None), &m, &gone, &RoaringTreemap::new());
        assert_eq!(opt.disk_bytes(), 30);
        assert_eq!(opt.recorder.tasks[TaskKind::GarbageCollection.index()].elided_bytes, 40);
    }

    /// Copy `copy` of blocks `0..blocks`.
    fn copies(copy: u8, blocks: u64) -> MemberBitmap {
        let mut b = MemberBitmap::new();
        b.insert_copy_range(copy, 0..blocks);
        b
    }

    /// A rebalancing job over copy `copy` of blocks `0..blocks` that needs `needed` of them.
    fn rebalancing(copy: u8, blocks: u64, needed: u64) -> Job {
        job(TaskKind::Rebalancing, JobSets::Members(copies(copy, blocks)), Some(needed))
    }

    #[test]
    fn pending_candidates_are_settled_as_later_reads_cover_them() {
        let m = model();
        let mut opt = Optimal::new(OptimalRule::EachBlockOnce, Recorder::new(1, DiskModel::HDD), 1);
        let none = RoaringTreemap::new();
        let big = 2 * SETTLE_FLOOR_MEMBERS;
        opt.close(&rebalancing(0, big, big / 2), &m, &none, &none);
        assert_eq!((opt.pending.len(), opt.pending_members_settled), (1, big), "nothing read yet");
        // A scrub reads every candidate of the first job after it closed.
        opt.close(&job(TaskKind::Scrubbing, JobSets::Members(copies(0, big)), None), &m, &none, &none);
        assert_eq!(opt.disk_bytes(), big);
        // The next job doubles the pending candidates: the first job, covered, goes.
        opt.close(&rebalancing(1, 2 * big, 5), &m, &none, &none);
        assert_eq!(opt.pending.len(), 1);
        assert_eq!(opt.pending[0].1, 5);
        assert_eq!(opt.pending_members, 2 * big);
        assert_eq!(opt.disk_bytes(), big + 5, "the scrub's reads plus the second job's five");
    }

    #[test]
    fn the_elide_rule_drops_pending_candidates_deleted_since_without_counting_them_read() {
        let m = model();
        let mut opt = Optimal::new(OptimalRule::ElideDeletedBeforeDeadline, Recorder::new(1, DiskModel::HDD), 1);
        let none = RoaringTreemap::new();
        let big = 2 * SETTLE_FLOOR_MEMBERS;
        opt.close(&rebalancing(0, big, big / 2), &m, &none, &none);
        assert_eq!(opt.pending_members_settled, big);
        // After the first job's deadline, half its candidates are deleted;
        // the next job (deadline after that) triples the pending members.
        let deleted: RoaringTreemap = (0..big / 2).collect();
        opt.close(&rebalancing(1, 2 * big, 5), &m, &deleted, &none);
        assert_eq!(opt.pending.len(), 2);
        assert_eq!(opt.pending[0].1, big / 2, "deleted candidates are not free");
        assert_eq!(opt.pending_members, big / 2 + (2 * big - big / 2), "the deleted ones are gone from both");
        assert_eq!(opt.disk_bytes(), big / 2 + 5);
        // Under the paper's rule a later job could still read them: kept.
        let mut paper = Optimal::new(OptimalRule::EachBlockOnce, Recorder::new(1, DiskModel::HDD), 1);
        paper.close(&rebalancing(0, big, big / 2), &m, &none, &none);
        paper.close(&rebalancing(1, 2 * big, 5), &m, &deleted, &none);
        assert_eq!(paper.pending_members, 3 * big);
        assert_eq!(paper.disk_bytes(), big / 2 + 5);
    }

    #[test]
    fn a_rebuild_from_any_k_survivors_rides_on_survivors_read_before() {
        use crate::model::StripeShape;
        use dingo_types::Topology;
        let mut m = model();
        let lost = m.chunks_on_disk(dingo_types::DiskId(3));
        m.fail_disk(dingo_types::DiskId(3));
        // One erasure-coded lost chunk: its stripe's n - 1 survivors, any k.
        let block =
            lost.iter().map(|c| c.block().0).find(|&b| m.redundancy_of(BlockId(b)).unwrap().data_per_stripe() > 1);
        let block = block.expect("the disk holds erasure-coded chunks");
        let sets = JobSets::Rebuilds { blocks: vec![block], members: 0, any_k: true };
        let mut survivors = Vec::new();
        let k = sets.rebuild(&m, 0, &mut survivors);
        assert_eq!(survivors.len() as u64, m.redundancy_of(BlockId(block)).unwrap().stripe_width() as u64 - 1);
        assert!(k < survivors.len());
        // Two survivors past the first k were read by a job settled before.
        let read_before: MemberBitmap = survivors[survivors.len() - 2..].iter().copied().collect();
        let mut opt = Optimal::new(OptimalRule::EachBlockOnce, Recorder::new(1, DiskModel::HDD), 1);
        let none = RoaringTreemap::new();
        opt.close(&job(TaskKind::FileScrubbing, JobSets::Members(read_before), None), &m, &none, &none);
        opt.close(&job(TaskKind::Reconstruction, sets, None), &m, &none, &none);
        assert_eq!(opt.disk_bytes(), k as u64, "two read before, k - 2 more");
        assert_eq!(opt.recorder.tasks[TaskKind::Reconstruction.index()].logical_bytes, k as u64);
    }

    #[test]
    fn reconstruction_counts_each_survivor_once_and_elides_only_sets_wholly_deleted() {
        use dingo_types::Topology;
        let mut m = model();
        let lost = m.chunks_on_disk(dingo_types::DiskId(3));
        m.fail_disk(dingo_types::DiskId(3));
        let blocks: Vec<u64> = lost.iter().map(|c| c.block().0).collect();
        let sets = JobSets::Rebuilds { blocks, members: 0, any_k: false };
        let mut listed: Vec<Vec<u64>> = Vec::new();
        for i in 0..sets.len() as usize {
            let mut members = Vec::new();
            sets.rebuild(&m, i, &mut members);
            listed.push(members.iter().map(|m| m.block().0).collect());
        }
        // Deleted by the deadline: every survivor of one set, one of
        // another's; and one of a third's deleted only after (`since`).
        let striped: Vec<usize> = (0..listed.len()).filter(|&i| listed[i].len() > 1).take(3).collect();
        assert_eq!(striped.len(), 3, "the disk holds erasure-coded chunks");
        listed.swap(0, striped[0]);
        listed.swap(1, striped[1]);
        listed.swap(2, striped[2]);
        let mut deleted: RoaringTreemap = listed[0].iter().copied().collect();
        deleted.insert(listed[1][0]);
        deleted.insert(listed[2][0]);
        let since: RoaringTreemap = [listed[2][0]].into_iter().collect();
        let job = job(TaskKind::Reconstruction, sets, None);
        let all: std::collections::BTreeSet<u64> = listed.iter().flatten().copied().collect();
        let members = listed.iter().map(Vec::len).sum::<usize>() as u64;
        for rule in [OptimalRule::EachBlockOnce, OptimalRule::ElideDeletedBeforeDeadline] {
            let mut opt = Optimal::new(rule, Recorder::new(1, DiskModel::HDD), 1);
            opt.close(&job, &m, &deleted, &since);
            let totals = &opt.recorder.tasks[TaskKind::Reconstruction.index()];
            if rule == OptimalRule::EachBlockOnce {
                assert_eq!(opt.disk_bytes(), all.len() as u64);
                assert_eq!((totals.logical_bytes, totals.elided_bytes), (members, 0));
            } else {
                let first = listed[0].len() as u64;
                assert_eq!(opt.disk_bytes(), all.len() as u64 - first - 1, "the gone blocks are not read");
                assert_eq!((totals.logical_bytes, totals.elided_bytes), (members - first - 1, first));
            }
        }
    }

    #[test]
    fn the_papers_rule_counts_deleted_blocks_too() {
        let m = model();
        let mut opt = Optimal::new(OptimalRule::EachBlockOnce, Recorder::new(1, DiskModel::HDD), 10);
        let gone: RoaringTreemap = (120..124).collect();
        opt.close(&job(TaskKind::GarbageCollection, file(4, 4), None), &m, &gone, &RoaringTreemap::new());
        assert_eq!(opt.disk_bytes(), 40);
        assert_eq!(opt.recorder.tasks[TaskKind::GarbageCollection.index()].elided_bytes, 0);
    }
}
