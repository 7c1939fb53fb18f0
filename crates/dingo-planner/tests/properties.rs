//! Property tests of the planner's invariants over random clusters,
//! declarations, deletions and budgets.

use dingo_planner::table::TableTopology;
use dingo_planner::{Budget, DiskBudget, Planner, PlannerConfig, QuantumPlan, TaskCaps};
use dingo_types::{
    BlockId, BlockRange, BlockSet, BlockState, ChunkRef, Declaration, DeclarationId, DiskId, DiskModel, GroupId,
    Member, MemberBitmap, ReadSets, TaskKind, Timestamp, Topology,
};
use proptest::prelude::*;
use roaring::RoaringTreemap;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const QUANTUM_MS: u64 = 1000;
const BLOCK: u64 = 1_000_000;
const DISKS: u32 = 8;
const BLOCKS: u64 = 60;

/// Blocks `0..BLOCKS`: the first half 3-way replicated, the rest in RS 4+2
/// stripes of six consecutive blocks, on distinct disks.
fn cluster(seed: u64) -> TableTopology {
    let mut t = TableTopology::new(DISKS, DiskModel::HDD);
    for b in 0..BLOCKS {
        let base = (b * 7 + seed) % u64::from(DISKS);
        if b < BLOCKS / 2 {
            let disks: Vec<DiskId> = (0..3).map(|i| DiskId(((base + i) % u64::from(DISKS)) as u32)).collect();
            t.insert(BlockId(b), BLOCK, GroupId(b), &disks);
        } else {
            let stripe = (b - BLOCKS / 2) / 6;
            let disk = DiskId(((stripe + (b % 6)) % u64::from(DISKS)) as u32);
            t.insert(BlockId(b), BLOCK, GroupId(1000 + stripe), &[disk]);
        }
    }
    t
}

#[derive(Clone, Debug)]
enum Shape {
    Singles(Vec<u64>),
    Sets(Vec<Vec<u64>>),
    /// Sets needing only some of their members: `(members, needed)`.
    Choose(Vec<(Vec<u64>, u32)>),
    Ranges(Vec<(u64, u32)>),
    Copies(Vec<(u64, u8)>),
    Disk(u32),
    All,
}

#[derive(Clone, Debug)]
struct DeclSpec {
    task: usize,
    shape: Shape,
    needed_fraction: Option<u8>,
    deadline_quanta: u64,
    at_quantum: u64,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        proptest::collection::btree_set(0..BLOCKS, 1..12).prop_map(|s| Shape::Singles(s.into_iter().collect())),
        proptest::collection::vec(proptest::collection::btree_set(0..BLOCKS, 1..5), 1..6)
            .prop_map(|v| Shape::Sets(v.into_iter().map(|s| s.into_iter().collect()).collect())),
        proptest::collection::vec((proptest::collection::btree_set(0..BLOCKS, 1..6), 1u32..6), 1..6).prop_map(|v| {
            Shape::Choose(v.into_iter().map(|(s, n)| (s.iter().copied().collect(), n.min(s.len() as u32))).collect())
        }),
        proptest::collection::btree_set(0..BLOCKS / 4, 1..5)
            .prop_map(|s| Shape::Ranges(s.into_iter().map(|f| (f * 4, 1 + (f % 4) as u32)).collect())),
        proptest::collection::btree_set((0..BLOCKS / 2, 0u8..3), 1..8)
            .prop_map(|s| Shape::Copies(s.into_iter().collect())),
        (0..DISKS).prop_map(Shape::Disk),
        Just(Shape::All),
    ]
}

fn decl_spec() -> impl Strategy<Value = DeclSpec> {
    (0..TaskKind::COUNT, shape(), proptest::option::of(1u8..=100), 1u64..6, 0u64..4).prop_map(
        |(task, shape, needed_fraction, deadline_quanta, at_quantum)| DeclSpec {
            task,
            shape,
            needed_fraction,
            deadline_quanta,
            at_quantum,
        },
    )
}

fn read_sets(shape: &Shape) -> ReadSets {
    match shape {
        Shape::Singles(bs) => ReadSets::Sets(bs.iter().map(|&b| BlockSet::any_of([BlockId(b)])).collect()),
        Shape::Sets(sets) => {
            ReadSets::Sets(sets.iter().map(|s| BlockSet::any_of(s.iter().map(|&b| BlockId(b)))).collect())
        }
        Shape::Choose(sets) => ReadSets::Sets(
            sets.iter()
                .map(|(s, n)| BlockSet::choose(s.iter().map(|&b| Member::Any(BlockId(b))).collect(), *n))
                .collect(),
        ),
        Shape::Ranges(rs) => {
            ReadSets::Ranges(rs.iter().map(|&(s, len)| BlockRange { start: BlockId(s), len }).collect())
        }
        Shape::Copies(cs) => ReadSets::EachMember(MemberBitmap::from_iter(
            cs.iter().map(|&(b, copy)| Member::Copy(ChunkRef { block: BlockId(b), copy })),
        )),
        Shape::Disk(d) => ReadSets::ChunksOnDisk(DiskId(*d)),
        Shape::All => ReadSets::AllChunks,
    }
}

fn set_count(shape: &Shape, topo: &TableTopology) -> u64 {
    match shape {
        Shape::Singles(v) => v.len() as u64,
        Shape::Sets(v) => v.len() as u64,
        Shape::Choose(v) => v.len() as u64,
        Shape::Ranges(v) => v.len() as u64,
        Shape::Copies(v) => v.len() as u64,
        Shape::Disk(d) => topo.chunks_on_disk(DiskId(*d)).len(),
        Shape::All => topo.all_chunks().len(),
    }
}

struct Run {
    plans: Vec<QuantumPlan>,
    ids: BTreeMap<DeclarationId, (DeclSpec, Option<u64>, u64)>,
}

/// Declares each spec at its quantum, deletes `deletions` at quantum 1,
/// and plans `quanta` quanta with `budget`.
fn run(seed: u64, specs: &[DeclSpec], deletions: &[u64], budget: &Budget, quanta: u64) -> Run {
    run_capped(seed, specs, deletions, budget, quanta, TaskCaps::default())
}

/// [`run`] with per-task rate caps.
fn run_capped(seed: u64, specs: &[DeclSpec], deletions: &[u64], budget: &Budget, quanta: u64, caps: TaskCaps) -> Run {
    let mut topo = cluster(seed);
    let config =
        PlannerConfig { quantum: Duration::from_millis(QUANTUM_MS), task_caps: caps, ..PlannerConfig::default() };
    let mut planner = Planner::new(config);
    let mut ids = BTreeMap::new();
    let mut plans = Vec::new();
    for q in 0..quanta {
        let now = Timestamp(q * QUANTUM_MS);
        if q == 1 && !deletions.is_empty() {
            for &b in deletions {
                topo.set_state(BlockId(b), BlockState::Deleted);
            }
            planner.note_deleted(&topo, &deletions.iter().copied().collect());
        }
        for spec in specs.iter().filter(|s| s.at_quantum == q) {
            let sets = set_count(&spec.shape, &topo);
            let sets_needed = spec.needed_fraction.map(|f| (sets * u64::from(f)).div_ceil(100).max(1));
            let decl = Declaration {
                task: TaskKind::ALL[spec.task],
                read_sets: read_sets(&spec.shape),
                sets_needed,
                bytes_needed: None,
                deadline: Timestamp(now.0 + spec.deadline_quanta * QUANTUM_MS),
            };
            // Declarations naming deleted blocks are rightly refused.
            if let Ok(id) = planner.declare(&topo, now, &decl) {
                ids.insert(id, (spec.clone(), sets_needed, sets));
            }
        }
        plans.push(planner.plan_quantum(&topo, now, budget));
    }
    Run { plans, ids }
}

/// A run's damage: blocks deleted at quantum 1, and disks failed for
/// quanta 1 and 2. Quantum 0 plans nothing (a budget of zero), so the
/// declarations wait and the deletions come first.
struct Damage {
    healthy: TableTopology,
    deleted: TableTopology,
    broken: TableTopology,
    deletions: RoaringTreemap,
}

impl Damage {
    fn new(healthy: &TableTopology, deletions: &BTreeSet<u64>, failed: &BTreeSet<u32>) -> Damage {
        let mut deleted = healthy.clone();
        for &b in deletions {
            deleted.set_state(BlockId(b), BlockState::Deleted);
        }
        let mut broken = deleted.clone();
        for &d in failed {
            broken.fail_disk(DiskId(d));
        }
        Damage { healthy: healthy.clone(), deleted, broken, deletions: deletions.iter().copied().collect() }
    }

    /// The cluster as quantum `q` sees it.
    fn topology(&self, q: u64) -> &TableTopology {
        match q {
            0 => &self.healthy,
            1 | 2 => &self.broken,
            _ => &self.deleted,
        }
    }

    /// Plans quantum `q` (noting the deletions first in quantum 1).
    fn plan(&self, planner: &mut Planner, q: u64) -> QuantumPlan {
        let topo = self.topology(q);
        if q == 1 {
            planner.note_deleted(topo, &self.deletions);
        }
        let budget = if q == 0 { Budget::cluster_bytes(0) } else { Budget::UNLIMITED };
        planner.plan_quantum(topo, Timestamp(q * QUANTUM_MS), &budget)
    }
}

fn budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        Just(Budget::UNLIMITED),
        (0u64..40).prop_map(|blocks| Budget::cluster_bytes(blocks * BLOCK)),
        (0u64..8).prop_map(|reads| Budget {
            cluster_bytes: u64::MAX,
            disk_head_time_us: DiskBudget::Uniform(reads * DiskModel::HDD.head_time_us(BLOCK)),
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn never_over_budget_and_each_set_at_most_once(
        seed in 0u64..8,
        specs in proptest::collection::vec(decl_spec(), 1..6),
        deletions in proptest::collection::vec(0..BLOCKS, 0..10),
        budget in budget(),
    ) {
        let r = run(seed, &specs, &deletions, &budget, 10);
        let topo = cluster(seed);
        let mut delivered: BTreeMap<DeclarationId, BTreeSet<u64>> = BTreeMap::new();
        let deleted: BTreeSet<u64> = deletions.iter().copied().collect();
        for (q, plan) in r.plans.iter().enumerate() {
            let physical = plan.schedule.physical_bytes();
            prop_assert!(physical <= budget.cluster_bytes, "quantum {}: {} > {}", q, physical, budget.cluster_bytes);
            let mut per_disk = vec![0u64; DISKS as usize];
            let mut seen_chunks = BTreeSet::new();
            for read in plan.schedule.reads.iter().filter(|r| r.physical()) {
                let bytes = plan.schedule.read_bytes(read);
                prop_assert_eq!(Some(bytes), topo.block(read.block()).map(|info| info.size), "the schedule's size of a block");
                per_disk[read.disk().0 as usize] += topo.disk_model(read.disk()).head_time_us(bytes);
                prop_assert!(seen_chunks.insert(read.chunk()), "chunk read from disk twice in one quantum");
            }
            for (d, used) in per_disk.iter().enumerate() {
                prop_assert!(*used <= budget.disk_limit_us(d as u32), "disk {} over budget", d);
            }
            // Free reads are attributed to a payer, except those re-read
            // because a split component's pin lapsed.
            for rider in TaskKind::ALL {
                let attributed: u64 = TaskKind::ALL.iter().map(|&payer| plan.dispatch.free_bytes_from(rider, payer)).sum();
                let free = plan.report.task(rider).free_bytes;
                prop_assert!(attributed <= free, "{}: {} attributed > {} free", rider, attributed, free);
                if plan.dispatch.split_loss_bytes == 0 {
                    prop_assert_eq!(attributed, free, "{}: every free byte has a payer", rider);
                }
            }
            for (s, set) in plan.schedule.sets.iter().enumerate() {
                let decl = plan.schedule.decls[set.decl as usize].id;
                prop_assert!(delivered.entry(decl).or_default().insert(set.key), "set delivered twice");
                let reads = plan.schedule.reads_of(s);
                prop_assert!(!reads.is_empty(), "an all-deleted set was delivered");
                if q >= 1 {
                    prop_assert!(reads.iter().all(|r| !deleted.contains(&r.block().0)), "deleted block read");
                }
                for r in reads {
                    prop_assert_eq!(topo.copy_disk(r.chunk()), Some(r.disk()), "read resolved to the wrong disk");
                }
                // A set needing `n` of its members reads `n` distinct ones
                // (fewer only once some were deleted).
                if let Shape::Choose(sets) = &r.ids[&decl].0.shape {
                    let (members, n) = &sets[set.key as usize];
                    let blocks: BTreeSet<u64> = reads.iter().map(|r| r.block().0).collect();
                    prop_assert_eq!(blocks.len(), reads.len(), "a member read twice");
                    prop_assert!(blocks.iter().all(|b| members.contains(b)), "read a non-member");
                    let live = members.iter().filter(|b| q == 0 || !deleted.contains(b)).count();
                    prop_assert_eq!(reads.len(), (*n as usize).min(live), "members read");
                }
            }
        }
        for (id, (_, needed, _)) in &r.ids {
            let got = delivered.get(id).map_or(0, |s| s.len() as u64);
            if let Some(n) = needed {
                prop_assert!(got <= *n, "{} got {} sets, needed only {}", id, got, n);
            }
        }
    }

    #[test]
    fn with_enough_budget_every_deadline_is_met_with_exactly_the_sets_needed(
        seed in 0u64..8,
        specs in proptest::collection::vec(decl_spec(), 1..6),
    ) {
        // Budget for every declared set in every quantum: the rate-based
        // scheduler must then meet every quota, so no deadline is missed.
        let r = run(seed, &specs, &[], &Budget::UNLIMITED, 12);
        let mut delivered: BTreeMap<DeclarationId, u64> = BTreeMap::new();
        for plan in &r.plans {
            prop_assert_eq!(plan.report.total().deadline_misses, 0);
            prop_assert_eq!(plan.report.total().overloaded_sets, 0);
            for set in &plan.schedule.sets {
                *delivered.entry(plan.schedule.decls[set.decl as usize].id).or_default() += 1;
            }
        }
        for (id, (_, needed, total)) in &r.ids {
            let got = delivered.get(id).copied().unwrap_or(0);
            prop_assert_eq!(got, needed.unwrap_or(*total), "{} delivered {} sets", id, got);
        }
    }

    #[test]
    fn a_capped_task_never_reads_more_than_its_cap_and_the_others_are_not_held_back(
        seed in 0u64..8,
        specs in proptest::collection::vec(decl_spec(), 1..6),
        capped in 0..TaskKind::COUNT,
        cap_blocks in 0u64..6,
    ) {
        let task = TaskKind::ALL[capped];
        // Bytes per second: QUANTUM_MS is one second.
        let caps = TaskCaps([(task, cap_blocks * BLOCK)].into_iter().collect());
        let r = run_capped(seed, &specs, &[], &Budget::UNLIMITED, 12, caps);
        let free = run(seed, &specs, &[], &Budget::UNLIMITED, 12);
        for (plan, uncapped) in r.plans.iter().zip(&free.plans) {
            prop_assert!(plan.report.task(task).disk_bytes <= cap_blocks * BLOCK);
            // With an unlimited budget, the other tasks get at least their
            // quota (the sets they need to stay on pace) as without the cap.
            for other in TaskKind::ALL.into_iter().filter(|&t| t != task) {
                prop_assert_eq!(plan.report.task(other).deadline_misses, uncapped.report.task(other).deadline_misses);
            }
        }
    }

    #[test]
    fn same_inputs_give_the_same_plans(
        seed in 0u64..8,
        specs in proptest::collection::vec(decl_spec(), 1..6),
        deletions in proptest::collection::vec(0..BLOCKS, 0..6),
        budget in budget(),
    ) {
        let a = run(seed, &specs, &deletions, &budget, 6);
        let b = run(seed, &specs, &deletions, &budget, 6);
        prop_assert_eq!(a.plans, b.plans);
    }

    /// A set is elided only when every member is deleted: with members
    /// deleted and disks failed for two quanta (so live members cannot be
    /// read for a while), every set with a live member is delivered once
    /// the disks return (a 1-of-2 set with one member deleted and the other
    /// on a failed disk was elided, found by the planner service's DST).
    #[test]
    fn a_set_is_elided_only_when_every_member_is_deleted(
        seed in 0u64..8,
        sets in proptest::collection::vec((proptest::collection::btree_set(0..BLOCKS, 1..6), 1u32..6), 1..6),
        deletions in proptest::collection::btree_set(0..BLOCKS, 0..20),
        failed in proptest::collection::btree_set(0..DISKS, 0..3),
    ) {
        let healthy = cluster(seed);
        let mut planner = Planner::new(PlannerConfig { quantum: Duration::from_millis(QUANTUM_MS), ..PlannerConfig::default() });
        let sets: Vec<(Vec<u64>, u32)> =
            sets.into_iter().map(|(s, n)| (s.iter().copied().collect(), n.min(s.len() as u32))).collect();
        let decl = Declaration {
            task: TaskKind::Reconstruction,
            read_sets: read_sets(&Shape::Choose(sets.clone())),
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(3 * QUANTUM_MS),
        };
        let id = planner.declare(&healthy, Timestamp(0), &decl).unwrap();
        let damage = Damage::new(&healthy, &deletions, &failed);
        let mut delivered = BTreeSet::new();
        for q in 0..10 {
            let plan = damage.plan(&mut planner, q);
            for set in &plan.schedule.sets {
                prop_assert!(delivered.insert(set.key), "set {} delivered twice", set.key);
            }
        }
        prop_assert_eq!(planner.status(id), None, "done by quantum 10");
        for (key, (members, _)) in sets.iter().enumerate() {
            let all_deleted = members.iter().all(|b| deletions.contains(b));
            prop_assert_eq!(
                delivered.contains(&(key as u64)),
                !all_deleted,
                "set {} of {:?}: delivered, or all its members deleted", key, members
            );
        }
    }

    /// Every shape of declaration ends once failed disks return: with
    /// blocks deleted and disks failed for two quanta, each set is either
    /// delivered, reading only live members on the disks the topology
    /// names at that quantum, or elided because every member is deleted;
    /// and every declaration is done within a few quanta of the disks'
    /// return (the k-of-n rule of the test above, for ranges, exact
    /// copies, disk scrubs and whole-cluster scrubs too).
    #[test]
    fn every_set_is_delivered_or_all_deleted_once_failed_disks_return(
        seed in 0u64..8,
        specs in proptest::collection::vec(decl_spec(), 1..5),
        deletions in proptest::collection::btree_set(0..BLOCKS, 0..20),
        failed in proptest::collection::btree_set(0..DISKS, 0..3),
    ) {
        let healthy = cluster(seed);
        let mut planner = Planner::new(PlannerConfig { quantum: Duration::from_millis(QUANTUM_MS), ..PlannerConfig::default() });
        let mut declared = BTreeMap::new();
        for spec in &specs {
            let decl = Declaration {
                task: TaskKind::ALL[spec.task],
                read_sets: read_sets(&spec.shape),
                sets_needed: None,
                bytes_needed: None,
                deadline: Timestamp(spec.deadline_quanta * QUANTUM_MS),
            };
            let id = planner.declare(&healthy, Timestamp(0), &decl).unwrap();
            declared.insert(id, spec.shape.clone());
        }
        let damage = Damage::new(&healthy, &deletions, &failed);
        let mut delivered: BTreeMap<DeclarationId, BTreeSet<u64>> = BTreeMap::new();
        for q in 0..8 {
            let plan = damage.plan(&mut planner, q);
            let topo = damage.topology(q);
            for (s, set) in plan.schedule.sets.iter().enumerate() {
                let id = plan.schedule.decls[set.decl as usize].id;
                prop_assert!(delivered.entry(id).or_default().insert(set.key), "{} set {} delivered twice", id, set.key);
                let shape = &declared[&id];
                let members = members_of(shape, set.key);
                let reads = plan.schedule.reads_of(s);
                for r in reads {
                    prop_assert!(members.contains(&r.block().0), "{} set {} read block {}", id, set.key, r.block().0);
                    prop_assert!(!deletions.contains(&r.block().0), "quantum {}: deleted block {} read", q, r.block().0);
                    prop_assert_eq!(topo.copy_disk(r.chunk()), Some(r.disk()), "quantum {}: a read off its copy's disk", q);
                }
                // Every live member is read once (k of them for a set
                // needing k): nothing is delivered short. Sets are only
                // delivered from quantum 1, after the deletions.
                let read: BTreeSet<u64> = reads.iter().map(|r| r.block().0).collect();
                let live: BTreeSet<u64> = members.iter().copied().filter(|b| !deletions.contains(b)).collect();
                prop_assert_eq!(read.len(), reads.len(), "{} set {}: a member read twice", id, set.key);
                match shape {
                    Shape::Choose(v) => prop_assert_eq!(read.len(), live.len().min(v[set.key as usize].1 as usize)),
                    _ => prop_assert_eq!(&read, &live, "{} set {}: the live members read", id, set.key),
                }
            }
        }
        for (id, shape) in &declared {
            prop_assert_eq!(planner.status(*id).map(|s| s.delivered_sets), None, "{} ({:?}) not done", id, shape);
            for key in set_keys(shape, &healthy) {
                let all_deleted = members_of(shape, key).iter().all(|b| deletions.contains(b));
                let got = delivered.get(id).is_some_and(|keys| keys.contains(&key));
                prop_assert_eq!(got, !all_deleted, "{} set {}: delivered, or all its members deleted", id, key);
            }
        }
    }

    /// Byte-denominated flexibility, beside other work that makes some of
    /// its sets free: (a) no set of it is scheduled in a quantum that
    /// starts with its bytes already delivered; (b) it finishes only with
    /// at least its bytes delivered, unless deletions left too few; it is
    /// never finished short otherwise (a cancel ends it without a finish);
    /// (c) with an unlimited budget and nothing deleted, failed or
    /// cancelled, it finishes by its deadline; (d) its status counts the
    /// bytes its scheduled sets read; (e) with disks failed for two quanta
    /// and an unlimited budget, it still finishes once they return.
    #[test]
    fn a_byte_flexible_declaration_gets_its_bytes_and_no_set_after(
        seed in 0u64..8,
        others in proptest::collection::vec(decl_spec(), 0..4),
        flexible in shape(),
        bytes_percent in 1u64..=100,
        deadline_quanta in 1u64..6,
        deletions in proptest::collection::vec(0..BLOCKS, 0..6),
        cancel_at in proptest::option::of(1u64..8),
        budget in budget(),
        failed in proptest::collection::btree_set(0..DISKS, 0..3),
    ) {
        let mut topo = cluster(seed);
        let config = PlannerConfig { quantum: Duration::from_millis(QUANTUM_MS), ..PlannerConfig::default() };
        let mut planner = Planner::new(config);
        let available = member_count(&flexible, &topo) * BLOCK;
        let needed = (available * bytes_percent).div_ceil(100);
        let decl = Declaration {
            task: TaskKind::Rebalancing,
            read_sets: read_sets(&flexible),
            sets_needed: None,
            bytes_needed: Some(needed),
            deadline: Timestamp(deadline_quanta * QUANTUM_MS),
        };
        let id = planner.declare(&topo, Timestamp(0), &decl).unwrap();
        let (mut delivered, mut finished, mut cancelled) = (0u64, None, false);
        for q in 0..12u64 {
            let now = Timestamp(q * QUANTUM_MS);
            if q == 1 && !deletions.is_empty() {
                for &b in &deletions {
                    topo.set_state(BlockId(b), BlockState::Deleted);
                }
                planner.note_deleted(&topo, &deletions.iter().copied().collect());
            }
            if cancel_at == Some(q) && finished.is_none() {
                cancelled = planner.cancel(id).is_ok();
            }
            for spec in others.iter().filter(|s| s.at_quantum == q) {
                let other = Declaration {
                    task: TaskKind::ALL[spec.task],
                    read_sets: read_sets(&spec.shape),
                    sets_needed: None,
                    bytes_needed: None,
                    deadline: Timestamp(now.0 + spec.deadline_quanta * QUANTUM_MS),
                };
                let _ = planner.declare(&topo, now, &other);
            }
            let before = delivered;
            // Disks fail for quanta 1 and 2 (copies on them unreadable), then return.
            let mut broken = topo.clone();
            for &d in failed.iter().filter(|_| (1..=2).contains(&q)) {
                broken.fail_disk(DiskId(d));
            }
            let plan = planner.plan_quantum(&broken, now, &budget);
            for (s, set) in plan.schedule.sets.iter().enumerate() {
                if plan.schedule.decls[set.decl as usize].id == id {
                    prop_assert!(before < needed, "quantum {}: a set after {} of {} bytes", q, before, needed);
                    delivered += plan.schedule.reads_of(s).iter().map(|r| plan.schedule.read_bytes(r)).sum::<u64>();
                }
            }
            if let Some(status) = planner.status(id) {
                prop_assert_eq!(status.delivered_bytes, delivered);
            }
            if let Some(status) = plan.finished.iter().find(|s| s.id == id) {
                prop_assert_eq!(status.delivered_bytes, delivered);
                let pool_gone = status.delivered_sets + status.elided_sets == status.total_sets;
                prop_assert!(delivered >= needed || (!deletions.is_empty() && pool_gone),
                    "finished with {} of {} bytes", delivered, needed);
                finished = Some(q);
            }
        }
        prop_assert!(!(cancelled && finished.is_some_and(|q| Some(q) >= cancel_at)), "finished after its cancel");
        if budget == Budget::UNLIMITED && deletions.is_empty() && cancel_at.is_none() && failed.is_empty() {
            prop_assert!(finished.is_some_and(|q| q < deadline_quanta), "finished in quantum {:?}", finished);
        }
        if budget == Budget::UNLIMITED && cancel_at.is_none() {
            prop_assert!(finished.is_some(), "not finished by quantum 12 with disks {:?} back from quantum 3", failed);
        }
    }
}

/// Members of a declaration of `shape` (all its sets' blocks, counted once
/// per set) on an undamaged cluster.
fn member_count(shape: &Shape, topo: &TableTopology) -> u64 {
    match shape {
        Shape::Sets(v) => v.iter().map(|s| s.len() as u64).sum(),
        Shape::Choose(v) => v.iter().map(|&(_, n)| u64::from(n)).sum(),
        Shape::Ranges(v) => v.iter().map(|&(_, len)| u64::from(len)).sum(),
        _ => set_count(shape, topo),
    }
}

/// The keys of the sets a declaration of `shape` holds on `topo`.
fn set_keys(shape: &Shape, topo: &TableTopology) -> Vec<u64> {
    match shape {
        Shape::Copies(cs) => {
            cs.iter().map(|&(b, copy)| Member::Copy(ChunkRef { block: BlockId(b), copy }).key()).collect()
        }
        Shape::Disk(d) => topo.chunks_on_disk(DiskId(*d)).iter().map(Member::key).collect(),
        Shape::All => topo.all_chunks().iter().map(Member::key).collect(),
        _ => (0..set_count(shape, topo)).collect(),
    }
}

/// The blocks of set `key` of a declaration of `shape`.
fn members_of(shape: &Shape, key: u64) -> Vec<u64> {
    match shape {
        Shape::Singles(v) => vec![v[key as usize]],
        Shape::Sets(v) => v[key as usize].clone(),
        Shape::Choose(v) => v[key as usize].0.clone(),
        Shape::Ranges(v) => {
            let (start, len) = v[key as usize];
            (start..start + u64::from(len)).collect()
        }
        Shape::Copies(_) | Shape::Disk(_) | Shape::All => vec![Member::from_key(key).block().0],
    }
}
