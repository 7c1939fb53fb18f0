//! The gRPC service and `run`: each call is authenticated, converted, and
//! handed to the driver as one step of the state machine.

use crate::auth::{Auth, Caller};
use crate::config::{ConfigError, ServiceConfig};
use crate::driver::{PersistJob, Shared, drive};
use crate::error::ServiceError;
use crate::files::resolve_files;
use crate::freshness::{may_be_stale, refresh_first};
use crate::outbox::{CallbackStream, STREAM_BUFFER_CALLBACKS};
use crate::records::RecordError;
use crate::state::{Ready, State};
use crate::store::{RedbStore, StoreError};
use crate::topology::{self, MetaTopology};
use dingo_client::{Client, ClientError};
use dingo_daemon::now_ms;
use dingo_planner_client::convert::{declaration_from_wire, member_from_wire};
use dingo_proto::MAX_MESSAGE_BYTES;
use dingo_proto::planner as pb;
use dingo_proto::planner::planner_server::{Planner, PlannerServer};
use dingo_types::{Declaration, MAX_BLOCK_ID, MemberBitmap};
use futures::FutureExt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("no data directory: set `data` in the config or pass --data")]
    NoDataDir,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Records(#[from] RecordError),
    #[error("metadata service: {0}")]
    Meta(#[from] ClientError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    AddrFile { path: PathBuf, source: std::io::Error },
    #[error("cannot start the persister thread: {0}")]
    Thread(std::io::Error),
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("TLS: {0}")]
    Tls(#[from] dingo_tls::TlsError),
    #[error("credentials for the storage services ([storage] in the config): {0}")]
    Storage(#[from] dingo_auth::AuthError),
    #[error("the quantum loop stopped: {0}")]
    Loop(String),
    /// A commit failed or a step panicked: memory is ahead of the store, so
    /// the process must restart from the store.
    #[error("the planner stopped: {0}")]
    Stopped(String),
}

/// Declares for `owner`, on a fresh topology when [`refresh_first`] says
/// so, and once more after a refresh when a refusal [`may_be_stale`].
async fn declare(shared: &Shared, owner: &str, decl: Declaration) -> Result<pb::DeclareReply, Status> {
    let mut refreshed = refresh_first(&decl);
    if refreshed {
        shared.refresh().await?;
    }
    let decl = Arc::new(decl);
    loop {
        let (owner, decl, now) = (owner.to_string(), decl.clone(), now_ms());
        let result = shared
            .step(move |s| match s.declare(&owner, &decl, now) {
                Ok((accepted, ready)) => (Ok(accepted), ready),
                Err(e) => (Err(e), Ready::default()),
            })
            .await?;
        match result {
            Ok(a) => return Ok(pb::DeclareReply { declaration: a.id.0, total_sets: a.total_sets }),
            Err(e) if !refreshed && may_be_stale(&e) => {
                shared.refresh().await?;
                refreshed = true;
            }
            Err(e) => return Err(Status::invalid_argument(e.to_string())),
        }
    }
}

/// A step whose refusal changes nothing (and so has nothing to persist).
fn refusable<R>(result: Result<(R, Ready), ServiceError>) -> (Result<R, ServiceError>, Ready) {
    match result {
        Ok((answer, ready)) => (Ok(answer), ready),
        Err(e) => (Err(e), Ready::default()),
    }
}

struct PlannerService(Arc<Shared>);

#[tonic::async_trait]
impl Planner for PlannerService {
    async fn declare(&self, req: Request<pb::DeclareRequest>) -> Result<Response<pb::DeclareReply>, Status> {
        let caller = Caller::of(&req)?;
        let decl = declaration_from_wire(req.get_ref()).map_err(Status::invalid_argument)?;
        Ok(Response::new(declare(&self.0, caller.client()?, decl).await?))
    }

    async fn declare_files(&self, req: Request<pb::DeclareFilesRequest>) -> Result<Response<pb::DeclareReply>, Status> {
        let caller = Caller::of(&req)?;
        caller.client()?;
        let decl = resolve_files(&self.0.meta, &self.0.meta_addr, req.get_ref()).await?;
        Ok(Response::new(declare(&self.0, caller.client()?, decl).await?))
    }

    type SubscribeStream = CallbackStream;

    async fn subscribe(&self, req: Request<pb::SubscribeRequest>) -> Result<Response<CallbackStream>, Status> {
        let caller = Caller::of(&req)?;
        let owner = caller.client()?.to_string();
        let jobs = self.0.jobs();
        let stream = self
            .0
            .step(move |s| {
                let (id, ready) = s.subscribe(&owner);
                let replay = ready.messages.iter().filter(|m| m.stream == id).count();
                let closed = jobs.clone();
                let (sink, stream) = crate::outbox::open(replay + STREAM_BUFFER_CALLBACKS, move || {
                    let _ = closed.send(PersistJob::Closed(id));
                });
                // Queued before the `Ready`, so the replay finds the stream.
                let _ = jobs.send(PersistJob::Open { stream: id, sink });
                (stream, ready)
            })
            .await?;
        Ok(Response::new(stream))
    }

    async fn ack(&self, req: Request<pb::AckRequest>) -> Result<Response<pb::AckReply>, Status> {
        let caller = Caller::of(&req)?;
        let owner = caller.client()?.to_string();
        let deliveries = req.into_inner().deliveries;
        self.0.step(move |s| refusable(s.ack(&owner, &deliveries).map(|ready| ((), ready)))).await??;
        Ok(Response::new(pb::AckReply {}))
    }

    async fn cancel(&self, req: Request<pb::CancelRequest>) -> Result<Response<pb::CancelReply>, Status> {
        let caller = Caller::of(&req)?;
        let declaration = req.get_ref().declaration;
        let delivered_sets = self.0.step(move |s| refusable(s.cancel(&caller, declaration))).await??;
        Ok(Response::new(pb::CancelReply { delivered_sets }))
    }

    async fn status(&self, req: Request<pb::StatusRequest>) -> Result<Response<pb::StatusReply>, Status> {
        let caller = Caller::of(&req)?;
        let ids = req.into_inner().declarations;
        let reply = self
            .0
            .step(move |s| {
                let reply = s.status(&caller, &ids).map(|declarations| {
                    let next_quantum_ms = s.next_quantum_ms;
                    pb::StatusReply {
                        declarations,
                        next_quantum_ms,
                        budget: Some(s.budget_at(next_quantum_ms)),
                        planned_free_bytes: s.planned_free_bytes(),
                        planned_disk_bytes: s.planned_disk_bytes(),
                        read_lower_bound_bytes: s.read_lower_bound_bytes(),
                    }
                });
                (reply, Ready::default())
            })
            .await??;
        Ok(Response::new(reply))
    }

    async fn set_budget(&self, req: Request<pb::SetBudgetRequest>) -> Result<Response<pb::SetBudgetReply>, Status> {
        if Caller::of(&req)? != Caller::Admin {
            return Err(Status::permission_denied("SetBudget needs the admin token"));
        }
        let r = req.into_inner();
        if r.cluster_bytes.is_none() && r.disk_head_time_us.is_none() {
            return Err(Status::invalid_argument(
                "SetBudget names no limit: set cluster_bytes and/or disk_head_time_us",
            ));
        }
        let budget = self.0.step(move |s| s.set_budget(r.cluster_bytes, r.disk_head_time_us)).await?;
        tracing::info!(
            cluster_bytes = budget.cluster_bytes,
            disk_head_time_us = budget.disk_head_time_us,
            "budget set"
        );
        Ok(Response::new(pb::SetBudgetReply {}))
    }

    async fn announce_deletions(
        &self,
        req: Request<pb::AnnounceDeletionsRequest>,
    ) -> Result<Response<pb::AnnounceDeletionsReply>, Status> {
        Caller::of(&req)?;
        let members = announced_members(&req.into_inner().members).map_err(Status::invalid_argument)?;
        let elided_sets = self.0.step(move |s| (s.announce_deletions(&members), Ready::default())).await?;
        Ok(Response::new(pb::AnnounceDeletionsReply { elided_sets }))
    }
}

/// Most members one `AnnounceDeletions` may name (a few bytes each).
const MAX_ANNOUNCED_MEMBERS: usize = 1_000_000;

/// The members of an `AnnounceDeletions` request, checked.
fn announced_members(members: &[pb::Member]) -> Result<MemberBitmap, String> {
    if members.len() > MAX_ANNOUNCED_MEMBERS {
        return Err(format!("{} members announced; at most {MAX_ANNOUNCED_MEMBERS} at once", members.len()));
    }
    let mut out = MemberBitmap::new();
    for m in members {
        if m.block > MAX_BLOCK_ID {
            return Err(format!("block {} is above the largest block id {MAX_BLOCK_ID}", m.block));
        }
        out.insert(member_from_wire(m)?);
    }
    Ok(out)
}

/// Runs the planner service until `shutdown` resolves: restores the stored
/// state (waiting for the metadata service if needed), listens, writes the
/// bound address to `<data>/planner.addr`, serves `/metrics` if configured,
/// and runs the quantum loop.
pub async fn run(config: ServiceConfig, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), RunError> {
    config.validate()?;
    let data = config.data.clone().ok_or(RunError::NoDataDir)?;
    let shutdown = shutdown.boxed().shared();
    let store = RedbStore::open(&data)?;
    let loaded = store.load()?;
    let meta = Client::new(&config.meta, &config.storage.access()?)?;
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
    let state = State::restore(config.clone(), loaded, topo, now_ms())?;
    let listen = config.listen_addr()?;
    // Checked before listening, so that a wrong certificate path stops the
    // start with the file's name.
    let tls = config.tls.as_ref().map(dingo_tls::server_config).transpose()?;
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|source| RunError::Listen { addr: listen, source })?;
    let bound = listener.local_addr().map_err(|source| RunError::Listen { addr: listen, source })?;
    let shared = Shared::start(state, store, meta, config.meta.clone(), config.quantum_ms).map_err(RunError::Thread)?;
    let metrics_task = match config.metrics_addr()? {
        Some(addr) => {
            let (at, task) = dingo_daemon::metrics::serve(addr, shared.metrics_registry())
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
        .serve_with_incoming_shutdown(dingo_daemon::accept_nodelay(listener), shutdown.clone());
    // Callback streams never end on their own; close them at shutdown so
    // the server's graceful stop does not wait on them.
    let closer = {
        let (jobs, shutdown) = (shared.jobs(), shutdown.clone());
        tokio::spawn(async move {
            shutdown.await;
            let _ = jobs.send(PersistJob::CloseAll);
        })
    };
    let driver = tokio::spawn(drive(shared.clone()));
    let result = tokio::select! {
        r = server => r.map_err(RunError::from),
        why = shared.stopped() => Err(RunError::Stopped(why)),
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

    /// Regression: an `AnnounceDeletions` could name any number of members,
    /// each kept in the request's bitmap; one request is now bounded, and a
    /// block id past the largest one is refused by name.
    #[test]
    fn announced_members_are_bounded_and_checked() {
        let member = |block| pb::Member { block, copy: None };
        let ok: Vec<pb::Member> = (0..3).map(member).collect();
        assert_eq!(announced_members(&ok).unwrap().len(), 3);
        let too_many = vec![member(1); MAX_ANNOUNCED_MEMBERS + 1];
        let e = announced_members(&too_many).unwrap_err();
        assert!(e.contains("at most 1000000"), "{e}");
        let e = announced_members(&[member(MAX_BLOCK_ID + 1)]).unwrap_err();
        assert!(e.contains("above the largest block id"), "{e}");
    }
}
