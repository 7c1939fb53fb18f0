//! The real engine's flash: a [`PageStore`] that keeps every page an engine
//! writes in one file, with payloads, and verifies every page it reads
//! back. The engines are the simulator's own (see [`crate::page`]); the
//! device models still count what the NAND writes, so write amplification
//! stays theirs. Only this module and its children do file IO.
//!
//! File layout: device page `p` lives in the slot at `p * SLOT_BYTES`. A
//! slot is two 4 KiB blocks because a page's image is its objects (up to
//! [`PAGE_BYTES`] of payload, as the engine packs them) plus a 12-byte
//! header and 12 bytes per object; a LOC segment is one image over its
//! slots. Image: `crc32c u32 | image bytes u32 | objects u32`, then per
//! object `key u64 | size u32 | payload`, little-endian; the crc covers
//! everything after itself. A torn, stale, rotted or never-written slot
//! fails the crc, the length or the payload check and reads as a miss.

mod bench;
mod direct;

pub use bench::{
    CrossCheck, OpTiming, RealBenchReport, RealConfig, RealCrossChecks, RealRun, RealSystem, real_bench_config,
    real_markdown, run_real_bench, run_real_cross_checks,
};

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::device::PAGE_BYTES;
use crate::object::Object;
use crate::page::{PageStore, fill_payload, payload_matches};
use direct::{AlignedBuf, DirectFile};

/// Bytes of file per device page.
pub const SLOT_BYTES: u64 = 2 * PAGE_BYTES;
const HEADER_BYTES: usize = 12;
const RECORD_HEADER_BYTES: usize = 12;

/// What the page file did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileStats {
    /// Device pages written (each a slot).
    pub pages_written: u64,
    pub write_bytes: u64,
    /// Flash hits read back (each one or more slots).
    pub reads: u64,
    pub read_bytes: u64,
    /// Reads whose key, size and payload checked out.
    pub verified: u64,
    /// Reads with a bad crc, length, size or payload: turned into misses.
    pub corrupt: u64,
    /// Intact images without the key asked for: turned into misses.
    pub missing: u64,
    /// Pages whose image did not fit a slot (more than ~340 objects): an
    /// empty image was written instead, so their objects read as misses.
    pub oversized_pages: u64,
    /// Reads or writes the OS failed (the first error is kept).
    pub io_errors: u64,
}

/// Why the real engine's file failed.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    #[error("creating the page file {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{op} of {pages} pages at page {page}: {source}")]
    Io {
        op: &'static str,
        page: u64,
        pages: u64,
        #[source]
        source: io::Error,
    },
}

/// Device pages in a file, verified on every read.
pub struct FilePages {
    file: DirectFile,
    buf: AlignedBuf,
    stats: FileStats,
    /// The first IO error; engines cannot return one mid-operation, so the
    /// caller collects it with [`FilePages::take_error`].
    error: Option<RealError>,
}

impl FilePages {
    /// A new, empty page file at `path` (truncated if it exists).
    pub fn create(path: &Path) -> Result<FilePages, RealError> {
        let file = DirectFile::create(path).map_err(|source| RealError::Create { path: path.to_owned(), source })?;
        Ok(FilePages { file, buf: AlignedBuf::zeroed(SLOT_BYTES as usize), stats: FileStats::default(), error: None })
    }

    /// Whether the file bypasses the page cache.
    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
    }

    pub fn stats(&self) -> FileStats {
        self.stats
    }

    /// The first IO error since the last call, if any.
    pub fn take_error(&mut self) -> Option<RealError> {
        self.error.take()
    }

    fn fail(&mut self, op: &'static str, page: u64, pages: u64, source: io::Error) {
        self.stats.io_errors += 1;
        self.error.get_or_insert(RealError::Io { op, page, pages, source });
    }

    /// Writes `images.len()` images from `first_page`, each `slots` slots long.
    fn write_images(&mut self, first_page: u64, slots: u64, images: &[&[Object]]) {
        let image_bytes = (slots * SLOT_BYTES) as usize;
        let buf = self.buf.prefix_mut(image_bytes * images.len());
        for (objects, out) in images.iter().zip(buf.chunks_mut(image_bytes)) {
            if !encode(objects, out) {
                self.stats.oversized_pages += slots;
                encode(&[], out);
            }
        }
        let pages = slots * images.len() as u64;
        match self.file.write_at(buf, first_page * SLOT_BYTES) {
            Ok(()) => {
                self.stats.pages_written += pages;
                self.stats.write_bytes += pages * SLOT_BYTES;
            }
            Err(e) => self.fail("write", first_page, pages, e),
        }
    }
}

impl PageStore for FilePages {
    fn stores_pages(&self) -> bool {
        true
    }

    fn write_pages(&mut self, first_page: u64, pages: &[Vec<Object>]) {
        let images: Vec<&[Object]> = pages.iter().map(Vec::as_slice).collect();
        self.write_images(first_page, 1, &images);
    }

    fn write_extent(&mut self, first_page: u64, pages: u64, objects: &[Object]) {
        self.write_images(first_page, pages, &[objects]);
    }

    fn read_verified(&mut self, first_page: u64, pages: u64, key: u64, size_bytes: u32) -> bool {
        let len_bytes = (pages * SLOT_BYTES) as usize;
        let buf = self.buf.prefix_mut(len_bytes);
        if let Err(e) = self.file.read_at(buf, first_page * SLOT_BYTES) {
            self.fail("read", first_page, pages, e);
            return false;
        }
        self.stats.reads += 1;
        self.stats.read_bytes += len_bytes as u64;
        match find(buf, key) {
            Found::Object(payload) if payload.len() == size_bytes as usize && payload_matches(key, payload) => {
                self.stats.verified += 1;
                true
            }
            Found::Absent => {
                self.stats.missing += 1;
                false
            }
            Found::Object(_) | Found::Corrupt => {
                self.stats.corrupt += 1;
                false
            }
        }
    }
}

/// Serialises `objects` with their payloads into `out`; false if they do
/// not fit. Bytes past the image are left as they are (the length says
/// where it ends).
fn encode(objects: &[Object], out: &mut [u8]) -> bool {
    let image_bytes = HEADER_BYTES + objects.iter().map(|o| RECORD_HEADER_BYTES + o.size_bytes as usize).sum::<usize>();
    if image_bytes > out.len() {
        return false;
    }
    out[4..8].copy_from_slice(&(image_bytes as u32).to_le_bytes());
    out[8..12].copy_from_slice(&(objects.len() as u32).to_le_bytes());
    let mut at = HEADER_BYTES;
    for o in objects {
        out[at..at + 8].copy_from_slice(&o.key.to_le_bytes());
        out[at + 8..at + 12].copy_from_slice(&o.size_bytes.to_le_bytes());
        at += RECORD_HEADER_BYTES;
        fill_payload(o.key, &mut out[at..at + o.size_bytes as usize]);
        at += o.size_bytes as usize;
    }
    let crc = crc32c::crc32c(&out[4..image_bytes]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    true
}

/// What an image says about a key.
enum Found<'a> {
    /// The payload stored under the key (its length is the stored size).
    Object(&'a [u8]),
    /// The image is intact and does not hold the key.
    Absent,
    /// Bad crc or length, or records that run past the image.
    Corrupt,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Looks `key` up in the image at the start of `slots`.
fn find(slots: &[u8], key: u64) -> Found<'_> {
    let image_bytes = u32_at(slots, 4) as usize;
    if !(HEADER_BYTES..=slots.len()).contains(&image_bytes)
        || crc32c::crc32c(&slots[4..image_bytes]) != u32_at(slots, 0)
    {
        return Found::Corrupt;
    }
    let image = &slots[..image_bytes];
    let mut at = HEADER_BYTES;
    for _ in 0..u32_at(image, 8) {
        if at + RECORD_HEADER_BYTES > image.len() {
            return Found::Corrupt;
        }
        let record_key = u64::from_le_bytes(image[at..at + 8].try_into().expect("eight bytes"));
        let size = u32_at(image, at + 8) as usize;
        at += RECORD_HEADER_BYTES;
        if at + size > image.len() {
            return Found::Corrupt;
        }
        if record_key == key {
            return Found::Object(&image[at..at + size]);
        }
        at += size;
    }
    Found::Absent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> Vec<Object> {
        vec![Object { key: 1, size_bytes: 300 }, Object { key: 2, size_bytes: 4000 }]
    }

    #[test]
    fn images_round_trip_and_reject_any_flipped_byte() {
        let mut slot = vec![0u8; SLOT_BYTES as usize];
        assert!(encode(&objects(), &mut slot));
        assert!(matches!(find(&slot, 2), Found::Object(p) if p.len() == 4000 && payload_matches(2, p)));
        assert!(matches!(find(&slot, 3), Found::Absent));
        let used = HEADER_BYTES + 2 * RECORD_HEADER_BYTES + 4300;
        for at in [0, 5, 9, 13, 30, used - 1] {
            let mut bad = slot.clone();
            bad[at] ^= 0x10;
            assert!(matches!(find(&bad, 2), Found::Corrupt), "byte {at}");
        }
        assert!(matches!(find(&vec![0u8; SLOT_BYTES as usize], 2), Found::Corrupt), "a never-written slot");
    }

    #[test]
    fn an_image_too_large_for_its_slots_is_refused() {
        let many: Vec<Object> = (0..400).map(|key| Object { key, size_bytes: 10 }).collect();
        assert!(!encode(&many, &mut vec![0u8; SLOT_BYTES as usize]));
        assert!(encode(&many, &mut vec![0u8; 2 * SLOT_BYTES as usize]));
    }

    #[test]
    fn the_file_verifies_what_it_stored() {
        let dir = tempfile::tempdir().unwrap();
        let mut pages = FilePages::create(&dir.path().join("pages")).unwrap();
        pages.write_pages(3, &[objects(), vec![Object { key: 5, size_bytes: 1 }]]);
        pages.write_extent(10, 2, &[Object { key: 9, size_bytes: 9000 }]);
        assert!(pages.read_verified(3, 1, 1, 300));
        assert!(pages.read_verified(4, 1, 5, 1));
        assert!(pages.read_verified(10, 2, 9, 9000));
        assert!(!pages.read_verified(3, 1, 1, 301), "a different size is not the object asked for");
        assert!(!pages.read_verified(4, 1, 1, 300));
        assert!(!pages.read_verified(7, 1, 1, 300), "never written");
        let s = pages.stats();
        assert_eq!((s.pages_written, s.reads, s.verified, s.corrupt, s.missing), (4, 6, 3, 2, 1));
        assert!(pages.take_error().is_none());
    }
}
