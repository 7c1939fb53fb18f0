//! An outstanding declaration and its progress.

use crate::sets::Sets;
use dingo_types::{DeclarationId, Member, TaskKind, Timestamp, Topology};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How many sets are sampled to estimate a declaration's bytes per set.
const SIZE_SAMPLE_SETS: usize = 64;

#[derive(Debug)]
pub(crate) struct DeclState {
    pub id: DeclarationId,
    pub task: TaskKind,
    pub deadline: Timestamp,
    pub sets_needed: Option<u64>,
    pub sets: Sets,
    pub total_sets: u64,
    pub delivered: u64,
    pub elided: u64,
    /// Mean bytes of one set, from a deterministic sample taken at
    /// declaration time; used only to order declarations by rate.
    pub set_bytes_estimate: u64,
    /// The deadline passed with work left (counted once).
    pub missed: bool,
}

impl DeclState {
    pub(crate) fn new(
        id: DeclarationId,
        task: TaskKind,
        deadline: Timestamp,
        sets_needed: Option<u64>,
        sets: Sets,
        topo: &impl Topology,
    ) -> Self {
        let total_sets = sets.remaining_count();
        let set_bytes_estimate = estimate_set_bytes(&sets, topo);
        DeclState {
            id,
            task,
            deadline,
            sets_needed,
            sets,
            total_sets,
            delivered: 0,
            elided: 0,
            set_bytes_estimate,
            missed: false,
        }
    }

    /// Sets still to deliver: all remaining ones, or what is left of
    /// `sets_needed` (never more than remain — if deletions shrank the pool
    /// below the count, the declaration finishes short).
    pub(crate) fn needed_left(&self) -> u64 {
        let remaining = self.sets.remaining_count();
        match self.sets_needed {
            Some(needed) => needed.saturating_sub(self.delivered).min(remaining),
            None => remaining,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.needed_left() == 0
    }

    /// Quanta that start before the deadline, counting the one starting now.
    pub(crate) fn quanta_left(&self, now: Timestamp, quantum: Duration) -> u64 {
        let quantum_ms = u64::try_from(quantum.as_millis()).unwrap_or(u64::MAX).max(1);
        self.deadline.as_millis().saturating_sub(now.as_millis()).div_ceil(quantum_ms)
    }

    /// Sets this declaration must get in the quantum starting `now` to stay
    /// on pace for its deadline; everything left once it is late.
    pub(crate) fn quota(&self, now: Timestamp, quantum: Duration) -> u64 {
        let needed = self.needed_left();
        match self.quanta_left(now, quantum) {
            0 => needed,
            quanta => needed.div_ceil(quanta),
        }
    }

    pub(crate) fn status(&self) -> DeclarationStatus {
        DeclarationStatus {
            id: self.id,
            task: self.task,
            deadline: self.deadline,
            total_sets: self.total_sets,
            sets_needed: self.sets_needed,
            delivered_sets: self.delivered,
            elided_sets: self.elided,
            needed_left: self.needed_left(),
            missed_deadline: self.missed,
        }
    }
}

fn estimate_set_bytes(sets: &Sets, topo: &impl Topology) -> u64 {
    let mut keys = Vec::with_capacity(SIZE_SAMPLE_SETS);
    sets.next_keys(0, SIZE_SAMPLE_SETS, &mut keys);
    let mut members: Vec<Member> = Vec::new();
    for &key in &keys {
        sets.members(key, &mut members);
    }
    let bytes: u64 = members.iter().filter_map(|m| topo.block(m.block())).map(|info| info.size).sum();
    bytes / (keys.len() as u64).max(1)
}

/// Progress of one outstanding declaration, for status queries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclarationStatus {
    pub id: DeclarationId,
    pub task: TaskKind,
    pub deadline: Timestamp,
    pub total_sets: u64,
    pub sets_needed: Option<u64>,
    pub delivered_sets: u64,
    pub elided_sets: u64,
    pub needed_left: u64,
    pub missed_deadline: bool,
}
