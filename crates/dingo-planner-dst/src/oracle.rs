//! What the service promises, checked against what the simulation saw.
//!
//! The oracle learns of a change when the simulated driver commits it
//! (the write-ahead rule makes that the moment it counts), and of every
//! message the moment it is sent. It never reads the planner's records:
//! it rebuilds the truth from the requests it made and the callbacks
//! that came out.

use crate::world::World;
use dingo_proto::planner as pb;
use std::collections::{BTreeMap, BTreeSet};

/// A broken promise, described in one line.
pub(crate) type Check = Result<(), String>;

#[derive(Clone)]
pub(crate) struct DeclInfo {
    pub(crate) owner: String,
    pub(crate) keys: BTreeSet<u64>,
    /// `sets_needed`, or every set.
    pub(crate) needed: u64,
    pub(crate) deadline_ms: u64,
    pub(crate) cancelled: bool,
}

struct DeliveryInfo {
    owner: String,
    declaration: u64,
    keys: Vec<u64>,
    quantum_ms: u64,
}

#[derive(Default)]
pub(crate) struct Oracle {
    /// Committed declarations.
    decls: BTreeMap<u64, DeclInfo>,
    /// Committed deliveries (a quantum's plan), by id.
    deliveries: BTreeMap<u64, DeliveryInfo>,
    /// The one delivery each `(declaration, set key)` went into.
    set_delivery: BTreeMap<(u64, u64), u64>,
    /// Deliveries whose acknowledgement is durable.
    acked: BTreeSet<u64>,
    /// Deliveries each client has received on a stream.
    received: BTreeMap<String, BTreeSet<u64>>,
}

impl Oracle {
    pub(crate) fn declared(&mut self, id: u64, info: DeclInfo) -> Check {
        if self.decls.contains_key(&id) {
            return Err(format!("declaration id {id} was handed out twice"));
        }
        self.decls.insert(id, info);
        Ok(())
    }

    pub(crate) fn cancelled(&mut self, id: u64) {
        if let Some(d) = self.decls.get_mut(&id) {
            d.cancelled = true;
        }
    }

    /// Whether declaration `id` needs nothing more: every needed set
    /// acknowledged, or cancelled.
    fn finished(&self, id: u64) -> bool {
        let Some(d) = self.decls.get(&id) else { return false };
        d.cancelled || self.acked_keys(id).len() as u64 >= d.needed
    }

    fn acked_keys(&self, declaration: u64) -> BTreeSet<u64> {
        self.set_delivery
            .range((declaration, 0)..=(declaration, u64::MAX))
            .filter(|(_, d)| self.acked.contains(d))
            .map(|(&(_, key), _)| key)
            .collect()
    }

    /// A quantum's deliveries, committed: each names sets of a committed
    /// declaration of its owner, and no set is in two deliveries.
    pub(crate) fn planned<'a>(&mut self, callbacks: impl Iterator<Item = &'a pb::Callback>) -> Check {
        for cb in callbacks {
            let owner = match self.decls.get(&cb.declaration) {
                Some(d) => d.owner.clone(),
                None => {
                    return Err(format!(
                        "delivery {} is for declaration {}, never stored",
                        cb.delivery, cb.declaration
                    ));
                }
            };
            if self.deliveries.contains_key(&cb.delivery) {
                return Err(format!("delivery id {} was stored twice", cb.delivery));
            }
            let keys: Vec<u64> = cb.sets.iter().map(|s| s.key).collect();
            for &key in &keys {
                if !self.decls[&cb.declaration].keys.contains(&key) {
                    return Err(format!(
                        "delivery {} names set {key}, not in declaration {}",
                        cb.delivery, cb.declaration
                    ));
                }
                if let Some(other) = self.set_delivery.insert((cb.declaration, key), cb.delivery) {
                    return Err(format!(
                        "set {key} of declaration {} scheduled twice: deliveries {other} and {}",
                        cb.declaration, cb.delivery
                    ));
                }
            }
            let info = DeliveryInfo { owner, declaration: cb.declaration, keys, quantum_ms: cb.quantum_ms };
            self.deliveries.insert(cb.delivery, info);
        }
        Ok(())
    }

    /// A quantum's plan spends at most its budget: the physical reads (the
    /// core's budget counts those only) in bytes cluster-wide and in head
    /// time per disk. 0 is unlimited.
    pub(crate) fn within_budget<'a>(
        world: &World,
        budget: &pb::Budget,
        callbacks: impl Iterator<Item = &'a pb::Callback>,
    ) -> Check {
        let mut bytes = 0u64;
        let mut head_us = vec![0u64; world.disks.len()];
        for read in callbacks.flat_map(|c| c.sets.iter().flat_map(|s| s.reads.iter())).filter(|r| r.physical) {
            bytes += read.bytes;
            let disk = read.disk as usize;
            let model = world.disks.get(disk).ok_or_else(|| format!("a read on unknown disk {disk}"))?;
            head_us[disk] += model.head_time_us(read.bytes);
        }
        if budget.cluster_bytes != 0 && bytes > budget.cluster_bytes {
            return Err(format!("a quantum reads {bytes} bytes, over its budget of {}", budget.cluster_bytes));
        }
        match head_us
            .iter()
            .enumerate()
            .find(|&(_, &us)| budget.disk_head_time_us != 0 && us > budget.disk_head_time_us)
        {
            Some((disk, us)) => {
                Err(format!("a quantum takes {us} µs of disk {disk}, over its budget of {}", budget.disk_head_time_us))
            }
            None => Ok(()),
        }
    }

    /// A callback goes out on a stream of `owner`: a committed delivery of
    /// that owner, as planned, not acknowledged, of a live declaration.
    pub(crate) fn sent(&self, owner: &str, cb: &pb::Callback) -> Check {
        let d = self
            .deliveries
            .get(&cb.delivery)
            .ok_or_else(|| format!("delivery {} sent before it was stored", cb.delivery))?;
        let keys: Vec<u64> = cb.sets.iter().map(|s| s.key).collect();
        if d.owner != owner || d.declaration != cb.declaration || d.keys != keys {
            return Err(format!("delivery {} sent to {owner} differs from what was stored", cb.delivery));
        }
        if self.acked.contains(&cb.delivery) {
            return Err(format!(
                "delivery {} (declaration {}, sets {keys:?}) sent again after its acknowledgement was stored",
                cb.delivery, cb.declaration
            ));
        }
        if self.decls.get(&cb.declaration).is_some_and(|x| x.cancelled) {
            return Err(format!("delivery {} sent after declaration {} was cancelled", cb.delivery, cb.declaration));
        }
        Ok(())
    }

    pub(crate) fn received(&mut self, owner: &str, delivery: u64) {
        self.received.entry(owner.to_string()).or_default().insert(delivery);
    }

    /// An accepted acknowledgement of `owner`, committed: it may name only
    /// the owner's deliveries, or ones that need nothing any more.
    pub(crate) fn acked(&mut self, owner: &str, ids: &[u64]) -> Check {
        for &id in ids {
            match self.deliveries.get(&id) {
                None => return Err(format!("{owner}'s ack of delivery {id}, never stored, was accepted")),
                Some(d) if d.owner != owner && !self.finished(d.declaration) => {
                    return Err(format!("{owner}'s ack of delivery {id} of {} was accepted", d.owner));
                }
                Some(d) if d.owner == owner => {
                    self.acked.insert(id);
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A new stream of `owner` replays `replayed`, committed after every
    /// earlier step: it must re-send every delivery the client received
    /// that is neither acknowledged nor cancelled.
    pub(crate) fn replay(&self, owner: &str, replayed: &BTreeSet<u64>) -> Check {
        let missing: Vec<u64> = self
            .received
            .get(owner)
            .into_iter()
            .flatten()
            .copied()
            .filter(|d| !self.acked.contains(d) && !replayed.contains(d))
            .filter(|d| self.deliveries.get(d).is_some_and(|x| !self.decls[&x.declaration].cancelled))
            .collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(format!("{owner} subscribed again and was not re-sent unacknowledged deliveries {missing:?}")),
        }
    }

    pub(crate) fn declared_ids(&self) -> Vec<u64> {
        self.decls.keys().copied().collect()
    }

    /// Sets still to acknowledge, over every declaration not cancelled.
    pub(crate) fn needed_left(&self) -> u64 {
        let left = |(&id, d): (&u64, &DeclInfo)| d.needed.saturating_sub(self.acked_keys(id).len() as u64);
        self.decls.iter().filter(|(_, d)| !d.cancelled).map(left).sum()
    }

    /// After the drain: each declaration is cancelled (by a committed
    /// cancel) or done with exactly its needed sets acknowledged, and it
    /// reports a missed deadline exactly when the quantum that scheduled
    /// its last set started at or after the deadline.
    pub(crate) fn at_end(&self, statuses: &[pb::DeclarationStatus]) -> Check {
        for s in statuses {
            let d = &self.decls[&s.declaration];
            let acked = self.acked_keys(s.declaration).len() as u64;
            let id = s.declaration;
            if d.cancelled {
                if !s.cancelled || acked > d.needed {
                    return Err(format!("cancelled declaration {id}: {acked} sets acknowledged; {s:?}"));
                }
                continue;
            }
            if !s.done || s.cancelled {
                return Err(format!("declaration {id} did not finish after the faults stopped: {s:?}"));
            }
            if acked != d.needed || s.acked_sets != d.needed || s.delivered_sets != d.needed {
                return Err(format!("declaration {id} needs {} sets, {acked} were acknowledged; {s:?}", d.needed));
            }
            let last_quantum_ms = self.deliveries.values().filter(|x| x.declaration == id).map(|x| x.quantum_ms).max();
            let missed = last_quantum_ms.is_some_and(|q| q >= d.deadline_ms);
            if s.missed_deadline != missed {
                return Err(format!(
                    "declaration {id}: last set scheduled in the quantum of {last_quantum_ms:?}, deadline {}, \
                     yet missed_deadline = {}",
                    d.deadline_ms, s.missed_deadline
                ));
            }
        }
        Ok(())
    }
}
