//! Property test of the node's chunk store (`dingo_node::Store`): random
//! writes, ranged reads of every class, deletions, bytes damaged on disk
//! and restarts, checked against the bytes each chunk was written with.

use bytes::Bytes;
use dingo_node::chunk::{Layout, SEGMENT};
use dingo_node::{DiskSpec, IoSettings, Store, StoreError};
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, IoTag, TaskKind};
use proptest::prelude::*;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::Path;

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
    // A general cache of a few pages, no pinned region: no pin is made here.
    let store = Store::open(&specs, 256 << 10, 0).unwrap();
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
/// it has seen them equal to the copy kept, and after that checks them
/// again whenever it reads the first data segment from disk (the same
/// request starts at the file's start).
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
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A read returns exactly the bytes written or an error that says the
    /// chunk is damaged — never other bytes — and a read fails when what it
    /// reads on disk was damaged: a scrub, which must check the device
    /// itself, whenever a segment in its range was; any read that goes to
    /// the header and checksum table on disk (see [`Written`]) when they were.
    #[test]
    fn reads_return_the_bytes_written_and_scrubs_find_any_damage_they_read(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let mut model: BTreeMap<u64, Written> = BTreeMap::new();
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
                            e.insert(Written {
                                data,
                                header_damage: BTreeSet::new(),
                                data_damage: BTreeSet::new(),
                                meta_in_memory: true,
                                header_seen: false,
                            });
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
                    // Whether this read goes to the header and table on disk.
                    let reads_header = !w.meta_in_memory || (t == 1 && !w.header_seen);
                    let segments = (offset / SEGMENT)..(offset + len).div_ceil(SEGMENT);
                    let in_range = offset + len <= size;
                    // Whether a scrub checks them with the first segment.
                    let checks_header_inline =
                        t == 1 && w.meta_in_memory && w.header_seen && in_range && len > 0 && offset < SEGMENT;
                    let header_damaged = !w.header_damage.is_empty();
                    let reads_damage = (header_damaged && (reads_header || checks_header_inline))
                        || (in_range && len > 0 && t == 1 && w.data_damage.iter().any(|b| segments.contains(&(b / SEGMENT))));
                    match &got {
                        Ok((bytes, _)) => {
                            prop_assert!(in_range, "chunk {} {}+{} read past its end", c, offset, len);
                            prop_assert!(bytes[..] == w.data[offset as usize..(offset + len) as usize], "chunk {} {}+{}: other bytes", c, offset, len);
                        }
                        Err(StoreError::OutOfRange { .. }) => prop_assert!(!in_range),
                        Err(StoreError::Corrupt { .. }) => {
                            prop_assert!(header_damaged || !w.data_damage.is_empty(), "chunk {} corrupt, undamaged", c);
                            if header_damaged && reads_header {
                                continue;
                            }
                        }
                        Err(e) => prop_assert!(false, "chunk {} {}+{}: {}", c, offset, len, e),
                    }
                    // The header and table were read, if needed, and sound.
                    prop_assert!(got.is_err() || !reads_damage, "a read (class {}) of chunk {} {}+{} missed damage on disk", t, c, offset, len);
                    w.header_seen |= reads_header;
                    w.meta_in_memory = true;
                }
                Op::Delete(c) => {
                    let removed = store.delete(chunk(c), Some(DISK)).unwrap();
                    prop_assert_eq!(removed, model.remove(&c).is_some());
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
                    for w in model.values_mut() {
                        w.meta_in_memory = false;
                        w.header_seen = false;
                    }
                }
            }
        }
    }
}
