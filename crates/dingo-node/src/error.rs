//! Errors of the storage node, each mapped to the gRPC status a client sees.

use dingo_types::ChunkRef;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{0} not found on this node")]
    NotFound(ChunkRef),
    #[error("{0} already exists on this node")]
    Exists(ChunkRef),
    #[error("read of {len} bytes at offset {offset} is past the end of {chunk} ({data_len} bytes)")]
    OutOfRange { chunk: ChunkRef, offset: u64, len: u64, data_len: u64 },
    #[error("{chunk} is corrupt: {detail}")]
    Corrupt { chunk: ChunkRef, detail: String },
    #[error("disk {disk} is full: no room for {need} more bytes")]
    DiskFull { disk: String, need: u64 },
    #[error("{0}")]
    Disk(String),
    #[error("{0}")]
    Invalid(String),
    #[error("io error on {what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl StoreError {
    pub fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> StoreError {
        let what = what.to_string();
        move |source| {
            if source.raw_os_error() == Some(libc::ENOSPC) {
                StoreError::DiskFull { disk: what, need: 0 }
            } else {
                StoreError::Io { what, source }
            }
        }
    }
}

impl From<StoreError> for tonic::Status {
    fn from(e: StoreError) -> Self {
        let msg = e.to_string();
        match e {
            StoreError::NotFound(_) => tonic::Status::not_found(msg),
            StoreError::Exists(_) => tonic::Status::already_exists(msg),
            StoreError::OutOfRange { .. } => tonic::Status::out_of_range(msg),
            StoreError::Corrupt { .. } => tonic::Status::data_loss(msg),
            StoreError::DiskFull { .. } => tonic::Status::resource_exhausted(msg),
            StoreError::Invalid(_) => tonic::Status::invalid_argument(msg),
            StoreError::Disk(_) | StoreError::Io { .. } => tonic::Status::internal(msg),
        }
    }
}
