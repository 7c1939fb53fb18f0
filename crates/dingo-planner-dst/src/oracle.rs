//! What the service promises, checked against what the simulation saw.
//!
//! The oracle learns of a change when the simulated driver commits it
//! (the write-ahead rule makes that the moment it counts), and of every
//! message the moment it is sent. It never reads the planner's records:
//! it rebuilds the truth from the requests it made and the callbacks
//! that came out.

use crate::world::{NO_DISK, World, node_of};
use dingo_planner_service::Due;
use dingo_proto::planner as pb;
use dingo_types::{BlockSet, Member};
use std::collections::{BTreeMap, BTreeSet};

/// A broken promise, described in one line.
pub(crate) type Check = Result<(), String>;

#[derive(Clone)]
pub(crate) struct DeclInfo {
    pub(crate) owner: String,
    /// Its sets' wire keys, each with the set as declared.
    pub(crate) keys: BTreeMap<u64, BlockSet>,
    /// `sets_needed`, or every set.
    pub(crate) needed: u64,
    pub(crate) deadline_ms: u64,
    /// Once its cancel is stored: the sets whose acknowledgement was
    /// stored before, which its status keeps (later acknowledgements
    /// change nothing).
    pub(crate) cancelled: Option<u64>,
}

impl DeclInfo {
    fn is_cancelled(&self) -> bool {
        self.cancelled.is_some()
    }
}

struct DeliveryInfo {
    owner: String,
    declaration: u64,
    keys: Vec<u64>,
    quantum_ms: u64,
    /// Every read of its sets: `(block, copy)` and the disk named.
    reads: Vec<((u64, u8), u32)>,
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
    /// Blocks deleted, or announced for a deletion that will be made: a
    /// set naming only such blocks may be elided instead of delivered.
    elidable: BTreeSet<u64>,
    /// Copies a rebalancer announced it moves away, `(block, copy)`: a set
    /// naming exactly such a copy may be elided too.
    elidable_copies: BTreeSet<(u64, u8)>,
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
        let acked = self.acked_keys(id).len() as u64;
        if let Some(d) = self.decls.get_mut(&id) {
            d.cancelled.get_or_insert(acked);
        }
    }

    /// A task deletes `block`, or announces it will.
    pub(crate) fn deleting(&mut self, block: u64) {
        self.elidable.insert(block);
    }

    /// A rebalancer announces it moves `copy` of `block` away.
    pub(crate) fn moving_copy(&mut self, block: u64, copy: u8) {
        self.elidable_copies.insert((block, copy));
    }

    /// Whether set `key` of `d` names only deleted (or announced) blocks,
    /// or copies announced moving away.
    fn elidable(&self, d: &DeclInfo, key: u64) -> bool {
        let gone = |m: &Member| match *m {
            Member::Any(b) => self.elidable.contains(&b.0),
            Member::Copy(c) => {
                self.elidable.contains(&c.block.0) || self.elidable_copies.contains(&(c.block.0, c.copy))
            }
        };
        d.keys.get(&key).is_some_and(|set| set.members.iter().all(gone))
    }

    /// Whether declaration `id` may need nothing more: every needed set
    /// acknowledged, every other set elidable, or cancelled.
    fn finished(&self, id: u64) -> bool {
        let Some(d) = self.decls.get(&id) else { return false };
        let acked = self.acked_keys(id);
        d.is_cancelled()
            || acked.len() as u64 >= d.needed
            || d.keys.keys().all(|k| acked.contains(k) || self.elidable(d, *k))
    }

    fn acked_keys(&self, declaration: u64) -> BTreeSet<u64> {
        self.set_delivery
            .range((declaration, 0)..=(declaration, u64::MAX))
            .filter(|(_, d)| self.acked.contains(d))
            .map(|(&(_, key), _)| key)
            .collect()
    }

    /// A quantum's deliveries, committed: each names sets of a committed
    /// declaration of its owner, no set is in two deliveries, and each set
    /// reads what it declared ([`reads_as_declared`]; `deleted`: the blocks
    /// the planner knows deleted, a superset of those it knew at planning).
    pub(crate) fn planned<'a>(
        &mut self,
        callbacks: impl Iterator<Item = &'a pb::Callback>,
        deleted: &BTreeSet<u64>,
    ) -> Check {
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
            for s in &cb.sets {
                let key = s.key;
                let Some(declared) = self.decls[&cb.declaration].keys.get(&key) else {
                    return Err(format!(
                        "delivery {} names set {key}, not in declaration {}",
                        cb.delivery, cb.declaration
                    ));
                };
                reads_as_declared(declared, &s.reads, deleted).map_err(|e| {
                    format!("delivery {} (declaration {}), set {key}: {e}", cb.delivery, cb.declaration)
                })?;
                if let Some(other) = self.set_delivery.insert((cb.declaration, key), cb.delivery) {
                    return Err(format!(
                        "set {key} of declaration {} scheduled twice: deliveries {other} and {}",
                        cb.declaration, cb.delivery
                    ));
                }
            }
            let reads = cb.sets.iter().flat_map(|s| &s.reads).map(|r| ((r.block, r.copy as u8), r.disk)).collect();
            let info = DeliveryInfo { owner, declaration: cb.declaration, keys, quantum_ms: cb.quantum_ms, reads };
            self.deliveries.insert(cb.delivery, info);
        }
        Ok(())
    }

    /// The declarations of `deliveries` (those stored), each once.
    pub(crate) fn declarations_of(&self, deliveries: &[u64]) -> Vec<u64> {
        let ids: BTreeSet<u64> =
            deliveries.iter().filter_map(|d| self.deliveries.get(d)).map(|d| d.declaration).collect();
        ids.into_iter().collect()
    }

    /// A dispatch group taken at `now_ms` pins exactly the chunks two or
    /// more reads of its deliveries still to come name, each on the node of
    /// the disk its reads name, until after `now_ms`: all of them, unless
    /// pins lapsed before it was taken (never within the grace of its time)
    /// or a chunk's node is down as the planner knows. Deliveries of
    /// declarations in `finished` (done or cancelled, as the planner has
    /// them when the group is taken) will not go out, so their reads count
    /// for no pin.
    pub(crate) fn group_pins(&self, world: &World, due: &Due, now_ms: u64, finished: &BTreeSet<u64>) -> Check {
        let mut readers: BTreeMap<(u64, u8), (u32, u32)> = BTreeMap::new();
        for id in due.deliveries() {
            let info =
                self.deliveries.get(id).ok_or_else(|| format!("a dispatch group names delivery {id}, never stored"))?;
            if finished.contains(&info.declaration) {
                continue;
            }
            for &(chunk, disk) in &info.reads {
                let (first_disk, count) = readers.entry(chunk).or_insert((disk, 0));
                if *first_disk != disk {
                    return Err(format!("chunk {chunk:?} read on disks {first_disk} and {disk} in one group"));
                }
                *count += 1;
            }
        }
        let node_addr = |disk: u32| format!("node-{}", node_of(disk));
        let mut pinned = BTreeSet::new();
        for (node, chunks) in due.pins() {
            for (chunk, until_ms) in chunks {
                let key = (chunk.block.0, chunk.copy);
                let Some(&(disk, count)) = readers.get(&key).filter(|r| r.1 >= 2) else {
                    return Err(format!("a group pins {key:?}, which fewer than two of its reads to come name"));
                };
                if *node != node_addr(disk) || *until_ms <= now_ms {
                    return Err(format!(
                        "a group pins {key:?} ({count} readers, disk {disk}) on {node} until {until_ms}, taken at {now_ms}"
                    ));
                }
                pinned.insert(key);
            }
        }
        // A group's pins last until the next group's time plus the grace,
        // so a group taken within the grace of its own time has all of them.
        if due.lapsed_pins() > 0 {
            let grace_ends_ms = due.at_ms() + world.config.pin_grace_ms;
            if now_ms < grace_ends_ms {
                return Err(format!(
                    "a group due at {} taken at {now_ms} lost {} pins as lapsed, within the grace",
                    due.at_ms(),
                    due.lapsed_pins()
                ));
            }
            return Ok(());
        }
        let node_up = |disk: u32| world.seen_dead_node != Some(node_of(disk));
        match readers.iter().find(|&(key, &(disk, count))| count >= 2 && node_up(disk) && !pinned.contains(key)) {
            Some((key, (disk, count))) => {
                Err(format!("a group does not pin {key:?}, which {count} of its reads name on disk {disk}"))
            }
            None => Ok(()),
        }
    }

    /// Each disk's head-time limit for a quantum planned with `budget`
    /// (`None`: unlimited): a disk its node last said is congested and `k`
    /// times slower than its model (`slowness`: `(congested, permille)`)
    /// serves `1/k` of the head time it would, so it gets `1/k` of its
    /// budget, or of the quantum's length if it has none.
    pub(crate) fn disk_limits_us(
        world: &World,
        budget: &pb::Budget,
        slowness: &BTreeMap<u32, (bool, u32)>,
    ) -> Vec<Option<u64>> {
        let quantum_us = world.config.quantum_ms * 1000;
        (0..world.disks.len() as u32)
            .map(|disk| {
                let limit = (budget.disk_head_time_us != 0).then_some(budget.disk_head_time_us);
                match slowness.get(&disk) {
                    Some(&(true, permille)) if permille > 1000 => {
                        Some(limit.unwrap_or(quantum_us).min(quantum_us) * 1000 / u64::from(permille))
                    }
                    _ => limit,
                }
            })
            .collect()
    }

    /// The budget in force for a quantum planned at `now_ms`: the last one
    /// set, each limit scaled by the diurnal multiplier of that hour, where
    /// unlimited (0) stays unlimited and a limit never scales to unlimited
    /// (at least one byte or microsecond). Computed here from the rule, not
    /// by the service's `ServiceConfig::budget_at`, which it checks.
    pub(crate) fn budget_in_force(world: &World, last_set: &pb::Budget, now_ms: u64) -> pb::Budget {
        let m = world.diurnal_multiplier(now_ms);
        let scale = |limit: u64| if limit == 0 { 0 } else { ((limit as f64 * m) as u64).max(1) };
        pb::Budget {
            cluster_bytes: scale(last_set.cluster_bytes),
            disk_head_time_us: scale(last_set.disk_head_time_us),
        }
    }

    /// A quantum's plan spends at most its budget: the physical reads (the
    /// core's budget counts those only) in bytes cluster-wide (0 is
    /// unlimited), and in head time per disk at most `disk_limits_us`.
    pub(crate) fn within_budget<'a>(
        world: &World,
        budget: &pb::Budget,
        disk_limits_us: &[Option<u64>],
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
        let over =
            head_us.iter().zip(disk_limits_us).enumerate().find(|(_, (us, limit))| limit.is_some_and(|l| **us > l));
        match over {
            Some((disk, (us, limit))) => {
                Err(format!("a quantum takes {us} µs of disk {disk}, over its limit of {limit:?} (budget {budget:?})"))
            }
            None => Ok(()),
        }
    }

    /// A quantum's plan reads no block the planner knew deleted, and no
    /// disk of a node it knew down, when it planned (it reads the
    /// metadata service first).
    pub(crate) fn reads_nothing_gone<'a>(world: &World, callbacks: impl Iterator<Item = &'a pb::Callback>) -> Check {
        for cb in callbacks {
            for r in cb.sets.iter().flat_map(|s| &s.reads) {
                if world.seen_deleted.contains(&r.block) {
                    return Err(format!(
                        "delivery {} (declaration {}) reads block {}, deleted before the quantum was planned",
                        cb.delivery, cb.declaration, r.block
                    ));
                }
                let copy_disk = world.seen_copies.get(r.block as usize).and_then(|d| d.get(r.copy as usize)).copied();
                if copy_disk != Some(r.disk) || r.disk == NO_DISK {
                    return Err(format!(
                        "delivery {} (declaration {}) reads copy {} of block {} on disk {}; the planner last saw \
                         it on {copy_disk:?} (u32::MAX: lost)",
                        cb.delivery, cb.declaration, r.copy, r.block, r.disk
                    ));
                }
                if world.seen_dead_node == Some(node_of(r.disk)) {
                    return Err(format!(
                        "delivery {} (declaration {}) reads disk {}, whose node was down when the quantum was planned",
                        cb.delivery, cb.declaration, r.disk
                    ));
                }
            }
        }
        Ok(())
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
        if self.decls.get(&cb.declaration).is_some_and(DeclInfo::is_cancelled) {
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
            .filter(|d| self.deliveries.get(d).is_some_and(|x| !self.decls[&x.declaration].is_cancelled()))
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
        self.decls.iter().filter(|(_, d)| !d.is_cancelled()).map(left).sum()
    }

    /// With every step durable, each declaration's `Status` counts as
    /// acknowledged exactly the sets whose acknowledgement the oracle saw
    /// committed (before its cancel, if cancelled), as delivered at least
    /// those, and never more than its sets; a cancelled one says so once
    /// its cancel is committed.
    pub(crate) fn statuses_agree(&self, statuses: &[pb::DeclarationStatus]) -> Check {
        for s in statuses {
            let d = &self.decls[&s.declaration];
            let acked = d.cancelled.unwrap_or_else(|| self.acked_keys(s.declaration).len() as u64);
            let total = d.keys.len() as u64;
            let agrees = s.acked_sets == acked
                && s.delivered_sets >= s.acked_sets
                && s.delivered_sets <= total
                && s.cancelled == d.is_cancelled();
            if !agrees {
                return Err(format!(
                    "declaration {}: status {s:?}, while {acked} of its {total} sets have a stored \
                     acknowledgement (cancelled: {})",
                    s.declaration,
                    d.is_cancelled()
                ));
            }
        }
        Ok(())
    }

    /// After the drain (every announced deletion made by then): each
    /// declaration is cancelled (by a committed cancel) or done, with its
    /// acknowledged sets counted as the oracle saw them, and every needed
    /// set not acknowledged naming only deleted blocks (elided, as many as
    /// the planner reports). It reports a missed deadline when the quantum
    /// that scheduled its last set started at or after the deadline, and
    /// otherwise not, unless sets were elided (a set left at the deadline
    /// and elided later still made it miss). Returns the declarations done
    /// with sets elided.
    pub(crate) fn at_end(&self, statuses: &[pb::DeclarationStatus]) -> Result<u64, String> {
        let mut with_elided = 0;
        for s in statuses {
            let d = &self.decls[&s.declaration];
            let acked = self.acked_keys(s.declaration);
            let count = acked.len() as u64;
            let id = s.declaration;
            if d.is_cancelled() {
                if !s.cancelled || count > d.needed {
                    return Err(format!("cancelled declaration {id}: {count} sets acknowledged; {s:?}"));
                }
                continue;
            }
            if !s.done || s.cancelled {
                return Err(format!("declaration {id} did not finish after the faults stopped: {s:?}"));
            }
            if count > d.needed || s.acked_sets != count || s.delivered_sets != count {
                return Err(format!("declaration {id} needs {} sets, {count} were acknowledged; {s:?}", d.needed));
            }
            let unread: Vec<u64> = d.keys.keys().copied().filter(|k| !acked.contains(k)).collect();
            if count < d.needed
                && let Some(k) = unread.iter().find(|&&k| !self.elidable(d, k))
            {
                return Err(format!(
                    "declaration {id} is done with {count} of its {} needed sets acknowledged, yet set {k} \
                     names data neither deleted nor announced; {s:?}",
                    d.needed
                ));
            }
            let could_elide = unread.iter().filter(|&&k| self.elidable(d, k)).count() as u64;
            if s.elided_sets > could_elide {
                return Err(format!(
                    "declaration {id} reports {} sets elided; only {could_elide} name only deleted or announced \
                     data; {s:?}",
                    s.elided_sets
                ));
            }
            with_elided += u64::from(s.elided_sets > 0);
            let last_quantum_ms = self.deliveries.values().filter(|x| x.declaration == id).map(|x| x.quantum_ms).max();
            let missed = last_quantum_ms.is_some_and(|q| q >= d.deadline_ms);
            if s.missed_deadline != missed && (missed || s.elided_sets == 0) {
                return Err(format!(
                    "declaration {id}: last set scheduled in the quantum of {last_quantum_ms:?}, deadline {}, \
                     yet missed_deadline = {}",
                    d.deadline_ms, s.missed_deadline
                ));
            }
        }
        Ok(with_elided)
    }
}

/// A delivered set reads members of its own, each at most once (an
/// exact-copy member that very copy): every member not deleted, or, for a
/// set needing `k` of its members, `k` of them (at most `k` once a member
/// is deleted, when the live readable ones may be fewer); at least one,
/// since a set with nothing to read is elided, not delivered.
fn reads_as_declared(set: &BlockSet, reads: &[pb::ChunkRead], deleted: &BTreeSet<u64>) -> Check {
    let mut read = vec![false; set.members.len()];
    for r in reads {
        let matches = |m: &Member| match *m {
            Member::Copy(c) => c.block.0 == r.block && u32::from(c.copy) == r.copy,
            Member::Any(b) => b.0 == r.block,
        };
        let i = set
            .members
            .iter()
            .position(matches)
            .ok_or_else(|| format!("reads copy {} of block {}, not a member", r.copy, r.block))?;
        if std::mem::replace(&mut read[i], true) {
            return Err(format!("reads member {} twice", set.members[i]));
        }
    }
    let count = read.iter().filter(|&&r| r).count();
    let any_deleted = set.members.iter().any(|m| deleted.contains(&m.block().0));
    let unread_live = set.members.iter().zip(&read).find(|(m, r)| !**r && !deleted.contains(&m.block().0));
    match set.needed {
        _ if count == 0 => Err("delivered with nothing to read".into()),
        None => unread_live.map_or(Ok(()), |(m, _)| Err(format!("does not read member {m}, not deleted"))),
        Some(k) if count > k as usize || (count < k as usize && !any_deleted) => {
            Err(format!("reads {count} members; it needs {k} of {}", set.members.len()))
        }
        Some(_) => Ok(()),
    }
}
