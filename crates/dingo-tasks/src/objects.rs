//! The object-store area garbage collection works on: DINGO files holding
//! records, and tombstones saying which records are dead.
//!
//! An area is a path prefix `AREA` (ending in `/`):
//!
//! - `AREA/data/<name>`: data files, each a sequence of records, one per
//!   object. Objects are immutable and their keys unique in the area (the
//!   Haystack/f4 model): an object is written once and never overwritten.
//! - `AREA/deleted/<name>`: tombstone files, sequences of records with an
//!   empty value; each names the key of a deleted object. Deleting an object
//!   appends a tombstone (a new small file; DINGO files are append-only).
//!
//! A record of a data file is **live** unless a tombstone names its key.
//! Because keys are never reused, a key dead once is dead forever, so a
//! liveness snapshot taken when a GC job is planned never drops a live
//! record; records deleted later wait for the next job.
//!
//! Record format (little endian), back to back with no padding:
//!
//! ```text
//! offset 0   u32  magic 0x31524744 ("DGR1")
//!        4   u32  key length K (1 ..= 4096)
//!        8   u64  value length V
//!        16  u32  crc32c of the K key bytes followed by the V value bytes
//!        20  K key bytes, then V value bytes
//! ```
//!
//! Garbage collection of a data file reads it fully, checks every record,
//! writes the live records (byte for byte, in their order) to a new file
//! `<name>@<generation + 1>` and deletes the old one. A file that does not
//! parse is left as it is and reported: no byte of it is lost.

use bytes::{BufMut, Bytes, BytesMut};
use std::collections::HashSet;

const MAGIC: u32 = 0x3152_4744;
/// Bytes of a record before its key.
pub const RECORD_HEADER: usize = 20;
/// Longest key accepted.
pub const MAX_KEY: usize = 4096;

/// Where data files live inside an area.
pub fn data_prefix(area: &str) -> String {
    format!("{}data/", area_root(area))
}

/// Where tombstone files live inside an area.
pub fn tombstone_prefix(area: &str) -> String {
    format!("{}deleted/", area_root(area))
}

fn area_root(area: &str) -> String {
    if area.ends_with('/') { area.to_string() } else { format!("{area}/") }
}

/// The path a data file is rewritten to: `<name>@<generation + 1>`, where
/// a name without `@<n>` is generation 0.
pub fn next_generation(path: &str) -> String {
    let (stem, generation) = match path.rsplit_once('@') {
        Some((stem, n)) if !stem.is_empty() && !n.is_empty() && !n.contains('/') => match n.parse::<u64>() {
            Ok(g) => (stem, g),
            Err(_) => (path, 0),
        },
        _ => (path, 0),
    };
    format!("{stem}@{}", generation + 1)
}

/// One record of a data or tombstone file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: Bytes,
    pub value: Bytes,
}

/// A record that could not be written or read, with where it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record at offset {offset}: {detail}")]
    Malformed { offset: u64, detail: String },
    #[error("key of {len} bytes; keys are 1 to {MAX_KEY} bytes")]
    KeyLength { len: usize },
}

/// Appends `r` to `out` in the record format.
pub fn encode(r: &Record, out: &mut BytesMut) -> Result<(), RecordError> {
    if r.key.is_empty() || r.key.len() > MAX_KEY {
        return Err(RecordError::KeyLength { len: r.key.len() });
    }
    out.reserve(RECORD_HEADER + r.key.len() + r.value.len());
    out.put_u32_le(MAGIC);
    out.put_u32_le(r.key.len() as u32);
    out.put_u64_le(r.value.len() as u64);
    out.put_u32_le(crc32c::crc32c_append(crc32c::crc32c(&r.key), &r.value));
    out.put_slice(&r.key);
    out.put_slice(&r.value);
    Ok(())
}

/// Encodes records back to back, as a data or tombstone file holds them.
pub fn encode_all<'a>(records: impl IntoIterator<Item = &'a Record>) -> Result<Bytes, RecordError> {
    let mut out = BytesMut::new();
    for r in records {
        encode(r, &mut out)?;
    }
    Ok(out.freeze())
}

/// A record found in a file: its byte range and contents (slices of the
/// file's bytes, not copies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub offset: usize,
    pub len: usize,
    pub record: Record,
}

/// Every record of `data`, checked (magic, lengths, checksum); the first
/// malformed one is an error naming its offset.
pub fn parse(data: &Bytes) -> Result<Vec<Parsed>, RecordError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let bad = |detail: String| RecordError::Malformed { offset: at as u64, detail };
        let rest = &data[at..];
        if rest.len() < RECORD_HEADER {
            return Err(bad(format!("{} bytes left, shorter than a record header", rest.len())));
        }
        let u32_at = |o: usize| u32::from_le_bytes(rest[o..o + 4].try_into().expect("4 bytes"));
        if u32_at(0) != MAGIC {
            return Err(bad(format!("bad magic {:#010x}", u32_at(0))));
        }
        let key_len = u32_at(4) as usize;
        let value_len = u64::from_le_bytes(rest[8..16].try_into().expect("8 bytes"));
        if key_len == 0 || key_len > MAX_KEY {
            return Err(bad(format!("key length {key_len} out of range 1..={MAX_KEY}")));
        }
        let body = (key_len as u64).checked_add(value_len).filter(|&b| b <= (rest.len() - RECORD_HEADER) as u64);
        let Some(body) = body else {
            return Err(bad(format!("key and value ({key_len} + {value_len} bytes) run past the end of the file")));
        };
        let len = RECORD_HEADER + body as usize;
        let key = data.slice(at + RECORD_HEADER..at + RECORD_HEADER + key_len);
        let value = data.slice(at + RECORD_HEADER + key_len..at + len);
        if crc32c::crc32c_append(crc32c::crc32c(&key), &value) != u32_at(16) {
            return Err(bad("checksum mismatch".into()));
        }
        out.push(Parsed { offset: at, len, record: Record { key, value } });
        at += len;
    }
    Ok(out)
}

/// Keys of deleted objects: the liveness source of an area.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tombstones(HashSet<Bytes>);

impl Tombstones {
    /// Adds every key of a tombstone file's bytes.
    pub fn add_file(&mut self, data: &Bytes) -> Result<(), RecordError> {
        for p in parse(data)? {
            self.0.insert(p.record.key);
        }
        Ok(())
    }

    pub fn insert(&mut self, key: Bytes) {
        self.0.insert(key);
    }

    pub fn is_dead(&self, key: &[u8]) -> bool {
        self.0.contains(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What collecting one file's garbage gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collected {
    /// The live records, byte for byte and in order: the new file.
    pub live: Bytes,
    pub live_records: u64,
    pub dead_records: u64,
    /// Bytes of dead records (what the rewrite frees).
    pub dead_bytes: u64,
}

/// Splits a data file's bytes into what stays and what goes.
pub fn collect(data: &Bytes, dead: &Tombstones) -> Result<Collected, RecordError> {
    let mut live = BytesMut::new();
    let (mut live_records, mut dead_records, mut dead_bytes) = (0, 0, 0);
    for p in parse(data)? {
        if dead.is_dead(&p.record.key) {
            dead_records += 1;
            dead_bytes += p.len as u64;
        } else {
            live_records += 1;
            live.extend_from_slice(&data[p.offset..p.offset + p.len]);
        }
    }
    Ok(Collected { live: live.freeze(), live_records, dead_records, dead_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(key: &str, value: &[u8]) -> Record {
        Record { key: Bytes::copy_from_slice(key.as_bytes()), value: Bytes::copy_from_slice(value) }
    }

    #[test]
    fn generations_count_up() {
        assert_eq!(next_generation("/o/data/seg-1"), "/o/data/seg-1@1");
        assert_eq!(next_generation("/o/data/seg-1@1"), "/o/data/seg-1@2");
        assert_eq!(next_generation("/o/data/seg@x"), "/o/data/seg@x@1");
        assert_eq!(next_generation("/o/da@ta/seg"), "/o/da@ta/seg@1");
        assert_eq!(data_prefix("/o"), "/o/data/");
        assert_eq!(tombstone_prefix("/o/"), "/o/deleted/");
    }

    #[test]
    fn malformed_files_are_refused_with_the_offset() {
        let good = encode_all(&[rec("a", b"xyz"), rec("b", b"")]).unwrap();
        let first_len = RECORD_HEADER + 4;
        // A flipped value byte of the second... first record.
        let mut bad = good.to_vec();
        bad[RECORD_HEADER + 1] ^= 1;
        let e = parse(&Bytes::from(bad)).unwrap_err();
        assert_eq!(e, RecordError::Malformed { offset: 0, detail: "checksum mismatch".into() });
        // Truncated in the second record.
        let e = parse(&good.slice(..good.len() - 1)).unwrap_err();
        assert!(matches!(e, RecordError::Malformed { offset, .. } if offset == first_len as u64), "{e}");
        // Garbage after the records.
        let mut tail = good.to_vec();
        tail.extend_from_slice(&[0; RECORD_HEADER]);
        assert!(parse(&Bytes::from(tail)).unwrap_err().to_string().contains("bad magic"));
        assert_eq!(encode_all(&[rec("", b"v")]).unwrap_err(), RecordError::KeyLength { len: 0 });
    }

    fn records() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, bool)>> {
        prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 1..16), prop::collection::vec(any::<u8>(), 0..64), any::<bool>()),
            0..40,
        )
    }

    proptest! {
        /// Collection keeps exactly the live records, byte for byte and in
        /// order, and accounts every dead byte.
        #[test]
        fn collect_keeps_exactly_the_live_records(rs in records()) {
            // Unique keys, as in an area: suffix each with its index.
            let all: Vec<(Record, bool)> = rs.into_iter().enumerate().map(|(i, (mut k, v, dead))| {
                k.extend_from_slice(format!("#{i}").as_bytes());
                (Record { key: k.into(), value: v.into() }, dead)
            }).collect();
            let file = encode_all(all.iter().map(|(r, _)| r)).unwrap();
            let parsed: Vec<Record> = parse(&file).unwrap().into_iter().map(|p| p.record).collect();
            prop_assert_eq!(&parsed, &all.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
            let mut dead = Tombstones::default();
            for (r, d) in &all {
                if *d {
                    dead.insert(r.key.clone());
                }
            }
            let c = collect(&file, &dead).unwrap();
            let live: Vec<&Record> = all.iter().filter(|(_, d)| !d).map(|(r, _)| r).collect();
            prop_assert_eq!(c.live.clone(), encode_all(live.iter().copied()).unwrap());
            prop_assert_eq!(c.live_records, live.len() as u64);
            prop_assert_eq!(c.dead_records, (all.len() - live.len()) as u64);
            prop_assert_eq!(c.dead_bytes + c.live.len() as u64, file.len() as u64);
        }

        /// A flipped bit anywhere in a file is found: the magic, lengths
        /// and a checksum over key and value leave no bit unchecked.
        #[test]
        fn a_flipped_bit_is_detected(rs in records(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let all: Vec<Record> = rs.into_iter().enumerate().map(|(i, (mut k, v, _))| {
                k.extend_from_slice(format!("#{i}").as_bytes());
                Record { key: k.into(), value: v.into() }
            }).collect();
            prop_assume!(!all.is_empty());
            let mut bad = encode_all(&all).unwrap().to_vec();
            let at = at.index(bad.len());
            bad[at] ^= 1 << bit;
            prop_assert!(parse(&Bytes::from(bad)).is_err(), "bit {} of byte {} flipped unnoticed", bit, at);
        }
    }
}
