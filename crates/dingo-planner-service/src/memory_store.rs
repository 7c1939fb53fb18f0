//! The store's tables ([`crate::store`]) kept in memory: a [`Batch`]
//! committed all at once, and everything [`Loaded`] back at a restart.
//! The state machine's tests and the deterministic simulation
//! (`dingo-planner-dst`) use it in place of redb, so a crash is simply
//! dropping the state and starting again from this.

use crate::records::{
    Batch, DeclRecord, DeliveryRecord, DeliveryState, GroupRecord, Loaded, NEXT_DELIVERY, NEXT_GROUP, RecordError,
};
use dingo_proto::planner as pb;
use std::collections::BTreeMap;

/// The planner's durable tables, in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryStore {
    pub(crate) decls: BTreeMap<u64, DeclRecord>,
    pub(crate) requests: BTreeMap<u64, pb::DeclareRequest>,
    pub(crate) deliveries: BTreeMap<u64, DeliveryRecord>,
    pub(crate) states: BTreeMap<u64, DeliveryState>,
    pub(crate) groups: BTreeMap<u64, GroupRecord>,
    pub(crate) counters: BTreeMap<&'static str, u64>,
    pub(crate) budget: Option<pb::Budget>,
}

impl MemoryStore {
    /// Applies `batch` the way one redb transaction of `crate::store` does.
    pub(crate) fn commit(&mut self, b: &Batch) {
        self.decls.extend(b.decls.iter().cloned());
        self.requests.extend(b.requests.iter().cloned());
        for id in &b.drop_requests {
            self.requests.remove(id);
        }
        self.deliveries.extend(b.deliveries.iter().cloned());
        self.states.extend(b.states.iter().copied());
        for id in &b.drop_deliveries {
            self.deliveries.remove(id);
            self.states.remove(id);
        }
        self.groups.extend(b.groups.iter().cloned());
        for id in &b.drop_groups {
            self.groups.remove(id);
        }
        self.counters.extend(b.counters.iter().copied());
        self.budget = b.budget.or(self.budget);
    }

    /// What a start finds stored.
    pub(crate) fn load(&self) -> Result<Loaded, RecordError> {
        let mut deliveries = Vec::with_capacity(self.deliveries.len());
        for (&id, rec) in &self.deliveries {
            let state = self.states.get(&id).ok_or_else(|| RecordError(format!("delivery {id} has no state")))?;
            deliveries.push((id, rec.clone(), *state));
        }
        Ok(Loaded {
            decls: self.decls.clone().into_iter().collect(),
            requests: self.requests.clone().into_iter().collect(),
            deliveries,
            groups: self.groups.clone().into_iter().collect(),
            next_delivery: self.counters.get(NEXT_DELIVERY).copied().unwrap_or(1),
            next_group: self.counters.get(NEXT_GROUP).copied().unwrap_or(1),
            budget: self.budget,
        })
    }
}
