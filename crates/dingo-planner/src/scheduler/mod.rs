//! The rate-based scheduler (DESIGN §3): decides which outstanding sets to
//! serve in one quantum without exceeding its budget.
//!
//! Pass 1 walks declarations by priority (late first, then highest rate in
//! bytes per quantum) and gives each its quota — the sets it needs this
//! quantum to stay on pace — preferring sets with the most blocks already
//! scheduled. Pass 2 adds every set that has become entirely free. An
//! optional fill pass spends leftover budget in deadline order.
//!
//! Invariants (checked by the property tests):
//! - only physical reads (a copy's first scheduling this quantum) count
//!   against the budget, and no disk and no cluster total ever exceeds it;
//! - a set is delivered at most once, and a declaration never gets more
//!   than its `sets_needed`, nor any set in a quantum after the one in
//!   which its delivered bytes reached its `bytes_needed`;
//! - a set whose blocks are all deleted is elided, never delivered.

use crate::accounting::QuantumReport;
use crate::config::{Budget, LeftoverPolicy, PlannerConfig};
use crate::declaration::DeclState;
use crate::sets::{Sets, none_in};
use dingo_types::{BlockInfo, BlockState, ChunkRef, DiskId, DiskModel, Member, Timestamp, Topology};
use roaring::RoaringTreemap;
use std::ops::Deref;

mod block_bytes;
mod choose;
mod free_pass;
mod lookup;
mod pending;
mod schedule;

pub use block_bytes::BlockBytes;
pub use schedule::{ChunkRead, MAX_SCHEDULED_BLOCK_ID, MAX_SCHEDULED_DISKS, Schedule, ScheduledDecl, ScheduledSet};

/// A walk through one declaration gives up after this many sets in a row
/// that did not fit (a hot disk, a lost copy), so one quantum's work stays
/// bounded even for declarations of billions of sets.
const MAX_CONSECUTIVE_MISFITS: u32 = 4096;

/// Keys fetched from a declaration per step of a walk.
const WALK_BATCH: usize = 1024;

/// Head time of a read of `bytes` on a disk of `model`, through `memo`:
/// the last model and size asked for, and their head time.
fn head_time_us(memo: &mut (DiskModel, u64, u64), model: DiskModel, bytes: u64) -> u64 {
    if memo.0 != model || memo.1 != bytes {
        *memo = (model, bytes, model.head_time_us(bytes));
    }
    memo.2
}

/// Outcome of trying to take one set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Take {
    Taken,
    /// Every block of the set is deleted: elided, never delivered.
    Elided,
    /// A needed copy is lost or the set would overdrive a disk.
    Misfit,
    /// The cluster-wide budget cannot pay for it.
    OverClusterBudget,
    /// Its task's rate cap cannot pay for it.
    OverTaskCap,
}

/// What a quantum has scheduled so far: built by pass 1, only read by
/// the free pass.
#[derive(Debug, Default)]
struct Scheduled {
    /// Blocks with at least one copy scheduled.
    blocks: RoaringTreemap,
    /// `copies[c]`: blocks whose copy `c` is scheduled.
    copies: Vec<RoaringTreemap>,
    /// Head time scheduled per disk, indexed by disk id.
    disk_used_us: Vec<u64>,
}

/// A quantum's [`Scheduled`] state, owned by the one thread that schedules
/// physical reads or borrowed by a free-pass worker, which reads it beside
/// other workers and must never add to it.
enum SharedScheduled<'a> {
    Owned(Scheduled),
    Borrowed(&'a Scheduled),
}

impl Deref for SharedScheduled<'_> {
    type Target = Scheduled;

    fn deref(&self) -> &Scheduled {
        match self {
            SharedScheduled::Owned(s) => s,
            SharedScheduled::Borrowed(s) => s,
        }
    }
}

impl SharedScheduled<'_> {
    fn owned(&mut self) -> &mut Scheduled {
        match self {
            SharedScheduled::Owned(s) => s,
            SharedScheduled::Borrowed(_) => panic!("the free pass scheduled a physical read"),
        }
    }
}

/// Working state of one quantum.
struct QuantumState<'a, T: Topology> {
    topo: &'a T,
    budget: &'a Budget,
    scheduled: SharedScheduled<'a>,
    cluster_left: u64,
    /// Disk bytes each task may still be scheduled ([`crate::TaskCaps`]).
    task_left: [u64; dingo_types::TaskKind::COUNT],
    exhausted: bool,
    schedule: Schedule,
    report: QuantumReport,
    // Scratch buffers reused across sets.
    members: Vec<Member>,
    /// Disks of the copies of the block being resolved, by copy number.
    copy_disks: Vec<Option<DiskId>>,
    /// For the range set being resolved: each block's scheduled copy.
    range_copies: Vec<Option<u8>>,
    /// For the range set being resolved: each block and its copies'
    /// disks ([`Topology::range_copies`]).
    range_infos: Vec<Option<BlockInfo>>,
    range_disks: Vec<Option<DiskId>>,
    staged: Vec<ChunkRead>,
    /// The size of each staged read's block.
    staged_bytes: Vec<u64>,
    /// Head time of each staged read that goes to disk (0 for a free
    /// read), computed once while checking the budget and reused when
    /// committing.
    staged_us: Vec<u64>,
    pending_us: pending::PendingHeadTime,
    keys: Vec<u64>,
    /// The last disk model and request size asked for, and their head
    /// time: nearly every read of a cluster has the same two.
    head_memo: (DiskModel, u64, u64),
}

/// Schedules one quantum starting at `now` into `buffers` (a spent
/// schedule whose vectors are reused, or an empty one). `decls` must
/// already be in priority order. Marks what it schedules as delivered in
/// `decls`.
pub(crate) fn schedule_quantum<T: Topology + Sync>(
    decls: &mut [&mut DeclState],
    topo: &T,
    now: Timestamp,
    config: &PlannerConfig,
    budget: &Budget,
    buffers: Schedule,
    worker_spares: &mut Vec<Schedule>,
) -> (Schedule, QuantumReport) {
    // A schedule's reads name disks in 24 bits ([`ChunkRead`]).
    assert!(topo.disk_count() <= MAX_SCHEDULED_DISKS, "{} disks, more than a schedule can name", topo.disk_count());
    let mut schedule = buffers;
    schedule.start = now;
    schedule.clear();
    let scheduled = Scheduled { disk_used_us: vec![0; topo.disk_count() as usize], ..Scheduled::default() };
    let mut q = QuantumState::new(topo, budget, SharedScheduled::Owned(scheduled), schedule);
    q.task_left = config.task_caps.per_quantum(config.quantum);
    for d in decls.iter() {
        q.schedule.decls.push(ScheduledDecl {
            id: d.id,
            task: d.task,
            deadline: d.deadline,
            quota: d.quota(now, config.quantum),
            taken: 0,
            overloaded: false,
        });
    }

    // Pass 1: every declaration's quota, by priority, free sets first.
    for (i, d) in decls.iter_mut().enumerate() {
        let mut taken = q.take(d, i as u32, q.schedule.decls[i].quota);
        // A byte-flexible quota counts sets of the mean size, and the sets
        // taken may be smaller: in its last quantum (or late) it takes more
        // until its bytes are met, or it would miss with budget to spare.
        if d.bytes_needed.is_some() && d.quanta_left(now, config.quantum) <= 1 {
            loop {
                let more = q.take(d, i as u32, d.needed_left());
                if more == 0 {
                    break;
                }
                taken += more;
            }
        }
        q.schedule.decls[i].taken = taken;
    }
    // Pass 2: every set that became entirely free, regardless of budget.
    q.free_pass(decls, config.free_pass_threads, worker_spares);
    if config.leftover == LeftoverPolicy::Fill {
        let mut by_deadline: Vec<usize> = (0..decls.len()).collect();
        by_deadline.sort_by_key(|&i| (decls[i].deadline, decls[i].id));
        for i in by_deadline {
            if q.exhausted {
                break;
            }
            let left = decls[i].needed_left();
            q.schedule.decls[i].taken += q.walk(decls[i], i as u32, left);
        }
    }
    for (sd, d) in q.schedule.decls.iter_mut().zip(decls.iter()) {
        sd.overloaded = d.missed || (sd.taken < sd.quota);
    }
    for set in &q.schedule.sets {
        let decl = &q.schedule.decls[set.decl as usize];
        if decl.overloaded {
            q.report.tasks[decl.task.index()].overloaded_sets += 1;
        }
    }
    q.report.max_disk_head_time_us = q.scheduled.disk_used_us.iter().copied().max().unwrap_or(0);
    q.report.total_head_time_us = q.scheduled.disk_used_us.iter().sum();
    q.report.budget_exhausted = q.exhausted;
    // The budget invariants of the module doc, checked per quantum (one
    // pass over the disks) where the property tests check them per run.
    debug_assert!(
        q.scheduled.disk_used_us.iter().enumerate().all(|(disk, &us)| us <= budget.disk_limit_us(disk as u32)),
        "a disk's head-time budget was exceeded"
    );
    debug_assert!(q.report.total().disk_bytes <= budget.cluster_bytes, "the cluster's byte budget was exceeded");
    (q.schedule, q.report)
}

impl<'a, T: Topology> QuantumState<'a, T> {
    fn new(topo: &'a T, budget: &'a Budget, scheduled: SharedScheduled<'a>, schedule: Schedule) -> Self {
        QuantumState {
            topo,
            budget,
            scheduled,
            cluster_left: budget.cluster_bytes,
            task_left: [u64::MAX; dingo_types::TaskKind::COUNT],
            exhausted: false,
            schedule,
            report: QuantumReport::default(),
            members: Vec::new(),
            copy_disks: Vec::new(),
            range_copies: Vec::new(),
            range_infos: Vec::new(),
            range_disks: Vec::new(),
            staged: Vec::new(),
            staged_bytes: Vec::new(),
            staged_us: Vec::new(),
            pending_us: pending::PendingHeadTime::default(),
            keys: Vec::new(),
            head_memo: (DiskModel::HDD, 0, DiskModel::HDD.head_time_us(0)),
        }
    }

    /// Takes up to `limit` outstanding sets of `d` within the budget: those
    /// sharing blocks with what is scheduled first, then the rest in order.
    fn take(&mut self, d: &mut DeclState, decl: u32, limit: u64) -> u64 {
        let mut taken = self.take_touching(d, decl, limit, false);
        if taken < limit && !self.exhausted {
            taken += self.walk(d, decl, limit - taken);
        }
        taken
    }

    /// Takes up to `limit` outstanding sets of `d` that share a block with
    /// what is already scheduled, most free blocks first. With `only_free`,
    /// takes only sets whose live blocks are all scheduled already (these
    /// cost nothing and ignore the budget).
    fn take_touching(&mut self, d: &mut DeclState, decl: u32, limit: u64, only_free: bool) -> u64 {
        if limit == 0 || self.scheduled.blocks.is_empty() {
            return 0;
        }
        let mut keys = std::mem::take(&mut self.keys);
        d.sets.touching(&self.scheduled.blocks, Some(&self.scheduled.copies), &mut keys);
        if matches!(d.sets, Sets::Singletons { .. }) {
            let taken = self.take_free_singletons(d, decl, &keys[..keys.len().min(limit as usize)]);
            self.keys = keys;
            return taken;
        }
        // Rank by free blocks, most first.
        let mut ranked: Vec<(u64, u64)> = keys
            .iter()
            .filter_map(|&key| {
                let free = match d.sets.range(key) {
                    Some(range) => {
                        let (free, all_free) = self.range_free(range, only_free);
                        (!only_free || all_free).then_some(free)
                    }
                    None => self.free_members(&d.sets, key, only_free),
                };
                free.map(|free| (key, free))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        keys.clear();
        keys.extend(ranked.into_iter().map(|(key, _)| key));
        let mut taken = 0;
        for &key in &keys {
            if taken == limit {
                break;
            }
            if self.try_take(d, decl, key, !only_free) == Take::Taken {
                taken += 1;
            }
        }
        self.keys = keys;
        taken
    }

    /// Takes the singleton sets `keys`, each naming a chunk scheduled
    /// already this quantum (so live, on a live disk, and free): the bulk
    /// path for sets riding on other reads (rebalancing candidates,
    /// scrubbed copies), with no budget checks and one bitmap subtraction.
    fn take_free_singletons(&mut self, d: &mut DeclState, decl: u32, keys: &[u64]) -> u64 {
        let mut bytes = 0;
        for &key in keys {
            let chunk = match Member::from_key(key) {
                Member::Copy(c) => c,
                Member::Any(b) => {
                    ChunkRef { block: b, copy: self.scheduled_copy(b).expect("touching found it scheduled") }
                }
            };
            let info = self.topo.block_copies(chunk.block, &mut self.copy_disks).expect("a scheduled block exists");
            let disk = self.copy_disks[usize::from(chunk.copy)].expect("a scheduled chunk is on a live disk");
            let first_read = u32::try_from(self.schedule.reads.len()).expect("over 4G reads in one quantum");
            self.schedule.reads.push(ChunkRead::new(chunk.block, chunk.copy, disk, info.group, false));
            self.schedule.block_bytes.record(chunk.block, info.size);
            self.schedule.sets.push(ScheduledSet { decl, first_read, key });
            bytes += info.size;
        }
        let taken = keys.len() as u64;
        let stats = self.report.task_mut(d.task);
        stats.logical_bytes += bytes;
        stats.free_bytes += bytes;
        stats.sets_delivered += taken;
        let removed = d.sets.remove_all(keys);
        assert_eq!(removed, taken, "a set of {} scheduled twice", d.id);
        d.delivered += taken;
        d.delivered_bytes += bytes;
        debug_assert!(d.sets_needed.is_none_or(|n| d.delivered <= n), "{} over-delivered", d.id);
        taken
    }

    /// Takes up to `limit` sets of `d` in key order, within budget.
    fn walk(&mut self, d: &mut DeclState, decl: u32, limit: u64) -> u64 {
        let mut taken = 0;
        let mut misfits = 0;
        let mut cursor = 0;
        let mut batch = Vec::with_capacity(WALK_BATCH);
        while taken < limit {
            batch.clear();
            d.sets.next_keys(cursor, WALK_BATCH, &mut batch);
            let Some(&last) = batch.last() else { break };
            for &key in &batch {
                if taken == limit {
                    return taken;
                }
                match self.try_take(d, decl, key, true) {
                    Take::Taken => {
                        taken += 1;
                        misfits = 0;
                    }
                    Take::Elided => {}
                    Take::Misfit => {
                        misfits += 1;
                        if misfits >= MAX_CONSECUTIVE_MISFITS {
                            return taken;
                        }
                    }
                    Take::OverClusterBudget => {
                        self.exhausted = true;
                        return taken;
                    }
                    Take::OverTaskCap => return taken,
                }
            }
            cursor = last + 1;
        }
        taken
    }

    /// Resolves set `key` of `d` to chunk reads and takes it if it fits
    /// (always, when `enforce` is false or it costs nothing).
    fn try_take(&mut self, d: &mut DeclState, decl: u32, key: u64, enforce: bool) -> Take {
        self.members.clear();
        d.sets.members(key, &mut self.members);
        self.staged.clear();
        self.staged_bytes.clear();
        self.staged_us.clear();
        self.pending_us.clear();
        // A range (a stretch of a file) is looked up at once, not block by block.
        let range_start = d.sets.range(key).map(|r| {
            self.find_range_copies(r.clone());
            self.topo.range_copies(r.clone(), &mut self.range_infos, &mut self.range_disks);
            r.start
        });
        let mut range_disks_at = 0;
        let mut new_bytes = 0u64;
        let mut deleted_bytes = 0u64;
        // Live members no copy of which can be read now (lost, or on a dead
        // disk): they may be readable again later.
        let mut unreadable = 0usize;
        // A set needing only some of its members stages every member it
        // can read, then keeps the cheapest ([`Self::choose_staged`]).
        let choose = d.sets.needed(key);
        for i in 0..self.members.len() {
            let m = self.members[i];
            let b = m.block();
            let info = match self.block_copies(b, range_start, &mut range_disks_at) {
                Some(info) if info.state != BlockState::Deleted => info,
                deleted => {
                    deleted_bytes += deleted.map_or(0, |info| info.size);
                    continue;
                }
            };
            let copy_disk = |copy: u8| self.copy_disks.get(usize::from(copy)).copied().flatten();
            let resolved = match m {
                Member::Copy(c) => copy_disk(c.copy).map(|disk| {
                    (c.copy, disk, self.scheduled.copies.get(usize::from(c.copy)).is_some_and(|s| s.contains(b.0)))
                }),
                Member::Any(_) => match range_start
                    .map_or_else(|| self.scheduled_copy(b), |start| self.range_copies[(b.0 - start) as usize])
                {
                    Some(copy) => copy_disk(copy).map(|disk| (copy, disk, true)),
                    None => self.pick_copy().map(|(copy, disk)| (copy, disk, false)),
                },
            };
            let Some((copy, disk, free)) = resolved else {
                if choose.is_some() {
                    // Lost or unreadable: another member stands in.
                    unreadable += 1;
                    continue;
                }
                return Take::Misfit;
            };
            let mut us = 0;
            if !free {
                us = head_time_us(&mut self.head_memo, self.topo.disk_model(disk), info.size);
                if choose.is_none() {
                    new_bytes += info.size;
                    self.pending_us.add(disk, us);
                }
            }
            self.staged_us.push(us);
            self.staged.push(ChunkRead::new(b, copy, disk, info.group, !free));
            self.staged_bytes.push(info.size);
        }
        if let Some(needed) = choose {
            // Fewer readable than needed: the set waits, unless members
            // were deleted and every live one can be read now: then the
            // live ones are all there is to read. A live member unreadable
            // for now is waited for, so a set is never elided while one of
            // its blocks lives (found by the planner DST: a 1-of-2 set with
            // one block deleted and the other on a dead node was elided).
            if self.staged.len() < needed as usize && (deleted_bytes == 0 || unreadable > 0) {
                return Take::Misfit;
            }
            new_bytes = self.choose_staged(needed as usize);
        }
        if self.staged.is_empty() {
            d.sets.remove(key);
            d.elided += 1;
            let stats = self.report.task_mut(d.task);
            stats.sets_elided += 1;
            stats.elided_bytes += deleted_bytes;
            return Take::Elided;
        }
        if enforce && new_bytes > 0 {
            if new_bytes > self.cluster_left {
                return Take::OverClusterBudget;
            }
            if new_bytes > self.task_left[d.task.index()] {
                return Take::OverTaskCap;
            }
            let over_disk = self.pending_us.iter().any(|(disk, us)| {
                self.scheduled.disk_used_us[disk.0 as usize].saturating_add(us) > self.budget.disk_limit_us(disk.0)
            });
            if over_disk {
                return Take::Misfit;
            }
        }
        self.commit(d, decl, key, deleted_bytes);
        Take::Taken
    }

    /// Marks the chunks of `run` scheduled: either one free read, or
    /// physical reads of one copy of consecutive blocks. A read of a chunk
    /// already scheduled (a set naming it twice) turns free; `distinct`
    /// says the set names each block once (a range), so that cannot happen.
    fn record_physical(&mut self, run: &mut [ChunkRead], distinct: bool) {
        if !run[0].physical() {
            return;
        }
        let scheduled = self.scheduled.owned();
        let copy = usize::from(run[0].copy());
        if scheduled.copies.len() <= copy {
            scheduled.copies.resize_with(copy + 1, RoaringTreemap::new);
        }
        let blocks = run[0].block().0..run[run.len() - 1].block().0 + 1;
        if run.len() > 1 && (distinct || none_in(&scheduled.copies[copy], blocks.clone())) {
            scheduled.copies[copy].insert_range(blocks.clone());
            scheduled.blocks.insert_range(blocks);
            return;
        }
        for read in run {
            *read = read.with_physical(scheduled.copies[copy].insert(read.block().0));
            if read.physical() {
                scheduled.blocks.insert(read.block().0);
            }
        }
    }

    /// Records the staged reads of set `key` as scheduled and delivered.
    fn commit(&mut self, d: &mut DeclState, decl: u32, key: u64, deleted_bytes: u64) {
        let removed = d.sets.remove(key);
        assert!(removed, "set {key} of {} scheduled twice", d.id);
        d.delivered += 1;
        d.delivered_bytes += self.staged_bytes.iter().sum::<u64>();
        debug_assert!(d.sets_needed.is_none_or(|n| d.delivered <= n), "{} over-delivered", d.id);
        let first_read = u32::try_from(self.schedule.reads.len()).expect("over 4G reads in one quantum");
        let mut stats = std::mem::take(self.report.task_mut(d.task));
        let mut staged = std::mem::take(&mut self.staged);
        let distinct = d.sets.range(key).is_some();
        let mut i = 0;
        while i < staged.len() {
            // A run of physical reads of one copy of consecutive blocks (a
            // file's stretch on one scheme) is recorded with range inserts.
            let mut end = i + 1;
            if staged[i].physical() {
                while end < staged.len()
                    && staged[end].physical()
                    && staged[end].copy() == staged[i].copy()
                    && staged[end].block().0 == staged[end - 1].block().0 + 1
                {
                    end += 1;
                }
            }
            self.record_physical(&mut staged[i..end], distinct);
            for ((read, &us), &bytes) in
                staged[i..end].iter().zip(&self.staged_us[i..end]).zip(&self.staged_bytes[i..end])
            {
                stats.logical_bytes += bytes;
                self.schedule.block_bytes.record(read.block(), bytes);
                if read.physical() {
                    self.scheduled.owned().disk_used_us[read.disk().0 as usize] += us;
                    self.cluster_left = self.cluster_left.saturating_sub(bytes);
                    self.task_left[d.task.index()] = self.task_left[d.task.index()].saturating_sub(bytes);
                    stats.disk_bytes += bytes;
                } else {
                    stats.free_bytes += bytes;
                }
            }
            i = end;
        }
        self.staged = staged;
        stats.sets_delivered += 1;
        stats.elided_bytes += deleted_bytes;
        *self.report.task_mut(d.task) = stats;
        self.schedule.reads.extend_from_slice(&self.staged);
        self.schedule.sets.push(ScheduledSet { decl, first_read, key });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableTopology;
    use dingo_types::BlockId;

    #[test]
    fn range_copies_agree_with_scheduled_copy() {
        let topo = TableTopology::new(3, DiskModel::HDD);
        let budget = Budget::cluster_bytes(u64::MAX);
        // Block 5 has copies 0 and 2 scheduled (the lowest wins), 6 copy 1,
        // 8 copy 2, 70,000 (another roaring container) copy 0.
        let scheduled = Scheduled {
            blocks: [5, 6, 8, 70_000].into_iter().collect(),
            copies: vec![[5, 70_000].into_iter().collect(), [6].into_iter().collect(), [5, 8].into_iter().collect()],
            disk_used_us: Vec::new(),
        };
        let mut q = QuantumState::new(&topo, &budget, SharedScheduled::Owned(scheduled), Schedule::default());
        for range in [0..4, 0..10, 5..9, 6..7, 9..70_000, 4..70_002, 70_001..70_010] {
            q.find_range_copies(range.clone());
            let expected: Vec<Option<u8>> = range.map(|b| q.scheduled_copy(BlockId(b))).collect();
            assert_eq!(q.range_copies, expected);
        }
    }
}
