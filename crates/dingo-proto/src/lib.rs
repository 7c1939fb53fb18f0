//! Wire protocols of DINGO.
//!
//! [`v1`] holds the storage layer's generated gRPC services (`Meta`, `Node`)
//! and messages; [`planner`] holds the IO Planner service. Beside them live
//! the conversions between the messages and the typed forms every side
//! needs, which `dingo_types` defines ([`Redundancy`], [`IoTag`], ids).
//! The metadata service stores records of its own, not these messages.

pub mod codec;
pub mod probe;

#[allow(clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("dingo.v1");
}

/// The IO Planner service (`proto/planner.proto`).
#[allow(clippy::all, clippy::pedantic)]
pub mod planner {
    tonic::include_proto!("dingo.planner.v1");
}

include!(concat!(env!("OUT_DIR"), "/rpc_paths.rs"));

/// The method paths (`/package.Service/Method`) of `service` (e.g.
/// `dingo.v1.Meta`), from the compiled protos.
pub fn rpc_paths(service: &str) -> impl Iterator<Item = &'static str> + '_ {
    RPC_PATHS.iter().filter(move |(s, _)| *s == service).map(|&(_, path)| path)
}

use dingo_types::{BlockId, ChunkRef, DeclarationId};
/// The typed forms, defined once in `dingo-types`.
pub use dingo_types::{IoTag, Redundancy};

/// Largest gRPC message either side accepts: one 16 MiB read or write piece
/// plus framing.
pub const MAX_MESSAGE_BYTES: usize = 17 << 20;

/// HTTP/2 flow-control windows for every channel and server. The 64 KiB
/// default would make each multi-megabyte chunk transfer wait on dozens of
/// window updates.
pub const STREAM_WINDOW: u32 = 16 << 20;
pub const CONNECTION_WINDOW: u32 = 64 << 20;
/// HTTP/2 frame size: large frames cut per-frame overhead on bulk transfers. Not larger: data passes
/// frame by frame through several buffers (socket, HTTP/2, gRPC message, chunk writer), and 1 MiB
/// keeps each step cache-resident; 8 MiB frames and write pieces (one message per chunk) copied less
/// but faulted in more fresh pages and used no less CPU in `dingo bench io`.
pub const MAX_FRAME: u32 = 1 << 20;

impl From<ChunkRef> for v1::ChunkId {
    fn from(c: ChunkRef) -> Self {
        v1::ChunkId { block: c.block.0, copy: u32::from(c.copy) }
    }
}

impl TryFrom<&v1::ChunkId> for ChunkRef {
    type Error = String;

    fn try_from(c: &v1::ChunkId) -> Result<Self, String> {
        let copy = u8::try_from(c.copy).map_err(|_| format!("copy index {} out of range", c.copy))?;
        Ok(ChunkRef { block: BlockId(c.block), copy })
    }
}

/// Parses an optional wire chunk id, as every RPC carrying one must.
pub fn chunk_ref(c: Option<&v1::ChunkId>) -> Result<ChunkRef, tonic::Status> {
    let c = c.ok_or_else(|| tonic::Status::invalid_argument("missing chunk id"))?;
    ChunkRef::try_from(c).map_err(tonic::Status::invalid_argument)
}

impl From<Redundancy> for v1::Redundancy {
    fn from(r: Redundancy) -> Self {
        match r {
            Redundancy::Replicated(r) => v1::Redundancy { replicas: u32::from(r), data: 0, parity: 0 },
            Redundancy::Ec { data, parity } => {
                v1::Redundancy { replicas: 0, data: u32::from(data), parity: u32::from(parity) }
            }
        }
    }
}

/// Parses an optional wire redundancy, as every message carrying one must.
pub fn redundancy(r: Option<&v1::Redundancy>) -> Result<Redundancy, String> {
    let r = r.ok_or("missing redundancy")?;
    let small = |v: u32| u8::try_from(v).map_err(|_| format!("redundancy parameter {v} too large"));
    let parsed = match (r.replicas, r.data) {
        (n, 0) => Redundancy::Replicated(small(n)?),
        (0, k) => Redundancy::Ec { data: small(k)?, parity: small(r.parity)? },
        _ => return Err("redundancy sets both replicas and erasure-code members".into()),
    };
    parsed.validated()
}

impl From<IoTag> for v1::IoClass {
    fn from(t: IoTag) -> Self {
        match t {
            IoTag::Foreground => v1::IoClass::default(),
            IoTag::Maintenance { task, declaration } => {
                v1::IoClass { task: task.name().to_string(), declaration_id: declaration.0 }
            }
        }
    }
}

/// Parses an optional wire IO class: none, or no task, is foreground.
pub fn io_tag(c: Option<&v1::IoClass>) -> Result<IoTag, String> {
    match c {
        None => Ok(IoTag::Foreground),
        Some(c) if c.task.is_empty() => Ok(IoTag::Foreground),
        Some(c) => Ok(IoTag::Maintenance { task: c.task.parse()?, declaration: DeclarationId(c.declaration_id) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::TaskKind;

    #[test]
    fn redundancy_parses_and_round_trips() {
        for r in [Redundancy::Replicated(3), Redundancy::Ec { data: 6, parity: 3 }] {
            assert_eq!(redundancy(Some(&v1::Redundancy::from(r))), Ok(r));
        }
        assert!(redundancy(None).is_err());
    }

    #[test]
    fn redundancy_rejects_nonsense() {
        let zero = v1::Redundancy { replicas: 0, data: 2, parity: 0 };
        assert!(redundancy(Some(&zero)).is_err());
        let both = v1::Redundancy { replicas: 3, data: 2, parity: 1 };
        assert!(redundancy(Some(&both)).is_err());
    }

    #[test]
    fn io_tags_round_trip_and_index_densely() {
        let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(7) };
        assert_eq!(io_tag(Some(&v1::IoClass::from(tag))), Ok(tag));
        assert_eq!(io_tag(None), Ok(IoTag::Foreground));
        let bad = v1::IoClass { task: "defrag".into(), declaration_id: 1 };
        assert!(io_tag(Some(&bad)).unwrap_err().contains("unknown task"));
    }
}
