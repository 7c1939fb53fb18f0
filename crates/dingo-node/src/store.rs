//! A node's chunks across its disks: the in-memory index, reads through the
//! block cache, writes, deletes and the IO accounting behind `NodeStats`.
//!
//! All methods block on disk IO; async callers wrap them in
//! `block_in_place`.

use crate::cache::BlockCache;
use crate::chunk::{self, ChunkMeta, ChunkWriter, HeaderCheck, HeaderSeen, SEGMENT};
use crate::disk::{Disk, ListedChunk};
use crate::error::StoreError;
use crate::flash::{FlashSettings, NodeFlash};
use crate::head::IoSettings;
use crate::single_flight::SingleFlight;
use bytes::{Bytes, BytesMut};
use dingo_daemon::now_ms;
use dingo_iosched::PolicyKind;
use dingo_proto::IoTag;
use dingo_types::{ChunkRef, DiskId, DiskModel, TaskKind};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::SystemTime;

/// Where one sealed chunk lives. Its header and checksum table are kept in
/// memory, since sealed chunks never change: from the write for chunks this
/// node wrote, else read on first access.
struct Stored {
    disk: usize,
    file_len: u64,
    sealed_at: SystemTime,
    meta: OnceLock<Arc<ChunkMeta>>,
    /// Whether the header and table on disk were read and found equal to
    /// the ones kept. Kept from the write they were not: integrity checks
    /// (`checks_device_header`) read them from disk until they are, as a
    /// first read did before they were kept. After that, they check them
    /// again with each pass over the chunk that reads its first segment
    /// from disk (`chunk::HeaderCheck`), as do reads that fill the cache
    /// from there.
    meta_checked: AtomicBool,
}

impl Stored {
    fn new(disk: usize, file_len: u64, sealed_at: SystemTime, written: Option<ChunkMeta>) -> Stored {
        let meta_checked = AtomicBool::new(written.is_none());
        let meta = written.map(|m| OnceLock::from(Arc::new(m))).unwrap_or_default();
        Stored { disk, file_len, sealed_at, meta, meta_checked }
    }
}

/// Whether reads of class `tag` check what the device holds (scrubbing,
/// file scrubbing, fsck): they read a chunk's header and checksum table
/// from disk rather than trust the copy kept from the write, until the two
/// have been seen equal. (Only scrubbing also bypasses the general cache
/// region, `cache::verifies_device`: the others' data is checked against
/// the checksums either way.)
fn checks_device_header(tag: IoTag) -> bool {
    matches!(tag, IoTag::Maintenance { task: TaskKind::Scrubbing | TaskKind::FileScrubbing | TaskKind::Fsck, .. })
}

/// Settings of one disk.
#[derive(Clone, Debug)]
pub struct DiskSpec {
    pub path: PathBuf,
    /// Bytes the node may store there; default: the filesystem's size.
    pub capacity: Option<u64>,
    /// Emulate an HDD with this service-time model.
    pub hdd: Option<DiskModel>,
    /// How the emulated head schedules requests.
    pub io: IoSettings,
}

pub struct Store {
    pub disks: Vec<Disk>,
    index: RwLock<HashMap<ChunkRef, Arc<Stored>>>,
    pub cache: BlockCache,
    /// Bytes read per planner declaration (maintenance IO only).
    declarations: Mutex<HashMap<u64, u64>>,
    /// Chunks found corrupt by reads, not yet reported to the metadata
    /// service.
    corrupt: Mutex<Vec<(Option<DiskId>, ChunkRef)>>,
    /// Chunks being read from disk into the cache, one reader at a time
    /// (see [`SingleFlight`]).
    filling: SingleFlight<ChunkRef>,
    /// Orphan chunks deleted (see [`Store::delete_orphan`]).
    pub orphans_deleted: AtomicU64,
}

impl Store {
    /// Opens every disk. A chunk found on two disks is kept on the first and
    /// reported, since the metadata service knows only one location.
    pub fn open(disks: &[DiskSpec], cache_general: u64, cache_pinned: u64) -> Result<Store, StoreError> {
        Self::open_with_flash(disks, cache_general, cache_pinned, None)
    }

    /// [`Store::open`] with a flash tier under the DRAM cache.
    pub fn open_with_flash(
        disks: &[DiskSpec],
        cache_general: u64,
        cache_pinned: u64,
        flash: Option<&FlashSettings>,
    ) -> Result<Store, StoreError> {
        if disks.is_empty() {
            return Err(StoreError::Invalid("a node needs at least one --disk".into()));
        }
        let mut opened = Vec::new();
        let mut index = HashMap::new();
        for (i, spec) in disks.iter().enumerate() {
            let (mut disk, chunks) = Disk::open(&spec.path, spec.capacity, spec.hdd)?;
            disk.configure_io(&spec.io);
            for ListedChunk { chunk, file_len, sealed_at } in chunks {
                if index.contains_key(&chunk) {
                    tracing::warn!(%chunk, disk = %spec.path.display(), "duplicate chunk ignored");
                    continue;
                }
                index.insert(chunk, Arc::new(Stored::new(i, file_len, sealed_at, None)));
            }
            if opened.iter().any(|d: &Disk| d.uuid == disk.uuid) {
                return Err(StoreError::Invalid(format!("disk {} is listed twice", spec.path.display())));
            }
            opened.push(disk);
        }
        Ok(Store {
            disks: opened,
            index: RwLock::new(index),
            cache: BlockCache::with_flash(
                cache_general,
                cache_pinned,
                flash.map(|f| NodeFlash::open(f, SEGMENT)).transpose()?,
            ),
            declarations: Mutex::new(HashMap::new()),
            corrupt: Mutex::new(Vec::new()),
            filling: SingleFlight::default(),
            orphans_deleted: AtomicU64::new(0),
        })
    }

    fn disk_index(&self, id: DiskId) -> Result<usize, StoreError> {
        self.disks
            .iter()
            .position(|d| d.id() == Some(id))
            .ok_or_else(|| StoreError::Invalid(format!("{id} is not on this node")))
    }

    /// The congestion signal of the emulated disk holding `chunk`, if it
    /// is here and its disk has a model.
    pub fn congestion_of(&self, chunk: ChunkRef) -> Option<dingo_iosched::congestion::Congestion> {
        let stored = self.lookup(chunk).ok()?;
        Some(self.disks[stored.disk].head.as_ref()?.congestion())
    }

    fn lookup(&self, chunk: ChunkRef) -> Result<Arc<Stored>, StoreError> {
        self.index.read().unwrap_or_else(|p| p.into_inner()).get(&chunk).cloned().ok_or(StoreError::NotFound(chunk))
    }

    /// Writes a whole chunk of `len` bytes on disk `disk` for `tag` (its
    /// writes queue for the head in `tag`'s class), pulling data from
    /// `next` until it returns `None`; the chunk is sealed only if `seal()`
    /// says so after the last piece.
    pub fn write_chunk(
        &self,
        chunk: ChunkRef,
        disk: DiskId,
        len: u64,
        tag: IoTag,
        mut next: impl FnMut() -> Result<Option<Bytes>, StoreError>,
        seal: impl FnOnce() -> bool,
    ) -> Result<u64, StoreError> {
        if self.index.read().unwrap_or_else(|p| p.into_inner()).contains_key(&chunk) {
            return Err(StoreError::Exists(chunk));
        }
        let d = self.disk_index(disk)?;
        let mut w = ChunkWriter::create(&self.disks[d], chunk, len, tag)?;
        while let Some(piece) = next()? {
            w.append(&piece)?;
        }
        if !seal() {
            return Err(StoreError::Invalid(format!(
                "{chunk}: stream ended after {} bytes without seal; nothing kept",
                w.received()
            )));
        }
        // Sealing refuses to replace an existing chunk file, so two racing
        // writers of one chunk cannot both win.
        let (file_len, meta) = w.seal_with_meta()?;
        // The checksums just written need no disk read before the first
        // read of the chunk (that read cost two positionings of the head).
        let stored = Arc::new(Stored::new(d, file_len, SystemTime::now(), Some(meta)));
        self.index.write().unwrap_or_else(|p| p.into_inner()).insert(chunk, stored);
        Ok(file_len)
    }

    /// Reads `len` bytes at `offset` of a chunk's data, from the cache where
    /// possible, verifying checksums of everything read from disk. Returns
    /// the data and whether the cache served all of it.
    pub fn read(&self, chunk: ChunkRef, offset: u64, len: u64, tag: IoTag) -> Result<(Bytes, bool), StoreError> {
        let stored = self.lookup(chunk)?;
        self.read_stored(chunk, &stored, offset, len, tag).inspect_err(|e| {
            if !matches!(e, StoreError::Corrupt { .. } | StoreError::Missing { .. }) {
                return;
            }
            tracing::error!("{e}");
            if matches!(e, StoreError::Missing { .. }) {
                // The file is gone: forget the copy, and the space it held.
                let _ = self.remove_if(chunk, |s| std::ptr::eq(s, &*stored));
            }
            self.note_corrupt(&stored, chunk);
        })
    }

    /// Records a chunk found corrupt or missing, for [`Store::take_corrupt`].
    fn note_corrupt(&self, stored: &Stored, chunk: ChunkRef) {
        let mut corrupt = self.corrupt.lock().unwrap_or_else(|p| p.into_inner());
        let found = (self.disks[stored.disk].id(), chunk);
        if !corrupt.contains(&found) {
            corrupt.push(found);
        }
    }

    /// Of the chunks the metadata service places on `disk`, records those
    /// this node does not hold there as missing (for
    /// [`Store::take_corrupt`]); returns how many.
    pub fn note_missing_on(&self, disk: DiskId, placed: impl IntoIterator<Item = ChunkRef>) -> usize {
        let Ok(d) = self.disk_index(disk) else { return 0 };
        let missing: Vec<ChunkRef> = {
            let index = self.index.read().unwrap_or_else(|p| p.into_inner());
            placed.into_iter().filter(|c| index.get(c).is_none_or(|s| s.disk != d)).collect()
        };
        let mut corrupt = self.corrupt.lock().unwrap_or_else(|p| p.into_inner());
        let known: HashSet<(Option<DiskId>, ChunkRef)> = corrupt.iter().copied().collect();
        corrupt.extend(missing.iter().map(|&c| (Some(disk), c)).filter(|found| !known.contains(found)));
        missing.len()
    }

    /// Corrupt or missing chunks found since the last call, with their disks.
    pub fn take_corrupt(&self) -> Vec<(Option<DiskId>, ChunkRef)> {
        std::mem::take(&mut *self.corrupt.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn read_stored(
        &self,
        chunk: ChunkRef,
        stored: &Stored,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, bool), StoreError> {
        let disk = &self.disks[stored.disk];
        let path = disk.chunk_path(chunk);
        // Whether the header and table were taken from memory, unchecked.
        let mut kept_meta = false;
        let meta = match stored.meta.get() {
            Some(m) if stored.meta_checked.load(Relaxed) || !checks_device_header(tag) => {
                kept_meta = true;
                m.clone()
            }
            Some(m) => {
                // An integrity check reads the header and table on disk:
                // what it checks is what the device holds, not what this
                // node wrote (a damaged header fails its own checksum here).
                let on_disk = Arc::new(chunk::load_meta(disk, chunk, &path, tag)?);
                if on_disk == *m {
                    stored.meta_checked.store(true, Relaxed);
                }
                on_disk
            }
            None => {
                let m = Arc::new(chunk::load_meta(disk, chunk, &path, tag)?);
                stored.meta.get_or_init(|| m).clone()
            }
        };
        let data_len = meta.layout.data_len;
        let end = offset.checked_add(len).filter(|&e| e <= data_len);
        let Some(end) = end else {
            return Err(StoreError::OutOfRange { chunk, offset, len, data_len });
        };
        if len == 0 {
            return Ok((Bytes::new(), true));
        }
        let (first, last) = (offset / SEGMENT, end.div_ceil(SEGMENT));
        let now = now_ms();
        let lookup = || (first..last).map(|s| self.cache.get((chunk, s), tag, now)).collect::<Vec<Option<Bytes>>>();
        let mut pages = lookup();
        // Under a class-ordering scheduler a foreground read does not wait
        // for a maintenance read filling the same chunk (that read waits
        // behind all foreground, so the foreground read would wait as long
        // as any maintenance read): it reads for itself. Under FIFO, the
        // fill queued first, so waiting for it is never slower.
        let rank = u8::from(matches!(tag, IoTag::Foreground));
        let skip_lower = disk.head.as_ref().is_some_and(|h| h.scheduler == PolicyKind::Classful);
        let fills = pages.iter().any(Option::is_none) && self.cache.wants(chunk, tag, now);
        let filling = if fills { self.filling.enter_ranked(chunk, rank, skip_lower) } else { None };
        // A disk read from the chunk's start reads the header and table in
        // the same request (no positioning of its own) when the header was
        // taken from memory and either this is an integrity check (each
        // pass checks what the device holds now) or the first page will be
        // cached: a scrub served from the cache then checked the header as
        // of the read that filled it, as it checked the data.
        let header_check = |caches: bool| {
            if !kept_meta || first != 0 {
                HeaderCheck::Skip
            } else if checks_device_header(tag) {
                HeaderCheck::Require
            } else if caches {
                HeaderCheck::Observe
            } else {
                HeaderCheck::Skip
            }
        };
        if fills && filling.is_none() {
            // Skipped the fill: one disk read of the range, cached by the filler.
            let read = chunk::read_segments(disk, chunk, &path, &meta, first, last, tag, header_check(false))?;
            let skip = (offset - first * SEGMENT) as usize;
            return Ok((read.data.slice(skip..skip + len as usize), false));
        }
        if filling.is_some() {
            // Whoever filled before us may have filled the pages.
            pages = lookup();
        }
        let all_hit = pages.iter().all(Option::is_some);
        // Read each maximal run of missing pages with one disk request.
        let mut s = first;
        while s < last {
            if pages[(s - first) as usize].is_some() {
                s += 1;
                continue;
            }
            let run_end = (s..last).find(|&e| pages[(e - first) as usize].is_some()).unwrap_or(last);
            // For a run from the range's start: whether its pages will be
            // kept, asked once for the header check and the buffer hand-out.
            let first_run_cached = s == first && self.cache.wants(chunk, tag, now);
            let check = if s == first { header_check(first_run_cached) } else { HeaderCheck::Skip };
            let read = chunk::read_segments(disk, chunk, &path, &meta, s, run_end, tag, check)?;
            // The first page is cached only with its header found sound on
            // disk by this read (or by loading it just now), so a page in
            // the cache never hides damage there from a scrub, even if a
            // pin came after the check was chosen.
            let first_page_checked = !kept_meta || read.header == HeaderSeen::Sound;
            match &read.header {
                HeaderSeen::Sound => stored.meta_checked.store(true, Relaxed),
                HeaderSeen::Damaged(detail) => {
                    // The data is sound (checked against the table kept);
                    // the next integrity check reads the header from disk,
                    // fails and reports the chunk, as this read does now.
                    stored.meta_checked.store(false, Relaxed);
                    tracing::error!("{chunk}: {detail}; the data read is sound");
                    self.note_corrupt(stored, chunk);
                }
                HeaderSeen::NotRead => {}
            }
            let data = read.data;
            if s == first && run_end == last && !first_run_cached {
                // Nothing was cached and nothing will be: hand out the disk
                // buffer itself instead of copying it page by page.
                self.count_declaration(tag, len);
                let skip = (offset - first * SEGMENT) as usize;
                return Ok((data.slice(skip..skip + len as usize), false));
            }
            for p in s..run_end {
                let off = ((p - s) * SEGMENT) as usize;
                let page = data.slice(off..off + meta.layout.segment_len(p) as usize);
                if p != 0 || first_page_checked {
                    self.cache.insert((chunk, p), page.clone(), tag, now);
                }
                pages[(p - first) as usize] = Some(page);
            }
            s = run_end;
        }
        self.count_declaration(tag, len);
        let skip = (offset - first * SEGMENT) as usize;
        Ok((assemble(pages.into_iter().map(|p| p.expect("filled above")).collect(), skip, len as usize), all_hit))
    }

    fn count_declaration(&self, tag: IoTag, len: u64) {
        if let IoTag::Maintenance { declaration, .. } = tag {
            *self.declarations.lock().unwrap_or_else(|p| p.into_inner()).entry(declaration.0).or_default() += len;
        }
    }

    /// Removes a chunk — only if it is on disk `on` when given; returns
    /// whether it was removed.
    pub fn delete(&self, chunk: ChunkRef, on: Option<DiskId>) -> Result<bool, StoreError> {
        self.remove_if(chunk, |s| on.is_none_or(|id| self.disks[s.disk].id() == Some(id)))
    }

    /// Deletes an orphan chunk the metadata service does not know (see
    /// [`Store::sealed_before`]), if it is still the copy on `disk` sealed
    /// before `cutoff`: a copy written since is not the one reported.
    pub fn delete_orphan(&self, chunk: ChunkRef, disk: DiskId, cutoff: SystemTime) -> Result<bool, StoreError> {
        let deleted = self.remove_if(chunk, |s| self.disks[s.disk].id() == Some(disk) && s.sealed_at < cutoff)?;
        if deleted {
            self.orphans_deleted.fetch_add(1, Relaxed);
        }
        Ok(deleted)
    }

    fn remove_if(&self, chunk: ChunkRef, condition: impl Fn(&Stored) -> bool) -> Result<bool, StoreError> {
        let stored = {
            let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
            if !index.get(&chunk).is_some_and(|s| condition(s)) {
                return Ok(false);
            }
            index.remove(&chunk).expect("present")
        };
        self.cache.remove_chunk(chunk);
        let disk = &self.disks[stored.disk];
        let path = disk.chunk_path(chunk);
        match std::fs::remove_file(&path) {
            // Already gone (removed behind the node's back): nothing to do.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other.map_err(StoreError::io(path.display()))?,
        }
        disk.forget(stored.file_len);
        Ok(true)
    }

    /// Every chunk per disk index, with its file length.
    pub fn inventory(&self) -> Vec<Vec<(ChunkRef, u64)>> {
        let mut out = vec![Vec::new(); self.disks.len()];
        for (chunk, s) in self.index.read().unwrap_or_else(|p| p.into_inner()).iter() {
            out[s.disk].push((*chunk, s.file_len));
        }
        out.iter_mut().for_each(|v| v.sort_unstable());
        out
    }

    /// Chunks sealed before `cutoff`, with their disks (those registered).
    pub fn sealed_before(&self, cutoff: SystemTime) -> Vec<(DiskId, ChunkRef)> {
        let index = self.index.read().unwrap_or_else(|p| p.into_inner());
        index
            .iter()
            .filter(|(_, s)| s.sealed_at < cutoff)
            .filter_map(|(chunk, s)| Some((self.disks[s.disk].id()?, *chunk)))
            .collect()
    }

    /// Bytes read per declaration id, sorted by id.
    pub fn declaration_bytes(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<_> =
            self.declarations.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable();
        v
    }
}

/// The `len` bytes starting `skip` bytes into the concatenation of `pages`,
/// without copying when one page covers them.
fn assemble(pages: Vec<Bytes>, skip: usize, len: usize) -> Bytes {
    if let [one] = pages.as_slice() {
        return one.slice(skip..skip + len);
    }
    let mut out = BytesMut::with_capacity(len);
    let mut skip = skip;
    for p in pages {
        let take = (p.len() - skip).min(len - out.len());
        out.extend_from_slice(&p[skip..skip + take]);
        skip = 0;
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_iosched::{Class, PolicyKind};
    use dingo_types::{BlockId, DeclarationId, TaskKind};
    use std::sync::atomic::Ordering::Relaxed;

    fn open(dir: &std::path::Path, general: u64, pinned: u64) -> Store {
        let specs = vec![DiskSpec { path: dir.join("d0"), capacity: None, hdd: None, io: IoSettings::default() }];
        let store = Store::open(&specs, general, pinned).unwrap();
        store.disks[0].set_id(DiskId(5));
        store
    }

    fn put(store: &Store, chunk: ChunkRef, data: &[u8]) {
        let mut pieces = data.chunks(100_000).map(Bytes::copy_from_slice).collect::<Vec<_>>().into_iter();
        store
            .write_chunk(chunk, DiskId(5), data.len() as u64, IoTag::Foreground, || Ok(pieces.next()), || true)
            .unwrap();
    }

    const C: ChunkRef = ChunkRef { block: BlockId(9), copy: 2 };
    const SCRUB: IoTag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) };

    /// Flips a byte of `C`'s header on disk.
    fn damage_header(store: &Store) {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(store.disks[0].chunk_path(C)).unwrap();
        file.write_all_at(&[0xff], 20).unwrap();
    }

    #[test]
    fn ranged_reads_return_exact_bytes_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        {
            let store = open(dir.path(), 1 << 20, 0);
            put(&store, C, &data);
            for (off, len) in [(0, 300_000), (1, 10), (65_535, 2), (70_000, 200_000), (299_999, 1), (300_000, 0)] {
                let (got, _) = store.read(C, off, len, IoTag::Foreground).unwrap();
                assert_eq!(&got[..], &data[off as usize..(off + len) as usize], "{off}+{len}");
            }
            let e = store.read(C, 299_999, 2, IoTag::Foreground).unwrap_err();
            assert!(matches!(e, StoreError::OutOfRange { .. }), "{e}");
            assert!(matches!(put_again(&store), Err(StoreError::Exists(_))));
        }
        let store = open(dir.path(), 0, 0);
        assert_eq!(store.inventory()[0].len(), 1);
        assert_eq!(&store.read(C, 0, 300_000, IoTag::Foreground).unwrap().0[..], &data[..]);
        assert!(!store.delete(C, Some(DiskId(6))).unwrap(), "not on that disk");
        assert!(store.delete(C, Some(DiskId(5))).unwrap());
        assert!(!store.delete(C, None).unwrap());
        assert!(matches!(store.read(C, 0, 1, IoTag::Foreground), Err(StoreError::NotFound(_))));
        assert_eq!(store.disks[0].used(), 0);
    }

    #[test]
    fn chunk_files_lost_while_running_are_missing_or_corrupt_never_io_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        let data = vec![7u8; 200_000];
        let chunks: Vec<ChunkRef> = (0..4).map(|b| ChunkRef { block: BlockId(b), copy: 0 }).collect();
        for &c in &chunks {
            put(&store, c, &data);
        }
        // Read once so the header and table of chunk 3 are cached: the file
        // is truncated after the node has already looked at it.
        store.read(chunks[3], 0, 10, IoTag::Foreground).unwrap();
        let path = |c| store.disks[0].chunk_path(c);
        std::fs::remove_file(path(chunks[0])).unwrap();
        std::fs::OpenOptions::new().write(true).open(path(chunks[1])).unwrap().set_len(70_000).unwrap();
        std::fs::OpenOptions::new().write(true).open(path(chunks[2])).unwrap().set_len(0).unwrap();
        std::fs::OpenOptions::new().write(true).open(path(chunks[3])).unwrap().set_len(70_000).unwrap();
        let used = store.disks[0].used();
        let e = store.read(chunks[0], 0, 200_000, IoTag::Foreground).unwrap_err();
        assert!(matches!(e, StoreError::Missing { .. }), "deleted: {e}");
        assert_eq!(tonic::Status::from(e).code(), tonic::Code::NotFound);
        for (c, what) in [(chunks[1], "truncated"), (chunks[2], "zero-length"), (chunks[3], "truncated after use")] {
            let e = store.read(c, 0, 200_000, IoTag::Foreground).unwrap_err();
            assert!(matches!(e, StoreError::Corrupt { .. }), "{what}: {e}");
            assert_eq!(tonic::Status::from(e).code(), tonic::Code::DataLoss, "{what}");
        }
        // The vanished copy is forgotten with its space; every bad copy is
        // reported to the metadata service.
        assert!(matches!(store.read(chunks[0], 0, 1, IoTag::Foreground), Err(StoreError::NotFound(_))));
        assert!(store.disks[0].used() < used);
        let mut reported: Vec<ChunkRef> = store.take_corrupt().into_iter().map(|(_, c)| c).collect();
        reported.sort_unstable();
        assert_eq!(reported, chunks);
        // Deleting a copy whose file is gone (the repair's clean-up) works.
        assert!(store.delete(chunks[1], None).unwrap());
        std::fs::remove_file(path(chunks[2])).unwrap();
        assert!(store.delete(chunks[2], None).unwrap());
    }

    #[test]
    fn only_the_reported_copy_of_an_orphan_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let before = SystemTime::now() - std::time::Duration::from_secs(1);
        let store = open(dir.path(), 0, 0);
        put(&store, C, b"orphan");
        let after = SystemTime::now() + std::time::Duration::from_secs(1);
        assert!(store.sealed_before(before).is_empty());
        assert_eq!(store.sealed_before(after), vec![(DiskId(5), C)]);
        // A copy sealed after the cutoff is not the one that was reported.
        assert!(!store.delete_orphan(C, DiskId(5), before).unwrap());
        assert!(!store.delete_orphan(C, DiskId(6), after).unwrap(), "not on that disk");
        assert!(store.delete_orphan(C, DiskId(5), after).unwrap());
        assert_eq!((store.orphans_deleted.load(Relaxed), store.disks[0].used()), (1, 0));
        // Found again at reopen, a chunk's age is its file's.
        put(&store, C, b"again");
        drop(store);
        let store = open(dir.path(), 0, 0);
        assert_eq!(store.sealed_before(SystemTime::now() + std::time::Duration::from_secs(1)).len(), 1);
        assert!(store.sealed_before(before).is_empty());
    }

    /// Latency of a small foreground read issued while six writers tagged
    /// `writes` stream 4 MB chunks (1 MB disk writes of 15 ms each) onto the
    /// same emulated disk, with the best-effort head time charged.
    fn read_behind_writes(scheduler: PolicyKind, writes: IoTag) -> (std::time::Duration, u64) {
        let dir = tempfile::tempdir().unwrap();
        let hdd = DiskModel { positioning_us: 5_000, transfer_bytes_per_sec: 100_000_000 };
        let io = IoSettings { scheduler, segment_bytes: 256 << 10, ..IoSettings::default() };
        let specs = vec![DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: Some(hdd), io }];
        let store = Store::open(&specs, 0, 0).unwrap();
        store.disks[0].set_id(DiskId(5));
        put(&store, C, &[1u8; 4096]);
        // Load the chunk's header now, so the timed read is one request.
        store.read(C, 0, 4096, IoTag::Foreground).unwrap();
        let data = vec![2u8; 4 << 20];
        let latency = std::thread::scope(|s| {
            for b in 0..6 {
                let (store, data) = (&store, &data);
                s.spawn(move || {
                    let chunk = ChunkRef { block: BlockId(100 + b), copy: 0 };
                    let mut pieces = data.chunks(1 << 20).map(Bytes::copy_from_slice).collect::<Vec<_>>().into_iter();
                    store
                        .write_chunk(chunk, DiskId(5), data.len() as u64, writes, || Ok(pieces.next()), || true)
                        .unwrap();
                });
            }
            // Until every writer has a write at the head (each has one at a
            // time: one in service, five queued), rather than a guessed
            // sleep; bounded, so a slow start cannot hang.
            let head = store.disks[0].head.as_ref().unwrap();
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while head.queued() < 5 && std::time::Instant::now() < give_up {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            let started = std::time::Instant::now();
            store.read(C, 0, 4096, IoTag::Foreground).unwrap();
            started.elapsed()
        });
        let head = store.disks[0].head.as_ref().unwrap();
        (latency, head.classes[Class::BestEffort { channel: 0 }.index()].served_us.load(Relaxed))
    }

    #[test]
    fn a_foreground_read_does_not_queue_behind_best_effort_writes_under_classful() {
        let rebalancing = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(3) };
        // About six 15 ms writes were queued ahead of the read; classful
        // serves it after at most a 7.6 ms segment (and a reservation
        // unit or two). Generous bounds for a loaded machine.
        let (classful, charged) = read_behind_writes(PolicyKind::Classful, rebalancing);
        assert!(classful < std::time::Duration::from_millis(50), "classful: {classful:?}");
        // 24 MB of data, each 1 MB write positioning once (header and table
        // writes add a little).
        assert!(charged >= 24 * 15_000, "the writes ran in the best-effort class: {charged} µs");
        let (fifo, _) = read_behind_writes(PolicyKind::Fifo, rebalancing);
        assert!(fifo >= std::time::Duration::from_millis(60), "FIFO: {fifo:?}");
        // Untagged writes (old clients, client puts) stay foreground.
        let (_, charged) = read_behind_writes(PolicyKind::Classful, IoTag::Foreground);
        assert_eq!(charged, 0);
    }

    #[test]
    fn concurrent_readers_of_a_pinned_chunk_share_one_disk_read() {
        let dir = tempfile::tempdir().unwrap();
        // A slow emulated disk, so the two reads overlap in time.
        let hdd = DiskModel { positioning_us: 300_000, transfer_bytes_per_sec: 1_000_000_000 };
        let specs =
            vec![DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: Some(hdd), io: IoSettings::default() }];
        let store = Store::open(&specs, 0, 1 << 20).unwrap();
        store.disks[0].set_id(DiskId(5));
        put(&store, C, &[3u8; 200_000]);
        store.cache.pin(C, now_ms() + 60_000, now_ms());
        let before = store.disks[0].counters.bytes_read.load(Relaxed);
        let tags = [
            IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) },
            IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(2) },
        ];
        std::thread::scope(|s| {
            for tag in tags {
                let store = &store;
                s.spawn(move || assert_eq!(store.read(C, 0, 200_000, tag).unwrap().0.len(), 200_000));
            }
        });
        let read = store.disks[0].counters.bytes_read.load(Relaxed) - before;
        assert!(read < 400_000, "both readers went to the disk: {read} bytes");
        assert!(store.filling.is_empty(), "fill locks are forgotten");
    }

    #[test]
    fn pinned_pages_pushed_out_of_dram_are_served_from_flash_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let specs =
            vec![DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: None, io: IoSettings::default() }];
        let flash = FlashSettings {
            path: dir.path().join("flash.img"),
            zones: 4,
            zone_bytes: 16 * SEGMENT,
            max_active_zones: 4,
            pin_bucket_ms: 1_000,
            write_budget_bytes_per_day: 1 << 40,
        };
        // DRAM's pinned region holds two of the chunk's eight pages.
        let store = Store::open_with_flash(&specs, 0, 2 * SEGMENT, Some(&flash)).unwrap();
        store.disks[0].set_id(DiskId(5));
        let data: Vec<u8> = (0..8 * SEGMENT as usize).map(|i| (i % 251) as u8).collect();
        put(&store, C, &data);
        store.cache.pin(C, now_ms() + 60_000, now_ms());
        let scrub = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) };
        let disk_bytes = || store.disks[0].counters.bytes_read.load(Relaxed);
        assert_eq!(&store.read(C, 0, data.len() as u64, scrub).unwrap().0[..], &data[..]);
        let first_read = disk_bytes();
        store.cache.flush_flash();
        let flash_stats = store.cache.flash_stats().unwrap();
        assert_eq!(flash_stats.tier.pinned_written_bytes, 6 * SEGMENT, "six pages overflowed to flash");
        // A second task reads the pinned chunk: nothing from disk, and
        // scrubbing may use the pinned overflow like the pinned region.
        let rebalance = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(2) };
        for tag in [rebalance, scrub] {
            assert_eq!(&store.read(C, 0, data.len() as u64, tag).unwrap().0[..], &data[..]);
        }
        assert_eq!(disk_bytes(), first_read, "served from DRAM and flash");
        assert!(store.cache.stats().flash_hits >= 6);
        assert_eq!(store.cache.stats().pinned_rereads, 0, "flash saved every re-read");
        // A flipped byte on flash is a checksum miss: the page comes from
        // disk, still correct.
        let file = std::fs::OpenOptions::new().write(true).open(&flash.path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[0xff, 0xff, 0xff], 10).unwrap();
        drop(file);
        let (again, _) = store.read(C, 0, data.len() as u64, rebalance).unwrap();
        assert_eq!(&again[..], &data[..]);
        assert!(disk_bytes() > first_read);
        assert!(store.cache.flash_stats().unwrap().checksum_misses >= 1);
        assert!(store.cache.stats().pinned_rereads >= 1, "the rotted page was read from disk again");
        // Deleting the chunk forgets its flash pages.
        store.cache.remove_chunk(C);
        assert!(store.cache.get((C, 3), rebalance, now_ms()).is_none());
    }

    fn put_again(store: &Store) -> Result<u64, StoreError> {
        store.write_chunk(C, DiskId(5), 1, IoTag::Foreground, || Ok(None), || true)
    }

    #[test]
    fn counters_see_real_disk_reads_and_cache_hits() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 1 << 20, 0);
        put(&store, C, &[7u8; 200_000]);
        let d = &store.disks[0].counters;
        let before = d.bytes_read.load(Relaxed);
        let (_, hit) = store.read(C, 0, 200_000, IoTag::Foreground).unwrap();
        assert!(!hit);
        let disk_bytes = d.bytes_read.load(Relaxed) - before;
        assert!(disk_bytes >= 200_000, "{disk_bytes}");
        let (_, hit) = store.read(C, 0, 200_000, IoTag::Foreground).unwrap();
        assert!(hit);
        assert_eq!(d.bytes_read.load(Relaxed) - before, disk_bytes, "second read served from cache");
        assert_eq!(store.cache.stats().hits, 4);
    }

    #[test]
    fn maintenance_reads_are_tagged_and_bypass_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 1 << 20, 0);
        put(&store, C, &[7u8; 100_000]);
        let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(42) };
        store.read(C, 0, 100_000, tag).unwrap();
        store.read(C, 0, 100_000, tag).unwrap();
        let c = &store.disks[0].counters;
        // Header and checksum table (first read only), then the data twice:
        // the chunk's metadata is read in the class of the read needing it.
        assert_eq!(c.class_requests[tag.class_index()].load(Relaxed), 4);
        assert!(c.class_bytes[tag.class_index()].load(Relaxed) >= 200_000);
        assert_eq!(store.declaration_bytes(), vec![(42, 200_000)]);
        assert_eq!(store.cache.stats().hits, 0);
    }

    #[test]
    fn a_write_without_seal_or_to_an_unknown_disk_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        let mut once = Some(Bytes::from_static(b"abc"));
        let e = store.write_chunk(C, DiskId(5), 3, IoTag::Foreground, || Ok(once.take()), || false).unwrap_err();
        assert!(e.to_string().contains("without seal"), "{e}");
        assert!(
            store
                .write_chunk(C, DiskId(6), 3, IoTag::Foreground, || Ok(None), || true)
                .unwrap_err()
                .to_string()
                .contains("not on this node")
        );
        assert!(store.inventory()[0].is_empty());
        assert_eq!(store.disks[0].used(), 0);
    }

    #[test]
    fn corrupt_chunks_found_by_reads_are_collected_once() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        put(&store, C, &[3u8; 10_000]);
        let f = std::fs::OpenOptions::new().write(true).open(store.disks[0].chunk_path(C)).unwrap();
        f.write_all_at(&[4], chunk::Layout { data_len: 10_000 }.data_offset() + 9).unwrap();
        for _ in 0..2 {
            let e = store.read(C, 0, 100, IoTag::Foreground).unwrap_err();
            assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        }
        assert_eq!(store.take_corrupt(), vec![(Some(DiskId(5)), C)]);
        assert!(store.take_corrupt().is_empty());
    }

    #[test]
    fn chunks_placed_here_but_not_held_are_noted_missing_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        put(&store, C, &[1u8; 1000]);
        let gone = ChunkRef { block: BlockId(10), copy: 0 };
        assert_eq!(store.note_missing_on(DiskId(5), [C, gone]), 1);
        assert_eq!(store.note_missing_on(DiskId(5), [gone]), 1);
        assert_eq!(store.take_corrupt(), vec![(Some(DiskId(5)), gone)], "noted once");
        assert_eq!(store.note_missing_on(DiskId(6), [gone]), 0, "not a disk of this node");
        assert!(store.take_corrupt().is_empty());
    }

    #[test]
    fn a_chunk_written_here_is_read_without_its_header_and_scrubs_check_the_header_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        put(&store, C, &data);
        let requests = |tag: IoTag| store.disks[0].counters.class_requests[tag.class_index()].load(Relaxed);
        let before = requests(IoTag::Foreground);
        assert_eq!(&store.read(C, 0, 200_000, IoTag::Foreground).unwrap().0[..], &data[..]);
        // One data read: the header and checksum table were kept from the
        // write (before: two more requests, each a positioning of the head).
        assert_eq!(requests(IoTag::Foreground) - before, 1, "the first read is one request");
        // Damage the header on disk: reads still verify the data against the
        // checksums kept, but a scrub reads the header and finds it.
        damage_header(&store);
        assert_eq!(&store.read(C, 0, 200_000, IoTag::Foreground).unwrap().0[..], &data[..]);
        let e = store.read(C, 0, 200_000, SCRUB).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
        assert_eq!(store.take_corrupt(), vec![(Some(DiskId(5)), C)]);
    }

    /// Found by the property test (`tests/store_properties.rs`): once a
    /// chunk's header had been seen equal on disk, no scrub checked it
    /// again, so damage to it went unnoticed until a restart made the chunk
    /// unreadable. A pass that reads the first segment from disk now checks
    /// it in the same request.
    #[test]
    fn every_scrub_pass_checks_the_header_on_disk_without_a_request_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 0);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        put(&store, C, &data);
        let requests = || store.disks[0].counters.class_requests[SCRUB.class_index()].load(Relaxed);
        assert_eq!(&store.read(C, 0, 200_000, SCRUB).unwrap().0[..], &data[..], "the first pass");
        let before = requests();
        assert_eq!(&store.read(C, 0, 200_000, SCRUB).unwrap().0[..], &data[..], "the second pass");
        assert_eq!(requests() - before, 1, "the header comes with the data");
        damage_header(&store);
        assert_eq!(&store.read(C, 70_000, 1_000, SCRUB).unwrap().0[..], &data[70_000..71_000], "mid-pass");
        let e = store.read(C, 0, 200_000, SCRUB).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "the next pass finds the damage: {e}");
    }

    /// A scrub served by pinned pages used to trust the header kept in
    /// memory: damage to the header on disk before another reader filled
    /// the pages went unseen, by every pass, for as long as readers kept
    /// the chunk pinned. Now the read that fills the first page checks the
    /// header in its own request, and caches that page only if it is sound.
    #[test]
    fn a_scrub_served_by_cached_pages_finds_header_damage_done_before_they_were_read() {
        let rebalancing = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(2) };
        // A rebalancing read under the pin, or a foreground read into the
        // general region whose pages the pin then adopts.
        for (filler, pin_first) in [(rebalancing, true), (IoTag::Foreground, false)] {
            let dir = tempfile::tempdir().unwrap();
            let store = open(dir.path(), 1 << 20, 1 << 20);
            let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
            put(&store, C, &data);
            assert_eq!(&store.read(C, 0, 200_000, SCRUB).unwrap().0[..], &data[..], "a sound pass");
            damage_header(&store);
            let pin = || store.cache.pin(C, now_ms() + 60_000, now_ms());
            if pin_first {
                pin();
            }
            let (got, _) = store.read(C, 0, 200_000, filler).unwrap();
            assert_eq!(&got[..], &data[..], "{filler:?}: the data is sound");
            assert_eq!(store.take_corrupt(), vec![(Some(DiskId(5)), C)], "{filler:?} reports the header");
            if !pin_first {
                pin();
            }
            let e = store.read(C, 0, 200_000, SCRUB).unwrap_err();
            assert!(matches!(e, StoreError::Corrupt { .. }), "{filler:?}: the pass finds the damage: {e}");
        }
    }

    /// The check rides on the filling read: a scrub served by the pages it
    /// pinned needs no request of its own, even for a chunk whose header no
    /// scrub has read yet.
    #[test]
    fn a_scrub_served_by_pinned_pages_needs_no_request_when_the_fill_checked_the_header() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), 0, 1 << 20);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        put(&store, C, &data);
        store.cache.pin(C, now_ms() + 60_000, now_ms());
        let rebalancing = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(2) };
        let requests = |tag: IoTag| store.disks[0].counters.class_requests[tag.class_index()].load(Relaxed);
        let before = (requests(rebalancing), requests(SCRUB));
        assert_eq!(&store.read(C, 0, 200_000, rebalancing).unwrap().0[..], &data[..]);
        let (got, hit) = store.read(C, 0, 200_000, SCRUB).unwrap();
        assert_eq!((&got[..], hit), (&data[..], true));
        assert_eq!((requests(rebalancing), requests(SCRUB)), (before.0 + 1, before.1), "one request in all");
    }

    /// A foreground read of a pinned chunk `C` that a rebalancing read is
    /// filling, with foreground reads of other chunks before and after it
    /// on a disk of 300 ms requests. Returns its latency and whether the
    /// cache served it.
    fn foreground_read_during_a_fill(scheduler: PolicyKind) -> (std::time::Duration, bool) {
        let dir = tempfile::tempdir().unwrap();
        let hdd = DiskModel { positioning_us: 300_000, transfer_bytes_per_sec: 1_000_000_000 };
        let io = IoSettings { scheduler, ..IoSettings::default() };
        let specs = vec![DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: Some(hdd), io }];
        let store = Store::open(&specs, 0, 1 << 20).unwrap();
        store.disks[0].set_id(DiskId(5));
        let other = |b| ChunkRef { block: BlockId(b), copy: 0 };
        for c in [C, other(1), other(2)] {
            put(&store, c, &[4u8; 100_000]);
        }
        store.cache.pin(C, now_ms() + 60_000, now_ms());
        let rebalancing = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(2) };
        let gap = std::time::Duration::from_millis(50);
        std::thread::scope(|s| {
            let store = &store;
            s.spawn(move || store.read(other(1), 0, 100_000, IoTag::Foreground).unwrap());
            std::thread::sleep(gap);
            s.spawn(move || store.read(C, 0, 100_000, rebalancing).unwrap());
            std::thread::sleep(gap);
            let reader = s.spawn(move || {
                let started = std::time::Instant::now();
                let (_, hit) = store.read(C, 0, 100_000, IoTag::Foreground).unwrap();
                (started.elapsed(), hit)
            });
            std::thread::sleep(gap);
            s.spawn(move || store.read(other(2), 0, 100_000, IoTag::Foreground).unwrap());
            reader.join().unwrap()
        })
    }

    #[test]
    fn a_foreground_read_does_not_wait_for_a_maintenance_fill_under_classful() {
        // Classful: it reads for itself, behind the rest of the first read
        // (200 ms) and its own 300 ms; waiting for the fill it would also
        // wait for the later foreground read (300 ms) and the fill's own.
        let (classful, hit) = foreground_read_during_a_fill(PolicyKind::Classful);
        assert!(!hit, "read from disk, not from the fill");
        assert!(classful < std::time::Duration::from_millis(650), "classful: {classful:?}");
        // FIFO: the fill was queued first, so waiting for it is quickest:
        // the rest of the first read and the fill (500 ms), then a cache hit.
        let (fifo, hit) = foreground_read_during_a_fill(PolicyKind::Fifo);
        assert!(hit, "served by the fill");
        assert!(fifo >= std::time::Duration::from_millis(450), "FIFO: {fifo:?}");
    }
}
