//! The dispatcher (DESIGN §3): cuts one quantum's schedule into small groups
//! of sets that share redundancy groups, spaced evenly through the quantum,
//! so the cache only has to hold one group's shared chunks at a time.
//!
//! Sets are joined through an index from redundancy group (stripe) to the
//! first scheduled set touching it — a union-find over the schedule, linear
//! in the number of scheduled reads, with no pairwise search. Connected
//! components are then packed, in scheduling order (most urgent first), into
//! dispatch groups of about `physical bytes / dispatch_rounds` each. Within
//! a component, sets sharing a redundancy group come side by side. A
//! component whose shared chunks exceed the cache budget (the cluster's, or
//! one disk's pinned region) is split; a chunk whose readers end up in two
//! groups is then read twice, which is counted as `split_loss_bytes`.
//!
//! Free reads are attributed here to the task that paid for the disk read:
//! a chunk's readers all share its redundancy group, so they fall in one
//! component, where the set the planner gave the chunk's disk read to is
//! the paying one, wherever it comes in its dispatch group. A small
//! per-component table does it, where a table over the whole quantum would
//! miss the CPU cache on every probe.

mod components;

use crate::config::PlannerConfig;
use crate::scheduler::{BlockBytes, ChunkRead, Schedule};
use components::{OrderScratch, component_order};
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, GroupId, Member, TaskKind, Timestamp};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Keep `chunk` on `disk`'s node in the reserved cache region, once read,
/// until `until` or until `readers` reads have been served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheDirective {
    pub chunk: ChunkRef,
    pub disk: DiskId,
    pub bytes: u64,
    pub readers: u32,
    pub until: Timestamp,
}

/// One chunk a group pins, as a [`Dispatch`] holds it: 16 bytes where a
/// [`CacheDirective`] takes 40. The replay of a 1 EB quantum holds tens of
/// millions of them at once; a pin's size follows from the schedule and
/// its lapse time from its group, so [`Dispatch::pins_of`] gives them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPin {
    /// The chunk's [`Member::Copy`] key.
    chunk_key: u64,
    disk: DiskId,
    readers: u32,
}

impl GroupPin {
    /// Readers outside this module take whole directives from
    /// [`Dispatch::pins_of`].
    fn chunk(&self) -> ChunkRef {
        let Member::Copy(chunk) = Member::from_key(self.chunk_key) else { unreachable!("pins are of copies") };
        chunk
    }
}

/// One dispatch round: callbacks for its sets, preceded by its directives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchGroup {
    pub at: Timestamp,
    /// Range of [`Dispatch::order`]: indexes into [`Schedule::sets`].
    pub sets: Range<u32>,
    /// Range of [`Dispatch::pins`].
    pub pins: Range<u32>,
    /// When the group's pins lapse: the next group's time plus the grace.
    pub pins_until: Timestamp,
    /// Bytes this group reads from disk.
    pub disk_bytes: u64,
    /// Bytes it pins in the cache.
    pub pinned_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    pub groups: Vec<DispatchGroup>,
    pub order: Vec<u32>,
    pub pins: Vec<GroupPin>,
    /// Extra disk bytes caused by splitting components over the cache budget.
    pub split_loss_bytes: u64,
    /// Largest `pinned_bytes` of any group: the cache the quantum needs.
    pub max_pinned_bytes: u64,
    /// `free_bytes_from[rider][payer]`: bytes a task read free because a
    /// set of another (or the same) task paid for the disk read, indexed
    /// by [`TaskKind::index`].
    pub free_bytes_from: [[u64; TaskKind::COUNT]; TaskKind::COUNT],
}

/// One callback: some sets of one declaration, each resolved to the exact
/// chunk reads to issue. Deleted members are left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callback {
    pub declaration: DeclarationId,
    pub task: TaskKind,
    pub overloaded: bool,
    pub sets: Vec<DeliveredSet>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveredSet {
    /// The set's key within its declaration.
    pub key: u64,
    pub reads: Vec<DeliveredRead>,
}

/// One read of a delivered set: a [`ChunkRead`] with its size, which the
/// schedule keeps apart ([`Schedule::read_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveredRead {
    pub block: BlockId,
    pub copy: u8,
    pub disk: DiskId,
    pub group: GroupId,
    pub bytes: u64,
    /// False when another set's read of the chunk pays for it.
    pub physical: bool,
}

impl DeliveredRead {
    pub fn chunk(&self) -> ChunkRef {
        ChunkRef { block: self.block, copy: self.copy }
    }
}

impl Dispatch {
    /// The callbacks of group `g`, one per declaration, in scheduling order.
    pub fn callbacks(&self, schedule: &Schedule, g: usize) -> Vec<Callback> {
        let group = &self.groups[g];
        let mut set_indexes: Vec<u32> = self.order[group.sets.start as usize..group.sets.end as usize].to_vec();
        set_indexes.sort_by_key(|&s| (schedule.sets[s as usize].decl, s));
        let mut callbacks: Vec<Callback> = Vec::new();
        for s in set_indexes {
            let set = &schedule.sets[s as usize];
            let decl = &schedule.decls[set.decl as usize];
            let reads = schedule.reads_of(s as usize).iter().map(|r| DeliveredRead {
                block: r.block(),
                copy: r.copy(),
                disk: r.disk(),
                group: r.group(),
                bytes: schedule.read_bytes(r),
                physical: r.physical(),
            });
            let delivered = DeliveredSet { key: set.key, reads: reads.collect() };
            match callbacks.last_mut() {
                Some(cb) if cb.declaration == decl.id => cb.sets.push(delivered),
                _ => callbacks.push(Callback {
                    declaration: decl.id,
                    task: decl.task,
                    overloaded: decl.overloaded,
                    sets: vec![delivered],
                }),
            }
        }
        callbacks
    }

    /// Bytes `rider` read free on a disk read that `payer` paid for.
    pub fn free_bytes_from(&self, rider: TaskKind, payer: TaskKind) -> u64 {
        self.free_bytes_from[rider.index()][payer.index()]
    }

    /// The directives of group `g` (of a dispatch of `schedule`).
    pub fn pins_of<'a>(
        &'a self,
        schedule: &'a Schedule,
        g: usize,
    ) -> impl ExactSizeIterator<Item = CacheDirective> + 'a {
        let group = &self.groups[g];
        self.pins[group.pins.start as usize..group.pins.end as usize].iter().map(move |p| {
            let chunk = p.chunk();
            CacheDirective {
                chunk,
                disk: p.disk,
                bytes: schedule.block_bytes.of(chunk.block),
                readers: p.readers,
                until: group.pins_until,
            }
        })
    }
}

/// Chunk count up to which a component's table is cleared and reused.
const SMALL_COMPONENT_CHUNKS: usize = 1024;

/// Per-chunk state while packing one component.
#[derive(Clone, Copy)]
struct ChunkUse {
    group: u32,
    readers: u32,
    disk: DiskId,
    /// The task whose read of the chunk goes to disk in this group, once
    /// seen.
    payer: Option<TaskKind>,
}

/// A dispatch group being packed.
struct OpenGroup {
    start: u32,
    disk_bytes: u64,
    pinned_bytes: u64,
    /// Bytes pinned on each disk (kept only under a per-disk budget), and
    /// the most on one.
    disk_pinned: FxHashMap<DiskId, u64>,
    max_disk_pinned: u64,
    /// Chunks first read in this group, to list its pins when it closes.
    chunks: Vec<u64>,
    /// Free reads not yet attributed, `(chunk, rider, bytes)`: the paying
    /// read may come later in the group.
    riders: Vec<(u64, TaskKind, u64)>,
}

/// A packed dispatch group.
struct ClosedGroup {
    sets: Range<u32>,
    disk_bytes: u64,
    pinned_bytes: u64,
    pins_end: u32,
}

/// Packs components into dispatch groups.
struct Packer {
    cache_budget: u64,
    /// Cache bytes a group may pin on one disk ([`PlannerConfig::group_disk_cache_bytes`]).
    disk_cache_budget: u64,
    /// Pins a set would add, per disk (scratch of [`Packer::would_overflow`]).
    added_on_disk: Vec<(DiskId, u64)>,
    /// Chunks of the current component (never shared across components).
    chunks: FxHashMap<u64, ChunkUse>,
    open: OpenGroup,
    /// Closed groups: their sets (positions in the order), disk bytes,
    /// pinned bytes and the end of their pins in `pins`.
    closed: Vec<ClosedGroup>,
    /// Pins, group after group.
    pins: Vec<GroupPin>,
    split_loss_bytes: u64,
    free_bytes_from: [[u64; TaskKind::COUNT]; TaskKind::COUNT],
    /// Whether lone sets skip the chunk table ([`Packer::add_alone`]);
    /// tests turn it off to compare with the general path.
    lone_path: bool,
}

impl Packer {
    fn group_index(&self) -> u32 {
        self.closed.len() as u32
    }

    /// Lists the pins of the chunks the open group read since the last
    /// flush, and attributes its free reads.
    fn flush_pins(&mut self) {
        self.settle_riders();
        let g = self.group_index();
        for key in self.open.chunks.drain(..) {
            let u = &self.chunks[&key];
            if u.group == g && u.readers >= 2 {
                self.pins.push(GroupPin { chunk_key: key, disk: u.disk, readers: u.readers });
            }
        }
    }

    /// Attributes the open group's free reads to the task whose read of
    /// their chunk goes to disk in the group. A chunk whose disk read is
    /// in another group (of a split component) is read again here by its
    /// first rider, which pays.
    fn settle_riders(&mut self) {
        for (key, rider, bytes) in self.open.riders.drain(..) {
            let u = self.chunks.get_mut(&key).expect("a rider's chunk is in the table");
            match u.payer {
                Some(payer) => self.free_bytes_from[rider.index()][payer.index()] += bytes,
                None => {
                    self.split_loss_bytes += bytes;
                    self.open.disk_bytes += bytes;
                    u.payer = Some(rider);
                }
            }
        }
    }

    /// Ends the current component: its chunks cannot recur later.
    fn end_component(&mut self) {
        self.flush_pins();
        if self.chunks.is_empty() {
            // A lone set's component used no table (`add_alone`).
            return;
        }
        // `clear` costs the map's capacity, not its length: after a large
        // component, drop the table instead of clearing it for every one
        // of the millions of small components that follow.
        if self.chunks.capacity() > SMALL_COMPONENT_CHUNKS {
            self.chunks = FxHashMap::default();
        } else {
            self.chunks.clear();
        }
    }

    fn close(&mut self, end: u32) {
        self.flush_pins();
        self.closed.push(ClosedGroup {
            sets: self.open.start..end,
            disk_bytes: self.open.disk_bytes,
            pinned_bytes: self.open.pinned_bytes,
            pins_end: u32::try_from(self.pins.len()).expect("under 4G pins in one quantum"),
        });
        self.open.start = end;
        self.open.disk_bytes = 0;
        self.open.pinned_bytes = 0;
        self.open.disk_pinned.clear();
        self.open.max_disk_pinned = 0;
    }

    /// Whether adding `reads` to the open group `g` would take its pins
    /// past the cluster's or one disk's budget: a chunk read once in the
    /// group so far is pinned by a second reader.
    fn would_overflow(&mut self, reads: &[ChunkRead], sizes: &BlockBytes, g: u32) -> bool {
        let mut added = 0;
        self.added_on_disk.clear();
        for r in reads {
            let key = Member::Copy(r.chunk()).key();
            if !self.chunks.get(&key).is_some_and(|u| u.group == g && u.readers == 1) {
                continue;
            }
            let bytes = sizes.of(r.block());
            added += bytes;
            match self.added_on_disk.iter_mut().find(|(disk, _)| *disk == r.disk()) {
                Some((_, on_disk)) => *on_disk += bytes,
                None => self.added_on_disk.push((r.disk(), bytes)),
            }
        }
        self.open.pinned_bytes + added > self.cache_budget
            || self.added_on_disk.iter().any(|(disk, bytes)| {
                self.open.disk_pinned.get(disk).copied().unwrap_or(0) + bytes > self.disk_cache_budget
            })
    }

    /// Adds the set at position `pos` of the order, with its reads (their
    /// blocks' sizes in `sizes`), for `task`; `alone`: the set is a
    /// component of its own.
    fn add(&mut self, pos: u32, reads: &[ChunkRead], sizes: &BlockBytes, task: TaskKind, alone: bool) {
        if alone && self.lone_path && distinct_chunks(reads) {
            self.add_alone(pos, reads, sizes);
            return;
        }
        let g = self.group_index();
        // The set pins at most all its bytes, on one disk at worst: only
        // near a budget is it worth looking its chunks up to count what it
        // would add.
        let at_most: u64 = reads.iter().map(|r| sizes.of(r.block())).sum();
        let near_budget = self.open.pinned_bytes + at_most > self.cache_budget
            || self.open.max_disk_pinned + at_most > self.disk_cache_budget;
        if pos > self.open.start && near_budget && self.would_overflow(reads, sizes, g) {
            self.close(pos);
        }
        let g = self.group_index();
        for r in reads {
            let bytes = sizes.of(r.block());
            let key = Member::Copy(r.chunk()).key();
            let first_use = ChunkUse { group: g, readers: 0, disk: r.disk(), payer: None };
            let entry = self.chunks.entry(key).or_insert(first_use);
            if entry.group != g {
                // Read in an earlier group of a split component: its pin has
                // lapsed by now (a free read here is read again).
                *entry = first_use;
            }
            if r.physical() {
                self.open.disk_bytes += bytes;
                entry.payer = Some(task);
            } else if let Some(payer) = entry.payer {
                self.free_bytes_from[task.index()][payer.index()] += bytes;
            } else {
                // The paying read may come later in the group.
                self.open.riders.push((key, task, bytes));
            }
            entry.readers += 1;
            if entry.readers == 1 {
                self.open.chunks.push(key);
            } else if entry.readers == 2 {
                self.open.pinned_bytes += bytes;
                if self.disk_cache_budget != u64::MAX {
                    let on_disk = self.open.disk_pinned.entry(entry.disk).or_insert(0);
                    *on_disk += bytes;
                    self.open.max_disk_pinned = self.open.max_disk_pinned.max(*on_disk);
                }
            }
        }
    }
}

impl Packer {
    /// [`Self::add`] for a set alone in its component that names each
    /// chunk once (most sets of a quantum: a file, a scrubbed chunk): each
    /// of its chunks has one reader, which reads it from disk, so nothing
    /// is pinned and the chunk table would only record what is thrown away
    /// at the component's end. The same effect as the general path,
    /// without a table probe per read.
    fn add_alone(&mut self, pos: u32, reads: &[ChunkRead], sizes: &BlockBytes) {
        debug_assert!(self.chunks.is_empty() && self.open.chunks.is_empty(), "a component starts empty");
        // The general path's check with no chunk already in the table:
        // the set adds no pin, so only a group already over closes.
        if pos > self.open.start && self.open.pinned_bytes > self.cache_budget {
            self.close(pos);
        }
        for r in reads {
            // A free read with no paying read in its group is read again.
            self.open.disk_bytes += sizes.of(r.block());
            if !r.physical() {
                self.split_loss_bytes += sizes.of(r.block());
            }
        }
    }
}

/// Whether `reads` name each chunk at most once, judged by their being in
/// strictly ascending chunk order (ranges and stripes are listed that way;
/// anything else takes the general path).
fn distinct_chunks(reads: &[ChunkRead]) -> bool {
    reads.windows(2).all(|w| (w[0].block(), w[0].copy()) < (w[1].block(), w[1].copy()))
}

pub fn dispatch(schedule: &Schedule, config: &PlannerConfig) -> Dispatch {
    let mut out = Dispatch::default();
    dispatch_into(schedule, config, &mut DispatchScratch::default(), &mut out);
    out
}

/// Working memory of [`dispatch_into`], kept from one quantum to the next:
/// a large quantum's dispatch fills hundreds of megabytes of scratch, and
/// fresh vectors cost a page fault per 4 KiB written.
#[derive(Default)]
pub struct DispatchScratch {
    /// Positions in the order where a component starts.
    component_starts: Vec<u32>,
    ordering: OrderScratch,
    chunks: FxHashMap<u64, ChunkUse>,
    open_chunks: Vec<u64>,
    disk_pinned: FxHashMap<DiskId, u64>,
    riders: Vec<(u64, TaskKind, u64)>,
    closed: Vec<ClosedGroup>,
    /// Give the component ordering's memory back once it is done
    /// ([`DispatchScratch::lean`]).
    lean: bool,
}

impl DispatchScratch {
    /// Scratch for schedules of gigabytes, one quantum's dispatch alive at
    /// a time: the component ordering's working memory (8 bytes a read and
    /// about 20 a set) is given back before the groups are packed, where
    /// the default keeps it for the next quantum, through the packing and
    /// whatever the caller does with the dispatch. A 1 EB quantum's peak
    /// was its replay, with this memory still held. Same dispatch either way.
    pub fn lean() -> DispatchScratch {
        DispatchScratch { lean: true, ..DispatchScratch::default() }
    }
}

impl std::fmt::Debug for DispatchScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatchScratch").finish_non_exhaustive()
    }
}

/// [`dispatch`] into `out` (cleared first), reusing `out`'s vectors and
/// `scratch`: the same result, without fresh memory every quantum.
pub fn dispatch_into(schedule: &Schedule, config: &PlannerConfig, scratch: &mut DispatchScratch, out: &mut Dispatch) {
    dispatch_with(schedule, config, scratch, out, true);
}

/// [`dispatch_into`], with or without the lone-set path.
fn dispatch_with(
    schedule: &Schedule,
    config: &PlannerConfig,
    scratch: &mut DispatchScratch,
    out: &mut Dispatch,
    lone_path: bool,
) {
    out.groups.clear();
    out.order.clear();
    out.pins.clear();
    out.split_loss_bytes = 0;
    out.max_pinned_bytes = 0;
    out.free_bytes_from = [[0; TaskKind::COUNT]; TaskKind::COUNT];
    if schedule.sets.is_empty() {
        return;
    }
    let mut order = std::mem::take(&mut out.order);
    let mut component_starts = std::mem::take(&mut scratch.component_starts);
    component_order(schedule, &mut scratch.ordering, &mut order, &mut component_starts);
    if scratch.lean {
        scratch.ordering = OrderScratch::default();
    }
    let rounds = u64::from(config.dispatch_rounds.max(1));
    let target_bytes = schedule.physical_bytes().div_ceil(rounds).max(1);
    let mut chunks = std::mem::take(&mut scratch.chunks);
    chunks.clear();
    let mut open_chunks = std::mem::take(&mut scratch.open_chunks);
    open_chunks.clear();
    let mut closed = std::mem::take(&mut scratch.closed);
    closed.clear();
    let mut disk_pinned = std::mem::take(&mut scratch.disk_pinned);
    disk_pinned.clear();
    let mut packer = Packer {
        cache_budget: config.group_cache_bytes,
        disk_cache_budget: config.group_disk_cache_bytes,
        added_on_disk: Vec::new(),
        chunks,
        open: OpenGroup {
            start: 0,
            disk_bytes: 0,
            pinned_bytes: 0,
            disk_pinned,
            max_disk_pinned: 0,
            chunks: open_chunks,
            riders: std::mem::take(&mut scratch.riders),
        },
        closed,
        pins: std::mem::take(&mut out.pins),
        split_loss_bytes: 0,
        free_bytes_from: [[0; TaskKind::COUNT]; TaskKind::COUNT],
        lone_path,
    };
    let mut next_component = component_starts.iter().copied().peekable();
    let sets = order.len() as u32;
    for (pos, &s) in order.iter().enumerate() {
        let pos = pos as u32;
        let starts = next_component.next_if_eq(&pos).is_some();
        if starts {
            packer.end_component();
            // A group that has its share of the quantum closes here.
            if pos > packer.open.start && packer.open.disk_bytes >= target_bytes {
                packer.close(pos);
            }
        }
        let alone = starts && next_component.peek().copied().unwrap_or(sets) == pos + 1;
        let set = &schedule.sets[s as usize];
        let task = schedule.decls[set.decl as usize].task;
        packer.add(pos, schedule.reads_of(s as usize), &schedule.block_bytes, task, alone);
    }
    packer.close(order.len() as u32);

    let spacing = u64::try_from(config.quantum.as_millis()).unwrap_or(u64::MAX) / packer.closed.len() as u64;
    let group_time = |g: usize| Timestamp(schedule.start.0 + spacing * g as u64);
    let grace = u64::try_from(config.pin_grace.as_millis()).unwrap_or(u64::MAX);
    out.order = order;
    out.split_loss_bytes = packer.split_loss_bytes;
    out.free_bytes_from = packer.free_bytes_from;
    out.pins = std::mem::take(&mut packer.pins);
    let mut pin_start = 0;
    let quantum_end = group_time(packer.closed.len());
    for (g, closed) in packer.closed.drain(..).enumerate() {
        let until = Timestamp(group_time(g + 1).0.saturating_add(grace));
        // A pin lapses with its group, so none lives past the quantum's
        // end by more than the grace.
        debug_assert!(until.0 <= quantum_end.0.saturating_add(grace), "a pin outlives its round");
        out.max_pinned_bytes = out.max_pinned_bytes.max(closed.pinned_bytes);
        out.groups.push(DispatchGroup {
            at: group_time(g),
            sets: closed.sets,
            pins: pin_start..closed.pins_end,
            pins_until: until,
            disk_bytes: closed.disk_bytes,
            pinned_bytes: closed.pinned_bytes,
        });
        pin_start = closed.pins_end;
    }
    scratch.component_starts = component_starts;
    scratch.chunks = packer.chunks;
    scratch.open_chunks = packer.open.chunks;
    scratch.disk_pinned = packer.open.disk_pinned;
    scratch.riders = packer.open.riders;
    scratch.closed = packer.closed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::{ScheduledDecl, ScheduledSet};
    use dingo_types::{BlockId, GroupId};

    /// A small deterministic generator (xorshift), enough to vary schedules.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// An empty schedule with one declaration of each of `tasks`.
    fn with_decls(tasks: impl Iterator<Item = TaskKind>) -> Schedule {
        let decls = tasks
            .enumerate()
            .map(|(i, task)| ScheduledDecl {
                id: DeclarationId(i as u64),
                task,
                deadline: Timestamp(1_000_000),
                quota: 0,
                taken: 0,
                overloaded: false,
            })
            .collect();
        Schedule { start: Timestamp(0), decls, ..Schedule::default() }
    }

    /// A schedule of lone sets and shared stripes: ranges of consecutive
    /// blocks, singletons, sets naming a chunk twice, and sets that share
    /// groups, with physical and free reads.
    fn schedule(seed: u64) -> Schedule {
        let mut rng = seed | 1;
        let mut out = with_decls((0..4).map(|i| TaskKind::ALL[i % TaskKind::COUNT]));
        for key in 0..200 {
            out.sets.push(ScheduledSet { decl: (next(&mut rng) % 4) as u32, first_read: out.reads.len() as u32, key });
            let start = next(&mut rng) % (100 + 400 * (seed % 5));
            let len = 1 + next(&mut rng) % 5;
            let twice = next(&mut rng).is_multiple_of(10);
            for b in start..start + len {
                let copy = (next(&mut rng) % 2) as u8;
                let physical = !next(&mut rng).is_multiple_of(3);
                let read = ChunkRead::new(BlockId(b), copy, DiskId((b % 7) as u32), GroupId(b / 3), physical);
                // Blocks of three sizes, so the sizes kept apart are used.
                out.block_bytes.record(BlockId(b), 10 + b % 3);
                out.reads.push(read);
                if twice {
                    out.reads.push(read.with_physical(false));
                }
            }
        }
        out
    }

    #[test]
    fn lone_sets_dispatch_exactly_as_through_the_chunk_table() {
        for seed in 0..50 {
            let s = schedule(seed);
            for (rounds, cache, disk_cache) in
                [(1, u64::MAX, u64::MAX), (4, 40, u64::MAX), (16, 0, u64::MAX), (3, 25, u64::MAX), (2, u64::MAX, 15)]
            {
                let config = PlannerConfig {
                    dispatch_rounds: rounds,
                    group_cache_bytes: cache,
                    group_disk_cache_bytes: disk_cache,
                    ..PlannerConfig::default()
                };
                let (mut fast, mut general) = (Dispatch::default(), Dispatch::default());
                let mut scratch = DispatchScratch::default();
                dispatch_with(&s, &config, &mut scratch, &mut fast, true);
                dispatch_with(&s, &config, &mut DispatchScratch::default(), &mut general, false);
                assert_eq!(fast, general, "seed {seed}, {rounds} rounds, cache {cache}, disk cache {disk_cache}");
                // Reused scratch gives the same again, and so does lean
                // scratch, twice (its ordering memory given back each time).
                let mut again = Dispatch::default();
                dispatch_with(&s, &config, &mut scratch, &mut again, true);
                assert_eq!(again, general);
                let mut lean = DispatchScratch::lean();
                for _ in 0..2 {
                    dispatch_with(&s, &config, &mut lean, &mut again, true);
                    assert_eq!(again, general, "lean scratch, seed {seed}");
                    assert_eq!(lean.ordering.capacity_bytes(), 0, "the ordering's memory given back");
                }
            }
        }
    }

    #[test]
    fn a_groups_pins_give_back_their_chunks_sizes_and_lapse_with_the_group() {
        assert_eq!(std::mem::size_of::<GroupPin>(), 16);
        for seed in 0..50 {
            let s = schedule(seed);
            let config = PlannerConfig { dispatch_rounds: 4, group_cache_bytes: 40, ..PlannerConfig::default() };
            let d = dispatch(&s, &config);
            for (g, group) in d.groups.iter().enumerate() {
                let pins: Vec<CacheDirective> = d.pins_of(&s, g).collect();
                assert_eq!(pins.len(), group.pins.len());
                for p in &pins {
                    assert_eq!(p.bytes, s.block_bytes.of(p.chunk.block), "seed {seed}: a pin's size is its block's");
                    assert_eq!(p.until, group.pins_until);
                    assert!(p.until > group.at && p.readers >= 2);
                    let readers = d.order[group.sets.start as usize..group.sets.end as usize]
                        .iter()
                        .flat_map(|&set| s.reads_of(set as usize))
                        .filter(|r| r.chunk() == p.chunk)
                        .count();
                    assert_eq!(p.readers as usize, readers, "seed {seed}: a pin expects its group's readers");
                }
                assert_eq!(pins.iter().map(|p| p.bytes).sum::<u64>(), group.pinned_bytes, "seed {seed}, group {g}");
            }
        }
    }

    /// One disk's chunks, each read by a scrub set and a rebalancing set,
    /// the stripes joined into one component by sets reading other blocks
    /// of two stripes each (a file's range, say): the sets in scheduling
    /// order are every scrub, every bridge, then every rebalance.
    fn one_disk_component() -> Schedule {
        let mut out = with_decls([TaskKind::Scrubbing, TaskKind::GarbageCollection, TaskKind::Rebalancing].into_iter());
        let read = |block: u64, disk: u32, group: u64, physical: bool| {
            ChunkRead::new(BlockId(block), 0, DiskId(disk), GroupId(group), physical)
        };
        let mut push = |decl: u32, reads: &[ChunkRead]| {
            let key = out.sets.len() as u64;
            out.sets.push(ScheduledSet { decl, first_read: out.reads.len() as u32, key });
            for r in reads {
                out.block_bytes.record(r.block(), 10);
                out.reads.push(*r);
            }
        };
        for i in 0..6 {
            push(0, &[read(i, 0, i, true)]);
        }
        for i in 0..5 {
            push(1, &[read(200 + 2 * i, 1, i, true), read(201 + 2 * i, 1, i + 1, true)]);
        }
        for i in 0..6 {
            push(2, &[read(i, 0, i, false)]);
        }
        out
    }

    /// Bytes pinned on `disk` by group `g`.
    fn pinned_on(d: &Dispatch, s: &Schedule, g: usize, disk: u32) -> u64 {
        d.pins_of(s, g).filter(|p| p.disk == DiskId(disk)).map(|p| p.bytes).sum()
    }

    #[test]
    fn a_group_pins_within_each_disks_budget_and_keeps_a_chunks_readers_together() {
        let s = one_disk_component();
        let unlimited = dispatch(&s, &PlannerConfig { dispatch_rounds: 1, ..PlannerConfig::default() });
        assert_eq!(unlimited.groups.len(), 1);
        assert_eq!(pinned_on(&unlimited, &s, 0, 0), 60, "every shared chunk pinned at once");
        let config = PlannerConfig { dispatch_rounds: 1, group_disk_cache_bytes: 20, ..PlannerConfig::default() };
        let d = dispatch(&s, &config);
        for g in 0..d.groups.len() {
            assert!(pinned_on(&d, &s, g, 0) <= 20, "group {g} pins {} on disk 0", pinned_on(&d, &s, g, 0));
        }
        // Sets of a stripe come side by side, so a split parts one chunk
        // from its second reader each time (in scheduling order, every
        // rebalance after the second would lose its pin: 40 bytes).
        assert_eq!(d.groups.len(), 3);
        assert_eq!(d.split_loss_bytes, 20);
        assert_eq!(d.groups.iter().map(|g| g.disk_bytes).sum::<u64>(), s.physical_bytes() + 20);
        assert_eq!(d.free_bytes_from(TaskKind::Rebalancing, TaskKind::Scrubbing), 40);
        assert_eq!(&d.order[..3], &[0, 6, 11], "stripe 0's scrub, bridge and rebalance first");
    }
}
