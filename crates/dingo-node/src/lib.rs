//! DINGO storage node (`dingo node --disk DIR ...`).
//!
//! A node stores chunks (copies of blocks) as checksummed files on one or
//! more disks ([`chunk`], [`disk`]), reads them with direct IO through a block
//! cache with a pinned region ([`cache`]), serves the `Node` gRPC service
//! ([`service`]), and registers with and heartbeats to the metadata service,
//! which tells it which chunks to delete.

pub mod cache;
pub mod chunk;
pub mod config_file;
pub mod direct;
pub mod disk;
mod error;
mod flash;
pub mod head;
mod lock;
pub mod metrics;
pub mod service;
mod single_flight;
pub mod store;

pub use error::StoreError;
pub use flash::{FlashSettings, FlashStats};
pub use head::{IoSettings, Slowdown, WaitingSettings};
pub use store::{DiskSpec, Store};

use dingo_auth::{BearerCredentials, ClusterAccess, ServerSecurity};
use dingo_proto::v1::meta_client::MetaClient;
use dingo_proto::v1::node_server::NodeServer;
use dingo_proto::v1::{
    ChunkOnDisk, ChunksOnDiskRequest, DiskModel as WireModel, DiskRegistration, DiskUsage, HeartbeatRequest,
    RegisterNodeRequest, ReportChunksRequest,
};
use dingo_proto::{MAX_MESSAGE_BYTES, chunk_ref};
use dingo_types::DiskId;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Server};

/// A client of the metadata service that sends the cluster secret.
type MetaConn = MetaClient<InterceptedService<Channel, BearerCredentials>>;

/// Everything a node needs to run.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// gRPC listen address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Address clients and the metadata service use for this node; default:
    /// the bound listen address.
    pub advertise: Option<String>,
    /// Metadata service address (`host:port`).
    pub meta: String,
    /// How to call the metadata service (the cluster secret, TLS).
    pub meta_access: ClusterAccess,
    /// Prometheus `/metrics` address, if any.
    pub metrics: Option<SocketAddr>,
    pub disks: Vec<DiskSpec>,
    /// General cache region, bytes.
    pub cache_bytes: u64,
    /// Pinned cache region, bytes.
    pub pinned_bytes: u64,
    pub heartbeat: Duration,
    /// Chunks sealed longer ago than this are listed to the metadata
    /// service, which names those no block places here (orphans) for
    /// deletion. Longer than any write, move or rebuild takes between
    /// writing a chunk and recording it.
    pub orphan_grace: Duration,
    /// Accept `InjectSlowdown` calls (tests and experiments only).
    pub fault_injection: bool,
    /// A flash tier under the DRAM cache, if any.
    pub flash: Option<FlashSettings>,
}

#[derive(Debug, Error)]
pub enum NodeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("metadata service at {meta} refused registration: {status}")]
    Register { meta: String, status: tonic::Status },
    #[error("metadata service address: {0}")]
    MetaAddr(dingo_auth::AuthError),
    #[error(transparent)]
    Security(#[from] dingo_auth::AuthError),
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// Runs a node until `shutdown` resolves. Every call must carry the cluster
/// secret of `security` (refused with `UNAUTHENTICATED` otherwise); with its
/// TLS files, the node serves TLS only.
pub async fn run(
    cfg: NodeConfig,
    security: ServerSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), NodeError> {
    // First, so that a wrong certificate path stops the start by name.
    let server = security.server(cfg.listen, "node")?;
    let store = Arc::new(tokio::task::block_in_place(|| {
        Store::open_with_flash(&cfg.disks, cfg.cache_bytes, cfg.pinned_bytes, cfg.flash.as_ref())
    })?);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| NodeError::Listen { addr: cfg.listen, source })?;
    let bound = listener.local_addr().map_err(|source| NodeError::Listen { addr: cfg.listen, source })?;
    let advertise = cfg.advertise.clone().unwrap_or_else(|| bound.to_string());
    let _metrics = match cfg.metrics {
        Some(addr) => {
            let (at, task) = dingo_daemon::metrics::serve(addr, metrics::registry(store.clone()))
                .await
                .map_err(|source| NodeError::Listen { addr, source })?;
            tracing::info!(%at, "metrics");
            Some(AbortOnDrop(task))
        }
        None => None,
    };

    // Replies as large as the service sends (a disk's chunk list).
    let meta = MetaClient::with_interceptor(
        cfg.meta_access.endpoint(&cfg.meta).map_err(NodeError::MetaAddr)?.connect_lazy(),
        cfg.meta_access.credentials(),
    )
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let node = register(&meta, &cfg.meta, &advertise, &store).await?;
    tracing::info!(node, %advertise, disks = store.disks.len(), "node registered");
    let _heartbeat = AbortOnDrop(tokio::spawn(heartbeat_loop(
        meta,
        cfg.meta.clone(),
        advertise,
        store.clone(),
        node,
        cfg.heartbeat,
        cfg.orphan_grace,
    )));

    let service = service::NodeService { store, fault_injection: cfg.fault_injection };
    serve(server, listener, service, &security, shutdown).await
}

/// Serves the `Node` service on `listener` until `shutdown` resolves,
/// refusing every call without the cluster secret.
async fn serve(
    server: Server,
    listener: tokio::net::TcpListener,
    service: service::NodeService,
    security: &ServerSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), NodeError> {
    server
        .initial_stream_window_size(dingo_proto::STREAM_WINDOW)
        .initial_connection_window_size(dingo_proto::CONNECTION_WINDOW)
        .max_frame_size(dingo_proto::MAX_FRAME)
        .add_service(InterceptedService::new(
            NodeServer::new(service)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            security.require(),
        ))
        .serve_with_incoming_shutdown(dingo_daemon::accept_nodelay(listener), shutdown)
        .await?;
    Ok(())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether a failed call never reached a working metadata service: it is
/// not listening (`Unavailable`), or the connection broke during the call
/// (a transport error, reported as `Unknown` or `Cancelled`: the service
/// was killed mid-call). Found by `dingo chaos`: a node starting while the
/// service crashed gave up.
fn meta_unreachable(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Unavailable
        || std::error::Error::source(status).is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some())
}

/// Registers the node, retrying while the metadata service is unreachable
/// (it may start after the node). Assigns the disk ids it returns.
async fn register(meta: &MetaConn, meta_addr: &str, advertise: &str, store: &Store) -> Result<u32, NodeError> {
    let req = RegisterNodeRequest {
        addr: advertise.to_string(),
        disks: store
            .disks
            .iter()
            .map(|d| DiskRegistration {
                uuid: d.uuid.clone(),
                path: d.path.display().to_string(),
                capacity: d.capacity,
                used: d.used(),
                model: d.model.map(|m| WireModel {
                    positioning_us: m.positioning_us,
                    transfer_bytes_per_sec: m.transfer_bytes_per_sec,
                }),
            })
            .collect(),
    };
    let mut warned = false;
    loop {
        match meta.clone().register_node(req.clone()).await {
            Ok(r) => {
                let r = r.into_inner();
                for (disk, id) in store.disks.iter().zip(&r.disks) {
                    disk.set_id(DiskId(*id));
                }
                return Ok(r.node);
            }
            Err(s) if meta_unreachable(&s) => {
                if !warned {
                    tracing::warn!(meta = meta_addr, "metadata service unreachable; retrying");
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(status) => return Err(NodeError::Register { meta: meta_addr.to_string(), status }),
        }
    }
}

/// Reports the chunks the metadata service places on this node's disks
/// that the node does not hold (chunk files lost while it was down, or a
/// `chunks/` directory emptied), so they are rebuilt now, not when a read
/// or a scrub next meets them. Every chunk the service lists was sealed
/// here before it was committed there, so a chunk missing now is lost,
/// or was deleted since the listing (the service then drops the report,
/// as for any chunk it no longer places).
async fn report_missing(meta: &MetaConn, store: &Store) {
    for disk in store.disks.iter().filter_map(|d| d.id()) {
        match meta.clone().chunks_on_disk(ChunksOnDiskRequest { disk: disk.0 }).await {
            Ok(reply) => {
                let placed = reply.into_inner().chunks.into_iter().filter_map(|c| chunk_ref(Some(&c)).ok());
                let missing = store.note_missing_on(disk, placed);
                if missing > 0 {
                    tracing::warn!(
                        disk = disk.0,
                        missing,
                        "chunks the metadata service places here are missing; reported"
                    );
                }
            }
            Err(s) => {
                tracing::warn!(disk = disk.0, "cannot check this disk's chunks against the metadata: {}", s.message())
            }
        }
    }
}

/// Most chunks listed in one `ReportChunks` call.
const ORPHAN_REPORT_BATCH: usize = 100_000;

/// Lists the chunks sealed more than `grace` ago to the metadata service
/// and deletes those it names as orphans.
async fn delete_orphans(meta: &MetaConn, store: &Store, node: u32, grace: Duration) {
    let Some(cutoff) = std::time::SystemTime::now().checked_sub(grace) else { return };
    let old = store.sealed_before(cutoff);
    for batch in old.chunks(ORPHAN_REPORT_BATCH) {
        let chunks =
            batch.iter().map(|&(disk, chunk)| ChunkOnDisk { disk: disk.0, chunk: Some(chunk.into()) }).collect();
        let orphans = match meta.clone().report_chunks(ReportChunksRequest { node, chunks }).await {
            Ok(reply) => reply.into_inner().orphans,
            Err(s) => {
                tracing::debug!("orphan check failed: {}", s.message());
                return;
            }
        };
        for c in orphans {
            let Ok(chunk) = chunk_ref(c.chunk.as_ref()) else { continue };
            match tokio::task::block_in_place(|| store.delete_orphan(chunk, DiskId(c.disk), cutoff)) {
                Ok(true) => {
                    tracing::warn!(%chunk, disk = c.disk, "deleted an orphan chunk no block record places here")
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(%chunk, "orphan delete failed: {e}"),
            }
        }
    }
}

/// Reports usage every `every`, carries out the deletions the metadata
/// service asks for, and confirms them in the next heartbeat — sent at once,
/// so that confirmations and the freed space show without waiting a period.
/// Also reports chunks that reads found corrupt and, on (re)joining, the
/// chunks the service places here that the node lacks
/// ([`report_missing`]), and has orphan chunks checked every quarter of
/// `orphan_grace`.
async fn heartbeat_loop(
    meta: MetaConn,
    meta_addr: String,
    advertise: String,
    store: Arc<Store>,
    mut node: u32,
    every: Duration,
    orphan_grace: Duration,
) {
    let mut deleted: Vec<ChunkOnDisk> = Vec::new();
    let mut corrupt: Vec<ChunkOnDisk> = Vec::new();
    let mut ticker = tokio::time::interval(every);
    // A chunk becomes an orphan candidate `orphan_grace` after sealing and
    // is checked within a quarter of that.
    let orphan_check_every = orphan_grace / 4;
    let mut orphans_checked = tokio::time::Instant::now();
    // Per disk: failing its health probe at the last heartbeat.
    let mut failing = vec![false; store.disks.len()];
    report_missing(&meta, &store).await;
    loop {
        ticker.tick().await;
        if orphans_checked.elapsed() >= orphan_check_every {
            orphans_checked = tokio::time::Instant::now();
            delete_orphans(&meta, &store, node, orphan_grace).await;
        }
        for (disk, chunk) in store.take_corrupt() {
            corrupt.push(ChunkOnDisk { disk: disk.map_or(u32::MAX, |d| d.0), chunk: Some(chunk.into()) });
        }
        // A disk failing its probe is left out: the metadata service marks
        // it DEAD once it has been missing for `meta.mark_dead_after_ms`.
        let mut disks = Vec::with_capacity(store.disks.len());
        for (d, was_failing) in store.disks.iter().zip(&mut failing) {
            let Some(id) = d.id() else { continue };
            match tokio::task::block_in_place(|| d.probe()) {
                Ok(()) => {
                    if std::mem::take(was_failing) {
                        tracing::info!(disk = id.0, path = %d.path.display(), "disk passes its health probe again");
                    }
                    disks.push(DiskUsage { disk: id.0, capacity: d.capacity, used: d.used(), chunks: d.chunk_count() });
                }
                Err(e) => {
                    if !std::mem::replace(was_failing, true) {
                        tracing::warn!(disk = id.0, path = %d.path.display(), "disk fails its health probe ({e}); left out of heartbeats");
                    }
                }
            }
        }
        let req = HeartbeatRequest { node, disks, deleted: deleted.clone(), corrupt: corrupt.clone() };
        match meta.clone().heartbeat(req).await {
            Ok(reply) => {
                deleted.clear();
                corrupt.clear();
                for c in reply.into_inner().delete {
                    let Ok(chunk) = chunk_ref(c.chunk.as_ref()) else { continue };
                    match tokio::task::block_in_place(|| store.delete(chunk, Some(DiskId(c.disk)))) {
                        Ok(_) => deleted.push(c),
                        Err(e) => tracing::warn!(%chunk, "delete failed: {e}"),
                    }
                }
                if !deleted.is_empty() {
                    ticker.reset_immediately();
                }
            }
            Err(s) if s.code() == tonic::Code::NotFound => {
                // The metadata service no longer knows this node: join again.
                match register(&meta, &meta_addr, &advertise, &store).await {
                    Ok(id) => {
                        node = id;
                        report_missing(&meta, &store).await;
                    }
                    Err(e) => tracing::warn!("re-registration failed: {e}"),
                }
            }
            Err(s) => tracing::debug!("heartbeat failed: {}", s.message()),
        }
    }
}

#[cfg(test)]
mod serve_tests;
