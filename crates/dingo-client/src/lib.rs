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
//! carries an [`IoTag`].
//!
//! Maintenance primitives: [`Client::read_copy`] reads one exact copy and
//! reports corruption apart from unavailability ([`ClientError::Chunk`]);
//! [`Client::rebuild_chunk`] recreates a lost or corrupt chunk from
//! redundancy and [`Client::move_chunk`] moves one, both committing the new
//! location atomically; [`Client::lost_chunks`], [`Client::chunks_on_disk`],
//! [`Client::mark_disk_dead`] and [`Client::mark_node_dead`] feed them.

pub mod ec;
mod health;

pub use health::{DRAIN_STALLED_AFTER, Device, DrainError, DrainEvent, DrainProgress, DrainStatus, Health};

pub use dingo_iosched::steering::{ReplicaChoice, SteeringConfig};
pub use dingo_proto::v1::{BlockRecord, ChunkLocation, DeviceState, FileInfo};
pub use dingo_proto::{IoTag, Redundancy};

use bytes::{Buf, Bytes};
use dingo_iosched::steering::{Steering, random_order};
use dingo_proto::v1::meta_client::MetaClient;
use dingo_proto::v1::node_client::NodeClient;
use dingo_proto::v1::*;
use dingo_proto::{CONNECTION_WINDOW, MAX_FRAME, MAX_MESSAGE_BYTES, STREAM_WINDOW};
use dingo_types::{ChunkRef, DiskModel};
use futures::{Stream, StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tonic::transport::{Channel, Endpoint};

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

#[derive(Debug, Error)]
pub enum ClientError {
    /// An error status from the metadata service or a node; the message
    /// already says what went wrong.
    #[error("{}", .0.message())]
    Rpc(tonic::Status),
    #[error("invalid address `{0}`")]
    Address(String),
    #[error("read of {len} bytes at offset {offset} is past the end of {path} ({size} bytes)")]
    PastEnd { path: String, offset: u64, len: u64, size: u64 },
    #[error("{0}")]
    Unreadable(String),
    #[error("write of {path} failed after {WRITE_ATTEMPTS} attempts: {last}")]
    WriteFailed { path: String, last: String },
    #[error(transparent)]
    Ec(#[from] ec::EcError),
    /// One exact chunk copy could not be read; `fault` says why.
    #[error("{chunk} {fault}: {detail}")]
    Chunk { chunk: ChunkRef, fault: ChunkFault, detail: String },
    #[error("{0}")]
    Invalid(String),
    /// The file is not sealed: its writer is still writing, or died.
    #[error(
        "{path} is open: its writer is still writing it or died ({committed} bytes committed so far); \
         `dingo fs recover {path}` closes it at that length once its lease has expired"
    )]
    Open { path: String, committed: u64 },
    /// A local file could not be created, written or renamed.
    #[error("{0}")]
    Local(String),
    /// Writing the data out failed (e.g. the reader of a pipe went away).
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    /// The metadata service could not be reached or did not answer in time
    /// (after bounded retries): names the operation and the address once.
    #[error("{op} on the metadata service at {addr} failed: {detail}")]
    Service { op: &'static str, addr: String, code: tonic::Code, detail: String },
}

/// Why one exact chunk copy could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkFault {
    /// Its node read it and a checksum failed (`DATA_LOSS`): the copy is
    /// damaged.
    Corrupt,
    /// Its node does not have it, or the block is deleted or has no such copy.
    Missing,
    /// Its disk or node is marked dead, or its node did not answer (or
    /// failed otherwise).
    Unavailable,
}

impl std::fmt::Display for ChunkFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChunkFault::Corrupt => "is corrupt",
            ChunkFault::Missing => "is missing",
            ChunkFault::Unavailable => "is unavailable",
        })
    }
}

fn fault(chunk: ChunkRef, fault: ChunkFault, detail: impl Into<String>) -> ClientError {
    ClientError::Chunk { chunk, fault, detail: detail.into() }
}

/// Classifies the failure of a read of `chunk` from the node at `addr`.
fn read_fault(chunk: ChunkRef, addr: &str, e: ClientError) -> ClientError {
    let status = match e {
        ClientError::Rpc(s) => s,
        ClientError::Address(a) => return fault(chunk, ChunkFault::Unavailable, format!("invalid node address `{a}`")),
        other => return other,
    };
    let kind = match status.code() {
        tonic::Code::DataLoss => ChunkFault::Corrupt,
        tonic::Code::NotFound => ChunkFault::Missing,
        // The caller asked for something impossible: not the copy's fault.
        tonic::Code::OutOfRange | tonic::Code::InvalidArgument => return ClientError::Rpc(status),
        _ => ChunkFault::Unavailable,
    };
    fault(chunk, kind, format!("on {addr}: {}", status.message()))
}

/// The location of a readable `chunk` in its block's record.
fn locate(b: &BlockRecord, chunk: ChunkRef) -> Result<&ChunkLocation> {
    if b.state() == BlockState::Deleted {
        return Err(fault(chunk, ChunkFault::Missing, "its block is deleted"));
    }
    let c = b
        .chunks
        .iter()
        .find(|c| c.copy == u32::from(chunk.copy))
        .ok_or_else(|| fault(chunk, ChunkFault::Missing, "its block has no such copy"))?;
    if c.lost {
        return Err(fault(chunk, ChunkFault::Unavailable, format!("disk {} or its node is marked dead", c.disk)));
    }
    Ok(c)
}

fn chunk_of(c: &ChunkId) -> Result<ChunkRef> {
    ChunkRef::try_from(c).map_err(ClientError::Invalid)
}

fn chunk_at(b: &BlockRecord, c: &ChunkLocation) -> ChunkRef {
    ChunkRef { block: dingo_types::BlockId(b.id), copy: c.copy as u8 }
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        ClientError::Rpc(s)
    }
}

impl ClientError {
    /// The gRPC code, if the error came from a service.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            ClientError::Rpc(s) => Some(s.code()),
            ClientError::Service { code, .. } => Some(*code),
            _ => None,
        }
    }
}

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

fn channel(addr: &str) -> Result<Channel> {
    let ep = Endpoint::from_shared(format!("http://{addr}")).map_err(|_| ClientError::Address(addr.to_string()))?;
    Ok(ep
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .connect_lazy())
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
    meta: MetaClient<Channel>,
    meta_addr: Arc<str>,
    deadline: Duration,
    nodes: Arc<Mutex<HashMap<String, NodeClient<Channel>>>>,
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
    /// A client of the metadata service at `host:port`. Connects lazily: the
    /// first call reports an unreachable service. Every metadata operation
    /// has a deadline of [`DEFAULT_DEADLINE`] (see [`Client::with_deadline`]).
    pub fn new(meta_addr: &str) -> Result<Client> {
        let meta = MetaClient::new(channel(meta_addr)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(Client {
            meta,
            meta_addr: meta_addr.into(),
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
        F: Fn(MetaClient<Channel>, Q) -> Fut,
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
    pub fn node(&self, addr: &str) -> Result<NodeClient<Channel>> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = nodes.get(addr) {
            return Ok(c.clone());
        }
        let c = NodeClient::new(channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        nodes.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Creates a file and returns its writer.
    pub async fn create(&self, path: &str, redundancy: Redundancy, block_size: u64) -> Result<Writer<'_>> {
        let req = CreateFileRequest { path: path.to_string(), redundancy: Some(redundancy.into()), block_size };
        let r = meta_call!(self, Retry::IfNotSent, create_file, req).await?;
        Writer::new(self, r)
    }

    /// Takes the lease of an existing unsealed file to append to it.
    pub async fn open_append(&self, path: &str) -> Result<Writer<'_>> {
        let r = meta_call!(self, Retry::IfNotSent, open_for_append, OpenForAppendRequest { path: path.to_string() })
            .await?;
        Writer::new(self, r)
    }

    /// Creates, writes and seals a file in one go; returns its size. Whole
    /// write units are sent straight from `data`, without copying. If the
    /// write fails, the partial file is deleted (best effort; otherwise its
    /// lease expires and lease recovery closes it).
    pub async fn put(&self, path: &str, redundancy: Redundancy, block_size: u64, data: Bytes) -> Result<u64> {
        let mut w = self.create(path, redundancy, block_size).await?;
        let r = match w.append_bytes(data).await {
            Ok(()) => w.seal().await,
            Err(e) => Err(e),
        };
        self.discard_on_error(path, r).await
    }

    /// Like [`Client::put`], reading the content from `reader` in bounded
    /// memory: at most about [`STREAM_IN_FLIGHT_BYTES`] (and never fewer
    /// than one write unit) are read ahead of what the nodes have sealed.
    /// With `overwrite`, an existing file at `path` is deleted first (not
    /// atomic: between the two, `path` does not exist). `progress` is called
    /// with the bytes read so far.
    pub async fn put_from<R: tokio::io::AsyncRead + Unpin>(
        &self,
        path: &str,
        redundancy: Redundancy,
        block_size: u64,
        overwrite: bool,
        mut reader: R,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        use tokio::io::AsyncReadExt;
        if overwrite {
            match self.delete(path).await {
                Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
                other => {
                    other?;
                }
            }
        }
        let mut w = self.create(path, redundancy, block_size).await?;
        let unit = w.unit_len();
        w.max_in_flight = (STREAM_IN_FLIGHT_BYTES / unit.max(1)).clamp(1, WRITES_IN_FLIGHT);
        let r = async {
            let mut read = 0u64;
            loop {
                let mut buf = Vec::with_capacity(unit);
                while buf.len() < unit {
                    let n = (&mut reader)
                        .take((unit - buf.len()) as u64)
                        .read_to_end(&mut buf)
                        .await
                        .map_err(|e| ClientError::Invalid(format!("cannot read the data for {path}: {e}")))?;
                    if n == 0 {
                        break;
                    }
                }
                let last = buf.len() < unit;
                read += buf.len() as u64;
                if last {
                    w.append_and_flush(Bytes::from(buf)).await?;
                } else {
                    w.append_bytes(Bytes::from(buf)).await?;
                }
                progress(read);
                if last {
                    break;
                }
            }
            w.seal().await
        }
        .await;
        self.discard_on_error(path, r).await
    }

    /// Deletes the partial file of a failed put (best effort), passing the
    /// result on.
    async fn discard_on_error(&self, path: &str, r: Result<u64>) -> Result<u64> {
        if let Err(e) = &r {
            tracing::debug!(path, "put failed ({e}); deleting the partial file");
            if let Err(d) = self.delete(path).await {
                tracing::warn!(path, "cannot delete the partial file of a failed put: {d}");
            }
        }
        r
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

    /// Reads a range of the file at `path` (see [`Client::stat_complete`]
    /// for `allow_open`) into the local file `local`, atomically: the data
    /// goes to a temporary file beside it, renamed over `local` only once
    /// all of it is written and synced. On failure `local` is untouched and
    /// the temporary file removed. `len` `None`: to the end. `progress` is
    /// called with the bytes written so far. Returns the bytes written.
    pub async fn download(
        &self,
        path: &str,
        local: &std::path::Path,
        offset: u64,
        len: Option<u64>,
        allow_open: bool,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        let file = self.stat_complete(path, allow_open).await?;
        let len = len.unwrap_or_else(|| file.size.saturating_sub(offset));
        let local_err = |what: &str, e: std::io::Error| ClientError::Local(format!("{what} {}: {e}", local.display()));
        let dir = match local.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let name = local.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".dingo-part")
            .tempfile_in(dir)
            .map_err(|e| local_err("cannot create a temporary file beside", e))?;
        let mut out = tmp.as_file();
        let n = self.read_to(&file, offset, len, &mut out, progress).await?;
        out.sync_all().map_err(|e| local_err("cannot write", e))?;
        tmp.persist(local).map_err(|e| local_err("cannot rename the temporary file to", e.error))?;
        Ok(n)
    }

    /// Reads a range of `file` into `out`, piece by piece in file order
    /// (bounded memory). `progress` is called with the bytes written so far.
    pub async fn read_to(
        &self,
        file: &FileInfo,
        offset: u64,
        len: u64,
        out: &mut impl std::io::Write,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        let mut pieces = self.read_pieces(file, offset, len, IoTag::Foreground)?;
        let mut done = 0;
        while let Some(piece) = pieces.try_next().await? {
            out.write_all(&piece).map_err(ClientError::Output)?;
            done += piece.len() as u64;
            progress(done);
        }
        out.flush().map_err(ClientError::Output)?;
        Ok(done)
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

    /// One page of the block table, from block id `start`.
    pub async fn block_table(&self, start: u64, limit: u32) -> Result<BlockTableReply> {
        meta_call!(self, Retry::Always, block_table, BlockTableRequest { start, limit }).await
    }

    /// Reads a range of one exact chunk copy from the node at `addr`: no
    /// fallback, as scrubbing a specific copy needs.
    pub async fn read_chunk(&self, addr: &str, chunk: ChunkRef, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        Ok(self.read_chunk_signalled(addr, chunk, offset, len, tag).await?.0)
    }

    /// [`Client::read_chunk`], also returning whether the node said the
    /// chunk's disk is congested (in any reply, for reads in pieces).
    async fn read_chunk_signalled(
        &self,
        addr: &str,
        chunk: ChunkRef,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, bool)> {
        let mut out = bytes::BytesMut::new();
        let mut pos = offset;
        let mut congested = false;
        loop {
            let n = (offset + len - pos).min(PIECE as u64);
            let req = ReadChunkRequest { chunk: Some(chunk.into()), offset: pos, len: n, io_class: Some(tag.into()) };
            let reply = self.node(addr)?.read_chunk(req).await?.into_inner();
            congested |= reply.congestion.is_some_and(|c| c.congested);
            if n == len {
                return Ok((reply.data, congested));
            }
            out.extend_from_slice(&reply.data);
            pos += n;
            if pos == offset + len {
                return Ok((out.freeze(), congested));
            }
        }
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

    /// Reads `len` bytes at `offset` of a file.
    pub async fn read(&self, path: &str, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        let file = self.stat(path).await?;
        self.read_file(&file, offset, len, tag).await
    }

    /// Reads the whole file.
    pub async fn read_all(&self, path: &str, tag: IoTag) -> Result<Bytes> {
        let file = self.stat(path).await?;
        self.read_file(&file, 0, file.size, tag).await
    }

    /// Reads a range of a file already looked up with [`Client::stat`].
    pub async fn read_file(&self, file: &FileInfo, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        let pieces: Vec<Bytes> = self.read_pieces(file, offset, len, tag)?.try_collect().await?;
        Ok(if pieces.len() == 1 { pieces.into_iter().next().expect("one") } else { pieces.concat().into() })
    }

    /// Reads a range of a file as a stream of pieces in file order (each at
    /// most one block or 8 MiB), with several pieces in flight. Unlike
    /// [`Client::read_file`] it never copies the data into one buffer, so a
    /// caller that consumes pieces as they come reads any size in bounded
    /// memory.
    pub fn read_pieces<'a>(
        &'a self,
        file: &'a FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<impl Stream<Item = Result<Bytes>> + 'a> {
        let end = offset.checked_add(len).filter(|&e| e <= file.size);
        if end.is_none() {
            return Err(ClientError::PastEnd { path: file.path.clone(), offset, len, size: file.size });
        }
        let extents = extents(file, offset, len)?;
        Ok(futures::stream::iter(extents.into_iter().map(move |e| self.read_extent(e, tag))).buffered(READ_PARALLELISM))
    }

    /// Reads `len` bytes at `offset` of a file already looked up, a range
    /// inside one block, and says which disk served it (`None`: rebuilt
    /// from the rest of its EC stripe). For experiments that attribute
    /// latency to disks.
    pub async fn read_traced(
        &self,
        file: &FileInfo,
        offset: u64,
        len: u64,
        tag: IoTag,
    ) -> Result<(Bytes, Option<u32>)> {
        if offset.checked_add(len).is_none_or(|end| end > file.size) {
            return Err(ClientError::PastEnd { path: file.path.clone(), offset, len, size: file.size });
        }
        let mut extents = extents(file, offset, len)?;
        match (extents.pop(), extents.is_empty()) {
            (Some(e), true) => self.read_extent_from(e, tag).await,
            _ => Err(ClientError::Invalid(format!("{} bytes at offset {offset} span more than one block", len))),
        }
    }

    async fn read_extent(&self, e: Extent<'_>, tag: IoTag) -> Result<Bytes> {
        Ok(self.read_extent_from(e, tag).await?.0)
    }

    /// The order in which to try the copies of `b` for a read of `len`
    /// bytes tagged `tag`: steered for foreground reads, else a random
    /// start, then the others in order.
    async fn copy_order(&self, b: &BlockRecord, len: u64, tag: IoTag) -> Vec<usize> {
        let steer = matches!(tag, IoTag::Foreground) && self.replica_choice == ReplicaChoice::Steering;
        if steer {
            self.ensure_models(b).await;
        }
        let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
        if steer {
            let disks: Vec<u32> = b.chunks.iter().map(|c| c.disk).collect();
            let now_us = st.now_us();
            let SteerState { policy, rng, .. } = &mut *st;
            return policy.order(&disks, len, now_us, rng);
        }
        random_order(b.chunks.len(), &mut st.rng)
    }

    /// Fetches the disks' models for the steering weights on first use,
    /// and again (at most every [`MODEL_REFRESH`]) when `b` has a copy on a
    /// disk without one. Without an answer, disks count as the default HDD.
    async fn ensure_models(&self, b: &BlockRecord) {
        let due = {
            let st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
            let unknown = b.chunks.iter().any(|c| !st.policy.knows(c.disk));
            unknown && st.models_fetched.is_none_or(|t| t.elapsed() >= MODEL_REFRESH)
        };
        if !due {
            return;
        }
        let status = self.cluster_status().await;
        let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
        st.models_fetched = Some(std::time::Instant::now());
        match status {
            Ok(status) => {
                for d in status.nodes.iter().flat_map(|n| &n.disks) {
                    if let Some(m) = d.model.filter(|m| m.transfer_bytes_per_sec > 0) {
                        let model = DiskModel {
                            positioning_us: m.positioning_us,
                            transfer_bytes_per_sec: m.transfer_bytes_per_sec,
                        };
                        st.policy.set_model(d.id, model);
                    }
                }
            }
            Err(e) => tracing::debug!("no disk models for replica steering: {e}"),
        }
    }

    async fn read_extent_from(&self, e: Extent<'_>, tag: IoTag) -> Result<(Bytes, Option<u32>)> {
        let b = e.block;
        let order = self.copy_order(b, e.len, tag).await;
        let mut errors = Vec::new();
        for i in order {
            let c = &b.chunks[i];
            let chunk = chunk_at(b, c);
            if c.lost {
                errors.push(format!("{chunk} is on a disk or node marked dead"));
                continue;
            }
            match self.read_chunk_signalled(&c.addr, chunk, e.offset, e.len, tag).await {
                Ok((d, congested)) => {
                    let mut st = self.steer.lock().unwrap_or_else(|p| p.into_inner());
                    let now_us = st.now_us();
                    st.policy.on_reply(c.disk, congested, now_us);
                    return Ok((d, Some(c.disk)));
                }
                Err(err) => {
                    tracing::warn!(%chunk, node = %c.addr, "read failed, trying redundancy: {err}");
                    errors.push(format!("{chunk} on {}: {err}", c.addr));
                }
            }
        }
        if let Some(stripe) = e.stripe {
            let full = self.rebuild_member(stripe, e.member, tag).await.map_err(|err| {
                ClientError::Unreadable(format!(
                    "block {} unreadable ({}) and not rebuildable: {err}",
                    b.id,
                    errors.join("; ")
                ))
            })?;
            return Ok((full.slice(e.offset as usize..(e.offset + e.len) as usize), None));
        }
        Err(ClientError::Unreadable(format!("block {} has no readable copy: {}", b.id, errors.join("; "))))
    }

    /// Degraded read: rebuilds data member `want` of a stripe from any `k`
    /// other members.
    async fn rebuild_member(&self, stripe: &[BlockRecord], want: usize, tag: IoTag) -> Result<Bytes> {
        let order: Vec<usize> = (0..stripe.len()).filter(|&j| j != want).collect();
        Ok(self.rebuild_stripe_member(stripe, want, &order, tag).await?.into())
    }

    /// Rebuilds member `want` (data or parity) of a stripe, reading whole
    /// members in the order `order` (member indexes) until `k` are in hand,
    /// `k` reads at a time.
    async fn rebuild_stripe_member(
        &self,
        stripe: &[BlockRecord],
        want: usize,
        order: &[usize],
        tag: IoTag,
    ) -> Result<Vec<u8>> {
        let (k, m) = match Redundancy::try_from(stripe[0].redundancy.as_ref()) {
            Ok(Redundancy::Ec { data, parity }) if stripe.len() == usize::from(data) + usize::from(parity) => {
                (usize::from(data), usize::from(parity))
            }
            _ => return Err(ClientError::Unreadable(format!("block {} is not in a complete stripe", stripe[0].id))),
        };
        let mut members: Vec<Option<Bytes>> = vec![None; k + m];
        let (mut have, mut next) = (0, 0);
        let mut errors = Vec::new();
        while have < k && next < order.len() {
            let batch = &order[next..(next + k - have).min(order.len())];
            next += batch.len();
            let reads = futures::future::join_all(batch.iter().map(|&j| async move {
                let b = &stripe[j];
                let chunk = ChunkRef { block: dingo_types::BlockId(b.id), copy: 0 };
                let r = match locate(b, chunk) {
                    Ok(c) => {
                        self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
                    }
                    Err(e) => Err(e),
                };
                (j, r)
            }))
            .await;
            for (j, r) in reads {
                match r {
                    Ok(d) => {
                        members[j] = Some(d);
                        have += 1;
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
        }
        if have < k {
            return Err(ClientError::Unreadable(format!(
                "only {have} of the {k} members needed are readable: {}",
                errors.join("; ")
            )));
        }
        let view: Vec<Option<&[u8]>> = members.iter().map(|m| m.as_deref()).collect();
        let sizes: Vec<usize> = stripe.iter().map(|b| b.size as usize).collect();
        Ok(ec::rebuild(&view, k, m, &sizes, want)?)
    }

    /// Streams one chunk to a node and has it sealed.
    async fn write_chunk(&self, addr: &str, chunk: ChunkRef, disk: u32, data: Bytes) -> Result<()> {
        let total_len = data.len() as u64;
        let pieces = data.len().div_ceil(WRITE_PIECE).max(1);
        let msgs: Vec<WriteChunkRequest> = (0..pieces)
            .map(|i| WriteChunkRequest {
                chunk: (i == 0).then(|| chunk.into()),
                disk,
                data: data.slice(i * WRITE_PIECE..((i + 1) * WRITE_PIECE).min(data.len())),
                seal: i + 1 == pieces,
                total_len,
            })
            .collect();
        self.node(addr)?.write_chunk(tokio_stream::iter(msgs)).await?;
        Ok(())
    }

    // ------------------------------------------------ maintenance primitives

    /// Block records by id (deleted ones too), in the order given, with chunk
    /// addresses and `lost` flags filled in. At most 65 536 ids per call.
    pub async fn blocks(&self, ids: &[u64]) -> Result<Vec<BlockRecord>> {
        Ok(meta_call!(self, Retry::Always, get_blocks, GetBlocksRequest { ids: ids.to_vec() }).await?.blocks)
    }

    async fn block(&self, id: u64) -> Result<BlockRecord> {
        self.blocks(&[id]).await?.pop().ok_or_else(|| ClientError::Unreadable(format!("block {id} not returned")))
    }

    /// Reads `len` bytes at `offset` of exactly copy `copy` of `block` (for
    /// an EC member: copy 0, the block id naming the member), tagged `tag`.
    /// No fallback: a failure is a [`ClientError::Chunk`] whose
    /// [`ChunkFault`] tells a damaged copy (`Corrupt`: checksum mismatch)
    /// from a missing or unreachable one. A range past the copy's end is
    /// an `OUT_OF_RANGE` [`ClientError::Rpc`].
    pub async fn read_copy(&self, block: u64, copy: u32, offset: u64, len: u64, tag: IoTag) -> Result<Bytes> {
        let b = self.block(block).await?;
        let chunk = ChunkRef {
            block: dingo_types::BlockId(block),
            copy: u8::try_from(copy).map_err(|_| ClientError::Invalid(format!("copy index {copy} out of range")))?,
        };
        let c = locate(&b, chunk)?;
        self.read_chunk(&c.addr, chunk, offset, len, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
    }

    /// Chunks of sealed blocks located on `disk`, per the metadata service.
    pub async fn chunks_on_disk(&self, disk: u32) -> Result<Vec<ChunkRef>> {
        let r = meta_call!(self, Retry::Always, chunks_on_disk, ChunksOnDiskRequest { disk }).await?;
        r.chunks.iter().map(chunk_of).collect()
    }

    /// Marks a disk LIVE or DEAD (durably). A dead disk's chunks are lost:
    /// never read or placed on again, listed by [`Client::lost_chunks`].
    pub async fn set_disk_state(&self, disk: u32, state: DeviceState) -> Result<()> {
        meta_call!(self, Retry::Always, set_disk_state, SetDiskStateRequest { disk, state: state.into() }).await?;
        Ok(())
    }

    /// Marks a node LIVE or DEAD (durably); a dead node's disks are lost.
    pub async fn set_node_state(&self, node: u32, state: DeviceState) -> Result<()> {
        meta_call!(self, Retry::Always, set_node_state, SetNodeStateRequest { node, state: state.into() }).await?;
        Ok(())
    }

    pub async fn mark_disk_dead(&self, disk: u32) -> Result<()> {
        self.set_disk_state(disk, DeviceState::Dead).await
    }

    pub async fn mark_node_dead(&self, node: u32) -> Result<()> {
        self.set_node_state(node, DeviceState::Dead).await
    }

    /// Chunks of sealed blocks whose disk is marked dead or whose disk's
    /// node is marked dead.
    pub async fn lost_chunks(&self) -> Result<Vec<ChunkRef>> {
        let r = meta_call!(self, Retry::Always, lost_chunks, LostChunksRequest {}).await?;
        r.chunks.iter().map(|c| chunk_of(c.chunk.as_ref().unwrap_or(&ChunkId::default()))).collect()
    }

    /// A sealed block and the current location of `chunk` in it.
    async fn sealed_location(&self, chunk: ChunkRef) -> Result<(BlockRecord, ChunkLocation)> {
        let b = self.block(chunk.block.0).await?;
        match b.state() {
            BlockState::Sealed => {}
            BlockState::Deleted => return Err(fault(chunk, ChunkFault::Missing, "its block is deleted")),
            BlockState::Open => return Err(ClientError::Invalid(format!("block {} is still being written", b.id))),
        }
        let c = b
            .chunks
            .iter()
            .find(|c| c.copy == u32::from(chunk.copy))
            .cloned()
            .ok_or_else(|| fault(chunk, ChunkFault::Missing, "its block has no such copy"))?;
        Ok((b, c))
    }

    /// Recreates the content of a lost or corrupt `chunk` from redundancy —
    /// any other good copy of a replicated block; any `k` other members of an
    /// EC stripe, decoded — reading `sources` if given (the planner's choice,
    /// tried in order) or choosing itself. The new copy goes to a disk the
    /// metadata service picks (live; on a node holding no other chunk of the
    /// block or stripe when possible; weighted by free space), its location
    /// replaces the old one atomically (failing cleanly if the block was
    /// deleted or the chunk moved meanwhile, the new copy then being
    /// deleted), and the old copy is deleted if its node answers. All source
    /// reads carry `tag`. Returns the new location.
    pub async fn rebuild_chunk(&self, chunk: ChunkRef, sources: &[ChunkRef], tag: IoTag) -> Result<ChunkLocation> {
        let (b, old) = self.sealed_location(chunk).await?;
        let redundancy = Redundancy::try_from(b.redundancy.as_ref()).map_err(ClientError::Invalid)?;
        if sources.contains(&chunk) {
            return Err(ClientError::Invalid(format!("{chunk} cannot be a source for rebuilding itself")));
        }
        let data: Bytes = match redundancy {
            Redundancy::Replicated(_) => {
                let mut copies: Vec<&ChunkLocation> = b.chunks.iter().filter(|c| c.copy != old.copy).collect();
                fastrand::shuffle(&mut copies);
                if !sources.is_empty() {
                    copies = sources
                        .iter()
                        .map(|s| {
                            b.chunks.iter().find(|c| s.block == chunk.block && c.copy == u32::from(s.copy)).ok_or_else(
                                || ClientError::Invalid(format!("{s} is not a copy of block {}", chunk.block.0)),
                            )
                        })
                        .collect::<Result<_>>()?;
                }
                self.read_any_copy(&b, &copies, tag).await?
            }
            Redundancy::Ec { data, parity } => {
                let stripe =
                    self.blocks(&(b.group..b.group + u64::from(data) + u64::from(parity)).collect::<Vec<_>>()).await?;
                let want = b.ec_index as usize;
                let order: Vec<usize> = if sources.is_empty() {
                    (0..stripe.len()).filter(|&j| j != want).collect()
                } else {
                    sources
                        .iter()
                        .map(|s| {
                            stripe.iter().position(|m| m.id == s.block.0 && s.copy == 0).ok_or_else(|| {
                                ClientError::Invalid(format!("{s} is not a member of the stripe of {chunk}"))
                            })
                        })
                        .collect::<Result<_>>()?
                };
                self.rebuild_stripe_member(&stripe, want, &order, tag).await?.into()
            }
        };
        if data.len() as u64 != b.size {
            return Err(ClientError::Unreadable(format!(
                "{chunk}: rebuilt {} bytes, block has {}",
                data.len(),
                b.size
            )));
        }
        self.relocate(chunk, &old, data, None, false).await
    }

    /// The whole content of the first readable copy among `copies`.
    async fn read_any_copy(&self, b: &BlockRecord, copies: &[&ChunkLocation], tag: IoTag) -> Result<Bytes> {
        let mut errors = Vec::new();
        for c in copies {
            let chunk = chunk_at(b, c);
            let r = match locate(b, chunk) {
                Ok(c) => {
                    self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(d) => return Ok(d),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(ClientError::Unreadable(format!("block {} has no readable source copy: {}", b.id, errors.join("; "))))
    }

    /// Moves the exact copy `chunk` (read tagged `tag`) to `to_disk`, or to
    /// the disk with the most free space on a node holding no other chunk of
    /// the block or stripe (when possible); commits the new location as
    /// [`Client::rebuild_chunk`] does and deletes the old copy. A damaged
    /// copy fails with [`ChunkFault::Corrupt`]: rebuild it instead.
    pub async fn move_chunk(&self, chunk: ChunkRef, to_disk: Option<u32>, tag: IoTag) -> Result<ChunkLocation> {
        let (b, old) = self.sealed_location(chunk).await?;
        let c = locate(&b, chunk)?;
        let data = self.read_chunk(&c.addr, chunk, 0, b.size, tag).await.map_err(|e| read_fault(chunk, &c.addr, e))?;
        self.relocate(chunk, &old, data, to_disk, true).await
    }

    /// Writes `data` as a new copy of `chunk` on `to_disk` or a disk the
    /// metadata service picks (retrying elsewhere if a node fails), replaces
    /// the location `old` with it, then deletes the old copy (best effort).
    async fn relocate(
        &self,
        chunk: ChunkRef,
        old: &ChunkLocation,
        data: Bytes,
        to_disk: Option<u32>,
        emptiest: bool,
    ) -> Result<ChunkLocation> {
        let mut exclude = Vec::new();
        let mut last = String::new();
        for _ in 0..WRITE_ATTEMPTS {
            let req = PlaceChunkRequest {
                chunk: Some(chunk.into()),
                disk: to_disk,
                exclude_nodes: exclude.clone(),
                emptiest,
            };
            let new = meta_call!(self, Retry::IfNotSent, place_chunk, req).await?;
            if let Err(e) = self.write_chunk(&new.addr, chunk, new.disk, data.clone()).await {
                last = format!("{chunk} on {}: {e}", new.addr);
                tracing::warn!("writing a new copy failed: {last}");
                if to_disk.is_some() {
                    break;
                }
                exclude.push(new.node);
                continue;
            }
            let req = ReplaceChunkRequest { chunk: Some(chunk.into()), old_disk: old.disk, new_disk: new.disk };
            if let Err(s) = meta_call!(self, Retry::IfNotSent, replace_chunk, req).await {
                // The metadata service queued the new copy for deletion too.
                self.delete_copy(&new.addr, chunk, new.disk).await;
                return Err(s);
            }
            self.delete_copy(&old.addr, chunk, old.disk).await;
            return Ok(new);
        }
        Err(ClientError::WriteFailed { path: chunk.to_string(), last })
    }

    /// Deletes copy `chunk` on disk `disk` of the node at `addr` if the node
    /// answers within a moment. Best effort: the metadata service has queued
    /// the deletion for the node's next heartbeat anyway.
    async fn delete_copy(&self, addr: &str, chunk: ChunkRef, disk: u32) {
        let Ok(mut node) = self.node(addr) else { return };
        let req = DeleteChunkRequest { chunk: Some(chunk.into()), disk: Some(disk) };
        match tokio::time::timeout(Duration::from_secs(2), node.delete_chunk(req)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!(%chunk, node = addr, "delete failed: {}", e.message()),
            Err(_) => tracing::debug!(%chunk, node = addr, "delete timed out"),
        }
    }
}

/// A piece of a read: `len` bytes at `offset` of one block. EC data members
/// carry their stripe (all `k + m` blocks) for degraded reads.
struct Extent<'f> {
    block: &'f BlockRecord,
    offset: u64,
    len: u64,
    stripe: Option<&'f [BlockRecord]>,
    member: usize,
}

/// A block holding file bytes: `block` starts at `offset` in the file.
/// EC data members carry their stripe (all `k + m` blocks) and their index
/// in it, for degraded reads.
pub struct DataBlock<'f> {
    pub offset: u64,
    pub block: &'f BlockRecord,
    stripe: Option<&'f [BlockRecord]>,
    member: usize,
}

/// The blocks that hold a file's bytes, in file order: every block of a
/// replicated file, the data members of each EC stripe (parity members hold
/// no file bytes).
pub fn data_blocks(file: &FileInfo) -> Result<Vec<DataBlock<'_>>> {
    let redundancy = Redundancy::try_from(file.redundancy.as_ref()).map_err(ClientError::Unreadable)?;
    // (block, its stripe, member index) in logical order.
    let blocks: Vec<(&BlockRecord, Option<&[BlockRecord]>, usize)> = match redundancy {
        Redundancy::Replicated(_) => file.blocks.iter().map(|b| (b, None, 0)).collect(),
        Redundancy::Ec { data, parity } => {
            let width = usize::from(data) + usize::from(parity);
            if !file.blocks.len().is_multiple_of(width) {
                return Err(ClientError::Unreadable(format!("{} has an incomplete stripe", file.path)));
            }
            file.blocks
                .chunks(width)
                .flat_map(|s| s[..usize::from(data)].iter().enumerate().map(move |(i, b)| (b, Some(s), i)))
                .collect()
        }
    };
    let mut offset = 0;
    Ok(blocks
        .into_iter()
        .map(|(block, stripe, member)| {
            let d = DataBlock { offset, block, stripe, member };
            offset += block.size;
            d
        })
        .collect())
}

/// Splits a file range into per-block extents of at most [`PIECE`] bytes.
fn extents(file: &FileInfo, offset: u64, len: u64) -> Result<Vec<Extent<'_>>> {
    let end = offset + len;
    let mut out = Vec::new();
    for d in data_blocks(file)? {
        let (b_start, b_end) = (d.offset, d.offset + d.block.size);
        let (s, e) = (offset.max(b_start), end.min(b_end));
        let mut at = s;
        while at < e {
            let n = (e - at).min(PIECE as u64);
            out.push(Extent { block: d.block, offset: at - b_start, len: n, stripe: d.stripe, member: d.member });
            at += n;
        }
    }
    Ok(out)
}

/// Writes one file. Data is acknowledged unit by unit (see the crate docs):
/// up to [`WRITES_IN_FLIGHT`] units are written at once, and they are
/// committed strictly in order, so the file never has holes.
/// [`Writer::seal`] writes the remainder and makes the file immutable.
pub struct Writer<'c> {
    client: &'c Client,
    unit: UnitWriter,
    buf: Vec<u8>,
    size: u64,
    in_flight: VecDeque<tokio::task::JoinHandle<Result<Vec<BlockSize>>>>,
    /// Write units in flight at most.
    max_in_flight: usize,
}

impl<'c> Writer<'c> {
    fn new(client: &'c Client, r: OpenFileReply) -> Result<Self> {
        let file = r.file.unwrap_or_default();
        let redundancy = Redundancy::try_from(file.redundancy.as_ref()).map_err(ClientError::Unreadable)?;
        let unit = UnitWriter {
            client: client.clone(),
            path: file.path,
            lease: r.lease,
            redundancy,
            block_size: file.block_size,
        };
        Ok(Writer {
            client,
            unit,
            buf: Vec::new(),
            size: file.size,
            in_flight: VecDeque::new(),
            max_in_flight: WRITES_IN_FLIGHT,
        })
    }

    /// Bytes in one write unit.
    fn unit_len(&self) -> usize {
        let k = match self.unit.redundancy {
            Redundancy::Replicated(_) => 1,
            Redundancy::Ec { data, .. } => u64::from(data),
        };
        (self.unit.block_size * k) as usize
    }

    /// Acknowledged (committed) file size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Buffers data and starts writing every complete unit.
    pub async fn append(&mut self, data: impl AsRef<[u8]>) -> Result<()> {
        let mut data = data.as_ref();
        while !data.is_empty() {
            let n = self.buffer(data);
            data = &data[n..];
            self.start_full_unit().await?;
        }
        Ok(())
    }

    /// Like [`Writer::append`], but whole units that start at a unit
    /// boundary are written straight from `data` (shared, not copied).
    pub async fn append_bytes(&mut self, mut data: Bytes) -> Result<()> {
        let unit = self.unit_len();
        while !data.is_empty() {
            if self.buf.is_empty() && data.len() >= unit {
                self.start_unit(data.split_to(unit)).await?;
                continue;
            }
            let n = self.buffer(&data);
            data.advance(n);
            self.start_full_unit().await?;
        }
        Ok(())
    }

    /// [`Writer::append_bytes`], then [`Writer::flush`]. With nothing
    /// buffered, a short `data` is written straight as the last unit instead
    /// of being copied into a unit-sized buffer first (a wide EC stripe's
    /// buffer is 48 MB).
    pub async fn append_and_flush(&mut self, data: Bytes) -> Result<()> {
        if self.buf.is_empty() && !data.is_empty() && data.len() < self.unit_len() {
            self.start_unit(data).await?;
        } else {
            self.append_bytes(data).await?;
        }
        self.flush().await
    }

    /// Copies as much of `data` as fits into the unit being filled; returns
    /// how much. The buffer is allocated once per unit at its full size.
    fn buffer(&mut self, data: &[u8]) -> usize {
        let unit = self.unit_len();
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(unit);
        }
        let n = (unit - self.buf.len()).min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        n
    }

    /// Starts writing the buffered unit if it is complete.
    async fn start_full_unit(&mut self) -> Result<()> {
        if self.buf.len() < self.unit_len() {
            return Ok(());
        }
        let data = Bytes::from(std::mem::take(&mut self.buf));
        self.start_unit(data).await
    }

    async fn start_unit(&mut self, data: Bytes) -> Result<()> {
        if self.in_flight.len() >= self.max_in_flight {
            self.commit_next().await?;
        }
        self.in_flight.push_back(tokio::spawn(self.unit.clone().write(data)));
        Ok(())
    }

    /// Waits for the oldest unit in flight and commits it.
    async fn commit_next(&mut self) -> Result<()> {
        let Some(task) = self.in_flight.pop_front() else { return Ok(()) };
        let blocks = task.await.map_err(|e| ClientError::Unreadable(format!("write task failed: {e}")))??;
        let req = CommitBlocksRequest { path: self.unit.path.clone(), lease: self.unit.lease, blocks };
        self.size = meta_call!(self.client, Retry::IfNotSent, commit_blocks, req).await?.file_size;
        Ok(())
    }

    /// Writes buffered data as a (possibly short) unit and commits every
    /// unit: on return, everything appended is acknowledged.
    pub async fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let data = Bytes::from(std::mem::take(&mut self.buf));
            self.start_unit(data).await?;
        }
        while !self.in_flight.is_empty() {
            self.commit_next().await?;
        }
        Ok(())
    }

    /// Writes buffered data, then seals the file. Returns its size.
    pub async fn seal(mut self) -> Result<u64> {
        self.flush().await?;
        let req = SealFileRequest { path: self.unit.path.clone(), lease: self.unit.lease };
        Ok(meta_call!(self.client, Retry::IfNotSent, seal_file, req).await?.file_size)
    }
}

/// What a write-unit task needs; owned so the task can run on its own.
#[derive(Clone)]
struct UnitWriter {
    client: Client,
    path: String,
    lease: u64,
    redundancy: Redundancy,
    block_size: u64,
}

impl UnitWriter {
    /// Writes one unit's chunks, retrying on fresh placements if nodes fail.
    /// Returns the blocks to commit.
    async fn write(self, data: Bytes) -> Result<Vec<BlockSize>> {
        let mut exclude = Vec::new();
        let mut last = String::new();
        for _ in 0..WRITE_ATTEMPTS {
            match self.attempt(&data, &mut exclude).await {
                Ok(blocks) => return Ok(blocks),
                // The metadata service's refusals (sealed, lease, no space)
                // will not change on retry.
                Err(UnitError::Meta(e)) => return Err(e),
                Err(UnitError::Nodes(e)) => last = e,
            }
        }
        Err(ClientError::WriteFailed { path: self.path.clone(), last })
    }

    /// One attempt: allocate and write all chunks. Nodes that fail are added
    /// to `exclude` for the next attempt.
    async fn attempt(&self, data: &Bytes, exclude: &mut Vec<u32>) -> Result<Vec<BlockSize>, UnitError> {
        let (chunks, sizes): (Vec<Bytes>, Vec<u64>) = match self.redundancy {
            Redundancy::Replicated(_) => (vec![data.clone()], vec![data.len() as u64]),
            Redundancy::Ec { data: k, parity: m } => {
                let (k, m) = (usize::from(k), usize::from(m));
                let d = data.clone();
                let parity = tokio::task::spawn_blocking(move || ec::encode(&d, k, m))
                    .await
                    .map_err(|e| UnitError::Meta(ClientError::Unreadable(e.to_string())))?
                    .map_err(|e| UnitError::Meta(e.into()))?;
                let mut c: Vec<Bytes> = (0..k).map(|i| data.slice(ec::member_range(data.len(), k, i))).collect();
                c.extend(parity.into_iter().map(Bytes::from));
                let sizes = c.iter().map(|b| b.len() as u64).collect();
                (c, sizes)
            }
        };
        let chunk_bytes = sizes.iter().copied().max().unwrap_or(0);
        let req = AllocateBlocksRequest {
            path: self.path.clone(),
            lease: self.lease,
            chunk_bytes,
            exclude_nodes: exclude.clone(),
        };
        let blocks =
            meta_call!(self.client, Retry::IfNotSent, allocate_blocks, req).await.map_err(UnitError::Meta)?.blocks;
        // (block index, location) of every chunk to write.
        let writes = blocks.iter().enumerate().flat_map(|(i, b)| b.chunks.iter().map(move |c| (i, b, c)));
        let results = futures::future::join_all(writes.map(|(i, b, c)| {
            let chunk = ChunkRef { block: dingo_types::BlockId(b.id), copy: c.copy as u8 };
            let data = if matches!(self.redundancy, Redundancy::Replicated(_)) { &chunks[0] } else { &chunks[i] };
            async move {
                let r = self.client.write_chunk(&c.addr, chunk, c.disk, data.clone()).await;
                (c.node, r.map_err(|e| format!("{chunk} on {}: {e}", c.addr)))
            }
        }))
        .await;
        let failed: Vec<(u32, String)> =
            results.into_iter().filter_map(|(node, r)| r.err().map(|e| (node, e))).collect();
        if !failed.is_empty() {
            let ids = blocks.iter().map(|b| b.id).collect();
            let req = AbandonBlocksRequest { path: self.path.clone(), lease: self.lease, blocks: ids };
            meta_call!(self.client, Retry::IfNotSent, abandon_blocks, req).await.map_err(UnitError::Meta)?;
            exclude.extend(failed.iter().map(|f| f.0));
            let msg = failed.into_iter().map(|f| f.1).collect::<Vec<_>>().join("; ");
            tracing::warn!(path = %self.path, "write unit failed, retrying elsewhere: {msg}");
            return Err(UnitError::Nodes(msg));
        }
        Ok(blocks.iter().zip(&sizes).map(|(b, &size)| BlockSize { block: b.id, size }).collect())
    }
}

enum UnitError {
    /// The metadata service refused: final.
    Meta(ClientError),
    /// Some node writes failed: retry on other nodes.
    Nodes(String),
}
