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

/// The store's tables with their values as the bytes redb holds (the
/// encoded records, a delivery's state number, the counters): what a
/// restart decodes, for tests and fuzzing of that decoding
/// (`dingo-fuzz`'s `planner-records`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredTables {
    pub decls: Vec<(u64, Vec<u8>)>,
    pub requests: Vec<(u64, Vec<u8>)>,
    pub deliveries: Vec<(u64, Vec<u8>)>,
    pub states: Vec<(u64, u8)>,
    pub groups: Vec<(u64, Vec<u8>)>,
    pub next_delivery: Option<u64>,
    pub next_group: Option<u64>,
    pub budget: Option<Vec<u8>>,
}

fn encode_all<M: prost::Message>(map: &BTreeMap<u64, M>) -> Vec<(u64, Vec<u8>)> {
    map.iter().map(|(&k, v)| (k, v.encode_to_vec())).collect()
}

fn decode_all<M: prost::Message + Default>(
    table: &str,
    rows: &[(u64, Vec<u8>)],
) -> Result<BTreeMap<u64, M>, RecordError> {
    rows.iter()
        .map(|(k, v)| M::decode(v.as_slice()).map(|m| (*k, m)).map_err(|e| RecordError(format!("{table} {k}: {e}"))))
        .collect()
}

impl MemoryStore {
    /// The tables as redb would hold them.
    pub fn to_tables(&self) -> StoredTables {
        StoredTables {
            decls: encode_all(&self.decls),
            requests: encode_all(&self.requests),
            deliveries: encode_all(&self.deliveries),
            states: self.states.iter().map(|(&k, &s)| (k, s as u8)).collect(),
            groups: encode_all(&self.groups),
            next_delivery: self.counters.get(NEXT_DELIVERY).copied(),
            next_group: self.counters.get(NEXT_GROUP).copied(),
            budget: self.budget.map(|b| prost::Message::encode_to_vec(&b)),
        }
    }

    /// Decodes stored tables as a restart does (`crate::store`'s load):
    /// a value that does not decode is an error naming its table and key.
    pub fn from_tables(t: &StoredTables) -> Result<MemoryStore, RecordError> {
        let mut counters = BTreeMap::new();
        counters.extend(t.next_delivery.map(|v| (NEXT_DELIVERY, v)));
        counters.extend(t.next_group.map(|v| (NEXT_GROUP, v)));
        let budget = match &t.budget {
            Some(b) => Some(
                <pb::Budget as prost::Message>::decode(b.as_slice())
                    .map_err(|e| RecordError(format!("settings budget: {e}")))?,
            ),
            None => None,
        };
        Ok(MemoryStore {
            decls: decode_all("decls", &t.decls)?,
            requests: decode_all("decl_requests", &t.requests)?,
            deliveries: decode_all("deliveries", &t.deliveries)?,
            states: t.states.iter().map(|&(k, s)| Ok((k, DeliveryState::from_u8(s)?))).collect::<Result<_, _>>()?,
            groups: decode_all("groups", &t.groups)?,
            counters,
            budget,
        })
    }
}
