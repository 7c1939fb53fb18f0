//! A file opened with `O_DIRECT` where the filesystem allows it, and the
//! aligned buffers direct IO needs.
//!
//! Invariant: every offset and length passed to [`DirectFile`] is a multiple
//! of [`ALIGN_BYTES`], and every buffer starts at an aligned address.
//! Filesystems that refuse `O_DIRECT` (tmpfs, some overlays) get buffered IO;
//! [`DirectFile::is_direct`] says which, so a benchmark can print it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
#[cfg(target_os = "linux")]
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Alignment of offsets, lengths and buffer addresses for direct IO.
pub const ALIGN_BYTES: usize = 4096;

/// Whether a length and an offset are whole blocks, as direct IO needs.
fn is_aligned(len_bytes: usize, offset_bytes: u64) -> bool {
    len_bytes.is_multiple_of(ALIGN_BYTES) && offset_bytes.is_multiple_of(ALIGN_BYTES as u64)
}

/// A zeroed byte buffer whose first byte is [`ALIGN_BYTES`]-aligned.
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len_bytes: usize,
}

impl AlignedBuf {
    /// `len_bytes`, a multiple of [`ALIGN_BYTES`].
    pub fn zeroed(len_bytes: usize) -> AlignedBuf {
        assert!(is_aligned(len_bytes, 0), "direct IO lengths are whole blocks");
        // One spare block lets the slice start at the first aligned address
        // inside the allocation: no unsafe allocator calls.
        let storage = vec![0u8; len_bytes + ALIGN_BYTES];
        let start = storage.as_ptr().align_offset(ALIGN_BYTES);
        AlignedBuf { storage, start, len_bytes }
    }

    /// The first `len_bytes` bytes (a multiple of [`ALIGN_BYTES`]), growing
    /// the buffer if it is shorter.
    pub fn prefix_mut(&mut self, len_bytes: usize) -> &mut [u8] {
        if len_bytes > self.len_bytes {
            *self = AlignedBuf::zeroed(len_bytes);
        }
        &mut self.storage[self.start..self.start + len_bytes]
    }
}

/// A file doing direct IO where the filesystem allows it.
pub struct DirectFile {
    file: File,
    direct: bool,
}

impl DirectFile {
    /// Creates (or truncates) `path` for reading and writing.
    pub fn create(path: &Path) -> io::Result<DirectFile> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(true);
        #[cfg(target_os = "linux")]
        {
            match options.clone().custom_flags(libc::O_DIRECT).open(path) {
                Ok(file) => return Ok(DirectFile { file, direct: true }),
                // EINVAL: the filesystem refuses O_DIRECT; fall back below.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(DirectFile { file: options.open(path)?, direct: false })
    }

    /// Whether IO really bypasses the page cache (`O_DIRECT`).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    pub fn write_at(&self, bytes: &[u8], offset_bytes: u64) -> io::Result<()> {
        debug_assert!(is_aligned(bytes.len(), offset_bytes));
        self.file.write_all_at(bytes, offset_bytes)
    }

    /// Fills `bytes` from `offset_bytes`; a range past the end of the file
    /// (never written) reads as zeros.
    pub fn read_at(&self, bytes: &mut [u8], offset_bytes: u64) -> io::Result<()> {
        debug_assert!(is_aligned(bytes.len(), offset_bytes));
        let mut done = 0;
        while done < bytes.len() {
            match self.file.read_at(&mut bytes[done..], offset_bytes + done as u64) {
                Ok(0) => {
                    bytes[done..].fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_read_back_and_unwritten_ranges_are_zero() {
        let dir = tempfile::tempdir().unwrap();
        let file = DirectFile::create(&dir.path().join("f")).unwrap();
        let mut buf = AlignedBuf::zeroed(ALIGN_BYTES);
        buf.prefix_mut(ALIGN_BYTES).fill(7);
        file.write_at(buf.prefix_mut(ALIGN_BYTES), ALIGN_BYTES as u64).unwrap();
        let mut back = AlignedBuf::zeroed(2 * ALIGN_BYTES);
        file.read_at(back.prefix_mut(2 * ALIGN_BYTES), 0).unwrap();
        let back = back.prefix_mut(2 * ALIGN_BYTES);
        assert!(back[..ALIGN_BYTES].iter().all(|&b| b == 0));
        assert!(back[ALIGN_BYTES..].iter().all(|&b| b == 7));
        file.read_at(&mut AlignedBuf::zeroed(ALIGN_BYTES).prefix_mut(ALIGN_BYTES)[..], 9 * ALIGN_BYTES as u64).unwrap();
    }
}
