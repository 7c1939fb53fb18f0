//! The state machine driven by hand: explicit times, no store, no network,
//! no clock. [`Driver`] plays the real driver's part — it applies each
//! `Ready`'s batch to in-memory tables, then hands its messages to
//! in-memory streams — and checks the write-ahead rule on every `Ready`: a
//! callback goes out only once its delivery is durably `Dispatched`.

use super::*;
use crate::auth::Caller;
use crate::error::ServiceError;
use crate::memory_store::MemoryStore;
use crate::topology::tests::{cluster, row};
use dingo_planner::DeclareError;
use dingo_proto::v1::BlockState as PbState;
use dingo_types::{BlockId, BlockRange, BlockSet, ChunkRef, Declaration, DiskId, ReadSets, Timestamp};
use std::collections::HashSet;

mod pins;

const T0: u64 = 1_000_000;

/// Blocks 0..8, two copies each on disks (b % 4, (b + 1) % 4).
fn topo() -> MetaTopology {
    let rows = (0..8u64).map(|b| row(b, PbState::Sealed, &[(b % 4) as u32, ((b + 1) % 4) as u32])).collect();
    let mut t = MetaTopology::default();
    t.apply(Snapshot { rows, cluster: cluster(true) });
    t
}

fn config() -> ServiceConfig {
    ServiceConfig { quantum_ms: 1000, dispatch_spacing_ms: 500, ..ServiceConfig::new("adm") }
}

fn singles(blocks: std::ops::Range<u64>, deadline_ms: u64) -> Declaration {
    Declaration {
        task: TaskKind::Fsck,
        read_sets: ReadSets::Sets(blocks.map(|b| BlockSet::any_of([BlockId(b)])).collect()),
        sets_needed: None,
        bytes_needed: None,
        deadline: Timestamp(deadline_ms),
    }
}

/// The state machine with a hand-played driver.
struct Driver {
    state: State,
    tables: MemoryStore,
    inbox: HashMap<StreamId, Vec<Outgoing>>,
    gone: HashSet<StreamId>,
}

impl Driver {
    fn new() -> Driver {
        Driver::restart(MemoryStore::default(), topo())
    }

    /// A process start (or restart after a crash) from what was committed.
    fn restart(tables: MemoryStore, topo: MetaTopology) -> Driver {
        let state = State::restore(config(), tables.load().unwrap(), topo, T0).unwrap();
        Driver { state, tables, inbox: HashMap::new(), gone: HashSet::new() }
    }

    /// Commits, then sends; a message for a stream whose client went away
    /// is reported back, as the real driver does.
    fn apply(&mut self, ready: Ready) {
        self.tables.commit(&ready.batch);
        for m in ready.messages {
            if let Outgoing::Callback(cb) = &m.item {
                let durable = self.tables.states.get(&cb.delivery);
                assert!(
                    matches!(durable, Some(DeliveryState::Dispatched | DeliveryState::Acked)),
                    "write-ahead: callback {} sent while its delivery is {durable:?}",
                    cb.delivery
                );
                if self.gone.contains(&m.stream) {
                    self.state.close_stream(m.stream, &[cb.delivery]);
                    continue;
                }
            }
            self.inbox.entry(m.stream).or_default().push(m.item);
        }
    }

    fn declare(&mut self, owner: &str, decl: &Declaration, now: u64) -> Result<DeclarationId, DeclareError> {
        let (accepted, ready) = self.state.declare(owner, decl, now)?;
        assert!(ready.batch.decls.iter().any(|(id, _)| *id == accepted.id.0), "the id is returned once stored");
        self.apply(ready);
        Ok(accepted.id)
    }

    fn subscribe(&mut self, owner: &str) -> StreamId {
        let (stream, ready) = self.state.subscribe(owner);
        self.apply(ready);
        stream
    }

    /// The client's side of `stream` goes away.
    fn hang_up(&mut self, stream: StreamId) {
        self.gone.insert(stream);
        self.state.close_stream(stream, &[]);
    }

    fn plan(&mut self, now: u64) {
        let ready = self.state.plan_quantum(now);
        assert!(ready.messages.is_empty(), "planning sends nothing");
        self.apply(ready);
    }

    /// Dispatches every group due by `now` (directives are not sent here).
    fn dispatch_all(&mut self, now: u64) {
        while let Some(due) = self.state.take_due_group(now) {
            let ready = self.state.complete_group(&due);
            self.apply(ready);
        }
    }

    fn ack(&mut self, owner: &str, ids: &[u64]) -> Result<(), ServiceError> {
        let ready = self.state.ack(owner, ids)?;
        self.apply(ready);
        Ok(())
    }

    fn cancel(&mut self, caller: &Caller, id: u64) -> Result<u64, ServiceError> {
        let (delivered, ready) = self.state.cancel(caller, id)?;
        self.apply(ready);
        Ok(delivered)
    }

    /// The callbacks `stream` received since the last drain.
    fn drain(&mut self, stream: StreamId) -> Vec<pb::Callback> {
        let items = self.inbox.remove(&stream).unwrap_or_default();
        items
            .into_iter()
            .map(|item| match item {
                Outgoing::Callback(cb) => cb,
                Outgoing::Replaced(why) => panic!("a callback, not the end: {why}"),
            })
            .collect()
    }

    fn status(&self, id: DeclarationId) -> pb::DeclarationStatus {
        self.state.status(&Caller::Admin, &[id.0]).unwrap()[0].clone()
    }

    fn page(&self) -> String {
        self.state.metrics_view().render()
    }
}

fn keys(cbs: &[pb::Callback]) -> Vec<u64> {
    let mut k: Vec<u64> = cbs.iter().flat_map(|c| c.sets.iter().map(|s| s.key)).collect();
    k.sort_unstable();
    k
}

fn ids(cbs: &[pb::Callback]) -> Vec<u64> {
    cbs.iter().map(|c| c.delivery).collect()
}

#[test]
fn declare_dispatch_ack_and_done() {
    let mut d = Driver::new();
    let id = d.declare("a", &singles(0..4, T0 + 2000), T0).unwrap();
    assert_eq!(d.status(id).total_sets, 4);
    let a = d.subscribe("a");
    d.plan(T0);
    assert!(d.drain(a).is_empty(), "nothing is sent before its dispatch time");
    assert!(d.tables.states.values().all(|s| *s == DeliveryState::Scheduled), "but it is all stored");
    d.dispatch_all(T0 + 1000);
    let first = d.drain(a);
    assert_eq!(keys(&first), vec![0, 1], "half the sets in the first of two quanta");
    assert!(first.iter().all(|c| c.quantum_ms == T0 && !c.redelivery && c.declaration == id.0));
    let reads = first.iter().flat_map(|c| c.sets.iter().flat_map(|s| s.reads.iter()));
    assert!(reads.clone().count() > 0);
    assert!(reads.into_iter().all(|r| Some(r.node_addr.as_str()) == d.state.topo.node_of(DiskId(r.disk))));
    let st = d.status(id);
    assert_eq!((st.delivered_sets, st.acked_sets, st.done), (2, 0, false));
    d.ack("a", &ids(&first)).unwrap();
    assert!(first.iter().all(|c| d.tables.states[&c.delivery] == DeliveryState::Acked), "acks are stored");
    d.plan(T0 + 1000);
    d.dispatch_all(T0 + 2000);
    let second = d.drain(a);
    assert_eq!(keys(&second), vec![2, 3]);
    d.plan(T0 + 2000);
    assert!(!d.status(id).done, "retired but not yet acknowledged");
    d.ack("a", &ids(&second)).unwrap();
    let st = d.status(id);
    assert_eq!((st.delivered_sets, st.acked_sets, st.done, st.missed_deadline), (4, 4, true, false));
    assert!(d.tables.deliveries.is_empty() && d.tables.requests.is_empty(), "a done declaration keeps its counts only");
    assert_eq!(d.tables.decls[&id.0].phase().unwrap(), Phase::Done);
    assert!(d.state.status(&Caller::Client("a".into()), &[]).unwrap().is_empty(), "done leaves the default listing");
    assert!(d.page().contains("dingo_planner_sets_delivered_total{task=\"fsck\"} 4"));
}

#[test]
fn a_restart_loses_nothing_unacknowledged_and_repeats_nothing_acknowledged() {
    let ranges = ReadSets::Ranges((0..4u64).map(|i| BlockRange { start: BlockId(2 * i), len: 2 }).collect());
    let decl = Declaration {
        task: TaskKind::Transcoding,
        read_sets: ranges,
        sets_needed: None,
        bytes_needed: None,
        deadline: Timestamp(T0 + 4000),
    };
    let mut d = Driver::new();
    d.declare("a", &decl, T0).unwrap();
    let a = d.subscribe("a");
    d.plan(T0);
    d.dispatch_all(T0 + 1000);
    let q1 = d.drain(a);
    assert_eq!(q1.len(), 1);
    d.ack("a", &[q1[0].delivery]).unwrap();
    d.plan(T0 + 1000);
    d.dispatch_all(T0 + 1000); // only the first group of quantum 2 is due
    let q2 = d.drain(a);
    assert_eq!(q2.len(), 1, "dispatched, never acknowledged");
    d.plan(T0 + 2000); // committed as scheduled, then the crash

    let mut d = Driver::restart(d.tables, topo());
    let a = d.subscribe("a");
    let replay = d.drain(a);
    assert_eq!(replay.len(), 1, "the unacknowledged callback comes again");
    assert!(replay[0].redelivery && replay[0].delivery == q2[0].delivery);
    d.dispatch_all(T0 + 10_000);
    let after = d.drain(a);
    assert!(after.iter().all(|c| !c.redelivery));
    d.ack("a", &ids(&replay)).unwrap();
    d.ack("a", &ids(&after)).unwrap();
    d.plan(T0 + 10_000);
    d.dispatch_all(T0 + 20_000);
    let rest = d.drain(a);
    d.ack("a", &ids(&rest)).unwrap();
    let all: Vec<pb::Callback> = [q1, replay, after, rest].concat();
    assert_eq!(keys(&all), vec![0, 2, 4, 6], "range keys are start blocks; each set exactly once");
    d.plan(T0 + 20_000);
    let st = d.status(DeclarationId(1));
    assert!(st.done && st.acked_sets == 4, "{st:?}");
    let next = d.declare("a", &singles(0..1, T0 + 90_000), T0 + 20_000).unwrap();
    assert_eq!(next, DeclarationId(2), "ids continue above the stored ones");
}

#[test]
fn a_crash_before_a_commit_leaves_no_trace_and_nothing_is_lost() {
    let mut d = Driver::new();
    let id = d.declare("a", &singles(0..2, T0 + 1000), T0).unwrap();
    let a = d.subscribe("a");
    // The quantum is planned but its Ready never committed: the crash.
    let lost = d.state.plan_quantum(T0);
    assert_eq!(lost.batch.deliveries.len(), 2);
    let unsaved = d.state.declare("a", &singles(4..6, T0 + 1000), T0).unwrap();
    drop((lost, unsaved));
    assert!(d.drain(a).is_empty());

    let mut d = Driver::restart(d.tables, topo());
    assert!(d.state.status(&Caller::Admin, &[2]).is_err(), "the declaration never committed does not exist");
    let a = d.subscribe("a");
    d.plan(T0);
    d.dispatch_all(T0 + 1000);
    let got = d.drain(a);
    assert_eq!(keys(&got), vec![0, 1], "the restarted core schedules the lost quantum's sets again");
    assert!(got.iter().all(|c| c.declaration == id.0 && !c.redelivery));
}

#[test]
fn foreign_unknown_and_unsent_requests_are_refused_and_change_nothing() {
    let mut d = Driver::new();
    let id = d.declare("a", &singles(0..2, T0 + 1000), T0).unwrap();
    d.subscribe("a");
    d.plan(T0);
    let scheduled: Vec<u64> = d.state.deliveries.keys().copied().collect();
    assert!(matches!(d.ack("a", &scheduled), Err(ServiceError::Precondition(_))));
    d.dispatch_all(T0 + 1000);
    assert!(matches!(d.ack("b", &scheduled), Err(ServiceError::Denied(_))));
    assert!(matches!(d.ack("a", &[scheduled[0], 999]), Err(ServiceError::NotFound(_))), "never sent");
    // Found by the deterministic simulation (seed 5): id 0, below the
    // first id handed out, was taken for a finished delivery.
    assert!(matches!(d.ack("a", &[scheduled[0], 0]), Err(ServiceError::NotFound(_))), "there is no delivery 0");
    let b = Caller::Client("b".into());
    assert!(matches!(d.cancel(&b, id.0), Err(ServiceError::Denied(_))));
    assert!(matches!(d.state.status(&b, &[id.0]), Err(ServiceError::Denied(_))));
    assert!(d.state.status(&b, &[]).unwrap().is_empty());
    let st = d.status(id);
    assert_eq!((st.delivered_sets, st.acked_sets), (2, 0), "the refused acks changed nothing");
    assert!(scheduled.iter().all(|del| d.tables.states[del] == DeliveryState::Dispatched), "nor the tables");
    assert_eq!(d.cancel(&Caller::Client("a".into()), id.0).unwrap(), 2);
    assert_eq!(d.tables.decls[&id.0].phase().unwrap(), Phase::Cancelled);
    d.ack("a", &scheduled).unwrap();
    let st = d.status(id);
    assert!(st.cancelled && !st.done && st.acked_sets == 0, "cancelled: acks are no-ops; {st:?}");
    let a = d.subscribe("a");
    assert!(d.drain(a).is_empty(), "nothing of a cancelled declaration is re-sent");
}

#[test]
fn a_budget_change_keeps_the_limits_it_does_not_name() {
    let mut d = Driver::new();
    let (_, ready) = d.state.set_budget(Some(5_000), Some(7_000));
    d.apply(ready);
    let (b, ready) = d.state.set_budget(Some(9_000), None);
    d.apply(ready);
    assert_eq!((b.cluster_bytes, b.disk_head_time_us), (9_000, 7_000));
    let d = Driver::restart(d.tables, topo());
    assert_eq!(d.state.base_budget(), b, "persisted");
}

#[test]
fn callbacks_dispatched_while_nobody_listened_are_not_redeliveries() {
    let mut d = Driver::new();
    d.declare("a", &singles(0..2, T0 + 1000), T0).unwrap();
    let first = d.subscribe("a");
    d.plan(T0);
    // The client leaves between planning and dispatch.
    d.hang_up(first);
    d.dispatch_all(T0 + 1000);
    let second = d.subscribe("a");
    let got = d.drain(second);
    assert!(got.len() == 2 && got.iter().all(|c| !c.redelivery), "never seen before: {got:?}");
    let third = d.subscribe("a");
    let again = d.drain(third);
    assert!(again.len() == 2 && again.iter().all(|c| c.redelivery), "seen on the second stream: {again:?}");
}

#[test]
fn callbacks_a_stream_did_not_take_are_not_redeliveries() {
    let mut d = Driver::new();
    d.declare("a", &singles(0..2, T0 + 1000), T0).unwrap();
    let first = d.subscribe("a");
    d.plan(T0);
    // The stream is gone by the time the driver sends (it reports that back).
    d.gone.insert(first);
    d.dispatch_all(T0 + 1000);
    assert!(!d.state.is_subscribed("a"), "the driver's news closed the stream");
    let second = d.subscribe("a");
    let got = d.drain(second);
    assert!(got.len() == 2 && got.iter().all(|c| !c.redelivery), "{got:?}");
}

#[test]
fn a_client_without_a_stream_gets_nothing_scheduled_until_it_subscribes() {
    let mut d = Driver::new();
    let away = d.declare("a", &singles(0..4, T0 + 4000), T0).unwrap();
    let here = d.declare("b", &singles(0..4, T0 + 4000), T0).unwrap();
    let b = d.subscribe("b");
    d.plan(T0);
    d.dispatch_all(T0 + 1000);
    assert!(!d.drain(b).is_empty(), "b, subscribed, is served");
    assert!(d.page().contains("dingo_planner_paused_declarations 1"));
    assert_eq!(d.status(away).delivered_sets, 0, "nothing dispatched to nobody");
    assert!(d.state.deliveries.values().all(|x| x.owner == "b"), "nor scheduled for later");
    // Subscribed, a catches up: all four sets in the three quanta left.
    let a = d.subscribe("a");
    for q in 1..4 {
        d.plan(T0 + q * 1000);
        d.dispatch_all(T0 + (q + 1) * 1000);
    }
    assert_eq!(keys(&d.drain(a)), vec![0, 1, 2, 3]);
    let st = d.status(away);
    assert!(st.delivered_sets == 4 && !st.missed_deadline, "{st:?}");
    assert_eq!(d.status(here).delivered_sets, 4);
    // A closed stream pauses again.
    d.hang_up(a);
    let later = d.declare("a", &singles(0..2, T0 + 9000), T0 + 4000).unwrap();
    d.plan(T0 + 4000);
    d.dispatch_all(T0 + 5000);
    assert_eq!(d.status(later).delivered_sets, 0);
}

#[test]
fn one_stream_per_client_and_acks_are_idempotent() {
    let mut d = Driver::new();
    let live = d.declare("a", &singles(0..2, T0 + 1000), T0).unwrap();
    let gone = d.declare("a", &singles(4..5, T0 + 1000), T0).unwrap();
    d.cancel(&Caller::Client("a".into()), gone.0).unwrap();
    let st = d.state.status(&Caller::Client("a".into()), &[live.0, gone.0]).unwrap();
    assert_eq!(st.iter().map(|s| s.cancelled).collect::<Vec<_>>(), vec![false, true]);

    let first = d.subscribe("a");
    assert!(d.page().contains("dingo_planner_subscribers 1"));
    let second = d.subscribe("a");
    match d.inbox.remove(&first).as_deref() {
        Some([Outgoing::Replaced(msg)]) => assert!(msg.contains("replaced"), "{msg}"),
        other => panic!("the replaced stream must end with Replaced, got {other:?}"),
    }
    d.plan(T0);
    d.dispatch_all(T0 + 1000);
    let cbs = d.drain(second);
    assert_eq!(keys(&cbs), vec![0, 1], "the newer stream gets the callbacks");
    assert!(d.drain(first).is_empty());
    d.ack("a", &ids(&cbs)).unwrap();
    d.plan(T0 + 2000);
    assert!(d.status(live).done);
    d.ack("a", &ids(&cbs)).unwrap();
    d.state.close_stream(first, &[]);
    assert!(d.page().contains("dingo_planner_subscribers 1"), "news of the replaced stream does not end the new one");
    d.hang_up(second);
    assert!(d.page().contains("dingo_planner_subscribers 0"), "a closed stream is not counted");
}

#[test]
fn the_overlap_matrix_says_which_task_rode_on_which() {
    let mut d = Driver::new();
    // Reconstruction must read blocks 0-3 now; fsck, with a far deadline,
    // takes the ones it shares for free.
    let urgent = Declaration { task: TaskKind::Reconstruction, ..singles(0..4, T0 + 1000) };
    d.declare("a", &urgent, T0).unwrap();
    d.declare("b", &singles(0..8, T0 + 60_000), T0).unwrap();
    d.subscribe("a");
    d.subscribe("b");
    d.plan(T0);
    let page = d.page();
    let line = page
        .lines()
        .find(|l| l.starts_with("dingo_planner_overlap_bytes_total{task=\"fsck\",paid_by=\"reconstruction\"}"))
        .unwrap_or_else(|| panic!("{page}"));
    let bytes: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 0, "{line}");
    assert!(!page.contains("paid_by=\"fsck\""), "fsck paid for nothing another task read: {page}");
    assert_eq!(d.state.planned_free_bytes(), bytes, "only fsck rode on another task's reads");
    // The Status reply's disk bytes are the metric's, summed over tasks.
    let disk: u64 = page
        .lines()
        .filter(|l| l.starts_with("dingo_planner_disk_bytes_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(disk > 0, "{page}");
    assert_eq!(d.state.planned_disk_bytes(), disk);
}

#[test]
fn deleted_blocks_elide_sets_and_scrubs_are_stored_as_snapshots() {
    let mut d = Driver::new();
    let scrub = Declaration {
        task: TaskKind::Scrubbing,
        read_sets: ReadSets::ChunksOnDisk(DiskId(0)),
        sets_needed: None,
        bytes_needed: None,
        deadline: Timestamp(T0 + 5000),
    };
    let id = d.declare("a", &scrub, T0).unwrap();
    assert_eq!(d.status(id).total_sets, 4, "blocks 0, 3, 4 and 7 have a copy on disk 0");
    // Block 0 is deleted before anything is read.
    d.state.apply_topology(Snapshot { rows: vec![row(0, PbState::Deleted, &[0, 1])], cluster: cluster(true) });
    // After a restart the snapshot (not today's disk 0) is restored, and
    // the deleted block stays elided.
    let mut t = topo();
    t.apply(Snapshot {
        rows: vec![row(0, PbState::Deleted, &[0, 1]), row(8, PbState::Sealed, &[0, 1])],
        cluster: cluster(true),
    });
    let d = Driver::restart(d.tables, t);
    let st = d.status(id);
    assert_eq!((st.total_sets, st.elided_sets), (4, 1));
    assert_eq!(d.state.planner.status(id).unwrap().needed_left, 3);
}

#[test]
fn a_wire_range_past_u64_max_is_refused_as_an_unknown_block() {
    use dingo_proto::planner::declare_request::ReadSets as WireReadSets;
    let range = pb::BlockRange { start: u64::MAX - 1, len: 4 };
    let wire = pb::DeclareRequest {
        task: "transcoding".into(),
        deadline_ms: T0 + 1000,
        sets_needed: None,
        bytes_needed: None,
        read_sets: Some(WireReadSets::Ranges(pb::BlockRanges { ranges: vec![range] })),
    };
    let decl = dingo_planner_client::convert::declaration_from_wire(&wire).unwrap();
    let mut d = Driver::new();
    let refused = d.declare("a", &decl, T0);
    assert_eq!(
        refused,
        Err(DeclareError::BadBlock { set: 0, problem: dingo_types::BlockProblem::Unknown(BlockId(u64::MAX - 1)) })
    );
    assert!(d.tables.decls.is_empty() && d.state.decls.is_empty(), "nothing changed");
}

#[test]
fn the_read_lower_bound_counts_one_read_per_block_for_overlapping_windows() {
    use dingo_types::{BlockId, Topology};
    let mut d = Driver::new();
    let size: u64 = (0..4).map(|b| d.state.topo.block(BlockId(b)).unwrap().size).sum();
    d.declare("a", &singles(0..4, T0 + 60_000), T0).unwrap();
    d.declare("b", &Declaration { task: TaskKind::Reconstruction, ..singles(0..4, T0 + 30_000) }, T0 + 10).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), size, "one read serves both");
    // A data-flexible declaration may read none of its candidates.
    d.declare("b", &Declaration { sets_needed: Some(1), ..singles(4..8, T0 + 30_000) }, T0 + 20).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), size);
    // After the first group's deadline, the blocks need another read.
    d.declare("a", &singles(0..4, T0 + 90_000), T0 + 40_000).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), 2 * size);
    d.state.bound_retire(T0 + 100_000);
    assert_eq!(d.state.read_lower_bound_bytes(), 2 * size, "retiring keeps the count");
    assert!(d.page().contains(&format!("dingo_planner_read_lower_bound_bytes {}", 2 * size)), "{}", d.page());
}

#[test]
fn the_read_lower_bound_counts_what_restored_declarations_have_left() {
    use dingo_types::{BlockId, Topology};
    let mut d = Driver::new();
    let size = |d: &Driver, blocks: std::ops::Range<u64>| -> u64 {
        blocks.map(|b| d.state.topo.block(BlockId(b)).unwrap().size).sum()
    };
    d.declare("a", &singles(0..4, T0 + 60_000), T0).unwrap();
    d.declare("a", &Declaration { sets_needed: Some(1), ..singles(4..8, T0 + 60_000) }, T0).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), size(&d, 0..4));
    let mut d = Driver::restart(d.tables, topo());
    assert_eq!(d.state.read_lower_bound_bytes(), size(&d, 0..4), "the restored declaration is counted again");
    // Sets delivered before a restart were read by the previous run: only
    // the rest counts after the next one.
    let (_, ready) = d.state.set_budget(Some(size(&d, 0..2)), None);
    d.apply(ready);
    d.subscribe("a");
    d.plan(T0 + 1000);
    d.dispatch_all(T0 + 2000);
    let delivered = d.status(DeclarationId(1)).delivered_sets;
    assert!((1..4).contains(&delivered), "a partial delivery: {delivered}");
    let d = Driver::restart(d.tables, topo());
    let left = d.state.read_lower_bound_bytes();
    assert!(left > 0 && left < size(&d, 0..4), "{left} counts only the undelivered sets");
}

#[test]
fn a_cancelled_declaration_leaves_the_read_lower_bound() {
    use dingo_types::{BlockId, Topology};
    let mut d = Driver::new();
    let size: u64 = (0..4).map(|b| d.state.topo.block(BlockId(b)).unwrap().size).sum();
    d.declare("a", &singles(0..4, T0 + 30_000), T0).unwrap();
    // Its windows start after the first ones closed: a second read each.
    let late = d.declare("b", &singles(0..4, T0 + 90_000), T0 + 40_000).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), 2 * size);
    d.cancel(&Caller::Client("b".into()), late.0).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), size, "the cancelled declaration's reads are not needed");
    // A late declaration that can still be cancelled is not retired.
    let again = d.declare("b", &singles(0..4, T0 + 90_000), T0 + 40_000).unwrap();
    d.state.bound_retire(T0 + 100_000);
    d.cancel(&Caller::Client("b".into()), again.0).unwrap();
    assert_eq!(d.state.read_lower_bound_bytes(), size);
}

#[test]
fn announced_deletions_elide_covered_sets_of_every_client_before_they_are_read() {
    use dingo_types::{ChunkRef, Member, MemberBitmap};
    let mut d = Driver::new();
    let scrub = d.declare("a", &singles(0..4, T0 + 2000), T0).unwrap();
    let fsck = d.declare("b", &Declaration { task: TaskKind::Fsck, ..singles(2..6, T0 + 2000) }, T0).unwrap();
    // Another task will delete blocks 2 and 3 and copy 0 of block 4 (its
    // copy 1 stays, so an any-copy set of block 4 is still read).
    let copy0 = Member::Copy(ChunkRef { block: BlockId(4), copy: 0 });
    let announced: MemberBitmap = [Member::Any(BlockId(2)), Member::Any(BlockId(3)), copy0].into_iter().collect();
    assert_eq!(d.state.announce_deletions(&announced), 4, "blocks 2 and 3 in both declarations");
    assert_eq!((d.status(scrub).elided_sets, d.status(fsck).elided_sets), (2, 2));
    assert!(d.page().contains("dingo_planner_announced_elided_sets_total 4"), "{}", d.page());
    let (a, b) = (d.subscribe("a"), d.subscribe("b"));
    d.plan(T0 + 1000);
    d.dispatch_all(T0 + 60_000);
    let read = keys(&[d.drain(a), d.drain(b)].concat());
    assert_eq!(read, vec![0, 1, 2, 3], "a's sets 0 and 1 (blocks 0, 1), b's 2 and 3 (blocks 4, 5)");
    assert_eq!(d.state.announce_deletions(&announced), 0, "announcing again elides nothing more");
}
