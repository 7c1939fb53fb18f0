//! The client's errors, and how a failed read of one chunk copy is classified.

use crate::ec;
use crate::{Result, WRITE_ATTEMPTS};
use dingo_proto::v1::ChunkId;
use dingo_types::ChunkRef;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ClientError {
    /// An error status from the metadata service or a node; the message
    /// already says what went wrong.
    #[error("{}", .0.message())]
    Rpc(tonic::Status),
    #[error("invalid address `{0}`")]
    Address(String),
    #[error("read of {len} bytes at offset {offset} is past the end of {path} ({size} bytes)")]
    PastEnd { path: String, offset: u64, len: u64, size: u64 },
    #[error("{0}")]
    Unreadable(String),
    #[error("write of {path} failed after {WRITE_ATTEMPTS} attempts: {last}")]
    WriteFailed { path: String, last: String },
    #[error(transparent)]
    Ec(#[from] ec::EcError),
    /// One exact chunk copy could not be read; `fault` says why.
    #[error("{chunk} {fault}: {detail}")]
    Chunk { chunk: ChunkRef, fault: ChunkFault, detail: String },
    #[error("{0}")]
    Invalid(String),
    /// The credentials could not be read (no secret file named, or a bad one).
    #[error(transparent)]
    Auth(#[from] dingo_auth::AuthError),
    /// The file is not sealed: its writer is still writing, or died.
    #[error(
        "{path} is open: its writer is still writing it or died ({committed} bytes committed so far); \
         `dingo fs recover {path}` closes it at that length once its lease has expired"
    )]
    Open { path: String, committed: u64 },
    /// A local file could not be created, written or renamed.
    #[error("{0}")]
    Local(String),
    /// Writing the data out failed (e.g. the reader of a pipe went away).
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    /// The metadata service could not be reached or did not answer in time
    /// (after bounded retries): names the operation and the address once.
    #[error("{op} on the metadata service at {addr} failed: {detail}")]
    Service { op: &'static str, addr: String, code: tonic::Code, detail: String },
    /// A put was interrupted; what it wrote was deleted, unless
    /// `not_removed` says why it could not be.
    #[error("{}", match not_removed {
        None => format!("interrupted: {path} removed"),
        Some(e) => format!("interrupted; {path} could not be removed ({e}): `dingo fs rm {path}`"),
    })]
    Interrupted { path: String, not_removed: Option<String> },
}

/// Why one exact chunk copy could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkFault {
    /// Its node read it and a checksum failed (`DATA_LOSS`): the copy is
    /// damaged.
    Corrupt,
    /// Its node does not have it, or the block is deleted or has no such copy.
    Missing,
    /// Its disk or node is marked dead, or its node did not answer (or
    /// failed otherwise).
    Unavailable,
}

impl std::fmt::Display for ChunkFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChunkFault::Corrupt => "is corrupt",
            ChunkFault::Missing => "is missing",
            ChunkFault::Unavailable => "is unavailable",
        })
    }
}

pub(crate) fn fault(chunk: ChunkRef, fault: ChunkFault, detail: impl Into<String>) -> ClientError {
    ClientError::Chunk { chunk, fault, detail: detail.into() }
}

/// Classifies the failure of a read of `chunk` from the node at `addr`.
pub(crate) fn read_fault(chunk: ChunkRef, addr: &str, e: ClientError) -> ClientError {
    let status = match e {
        ClientError::Rpc(s) => s,
        ClientError::Address(a) => return fault(chunk, ChunkFault::Unavailable, format!("invalid node address `{a}`")),
        other => return other,
    };
    let kind = match status.code() {
        tonic::Code::DataLoss => ChunkFault::Corrupt,
        tonic::Code::NotFound => ChunkFault::Missing,
        // The caller asked for something impossible: not the copy's fault.
        tonic::Code::OutOfRange | tonic::Code::InvalidArgument => return ClientError::Rpc(status),
        _ => ChunkFault::Unavailable,
    };
    fault(chunk, kind, format!("on {addr}: {}", status.message()))
}

pub(crate) fn chunk_of(c: &ChunkId) -> Result<ChunkRef> {
    ChunkRef::try_from(c).map_err(ClientError::Invalid)
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        ClientError::Rpc(s)
    }
}

impl ClientError {
    /// The gRPC code, if the error came from a service.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            ClientError::Rpc(s) => Some(s.code()),
            ClientError::Service { code, .. } => Some(*code),
            _ => None,
        }
    }
}
