//! A storage node's handlers: every unary request of `dingo.v1.Node`
//! (`ReadChunk`, `DeleteChunk`, `Inventory`, `CacheDirective`,
//! `InjectSlowdown`, `NodeStats`, `QuantumBudget`), decoded from the wire
//! and answered by the real `NodeService` over a store of two disks
//! holding a few chunks. `WriteChunk` and `ReadChunkStream` are streams:
//! their first message's checks are the same `ReadChunk`/store checks, and
//! the chunk bytes they write and read are the `chunk-file` target's.

use crate::Target;
use bytes::Bytes;
use dingo_node::service::NodeService;
use dingo_node::{DiskSpec, IoSettings, Store};
use dingo_proto::v1::node_server::Node;
use dingo_proto::v1::*;
use dingo_types::{BlockId, ChunkRef, DiskId};
use prost::Message;
use std::sync::Arc;
use tonic::Request;

pub struct NodeRpc {
    rt: tokio::runtime::Runtime,
    service: NodeService,
    _dir: tempfile::TempDir,
}

impl NodeRpc {
    pub fn new() -> NodeRpc {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.expect("temporary dir");
        let specs: Vec<DiskSpec> = (0..2)
            .map(|d| DiskSpec {
                path: dir.path().join(format!("d{d}")),
                capacity: None,
                hdd: None,
                io: IoSettings::default(),
            })
            .collect();
        let store = Store::open(&specs, 1 << 20, 1 << 20).expect("a store");
        for (i, disk) in store.disks.iter().enumerate() {
            disk.set_id(DiskId(i as u32 + 1));
        }
        for b in 0..4u64 {
            let data = Bytes::from(vec![b as u8; 70_000]);
            let mut piece = Some(data);
            let chunk = ChunkRef { block: BlockId(b), copy: 0 };
            store.write_chunk(chunk, DiskId(1 + (b % 2) as u32), 70_000, || Ok(piece.take()), || true).expect("writes");
        }
        // The handlers read chunks in `block_in_place`: a multi-threaded runtime.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        NodeRpc { rt, service: NodeService { store: Arc::new(store), fault_injection: true }, _dir: dir }
    }
}

impl Default for NodeRpc {
    fn default() -> Self {
        Self::new()
    }
}

impl Target for NodeRpc {
    fn name(&self) -> &'static str {
        "node-requests"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let framed = |kind: u8, body: Vec<u8>| [vec![kind], body].concat();
        let chunk = |b| Some(ChunkId { block: b, copy: 0 });
        let class = Some(IoClass { task: "scrubbing".into(), declaration_id: 7 });
        vec![
            framed(0, ReadChunkRequest { chunk: chunk(1), offset: 100, len: 66_000, io_class: class }.encode_to_vec()),
            framed(0, ReadChunkRequest { chunk: chunk(2), offset: 0, len: 70_000, io_class: None }.encode_to_vec()),
            framed(1, DeleteChunkRequest { chunk: chunk(3), disk: Some(2) }.encode_to_vec()),
            framed(2, InventoryRequest {}.encode_to_vec()),
            framed(
                3,
                CacheDirectiveRequest {
                    pins: vec![Pin { chunk: chunk(0), until_ms: u64::MAX / 2 }],
                    unpins: vec![ChunkId { block: 1, copy: 0 }],
                }
                .encode_to_vec(),
            ),
            framed(
                4,
                InjectSlowdownRequest { disk: 1, factor_permille: 5000, delay_ms: 0, for_ms: 10 }.encode_to_vec(),
            ),
            framed(5, NodeStatsRequest {}.encode_to_vec()),
            framed(
                6,
                QuantumBudgetRequest {
                    quantum_start_ms: 1_700_000_000_000,
                    quantum_end_ms: 1_700_000_001_000,
                    disks: vec![DiskQuantumBudget { disk: 1, bytes: 1 << 20, reads: 3, head_time_us: 40_000 }],
                }
                .encode_to_vec(),
            ),
        ]
    }

    fn run(&mut self, input: &[u8]) {
        let Some((&kind, body)) = input.split_first() else { return };
        let svc = &self.service;
        self.rt.block_on(async {
            match kind % 7 {
                0 => {
                    if let Ok(r) = ReadChunkRequest::decode(body) {
                        let _ = svc.read_chunk(Request::new(r)).await;
                    }
                }
                1 => {
                    if let Ok(r) = DeleteChunkRequest::decode(body) {
                        let _ = svc.delete_chunk(Request::new(r)).await;
                    }
                }
                2 => {
                    if let Ok(r) = InventoryRequest::decode(body) {
                        let _ = svc.inventory(Request::new(r)).await;
                    }
                }
                3 => {
                    if let Ok(r) = CacheDirectiveRequest::decode(body) {
                        let _ = svc.cache_directive(Request::new(r)).await;
                    }
                }
                4 => {
                    if let Ok(mut r) = InjectSlowdownRequest::decode(body) {
                        // A slowdown is real time: keep it short.
                        r.for_ms = r.for_ms.min(5);
                        r.delay_ms = r.delay_ms.min(5);
                        let _ = svc.inject_slowdown(Request::new(r)).await;
                    }
                }
                5 => {
                    if let Ok(r) = NodeStatsRequest::decode(body) {
                        let _ = svc.node_stats(Request::new(r)).await;
                    }
                }
                _ => {
                    if let Ok(r) = QuantumBudgetRequest::decode(body) {
                        let _ = svc.quantum_budget(Request::new(r)).await;
                    }
                }
            }
        });
        // Deleted seed chunks stay deleted: that is fine, reads of them are
        // refusals to exercise too.
    }
}
