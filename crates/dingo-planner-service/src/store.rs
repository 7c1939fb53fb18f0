//! The planner's durable state, in one redb database (`<data>/planner.redb`).
//!
//! Tables (values are prost-encoded records):
//! - `decls`: declaration id → [`DeclRecord`] (owner, task, deadline, phase,
//!   and the final counts once it is done or cancelled).
//! - `decl_requests`: declaration id → the *resolved* `DeclareRequest`
//!   (disk and cluster scrubs as their member snapshot, file segments as
//!   block sets). Kept while the declaration is live: it is what a restart
//!   restores the planner core from.
//! - `deliveries`: delivery id → [`DeliveryRecord`] (owner, the callback,
//!   dispatch time, dispatch group); `delivery_states`: delivery id →
//!   [`DeliveryState`]. Kept while the declaration is live: their set keys
//!   are what the core must not deliver again.
//! - `groups`: dispatch group id → [`GroupRecord`] (dispatch time and cache
//!   directives); removed once the group is dispatched.
//! - `counters`: `next_delivery`, `next_group`; `settings`: `budget`.
//!
//! Every change is one [`Batch`] committed as one write transaction with
//! redb's immediate durability before anyone is told about it.

use crate::records::{Batch, DeliveryRecord, DeliveryState, Loaded, NEXT_DELIVERY, NEXT_GROUP, RecordError};
use dingo_proto::planner as pb;
use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use thiserror::Error;

const DECLS: TableDefinition<u64, &[u8]> = TableDefinition::new("decls");
const DECL_REQUESTS: TableDefinition<u64, &[u8]> = TableDefinition::new("decl_requests");
const DELIVERIES: TableDefinition<u64, &[u8]> = TableDefinition::new("deliveries");
const DELIVERY_STATES: TableDefinition<u64, u8> = TableDefinition::new("delivery_states");
const GROUPS: TableDefinition<u64, &[u8]> = TableDefinition::new("groups");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");

#[derive(Debug, Error)]
#[error("planner database: {0}")]
pub struct StoreError(pub(crate) String);

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError(e.to_string())
            }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    prost::DecodeError,
    RecordError
);

pub(crate) struct RedbStore {
    db: Database,
}

fn read_all<M: Message + Default>(
    tx: &redb::ReadTransaction,
    table: TableDefinition<u64, &[u8]>,
) -> Result<Vec<(u64, M)>, StoreError> {
    let t = tx.open_table(table)?;
    let mut out = Vec::new();
    for e in t.iter()? {
        let (k, v) = e?;
        out.push((k.value(), M::decode(v.value())?));
    }
    Ok(out)
}

impl RedbStore {
    pub(crate) fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        let ctx = |e: &dyn std::fmt::Display| StoreError(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(|e| ctx(&e))?;
        let db = Database::create(dir.join("planner.redb")).map_err(|e| ctx(&e))?;
        // Create every table so that readers never meet a missing one.
        let tx = db.begin_write()?;
        tx.open_table(DECLS)?;
        tx.open_table(DECL_REQUESTS)?;
        tx.open_table(DELIVERIES)?;
        tx.open_table(DELIVERY_STATES)?;
        tx.open_table(GROUPS)?;
        tx.open_table(COUNTERS)?;
        tx.open_table(SETTINGS)?;
        tx.commit()?;
        Ok(RedbStore { db })
    }

    pub(crate) fn load(&self) -> Result<Loaded, StoreError> {
        let tx = self.db.begin_read()?;
        let states = tx.open_table(DELIVERY_STATES)?;
        let mut deliveries = Vec::new();
        for (id, rec) in read_all::<DeliveryRecord>(&tx, DELIVERIES)? {
            let state = states.get(id)?.ok_or_else(|| StoreError(format!("delivery {id} has no state")))?;
            deliveries.push((id, rec, DeliveryState::from_u8(state.value())?));
        }
        let counters = tx.open_table(COUNTERS)?;
        let counter = |name: &str| -> Result<u64, StoreError> { Ok(counters.get(name)?.map_or(1, |v| v.value())) };
        let budget = match tx.open_table(SETTINGS)?.get("budget")? {
            Some(v) => Some(pb::Budget::decode(v.value())?),
            None => None,
        };
        Ok(Loaded {
            decls: read_all(&tx, DECLS)?,
            requests: read_all(&tx, DECL_REQUESTS)?,
            deliveries,
            groups: read_all(&tx, GROUPS)?,
            next_delivery: counter(NEXT_DELIVERY)?,
            next_group: counter(NEXT_GROUP)?,
            budget,
        })
    }

    /// Commits `batch` atomically and durably.
    pub(crate) fn commit(&self, b: &Batch) -> Result<(), StoreError> {
        let tx = self.db.begin_write()?;
        {
            let mut decls = tx.open_table(DECLS)?;
            for (id, r) in &b.decls {
                decls.insert(id, r.encode_to_vec().as_slice())?;
            }
            let mut requests = tx.open_table(DECL_REQUESTS)?;
            for (id, r) in &b.requests {
                requests.insert(id, r.encode_to_vec().as_slice())?;
            }
            for id in &b.drop_requests {
                requests.remove(id)?;
            }
            let mut deliveries = tx.open_table(DELIVERIES)?;
            let mut states = tx.open_table(DELIVERY_STATES)?;
            for (id, r) in &b.deliveries {
                deliveries.insert(id, r.encode_to_vec().as_slice())?;
            }
            for (id, s) in &b.states {
                states.insert(id, *s as u8)?;
            }
            for id in &b.drop_deliveries {
                deliveries.remove(id)?;
                states.remove(id)?;
            }
            let mut groups = tx.open_table(GROUPS)?;
            for (id, r) in &b.groups {
                groups.insert(id, r.encode_to_vec().as_slice())?;
            }
            for id in &b.drop_groups {
                groups.remove(id)?;
            }
            let mut counters = tx.open_table(COUNTERS)?;
            for (name, v) in &b.counters {
                counters.insert(*name, v)?;
            }
            if let Some(budget) = &b.budget {
                tx.open_table(SETTINGS)?.insert("budget", budget.encode_to_vec().as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{DeclRecord, GroupRecord, PinRecord};

    #[test]
    fn batches_survive_reopening_and_drops_remove_both_delivery_tables() {
        let dir = tempfile::tempdir().unwrap();
        let cb = pb::Callback { delivery: 4, declaration: 9, ..Default::default() };
        {
            let s = RedbStore::open(dir.path()).unwrap();
            let mut b = Batch::default();
            b.decls.push((9, DeclRecord { owner: "a".into(), task: "fsck".into(), ..Default::default() }));
            b.requests.push((9, pb::DeclareRequest { task: "fsck".into(), ..Default::default() }));
            let rec = DeliveryRecord { owner: "a".into(), callback: Some(cb.clone()), at_ms: 5, group: 1 };
            b.deliveries.push((4, rec.clone()));
            b.deliveries.push((5, rec));
            b.states.push((4, DeliveryState::Scheduled));
            b.states.push((5, DeliveryState::Scheduled));
            b.groups
                .push((1, GroupRecord { at_ms: 5, pins: vec![PinRecord { block: 1, copy: 0, disk: 2, until_ms: 9 }] }));
            b.counters.push((NEXT_DELIVERY, 6));
            b.budget = Some(pb::Budget { cluster_bytes: 7, disk_head_time_us: 0 });
            s.commit(&b).unwrap();
            let mut b = Batch::default();
            b.states.push((4, DeliveryState::Acked));
            b.drop_deliveries.push(5);
            b.drop_groups.push(1);
            s.commit(&b).unwrap();
        }
        let s = RedbStore::open(dir.path()).unwrap();
        let l = s.load().unwrap();
        assert_eq!(l.decls[0].1.owner, "a");
        assert_eq!(l.requests.len(), 1);
        assert_eq!(l.deliveries.len(), 1);
        assert_eq!(l.deliveries[0].0, 4);
        assert_eq!(l.deliveries[0].1.callback, Some(cb));
        assert_eq!(l.deliveries[0].2, DeliveryState::Acked);
        assert!(l.groups.is_empty());
        assert_eq!((l.next_delivery, l.next_group), (6, 1));
        assert_eq!(l.budget.unwrap().cluster_bytes, 7);
    }
}
