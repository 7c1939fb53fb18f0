//! A storage node's handlers: every unary request of `dingo.v1.Node`
//! (`ReadChunk`, `DeleteChunk`, `Inventory`, `CacheDirective`,
//! `InjectSlowdown`, `NodeStats`, `QuantumBudget`), decoded from the wire
//! and answered by the real `NodeService` over a store of two disks
//! holding a few chunks, and the `WriteChunk` client stream: its body as
//! gRPC frames, decoded by tonic's own decoder, so the framing is mutated
//! too. `ReadChunkStream` takes `ReadChunk`'s request and runs its code.

use crate::Target;
use bytes::Bytes;
use dingo_node::service::NodeService;
use dingo_node::{DiskSpec, IoSettings, Store};
use dingo_proto::IoTag;
use dingo_proto::v1::node_server::Node;
use dingo_proto::v1::*;
use dingo_types::{BlockId, ChunkRef, DiskId};
use prost::Message;
use std::sync::Arc;
use tonic::Request;
use tonic::codec::Codec;

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
            store
                .write_chunk(chunk, DiskId(1 + (b % 2) as u32), 70_000, IoTag::Foreground, || Ok(piece.take()), || true)
                .expect("writes");
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
                7,
                write_stream(&[
                    WriteChunkRequest {
                        chunk: chunk(100),
                        disk: 1,
                        data: vec![5; 1000].into(),
                        seal: false,
                        total_len: 2000,
                        io_class: None,
                    },
                    WriteChunkRequest {
                        chunk: None,
                        disk: 0,
                        data: vec![6; 1000].into(),
                        seal: true,
                        total_len: 0,
                        io_class: None,
                    },
                ]),
            ),
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
            match kind % 8 {
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
                6 => {
                    if let Ok(r) = QuantumBudgetRequest::decode(body) {
                        let _ = svc.quantum_budget(Request::new(r)).await;
                    }
                }
                _ => {
                    if write_chunk_stream(svc, body).await.is_ok() {
                        // Keep the store the same size run after run: a
                        // stored chunk is deleted again.
                        let chunk =
                            first_frame(body).and_then(|m| WriteChunkRequest::decode(m).ok()).and_then(|r| r.chunk);
                        let _ = svc.delete_chunk(Request::new(DeleteChunkRequest { chunk, disk: None })).await;
                    }
                }
            }
        });
        // Deleted seed chunks stay deleted: that is fine, reads of them are
        // refusals to exercise too.
    }
}

/// `WriteChunk` with `body` as the request body off the wire, decoded by
/// tonic's own decoder; the chunk file's length when stored.
async fn write_chunk_stream(svc: &NodeService, body: &[u8]) -> Result<u64, tonic::Status> {
    let decoder = tonic_prost::ProstCodec::<WriteChunkReply, WriteChunkRequest>::default().decoder();
    let body = http_body_util::Full::new(Bytes::copy_from_slice(body));
    let stream = tonic::Streaming::new_request(decoder, body, None, None);
    svc.write_chunk(Request::new(stream)).await.map(|r| r.into_inner().len)
}

/// gRPC's length-prefixed framing: an uncompressed flag byte, then the
/// message's length as a big-endian `u32`, then the message.
fn write_stream(messages: &[WriteChunkRequest]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        let bytes = m.encode_to_vec();
        out.push(0);
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

/// The first message of a framed stream, if its frame is whole.
fn first_frame(body: &[u8]) -> Option<&[u8]> {
    let len = u32::from_be_bytes(body.get(1..5)?.try_into().ok()?) as usize;
    body.get(5..5usize.checked_add(len)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_seed_reaches_the_store_and_a_cut_stream_is_refused() {
        let target = NodeRpc::new();
        let seed = target.seeds().into_iter().find(|s| s[0] == 7).expect("a write-stream seed");
        let body = &seed[1..];
        let first = WriteChunkRequest::decode(first_frame(body).unwrap()).unwrap();
        assert_eq!(first.chunk, Some(ChunkId { block: 100, copy: 0 }));
        target.rt.block_on(async {
            assert!(
                write_chunk_stream(&target.service, &body[..body.len() - 10]).await.is_err(),
                "a cut stream is not sealed"
            );
            let file_bytes = write_chunk_stream(&target.service, body).await.unwrap();
            assert!(file_bytes >= 2000, "the chunk file holds the 2,000 bytes sent: {file_bytes}");
            assert!(write_chunk_stream(&target.service, body).await.is_err(), "a sealed chunk is never replaced");
        });
    }
}
