//! What a model cluster is built from: its redundancy schemes, its
//! parameters, and what can be wrong with them.

use dingo_types::DiskModel;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How a scheme stores data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Redundancy {
    Replicated { copies: u8 },
    ErasureCoded { data: u8, parity: u8 },
}

impl Redundancy {
    pub const REPLICATED_3: Redundancy = Redundancy::Replicated { copies: 3 };
    pub const RS_6_9: Redundancy = Redundancy::ErasureCoded { data: 6, parity: 3 };
    pub const RS_30_33: Redundancy = Redundancy::ErasureCoded { data: 30, parity: 3 };

    /// Disks one stripe (or one replicated block) spans.
    pub fn width(self) -> u32 {
        match self {
            Redundancy::Replicated { copies } => u32::from(copies),
            Redundancy::ErasureCoded { data, parity } => u32::from(data) + u32::from(parity),
        }
    }

    /// Data blocks per stripe (1 for replication).
    pub fn data_per_stripe(self) -> u64 {
        match self {
            Redundancy::Replicated { .. } => 1,
            Redundancy::ErasureCoded { data, .. } => u64::from(data),
        }
    }

    /// Raw bytes stored per logical byte.
    pub fn overhead(self) -> f64 {
        f64::from(self.width()) / self.data_per_stripe() as f64
    }
}

/// Parameters of a model cluster. Defaults follow the paper's simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    pub raw_capacity: u64,
    pub drive_bytes: u64,
    pub disks_per_node: u32,
    /// Fraction of raw capacity in use.
    pub fill: f64,
    pub block_bytes: u64,
    /// Data blocks per file (7.5 GB files of 256 MB blocks: 30).
    pub file_blocks: u32,
    /// Schemes with their share of the used raw capacity.
    pub layout: Vec<(Redundancy, f64)>,
    pub disk_model: DiskModel,
    /// Placement groups each disk takes part in (more: smoother balance).
    pub pgs_per_disk: u32,
    pub seed: u64,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            raw_capacity: 100_000_000_000_000_000,
            drive_bytes: 24_000_000_000_000,
            disks_per_node: 36,
            fill: 0.8,
            block_bytes: 256_000_000,
            file_blocks: 30,
            layout: vec![(Redundancy::REPLICATED_3, 0.25), (Redundancy::RS_6_9, 0.375), (Redundancy::RS_30_33, 0.375)],
            disk_model: DiskModel::HDD,
            pgs_per_disk: 64,
            seed: 1,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    #[error(
        "the cluster needs at least {needed} nodes for a stripe of width {needed}, but has {nodes}; \
         use more capacity or fewer disks per node"
    )]
    TooFewNodes { needed: u32, nodes: u32 },
    #[error("files of {file_blocks} blocks do not fill whole stripes of {data} data blocks")]
    FileNotWholeStripes { file_blocks: u32, data: u64 },
    #[error("{0}")]
    Invalid(&'static str),
}
