//! The steps behind the client requests: declare, acknowledge, cancel,
//! status, and the run-time budget. A refused request changes nothing and
//! returns no [`Ready`].

use super::{Decl, Ready, State};
use crate::auth::Caller;
use crate::error::ServiceError;
use crate::keys::Keys;
use crate::records::{Batch, DeliveryState, Phase};
use dingo_planner::DeclareError;
use dingo_planner_client::convert::declaration_to_wire;
use dingo_proto::planner as pb;
use dingo_types::{Declaration, DeclarationId, MemberBitmap, ReadSets, Timestamp, Topology};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// A declaration the state accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accepted {
    pub(crate) id: DeclarationId,
    /// Sets it names, after resolving disk or cluster scrubs.
    pub(crate) total_sets: u64,
}

impl State {
    /// Validates a declaration of task client `owner`. Disk and cluster
    /// scrubs are resolved to their chunks now (a snapshot), and that
    /// resolved form is what the `Ready` stores.
    pub(crate) fn declare(
        &mut self,
        owner: &str,
        decl: &Declaration,
        now_ms: u64,
    ) -> Result<(Accepted, Ready), DeclareError> {
        let resolved = match decl.read_sets {
            ReadSets::ChunksOnDisk(disk) if disk.0 < self.topo.disk_count() => Cow::Owned(Declaration {
                read_sets: ReadSets::EachMember(self.topo.chunks_on_disk(disk)),
                ..decl.clone()
            }),
            ReadSets::AllChunks => {
                Cow::Owned(Declaration { read_sets: ReadSets::EachMember(self.topo.all_chunks()), ..decl.clone() })
            }
            _ => Cow::Borrowed(decl),
        };
        let id = self.planner.declare(&self.topo, Timestamp(now_ms), &resolved)?;
        self.bound_declared(id, &resolved, now_ms);
        let total_sets = self.planner.status(id).map_or(0, |s| s.total_sets);
        let d = Decl {
            owner: owner.to_string(),
            task: decl.task,
            deadline_ms: decl.deadline.as_millis(),
            total_sets,
            sets_needed: decl.sets_needed,
            bytes_needed: decl.bytes_needed,
            created_ms: now_ms,
            keys: Keys::of(&resolved.read_sets),
            phase: Phase::Live,
            retired: false,
            missed: false,
            elided: 0,
            delivered_sets: 0,
            acked_sets: 0,
            deliveries: BTreeSet::new(),
        };
        let batch = Batch {
            decls: vec![(id.0, d.record())],
            requests: vec![(id.0, declaration_to_wire(&resolved))],
            ..Batch::default()
        };
        self.decls.insert(id.0, d);
        Ok((Accepted { id, total_sets }, Ready { batch, ..Ready::default() }))
    }

    /// The base budget: the run-time override, else the configured one.
    pub(crate) fn base_budget(&self) -> pb::Budget {
        self.budget_override.unwrap_or_else(|| self.config.base_budget())
    }

    /// The budget of the quantum starting at `now_ms`.
    pub(crate) fn budget_at(&self, now_ms: u64) -> pb::Budget {
        self.config.budget_at(&self.base_budget(), now_ms)
    }

    /// Replaces the limits given (0 = unlimited), keeping the others.
    /// Returns the new budget.
    pub(crate) fn set_budget(
        &mut self,
        cluster_bytes: Option<u64>,
        disk_head_time_us: Option<u64>,
    ) -> (pb::Budget, Ready) {
        let old = self.base_budget();
        let budget = pb::Budget {
            cluster_bytes: cluster_bytes.unwrap_or(old.cluster_bytes),
            disk_head_time_us: disk_head_time_us.unwrap_or(old.disk_head_time_us),
        };
        self.budget_override = Some(budget);
        (budget, Ready { batch: Batch { budget: Some(budget), ..Batch::default() }, ..Ready::default() })
    }

    /// Acknowledges deliveries of `owner`. All or nothing: any unknown,
    /// foreign or unsent delivery rejects the whole request. A delivery of
    /// a declaration that has finished or was cancelled is no longer
    /// tracked and needs no acknowledgement: acknowledging it (again) is a
    /// no-op, so a client retrying an ack it is unsure of never fails.
    pub(crate) fn ack(&mut self, owner: &str, ids: &[u64]) -> Result<Ready, ServiceError> {
        let mut acking: Vec<u64> = Vec::new();
        for &id in ids {
            let Some(d) = self.deliveries.get(&id) else {
                // Ids start at 1: below the next one, an untracked id
                // belongs to a finished or cancelled declaration.
                if (1..self.next_delivery).contains(&id) {
                    continue;
                }
                return Err(ServiceError::NotFound(format!("delivery {id} was never sent")));
            };
            if d.owner != owner {
                return Err(ServiceError::Denied(format!("delivery {id} belongs to another client")));
            }
            match d.state {
                DeliveryState::Scheduled => {
                    return Err(ServiceError::Precondition(format!("delivery {id} has not been sent yet")));
                }
                DeliveryState::Dispatched if !acking.contains(&id) => acking.push(id),
                _ => {}
            }
        }
        let mut batch =
            Batch { states: acking.iter().map(|&d| (d, DeliveryState::Acked)).collect(), ..Batch::default() };
        let touched: BTreeSet<u64> = acking.iter().map(|d| self.deliveries[d].declaration).collect();
        let done: Vec<u64> = touched.into_iter().filter(|&decl| self.is_complete(decl, &acking)).collect();
        for &decl in &done {
            self.finish(&mut batch, decl, Phase::Done);
        }
        for id in &acking {
            let d = self.deliveries.get_mut(id).expect("checked");
            d.state = DeliveryState::Acked;
            let (decl, sets) = (d.declaration, d.sets);
            self.decls.get_mut(&decl).expect("tracked").acked_sets += sets;
        }
        self.metrics.acked += acking.len() as u64;
        self.apply_finished(&done, Phase::Done);
        Ok(Ready { batch, ..Ready::default() })
    }

    fn own_decl(&self, caller: &Caller, id: u64) -> Result<&Decl, ServiceError> {
        let d =
            self.decls.get(&id).ok_or_else(|| ServiceError::NotFound(format!("declaration {id} does not exist")))?;
        match caller {
            Caller::Client(name) if **name != *d.owner => {
                Err(ServiceError::Denied(format!("declaration {id} belongs to another client")))
            }
            _ => Ok(d),
        }
    }

    /// Cancels a live declaration of `owner`: nothing more is delivered for
    /// it, its unacknowledged callbacks included. Returns the sets delivered.
    pub(crate) fn cancel(&mut self, caller: &Caller, id: u64) -> Result<(u64, Ready), ServiceError> {
        let d = self.own_decl(caller, id)?;
        match d.phase {
            Phase::Live => {}
            Phase::Done => return Err(ServiceError::Precondition(format!("declaration {id} is already done"))),
            Phase::Cancelled => {
                return Err(ServiceError::Precondition(format!("declaration {id} is already cancelled")));
            }
        }
        let delivered = d.delivered_sets;
        if !d.retired {
            self.bound_cancelled(DeclarationId(id));
        }
        let mut batch = Batch::default();
        self.finish(&mut batch, id, Phase::Cancelled);
        self.apply_finished(&[id], Phase::Cancelled);
        Ok((delivered, Ready { batch, ..Ready::default() }))
    }

    /// Anticipatory elision ([`dingo_planner::Planner::note_pending_deletions`]):
    /// a task is about to delete `members`. Returns the sets elided. Nothing
    /// is stored: the elided sets are only never delivered, and after a
    /// restart the deletion itself (by then made) elides them again.
    pub(crate) fn announce_deletions(&mut self, members: &MemberBitmap) -> u64 {
        let elided = self.planner.note_pending_deletions(&self.topo, members);
        self.metrics.announced_elided_sets += elided;
        elided
    }

    fn status_of(&self, id: u64, d: &Decl) -> pb::DeclarationStatus {
        let core = if d.retired { None } else { self.planner.status(DeclarationId(id)) };
        pb::DeclarationStatus {
            declaration: id,
            task: d.task.name().to_string(),
            client: d.owner.clone(),
            deadline_ms: d.deadline_ms,
            total_sets: d.total_sets,
            sets_needed: d.sets_needed,
            bytes_needed: d.bytes_needed,
            delivered_sets: d.delivered_sets,
            acked_sets: d.acked_sets,
            elided_sets: core.as_ref().map_or(d.elided, |s| s.elided_sets),
            missed_deadline: core.as_ref().map_or(d.missed, |s| s.missed_deadline),
            done: d.phase == Phase::Done,
            cancelled: d.phase == Phase::Cancelled,
        }
    }

    /// Status of the given declarations, or of every live one of the caller
    /// (of every client, for the admin).
    pub(crate) fn status(&self, caller: &Caller, ids: &[u64]) -> Result<Vec<pb::DeclarationStatus>, ServiceError> {
        if ids.is_empty() {
            let mine = |d: &Decl| matches!(caller, Caller::Client(n) if **n == *d.owner) || *caller == Caller::Admin;
            return Ok(self
                .decls
                .iter()
                .filter(|(_, d)| d.phase == Phase::Live && mine(d))
                .map(|(&id, d)| self.status_of(id, d))
                .collect());
        }
        ids.iter().map(|&id| Ok(self.status_of(id, self.own_decl(caller, id)?))).collect()
    }
}
