//! Damage to a node's disk behind its back: bytes flipped in, or truncation
//! or deletion of, a chunk file, and a disk directory made unwritable.
//!
//! Flips land only on bytes a checksum covers (the header's first 40 bytes,
//! the checksum table, the data): the zero padding after each part is not
//! checksummed (`docs/STORAGE.md`), so a flip there harms nothing and is
//! not expected to be found.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The chunk file format's alignment and checksum segment (`dingo-node`).
const ALIGN: u64 = 4096;
const SEGMENT: u64 = 64 * 1024;
/// Header bytes covered by the header's crc (and the crc itself).
const HEADER_CHECKED: u64 = 40;

/// Where copy `copy` of `block` lives on the disk at `disk_path`.
pub fn chunk_path(disk_path: &Path, block: u64, copy: u32) -> PathBuf {
    disk_path.join("chunks").join(format!("{block}.{copy}"))
}

/// What to do to one chunk file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// XOR the byte at this file offset with a non-zero mask.
    Flip {
        offset: u64,
        mask: u8,
    },
    /// Cut the file to this many bytes.
    Truncate {
        len: u64,
    },
    Delete,
}

/// Offset of the data in a chunk of `data_len` bytes.
fn data_offset(data_len: u64) -> u64 {
    ALIGN + (data_len.div_ceil(SEGMENT) * 4).div_ceil(ALIGN) * ALIGN
}

/// A random checksummed byte of a chunk of `data_len` bytes: one in ten in
/// the header, one in ten in the checksum table, the rest in the data.
pub fn checked_offset(data_len: u64, rng: &mut fastrand::Rng) -> u64 {
    let table_len = data_len.div_ceil(SEGMENT) * 4;
    match rng.u8(..10) {
        0 => rng.u64(..HEADER_CHECKED),
        1 if table_len > 0 => ALIGN + rng.u64(..table_len),
        _ if data_len > 0 => data_offset(data_len) + rng.u64(..data_len),
        _ => rng.u64(..HEADER_CHECKED),
    }
}

/// A random truncation of a chunk of `data_len` bytes: to a length that
/// cuts into the header, the table or the data.
pub fn truncated_len(data_len: u64, rng: &mut fastrand::Rng) -> u64 {
    rng.u64(..data_offset(data_len) + data_len)
}

/// Applies `damage` to the chunk file at `path` (fsynced).
pub fn apply(path: &Path, damage: Damage) -> io::Result<()> {
    match damage {
        Damage::Flip { offset, mask } => {
            let mut f = fs::OpenOptions::new().read(true).write(true).open(path)?;
            f.seek(SeekFrom::Start(offset))?;
            let mut b = [0u8];
            f.read_exact(&mut b)?;
            f.seek(SeekFrom::Start(offset))?;
            f.write_all(&[b[0] ^ mask.max(1)])?;
            f.sync_all()
        }
        Damage::Truncate { len } => {
            let f = fs::OpenOptions::new().write(true).open(path)?;
            f.set_len(len)?;
            f.sync_all()
        }
        Damage::Delete => fs::remove_file(path),
    }
}

/// `FS_IMMUTABLE_FL` of `<linux/fs.h>` (not in the libc crate).
const FS_IMMUTABLE_FL: libc::c_int = 0x10;

/// Sets or clears the immutable attribute of `dir` (`chattr +i`), which
/// stops even root from creating or removing entries in it.
fn set_immutable(dir: &Path, on: bool) -> io::Result<()> {
    let f = fs::File::open(dir)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int through the pointer, which
    // points to a live local; `fd` is open for the call's duration.
    if unsafe { libc::ioctl(fd, libc::FS_IOC_GETFLAGS, &mut flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    flags = if on { flags | FS_IMMUTABLE_FL } else { flags & !FS_IMMUTABLE_FL };
    // SAFETY: FS_IOC_SETFLAGS reads one int through the pointer.
    if unsafe { libc::ioctl(fd, libc::FS_IOC_SETFLAGS, &flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A disk's `chunks/` and `tmp/` directories made unwritable (mode 0555
/// and, because root ignores modes, the immutable attribute where the
/// filesystem has one); undone by [`Unwritable::restore`] or on drop.
#[derive(Debug)]
pub struct Unwritable {
    dirs: Vec<(PathBuf, u32)>,
}

impl Unwritable {
    /// Makes the disk at `disk_dir` unwritable, and checks that it is: a
    /// file can no longer be created in `tmp/`.
    pub fn make(disk_dir: &Path) -> io::Result<Unwritable> {
        let mut made = Unwritable { dirs: Vec::new() };
        for sub in ["chunks", "tmp"] {
            let dir = disk_dir.join(sub);
            let mode = fs::metadata(&dir)?.permissions().mode();
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o555))?;
            made.dirs.push((dir.clone(), mode));
            // Best effort: without the attribute, modes suffice for non-root.
            let _ = set_immutable(&dir, true);
        }
        let probe = disk_dir.join("tmp").join(".chaos-probe");
        match fs::File::create(&probe) {
            Ok(_) => {
                let _ = fs::remove_file(&probe);
                Err(io::Error::other(format!(
                    "{} stays writable (root without the immutable attribute?)",
                    disk_dir.display()
                )))
            }
            Err(_) => Ok(made),
        }
    }

    /// Makes the directories writable again, as they were.
    pub fn restore(mut self) -> io::Result<()> {
        self.undo()
    }

    fn undo(&mut self) -> io::Result<()> {
        let mut first_error = None;
        for (dir, mode) in self.dirs.drain(..) {
            let _ = set_immutable(&dir, false);
            if let Err(e) = fs::set_permissions(&dir, fs::Permissions::from_mode(mode)) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_and_cuts_land_on_checksummed_bytes() {
        let mut rng = fastrand::Rng::with_seed(3);
        for data_len in [1u64, 4096, 65_536, 65_537, 131_072, 200_000] {
            let table_len = data_len.div_ceil(SEGMENT) * 4;
            let data_at = data_offset(data_len);
            assert_eq!(data_at % ALIGN, 0);
            assert!(data_at >= ALIGN + table_len);
            for _ in 0..2000 {
                let at = checked_offset(data_len, &mut rng);
                let covered = at < HEADER_CHECKED
                    || (ALIGN..ALIGN + table_len).contains(&at)
                    || (data_at..data_at + data_len).contains(&at);
                assert!(covered, "offset {at} of a {data_len}-byte chunk is padding");
                assert!(truncated_len(data_len, &mut rng) < data_at + data_len);
            }
        }
    }

    #[test]
    fn damage_changes_the_file_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = chunk_path(dir.path(), 12, 1);
        assert!(path.ends_with("chunks/12.1"));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, [7u8; 100]).unwrap();
        apply(&path, Damage::Flip { offset: 5, mask: 0x40 }).unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!((bytes[4], bytes[5]), (7, 7 ^ 0x40));
        apply(&path, Damage::Truncate { len: 10 }).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 10);
        apply(&path, Damage::Delete).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn an_unwritable_disk_refuses_new_files_until_restored() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["chunks", "tmp"] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let guard = match Unwritable::make(dir.path()) {
            Ok(g) => g,
            // A filesystem without the attribute, as root: nothing to test.
            Err(e) if e.to_string().contains("stays writable") => return,
            Err(e) => panic!("{e}"),
        };
        assert!(fs::File::create(dir.path().join("chunks/x")).is_err());
        guard.restore().unwrap();
        fs::File::create(dir.path().join("chunks/x")).unwrap();
        fs::File::create(dir.path().join("tmp/x")).unwrap();
    }
}
