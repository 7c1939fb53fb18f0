//! The `Meta` gRPC handlers: requests checked and converted, durable work
//! run on [`crate::db::MetaDb`] off the async workers, replies converted back.

use super::cluster::Soft;
use super::{MetaService, apply_state, blocking, new_lease, wire, wire_state};
use crate::db::{self, ChunkKey, ChunkPlacement, Recovered};
use crate::error::MetaError;
use crate::placement::{place, place_one};
use dingo_daemon::now_ms;
use dingo_proto::v1::meta_server::Meta;
use dingo_proto::v1::*;
use dingo_proto::{Redundancy, chunk_ref};
use dingo_types::{BlockId, DiskId, NodeId};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;
use tonic::{Request, Response, Status};

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
        let (addr, disks) = (r.addr.clone(), r.disks.iter().map(wire::disk_registration).collect::<Vec<_>>());
        let (NodeId(node), disk_ids) = blocking(move || db.register_node(&addr, &disks)).await?;
        let ids: Vec<u32> = disk_ids.into_iter().map(|d| d.0).collect();
        let usage = r
            .disks
            .iter()
            .zip(&ids)
            .map(|(d, &id)| (id, DiskUsage { disk: id, capacity: d.capacity, used: d.used, chunks: 0 }))
            .collect();
        let now = Instant::now();
        let disk_seen = ids.iter().map(|&d| (d, now)).collect();
        let mut soft = Soft { addr: r.addr.clone(), last_seen: Some(now), usage, disk_seen };
        let mut cluster = self.cluster();
        for (_, s) in cluster.nodes.iter_mut().filter(|(other, _)| **other != node) {
            // A disk that moved here is no longer the other node's.
            s.usage.retain(|d, _| !ids.contains(d));
            s.disk_seen.retain(|d, _| !ids.contains(d));
        }
        if let Some(previous) = cluster.nodes.remove(&node) {
            // The disks it had and no longer registers stay, as the
            // database keeps them (`MetaDb::register_node`), silent since
            // the node last reported them.
            soft.keep_absent(previous);
        }
        cluster.nodes.insert(node, soft);
        drop(cluster);
        tracing::info!(node, addr = %r.addr, disks = ?ids, "node registered");
        Ok(Response::new(RegisterNodeReply { node, disks: ids }))
    }

    async fn heartbeat(&self, request: Request<HeartbeatRequest>) -> Result<Response<HeartbeatReply>, Status> {
        let r = request.into_inner();
        for c in &r.corrupt {
            self.corrupt_reports.fetch_add(1, Relaxed);
            let (block, copy) = c.chunk.as_ref().map_or((0, 0), |c| (c.block, c.copy));
            tracing::warn!(node = r.node, disk = c.disk, block, copy, "node reports a corrupt or missing chunk");
            if let Some(key) = wire::chunk_key(c) {
                self.corrupt.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
            }
        }
        let disks: Vec<DiskId> = {
            let mut cluster = self.cluster();
            let s = cluster.nodes.get_mut(&r.node).ok_or(MetaError::UnknownNode(r.node))?;
            let now = Instant::now();
            s.last_seen = Some(now);
            for u in &r.disks {
                s.usage.insert(u.disk, *u);
                s.disk_seen.insert(u.disk, now);
            }
            s.usage.keys().copied().map(DiskId).collect()
        };
        let confirmed: Vec<ChunkKey> = r.deleted.iter().filter_map(wire::chunk_key).collect();
        let db = self.db.clone();
        let pending = blocking(move || db.sync_deletes(&confirmed, &disks)).await?;
        let delete = pending.into_iter().map(wire::chunk_on_disk).collect();
        Ok(Response::new(HeartbeatReply { delete }))
    }

    async fn report_chunks(
        &self,
        request: Request<ReportChunksRequest>,
    ) -> Result<Response<ReportChunksReply>, Status> {
        let r = request.into_inner();
        // Only disks registered to the reporting node: a stale report must
        // not condemn chunks of a disk that has moved to another node.
        let own: HashSet<u32> = {
            let cluster = self.cluster();
            let s = cluster.nodes.get(&r.node).ok_or(MetaError::UnknownNode(r.node))?;
            s.usage.keys().copied().collect()
        };
        let chunks: Vec<ChunkKey> =
            r.chunks.iter().filter(|c| own.contains(&c.disk)).filter_map(wire::chunk_key).collect();
        let db = self.db.clone();
        let unknown = blocking(move || db.unknown_chunks(&chunks)).await?;
        if !unknown.is_empty() {
            tracing::info!(node = r.node, chunks = unknown.len(), "node holds orphan chunks; it will delete them");
        }
        let orphans = unknown.into_iter().map(wire::chunk_on_disk).collect();
        Ok(Response::new(ReportChunksReply { orphans }))
    }

    async fn create_file(&self, request: Request<CreateFileRequest>) -> Result<Response<OpenFileReply>, Status> {
        let r = request.into_inner();
        let redundancy = dingo_proto::redundancy(r.redundancy.as_ref()).map_err(Status::invalid_argument)?;
        let lease = new_lease(self.lease_ttl);
        let db = self.db.clone();
        let file = blocking(move || db.create_file(&r.path, redundancy, r.block_size, lease, now_ms())).await?;
        Ok(Response::new(OpenFileReply { file: Some(wire::file(&file)), lease: lease.id }))
    }

    async fn open_for_append(&self, request: Request<OpenForAppendRequest>) -> Result<Response<OpenFileReply>, Status> {
        let path = request.into_inner().path;
        let lease = new_lease(self.lease_ttl);
        let db = self.db.clone();
        let file = blocking(move || db.open_for_append(&path, lease, now_ms())).await?;
        Ok(Response::new(OpenFileReply { file: Some(wire::file(&file)), lease: lease.id }))
    }

    async fn allocate_blocks(
        &self,
        request: Request<AllocateBlocksRequest>,
    ) -> Result<Response<AllocateBlocksReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let path = r.path.clone();
        let file = blocking(move || db.file(&path)).await?;
        let redundancy = file.redundancy()?;
        let candidates = self.candidates(&r.exclude_nodes);
        let width = redundancy.width();
        let slots = place(candidates, width, r.chunk_bytes, matches!(redundancy, Redundancy::Replicated(_)))?;
        let placement: Vec<Vec<ChunkPlacement>> = match redundancy {
            Redundancy::Replicated(_) => vec![
                slots
                    .iter()
                    .enumerate()
                    .map(|(copy, &(node, disk))| ChunkPlacement { copy: copy as u32, disk, node })
                    .collect(),
            ],
            Redundancy::Ec { .. } => {
                slots.iter().map(|&(node, disk)| vec![ChunkPlacement { copy: 0, disk, node }]).collect()
            }
        };
        let db = self.db.clone();
        let ttl = self.ttl_ms();
        let stored = blocking(move || db.allocate(&r.path, r.lease, now_ms(), ttl, &placement)).await?;
        let mut blocks: Vec<BlockRecord> = stored.iter().map(wire::block).collect();
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
        let blocks: Vec<BlockId> = r.blocks.iter().copied().map(BlockId).collect();
        blocking(move || db.abandon(&r.path, r.lease, now_ms(), ttl, &blocks)).await?;
        Ok(Response::new(AbandonBlocksReply {}))
    }

    async fn seal_file(&self, request: Request<SealFileRequest>) -> Result<Response<SealFileReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let file_size = blocking(move || db.seal(&r.path, r.lease, now_ms())).await?;
        Ok(Response::new(SealFileReply { file_size }))
    }

    async fn recover_file(&self, request: Request<RecoverFileRequest>) -> Result<Response<RecoverFileReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let path = r.path.clone();
        let done = blocking(move || db.recover_file(&r.path, now_ms(), r.force)).await?;
        tracing::info!(path, ?done, "lease recovered on request");
        self.leases_recovered.fetch_add(1, Relaxed);
        Ok(Response::new(match done {
            Recovered::Sealed { size } => RecoverFileReply { sealed: true, file_size: size },
            Recovered::Removed => RecoverFileReply { sealed: false, file_size: 0 },
        }))
    }

    async fn stat(&self, request: Request<StatRequest>) -> Result<Response<FileInfo>, Status> {
        let path = request.into_inner().path;
        let db = self.db.clone();
        let (file, blocks) = blocking(move || db.stat(&path)).await?;
        let mut f = wire::file(&file);
        f.blocks = blocks.iter().map(wire::block).collect();
        self.with_addrs(&mut f.blocks);
        Ok(Response::new(f))
    }

    async fn list(&self, request: Request<ListRequest>) -> Result<Response<ListReply>, Status> {
        let prefix = request.into_inner().prefix;
        let db = self.db.clone();
        let files = blocking(move || db.list(&prefix)).await?;
        Ok(Response::new(ListReply { files: files.iter().map(wire::file).collect() }))
    }

    async fn delete(&self, request: Request<DeleteRequest>) -> Result<Response<DeleteReply>, Status> {
        let path = request.into_inner().path;
        let db = self.db.clone();
        let blocks = blocking(move || db.delete(&path)).await?;
        Ok(Response::new(DeleteReply { blocks }))
    }

    async fn cluster_status(&self, _: Request<ClusterStatusRequest>) -> Result<Response<ClusterStatusReply>, Status> {
        let db = self.db.clone();
        let reported: Vec<ChunkKey> = self.corrupt.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
        let (stored, (files, blocks), gone, open, drains, left) = blocking(move || {
            let stored = db.nodes()?;
            let drains = db.drain_states()?;
            // Progress of every disk a drain covers: its own, or its node's.
            let draining: Vec<DiskId> = stored
                .iter()
                .flat_map(|n| n.disks.iter().map(move |d| (NodeId(n.id), DiskId(d.id))))
                .filter(|(n, d)| drains.disks.contains_key(d) || drains.nodes.contains_key(n))
                .map(|(_, d)| d)
                .collect();
            let left = db.placed_on(&draining)?;
            Ok((stored, db.counts()?, db.unknown_chunks(&reported)?, db.open_files()?, drains, left))
        })
        .await?;
        let corrupt: Vec<ChunkOnDisk> = self.corrupt_still_placed(&gone).into_iter().map(wire::chunk_on_disk).collect();
        let now = now_ms();
        let expired_leases = open.iter().filter(|(_, expiry)| *expiry < now).count() as u64;
        let cluster = self.cluster();
        let lost = cluster.lost_disks();
        let nodes = stored
            .iter()
            .map(|stored| {
                let mut n = wire::node(stored);
                let node_drain = drains.nodes.get(&NodeId(n.id)).copied().map(wire::device_state);
                n.set_state(if cluster.dead_nodes.contains(&n.id) {
                    DeviceState::Dead
                } else {
                    node_drain.unwrap_or(DeviceState::Live)
                });
                for d in &mut n.disks {
                    // The worse of the disk's own drain and its node's:
                    // DECOMMISSIONED over DRAINING.
                    let own_drain = drains.disks.get(&DiskId(d.id)).copied().map(wire::device_state);
                    let drain = own_drain.into_iter().chain(node_drain).max();
                    d.set_state(if lost.contains(&d.id) {
                        DeviceState::Dead
                    } else {
                        drain.unwrap_or(DeviceState::Live)
                    });
                    if d.state() == DeviceState::Draining {
                        (d.drain_chunks_left, d.drain_bytes_left) =
                            left.get(&DiskId(d.id)).copied().unwrap_or_default();
                    }
                }
                if let Some(s) = cluster.nodes.get(&n.id) {
                    n.alive = self.alive(s);
                    n.heartbeat_age_ms = s.last_seen.map_or(u64::MAX, |t| t.elapsed().as_millis() as u64);
                    for d in &mut n.disks {
                        if let Some(u) = s.usage.get(&d.id) {
                            (d.capacity, d.used, d.chunks) = (u.capacity, u.used, u.chunks);
                        }
                        d.left_out = n.alive && !s.reported(d.id);
                    }
                }
                n
            })
            .collect();
        Ok(Response::new(ClusterStatusReply {
            nodes,
            files,
            blocks,
            corrupt,
            open_files: open.len() as u64,
            expired_leases,
        }))
    }

    async fn block_table(&self, request: Request<BlockTableRequest>) -> Result<Response<BlockTableReply>, Status> {
        let r = request.into_inner();
        let db = self.db.clone();
        let limit = r.limit.clamp(1, 100_000);
        let (blocks, end) = blocking(move || db.blocks(BlockId(r.start), limit)).await?;
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
                BlockRow { id: b.id, size: b.size, state: wire::block_state(b.state()) as i32, group: b.group, disks }
            })
            .collect();
        Ok(Response::new(BlockTableReply { rows, next, end }))
    }

    async fn get_blocks(&self, request: Request<GetBlocksRequest>) -> Result<Response<GetBlocksReply>, Status> {
        let ids: Vec<BlockId> = request.into_inner().ids.into_iter().map(BlockId).collect();
        let db = self.db.clone();
        let stored = blocking(move || db.get_blocks(&ids)).await?;
        let mut blocks: Vec<BlockRecord> = stored.iter().map(wire::block).collect();
        self.with_addrs(&mut blocks);
        Ok(Response::new(GetBlocksReply { blocks }))
    }

    async fn chunks_on_disk(
        &self,
        request: Request<ChunksOnDiskRequest>,
    ) -> Result<Response<ChunksOnDiskReply>, Status> {
        let disk = DiskId(request.into_inner().disk);
        let db = self.db.clone();
        let found = blocking(move || {
            if !db.disk_known(disk)? {
                return Err(MetaError::Invalid(format!("{disk} is not registered")));
            }
            db.sealed_chunks_on(&[disk])
        })
        .await?;
        let chunks = found.into_iter().map(|k| ChunkId { block: k.block.0, copy: k.copy }).collect();
        Ok(Response::new(ChunksOnDiskReply { chunks }))
    }

    async fn lost_chunks(&self, _: Request<LostChunksRequest>) -> Result<Response<LostChunksReply>, Status> {
        let mut disks: Vec<DiskId> = self.cluster().lost_disks().into_iter().map(DiskId).collect();
        disks.sort_unstable();
        let reported: Vec<ChunkKey> = self.corrupt.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
        let db = self.db.clone();
        let (mut found, gone) =
            blocking(move || Ok((db.sealed_chunks_on(&disks)?, db.unknown_chunks(&reported)?))).await?;
        // Copies their nodes reported corrupt or missing are rebuilt like
        // lost ones, not left for the next scrub.
        found.extend(self.corrupt_still_placed(&gone));
        found.sort_unstable();
        found.dedup();
        let chunks = found.into_iter().map(wire::chunk_on_disk).collect();
        Ok(Response::new(LostChunksReply { chunks }))
    }

    async fn set_disk_state(&self, request: Request<SetDiskStateRequest>) -> Result<Response<SetStateReply>, Status> {
        let r = request.into_inner();
        let disk = r.disk;
        let state = wire_state("disk", disk, r.state)?;
        if state == db::DeviceState::Draining {
            {
                let cluster = self.cluster();
                if cluster.owner(disk).is_none() {
                    return Err(Status::invalid_argument(format!("disk {disk} is not registered")));
                }
                if cluster.lost_disks().contains(&disk) {
                    return Err(Status::failed_precondition(format!(
                        "disk {disk} or its node is DEAD: its chunks are lost and being rebuilt elsewhere, there is \
                         nothing to drain"
                    )));
                }
            }
            self.check_drain(format!("disk {disk}"), |_, d| d == disk).await?;
        }
        let db = self.db.clone();
        blocking(move || db.set_disk_state(DiskId(disk), state)).await?;
        let mut cluster = self.cluster();
        let c = &mut *cluster;
        apply_state(state, disk, &mut c.dead_disks, &mut c.drained_disks);
        tracing::warn!(disk, state = wire::device_state(state).as_str_name(), "disk state set");
        Ok(Response::new(SetStateReply {}))
    }

    async fn set_node_state(&self, request: Request<SetNodeStateRequest>) -> Result<Response<SetStateReply>, Status> {
        let r = request.into_inner();
        let node = r.node;
        let state = wire_state("node", node, r.state)?;
        if state == db::DeviceState::Draining {
            {
                let cluster = self.cluster();
                if !cluster.nodes.contains_key(&node) {
                    return Err(Status::invalid_argument(format!("node {node} is not registered")));
                }
                if cluster.dead_nodes.contains(&node) {
                    return Err(Status::failed_precondition(format!(
                        "node {node} is DEAD: its chunks are lost and being rebuilt elsewhere, there is nothing to \
                         drain"
                    )));
                }
            }
            self.check_drain(format!("node {node}"), |n, _| n == node).await?;
        }
        let db = self.db.clone();
        blocking(move || db.set_node_state(NodeId(node), state)).await?;
        let mut cluster = self.cluster();
        let c = &mut *cluster;
        apply_state(state, node, &mut c.dead_nodes, &mut c.drained_nodes);
        tracing::warn!(node, state = wire::device_state(state).as_str_name(), "node state set");
        Ok(Response::new(SetStateReply {}))
    }

    async fn place_chunk(&self, request: Request<PlaceChunkRequest>) -> Result<Response<ChunkLocation>, Status> {
        let r = request.into_inner();
        let chunk = chunk_ref(r.chunk.as_ref())?;
        let (block, copy) = (chunk.block.0, u32::from(chunk.copy));
        let db = self.db.clone();
        let (b, group) = blocking(move || db.redundancy_group(chunk.block)).await?;
        if b.state() != db::BlockState::Sealed {
            return Err(Status::failed_precondition(format!("block {block} is {}", b.state().as_str_name())));
        }
        let holder = b
            .chunks
            .iter()
            .find(|c| c.copy == copy)
            .ok_or_else(|| Status::not_found(format!("block {block} has no copy {copy}")))?
            .node;
        let (node, disk) = match r.disk {
            Some(disk) => (self.check_target(disk, holder, b.size)?, disk),
            None => {
                let mut held: HashMap<u32, usize> = HashMap::new();
                for g in &group {
                    for c in g.chunks.iter().filter(|c| (g.id, c.copy) != (block, copy)) {
                        *held.entry(c.node).or_default() += 1;
                    }
                }
                // Copies of the group placed but not committed count too.
                let group_id = group.first().map_or(block, |g| g.id);
                for node in self.pending().nodes_in_group(group_id, (block, copy), Instant::now()) {
                    *held.entry(node).or_default() += 1;
                }
                let exclude: Vec<u32> = r.exclude_nodes.iter().copied().chain([holder]).collect();
                let (node, disk) = place_one(&self.candidates(&exclude), &held, b.size, r.emptiest)?;
                self.pending().add((block, copy), group_id, node, disk, b.size, Instant::now());
                (node, disk)
            }
        };
        let addr = self.cluster().nodes.get(&node).map(|s| s.addr.clone()).unwrap_or_default();
        Ok(Response::new(ChunkLocation { copy, disk, node, addr, lost: false }))
    }

    async fn replace_chunk(&self, request: Request<ReplaceChunkRequest>) -> Result<Response<BlockRecord>, Status> {
        let r = request.into_inner();
        let chunk = chunk_ref(r.chunk.as_ref())?;
        let node = {
            let cluster = self.cluster();
            let node = cluster
                .owner(r.new_disk)
                .ok_or_else(|| Status::invalid_argument(format!("disk {} is unknown", r.new_disk)))?;
            // A copy placed before a drain began must not land there after.
            if !cluster.takes_chunks(node, r.new_disk) {
                return Err(Status::failed_precondition(format!(
                    "disk {} or its node {node} is dead, draining or decommissioned",
                    r.new_disk
                )));
            }
            node
        };
        let db = self.db.clone();
        let (block, copy) = (chunk.block.0, u32::from(chunk.copy));
        let old = ChunkKey::new(r.old_disk, block, copy);
        let committed = blocking(move || db.replace_chunk(old, DiskId(r.new_disk), NodeId(node))).await;
        // Committed or refused, the placement is settled either way.
        self.pending().commit((block, copy));
        let b = committed?;
        // Count the new copy at once, so that a burst of placements sees it
        // before the node's next heartbeat reports the disk's usage.
        if let Some(u) = self.cluster().nodes.get_mut(&node).and_then(|s| s.usage.get_mut(&r.new_disk)) {
            u.used += b.size;
            u.chunks += 1;
        }
        let mut blocks = [wire::block(&b)];
        self.with_addrs(&mut blocks);
        let [b] = blocks;
        tracing::info!(block, copy, from = r.old_disk, to = r.new_disk, "chunk replaced");
        Ok(Response::new(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::MetaDb;
    use std::time::Duration;

    /// A service over a fresh database in `dir`, marking nothing dead.
    fn service(dir: &std::path::Path) -> MetaService {
        MetaService::new(MetaDb::open(dir).unwrap(), Duration::from_secs(60), Duration::from_secs(60)).unwrap()
    }

    async fn register(svc: &MetaService, n: u32) -> Vec<u32> {
        let disks = (0..2)
            .map(|d| DiskRegistration { uuid: format!("{n}-{d}"), capacity: 1 << 30, ..Default::default() })
            .collect();
        let r = RegisterNodeRequest { addr: format!("127.0.0.1:{}", 9000 + n), disks };
        svc.register_node(Request::new(r)).await.unwrap().into_inner().disks
    }

    #[tokio::test]
    async fn concurrent_moves_of_one_stripes_members_do_not_pile_onto_one_node() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        for n in 0..5 {
            register(&svc, n).await;
        }
        let (path, size) = ("/e".to_string(), 1 << 16);
        let req = CreateFileRequest {
            path: path.clone(),
            redundancy: Some(Redundancy::Ec { data: 3, parity: 2 }.into()),
            block_size: size,
        };
        let lease = svc.create_file(Request::new(req)).await.unwrap().into_inner().lease;
        let req = AllocateBlocksRequest { path: path.clone(), lease, chunk_bytes: size, exclude_nodes: vec![] };
        let stripe = svc.allocate_blocks(Request::new(req)).await.unwrap().into_inner().blocks;
        assert_eq!(stripe.len(), 5);
        let blocks = stripe.iter().map(|b| BlockSize { block: b.id, size }).collect();
        svc.commit_blocks(Request::new(CommitBlocksRequest { path: path.clone(), lease, blocks })).await.unwrap();
        svc.seal_file(Request::new(SealFileRequest { path, lease })).await.unwrap();
        // A new, empty node: the emptiest disks, holding no member.
        register(&svc, 5).await;
        // Three members are moved at once (one planner callback): each is
        // placed before any is committed.
        let mut placed = Vec::new();
        for b in &stripe[..3] {
            let chunk = Some(dingo_types::ChunkRef { block: dingo_types::BlockId(b.id), copy: 0 }.into());
            let req = PlaceChunkRequest { chunk, disk: None, exclude_nodes: vec![], emptiest: true };
            let at = svc.place_chunk(Request::new(req)).await.unwrap().into_inner();
            placed.push((at.node, at.disk));
        }
        let mut disks: Vec<u32> = placed.iter().map(|p| p.1).collect();
        disks.sort();
        disks.dedup();
        assert_eq!(disks.len(), 3, "two members placed on one disk: {placed:?}");
        for node in placed.iter().map(|p| p.0) {
            let on_node = placed.iter().filter(|p| p.0 == node).count();
            assert!(on_node <= 2, "more members on node {node} than the stripe has parity: {placed:?}");
        }
        // A committed move no longer counts as pending.
        let first = dingo_types::ChunkRef { block: dingo_types::BlockId(stripe[0].id), copy: 0 };
        let old_disk = stripe[0].chunks[0].disk;
        let req = ReplaceChunkRequest { chunk: Some(first.into()), old_disk, new_disk: placed[0].1 };
        svc.replace_chunk(Request::new(req)).await.unwrap();
        assert!(svc.pending().nodes_in_group(stripe[0].id, (stripe[3].id, 0), Instant::now()).len() == 2);
    }

    /// A node that comes back without one of its disks (replaced by a
    /// blank one while it was down) used to have that disk dropped from its
    /// record: its chunks stayed placed on a disk no node had, counted as
    /// healthy and never rebuilt. It now stays, silent, takes no new chunks
    /// and is found silent like a disk whose health probe fails.
    #[tokio::test]
    async fn a_disk_a_node_no_longer_registers_stays_silent_until_marked_dead() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        let old = register(&svc, 0).await;
        // Time for the node's first report to age past `silent_after`.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let silent_after = Duration::from_millis(800);
        let blank = DiskRegistration { uuid: "0-new".into(), capacity: 1 << 30, ..Default::default() };
        let kept = DiskRegistration { uuid: "0-0".into(), capacity: 1 << 30, ..Default::default() };
        let r = RegisterNodeRequest { addr: "127.0.0.1:9000".into(), disks: vec![kept, blank] };
        let new = svc.register_node(Request::new(r)).await.unwrap().into_inner().disks;
        assert_eq!(new[0], old[0]);
        assert!(!old.contains(&new[1]), "the blank disk gets a new id");
        let gone = old[1];
        assert_eq!(svc.silent_disks(silent_after), vec![gone], "the replaced disk is silent, no other");
        {
            let cluster = svc.cluster();
            let s = &cluster.nodes[&0];
            assert!(s.usage.contains_key(&gone) && !s.reported(gone));
            assert!(s.reported(new[0]) && s.reported(new[1]));
        }
        let placed = svc.candidates(&[]);
        let disks: Vec<u32> = placed.iter().flat_map(|c| c.disks.iter().map(|d| d.0)).collect();
        assert!(!disks.contains(&gone), "no new chunk goes to the missing disk: {disks:?}");
        // Operators see it: left out of its node's report.
        let status = svc.cluster_status(Request::new(ClusterStatusRequest {})).await.unwrap().into_inner();
        let left_out: Vec<u32> = status.nodes[0].disks.iter().filter(|d| d.left_out).map(|d| d.id).collect();
        assert_eq!(left_out, vec![gone]);
        // The database keeps it too, so a restarted service still knows it.
        let nodes = svc.db.nodes().unwrap();
        assert_eq!(nodes[0].disks.iter().map(|d| d.id).collect::<Vec<_>>(), vec![new[0], new[1], gone]);
    }

    /// A node that comes back at another address registers as a new node
    /// with the same disks. Its old record gave them up in the database
    /// but kept them in memory, so marking the old node DEAD counted the
    /// disks' chunks lost while the new node served them.
    #[tokio::test]
    async fn disks_that_moved_to_another_node_are_not_lost_with_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        let disks = register(&svc, 0).await;
        let moved = (0..2)
            .map(|d| DiskRegistration { uuid: format!("0-{d}"), capacity: 1 << 30, ..Default::default() })
            .collect();
        let r = RegisterNodeRequest { addr: "127.0.0.1:9999".into(), disks: moved };
        let reply = svc.register_node(Request::new(r)).await.unwrap().into_inner();
        assert_eq!((reply.node, &reply.disks), (1, &disks), "a new node, the same disks");
        let dead = SetNodeStateRequest { node: 0, state: dingo_proto::v1::DeviceState::Dead as i32 };
        svc.set_node_state(Request::new(dead)).await.unwrap();
        let cluster = svc.cluster();
        assert!(cluster.lost_disks().is_empty(), "{:?}", cluster.lost_disks());
        assert!(disks.iter().all(|&d| cluster.owner(d) == Some(1)));
    }

    #[tokio::test]
    async fn placement_skips_draining_disks_and_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let svc = service(dir.path());
        let mut disks = Vec::new();
        for n in 0..5 {
            disks.push(register(&svc, n).await);
        }
        let drained_disk = disks[0][0];
        svc.set_disk_state(Request::new(SetDiskStateRequest {
            disk: drained_disk,
            state: DeviceState::Draining as i32,
        }))
        .await
        .unwrap();
        svc.set_node_state(Request::new(SetNodeStateRequest { node: 1, state: DeviceState::Draining as i32 }))
            .await
            .unwrap();
        let create = |path: &str, redundancy: Redundancy| CreateFileRequest {
            path: path.into(),
            redundancy: Some(redundancy.into()),
            block_size: 1 << 16,
        };
        for (path, redundancy) in [("/r", Redundancy::Replicated(3)), ("/e", Redundancy::Ec { data: 2, parity: 1 })] {
            let lease = svc.create_file(Request::new(create(path, redundancy))).await.unwrap().into_inner().lease;
            for _ in 0..30 {
                let req =
                    AllocateBlocksRequest { path: path.into(), lease, chunk_bytes: 1 << 16, exclude_nodes: vec![] };
                let blocks = svc.allocate_blocks(Request::new(req)).await.unwrap().into_inner().blocks;
                for c in blocks.iter().flat_map(|b| &b.chunks) {
                    assert!(
                        c.disk != drained_disk && c.node != 1,
                        "{path}: chunk placed on disk {} node {}",
                        c.disk,
                        c.node
                    );
                }
            }
        }
        // Nodes 0 (its other disk), 2, 3 and 4 take chunks: one more drain
        // leaves three, a second would strand replicated:3.
        let drain_node = |node: u32| SetNodeStateRequest { node, state: DeviceState::Draining as i32 };
        svc.set_node_state(Request::new(drain_node(2))).await.unwrap();
        let refused = svc.set_node_state(Request::new(drain_node(3))).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        assert!(refused.message().contains("replicated:3 need 3"), "{}", refused.message());
        // Status shows the drains (finished at once: nothing was placed
        // there); LIVE cancels one and placement uses the node again.
        let status = svc.cluster_status(Request::new(ClusterStatusRequest {})).await.unwrap().into_inner();
        let node = |id: u32| status.nodes.iter().find(|n| n.id == id).unwrap();
        assert_eq!(node(1).state(), DeviceState::Decommissioned);
        assert!(node(1).disks.iter().all(|d| d.state() == DeviceState::Decommissioned));
        let node0: Vec<DeviceState> = node(0).disks.iter().map(|d| d.state()).collect();
        assert_eq!(node0, [DeviceState::Decommissioned, DeviceState::Live]);
        svc.set_node_state(Request::new(SetNodeStateRequest { node: 1, state: DeviceState::Live as i32 }))
            .await
            .unwrap();
        assert!(svc.candidates(&[]).iter().any(|c| c.node == 1 && c.disks.len() == 2));
        // A restarted service keeps the drains out of placement.
        drop(svc);
        let svc = service(dir.path());
        assert!(svc.cluster().drained_nodes.contains(&2) && svc.cluster().drained_disks.contains(&drained_disk));
        assert!(!svc.cluster().drained_nodes.contains(&1), "the cancelled drain stays cancelled");
        let bad = SetDiskStateRequest { disk: 99, state: DeviceState::Draining as i32 };
        assert!(
            svc.set_disk_state(Request::new(bad)).await.unwrap_err().message().contains("disk 99 is not registered")
        );
        // A state left unset (the wire's 0) or unknown is refused, and
        // nothing changes.
        for state in [DeviceState::Unspecified as i32, 99] {
            let e = svc.set_node_state(Request::new(SetNodeStateRequest { node: 2, state })).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{state}: {e}");
            assert!(e.message().contains(if state == 0 { "UNSPECIFIED" } else { "unknown device state" }), "{e}");
            let e = svc.set_disk_state(Request::new(SetDiskStateRequest { disk: drained_disk, state })).await;
            assert_eq!(e.unwrap_err().code(), tonic::Code::InvalidArgument);
        }
        assert!(svc.cluster().drained_nodes.contains(&2) && svc.cluster().drained_disks.contains(&drained_disk));
    }
}
