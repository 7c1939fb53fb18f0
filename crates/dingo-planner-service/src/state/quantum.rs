//! The quantum: plan it, then dispatch its groups one by one at their time.
//! Planning returns the quantum's deliveries and groups to commit; a due
//! group's completion returns its deliveries as `Dispatched` to commit and
//! its callbacks to stream after that.

use super::{Delivery, Group, Outgoing, Ready, State, StreamMessage};
use crate::config::core_budget;
use crate::keys::callback_to_wire;
use crate::records::{Batch, DeliveryRecord, DeliveryState, GroupRecord, NEXT_DELIVERY, NEXT_GROUP, Phase, PinRecord};
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// A dispatch group whose time has come, taken out of the queue. Its
/// directives go out (by node), then [`State::complete_group`].
pub(crate) struct DueGroup {
    pub(crate) id: u64,
    /// When it was due (Unix ms).
    pub(crate) at_ms: u64,
    /// Node address → pins `(chunk, until unix ms)` for that node.
    pub(crate) pins: Vec<(String, Vec<(ChunkRef, u64)>)>,
    /// Pins left out because they lapsed before the group was taken (a
    /// planner that restarted or fell behind).
    pub(crate) lapsed_pins: u64,
    pub(crate) deliveries: Vec<u64>,
}

impl State {
    /// Plans the quantum starting at `now_ms`: its deliveries (as
    /// `Scheduled`) and dispatch groups, to commit before anything of them
    /// is sent. The core already counts the sets as delivered, so a failed
    /// commit must stop the process.
    pub(crate) fn plan_quantum(&mut self, now_ms: u64) -> Ready {
        let mut budget = core_budget(&self.budget_at(now_ms));
        self.cut_slow_disks(&mut budget);
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
        let plan = self.planner.plan_quantum(&self.topo, Timestamp(now_ms), &budget);
        self.bound_retire(now_ms);

        let mut batch = Batch::default();
        let mut next_delivery = self.next_delivery;
        let mut new_groups = Vec::new();
        for g in 0..plan.dispatch.groups.len() {
            let gid = self.next_group + g as u64;
            let at_ms = plan.dispatch.groups[g].at.as_millis();
            let pins: Vec<PinRecord> = plan
                .dispatch
                .pins_of(&plan.schedule, g)
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
        self.apply_finished(&done, Phase::Done);
        self.groups.extend(new_groups);
        self.next_delivery = next_delivery;
        self.next_group = next_group;

        let m = &mut self.metrics;
        m.quanta += 1;
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
        tracing::debug!(deliveries = batch.deliveries.len(), groups = plan.dispatch.groups.len(), "quantum planned");
        let node_budgets = self.node_budgets(&plan.schedule, now_ms, now_ms + self.config.quantum_ms);
        Ready { batch, node_budgets, ..Ready::default() }
    }

    /// When the next queued dispatch group is due.
    pub(crate) fn next_group_at(&self) -> Option<u64> {
        self.groups.values().map(|g| g.at_ms).min()
    }

    /// Takes the earliest group due at `now_ms` out of the queue, with its
    /// unexpired pins resolved to the nodes holding the chunks. A pin is
    /// made when the quantum is planned, for a chunk two or more of the
    /// group's reads name; it goes out only if two or more reads of
    /// deliveries still to be dispatched name it. Deliveries of a
    /// declaration cancelled or done since are gone, and a pin for their
    /// reads would hold node cache for nobody until it lapsed.
    pub(crate) fn take_due_group(&mut self, now_ms: u64) -> Option<DueGroup> {
        let (&id, _) = self.groups.iter().filter(|(_, g)| g.at_ms <= now_ms).min_by_key(|(id, g)| (g.at_ms, **id))?;
        let g = self.groups.remove(&id).expect("just found");
        let mut reads: BTreeMap<(u64, u32), u32> = BTreeMap::new();
        let live = g.deliveries.iter().filter_map(|d| self.deliveries.get(d));
        for d in live.filter(|d| d.state == DeliveryState::Scheduled) {
            for r in d.callback.sets.iter().flat_map(|s| &s.reads) {
                *reads.entry((r.block, r.copy)).or_default() += 1;
            }
        }
        let needed: Vec<&PinRecord> =
            g.pins.iter().filter(|p| reads.get(&(p.block, p.copy)).is_some_and(|&n| n >= 2)).collect();
        self.metrics.pins_unneeded += (g.pins.len() - needed.len()) as u64;
        let mut by_node: BTreeMap<String, Vec<(ChunkRef, u64)>> = BTreeMap::new();
        let lapsed_pins = needed.iter().filter(|p| p.until_ms <= now_ms).count() as u64;
        self.metrics.pins_lapsed += lapsed_pins;
        for p in needed.into_iter().filter(|p| p.until_ms > now_ms) {
            if let Some(addr) = self.topo.node_of(DiskId(p.disk)) {
                let chunk = ChunkRef { block: BlockId(p.block), copy: p.copy as u8 };
                by_node.entry(addr.to_string()).or_default().push((chunk, p.until_ms));
            }
        }
        Some(DueGroup {
            id,
            at_ms: g.at_ms,
            pins: by_node.into_iter().collect(),
            lapsed_pins,
            deliveries: g.deliveries,
        })
    }

    /// Marks a due group's deliveries dispatched, and streams their
    /// callbacks to the owners that have a stream open once that is
    /// durable. Deliveries of declarations cancelled meanwhile are gone and
    /// skipped.
    pub(crate) fn complete_group(&mut self, due: &DueGroup) -> Ready {
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
        let mut messages = Vec::new();
        for id in live {
            let d = self.deliveries.get_mut(&id).expect("live");
            d.state = DeliveryState::Dispatched;
            let stream = self.subscribers.get(&d.owner).copied();
            if let Some(stream) = stream {
                messages.push(StreamMessage { stream, item: Outgoing::Callback(d.callback.clone()) });
            }
            d.streamed = stream.is_some();
            let (sets, decl) = (d.sets, d.declaration);
            self.decls.get_mut(&decl).expect("tracked").delivered_sets += sets;
            self.metrics.dispatched += 1;
        }
        Ready { batch, messages, ..Ready::default() }
    }
}
