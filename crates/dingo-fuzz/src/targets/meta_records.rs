//! The metadata service's stored records (`dingo-meta`'s `db/records.rs`,
//! the values of its redb tables `files`, `blocks` and `nodes`): decoded
//! as the database reads them, with the checks the service applies
//! (a redundancy that describes a valid one). A record that decodes must
//! encode to bytes that decode to the same record.

use crate::Target;
use dingo_meta::db::records::{
    BlockRecord, BlockState, ChunkPlacement, DiskModelRecord, DiskRecord, FileRecord, NodeRecord, RedundancyRecord,
};
use prost::Message;

pub struct MetaRecords;

fn check<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let m = M::decode(bytes).ok()?;
    assert_eq!(M::decode(m.encode_to_vec().as_slice()).as_ref(), Ok(&m), "re-encoding changed the record");
    Some(m)
}

impl Target for MetaRecords {
    fn name(&self) -> &'static str {
        "meta-records"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let ec = Some(RedundancyRecord { replicas: 0, data: 6, parity: 3 });
        let rep = Some(RedundancyRecord { replicas: 3, data: 0, parity: 0 });
        let placement = |copy| ChunkPlacement { copy, disk: 4 + copy, node: 2 + copy };
        vec![
            FileRecord {
                id: 9,
                path: "/data/file".into(),
                redundancy: ec,
                block_size: 1 << 20,
                size: 5_000_000,
                sealed: true,
                block_ids: (100..109).collect(),
                lease: 77,
                lease_expiry_ms: 1_700_000_000_000,
                created_ms: 1_700_000_000_000,
            }
            .encode_to_vec(),
            BlockRecord {
                id: 100,
                file: 9,
                size: 1 << 20,
                state: BlockState::Sealed as i32,
                group: 100,
                ec_index: 0,
                redundancy: rep,
                chunks: (0..3).map(placement).collect(),
            }
            .encode_to_vec(),
            NodeRecord {
                id: 3,
                addr: "127.0.0.1:7410".into(),
                disks: vec![DiskRecord {
                    id: 7,
                    path: "/var/lib/dingo/disk0".into(),
                    capacity_bytes: 1 << 40,
                    used_bytes: 1 << 30,
                    model: Some(DiskModelRecord { positioning_us: 8000, transfer_bytes_per_sec: 200_000_000 }),
                    uuid: "0123456789abcdef0123456789abcdef".into(),
                }],
            }
            .encode_to_vec(),
        ]
    }

    fn run(&mut self, input: &[u8]) {
        if let Some(f) = check::<FileRecord>(input) {
            let _ = f.redundancy();
        }
        if let Some(b) = check::<BlockRecord>(input) {
            let _ = (b.redundancy(), BlockState::try_from(b.state));
        }
        // A node record has nothing to check beyond decoding.
        let _ = check::<NodeRecord>(input);
        if let Some(r) = check::<RedundancyRecord>(input) {
            let _ = r.redundancy();
        }
    }
}
