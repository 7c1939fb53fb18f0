//! DINGO metadata service (`dingo meta`).
//!
//! Owns the namespace (paths → ordered blocks), the dense block table (size,
//! state, redundancy group, chunk locations), nodes and disks, chunk
//! placement, single-writer leases and deletion. Durable state lives in redb
//! ([`db`]); liveness comes from node heartbeats ([`service`]).

pub mod config_file;
pub mod db;
mod error;
pub mod placement;
pub mod service;

pub use error::MetaError;

use dingo_auth::ServerSecurity;
use dingo_proto::MAX_MESSAGE_BYTES;
use dingo_proto::v1::meta_server::MetaServer;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;

/// Shortest interval between checks for writers whose lease expired.
const EXPIRY_CHECK_MIN: Duration = Duration::from_millis(100);

/// Everything the metadata service needs to run.
#[derive(Clone, Debug)]
pub struct MetaConfig {
    /// gRPC listen address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Directory of `meta.redb`; the bound address is written to `meta.addr`.
    pub data_dir: PathBuf,
    pub metrics: Option<SocketAddr>,
    /// A node is dead after this long without a heartbeat.
    pub dead_after: Duration,
    /// How long a writer's lease lasts without activity.
    pub lease_ttl: Duration,
    /// A node silent this long is marked DEAD (durably; its chunks become
    /// lost and get rebuilt). `None`: only by command.
    pub mark_dead_after: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    AddrFile { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Security(#[from] dingo_auth::AuthError),
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// Runs the metadata service until `shutdown` resolves. Every call must
/// carry the cluster secret of `security` (refused with `UNAUTHENTICATED`
/// otherwise); with its TLS files, the service serves TLS only.
pub async fn run(
    cfg: MetaConfig,
    security: ServerSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    // Before anything else, so that a wrong certificate path stops the
    // start with the file's name.
    let server = security.server(cfg.listen, "metadata service")?;
    let dir = cfg.data_dir.clone();
    let db = tokio::task::spawn_blocking(move || db::MetaDb::open(&dir))
        .await
        .map_err(|e| MetaError::Internal(e.to_string()))??;
    let service = Arc::new(service::MetaService::new(db, cfg.dead_after, cfg.lease_ttl)?);
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| RunError::Listen { addr: cfg.listen, source })?;
    let bound = listener.local_addr().map_err(|source| RunError::Listen { addr: cfg.listen, source })?;
    let addr_file = cfg.data_dir.join("meta.addr");
    std::fs::write(&addr_file, format!("{bound}\n"))
        .map_err(|source| RunError::AddrFile { path: addr_file, source })?;
    let metrics_task = match cfg.metrics {
        Some(addr) => {
            let (at, task) = dingo_daemon::metrics::serve(addr, service.clone().metrics_registry())
                .await
                .map_err(|source| RunError::Listen { addr, source })?;
            tracing::info!(%at, "metrics");
            Some(task)
        }
        None => None,
    };
    // A dead writer's blocks go within 1.5 lease lifetimes.
    let reaper = tokio::spawn(service.clone().drop_expired_writes_every((cfg.lease_ttl / 2).max(EXPIRY_CHECK_MIN)));
    let marker = cfg.mark_dead_after.map(|after| {
        let period = (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(10));
        tokio::spawn(service.clone().mark_silent_nodes_dead_every(after, period))
    });
    tracing::info!(%bound, data = %cfg.data_dir.display(), tls = security.tls.is_some(), "metadata service listening");
    let result = server
        .initial_stream_window_size(dingo_proto::STREAM_WINDOW)
        .initial_connection_window_size(dingo_proto::CONNECTION_WINDOW)
        .max_frame_size(dingo_proto::MAX_FRAME)
        .add_service(InterceptedService::new(
            MetaServer::from_arc(service)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            security.require(),
        ))
        .serve_with_incoming_shutdown(dingo_daemon::accept_nodelay(listener), shutdown)
        .await;
    reaper.abort();
    if let Some(task) = marker {
        task.abort();
    }
    if let Some(task) = metrics_task {
        task.abort();
    }
    result?;
    Ok(())
}

#[cfg(test)]
mod tests;
