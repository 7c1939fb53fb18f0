//! One disk of a node: a directory holding chunk files, its space accounting,
//! its IO counters and optional HDD emulation.
//!
//! Directory layout:
//! - `DINGO_DISK`: the disk's label, `dingo-disk v1 <uuid>`, written on first
//!   use; the metadata service maps the uuid to a dense [`DiskId`].
//! - `chunks/<block>.<copy>`: sealed chunk files (see [`crate::chunk`]).
//! - `tmp/`: chunks being written; emptied at startup, since an unsealed
//!   chunk was never acknowledged.

use crate::direct::{AlignedBuf, BufPool, DirectFile};
use crate::error::StoreError;
use crate::head::{Head, IoSettings};
use dingo_proto::IoTag;
use dingo_types::{ChunkRef, DiskId, DiskModel};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Instant, SystemTime};

const LABEL: &str = "DINGO_DISK";
const LABEL_PREFIX: &str = "dingo-disk v1 ";
/// Idle read buffers a disk keeps for reuse: a few maximal (16 MiB) reads.
const READ_BUFFERS_IDLE: usize = 64 << 20;
/// `DiskId` value meaning "not registered with the metadata service yet".
const UNREGISTERED: u32 = u32::MAX;

/// Counters of real IO on one disk. Bytes include chunk headers, checksum
/// tables and alignment padding: they are what the device transferred.
#[derive(Default)]
pub struct DiskCounters {
    pub bytes_read: AtomicU64,
    pub read_requests: AtomicU64,
    pub bytes_written: AtomicU64,
    pub write_requests: AtomicU64,
    /// Device busy time: modelled when emulating an HDD, measured otherwise.
    pub head_time_us: AtomicU64,
    pub checksum_errors: AtomicU64,
    /// Read bytes and requests per IO class ([`IoTag::class_index`]).
    pub class_bytes: [AtomicU64; IoTag::CLASSES],
    pub class_requests: [AtomicU64; IoTag::CLASSES],
}

pub struct Disk {
    pub path: PathBuf,
    pub uuid: String,
    id: AtomicU32,
    pub capacity: u64,
    /// Bytes of sealed chunk files.
    used: AtomicU64,
    /// Bytes promised to chunks being written.
    reserved: AtomicU64,
    chunks: AtomicU64,
    pub model: Option<DiskModel>,
    /// The emulated head and its scheduler, when emulating an HDD.
    pub head: Option<Head>,
    direct: AtomicBool,
    pub counters: DiskCounters,
    /// Read and write buffers, recycled.
    pub buffers: Arc<BufPool>,
}

/// A sealed chunk found on a disk when it was opened.
#[derive(Clone, Copy, Debug)]
pub struct ListedChunk {
    pub chunk: ChunkRef,
    pub file_len: u64,
    /// The chunk file's modification time: when it was sealed.
    pub sealed_at: SystemTime,
}

impl Disk {
    /// Opens (formatting on first use) the disk directory at `path` and lists
    /// its sealed chunks.
    pub fn open(
        path: &Path,
        capacity: Option<u64>,
        model: Option<DiskModel>,
    ) -> Result<(Disk, Vec<ListedChunk>), StoreError> {
        let ctx = |what: &str, e: io::Error| StoreError::Disk(format!("disk {}: {what}: {e}", path.display()));
        fs::create_dir_all(path).map_err(|e| ctx("cannot create directory", e))?;
        if !path.is_dir() {
            return Err(StoreError::Disk(format!("disk {}: not a directory", path.display())));
        }
        let chunks_dir = path.join("chunks");
        let tmp_dir = path.join("tmp");
        fs::create_dir_all(&chunks_dir).map_err(|e| ctx("cannot create chunks/", e))?;
        if tmp_dir.exists() {
            fs::remove_dir_all(&tmp_dir).map_err(|e| ctx("cannot clear tmp/", e))?;
        }
        fs::create_dir_all(&tmp_dir).map_err(|e| ctx("cannot create tmp/", e))?;
        let uuid = read_or_write_label(path).map_err(|e| ctx("label", e))?;

        let mut listed = Vec::new();
        let mut used = 0;
        for entry in fs::read_dir(&chunks_dir).map_err(|e| ctx("cannot list chunks/", e))? {
            let entry = entry.map_err(|e| ctx("cannot list chunks/", e))?;
            let name = entry.file_name();
            let Some(chunk) = name.to_str().and_then(parse_chunk_name) else {
                tracing::warn!(disk = %path.display(), file = ?name, "ignoring unexpected file in chunks/");
                continue;
            };
            if let Some(found) = listed_chunk(path, chunk, entry.metadata())? {
                used += found.file_len;
                listed.push(found);
            }
        }

        let probe = tmp_dir.join("direct-io-probe");
        let direct = DirectFile::create_new(&probe).map_err(|e| ctx("cannot write", e))?.is_direct();
        fs::remove_file(&probe).map_err(|e| ctx("cannot remove probe file", e))?;
        if !direct {
            tracing::warn!(disk = %path.display(), "filesystem refuses O_DIRECT; using buffered IO with fadvise(DONTNEED) instead");
        }
        let capacity = match capacity {
            Some(c) => c,
            None => fs_capacity(path).map_err(|e| ctx("statvfs", e))?,
        };
        let disk = Disk {
            path: path.to_path_buf(),
            uuid,
            id: AtomicU32::new(UNREGISTERED),
            capacity,
            used: AtomicU64::new(used),
            reserved: AtomicU64::new(0),
            chunks: AtomicU64::new(listed.len() as u64),
            model,
            head: model.map(|m| Head::new(m, &IoSettings::default())),
            direct: AtomicBool::new(direct),
            counters: DiskCounters::default(),
            buffers: BufPool::new(READ_BUFFERS_IDLE),
        };
        Ok((disk, listed))
    }

    /// Sets how the emulated head schedules requests; call before any IO.
    pub fn configure_io(&mut self, io: &IoSettings) {
        self.head = self.model.map(|m| Head::new(m, io));
    }

    pub fn id(&self) -> Option<DiskId> {
        Some(self.id.load(Relaxed)).filter(|&id| id != UNREGISTERED).map(DiskId)
    }

    pub fn set_id(&self, id: DiskId) {
        self.id.store(id.0, Relaxed);
    }

    pub fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    pub fn chunk_count(&self) -> u64 {
        self.chunks.load(Relaxed)
    }

    /// A cheap health check, run before every heartbeat: the directory
    /// still carries this disk's label (it was not unmounted or swapped)
    /// and takes a new file (it is not read-only or failing writes).
    pub fn probe(&self) -> io::Result<()> {
        let label = fs::read_to_string(self.path.join(LABEL))?;
        if label.trim().strip_prefix(LABEL_PREFIX) != Some(self.uuid.as_str()) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the disk label changed"));
        }
        let probe = self.path.join("tmp").join("health-probe");
        fs::write(&probe, b"ok")?;
        fs::remove_file(&probe)
    }

    pub fn is_direct(&self) -> bool {
        self.direct.load(Relaxed)
    }

    pub fn chunk_path(&self, chunk: ChunkRef) -> PathBuf {
        self.path.join("chunks").join(format!("{}.{}", chunk.block.0, chunk.copy))
    }

    pub fn tmp_path(&self, chunk: ChunkRef) -> PathBuf {
        self.path.join("tmp").join(format!("{}.{}.{}", chunk.block.0, chunk.copy, unique_suffix()))
    }

    /// Reserves room for a chunk file of `bytes`, or says the disk is full.
    pub fn reserve(&self, bytes: u64) -> Result<(), StoreError> {
        let mut cur = self.reserved.load(Relaxed);
        loop {
            if self.used() + cur + bytes > self.capacity {
                return Err(StoreError::DiskFull { disk: self.path.display().to_string(), need: bytes });
            }
            match self.reserved.compare_exchange(cur, cur + bytes, Relaxed, Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Returns a reservation; `sealed_len` of it becomes a sealed chunk.
    pub fn release(&self, reserved: u64, sealed_len: Option<u64>) {
        self.reserved.fetch_sub(reserved, Relaxed);
        if let Some(len) = sealed_len {
            self.used.fetch_add(len, Relaxed);
            self.chunks.fetch_add(1, Relaxed);
        }
    }

    /// Accounts for a removed chunk file of `len` bytes.
    pub fn forget(&self, len: u64) {
        self.used.fetch_sub(len, Relaxed);
        self.chunks.fetch_sub(1, Relaxed);
    }

    /// Reads `buf.len()` bytes at `offset`, counting it as real disk IO for
    /// `tag` and queueing behind the emulated head if any.
    pub fn read_at(&self, file: &DirectFile, buf: &mut AlignedBuf, offset: u64, tag: IoTag) -> io::Result<()> {
        let bytes = buf.len() as u64;
        self.timed(bytes, tag, false, || file.read_exact_at(buf, offset))?;
        let c = &self.counters;
        c.bytes_read.fetch_add(bytes, Relaxed);
        c.read_requests.fetch_add(1, Relaxed);
        c.class_bytes[tag.class_index()].fetch_add(bytes, Relaxed);
        c.class_requests[tag.class_index()].fetch_add(1, Relaxed);
        Ok(())
    }

    /// Writes `buf` at `offset` for `tag`, counting it as real disk IO and
    /// queueing behind the emulated head in `tag`'s class, as reads do: a
    /// maintenance task's write waits like its reads, a client's goes first.
    pub fn write_at(&self, file: &DirectFile, buf: &[u8], offset: u64, tag: IoTag) -> io::Result<()> {
        let bytes = buf.len() as u64;
        self.timed(bytes, tag, true, || file.write_all_at(buf, offset))?;
        self.counters.bytes_written.fetch_add(bytes, Relaxed);
        self.counters.write_requests.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Runs one device request. With an HDD model the request waits for the
    /// head in the order its scheduler picks, occupies it for positioning
    /// plus transfer time, and the caller sees that latency; without one the
    /// measured time is recorded.
    fn timed(&self, bytes: u64, tag: IoTag, write: bool, io: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let Some(head) = &self.head else {
            let started = Instant::now();
            let r = io();
            self.counters.head_time_us.fetch_add(started.elapsed().as_micros() as u64, Relaxed);
            return r;
        };
        let (r, charged_us) = if write { head.serve_write(bytes, tag, io) } else { head.serve(bytes, tag, io) };
        self.counters.head_time_us.fetch_add(charged_us, Relaxed);
        r
    }
}

/// `<block>.<copy>` → chunk.
fn parse_chunk_name(name: &str) -> Option<ChunkRef> {
    let (block, copy) = name.split_once('.')?;
    Some(ChunkRef { block: dingo_types::BlockId(block.parse().ok()?), copy: copy.parse().ok()? })
}

fn read_or_write_label(dir: &Path) -> io::Result<String> {
    let path = dir.join(LABEL);
    match fs::read_to_string(&path) {
        Ok(s) => s
            .trim()
            .strip_prefix(LABEL_PREFIX)
            .filter(|u| u.len() == 32 && u.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a DINGO disk label", path.display()))
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut raw = [0u8; 16];
            fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
            let uuid: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            let tmp = dir.join(format!("{LABEL}.tmp"));
            fs::write(&tmp, format!("{LABEL_PREFIX}{uuid}\n"))?;
            fs::File::open(&tmp)?.sync_all()?;
            fs::rename(&tmp, &path)?;
            fs::File::open(dir)?.sync_all()?;
            Ok(uuid)
        }
        Err(e) => Err(e),
    }
}

/// Size of the filesystem holding `dir`.
fn fs_capacity(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: `statvfs` is a plain C struct of integers, valid all zero.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid out pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_blocks as u64 * st.f_frsize as u64)
}

/// The chunk a disk scan listed as `chunk`, from its file's `stat`:
/// `None` if the file was deleted since it was listed (a move or a
/// deletion racing the scan), as if deleted before the node started. Any
/// other error stops the node rather than list a disk short of chunks it
/// holds, which would have them rebuilt elsewhere.
fn listed_chunk(
    disk: &Path,
    chunk: ChunkRef,
    stat: io::Result<fs::Metadata>,
) -> Result<Option<ListedChunk>, StoreError> {
    let meta = match stat {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::warn!(disk = %disk.display(), %chunk, "chunk file vanished while the disk was scanned");
            return Ok(None);
        }
        Err(e) => {
            return Err(StoreError::Disk(format!("disk {}: cannot stat chunk file of {chunk}: {e}", disk.display())));
        }
    };
    // Without a modification time, the chunk counts as just sealed.
    let sealed_at = meta.modified().unwrap_or_else(|_| SystemTime::now());
    Ok(Some(ListedChunk { chunk, file_len: meta.len(), sealed_at }))
}

/// A unique-enough suffix for temporary file names.
fn unique_suffix() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    u64::from(std::process::id()) << 32 | NEXT.fetch_add(1, Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn label_survives_reopen_and_tmp_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let (d1, listed) = Disk::open(dir.path(), Some(1 << 20), None).unwrap();
        assert!(listed.is_empty());
        fs::write(dir.path().join("tmp/leftover"), b"x").unwrap();
        let (d2, _) = Disk::open(dir.path(), None, None).unwrap();
        assert_eq!(d1.uuid, d2.uuid);
        assert!(!dir.path().join("tmp/leftover").exists());
        assert!(d2.capacity > 0);
    }

    /// Found by a chaos campaign (seed 3329): a chunk file deleted between
    /// the scan's listing and its `stat` stopped the node at startup.
    #[test]
    fn a_chunk_file_deleted_during_the_scan_is_skipped_other_stat_errors_stop_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let chunk = ChunkRef { block: dingo_types::BlockId(4), copy: 1 };
        let gone = io::Error::from(io::ErrorKind::NotFound);
        assert!(listed_chunk(dir.path(), chunk, Err(gone)).unwrap().is_none());
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        let e = listed_chunk(dir.path(), chunk, Err(denied)).unwrap_err().to_string();
        assert!(e.contains("cannot stat chunk file of copy 1 of block 4"), "{e}");
        let found = listed_chunk(dir.path(), chunk, fs::metadata(dir.path())).unwrap();
        assert_eq!(found.map(|f| f.chunk), Some(chunk));
    }

    #[test]
    fn a_bad_label_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(LABEL), "hello").unwrap();
        let e = Disk::open(dir.path(), None, None).err().unwrap().to_string();
        assert!(e.contains("not a DINGO disk label"), "{e}");
    }

    #[test]
    fn a_file_is_not_a_disk() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"x").unwrap();
        assert!(Disk::open(&file, None, None).is_err());
    }

    #[test]
    fn reservations_respect_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let (d, _) = Disk::open(dir.path(), Some(10_000), None).unwrap();
        d.reserve(6_000).unwrap();
        assert!(matches!(d.reserve(6_000), Err(StoreError::DiskFull { .. })));
        d.release(6_000, Some(5_000));
        assert_eq!(d.used(), 5_000);
        d.reserve(5_000).unwrap();
    }

    #[test]
    fn emulated_hdd_queues_requests_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let model = DiskModel { positioning_us: 20_000, transfer_bytes_per_sec: 1_000_000_000 };
        let (d, _) = Disk::open(dir.path(), None, Some(model)).unwrap();
        let f = DirectFile::create_new(&dir.path().join("tmp/x")).unwrap();
        let buf = AlignedBuf::zeroed(4096);
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| d.write_at(&f, &buf, 0, IoTag::Foreground).unwrap());
            }
        });
        // Three queued requests of ≥ 20 ms each cannot finish in under 60 ms.
        assert!(t.elapsed() >= Duration::from_millis(60), "{:?}", t.elapsed());
        assert!(d.counters.head_time_us.load(Relaxed) >= 60_000);
        assert_eq!(d.counters.write_requests.load(Relaxed), 3);
    }
}
