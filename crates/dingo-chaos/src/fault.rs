//! The kinds of fault a campaign injects, and their tallies.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// One kind of injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL of a storage node, restarted after a short outage.
    KillNode,
    /// SIGKILL of the metadata service, restarted after a short outage.
    KillMeta,
    /// SIGKILL of the planner service, restarted after a short outage.
    KillPlanner,
    /// SIGSTOP, then SIGCONT, of a node, the metadata service or the
    /// planner: a hung process.
    StopCont,
    /// One byte of a chunk file's checksummed bytes flipped.
    ByteFlip,
    /// A chunk file cut short.
    Truncate,
    /// A chunk file deleted.
    DeleteChunk,
    /// A disk directory made unwritable for a while.
    UnwritableDisk,
}

impl FaultKind {
    pub const ALL: [FaultKind; 8] = [
        FaultKind::KillNode,
        FaultKind::KillMeta,
        FaultKind::KillPlanner,
        FaultKind::StopCont,
        FaultKind::ByteFlip,
        FaultKind::Truncate,
        FaultKind::DeleteChunk,
        FaultKind::UnwritableDisk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillNode => "kill-node",
            FaultKind::KillMeta => "kill-meta",
            FaultKind::KillPlanner => "kill-planner",
            FaultKind::StopCont => "stop-cont",
            FaultKind::ByteFlip => "byte-flip",
            FaultKind::Truncate => "truncate",
            FaultKind::DeleteChunk => "delete-chunk",
            FaultKind::UnwritableDisk => "unwritable-disk",
        }
    }

    /// Damage to a chunk file (planted corruption the cluster must find).
    pub fn is_corruption(self) -> bool {
        matches!(self, FaultKind::ByteFlip | FaultKind::Truncate | FaultKind::DeleteChunk)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Faults injected so far, per kind (every kind present, zero or not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultCounts(BTreeMap<FaultKind, u64>);

impl Default for FaultCounts {
    fn default() -> Self {
        FaultCounts(FaultKind::ALL.iter().map(|&k| (k, 0)).collect())
    }
}

impl FaultCounts {
    pub fn add(&mut self, kind: FaultKind) {
        *self.0.entry(kind).or_default() += 1;
    }

    pub fn get(&self, kind: FaultKind) -> u64 {
        self.0.get(&kind).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The fewest injected of any kind.
    pub fn min(&self) -> u64 {
        self.0.values().copied().min().unwrap_or(0)
    }

    /// Of `kinds`, one injected least so far; ties broken by `rng`, so a
    /// lane spreads its faults evenly over its kinds.
    pub fn least_of(&self, kinds: &[FaultKind], rng: &mut fastrand::Rng) -> FaultKind {
        let low = kinds.iter().map(|&k| self.get(k)).min().unwrap_or(0);
        let tied: Vec<FaultKind> = kinds.iter().copied().filter(|&k| self.get(k) == low).collect();
        tied[rng.usize(..tied.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_of_spreads_faults_evenly_over_a_lanes_kinds() {
        let mut counts = FaultCounts::default();
        let mut rng = fastrand::Rng::with_seed(7);
        let lane = [FaultKind::KillNode, FaultKind::StopCont, FaultKind::UnwritableDisk];
        for _ in 0..30 {
            let k = counts.least_of(&lane, &mut rng);
            counts.add(k);
        }
        for k in lane {
            assert_eq!(counts.get(k), 10, "{k}");
        }
        assert_eq!(counts.total(), 30);
        assert_eq!(counts.min(), 0, "kinds of other lanes are still at zero");
        assert!(FaultKind::ALL.iter().filter(|k| k.is_corruption()).count() == 3);
    }
}
