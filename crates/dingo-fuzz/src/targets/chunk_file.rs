//! Chunk files (header, checksum table, data) read by a storage node's
//! store: each execution registers a chunk with the store, replaces its
//! file on disk with the input, and reads it. The store must refuse the
//! file or return exactly its data — and only data that an independent
//! reading of the format (`docs/STORAGE.md`) finds intact: a header whose
//! crc32c matches, a checksum table whose crc32c matches, data segments
//! that match the table.

use crate::Target;
use bytes::Bytes;
use dingo_node::{DiskSpec, IoSettings, Store};
use dingo_proto::IoTag;
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, TaskKind};
use std::path::PathBuf;

const ALIGN: usize = 4096;
const SEGMENT: usize = 64 * 1024;
/// Largest data length an execution registers (inputs are near the seeds).
const MAX_LEN: u64 = 512 * 1024;
const DISK: DiskId = DiskId(1);

pub struct ChunkFile {
    store: Store,
    disk_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl ChunkFile {
    /// A store of one disk in a temporary directory (in memory, under
    /// `/dev/shm`, where there is one).
    pub fn new() -> ChunkFile {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.expect("temporary dir");
        let disk_dir = dir.path().join("d0");
        let spec = DiskSpec { path: disk_dir.clone(), capacity: None, hdd: None, io: IoSettings::default() };
        let store = Store::open(&[spec], 0, 0).expect("a store on a fresh directory");
        store.disks[0].set_id(DISK);
        ChunkFile { store, disk_dir, _dir: dir }
    }

    fn path(&self, chunk: ChunkRef) -> PathBuf {
        self.disk_dir.join("chunks").join(format!("{}.{}", chunk.block.0, chunk.copy))
    }

    /// Writes `data` as `chunk` through the store; returns the file.
    fn put(&self, chunk: ChunkRef, data: &[u8]) -> Vec<u8> {
        let mut piece = Some(Bytes::copy_from_slice(data));
        self.store
            .write_chunk(chunk, DISK, data.len() as u64, IoTag::Foreground, || Ok(piece.take()), || true)
            .expect("a valid write");
        std::fs::read(self.path(chunk)).expect("the chunk file")
    }
}

impl Default for ChunkFile {
    fn default() -> Self {
        Self::new()
    }
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// What an independent reading of the format finds in `file`: its data,
/// if header and checksum table are intact, and which data segments match
/// their checksums.
struct Reading<'f> {
    data: &'f [u8],
    segment_ok: Vec<bool>,
}

impl Reading<'_> {
    /// Whether every segment holding bytes `start..end` is intact.
    fn intact(&self, start: usize, end: usize) -> bool {
        start >= end || (start / SEGMENT..=(end - 1) / SEGMENT).all(|s| self.segment_ok[s])
    }
}

fn read_format(file: &[u8], chunk: ChunkRef) -> Option<Reading<'_>> {
    let h = file.get(..40)?;
    if &h[..8] != b"DINGOCK1" || le_u32(&h[36..40]) != crc32c::crc32c(&h[..36]) {
        return None;
    }
    if le_u32(&h[8..12]) as usize != SEGMENT || le_u64(&h[12..20]) != chunk.block.0 {
        return None;
    }
    if le_u32(&h[20..24]) != u32::from(chunk.copy) {
        return None;
    }
    let len = usize::try_from(le_u64(&h[24..32])).ok()?;
    let segments = len.div_ceil(SEGMENT);
    let table = file.get(ALIGN..ALIGN + segments * 4)?;
    if crc32c::crc32c(table) != le_u32(&h[32..36]) {
        return None;
    }
    let data_at = ALIGN + (segments * 4).div_ceil(ALIGN) * ALIGN;
    let data = file.get(data_at..data_at + len)?;
    let segment_ok = data
        .chunks(SEGMENT)
        .enumerate()
        .map(|(s, seg)| crc32c::crc32c(seg) == le_u32(&table[4 * s..4 * s + 4]))
        .collect();
    Some(Reading { data, segment_ok })
}

/// Checks a successful read of `start..start + got.len()`.
fn check_read(file: &[u8], chunk: ChunkRef, len: u64, start: usize, got: &[u8]) {
    let end = start + got.len();
    let reading = read_format(file, chunk).filter(|r| r.data.len() as u64 == len);
    let Some(reading) = reading else { panic!("{chunk}: the store returned {} bytes of a damaged file", got.len()) };
    assert!(reading.intact(start, end), "{chunk}: the store returned bytes {start}..{end} of a damaged segment");
    assert!(
        got == &reading.data[start..end],
        "{chunk}: the store returned other bytes than the file holds at {start}..{end}"
    );
}

impl Target for ChunkFile {
    fn name(&self) -> &'static str {
        "chunk-file"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        [0usize, 1, 4096, 65_536, 65_537, 150_000]
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let chunk = ChunkRef { block: BlockId(1_000_000 + i as u64), copy: (i % 3) as u8 };
                let data: Vec<u8> = (0..len).map(|b| (b % 251) as u8 ^ i as u8).collect();
                let file = self.put(chunk, &data);
                let _ = self.store.delete(chunk, None);
                file
            })
            .collect()
    }

    fn run(&mut self, input: &[u8]) {
        // The chunk and length the input's header claims (so that a file
        // one mutation away from valid is not refused for naming another
        // chunk), registered with the store by a valid write of that length.
        let field = |r: std::ops::Range<usize>| input.get(r).map_or(0, |b| le_u64(&[b, &[0; 8][b.len()..]].concat()));
        let chunk = ChunkRef { block: BlockId(field(12..20) % (1 << 56)), copy: field(20..24).min(255) as u8 };
        let len = field(24..32).min(MAX_LEN);
        let _ = self.store.delete(chunk, None);
        self.put(chunk, &vec![0u8; len as usize]);
        std::fs::write(self.path(chunk), input).expect("replace the chunk file");
        // The node keeps the header and checksums of a chunk it wrote, so a
        // foreground read never parses the replaced file's header; a scrub
        // reads it from disk (until it is seen equal to the kept one), so
        // scrub reads are what puts the parser in front of the input.
        let scrub = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) };
        if let Ok((data, _)) = self.store.read(chunk, 0, len, scrub) {
            check_read(input, chunk, len, 0, &data);
        }
        if len > 2
            && let Ok((data, _)) = self.store.read(chunk, len / 3, len / 2, scrub)
        {
            check_read(input, chunk, len, (len / 3) as usize, &data);
        }
        let _ = self.store.delete(chunk, None);
        // What a heartbeat would report; drained so it does not pile up.
        let _ = self.store.take_corrupt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_files_read_back_and_a_flipped_data_byte_is_refused() {
        let mut t = ChunkFile::new();
        let seeds = t.seeds();
        for seed in &seeds {
            t.run(seed);
        }
        let mut damaged = seeds[5].clone();
        let last = damaged.len() - 5000;
        damaged[last] ^= 1;
        t.run(&damaged);
        let chunk = ChunkRef { block: BlockId(1_000_005), copy: 2 };
        let whole = read_format(&seeds[5], chunk).unwrap();
        assert_eq!((whole.data.len(), whole.segment_ok.clone()), (150_000, vec![true; 3]));
        let r = read_format(&damaged, chunk).unwrap();
        assert_eq!(r.segment_ok, vec![true, true, false]);
        assert!(r.intact(0, 131_072) && !r.intact(0, 131_073));
    }
}
