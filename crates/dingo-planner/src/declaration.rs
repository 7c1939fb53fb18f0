//! An outstanding declaration and its progress.

use crate::sets::Sets;
use dingo_types::{BlockState, Declaration, DeclarationId, Member, TaskKind, Timestamp, Topology};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How many sets are sampled to estimate a declaration's bytes per set.
const SIZE_SAMPLE_SETS: usize = 64;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DeclState {
    pub id: DeclarationId,
    pub task: TaskKind,
    pub deadline: Timestamp,
    pub sets_needed: Option<u64>,
    /// Byte-denominated flexibility ([`Declaration::bytes_needed`]).
    pub bytes_needed: Option<u64>,
    pub sets: Sets,
    pub total_sets: u64,
    pub delivered: u64,
    /// Bytes of the live blocks of the delivered sets, when scheduled.
    pub delivered_bytes: u64,
    pub elided: u64,
    /// Mean bytes of one set, from a deterministic sample taken at
    /// declaration time; used only to order declarations by rate.
    pub set_bytes_estimate: u64,
    /// The deadline passed with work left (counted once).
    pub missed: bool,
}

impl DeclState {
    /// The state of `decl` (whose `read_sets` are read no more: `sets`
    /// holds them) as `id`.
    pub(crate) fn new(id: DeclarationId, decl: &Declaration, sets: Sets, topo: &impl Topology) -> Self {
        let total_sets = sets.remaining_count();
        let set_bytes_estimate = estimate_set_bytes(&sets, topo);
        DeclState {
            id,
            task: decl.task,
            deadline: decl.deadline,
            sets_needed: decl.sets_needed,
            bytes_needed: decl.bytes_needed,
            sets,
            total_sets,
            delivered: 0,
            delivered_bytes: 0,
            elided: 0,
            set_bytes_estimate,
            missed: false,
        }
    }

    /// Sets still to deliver: all remaining ones, or what is left of
    /// `sets_needed` (never more than remain — if deletions shrank the pool
    /// below the count, the declaration finishes short).
    ///
    /// With `bytes_needed`, the bytes still missing in sets of the mean
    /// sampled size, rounded up (at least one set while any byte is
    /// missing). Invariant: 0 exactly when `delivered_bytes` reached
    /// `bytes_needed` or no set remains, so a declaration is never given a
    /// set in a quantum after the one in which it reached its bytes; within
    /// that quantum it may overshoot by what the estimate was off.
    pub(crate) fn needed_left(&self) -> u64 {
        let remaining = self.sets.remaining_count();
        match (self.sets_needed, self.bytes_needed) {
            (Some(needed), _) => needed.saturating_sub(self.delivered).min(remaining),
            (None, Some(bytes)) => {
                let missing = bytes.saturating_sub(self.delivered_bytes);
                if missing == 0 {
                    return 0;
                }
                // At least 1 since `missing` > 0.
                missing.div_ceil(self.set_bytes_estimate.max(1)).min(remaining)
            }
            (None, None) => remaining,
        }
    }

    /// Counts set `key` as delivered before a restart: its live blocks'
    /// bytes as they are now. False if it is not outstanding.
    pub(crate) fn restore_delivered(&mut self, key: u64, topo: &impl Topology, members: &mut Vec<Member>) -> bool {
        if !self.sets.remove(key) {
            return false;
        }
        // A removed set's members stay readable (only its "outstanding"
        // bit went), and an unknown key must not be looked up.
        members.clear();
        self.sets.members(key, members);
        self.delivered += 1;
        self.delivered_bytes += needed_share(&self.sets, key, live_bytes(members, topo), members.len());
        true
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
            bytes_needed: self.bytes_needed,
            delivered_sets: self.delivered,
            delivered_bytes: self.delivered_bytes,
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
    let mut bytes = 0;
    for &key in &keys {
        members.clear();
        sets.members(key, &mut members);
        let set_bytes: u64 = members.iter().filter_map(|m| topo.block(m.block())).map(|info| info.size).sum();
        bytes += needed_share(sets, key, set_bytes, members.len());
    }
    bytes / (keys.len() as u64).max(1)
}

/// Of `bytes` over the `members` of set `key`, what reading it takes: all
/// of them, or about `n` members' worth for a set needing `n` of them.
fn needed_share(sets: &Sets, key: u64, bytes: u64, members: usize) -> u64 {
    match sets.needed(key) {
        Some(n) => bytes * u64::from(n) / (members as u64).max(1),
        None => bytes,
    }
}

/// Bytes of the members' blocks that are not deleted.
pub(crate) fn live_bytes(members: &[Member], topo: &impl Topology) -> u64 {
    let live = |m: &Member| topo.block(m.block()).filter(|info| info.state != BlockState::Deleted);
    members.iter().filter_map(live).map(|info| info.size).sum()
}

/// Progress of one outstanding declaration, for status queries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclarationStatus {
    pub id: DeclarationId,
    pub task: TaskKind,
    pub deadline: Timestamp,
    pub total_sets: u64,
    pub sets_needed: Option<u64>,
    pub bytes_needed: Option<u64>,
    pub delivered_sets: u64,
    /// Bytes of the live blocks of the delivered sets.
    pub delivered_bytes: u64,
    pub elided_sets: u64,
    pub needed_left: u64,
    pub missed_deadline: bool,
}
