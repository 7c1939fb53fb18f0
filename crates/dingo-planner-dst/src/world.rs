//! What one seed simulates: a small cluster (disks on nodes, blocks in
//! redundancy groups of one to four blocks: replicated, two copies each,
//! or an erasure-coded stripe, one copy each) whose
//! blocks tasks write and delete, and whose copies move between disks or
//! are lost and repaired, as the run goes on, with a
//! node or the metadata service down at times, the planner's
//! configuration, the task clients, and the declarations and
//! budgets they send, all drawn from the seed.

use dingo_planner::LeftoverPolicy;
use dingo_planner_service::ServiceConfig;
use dingo_proto::planner as pb;
use dingo_proto::v1::{BlockRow, BlockState, ClusterStatusReply, DiskModel as PbModel, DiskStatus, NodeStatus};
use dingo_types::{
    BlockId, BlockRange, BlockSet, ChunkRef, Declaration, DiskId, DiskModel, Member, ReadSets, TaskKind, Timestamp,
};
use std::collections::{BTreeMap, BTreeSet};

/// Simulated time is counted from here (Unix ms), far from zero so a
/// deadline "in the past" is representable, and 20 s before a UTC hour
/// begins: a run starts up to [`MAX_START_DELAY_MS`] later, so many runs
/// cross into the next hour of the diurnal curve.
pub(crate) const START_MS: u64 = 1_700_002_780_000;
pub(crate) const MAX_START_DELAY_MS: u64 = 15_000;
const HOUR_MS: u64 = 3_600_000;
/// When the hour a run starts in ends.
pub(crate) const FIRST_HOUR_ENDS_MS: u64 = START_MS - START_MS % HOUR_MS + HOUR_MS;
/// The diurnal multipliers drawn from: zero (every limit becomes one byte
/// or microsecond, never unlimited), under one, one, over one.
const DIURNAL_MULTIPLIERS: [f64; 7] = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 4.0];
pub(crate) const QUANTUM_MS: u64 = 1000;
/// Blocks in one explicit set or range at most.
const MAX_SET_BLOCKS: u64 = 3;
/// Blocks in one redundancy group at most.
const MAX_GROUP_BLOCKS: u64 = 4;

/// The disk of a copy that is lost (the metadata service's "unknown").
pub(crate) const NO_DISK: u32 = u32::MAX;

pub(crate) struct Block {
    pub(crate) size_bytes: u64,
    /// The disk of each copy ([`NO_DISK`]: lost), never the same twice:
    /// two copies if replicated, one if erasure-coded (a stripe's chunk,
    /// which no other copy can stand in for).
    pub(crate) disks: Vec<u32>,
    /// Its redundancy group: the id of the group's first block. Blocks
    /// written one after another share one, as a stripe's do, so sets
    /// reading different blocks of a group fall in one dispatch component.
    pub(crate) group: u64,
}

pub(crate) struct World {
    pub(crate) disks: Vec<DiskModel>,
    pub(crate) blocks: Vec<Block>,
    pub(crate) clients: Vec<String>,
    pub(crate) config: ServiceConfig,
    /// Blocks deleted at the metadata service (a task's garbage collection
    /// or transcoding), for good.
    pub(crate) deleted: BTreeSet<u64>,
    /// The deleted blocks as the planner last read them, at its start or
    /// its refresh before a quantum: its view lags the metadata service.
    pub(crate) seen_deleted: BTreeSet<u64>,
    /// Each block's copy disks as the planner last read the table (tasks
    /// write new blocks as the run goes on; their ids are dense from 0).
    pub(crate) seen_copies: Vec<Vec<u32>>,
    /// The metadata service is unreachable until then (Unix ms): the
    /// planner skips its quanta, and cannot start, until it is back.
    pub(crate) meta_down_until: Option<u64>,
    /// Deletions announced to the planner and not made yet: block → when
    /// its task deletes it (announced deletions are always made).
    pub(crate) announced: BTreeMap<u64, u64>,
    /// Copies a rebalancer announced it is moving away, not moved yet:
    /// `(block, copy)` → (the disk it goes to, when).
    pub(crate) moving: BTreeMap<(u64, u8), (u32, u64)>,
    /// The node that is down, if one is (at most one at a time), and the
    /// one the planner last saw down.
    pub(crate) dead_node: Option<u32>,
    pub(crate) seen_dead_node: Option<u32>,
}

/// Removes from `pending` the entries due by `now_ms` (all of them if
/// `None`; `at` gives an entry's time) and returns them in key order.
fn take_due<K: Ord + Copy, V: Copy>(
    pending: &mut BTreeMap<K, V>,
    now_ms: Option<u64>,
    at: impl Fn(&V) -> u64,
) -> Vec<(K, V)> {
    let mut due = Vec::new();
    pending.retain(|&k, v| {
        let is_due = now_ms.is_none_or(|now| at(v) <= now);
        if is_due {
            due.push((k, *v));
        }
        !is_due
    });
    due
}

/// A block written after `blocks`, of `size_bytes`, on `disk_count`
/// disks. It joins the last block's redundancy group, half the time while
/// that group holds fewer than [`MAX_GROUP_BLOCKS`], else starts a group
/// of its own (named by its id), erasure-coded one time in four. A group's
/// blocks are consecutive from the one that names it, so the last group
/// holds the blocks from its id on; they share its redundancy. An
/// erasure-coded block's one copy goes on a disk no other chunk of its
/// stripe is on while there is one; a replicated block's two copies go on
/// two disks.
fn new_block(rng: &mut fastrand::Rng, disk_count: u32, blocks: &[Block], size_bytes: u64) -> Block {
    let id = blocks.len() as u64;
    let (group, copies) = match blocks.last() {
        Some(last) if rng.bool() && id - last.group < MAX_GROUP_BLOCKS => (last.group, last.disks.len()),
        _ => (id, if rng.u8(0..4) == 0 { 1 } else { 2 }),
    };
    let first = if copies == 1 {
        let stripe = &blocks[group as usize..];
        let free: Vec<u32> = (0..disk_count).filter(|d| stripe.iter().all(|b| !b.disks.contains(d))).collect();
        if free.is_empty() { rng.u32(0..disk_count) } else { free[rng.usize(0..free.len())] }
    } else {
        rng.u32(0..disk_count)
    };
    let mut disks = vec![first];
    if copies == 2 {
        disks.push((first + rng.u32(1..disk_count)) % disk_count);
    }
    Block { size_bytes, disks, group }
}

/// The node serving `disk` (two disks per node).
pub(crate) fn node_of(disk: u32) -> u32 {
    disk / 2
}

/// A declaration with what the oracle needs to know of it.
pub(crate) struct Drafted {
    pub(crate) decl: Declaration,
    /// The wire keys of its sets, each with the set as declared.
    pub(crate) keys: BTreeMap<u64, BlockSet>,
}

impl World {
    pub(crate) fn generate(rng: &mut fastrand::Rng) -> World {
        let disks = (0..rng.u32(3..=8))
            .map(|_| DiskModel {
                positioning_us: rng.u64(4_000..=12_000),
                transfer_bytes_per_sec: rng.u64(100_000_000..=250_000_000),
            })
            .collect::<Vec<_>>();
        let disk_count = disks.len() as u32;
        let mut blocks = Vec::new();
        for _ in 0..rng.u64(6..=40) {
            let size_bytes = rng.u64(64_000..=2_000_000);
            blocks.push(new_block(rng, disk_count, &blocks, size_bytes));
        }
        let clients = (0..rng.usize(1..=4)).map(|i| format!("client-{i}")).collect();
        let mut config = ServiceConfig {
            quantum_ms: QUANTUM_MS,
            dispatch_spacing_ms: [250, 500, 1000][rng.usize(0..3)],
            pin_grace_ms: 500,
            leftover: if rng.bool() { LeftoverPolicy::Fill } else { LeftoverPolicy::Unused },
            ..ServiceConfig::new("admin")
        };
        if rng.bool() {
            let mut curve: Vec<f64> =
                (0..24).map(|_| DIURNAL_MULTIPLIERS[rng.usize(0..DIURNAL_MULTIPLIERS.len())]).collect();
            // Some hour lets any one set through, for the drain.
            if curve.iter().all(|&m| m < 1.0) {
                curve[rng.usize(0..24)] = 1.0;
            }
            config.budget.diurnal = Some(curve);
        }
        let mut world = World {
            disks,
            blocks,
            clients,
            config,
            deleted: BTreeSet::new(),
            seen_deleted: BTreeSet::new(),
            seen_copies: Vec::new(),
            meta_down_until: None,
            announced: BTreeMap::new(),
            moving: BTreeMap::new(),
            dead_node: None,
            seen_dead_node: None,
        };
        let budget = world.budget(rng);
        // Zero is "unlimited" on the wire; the config says so by leaving
        // the limit out.
        world.config.budget.cluster_bytes =
            (budget.cluster_bytes != 0).then_some(dingo_types::ByteLimit::Bytes(budget.cluster_bytes));
        world.config.budget.disk_head_time_ms =
            (budget.disk_head_time_us != 0).then_some(budget.disk_head_time_us.div_ceil(1000));
        world
    }

    /// The diurnal multiplier of the UTC hour `now_ms` falls in (1 without
    /// a curve).
    pub(crate) fn diurnal_multiplier(&self, now_ms: u64) -> f64 {
        self.config.budget.diurnal.as_ref().map_or(1.0, |curve| curve[((now_ms / HOUR_MS) % 24) as usize])
    }

    /// The first moment from `now_ms` on whose hour's multiplier is at
    /// least one: there any one set fits the budget again.
    pub(crate) fn first_full_hour_from(&self, now_ms: u64) -> u64 {
        let mut at = now_ms;
        while self.diurnal_multiplier(at) < 1.0 {
            at = (at / HOUR_MS + 1) * HOUR_MS;
        }
        at
    }

    /// The block table and the nodes as the metadata service reports them
    /// now: the planner reading them sees every block written and deleted
    /// so far and the node that is down.
    pub(crate) fn snapshot(&mut self) -> (Vec<BlockRow>, ClusterStatusReply) {
        self.seen_copies = self.blocks.iter().map(|b| b.disks.clone()).collect();
        self.seen_deleted.clone_from(&self.deleted);
        self.seen_dead_node = self.dead_node;
        (self.rows(), self.cluster())
    }

    fn rows(&self) -> Vec<BlockRow> {
        (0..)
            .zip(&self.blocks)
            .map(|(id, b)| BlockRow {
                id,
                size: b.size_bytes,
                state: if self.deleted.contains(&id) { BlockState::Deleted } else { BlockState::Sealed } as i32,
                group: b.group,
                disks: b.disks.clone(),
            })
            .collect()
    }

    /// Two disks per node, all alive but the dead one.
    fn cluster(&self) -> ClusterStatusReply {
        let nodes = (0..self.disks.len().div_ceil(2))
            .map(|n| NodeStatus {
                id: n as u32,
                addr: format!("node-{n}"),
                alive: self.dead_node != Some(n as u32),
                disks: (2 * n..(2 * n + 2).min(self.disks.len()))
                    .map(|d| DiskStatus {
                        id: d as u32,
                        model: Some(PbModel {
                            positioning_us: self.disks[d].positioning_us,
                            transfer_bytes_per_sec: self.disks[d].transfer_bytes_per_sec,
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        ClusterStatusReply { nodes, ..Default::default() }
    }

    /// A budget (0 = unlimited) that any one set fits — a set's reads on
    /// the slowest disk and in bytes at most — so every declaration can
    /// finish once faults stop; tight enough that quanta often run out.
    pub(crate) fn budget(&self, rng: &mut fastrand::Rng) -> pb::Budget {
        let largest = self.blocks.iter().map(|b| b.size_bytes).max().unwrap_or(0);
        let slowest = self.disks.iter().map(|d| d.head_time_us(largest)).max().unwrap_or(0);
        let mut scale = |one_set: u64| if rng.u8(0..4) == 0 { 0 } else { one_set * rng.u64(1..=4) };
        pb::Budget {
            cluster_bytes: scale(largest * MAX_SET_BLOCKS),
            disk_head_time_us: scale(slowest * MAX_SET_BLOCKS),
        }
    }

    /// Blocks the planner has seen written that no task has deleted or
    /// announced it will delete: what a task declares (the planner, whose
    /// view lags, knows them all as live).
    pub(crate) fn live_blocks(&self) -> Vec<u64> {
        (0..self.seen_blocks()).filter(|&b| self.is_live(b)).collect()
    }

    /// Whether `block` is one of [`Self::live_blocks`].
    fn is_live(&self, block: u64) -> bool {
        block < self.seen_blocks() && !self.deleted.contains(&block) && !self.announced.contains_key(&block)
    }

    /// Blocks tasks wrote since the planner last read the table, none of
    /// them deleted (a task declares them before the planner has seen them).
    pub(crate) fn fresh_blocks(&self) -> Vec<u64> {
        (self.seen_blocks()..self.blocks.len() as u64).filter(|b| !self.deleted.contains(b)).collect()
    }

    /// Blocks in the table as the planner last read it.
    pub(crate) fn seen_blocks(&self) -> u64 {
        self.seen_copies.len() as u64
    }

    /// A live block's copy that can move or be lost: every copy of the
    /// block on a disk, no move of any pending. So a replicated block
    /// stays readable; an erasure-coded one may become unreadable (its
    /// reconstruction is another task's work) until its chunk is repaired.
    pub(crate) fn movable_copy(&self, rng: &mut fastrand::Rng) -> Option<(u64, u8)> {
        let candidates: Vec<(u64, u8)> = self
            .live_blocks()
            .into_iter()
            .filter(|&b| self.blocks[b as usize].disks.iter().all(|&d| d != NO_DISK))
            .filter(|&b| !self.moving.keys().any(|&(moving, _)| moving == b))
            .flat_map(|b| self.copies(b).map(move |c| (b, c)))
            .collect();
        (!candidates.is_empty()).then(|| candidates[rng.usize(0..candidates.len())])
    }

    /// The copy numbers of `block`.
    fn copies(&self, block: u64) -> impl Iterator<Item = u8> + use<> {
        0..self.blocks[block as usize].disks.len() as u8
    }

    /// A disk holding no copy of `block`: where one of its copies can go.
    pub(crate) fn free_disk_for(&self, rng: &mut fastrand::Rng, block: u64) -> u32 {
        let taken = &self.blocks[block as usize].disks;
        let free: Vec<u32> = (0..self.disks.len() as u32).filter(|d| !taken.contains(d)).collect();
        free[rng.usize(0..free.len())]
    }

    /// Copy `copy` of `block` now lives on `disk` (a move, or a repair of a
    /// lost copy; [`NO_DISK`]: lost).
    pub(crate) fn place_copy(&mut self, (block, copy): (u64, u8), disk: u32) {
        self.blocks[block as usize].disks[usize::from(copy)] = disk;
    }

    /// Makes the announced moves due by `now_ms`; all of them if `None`.
    pub(crate) fn make_due_moves(&mut self, now_ms: Option<u64>) {
        for (copy, (to, _)) in take_due(&mut self.moving, now_ms, |&(_, at)| at) {
            self.place_copy(copy, to);
        }
    }

    /// Lost copies of live blocks.
    pub(crate) fn lost_copies(&self) -> Vec<(u64, u8)> {
        (0..)
            .zip(&self.blocks)
            .filter(|(id, _)| !self.deleted.contains(id))
            .flat_map(|(id, b)| (0..).zip(&b.disks).filter(|(_, d)| **d == NO_DISK).map(move |(c, _)| (id, c)))
            .collect()
    }

    /// A task writes a new block ([`new_block`]), no larger than the
    /// largest so far (so any one set still fits every budget).
    pub(crate) fn write_block(&mut self, rng: &mut fastrand::Rng) -> u64 {
        let largest = self.blocks.iter().map(|b| b.size_bytes).max().unwrap_or(64_000);
        let size_bytes = rng.u64(64_000..=largest);
        self.blocks.push(new_block(rng, self.disks.len() as u32, &self.blocks, size_bytes));
        self.blocks.len() as u64 - 1
    }

    /// The wire keys (and members) of the chunks on `disk` as the planner
    /// resolves a scrub of it: none if it last saw the disk's node down.
    pub(crate) fn disk_chunk_keys(&self, disk: u32) -> BTreeMap<u64, BlockSet> {
        if self.seen_dead_node == Some(node_of(disk)) {
            return BTreeMap::new();
        }
        (0..)
            .zip(&self.seen_copies)
            .filter(|(id, _)| !self.seen_deleted.contains(id))
            .flat_map(|(id, disks)| {
                (0..)
                    .zip(disks)
                    .filter(move |(_, d)| **d == disk)
                    .map(move |(copy, _)| Member::Copy(ChunkRef { block: BlockId(id), copy }))
                    .map(|m| (m.key(), BlockSet::new(vec![m])))
            })
            .collect()
    }

    /// How many of a quantum's sets read a block of a redundancy group of
    /// which another of its sets reads a different block: sets the
    /// dispatcher must keep in one component though they share no chunk.
    pub(crate) fn sets_sharing_a_group<'a>(&self, callbacks: impl Iterator<Item = &'a pb::Callback>) -> u64 {
        // group → each set reading it (delivery, key) with the blocks it reads there.
        let mut readers: BTreeMap<u64, BTreeMap<(u64, u64), BTreeSet<u64>>> = BTreeMap::new();
        for cb in callbacks {
            for set in &cb.sets {
                for r in &set.reads {
                    let group = self.blocks[r.block as usize].group;
                    readers.entry(group).or_default().entry((cb.delivery, set.key)).or_default().insert(r.block);
                }
            }
        }
        let mut sharing = BTreeSet::new();
        for sets in readers.values() {
            for (&set, blocks) in sets {
                if sets.iter().any(|(&other, theirs)| other != set && theirs.iter().any(|b| !blocks.contains(b))) {
                    sharing.insert(set);
                }
            }
        }
        sharing.len() as u64
    }

    /// How many of a quantum's reads are of a block with one copy.
    pub(crate) fn single_copy_reads<'a>(&self, callbacks: impl Iterator<Item = &'a pb::Callback>) -> u64 {
        let reads = callbacks.flat_map(|cb| cb.sets.iter().flat_map(|s| &s.reads));
        reads.filter(|r| self.blocks[r.block as usize].disks.len() == 1).count() as u64
    }

    /// A task deletes `block` now, unannounced.
    pub(crate) fn delete(&mut self, block: u64) {
        self.deleted.insert(block);
    }

    /// Makes the announced deletions due by `now_ms`; all of them if `None`.
    pub(crate) fn make_due_deletions(&mut self, now_ms: Option<u64>) {
        for (block, _) in take_due(&mut self.announced, now_ms, |&at| at) {
            self.deleted.insert(block);
        }
    }

    /// A declaration the planner must accept: it names only live blocks
    /// (or, for a disk scrub, the chunks the planner knows on that disk,
    /// which it refuses as naming nothing if it knows the disk's node down).
    pub(crate) fn valid_declaration(&self, rng: &mut fastrand::Rng, now_ms: u64) -> Drafted {
        let block_count = self.seen_blocks();
        let live = self.live_blocks();
        let (read_sets, keys): (ReadSets, BTreeMap<u64, BlockSet>) = match rng.u8(0..10) {
            0..6 => {
                // Now and then blocks written since the planner's last read
                // too: the service retries after a refresh.
                let mut pool = live.clone();
                if rng.u8(0..4) == 0 {
                    pool.extend(self.fresh_blocks());
                }
                let sets: Vec<BlockSet> = (0..rng.u64(1..=5))
                    .map(|_| {
                        let blocks: BTreeSet<u64> =
                            (0..rng.u64(1..=MAX_SET_BLOCKS)).map(|_| pool[rng.usize(0..pool.len())]).collect();
                        // Now and then exact copies (reconstruction names the
                        // survivors it reads), and now and then any k of the
                        // members (k of a stripe's survivors).
                        let exact = rng.u8(0..4) == 0;
                        let member = |b: u64, copy: u8| match exact {
                            true => Member::Copy(ChunkRef { block: BlockId(b), copy }),
                            false => Member::Any(BlockId(b)),
                        };
                        let members: Vec<Member> = blocks
                            .iter()
                            .map(|&b| member(b, rng.u8(0..self.blocks[b as usize].disks.len() as u8)))
                            .collect();
                        let n = members.len() as u32;
                        if rng.u8(0..3) == 0 {
                            BlockSet::choose(members, rng.u32(1..=n))
                        } else {
                            BlockSet::new(members)
                        }
                    })
                    .collect();
                let keys = (0..).zip(sets.iter().cloned()).collect();
                (ReadSets::Sets(sets), keys)
            }
            6..9 => {
                let mut ranges = Vec::new();
                let mut start = live[rng.usize(0..live.len())];
                while start < block_count && ranges.len() < 4 {
                    if !self.is_live(start) {
                        start += 1;
                        continue;
                    }
                    let most = rng.u64(1..=MAX_SET_BLOCKS);
                    let len = (start..block_count).take(most as usize).take_while(|&b| self.is_live(b)).count() as u64;
                    ranges.push(BlockRange { start: BlockId(start), len: len as u32 });
                    start += len + rng.u64(0..4);
                }
                let keys =
                    ranges.iter().map(|r| (r.start.0, BlockSet::any_of((r.start.0..r.end()).map(BlockId)))).collect();
                (ReadSets::Ranges(ranges), keys)
            }
            _ => {
                let disk = rng.u32(0..self.disks.len() as u32);
                let keys = self.disk_chunk_keys(disk);
                if keys.is_empty() {
                    return self.valid_declaration(rng, now_ms);
                }
                (ReadSets::ChunksOnDisk(DiskId(disk)), keys)
            }
        };
        let total = keys.len() as u64;
        let sets_needed = (rng.u8(0..4) == 0).then(|| rng.u64(1..=total));
        let decl = Declaration {
            task: TaskKind::ALL[rng.usize(0..TaskKind::COUNT)],
            read_sets,
            sets_needed,
            bytes_needed: None,
            deadline: Timestamp(now_ms + rng.u64(300..=6 * QUANTUM_MS)),
        };
        Drafted { decl, keys }
    }

    /// A declaration the planner must refuse.
    pub(crate) fn invalid_declaration(&self, rng: &mut fastrand::Rng, now_ms: u64) -> Declaration {
        let Drafted { mut decl, keys } = self.valid_declaration(rng, now_ms);
        match rng.u8(0..5) {
            0 => decl.deadline = Timestamp(now_ms - rng.u64(0..=QUANTUM_MS)),
            // More sets than it names, even after the refresh a disk scrub
            // is declared on (a disk holds at most one copy of each block).
            1 => decl.sets_needed = Some(if rng.bool() { 0 } else { keys.len().max(self.blocks.len()) as u64 + 1 }),
            // A block past the table (as the metadata service has it, so a
            // retry on a refreshed topology is refused too), or one the
            // planner knows deleted.
            2 => {
                let gone = self.seen_deleted.iter().nth(rng.usize(0..=self.seen_deleted.len()));
                let block = gone.copied().unwrap_or(self.blocks.len() as u64);
                decl.read_sets = ReadSets::Sets(vec![BlockSet::any_of([BlockId(block)])]);
            }
            // A copy a live block does not have: a third of a replicated
            // block, a second of an erasure-coded chunk.
            3 => {
                let live = self.live_blocks();
                let block = live[rng.usize(0..live.len())];
                let copy = self.blocks[block as usize].disks.len() as u8;
                decl.read_sets =
                    ReadSets::Sets(vec![BlockSet::new(vec![Member::Copy(ChunkRef { block: BlockId(block), copy })])]);
            }
            _ => decl.read_sets = ReadSets::Sets(vec![BlockSet::any_of([BlockId(0)]), BlockSet::new(Vec::new())]),
        }
        decl
    }
}
