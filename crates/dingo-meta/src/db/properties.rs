//! Property test of the metadata database: random writers (create, take
//! over, allocate, commit, abandon, seal), deletions, lease recovery, the
//! nodes' deletion sync, chunk moves, time and reopenings, checked after
//! every step against what the database must keep true whatever the order.

use super::*;
use dingo_proto::Redundancy;
use dingo_types::{BlockId, DiskId, NodeId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const DISKS: u32 = 5;
const PATHS: [&str; 3] = ["/a", "/b/c", "/b/d"];
const BLOCK_SIZE: u64 = 1 << 16;

#[derive(Clone, Debug)]
enum Op {
    Wait(u64),
    Create {
        path: usize,
        ttl_ms: u64,
    },
    Append {
        path: usize,
        ttl_ms: u64,
    },
    /// `blocks` new blocks, two copies each on the disks `first` and
    /// `first + step` (mod [`DISKS`]).
    Allocate {
        path: usize,
        own_lease: bool,
        blocks: usize,
        first: u32,
        step: u32,
    },
    /// Commits the `pick`-th block this path was given.
    Commit {
        path: usize,
        own_lease: bool,
        pick: usize,
        size: u64,
    },
    Abandon {
        path: usize,
        own_lease: bool,
        pick: usize,
    },
    Seal {
        path: usize,
        own_lease: bool,
    },
    Delete(usize),
    Recover,
    DropExpiredWrites,
    /// Nodes confirm every `every`-th pending deletion.
    Sync {
        every: usize,
    },
    /// Moves the `pick`-th sealed chunk `by` disks on; `stale`: as if from
    /// a disk it is not on.
    Move {
        pick: usize,
        by: u32,
        stale: bool,
    },
    /// An operator drains a disk (or puts it back in service).
    Drain {
        disk: u32,
        back: bool,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let path = 0..PATHS.len();
    prop_oneof![
        2 => (0u64..3000).prop_map(Op::Wait),
        3 => (path.clone(), 500u64..5000).prop_map(|(path, ttl_ms)| Op::Create { path, ttl_ms }),
        1 => (path.clone(), 500u64..5000).prop_map(|(path, ttl_ms)| Op::Append { path, ttl_ms }),
        5 => (path.clone(), prop::bool::weighted(0.9), 1usize..3, 0..DISKS, 1..DISKS)
            .prop_map(|(path, own_lease, blocks, first, step)| Op::Allocate { path, own_lease, blocks, first, step }),
        5 => (path.clone(), prop::bool::weighted(0.9), 0usize..8, 1u64..BLOCK_SIZE)
            .prop_map(|(path, own_lease, pick, size)| Op::Commit { path, own_lease, pick, size }),
        1 => (path.clone(), prop::bool::weighted(0.9), 0usize..8)
            .prop_map(|(path, own_lease, pick)| Op::Abandon { path, own_lease, pick }),
        2 => (path.clone(), prop::bool::weighted(0.9)).prop_map(|(path, own_lease)| Op::Seal { path, own_lease }),
        1 => path.prop_map(Op::Delete),
        1 => Just(Op::Recover),
        1 => Just(Op::DropExpiredWrites),
        2 => (1usize..4).prop_map(|every| Op::Sync { every }),
        2 => (0usize..16, 1..DISKS, prop::bool::weighted(0.2)).prop_map(|(pick, by, stale)| Op::Move { pick, by, stale }),
        1 => (0..DISKS, prop::bool::weighted(0.3)).prop_map(|(disk, back)| Op::Drain { disk, back }),
        1 => Just(Op::Reopen),
    ]
}

/// Everything the database answers about its state.
#[derive(Debug, PartialEq)]
struct Snapshot {
    files: Vec<FileRecord>,
    blocks: Vec<BlockRecord>,
    next_block: u64,
    open_files: Vec<(String, u64)>,
    pending: Vec<ChunkKey>,
    sealed_chunks: Vec<Vec<ChunkKey>>,
    placed: Vec<(u64, u64)>,
    drains: Vec<(u32, DeviceState)>,
}

fn all_disks() -> Vec<DiskId> {
    (0..DISKS).map(DiskId).collect()
}

fn snapshot(db: &MetaDb) -> Snapshot {
    let (blocks, next_block) = db.blocks(BlockId(0), u32::MAX).unwrap();
    let placed = db.placed_on(&all_disks()).unwrap();
    Snapshot {
        files: db.list("").unwrap(),
        blocks,
        next_block,
        open_files: db.open_files().unwrap(),
        pending: db.sync_deletes(&[], &all_disks()).unwrap(),
        sealed_chunks: (0..DISKS).map(|d| db.sealed_chunks_on(&[DiskId(d)]).unwrap()).collect(),
        placed: (0..DISKS).map(|d| placed[&DiskId(d)]).collect(),
        drains: {
            let mut d: Vec<(u32, DeviceState)> =
                db.drain_states().unwrap().disks.into_iter().map(|(DiskId(d), s)| (d, s)).collect();
            d.sort_unstable();
            d
        },
    }
}

fn location(b: &BlockRecord, c: &ChunkPlacement) -> ChunkKey {
    ChunkKey::new(c.disk, b.id, c.copy)
}

/// What must hold after any step. `written`: every place a chunk was ever
/// written; `confirmed`: places the nodes confirmed they deleted since.
fn check(s: &Snapshot, written: &BTreeSet<ChunkKey>, confirmed: &BTreeSet<ChunkKey>) -> Result<(), TestCaseError> {
    prop_assert_eq!(s.blocks.len() as u64, s.next_block, "block ids are dense");
    let live_blocks = s.blocks.iter().filter(|b| b.state() != BlockState::Deleted);
    let live: BTreeSet<ChunkKey> = live_blocks.flat_map(|b| b.chunks.iter().map(move |c| location(b, c))).collect();
    // The disk index agrees with the block records.
    for d in 0..DISKS {
        let sealed: Vec<ChunkKey> = s
            .blocks
            .iter()
            .filter(|b| b.state() == BlockState::Sealed)
            .flat_map(|b| b.chunks.iter().map(move |c| location(b, c)))
            .filter(|k| k.disk.0 == d)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        prop_assert_eq!(&s.sealed_chunks[d as usize], &sealed, "sealed chunks on disk {}", d);
        let on_disk = s
            .blocks
            .iter()
            .filter(|b| b.state() != BlockState::Deleted)
            .flat_map(|b| b.chunks.iter().filter(move |c| c.disk == d).map(move |_| b.size));
        let (chunks, bytes) = on_disk.fold((0, 0), |(n, sum), size| (n + 1, sum + size));
        prop_assert_eq!(s.placed[d as usize], (chunks, bytes), "chunks placed on disk {}", d);
    }
    // No chunk is forgotten on a disk: every place written and no longer a
    // block's is queued for deletion or was deleted; none still in use is.
    for k in written.iter().filter(|k| !live.contains(k)) {
        prop_assert!(s.pending.contains(k) || confirmed.contains(k), "chunk {:?} left on its disk", k);
    }
    for k in &s.pending {
        prop_assert!(!live.contains(k), "chunk {:?} in use and queued for deletion", k);
    }
    // Every block not deleted is reachable: sealed ones from their file's
    // list, open ones from an unsealed file; a file's size is its blocks'.
    let by_id: BTreeMap<u64, &BlockRecord> = s.blocks.iter().map(|b| (b.id, b)).collect();
    let open_paths: BTreeSet<&str> = s.open_files.iter().map(|(p, _)| p.as_str()).collect();
    let mut listed = BTreeSet::new();
    for f in &s.files {
        prop_assert_eq!(!f.sealed, open_paths.contains(f.path.as_str()), "{} in the open index", &f.path);
        let mut size = 0;
        for id in &f.block_ids {
            let b = by_id[id];
            prop_assert!(b.state() == BlockState::Sealed && b.file == f.id, "block {} of {}", id, &f.path);
            size += b.size;
            listed.insert(*id);
        }
        prop_assert_eq!(f.size, size, "size of {}", &f.path);
    }
    prop_assert_eq!(open_paths.len(), s.open_files.len());
    // A draining disk holds chunks still; it is decommissioned exactly
    // when the last one leaves (nothing new is placed on it, as the
    // service's placement does not).
    for &(d, state) in &s.drains {
        let chunks = s.placed[d as usize].0;
        match state {
            DeviceState::Draining => prop_assert!(chunks > 0, "disk {} draining with no chunk", d),
            DeviceState::Decommissioned => prop_assert_eq!(chunks, 0, "decommissioned disk {} holds chunks", d),
            other => prop_assert!(false, "disk {} in the drain table as {:?}", d, other),
        }
    }
    for b in &s.blocks {
        match b.state() {
            BlockState::Sealed => prop_assert!(listed.contains(&b.id), "sealed block {} in no file", b.id),
            BlockState::Open => {
                let owner = s.files.iter().find(|f| f.id == b.file);
                prop_assert!(owner.is_some_and(|f| !f.sealed), "open block {} of no unsealed file", b.id);
            }
            BlockState::Deleted => prop_assert!(!listed.contains(&b.id), "deleted block {} in a file", b.id),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_chunk_is_accounted_for_and_every_block_reachable(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = MetaDb::open(dir.path()).unwrap();
        let disk = |d: u32| DiskRegistration { uuid: format!("disk-{d}"), ..Default::default() };
        let registrations: Vec<DiskRegistration> = (0..DISKS).map(disk).collect();
        prop_assert_eq!(db.register_node("node:1", &registrations).unwrap().1, all_disks());
        let mut now_ms = 1_000u64;
        let mut next_lease = 1u64;
        let mut leases: BTreeMap<usize, u64> = BTreeMap::new();
        let mut given: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        let mut written: BTreeSet<ChunkKey> = BTreeSet::new();
        let mut confirmed: BTreeSet<ChunkKey> = BTreeSet::new();
        let lease_of = |leases: &BTreeMap<usize, u64>, path: usize, own: bool| {
            leases.get(&path).copied().unwrap_or(0) + if own { 0 } else { 1_000 }
        };
        for op in ops {
            let before = snapshot(&db);
            // Disks new chunks may go to: not draining nor decommissioned.
            let in_service = |d: u32| !before.drains.iter().any(|&(x, _)| x == d);
            // Whether the step was refused: a refusal changes nothing.
            let refused = match op {
                Op::Wait(ms) => {
                    now_ms += ms;
                    false
                }
                Op::Create { path, ttl_ms } | Op::Append { path, ttl_ms } => {
                    let lease = Lease { id: next_lease, expiry_ms: now_ms + ttl_ms };
                    next_lease += 1;
                    let r = if matches!(op, Op::Create { .. }) {
                        db.create_file(PATHS[path], Redundancy::Replicated(2), BLOCK_SIZE, lease, now_ms)
                    } else {
                        db.open_for_append(PATHS[path], lease, now_ms)
                    };
                    if r.is_ok() {
                        leases.insert(path, lease.id);
                    }
                    r.is_err()
                }
                Op::Allocate { path, own_lease, blocks, first, step } => {
                    if !in_service(first) || !in_service((first + step) % DISKS) {
                        continue;
                    }
                    let copies = |_| {
                        let disks = [first, (first + step) % DISKS];
                        (0..2).map(|copy| ChunkPlacement { copy, disk: disks[copy as usize], node: disks[copy as usize] })
                            .collect::<Vec<_>>()
                    };
                    let placement: Vec<Vec<ChunkPlacement>> = (0..blocks).map(copies).collect();
                    let lease = lease_of(&leases, path, own_lease);
                    match db.allocate(PATHS[path], lease, now_ms, 2000, &placement) {
                        Ok(made) => {
                            for b in &made {
                                written.extend(b.chunks.iter().map(|c| location(b, c)));
                                given.entry(path).or_default().push(b.id);
                            }
                            false
                        }
                        Err(_) => true,
                    }
                }
                Op::Commit { path, own_lease, pick, size } => {
                    let Some(&id) = given.get(&path).and_then(|ids| ids.get(pick)) else { continue };
                    let lease = lease_of(&leases, path, own_lease);
                    db.commit(PATHS[path], lease, now_ms, 2000, &[(id, size)]).is_err()
                }
                Op::Abandon { path, own_lease, pick } => {
                    let Some(&id) = given.get(&path).and_then(|ids| ids.get(pick)) else { continue };
                    let lease = lease_of(&leases, path, own_lease);
                    db.abandon(PATHS[path], lease, now_ms, 2000, &[BlockId(id)]).is_err()
                }
                Op::Seal { path, own_lease } => db.seal(PATHS[path], lease_of(&leases, path, own_lease), now_ms).is_err(),
                Op::Delete(path) => db.delete(PATHS[path]).is_err(),
                Op::Recover => db.recover_expired_leases(now_ms).is_err(),
                Op::DropExpiredWrites => db.drop_expired_writes(now_ms).is_err(),
                Op::Sync { every } => {
                    let done: Vec<ChunkKey> = before.pending.iter().step_by(every).copied().collect();
                    db.sync_deletes(&done, &all_disks()).unwrap();
                    confirmed.extend(done);
                    false
                }
                Op::Move { pick, by, stale } => {
                    let sealed: Vec<ChunkKey> = before.sealed_chunks.concat();
                    let Some(&old) = sealed.get(pick) else { continue };
                    let from = if stale { ChunkKey { disk: DiskId((old.disk.0 + 1) % DISKS), ..old } } else { old };
                    let to = DiskId((old.disk.0 + by) % DISKS);
                    if to == from.disk || !in_service(to.0) {
                        continue;
                    }
                    // The node wrote the new copy before asking, moved or not.
                    let new = ChunkKey { disk: to, ..old };
                    written.insert(new);
                    confirmed.remove(&new);
                    let _ = db.replace_chunk(from, to, NodeId(to.0));
                    // A refused move queues the new copy for deletion: a change.
                    false
                }
                Op::Drain { disk, back } => {
                    let state = if back { DeviceState::Live } else { DeviceState::Draining };
                    db.set_disk_state(DiskId(disk), state).is_err()
                }
                Op::Reopen => {
                    drop(db);
                    db = MetaDb::open(dir.path()).unwrap();
                    prop_assert_eq!(&snapshot(&db), &before, "a reopened database differs");
                    false
                }
            };
            let after = snapshot(&db);
            if refused {
                prop_assert_eq!(&after, &before, "a refused {:?} changed the database", op);
            }
            check(&after, &written, &confirmed)?;
        }
    }
}
