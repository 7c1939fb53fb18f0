//! The service's state machine: the planner core, the cluster topology, and
//! the declarations and deliveries it tracks, kept in step.
//!
//! Sans-IO, in the style of raft-rs' `Ready`: nothing here touches a store,
//! the network or a clock. Each step takes the current time as an argument,
//! changes memory, and returns a [`Ready`]: the records to commit and the
//! messages to stream. The driver (`crate::driver`) commits each `Ready`'s
//! batch durably, in the order the steps ran, and only then sends its
//! messages and answers the request. That is the write-ahead rule: nobody
//! hears of a change before it is durable — a declaration before its id is
//! returned, a quantum's deliveries (as `Scheduled`, with their dispatch
//! time) before any directive or callback goes out, a group's deliveries as
//! `Dispatched` before its callbacks are streamed, an acknowledgement before
//! `Ack` returns. So after a crash at any point:
//! - a set the core scheduled is either in a stored delivery (restored as
//!   delivered, and its delivery sent when due) or nowhere (the core
//!   schedules it again): never lost, never scheduled twice;
//! - a callback a client may have seen is `Dispatched` or `Acked`; the
//!   former is re-sent with `redelivery = true` when the client
//!   subscribes, the latter never again.
//!
//! Memory changes before the commit, so a failed commit leaves memory ahead
//! of the store: the driver then stops the process, and a restart recovers
//! from the store ([`State::restore`]), where the failed change is absent.
//!
//! The steps, one module each: [`recovery`] (restore from records),
//! [`requests`] (declare, ack, cancel, status, budget), [`quantum`] (plan a
//! quantum, dispatch its groups), [`node_budgets`] (each node's per-disk
//! budget for the quantum, and cutting slow disks' budgets), [`streams`]
//! (which client has a callback stream), [`bound`] (the online lower bound
//! on the reads needed); [`seam`] opens the steps to the deterministic
//! simulation.

mod bound;
mod node_budgets;
mod quantum;
mod recovery;
mod requests;
pub mod seam;
mod streams;
#[cfg(test)]
mod tests;

pub(crate) use node_budgets::{DiskSlowness, NodeBudget};
pub(crate) use quantum::DueGroup;

use crate::config::ServiceConfig;
use crate::keys::Keys;
use crate::metrics::{Metrics, MetricsView};
use crate::records::{Batch, DeclRecord, DeliveryState, Phase, PinRecord};
use crate::topology::{MetaTopology, Snapshot};
use dingo_planner::{Planner, ReadLowerBound};
use dingo_proto::planner as pb;
use dingo_types::{DeclarationId, TaskKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One callback stream: the driver holds the channel, the state knows only
/// its id (a client's newer stream gets a new id, so news about an old one
/// cannot end the new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StreamId(pub(crate) u64);

/// What a stream is sent.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outgoing {
    Callback(pb::Callback),
    /// The stream ends: its client subscribed again (the message says so).
    Replaced(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamMessage {
    pub(crate) stream: StreamId,
    pub(crate) item: Outgoing,
}

/// What one step of the state machine asks of the driver, in this order:
/// commit `batch` durably, then send `messages` and `node_budgets`.
#[derive(Default)]
pub(crate) struct Ready {
    pub(crate) batch: Batch,
    pub(crate) messages: Vec<StreamMessage>,
    /// A planned quantum's budget for each live node (best effort: a node
    /// that does not take it only loses its maintenance floor).
    pub(crate) node_budgets: Vec<NodeBudget>,
}

/// A declaration as the service tracks it.
#[derive(Debug)]
struct Decl {
    owner: String,
    task: TaskKind,
    deadline_ms: u64,
    total_sets: u64,
    sets_needed: Option<u64>,
    bytes_needed: Option<u64>,
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
            bytes_needed: self.bytes_needed,
            phase: self.phase as u32,
            missed: self.missed,
            elided_sets: self.elided,
            delivered_sets: self.delivered_sets,
            acked_sets: self.acked_sets,
            created_ms: self.created_ms,
        }
    }
}

#[derive(Debug)]
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

#[derive(Debug)]
struct Group {
    at_ms: u64,
    pins: Vec<PinRecord>,
    deliveries: Vec<u64>,
}

pub(crate) struct State {
    config: ServiceConfig,
    planner: Planner,
    topo: MetaTopology,
    decls: BTreeMap<u64, Decl>,
    deliveries: BTreeMap<u64, Delivery>,
    groups: BTreeMap<u64, Group>,
    next_delivery: u64,
    next_group: u64,
    budget_override: Option<pb::Budget>,
    /// The open callback stream of each client that has one.
    subscribers: HashMap<String, StreamId>,
    next_stream: u64,
    pub(crate) next_quantum_ms: u64,
    metrics: Metrics,
    /// Each disk's slowness as its node last reported it (soft state, not
    /// stored: nodes report it again every quantum).
    slowness: BTreeMap<u32, DiskSlowness>,
    /// The reads the declared work needs, at least (soft state).
    lower_bound: ReadLowerBound,
}

impl State {
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

    /// How long the driver took to plan the last quantum (the state has no
    /// clock).
    pub(crate) fn note_plan_seconds(&mut self, seconds: f64) {
        self.metrics.last_plan_seconds = seconds;
    }

    /// Bytes delivered riding on another set's read, over every task.
    pub(crate) fn planned_free_bytes(&self) -> u64 {
        self.metrics.tasks.iter().map(|s| s.free_bytes).sum()
    }

    /// Bytes scheduled from disk, over every task.
    pub(crate) fn planned_disk_bytes(&self) -> u64 {
        self.metrics.tasks.iter().map(|s| s.disk_bytes).sum()
    }

    /// What `/metrics` shows now.
    pub(crate) fn metrics_view(&self) -> MetricsView {
        MetricsView {
            counters: self.metrics.clone(),
            blocks: self.topo.block_count(),
            subscribers: self.subscribers.len() as u64,
            read_lower_bound_bytes: self.read_lower_bound_bytes(),
            lower_bound_untracked: self.lower_bound.untracked_members(),
        }
    }

    /// Everything the state holds but its configuration and counters, as
    /// text: equal before and after a step means the step changed nothing
    /// (how the simulation checks that a refused request leaves no trace).
    pub(crate) fn fingerprint(&self) -> String {
        let subscribers: BTreeMap<&String, &StreamId> = self.subscribers.iter().collect();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            self.decls,
            self.deliveries,
            self.groups,
            (self.next_delivery, self.next_group, self.next_stream, self.next_quantum_ms),
            self.budget_override,
            subscribers,
            self.topo,
            self.planner,
            self.metrics.acked,
            self.metrics.dispatched,
        )
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

    /// Memory side of [`Self::finish`].
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
}
