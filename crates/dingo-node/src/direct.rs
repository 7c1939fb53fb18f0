//! Files opened with `O_DIRECT`, so reads and writes go to the device and not
//! the page cache, and the buffers that direct IO needs.
//!
//! Invariant: every offset and length passed to [`DirectFile`] is a multiple
//! of [`ALIGN`], and every buffer starts at an [`ALIGN`]-aligned address.
//! Filesystems that refuse `O_DIRECT` (tmpfs, some overlays) get buffered IO
//! followed by `posix_fadvise(DONTNEED)`, which drops the file's pages so the
//! next read again goes to the device; [`DirectFile::is_direct`] tells which.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// Alignment of offsets, lengths and buffer addresses for direct IO.
pub const ALIGN: usize = 4096;

/// Rounds up to a multiple of [`ALIGN`].
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(ALIGN as u64) * ALIGN as u64
}

/// A byte buffer whose first byte is [`ALIGN`]-aligned and whose length is a
/// multiple of [`ALIGN`]. Zero-filled when new; a recycled one (see
/// [`BufPool`]) holds old bytes past what its next read overwrites.
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    capacity: usize,
}

impl AlignedBuf {
    /// A buffer of `len` bytes rounded up to [`ALIGN`].
    pub fn zeroed(len: usize) -> Self {
        let len = align_up(len as u64) as usize;
        // Over-allocate by one alignment unit and start at the first aligned
        // address inside: safe code, at the cost of 4 KiB per buffer.
        let storage = vec![0u8; len + ALIGN];
        let start = storage.as_ptr().align_offset(ALIGN);
        AlignedBuf { storage, start, len, capacity: len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes the buffer can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets the length to `len` rounded up to [`ALIGN`], at most the capacity.
    pub fn set_len(&mut self, len: usize) {
        let len = align_up(len as u64) as usize;
        assert!(len <= self.capacity, "{len} bytes exceed the buffer's {}", self.capacity);
        self.len = len;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// Recycles [`AlignedBuf`]s, in particular those of reads whose data leaves as [`bytes::Bytes`]
/// (handed to gRPC replies without copying): a buffer returns to the pool
/// when the last `Bytes` referring to it drops, so steady-state reads neither
/// allocate, zero, nor fault in fresh pages. Capacities are powers of two
/// (at least 64 KiB) so buffers fit later requests of similar size; at most
/// `max_idle` bytes wait in the pool, the rest are freed.
pub struct BufPool {
    idle: Mutex<Vec<AlignedBuf>>,
    max_idle: usize,
}

impl BufPool {
    pub fn new(max_idle: usize) -> Arc<BufPool> {
        Arc::new(BufPool { idle: Mutex::new(Vec::new()), max_idle })
    }

    /// A buffer of `len` bytes rounded up to [`ALIGN`].
    pub fn take(self: &Arc<Self>, len: usize) -> PooledBuf {
        let capacity = (align_up(len as u64) as usize).next_power_of_two().max(64 << 10);
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.iter().position(|b| b.capacity() == capacity).map(|i| idle.swap_remove(i))
        };
        let mut buf = reused.unwrap_or_else(|| AlignedBuf::zeroed(capacity));
        buf.set_len(len);
        PooledBuf { buf: Some(buf), pool: Arc::downgrade(self) }
    }

    /// Bytes of the buffers waiting for reuse.
    pub fn idle_bytes(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).iter().map(AlignedBuf::capacity).sum()
    }
}

/// A buffer on loan from a [`BufPool`]; goes back when dropped.
pub struct PooledBuf {
    /// `Some` until dropped.
    buf: Option<AlignedBuf>,
    pool: Weak<BufPool>,
}

impl PooledBuf {
    /// The first `len` bytes as shared bytes, without copying; the buffer
    /// returns to its pool when the last of them drops.
    pub fn into_bytes(self, len: usize) -> bytes::Bytes {
        assert!(len <= self.len());
        bytes::Bytes::from_owner(self).slice(..len)
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = AlignedBuf;
    fn deref(&self) -> &AlignedBuf {
        self.buf.as_ref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut AlignedBuf {
        self.buf.as_mut().expect("present until dropped")
    }
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let (Some(buf), Some(pool)) = (self.buf.take(), self.pool.upgrade()) else { return };
        let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.iter().map(AlignedBuf::capacity).sum::<usize>() + buf.capacity() <= pool.max_idle {
            idle.push(buf);
        }
    }
}

/// A file doing direct IO where the filesystem allows it.
pub struct DirectFile {
    file: File,
    direct: bool,
}

impl DirectFile {
    /// Opens for reading.
    pub fn open(path: &Path) -> io::Result<Self> {
        Self::open_with(path, OpenOptions::new().read(true))
    }

    /// Creates a new file for writing; fails if it exists.
    pub fn create_new(path: &Path) -> io::Result<Self> {
        Self::open_with(path, OpenOptions::new().read(true).write(true).create_new(true))
    }

    fn open_with(path: &Path, opts: &mut OpenOptions) -> io::Result<Self> {
        match opts.clone().custom_flags(libc::O_DIRECT).open(path) {
            Ok(file) => Ok(DirectFile { file, direct: true }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // The filesystem refuses O_DIRECT. `create_new` may already
                // have created the file before failing, so retry as plain open.
                let file = match opts.open(path) {
                    Err(e2) if e2.kind() == io::ErrorKind::AlreadyExists => {
                        OpenOptions::new().read(true).write(true).open(path)?
                    }
                    other => other?,
                };
                Ok(DirectFile { file, direct: false })
            }
            Err(e) => Err(e),
        }
    }

    /// The file's current length.
    pub fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Whether IO really bypasses the page cache (`O_DIRECT`).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_exact_at(&self, buf: &mut AlignedBuf, offset: u64) -> io::Result<()> {
        debug_assert_eq!(offset % ALIGN as u64, 0);
        if !self.direct {
            self.drop_cached(offset, buf.len() as u64);
        }
        self.file.read_exact_at(buf, offset)
    }

    /// Writes all of `buf` at `offset`.
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        debug_assert!(offset.is_multiple_of(ALIGN as u64) && buf.len().is_multiple_of(ALIGN));
        debug_assert_eq!(buf.as_ptr().align_offset(ALIGN), 0);
        self.file.write_all_at(buf, offset)
    }

    /// Makes written data and the file size durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()?;
        if !self.direct {
            self.drop_cached(0, 0);
        }
        Ok(())
    }

    /// Asks the kernel to drop cached pages of the range (0 length: to the
    /// end), so the next read goes to the device. Best effort by nature.
    fn drop_cached(&self, offset: u64, len: u64) {
        // SAFETY: plain syscall on a valid, open file descriptor.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_aligned_and_rounded() {
        for n in [0, 1, 4096, 5000, 1 << 20] {
            let b = AlignedBuf::zeroed(n);
            assert_eq!(b.as_ptr().align_offset(ALIGN), 0);
            assert_eq!(b.len() % ALIGN, 0);
            assert!(b.len() >= n);
        }
    }

    #[test]
    fn writes_and_reads_back_directly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = DirectFile::create_new(&path).unwrap();
        let mut buf = AlignedBuf::zeroed(8192);
        buf.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        f.write_all_at(&buf, 4096).unwrap();
        f.sync().unwrap();
        let r = DirectFile::open(&path).unwrap();
        let mut back = AlignedBuf::zeroed(8192);
        r.read_exact_at(&mut back, 4096).unwrap();
        assert_eq!(&back[..], &buf[..]);
        assert!(DirectFile::create_new(&path).is_err(), "create_new must not clobber");
    }

    #[test]
    fn pooled_buffers_return_when_their_bytes_drop() {
        let pool = BufPool::new(3 << 20);
        let mut b = pool.take(1_000_000);
        assert_eq!((b.len(), b.capacity()), (1_003_520, 1 << 20));
        b[0] = 7;
        let addr = b.as_ptr();
        let bytes = b.into_bytes(10);
        assert_eq!((bytes.len(), bytes[0]), (10, 7));
        let kept = bytes.slice(5..);
        drop(bytes);
        assert_eq!(pool.idle_bytes(), 0, "still referenced");
        drop(kept);
        assert_eq!(pool.idle_bytes(), 1 << 20);
        // The same storage serves the next request of that size class.
        let again = pool.take(600_000);
        assert_eq!((again.as_ptr(), again.len()), (addr, 602_112));
        assert_eq!(pool.idle_bytes(), 0);
        // Beyond `max_idle`, returned buffers are freed.
        let many: Vec<PooledBuf> = (0..4).map(|_| pool.take(1 << 20)).collect();
        drop(many);
        drop(again);
        assert_eq!(pool.idle_bytes(), 3 << 20);
    }
}
