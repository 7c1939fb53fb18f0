//! The IO-control experiments behind `dingo bench iocontrol` (issue 15):
//! each runs a local cluster with HDD emulation under open-loop, seeded
//! load, once per policy and run, and compares the mechanism with today's
//! behaviour. The load and statistics are shared with the virtual-time
//! twins in [`dingo_iosched`], which check the same bars in the test suite.

pub mod cpu;
pub mod fairness;
pub mod fgtail;
pub mod steering;
pub mod waiting;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Cluster(#[from] dingo_cluster::ClusterError),
    #[error(transparent)]
    Client(#[from] dingo_client::ClientError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Setup(String),
}
