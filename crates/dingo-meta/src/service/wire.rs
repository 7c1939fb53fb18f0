//! Conversions between the database's records and the wire messages: the
//! one place where the two formats meet.

use crate::db::{self, BlockRecord, ChunkKey, ChunkPlacement, FileRecord, NodeRecord};
use dingo_proto::v1;

pub fn block_state(s: db::BlockState) -> v1::BlockState {
    match s {
        db::BlockState::Open => v1::BlockState::Open,
        db::BlockState::Sealed => v1::BlockState::Sealed,
        db::BlockState::Deleted => v1::BlockState::Deleted,
    }
}

pub fn device_state(s: db::DeviceState) -> v1::DeviceState {
    match s {
        db::DeviceState::Live => v1::DeviceState::Live,
        db::DeviceState::Dead => v1::DeviceState::Dead,
        db::DeviceState::Draining => v1::DeviceState::Draining,
        db::DeviceState::Decommissioned => v1::DeviceState::Decommissioned,
    }
}

/// The state a request's number names; `None` for UNSPECIFIED and for
/// numbers this version does not know.
pub fn device_state_from_wire(number: i32) -> Option<db::DeviceState> {
    match v1::DeviceState::try_from(number).ok()? {
        v1::DeviceState::Unspecified => None,
        v1::DeviceState::Live => Some(db::DeviceState::Live),
        v1::DeviceState::Dead => Some(db::DeviceState::Dead),
        v1::DeviceState::Draining => Some(db::DeviceState::Draining),
        v1::DeviceState::Decommissioned => Some(db::DeviceState::Decommissioned),
    }
}

fn redundancy(r: Option<db::RedundancyRecord>) -> Option<v1::Redundancy> {
    r.map(|r| v1::Redundancy { replicas: r.replicas, data: r.data, parity: r.parity })
}

/// A chunk location as handed out; address and `lost` are filled in later.
pub fn chunk_location(c: &ChunkPlacement) -> v1::ChunkLocation {
    v1::ChunkLocation { copy: c.copy, disk: c.disk, node: c.node, addr: String::new(), lost: false }
}

pub fn block(b: &BlockRecord) -> v1::BlockRecord {
    v1::BlockRecord {
        id: b.id,
        file: b.file,
        size: b.size,
        state: block_state(b.state()) as i32,
        group: b.group,
        ec_index: b.ec_index,
        redundancy: redundancy(b.redundancy),
        chunks: b.chunks.iter().map(chunk_location).collect(),
    }
}

/// A file without its blocks (only their ids).
pub fn file(f: &FileRecord) -> v1::FileInfo {
    v1::FileInfo {
        id: f.id,
        path: f.path.clone(),
        redundancy: redundancy(f.redundancy),
        block_size: f.block_size,
        size: f.size,
        sealed: f.sealed,
        block_ids: f.block_ids.clone(),
        blocks: Vec::new(),
        lease: f.lease,
        lease_expiry_ms: f.lease_expiry_ms,
        created_ms: f.created_ms,
    }
}

/// A node as stored: address and disks; states, liveness and usage are
/// filled in by the caller.
pub fn node(n: &NodeRecord) -> v1::NodeStatus {
    let disks = n
        .disks
        .iter()
        .map(|d| v1::DiskStatus {
            id: d.id,
            path: d.path.clone(),
            capacity: d.capacity_bytes,
            used: d.used_bytes,
            model: d.model.map(|m| v1::DiskModel {
                positioning_us: m.positioning_us,
                transfer_bytes_per_sec: m.transfer_bytes_per_sec,
            }),
            uuid: d.uuid.clone(),
            ..Default::default()
        })
        .collect();
    v1::NodeStatus { id: n.id, addr: n.addr.clone(), disks, ..Default::default() }
}

pub fn disk_registration(d: &v1::DiskRegistration) -> db::DiskRegistration {
    db::DiskRegistration {
        uuid: d.uuid.clone(),
        path: d.path.clone(),
        capacity_bytes: d.capacity,
        used_bytes: d.used,
        model: d.model.map(|m| db::DiskModelRecord {
            positioning_us: m.positioning_us,
            transfer_bytes_per_sec: m.transfer_bytes_per_sec,
        }),
    }
}

/// A chunk on a disk as the database keys it.
pub fn chunk_key(c: &v1::ChunkOnDisk) -> Option<ChunkKey> {
    c.chunk.as_ref().map(|id| ChunkKey::new(c.disk, id.block, id.copy))
}

pub fn chunk_on_disk(k: ChunkKey) -> v1::ChunkOnDisk {
    v1::ChunkOnDisk { disk: k.disk.0, chunk: Some(v1::ChunkId { block: k.block.0, copy: k.copy }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_by_name_and_the_wire_zero_is_no_state() {
        // The stored numbers (format 1 and 2 records, `drain_*` tables)
        // start at 0 = LIVE / OPEN; the wire's start at 0 = UNSPECIFIED.
        // Each maps by name, so neither numbering leaks into the other.
        for s in
            [db::DeviceState::Live, db::DeviceState::Dead, db::DeviceState::Draining, db::DeviceState::Decommissioned]
        {
            assert_eq!(
                device_state(s).as_str_name().strip_prefix("DEVICE_STATE_"),
                Some(&*format!("{s:?}").to_uppercase())
            );
            assert_eq!(device_state_from_wire(device_state(s) as i32), Some(s));
        }
        assert_eq!(device_state_from_wire(v1::DeviceState::Unspecified as i32), None);
        assert_eq!(device_state_from_wire(99), None);
        for s in [db::BlockState::Open, db::BlockState::Sealed, db::BlockState::Deleted] {
            assert_eq!(block_state(s).as_str_name(), s.as_str_name());
        }
        assert_eq!((db::DeviceState::Live as i32, db::BlockState::Open as i32), (0, 0), "the disk format is unchanged");
    }
}
