//! The planner's side of node-level IO control: each quantum's budget for
//! every live node (per disk, the chunk reads the schedule put there and
//! their head time), and the slowness the nodes report back, which cuts a
//! slow disk's head-time budget in the next quantum so the scheduler's
//! "any copy" resolution and per-disk limit move work to other disks.

use super::State;
use dingo_planner::{Budget, DiskBudget, Schedule};
use dingo_proto::v1::{DiskQuantumBudget, QuantumBudgetRequest};
use dingo_types::Topology;
use std::collections::BTreeMap;

/// One node's budget for a quantum, to send to `addr`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeBudget {
    pub(crate) addr: String,
    pub(crate) request: QuantumBudgetRequest,
}

/// A disk's congestion signal as its node reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DiskSlowness {
    /// More than 10 % above its model (with hysteresis), as the node
    /// decides for its read replies.
    pub(crate) congested: bool,
    /// Observed over modelled head time, per mille.
    pub(crate) permille: u32,
}

/// On-profile slowness.
const PROFILE_PERMILLE: u64 = 1000;

impl State {
    /// Every live node's budget for the quantum `[start_ms, end_ms)`: per
    /// disk, the schedule's physical reads there (free reads cost the disk
    /// nothing) and their head time on the disk's model, as the core
    /// counted it against the disk's budget. Disks given nothing are listed
    /// with zeros, so each node hears every quantum and replies.
    pub(super) fn node_budgets(&self, schedule: &Schedule, start_ms: u64, end_ms: u64) -> Vec<NodeBudget> {
        let mut per_disk: BTreeMap<u32, DiskQuantumBudget> = BTreeMap::new();
        for r in schedule.reads.iter().filter(|r| r.physical()) {
            let b = per_disk
                .entry(r.disk().0)
                .or_insert_with(|| DiskQuantumBudget { disk: r.disk().0, ..Default::default() });
            let bytes = schedule.read_bytes(r);
            b.bytes += bytes;
            b.reads += 1;
            b.head_time_us += self.topo.disk_model(r.disk()).head_time_us(bytes);
        }
        self.topo
            .live_disks_by_node()
            .into_iter()
            .map(|(addr, disks)| NodeBudget {
                addr: addr.to_string(),
                request: QuantumBudgetRequest {
                    quantum_start_ms: start_ms,
                    quantum_end_ms: end_ms,
                    disks: disks
                        .iter()
                        .map(|d| per_disk.remove(&d.0).unwrap_or(DiskQuantumBudget { disk: d.0, ..Default::default() }))
                        .collect(),
                },
            })
            .collect()
    }

    /// Records the slowness a node replied with, replacing what it said
    /// before.
    pub(crate) fn note_slowness(&mut self, disk: u32, slowness: DiskSlowness) {
        self.slowness.insert(disk, slowness);
    }

    pub(crate) fn note_node_budgets(&mut self, sent: u64, failed: u64) {
        self.metrics.node_budgets_sent += sent;
        self.metrics.node_budget_errors += failed;
    }

    /// Cuts the head-time budget of every congested disk by its slowness:
    /// the core counts head time on the disk's model, and a disk `k` times
    /// slower than its model serves `1/k` of it in the same time. A disk
    /// with no limit is cut from the quantum's length (the most head time
    /// any disk can serve in it). With no disk congested the budget is left
    /// as it is.
    pub(super) fn cut_slow_disks(&mut self, budget: &mut Budget) {
        let slow: BTreeMap<u32, u64> = self
            .slowness
            .iter()
            .filter(|(_, s)| s.congested && u64::from(s.permille) > PROFILE_PERMILLE)
            .map(|(&disk, s)| (disk, u64::from(s.permille)))
            .collect();
        self.metrics.slow_disks = slow.len() as u64;
        if slow.is_empty() {
            return;
        }
        let quantum_us = self.config.quantum_ms.saturating_mul(1000);
        let per_disk = (0..self.topo.disk_count())
            .map(|disk| {
                let limit = budget.disk_limit_us(disk);
                match slow.get(&disk) {
                    Some(&permille) => limit.min(quantum_us).saturating_mul(PROFILE_PERMILLE) / permille,
                    None => limit,
                }
            })
            .collect();
        budget.disk_head_time_us = DiskBudget::PerDisk(per_disk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServiceConfig;
    use crate::records::Loaded;
    use crate::topology::tests::{cluster, row};
    use crate::topology::{MetaTopology, Snapshot};
    use dingo_proto::v1::BlockState as PbState;
    use dingo_types::{BlockId, BlockSet, Declaration, DiskModel, ReadSets, TaskKind, Timestamp};

    const T0: u64 = 1_000_000;

    /// Blocks 0..8 of 1000 bytes, two copies each on disks (b % 4,
    /// (b + 1) % 4); disks 0, 1 on node `n0`, 2, 3 on `n1`. One declaration
    /// of every block, any copy, due in one quantum, its client subscribed.
    fn state() -> State {
        let rows = (0..8u64).map(|b| row(b, PbState::Sealed, &[(b % 4) as u32, ((b + 1) % 4) as u32])).collect();
        let mut topo = MetaTopology::default();
        topo.apply(Snapshot { rows, cluster: cluster(true) });
        let config = ServiceConfig { quantum_ms: 1000, dispatch_spacing_ms: 500, ..ServiceConfig::new("adm") };
        let mut state = State::restore(config, Loaded::default(), topo, T0).unwrap();
        let decl = Declaration {
            task: TaskKind::Scrubbing,
            read_sets: ReadSets::Sets((0..8).map(|b| BlockSet::any_of([BlockId(b)])).collect()),
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(T0 + 1000),
        };
        state.declare("a", &decl, T0).unwrap();
        state.subscribe("a");
        state
    }

    /// Per disk: (bytes, reads) of the physical reads in the deliveries a
    /// planned quantum stores.
    fn scheduled(ready: &super::super::Ready) -> BTreeMap<u32, (u64, u64)> {
        let mut out = BTreeMap::new();
        let reads = ready.batch.deliveries.iter().flat_map(|(_, d)| d.callback.iter()).flat_map(|c| &c.sets);
        for r in reads.flat_map(|s| &s.reads).filter(|r| r.physical) {
            let e = out.entry(r.disk).or_insert((0, 0));
            e.0 += r.bytes;
            e.1 += 1;
        }
        out
    }

    #[test]
    fn each_live_node_gets_the_reads_scheduled_on_its_disks() {
        let mut s = state();
        let ready = s.plan_quantum(T0);
        let scheduled = scheduled(&ready);
        assert_eq!(scheduled.values().map(|&(_, reads)| reads).sum::<u64>(), 8, "every block once");
        let model = DiskModel { positioning_us: 5, transfer_bytes_per_sec: 7 };
        let addrs: Vec<&str> = ready.node_budgets.iter().map(|b| b.addr.as_str()).collect();
        assert_eq!(addrs, ["n0", "n1"]);
        for (node, disks) in ready.node_budgets.iter().zip([[0, 1], [2, 3]]) {
            assert_eq!((node.request.quantum_start_ms, node.request.quantum_end_ms), (T0, T0 + 1000));
            assert_eq!(node.request.disks.iter().map(|d| d.disk).collect::<Vec<_>>(), disks, "every disk, listed");
            for d in &node.request.disks {
                let (bytes, reads) = scheduled.get(&d.disk).copied().unwrap_or_default();
                assert_eq!((d.bytes, d.reads), (bytes, reads), "disk {}", d.disk);
                assert_eq!(d.head_time_us, reads * model.head_time_us(1000), "disk {}", d.disk);
            }
        }
    }

    #[test]
    fn a_slow_disk_is_given_less_work_in_the_next_quantum() {
        let mut normal = state();
        let on_disk_0 = scheduled(&normal.plan_quantum(T0)).get(&0).copied().unwrap_or_default();
        assert!(on_disk_0.1 > 0, "disk 0 is chosen when every disk is on profile");
        assert_eq!(normal.metrics.slow_disks, 0);

        let mut slowed = state();
        slowed.note_slowness(0, DiskSlowness { congested: true, permille: 5000 });
        slowed.note_slowness(1, DiskSlowness { congested: false, permille: 1080 });
        let ready = slowed.plan_quantum(T0);
        let after = scheduled(&ready);
        assert_eq!(after.get(&0), None, "the other copies are read instead");
        assert_eq!(after.values().map(|&(_, reads)| reads).sum::<u64>(), 8, "and nothing is left behind");
        assert_eq!(slowed.metrics.slow_disks, 1, "disk 1 is within the profile's 10 %");
    }

    #[test]
    fn cutting_scales_a_limit_and_leaves_a_budget_without_slow_disks_alone() {
        let mut s = state();
        let mut budget = Budget { cluster_bytes: 9, disk_head_time_us: DiskBudget::Uniform(800_000) };
        s.cut_slow_disks(&mut budget);
        assert_eq!(budget.disk_head_time_us, DiskBudget::Uniform(800_000));
        s.note_slowness(2, DiskSlowness { congested: true, permille: 4000 });
        s.cut_slow_disks(&mut budget);
        assert_eq!(budget.disk_head_time_us, DiskBudget::PerDisk(vec![800_000, 800_000, 200_000, 800_000]));
        let mut unlimited = Budget::UNLIMITED;
        s.cut_slow_disks(&mut unlimited);
        assert_eq!(unlimited.disk_limit_us(2), 250_000, "a quarter of the 1 s quantum");
        assert_eq!(unlimited.disk_limit_us(3), u64::MAX);
    }
}
