//! Errors of the metadata service, each mapped to the gRPC status a client sees.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum MetaError {
    #[error("no such file: {0}")]
    NotFound(String),
    #[error("file already exists: {0}")]
    Exists(String),
    #[error("file {0} is sealed and cannot be written")]
    Sealed(String),
    #[error("file {path} is being written by another client (lease expires in {ms_left} ms)")]
    LeaseHeld { path: String, ms_left: u64 },
    #[error("lease on {0} is not held or has expired")]
    LeaseLost(String),
    #[error("invalid path {0}")]
    InvalidPath(String),
    #[error("{0}")]
    Invalid(String),
    #[error("block {0} does not exist")]
    NoSuchBlock(u64),
    /// The state changed under a request that assumed otherwise.
    #[error("{0}")]
    Conflict(String),
    /// A request that would endanger data or cannot make progress now.
    #[error("refused: {0}")]
    Refused(String),
    #[error("cannot place chunks: {0}")]
    NoPlacement(String),
    #[error("unknown node {0}; register first")]
    UnknownNode(u32),
    #[error("metadata store: {0}")]
    Internal(String),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for MetaError {
            fn from(e: $t) -> Self {
                MetaError::Internal(e.to_string())
            }
        }
    )*};
}
from_redb!(redb::Error, redb::TransactionError, redb::TableError, redb::StorageError, redb::CommitError);

impl From<MetaError> for tonic::Status {
    fn from(e: MetaError) -> Self {
        let msg = e.to_string();
        match e {
            MetaError::NotFound(_) | MetaError::UnknownNode(_) | MetaError::NoSuchBlock(_) => {
                tonic::Status::not_found(msg)
            }
            MetaError::Exists(_) => tonic::Status::already_exists(msg),
            MetaError::Sealed(_)
            | MetaError::LeaseHeld { .. }
            | MetaError::LeaseLost(_)
            | MetaError::Conflict(_)
            | MetaError::Refused(_) => tonic::Status::failed_precondition(msg),
            MetaError::InvalidPath(_) | MetaError::Invalid(_) => tonic::Status::invalid_argument(msg),
            MetaError::NoPlacement(_) => tonic::Status::resource_exhausted(msg),
            MetaError::Internal(_) => tonic::Status::internal(msg),
        }
    }
}
