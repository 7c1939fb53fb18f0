//! What a model cluster is built from: its redundancy schemes, its
//! parameters, and what can be wrong with them.

use dingo_types::{DiskModel, Redundancy};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Three full copies.
pub const REPLICATED_3: Redundancy = Redundancy::Replicated(3);
/// Reed-Solomon 6+3 (6 data, 3 parity members: 9 disks per stripe).
pub const RS_6_9: Redundancy = Redundancy::Ec { data: 6, parity: 3 };
/// Reed-Solomon 30+3 (33 disks per stripe).
pub const RS_30_33: Redundancy = Redundancy::Ec { data: 30, parity: 3 };

/// The arithmetic the model does on a scheme's shape, in the integer widths
/// its block and disk counts use.
pub trait StripeShape {
    /// Disks one stripe (or one replicated block) spans.
    fn stripe_width(self) -> u32;
    /// Data blocks per stripe (1 for replication).
    fn data_per_stripe(self) -> u64;
    /// Raw bytes stored per logical byte.
    fn overhead(self) -> f64;
}

impl StripeShape for Redundancy {
    fn stripe_width(self) -> u32 {
        match self {
            Redundancy::Replicated(copies) => u32::from(copies),
            Redundancy::Ec { data, parity } => u32::from(data) + u32::from(parity),
        }
    }

    fn data_per_stripe(self) -> u64 {
        match self {
            Redundancy::Replicated(_) => 1,
            Redundancy::Ec { data, .. } => u64::from(data),
        }
    }

    fn overhead(self) -> f64 {
        f64::from(self.stripe_width()) / self.data_per_stripe() as f64
    }
}

/// Parameters of a model cluster. Defaults follow the paper's simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
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

impl Default for ModelSpec {
    fn default() -> Self {
        ModelSpec {
            raw_capacity: 100_000_000_000_000_000,
            drive_bytes: 24_000_000_000_000,
            disks_per_node: 36,
            fill: 0.8,
            block_bytes: 256_000_000,
            file_blocks: 30,
            layout: vec![(REPLICATED_3, 0.25), (RS_6_9, 0.375), (RS_30_33, 0.375)],
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
