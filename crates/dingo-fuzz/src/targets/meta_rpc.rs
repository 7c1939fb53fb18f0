//! The metadata service's handlers: every request of `dingo.v1.Meta`,
//! decoded from the wire and answered by the real `MetaService` on a redb
//! database (in memory under `/dev/shm` where there is one) holding three
//! registered nodes and a file being written. A handler may refuse a
//! request; it must not panic.

use crate::Target;
use dingo_meta::db::MetaDb;
use dingo_meta::service::MetaService;
use dingo_proto::v1::meta_server::Meta;
use dingo_proto::v1::*;
use prost::Message;
use std::time::Duration;
use tonic::Request;

/// Executions between fresh databases, so the state stays small.
const RESET_EVERY: u64 = 2000;

pub struct MetaRpc {
    rt: tokio::runtime::Runtime,
    service: MetaService,
    /// The lease of `/f`, the file being written, for the seeds.
    lease: u64,
    executions: u64,
    _dir: tempfile::TempDir,
}

fn disk(uuid: u32) -> DiskRegistration {
    DiskRegistration {
        uuid: format!("{uuid:032x}"),
        path: format!("/disks/{uuid}"),
        capacity: 1 << 40,
        used: 0,
        model: None,
    }
}

impl MetaRpc {
    pub fn new() -> MetaRpc {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.expect("temporary dir");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let db = MetaDb::open(dir.path()).expect("a fresh database");
        let service = MetaService::new(db, Duration::from_secs(3600), Duration::from_secs(3600)).expect("a service");
        let lease = rt.block_on(async {
            for n in 0..3u32 {
                let req = RegisterNodeRequest {
                    addr: format!("127.0.0.1:{}", 7410 + n),
                    disks: vec![disk(2 * n), disk(2 * n + 1)],
                };
                service.register_node(Request::new(req)).await.expect("registers");
            }
            let create = CreateFileRequest {
                path: "/f".into(),
                redundancy: Some(Redundancy { replicas: 3, data: 0, parity: 0 }),
                block_size: 1 << 20,
            };
            service.create_file(Request::new(create)).await.expect("creates").into_inner().lease
        });
        MetaRpc { rt, service, lease, executions: 0, _dir: dir }
    }
}

impl Default for MetaRpc {
    fn default() -> Self {
        Self::new()
    }
}

/// Every request type, by an input's first byte: decode it and call its
/// handler.
macro_rules! dispatch {
    ($svc:expr, $kind:expr, $body:expr, $($req:ty => $method:ident),+ $(,)?) => {{
        let handlers: &[&str] = &[$(stringify!($method)),+];
        let mut i = 0u8;
        let kind = $kind % handlers.len() as u8;
        $(
            if kind == i {
                if let Ok(r) = <$req>::decode($body) {
                    let _ = $svc.$method(Request::new(r)).await;
                }
            }
            i += 1;
        )+
        let _ = i;
    }};
}

impl Target for MetaRpc {
    fn name(&self) -> &'static str {
        "meta-requests"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let framed = |kind: u8, body: Vec<u8>| [vec![kind], body].concat();
        let chunk = Some(ChunkId { block: 0, copy: 1 });
        vec![
            framed(0, RegisterNodeRequest { addr: "127.0.0.1:7499".into(), disks: vec![disk(90)] }.encode_to_vec()),
            framed(
                1,
                HeartbeatRequest {
                    node: 1,
                    disks: vec![DiskUsage { disk: 1, capacity: 1 << 40, used: 5, chunks: 1 }],
                    deleted: vec![],
                    corrupt: vec![ChunkOnDisk { disk: 1, chunk }],
                }
                .encode_to_vec(),
            ),
            framed(2, ReportChunksRequest { node: 1, chunks: vec![ChunkOnDisk { disk: 2, chunk }] }.encode_to_vec()),
            framed(
                3,
                CreateFileRequest {
                    path: "/g/h".into(),
                    redundancy: Some(Redundancy { replicas: 0, data: 2, parity: 1 }),
                    block_size: 1 << 20,
                }
                .encode_to_vec(),
            ),
            framed(4, OpenForAppendRequest { path: "/f".into() }.encode_to_vec()),
            framed(
                5,
                AllocateBlocksRequest {
                    path: "/f".into(),
                    lease: self.lease,
                    chunk_bytes: 1 << 20,
                    exclude_nodes: vec![],
                }
                .encode_to_vec(),
            ),
            framed(
                6,
                CommitBlocksRequest {
                    path: "/f".into(),
                    lease: self.lease,
                    blocks: vec![BlockSize { block: 0, size: 1000 }],
                }
                .encode_to_vec(),
            ),
            framed(
                7,
                AbandonBlocksRequest { path: "/f".into(), lease: self.lease, ..Default::default() }.encode_to_vec(),
            ),
            framed(8, SealFileRequest { path: "/f".into(), lease: self.lease }.encode_to_vec()),
            framed(9, RecoverFileRequest { path: "/f".into(), force: true }.encode_to_vec()),
            framed(10, StatRequest { path: "/f".into() }.encode_to_vec()),
            framed(11, ListRequest { prefix: "/".into() }.encode_to_vec()),
            framed(12, DeleteRequest { path: "/f".into() }.encode_to_vec()),
            framed(13, ClusterStatusRequest::default().encode_to_vec()),
            framed(14, BlockTableRequest { start: 0, limit: 100 }.encode_to_vec()),
            framed(15, GetBlocksRequest { ids: vec![0, 1, 2] }.encode_to_vec()),
            framed(16, ChunksOnDiskRequest { disk: 1 }.encode_to_vec()),
            framed(17, LostChunksRequest::default().encode_to_vec()),
            framed(18, SetDiskStateRequest { disk: 1, state: DeviceState::Draining as i32 }.encode_to_vec()),
            framed(19, SetNodeStateRequest { node: 1, state: DeviceState::Dead as i32 }.encode_to_vec()),
            framed(20, PlaceChunkRequest { chunk, disk: None, exclude_nodes: vec![1], emptiest: true }.encode_to_vec()),
            framed(21, ReplaceChunkRequest { chunk, old_disk: 1, new_disk: 3 }.encode_to_vec()),
        ]
    }

    fn run(&mut self, input: &[u8]) {
        self.executions += 1;
        if self.executions.is_multiple_of(RESET_EVERY) {
            *self = MetaRpc::new();
        }
        let Some((&kind, body)) = input.split_first() else { return };
        let svc = &self.service;
        self.rt.block_on(async {
            dispatch!(svc, kind, body,
                RegisterNodeRequest => register_node,
                HeartbeatRequest => heartbeat,
                ReportChunksRequest => report_chunks,
                CreateFileRequest => create_file,
                OpenForAppendRequest => open_for_append,
                AllocateBlocksRequest => allocate_blocks,
                CommitBlocksRequest => commit_blocks,
                AbandonBlocksRequest => abandon_blocks,
                SealFileRequest => seal_file,
                RecoverFileRequest => recover_file,
                StatRequest => stat,
                ListRequest => list,
                DeleteRequest => delete,
                ClusterStatusRequest => cluster_status,
                BlockTableRequest => block_table,
                GetBlocksRequest => get_blocks,
                ChunksOnDiskRequest => chunks_on_disk,
                LostChunksRequest => lost_chunks,
                SetDiskStateRequest => set_disk_state,
                SetNodeStateRequest => set_node_state,
                PlaceChunkRequest => place_chunk,
                ReplaceChunkRequest => replace_chunk,
            );
        });
    }
}
