//! Declarative mode: every job is a declaration to the real planner
//! ([`dingo_planner::Planner`]); each quantum is planned, cut into dispatch
//! groups, and the groups' reads are replayed in order against a pinned
//! cache of the configured size per disk. A read is free only if its chunk
//! is really pinned and already read when the read happens.
//!
//! Planning is the critical path of a run, so a quantum's dispatch and
//! replay run on a thread of their own while the world advances and the
//! next quantum is planned.

use super::stats::{Recorder, Source};
use super::world::Job;
use crate::model::ClusterModel;
use dingo_planner::{
    Budget, CacheDirective, DeclareError, Dispatch, DispatchScratch, Planner, PlannerConfig, QuantumReport, Schedule,
    dispatch_into,
};
use dingo_types::{ChunkRef, Member, TaskKind, Timestamp, Topology};
use roaring::RoaringTreemap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::thread::JoinHandle;

/// A chunk pinned in a disk's reserved cache region.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Pin {
    disk: u32,
    bytes: u64,
    until: Timestamp,
    /// Reads the directive still expects.
    readers_left: u32,
    /// The task whose read brought the chunk in; `None` until read.
    loaded_by: Option<TaskKind>,
}

/// Pinned regions of every disk, each of `capacity` bytes.
#[derive(Debug, Serialize, Deserialize)]
pub struct PinCache {
    capacity: u64,
    pins: FxHashMap<u64, Pin>,
    /// Pins in the order they were made, to expire them; `until` never
    /// decreases along it.
    expiry: VecDeque<(Timestamp, u64)>,
    pinned: Vec<u64>,
    /// Most bytes ever pinned on one disk.
    pub max_disk_pinned: u64,
    /// Most bytes one disk would have pinned with an unlimited region: the
    /// cache the directives need.
    pub max_disk_wanted: u64,
    /// Bytes of directives refused because the disk's region was full.
    pub refused_bytes: u64,
}

impl PinCache {
    pub fn new(disks: u32, capacity: u64) -> PinCache {
        PinCache {
            capacity,
            pins: FxHashMap::default(),
            expiry: VecDeque::new(),
            pinned: vec![0; disks as usize],
            max_disk_pinned: 0,
            max_disk_wanted: 0,
            refused_bytes: 0,
        }
    }

    fn unpin(&mut self, key: u64) {
        if let Some(p) = self.pins.remove(&key) {
            self.pinned[p.disk as usize] -= p.bytes;
        }
    }

    /// Drops pins whose time is up at `now`.
    fn expire(&mut self, now: Timestamp) {
        while let Some(&(until, key)) = self.expiry.front() {
            if until > now {
                break;
            }
            self.expiry.pop_front();
            if self.pins.get(&key).is_some_and(|p| p.until <= now) {
                self.unpin(key);
            }
        }
    }

    /// Takes a group's directives; returns the most bytes pinned on one disk after.
    fn admit(&mut self, directives: impl IntoIterator<Item = CacheDirective>) -> u64 {
        let mut group_max = 0;
        let mut refused: Vec<(u32, u64)> = Vec::new();
        for d in directives {
            let key = Member::Copy(d.chunk).key();
            if let Some(p) = self.pins.get_mut(&key) {
                // Still pinned from an earlier group of a split component.
                p.until = p.until.max(d.until);
                p.readers_left += d.readers;
            } else if self.pinned[d.disk.0 as usize] + d.bytes <= self.capacity {
                self.pinned[d.disk.0 as usize] += d.bytes;
                let pin =
                    Pin { disk: d.disk.0, bytes: d.bytes, until: d.until, readers_left: d.readers, loaded_by: None };
                self.pins.insert(key, pin);
            } else {
                self.refused_bytes += d.bytes;
                match refused.iter_mut().find(|(disk, _)| *disk == d.disk.0) {
                    Some((_, bytes)) => *bytes += d.bytes,
                    None => refused.push((d.disk.0, d.bytes)),
                }
                continue;
            }
            self.expiry.push_back((d.until, key));
            let on_disk = self.pinned[d.disk.0 as usize];
            group_max = group_max.max(on_disk);
        }
        self.max_disk_pinned = self.max_disk_pinned.max(group_max);
        let wanted = refused.iter().map(|&(disk, bytes)| self.pinned[disk as usize] + bytes).max().unwrap_or(0);
        self.max_disk_wanted = self.max_disk_wanted.max(wanted).max(group_max);
        group_max
    }

    /// A read of `chunk` by `task`: `Some(owner)` if served from the cache.
    fn read(&mut self, chunk: ChunkRef, task: TaskKind) -> Option<TaskKind> {
        let key = Member::Copy(chunk).key();
        let pin = self.pins.get_mut(&key)?;
        let hit = pin.loaded_by;
        if hit.is_none() {
            pin.loaded_by = Some(task);
        }
        pin.readers_left = pin.readers_left.saturating_sub(1);
        if pin.readers_left == 0 {
            self.unpin(key);
        }
        hit
    }
}

/// Each declaration's rank by deadline in `schedule` (nearest first; equal
/// deadlines, equal ranks) into `rank`, by declaration index.
fn deadline_ranks(schedule: &Schedule, rank: &mut Vec<u32>) {
    let deadline = |d: u32| schedule.decls[d as usize].deadline;
    let mut by_deadline: Vec<u32> = (0..schedule.decls.len() as u32).collect();
    by_deadline.sort_by_key(|&d| deadline(d));
    rank.clear();
    rank.resize(by_deadline.len(), 0);
    let mut r = 0;
    for pair in by_deadline.windows(2) {
        if deadline(pair[1]) != deadline(pair[0]) {
            r += 1;
        }
        rank[pair[1] as usize] = r;
    }
}

/// One planned quantum, waiting for its replay.
struct PlannedQuantum {
    schedule: Schedule,
    report: QuantumReport,
    budget: Budget,
    start_hours: f64,
}

#[derive(Serialize, Deserialize)]
pub struct Declarative {
    pub planner: Planner,
    /// The replay side: here while idle, or replaying the last plan on a
    /// thread of its own.
    replay: ReplayState,
    /// Memory held by the last schedule's vectors.
    last_schedule_bytes: usize,
    /// [`ONE_PLAN_IN_FLIGHT_BYTES`], but for tests of the one-plan path
    /// on small clusters.
    one_plan_in_flight_bytes: usize,
}

/// Schedule memory past which one plan at a time is in flight, the
/// replay gives back its working memory after each quantum, and the
/// planner its free-pass workers' schedules.
pub const ONE_PLAN_IN_FLIGHT_BYTES: usize = 1 << 30;

/// Memory held by a schedule's vectors.
fn schedule_bytes(schedule: &Schedule) -> usize {
    schedule.reads.capacity() * std::mem::size_of::<dingo_planner::ChunkRead>()
        + schedule.sets.capacity() * std::mem::size_of::<dingo_planner::ScheduledSet>()
}

enum ReplayState {
    Idle(Box<Replay>),
    /// Replaying a plan; hands back the replay and the spent schedule.
    Busy(JoinHandle<(Box<Replay>, Schedule)>),
    /// Only while switching between the two.
    Switching,
}

/// A checkpoint holds the replay idle ([`Declarative::wait_for_replay`]
/// first): a replay in flight is refused, not waited for, since
/// serialising cannot change the state it writes.
impl Serialize for ReplayState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ReplayState::Idle(replay) => replay.serialize(serializer),
            ReplayState::Busy(_) | ReplayState::Switching => {
                Err(serde::ser::Error::custom("the declarative replay is still in flight"))
            }
        }
    }
}

impl<'de> Deserialize<'de> for ReplayState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<Replay>::deserialize(deserializer).map(ReplayState::Idle)
    }
}

/// The cluster side of declarative mode: dispatches planned quanta and
/// replays their reads against the pinned cache.
#[derive(Serialize, Deserialize)]
pub struct Replay {
    config: PlannerConfig,
    pub cache: PinCache,
    pub recorder: Recorder,
    /// Quanta whose plan went over the cluster or a disk budget (must stay 0).
    pub over_budget_quanta: u64,
    /// The last quantum's dispatch and the dispatcher's working memory,
    /// refilled every quantum. This and the fields below are working
    /// memory, refilled (or, `lean`, set) for each quantum's replay: not
    /// part of a checkpoint.
    #[serde(skip)]
    dispatch: Dispatch,
    #[serde(skip)]
    scratch: DispatchScratch,
    /// Head time per disk of a plan, for the budget check.
    #[serde(skip)]
    disk_used: Vec<u64>,
    /// One group's sets as `(deadline rank, set)`, in replay order.
    #[serde(skip)]
    by_deadline: Vec<(u32, u32)>,
    /// Each declaration's rank by deadline this quantum (equal deadlines,
    /// equal ranks), the replay's sort key: a few radix passes over small
    /// numbers instead of eight over timestamps.
    #[serde(skip)]
    deadline_rank: Vec<u32>,
    /// Give the dispatch memory back after each quantum, and the component
    /// ordering's as soon as it is done (large schedules).
    #[serde(skip)]
    lean: bool,
}

impl Declarative {
    pub fn new(config: PlannerConfig, disks: u32, cache_per_disk: u64, recorder: Recorder) -> Declarative {
        let replay = Replay::new(config.clone(), disks, cache_per_disk, recorder);
        Declarative {
            planner: Planner::new(config),
            replay: ReplayState::Idle(Box::new(replay)),
            last_schedule_bytes: 0,
            one_plan_in_flight_bytes: ONE_PLAN_IN_FLIGHT_BYTES,
        }
    }

    /// Declares `jobs` after noting the blocks `deleted` since the last
    /// quantum, in that order.
    ///
    /// Building and checking a declaration changes nothing (a quantum's
    /// reconstruction and scrubbing declarations take millions of sets),
    /// so the planner's `free_pass_threads` workers prepare them at once,
    /// drawing jobs one at a time, and they are added in the jobs' order:
    /// the same ids and the same first error as declaring them in turn.
    pub fn declare_jobs<'j>(
        planner: &mut Planner,
        model: &ClusterModel,
        deleted: &RoaringTreemap,
        jobs: impl IntoIterator<Item = &'j Job>,
    ) -> Result<(), (TaskKind, DeclareError)> {
        if !deleted.is_empty() {
            planner.note_deleted(model, deleted);
        }
        let jobs: Vec<&Job> = jobs.into_iter().collect();
        let threads = (planner.config().free_pass_threads.max(1) as usize).min(jobs.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let shared: &Planner = planner;
        let worker = || {
            let mut prepared = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                prepared.push((i, shared.prepare_owned(model, job.arrival, job.declaration(model))));
            }
            prepared
        };
        let mut prepared = std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads).map(|_| s.spawn(worker)).collect();
            let mut all = worker();
            for h in helpers {
                all.extend(h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            all
        });
        prepared.sort_unstable_by_key(|&(i, _)| i);
        for (i, result) in prepared {
            planner.add_prepared(result.map_err(|error| (jobs[i].task, error))?);
        }
        Ok(())
    }

    /// Whether declarations are still outstanding.
    pub fn busy(&self) -> bool {
        self.planner.outstanding().next().is_some()
    }

    /// Runs `prepare` (the quantum's new declarations) and then plans the
    /// quantum starting at `now` (at `start_hours`) on this core while
    /// another runs `alongside`, then hands the plan to the replay thread.
    /// A plan's replay thus runs from the end of its planning to
    /// the end of the next quantum's, beside the world's advance and the
    /// next planning. Replays only read plans, so this gives the same
    /// results as running them in turn.
    ///
    /// Past [`ONE_PLAN_IN_FLIGHT_BYTES`] of schedule (a 1 EB cluster's
    /// quantum takes gigabytes) the planner waits for the last replay
    /// before declaring and planning, so that one schedule is in memory,
    /// not two: the replay then overlaps the world's advance and the other
    /// modes only.
    pub fn run_quantum<E>(
        &mut self,
        topo: &(impl Topology + Sync),
        now: Timestamp,
        budget: &Budget,
        start_hours: f64,
        prepare: impl FnOnce(&mut Planner) -> Result<(), E>,
        alongside: impl FnOnce() + Send,
    ) -> Result<(), E> {
        // One plan in flight: the last replay goes on beside the other
        // modes (imperative, optimal), which hold little memory, and is
        // waited for before declaring and planning, so that its schedule
        // and the new one are never in memory together. (Declaring beside
        // it too was 5 % faster at 1 EB but raised the peak by 0.7-1 GB.)
        let mut in_flight = None;
        let one_plan_in_flight = self.one_plan_in_flight_bytes;
        if self.last_schedule_bytes > one_plan_in_flight {
            match std::mem::replace(&mut self.replay, ReplayState::Switching) {
                ReplayState::Busy(replaying) => in_flight = Some(replaying),
                idle => self.replay = idle,
            }
        }
        let planner = &mut self.planner;
        let (planned, waited) = std::thread::scope(|scope| {
            scope.spawn(alongside);
            let waited = in_flight.map(|replaying| Self::join(replaying, planner));
            let prepared = prepare(planner);
            let planned = prepared.map(|()| {
                let (schedule, report) = planner.schedule(topo, now, budget);
                if schedule_bytes(&schedule) > one_plan_in_flight {
                    planner.release_worker_buffers();
                }
                planner.retire_finished();
                PlannedQuantum { schedule, report, budget: budget.clone(), start_hours }
            });
            (planned, waited)
        });
        if let Some(replay) = waited {
            self.replay = ReplayState::Idle(replay);
        }
        let planned = planned?;
        self.last_schedule_bytes = schedule_bytes(&planned.schedule);
        let mut replay = self.idle_replay();
        replay.lean = self.last_schedule_bytes > one_plan_in_flight;
        self.replay = ReplayState::Busy(std::thread::spawn(move || {
            let spent = replay.replay(planned);
            (replay, spent)
        }));
        Ok(())
    }

    /// Waits for the replay in flight, if any, and keeps it idle.
    pub fn wait_for_replay(&mut self) {
        let replay = self.idle_replay();
        self.replay = ReplayState::Idle(replay);
    }

    /// Waits for the replay in flight, if any; recycles its schedule.
    fn idle_replay(&mut self) -> Box<Replay> {
        match std::mem::replace(&mut self.replay, ReplayState::Switching) {
            ReplayState::Idle(replay) => replay,
            ReplayState::Busy(replaying) => Self::join(replaying, &mut self.planner),
            ReplayState::Switching => unreachable!("a replay is always idle or busy between calls"),
        }
    }

    /// Waits for a replay; gives its spent schedule back to the planner.
    fn join(replaying: JoinHandle<(Box<Replay>, Schedule)>, planner: &mut Planner) -> Box<Replay> {
        let (replay, spent) = replaying.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        planner.recycle(spent);
        // The replay's working memory was freed on its own thread, into a
        // heap arena the planning thread does not allocate from: hand it
        // back before planning piles the next schedule on top.
        super::release_free_memory_if_large();
        replay
    }

    /// The replay side once every plan is replayed.
    pub fn finish(mut self) -> Replay {
        *self.idle_replay()
    }
}

impl Replay {
    fn new(config: PlannerConfig, disks: u32, cache_per_disk: u64, recorder: Recorder) -> Replay {
        Replay {
            config,
            cache: PinCache::new(disks, cache_per_disk),
            recorder,
            over_budget_quanta: 0,
            dispatch: Dispatch::default(),
            scratch: DispatchScratch::default(),
            disk_used: Vec::new(),
            by_deadline: Vec::new(),
            deadline_rank: Vec::new(),
            lean: false,
        }
    }

    /// Dispatches one planned quantum and replays its groups in order: each
    /// group's directives first, then its reads, each one free only if its
    /// chunk is pinned and already read. Closes the quantum's record and
    /// returns the spent schedule, for the planner to reuse.
    fn replay(&mut self, planned: PlannedQuantum) -> Schedule {
        let PlannedQuantum { schedule, report, budget, start_hours } = planned;
        let planned_bytes = schedule.physical_bytes();
        if planned_bytes > budget.cluster_bytes || self.over_disk_budget(&schedule, &budget) {
            self.over_budget_quanta += 1;
        }
        for task in TaskKind::ALL {
            let stats = report.task(task);
            self.recorder.elided(task, stats.elided_bytes);
            self.recorder.missed(task, stats.deadline_misses);
        }
        let mut dispatch = std::mem::take(&mut self.dispatch);
        if self.lean {
            self.scratch = DispatchScratch::lean();
        }
        dispatch_into(&schedule, &self.config, &mut self.scratch, &mut dispatch);
        let mut max_pinned = 0;
        let mut by_deadline = std::mem::take(&mut self.by_deadline);
        deadline_ranks(&schedule, &mut self.deadline_rank);
        let rank = &self.deadline_rank;
        for (g, group) in dispatch.groups.iter().enumerate() {
            self.cache.expire(group.at);
            max_pinned = max_pinned.max(self.cache.admit(dispatch.pins_of(&schedule, g)));
            // A group's callbacks all fire at `group.at`, so any order among
            // them is one the system could see. Nearest deadline first: a
            // chunk's disk read is then charged to the reader with the
            // nearest deadline and the others ride free on it, the paper's
            // attribution (seed 000 §6.3). Totals do not depend on it.
            by_deadline.clear();
            by_deadline.extend(
                dispatch.order[group.sets.start as usize..group.sets.end as usize]
                    .iter()
                    .map(|&s| (rank[schedule.sets[s as usize].decl as usize], s)),
            );
            // Stable (dispatch order among equal deadlines), so runs replay exactly.
            radsort::sort_by_key(&mut by_deadline, |&(rank, _)| rank);
            for &(_, s) in &by_deadline {
                let set = &schedule.sets[s as usize];
                let task = schedule.decls[set.decl as usize].task;
                for read in schedule.reads_of(s as usize) {
                    let source = match self.cache.read(read.chunk(), task) {
                        Some(owner) => Source::Cache(owner),
                        None => Source::Disk(read.disk()),
                    };
                    self.recorder.read(task, schedule.read_bytes(read), source);
                }
            }
        }
        let point = self.recorder.current();
        point.budget_bytes = Some(budget.cluster_bytes);
        point.planned_disk_bytes = Some(planned_bytes);
        point.max_disk_pinned_bytes = Some(max_pinned);
        self.recorder.end_quantum(start_hours);
        self.by_deadline = by_deadline;
        if self.lean {
            self.scratch = DispatchScratch::default();
        } else {
            self.dispatch = dispatch;
        }
        schedule
    }

    /// Whether the plan schedules more head time on some disk than its budget.
    fn over_disk_budget(&mut self, schedule: &Schedule, budget: &Budget) -> bool {
        let mut used = std::mem::take(&mut self.disk_used);
        used.clear();
        used.resize(self.recorder.disk_count(), 0);
        for r in schedule.reads.iter().filter(|r| r.physical()) {
            used[r.disk().0 as usize] += self.recorder.head_time_us(schedule.read_bytes(r));
        }
        let over = used.iter().enumerate().any(|(d, &us)| us > budget.disk_limit_us(d as u32));
        self.disk_used = used;
        over
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, DiskId};

    fn directive(block: u64, disk: u32, readers: u32, until: u64) -> CacheDirective {
        CacheDirective {
            chunk: ChunkRef { block: BlockId(block), copy: 0 },
            disk: DiskId(disk),
            bytes: 10,
            readers,
            until: Timestamp(until),
        }
    }

    /// One plan in flight (the memory-saving path of a 1 EB cluster) gives
    /// the results of two: the replay is only waited for earlier.
    #[test]
    fn one_plan_in_flight_gives_the_results_of_two() {
        use crate::model::ModelSpec;
        use crate::sim::{SimConfig, Simulation};
        let mut config = SimConfig {
            cluster: ModelSpec {
                raw_capacity: 2_000_000_000_000_000,
                disks_per_node: 1,
                seed: 7,
                ..ModelSpec::default()
            },
            horizon: std::time::Duration::from_secs(3 * 86_400),
            ..SimConfig::default()
        };
        config.squeeze_into_horizon();
        let run = |one_plan_in_flight_bytes| {
            let mut sim = Simulation::new(config.clone()).expect("a valid config");
            sim.declarative.as_mut().expect("declarative mode").one_plan_in_flight_bytes = one_plan_in_flight_bytes;
            serde_json::to_string(&sim.run(|_| {}).expect("the run")).expect("JSON")
        };
        let (two, one) = (run(ONE_PLAN_IN_FLIGHT_BYTES), run(0));
        assert!(two.contains("\"declarative\":{"), "the run has a declarative result");
        assert_eq!(one, two);
    }

    #[test]
    fn a_pinned_chunk_is_free_only_after_its_first_read_and_until_its_readers_are_done() {
        let mut cache = PinCache::new(2, 100);
        cache.admit([directive(1, 0, 2, 50)]);
        let chunk = ChunkRef { block: BlockId(1), copy: 0 };
        assert_eq!(cache.read(chunk, TaskKind::Scrubbing), None, "first read goes to disk");
        assert_eq!(cache.read(chunk, TaskKind::Fsck), Some(TaskKind::Scrubbing));
        assert_eq!(cache.read(chunk, TaskKind::Fsck), None, "unpinned once every reader read it");
        assert_eq!(cache.pinned[0], 0);
    }

    #[test]
    fn a_shared_chunk_is_charged_to_the_reader_with_the_nearest_deadline() {
        use dingo_planner::{ChunkRead, ScheduledDecl, ScheduledSet};
        use dingo_types::{DeclarationId, DiskModel, GroupId};
        const BYTES: u64 = 1 << 20;
        // Scrubbing comes first in the planner's order (and pays for the
        // disk read in the schedule); reconstruction's deadline is nearer.
        let decl = |id: u64, task: TaskKind, deadline: u64| ScheduledDecl {
            id: DeclarationId(id),
            task,
            deadline: Timestamp(deadline),
            quota: 1,
            taken: 1,
            overloaded: false,
        };
        let read = |physical: bool| ChunkRead::new(BlockId(7), 0, DiskId(0), GroupId(7), physical);
        let mut schedule = Schedule {
            decls: vec![decl(1, TaskKind::Scrubbing, 1_000_000), decl(2, TaskKind::Reconstruction, 1_000)],
            sets: vec![
                ScheduledSet { decl: 0, first_read: 0, key: 7 },
                ScheduledSet { decl: 1, first_read: 1, key: 7 },
            ],
            reads: vec![read(true), read(false)],
            ..Schedule::default()
        };
        schedule.block_bytes.record(BlockId(7), BYTES);
        let mut replay = Replay::new(PlannerConfig::default(), 1, 4 * BYTES, Recorder::new(1, DiskModel::HDD));
        let budget =
            Budget { cluster_bytes: u64::MAX, disk_head_time_us: dingo_planner::DiskBudget::Uniform(u64::MAX) };
        replay.replay(PlannedQuantum { schedule, report: QuantumReport::default(), budget, start_hours: 0.0 });
        let [scrub, rebuild] =
            [TaskKind::Scrubbing, TaskKind::Reconstruction].map(|t| &replay.recorder.tasks[t.index()]);
        assert_eq!((rebuild.disk_bytes, rebuild.free_bytes), (BYTES, 0), "the nearest deadline pays");
        assert_eq!((scrub.disk_bytes, scrub.free_bytes), (0, BYTES));
        assert_eq!(scrub.free_bytes_from[TaskKind::Reconstruction.index()], BYTES);
    }

    #[test]
    fn equal_deadlines_share_a_rank_and_nearer_ranks_lower() {
        use dingo_planner::ScheduledDecl;
        use dingo_types::DeclarationId;
        let decl = |deadline: u64| ScheduledDecl {
            id: DeclarationId(deadline),
            task: TaskKind::Scrubbing,
            deadline: Timestamp(deadline),
            quota: 0,
            taken: 0,
            overloaded: false,
        };
        let schedule = Schedule { decls: [50, 30, 50, 90, 10].map(decl).to_vec(), ..Schedule::default() };
        let mut rank = vec![7; 9];
        deadline_ranks(&schedule, &mut rank);
        assert_eq!(rank, vec![2, 1, 2, 3, 0]);
    }

    #[test]
    fn full_regions_refuse_pins_and_pins_expire() {
        let mut cache = PinCache::new(1, 15);
        cache.admit([directive(1, 0, 2, 50), directive(2, 0, 2, 50)]);
        assert_eq!(cache.refused_bytes, 10);
        let second = ChunkRef { block: BlockId(2), copy: 0 };
        assert_eq!(cache.read(second, TaskKind::Scrubbing), None);
        assert_eq!(cache.read(second, TaskKind::Fsck), None, "a refused pin caches nothing");
        let first = ChunkRef { block: BlockId(1), copy: 0 };
        assert_eq!(cache.read(first, TaskKind::Scrubbing), None);
        cache.expire(Timestamp(50));
        assert_eq!(cache.read(first, TaskKind::Fsck), None, "expired");
        assert_eq!(cache.max_disk_pinned, 10);
        assert_eq!(cache.max_disk_wanted, 20, "the refused pin counts as needed");
    }
}
