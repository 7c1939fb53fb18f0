//! Errors of the storage node, each mapped to the gRPC status a client sees.

use dingo_types::ChunkRef;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{0} not found on this node")]
    NotFound(ChunkRef),
    /// The node had the chunk but its file is gone (deleted behind the
    /// node's back): the copy is lost, like one never stored here.
    #[error("chunk missing: {chunk}: {detail}")]
    Missing { chunk: ChunkRef, detail: String },
    #[error("{0} already exists on this node")]
    Exists(ChunkRef),
    #[error("read of {len} bytes at offset {offset} is past the end of {chunk} ({data_len} bytes)")]
    OutOfRange { chunk: ChunkRef, offset: u64, len: u64, data_len: u64 },
    #[error("chunk corrupt: {chunk}: {detail}")]
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

/// Maps an IO error on the sealed file of `chunk` at `path` to what it says
/// about the copy: a vanished file is [`StoreError::Missing`]; a file
/// shorter than its header says (truncated) or one the device cannot read
/// (`EIO`, a bad sector) is [`StoreError::Corrupt`]. Only other errors stay
/// [`StoreError::Io`]. Either way a reader falls back to another copy and a
/// scrub rebuilds this one.
pub(crate) fn chunk_io(chunk: ChunkRef, path: &std::path::Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| match source.kind() {
        std::io::ErrorKind::NotFound => StoreError::Missing { chunk, detail: format!("{} is gone", path.display()) },
        std::io::ErrorKind::UnexpectedEof => {
            StoreError::Corrupt { chunk, detail: format!("{} is shorter than its header says", path.display()) }
        }
        _ if source.raw_os_error() == Some(libc::EIO) => {
            StoreError::Corrupt { chunk, detail: format!("{} cannot be read: {source}", path.display()) }
        }
        _ => StoreError::Io { what: path.display().to_string(), source },
    }
}

impl From<StoreError> for tonic::Status {
    fn from(e: StoreError) -> Self {
        let msg = e.to_string();
        match e {
            StoreError::NotFound(_) | StoreError::Missing { .. } => tonic::Status::not_found(msg),
            StoreError::Exists(_) => tonic::Status::already_exists(msg),
            StoreError::OutOfRange { .. } => tonic::Status::out_of_range(msg),
            StoreError::Corrupt { .. } => tonic::Status::data_loss(msg),
            StoreError::DiskFull { .. } => tonic::Status::resource_exhausted(msg),
            StoreError::Invalid(_) => tonic::Status::invalid_argument(msg),
            StoreError::Disk(_) | StoreError::Io { .. } => tonic::Status::internal(msg),
        }
    }
}
