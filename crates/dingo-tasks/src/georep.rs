//! Georeplication's remote site: a second DINGO cluster the copies go to,
//! and the durable record of the files already copied there and verified,
//! so a restarted job copies nothing twice.
//!
//! The record is an append-only file of JSON lines in the job's state
//! directory, one line per verified copy, synced to disk before the copy
//! counts as done. A crash can tear only the last line; it is dropped on
//! reopening (that file is then found identical on the remote, recorded
//! again and not rewritten).

use crate::pick::FilePick;
use dingo_auth::{AuthError, AuthSection};
use dingo_client::{Client, ClientError};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a georeplication job copies, and where: each chosen local file to
/// the same path on the remote site, with the same redundancy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeorepConfig {
    /// The remote site's metadata service address.
    pub remote_meta: String,
    /// How to reach the remote site: its own cluster secret (and its
    /// certificate authority if it serves TLS); the two sites share nothing.
    pub remote_auth: AuthSection,
    /// Local files whose path starts with this are copied.
    pub prefix: String,
    /// Directory of the job's progress file (created if missing); a
    /// restarted job given the same directory skips what is recorded there.
    pub state_dir: PathBuf,
    pub pick: FilePick,
}

#[derive(Debug, thiserror::Error)]
pub enum GeorepError {
    #[error("the remote site at {addr} is unreachable: {source}")]
    Unreachable {
        addr: String,
        #[source]
        source: ClientError,
    },
    #[error("the remote site's credentials: {0}")]
    RemoteCredentials(#[from] AuthError),
    #[error("georeplication progress file {}: {source}", path.display())]
    Progress {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Name of the progress file in the state directory.
const PROGRESS_FILE: &str = "georep-progress.jsonl";

/// One verified copy on the remote site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Copied {
    /// The remote site's metadata service address.
    pub remote: String,
    pub path: String,
    /// The local file's id: a file replaced under the same path since is
    /// another file, copied again.
    pub file: u64,
    pub bytes: u64,
    pub crc32c: u32,
}

struct LedgerState {
    copied: HashSet<(String, u64)>,
    file: File,
}

/// The durable record of the copies made to one remote site.
pub struct CopyLedger {
    path: PathBuf,
    remote: String,
    state: Mutex<LedgerState>,
}

impl CopyLedger {
    /// Opens (or creates) the progress file in `state_dir`, keeping the
    /// copies recorded for `remote`; other sites' lines are left as they are.
    pub fn open(state_dir: &Path, remote: &str) -> io::Result<CopyLedger> {
        std::fs::create_dir_all(state_dir)?;
        let path = state_dir.join(PROGRESS_FILE);
        let existed = path.exists();
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        if !existed {
            // The new file's directory entry must survive a crash too.
            File::open(state_dir)?.sync_all()?;
        }
        let text = std::fs::read_to_string(&path)?;
        let mut copied = HashSet::new();
        let mut whole = 0;
        for line in text.split_inclusive('\n') {
            match serde_json::from_str::<Copied>(line.trim_end()) {
                Ok(c) => {
                    if c.remote == remote {
                        copied.insert((c.path, c.file));
                    }
                    whole += line.len();
                }
                // A line cut short by a crash while it was appended.
                Err(_) if !line.ends_with('\n') => break,
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", line.trim_end()))),
            }
        }
        if whole < text.len() {
            file.set_len(whole as u64)?;
            file.sync_all()?;
        }
        file.flush()?;
        Ok(CopyLedger { path, remote: remote.to_string(), state: Mutex::new(LedgerState { copied, file }) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the local file `file` at `path` is recorded as copied.
    pub fn contains(&self, path: &str, file: u64) -> bool {
        self.state().copied.contains(&(path.to_string(), file))
    }

    /// Files recorded as copied to this ledger's site.
    pub fn len(&self) -> usize {
        self.state().copied.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one verified copy and syncs it to disk before returning.
    /// The write is small and rare (once per copied file), so it is done
    /// in place rather than on a blocking thread.
    pub fn record(&self, path: &str, file: u64, bytes: u64, crc32c: u32) -> io::Result<()> {
        let entry = Copied { remote: self.remote.clone(), path: path.to_string(), file, bytes, crc32c };
        let mut line = serde_json::to_vec(&entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut state = self.state();
        state.file.write_all(&line)?;
        state.file.sync_data()?;
        state.copied.insert((entry.path, file));
        Ok(())
    }
}

/// The remote site of a georeplication job: its client and the job's
/// progress towards it.
pub struct RemoteSite {
    pub client: Client,
    pub ledger: CopyLedger,
}

impl RemoteSite {
    /// Connects to the remote site named in `config` (checking that it
    /// answers before anything else happens) and opens the job's progress.
    pub async fn connect(config: &GeorepConfig) -> Result<RemoteSite, GeorepError> {
        let addr = config.remote_meta.clone();
        let unreachable = |source| GeorepError::Unreachable { addr: addr.clone(), source };
        let access = config.remote_auth.access()?;
        let client = Client::new(&addr, &access).map_err(unreachable)?;
        client.cluster_status().await.map_err(unreachable)?;
        let ledger = CopyLedger::open(&config.state_dir, &addr)
            .map_err(|source| GeorepError::Progress { path: config.state_dir.join(PROGRESS_FILE), source })?;
        Ok(RemoteSite { client, ledger })
    }

    pub fn addr(&self) -> &str {
        self.client.meta_addr()
    }
}

impl fmt::Debug for RemoteSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSite").field("addr", &self.addr()).field("progress", &self.ledger.path).finish()
    }
}

/// Two handles on the same site and progress file are the same site.
impl PartialEq for RemoteSite {
    fn eq(&self, other: &Self) -> bool {
        self.addr() == other.addr() && self.ledger.path == other.ledger.path
    }
}

impl Eq for RemoteSite {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_copies_survive_reopening_per_remote() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = CopyLedger::open(dir.path(), "a:1").unwrap();
        assert!(ledger.is_empty());
        ledger.record("/x", 7, 100, 42).unwrap();
        ledger.record("/y", 8, 5, 1).unwrap();
        drop(ledger);
        let again = CopyLedger::open(dir.path(), "a:1").unwrap();
        assert!(again.contains("/x", 7) && again.contains("/y", 8));
        assert!(!again.contains("/x", 9), "a replaced file is another file");
        again.record("/z", 9, 1, 1).unwrap();
        assert_eq!(again.len(), 3);
        let other = CopyLedger::open(dir.path(), "b:2").unwrap();
        assert!(other.is_empty(), "copies to another site do not count");
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_appending_goes_on_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = CopyLedger::open(dir.path(), "a:1").unwrap();
        ledger.record("/x", 7, 100, 42).unwrap();
        let path = ledger.path().to_path_buf();
        drop(ledger);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"remote":"a:1","path":"/y","fi"#).unwrap();
        drop(f);
        let ledger = CopyLedger::open(dir.path(), "a:1").unwrap();
        assert_eq!(ledger.len(), 1);
        ledger.record("/y", 8, 5, 1).unwrap();
        drop(ledger);
        let ledger = CopyLedger::open(dir.path(), "a:1").unwrap();
        assert!(ledger.contains("/x", 7) && ledger.contains("/y", 8));
    }

    #[test]
    fn a_damaged_line_inside_the_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(PROGRESS_FILE), "not json\n").unwrap();
        assert_eq!(CopyLedger::open(dir.path(), "a:1").err().unwrap().kind(), io::ErrorKind::InvalidData);
    }
}
