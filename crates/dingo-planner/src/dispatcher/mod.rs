//! The dispatcher (DESIGN §3): cuts one quantum's schedule into small groups
//! of sets that share redundancy groups, spaced evenly through the quantum,
//! so the cache only has to hold one group's shared chunks at a time.
//!
//! Sets are joined through an index from redundancy group (stripe) to the
//! first scheduled set touching it — a union-find over the schedule, linear
//! in the number of scheduled reads, with no pairwise search. Connected
//! components are then packed, in scheduling order (most urgent first), into
//! dispatch groups of about `physical bytes / dispatch_rounds` each. A
//! component whose shared chunks exceed the cache budget is split; a chunk
//! whose readers end up in two groups is then read twice, which is counted
//! as `split_loss_bytes`.
//!
//! Free reads are attributed here to the task that paid for the disk read:
//! a chunk's readers all share its redundancy group, so they fall in one
//! component, where the first in scheduling order is the paying one. A
//! small per-component table does it, where a table over the whole
//! quantum would miss the CPU cache on every probe.

use crate::config::PlannerConfig;
use crate::scheduler::{BlockBytes, ChunkRead, Schedule};
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

/// One dispatch round: callbacks for its sets, preceded by its directives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchGroup {
    pub at: Timestamp,
    /// Range of [`Dispatch::order`]: indexes into [`Schedule::sets`].
    pub sets: Range<u32>,
    /// Range of [`Dispatch::pins`].
    pub pins: Range<u32>,
    /// Bytes this group reads from disk.
    pub disk_bytes: u64,
    /// Bytes it pins in the cache.
    pub pinned_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    pub groups: Vec<DispatchGroup>,
    pub order: Vec<u32>,
    pub pins: Vec<CacheDirective>,
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
                block: r.block,
                copy: r.copy,
                disk: r.disk,
                group: r.group,
                bytes: schedule.read_bytes(r),
                physical: r.physical,
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

    pub fn pins_of(&self, g: usize) -> &[CacheDirective] {
        let r = &self.groups[g].pins;
        &self.pins[r.start as usize..r.end as usize]
    }
}

/// Union-find with path halving over set indexes.
struct Components {
    parent: Vec<u32>,
}

impl Components {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    /// Joins the two components, keeping the smaller index as the root so a
    /// component's root is its first-scheduled set.
    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        let (keep, join) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[join as usize] = keep;
    }
}

/// Chunk count up to which a component's table is cleared and reused.
const SMALL_COMPONENT_CHUNKS: usize = 1024;

/// Per-chunk state while packing one component.
struct ChunkUse {
    group: u32,
    readers: u32,
    disk: DiskId,
    bytes: u64,
    /// The task whose read of the chunk goes to disk.
    payer: TaskKind,
}

/// A dispatch group being packed.
struct OpenGroup {
    start: u32,
    disk_bytes: u64,
    pinned_bytes: u64,
    /// Chunks first read in this group, to list its pins when it closes.
    chunks: Vec<u64>,
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
    /// Chunks of the current component (never shared across components).
    chunks: FxHashMap<u64, ChunkUse>,
    open: OpenGroup,
    /// Closed groups: their sets (positions in the order), disk bytes,
    /// pinned bytes and the end of their pins in `pins`.
    closed: Vec<ClosedGroup>,
    /// Pins, group after group (their `until` is set once the groups are
    /// known).
    pins: Vec<CacheDirective>,
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

    /// Lists the pins of the chunks the open group read since the last flush.
    fn flush_pins(&mut self) {
        let g = self.group_index();
        for key in self.open.chunks.drain(..) {
            let u = &self.chunks[&key];
            if u.group == g && u.readers >= 2 {
                let Member::Copy(chunk) = Member::from_key(key) else { unreachable!("chunk keys are copies") };
                let pin =
                    CacheDirective { chunk, disk: u.disk, bytes: u.bytes, readers: u.readers, until: Timestamp(0) };
                self.pins.push(pin);
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
    }

    /// Adds the set at position `pos` of the order, with its reads (their
    /// blocks' sizes in `sizes`), for `task`; `alone`: the set is a
    /// component of its own.
    fn add(&mut self, pos: u32, reads: &[ChunkRead], sizes: &BlockBytes, task: TaskKind, alone: bool) {
        if alone && self.lone_path && distinct_chunks(reads) {
            self.add_alone(pos, reads, sizes, task);
            return;
        }
        let g = self.group_index();
        // The set pins at most all its bytes: only near the budget is it
        // worth looking its chunks up to count what it would add.
        let at_most: u64 = reads.iter().map(|r| sizes.of(r.block)).sum();
        if pos > self.open.start && self.open.pinned_bytes + at_most > self.cache_budget {
            let added_pins: u64 = reads
                .iter()
                .filter(|r| {
                    self.chunks.get(&Member::Copy(r.chunk()).key()).is_some_and(|u| u.group == g && u.readers == 1)
                })
                .map(|r| sizes.of(r.block))
                .sum();
            if self.open.pinned_bytes + added_pins > self.cache_budget {
                self.close(pos);
            }
        }
        let g = self.group_index();
        for r in reads {
            let bytes = sizes.of(r.block);
            let key = Member::Copy(r.chunk()).key();
            let first_use = ChunkUse { group: g, readers: 0, disk: r.disk, bytes, payer: task };
            let entry = self.chunks.entry(key).or_insert(first_use);
            if entry.group != g {
                // Read in an earlier group of a split component: its pin has
                // lapsed by now, so this group reads the chunk again.
                self.split_loss_bytes += bytes;
                self.open.disk_bytes += bytes;
                *entry = ChunkUse { group: g, readers: 0, disk: r.disk, bytes, payer: task };
            } else if r.physical {
                self.open.disk_bytes += bytes;
            } else {
                self.free_bytes_from[task.index()][entry.payer.index()] += bytes;
            }
            entry.readers += 1;
            if entry.readers == 1 {
                self.open.chunks.push(key);
            } else if entry.readers == 2 {
                self.open.pinned_bytes += bytes;
            }
        }
    }
}

impl Packer {
    /// [`Self::add`] for a set alone in its component that names each
    /// chunk once (most sets of a quantum: a file, a scrubbed chunk): each
    /// of its chunks has one reader, so nothing is pinned and the chunk
    /// table would only record what is thrown away at the component's
    /// end. The same effect as the general path, without a table probe
    /// per read.
    fn add_alone(&mut self, pos: u32, reads: &[ChunkRead], sizes: &BlockBytes, task: TaskKind) {
        debug_assert!(self.chunks.is_empty() && self.open.chunks.is_empty(), "a component starts empty");
        // The general path's check with no chunk already in the table:
        // the set adds no pin, so only a group already over closes.
        if pos > self.open.start && self.open.pinned_bytes > self.cache_budget {
            self.close(pos);
        }
        for r in reads {
            if r.physical {
                self.open.disk_bytes += sizes.of(r.block);
            } else {
                self.free_bytes_from[task.index()][task.index()] += sizes.of(r.block);
            }
        }
    }
}

/// Whether `reads` name each chunk at most once, judged by their being in
/// strictly ascending chunk order (ranges and stripes are listed that way;
/// anything else takes the general path).
fn distinct_chunks(reads: &[ChunkRead]) -> bool {
    reads.windows(2).all(|w| (w[0].block, w[0].copy) < (w[1].block, w[1].copy))
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
    parent: Vec<u32>,
    starts: Vec<usize>,
    cursor: Vec<usize>,
    bucketed: Vec<(u32, u32)>,
    first_set_of_group: FxHashMap<u32, u32>,
    counts: Vec<u32>,
    chunks: FxHashMap<u64, ChunkUse>,
    open_chunks: Vec<u64>,
    closed: Vec<ClosedGroup>,
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
    component_order(schedule, scratch, &mut order, &mut component_starts);
    let rounds = u64::from(config.dispatch_rounds.max(1));
    let target_bytes = schedule.physical_bytes().div_ceil(rounds).max(1);
    let mut chunks = std::mem::take(&mut scratch.chunks);
    chunks.clear();
    let mut open_chunks = std::mem::take(&mut scratch.open_chunks);
    open_chunks.clear();
    let mut closed = std::mem::take(&mut scratch.closed);
    closed.clear();
    let mut packer = Packer {
        cache_budget: config.group_cache_bytes,
        chunks,
        open: OpenGroup { start: 0, disk_bytes: 0, pinned_bytes: 0, chunks: open_chunks },
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
        for pin in &mut out.pins[pin_start as usize..closed.pins_end as usize] {
            pin.until = until;
        }
        out.max_pinned_bytes = out.max_pinned_bytes.max(closed.pinned_bytes);
        out.groups.push(DispatchGroup {
            at: group_time(g),
            sets: closed.sets,
            pins: pin_start..closed.pins_end,
            disk_bytes: closed.disk_bytes,
            pinned_bytes: closed.pinned_bytes,
        });
        pin_start = closed.pins_end;
    }
    scratch.component_starts = component_starts;
    scratch.chunks = packer.chunks;
    scratch.open_chunks = packer.open.chunks;
    scratch.closed = packer.closed;
}

/// Group-index partitions: each partition's hash table stays small enough
/// for the cache, where one table over all reads would miss on every probe.
const GROUP_PARTITIONS: usize = 1024;

/// Scheduled set indexes as `(component root, set)`, grouped by component,
/// components in the order of their first set. Linear: reads are bucketed
/// by redundancy group (a counting sort), each bucket indexed with a small
/// hash table group → first set, then sets are counting-sorted by root.
fn component_order(
    schedule: &Schedule,
    scratch: &mut DispatchScratch,
    order: &mut Vec<u32>,
    component_starts: &mut Vec<u32>,
) {
    let n = schedule.sets.len();
    let mut components = Components { parent: std::mem::take(&mut scratch.parent) };
    components.parent.clear();
    components.parent.extend(0..n as u32);
    let max_group = schedule.reads.iter().map(|r| r.group.0).max().unwrap_or(0);
    // About GROUP_PARTITIONS partitions of a power of two groups each (a
    // shift per read, not a division), at most 2^32 groups each so that a
    // group's offset in its partition fits in 32 bits (8 bytes a read
    // bucketed, not 16). Components do not depend on the partitioning.
    let group_bits = u64::BITS - max_group.leading_zeros();
    let shift = group_bits.saturating_sub(GROUP_PARTITIONS.trailing_zeros()).min(32);
    let partitions = usize::try_from(max_group >> shift).expect("at most 2^32 partitions") + 1;
    let partition = |group: u64| (group >> shift) as usize;
    let starts = &mut scratch.starts;
    starts.clear();
    starts.resize(partitions + 1, 0);
    for r in &schedule.reads {
        starts[partition(r.group.0) + 1] += 1;
    }
    for p in 1..=partitions {
        starts[p] += starts[p - 1];
    }
    let bucketed = &mut scratch.bucketed;
    // Every slot is written below before it is read.
    bucketed.resize(schedule.reads.len(), (0, 0));
    let cursor = &mut scratch.cursor;
    cursor.clear();
    cursor.extend_from_slice(starts);
    for s in 0..schedule.sets.len() {
        for r in schedule.reads_of(s) {
            let p = partition(r.group.0);
            let slot = &mut cursor[p];
            bucketed[*slot] = ((r.group.0 - ((p as u64) << shift)) as u32, s as u32);
            *slot += 1;
        }
    }
    let first_set_of_group = &mut scratch.first_set_of_group;
    for p in 0..partitions {
        first_set_of_group.clear();
        for &(group, s) in &bucketed[starts[p]..starts[p + 1]] {
            let first = *first_set_of_group.entry(group).or_insert(s);
            if first != s {
                components.union(first, s);
            }
        }
    }
    // Each set's root, in place (roots are fixed points, and a root is
    // never above its sets, so an ascending pass sees final parents).
    for s in 0..n as u32 {
        let root = components.find(s);
        components.parent[s as usize] = root;
    }
    let roots = &components.parent;
    // Counting sort by root; roots are first sets, so ascending root order
    // is the order in which components were first scheduled.
    let counts = &mut scratch.counts;
    counts.clear();
    counts.resize(n + 1, 0);
    for &r in roots.iter() {
        counts[r as usize + 1] += 1;
    }
    for i in 1..=n {
        counts[i] += counts[i - 1];
    }
    component_starts.clear();
    component_starts.extend((0..n).filter(|&s| roots[s] as usize == s).map(|s| counts[s]));
    order.clear();
    order.resize(n, 0);
    for (s, &r) in roots.iter().enumerate() {
        let slot = &mut counts[r as usize];
        order[*slot as usize] = s as u32;
        *slot += 1;
    }
    scratch.parent = components.parent;
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

    /// A schedule of lone sets and shared stripes: ranges of consecutive
    /// blocks, singletons, sets naming a chunk twice, and sets that share
    /// groups, with physical and free reads.
    fn schedule(seed: u64) -> Schedule {
        let mut rng = seed | 1;
        let decls = (0..4)
            .map(|i| ScheduledDecl {
                id: DeclarationId(i),
                task: TaskKind::ALL[i as usize % TaskKind::COUNT],
                deadline: Timestamp(1_000_000),
                quota: 0,
                taken: 0,
                overloaded: false,
            })
            .collect();
        let mut out = Schedule { start: Timestamp(0), decls, ..Schedule::default() };
        for key in 0..200 {
            out.sets.push(ScheduledSet { decl: (next(&mut rng) % 4) as u32, first_read: out.reads.len() as u32, key });
            let start = next(&mut rng) % (100 + 400 * (seed % 5));
            let len = 1 + next(&mut rng) % 5;
            let twice = next(&mut rng).is_multiple_of(10);
            for b in start..start + len {
                let copy = (next(&mut rng) % 2) as u8;
                let read = ChunkRead {
                    block: BlockId(b),
                    copy,
                    disk: DiskId((b % 7) as u32),
                    group: GroupId(b / 3),
                    physical: !next(&mut rng).is_multiple_of(3),
                };
                // Blocks of three sizes, so the sizes kept apart are used.
                out.block_bytes.record(BlockId(b), 10 + b % 3);
                out.reads.push(read);
                if twice {
                    out.reads.push(ChunkRead { physical: false, ..read });
                }
            }
        }
        out
    }

    #[test]
    fn lone_sets_dispatch_exactly_as_through_the_chunk_table() {
        for seed in 0..50 {
            let s = schedule(seed);
            for (rounds, cache) in [(1, u64::MAX), (4, 40), (16, 0), (3, 25)] {
                let config =
                    PlannerConfig { dispatch_rounds: rounds, group_cache_bytes: cache, ..PlannerConfig::default() };
                let (mut fast, mut general) = (Dispatch::default(), Dispatch::default());
                let mut scratch = DispatchScratch::default();
                dispatch_with(&s, &config, &mut scratch, &mut fast, true);
                dispatch_with(&s, &config, &mut DispatchScratch::default(), &mut general, false);
                assert_eq!(fast, general, "seed {seed}, {rounds} rounds, cache {cache}");
                // Reused scratch gives the same again.
                let mut again = Dispatch::default();
                dispatch_with(&s, &config, &mut scratch, &mut again, true);
                assert_eq!(again, general);
            }
        }
    }
}
