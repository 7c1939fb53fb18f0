//! The records the metadata database stores, owned by this crate so that a
//! change to the wire protocol (`dingo_proto::v1`) is not a change to the
//! disk format.
//!
//! Records are prost messages (format 2, see [`super::schema`]). Their field
//! numbers are those format 1 used for the same fields — format 1 stored the
//! `dingo.v1` wire messages themselves — so a format 1 record decodes as a
//! format 2 one; numbers of wire-only fields (chunk addresses, liveness, a
//! file's resolved blocks) are never reused. Enum values carry meaning at 0
//! (`Live`, `Open`) because format 1 stored them that way.

use crate::error::MetaError;
use dingo_proto::Redundancy;

/// A file: its blocks by id, in file order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FileRecord {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "2")]
    pub path: String,
    #[prost(message, optional, tag = "3")]
    pub redundancy: Option<RedundancyRecord>,
    #[prost(uint64, tag = "4")]
    pub block_size: u64,
    /// Logical bytes: replicated blocks and EC data members.
    #[prost(uint64, tag = "5")]
    pub size: u64,
    #[prost(bool, tag = "6")]
    pub sealed: bool,
    #[prost(uint64, repeated, tag = "7")]
    pub block_ids: Vec<u64>,
    // Tag 8 is the wire form's resolved blocks, never stored.
    #[prost(uint64, tag = "9")]
    pub lease: u64,
    #[prost(uint64, tag = "10")]
    pub lease_expiry_ms: u64,
    #[prost(uint64, tag = "11")]
    pub created_ms: u64,
}

/// Replicated (`replicas` > 0, `data` = 0) or Reed-Solomon `data`+`parity`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct RedundancyRecord {
    #[prost(uint32, tag = "1")]
    pub replicas: u32,
    #[prost(uint32, tag = "2")]
    pub data: u32,
    #[prost(uint32, tag = "3")]
    pub parity: u32,
}

/// A block, kept (as `Deleted`) after its file is gone so ids stay dense.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockRecord {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub file: u64,
    /// Bytes stored in each chunk of the block.
    #[prost(uint64, tag = "3")]
    pub size: u64,
    #[prost(enumeration = "BlockState", tag = "4")]
    pub state: i32,
    /// The first block id of the EC stripe, or the block's own id.
    #[prost(uint64, tag = "5")]
    pub group: u64,
    /// Member index within the stripe; 0 if replicated.
    #[prost(uint32, tag = "6")]
    pub ec_index: u32,
    #[prost(message, optional, tag = "7")]
    pub redundancy: Option<RedundancyRecord>,
    #[prost(message, repeated, tag = "8")]
    pub chunks: Vec<ChunkPlacement>,
}

/// Where one copy of a block is stored.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ChunkPlacement {
    #[prost(uint32, tag = "1")]
    pub copy: u32,
    #[prost(uint32, tag = "2")]
    pub disk: u32,
    #[prost(uint32, tag = "3")]
    pub node: u32,
    // Tags 4 and 5 are the wire form's address and `lost` flag, never stored.
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum BlockState {
    Open = 0,
    Sealed = 1,
    Deleted = 2,
}

/// A registered node and its disks; liveness is not stored.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeRecord {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    /// gRPC address clients reach the node at.
    #[prost(string, tag = "2")]
    pub addr: String,
    #[prost(message, repeated, tag = "5")]
    pub disks: Vec<DiskRecord>,
}

/// A disk as it registered.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DiskRecord {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, tag = "2")]
    pub path: String,
    #[prost(uint64, tag = "3")]
    pub capacity_bytes: u64,
    #[prost(uint64, tag = "4")]
    pub used_bytes: u64,
    // Tag 5 is the wire form's chunk count, soft state.
    #[prost(message, optional, tag = "6")]
    pub model: Option<DiskModelRecord>,
    /// The label written into the disk directory.
    #[prost(string, tag = "7")]
    pub uuid: String,
}

/// A disk's service-time model; zeros: a real disk, not emulated.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct DiskModelRecord {
    #[prost(uint64, tag = "1")]
    pub positioning_us: u64,
    #[prost(uint64, tag = "2")]
    pub transfer_bytes_per_sec: u64,
}

/// Administrative state of a disk or node, as the `drain_*` tables store
/// it (by number) and as requests set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum DeviceState {
    Live = 0,
    Dead = 1,
    Draining = 2,
    Decommissioned = 3,
}

impl RedundancyRecord {
    /// The typed redundancy; a record that does not describe a valid one
    /// means the database is damaged.
    pub fn redundancy(&self) -> Result<Redundancy, MetaError> {
        let wire = dingo_proto::v1::Redundancy { replicas: self.replicas, data: self.data, parity: self.parity };
        dingo_proto::redundancy(Some(&wire)).map_err(|e| MetaError::Internal(format!("stored redundancy: {e}")))
    }
}

impl From<Redundancy> for RedundancyRecord {
    fn from(r: Redundancy) -> Self {
        match r {
            Redundancy::Replicated(n) => RedundancyRecord { replicas: u32::from(n), data: 0, parity: 0 },
            Redundancy::Ec { data, parity } => {
                RedundancyRecord { replicas: 0, data: u32::from(data), parity: u32::from(parity) }
            }
        }
    }
}

impl FileRecord {
    pub fn redundancy(&self) -> Result<Redundancy, MetaError> {
        self.redundancy.unwrap_or_default().redundancy()
    }
}

impl BlockRecord {
    pub fn redundancy(&self) -> Result<Redundancy, MetaError> {
        self.redundancy.unwrap_or_default().redundancy()
    }
}

impl BlockState {
    /// The name the wire protocol gives the state, for messages.
    pub fn as_str_name(self) -> &'static str {
        match self {
            BlockState::Open => "BLOCK_STATE_OPEN",
            BlockState::Sealed => "BLOCK_STATE_SEALED",
            BlockState::Deleted => "BLOCK_STATE_DELETED",
        }
    }
}
