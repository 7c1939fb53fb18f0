//! Nodes and disks: registration with stable ids, and the durable
//! administrative states (DEAD, DRAINING, DECOMMISSIONED).

use super::records::{DeviceState, DiskRecord, NodeRecord};
use super::tables::{
    DEAD_DISKS, DEAD_NODES, DISK_UUIDS, DRAIN_DISKS, DRAIN_NODES, NODE_ADDRS, NODES, disk_holds_chunks,
};
use super::{MetaDb, decode, next_id};
use crate::error::MetaError;
use dingo_types::{DiskId, NodeId};
use prost::Message;
use redb::{ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use std::collections::HashMap;

/// Disks and nodes DRAINING or DECOMMISSIONED, with their state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainStates {
    pub disks: HashMap<DiskId, DeviceState>,
    pub nodes: HashMap<NodeId, DeviceState>,
}

/// A stored drain state; an unknown number reads as the safer DRAINING
/// (no new chunks) rather than LIVE.
fn device_state(v: i32) -> DeviceState {
    DeviceState::try_from(v).unwrap_or(DeviceState::Draining)
}

/// The disk ids registered on `node`, if it is registered.
fn disks_of(tx: &WriteTransaction, node: u32) -> Result<Option<Vec<u32>>, MetaError> {
    Ok(match tx.open_table(NODES)?.get(node)? {
        Some(v) => Some(decode::<NodeRecord>(v.value())?.disks.iter().map(|d| d.id).collect()),
        None => None,
    })
}

/// Called whenever a chunk location leaves `disk`: a draining disk, or a
/// draining node owning it, that no block record places a chunk on any
/// more becomes DECOMMISSIONED in the same transaction, so the state
/// changes exactly when the last chunk leaves.
pub(super) fn settle_drain(tx: &WriteTransaction, disk: u32) -> Result<(), MetaError> {
    let disk_draining =
        tx.open_table(DRAIN_DISKS)?.get(disk)?.is_some_and(|v| device_state(v.value()) == DeviceState::Draining);
    if disk_draining && !disk_holds_chunks(tx, disk)? {
        tx.open_table(DRAIN_DISKS)?.insert(disk, DeviceState::Decommissioned as i32)?;
        tracing::info!(disk, "drained disk is DECOMMISSIONED");
    }
    let mut draining_nodes = Vec::new();
    for e in tx.open_table(DRAIN_NODES)?.iter()? {
        let (k, v) = e?;
        if device_state(v.value()) == DeviceState::Draining {
            draining_nodes.push(k.value());
        }
    }
    for node in draining_nodes {
        let Some(disks) = disks_of(tx, node)? else { continue };
        if !disks.contains(&disk) {
            continue;
        }
        let mut empty = true;
        for d in disks {
            empty &= !disk_holds_chunks(tx, d)?;
        }
        if empty {
            tx.open_table(DRAIN_NODES)?.insert(node, DeviceState::Decommissioned as i32)?;
            tracing::info!(node, "drained node is DECOMMISSIONED");
        }
    }
    Ok(())
}

/// Sets the administrative state of a disk or node in `tx`:
/// LIVE clears DEAD and any drain, DEAD replaces a drain, DRAINING is
/// refused for a dead device and left alone on a decommissioned one.
/// `disks`: the disks the device's drain covers (itself, or a node's).
fn set_state_in(
    tx: &WriteTransaction,
    (dead_table, drain_table): (TableDefinition<u32, ()>, TableDefinition<u32, i32>),
    what: &str,
    id: u32,
    disks: &[u32],
    state: DeviceState,
) -> Result<(), MetaError> {
    let mut dead = tx.open_table(dead_table)?;
    let mut drain = tx.open_table(drain_table)?;
    match state {
        DeviceState::Live => {
            dead.remove(id)?;
            drain.remove(id)?;
        }
        DeviceState::Dead => {
            dead.insert(id, ())?;
            drain.remove(id)?;
        }
        DeviceState::Draining => {
            if dead.get(id)?.is_some() {
                return Err(MetaError::Invalid(format!(
                    "{what} {id} is DEAD: its chunks are lost and being rebuilt elsewhere, there is nothing to \
                     drain (mark it LIVE first if it is back)"
                )));
            }
            if drain.get(id)?.is_none_or(|v| device_state(v.value()) != DeviceState::Decommissioned) {
                drain.insert(id, DeviceState::Draining as i32)?;
            }
        }
        DeviceState::Decommissioned => {
            return Err(MetaError::Invalid(format!(
                "{what} {id}: DECOMMISSIONED cannot be set; drain the {what} and it follows once empty"
            )));
        }
    }
    drop((dead, drain));
    // An empty device is decommissioned at once.
    for &d in disks {
        settle_drain(tx, d)?;
    }
    if state == DeviceState::Draining && disks.is_empty() {
        tx.open_table(drain_table)?.insert(id, DeviceState::Decommissioned as i32)?;
    }
    Ok(())
}

/// A disk as a node registers it.
#[derive(Clone, Debug, Default)]
pub struct DiskRegistration {
    /// Label written into the disk directory when it is first used.
    pub uuid: String,
    pub path: String,
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    pub model: Option<super::DiskModelRecord>,
}

impl MetaDb {
    /// Registers (or re-registers) the node at `addr` and its disks; returns
    /// the node id and one disk id per disk. Ids are stable across restarts:
    /// the node by address, each disk by its label. The node's record keeps
    /// the disks it had and no longer registers, after the ones it does.
    pub fn register_node(&self, addr: &str, disks: &[DiskRegistration]) -> Result<(NodeId, Vec<DiskId>), MetaError> {
        let tx = self.db.begin_write()?;
        let existing = tx.open_table(NODE_ADDRS)?.get(addr)?.map(|v| v.value());
        let node = match existing {
            Some(id) => id,
            None => {
                let id = u32::try_from(next_id(&tx, "next_node")?)
                    .map_err(|_| MetaError::Internal("too many nodes".into()))?;
                tx.open_table(NODE_ADDRS)?.insert(addr, id)?;
                id
            }
        };
        let mut ids = Vec::new();
        let mut records = Vec::new();
        for d in disks {
            let known = tx.open_table(DISK_UUIDS)?.get(d.uuid.as_str())?.map(|v| v.value());
            let id = match known {
                Some(id) => id,
                None => {
                    let id = u32::try_from(next_id(&tx, "next_disk")?)
                        .map_err(|_| MetaError::Internal("too many disks".into()))?;
                    tx.open_table(DISK_UUIDS)?.insert(d.uuid.as_str(), id)?;
                    id
                }
            };
            ids.push(id);
            records.push(DiskRecord {
                id,
                path: d.path.clone(),
                capacity_bytes: d.capacity_bytes,
                used_bytes: d.used_bytes,
                model: d.model,
                uuid: d.uuid.clone(),
            });
        }
        // A disk that moved here from another node leaves that node's record.
        // A disk this node had and no longer registers (failed, unmounted,
        // replaced by a blank one while the node was down) stays in its
        // record, silent: it is marked DEAD like a disk whose health probe
        // fails, and its chunks are rebuilt. Dropping it would leave its
        // chunks placed on a disk no node has, counted as healthy.
        let mut nodes = tx.open_table(NODES)?;
        let all: Vec<(u32, NodeRecord)> = nodes
            .iter()?
            .map(|e| e.map_err(MetaError::from).and_then(|(k, v)| Ok((k.value(), decode::<NodeRecord>(v.value())?))))
            .collect::<Result<_, _>>()?;
        for (id, mut n) in all {
            if id == node {
                records.extend(n.disks.into_iter().filter(|d| !ids.contains(&d.id)));
            } else if n.disks.iter().any(|d| ids.contains(&d.id)) {
                n.disks.retain(|d| !ids.contains(&d.id));
                nodes.insert(id, n.encode_to_vec().as_slice())?;
            }
        }
        let record = NodeRecord { id: node, addr: addr.to_string(), disks: records };
        nodes.insert(node, record.encode_to_vec().as_slice())?;
        drop(nodes);
        tx.commit()?;
        Ok((NodeId(node), ids.into_iter().map(DiskId).collect()))
    }

    pub fn nodes(&self) -> Result<Vec<NodeRecord>, MetaError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(NODES)?;
        t.iter()?.map(|e| decode(e?.1.value())).collect()
    }

    /// Whether a disk id was ever registered.
    pub fn disk_known(&self, disk: DiskId) -> Result<bool, MetaError> {
        let tx = self.db.begin_read()?;
        for e in tx.open_table(DISK_UUIDS)?.iter()? {
            if e?.1.value() == disk.0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Disks and nodes marked dead.
    pub fn dead(&self) -> Result<(Vec<DiskId>, Vec<NodeId>), MetaError> {
        let tx = self.db.begin_read()?;
        let keys = |t: redb::ReadOnlyTable<u32, ()>| -> Result<Vec<u32>, MetaError> {
            t.iter()?.map(|e| Ok(e?.0.value())).collect()
        };
        let disks = keys(tx.open_table(DEAD_DISKS)?)?.into_iter().map(DiskId).collect();
        Ok((disks, keys(tx.open_table(DEAD_NODES)?)?.into_iter().map(NodeId).collect()))
    }

    /// Disks and nodes DRAINING or DECOMMISSIONED, with their state.
    pub fn drain_states(&self) -> Result<DrainStates, MetaError> {
        let tx = self.db.begin_read()?;
        let states = |t: redb::ReadOnlyTable<u32, i32>| -> Result<Vec<(u32, DeviceState)>, MetaError> {
            t.iter()?.map(|e| e.map(|(k, v)| (k.value(), device_state(v.value()))).map_err(MetaError::from)).collect()
        };
        Ok(DrainStates {
            disks: states(tx.open_table(DRAIN_DISKS)?)?.into_iter().map(|(d, s)| (DiskId(d), s)).collect(),
            nodes: states(tx.open_table(DRAIN_NODES)?)?.into_iter().map(|(n, s)| (NodeId(n), s)).collect(),
        })
    }

    /// Sets a registered disk's state (see `set_state_in`).
    pub fn set_disk_state(&self, disk: DiskId, state: DeviceState) -> Result<(), MetaError> {
        if !self.disk_known(disk)? {
            return Err(MetaError::Invalid(format!("{disk} is not registered")));
        }
        let DiskId(disk) = disk;
        let tx = self.db.begin_write()?;
        set_state_in(&tx, (DEAD_DISKS, DRAIN_DISKS), "disk", disk, &[disk], state)?;
        tx.commit()?;
        Ok(())
    }

    /// Sets a registered node's state (see `set_state_in`); a drain
    /// covers every disk registered on the node.
    pub fn set_node_state(&self, NodeId(node): NodeId, state: DeviceState) -> Result<(), MetaError> {
        let tx = self.db.begin_write()?;
        let disks = disks_of(&tx, node)?.ok_or_else(|| MetaError::Invalid(format!("node {node} is not registered")))?;
        set_state_in(&tx, (DEAD_NODES, DRAIN_NODES), "node", node, &disks, state)?;
        tx.commit()?;
        Ok(())
    }
}
