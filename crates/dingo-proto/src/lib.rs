//! Wire protocols of DINGO.
//!
//! [`v1`] holds the storage layer's generated gRPC services (`Meta`, `Node`)
//! and messages; [`planner`] holds the IO Planner service. Beside them live
//! the typed forms every side needs ([`Redundancy`], [`IoTag`]) and
//! conversions to `dingo_types`. The metadata service stores records of its
//! own, not these messages.

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

use dingo_types::{BlockId, ChunkRef, DeclarationId, TaskKind};
use std::fmt;
use std::str::FromStr;

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

/// How a file is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redundancy {
    /// `r` full copies on distinct nodes.
    Replicated(u8),
    /// Reed-Solomon with `data` data members and `parity` parity members.
    Ec { data: u8, parity: u8 },
}

impl Redundancy {
    /// Chunks written per block (replicated) or per stripe (EC).
    pub fn width(self) -> usize {
        match self {
            Redundancy::Replicated(r) => usize::from(r),
            Redundancy::Ec { data, parity } => usize::from(data) + usize::from(parity),
        }
    }

    fn validate(self) -> Result<Self, String> {
        match self {
            Redundancy::Replicated(r) if (1..=dingo_types::MAX_COPIES).contains(&r) => Ok(self),
            Redundancy::Replicated(r) => Err(format!("replication factor {r} must be 1..={}", dingo_types::MAX_COPIES)),
            Redundancy::Ec { data, parity }
                if data >= 1 && parity >= 1 && usize::from(data) + usize::from(parity) <= 64 =>
            {
                Ok(self)
            }
            Redundancy::Ec { data, parity } => {
                Err(format!("erasure code {data}+{parity}: need ≥ 1 data, ≥ 1 parity and at most 64 members"))
            }
        }
    }
}

impl fmt::Display for Redundancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Redundancy::Replicated(r) => write!(f, "replicated:{r}"),
            Redundancy::Ec { data, parity } => write!(f, "ec:{data}+{parity}"),
        }
    }
}

/// Accepts `replicated:3` (or `r3`) and `ec:6+3` (or `rs6+3`).
impl FromStr for Redundancy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid redundancy `{s}`; expected e.g. replicated:3 or ec:6+3");
        let parsed = if let Some(r) =
            s.strip_prefix("replicated:").or_else(|| s.strip_prefix('r').filter(|r| !r.starts_with('s')))
        {
            Redundancy::Replicated(r.parse().map_err(|_| bad())?)
        } else if let Some(km) = s.strip_prefix("ec:").or_else(|| s.strip_prefix("rs")) {
            let (k, m) = km.split_once('+').ok_or_else(bad)?;
            Redundancy::Ec { data: k.parse().map_err(|_| bad())?, parity: m.parse().map_err(|_| bad())? }
        } else {
            return Err(bad());
        };
        parsed.validate()
    }
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

impl TryFrom<Option<&v1::Redundancy>> for Redundancy {
    type Error = String;

    fn try_from(r: Option<&v1::Redundancy>) -> Result<Self, String> {
        let r = r.ok_or("missing redundancy")?;
        let small = |v: u32| u8::try_from(v).map_err(|_| format!("redundancy parameter {v} too large"));
        let parsed = match (r.replicas, r.data) {
            (n, 0) => Redundancy::Replicated(small(n)?),
            (0, k) => Redundancy::Ec { data: small(k)?, parity: small(r.parity)? },
            _ => return Err("redundancy sets both replicas and erasure-code members".into()),
        };
        parsed.validate()
    }
}

/// Who an IO is for: the foreground workload or a maintenance task serving a
/// planner declaration. Nodes count bytes and requests per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoTag {
    #[default]
    Foreground,
    Maintenance {
        task: TaskKind,
        declaration: DeclarationId,
    },
}

impl IoTag {
    /// Counter label: `foreground` or the task name.
    pub fn class_name(self) -> &'static str {
        match self {
            IoTag::Foreground => "foreground",
            IoTag::Maintenance { task, .. } => task.name(),
        }
    }

    /// Dense counter index: 0 for foreground, `1 + task index` otherwise.
    pub fn class_index(self) -> usize {
        match self {
            IoTag::Foreground => 0,
            IoTag::Maintenance { task, .. } => 1 + task.index(),
        }
    }

    /// Number of distinct [`Self::class_index`] values.
    pub const CLASSES: usize = 1 + TaskKind::COUNT;

    /// Name of a class index, inverse of [`Self::class_index`].
    pub fn class_name_of(index: usize) -> &'static str {
        index.checked_sub(1).map_or("foreground", |i| TaskKind::ALL[i].name())
    }
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

impl TryFrom<Option<&v1::IoClass>> for IoTag {
    type Error = String;

    fn try_from(c: Option<&v1::IoClass>) -> Result<Self, String> {
        match c {
            None => Ok(IoTag::Foreground),
            Some(c) if c.task.is_empty() => Ok(IoTag::Foreground),
            Some(c) => Ok(IoTag::Maintenance { task: c.task.parse()?, declaration: DeclarationId(c.declaration_id) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redundancy_parses_and_round_trips() {
        assert_eq!("replicated:3".parse(), Ok(Redundancy::Replicated(3)));
        assert_eq!("r2".parse(), Ok(Redundancy::Replicated(2)));
        assert_eq!("ec:6+3".parse(), Ok(Redundancy::Ec { data: 6, parity: 3 }));
        assert_eq!("rs4+2".parse(), Ok(Redundancy::Ec { data: 4, parity: 2 }));
        for r in [Redundancy::Replicated(3), Redundancy::Ec { data: 6, parity: 3 }] {
            assert_eq!(r.to_string().parse(), Ok(r));
            assert_eq!(Redundancy::try_from(Some(&v1::Redundancy::from(r))), Ok(r));
        }
    }

    #[test]
    fn redundancy_rejects_nonsense() {
        for bad in ["", "replicated:0", "replicated:99", "ec:0+2", "ec:3", "ec:6+0", "mirror", "rsx+1"] {
            let e = bad.parse::<Redundancy>().unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        let both = v1::Redundancy { replicas: 3, data: 2, parity: 1 };
        assert!(Redundancy::try_from(Some(&both)).is_err());
    }

    #[test]
    fn io_tags_round_trip_and_index_densely() {
        let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(7) };
        assert_eq!(IoTag::try_from(Some(&v1::IoClass::from(tag))), Ok(tag));
        assert_eq!(IoTag::try_from(None), Ok(IoTag::Foreground));
        assert_eq!(IoTag::class_name_of(tag.class_index()), "scrubbing");
        assert_eq!(IoTag::class_name_of(IoTag::Foreground.class_index()), "foreground");
        let bad = v1::IoClass { task: "defrag".into(), declaration_id: 1 };
        assert!(IoTag::try_from(Some(&bad)).unwrap_err().contains("unknown task"));
    }
}
