use super::schema::{DISK_INDEX_BUILT, OPEN_INDEX_BUILT};
use super::tables::{COUNTERS, DISK_CHUNKS, FILES, OPEN_BLOCKS};
use super::*;
use dingo_proto::Redundancy;
use dingo_types::{BlockId, DiskId, NodeId};
use std::collections::HashMap;

const R3: Redundancy = Redundancy::Replicated(3);

fn lease(id: u64) -> Lease {
    Lease { id, expiry_ms: 10_000 }
}

fn loc(copy: u32, disk: u32) -> ChunkPlacement {
    ChunkPlacement { copy, disk, node: disk }
}

fn key(disk: u32, block: u64, copy: u32) -> ChunkKey {
    ChunkKey::new(disk, block, copy)
}

fn disks(ids: &[u32]) -> Vec<DiskId> {
    ids.iter().copied().map(DiskId).collect()
}

#[test]
fn namespace_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = MetaDb::open(dir.path()).unwrap();
        db.create_file("/a/b", R3, 1 << 20, lease(7), 0).unwrap();
        let blocks = db.allocate("/a/b", 7, 1, 60_000, &[vec![loc(0, 0), loc(1, 1), loc(2, 2)]]).unwrap();
        assert_eq!(db.commit("/a/b", 7, 2, 60_000, &[(blocks[0].id, 123)]).unwrap(), 123);
        db.seal("/a/b", 7, 3).unwrap();
    }
    let db = MetaDb::open(dir.path()).unwrap();
    let (f, blocks) = db.stat("/a/b").unwrap();
    assert!(f.sealed);
    assert_eq!((f.size, blocks.len(), blocks[0].chunks.len()), (123, 1, 3));
    assert_eq!(blocks[0].state(), BlockState::Sealed);
    assert_eq!(db.list("/a/").unwrap().len(), 1);
    assert_eq!(db.list("/b").unwrap().len(), 0);
}

#[test]
fn leases_and_sealing_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
    assert!(matches!(db.create_file("/f", R3, 1 << 16, lease(2), 0), Err(MetaError::Exists(_))));
    assert!(matches!(db.allocate("/f", 2, 0, 1000, &[vec![]]), Err(MetaError::LeaseLost(_))));
    assert!(matches!(db.open_for_append("/f", lease(2), 5), Err(MetaError::LeaseHeld { .. })));
    // Once the lease expires another writer may take over.
    db.open_for_append("/f", Lease { id: 2, expiry_ms: 50_000 }, 20_000).unwrap();
    assert!(matches!(db.seal("/f", 1, 20_001), Err(MetaError::LeaseLost(_))));
    db.seal("/f", 2, 20_001).unwrap();
    assert!(matches!(db.open_for_append("/f", lease(3), 0), Err(MetaError::Sealed(_))));
    assert!(matches!(db.allocate("/f", 2, 0, 1000, &[vec![]]), Err(MetaError::Sealed(_))));
}

#[test]
fn expired_leases_are_recovered_by_sealing_or_removing() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    // Leases expiring at 1000, 1000 (renewed by allocate and commit) and 9000.
    db.create_file("/empty", R3, 1 << 16, Lease { id: 1, expiry_ms: 1000 }, 0).unwrap();
    db.create_file("/partial", R3, 1 << 16, lease(2), 0).unwrap();
    db.create_file("/live", R3, 1 << 16, Lease { id: 3, expiry_ms: 9000 }, 0).unwrap();
    let b = db.allocate("/partial", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
    db.commit("/partial", 2, 0, 1000, &[(b[0].id, 60)]).unwrap();
    let uncommitted = db.allocate("/partial", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
    assert_eq!(db.open_files().unwrap().len(), 3);
    assert!(db.recover_expired_leases(1000).unwrap().is_empty(), "not expired yet");
    assert!(matches!(db.recover_file("/live", 1000, false), Err(MetaError::LeaseHeld { .. })));
    let mut done = db.recover_expired_leases(1001).unwrap();
    done.sort();
    assert_eq!(
        done,
        vec![("/empty".to_string(), Recovered::Removed), ("/partial".to_string(), Recovered::Sealed { size: 60 })]
    );
    assert!(matches!(db.stat("/empty"), Err(MetaError::NotFound(_))));
    let (f, blocks) = db.stat("/partial").unwrap();
    assert!(f.sealed && f.size == 60 && blocks.len() == 1);
    assert_eq!(db.get_blocks(&[BlockId(uncommitted[0].id)]).unwrap()[0].state(), BlockState::Deleted);
    // A writer whose file was recovered under it has lost its lease.
    assert!(matches!(db.commit("/partial", 2, 1002, 1000, &[]), Err(MetaError::Sealed(_))));
    // Forced recovery of a live lease (the operator knows the writer is gone).
    assert_eq!(db.recover_file("/live", 1001, true).unwrap(), Recovered::Removed);
    assert!(db.open_files().unwrap().is_empty());
    // Sealed and deleted files leave the open index.
    db.create_file("/s", R3, 1 << 16, lease(4), 0).unwrap();
    db.seal("/s", 4, 1).unwrap();
    db.create_file("/d", R3, 1 << 16, lease(5), 0).unwrap();
    db.delete("/d").unwrap();
    assert!(db.open_files().unwrap().is_empty());
}

#[test]
fn deletion_queues_chunk_deletes_until_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
    let b = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4), loc(1, 5)]]).unwrap();
    db.commit("/f", 1, 0, 1000, &[(b[0].id, 10)]).unwrap();
    let b2 = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
    db.abandon("/f", 1, 0, 1000, &[BlockId(b2[0].id)]).unwrap();
    assert_eq!(db.sync_deletes(&[], &disks(&[4])).unwrap(), vec![key(4, b2[0].id, 0)]);
    assert_eq!(db.delete("/f").unwrap(), 1);
    assert!(matches!(db.stat("/f"), Err(MetaError::NotFound(_))));
    let pending = db.sync_deletes(&[key(4, b2[0].id, 0)], &disks(&[4, 5])).unwrap();
    assert_eq!(pending, vec![key(4, b[0].id, 0), key(5, b[0].id, 1)]);
    let (rows, end) = db.blocks(BlockId(0), 10).unwrap();
    assert_eq!(end, 2);
    assert!(rows.iter().all(|r| r.state() == BlockState::Deleted));
}

/// Regression: a writer that died between allocate and commit left its
/// blocks open, and their chunks on the nodes, forever.
#[test]
fn open_blocks_of_a_gone_writer_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let state = |db: &MetaDb, id: u64| db.get_blocks(&[BlockId(id)]).unwrap()[0].state();
    let allocate = |db: &MetaDb, path: &str, lease: u64, now: u64, disk: u32| {
        db.allocate(path, lease, now, 1000, &[vec![loc(0, disk)]]).unwrap()[0].id
    };
    let (committed, orphan, taken_over, deleted, sealed);
    {
        let db = MetaDb::open(dir.path()).unwrap();
        // Lease expiry at now + ttl = 1000.
        db.create_file("/died", R3, 1 << 16, lease(1), 0).unwrap();
        committed = allocate(&db, "/died", 1, 0, 1);
        orphan = allocate(&db, "/died", 1, 0, 1);
        db.commit("/died", 1, 0, 1000, &[(committed, 10)]).unwrap();
        assert_eq!(db.drop_expired_writes(1000).unwrap(), 0, "the lease is still live");
        for (path, lease_id) in [("/taken", 2), ("/deleted", 3), ("/sealed", 4)] {
            db.create_file(path, R3, 1 << 16, lease(lease_id), 0).unwrap();
        }
        taken_over = allocate(&db, "/taken", 2, 0, 2);
        deleted = allocate(&db, "/deleted", 3, 0, 3);
        sealed = allocate(&db, "/sealed", 4, 0, 4);
        db.open_for_append("/taken", Lease { id: 5, expiry_ms: 9_000_000 }, 5000).unwrap();
        db.delete("/deleted").unwrap();
        db.seal("/sealed", 4, 10).unwrap();
        for id in [taken_over, deleted, sealed] {
            assert_eq!(state(&db, id), BlockState::Deleted, "block {id}");
        }
    }
    // The open block survives a restart and is dropped once its lease is gone.
    let db = MetaDb::open(dir.path()).unwrap();
    assert_eq!(state(&db, orphan), BlockState::Open);
    assert_eq!(db.drop_expired_writes(1001).unwrap(), 1);
    assert_eq!((state(&db, orphan), state(&db, committed)), (BlockState::Deleted, BlockState::Sealed));
    assert_eq!(db.stat("/died").unwrap().0.size, 10);
    assert_eq!(db.drop_expired_writes(5000).unwrap(), 0, "each block is dropped once");
    let pending = db.sync_deletes(&[], &disks(&[1, 2, 3, 4])).unwrap();
    assert_eq!(pending, vec![key(1, orphan, 0), key(2, taken_over, 0), key(3, deleted, 0), key(4, sealed, 0)]);
    // The new writer of a taken-over file keeps its own open blocks.
    let fresh = allocate(&db, "/taken", 5, 6000, 2);
    assert_eq!(db.drop_expired_writes(6500).unwrap(), 0);
    assert_eq!(state(&db, fresh), BlockState::Open);
}

#[test]
fn chunks_no_block_places_are_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
    let open = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 1), loc(1, 2)]]).unwrap()[0].id;
    let gone = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 1)]]).unwrap()[0].id;
    db.abandon("/f", 1, 0, 1000, &[BlockId(gone)]).unwrap();
    let asked = [key(1, open, 0), key(2, open, 1), key(2, open, 0), key(1, gone, 0), key(1, 999, 0)];
    assert_eq!(db.unknown_chunks(&asked).unwrap(), vec![key(2, open, 0), key(1, gone, 0), key(1, 999, 0)]);
}

#[test]
fn node_and_disk_ids_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    let disk = |u: &str| DiskRegistration { uuid: u.into(), ..Default::default() };
    let (n1, d1) = db.register_node("h:1", &[disk("a"), disk("b")]).unwrap();
    let (n2, d2) = db.register_node("h:2", &[disk("c")]).unwrap();
    assert_eq!((n1, n2, d1, d2), (NodeId(0), NodeId(1), disks(&[0, 1]), disks(&[2])));
    assert_eq!(db.register_node("h:1", &[disk("b"), disk("a")]).unwrap(), (NodeId(0), disks(&[1, 0])));
    // Disk "c" moves to node 0, which no longer has "b": "b" stays in its
    // record, after the disks it registers, to be found silent.
    db.register_node("h:1", &[disk("a"), disk("c")]).unwrap();
    let nodes = db.nodes().unwrap();
    assert!(nodes[1].disks.is_empty());
    assert_eq!(nodes[0].disks.iter().map(|d| d.id).collect::<Vec<_>>(), vec![0, 2, 1]);
    // Back again, "b" keeps its id and its place.
    assert_eq!(db.register_node("h:1", &[disk("b"), disk("a")]).unwrap(), (NodeId(0), disks(&[1, 0])));
    assert_eq!(db.nodes().unwrap()[0].disks.iter().map(|d| d.id).collect::<Vec<_>>(), vec![1, 0, 2]);
}

#[test]
fn bad_paths_are_refused() {
    for p in ["", "/", "a/b", "/a//b", "/a/../b", "/a/./b", "/a/"] {
        assert!(matches!(check_path(p), Err(MetaError::InvalidPath(_))), "{p}");
    }
    check_path("/a/b.txt").unwrap();
}

/// A sealed file `/f` with one replicated block on disks 4, 5, 6.
fn sealed_block(db: &MetaDb) -> u64 {
    db.create_file("/f", R3, 1 << 16, lease(1), 0).unwrap();
    let b = db.allocate("/f", 1, 0, 1000, &[vec![loc(0, 4), loc(1, 5), loc(2, 6)]]).unwrap();
    db.commit("/f", 1, 0, 1000, &[(b[0].id, 10)]).unwrap();
    b[0].id
}

#[test]
fn chunks_are_indexed_by_disk_and_replaced_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    let id = sealed_block(&db);
    // An open block's chunks are not listed.
    db.create_file("/g", R3, 1 << 16, lease(2), 0).unwrap();
    db.allocate("/g", 2, 0, 1000, &[vec![loc(0, 4)]]).unwrap();
    assert_eq!(db.sealed_chunks_on(&disks(&[4, 7])).unwrap(), vec![key(4, id, 0)]);

    let b = db.replace_chunk(key(4, id, 0), DiskId(7), NodeId(7)).unwrap();
    assert_eq!((b.chunks[0].disk, b.chunks[0].node), (7, 7));
    assert_eq!(db.sealed_chunks_on(&disks(&[4, 7])).unwrap(), vec![key(7, id, 0)]);
    assert_eq!(db.sync_deletes(&[], &disks(&[4])).unwrap(), vec![key(4, id, 0)], "old copy queued for deletion");
    // A second replace from the old place finds the chunk moved: the new
    // copy it made is dropped, the location stays.
    let e = db.replace_chunk(key(4, id, 0), DiskId(8), NodeId(8)).unwrap_err();
    assert!(matches!(e, MetaError::Conflict(_)) && e.to_string().contains("moved to disk 7"), "{e}");
    assert_eq!(db.sync_deletes(&[], &disks(&[8])).unwrap(), vec![key(8, id, 0)]);
    assert_eq!(db.get_blocks(&[BlockId(id)]).unwrap()[0].chunks[0].disk, 7);
    // Once the block is deleted, nothing moves and its chunks leave the index.
    db.delete("/f").unwrap();
    assert!(matches!(db.replace_chunk(key(5, id, 1), DiskId(9), NodeId(9)), Err(MetaError::Conflict(_))));
    assert_eq!(db.sync_deletes(&[], &disks(&[9])).unwrap(), vec![key(9, id, 1)]);
    assert!(db.sealed_chunks_on(&disks(&[5, 6, 7])).unwrap().is_empty());
    assert!(matches!(db.get_blocks(&[BlockId(id), BlockId(99)]), Err(MetaError::NoSuchBlock(99))));
}

#[test]
fn the_open_block_index_is_built_for_older_databases() {
    let dir = tempfile::tempdir().unwrap();
    let (open, of_deleted_file) = {
        let db = MetaDb::open(dir.path()).unwrap();
        db.create_file("/writing", R3, 1 << 16, lease(1), 0).unwrap();
        db.create_file("/deleted", R3, 1 << 16, lease(2), 0).unwrap();
        let open = db.allocate("/writing", 1, 0, 1000, &[vec![loc(0, 1)]]).unwrap()[0].id;
        let of_deleted_file = db.allocate("/deleted", 2, 0, 1000, &[vec![loc(0, 2)]]).unwrap()[0].id;
        // Forget the index, as a database from before it existed whose
        // file was deleted without its open blocks.
        let tx = db.db.begin_write().unwrap();
        tx.delete_table(OPEN_BLOCKS).unwrap();
        tx.open_table(COUNTERS).unwrap().remove(OPEN_INDEX_BUILT).unwrap();
        tx.open_table(FILES).unwrap().remove("/deleted").unwrap();
        tx.commit().unwrap();
        (open, of_deleted_file)
    };
    let db = MetaDb::open(dir.path()).unwrap();
    let state = |id| db.get_blocks(&[BlockId(id)]).unwrap()[0].state();
    assert_eq!((state(open), state(of_deleted_file)), (BlockState::Open, BlockState::Deleted));
    assert_eq!(db.drop_expired_writes(1001).unwrap(), 1);
    assert_eq!(state(open), BlockState::Deleted);
    assert_eq!(db.sync_deletes(&[], &disks(&[1, 2])).unwrap(), vec![key(1, open, 0), key(2, of_deleted_file, 0)]);
}

#[test]
fn the_disk_index_is_built_for_older_databases_and_dead_marks_persist() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let db = MetaDb::open(dir.path()).unwrap();
        let id = sealed_block(&db);
        // Forget the index, as a database from before it existed.
        let tx = db.db.begin_write().unwrap();
        tx.delete_table(DISK_CHUNKS).unwrap();
        tx.open_table(COUNTERS).unwrap().remove(DISK_INDEX_BUILT).unwrap();
        tx.commit().unwrap();
        let disk = |u: &str| DiskRegistration { uuid: u.into(), ..Default::default() };
        db.register_node("h:1", &[disk("a"), disk("b")]).unwrap();
        db.set_disk_state(DiskId(1), DeviceState::Dead).unwrap();
        db.set_node_state(NodeId(0), DeviceState::Dead).unwrap();
        assert!(db.set_disk_state(DiskId(9), DeviceState::Dead).unwrap_err().to_string().contains("not registered"));
        assert!(db.set_node_state(NodeId(3), DeviceState::Dead).is_err());
        id
    };
    let db = MetaDb::open(dir.path()).unwrap();
    assert_eq!(db.sealed_chunks_on(&disks(&[4, 5, 6])).unwrap(), vec![key(4, id, 0), key(5, id, 1), key(6, id, 2)]);
    assert_eq!(db.dead().unwrap(), (vec![DiskId(1)], vec![NodeId(0)]));
    db.set_node_state(NodeId(0), DeviceState::Live).unwrap();
    assert_eq!(db.dead().unwrap(), (vec![DiskId(1)], vec![]));
}

#[test]
fn a_stripe_is_its_blocks_redundancy_group() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    let ec = Redundancy::Ec { data: 2, parity: 1 };
    db.create_file("/e", ec, 1 << 16, lease(1), 0).unwrap();
    let b = db.allocate("/e", 1, 0, 1000, &[vec![loc(0, 1)], vec![loc(0, 2)], vec![loc(0, 3)]]).unwrap();
    let (one, group) = db.redundancy_group(BlockId(b[1].id)).unwrap();
    assert_eq!(one.ec_index, 1);
    assert_eq!(group.iter().map(|g| g.id).collect::<Vec<_>>(), b.iter().map(|g| g.id).collect::<Vec<_>>());
}

/// Three nodes (0, 1, 2) with disks (0, 1), (2, 3), (4, 5).
fn three_nodes(db: &MetaDb) {
    let disk = |u: String| DiskRegistration { uuid: u, ..Default::default() };
    for n in 0..3 {
        db.register_node(&format!("h:{n}"), &[disk(format!("{n}a")), disk(format!("{n}b"))]).unwrap();
    }
}

fn committed(db: &MetaDb, path: &str, lease_id: u64, disks: [u32; 3]) -> u64 {
    db.create_file(path, R3, 1 << 16, lease(lease_id), 0).unwrap();
    let chunks = disks.iter().enumerate().map(|(c, &d)| ChunkPlacement { copy: c as u32, disk: d, node: d / 2 });
    let b = db.allocate(path, lease_id, 0, 1000, &[chunks.collect()]).unwrap();
    db.commit(path, lease_id, 0, 1000, &[(b[0].id, 10)]).unwrap();
    b[0].id
}

#[test]
fn a_drain_ends_exactly_when_the_last_chunk_leaves_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = MetaDb::open(dir.path()).unwrap();
        three_nodes(&db);
        let a = committed(&db, "/a", 1, [0, 2, 4]);
        let b = committed(&db, "/b", 2, [0, 3, 5]);
        db.set_disk_state(DiskId(0), DeviceState::Draining).unwrap();
        let disk0 = |db: &MetaDb| db.drain_states().unwrap().disks.get(&DiskId(0)).copied();
        assert_eq!(disk0(&db), Some(DeviceState::Draining));
        assert_eq!(db.placed_on(&disks(&[0])).unwrap()[&DiskId(0)], (2, 20));
        db.replace_chunk(key(0, a, 0), DiskId(1), NodeId(0)).unwrap();
        assert_eq!(disk0(&db), Some(DeviceState::Draining), "block /b still places a chunk there");
        db.replace_chunk(key(0, b, 0), DiskId(1), NodeId(0)).unwrap();
        assert_eq!(disk0(&db), Some(DeviceState::Decommissioned));
        assert_eq!(db.placed_on(&disks(&[0])).unwrap()[&DiskId(0)], (0, 0));
        // Draining again keeps it decommissioned; it cannot be set directly.
        db.set_disk_state(DiskId(0), DeviceState::Draining).unwrap();
        assert_eq!(disk0(&db), Some(DeviceState::Decommissioned));
        let e = db.set_disk_state(DiskId(1), DeviceState::Decommissioned).unwrap_err().to_string();
        assert!(e.contains("DECOMMISSIONED cannot be set"), "{e}");

        // A node drains through its disks; deleting the last file empties it.
        db.set_node_state(NodeId(1), DeviceState::Draining).unwrap();
        db.delete("/a").unwrap();
        assert_eq!(db.drain_states().unwrap().nodes[&NodeId(1)], DeviceState::Draining, "disk 3 still holds /b");
        // An empty node is decommissioned at once; LIVE cancels a drain.
        db.set_node_state(NodeId(2), DeviceState::Draining).unwrap();
        db.set_node_state(NodeId(2), DeviceState::Live).unwrap();
        // A dead device has nothing to drain.
        db.set_disk_state(DiskId(5), DeviceState::Dead).unwrap();
        let e = db.set_disk_state(DiskId(5), DeviceState::Draining).unwrap_err().to_string();
        assert!(e.contains("disk 5 is DEAD"), "{e}");
    }
    let db = MetaDb::open(dir.path()).unwrap();
    let drains = db.drain_states().unwrap();
    assert_eq!(drains.disks, HashMap::from([(DiskId(0), DeviceState::Decommissioned)]));
    assert_eq!(drains.nodes, HashMap::from([(NodeId(1), DeviceState::Draining)]));
    db.delete("/b").unwrap();
    assert_eq!(db.drain_states().unwrap().nodes[&NodeId(1)], DeviceState::Decommissioned);
    db.set_disk_state(DiskId(0), DeviceState::Live).unwrap();
    assert!(db.drain_states().unwrap().disks.is_empty());
    assert_eq!(db.dead().unwrap(), (vec![DiskId(5)], vec![]));
}

#[test]
fn an_open_block_holds_a_drain_until_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = MetaDb::open(dir.path()).unwrap();
    three_nodes(&db);
    db.create_file("/w", R3, 1 << 16, lease(1), 0).unwrap();
    let open = db.allocate("/w", 1, 0, 1000, &[vec![loc(0, 2)]]).unwrap()[0].id;
    db.set_node_state(NodeId(1), DeviceState::Draining).unwrap();
    assert_eq!(db.drain_states().unwrap().nodes[&NodeId(1)], DeviceState::Draining);
    db.abandon("/w", 1, 0, 1000, &[BlockId(open)]).unwrap();
    assert_eq!(db.drain_states().unwrap().nodes[&NodeId(1)], DeviceState::Decommissioned);
}
