//! The `Meta` gRPC service: durable operations go to [`MetaDb`]; node
//! liveness and reported disk usage are soft state rebuilt from heartbeats.

use crate::db::{Lease, MetaDb};
use crate::error::MetaError;
use crate::placement::{Candidate, place};
use dingo_proto::metrics::MetricsText;
use dingo_proto::v1::meta_server::Meta;
use dingo_proto::v1::*;
use dingo_proto::{Redundancy, now_ms};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// What the service knows about a node without asking the database.
struct Soft {
    addr: String,
    /// Last registration or heartbeat; `None` since this process started.
    last_seen: Option<Instant>,
    /// Latest reported usage per disk id.
    usage: HashMap<u32, DiskUsage>,
}

pub struct MetaService {
    db: Arc<MetaDb>,
    nodes: Mutex<HashMap<u32, Soft>>,
    /// A node is dead after this long without a heartbeat.
    dead_after: Duration,
    lease_ttl: Duration,
}

/// Runs a database operation off the async workers (redb commits fsync).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, MetaError> + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Status::internal(e.to_string()))?.map_err(Status::from)
}

fn new_lease(ttl: Duration) -> Lease {
    Lease { id: fastrand::u64(1..), expiry_ms: now_ms() + ttl.as_millis() as u64 }
}

impl MetaService {
    pub fn new(db: MetaDb, dead_after: Duration, lease_ttl: Duration) -> Result<Self, MetaError> {
        let nodes = db
            .nodes()?
            .into_iter()
            .map(|n| {
                let usage = n
                    .disks
                    .iter()
                    .map(|d| (d.id, DiskUsage { disk: d.id, capacity: d.capacity, used: d.used, chunks: d.chunks }))
                    .collect();
                (n.id, Soft { addr: n.addr, last_seen: None, usage })
            })
            .collect();
        Ok(MetaService { db: Arc::new(db), nodes: Mutex::new(nodes), dead_after, lease_ttl })
    }

    fn soft(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Soft>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alive(&self, s: &Soft) -> bool {
        s.last_seen.is_some_and(|t| t.elapsed() < self.dead_after)
    }

    /// Fills in node addresses of chunk locations.
    fn with_addrs(&self, blocks: &mut [BlockRecord]) {
        let soft = self.soft();
        for c in blocks.iter_mut().flat_map(|b| b.chunks.iter_mut()) {
            c.addr = soft.get(&c.node).map(|s| s.addr.clone()).unwrap_or_default();
        }
    }

    fn ttl_ms(&self) -> u64 {
        self.lease_ttl.as_millis() as u64
    }

    /// Prometheus page of the metadata service.
    pub fn render_metrics(&self) -> String {
        let mut m = MetricsText::new();
        let soft = self.soft();
        let alive = soft.values().filter(|s| self.alive(s)).count();
        m.family("dingo_meta_nodes", "gauge", "Registered nodes by liveness.");
        m.sample("dingo_meta_nodes", &[("state", "alive")], alive);
        m.sample("dingo_meta_nodes", &[("state", "dead")], soft.len() - alive);
        for (name, help, get) in [
            (
                "dingo_meta_disk_capacity_bytes",
                "Disk capacity as last reported.",
                (|u: &DiskUsage| u.capacity) as fn(&DiskUsage) -> u64,
            ),
            ("dingo_meta_disk_used_bytes", "Disk bytes used as last reported.", |u| u.used),
            ("dingo_meta_disk_chunks", "Chunks on the disk as last reported.", |u| u.chunks),
        ] {
            m.family(name, "gauge", help);
            for (node, s) in soft.iter() {
                for u in s.usage.values() {
                    m.sample(name, &[("node", &node.to_string()), ("disk", &u.disk.to_string())], get(u));
                }
            }
        }
        drop(soft);
        if let Ok((files, blocks)) = self.db.counts() {
            m.family("dingo_meta_files", "gauge", "Files in the namespace.").sample("dingo_meta_files", &[], files);
            m.family("dingo_meta_blocks", "gauge", "Block records (including deleted).").sample(
                "dingo_meta_blocks",
                &[],
                blocks,
            );
        }
        m.finish()
    }
}

#[tonic::async_trait]
impl Meta for MetaService {
    async fn register_node(
        &self,
        request: Request<RegisterNodeRequest>,
    ) -> Result<Response<RegisterNodeReply>, Status> {
        let r = request.into_inner();
        if r.addr.is_empty() || r.disks.is_empty() {
            return Err(Status::invalid_argument("a node registers with an address and at least one disk"));
        }
        let db = self.db.clone();
        let (addr, disks) = (r.addr.clone(), r.disks.clone());
        let (node, ids) = blocking(move || db.register_node(&addr, &disks)).await?;
        let usage = r
            .disks
            .iter()
            .zip(&ids)
            .map(|(d, &id)| (id, DiskUsage { disk: id, capacity: d.capacity, used: d.used, chunks: 0 }))
            .collect();
        self.soft().insert(node, Soft { addr: r.addr.clone(), last_seen: Some(Instant::now()), usage });
        tracing::info!(node, addr = %r.addr, disks = ?ids, "node registered");
        Ok(Response::new(RegisterNodeReply { node, disks: ids }))
    }

    async fn heartbeat(&self, request: Request<HeartbeatRequest>) -> Result<Response<HeartbeatReply>, Status> {
        let r = request.into_inner();
        let disks: Vec<u32> = {
            let mut soft = self.soft();
            let s = soft.get_mut(&r.node).ok_or(MetaError::UnknownNode(r.node))?;
            s.last_seen = Some(Instant::now());
            for u in &r.disks {
                s.usage.insert(u.disk, *u);
            }
            s.usage.keys().copied().collect()
        };
        let confirmed: Vec<(u32, u64, u32)> =
            r.deleted.iter().filter_map(|d| d.chunk.as_ref().map(|c| (d.disk, c.block, c.copy))).collect();
        let db = self.db.clone();
        let pending = blocking(move || db.sync_deletes(&confirmed, &disks)).await?;
        let delete = pending
            .into_iter()
            .map(|(disk, block, copy)| ChunkOnDisk { disk, chunk: Some(ChunkId { block, copy }) })
            .collect();
        Ok(Response::new(HeartbeatReply { delete }))
    }

    async fn create_file(&self, request: Request<CreateFileRequest>) -> Result<Response<OpenFileReply>, Status> {
        let r = request.into_inner();
        let redundancy = Redundancy::try_from(r.redundancy.as_ref()).map_err(Status::invalid_argument)?;
        let lease = new_lease(self.lease_ttl);
        let db = self.db.clone();
        let file = blocking(move || db.create_file(&r.path, redundancy, r.block_size, lease, now_ms())).await?;
        Ok(Response::new(OpenFileReply { file: Some(file), lease: lease.id }))
    }

    async fn open_for_append(&self, request: Request<OpenForAppendRequest>) -> Result<Response<OpenFileReply>, Status> {
        let path = request.into_inner().path;
        let lease = new_lease(self.lease_ttl);
        let db = self.db.clone();
        let file = blocking(move || db.open_for_append(&path, lease, now_ms())).await?;
        Ok(Response::new(OpenFileReply { file: Some(file), lease: lease.id }))
    }

    async fn allocate_blocks(
        &self,
        request: Request<AllocateBlocksRequest>,
    ) -> Result<Response<AllocateBlocksReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let path = r.path.clone();
        let file = blocking(move || db.file(&path)).await?;
        let redundancy = Redundancy::try_from(file.redundancy.as_ref()).map_err(Status::internal)?;
        let candidates: Vec<Candidate> = self
            .soft()
            .iter()
            .filter(|(id, s)| self.alive(s) && !r.exclude_nodes.contains(id))
            .map(|(&node, s)| Candidate {
                node,
                disks: s.usage.values().map(|u| (u.disk, u.capacity.saturating_sub(u.used))).collect(),
            })
            .collect();
        let width = redundancy.width();
        let slots = place(candidates, width, r.chunk_bytes, matches!(redundancy, Redundancy::Replicated(_)))?;
        let placement: Vec<Vec<ChunkLocation>> = match redundancy {
            Redundancy::Replicated(_) => vec![
                slots
                    .iter()
                    .enumerate()
                    .map(|(copy, &(node, disk))| ChunkLocation { copy: copy as u32, disk, node, addr: String::new() })
                    .collect(),
            ],
            Redundancy::Ec { .. } => slots
                .iter()
                .map(|&(node, disk)| vec![ChunkLocation { copy: 0, disk, node, addr: String::new() }])
                .collect(),
        };
        let db = self.db.clone();
        let ttl = self.ttl_ms();
        let mut blocks = blocking(move || db.allocate(&r.path, r.lease, now_ms(), ttl, &placement)).await?;
        self.with_addrs(&mut blocks);
        Ok(Response::new(AllocateBlocksReply { blocks }))
    }

    async fn commit_blocks(
        &self,
        request: Request<CommitBlocksRequest>,
    ) -> Result<Response<CommitBlocksReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let ttl = self.ttl_ms();
        let sizes: Vec<(u64, u64)> = r.blocks.iter().map(|b| (b.block, b.size)).collect();
        let file_size = blocking(move || db.commit(&r.path, r.lease, now_ms(), ttl, &sizes)).await?;
        Ok(Response::new(CommitBlocksReply { file_size }))
    }

    async fn abandon_blocks(
        &self,
        request: Request<AbandonBlocksRequest>,
    ) -> Result<Response<AbandonBlocksReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let ttl = self.ttl_ms();
        blocking(move || db.abandon(&r.path, r.lease, now_ms(), ttl, &r.blocks)).await?;
        Ok(Response::new(AbandonBlocksReply {}))
    }

    async fn seal_file(&self, request: Request<SealFileRequest>) -> Result<Response<SealFileReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let file_size = blocking(move || db.seal(&r.path, r.lease, now_ms())).await?;
        Ok(Response::new(SealFileReply { file_size }))
    }

    async fn stat(&self, request: Request<StatRequest>) -> Result<Response<FileInfo>, Status> {
        let path = request.into_inner().path;
        let db = self.db.clone();
        let mut f = blocking(move || db.stat(&path)).await?;
        self.with_addrs(&mut f.blocks);
        Ok(Response::new(f))
    }

    async fn list(&self, request: Request<ListRequest>) -> Result<Response<ListReply>, Status> {
        let prefix = request.into_inner().prefix;
        let db = self.db.clone();
        let files = blocking(move || db.list(&prefix)).await?;
        Ok(Response::new(ListReply { files }))
    }

    async fn delete(&self, request: Request<DeleteRequest>) -> Result<Response<DeleteReply>, Status> {
        let path = request.into_inner().path;
        let db = self.db.clone();
        let blocks = blocking(move || db.delete(&path)).await?;
        Ok(Response::new(DeleteReply { blocks }))
    }

    async fn cluster_status(&self, _: Request<ClusterStatusRequest>) -> Result<Response<ClusterStatusReply>, Status> {
        let db = self.db.clone();
        let (stored, (files, blocks)) = blocking(move || Ok((db.nodes()?, db.counts()?))).await?;
        let soft = self.soft();
        let nodes = stored
            .into_iter()
            .map(|mut n| {
                if let Some(s) = soft.get(&n.id) {
                    n.alive = self.alive(s);
                    n.heartbeat_age_ms = s.last_seen.map_or(u64::MAX, |t| t.elapsed().as_millis() as u64);
                    for d in &mut n.disks {
                        if let Some(u) = s.usage.get(&d.id) {
                            (d.capacity, d.used, d.chunks) = (u.capacity, u.used, u.chunks);
                        }
                    }
                }
                n
            })
            .collect();
        Ok(Response::new(ClusterStatusReply { nodes, files, blocks }))
    }

    async fn block_table(&self, request: Request<BlockTableRequest>) -> Result<Response<BlockTableReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let limit = r.limit.clamp(1, 100_000);
        let (blocks, end) = blocking(move || db.blocks(r.start, limit)).await?;
        let next = blocks.last().map_or(end.min(r.start.saturating_add(u64::from(limit))), |b| b.id + 1);
        let rows = blocks
            .into_iter()
            .map(|b| {
                let mut disks = vec![u32::MAX; b.chunks.len()];
                for c in &b.chunks {
                    if let Some(slot) = disks.get_mut(c.copy as usize) {
                        *slot = c.disk;
                    }
                }
                BlockRow { id: b.id, size: b.size, state: b.state, group: b.group, disks }
            })
            .collect();
        Ok(Response::new(BlockTableReply { rows, next, end }))
    }
}
