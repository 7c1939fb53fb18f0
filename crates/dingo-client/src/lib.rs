//! DINGO storage client.
//!
//! Files are written through a [`Writer`] holding the file's single-writer
//! lease. Data is cut into write units — one block for a replicated file, one
//! stripe of `k` data blocks plus `m` parity blocks for an erasure-coded one —
//! and each unit is written to every chunk location the metadata service
//! assigns, sealed on the nodes, and only then committed to the file. A
//! commit is the acknowledgement: committed bytes are on `r` nodes (or on
//! `k + m` members) and fsynced. If a node fails during a unit, the unit is
//! abandoned and rewritten elsewhere.
//!
//! Reads ([`Client::read`]) pick a replica and fall back to the others on
//! any error. Foreground reads are steered by default
//! ([`ReplicaChoice::Steering`], Sandook): a copy is drawn by weight, the
//! inverse of the read's head time on the disk's model, cut in half per RTT
//! while the disk's replies carry a congestion signal and restored over
//! time; [`Client::with_replica_choice`] selects plain random choice, the
//! baseline. Maintenance reads start at a random copy; declared reads name
//! their exact copy ([`Client::read_copy`]) and are never steered. Reads fall
//! back including a checksum error reported by the node; an
//! unreadable EC data member is rebuilt from any `k` other members of its
//! stripe. Chunks on disks or nodes marked dead are never read. Every read
//! and every chunk write carries an [`IoTag`] (writes through
//! [`Client::put_tagged`] or [`Writer::tagged`]; foreground by default), so
//! the nodes schedule a maintenance task's writes in its class.
//!
//! Maintenance primitives: [`Client::read_copy`] reads one exact copy and
//! reports corruption apart from unavailability ([`ClientError::Chunk`]);
//! [`Client::rebuild_chunk`] recreates a lost or corrupt chunk from
//! redundancy and [`Client::move_chunk`] moves one, both committing the new
//! location atomically; [`Client::lost_chunks`], [`Client::chunks_on_disk`],
//! [`Client::mark_disk_dead`] and [`Client::mark_node_dead`] feed them.

mod config;
pub mod ec;
mod fault;
mod health;
mod views;

pub use config::{ClientConfig, DEFAULT_META_ADDR};
pub use fault::DiskSlowdown;
pub use health::{
    DRAIN_STALLED_AFTER, Device, DeviceFlags, DrainError, DrainEvent, DrainProgress, DrainStatus, Health,
};
pub use views::{BlockView, ChunkView, ClusterView, DiskView, FileState, FileView, Listing, NodeView, state_name};

pub use dingo_iosched::steering::{ReplicaChoice, SteeringConfig};
pub use dingo_proto::v1::{BlockRecord, ChunkLocation, DeviceState, FileInfo};
pub use dingo_types::{IoTag, Redundancy};
pub use error::{ChunkFault, ClientError};
pub use maintenance::copy_of;
pub use read::{DataBlock, data_blocks};
pub use write::{PutOptions, Writer, open_local};

use dingo_iosched::steering::Steering;
use dingo_proto::v1::meta_client::MetaClient;
use dingo_proto::v1::node_client::NodeClient;
use dingo_proto::v1::*;
use dingo_proto::{CONNECTION_WINDOW, MAX_FRAME, MAX_MESSAGE_BYTES, STREAM_WINDOW};
use dingo_types::{BlockId, ChunkRef};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

pub use dingo_auth::ClusterAccess;

/// A channel whose every call carries the cluster secret.
pub type Authenticated = InterceptedService<Channel, dingo_auth::BearerCredentials>;
/// A client of one storage node.
pub type NodeConn = NodeClient<Authenticated>;
type MetaConn = MetaClient<Authenticated>;

/// Largest piece of a chunk sent or requested in one message.
const PIECE: usize = 8 << 20;
/// Stream pieces of a chunk write.
const WRITE_PIECE: usize = 1 << 20;
/// Attempts at writing one unit on fresh placements.
const WRITE_ATTEMPTS: usize = 3;
/// Write units of one writer in flight at once; they commit in order.
const WRITES_IN_FLIGHT: usize = 4;
/// Data a streaming put ([`Client::put_from`]) reads ahead of what the
/// nodes have sealed, at most (at least one write unit).
pub const STREAM_IN_FLIGHT_BYTES: usize = 32 << 20;
/// Block ids per `GetBlocks` request, at most.
pub const GET_BLOCKS_MAX: usize = 65_536;
/// Extents read concurrently by one [`Client::read`].
const READ_PARALLELISM: usize = 12;

/// Whether a failed metadata call may be sent again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Reads and idempotent settings: retry on any transport failure.
    Always,
    /// Mutations: retry only if the request never left (no connection), so
    /// that nothing is applied twice.
    IfNotSent,
}

/// Whether `s` was made by the client's transport (connection refused,
/// reset, protocol error) rather than sent by the service: only those carry
/// a source error.
fn is_transport(s: &tonic::Status) -> bool {
    std::error::Error::source(s).is_some()
}

/// A transport failure in one line: the status message and each distinct
/// cause below it (tonic and hyper repeat the same text at several levels).
fn describe(s: &tonic::Status) -> String {
    let mut out = s.message().to_string();
    let mut cause = std::error::Error::source(s);
    while let Some(e) = cause {
        let text = e.to_string();
        if !text.is_empty() && !out.contains(&text) {
            if out.is_empty() {
                out = text;
            } else {
                out = format!("{out}: {text}");
            }
        }
        cause = e.source();
    }
    out
}

/// Calls `$method` of the metadata service through [`Client::meta_call`].
macro_rules! meta_call {
    ($client:expr, $retry:expr, $method:ident, $req:expr) => {
        $client.meta_call(stringify!($method), $retry, $req, |mut m, r| async move { m.$method(r).await })
    };
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A lazily connecting channel to `addr`, over TLS if `access` says so,
/// sending the cluster secret with every call.
fn channel(addr: &str, access: &ClusterAccess) -> Result<Authenticated> {
    let ep = access.endpoint(addr).map_err(|_| ClientError::Address(addr.to_string()))?;
    let channel = ep
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .connect_lazy();
    Ok(InterceptedService::new(channel, access.credentials()))
}

/// How long one metadata operation may take by default, retries included.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);
/// Attempts at one metadata operation, at most.
const META_ATTEMPTS: u32 = 4;
/// Wait before the first retry; doubled before each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// A handle on the cluster. Cheap to clone (clones share connections); node
/// connections are opened on first use and kept.
#[derive(Clone)]
pub struct Client {
    meta: MetaConn,
    meta_addr: Arc<str>,
    access: ClusterAccess,
    deadline: Duration,
    nodes: Arc<Mutex<HashMap<String, NodeConn>>>,
    replica_choice: ReplicaChoice,
    steer: Arc<Mutex<SteerState>>,
}

/// How often the disk models behind the steering weights may be fetched
/// again when a read names a disk without one.
const MODEL_REFRESH: Duration = Duration::from_secs(10);

/// The client's replica-steering state, shared by its clones.
struct SteerState {
    policy: Steering,
    /// Time origin of the policy's µs clock.
    epoch: std::time::Instant,
    rng: fastrand::Rng,
    models_fetched: Option<std::time::Instant>,
}

impl SteerState {
    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

impl Client {
    /// A client of the metadata service at `host:port`, reaching it and the
    /// nodes with `access` (the cluster secret; TLS if it names an
    /// authority). Connects lazily: the first call reports an unreachable
    /// service or refused credentials. Every metadata operation has a
    /// deadline of [`DEFAULT_DEADLINE`] (see [`Client::with_deadline`]).
    pub fn new(meta_addr: &str, access: &ClusterAccess) -> Result<Client> {
        let meta = MetaClient::new(channel(meta_addr, access)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Client {
            meta,
            meta_addr: meta_addr.into(),
            access: access.clone(),
            deadline: DEFAULT_DEADLINE,
            nodes: Arc::new(Mutex::new(HashMap::new())),
            replica_choice: ReplicaChoice::default(),
            steer: Arc::new(Mutex::new(SteerState {
                policy: Steering::new(SteeringConfig::default()),
                epoch: std::time::Instant::now(),
                rng: fastrand::Rng::new(),
                models_fetched: None,
            })),
        })
    }

    /// The same client choosing copies for foreground reads by `choice`
    /// (default: [`ReplicaChoice::Steering`]).
    pub fn with_replica_choice(mut self, choice: ReplicaChoice) -> Client {
        self.replica_choice = choice;
        self
    }

    pub fn replica_choice(&self) -> ReplicaChoice {
        self.replica_choice
    }

    /// The same client with another deadline per metadata operation. An
    /// operation is tried up to 4 times (reads and idempotent settings
    /// after any transport failure or silence, mutations only when the
    /// request never left), backing off from 100 ms, and fails with
    /// [`ClientError::Service`] once the deadline has passed.
    pub fn with_deadline(mut self, deadline: Duration) -> Client {
        self.deadline = deadline;
        self
    }

    /// The metadata service's address.
    pub fn meta_addr(&self) -> &str {
        &self.meta_addr
    }

    /// One metadata operation `op` under the client's deadline, with bounded
    /// retries and backoff (see [`Client::with_deadline`]). The service's
    /// own answers (not found, refused, ...) are returned as they are.
    async fn meta_call<Q, T, F, Fut>(&self, op: &'static str, retry: Retry, req: Q, call: F) -> Result<T>
    where
        Q: Clone,
        F: Fn(MetaConn, Q) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let start = tokio::time::Instant::now();
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1.. {
            let left = self.deadline.saturating_sub(start.elapsed());
            let (code, detail, sent) = match tokio::time::timeout(left, call(self.meta.clone(), req.clone())).await {
                Ok(Ok(reply)) => return Ok(reply.into_inner()),
                Ok(Err(s)) if !is_transport(&s) => return Err(ClientError::Rpc(s)),
                Ok(Err(s)) => {
                    let detail = describe(&s);
                    // hyper's words for a connection that was never made.
                    let sent = !detail.contains("connect");
                    (s.code(), detail, sent)
                }
                Err(_) => (tonic::Code::DeadlineExceeded, format!("no answer within {:?}", self.deadline), true),
            };
            let again = attempt < META_ATTEMPTS
                && (retry == Retry::Always || !sent)
                && start.elapsed() + backoff < self.deadline;
            if !again {
                let detail = if attempt > 1 { format!("{detail} ({attempt} attempts)") } else { detail };
                return Err(ClientError::Service { op, addr: self.meta_addr.to_string(), code, detail });
            }
            tracing::debug!(op, attempt, "metadata service call failed, retrying: {detail}");
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
        unreachable!("the loop returns")
    }

    /// The gRPC client of the node at `addr`.
    pub fn node(&self, addr: &str) -> Result<NodeConn> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = nodes.get(addr) {
            return Ok(c.clone());
        }
        let c = NodeClient::new(channel(addr, &self.access)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        nodes.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Lease recovery (like HDFS' `recoverLease`): closes the unsealed file
    /// at `path` whose writer is gone, sealing it at its last committed
    /// length (returns `Some(size)`) or removing it if nothing was
    /// committed (`None`). Refused while the writer's lease is live unless
    /// `force`. A sealed file is left as it is.
    pub async fn recover(&self, path: &str, force: bool) -> Result<Option<u64>> {
        let req = RecoverFileRequest { path: path.to_string(), force };
        let r = meta_call!(self, Retry::Always, recover_file, req).await?;
        Ok(r.sealed.then_some(r.file_size))
    }

    /// The file at `path`, refusing an unsealed one unless `allow_open`:
    /// its writer may still be adding to it, or may have died.
    pub async fn stat_complete(&self, path: &str, allow_open: bool) -> Result<FileInfo> {
        let file = self.stat(path).await?;
        if !file.sealed && !allow_open {
            return Err(ClientError::Open { path: file.path, committed: file.size });
        }
        Ok(file)
    }

    pub async fn stat(&self, path: &str) -> Result<FileInfo> {
        meta_call!(self, Retry::Always, stat, StatRequest { path: path.to_string() }).await
    }

    pub async fn list(&self, prefix: &str) -> Result<Vec<FileInfo>> {
        Ok(meta_call!(self, Retry::Always, list, ListRequest { prefix: prefix.to_string() }).await?.files)
    }

    /// Deletes a file; its chunks are removed by their nodes shortly after.
    pub async fn delete(&self, path: &str) -> Result<u64> {
        Ok(meta_call!(self, Retry::IfNotSent, delete, DeleteRequest { path: path.to_string() }).await?.blocks)
    }

    pub async fn cluster_status(&self) -> Result<ClusterStatusReply> {
        meta_call!(self, Retry::Always, cluster_status, ClusterStatusRequest {}).await
    }

    /// One page of the block table, from block `start`.
    pub async fn block_table(&self, start: BlockId, limit: u32) -> Result<BlockTableReply> {
        meta_call!(self, Retry::Always, block_table, BlockTableRequest { start: start.0, limit }).await
    }

    /// Sends cache directives to the node at `addr`.
    pub async fn cache_directive(&self, addr: &str, pins: Vec<(ChunkRef, u64)>, unpins: Vec<ChunkRef>) -> Result<()> {
        let req = CacheDirectiveRequest {
            pins: pins.into_iter().map(|(c, until_ms)| Pin { chunk: Some(c.into()), until_ms }).collect(),
            unpins: unpins.into_iter().map(Into::into).collect(),
        };
        self.node(addr)?.cache_directive(req).await?;
        Ok(())
    }

    pub async fn node_stats(&self, addr: &str) -> Result<NodeStatsReply> {
        Ok(self.node(addr)?.node_stats(NodeStatsRequest {}).await?.into_inner())
    }
}

mod error;
mod maintenance;
mod read;
mod write;
