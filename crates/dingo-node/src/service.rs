//! The `Node` gRPC service over a [`Store`], and the node's metrics page.

use crate::error::StoreError;
use crate::store::Store;
use dingo_daemon::now_ms;
use dingo_proto::v1::node_server::Node;
use dingo_proto::v1::*;
use dingo_proto::{IoTag, chunk_ref};
use dingo_types::DiskId;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::task::block_in_place;
use tonic::{Request, Response, Status, Streaming};

/// Largest single read a client may ask for.
pub const MAX_READ: u64 = 16 << 20;

/// Data per message of `ReadChunkStream`: well under the 4 MiB that gRPC
/// libraries accept by default.
pub const STREAM_PIECE_BYTES: usize = 1 << 20;

pub struct NodeService {
    pub store: Arc<Store>,
    /// Whether `InjectSlowdown` is accepted.
    pub fault_injection: bool,
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn write_chunk(
        &self,
        request: Request<Streaming<WriteChunkRequest>>,
    ) -> Result<Response<WriteChunkReply>, Status> {
        let mut stream = request.into_inner();
        let first = stream.message().await?.ok_or_else(|| Status::invalid_argument("empty write stream"))?;
        let chunk = chunk_ref(first.chunk.as_ref())?;
        let tag = dingo_proto::io_tag(first.io_class.as_ref()).map_err(Status::invalid_argument)?;
        let handle = tokio::runtime::Handle::current();
        let sealed = Cell::new(first.seal);
        let mut done = first.seal;
        let mut pending = Some(first.data);
        let next = || {
            if let Some(d) = pending.take() {
                return Ok(Some(d));
            }
            if done {
                return Ok(None);
            }
            match handle.block_on(stream.message()) {
                Ok(Some(m)) => {
                    done = m.seal;
                    sealed.set(m.seal);
                    Ok(Some(m.data))
                }
                Ok(None) => {
                    done = true;
                    Ok(None)
                }
                Err(s) => Err(StoreError::Invalid(format!("write stream of {chunk} broke: {}", s.message()))),
            }
        };
        let len = block_in_place(|| {
            self.store.write_chunk(chunk, DiskId(first.disk), first.total_len, tag, next, || sealed.get())
        })?;
        tracing::debug!(%chunk, len, "chunk sealed");
        Ok(Response::new(WriteChunkReply { len }))
    }

    async fn read_chunk(&self, request: Request<ReadChunkRequest>) -> Result<Response<ReadChunkReply>, Status> {
        let r = request.into_inner();
        let chunk = chunk_ref(r.chunk.as_ref())?;
        let tag = dingo_proto::io_tag(r.io_class.as_ref()).map_err(Status::invalid_argument)?;
        if r.len > MAX_READ {
            return Err(Status::invalid_argument(format!("read of {} bytes exceeds the {MAX_READ}-byte limit", r.len)));
        }
        let started = std::time::Instant::now();
        let (data, cache_hit) = block_in_place(|| self.store.read(chunk, r.offset, r.len, tag))?;
        if matches!(tag, IoTag::Foreground) {
            // Node-side time of a foreground read (queue waits, head service,
            // checksums), to set against the client's time for the same RPC.
            let node_ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::debug!(%chunk, len = r.len, node_ms, cache_hit, "served foreground read");
        }
        let congestion = self.store.congestion_of(chunk).map(wire_congestion);
        Ok(Response::new(ReadChunkReply { data, cache_hit, congestion }))
    }

    type ReadChunkStreamStream = futures::stream::Iter<std::vec::IntoIter<Result<ReadChunkReply, Status>>>;

    async fn read_chunk_stream(
        &self,
        request: Request<ReadChunkRequest>,
    ) -> Result<Response<Self::ReadChunkStreamStream>, Status> {
        let ReadChunkReply { data, cache_hit, congestion } = self.read_chunk(request).await?.into_inner();
        // `Bytes::slice` shares the buffer: the pieces cost no copy.
        let pieces: Vec<Result<ReadChunkReply, Status>> = (0..data.len().max(1))
            .step_by(STREAM_PIECE_BYTES)
            .map(|start| {
                let end = (start + STREAM_PIECE_BYTES).min(data.len());
                Ok(ReadChunkReply { data: data.slice(start..end), cache_hit, congestion })
            })
            .collect();
        Ok(Response::new(futures::stream::iter(pieces)))
    }

    async fn delete_chunk(&self, request: Request<DeleteChunkRequest>) -> Result<Response<DeleteChunkReply>, Status> {
        let r = request.into_inner();
        let chunk = chunk_ref(r.chunk.as_ref())?;
        let existed = block_in_place(|| self.store.delete(chunk, r.disk.map(DiskId)))?;
        Ok(Response::new(DeleteChunkReply { existed }))
    }

    async fn inventory(&self, _: Request<InventoryRequest>) -> Result<Response<InventoryReply>, Status> {
        let disks = self
            .store
            .inventory()
            .into_iter()
            .zip(&self.store.disks)
            .map(|(chunks, disk)| DiskInventory {
                disk: disk.id().map_or(u32::MAX, |d| d.0),
                chunks: chunks.into_iter().map(|(c, len)| ChunkInfo { chunk: Some(c.into()), len }).collect(),
            })
            .collect();
        Ok(Response::new(InventoryReply { disks }))
    }

    async fn cache_directive(
        &self,
        request: Request<CacheDirectiveRequest>,
    ) -> Result<Response<CacheDirectiveReply>, Status> {
        let r = request.into_inner();
        let now = now_ms();
        for pin in &r.pins {
            self.store.cache.pin(chunk_ref(pin.chunk.as_ref())?, pin.until_ms, now);
        }
        for c in &r.unpins {
            self.store.cache.unpin(chunk_ref(Some(c))?);
        }
        Ok(Response::new(CacheDirectiveReply {}))
    }

    async fn inject_slowdown(
        &self,
        request: Request<InjectSlowdownRequest>,
    ) -> Result<Response<InjectSlowdownReply>, Status> {
        if !self.fault_injection {
            return Err(Status::failed_precondition(
                "fault injection is not allowed on this node: set `fault_injection = true` under [node]",
            ));
        }
        let r = request.into_inner();
        if r.factor_permille < 1000 {
            return Err(Status::invalid_argument(format!(
                "slowdown factor {} permille is below 1000: a fault slows a disk, never speeds it up",
                r.factor_permille
            )));
        }
        let disk = self
            .store
            .disks
            .iter()
            .find(|d| d.id() == Some(DiskId(r.disk)))
            .ok_or_else(|| Status::not_found(format!("disk {} is not on this node", r.disk)))?;
        let head = disk
            .head
            .as_ref()
            .ok_or_else(|| Status::failed_precondition(format!("disk {} has no HDD model to slow down", r.disk)))?;
        head.inject_slowdown(r.factor_permille, Duration::from_millis(r.delay_ms), Duration::from_millis(r.for_ms));
        Ok(Response::new(InjectSlowdownReply {}))
    }

    async fn node_stats(&self, _: Request<NodeStatsRequest>) -> Result<Response<NodeStatsReply>, Status> {
        Ok(Response::new(stats(&self.store)))
    }

    async fn quantum_budget(
        &self,
        request: Request<QuantumBudgetRequest>,
    ) -> Result<Response<QuantumBudgetReply>, Status> {
        let r = request.into_inner();
        let lasting = Duration::from_millis(r.quantum_end_ms.saturating_sub(now_ms()));
        let heads = || self.store.disks.iter().filter_map(|d| Some((d.id()?, d.head.as_ref()?)));
        for budget in &r.disks {
            // The budget is advice: a disk the planner still places here
            // but the node no longer has, or one without an emulated head
            // (no scheduler), is skipped rather than failing the rest.
            if let Some((_, head)) = heads().find(|(id, _)| id.0 == budget.disk) {
                head.set_planned(budget.head_time_us, lasting);
            }
        }
        let disks = heads()
            .map(|(id, head)| DiskCongestion { disk: id.0, congestion: Some(wire_congestion(head.congestion())) })
            .collect();
        Ok(Response::new(QuantumBudgetReply { disks }))
    }
}

fn wire_congestion(c: dingo_iosched::congestion::Congestion) -> Congestion {
    Congestion { congested: c.congested, slowness_permille: u32::try_from(c.slowness_permille).unwrap_or(u32::MAX) }
}

pub fn stats(store: &Store) -> NodeStatsReply {
    let disks = store
        .disks
        .iter()
        .map(|d| {
            let c = &d.counters;
            DiskStats {
                disk: d.id().map_or(u32::MAX, |id| id.0),
                path: d.path.display().to_string(),
                bytes_read: c.bytes_read.load(Relaxed),
                read_requests: c.read_requests.load(Relaxed),
                bytes_written: c.bytes_written.load(Relaxed),
                write_requests: c.write_requests.load(Relaxed),
                head_time_us: c.head_time_us.load(Relaxed),
                checksum_errors: c.checksum_errors.load(Relaxed),
                direct_io: d.is_direct(),
                gate: d.head.as_ref().and_then(|h| h.gate()).map(|g| WaitingGate {
                    open: g.open,
                    size_bytes: g.params.size_bytes,
                    threshold_us: g.params.threshold_us,
                    retunes: g.retunes,
                    predicted_slowdown_us: g.prediction.map(|p| p.mean_slowdown_us),
                    predicted_scrub_bytes_per_sec: g.prediction.map(|p| p.scrub_bytes_per_sec),
                }),
                classes: (0..IoTag::CLASSES)
                    .map(|i| ClassCounter {
                        class_name: IoTag::class_name_of(i).to_string(),
                        bytes: c.class_bytes[i].load(Relaxed),
                        requests: c.class_requests[i].load(Relaxed),
                    })
                    .collect(),
            }
        })
        .collect();
    let s = store.cache.stats();
    NodeStatsReply {
        disks,
        cache: Some(CacheStats {
            hits: s.hits,
            misses: s.misses,
            pinned_hits: s.pinned_hits,
            overflow_evictions: s.overflow_evictions,
            general_bytes: s.general_bytes,
            pinned_bytes: s.pinned_bytes,
            flash_hits: s.flash_hits,
            pinned_rereads: s.pinned_rereads,
            pinned_reread_bytes: s.pinned_reread_bytes,
        }),
        flash: store.cache.flash_stats().map(|f| f.wire()),
        declarations: store
            .declaration_bytes()
            .into_iter()
            .map(|(declaration_id, bytes)| DeclarationCounter { declaration_id, bytes })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::{IoSettings, WaitingSettings};
    use crate::store::DiskSpec;
    use dingo_types::DiskModel;

    /// Two disks: #1 emulates an HDD (1 ms a request), #2 does not.
    fn service(dir: &std::path::Path, fault_injection: bool) -> NodeService {
        let model = DiskModel { positioning_us: 1_000, transfer_bytes_per_sec: 1 << 40 };
        let specs = [(1, Some(model)), (2, None)].map(|(n, hdd)| DiskSpec {
            path: dir.join(format!("d{n}")),
            capacity: None,
            hdd,
            io: IoSettings::default(),
        });
        let store = Store::open(&specs, 0, 0).unwrap();
        for (i, disk) in store.disks.iter().enumerate() {
            disk.set_id(DiskId(i as u32 + 1));
        }
        NodeService { store: Arc::new(store), fault_injection }
    }

    fn slowdown(disk: u32, factor_permille: u64) -> Request<InjectSlowdownRequest> {
        Request::new(InjectSlowdownRequest { disk, factor_permille, delay_ms: 0, for_ms: 60_000 })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_quantum_budget_reaches_the_disks_heads_and_the_reply_carries_their_slowness() {
        let dir = tempfile::tempdir().unwrap();
        let node = service(dir.path(), true);
        node.inject_slowdown(slowdown(1, 4_000)).await.unwrap();
        node.store.disks[0].head.as_ref().unwrap().serve(4096, IoTag::Foreground, || ());
        let budget = |disk, head_time_us| DiskQuantumBudget { disk, bytes: 1, reads: 1, head_time_us };
        let request = QuantumBudgetRequest {
            quantum_start_ms: now_ms(),
            quantum_end_ms: now_ms() + 60_000,
            disks: vec![budget(1, 40_000), budget(2, 50_000), budget(9, 60_000)],
        };
        let reply = node.quantum_budget(Request::new(request)).await.unwrap().into_inner();
        let head = node.store.disks[0].head.as_ref().unwrap();
        assert_eq!(head.planned_left_us(), 40_000);
        let page = dingo_daemon::metrics::encode(&crate::metrics::registry(node.store.clone())).unwrap();
        assert!(page.contains("dingo_disk_planner_budget_head_time_us_total{disk=\"1\"} 40000"), "{page}");
        let slowness = Congestion { congested: true, slowness_permille: 4_000 };
        assert_eq!(reply.disks, vec![DiskCongestion { disk: 1, congestion: Some(slowness) }], "only disk 1 has a head");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn slowdowns_are_injected_only_where_allowed_and_slow_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let refused = service(dir.path(), false).inject_slowdown(slowdown(1, 5_000)).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused}");

        let dir = tempfile::tempdir().unwrap();
        let node = service(dir.path(), true);
        let code = |r: Result<Response<InjectSlowdownReply>, Status>| r.map(|_| ()).map_err(|s| s.code());
        assert_eq!(code(node.inject_slowdown(slowdown(1, 999)).await), Err(tonic::Code::InvalidArgument));
        assert_eq!(code(node.inject_slowdown(slowdown(9, 5_000)).await), Err(tonic::Code::NotFound));
        assert_eq!(code(node.inject_slowdown(slowdown(2, 5_000)).await), Err(tonic::Code::FailedPrecondition));

        let head = node.store.disks[0].head.as_ref().unwrap();
        let (_, normal_us) = head.serve(4096, IoTag::Foreground, || ());
        assert_eq!(code(node.inject_slowdown(slowdown(1, 5_000)).await), Ok(()));
        let (_, slowed_us) = head.serve(4096, IoTag::Foreground, || ());
        assert_eq!(slowed_us, normal_us * 5, "the head is charged five times the modelled time");
    }

    #[test]
    fn the_stats_carry_a_disks_waiting_gate() {
        let dir = tempfile::tempdir().unwrap();
        let hdd = DiskModel { positioning_us: 8_000, transfer_bytes_per_sec: 60_000_000 };
        let gated = IoSettings { waiting: Some(WaitingSettings::tuned(2_000)), ..IoSettings::default() };
        let specs = [(Some(hdd), gated), (Some(hdd), IoSettings::default()), (None, IoSettings::default())]
            .into_iter()
            .enumerate()
            .map(|(n, (hdd, io))| DiskSpec { path: dir.path().join(format!("d{n}")), capacity: None, hdd, io })
            .collect::<Vec<_>>();
        let store = Store::open(&specs, 0, 0).unwrap();
        let reply = stats(&store);
        let gate = reply.disks[0].gate.expect("the gated disk reports its gate");
        let initial = dingo_iosched::waiting::WaitingConfig::default();
        assert_eq!((gate.size_bytes, gate.threshold_us), (initial.initial_size_bytes, initial.initial_threshold_us));
        assert_eq!((gate.retunes, gate.predicted_slowdown_us), (0, None), "not tuned yet");
        assert!(reply.disks[1].gate.is_none() && reply.disks[2].gate.is_none());
    }

    /// The families on the page of a node with an emulated disk, in order,
    /// with their types: what the hand-written encoder this replaced
    /// served (scrapers and dashboards depend on the names).
    #[test]
    fn the_page_keeps_its_families_names_and_types() {
        let dir = tempfile::tempdir().unwrap();
        let node = service(dir.path(), false);
        let page = dingo_daemon::metrics::encode(&crate::metrics::registry(node.store.clone())).unwrap();
        let families: Vec<&str> = page.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        let expected = [
            "dingo_disk_read_bytes_total counter",
            "dingo_disk_read_requests_total counter",
            "dingo_disk_written_bytes_total counter",
            "dingo_disk_write_requests_total counter",
            "dingo_disk_head_time_us_total counter",
            "dingo_disk_checksum_errors_total counter",
            "dingo_disk_direct_io gauge",
            "dingo_disk_class_read_bytes_total counter",
            "dingo_disk_class_read_requests_total counter",
            "dingo_disk_scheduler gauge",
            "dingo_disk_congested gauge",
            "dingo_disk_slowness_ratio gauge",
            "dingo_disk_planner_budgets_total counter",
            "dingo_disk_planner_budget_head_time_us_total counter",
            "dingo_disk_planner_budget_left_us gauge",
            "dingo_disk_class_head_time_us_total counter",
            "dingo_disk_queue_wait_behind_us_total counter",
            "dingo_disk_queue_wait_seconds histogram",
            "dingo_cache_hits_total counter",
            "dingo_cache_misses_total counter",
            "dingo_cache_pinned_hits_total counter",
            "dingo_cache_overflow_evictions_total counter",
            "dingo_cache_pinned_reread_bytes_total counter",
            "dingo_cache_general_bytes gauge",
            "dingo_cache_pinned_bytes gauge",
            "dingo_node_orphan_chunks_deleted_total counter",
        ];
        assert_eq!(families, expected);
        for line in [
            "dingo_disk_read_bytes_total{disk=\"2\"} 0",
            "dingo_disk_slowness_ratio{disk=\"1\"} 1.0",
            "dingo_disk_queue_wait_seconds_bucket{disk=\"1\",class=\"foreground\",le=\"0.001\"} 0",
            "dingo_disk_queue_wait_seconds_bucket{disk=\"1\",class=\"foreground\",le=\"+Inf\"} 0",
            "dingo_cache_pinned_bytes 0",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} missing from\n{page}");
        }
    }
}
