//! Randomized fault campaigns against a live local cluster (`dingo
//! chaos`), in the manner of Jepsen: a local cluster with the planner and
//! declarative maintenance runs a writer/reader workload while seeded
//! random faults hit it — SIGKILL and restart of nodes, the metadata
//! service and the planner, SIGSTOP/SIGCONT, bytes flipped in, truncation
//! and deletion of chunk files, a disk directory made unwritable. Then the
//! cluster is healed and checked against an oracle: every acknowledged
//! byte reads back identical, every planted corruption was found and
//! repaired, and no set whose acknowledgement the planner confirmed was
//! delivered again, nor any declared work lost.
//!
//! Faults stay within what the redundancy survives
//! ([`report::WITHIN_REDUNDANCY`]); see `docs/RELIABILITY.md`.

mod auditor;
mod campaign;
pub mod damage;
pub mod fault;
mod lanes;
pub mod report;
pub mod workload;

pub use auditor::AuditReport;
pub use campaign::run;
pub use fault::{FaultCounts, FaultKind};
pub use lanes::Planted;
pub use report::{ChaosReport, Check};

use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ChaosError {
    #[error("the campaign's cluster: {0}")]
    Cluster(#[from] dingo_cluster::ClusterError),
    #[error("storage client: {0}")]
    Client(#[from] dingo_client::ClientError),
    #[error("the campaign's directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("--duration must be positive")]
    NoDuration,
}

/// One campaign.
#[derive(Clone, Debug)]
pub struct ChaosConfig {
    /// The `dingo` executable whose daemons are tested.
    pub exe: PathBuf,
    /// How long faults are injected (the heal comes after).
    pub duration: Duration,
    pub seed: u64,
    /// Where the cluster lives; `None`: a fresh directory under the system
    /// temporary directory, removed after a campaign whose checks passed.
    pub data: Option<PathBuf>,
    pub nodes: u32,
    pub disks_per_node: u32,
}

impl ChaosConfig {
    /// Five nodes of two disks: one node impaired leaves four, enough for
    /// every copy of `replicated:3` and every member of `ec:2+2` on
    /// distinct nodes.
    pub fn new(exe: PathBuf, duration: Duration, seed: u64) -> ChaosConfig {
        ChaosConfig { exe, duration, seed, data: None, nodes: 5, disks_per_node: 2 }
    }
}

/// What `dingo chaos` asks for (with the `clap` feature, its flags).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ChaosRequest {
    /// How long faults are injected, e.g. 10m (the heal and checks follow).
    #[cfg_attr(feature = "clap", arg(long, default_value = "2m", value_parser = dingo_types::parse_duration))]
    pub duration: Duration,
    /// Seed of the faults and the workload (default: from the clock).
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// Directory of the cluster (default: a temporary one, removed if
    /// every check passed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: Option<PathBuf>,
}

impl ChaosRequest {
    /// The campaign of [`ChaosConfig::new`] against `exe`'s daemons, seeded
    /// from the clock unless a seed was given.
    pub fn config(&self, exe: PathBuf) -> ChaosConfig {
        let seed = self.seed.unwrap_or_else(dingo_daemon::now_ms);
        ChaosConfig { data: self.data.clone(), ..ChaosConfig::new(exe, self.duration, seed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_its_seed_and_data_or_seeds_from_the_clock() {
        let given = ChaosRequest { duration: Duration::from_secs(60), seed: Some(7), data: Some("/d".into()) };
        let config = given.config("dingo".into());
        assert_eq!((config.seed, config.data.as_deref(), config.duration), (7, Some("/d".as_ref()), given.duration));
        assert_eq!(config.nodes, ChaosConfig::new("dingo".into(), given.duration, 7).nodes);
        let clock = ChaosRequest { seed: None, ..given }.config("dingo".into());
        assert!(clock.seed > 0);
    }
}
