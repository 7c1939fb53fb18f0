//! The `Node` gRPC service over a [`Store`], and the node's metrics page.

use crate::error::StoreError;
use crate::store::Store;
use dingo_daemon::metrics::MetricsText;
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
        let (data, cache_hit) = block_in_place(|| self.store.read(chunk, r.offset, r.len, tag))?;
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

/// A per-disk metric family: name, kind, help and how to read its value.
type DiskFamily = (&'static str, &'static str, &'static str, fn(&DiskStats) -> u64);

/// The node's Prometheus page.
pub fn render_metrics(store: &Store) -> String {
    let s = stats(store);
    let mut m = MetricsText::new();
    let per_disk: [DiskFamily; 7] = [
        ("dingo_disk_read_bytes_total", "counter", "Bytes read from the device.", |d| d.bytes_read),
        ("dingo_disk_read_requests_total", "counter", "Read requests sent to the device.", |d| d.read_requests),
        ("dingo_disk_written_bytes_total", "counter", "Bytes written to the device.", |d| d.bytes_written),
        ("dingo_disk_write_requests_total", "counter", "Write requests sent to the device.", |d| d.write_requests),
        ("dingo_disk_head_time_us_total", "counter", "Device busy time (modelled for emulated HDDs).", |d| {
            d.head_time_us
        }),
        ("dingo_disk_checksum_errors_total", "counter", "Checksum mismatches found on reads.", |d| d.checksum_errors),
        ("dingo_disk_direct_io", "gauge", "1 if reads bypass the page cache with O_DIRECT.", |d| {
            u64::from(d.direct_io)
        }),
    ];
    for (name, kind, help, get) in per_disk {
        m.family(name, kind, help);
        for d in &s.disks {
            m.sample(name, &[("disk", &d.disk.to_string())], get(d));
        }
    }
    for (name, help, bytes) in [
        ("dingo_disk_class_read_bytes_total", "Bytes read from the device per IO class.", true),
        ("dingo_disk_class_read_requests_total", "Read requests per IO class.", false),
    ] {
        m.family(name, "counter", help);
        for d in &s.disks {
            for c in &d.classes {
                let v = if bytes { c.bytes } else { c.requests };
                m.sample(name, &[("disk", &d.disk.to_string()), ("class", &c.class_name)], v);
            }
        }
    }
    render_head_metrics(store, &s, &mut m);
    let c = s.cache.unwrap_or_default();
    for (name, kind, help, v) in [
        ("dingo_cache_hits_total", "counter", "Cache page hits.", c.hits),
        ("dingo_cache_misses_total", "counter", "Cache page misses.", c.misses),
        ("dingo_cache_pinned_hits_total", "counter", "Hits served by the pinned region.", c.pinned_hits),
        (
            "dingo_cache_overflow_evictions_total",
            "counter",
            "Pinned pages evicted early on overflow.",
            c.overflow_evictions,
        ),
        (
            "dingo_cache_pinned_reread_bytes_total",
            "counter",
            "Bytes of pinned pages read from disk again, while pinned, after an overflow pushed them out.",
            c.pinned_reread_bytes,
        ),
        ("dingo_cache_general_bytes", "gauge", "Bytes in the general region.", c.general_bytes),
        ("dingo_cache_pinned_bytes", "gauge", "Bytes in the pinned region.", c.pinned_bytes),
        (
            "dingo_node_orphan_chunks_deleted_total",
            "counter",
            "Chunks deleted because no block record placed them here.",
            store.orphans_deleted.load(std::sync::atomic::Ordering::Relaxed),
        ),
    ] {
        m.family(name, kind, help).sample(name, &[], v);
    }
    if let Some(f) = store.cache.flash_stats() {
        for (name, help, v) in [
            ("dingo_flash_max_open_zones", "Most zones open at once since the node started.", {
                u64::from(f.tier.max_open_zones)
            }),
            ("dingo_flash_write_budget_bytes_per_day", "The configured device-writes-per-day budget.", {
                f.write_budget_bytes_per_day
            }),
        ] {
            m.family(name, "gauge", help).sample(name, &[], v);
        }
        for (name, help, v) in [
            ("dingo_flash_hits_total", "Cache pages served from the flash tier.", f.tier.hits),
            ("dingo_flash_misses_total", "DRAM misses the flash tier did not serve.", f.tier.misses),
            ("dingo_flash_evicted_written_bytes_total", "Bytes of pages evicted from DRAM written to flash.", {
                f.tier.evicted_written_bytes
            }),
            ("dingo_flash_pinned_written_bytes_total", "Bytes of pinned overflow written to flash.", {
                f.tier.pinned_written_bytes
            }),
            ("dingo_flash_host_written_bytes_total", "Bytes the tier asked the flash device to write.", {
                f.host_write_bytes
            }),
            ("dingo_flash_device_written_bytes_total", "Bytes the flash device wrote.", f.device_write_bytes),
            ("dingo_flash_refused_over_budget_bytes_total", "Bytes refused by the writes-per-day budget.", {
                f.tier.refused_over_budget_bytes
            }),
            ("dingo_flash_refused_no_space_bytes_total", "Bytes refused: every zone held live pins.", {
                f.tier.refused_no_space_bytes
            }),
            ("dingo_flash_zone_resets_total", "Zones reset whole.", f.tier.log_zone_resets + f.tier.pinned_zone_resets),
            ("dingo_flash_checksum_misses_total", "Flash pages that failed their checksum.", f.checksum_misses),
            ("dingo_flash_dropped_queue_full_bytes_total", "Bytes not offered to flash: its writer was behind.", {
                f.dropped_queue_full_bytes
            }),
        ] {
            m.family(name, "counter", help).sample(name, &[], v);
        }
    }
    m.finish()
}

/// Per-disk, per-class metrics of the emulated heads' schedulers.
fn render_head_metrics(store: &Store, s: &NodeStatsReply, m: &mut MetricsText) {
    use crate::head::WAIT_BUCKETS_MS;
    use dingo_iosched::Class;
    let heads: Vec<(String, &crate::head::Head)> =
        s.disks.iter().zip(&store.disks).filter_map(|(st, d)| Some((st.disk.to_string(), d.head.as_ref()?))).collect();
    let name = "dingo_disk_scheduler";
    m.family(name, "gauge", "1 for the IO scheduler policy of each emulated disk ([node.io] scheduler).");
    for (disk, head) in &heads {
        m.sample(name, &[("disk", disk), ("policy", head.scheduler.name())], 1);
    }
    let congestion: Vec<_> = heads.iter().map(|(disk, head)| (disk, head.congestion())).collect();
    let name = "dingo_disk_congested";
    m.family(name, "gauge", "1 while the emulated disk runs more than 10 % above its model (the steering signal).");
    for (disk, c) in &congestion {
        m.sample(name, &[("disk", disk)], u64::from(c.congested));
    }
    let name = "dingo_disk_slowness_ratio";
    m.family(name, "gauge", "Observed over modelled head time of the disk's recent requests (1: on profile).");
    for (disk, c) in &congestion {
        m.sample(name, &[("disk", disk)], c.slowness_permille as f64 / 1000.0);
    }
    type HeadCounter = fn(&crate::head::Head) -> u64;
    let planner: [(&str, &str, &str, HeadCounter); 3] = [
        ("dingo_disk_planner_budgets_total", "counter", "Per-quantum budgets received from the planner.", |h| {
            h.budgets_received.load(Relaxed)
        }),
        (
            "dingo_disk_planner_budget_head_time_us_total",
            "counter",
            "Head time the planner's budgets held, µs.",
            |h| h.budgeted_us.load(Relaxed),
        ),
        (
            "dingo_disk_planner_budget_left_us",
            "gauge",
            "Head time of the current quantum's budget not yet served, µs.",
            |h| h.planned_left_us(),
        ),
    ];
    for (name, kind, help, get) in planner {
        m.family(name, kind, help);
        for (disk, head) in &heads {
            m.sample(name, &[("disk", disk)], get(head));
        }
    }
    let name = "dingo_disk_class_head_time_us_total";
    m.family(name, "counter", "Emulated head time served per scheduling class, µs.");
    for (disk, head) in &heads {
        for (i, class) in Class::LABELS.iter().enumerate() {
            m.sample(name, &[("disk", disk), ("class", class)], head.classes[i].served_us.load(Relaxed));
        }
    }
    let name = "dingo_disk_queue_wait_behind_us_total";
    m.family(
        name,
        "counter",
        "Head time requests of a class waited behind units of each class (`behind`): the rest of the unit in \
         service at their arrival and every unit started before theirs, µs.",
    );
    for (disk, head) in &heads {
        for (i, class) in Class::LABELS.iter().enumerate() {
            for (j, behind) in Class::LABELS.iter().enumerate() {
                let us = head.classes[i].waited_behind_us[j].load(Relaxed);
                m.sample(name, &[("disk", disk), ("class", class), ("behind", behind)], us);
            }
        }
    }
    let gates: Vec<(&String, dingo_iosched::waiting::GateState)> =
        heads.iter().filter_map(|(disk, head)| Some((disk, head.gate()?))).collect();
    if !gates.is_empty() {
        type GateGauge = fn(&dingo_iosched::waiting::GateState) -> f64;
        let gauges: [(&str, &str, GateGauge); 5] = [
            ("dingo_disk_gate_open", "1 while the Waiting gate lets best effort fire.", |g| {
                f64::from(u8::from(g.open))
            }),
            ("dingo_disk_gate_size_bytes", "The Waiting gate's request size.", |g| g.params.size_bytes as f64),
            ("dingo_disk_gate_threshold_seconds", "Foreground idle time before the Waiting gate opens.", |g| {
                g.params.threshold_us as f64 / 1e6
            }),
            (
                "dingo_disk_gate_predicted_slowdown_seconds",
                "Mean foreground slowdown the last tune predicted for the gate's parameters.",
                |g| g.prediction.map_or(0.0, |p| p.mean_slowdown_us / 1e6),
            ),
            ("dingo_disk_gate_retunes", "Times the Waiting gate's tuner ran.", |g| g.retunes as f64),
        ];
        for (name, help, get) in gauges {
            m.family(name, "gauge", help);
            for (disk, g) in &gates {
                m.sample(name, &[("disk", disk)], get(g));
            }
        }
    }
    let name = "dingo_disk_queue_wait_seconds";
    m.family(name, "histogram", "Time requests waited for the emulated head, per scheduling class.");
    for (disk, head) in &heads {
        for (i, class) in Class::LABELS.iter().enumerate() {
            let c = &head.classes[i];
            let mut cumulative = 0;
            for (b, le_ms) in WAIT_BUCKETS_MS.iter().enumerate() {
                cumulative += c.wait_buckets[b].load(Relaxed);
                let le = format!("{}", *le_ms as f64 / 1000.0);
                m.sample(&format!("{name}_bucket"), &[("disk", disk), ("class", class), ("le", &le)], cumulative);
            }
            let count = c.waits.load(Relaxed);
            m.sample(&format!("{name}_bucket"), &[("disk", disk), ("class", class), ("le", "+Inf")], count);
            let sum = c.wait_us_sum.load(Relaxed) as f64 / 1e6;
            m.sample(&format!("{name}_sum"), &[("disk", disk), ("class", class)], sum);
            m.sample(&format!("{name}_count"), &[("disk", disk), ("class", class)], count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::IoSettings;
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
        let page = render_metrics(&node.store);
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
}
