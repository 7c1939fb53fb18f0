//! The service's state: the planner core, the cluster topology, and the
//! durable records of declarations and deliveries, kept in step.
//!
//! Write-ahead rule: every change is committed to the store
//! ([`crate::store`]) before anyone hears of it — a declaration before its
//! id is returned, a quantum's deliveries (as `Scheduled`, with their
//! dispatch time) before any directive or callback goes out, a group's
//! deliveries as `Dispatched` before its callbacks are streamed, an
//! acknowledgement before `Ack` returns. So after a crash at any point:
//! - a set the core scheduled is either in a stored delivery (restored as
//!   delivered, and its delivery sent when due) or nowhere (the core
//!   schedules it again): never lost, never scheduled twice;
//! - a callback a client may have seen is `Dispatched` or `Acked`; the
//!   former is re-sent with `redelivery = true` when the client
//!   subscribes, the latter never again.
//!
//! Store errors in the quantum path are fatal (the core has moved on, so the
//! process must restart from the store); request paths commit first and
//! change memory only after, so a failed request changes nothing.

use crate::auth::Caller;
use crate::config::{ServiceConfig, core_budget};
use crate::convert::{Keys, callback_to_wire, declaration_from_wire, declaration_to_wire, parse_task};
use crate::error::ServiceError;
use crate::store::{
    Batch, DeclRecord, DeliveryRecord, DeliveryState, GroupRecord, Loaded, NEXT_DELIVERY, NEXT_GROUP, Phase, PinRecord,
    Store, StoreError,
};
use crate::topology::{MetaTopology, Snapshot};
use dingo_planner::{DeclareError, Planner, TaskStats};
use dingo_proto::metrics::MetricsText;
use dingo_proto::planner as pb;
use dingo_types::{ChunkRef, Declaration, DeclarationId, ReadSets, TaskKind, Timestamp, Topology};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Why [`State::declare`] failed; nothing changed either way.
pub(crate) enum DeclareFailure {
    Rejected(DeclareError),
    Store(StoreError),
}

/// A declaration as the service tracks it.
struct Decl {
    owner: String,
    task: TaskKind,
    deadline_ms: u64,
    total_sets: u64,
    sets_needed: Option<u64>,
    created_ms: u64,
    keys: Keys,
    phase: Phase,
    /// The core finished it (everything needed delivered or elided); it
    /// is done once every delivery is acknowledged.
    retired: bool,
    missed: bool,
    /// Elided sets once retired (the core counts them while it holds it).
    elided: u64,
    /// Sets in dispatched or acknowledged deliveries.
    delivered_sets: u64,
    acked_sets: u64,
    /// Its stored deliveries, in any state.
    deliveries: BTreeSet<u64>,
}

impl Decl {
    fn record(&self) -> DeclRecord {
        DeclRecord {
            owner: self.owner.clone(),
            task: self.task.name().to_string(),
            deadline_ms: self.deadline_ms,
            total_sets: self.total_sets,
            sets_needed: self.sets_needed,
            phase: self.phase as u32,
            missed: self.missed,
            elided_sets: self.elided,
            delivered_sets: self.delivered_sets,
            acked_sets: self.acked_sets,
            created_ms: self.created_ms,
        }
    }
}

struct Delivery {
    owner: String,
    declaration: u64,
    callback: pb::Callback,
    state: DeliveryState,
    sets: u64,
    /// Handed to an open stream at least once, so sending it again is a
    /// redelivery. Restored deliveries count as streamed: the crash may
    /// have come after the send.
    streamed: bool,
}

struct Group {
    at_ms: u64,
    pins: Vec<PinRecord>,
    deliveries: Vec<u64>,
}

/// A dispatch group whose time has come, taken out of the queue. Its
/// directives go out (by node), then [`State::complete_group`].
pub(crate) struct DueGroup {
    pub id: u64,
    /// Node address → pins `(chunk, until unix ms)` for that node.
    pub pins: Vec<(String, Vec<(ChunkRef, u64)>)>,
    deliveries: Vec<u64>,
}

/// Counters for `/metrics`.
#[derive(Default)]
struct Metrics {
    /// Per task: cumulative over quanta, except the queue snapshots.
    tasks: [TaskStats; TaskKind::COUNT],
    quanta: u64,
    last_plan_seconds: f64,
    last_physical_bytes: u64,
    split_loss_bytes: u64,
    dispatched: u64,
    redelivered: u64,
    acked: u64,
    /// Declarations the last quantum skipped: their client had no stream.
    paused_declarations: u64,
    /// `overlap_bytes[rider][payer]`: bytes `rider` read free on disk reads
    /// `payer` paid for, summed over quanta (the overlap matrix).
    overlap_bytes: [[u64; TaskKind::COUNT]; TaskKind::COUNT],
    pins_sent: u64,
    pin_errors: u64,
    topology_errors: u64,
}

pub(crate) struct State {
    config: ServiceConfig,
    planner: Planner,
    topo: MetaTopology,
    store: Store,
    decls: BTreeMap<u64, Decl>,
    deliveries: BTreeMap<u64, Delivery>,
    groups: BTreeMap<u64, Group>,
    next_delivery: u64,
    next_group: u64,
    budget_override: Option<pb::Budget>,
    /// One callback stream per client.
    subscribers: HashMap<String, UnboundedSender<Result<pb::Callback, ServiceError>>>,
    pub next_quantum_ms: u64,
    metrics: Metrics,
}

/// Set keys (wire form) of a callback.
fn wire_keys(cb: &pb::Callback) -> impl Iterator<Item = u64> + '_ {
    cb.sets.iter().map(|s| s.key)
}

impl State {
    /// Rebuilds the state from what was stored: live declarations go back
    /// into the planner core under their ids with their delivered sets,
    /// sets whose blocks were deleted meanwhile are elided, and dispatch
    /// groups not yet dispatched are queued again (those whose time passed
    /// are due at once).
    pub(crate) fn restore(
        config: ServiceConfig,
        store: Store,
        loaded: Loaded,
        topo: MetaTopology,
        now_ms: u64,
    ) -> Result<State, StoreError> {
        let bad = StoreError;
        let mut planner = Planner::new(config.planner_config());
        let mut requests: HashMap<u64, pb::DeclareRequest> = loaded.requests.into_iter().collect();
        let mut delivered_keys: HashMap<u64, Vec<u64>> = HashMap::new();
        for (_, rec, _) in &loaded.deliveries {
            let cb = rec.callback.as_ref().ok_or_else(|| bad("a delivery without its callback".into()))?;
            delivered_keys.entry(cb.declaration).or_default().extend(wire_keys(cb));
        }
        let mut decls = BTreeMap::new();
        for (id, rec) in loaded.decls {
            let phase = rec.phase()?;
            let task = parse_task(&rec.task).map_err(bad)?;
            let mut keys = Keys::Same;
            if phase == Phase::Live {
                let req = requests.remove(&id).ok_or_else(|| bad(format!("declaration {id} has no request")))?;
                let decl = declaration_from_wire(&req).map_err(|e| bad(format!("declaration {id}: {e}")))?;
                keys = Keys::of(&decl.read_sets);
                let wire = delivered_keys.remove(&id).unwrap_or_default();
                let core: Vec<u64> = wire
                    .iter()
                    .map(|&k| keys.to_core(k).ok_or_else(|| bad(format!("declaration {id} has no set {k}"))))
                    .collect::<Result<_, _>>()?;
                planner
                    .restore(&topo, DeclarationId(id), &decl, &core, rec.missed)
                    .map_err(|e| bad(format!("cannot restore declaration {id}: {e}")))?;
            }
            planner.advance_ids(DeclarationId(id));
            let d = Decl {
                owner: rec.owner,
                task,
                deadline_ms: rec.deadline_ms,
                total_sets: rec.total_sets,
                sets_needed: rec.sets_needed,
                created_ms: rec.created_ms,
                keys,
                phase,
                retired: phase != Phase::Live,
                missed: rec.missed,
                elided: rec.elided_sets,
                delivered_sets: if phase == Phase::Live { 0 } else { rec.delivered_sets },
                acked_sets: if phase == Phase::Live { 0 } else { rec.acked_sets },
                deliveries: BTreeSet::new(),
            };
            decls.insert(id, d);
        }
        planner.note_deleted(&topo, &topo.deleted());
        let mut deliveries = BTreeMap::new();
        let mut groups: BTreeMap<u64, Group> = loaded
            .groups
            .into_iter()
            .map(|(id, g)| (id, Group { at_ms: g.at_ms, pins: g.pins, deliveries: Vec::new() }))
            .collect();
        for (id, rec, state) in loaded.deliveries {
            let callback = rec.callback.expect("checked above");
            let sets = callback.sets.len() as u64;
            let d =
                decls.get_mut(&callback.declaration).ok_or_else(|| bad(format!("delivery {id} has no declaration")))?;
            d.deliveries.insert(id);
            if state >= DeliveryState::Dispatched {
                d.delivered_sets += sets;
            }
            if state == DeliveryState::Acked {
                d.acked_sets += sets;
            }
            if state == DeliveryState::Scheduled {
                groups
                    .get_mut(&rec.group)
                    .ok_or_else(|| bad(format!("delivery {id} has no group")))?
                    .deliveries
                    .push(id);
            }
            let streamed = state == DeliveryState::Dispatched;
            deliveries.insert(
                id,
                Delivery { owner: rec.owner, declaration: callback.declaration, callback, state, sets, streamed },
            );
        }
        Ok(State {
            config,
            planner,
            topo,
            store,
            decls,
            deliveries,
            groups,
            next_delivery: loaded.next_delivery,
            next_group: loaded.next_group,
            budget_override: loaded.budget,
            subscribers: HashMap::new(),
            next_quantum_ms: now_ms,
            metrics: Metrics::default(),
        })
    }

    /// Applies a fresh snapshot of the metadata service; sets whose blocks
    /// were all deleted are elided right away.
    pub(crate) fn apply_topology(&mut self, snap: Snapshot) {
        let deleted = self.topo.apply(snap);
        if !deleted.is_empty() {
            self.planner.note_deleted(&self.topo, &deleted);
        }
    }

    pub(crate) fn note_topology_error(&mut self) {
        self.metrics.topology_errors += 1;
    }

    pub(crate) fn note_pins(&mut self, sent: u64, failed: u64) {
        self.metrics.pins_sent += sent;
        self.metrics.pin_errors += failed;
    }

    /// Validates and stores a declaration for task client `owner`. Disk and
    /// cluster scrubs are resolved to their chunks now (a snapshot), and
    /// that resolved form is what is stored.
    pub(crate) fn declare(
        &mut self,
        owner: &str,
        decl: &Declaration,
        now_ms: u64,
    ) -> Result<(DeclarationId, u64), DeclareFailure> {
        let resolved = match decl.read_sets {
            ReadSets::ChunksOnDisk(disk) if disk.0 < self.topo.disk_count() => Cow::Owned(Declaration {
                read_sets: ReadSets::EachMember(self.topo.chunks_on_disk(disk)),
                ..decl.clone()
            }),
            ReadSets::AllChunks => {
                Cow::Owned(Declaration { read_sets: ReadSets::EachMember(self.topo.all_chunks()), ..decl.clone() })
            }
            _ => Cow::Borrowed(decl),
        };
        let id = self.planner.declare(&self.topo, Timestamp(now_ms), &resolved).map_err(DeclareFailure::Rejected)?;
        let total_sets = self.planner.status(id).map_or(0, |s| s.total_sets);
        let d = Decl {
            owner: owner.to_string(),
            task: decl.task,
            deadline_ms: decl.deadline.as_millis(),
            total_sets,
            sets_needed: decl.sets_needed,
            created_ms: now_ms,
            keys: Keys::of(&resolved.read_sets),
            phase: Phase::Live,
            retired: false,
            missed: false,
            elided: 0,
            delivered_sets: 0,
            acked_sets: 0,
            deliveries: BTreeSet::new(),
        };
        let batch = Batch {
            decls: vec![(id.0, d.record())],
            requests: vec![(id.0, declaration_to_wire(&resolved))],
            ..Batch::default()
        };
        if let Err(e) = self.store.commit(&batch) {
            let _ = self.planner.cancel(id);
            return Err(DeclareFailure::Store(e));
        }
        self.decls.insert(id.0, d);
        Ok((id, total_sets))
    }

    /// The base budget: the run-time override, else the configured one.
    pub(crate) fn base_budget(&self) -> pb::Budget {
        self.budget_override.unwrap_or_else(|| self.config.base_budget())
    }

    /// The budget of the quantum starting at `now_ms`.
    pub(crate) fn budget_at(&self, now_ms: u64) -> pb::Budget {
        self.config.budget_at(&self.base_budget(), now_ms)
    }

    /// Replaces the limits given (0 = unlimited), keeping the others.
    /// Returns the new budget.
    pub(crate) fn set_budget(
        &mut self,
        cluster_bytes: Option<u64>,
        disk_head_time_us: Option<u64>,
    ) -> Result<pb::Budget, StoreError> {
        let old = self.base_budget();
        let budget = pb::Budget {
            cluster_bytes: cluster_bytes.unwrap_or(old.cluster_bytes),
            disk_head_time_us: disk_head_time_us.unwrap_or(old.disk_head_time_us),
        };
        self.store.commit(&Batch { budget: Some(budget), ..Batch::default() })?;
        self.budget_override = Some(budget);
        Ok(budget)
    }

    /// Plans the quantum starting at `now_ms` and stores its deliveries and
    /// dispatch groups before anything is sent. An error is fatal: the core
    /// already counts the sets as delivered.
    pub(crate) fn plan_quantum(&mut self, now_ms: u64) -> Result<(), StoreError> {
        let budget = core_budget(&self.budget_at(now_ms));
        // Nobody would receive these callbacks: spend no budget or pins on
        // them until their client subscribes again (they keep their
        // deadlines; the core makes up the pace afterwards).
        let paused: BTreeSet<DeclarationId> = self
            .decls
            .iter()
            .filter(|(_, d)| !d.retired && !self.is_subscribed(&d.owner))
            .map(|(&id, _)| DeclarationId(id))
            .collect();
        self.metrics.paused_declarations = paused.len() as u64;
        self.planner.set_paused(paused);
        let started = Instant::now();
        let plan = self.planner.plan_quantum(&self.topo, Timestamp(now_ms), &budget);
        let plan_seconds = started.elapsed().as_secs_f64();

        let mut batch = Batch::default();
        let mut next_delivery = self.next_delivery;
        let mut new_groups = Vec::new();
        let mut new_deliveries = Vec::new();
        for g in 0..plan.dispatch.groups.len() {
            let gid = self.next_group + g as u64;
            let at_ms = plan.dispatch.groups[g].at.as_millis();
            let pins: Vec<PinRecord> = plan
                .dispatch
                .pins_of(g)
                .iter()
                .map(|p| PinRecord {
                    block: p.chunk.block.0,
                    copy: u32::from(p.chunk.copy),
                    disk: p.disk.0,
                    until_ms: p.until.as_millis(),
                })
                .collect();
            let mut ids = Vec::new();
            for cb in plan.dispatch.callbacks(&plan.schedule, g) {
                let decl = self.decls.get(&cb.declaration.0).expect("every core declaration is tracked");
                let mut wire = callback_to_wire(&cb, &decl.keys, |disk| self.topo.node_of(disk));
                wire.delivery = next_delivery;
                wire.quantum_ms = now_ms;
                let rec = DeliveryRecord { owner: decl.owner.clone(), callback: Some(wire), at_ms, group: gid };
                batch.deliveries.push((next_delivery, rec));
                batch.states.push((next_delivery, DeliveryState::Scheduled));
                ids.push(next_delivery);
                new_deliveries.push(next_delivery);
                next_delivery += 1;
            }
            batch.groups.push((gid, GroupRecord { at_ms, pins: pins.clone() }));
            new_groups.push((gid, Group { at_ms, pins, deliveries: ids }));
        }
        let next_group = self.next_group + plan.dispatch.groups.len() as u64;
        batch.counters = vec![(NEXT_DELIVERY, next_delivery), (NEXT_GROUP, next_group)];

        // Progress the core reports: retirements and newly missed deadlines.
        let mut changed: Vec<u64> = Vec::new();
        for s in &plan.finished {
            let d = self.decls.get_mut(&s.id.0).expect("tracked");
            d.retired = true;
            d.elided = s.elided_sets;
            d.missed |= s.missed_deadline;
            changed.push(s.id.0);
        }
        for s in self.planner.outstanding() {
            let d = self.decls.get_mut(&s.id.0).expect("tracked");
            if s.missed_deadline && !d.missed {
                d.missed = true;
                changed.push(s.id.0);
            }
        }
        // Move the new deliveries in (still `Scheduled`: they count as
        // delivered only when dispatched).
        for (id, rec) in &batch.deliveries {
            let cb = rec.callback.clone().expect("just built");
            let d = self.decls.get_mut(&cb.declaration).expect("tracked");
            d.deliveries.insert(*id);
            let delivery = Delivery {
                owner: rec.owner.clone(),
                declaration: cb.declaration,
                sets: cb.sets.len() as u64,
                callback: cb,
                state: DeliveryState::Scheduled,
                streamed: false,
            };
            self.deliveries.insert(*id, delivery);
        }
        let mut done = Vec::new();
        for id in changed {
            if self.is_complete(id, &[]) {
                self.finish(&mut batch, id, Phase::Done);
                done.push(id);
            } else {
                batch.decls.push((id, self.decls[&id].record()));
            }
        }
        self.store.commit(&batch)?;
        self.apply_finished(&done, Phase::Done);
        self.groups.extend(new_groups);
        self.next_delivery = next_delivery;
        self.next_group = next_group;

        let m = &mut self.metrics;
        m.quanta += 1;
        m.last_plan_seconds = plan_seconds;
        m.last_physical_bytes = plan.schedule.physical_bytes();
        m.split_loss_bytes += plan.dispatch.split_loss_bytes;
        for (mine, theirs) in m.overlap_bytes.iter_mut().flatten().zip(plan.dispatch.free_bytes_from.iter().flatten()) {
            *mine += theirs;
        }
        for (mine, theirs) in m.tasks.iter_mut().zip(&plan.report.tasks) {
            mine.add(theirs);
            mine.queued_sets = theirs.queued_sets;
            mine.outstanding_declarations = theirs.outstanding_declarations;
        }
        tracing::debug!(deliveries = new_deliveries.len(), groups = plan.dispatch.groups.len(), "quantum planned");
        Ok(())
    }

    /// Whether a retired declaration has every delivery acknowledged,
    /// counting `acking` as acknowledged.
    fn is_complete(&self, id: u64, acking: &[u64]) -> bool {
        let d = &self.decls[&id];
        d.retired
            && d.deliveries.iter().all(|del| {
                acking.contains(del) || self.deliveries.get(del).is_some_and(|x| x.state == DeliveryState::Acked)
            })
    }

    /// Adds to `batch` what ends declaration `id` (done or cancelled): its
    /// final record, and the removal of its request and deliveries.
    fn finish(&self, batch: &mut Batch, id: u64, phase: Phase) {
        let d = &self.decls[&id];
        let mut rec = d.record();
        rec.phase = phase as u32;
        if phase == Phase::Done {
            rec.acked_sets = rec.delivered_sets;
        }
        if !d.retired {
            rec.elided_sets = self.planner.status(DeclarationId(id)).map_or(d.elided, |s| s.elided_sets);
        }
        batch.decls.push((id, rec));
        batch.drop_requests.push(id);
        batch.drop_deliveries.extend(d.deliveries.iter().copied());
    }

    /// Memory side of [`Self::finish`], after the commit.
    fn apply_finished(&mut self, ids: &[u64], phase: Phase) {
        for id in ids {
            if !self.decls[id].retired {
                self.decls.get_mut(id).expect("tracked").elided =
                    self.planner.status(DeclarationId(*id)).map_or(0, |s| s.elided_sets);
                let _ = self.planner.cancel(DeclarationId(*id));
            }
            let d = self.decls.get_mut(id).expect("tracked");
            d.phase = phase;
            d.retired = true;
            if phase == Phase::Done {
                d.acked_sets = d.delivered_sets;
            }
            for del in std::mem::take(&mut d.deliveries) {
                self.deliveries.remove(&del);
            }
        }
    }

    /// When the next queued dispatch group is due.
    pub(crate) fn next_group_at(&self) -> Option<u64> {
        self.groups.values().map(|g| g.at_ms).min()
    }

    /// Takes the earliest group due at `now_ms` out of the queue, with its
    /// unexpired pins resolved to the nodes holding the chunks.
    pub(crate) fn take_due_group(&mut self, now_ms: u64) -> Option<DueGroup> {
        let (&id, _) = self.groups.iter().filter(|(_, g)| g.at_ms <= now_ms).min_by_key(|(id, g)| (g.at_ms, **id))?;
        let g = self.groups.remove(&id).expect("just found");
        let mut by_node: BTreeMap<String, Vec<(ChunkRef, u64)>> = BTreeMap::new();
        for p in g.pins.iter().filter(|p| p.until_ms > now_ms) {
            if let Some(addr) = self.topo.node_of(dingo_types::DiskId(p.disk)) {
                let chunk = ChunkRef { block: dingo_types::BlockId(p.block), copy: p.copy as u8 };
                by_node.entry(addr.to_string()).or_default().push((chunk, p.until_ms));
            }
        }
        Some(DueGroup { id, pins: by_node.into_iter().collect(), deliveries: g.deliveries })
    }

    /// Marks a due group's deliveries dispatched (durably), then streams its
    /// callbacks to their owners. Deliveries of declarations cancelled
    /// meanwhile are gone and skipped. An error is fatal.
    pub(crate) fn complete_group(&mut self, due: &DueGroup) -> Result<(), StoreError> {
        let live: Vec<u64> = due
            .deliveries
            .iter()
            .copied()
            .filter(|d| self.deliveries.get(d).is_some_and(|x| x.state == DeliveryState::Scheduled))
            .collect();
        let batch = Batch {
            states: live.iter().map(|&d| (d, DeliveryState::Dispatched)).collect(),
            drop_groups: vec![due.id],
            ..Batch::default()
        };
        self.store.commit(&batch)?;
        for id in live {
            let d = self.deliveries.get_mut(&id).expect("live");
            d.state = DeliveryState::Dispatched;
            let (owner, cb, sets, decl) = (d.owner.clone(), d.callback.clone(), d.sets, d.declaration);
            self.decls.get_mut(&decl).expect("tracked").delivered_sets += sets;
            self.metrics.dispatched += 1;
            let streamed = self.offer(&owner, cb);
            self.deliveries.get_mut(&id).expect("live").streamed = streamed;
        }
        Ok(())
    }

    /// Whether `owner` has a callback stream open.
    fn is_subscribed(&self, owner: &str) -> bool {
        self.subscribers.get(owner).is_some_and(|tx| !tx.is_closed())
    }

    /// Sends a callback to its owner's stream, if one is open. Returns
    /// whether it was handed to one.
    fn offer(&mut self, owner: &str, cb: pb::Callback) -> bool {
        let Some(tx) = self.subscribers.get(owner) else { return false };
        let sent = tx.send(Ok(cb)).is_ok();
        if !sent {
            self.subscribers.remove(owner);
        }
        sent
    }

    /// Opens `owner`'s callback stream: every dispatched but
    /// unacknowledged callback first (in delivery order; flagged as
    /// redelivery if a stream had it before), then new ones as they are
    /// dispatched. One stream per
    /// client: an open one is replaced, and ends with
    /// [`ServiceError::Replaced`] (not a plain end, which tells a client to
    /// subscribe again), so two processes sharing a token do not silently
    /// take turns at each other's callbacks.
    pub(crate) fn subscribe(&mut self, owner: &str) -> UnboundedReceiver<Result<pb::Callback, ServiceError>> {
        let (tx, rx) = unbounded_channel();
        for d in self.deliveries.values_mut().filter(|d| d.owner == owner && d.state == DeliveryState::Dispatched) {
            let _ = tx.send(Ok(pb::Callback { redelivery: d.streamed, ..d.callback.clone() }));
            self.metrics.redelivered += u64::from(d.streamed);
            d.streamed = true;
        }
        if let Some(old) = self.subscribers.insert(owner.to_string(), tx) {
            let _ = old.send(Err(ServiceError::Replaced(format!(
                "client `{owner}` subscribed again; this stream was replaced by the newer one"
            ))));
        }
        rx
    }

    /// Ends every callback stream (at shutdown, so the server can drain).
    pub(crate) fn close_streams(&mut self) {
        self.subscribers.clear();
    }

    /// Acknowledges deliveries of `owner`. All or nothing: any unknown,
    /// foreign or unsent delivery rejects the whole request. A delivery of
    /// a declaration that has finished or was cancelled is no longer
    /// tracked and needs no acknowledgement: acknowledging it (again) is a
    /// no-op, so a client retrying an ack it is unsure of never fails.
    pub(crate) fn ack(&mut self, owner: &str, ids: &[u64]) -> Result<(), ServiceError> {
        let mut acking: Vec<u64> = Vec::new();
        for &id in ids {
            let Some(d) = self.deliveries.get(&id) else {
                if id < self.next_delivery {
                    continue;
                }
                return Err(ServiceError::NotFound(format!("delivery {id} was never sent")));
            };
            if d.owner != owner {
                return Err(ServiceError::Denied(format!("delivery {id} belongs to another client")));
            }
            match d.state {
                DeliveryState::Scheduled => {
                    return Err(ServiceError::Precondition(format!("delivery {id} has not been sent yet")));
                }
                DeliveryState::Dispatched if !acking.contains(&id) => acking.push(id),
                _ => {}
            }
        }
        let mut batch =
            Batch { states: acking.iter().map(|&d| (d, DeliveryState::Acked)).collect(), ..Batch::default() };
        let touched: BTreeSet<u64> = acking.iter().map(|d| self.deliveries[d].declaration).collect();
        let done: Vec<u64> = touched.into_iter().filter(|&decl| self.is_complete(decl, &acking)).collect();
        for &decl in &done {
            self.finish(&mut batch, decl, Phase::Done);
        }
        self.store.commit(&batch)?;
        for id in &acking {
            let d = self.deliveries.get_mut(id).expect("checked");
            d.state = DeliveryState::Acked;
            let (decl, sets) = (d.declaration, d.sets);
            self.decls.get_mut(&decl).expect("tracked").acked_sets += sets;
        }
        self.metrics.acked += acking.len() as u64;
        self.apply_finished(&done, Phase::Done);
        Ok(())
    }

    fn own_decl(&self, caller: &Caller, id: u64) -> Result<&Decl, ServiceError> {
        let d =
            self.decls.get(&id).ok_or_else(|| ServiceError::NotFound(format!("declaration {id} does not exist")))?;
        match caller {
            Caller::Client(name) if **name != *d.owner => {
                Err(ServiceError::Denied(format!("declaration {id} belongs to another client")))
            }
            _ => Ok(d),
        }
    }

    /// Cancels a live declaration of `owner`: nothing more is delivered for
    /// it, its unacknowledged callbacks included. Returns the sets delivered.
    pub(crate) fn cancel(&mut self, caller: &Caller, id: u64) -> Result<u64, ServiceError> {
        let d = self.own_decl(caller, id)?;
        match d.phase {
            Phase::Live => {}
            Phase::Done => return Err(ServiceError::Precondition(format!("declaration {id} is already done"))),
            Phase::Cancelled => {
                return Err(ServiceError::Precondition(format!("declaration {id} is already cancelled")));
            }
        }
        let delivered = d.delivered_sets;
        let mut batch = Batch::default();
        self.finish(&mut batch, id, Phase::Cancelled);
        self.store.commit(&batch)?;
        self.apply_finished(&[id], Phase::Cancelled);
        Ok(delivered)
    }

    fn status_of(&self, id: u64, d: &Decl) -> pb::DeclarationStatus {
        let core = if d.retired { None } else { self.planner.status(DeclarationId(id)) };
        pb::DeclarationStatus {
            declaration: id,
            task: d.task.name().to_string(),
            client: d.owner.clone(),
            deadline_ms: d.deadline_ms,
            total_sets: d.total_sets,
            sets_needed: d.sets_needed,
            delivered_sets: d.delivered_sets,
            acked_sets: d.acked_sets,
            elided_sets: core.as_ref().map_or(d.elided, |s| s.elided_sets),
            missed_deadline: core.as_ref().map_or(d.missed, |s| s.missed_deadline),
            done: d.phase == Phase::Done,
            cancelled: d.phase == Phase::Cancelled,
        }
    }

    /// Status of the given declarations, or of every live one of the caller
    /// (of every client, for the admin).
    pub(crate) fn status(&self, caller: &Caller, ids: &[u64]) -> Result<Vec<pb::DeclarationStatus>, ServiceError> {
        if ids.is_empty() {
            let mine = |d: &Decl| matches!(caller, Caller::Client(n) if **n == *d.owner) || *caller == Caller::Admin;
            return Ok(self
                .decls
                .iter()
                .filter(|(_, d)| d.phase == Phase::Live && mine(d))
                .map(|(&id, d)| self.status_of(id, d))
                .collect());
        }
        ids.iter().map(|&id| Ok(self.status_of(id, self.own_decl(caller, id)?))).collect()
    }

    /// Bytes delivered riding on another set's read, over every task.
    pub(crate) fn planned_free_bytes(&self) -> u64 {
        self.metrics.tasks.iter().map(|s| s.free_bytes).sum()
    }

    /// The Prometheus page.
    pub(crate) fn render_metrics(&self) -> String {
        let m = &self.metrics;
        let mut t = MetricsText::new();
        type Field = fn(&TaskStats) -> u64;
        let per_task: [(&str, &str, &str, Field); 10] = [
            ("dingo_planner_logical_bytes_total", "counter", "Bytes of live members delivered.", |s| s.logical_bytes),
            ("dingo_planner_disk_bytes_total", "counter", "Bytes newly scheduled from disk.", |s| s.disk_bytes),
            ("dingo_planner_free_bytes_total", "counter", "Bytes delivered riding on another set's read.", |s| {
                s.free_bytes
            }),
            ("dingo_planner_elided_bytes_total", "counter", "Bytes not read because deleted.", |s| s.elided_bytes),
            ("dingo_planner_sets_delivered_total", "counter", "Sets scheduled for delivery.", |s| s.sets_delivered),
            ("dingo_planner_sets_elided_total", "counter", "Sets elided (all blocks deleted).", |s| s.sets_elided),
            ("dingo_planner_overloaded_sets_total", "counter", "Sets delivered flagged overloaded.", |s| {
                s.overloaded_sets
            }),
            ("dingo_planner_deadline_misses_total", "counter", "Declarations that missed their deadline.", |s| {
                s.deadline_misses
            }),
            ("dingo_planner_queued_sets", "gauge", "Sets still to deliver after the last quantum.", |s| s.queued_sets),
            ("dingo_planner_outstanding_declarations", "gauge", "Declarations with work left.", |s| {
                s.outstanding_declarations
            }),
        ];
        for (name, kind, help, field) in per_task {
            t.family(name, kind, help);
            for task in TaskKind::ALL {
                t.sample(name, &[("task", task.name())], field(&m.tasks[task.index()]));
            }
        }
        // Only the pairs that overlapped: 64 mostly-zero series would bury
        // the few that matter.
        let overlap = "dingo_planner_overlap_bytes_total";
        t.family(
            overlap,
            "counter",
            "Bytes a task (`task`) read free on disk reads another task (`paid_by`) paid for.",
        );
        for rider in TaskKind::ALL {
            for payer in TaskKind::ALL {
                let bytes = m.overlap_bytes[rider.index()][payer.index()];
                if bytes > 0 {
                    t.sample(overlap, &[("task", rider.name()), ("paid_by", payer.name())], bytes);
                }
            }
        }
        let scalars: [(&str, &str, &str, String); 11] = [
            ("dingo_planner_quanta_total", "counter", "Quanta planned.", m.quanta.to_string()),
            (
                "dingo_planner_last_plan_seconds",
                "gauge",
                "Time to plan the last quantum.",
                m.last_plan_seconds.to_string(),
            ),
            (
                "dingo_planner_last_quantum_physical_bytes",
                "gauge",
                "Disk bytes the last quantum scheduled.",
                m.last_physical_bytes.to_string(),
            ),
            (
                "dingo_planner_split_loss_bytes_total",
                "counter",
                "Re-reads caused by split dispatch groups.",
                m.split_loss_bytes.to_string(),
            ),
            ("dingo_planner_callbacks_dispatched_total", "counter", "Callbacks dispatched.", m.dispatched.to_string()),
            (
                "dingo_planner_callbacks_redelivered_total",
                "counter",
                "Callbacks re-sent on subscription.",
                m.redelivered.to_string(),
            ),
            ("dingo_planner_acks_total", "counter", "Deliveries acknowledged.", m.acked.to_string()),
            (
                "dingo_planner_paused_declarations",
                "gauge",
                "Declarations the last quantum did not schedule because their client had no open stream.",
                m.paused_declarations.to_string(),
            ),
            ("dingo_planner_pins_sent_total", "counter", "Cache directives sent to nodes.", m.pins_sent.to_string()),
            (
                "dingo_planner_pin_errors_total",
                "counter",
                "Cache directives a node did not take.",
                m.pin_errors.to_string(),
            ),
            (
                "dingo_planner_topology_errors_total",
                "counter",
                "Failed topology refreshes.",
                m.topology_errors.to_string(),
            ),
        ];
        for (name, kind, help, value) in scalars {
            t.family(name, kind, help).sample(name, &[], value);
        }
        t.family("dingo_planner_blocks", "gauge", "Blocks in the planner's topology.").sample(
            "dingo_planner_blocks",
            &[],
            self.topo.block_count(),
        );
        // A stream whose client went away stays in the map until the next
        // send to it fails; count only those still open.
        t.family("dingo_planner_subscribers", "gauge", "Open callback streams.").sample(
            "dingo_planner_subscribers",
            &[],
            self.subscribers.keys().filter(|owner| self.is_subscribed(owner)).count(),
        );
        t.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{cluster, row};
    use dingo_proto::v1::BlockState as PbState;
    use dingo_types::{BlockId, BlockRange, BlockSet};

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

    fn open(dir: &std::path::Path, topo: MetaTopology) -> State {
        let store = Store::open(dir).unwrap();
        let loaded = store.load().unwrap();
        State::restore(config(), store, loaded, topo, T0).unwrap()
    }

    fn singles(blocks: std::ops::Range<u64>, deadline_ms: u64) -> Declaration {
        Declaration {
            task: TaskKind::Fsck,
            read_sets: ReadSets::Sets(blocks.map(|b| BlockSet::any_of([BlockId(b)])).collect()),
            sets_needed: None,
            deadline: Timestamp(deadline_ms),
        }
    }

    /// Dispatches every group due by `now` (directives are not sent here).
    fn dispatch_all(s: &mut State, now: u64) {
        while let Some(due) = s.take_due_group(now) {
            s.complete_group(&due).unwrap();
        }
    }

    fn drain(rx: &mut UnboundedReceiver<Result<pb::Callback, ServiceError>>) -> Vec<pb::Callback> {
        let mut out = Vec::new();
        while let Ok(cb) = rx.try_recv() {
            out.push(cb.expect("a callback"));
        }
        out
    }

    fn keys(cbs: &[pb::Callback]) -> Vec<u64> {
        let mut k: Vec<u64> = cbs.iter().flat_map(|c| c.sets.iter().map(|s| s.key)).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn declare_dispatch_ack_and_done() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        let (id, total) = s.declare("a", &singles(0..4, T0 + 2000), T0).ok().unwrap();
        assert_eq!(total, 4);
        let mut rx = s.subscribe("a");
        s.plan_quantum(T0).unwrap();
        assert!(drain(&mut rx).is_empty(), "nothing is sent before its dispatch time");
        dispatch_all(&mut s, T0 + 1000);
        let first = drain(&mut rx);
        assert_eq!(keys(&first), vec![0, 1], "half the sets in the first of two quanta");
        assert!(first.iter().all(|c| c.quantum_ms == T0 && !c.redelivery && c.declaration == id.0));
        let reads = first.iter().flat_map(|c| c.sets.iter().flat_map(|s| s.reads.iter()));
        assert!(reads.clone().count() > 0 && reads.clone().all(|r| ["n0", "n1"].contains(&r.node_addr.as_str())));
        let serving = |disk: u32| s.topo.node_of(dingo_types::DiskId(disk)).unwrap();
        assert!(reads.into_iter().all(|r| r.node_addr == serving(r.disk)), "each read names its disk's node");
        let caller = Caller::Client("a".into());
        let st = &s.status(&caller, &[]).unwrap()[0];
        assert_eq!((st.delivered_sets, st.acked_sets, st.done), (2, 0, false));
        s.ack("a", &first.iter().map(|c| c.delivery).collect::<Vec<_>>()).unwrap();
        s.plan_quantum(T0 + 1000).unwrap();
        dispatch_all(&mut s, T0 + 2000);
        let second = drain(&mut rx);
        assert_eq!(keys(&second), vec![2, 3]);
        s.plan_quantum(T0 + 2000).unwrap();
        assert!(!s.status(&caller, &[id.0]).unwrap()[0].done, "retired but not yet acknowledged");
        s.ack("a", &second.iter().map(|c| c.delivery).collect::<Vec<_>>()).unwrap();
        let st = &s.status(&caller, &[id.0]).unwrap()[0];
        assert_eq!((st.delivered_sets, st.acked_sets, st.done, st.missed_deadline), (4, 4, true, false));
        assert!(s.status(&caller, &[]).unwrap().is_empty(), "done declarations leave the default listing");
        assert!(s.render_metrics().contains("dingo_planner_sets_delivered_total{task=\"fsck\"} 4"));
    }

    #[test]
    fn a_restart_loses_nothing_unacknowledged_and_repeats_nothing_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let ranges = ReadSets::Ranges((0..4u64).map(|i| BlockRange { start: BlockId(2 * i), len: 2 }).collect());
        let decl = Declaration {
            task: TaskKind::Transcoding,
            read_sets: ranges,
            sets_needed: None,
            deadline: Timestamp(T0 + 4000),
        };
        let mut seen = Vec::new();
        {
            let mut s = open(dir.path(), topo());
            s.declare("a", &decl, T0).ok().unwrap();
            let mut rx = s.subscribe("a");
            s.plan_quantum(T0).unwrap();
            dispatch_all(&mut s, T0 + 1000);
            let q1 = drain(&mut rx);
            assert_eq!(q1.len(), 1);
            s.ack("a", &[q1[0].delivery]).unwrap();
            seen.extend(q1);
            s.plan_quantum(T0 + 1000).unwrap();
            dispatch_all(&mut s, T0 + 1000); // only the first group of quantum 2 is due
            let q2 = drain(&mut rx);
            assert_eq!(q2.len(), 1, "dispatched, never acknowledged");
            seen.extend(q2);
            s.plan_quantum(T0 + 2000).unwrap(); // persisted as scheduled, then the crash
        }
        let mut s = open(dir.path(), topo());
        let mut rx = s.subscribe("a");
        let replay = drain(&mut rx);
        assert_eq!(replay.len(), 1, "the unacknowledged callback comes again");
        assert!(replay[0].redelivery && replay[0].delivery == seen[1].delivery);
        dispatch_all(&mut s, T0 + 10_000);
        let after = drain(&mut rx);
        assert!(after.iter().all(|c| !c.redelivery));
        s.ack("a", &[replay[0].delivery]).unwrap();
        s.ack("a", &after.iter().map(|c| c.delivery).collect::<Vec<_>>()).unwrap();
        s.plan_quantum(T0 + 10_000).unwrap();
        dispatch_all(&mut s, T0 + 20_000);
        let rest = drain(&mut rx);
        s.ack("a", &rest.iter().map(|c| c.delivery).collect::<Vec<_>>()).unwrap();
        let mut all: Vec<pb::Callback> = seen[..1].to_vec();
        all.extend(replay);
        all.extend(after);
        all.extend(rest);
        assert_eq!(keys(&all), vec![0, 2, 4, 6], "range keys are start blocks; each set exactly once");
        s.plan_quantum(T0 + 20_000).unwrap();
        let st = &s.status(&Caller::Admin, &[1]).unwrap()[0];
        assert!(st.done && st.acked_sets == 4, "{st:?}");
        // And the next declaration gets a fresh id.
        let (id, _) = s.declare("a", &singles(0..1, T0 + 90_000), T0 + 20_000).ok().unwrap();
        assert_eq!(id, DeclarationId(2));
    }

    #[test]
    fn foreign_unknown_and_unsent_requests_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        let (id, _) = s.declare("a", &singles(0..2, T0 + 1000), T0).ok().unwrap();
        let _stream = s.subscribe("a");
        s.plan_quantum(T0).unwrap();
        let scheduled: Vec<u64> = s.deliveries.keys().copied().collect();
        assert!(matches!(s.ack("a", &scheduled), Err(ServiceError::Precondition(_))));
        dispatch_all(&mut s, T0 + 1000);
        assert!(matches!(s.ack("b", &scheduled), Err(ServiceError::Denied(_))));
        assert!(matches!(s.ack("a", &[scheduled[0], 999]), Err(ServiceError::NotFound(_))), "never sent");
        let b = Caller::Client("b".into());
        assert!(matches!(s.cancel(&b, id.0), Err(ServiceError::Denied(_))));
        assert!(matches!(s.status(&b, &[id.0]), Err(ServiceError::Denied(_))));
        assert!(s.status(&b, &[]).unwrap().is_empty());
        let st = &s.status(&Caller::Client("a".into()), &[id.0]).unwrap()[0];
        assert_eq!((st.delivered_sets, st.acked_sets), (2, 0), "the refused acks changed nothing");
        assert_eq!(s.cancel(&Caller::Client("a".into()), id.0).unwrap(), 2);
        s.ack("a", &scheduled).unwrap();
        let st = &s.status(&Caller::Client("a".into()), &[id.0]).unwrap()[0];
        assert!(st.cancelled && !st.done && st.acked_sets == 0, "cancelled: acks are no-ops; {st:?}");
        let mut rx = s.subscribe("a");
        assert!(drain(&mut rx).is_empty(), "nothing of a cancelled declaration is re-sent");
    }

    #[test]
    fn a_budget_change_keeps_the_limits_it_does_not_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        s.set_budget(Some(5_000), Some(7_000)).unwrap();
        let b = s.set_budget(Some(9_000), None).unwrap();
        assert_eq!((b.cluster_bytes, b.disk_head_time_us), (9_000, 7_000));
        drop(s);
        let s = open(dir.path(), topo());
        assert_eq!(s.base_budget(), b, "persisted");
    }

    #[test]
    fn callbacks_dispatched_while_nobody_listened_are_not_redeliveries() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        s.declare("a", &singles(0..2, T0 + 1000), T0).ok().unwrap();
        let stream = s.subscribe("a");
        s.plan_quantum(T0).unwrap();
        // The client leaves between planning and dispatch.
        drop(stream);
        dispatch_all(&mut s, T0 + 1000);
        let mut rx = s.subscribe("a");
        let first = drain(&mut rx);
        assert!(first.len() == 2 && first.iter().all(|c| !c.redelivery), "never seen before: {first:?}");
        let mut rx = s.subscribe("a");
        let again = drain(&mut rx);
        assert!(again.len() == 2 && again.iter().all(|c| c.redelivery), "seen on the first stream: {again:?}");
    }

    #[test]
    fn a_client_without_a_stream_gets_nothing_scheduled_until_it_subscribes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        let (away, _) = s.declare("a", &singles(0..4, T0 + 4000), T0).ok().unwrap();
        let (here, _) = s.declare("b", &singles(0..4, T0 + 4000), T0).ok().unwrap();
        let mut b = s.subscribe("b");
        s.plan_quantum(T0).unwrap();
        dispatch_all(&mut s, T0 + 1000);
        assert!(!drain(&mut b).is_empty(), "b, subscribed, is served");
        assert!(s.render_metrics().contains("dingo_planner_paused_declarations 1"));
        let status = |s: &State, id: DeclarationId| s.status(&Caller::Admin, &[id.0]).unwrap()[0].clone();
        assert_eq!(status(&s, away).delivered_sets, 0, "nothing dispatched to nobody");
        assert!(s.deliveries.values().all(|d| d.owner == "b"), "nor scheduled for later");
        // Subscribed, a catches up: all four sets in the three quanta left.
        let mut a = s.subscribe("a");
        for q in 1..4 {
            s.plan_quantum(T0 + q * 1000).unwrap();
            dispatch_all(&mut s, T0 + (q + 1) * 1000);
        }
        assert_eq!(keys(&drain(&mut a)), vec![0, 1, 2, 3]);
        let st = status(&s, away);
        assert!(st.delivered_sets == 4 && !st.missed_deadline, "{st:?}");
        assert_eq!(status(&s, here).delivered_sets, 4);
        // A closed stream pauses again.
        drop(a);
        let (later, _) = s.declare("a", &singles(0..2, T0 + 9000), T0 + 4000).ok().unwrap();
        s.plan_quantum(T0 + 4000).unwrap();
        dispatch_all(&mut s, T0 + 5000);
        assert_eq!(status(&s, later).delivered_sets, 0);
    }

    #[test]
    fn one_stream_per_client_and_acks_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        let (live, _) = s.declare("a", &singles(0..2, T0 + 1000), T0).ok().unwrap();
        let (gone, _) = s.declare("a", &singles(4..5, T0 + 1000), T0).ok().unwrap();
        s.cancel(&Caller::Client("a".into()), gone.0).unwrap();
        // Status of a live and a cancelled declaration together.
        let st = s.status(&Caller::Client("a".into()), &[live.0, gone.0]).unwrap();
        assert_eq!(st.iter().map(|d| d.cancelled).collect::<Vec<_>>(), vec![false, true]);

        let mut first = s.subscribe("a");
        assert!(s.render_metrics().contains("dingo_planner_subscribers 1"));
        let mut second = s.subscribe("a");
        match first.try_recv() {
            Ok(Err(ServiceError::Replaced(msg))) => assert!(msg.contains("replaced"), "{msg}"),
            other => panic!("the replaced stream must end with Replaced, got {other:?}"),
        }
        s.plan_quantum(T0).unwrap();
        dispatch_all(&mut s, T0 + 1000);
        let cbs = drain(&mut second);
        assert_eq!(keys(&cbs), vec![0, 1], "the newer stream gets the callbacks");
        let ids: Vec<u64> = cbs.iter().map(|c| c.delivery).collect();
        s.ack("a", &ids).unwrap();
        s.plan_quantum(T0 + 2000).unwrap();
        assert!(s.status(&Caller::Admin, &[live.0]).unwrap()[0].done);
        s.ack("a", &ids).unwrap();
        drop(second);
        assert!(s.render_metrics().contains("dingo_planner_subscribers 0"), "a closed stream is not counted");
    }

    #[test]
    fn the_overlap_matrix_says_which_task_rode_on_which() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        // Reconstruction must read blocks 0-3 now; fsck, with a far deadline,
        // takes the ones it shares for free.
        let urgent = Declaration { task: TaskKind::Reconstruction, ..singles(0..4, T0 + 1000) };
        s.declare("a", &urgent, T0).ok().unwrap();
        s.declare("b", &singles(0..8, T0 + 60_000), T0).ok().unwrap();
        let (_a, _b) = (s.subscribe("a"), s.subscribe("b"));
        s.plan_quantum(T0).unwrap();
        let page = s.render_metrics();
        let line = page
            .lines()
            .find(|l| l.starts_with("dingo_planner_overlap_bytes_total{task=\"fsck\",paid_by=\"reconstruction\"}"))
            .unwrap_or_else(|| panic!("{page}"));
        let bytes: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(bytes > 0, "{line}");
        assert!(!page.contains("paid_by=\"fsck\""), "fsck paid for nothing another task read: {page}");
        assert_eq!(s.planned_free_bytes(), bytes, "only fsck rode on another task's reads");
    }

    #[test]
    fn deleted_blocks_elide_sets_and_scrubs_are_stored_as_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), topo());
        let scrub = Declaration {
            task: TaskKind::Scrubbing,
            read_sets: ReadSets::ChunksOnDisk(dingo_types::DiskId(0)),
            sets_needed: None,
            deadline: Timestamp(T0 + 5000),
        };
        let (id, total) = s.declare("a", &scrub, T0).ok().unwrap();
        assert_eq!(total, 4, "blocks 0, 3, 4 and 7 have a copy on disk 0");
        // Block 0 is deleted before anything is read.
        let rows = vec![row(0, PbState::Deleted, &[0, 1])];
        s.apply_topology(Snapshot { rows, cluster: cluster(true) });
        drop(s);
        // After a restart the snapshot (not today's disk 0) is restored, and
        // the deleted block stays elided.
        let mut t = topo();
        t.apply(Snapshot {
            rows: vec![row(0, PbState::Deleted, &[0, 1]), row(8, PbState::Sealed, &[0, 1])],
            cluster: cluster(true),
        });
        let s = open(dir.path(), t);
        let st = &s.status(&Caller::Admin, &[id.0]).unwrap()[0];
        assert_eq!((st.total_sets, st.elided_sets), (4, 1));
        assert_eq!(s.planner.status(id).unwrap().needed_left, 3);
    }
}
