//! The outcome of one run: per-mode results, the variants of the baseline
//! and the bound, the comparisons between them, how much of the nominal
//! demand the world generated, and how fast its data churned.

use super::stats::{Mode, ModeResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Per-mode results; a mode not simulated is absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeResults {
    /// The paper's imperative baseline: one disk byte per declared byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imperative: Option<ModeResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declarative: Option<ModeResult>,
    /// The paper's optimal: each distinct declared block read once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimal: Option<ModeResult>,
}

impl ModeResults {
    pub fn iter(&self) -> impl Iterator<Item = &ModeResult> {
        [&self.imperative, &self.declarative, &self.optimal].into_iter().flatten()
    }

    pub fn get(&self, mode: Mode) -> Option<&ModeResult> {
        match mode {
            Mode::Imperative => self.imperative.as_ref(),
            Mode::Declarative => self.declarative.as_ref(),
            Mode::Optimal => self.optimal.as_ref(),
        }
    }
}

/// The baseline and the bound under their other definitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variants {
    /// Imperative that skips sets deleted before it reaches them and reads
    /// through a plain per-disk LRU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imperative_skip_deleted: Option<ModeResult>,
    /// Optimal that also elides every set deleted before its deadline (any
    /// schedule could have waited that long).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimal_elide_deleted: Option<ModeResult>,
}

/// Declarative against the baseline and the bound, under each definition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparisons {
    /// 1 − declarative disk bytes / imperative disk bytes (the paper's baseline).
    pub savings_vs_imperative: Option<f64>,
    /// Declarative disk bytes / optimal disk bytes − 1 (the paper's bound).
    pub gap_to_optimal: Option<f64>,
    /// Savings against the skip-deleted, LRU imperative.
    pub savings_vs_imperative_skip_deleted: Option<f64>,
    /// Gap to the optimal that elides sets deleted before their deadline.
    pub gap_to_optimal_elide_deleted: Option<f64>,
}

impl Comparisons {
    pub fn new(modes: &ModeResults, variants: &Variants) -> Comparisons {
        let decl = modes.declarative.as_ref().map(|d| d.disk_bytes as f64);
        let savings = |base: &Option<ModeResult>| match (decl, base) {
            (Some(d), Some(b)) if b.disk_bytes > 0 => Some(1.0 - d / b.disk_bytes as f64),
            _ => None,
        };
        let gap = |bound: &Option<ModeResult>| match (decl, bound) {
            (Some(d), Some(b)) if b.disk_bytes > 0 => Some(d / b.disk_bytes as f64 - 1.0),
            _ => None,
        };
        Comparisons {
            savings_vs_imperative: savings(&modes.imperative),
            gap_to_optimal: gap(&modes.optimal),
            savings_vs_imperative_skip_deleted: savings(&variants.imperative_skip_deleted),
            gap_to_optimal_elide_deleted: gap(&variants.optimal_elide_deleted),
        }
    }
}

/// How fast the world's data turned over, and whether its shape held.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    /// Of the bytes scrubbing declared, the fraction deleted before
    /// declarative mode read them (the paper: about 26 %, Takeaway 7).
    pub scrub_deleted_fraction: Option<f64>,
    /// Fraction of the files that existed at the start deleted by the end
    /// of the horizon.
    pub initial_files_deleted_fraction: f64,
    /// Share of the live raw bytes per scheme (3-way, RS 6-of-9, RS
    /// 30-of-33) at the start and at the end of the horizon.
    pub layout_start: Vec<f64>,
    pub layout_end: Vec<f64>,
    /// Live raw bytes over raw capacity at the start and at the end.
    pub fill_start: f64,
    pub fill_end: f64,
}

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    pub mix: String,
    pub mix_source: String,
    pub capacity_bytes: u64,
    pub drive_bytes: u64,
    pub disks: u32,
    pub days: f64,
    pub quantum_secs: f64,
    /// Quanta simulated, including the drain after the horizon.
    pub quanta: u32,
    pub demand_mb_s_per_tb: f64,
    pub cache_per_disk_bytes: u64,
    pub seed: u64,
    pub modes: ModeResults,
    pub variants: Variants,
    pub comparisons: Comparisons,
    /// Per task: logical bytes its jobs declared over what the demand and
    /// the mix ask of it (1.0: the world generated exactly its share).
    pub demand_realised: BTreeMap<String, f64>,
    pub churn: Churn,
    /// Quanta in which the planner scheduled more than its budget (must be 0).
    pub over_budget_quanta: u64,
    /// Pin directives the per-disk cache regions could not take.
    pub refused_pin_bytes: u64,
}
