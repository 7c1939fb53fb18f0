//! Property test of the node's chunk store (`dingo_node::Store`): random
//! writes, ranged reads of every class, pins, deletions, bytes damaged on
//! disk and restarts, checked against the bytes each chunk was written with
//! and against a model of what the pinned cache holds.

use bytes::Bytes;
use dingo_node::chunk::{Layout, SEGMENT};
use dingo_node::{DiskSpec, IoSettings, Store, StoreError};
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, IoTag, TaskKind};
use proptest::prelude::*;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

const CHUNKS: u64 = 2;
const DISK: DiskId = DiskId(3);

#[derive(Clone, Debug)]
enum Op {
    /// Writes chunk `chunk` with `len` bytes (refused if it exists).
    Write {
        chunk: u64,
        len: u64,
    },
    /// Reads `len` bytes at `offset` (both as fractions of the chunk, in
    /// thousandths, past the end now and then) as class `tag`.
    Read {
        chunk: u64,
        offset: u64,
        len: u64,
        tag: u8,
    },
    Delete(u64),
    /// Pins a chunk (whether it exists or not), as a planner directive.
    Pin(u64),
    Unpin(u64),
    /// Flips a byte of the chunk file: in its header and checksum table
    /// or in its data, at a fraction (thousandths) of that part.
    Damage {
        chunk: u64,
        header: bool,
        at: u64,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..CHUNKS, prop_oneof![0u64..1000, 60_000u64..300_000]).prop_map(|(chunk, len)| Op::Write { chunk, len }),
        8 => (0..CHUNKS, 0u64..1100, 0u64..1100, 0u8..3)
            .prop_map(|(chunk, offset, len, tag)| Op::Read { chunk, offset, len, tag }),
        1 => (0..CHUNKS).prop_map(Op::Delete),
        2 => (0..CHUNKS).prop_map(Op::Pin),
        1 => (0..CHUNKS).prop_map(Op::Unpin),
        2 => (0..CHUNKS, prop::bool::weighted(0.3), 0u64..1000)
            .prop_map(|(chunk, header, at)| Op::Damage { chunk, header, at }),
        1 => Just(Op::Restart),
    ]
}

fn chunk(c: u64) -> ChunkRef {
    ChunkRef { block: BlockId(c), copy: 0 }
}

fn tag(t: u8) -> IoTag {
    match t {
        0 => IoTag::Foreground,
        1 => IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) },
        _ => IoTag::Maintenance { task: TaskKind::Reconstruction, declaration: DeclarationId(2) },
    }
}

fn open(dir: &Path) -> Store {
    let specs = vec![DiskSpec { path: dir.join("d0"), capacity: None, hdd: None, io: IoSettings::default() }];
    // A pinned region that holds every page of both chunks, so it never
    // evicts and the model knows what it holds; no general region, whose
    // pages the model could not follow (`cache_properties.rs` tests it).
    let store = Store::open(&specs, 0, 1 << 20).unwrap();
    store.disks[0].set_id(DISK);
    store
}

/// A chunk as the model knows it: its bytes, and what was damaged on disk
/// since it was written (`header`: its header or checksum table; data
/// segments by index).
///
/// What the node does with the header and table on disk: it keeps them in
/// memory from the write, or from the first read after a restart, which
/// checks them; an integrity check (scrubbing) reads them from disk until
/// it has seen them equal to the copy kept. After that, a read from the
/// first data segment checks them in the same request (the request starts
/// at the file's start) when it is a scrub or its pages go to the pinned
/// cache; that read caches the first page only if they are sound.
struct Written {
    data: Bytes,
    /// Places flipped in the header or table, and data bytes flipped (a
    /// place flipped twice is sound again).
    header_damage: BTreeSet<u64>,
    data_damage: BTreeSet<u64>,
    /// Header and table are in memory (from the write or a read).
    meta_in_memory: bool,
    /// They were read on disk and found equal since the write or restart.
    header_seen: bool,
    /// Pages in the pinned cache, each as it was when read: sound.
    cached: BTreeSet<u64>,
    /// A read failed part way under a pin, so `cached` and `header_seen`
    /// may be short of what the node has (pages of the runs it read before
    /// the damage); until a restart or deletion only what never depends on
    /// them is checked.
    uncertain: bool,
}

impl Written {
    fn new(data: Bytes) -> Written {
        Written {
            data,
            header_damage: BTreeSet::new(),
            data_damage: BTreeSet::new(),
            meta_in_memory: true,
            header_seen: false,
            cached: BTreeSet::new(),
            uncertain: false,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A read returns exactly the bytes written or an error that says the
    /// chunk is damaged, never other bytes; it fails exactly when what it
    /// reads on disk (not in the cache) was damaged: a data segment, or the
    /// header and table when it reads them (see [`Written`]); and the cache
    /// serves it exactly when it holds every page (a scrub, which must
    /// check the device, is served only by pinned pages).
    #[test]
    fn reads_fail_exactly_when_what_they_read_on_disk_was_damaged(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let mut model: BTreeMap<u64, Written> = BTreeMap::new();
        let mut pinned: BTreeSet<u64> = BTreeSet::new();
        let mut generation = 0u8;
        for op in ops {
            match op {
                Op::Write { chunk: c, len } => {
                    generation = generation.wrapping_add(1);
                    let data: Bytes = (0..len).map(|i| (i % 251) as u8 ^ generation).collect::<Vec<u8>>().into();
                    let mut pieces = data.chunks(100_000).map(Bytes::copy_from_slice).collect::<Vec<_>>().into_iter();
                    let r = store.write_chunk(chunk(c), DISK, len, IoTag::Foreground, || Ok(pieces.next()), || true);
                    match model.entry(c) {
                        Entry::Occupied(_) => {
                            prop_assert!(matches!(r, Err(StoreError::Exists(_))), "rewrote chunk {}: {:?}", c, r);
                        }
                        Entry::Vacant(e) => {
                            r.unwrap();
                            e.insert(Written::new(data));
                        }
                    }
                }
                Op::Read { chunk: c, offset, len, tag: t } => {
                    let Some(w) = model.get_mut(&c) else {
                        prop_assert!(matches!(store.read(chunk(c), 0, 1, tag(t)), Err(StoreError::NotFound(_))));
                        continue;
                    };
                    let size = w.data.len() as u64;
                    let (offset, len) = (offset * size / 1000, len * size / 1000);
                    let got = store.read(chunk(c), offset, len, tag(t));
                    let is_pinned = pinned.contains(&c);
                    // Whether this read loads the header and table from disk
                    // on their own, before any data.
                    let reads_header = !w.meta_in_memory || (t == 1 && !w.header_seen);
                    let header_damaged = !w.header_damage.is_empty();
                    let in_range = offset + len <= size;
                    let segments: BTreeSet<u64> =
                        if in_range && len > 0 { ((offset / SEGMENT)..(offset + len).div_ceil(SEGMENT)).collect() } else { BTreeSet::new() };
                    let missing: BTreeSet<u64> = segments.difference(&w.cached).copied().collect();
                    // Whether the request for the first segment starts at
                    // the file's start and checks the header and table.
                    let checks_header_inline = !reads_header && missing.contains(&0) && (t == 1 || is_pinned);
                    let damaged_read = missing.iter().any(|s| w.data_damage.iter().any(|b| b / SEGMENT == *s))
                        || (header_damaged && (reads_header || (checks_header_inline && t == 1)));
                    match &got {
                        Ok((bytes, all_hit)) => {
                            prop_assert!(in_range, "chunk {} {}+{} read past its end", c, offset, len);
                            prop_assert!(bytes[..] == w.data[offset as usize..(offset + len) as usize], "chunk {} {}+{}: other bytes", c, offset, len);
                            prop_assert!(w.uncertain || *all_hit == missing.is_empty(), "chunk {} {}+{}: the cache served it: {}, holds {:?}", c, offset, len, all_hit, w.cached);
                        }
                        Err(StoreError::OutOfRange { .. }) => prop_assert!(!in_range),
                        Err(StoreError::Corrupt { .. }) => {
                            prop_assert!(header_damaged || !w.data_damage.is_empty(), "chunk {} corrupt, undamaged", c);
                            prop_assert!(w.uncertain || damaged_read || (header_damaged && reads_header), "chunk {} {}+{} (class {}) failed on damage it did not read", c, offset, len, t);
                            if header_damaged && reads_header {
                                continue;
                            }
                        }
                        Err(e) => prop_assert!(false, "chunk {} {}+{}: {}", c, offset, len, e),
                    }
                    prop_assert!(got.is_err() || w.uncertain || !damaged_read, "a read (class {}) of chunk {} {}+{} missed damage on disk", t, c, offset, len);
                    w.header_seen |= reads_header;
                    w.meta_in_memory = true;
                    if got.is_err() {
                        // It may have cached the runs it read before the damage.
                        w.uncertain |= is_pinned;
                    } else {
                        if checks_header_inline {
                            w.header_seen = !header_damaged;
                        }
                        if is_pinned {
                            let first_page_sound = reads_header || !header_damaged;
                            w.cached.extend(missing.iter().filter(|&&s| s != 0 || first_page_sound));
                        }
                    }
                }
                Op::Pin(c) => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
                    store.cache.pin(chunk(c), now + 3_600_000, now);
                    pinned.insert(c);
                }
                Op::Unpin(c) => {
                    store.cache.unpin(chunk(c));
                    pinned.remove(&c);
                    if let Some(w) = model.get_mut(&c) {
                        w.cached.clear();
                    }
                }
                Op::Delete(c) => {
                    let removed = store.delete(chunk(c), Some(DISK)).unwrap();
                    prop_assert_eq!(removed, model.remove(&c).is_some());
                    if removed {
                        // A deleted chunk's pages and pin go with it.
                        pinned.remove(&c);
                    }
                }
                Op::Damage { chunk: c, header, at } => {
                    let Some(w) = model.get_mut(&c) else { continue };
                    let layout = Layout { data_len: w.data.len() as u64 };
                    let toggle = |set: &mut BTreeSet<u64>, place: u64| {
                        if !set.remove(&place) {
                            set.insert(place);
                        }
                    };
                    let place = if header || w.data.is_empty() {
                        // Only the header's fields and the checksum table
                        // mean anything; the padding after each is unread.
                        let table_at = Layout { data_len: 0 }.data_offset();
                        let table_bytes = layout.segments() * 4;
                        let place =
                            if at < 500 || table_bytes == 0 { at % 40 } else { table_at + (at - 500) * table_bytes / 500 };
                        toggle(&mut w.header_damage, place);
                        place
                    } else {
                        let byte = at * w.data.len() as u64 / 1000;
                        toggle(&mut w.data_damage, byte);
                        layout.data_offset() + byte
                    };
                    let file = std::fs::OpenOptions::new().read(true).write(true).open(store.disks[0].chunk_path(chunk(c))).unwrap();
                    let mut b = [0u8; 1];
                    file.read_exact_at(&mut b, place).unwrap();
                    file.write_all_at(&[b[0] ^ 0x5a], place).unwrap();
                }
                Op::Restart => {
                    drop(store);
                    store = open(dir.path());
                    pinned.clear();
                    for w in model.values_mut() {
                        w.meta_in_memory = false;
                        w.header_seen = false;
                        w.cached.clear();
                        w.uncertain = false;
                    }
                }
            }
        }
    }
}
