//! The driver of the state machine ([`crate::state`]): runs its steps off
//! the async threads, commits each step's [`Ready`] and then sends its
//! messages, and runs the quantum loop.
//!
//! - Every step runs in `spawn_blocking` under the state's async mutex, so
//!   planning a quantum (or resolving a cluster-wide scrub) occupies a
//!   blocking thread, not a runtime worker; requests wait for the state
//!   without blocking a worker, and `/metrics` reads the last published
//!   [`MetricsView`] without waiting at all.
//! - Each step's `Ready` is queued, before the state is unlocked, to one
//!   persister thread, which commits the batches in step order, sends each
//!   `Ready`'s messages only after its batch is durable, and then lets the
//!   step's caller answer. So the write-ahead rule holds across steps: an
//!   answer (or a status) never reveals a change that is not yet durable.
//! - A failed commit, or a step that panicked, leaves memory ahead of the
//!   store: the service is marked fatal (and after a failed commit the
//!   persister stops), every later step fails, and [`crate::run`] returns
//!   the error so the process exits and a restart recovers from the store.

use crate::error::ServiceError;
use crate::metrics::MetricsView;
use crate::outbox::{Outbox, Sink};
use crate::records::Batch;
use crate::state::{DiskSlowness, DueGroup, NodeBudget, Ready, State, StreamId};
use crate::store::{RedbStore, StoreError};
use crate::topology;
use dingo_client::Client;
use dingo_daemon::now_ms;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, oneshot, watch};

/// How long a node may take to accept a group's cache directives before
/// the callbacks go out without them.
const PIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the persister makes each step's batch durable: redb
/// ([`RedbStore`]) in the service; a store that fails, in the tests of the
/// fatal path.
pub(crate) trait Durable: Send + 'static {
    fn commit(&self, batch: &Batch) -> Result<(), StoreError>;
}

impl Durable for RedbStore {
    fn commit(&self, batch: &Batch) -> Result<(), StoreError> {
        RedbStore::commit(self, batch)
    }
}

/// Work for the persister thread, done in the order queued.
pub(crate) enum PersistJob {
    /// Commit the batch, then send the messages, then answer.
    Apply { ready: Box<Ready>, done: oneshot::Sender<Result<(), StoreError>> },
    /// A stream opened (queued before the `Ready` with its replay).
    Open { stream: StreamId, sink: Sink },
    /// The client's side of a stream is gone.
    Closed(StreamId),
    /// End every stream (shutdown).
    CloseAll,
}

pub(crate) struct Shared {
    state: Arc<Mutex<State>>,
    jobs: mpsc::Sender<PersistJob>,
    metrics: Arc<watch::Sender<MetricsView>>,
    /// Set once, to why the service must stop.
    fatal: Arc<watch::Sender<Option<String>>>,
    pub(crate) meta: Client,
    pub(crate) meta_addr: String,
    /// Serialises topology refreshes (fetch and apply).
    refresh_lock: Mutex<()>,
    quantum_ms: u64,
}

impl Shared {
    /// Starts the persister thread over `store` and returns the driver.
    pub(crate) fn start(
        state: State,
        store: impl Durable,
        meta: Client,
        meta_addr: String,
        quantum_ms: u64,
    ) -> std::io::Result<Arc<Shared>> {
        let metrics = Arc::new(watch::Sender::new(state.metrics_view()));
        let fatal = Arc::new(watch::Sender::new(None));
        let state = Arc::new(Mutex::new(state));
        let (jobs, queue) = mpsc::channel();
        let persister =
            Persister { store: Box::new(store), state: state.clone(), metrics: metrics.clone(), fatal: fatal.clone() };
        std::thread::Builder::new().name("planner-persist".into()).spawn(move || persister.run(queue))?;
        Ok(Arc::new(Shared { state, jobs, metrics, fatal, meta, meta_addr, refresh_lock: Mutex::new(()), quantum_ms }))
    }

    /// The registry `GET /metrics` encodes: the figures as last published.
    pub(crate) fn metrics_registry(self: &Arc<Self>) -> dingo_daemon::metrics::Registry {
        let shared = self.clone();
        dingo_daemon::metrics::registry(move |page| shared.metrics.borrow().write(page))
    }

    /// Resolves with the reason once the service must stop.
    pub(crate) async fn stopped(&self) -> String {
        let mut fatal = self.fatal.subscribe();
        match fatal.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => "the driver is gone".into(),
        }
    }

    /// A queue for jobs (streams opening and closing).
    pub(crate) fn jobs(&self) -> mpsc::Sender<PersistJob> {
        self.jobs.clone()
    }

    /// Runs one step of the state machine on a blocking thread, queues its
    /// `Ready` before unlocking the state, and returns its answer once the
    /// `Ready` is durable and sent.
    pub(crate) async fn step<R: Send + 'static>(
        &self,
        step: impl FnOnce(&mut State) -> (R, Ready) + Send + 'static,
    ) -> Result<R, ServiceError> {
        let mut state = self.state.clone().lock_owned().await;
        // After a panicked step the state may be half changed: answer
        // nothing more (the persister still runs, so this is the check).
        if let Some(why) = self.fatal.borrow().clone() {
            return Err(ServiceError::Stopping(why));
        }
        let (jobs, metrics) = (self.jobs.clone(), self.metrics.clone());
        let ran = tokio::task::spawn_blocking(move || {
            let (answer, ready) = step(&mut state);
            metrics.send_replace(state.metrics_view());
            let (done, durable) = oneshot::channel();
            let queued = jobs.send(PersistJob::Apply { ready: Box::new(ready), done }).is_ok();
            (answer, durable, queued)
        })
        .await;
        let (answer, durable, queued) = match ran {
            Ok(ran) => ran,
            Err(e) => {
                let why = format!("a step of the state machine failed: {e}");
                self.fatal.send_replace(Some(why.clone()));
                return Err(ServiceError::Stopping(why));
            }
        };
        let stopping = || ServiceError::Stopping("the planner is stopping after a store error".into());
        if !queued {
            return Err(stopping());
        }
        match durable.await {
            Ok(Ok(())) => Ok(answer),
            Ok(Err(e)) => Err(ServiceError::Store(e)),
            Err(_) => Err(stopping()),
        }
    }

    /// A short step that persists nothing, run in place (it must not plan
    /// or resolve anything large).
    async fn peek<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state.lock().await;
        let r = f(&mut state);
        self.metrics.send_replace(state.metrics_view());
        r
    }

    pub(crate) async fn refresh(&self) -> Result<(), ServiceError> {
        let _one = self.refresh_lock.lock().await;
        match topology::fetch(&self.meta).await {
            Ok(snap) => {
                self.step(move |s| {
                    s.apply_topology(snap);
                    ((), Ready::default())
                })
                .await
            }
            Err(e) => {
                self.peek(|s| s.note_topology_error()).await;
                Err(ServiceError::Unavailable(format!("metadata service at {}: {e}", self.meta_addr)))
            }
        }
    }

    /// Sends each node its budget for the quantum just planned, all nodes
    /// at once, each bounded by [`PIN_TIMEOUT`] (or the quantum, if
    /// shorter), and notes the slowness each reply carries. Spawned, so a
    /// node that is down or slow never holds up the quantum loop; it only
    /// runs its disks without the planner's floor for that quantum.
    async fn send_budgets(self: Arc<Self>, budgets: Vec<NodeBudget>) {
        let timeout = PIN_TIMEOUT.min(Duration::from_millis(self.quantum_ms));
        let sends = budgets.into_iter().map(|b| {
            let shared = &self;
            async move {
                let node = shared.meta.node(&b.addr).map_err(|e| e.to_string());
                let reply = match node {
                    Ok(mut node) => match tokio::time::timeout(timeout, node.quantum_budget(b.request)).await {
                        Ok(Ok(reply)) => Ok(reply.into_inner()),
                        Ok(Err(status)) => Err(status.to_string()),
                        Err(_) => Err("timed out".to_string()),
                    },
                    Err(e) => Err(e),
                };
                if let Err(e) = &reply {
                    tracing::debug!(node = %b.addr, "quantum budget not taken: {e}");
                }
                reply.ok()
            }
        });
        let replies = futures::future::join_all(sends).await;
        let failed = replies.iter().filter(|r| r.is_none()).count() as u64;
        let sent = replies.len() as u64 - failed;
        self.peek(|s| {
            for disk in replies.iter().flatten().flat_map(|r| &r.disks) {
                if let Some(c) = disk.congestion {
                    s.note_slowness(disk.disk, DiskSlowness { congested: c.congested, permille: c.slowness_permille });
                }
            }
            s.note_node_budgets(sent, failed);
        })
        .await;
    }

    /// Sends a due group's cache directives, each node's in one request,
    /// all nodes at once. A node that fails or is slow only loses the cache
    /// hits; the callbacks go out regardless.
    async fn send_pins(&self, due: &DueGroup) {
        let sends = due.pins.iter().map(|(addr, pins)| async move {
            let sent =
                tokio::time::timeout(PIN_TIMEOUT, self.meta.cache_directive(addr, pins.clone(), Vec::new())).await;
            match sent {
                Ok(Ok(())) => (pins.len() as u64, 0),
                Ok(Err(e)) => {
                    tracing::warn!(node = %addr, "cache directives not taken: {e}");
                    (0, pins.len() as u64)
                }
                Err(_) => {
                    tracing::warn!(node = %addr, "cache directives timed out");
                    (0, pins.len() as u64)
                }
            }
        });
        let results = futures::future::join_all(sends).await;
        let (sent, failed) = results.iter().fold((0, 0), |(s, f), (a, b)| (s + a, f + b));
        self.peek(|s| s.note_pins(sent, failed)).await;
    }
}

/// The quantum loop: dispatches due groups (directives, then callbacks)
/// and plans a quantum whenever one starts. Returns only on an error that
/// stops the service.
pub(crate) async fn drive(shared: Arc<Shared>) -> Result<(), ServiceError> {
    loop {
        let now = now_ms();
        if let Some(due) = shared.peek(|s| s.take_due_group(now)).await {
            shared.send_pins(&due).await;
            shared.step(move |s| ((), s.complete_group(&due))).await?;
            continue;
        }
        let next_quantum = shared.peek(|s| s.next_quantum_ms).await;
        if now >= next_quantum {
            // Planning on a stale topology could schedule reads of deleted
            // blocks or dead nodes: skip the quantum instead.
            match shared.refresh().await {
                Ok(()) => {
                    let at = now_ms();
                    // The budgets go out once the quantum is durable, from
                    // here rather than the persister thread (which has no
                    // runtime for the calls).
                    let budgets = shared
                        .step(move |s| {
                            let started = Instant::now();
                            let mut ready = s.plan_quantum(at);
                            s.note_plan_seconds(started.elapsed().as_secs_f64());
                            (std::mem::take(&mut ready.node_budgets), ready)
                        })
                        .await?;
                    tokio::spawn(shared.clone().send_budgets(budgets));
                }
                Err(e) => tracing::warn!("quantum skipped: {e}"),
            }
            let q = shared.quantum_ms;
            let next = if next_quantum + q > now { next_quantum + q } else { now + q };
            shared.peek(|s| s.next_quantum_ms = next).await;
            continue;
        }
        let wake = shared.peek(|s| s.next_group_at()).await.map_or(next_quantum, |g| g.min(next_quantum));
        tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now_ms()).max(1))).await;
    }
}

/// The thread that makes `Ready`s durable and then sends their messages.
struct Persister {
    store: Box<dyn Durable>,
    state: Arc<Mutex<State>>,
    metrics: Arc<watch::Sender<MetricsView>>,
    fatal: Arc<watch::Sender<Option<String>>>,
}

impl Persister {
    fn run(self, queue: mpsc::Receiver<PersistJob>) {
        let mut outbox = Outbox::default();
        while let Ok(job) = queue.recv() {
            let ended = match job {
                PersistJob::Apply { ready, done } => {
                    if !ready.batch.is_empty()
                        && let Err(e) = self.store.commit(&ready.batch)
                    {
                        tracing::error!("cannot persist the planner's state, stopping: {e}");
                        self.fatal.send_replace(Some(e.to_string()));
                        let _ = done.send(Err(e));
                        return;
                    }
                    let Ready { messages, .. } = *ready;
                    let ended = outbox.send(messages);
                    let _ = done.send(Ok(()));
                    ended
                }
                PersistJob::Open { stream, sink } => {
                    outbox.insert(stream, sink);
                    Default::default()
                }
                PersistJob::Closed(stream) => {
                    outbox.remove(stream);
                    [(stream, Vec::new())].into()
                }
                PersistJob::CloseAll => {
                    outbox.clear();
                    Default::default()
                }
            };
            if !ended.is_empty() {
                // A std thread, so it may block on the async mutex.
                let mut state = self.state.blocking_lock();
                for (stream, unsent) in ended {
                    state.close_stream(stream, &unsent);
                }
                self.metrics.send_replace(state.metrics_view());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServiceConfig;
    use crate::memory_store::MemoryStore;
    use crate::topology::MetaTopology;

    /// A store whose every commit fails, as redb's does on a full or
    /// failing disk.
    struct FailingStore;

    impl Durable for FailingStore {
        fn commit(&self, _: &Batch) -> Result<(), StoreError> {
            Err(StoreError("disk full".into()))
        }
    }

    fn shared(store: impl Durable) -> Arc<Shared> {
        let loaded = MemoryStore::default().load().unwrap();
        let state = State::restore(ServiceConfig::new("adm"), loaded, MetaTopology::default(), 1_000_000).unwrap();
        let access = dingo_auth::ClusterAccess::new(dingo_auth::ClusterSecret::generate().unwrap(), None).unwrap();
        // Never called: the steps below need no metadata service.
        let meta = Client::new("127.0.0.1:1", &access).unwrap();
        Shared::start(state, store, meta, "127.0.0.1:1".into(), 1000).unwrap()
    }

    #[tokio::test]
    async fn a_failed_commit_stops_the_service_and_fails_every_later_step() {
        let shared = shared(FailingStore);
        // A step that persists nothing is answered as usual.
        shared.step(|_| ((), Ready::default())).await.unwrap();
        // The first step with something to persist fails with the store's error...
        let first = shared.step(|s| s.set_budget(Some(5), None)).await;
        assert!(matches!(&first, Err(ServiceError::Store(e)) if e.to_string().contains("disk full")), "{first:?}");
        // ...the service is told to stop, with the reason...
        let why = tokio::time::timeout(Duration::from_secs(5), shared.stopped()).await.expect("stop signalled");
        assert!(why.contains("disk full"), "{why}");
        // ...and no later step is answered, whatever it persists.
        for _ in 0..2 {
            let later = shared.step(|_| ((), Ready::default())).await;
            assert!(matches!(later, Err(ServiceError::Stopping(_))), "{later:?}");
        }
    }

    #[tokio::test]
    async fn a_panicking_step_stops_the_service() {
        let shared = shared(FailingStore);
        let panicked = shared.step(|_| -> ((), Ready) { panic!("a broken invariant") }).await;
        assert!(matches!(panicked, Err(ServiceError::Stopping(_))), "{panicked:?}");
        let why = tokio::time::timeout(Duration::from_secs(5), shared.stopped()).await.expect("stop signalled");
        assert!(why.contains("a step of the state machine failed"), "{why}");
        // The persister still runs, but a state a panic left half changed
        // must not answer anything more.
        let later = shared.step(|_| ((), Ready::default())).await;
        assert!(matches!(later, Err(ServiceError::Stopping(_))), "{later:?}");
    }
}
