//! The task-client library: a typed handle on a `dingo planner` service.
//!
//! ```no_run
//! # async fn example() -> Result<(), dingo_planner_client::PlannerClientError> {
//! use dingo_planner_client::PlannerClient;
//! use dingo_types::{Declaration, DiskId, ReadSets, TaskKind, Timestamp};
//! use futures::StreamExt;
//!
//! let planner = PlannerClient::connect("127.0.0.1:7500", "secret-1")?;
//! let deadline = Timestamp(dingo_daemon::now_ms() + 3_600_000);
//! let read_sets = ReadSets::ChunksOnDisk(DiskId(0));
//! let decl = Declaration { task: TaskKind::Scrubbing, read_sets, sets_needed: None, bytes_needed: None, deadline };
//! let declared = planner.declare(&decl).await?;
//! let mut callbacks = planner.subscribe().await?;
//! while let Some(cb) = callbacks.next().await {
//!     let cb = cb?;
//!     // ... read every chunk named in cb.sets ...
//!     planner.ack(&[cb.delivery]).await?;
//! }
//! # Ok(()) }
//! ```

use crate::convert::declaration_to_wire;
use crate::status::{BudgetChange, BudgetView};
use dingo_auth::BearerCredentials;
use dingo_proto::planner as pb;
use dingo_proto::planner::planner_client::PlannerClient as Grpc;
use dingo_proto::{CONNECTION_WINDOW, MAX_MESSAGE_BYTES, STREAM_WINDOW};
use dingo_types::{Declaration, DeclarationId, TaskKind, Timestamp};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::time::Duration;
use thiserror::Error;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

#[derive(Debug, Error)]
pub enum PlannerClientError {
    /// An error status from the planner; the message says what went wrong.
    #[error("{}", .0.message())]
    Rpc(#[from] tonic::Status),
    #[error("invalid planner address `{0}`")]
    Address(String),
    #[error("the token must be printable ASCII without spaces")]
    Token,
    #[error("no planner token given (--token or DINGO_TOKEN)")]
    NoToken,
    #[error(transparent)]
    TlsFiles(#[from] dingo_tls::TlsError),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("the disk-head time of {0} ms is too large")]
    HeadTime(u64),
}

impl PlannerClientError {
    /// The gRPC code, if the error came from the planner.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            PlannerClientError::Rpc(s) => Some(s.code()),
            _ => None,
        }
    }
}

pub type Result<T, E = PlannerClientError> = std::result::Result<T, E>;

/// A declaration the planner accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub id: DeclarationId,
    /// Sets the declaration names (after resolving disk or cluster scrubs).
    pub total_sets: u64,
}

/// Callbacks as they arrive on a [`PlannerClient::subscribe`] stream. The
/// stream ends with an error (or `None`) when the planner goes away or
/// another `subscribe` of the same client replaces it; subscribe again to
/// get every unacknowledged callback re-sent.
pub type CallbackStream = BoxStream<'static, Result<pb::Callback>>;

/// A task client (or the administrator) of the planner service. Cheap to
/// clone; clones share the connection.
#[derive(Clone)]
pub struct PlannerClient {
    grpc: Grpc<InterceptedService<Channel, BearerCredentials>>,
}

impl PlannerClient {
    /// A client of the planner at `host:port` acting with `token`. Connects
    /// lazily and reconnects on its own: the first call reports an
    /// unreachable planner, and a restarted planner is reached again.
    pub fn connect(addr: &str, token: &str) -> Result<PlannerClient> {
        Self::connect_with(addr, token, None)
    }

    /// [`Self::connect`] over TLS, trusting the certificate authority in
    /// the PEM file `ca` (a planner configured with `[tls]`).
    pub fn connect_tls(addr: &str, token: &str, ca: &std::path::Path) -> Result<PlannerClient> {
        Self::connect_with(addr, token, Some(dingo_tls::client_config(ca)?))
    }

    fn connect_with(addr: &str, token: &str, tls: Option<ClientTlsConfig>) -> Result<PlannerClient> {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(PlannerClientError::Token);
        }
        let credentials = BearerCredentials::new(token).ok_or(PlannerClientError::Token)?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|_| PlannerClientError::Address(addr.to_string()))?;
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls).map_err(|e| PlannerClientError::Tls(e.to_string()))?;
        }
        let endpoint = endpoint
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW);
        let grpc = Grpc::with_interceptor(endpoint.connect_lazy(), credentials)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(PlannerClient { grpc })
    }

    /// Declares block sets (any [`dingo_types::ReadSets`] form).
    pub async fn declare(&self, decl: &Declaration) -> Result<Declared> {
        self.declare_wire(declaration_to_wire(decl)).await
    }

    /// Declares from a wire request as is (no client-side conversion).
    pub async fn declare_wire(&self, req: pb::DeclareRequest) -> Result<Declared> {
        let r = self.grpc.clone().declare(req).await?.into_inner();
        Ok(Declared { id: DeclarationId(r.declaration), total_sets: r.total_sets })
    }

    /// Declares file segments: each entry of `sets` is one block set made of
    /// the blocks holding its segments' bytes, resolved when declared.
    /// `sets_needed` and `bytes_needed` are [`Declaration`]'s.
    pub async fn declare_files(
        &self,
        task: TaskKind,
        deadline: Timestamp,
        sets_needed: Option<u64>,
        bytes_needed: Option<u64>,
        sets: Vec<Vec<pb::FileSegment>>,
    ) -> Result<Declared> {
        let req = pb::DeclareFilesRequest {
            task: task.name().to_string(),
            deadline_ms: deadline.as_millis(),
            sets_needed,
            bytes_needed,
            sets: sets.into_iter().map(|segments| pb::SegmentSet { segments }).collect(),
        };
        let r = self.grpc.clone().declare_files(req).await?.into_inner();
        Ok(Declared { id: DeclarationId(r.declaration), total_sets: r.total_sets })
    }

    /// Anticipatory elision: tells the planner the caller is about to
    /// delete `members` (whole blocks as [`dingo_types::Member::Any`],
    /// copies as exact-copy members), so every outstanding set they cover is
    /// elided instead of read. Returns the sets elided.
    pub async fn announce_deletions(&self, members: &[dingo_types::Member]) -> Result<u64> {
        let members = members.iter().copied().map(crate::convert::member_to_wire).collect();
        let r = self.grpc.clone().announce_deletions(pb::AnnounceDeletionsRequest { members }).await?.into_inner();
        Ok(r.elided_sets)
    }

    /// Opens this client's callback stream (replacing any other stream of
    /// the same client): unacknowledged callbacks first, then new ones.
    pub async fn subscribe(&self) -> Result<CallbackStream> {
        let stream = self.grpc.clone().subscribe(pb::SubscribeRequest {}).await?.into_inner();
        Ok(stream.map(|r| r.map_err(PlannerClientError::from)).boxed())
    }

    /// Acknowledges deliveries: their sets are done and never sent again.
    pub async fn ack(&self, deliveries: &[u64]) -> Result<()> {
        self.grpc.clone().ack(pb::AckRequest { deliveries: deliveries.to_vec() }).await?;
        Ok(())
    }

    /// Cancels a declaration; returns how many of its sets were delivered.
    pub async fn cancel(&self, id: DeclarationId) -> Result<u64> {
        Ok(self.grpc.clone().cancel(pb::CancelRequest { declaration: id.0 }).await?.into_inner().delivered_sets)
    }

    /// Status of the given declarations, or (empty) of every outstanding
    /// one of this client (of every client, with the admin token).
    pub async fn status(&self, ids: &[DeclarationId]) -> Result<pb::StatusReply> {
        let req = pb::StatusRequest { declarations: ids.iter().map(|d| d.0).collect() };
        Ok(self.grpc.clone().status(req).await?.into_inner())
    }

    /// Replaces the per-quantum limits given (admin token), keeping the
    /// others. Zero means unlimited.
    pub async fn set_budget(&self, cluster_bytes: Option<u64>, disk_head_time_us: Option<u64>) -> Result<()> {
        self.grpc.clone().set_budget(pb::SetBudgetRequest { cluster_bytes, disk_head_time_us }).await?;
        Ok(())
    }

    /// Makes `change` (admin token) and returns the budget now in force.
    pub async fn change_budget(&self, change: &BudgetChange) -> Result<BudgetView> {
        let head_us =
            change.disk_head_time_us().ok_or(PlannerClientError::HeadTime(change.disk_head_time_ms.unwrap_or(0)))?;
        self.set_budget(change.cluster_bytes, head_us).await?;
        Ok(BudgetView::from(self.status(&[]).await?.budget))
    }
}
