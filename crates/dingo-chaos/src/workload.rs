//! The writer/reader workload and its oracle: every write the cluster
//! acknowledged (path, length, crc32c), read back while faults fly and
//! once more at the end.

use bytes::Bytes;
use dingo_client::{Client, IoTag, Redundancy};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Block size of the workload's files: two checksum segments per block.
pub const BLOCK_BYTES: u64 = 128 * 1024;
/// Largest file written, in blocks.
const MAX_FILE_BLOCKS: u64 = 4;
/// Every call of the workload gives up after this long (a stopped process
/// holds a call until it runs again).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Mismatches kept verbatim; later ones are only counted.
const KEEP: usize = 20;

/// A write the cluster acknowledged.
#[derive(Clone, Debug)]
pub struct AckedWrite {
    pub path: String,
    pub len: u64,
    pub crc32c: u32,
}

/// The acknowledged writes so far, shared by the writer, the readers and
/// the fault lanes (which damage their chunks).
#[derive(Clone, Debug, Default)]
pub struct Oracle(Arc<Mutex<Vec<AckedWrite>>>);

impl Oracle {
    pub fn record(&self, w: AckedWrite) {
        self.0.lock().expect("oracle lock").push(w);
    }

    pub fn len(&self) -> usize {
        self.0.lock().expect("oracle lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A random acknowledged write, if any.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Option<AckedWrite> {
        let all = self.0.lock().expect("oracle lock");
        (!all.is_empty()).then(|| all[rng.usize(..all.len())].clone())
    }

    pub fn all(&self) -> Vec<AckedWrite> {
        self.0.lock().expect("oracle lock").clone()
    }
}

/// What the workload did, counted as it runs.
#[derive(Debug, Default)]
pub struct WorkloadCounters {
    pub writes_acked: AtomicU64,
    pub bytes_acked: AtomicU64,
    /// Writes that failed or timed out (never acknowledged: no promise).
    pub writes_failed: AtomicU64,
    pub reads_ok: AtomicU64,
    /// Reads that failed or timed out while faults were in force.
    pub reads_unavailable: AtomicU64,
    pub mismatches: Mutex<Vec<String>>,
    pub mismatch_count: AtomicU64,
}

impl WorkloadCounters {
    fn mismatch(&self, what: String) {
        tracing::error!("{what}");
        self.mismatch_count.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.mismatches.lock().expect("mismatch lock");
        if kept.len() < KEEP {
            kept.push(what);
        }
    }
}

/// The bytes of file number `n` of the campaign seeded `seed`.
pub fn file_data(seed: u64, n: u64, len: u64) -> Bytes {
    let mut rng = fastrand::Rng::with_seed(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut buf = vec![0u8; len as usize];
    rng.fill(&mut buf);
    buf.into()
}

/// Writes files until `stop`: sizes up to four blocks, alternately
/// replicated three ways and Reed-Solomon 2+2, recording each
/// acknowledged one.
pub async fn write_loop(
    client: Client,
    oracle: Oracle,
    counters: Arc<WorkloadCounters>,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5752_4954);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let len = rng.u64(1..=MAX_FILE_BLOCKS * BLOCK_BYTES);
        let redundancy =
            if n.is_multiple_of(2) { Redundancy::Replicated(3) } else { Redundancy::Ec { data: 2, parity: 2 } };
        let data = file_data(seed, n, len);
        let crc = crc32c::crc32c(&data);
        let path = format!("/chaos/f{n:07}");
        match tokio::time::timeout(CALL_TIMEOUT, client.put(&path, redundancy, BLOCK_BYTES, data)).await {
            Ok(Ok(written)) if written == len => {
                counters.writes_acked.fetch_add(1, Ordering::Relaxed);
                counters.bytes_acked.fetch_add(len, Ordering::Relaxed);
                oracle.record(AckedWrite { path, len, crc32c: crc });
            }
            Ok(Ok(written)) => {
                counters.mismatch(format!("put of {path} acknowledged {written} bytes of {len}"));
            }
            Ok(Err(e)) => {
                tracing::debug!("put {path}: {e}");
                counters.writes_failed.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                counters.writes_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(50..250))).await;
    }
}

/// How one read of an acknowledged file went.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadBack {
    Identical,
    /// Bytes came back, but not the acknowledged ones.
    Differs(String),
    /// No bytes: an error or a timeout.
    Unavailable(String),
}

/// Reads `w` whole and compares it with what was acknowledged.
pub async fn read_back(client: &Client, w: &AckedWrite) -> ReadBack {
    match tokio::time::timeout(CALL_TIMEOUT, client.read_all(&w.path, IoTag::Foreground)).await {
        Ok(Ok(data)) => {
            let crc = crc32c::crc32c(&data);
            if data.len() as u64 == w.len && crc == w.crc32c {
                ReadBack::Identical
            } else {
                ReadBack::Differs(format!(
                    "{} read back {} bytes with crc32c {crc:08x}; acknowledged {} bytes with crc32c {:08x}",
                    w.path,
                    data.len(),
                    w.len,
                    w.crc32c
                ))
            }
        }
        Ok(Err(e)) => ReadBack::Unavailable(e.to_string()),
        Err(_) => ReadBack::Unavailable(format!("no answer within {CALL_TIMEOUT:?}")),
    }
}

/// Reads random acknowledged files until `stop`; wrong bytes are recorded
/// (a failed read is only unavailability while faults are in force).
pub async fn read_loop(
    client: Client,
    oracle: Oracle,
    counters: Arc<WorkloadCounters>,
    seed: u64,
    stop: Arc<AtomicBool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5245_4144);
    while !stop.load(Ordering::Relaxed) {
        if let Some(w) = oracle.pick(&mut rng) {
            match read_back(&client, &w).await {
                ReadBack::Identical => {
                    counters.reads_ok.fetch_add(1, Ordering::Relaxed);
                }
                ReadBack::Differs(what) => counters.mismatch(what),
                ReadBack::Unavailable(e) => {
                    tracing::debug!("read {}: {e}", w.path);
                    counters.reads_unavailable.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(20..120))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_data_is_deterministic_and_differs_between_files() {
        assert_eq!(file_data(1, 2, 1000), file_data(1, 2, 1000));
        assert_ne!(file_data(1, 2, 1000), file_data(1, 3, 1000));
        assert_ne!(file_data(1, 2, 1000), file_data(2, 2, 1000));
        assert_eq!(file_data(9, 9, 77).len(), 77);
    }

    #[test]
    fn the_oracle_hands_out_only_recorded_writes() {
        let oracle = Oracle::default();
        let mut rng = fastrand::Rng::with_seed(1);
        assert!(oracle.pick(&mut rng).is_none());
        oracle.record(AckedWrite { path: "/a".into(), len: 3, crc32c: 9 });
        assert_eq!(oracle.pick(&mut rng).unwrap().path, "/a");
        assert_eq!(oracle.len(), 1);
    }
}
