//! The foreground client: reads random whole blocks at a steady rate and
//! records their latency.

use dingo_client::{Client, ClientError, IoTag, Redundancy};
use dingo_tasks::CancelFlag;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latencies of the foreground client.
#[derive(Clone, Default)]
pub struct Foreground {
    /// When each read finished, its latency in milliseconds, and its kind.
    samples: Arc<Mutex<Vec<(Instant, f64, ReadKind)>>>,
    failures: Arc<AtomicU64>,
}

/// The foreground reads' latency percentiles and counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ForegroundLatency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub reads: u64,
    pub failures: u64,
}

/// How a foreground read was served: the tail of each kind has its own
/// causes (a degraded read waits for the slowest of `k` whole members).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReadKind {
    /// One copy of a replicated block.
    Replica,
    /// The data member of an erasure-coded stripe itself.
    EcMember,
    /// Rebuilt from `k` other members of its stripe (the member was lost).
    EcDegraded,
}

impl ReadKind {
    pub fn name(self) -> &'static str {
        match self {
            ReadKind::Replica => "replica",
            ReadKind::EcMember => "ec_member",
            ReadKind::EcDegraded => "ec_degraded",
        }
    }
}

/// Largest number of foreground reads in flight; beyond it the reader
/// waits (the disks are saturated anyway).
const FOREGROUND_IN_FLIGHT: usize = 8;

/// Worker threads of the foreground client's own runtime: one per core of
/// the 2-core machines the demo is measured on.
const FOREGROUND_THREADS: usize = 2;

impl Foreground {
    /// Reads one random whole block of a random file under `prefix` every
    /// `interval` (open loop: a slow read does not delay the next) until
    /// `stop` is cancelled.
    pub async fn run(&self, client: Client, prefix: String, interval: Duration, seed: u64, stop: CancelFlag) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut files = Vec::new();
        let mut listed = Instant::now() - Duration::from_secs(3600);
        let in_flight = Arc::new(tokio::sync::Semaphore::new(FOREGROUND_IN_FLIGHT));
        let mut tick = tokio::time::interval(interval);
        while !stop.is_cancelled() {
            tick.tick().await;
            if listed.elapsed() > Duration::from_secs(2) || files.is_empty() {
                if let Ok(f) = client.list(&prefix).await {
                    files = f.into_iter().filter(|f| f.sealed && f.size > 0).collect();
                }
                listed = Instant::now();
            }
            if files.is_empty() {
                continue;
            }
            let file = files[rng.usize(..files.len())].clone();
            let blocks = file.size.div_ceil(file.block_size);
            let offset = rng.u64(..blocks) * file.block_size;
            let len = file.block_size.min(file.size - offset);
            let Ok(permit) = in_flight.clone().acquire_owned().await else { break };
            let (client, me) = (client.clone(), self.clone());
            tokio::spawn(async move {
                let t = Instant::now();
                let read = async {
                    let info = client.stat(&file.path).await?;
                    let stat_ms = t.elapsed().as_secs_f64() * 1e3;
                    let (_, disks) = client.read_file_traced(&info, offset, len, IoTag::Foreground).await?;
                    let ec = matches!(dingo_proto::redundancy(info.redundancy.as_ref()), Ok(Redundancy::Ec { .. }));
                    let kind = match (ec, disks.contains(&None)) {
                        (false, _) => ReadKind::Replica,
                        (true, false) => ReadKind::EcMember,
                        (true, true) => ReadKind::EcDegraded,
                    };
                    let total_ms = t.elapsed().as_secs_f64() * 1e3;
                    tracing::debug!(kind = kind.name(), stat_ms, total_ms, pieces = disks.len(), "foreground read");
                    Ok::<_, dingo_client::ClientError>(kind)
                };
                match read.await {
                    Ok(kind) => {
                        let latency_ms = t.elapsed().as_secs_f64() * 1e3;
                        me.samples.lock().unwrap_or_else(|p| p.into_inner()).push((Instant::now(), latency_ms, kind));
                    }
                    // Transcoding deleted the file since the listing: not a latency sample.
                    Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
                    Err(e) => {
                        tracing::warn!("foreground read of {} failed: {e}", file.path);
                        me.failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                drop(permit);
            });
        }
        // Let reads in flight finish before the cluster is stopped.
        let _ = in_flight.acquire_many(FOREGROUND_IN_FLIGHT as u32).await;
    }

    /// [`Foreground::run`] on a runtime of its own, with the client
    /// `make_client` builds there, until `stop` is cancelled; the receiver
    /// hears when it is done. The foreground client stands for an
    /// application in its own process: sharing the demo's runtime, its
    /// reads would also wait for the CPU work of the maintenance tasks the
    /// demo runs in-process (decoding, checksums, copies), in both modes.
    pub fn run_isolated(
        &self,
        make_client: impl FnOnce() -> Result<Client, ClientError> + Send + 'static,
        prefix: String,
        interval: Duration,
        seed: u64,
        stop: CancelFlag,
    ) -> std::io::Result<tokio::sync::oneshot::Receiver<Result<(), ClientError>>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(FOREGROUND_THREADS)
            .thread_name("foreground")
            .enable_all()
            .build()?;
        let (done, finished) = tokio::sync::oneshot::channel();
        let me = self.clone();
        std::thread::Builder::new().name("foreground".into()).spawn(move || {
            // Channels are made on the runtime of their first use: here.
            let outcome = runtime.block_on(async move {
                let client = make_client()?;
                me.run(client, prefix, interval, seed, stop).await;
                Ok(())
            });
            runtime.shutdown_background();
            let _ = done.send(outcome);
        })?;
        Ok(finished)
    }

    /// Latency percentiles (nearest rank) and counts so far.
    pub fn latency(&self) -> ForegroundLatency {
        let v: Vec<f64> = self.samples().iter().map(|s| s.1).collect();
        ForegroundLatency { failures: self.failures.load(Ordering::Relaxed), ..percentiles(v) }
    }

    /// Latency percentiles of each kind of read, by [`ReadKind::name`].
    pub fn latency_by_kind(&self) -> BTreeMap<String, ForegroundLatency> {
        let mut by_kind: BTreeMap<ReadKind, Vec<f64>> = BTreeMap::new();
        for (_, ms, kind) in self.samples() {
            by_kind.entry(kind).or_default().push(ms);
        }
        by_kind.into_iter().map(|(k, v)| (k.name().to_string(), percentiles(v))).collect()
    }

    /// Latency percentiles of the reads that finished in each interval of
    /// length `every` from `origin` (intervals without a read are left
    /// out), as (seconds from `origin` to the interval's end, latency).
    pub fn intervals(&self, origin: Instant, every: Duration) -> Vec<(f64, ForegroundLatency)> {
        let every_s = every.as_secs_f64().max(1e-3);
        let mut by_interval: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
        for (at, ms, _) in self.samples() {
            let i = (at.saturating_duration_since(origin).as_secs_f64() / every_s) as u64;
            by_interval.entry(i).or_default().push(ms);
        }
        by_interval.into_iter().map(|(i, v)| ((i + 1) as f64 * every_s, percentiles(v))).collect()
    }

    fn samples(&self) -> Vec<(Instant, f64, ReadKind)> {
        self.samples.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// p50 and p99 (nearest rank) and the count of `v`.
fn percentiles(mut v: Vec<f64>) -> ForegroundLatency {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * p).round() as usize] };
    ForegroundLatency { p50_ms: q(0.50), p99_ms: q(0.99), reads: v.len() as u64, failures: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let fg = Foreground::default();
        assert_eq!(fg.latency(), ForegroundLatency::default());
        let now = Instant::now();
        fg.samples.lock().unwrap().extend((1..=100).rev().map(|ms| (now, f64::from(ms), ReadKind::Replica)));
        fg.failures.fetch_add(2, Ordering::Relaxed);
        let l = fg.latency();
        assert_eq!((l.p50_ms, l.p99_ms, l.reads, l.failures), (51.0, 99.0, 100, 2));
    }

    #[test]
    fn intervals_take_the_percentiles_of_their_own_reads() {
        let fg = Foreground::default();
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        // Interval 0 (0-1 s): 1..=10 ms; interval 2 (2-3 s): one slow read.
        fg.samples.lock().unwrap().extend((1..=10).map(|ms| (at(ms * 50), ms as f64, ReadKind::EcMember)));
        fg.samples.lock().unwrap().push((at(2_500), 400.0, ReadKind::EcDegraded));
        let iv = fg.intervals(origin, Duration::from_secs(1));
        assert_eq!(iv.len(), 2, "an interval without reads is left out");
        assert_eq!((iv[0].0, iv[0].1.p50_ms, iv[0].1.p99_ms, iv[0].1.reads), (1.0, 6.0, 10.0, 10));
        assert_eq!((iv[1].0, iv[1].1.p50_ms, iv[1].1.p99_ms, iv[1].1.reads), (3.0, 400.0, 400.0, 1));
        let kinds = fg.latency_by_kind();
        assert_eq!(kinds.keys().collect::<Vec<_>>(), ["ec_degraded", "ec_member"]);
        assert_eq!(
            (kinds["ec_degraded"].p99_ms, kinds["ec_member"].p99_ms, kinds["ec_member"].reads),
            (400.0, 10.0, 10)
        );
    }
}
