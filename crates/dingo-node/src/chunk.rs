//! The chunk file format.
//!
//! ```text
//! offset 0        header, 4096 bytes (little endian):
//!                   0..8   magic "DINGOCK1"
//!                   8..12  segment size (65536)
//!                   12..20 block id      20..24 copy
//!                   24..32 data length   32..36 crc32c of the checksum table
//!                   36..40 crc32c of header bytes 0..36; the rest is zero
//! offset 4096     checksum table: crc32c of each data segment, u32 LE,
//!                 zero-padded to a multiple of 4096
//! data_offset     data, zero-padded to a multiple of 4096
//! ```
//!
//! Every boundary is 4096-aligned so that all IO can be direct. A chunk is
//! written into `tmp/`, then header, fsync, and a hard link into `chunks/`: a file
//! in `chunks/` is always complete and immutable. Every read verifies the
//! crc32c of each segment it touches.

use crate::direct::{ALIGN, AlignedBuf, DirectFile, PooledBuf, align_up};
use crate::disk::Disk;
use crate::error::{StoreError, chunk_io};
use dingo_proto::IoTag;
use dingo_types::{BlockId, ChunkRef};
use std::fs;
use std::path::PathBuf;

/// Bytes covered by one checksum; also the block cache's page size.
pub const SEGMENT: u64 = 64 * 1024;
const HEADER: u64 = ALIGN as u64;
const MAGIC: &[u8; 8] = b"DINGOCK1";
/// Bytes buffered before each direct write.
pub const WRITE_BUF: usize = 1 << 20;

/// Largest data length a chunk may have: far above any block (the largest
/// unit a client writes is one erasure-coded stripe member), and small
/// enough that every offset computed from it fits in a `u64` and its
/// checksum table in memory. Lengths come from the network and from files
/// on disk, so they are checked against it before any arithmetic.
pub const MAX_DATA_LEN: u64 = 1 << 40;

/// Where things are in a chunk file holding `data_len` bytes.
/// Invariant: `data_len <= MAX_DATA_LEN` (see [`Layout::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub data_len: u64,
}

impl Layout {
    /// The layout of a chunk of `data_len` bytes, if it is not too long.
    pub fn new(data_len: u64) -> Option<Layout> {
        (data_len <= MAX_DATA_LEN).then_some(Layout { data_len })
    }

    pub fn segments(self) -> u64 {
        self.data_len.div_ceil(SEGMENT)
    }

    pub fn data_offset(self) -> u64 {
        HEADER + align_up(self.segments() * 4)
    }

    pub fn file_len(self) -> u64 {
        self.data_offset() + align_up(self.data_len)
    }

    /// Data bytes in segment `s`.
    pub fn segment_len(self, s: u64) -> u64 {
        SEGMENT.min(self.data_len - s * SEGMENT)
    }
}

/// What a read needs to know about a sealed chunk: its layout and checksums.
#[derive(Debug, PartialEq, Eq)]
pub struct ChunkMeta {
    pub layout: Layout,
    pub crcs: Vec<u32>,
}

fn encode_header(chunk: ChunkRef, layout: Layout, table_crc: u32) -> AlignedBuf {
    let mut h = AlignedBuf::zeroed(HEADER as usize);
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&(SEGMENT as u32).to_le_bytes());
    h[12..20].copy_from_slice(&chunk.block.0.to_le_bytes());
    h[20..24].copy_from_slice(&u32::from(chunk.copy).to_le_bytes());
    h[24..32].copy_from_slice(&layout.data_len.to_le_bytes());
    h[32..36].copy_from_slice(&table_crc.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..36]);
    h[36..40].copy_from_slice(&crc.to_le_bytes());
    h
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

/// What a chunk file's header says.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    chunk: ChunkRef,
    layout: Layout,
    table_crc: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum HeaderError {
    #[error("bad header magic or checksum")]
    Checksum,
    #[error("header is {0} bytes, shorter than {HEADER}")]
    Short(usize),
    #[error("header has segment size {0}, not {SEGMENT}")]
    SegmentSize(u32),
    #[error("header has copy number {0}, above 255")]
    Copy(u32),
    #[error("header has data length {0}, above the limit of {MAX_DATA_LEN}")]
    TooLong(u64),
}

/// Decodes a header read from disk. Pure, and total on any input: the bytes
/// on disk are untrusted (a crc32c is no defence against a crafted file), so
/// every field is checked before it is used.
fn decode_header(h: &[u8]) -> Result<Header, HeaderError> {
    if h.len() < 40 {
        return Err(HeaderError::Short(h.len()));
    }
    if &h[0..8] != MAGIC || le_u32(&h[36..40]) != crc32c::crc32c(&h[0..36]) {
        return Err(HeaderError::Checksum);
    }
    let segment = le_u32(&h[8..12]);
    if u64::from(segment) != SEGMENT {
        return Err(HeaderError::SegmentSize(segment));
    }
    let copy = le_u32(&h[20..24]);
    let copy = u8::try_from(copy).map_err(|_| HeaderError::Copy(copy))?;
    let data_len = le_u64(&h[24..32]);
    let layout = Layout::new(data_len).ok_or(HeaderError::TooLong(data_len))?;
    Ok(Header { chunk: ChunkRef { block: BlockId(le_u64(&h[12..20])), copy }, layout, table_crc: le_u32(&h[32..36]) })
}

/// Reads and checks the header and checksum table of the chunk file at
/// `path`, which must hold `chunk` and be as long as its header says.
/// `tag` is the class of the read that needs them.
pub fn load_meta(disk: &Disk, chunk: ChunkRef, path: &std::path::Path, tag: IoTag) -> Result<ChunkMeta, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt { chunk, detail };
    let io = chunk_io(chunk, path);
    let file = DirectFile::open(path).map_err(&io)?;
    // The file as it is now: it may have been truncated since it was listed.
    let file_len = file.file_len().map_err(&io)?;
    if file_len < HEADER {
        return Err(corrupt(format!("file is {file_len} bytes, shorter than its header")));
    }
    let mut h = AlignedBuf::zeroed(HEADER as usize);
    disk.read_at(&file, &mut h, 0, tag).map_err(&io)?;
    let header = checked_header(disk, chunk, &h)?;
    let layout = header.layout;
    if layout.file_len() != file_len {
        return Err(corrupt(format!("file is {file_len} bytes, header implies {}", layout.file_len())));
    }
    let mut table = AlignedBuf::zeroed((layout.data_offset() - HEADER) as usize);
    if !table.is_empty() {
        disk.read_at(&file, &mut table, HEADER, tag).map_err(&io)?;
    }
    checked_table(disk, chunk, &header, &table)
}

/// The header in `h`, if it is sound and names `chunk`.
fn checked_header(disk: &Disk, chunk: ChunkRef, h: &[u8]) -> Result<Header, StoreError> {
    let header = decode_header(h).map_err(|e| {
        if matches!(e, HeaderError::Checksum) {
            disk.counters.checksum_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        StoreError::Corrupt { chunk, detail: e.to_string() }
    })?;
    if header.chunk != chunk {
        return Err(StoreError::Corrupt { chunk, detail: format!("header names {}", header.chunk) });
    }
    Ok(header)
}

/// The chunk's metadata from its header and the checksum table in
/// `table` (padding included), if the table matches its checksum.
fn checked_table(disk: &Disk, chunk: ChunkRef, header: &Header, table: &[u8]) -> Result<ChunkMeta, StoreError> {
    let table = &table[..header.layout.segments() as usize * 4];
    if crc32c::crc32c(table) != header.table_crc {
        disk.counters.checksum_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let detail = "checksum table does not match its checksum".into();
        return Err(StoreError::Corrupt { chunk, detail });
    }
    Ok(ChunkMeta { layout: header.layout, crcs: table.chunks_exact(4).map(le_u32).collect() })
}

/// What a read of data segments starting at segment 0 does with the
/// chunk's header and checksum table on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderCheck {
    /// Not read: the request starts at the data.
    Skip,
    /// Read in the same request; damage to them, or a difference from the
    /// ones kept, fails the read (integrity checks).
    Require,
    /// Read in the same request and reported ([`Segments::header`]); the
    /// data, checked against the table kept, is returned either way.
    Observe,
}

/// What [`read_segments`] found of the header and table on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderSeen {
    NotRead,
    /// Sound and equal to the ones kept.
    Sound,
    /// Damaged, or not the ones kept (only under [`HeaderCheck::Observe`]).
    Damaged(String),
}

/// Data segments read by [`read_segments`], and what the same request saw
/// of the header.
pub struct Segments {
    pub data: bytes::Bytes,
    pub header: HeaderSeen,
}

/// Reads data segments `first..end` of a chunk from disk and verifies each
/// against its checksum. Returns the data, one buffer for the whole run.
///
/// Unless `header` is [`HeaderCheck::Skip`] (it may not be but from
/// segment 0), the same request starts at the file's start and the header
/// and checksum table on disk are checked against the ones in `meta`: a
/// pass over the chunk checks them for the price of their transfer, with
/// no positioning of its own.
#[allow(clippy::too_many_arguments)] // the read's whole context, each a different thing
pub fn read_segments(
    disk: &Disk,
    chunk: ChunkRef,
    path: &std::path::Path,
    meta: &ChunkMeta,
    first: u64,
    end: u64,
    tag: IoTag,
    header: HeaderCheck,
) -> Result<Segments, StoreError> {
    let check_header = header != HeaderCheck::Skip;
    assert!(!check_header || first == 0, "the header is checked from segment 0 only");
    let layout = meta.layout;
    let start = first * SEGMENT;
    let data_end = (end * SEGMENT).min(layout.data_len);
    // Where the data starts in the buffer.
    let data_at = if check_header { layout.data_offset() as usize } else { 0 };
    let io = chunk_io(chunk, path);
    let file = DirectFile::open(path).map_err(&io)?;
    let mut buf = disk.buffers.take(data_at + (align_up(data_end) - start) as usize);
    let file_at = if check_header { 0 } else { layout.data_offset() + start };
    disk.read_at(&file, &mut buf, file_at, tag).map_err(&io)?;
    let seen = if check_header {
        let on_disk = checked_header(disk, chunk, &buf[..HEADER as usize])
            .and_then(|h| checked_table(disk, chunk, &h, &buf[HEADER as usize..data_at]))
            .and_then(|on_disk| match on_disk == *meta {
                true => Ok(()),
                false => Err(StoreError::Corrupt {
                    chunk,
                    detail: "header and checksum table differ from the ones kept".into(),
                }),
            });
        match (on_disk, header) {
            (Ok(()), _) => HeaderSeen::Sound,
            (Err(e), HeaderCheck::Observe) => HeaderSeen::Damaged(e.to_string()),
            (Err(e), _) => return Err(e),
        }
    } else {
        HeaderSeen::NotRead
    };
    for s in first..end {
        let off = data_at + ((s - first) * SEGMENT) as usize;
        let seg = &buf[off..off + layout.segment_len(s) as usize];
        if crc32c::crc32c(seg) != meta.crcs[s as usize] {
            disk.counters.checksum_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(StoreError::Corrupt { chunk, detail: format!("checksum mismatch in segment {s}") });
        }
    }
    Ok(Segments { data: buf.into_bytes(data_at + (data_end - start) as usize).slice(data_at..), header: seen })
}

/// A chunk being written. Dropping it without [`ChunkWriter::seal`] removes
/// the partial file and returns the space reservation.
pub struct ChunkWriter<'d> {
    disk: &'d Disk,
    chunk: ChunkRef,
    layout: Layout,
    file: Option<DirectFile>,
    tmp: PathBuf,
    buf: PooledBuf,
    buf_fill: usize,
    /// Data bytes received so far.
    received: u64,
    /// File offset where `buf` goes.
    file_off: u64,
    crcs: Vec<u32>,
    seg_crc: u32,
    /// Whom the chunk is written for: every disk write queues in its class.
    tag: IoTag,
}

impl<'d> ChunkWriter<'d> {
    /// Starts writing `chunk` of exactly `data_len` bytes for `tag`,
    /// reserving its space on the disk.
    pub fn create(disk: &'d Disk, chunk: ChunkRef, data_len: u64, tag: IoTag) -> Result<Self, StoreError> {
        let layout = Layout::new(data_len).ok_or_else(|| {
            StoreError::Invalid(format!("{chunk}: {data_len} bytes is above the chunk limit of {MAX_DATA_LEN}"))
        })?;
        disk.reserve(layout.file_len())?;
        let tmp = disk.tmp_path(chunk);
        let file = match DirectFile::create_new(&tmp) {
            Ok(f) => f,
            Err(e) => {
                disk.release(layout.file_len(), None);
                return Err(StoreError::io(tmp.display())(e));
            }
        };
        Ok(ChunkWriter {
            disk,
            chunk,
            layout,
            file: Some(file),
            tmp,
            buf: disk.buffers.take(WRITE_BUF),
            buf_fill: 0,
            received: 0,
            file_off: layout.data_offset(),
            crcs: Vec::with_capacity(layout.segments() as usize),
            seg_crc: 0,
            tag,
        })
    }

    pub fn received(&self) -> u64 {
        self.received
    }

    /// Appends data; fails if it would exceed the declared length.
    pub fn append(&mut self, mut data: &[u8]) -> Result<(), StoreError> {
        if self.received + data.len() as u64 > self.layout.data_len {
            return Err(StoreError::Invalid(format!(
                "{}: more than the declared {} bytes sent",
                self.chunk, self.layout.data_len
            )));
        }
        while !data.is_empty() {
            // Never let one copy straddle a segment boundary, so that the
            // running crc can be closed exactly at each boundary.
            let seg_room = (SEGMENT - self.received % SEGMENT) as usize;
            let n = data.len().min(seg_room).min(WRITE_BUF - self.buf_fill);
            let (piece, rest) = data.split_at(n);
            self.buf[self.buf_fill..self.buf_fill + n].copy_from_slice(piece);
            self.seg_crc = crc32c::crc32c_append(self.seg_crc, piece);
            self.buf_fill += n;
            self.received += n as u64;
            data = rest;
            if self.received.is_multiple_of(SEGMENT) {
                self.crcs.push(std::mem::take(&mut self.seg_crc));
            }
            if self.buf_fill == WRITE_BUF {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let len = align_up(self.buf_fill as u64) as usize;
        // The tail of a final partial buffer must be zero padding.
        self.buf[self.buf_fill..len].fill(0);
        let file = self.file.as_ref().expect("file open until sealed");
        self.disk
            .write_at(file, &self.buf[..len], self.file_off, self.tag)
            .map_err(StoreError::io(self.tmp.display()))?;
        self.file_off += len as u64;
        self.buf_fill = 0;
        Ok(())
    }

    /// Writes the checksum table and header, makes the file durable and
    /// moves it into `chunks/`. Returns the file length.
    pub fn seal(self) -> Result<u64, StoreError> {
        Ok(self.seal_with_meta()?.0)
    }

    /// [`ChunkWriter::seal`], also returning the layout and checksums
    /// written, so that the chunk's first read need not read them back.
    pub fn seal_with_meta(mut self) -> Result<(u64, ChunkMeta), StoreError> {
        if self.received != self.layout.data_len {
            return Err(StoreError::Invalid(format!(
                "{}: sealed after {} of {} declared bytes",
                self.chunk, self.received, self.layout.data_len
            )));
        }
        if !self.received.is_multiple_of(SEGMENT) {
            self.crcs.push(self.seg_crc);
        }
        if self.buf_fill > 0 {
            self.flush()?;
        }
        let file = self.file.take().expect("file open until sealed");
        let err = StoreError::io(self.tmp.display());
        let mut table = AlignedBuf::zeroed((self.layout.data_offset() - HEADER) as usize);
        for (i, crc) in self.crcs.iter().enumerate() {
            table[i * 4..i * 4 + 4].copy_from_slice(&crc.to_le_bytes());
        }
        let table_crc = crc32c::crc32c(&table[..self.crcs.len() * 4]);
        if !table.is_empty() {
            self.disk.write_at(&file, &table, HEADER, self.tag).map_err(StoreError::io(self.tmp.display()))?;
        }
        let header = encode_header(self.chunk, self.layout, table_crc);
        self.disk.write_at(&file, &header, 0, self.tag).map_err(StoreError::io(self.tmp.display()))?;
        file.sync().map_err(err)?;
        drop(file);
        let dest = self.disk.chunk_path(self.chunk);
        // A hard link, unlike rename, fails if the destination exists: a
        // sealed chunk is never replaced.
        match fs::hard_link(&self.tmp, &dest) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(StoreError::Exists(self.chunk)),
            other => other.map_err(StoreError::io(dest.display()))?,
        }
        // A leftover temporary name is harmless: tmp/ is emptied at startup.
        let _ = fs::remove_file(&self.tmp);
        let dir = dest.parent().expect("chunks/ dir");
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(StoreError::io(dir.display()))?;
        let len = self.layout.file_len();
        self.disk.release(len, Some(len));
        self.tmp = PathBuf::new();
        Ok((len, ChunkMeta { layout: self.layout, crcs: std::mem::take(&mut self.crcs) }))
    }
}

impl Drop for ChunkWriter<'_> {
    fn drop(&mut self) {
        // Sealing clears `tmp`; anything else is an abandoned write.
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
            self.disk.release(self.layout.file_len(), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn write(disk: &Disk, chunk: ChunkRef, data: &[u8], piece: usize) -> u64 {
        let mut w = ChunkWriter::create(disk, chunk, data.len() as u64, IoTag::Foreground).unwrap();
        for p in data.chunks(piece.max(1)) {
            w.append(p).unwrap();
        }
        w.seal().unwrap()
    }

    fn read_all(disk: &Disk, chunk: ChunkRef) -> Result<Vec<u8>, StoreError> {
        let path = disk.chunk_path(chunk);
        let meta = load_meta(disk, chunk, &path, IoTag::Foreground)?;
        let segs = meta.layout.segments();
        Ok(read_segments(disk, chunk, &path, &meta, 0, segs, IoTag::Foreground, HeaderCheck::Skip)?.data.to_vec())
    }

    fn chunk(b: u64) -> ChunkRef {
        ChunkRef { block: BlockId(b), copy: 1 }
    }

    #[test]
    fn round_trips_odd_sizes_and_piece_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), None, None).unwrap();
        for (i, (n, piece)) in [(0, 1), (1, 1), (4095, 1000), (65536, 65536), (65537, 3000), (3 << 20 | 17, 1 << 20)]
            .into_iter()
            .enumerate()
        {
            let data = pattern(n);
            let len = write(&disk, chunk(i as u64), &data, piece);
            assert_eq!(len, Layout { data_len: n as u64 }.file_len());
            assert_eq!(read_all(&disk, chunk(i as u64)).unwrap(), data, "size {n}");
        }
        assert_eq!(disk.chunk_count(), 6);
    }

    #[test]
    fn a_flipped_byte_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), None, None).unwrap();
        let data = pattern(200_000);
        write(&disk, chunk(1), &data, 70_000);
        let path = disk.chunk_path(chunk(1));
        let layout = Layout { data_len: data.len() as u64 };
        let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(layout.data_offset() + 150_000)).unwrap();
        f.write_all(&[data[150_000] ^ 0x40]).unwrap();
        f.sync_all().unwrap();
        let e = read_all(&disk, chunk(1)).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("segment 2"), "{e}");
        assert_eq!(disk.counters.checksum_errors.load(std::sync::atomic::Ordering::Relaxed), 1);
        // Segments before the damage still verify.
        let meta = load_meta(&disk, chunk(1), &path, IoTag::Foreground).unwrap();
        let ok = read_segments(&disk, chunk(1), &path, &meta, 0, 2, IoTag::Foreground, HeaderCheck::Skip).unwrap();
        assert_eq!(&ok.data[..], &data[..2 * SEGMENT as usize]);
    }

    #[test]
    fn a_read_from_the_start_checks_the_header_in_its_own_request() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), None, None).unwrap();
        let data = pattern(200_000);
        write(&disk, chunk(1), &data, 70_000);
        let path = disk.chunk_path(chunk(1));
        let meta = load_meta(&disk, chunk(1), &path, IoTag::Foreground).unwrap();
        let read = |check| read_segments(&disk, chunk(1), &path, &meta, 0, 2, IoTag::Foreground, check);
        let requests =
            || disk.counters.class_requests[IoTag::Foreground.class_index()].load(std::sync::atomic::Ordering::Relaxed);
        let before = requests();
        for (check, seen) in [
            (HeaderCheck::Skip, HeaderSeen::NotRead),
            (HeaderCheck::Observe, HeaderSeen::Sound),
            (HeaderCheck::Require, HeaderSeen::Sound),
        ] {
            let got = read(check).unwrap();
            assert_eq!((&got.data[..], got.header), (&data[..2 * SEGMENT as usize], seen), "{check:?}");
        }
        assert_eq!(requests() - before, 3, "one request each");
        // The header's block id, damaged: observed and reported with the
        // (sound) data, or the read fails.
        let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(13)).unwrap();
        f.write_all(&[0xee]).unwrap();
        f.sync_all().unwrap();
        let got = read(HeaderCheck::Observe).unwrap();
        assert_eq!(&got.data[..], &data[..2 * SEGMENT as usize]);
        assert!(matches!(&got.header, HeaderSeen::Damaged(d) if d.contains("checksum")), "{:?}", got.header);
        assert!(matches!(read(HeaderCheck::Require), Err(StoreError::Corrupt { .. })));
        assert_eq!(read(HeaderCheck::Skip).unwrap().header, HeaderSeen::NotRead);
    }

    #[test]
    fn header_damage_and_truncation_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), None, None).unwrap();
        write(&disk, chunk(1), &pattern(10_000), 10_000);
        write(&disk, chunk(2), &pattern(10_000), 10_000);
        let p1 = disk.chunk_path(chunk(1));
        let mut f = fs::OpenOptions::new().write(true).open(&p1).unwrap();
        f.seek(SeekFrom::Start(25)).unwrap();
        f.write_all(&[0xff]).unwrap();
        assert!(read_all(&disk, chunk(1)).unwrap_err().to_string().contains("header"));
        let p2 = disk.chunk_path(chunk(2));
        let f = fs::OpenOptions::new().write(true).open(&p2).unwrap();
        f.set_len(8192).unwrap();
        assert!(read_all(&disk, chunk(2)).unwrap_err().to_string().contains("header implies"));
    }

    #[test]
    fn unsealed_writes_leave_nothing_and_lengths_are_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), Some(1 << 20), None).unwrap();
        {
            let mut w = ChunkWriter::create(&disk, chunk(1), 100, IoTag::Foreground).unwrap();
            w.append(&[1; 50]).unwrap();
            assert!(w.append(&[1; 51]).is_err());
        }
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
        assert!(!disk.chunk_path(chunk(1)).exists());
        let mut w = ChunkWriter::create(&disk, chunk(1), 100, IoTag::Foreground).unwrap();
        w.append(&[1; 99]).unwrap();
        assert!(w.seal().unwrap_err().to_string().contains("99 of 100"));
        // All reservations were returned: the whole capacity is usable again.
        assert!(ChunkWriter::create(&disk, chunk(2), (1 << 20) - 3 * 4096, IoTag::Foreground).is_ok());
        assert!(matches!(
            ChunkWriter::create(&disk, chunk(3), 2 << 20, IoTag::Foreground),
            Err(StoreError::DiskFull { .. })
        ));
    }

    #[test]
    fn a_chunk_longer_than_the_limit_is_refused_before_any_arithmetic() {
        let dir = tempfile::tempdir().unwrap();
        let (disk, _) = Disk::open(dir.path(), None, None).unwrap();
        // u64::MAX used to overflow the layout (a panic in debug builds, an
        // abort on a huge allocation in release): a node crashed by one
        // write request.
        for len in [u64::MAX, MAX_DATA_LEN + 1] {
            let e = ChunkWriter::create(&disk, chunk(1), len, IoTag::Foreground).err().expect("refused");
            assert!(matches!(e, StoreError::Invalid(_)), "{e}");
        }
    }

    /// A header whose checksum is right but whose fields are arbitrary,
    /// as a crafted or bit-rotted file could hold.
    fn crafted_header(fields: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; HEADER as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..36].copy_from_slice(&fields[..28]);
        let crc = crc32c::crc32c(&h[0..36]);
        h[36..40].copy_from_slice(&crc.to_le_bytes());
        h
    }

    #[test]
    fn headers_round_trip() {
        let c = ChunkRef { block: BlockId(u64::MAX), copy: 255 };
        for data_len in [0, 1, SEGMENT, MAX_DATA_LEN] {
            let layout = Layout::new(data_len).unwrap();
            let h = encode_header(c, layout, 0xdead_beef);
            assert_eq!(decode_header(&h), Ok(Header { chunk: c, layout, table_crc: 0xdead_beef }));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_header_decodes_to_a_valid_layout_or_an_error(
            fields in proptest::collection::vec(proptest::prelude::any::<u8>(), 28),
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            use_crafted in proptest::prelude::any::<bool>(),
            right_segment in proptest::prelude::any::<bool>(),
            copy in 0u32..300,
            data_len in proptest::prop_oneof![0..=MAX_DATA_LEN + 8, proptest::prelude::any::<u64>()],
        ) {
            let h = if use_crafted {
                // Mostly well-formed fields, so that the accepting path is
                // exercised too, not only the first check's refusal.
                let mut fields = fields;
                if right_segment {
                    fields[0..4].copy_from_slice(&(SEGMENT as u32).to_le_bytes());
                }
                fields[12..16].copy_from_slice(&copy.to_le_bytes());
                fields[16..24].copy_from_slice(&data_len.to_le_bytes());
                crafted_header(&fields)
            } else {
                bytes
            };
            match decode_header(&h) {
                Ok(header) => {
                    // Every figure derived from an accepted header is in range.
                    let l = header.layout;
                    proptest::prop_assert!(l.data_len <= MAX_DATA_LEN && copy <= 255);
                    proptest::prop_assert!(l.data_offset() <= l.file_len());
                    proptest::prop_assert_eq!(
                        decode_header(&encode_header(header.chunk, l, header.table_crc)),
                        Ok(header)
                    );
                }
                Err(HeaderError::TooLong(n)) => proptest::prop_assert!(n > MAX_DATA_LEN),
                Err(HeaderError::Copy(c)) => proptest::prop_assert!(c > 255),
                Err(_) => {}
            }
        }
    }
}
