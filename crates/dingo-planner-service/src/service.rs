//! The gRPC service, the quantum loop and `run`.
//!
//! One mutex guards the [`State`]; it is never held across an await. Calls
//! to the metadata service (topology refresh, `Stat`) and to the nodes
//! (cache directives) happen outside it.

use crate::auth::{Auth, Caller};
use crate::config::{ConfigError, ServiceConfig};
use crate::convert::{declaration_from_wire, parse_task};
use crate::error::ServiceError;
use crate::state::{DeclareFailure, DueGroup, State};
use crate::store::{Store, StoreError};
use crate::topology::{self, MetaTopology};
use dingo_client::{Client, ClientError, Redundancy};
use dingo_planner::DeclareError;
use dingo_proto::planner as pb;
use dingo_proto::planner::planner_server::{Planner, PlannerServer};
use dingo_proto::v1::FileInfo;
use dingo_proto::{MAX_MESSAGE_BYTES, now_ms};
use dingo_types::{BlockId, BlockProblem, BlockSet, Declaration, Member, ReadSets, Timestamp};
use futures::{FutureExt, StreamExt};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

/// How long a node may take to accept a group's cache directives before
/// the callbacks go out without them.
const PIN_TIMEOUT: Duration = Duration::from_secs(2);

/// `Stat` calls in flight while resolving one `DeclareFiles`.
const STAT_PARALLELISM: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("no data directory: set `data` in the config or pass --data")]
    NoDataDir,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("metadata service: {0}")]
    Meta(#[from] ClientError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    AddrFile { path: PathBuf, source: std::io::Error },
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("TLS: {0}")]
    Tls(#[from] dingo_tls::TlsError),
    #[error("the quantum loop stopped: {0}")]
    Loop(String),
}

struct Shared {
    state: Mutex<State>,
    meta: Client,
    meta_addr: String,
    /// Serialises topology refreshes (fetch and apply).
    refresh_lock: tokio::sync::Mutex<()>,
    quantum_ms: u64,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn refresh(&self) -> Result<(), ServiceError> {
        let _one = self.refresh_lock.lock().await;
        match topology::fetch(&self.meta).await {
            Ok(snap) => {
                self.state().apply_topology(snap);
                Ok(())
            }
            Err(e) => {
                self.state().note_topology_error();
                Err(ServiceError::Unavailable(format!("metadata service at {}: {e}", self.meta_addr)))
            }
        }
    }

    /// Declares for `owner`. Disk and cluster scrubs are resolved against a
    /// fresh topology; otherwise a rejection that a stale topology could
    /// cause (unknown or unsealed block, unknown disk) is retried once after
    /// a refresh.
    async fn declare(&self, owner: &str, decl: Declaration) -> Result<pb::DeclareReply, Status> {
        let mut refreshed = matches!(decl.read_sets, ReadSets::ChunksOnDisk(_) | ReadSets::AllChunks);
        if refreshed {
            self.refresh().await?;
        }
        loop {
            let result = self.state().declare(owner, &decl, now_ms());
            match result {
                Ok((id, total_sets)) => return Ok(pb::DeclareReply { declaration: id.0, total_sets }),
                Err(DeclareFailure::Rejected(e)) if !refreshed && may_be_stale(&e) => {
                    self.refresh().await?;
                    refreshed = true;
                }
                Err(DeclareFailure::Rejected(e)) => return Err(Status::invalid_argument(e.to_string())),
                Err(DeclareFailure::Store(e)) => return Err(ServiceError::Store(e).into()),
            }
        }
    }

    /// Resolves file segments to block sets through `Stat` (a snapshot).
    async fn resolve_files(&self, req: &pb::DeclareFilesRequest) -> Result<Declaration, Status> {
        let task = parse_task(&req.task).map_err(Status::invalid_argument)?;
        // Each file once, STAT_PARALLELISM at a time; errors name the first
        // segment that uses the file.
        let mut first_use: HashMap<&str, String> = HashMap::new();
        for (i, set) in req.sets.iter().enumerate() {
            if set.segments.is_empty() {
                return Err(Status::invalid_argument(format!("set {i} names no file segments")));
            }
            for (j, seg) in set.segments.iter().enumerate() {
                first_use.entry(seg.path.as_str()).or_insert_with(|| format!("set {i}, segment {j}"));
            }
        }
        let paths: Vec<String> = first_use.keys().map(|p| p.to_string()).collect();
        let stats: Vec<(String, Result<FileInfo, ClientError>)> = futures::stream::iter(paths)
            .map(|path| async move {
                let r = self.meta.stat(&path).await;
                (path, r)
            })
            .buffer_unordered(STAT_PARALLELISM)
            .collect()
            .await;
        let mut files: HashMap<String, FileInfo> = HashMap::new();
        for (path, r) in stats {
            let at = &first_use[path.as_str()];
            let file = r.map_err(|e| match e.code() {
                Some(tonic::Code::NotFound) => Status::not_found(format!("{at}: {e}")),
                Some(tonic::Code::InvalidArgument) => Status::invalid_argument(format!("{at}: {e}")),
                _ => Status::unavailable(format!("{at}: metadata service at {}: {e}", self.meta_addr)),
            })?;
            files.insert(path, file);
        }
        let mut sets = Vec::with_capacity(req.sets.len());
        for (i, set) in req.sets.iter().enumerate() {
            let mut seen = HashSet::new();
            let mut members = Vec::new();
            for (j, seg) in set.segments.iter().enumerate() {
                let blocks = segment_blocks(&files[&seg.path], seg)
                    .map_err(|m| Status::invalid_argument(format!("set {i}, segment {j}: {m}")))?;
                members.extend(blocks.into_iter().filter(|b| seen.insert(*b)).map(|b| Member::Any(BlockId(b))));
            }
            sets.push(BlockSet::new(members));
        }
        Ok(Declaration {
            task,
            read_sets: ReadSets::Sets(sets),
            sets_needed: req.sets_needed,
            deadline: Timestamp(req.deadline_ms),
        })
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
        self.state().note_pins(sent, failed);
    }
}

/// Rejections a refreshed topology may turn into acceptance.
fn may_be_stale(e: &DeclareError) -> bool {
    let stale = |p: &BlockProblem| matches!(p, BlockProblem::Unknown(_) | BlockProblem::Unsealed(_));
    match e {
        DeclareError::BadBlock { problem, .. } | DeclareError::BadMember(problem) => stale(problem),
        DeclareError::UnknownDisk(_) => true,
        _ => false,
    }
}

/// Block ids holding bytes `offset .. offset + length` of a file: for a
/// replicated file its blocks, for an erasure-coded one the data members.
fn segment_blocks(file: &FileInfo, seg: &pb::FileSegment) -> Result<Vec<u64>, String> {
    let redundancy = Redundancy::try_from(file.redundancy.as_ref())?;
    let data: Vec<&dingo_proto::v1::BlockRecord> = match redundancy {
        Redundancy::Replicated(_) => file.blocks.iter().collect(),
        Redundancy::Ec { data, parity } => {
            let width = usize::from(data) + usize::from(parity);
            if !file.blocks.len().is_multiple_of(width) {
                return Err(format!("{} has an incomplete stripe", file.path));
            }
            file.blocks.chunks(width).flat_map(|s| &s[..usize::from(data)]).collect()
        }
    };
    let end = if seg.length == 0 { Some(file.size) } else { seg.offset.checked_add(seg.length) };
    let end = end.filter(|&e| e <= file.size && seg.offset <= file.size).ok_or_else(|| {
        format!(
            "bytes {}..{} are past the end of {} ({} bytes)",
            seg.offset,
            seg.offset.saturating_add(seg.length),
            file.path,
            file.size
        )
    })?;
    if seg.offset == end {
        return Err(format!("the segment covers no bytes of {} ({} bytes)", file.path, file.size));
    }
    let mut pos = 0;
    let mut out = Vec::new();
    for b in data {
        let (from, to) = (pos, pos + b.size);
        pos = to;
        if from < end && to > seg.offset {
            out.push(b.id);
        }
    }
    Ok(out)
}

struct PlannerService(Arc<Shared>);

type CallbackStream = Pin<Box<dyn futures::Stream<Item = Result<pb::Callback, Status>> + Send>>;

#[tonic::async_trait]
impl Planner for PlannerService {
    async fn declare(&self, req: Request<pb::DeclareRequest>) -> Result<Response<pb::DeclareReply>, Status> {
        let caller = Caller::of(&req)?;
        let decl = declaration_from_wire(req.get_ref()).map_err(Status::invalid_argument)?;
        Ok(Response::new(self.0.declare(caller.client()?, decl).await?))
    }

    async fn declare_files(&self, req: Request<pb::DeclareFilesRequest>) -> Result<Response<pb::DeclareReply>, Status> {
        let caller = Caller::of(&req)?;
        caller.client()?;
        let decl = self.0.resolve_files(req.get_ref()).await?;
        Ok(Response::new(self.0.declare(caller.client()?, decl).await?))
    }

    type SubscribeStream = CallbackStream;

    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<CallbackStream>, Status> {
        let caller = Caller::of(&req)?;
        let rx = self.0.state().subscribe(caller.client()?);
        let stream = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(|r| r.map_err(Status::from));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn ack(&self, req: Request<pb::AckRequest>) -> Result<Response<pb::AckReply>, Status> {
        let caller = Caller::of(&req)?;
        self.0.state().ack(caller.client()?, &req.get_ref().deliveries)?;
        Ok(Response::new(pb::AckReply {}))
    }

    async fn cancel(&self, req: Request<pb::CancelRequest>) -> Result<Response<pb::CancelReply>, Status> {
        let caller = Caller::of(&req)?;
        let delivered_sets = self.0.state().cancel(&caller, req.get_ref().declaration)?;
        Ok(Response::new(pb::CancelReply { delivered_sets }))
    }

    async fn status(&self, req: Request<pb::StatusRequest>) -> Result<Response<pb::StatusReply>, Status> {
        let caller = Caller::of(&req)?;
        let state = self.0.state();
        let declarations = state.status(&caller, &req.get_ref().declarations)?;
        let next_quantum_ms = state.next_quantum_ms;
        Ok(Response::new(pb::StatusReply {
            declarations,
            next_quantum_ms,
            budget: Some(state.budget_at(next_quantum_ms)),
            planned_free_bytes: state.planned_free_bytes(),
        }))
    }

    async fn set_budget(&self, req: Request<pb::SetBudgetRequest>) -> Result<Response<pb::SetBudgetReply>, Status> {
        if Caller::of(&req)? != Caller::Admin {
            return Err(Status::permission_denied("SetBudget needs the admin token"));
        }
        let r = req.get_ref();
        if r.cluster_bytes.is_none() && r.disk_head_time_us.is_none() {
            return Err(Status::invalid_argument(
                "SetBudget names no limit: set cluster_bytes and/or disk_head_time_us",
            ));
        }
        let budget = self.0.state().set_budget(r.cluster_bytes, r.disk_head_time_us).map_err(ServiceError::from)?;
        tracing::info!(
            cluster_bytes = budget.cluster_bytes,
            disk_head_time_us = budget.disk_head_time_us,
            "budget set"
        );
        Ok(Response::new(pb::SetBudgetReply {}))
    }
}

/// The quantum loop: dispatches due groups (directives, then callbacks)
/// and plans a quantum whenever one starts. Returns only on a store error.
async fn drive(shared: Arc<Shared>) -> Result<(), StoreError> {
    loop {
        let now = now_ms();
        let due = shared.state().take_due_group(now);
        if let Some(due) = due {
            shared.send_pins(&due).await;
            shared.state().complete_group(&due)?;
            continue;
        }
        let next_quantum = shared.state().next_quantum_ms;
        if now >= next_quantum {
            // Planning on a stale topology could schedule reads of deleted
            // blocks or dead nodes: skip the quantum instead.
            match shared.refresh().await {
                Ok(()) => shared.state().plan_quantum(now_ms())?,
                Err(e) => tracing::warn!("quantum skipped: {e}"),
            }
            let q = shared.quantum_ms;
            let next = if next_quantum + q > now { next_quantum + q } else { now + q };
            shared.state().next_quantum_ms = next;
            continue;
        }
        let wake = shared.state().next_group_at().map_or(next_quantum, |g| g.min(next_quantum));
        tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now_ms()).max(1))).await;
    }
}

/// Runs the planner service until `shutdown` resolves: restores the stored
/// state (waiting for the metadata service if needed), listens, writes the
/// bound address to `<data>/planner.addr`, serves `/metrics` if configured,
/// and runs the quantum loop.
pub async fn run(config: ServiceConfig, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), RunError> {
    config.validate()?;
    let data = config.data.clone().ok_or(RunError::NoDataDir)?;
    let shutdown = shutdown.boxed().shared();
    let store = Store::open(&data)?;
    let loaded = store.load()?;
    let meta = Client::new(&config.meta)?;
    let mut waited = 0u32;
    let snap = loop {
        tokio::select! {
            r = topology::fetch(&meta) => match r {
                Ok(s) => break s,
                Err(e) => {
                    if waited.is_multiple_of(25) {
                        tracing::warn!(meta = %config.meta, "waiting for the metadata service: {e}");
                    }
                    waited += 1;
                }
            },
            _ = shutdown.clone() => return Ok(()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut topo = MetaTopology::default();
    topo.apply(snap);
    let blocks = topo.block_count();
    let state = State::restore(config.clone(), store, loaded, topo, now_ms())?;
    let listen = config.listen_addr()?;
    // Checked before listening, so that a wrong certificate path stops the
    // start with the file's name.
    let tls = config.tls.as_ref().map(dingo_tls::server_config).transpose()?;
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|source| RunError::Listen { addr: listen, source })?;
    let bound = listener.local_addr().map_err(|source| RunError::Listen { addr: listen, source })?;
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        meta,
        meta_addr: config.meta.clone(),
        refresh_lock: tokio::sync::Mutex::new(()),
        quantum_ms: config.quantum_ms,
    });
    let metrics_task = match config.metrics_addr()? {
        Some(addr) => {
            let s = shared.clone();
            let (at, task) = dingo_proto::metrics::serve(addr, Arc::new(move || s.state().render_metrics()))
                .await
                .map_err(|source| RunError::Listen { addr, source })?;
            tracing::info!(%at, "metrics");
            Some(task)
        }
        None => None,
    };
    let addr_file = data.join("planner.addr");
    std::fs::write(&addr_file, format!("{bound}\n"))
        .map_err(|source| RunError::AddrFile { path: addr_file, source })?;
    tracing::info!(%bound, blocks, data = %data.display(), "planner listening");
    let service = InterceptedService::new(
        PlannerServer::from_arc(Arc::new(PlannerService(shared.clone())))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        Auth::new(&config),
    );
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .add_service(service)
        .serve_with_incoming_shutdown(dingo_proto::accept_nodelay(listener), shutdown.clone());
    // Callback streams never end on their own; close them at shutdown so
    // the server's graceful stop does not wait on them.
    let closer = {
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        tokio::spawn(async move {
            shutdown.await;
            shared.state().close_streams();
        })
    };
    let driver = tokio::spawn(drive(shared));
    let result = tokio::select! {
        r = server => r.map_err(RunError::from),
        r = driver => Err(RunError::Loop(match r {
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(())) => "ended".into(),
            Err(e) => e.to_string(),
        })),
    };
    if let Some(task) = metrics_task {
        task.abort();
    }
    closer.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_proto::v1::BlockRecord;

    fn file(redundancy: Redundancy, sizes: &[u64]) -> FileInfo {
        let blocks =
            sizes.iter().enumerate().map(|(i, &size)| BlockRecord { id: 100 + i as u64, size, ..Default::default() });
        let blocks: Vec<BlockRecord> = blocks.collect();
        let size = match redundancy {
            Redundancy::Replicated(_) => sizes.iter().sum(),
            Redundancy::Ec { data, parity } => {
                let w = usize::from(data + parity);
                sizes.chunks(w).flat_map(|s| &s[..usize::from(data)]).sum()
            }
        };
        FileInfo { path: "/f".into(), redundancy: Some(redundancy.into()), size, blocks, ..Default::default() }
    }

    fn seg(offset: u64, length: u64) -> pb::FileSegment {
        pb::FileSegment { path: "/f".into(), offset, length }
    }

    #[test]
    fn segments_map_to_the_blocks_holding_their_bytes() {
        let rep = file(Redundancy::Replicated(3), &[10, 10, 5]);
        assert_eq!(segment_blocks(&rep, &seg(0, 0)).unwrap(), vec![100, 101, 102]);
        assert_eq!(segment_blocks(&rep, &seg(9, 2)).unwrap(), vec![100, 101]);
        assert_eq!(segment_blocks(&rep, &seg(20, 5)).unwrap(), vec![102]);
        // EC 2+1: stripes (100, 101 | 102) and (103, 104 | 105); data only.
        let ec = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10, 10, 4, 4, 4]);
        assert_eq!(segment_blocks(&ec, &seg(0, 0)).unwrap(), vec![100, 101, 103, 104]);
        assert_eq!(segment_blocks(&ec, &seg(19, 3)).unwrap(), vec![101, 103]);
    }

    #[test]
    fn segments_past_the_end_or_empty_are_refused() {
        let rep = file(Redundancy::Replicated(3), &[10]);
        assert!(segment_blocks(&rep, &seg(5, 6)).unwrap_err().contains("past the end"));
        assert!(segment_blocks(&rep, &seg(11, 0)).unwrap_err().contains("past the end"));
        assert!(segment_blocks(&rep, &seg(10, 0)).unwrap_err().contains("covers no bytes"));
        assert!(segment_blocks(&rep, &seg(u64::MAX, 2)).unwrap_err().contains("past the end"));
        let ec = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10]);
        assert!(segment_blocks(&ec, &seg(0, 0)).unwrap_err().contains("incomplete stripe"));
    }
}
