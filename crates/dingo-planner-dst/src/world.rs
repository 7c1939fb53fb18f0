//! What one seed simulates: a small cluster (disks on nodes, blocks with
//! two copies each), the planner's configuration, the task clients, and
//! the declarations and budgets they send, all drawn from the seed.

use dingo_planner::LeftoverPolicy;
use dingo_planner_service::ServiceConfig;
use dingo_proto::planner as pb;
use dingo_proto::v1::{BlockRow, BlockState, ClusterStatusReply, DiskModel as PbModel, DiskStatus, NodeStatus};
use dingo_types::{
    BlockId, BlockRange, BlockSet, ChunkRef, Declaration, DiskId, DiskModel, Member, ReadSets, TaskKind, Timestamp,
};
use std::collections::BTreeSet;

/// Simulated time starts here (Unix ms), far from zero so a deadline "in
/// the past" is representable.
pub(crate) const START_MS: u64 = 1_700_000_000_000;
pub(crate) const QUANTUM_MS: u64 = 1000;
/// Blocks in one explicit set or range at most.
const MAX_SET_BLOCKS: u64 = 3;

pub(crate) struct Block {
    pub(crate) size_bytes: u64,
    /// Disk of copy 0 and of copy 1.
    pub(crate) disks: [u32; 2],
}

pub(crate) struct World {
    pub(crate) disks: Vec<DiskModel>,
    pub(crate) blocks: Vec<Block>,
    pub(crate) clients: Vec<String>,
    pub(crate) config: ServiceConfig,
}

/// A declaration with what the oracle needs to know of it.
pub(crate) struct Drafted {
    pub(crate) decl: Declaration,
    /// The wire keys of its sets.
    pub(crate) keys: BTreeSet<u64>,
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
        let blocks = (0..rng.u64(6..=40))
            .map(|_| {
                let first = rng.u32(0..disk_count);
                let second = (first + rng.u32(1..disk_count)) % disk_count;
                Block { size_bytes: rng.u64(64_000..=2_000_000), disks: [first, second] }
            })
            .collect();
        let clients = (0..rng.usize(1..=4)).map(|i| format!("client-{i}")).collect();
        let config = ServiceConfig {
            quantum_ms: QUANTUM_MS,
            dispatch_spacing_ms: [250, 500, 1000][rng.usize(0..3)],
            pin_grace_ms: 500,
            leftover: if rng.bool() { LeftoverPolicy::Fill } else { LeftoverPolicy::Unused },
            ..ServiceConfig::new("admin")
        };
        let mut world = World { disks, blocks, clients, config };
        let budget = world.budget(rng);
        // Zero is "unlimited" on the wire; the config says so by leaving
        // the limit out.
        world.config.budget.cluster_bytes =
            (budget.cluster_bytes != 0).then_some(dingo_types::ByteLimit::Bytes(budget.cluster_bytes));
        world.config.budget.disk_head_time_ms =
            (budget.disk_head_time_us != 0).then_some(budget.disk_head_time_us.div_ceil(1000));
        world
    }

    /// The block table as the metadata service reports it.
    pub(crate) fn rows(&self) -> Vec<BlockRow> {
        (0..)
            .zip(&self.blocks)
            .map(|(id, b)| BlockRow {
                id,
                size: b.size_bytes,
                state: BlockState::Sealed as i32,
                group: id,
                disks: b.disks.to_vec(),
            })
            .collect()
    }

    /// Two disks per node, every node alive.
    pub(crate) fn cluster(&self) -> ClusterStatusReply {
        let nodes = (0..self.disks.len().div_ceil(2))
            .map(|n| NodeStatus {
                id: n as u32,
                addr: format!("node-{n}"),
                alive: true,
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

    /// A declaration the planner must accept.
    pub(crate) fn valid_declaration(&self, rng: &mut fastrand::Rng, now_ms: u64) -> Drafted {
        let block_count = self.blocks.len() as u64;
        let (read_sets, keys): (ReadSets, BTreeSet<u64>) = match rng.u8(0..10) {
            0..6 => {
                let sets: Vec<BlockSet> = (0..rng.u64(1..=5))
                    .map(|_| {
                        let mut blocks = BTreeSet::new();
                        for _ in 0..rng.u64(1..=MAX_SET_BLOCKS) {
                            blocks.insert(BlockId(rng.u64(0..block_count)));
                        }
                        BlockSet::any_of(blocks)
                    })
                    .collect();
                let keys = (0..sets.len() as u64).collect();
                (ReadSets::Sets(sets), keys)
            }
            6..9 => {
                let mut ranges = Vec::new();
                let mut start = rng.u64(0..block_count);
                while start < block_count && ranges.len() < 4 {
                    let len = rng.u64(1..=MAX_SET_BLOCKS).min(block_count - start);
                    ranges.push(BlockRange { start: BlockId(start), len: len as u32 });
                    start += len + rng.u64(0..4);
                }
                let keys = ranges.iter().map(|r| r.start.0).collect();
                (ReadSets::Ranges(ranges), keys)
            }
            _ => {
                let disk = rng.u32(0..self.disks.len() as u32);
                let keys: BTreeSet<u64> = (0..)
                    .zip(&self.blocks)
                    .flat_map(|(id, b)| {
                        (0..2u8)
                            .filter(move |&c| b.disks[usize::from(c)] == disk)
                            .map(move |copy| Member::Copy(ChunkRef { block: BlockId(id), copy }).key())
                    })
                    .collect();
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
        match rng.u8(0..4) {
            0 => decl.deadline = Timestamp(now_ms - rng.u64(0..=QUANTUM_MS)),
            1 => decl.sets_needed = Some(if rng.bool() { 0 } else { keys.len() as u64 + 1 }),
            2 => decl.read_sets = ReadSets::Sets(vec![BlockSet::any_of([BlockId(self.blocks.len() as u64)])]),
            _ => decl.read_sets = ReadSets::Sets(vec![BlockSet::any_of([BlockId(0)]), BlockSet::new(Vec::new())]),
        }
        decl
    }
}
