//! What a campaign did and found: `dingo chaos`'s JSON and text.

use crate::auditor::AuditReport;
use crate::fault::{FaultCounts, FaultKind};
use serde::Serialize;
use std::fmt;

/// The fault budget every campaign keeps, printed with its report.
pub const WITHIN_REDUNDANCY: &str = "at most one storage node impaired at a time (killed, stopped, or a disk \
     unwritable) and at most one damaged chunk per redundancy group over the campaign; replicated:3 and ec:2+2 \
     each survive two lost chunks; the metadata service and the planner are killed or stopped one at a time";

/// One oracle check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// The workload's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkloadReport {
    pub writes_acked: u64,
    pub bytes_acked: u64,
    pub writes_failed: u64,
    pub reads_ok: u64,
    pub reads_unavailable: u64,
    /// Reads during the campaign that returned other bytes than acknowledged.
    pub reads_mismatched: u64,
    /// Acknowledged files (and their bytes) that did not read back identical
    /// after the heal.
    pub files_lost: u64,
    pub bytes_lost: u64,
    pub mismatches: Vec<String>,
}

/// The planted corruptions and what became of them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CorruptionReport {
    pub planted: u64,
    /// Planted chunks whose copy reads back verified after the heal: found
    /// and rebuilt by the cluster (nothing else rewrites a chunk file).
    pub repaired: u64,
    /// Chunks the heal's scrub found bad and rebuilt, and its failures.
    pub heal_scrub_repaired: u64,
    pub heal_scrub_failed: u64,
    /// Chunks the metadata service still lists as corrupt after the heal.
    pub still_listed_corrupt: u64,
    pub unrepaired: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ChaosReport {
    pub seed: u64,
    pub duration_s: f64,
    /// Wall time of the whole run, heal included.
    pub wall_s: f64,
    pub nodes: usize,
    pub disks_per_node: u32,
    pub within_redundancy: &'static str,
    pub faults: FaultCounts,
    pub faults_total: u64,
    pub workload: WorkloadReport,
    pub corruption: CorruptionReport,
    pub planner: AuditReport,
    pub incidents: Vec<String>,
    pub checks: Vec<Check>,
    pub passed: bool,
}

impl ChaosReport {
    /// The one-line command that runs this campaign again.
    pub fn reproduce(&self) -> String {
        format!("dingo chaos --seed {} --duration {}s", self.seed, self.duration_s.round() as u64)
    }
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "chaos campaign: seed {}, {:.0} s of faults ({:.0} s in all), {} nodes x {} disks",
            self.seed, self.duration_s, self.wall_s, self.nodes, self.disks_per_node
        )?;
        writeln!(f, "faults within redundancy: {}", self.within_redundancy)?;
        writeln!(f, "faults injected: {}", self.faults_total)?;
        for k in FaultKind::ALL {
            writeln!(f, "  {:<16} {}", k.name(), self.faults.get(k))?;
        }
        let w = &self.workload;
        writeln!(
            f,
            "workload: {} writes acknowledged ({} bytes), {} failed; {} reads identical, {} unavailable, {} wrong",
            w.writes_acked, w.bytes_acked, w.writes_failed, w.reads_ok, w.reads_unavailable, w.reads_mismatched
        )?;
        let c = &self.corruption;
        writeln!(
            f,
            "corruption: {} planted, {} repaired (heal scrub rebuilt {}, {} failed; {} still listed corrupt)",
            c.planted, c.repaired, c.heal_scrub_repaired, c.heal_scrub_failed, c.still_listed_corrupt
        )?;
        let p = &self.planner;
        writeln!(
            f,
            "planner: {} declarations ({} sets), {} callbacks ({} redelivered), {} acks confirmed ({} sets), {} failed, \
             {} skipped, {} doubled, {} late",
            p.declarations,
            p.sets_declared,
            p.callbacks,
            p.redeliveries,
            p.acks_confirmed,
            p.sets_acked,
            p.acks_failed,
            p.acks_skipped,
            p.acks_doubled,
            p.acks_late
        )?;
        for i in &self.incidents {
            writeln!(f, "incident: {i}")?;
        }
        writeln!(f, "checks:")?;
        for c in &self.checks {
            writeln!(f, "  [{}] {}: {}", if c.passed { "pass" } else { "FAIL" }, c.name, c.detail)?;
        }
        if self.passed {
            write!(f, "all checks passed")
        } else {
            write!(f, "CHECKS FAILED; reproduce with: {}", self.reproduce())
        }
    }
}
