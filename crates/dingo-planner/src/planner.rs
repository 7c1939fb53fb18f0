//! The planner facade: declarations in, one plan per quantum out.

use crate::accounting::QuantumReport;
use crate::config::{Budget, PlannerConfig};
use crate::declaration::{DeclState, DeclarationStatus};
use crate::dispatcher::{Dispatch, dispatch};
use crate::elision::elide_gone;
use crate::error::{CancelError, DeclareError, RestoreError};
use crate::scheduler::{Schedule, schedule_quantum};
use crate::sets::Sets;
use crate::validate::{validate, validate_owned};
use dingo_types::{Declaration, DeclarationId, MemberBitmap, ReadSets, Timestamp, Topology};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// Everything decided for one quantum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantumPlan {
    pub schedule: Schedule,
    pub dispatch: Dispatch,
    pub report: QuantumReport,
    /// Declarations that finished (everything needed delivered or elided)
    /// in this quantum; they are no longer outstanding.
    pub finished: Vec<DeclarationStatus>,
}

/// A declaration checked and stored by [`Planner::prepare_owned`], not yet
/// outstanding.
#[derive(Debug)]
pub struct PreparedDeclaration(DeclState);

/// The IO Planner core. Holds outstanding declarations; never reads a clock
/// or the cluster on its own — time, budget and topology are arguments.
/// Serialisable for the simulator's checkpoints: the outstanding
/// declarations as they stand, so a resumed run plans what this one would.
#[derive(Debug, Serialize, Deserialize)]
pub struct Planner {
    config: PlannerConfig,
    next_id: u64,
    outstanding: BTreeMap<DeclarationId, DeclState>,
    /// Elisions noticed between quanta, reported with the next quantum.
    carried: QuantumReport,
    /// A schedule handed back by [`Self::recycle`], refilled next quantum
    /// (a buffer: not part of a checkpoint).
    #[serde(skip)]
    spare: Option<Schedule>,
    /// Declarations not to schedule (see [`Self::set_paused`]).
    paused: BTreeSet<DeclarationId>,
    /// The free pass's per-worker schedules, refilled every quantum (buffers
    /// too).
    #[serde(skip)]
    worker_spares: Vec<Schedule>,
}

impl Planner {
    pub fn new(config: PlannerConfig) -> Self {
        Planner {
            config,
            next_id: 1,
            outstanding: BTreeMap::new(),
            carried: QuantumReport::default(),
            spare: None,
            paused: BTreeSet::new(),
            worker_spares: Vec::new(),
        }
    }

    pub fn config(&self) -> &PlannerConfig {
        &self.config
    }

    /// Validates and stores a declaration. On error nothing changes.
    pub fn declare(
        &mut self,
        topo: &impl Topology,
        now: Timestamp,
        decl: &Declaration,
    ) -> Result<DeclarationId, DeclareError> {
        let sets = validate(decl, topo, now, &self.config.limits)?;
        let id = DeclarationId(self.next_id);
        self.next_id += 1;
        self.outstanding.insert(id, DeclState::new(id, decl, sets, topo));
        Ok(id)
    }

    /// [`Self::declare`] of a declaration the caller no longer needs: a
    /// member bitmap ([`ReadSets::EachMember`]) becomes the planner's own
    /// store instead of being copied, which halves the memory a large
    /// declaration takes while it is declared. Same checks, same result.
    pub fn declare_owned(
        &mut self,
        topo: &impl Topology,
        now: Timestamp,
        decl: Declaration,
    ) -> Result<DeclarationId, DeclareError> {
        let prepared = self.prepare_owned(topo, now, decl)?;
        Ok(self.add_prepared(prepared))
    }

    /// The work of [`Self::declare_owned`] that changes nothing: checks
    /// `decl` and builds its set store. It reads only the configuration,
    /// so a caller with many declarations may prepare them on several
    /// threads, then add them with [`Self::add_prepared`] in the order it
    /// would have declared them: the same ids and the same planner.
    pub fn prepare_owned(
        &self,
        topo: &impl Topology,
        now: Timestamp,
        decl: Declaration,
    ) -> Result<PreparedDeclaration, DeclareError> {
        let (sets, decl) = validate_owned(decl, topo, now, &self.config.limits)?;
        // The id is given when the declaration is added.
        let state = DeclState::new(DeclarationId(0), &decl, sets, topo);
        Ok(PreparedDeclaration(state))
    }

    /// Makes a prepared declaration outstanding under the next id.
    pub fn add_prepared(&mut self, prepared: PreparedDeclaration) -> DeclarationId {
        let id = DeclarationId(self.next_id);
        self.next_id += 1;
        let mut state = prepared.0;
        state.id = id;
        self.outstanding.insert(id, state);
        id
    }

    /// Re-creates a declaration accepted earlier, under its old id — how a
    /// service rebuilds the core from its durable state after a restart.
    /// The sets whose keys are in `delivered` count as delivered already;
    /// `missed_deadline` carries over a miss that was already counted.
    ///
    /// Nothing is validated against `topo` or the clock: the declaration
    /// was valid when it was made, blocks deleted since are elided by
    /// [`Self::note_deleted`], and a passed deadline is counted as missed
    /// by the next quantum unless `missed_deadline` says it already was.
    /// `ChunksOnDisk` and `AllChunks` would resolve against `topo` now, so a
    /// caller that wants the original snapshot restores its resolved
    /// `EachMember` form. Ids handed out later are above `id`. On error
    /// nothing changes.
    pub fn restore(
        &mut self,
        topo: &impl Topology,
        id: DeclarationId,
        decl: &Declaration,
        delivered: &[u64],
        missed_deadline: bool,
    ) -> Result<(), RestoreError> {
        if self.outstanding.contains_key(&id) {
            return Err(RestoreError::AlreadyOutstanding(id));
        }
        if let ReadSets::ChunksOnDisk(disk) = decl.read_sets
            && disk.0 >= topo.disk_count()
        {
            return Err(RestoreError::UnknownDisk(disk));
        }
        let sets = Sets::build(&decl.read_sets, topo);
        let mut d = DeclState::new(id, decl, sets, topo);
        let mut members = Vec::new();
        for &key in delivered {
            if !d.restore_delivered(key, topo, &mut members) {
                return Err(RestoreError::UnknownSet { id, key });
            }
        }
        d.missed = missed_deadline;
        self.outstanding.insert(id, d);
        self.advance_ids(id);
        Ok(())
    }

    /// Makes every id handed out from now on greater than `past` (ids of
    /// finished or cancelled declarations must not be reused).
    pub fn advance_ids(&mut self, past: DeclarationId) {
        self.next_id = self.next_id.max(past.0.saturating_add(1));
    }

    /// Drops an outstanding declaration; nothing more is delivered for it.
    pub fn cancel(&mut self, id: DeclarationId) -> Result<DeclarationStatus, CancelError> {
        self.outstanding.remove(&id).map(|d| d.status()).ok_or(CancelError::UnknownDeclaration(id))
    }

    /// Appends to `out` every member of the sets of `id` not yet delivered
    /// nor elided (a set naming a block twice gives it twice), but those of
    /// sets needing only some of their members (none of which every way of
    /// reading the set reads); `false` if `id` is not outstanding. Walks the whole declaration: for the
    /// read lower bound at a restart or a cancel, not for every quantum.
    pub fn undelivered_members(&self, id: DeclarationId, out: &mut Vec<dingo_types::Member>) -> bool {
        let Some(d) = self.outstanding.get(&id) else { return false };
        let mut keys = Vec::new();
        let mut from = 0;
        loop {
            keys.clear();
            d.sets.next_keys(from, 4096, &mut keys);
            let Some(&last) = keys.last() else { return true };
            for &key in keys.iter().filter(|&&key| d.sets.needed(key).is_none()) {
                d.sets.members(key, out);
            }
            from = last + 1;
        }
    }

    pub fn status(&self, id: DeclarationId) -> Option<DeclarationStatus> {
        self.outstanding.get(&id).map(DeclState::status)
    }

    /// Outstanding declarations, by id.
    pub fn outstanding(&self) -> impl Iterator<Item = DeclarationStatus> + '_ {
        self.outstanding.values().map(DeclState::status)
    }

    /// Elides, right away, every outstanding set whose blocks are all
    /// deleted now that `blocks` were deleted. The topology must already
    /// show them deleted. Counted in the next quantum's report.
    pub fn note_deleted(&mut self, topo: &(impl Topology + Sync), blocks: &RoaringTreemap) {
        self.elide(topo, blocks, &MemberBitmap::new());
    }

    /// Anticipatory elision: a task announces `members` it is about to
    /// delete (whole blocks as [`dingo_types::Member::Any`], single copies
    /// as exact-copy members), and every outstanding set whose members are
    /// all deleted or announced is elided right away, not read (see
    /// [`crate::elision`] for what covers what). Returns the sets elided,
    /// also counted in the next quantum's report. The announcement is not
    /// kept: sets declared later are checked against the topology, which
    /// shows the deletion once it is made. Announce only what will be
    /// deleted, after the announcing task has read it.
    pub fn note_pending_deletions(&mut self, topo: &(impl Topology + Sync), members: &MemberBitmap) -> u64 {
        self.elide(topo, &members.blocks(), members)
    }

    /// Elides every outstanding set touching `blocks` whose members are all
    /// deleted or in `announced`; returns how many.
    ///
    /// Declarations are independent here, so they are served by
    /// `free_pass_threads` workers at once (drawn one at a time); the
    /// counts are sums, the same in any order.
    fn elide(&mut self, topo: &(impl Topology + Sync), blocks: &RoaringTreemap, announced: &MemberBitmap) -> u64 {
        if blocks.is_empty() {
            return 0;
        }
        let threads = (self.config.free_pass_threads.max(1) as usize).min(self.outstanding.len().max(1));
        let next = std::sync::Mutex::new(self.outstanding.values_mut());
        let worker = || {
            let (mut keys, mut members) = (Vec::new(), Vec::new());
            let mut elided = Vec::new();
            loop {
                let drawn = next.lock().expect("an eliding worker panicked").next();
                let Some(d) = drawn else { break };
                let (sets, bytes) = elide_gone(d, topo, blocks, announced, &mut keys, &mut members);
                elided.push((d.task, sets, bytes));
            }
            elided
        };
        let elided: Vec<_> = std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads).map(|_| s.spawn(worker)).collect();
            let mut all = worker();
            for h in helpers {
                all.extend(h.join().expect("an eliding worker panicked"));
            }
            all
        });
        let mut total = 0;
        for (task, sets, bytes) in elided {
            let stats = self.carried.task_mut(task);
            stats.sets_elided += sets;
            stats.elided_bytes += bytes;
            total += sets;
        }
        total
    }

    /// Replaces the set of paused declarations: quanta from now on schedule
    /// nothing for them, not even reads that would be free, because nobody
    /// would receive the callback (the planner service pauses the
    /// declarations of a client with no open stream). A paused declaration
    /// keeps its deadline: it still misses it, and once resumed its quota is
    /// the rate its remaining sets need in its remaining time, so the pause is
    /// made up for, or reported as overloaded. Unknown ids are ignored.
    pub fn set_paused(&mut self, paused: BTreeSet<DeclarationId>) {
        self.paused = paused;
    }

    /// Schedules the quantum starting at `now` within `budget`. Sets it
    /// schedules count as delivered.
    pub fn schedule(
        &mut self,
        topo: &(impl Topology + Sync),
        now: Timestamp,
        budget: &Budget,
    ) -> (Schedule, QuantumReport) {
        let mut report = std::mem::take(&mut self.carried);
        // A declaration misses its deadline the first time a quantum starts
        // at or after it with work left; late ones go first from then on.
        for d in self.outstanding.values_mut() {
            if !d.missed && now >= d.deadline && !d.is_done() {
                d.missed = true;
                report.task_mut(d.task).deadline_misses += 1;
            }
        }
        let quantum = self.config.quantum;
        let paused = &self.paused;
        let mut order: Vec<&mut DeclState> =
            self.outstanding.values_mut().filter(|d| !d.is_done() && !paused.contains(&d.id)).collect();
        order.sort_by_cached_key(|d| {
            let rate_bytes = d.quota(now, quantum).saturating_mul(d.set_bytes_estimate);
            (Reverse(d.missed), Reverse(rate_bytes), d.deadline, d.id)
        });
        let buffers = self.spare.take().unwrap_or_default();
        let (schedule, scheduled) =
            schedule_quantum(&mut order, topo, now, &self.config, budget, buffers, &mut self.worker_spares);
        merge_reports(&mut report, &scheduled);
        for d in self.outstanding.values() {
            let stats = report.task_mut(d.task);
            stats.queued_sets += d.needed_left();
            stats.outstanding_declarations += u64::from(!d.is_done());
        }
        (schedule, report)
    }

    /// Hands back a schedule the caller is done with, so the next quantum
    /// refills its vectors: a large quantum's reads take hundreds of
    /// megabytes, and fresh ones cost a page fault per 4 KiB written.
    ///
    /// Only what this schedule used is kept. Capacity beyond it was written
    /// by some larger quantum before and stays resident while it is held,
    /// so a run's largest quantum (gigabytes at 1 EB) would otherwise keep
    /// its size for the rest of the run. Shrinking a large vector returns
    /// its tail pages without a copy (the allocator remaps it).
    pub fn recycle(&mut self, mut schedule: Schedule) {
        schedule.reads.shrink_to(schedule.reads.len());
        schedule.sets.shrink_to(schedule.sets.len());
        schedule.decls.shrink_to(schedule.decls.len());
        self.spare = Some(schedule);
    }

    /// Gives back the free pass's per-worker schedules, kept from quantum
    /// to quantum otherwise. Their reads are copied into the quantum's
    /// schedule at the join, so when a quantum's schedule takes gigabytes
    /// they hold a second copy of the free pass's share of it while the
    /// schedule is replayed; a caller short of memory drops them and the
    /// next free pass allocates fresh ones (the same schedule either way).
    pub fn release_worker_buffers(&mut self) {
        self.worker_spares = Vec::new();
    }

    /// Cuts a schedule into dispatch groups with their cache directives.
    pub fn dispatch(&self, schedule: &Schedule) -> Dispatch {
        dispatch(schedule, &self.config)
    }

    /// Schedules and dispatches one quantum, and retires finished
    /// declarations.
    pub fn plan_quantum(&mut self, topo: &(impl Topology + Sync), now: Timestamp, budget: &Budget) -> QuantumPlan {
        let (schedule, report) = self.schedule(topo, now, budget);
        let dispatch = self.dispatch(&schedule);
        let finished = self.retire_finished();
        QuantumPlan { schedule, dispatch, report, finished }
    }

    /// Removes and returns declarations with nothing left to deliver.
    pub fn retire_finished(&mut self) -> Vec<DeclarationStatus> {
        let done: Vec<DeclarationId> = self.outstanding.values().filter(|d| d.is_done()).map(|d| d.id).collect();
        done.into_iter().filter_map(|id| self.outstanding.remove(&id)).map(|d| d.status()).collect()
    }

    /// Approximate memory held by outstanding declarations.
    pub fn memory_bytes(&self) -> u64 {
        self.outstanding.values().map(|d| d.sets.heap_bytes()).sum()
    }
}

fn merge_reports(into: &mut QuantumReport, from: &QuantumReport) {
    for (mine, theirs) in into.tasks.iter_mut().zip(&from.tasks) {
        mine.add(theirs);
    }
    into.max_disk_head_time_us = into.max_disk_head_time_us.max(from.max_disk_head_time_us);
    into.total_head_time_us += from.total_head_time_us;
    into.budget_exhausted |= from.budget_exhausted;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DiskBudget, LeftoverPolicy};
    use crate::table::TableTopology;
    use dingo_types::{
        BlockId, BlockProblem, BlockRange, BlockSet, BlockState, ChunkRef, DiskId, DiskModel, GroupId, Member,
        MemberBitmap, ReadSets, TaskKind,
    };
    use std::time::Duration;

    const MB: u64 = 1_000_000;
    const HOUR: u64 = 3_600_000;

    /// Six disks; blocks 0..20 replicated 3 ways on disks (b % 6, +1, +2);
    /// blocks 100..106 one RS 4+2 stripe (group 100) on disks 0..6.
    fn cluster() -> TableTopology {
        let mut t = TableTopology::new(6, DiskModel::HDD);
        for b in 0..20u64 {
            let disks: Vec<DiskId> = (0..3).map(|i| DiskId(((b + i) % 6) as u32)).collect();
            t.insert(BlockId(b), 10 * MB, GroupId(b), &disks);
        }
        for i in 0..6u64 {
            t.insert(BlockId(100 + i), 10 * MB, GroupId(100), &[DiskId(i as u32)]);
        }
        t
    }

    fn planner() -> Planner {
        Planner::new(PlannerConfig { quantum: Duration::from_millis(HOUR), ..PlannerConfig::default() })
    }

    fn decl(task: TaskKind, read_sets: ReadSets, deadline_quanta: u64) -> Declaration {
        Declaration {
            task,
            read_sets,
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(deadline_quanta * HOUR),
        }
    }

    fn singles(blocks: impl IntoIterator<Item = u64>) -> ReadSets {
        ReadSets::Sets(blocks.into_iter().map(|b| BlockSet::any_of([BlockId(b)])).collect())
    }

    #[test]
    fn bad_declarations_are_rejected_and_change_nothing() {
        let mut topo = cluster();
        topo.insert(BlockId(50), MB, GroupId(50), &[DiskId(0)]);
        topo.set_state(BlockId(50), BlockState::Open);
        let mut p = planner();
        let now = Timestamp(HOUR);
        let cases: Vec<(Declaration, DeclareError)> = vec![
            (decl(TaskKind::Fsck, ReadSets::Sets(vec![]), 5), DeclareError::NoSets),
            (decl(TaskKind::Fsck, ReadSets::Sets(vec![BlockSet::new(vec![])]), 5), DeclareError::EmptySet { set: 0 }),
            (
                decl(TaskKind::Fsck, ReadSets::Sets(vec![BlockSet::choose(vec![Member::Any(BlockId(1))], 2)]), 5),
                DeclareError::BadSetNeeded { set: 0, needed: 2, members: 1 },
            ),
            (
                decl(TaskKind::Fsck, ReadSets::Sets(vec![BlockSet::choose(vec![Member::Any(BlockId(1))], 0)]), 5),
                DeclareError::BadSetNeeded { set: 0, needed: 0, members: 1 },
            ),
            (
                decl(TaskKind::Fsck, singles([1]), 1),
                DeclareError::DeadlineNotInFuture { deadline: Timestamp(HOUR), now },
            ),
            (
                decl(TaskKind::Fsck, singles([999]), 5),
                DeclareError::BadBlock { set: 0, problem: BlockProblem::Unknown(BlockId(999)) },
            ),
            (
                decl(TaskKind::Fsck, singles([1, 50]), 5),
                DeclareError::BadBlock { set: 1, problem: BlockProblem::Unsealed(BlockId(50)) },
            ),
            (
                decl(TaskKind::Fsck, ReadSets::Sets(vec![BlockSet::any_of([BlockId(1), BlockId(1)])]), 5),
                DeclareError::DuplicateMember { set: 0, member: Member::Any(BlockId(1)) },
            ),
            (
                decl(
                    TaskKind::Fsck,
                    ReadSets::Ranges(vec![
                        BlockRange { start: BlockId(0), len: 4 },
                        BlockRange { start: BlockId(2), len: 4 },
                    ]),
                    5,
                ),
                DeclareError::OverlappingRanges { index: 1 },
            ),
            (decl(TaskKind::Scrubbing, ReadSets::ChunksOnDisk(DiskId(6)), 5), DeclareError::UnknownDisk(DiskId(6))),
            (
                Declaration { sets_needed: Some(0), ..decl(TaskKind::Rebalancing, singles([1]), 5) },
                DeclareError::ZeroSetsNeeded,
            ),
            (
                Declaration { sets_needed: Some(3), ..decl(TaskKind::Rebalancing, singles([1, 2]), 5) },
                DeclareError::TooManySetsNeeded { needed: 3, available: 2 },
            ),
            (
                Declaration { bytes_needed: Some(0), ..decl(TaskKind::Rebalancing, singles([1]), 5) },
                DeclareError::ZeroBytesNeeded,
            ),
            (
                Declaration { bytes_needed: Some(20 * MB + 1), ..decl(TaskKind::Rebalancing, singles([1, 2]), 5) },
                DeclareError::TooManyBytesNeeded { needed: 20 * MB + 1, available: 20 * MB },
            ),
            (
                Declaration {
                    sets_needed: Some(1),
                    bytes_needed: Some(MB),
                    ..decl(TaskKind::Rebalancing, singles([1, 2]), 5)
                },
                DeclareError::SetsAndBytesNeeded,
            ),
        ];
        for (d, expected) in cases {
            assert_eq!(p.declare(&topo, now, &d), Err(expected));
        }
        let copy9 = MemberBitmap::from_iter([Member::Copy(ChunkRef { block: BlockId(1), copy: 9 })]);
        let err = p.declare(&topo, now, &decl(TaskKind::Scrubbing, ReadSets::EachMember(copy9), 5)).unwrap_err();
        assert!(err.to_string().contains("fewer copies"), "{err}");
        assert_eq!(p.outstanding().count(), 0);
        assert_eq!(p.memory_bytes(), 0);
    }

    #[test]
    fn overlapping_reads_in_one_quantum_cost_one_disk_read() {
        let topo = cluster();
        let mut p = planner();
        // Urgent reconstruction of block 3 drives the schedule; garbage
        // collection, with a long deadline, picks the block it reads anyway.
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([3]), 1)).unwrap();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::GarbageCollection, singles(0..10), 10)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        let recon = plan.report.task(TaskKind::Reconstruction);
        let gc = plan.report.task(TaskKind::GarbageCollection);
        assert_eq!(recon.disk_bytes, 10 * MB);
        assert_eq!(gc.free_bytes, 10 * MB, "GC's copy of block 3 rides on reconstruction's read");
        assert_eq!(plan.dispatch.free_bytes_from(TaskKind::GarbageCollection, TaskKind::Reconstruction), 10 * MB);
        assert_eq!(gc.sets_delivered, 1, "its quota of one set, filled by the free one");
        assert_eq!(gc.disk_bytes, 0);
        let reads = &plan.schedule.reads;
        assert_eq!(reads.iter().filter(|r| r.block() == BlockId(3)).filter(|r| r.physical()).count(), 1);
    }

    #[test]
    fn a_paused_declaration_gets_nothing_keeps_its_deadline_and_catches_up_when_resumed() {
        let topo = cluster();
        let mut p = planner();
        let recon = p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([3]), 1)).unwrap();
        let fsck = p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..10), 4)).unwrap();
        p.set_paused(BTreeSet::from([fsck]));
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert!(plan.schedule.reads.iter().all(|r| r.block() == BlockId(3)), "only reconstruction is read");
        assert_eq!(plan.report.task(TaskKind::Fsck).sets_delivered, 0, "not even block 3, which was free");
        assert_eq!(p.status(recon), None, "reconstruction finished");
        let quota_before = p.outstanding.get(&fsck).unwrap().quota(Timestamp(0), p.config.quantum);
        // Paused for two quanta: the quota of what is left grows.
        p.plan_quantum(&topo, Timestamp(HOUR), &Budget::UNLIMITED);
        let quota_after = p.outstanding.get(&fsck).unwrap().quota(Timestamp(2 * HOUR), p.config.quantum);
        assert!(quota_after > quota_before, "{quota_after} sets per quantum after the pause, {quota_before} before");
        p.set_paused(BTreeSet::new());
        p.plan_quantum(&topo, Timestamp(2 * HOUR), &Budget::UNLIMITED);
        p.plan_quantum(&topo, Timestamp(3 * HOUR), &Budget::UNLIMITED);
        assert_eq!(p.status(fsck), None, "all ten sets delivered by the deadline");
        // Paused past its deadline, a declaration misses it.
        let late = p.declare(&topo, Timestamp(4 * HOUR), &decl(TaskKind::Fsck, singles([1]), 5)).unwrap();
        p.set_paused(BTreeSet::from([late]));
        let plan = p.plan_quantum(&topo, Timestamp(5 * HOUR), &Budget::UNLIMITED);
        assert_eq!(plan.report.task(TaskKind::Fsck).deadline_misses, 1);
        assert!(p.status(late).unwrap().missed_deadline);
    }

    /// Rebuilding lost stripe member 105 needs any 4 of the other five.
    fn rebuild_105() -> ReadSets {
        ReadSets::Sets(vec![BlockSet::choose((100..105).map(|b| Member::Any(BlockId(b))).collect(), 4)])
    }

    /// One quantum of a scrub of `scrubbed` (copy 0, due now) beside
    /// [`rebuild_105`] due in `rebuild_quanta`.
    fn scrub_then_rebuild(scrubbed: &[u64], rebuild_quanta: u64) -> Schedule {
        let topo = cluster();
        let mut p = planner();
        let chunks = scrubbed.iter().map(|&b| Member::Copy(ChunkRef { block: BlockId(b), copy: 0 }));
        let scrub = ReadSets::EachMember(MemberBitmap::from_iter(chunks));
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, scrub, 1)).unwrap();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, rebuild_105(), rebuild_quanta)).unwrap();
        p.schedule(&topo, Timestamp(0), &Budget::UNLIMITED).0
    }

    fn reads_of_task(plan: &Schedule, task: TaskKind) -> Vec<(u64, bool)> {
        (0..plan.sets.len())
            .filter(|&s| plan.decls[plan.sets[s].decl as usize].task == task)
            .flat_map(|s| plan.reads_of(s).iter().map(|r| (r.block().0, r.physical())))
            .collect()
    }

    #[test]
    fn a_set_needing_some_members_rides_on_what_is_scheduled_and_reads_the_rest() {
        // Five chunks due now: ahead of the rebuild's 40 MB in the planner's order.
        let plan = scrub_then_rebuild(&[103, 10, 11, 12, 13], 10);
        // 103 is free; of the others, member order among equal disks.
        assert_eq!(
            reads_of_task(&plan, TaskKind::Reconstruction),
            [(100, true), (101, true), (102, true), (103, false)]
        );
        assert_eq!(plan.physical_bytes(), 80 * MB, "one read of 103 serves both");
    }

    #[test]
    fn a_set_needing_some_members_steers_around_a_disk_without_budget() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, rebuild_105(), 1)).unwrap();
        // Disk 1 (block 101) has no head time left this quantum.
        let mut disks = vec![u64::MAX; 6];
        disks[1] = 0;
        let budget = Budget { cluster_bytes: u64::MAX, disk_head_time_us: DiskBudget::PerDisk(disks) };
        let (plan, report) = p.schedule(&topo, Timestamp(0), &budget);
        assert_eq!(
            reads_of_task(&plan, TaskKind::Reconstruction),
            [(100, true), (102, true), (103, true), (104, true)]
        );
        assert_eq!(report.task(TaskKind::Reconstruction).sets_delivered, 1);
        // With two disks out, four members cannot be read: the set waits.
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, rebuild_105(), 1)).unwrap();
        let mut disks = vec![u64::MAX; 6];
        disks[1] = 0;
        disks[2] = 0;
        let budget = Budget { cluster_bytes: u64::MAX, disk_head_time_us: DiskBudget::PerDisk(disks) };
        let (plan, _) = p.schedule(&topo, Timestamp(0), &budget);
        assert!(plan.sets.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_set_needing_some_members_waits_for_a_live_member_it_cannot_read_yet() {
        // Any 1 of blocks 100 and 101; 100 is deleted and 101's only copy
        // is unreadable for now (found by the planner DST: the set was
        // elided though block 101 lives).
        let choose =
            ReadSets::Sets(vec![BlockSet::choose(vec![Member::Any(BlockId(100)), Member::Any(BlockId(101))], 1)]);
        let mut p = planner();
        let id = p.declare(&cluster(), Timestamp(0), &decl(TaskKind::Reconstruction, choose, 4)).unwrap();
        let mut topo = cluster();
        topo.set_state(BlockId(100), BlockState::Deleted);
        topo.fail_disk(DiskId(1));
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert!(plan.schedule.sets.is_empty());
        let status = p.status(id).expect("still outstanding");
        assert_eq!((status.elided_sets, status.delivered_sets), (0, 0));
        // Readable again: block 101 alone is all there is to read.
        let mut topo = cluster();
        topo.set_state(BlockId(100), BlockState::Deleted);
        let plan = p.plan_quantum(&topo, Timestamp(HOUR), &Budget::UNLIMITED);
        assert_eq!(reads_of_task(&plan.schedule, TaskKind::Reconstruction), [(101, true)]);
        assert_eq!(p.status(id), None, "done");
    }

    #[test]
    fn a_set_needing_some_members_is_free_once_that_many_are_scheduled() {
        let plan = scrub_then_rebuild(&[100, 101, 102, 104], 100);
        assert_eq!(
            reads_of_task(&plan, TaskKind::Reconstruction),
            [(100, false), (101, false), (102, false), (104, false)]
        );
        assert_eq!(plan.physical_bytes(), 40 * MB);
    }

    #[test]
    fn a_recycled_schedule_plans_exactly_like_a_fresh_one() {
        let topo = cluster();
        let mut other = planner();
        other.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([3, 100]), 2)).unwrap();
        let (spent, _) = other.schedule(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert!(!spent.reads.is_empty());
        let with_fsck = || {
            let mut p = planner();
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..20), 4)).unwrap();
            p
        };
        let (mut fresh, mut recycling) = (with_fsck(), with_fsck());
        recycling.recycle(spent);
        let (expected, _) = fresh.schedule(&topo, Timestamp(0), &Budget::UNLIMITED);
        let (planned, _) = recycling.schedule(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert_eq!(planned, expected, "nothing of the spent schedule leaks into the next");
    }

    #[test]
    fn a_recycled_schedule_keeps_only_the_capacity_it_used() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([3, 100]), 2)).unwrap();
        let (mut spent, _) = p.schedule(&topo, Timestamp(0), &Budget::UNLIMITED);
        let used = (spent.reads.len(), spent.sets.len(), spent.decls.len());
        // As if an earlier, far larger quantum had grown the buffers.
        spent.reads.reserve(100_000);
        spent.sets.reserve(100_000);
        spent.decls.reserve(1_000);
        p.recycle(spent);
        let kept = p.spare.as_ref().expect("kept for the next quantum");
        assert_eq!(
            (kept.reads.capacity(), kept.sets.capacity(), kept.decls.capacity()),
            used,
            "capacity beyond the schedule's own is given back"
        );
    }

    #[test]
    fn the_free_pass_plans_the_same_on_any_number_of_threads() {
        let topo = cluster();
        let with_threads = |threads: u32| {
            let mut p = Planner::new(PlannerConfig {
                quantum: Duration::from_millis(HOUR),
                free_pass_threads: threads,
                ..PlannerConfig::default()
            });
            let ranges = ReadSets::Ranges(vec![
                BlockRange { start: BlockId(0), len: 10 },
                BlockRange { start: BlockId(10), len: 10 },
            ]);
            let pairs = ReadSets::Sets((0..18).map(|b| BlockSet::any_of([BlockId(b), BlockId(b + 2)])).collect());
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([3, 5, 100, 101]), 1)).unwrap();
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, ranges, 10)).unwrap();
            p.declare(&topo, Timestamp(0), &decl(TaskKind::GarbageCollection, singles(0..20), 10)).unwrap();
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, pairs, 10)).unwrap();
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles([2, 4, 102, 103]), 10)).unwrap();
            p
        };
        let mut one = with_threads(1);
        let mut three = with_threads(3);
        // Its workers' schedules given back after every quantum.
        let mut releasing = with_threads(3);
        for q in 0..3 {
            let now = Timestamp(q * HOUR);
            let (expected, expected_report) = one.schedule(&topo, now, &Budget::UNLIMITED);
            let (planned, report) = three.schedule(&topo, now, &Budget::UNLIMITED);
            assert_eq!(planned, expected, "quantum {q}");
            assert_eq!(report, expected_report, "quantum {q}");
            let (released, released_report) = releasing.schedule(&topo, now, &Budget::UNLIMITED);
            assert_eq!(releasing.worker_spares.len(), 2, "the helpers' schedules are kept");
            releasing.release_worker_buffers();
            assert!(releasing.worker_spares.is_empty());
            assert_eq!((released, released_report), (expected, expected_report), "quantum {q}, released");
            if q == 0 {
                let gc = planned.decls.iter().find(|d| d.task == TaskKind::GarbageCollection).unwrap();
                assert!(gc.taken > gc.quota, "the free pass took sets beyond the quota: {gc:?}");
            }
        }
    }

    #[test]
    fn prepared_declarations_and_deletions_on_any_number_of_threads_plan_alike() {
        let with_threads = |threads: u32| {
            let mut topo = cluster();
            let mut p = Planner::new(PlannerConfig {
                quantum: Duration::from_millis(HOUR),
                free_pass_threads: threads,
                ..PlannerConfig::default()
            });
            let pairs = ReadSets::Sets((0..18).map(|b| BlockSet::any_of([BlockId(b), BlockId(b + 2)])).collect());
            let ranges = ReadSets::Ranges(vec![BlockRange { start: BlockId(0), len: 10 }]);
            p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, pairs, 10)).unwrap();
            let prepared = p.prepare_owned(&topo, Timestamp(0), decl(TaskKind::Fsck, ranges, 10)).unwrap();
            assert_eq!(p.outstanding().count(), 1, "preparing changes nothing");
            let id = p.add_prepared(prepared);
            p.declare_owned(&topo, Timestamp(0), decl(TaskKind::GarbageCollection, singles(0..20), 10)).unwrap();
            for b in [0, 1, 2, 4] {
                topo.set_state(BlockId(b), BlockState::Deleted);
            }
            p.note_deleted(&topo, &[0u64, 1, 2, 4].into_iter().collect());
            let (schedule, report) = p.schedule(&topo, Timestamp(0), &Budget::UNLIMITED);
            (id, p.outstanding().collect::<Vec<_>>(), schedule, report)
        };
        let one = with_threads(1);
        assert_eq!(one.0, DeclarationId(2), "ids in the order declarations are added");
        assert_eq!(one.3.task(TaskKind::GarbageCollection).sets_elided, 4);
        assert_eq!(one.3.task(TaskKind::Scrubbing).sets_elided, 2, "{{0, 2}} and {{2, 4}}");
        assert_eq!(with_threads(3), one);
    }

    #[test]
    fn quota_follows_the_rate_needed_for_the_deadline() {
        let topo = cluster();
        let mut p = planner();
        let id = p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..8), 4)).unwrap();
        for q in 0..4u64 {
            let plan = p.plan_quantum(&topo, Timestamp(q * HOUR), &Budget::UNLIMITED);
            assert_eq!(plan.report.task(TaskKind::Fsck).sets_delivered, 2, "quantum {q}");
        }
        assert!(p.status(id).is_none(), "finished declarations are retired");
    }

    #[test]
    fn the_budget_is_never_exceeded_and_shortfalls_are_overloaded_then_missed() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..10), 1)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::cluster_bytes(35 * MB));
        let fsck = plan.report.task(TaskKind::Fsck);
        assert_eq!(fsck.disk_bytes, 30 * MB);
        assert_eq!(fsck.overloaded_sets, 3);
        assert!(plan.schedule.decls[0].overloaded);
        let plan = p.plan_quantum(&topo, Timestamp(HOUR), &Budget::UNLIMITED);
        let fsck = plan.report.task(TaskKind::Fsck);
        assert_eq!(fsck.deadline_misses, 1);
        assert_eq!(fsck.sets_delivered, 7, "late work is scheduled first, all of it");
        assert_eq!(fsck.overloaded_sets, 7);
    }

    #[test]
    fn a_hot_disk_is_never_overdriven_and_any_copy_goes_elsewhere() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Transcoding, singles(0..6), 1)).unwrap();
        let one_read = DiskModel::HDD.head_time_us(10 * MB);
        let mut per_disk = vec![one_read * 10; 6];
        per_disk[0] = 0;
        let budget = Budget { cluster_bytes: u64::MAX, disk_head_time_us: DiskBudget::PerDisk(per_disk) };
        let plan = p.plan_quantum(&topo, Timestamp(0), &budget);
        assert_eq!(plan.report.task(TaskKind::Transcoding).sets_delivered, 6);
        assert!(plan.schedule.reads.iter().all(|r| r.disk() != DiskId(0)));
    }

    #[test]
    fn data_flexible_declarations_take_exactly_sets_needed_preferring_free_sets() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([7, 8]), 1)).unwrap();
        let rebalance = Declaration { sets_needed: Some(2), ..decl(TaskKind::Rebalancing, singles(0..20), 1) };
        let id = p.declare(&topo, Timestamp(0), &rebalance).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        let rb = plan.report.task(TaskKind::Rebalancing);
        assert_eq!(rb.sets_delivered, 2);
        assert_eq!(rb.disk_bytes, 0, "it picked the two blocks reconstruction reads anyway");
        assert!(plan.finished.iter().any(|s| s.id == id && s.delivered_sets == 2));
    }

    #[test]
    fn byte_flexible_declarations_take_the_cheapest_sets_up_to_their_bytes() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, singles([2, 3]), 1)).unwrap();
        let rebalance = Declaration { bytes_needed: Some(15 * MB), ..decl(TaskKind::Rebalancing, singles(0..20), 1) };
        let id = p.declare(&topo, Timestamp(0), &rebalance).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        let rb = plan.report.task(TaskKind::Rebalancing);
        assert_eq!(rb.disk_bytes, 0, "it picked the two blocks reconstruction reads anyway");
        let done = plan.finished.iter().find(|s| s.id == id).expect("finished");
        assert_eq!((done.delivered_sets, done.delivered_bytes, done.bytes_needed), (2, 20 * MB, Some(15 * MB)));
    }

    #[test]
    fn a_byte_flexible_declaration_gets_nothing_after_the_quantum_that_reached_its_bytes() {
        let topo = cluster();
        let mut p = planner();
        let rebalance = Declaration { bytes_needed: Some(25 * MB), ..decl(TaskKind::Rebalancing, singles(0..20), 4) };
        let id = p.declare(&topo, Timestamp(0), &rebalance).unwrap();
        let mut delivered = Vec::new();
        for q in 0..4 {
            let plan = p.plan_quantum(&topo, Timestamp(q * HOUR), &Budget::UNLIMITED);
            delivered.push(plan.schedule.sets.len());
            if let Some(s) = plan.finished.iter().find(|s| s.id == id) {
                assert_eq!((q, s.delivered_bytes), (2, 30 * MB), "done in the third quantum");
            }
        }
        // Three sets at one per quantum (its pace), then none.
        assert_eq!(delivered, vec![1, 1, 1, 0]);
        assert_eq!(p.outstanding().count(), 0);
    }

    #[test]
    fn a_restored_byte_flexible_declaration_keeps_its_delivered_bytes() {
        let topo = cluster();
        let mut p = planner();
        let d = Declaration { bytes_needed: Some(25 * MB), ..decl(TaskKind::Rebalancing, singles(0..6), 1) };
        p.restore(&topo, DeclarationId(7), &d, &[0, 1], false).unwrap();
        let st = p.status(DeclarationId(7)).unwrap();
        assert_eq!((st.delivered_sets, st.delivered_bytes, st.needed_left), (2, 20 * MB, 1));
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert_eq!(plan.schedule.sets.len(), 1, "one more set reaches 25 MB");
    }

    #[test]
    fn deleted_sets_are_elided_never_delivered() {
        let mut topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, singles(0..4), 2)).unwrap();
        topo.set_state(BlockId(0), BlockState::Deleted);
        topo.set_state(BlockId(1), BlockState::Deleted);
        p.note_deleted(&topo, &[0u64].into_iter().collect());
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        let scrub = plan.report.task(TaskKind::Scrubbing);
        assert_eq!(scrub.sets_elided, 2, "block 0 at note time, block 1 during the walk");
        assert_eq!(scrub.elided_bytes, 20 * MB);
        assert!(plan.schedule.reads.iter().all(|r| r.block().0 >= 2));
    }

    #[test]
    fn sets_covered_by_an_announced_deletion_are_elided_before_it_happens() {
        let topo = cluster();
        let mut p = planner();
        let copy = |b, copy| Member::Copy(ChunkRef { block: BlockId(b), copy });
        // A scrub of copies 0 of blocks 0..4, a file scrub of ranges 4..6
        // and 6..8, and a set of blocks 8 and 9.
        let scrub = ReadSets::EachMember((0..4).map(|b| copy(b, 0)).collect());
        let s = p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, scrub, 1)).unwrap();
        let ranges =
            ReadSets::Ranges(vec![BlockRange { start: BlockId(4), len: 2 }, BlockRange { start: BlockId(6), len: 2 }]);
        let f = p.declare(&topo, Timestamp(0), &decl(TaskKind::FileScrubbing, ranges, 1)).unwrap();
        let pair = ReadSets::Sets(vec![BlockSet::any_of([BlockId(8), BlockId(9)])]);
        let g = p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, pair, 1)).unwrap();
        // Rebalancing will delete copy 0 of blocks 0 and 1 and copy 1 of
        // block 2; transcoding the whole blocks 4, 5, 6 and 8.
        let announced: MemberBitmap = [
            copy(0, 0),
            copy(1, 0),
            copy(2, 1),
            Member::Any(BlockId(4)),
            Member::Any(BlockId(5)),
            Member::Any(BlockId(6)),
            Member::Any(BlockId(8)),
        ]
        .into_iter()
        .collect();
        assert_eq!(p.note_pending_deletions(&topo, &announced), 3, "copies 0 of 0 and 1, the range 4..6");
        assert_eq!((p.status(s).unwrap().elided_sets, p.status(f).unwrap().elided_sets), (2, 1));
        assert_eq!(p.status(g).unwrap().elided_sets, 0, "block 9 stays");
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert_eq!(plan.report.task(TaskKind::Scrubbing).sets_elided, 2, "reported with the next quantum");
        assert_eq!(plan.report.task(TaskKind::Scrubbing).elided_bytes, 20 * MB);
        let read: BTreeSet<u64> = plan.schedule.reads.iter().map(|r| r.block().0).collect();
        assert_eq!(read, [2, 3, 6, 7, 8, 9].into_iter().collect(), "nothing announced was read alone");
    }

    #[test]
    fn cancel_stops_deliveries() {
        let topo = cluster();
        let mut p = planner();
        let id = p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..4), 4)).unwrap();
        assert_eq!(p.cancel(id).unwrap().id, id);
        assert_eq!(p.cancel(id), Err(CancelError::UnknownDeclaration(id)));
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert!(plan.schedule.sets.is_empty());
    }

    #[test]
    fn fill_spends_leftover_budget_in_deadline_order() {
        let topo = cluster();
        let mut p = Planner::new(PlannerConfig {
            quantum: Duration::from_millis(HOUR),
            leftover: LeftoverPolicy::Fill,
            ..PlannerConfig::default()
        });
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles(0..10), 10)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::cluster_bytes(50 * MB));
        assert_eq!(plan.report.task(TaskKind::Fsck).disk_bytes, 50 * MB);
    }

    #[test]
    fn exact_copy_scrubbing_of_a_disk_reads_that_disk() {
        let topo = cluster();
        let mut p = planner();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Scrubbing, ReadSets::ChunksOnDisk(DiskId(2)), 1)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert_eq!(plan.schedule.sets.len(), 12, "11 replicas and one stripe member live on disk 2");
        assert!(plan.schedule.reads.iter().all(|r| r.disk() == DiskId(2)));
    }

    #[test]
    fn dispatch_groups_sets_of_a_stripe_and_pins_shared_chunks() {
        let topo = cluster();
        let mut p = planner();
        let stripe = ReadSets::Sets(vec![BlockSet::any_of((100..104).map(BlockId))]);
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, stripe, 1)).unwrap();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::FileScrubbing, singles([101, 102]), 1)).unwrap();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Fsck, singles([5]), 1)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        let d = &plan.dispatch;
        let group_of = |set: usize| {
            d.groups
                .iter()
                .position(|g| g.sets.contains(&(d.order.iter().position(|&s| s as usize == set).unwrap() as u32)))
                .unwrap()
        };
        let stripe_sets: Vec<usize> = (0..plan.schedule.sets.len())
            .filter(|&s| plan.schedule.reads_of(s).iter().any(|r| r.group() == GroupId(100)))
            .collect();
        assert_eq!(stripe_sets.len(), 3);
        assert!(stripe_sets.iter().all(|&s| group_of(s) == group_of(stripe_sets[0])));
        let g = group_of(stripe_sets[0]);
        let pinned: Vec<BlockId> = d.pins_of(&plan.schedule, g).map(|p| p.chunk.block).collect();
        assert_eq!(pinned, vec![BlockId(101), BlockId(102)]);
        assert!(d.pins_of(&plan.schedule, g).all(|p| p.readers == 2 && p.until > d.groups[g].at));
        let callbacks = d.callbacks(&plan.schedule, g);
        assert!(callbacks.iter().any(|c| c.task == TaskKind::FileScrubbing && c.sets.len() == 2));
    }

    #[test]
    fn a_tight_cache_budget_splits_groups_and_counts_the_loss() {
        let topo = cluster();
        let mut p = Planner::new(PlannerConfig {
            quantum: Duration::from_millis(HOUR),
            group_cache_bytes: 10 * MB,
            ..PlannerConfig::default()
        });
        let stripe = ReadSets::Sets(vec![BlockSet::any_of((100..104).map(BlockId))]);
        p.declare(&topo, Timestamp(0), &decl(TaskKind::Reconstruction, stripe, 1)).unwrap();
        p.declare(&topo, Timestamp(0), &decl(TaskKind::FileScrubbing, singles([101, 102]), 1)).unwrap();
        let plan = p.plan_quantum(&topo, Timestamp(0), &Budget::UNLIMITED);
        assert!(plan.dispatch.groups.iter().all(|g| g.pinned_bytes <= 10 * MB));
        assert_eq!(plan.dispatch.split_loss_bytes, 10 * MB);
    }

    #[test]
    fn restore_rebuilds_a_declaration_with_its_id_and_delivered_sets() {
        let topo = cluster();
        let run = |p: &mut Planner, q: u64| p.plan_quantum(&topo, Timestamp(q * HOUR), &Budget::UNLIMITED);
        let d = decl(TaskKind::Fsck, singles(0..8), 4);
        // The original planner delivers two quanta, then "crashes".
        let mut original = planner();
        let id = original.declare(&topo, Timestamp(0), &d).unwrap();
        let mut delivered = Vec::new();
        for q in 0..2 {
            delivered.extend(run(&mut original, q).schedule.sets.iter().map(|s| s.key));
        }
        assert_eq!(delivered.len(), 4);
        let mut restored = planner();
        restored.restore(&topo, id, &d, &delivered, false).unwrap();
        let status = restored.status(id).unwrap();
        assert_eq!((status.delivered_sets, status.needed_left, status.total_sets), (4, 4, 8));
        let mut rest = Vec::new();
        for q in 2..4 {
            rest.extend(run(&mut restored, q).schedule.sets.iter().map(|s| s.key));
        }
        delivered.extend(rest);
        delivered.sort_unstable();
        assert_eq!(delivered, (0..8).collect::<Vec<u64>>(), "every set exactly once across the restart");
        assert!(restored.status(id).is_none(), "finished after the restart");
        let next = restored.declare(&topo, Timestamp(4 * HOUR), &decl(TaskKind::Fsck, singles([1]), 9)).unwrap();
        assert!(next > id, "ids are not reused");
    }

    #[test]
    fn restore_keeps_sets_needed_progress_and_a_counted_miss() {
        let topo = cluster();
        let d = Declaration { sets_needed: Some(3), ..decl(TaskKind::Rebalancing, singles(0..6), 1) };
        let mut p = planner();
        p.restore(&topo, DeclarationId(7), &d, &[0, 1], true).unwrap();
        assert_eq!(p.status(DeclarationId(7)).unwrap().needed_left, 1);
        // Late, with its miss already counted before the restart.
        let plan = p.plan_quantum(&topo, Timestamp(2 * HOUR), &Budget::UNLIMITED);
        let stats = plan.report.task(TaskKind::Rebalancing);
        assert_eq!((stats.sets_delivered, stats.deadline_misses), (1, 0));
        assert_eq!(plan.finished[0].delivered_sets, 3);
    }

    #[test]
    fn bad_restores_change_nothing() {
        let topo = cluster();
        let d = decl(TaskKind::Fsck, singles(0..3), 4);
        let mut p = planner();
        let id = DeclarationId(5);
        assert_eq!(p.restore(&topo, id, &d, &[0, 9], false), Err(RestoreError::UnknownSet { id, key: 9 }));
        assert_eq!(p.restore(&topo, id, &d, &[1, 1], false), Err(RestoreError::UnknownSet { id, key: 1 }));
        assert_eq!(p.outstanding().count(), 0);
        let scrub = decl(TaskKind::Scrubbing, ReadSets::ChunksOnDisk(DiskId(6)), 4);
        assert_eq!(p.restore(&topo, id, &scrub, &[], false), Err(RestoreError::UnknownDisk(DiskId(6))));
        p.restore(&topo, id, &d, &[], false).unwrap();
        assert_eq!(p.restore(&topo, id, &d, &[], false), Err(RestoreError::AlreadyOutstanding(id)));
        // Deleted blocks of a restored declaration are elided, not delivered.
        let mut topo = topo;
        topo.set_state(BlockId(0), BlockState::Deleted);
        p.note_deleted(&topo, &[0u64].into_iter().collect());
        assert_eq!(p.status(id).unwrap().elided_sets, 1);
    }
}
