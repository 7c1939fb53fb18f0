//! The experiments that measure DINGO on a local cluster, as a library with
//! typed results: the IO-control experiments behind `dingo bench iocontrol`
//! ([`fgtail`], [`steering`], [`waiting`], [`fairness`]) and the
//! storage benchmark behind `dingo bench io` ([`storage`]).
//!
//! Each IO-control experiment runs a local cluster with HDD emulation under
//! open-loop, seeded load and compares the mechanism with today's
//! behaviour. Its `model` module holds what the real run shares with its
//! virtual-time twin: the load, the statistics, the bars and the twin itself,
//! which drives the node's policy code from `dingo-iosched` with a simulated
//! clock. The twins live here, beside the runs they mirror, rather than in
//! `dingo-iosched`, so that crate stays the policy alone; like the policies
//! they do no IO and read no clock, and they run in this crate's tests in
//! seconds. [`twin`] is the simulated head the one-disk twins share.
//!
//! What the experiments have in common is here once: the options
//! ([`harness::Options`]), running the two policies in turn, starting a
//! cluster and laying out data ([`cluster`]), the statistics ([`stats`]),
//! reading `/proc` ([`proc`]), and writing the results ([`output`]: JSON, the
//! per-second series as CSV, the plots).

pub mod cluster;
pub mod fairness;
pub mod fgtail;
pub mod harness;
pub mod output;
pub mod proc;
pub use dingo_report::stats;
pub mod steering;
pub mod storage;
pub mod twin;
pub mod waiting;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Cluster(#[from] dingo_cluster::ClusterError),
    #[error(transparent)]
    Client(#[from] dingo_client::ClientError),
    #[error(transparent)]
    Store(#[from] dingo_node::StoreError),
    #[error(transparent)]
    Ec(#[from] dingo_client::ec::EcError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("cannot write the results as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot draw {chart}: {message}")]
    Plot { chart: String, message: String },
    #[error("{0}")]
    Setup(String),
    /// A measurement's own check failed (data read back differs, ...).
    #[error("{0}")]
    Check(String),
}

impl BenchError {
    /// Maps an IO error to [`BenchError::Io`] saying what failed.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }
}
