//! Errors of the planner service, each mapped to the gRPC status a client
//! sees. Every rejected request leaves the planner unchanged.

use crate::store::StoreError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ServiceError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    Precondition(String),
    #[error("{0}")]
    Unavailable(String),
    /// A callback stream replaced by a newer subscription of the same client.
    #[error("{0}")]
    Replaced(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The service hit an error it cannot recover from and is stopping.
    #[error("{0}")]
    Stopping(String),
}

impl From<ServiceError> for tonic::Status {
    fn from(e: ServiceError) -> Self {
        let msg = e.to_string();
        match e {
            ServiceError::Invalid(_) => tonic::Status::invalid_argument(msg),
            ServiceError::NotFound(_) => tonic::Status::not_found(msg),
            ServiceError::Denied(_) => tonic::Status::permission_denied(msg),
            ServiceError::Precondition(_) => tonic::Status::failed_precondition(msg),
            ServiceError::Unavailable(_) => tonic::Status::unavailable(msg),
            ServiceError::Replaced(_) => tonic::Status::aborted(msg),
            ServiceError::Store(_) => tonic::Status::internal(msg),
            ServiceError::Stopping(_) => tonic::Status::unavailable(msg),
        }
    }
}
