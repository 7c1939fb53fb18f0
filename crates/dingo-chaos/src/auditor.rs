//! A planner task client that audits the planner's promises while it is
//! killed and hung: it declares sets over acknowledged files, acknowledges
//! callbacks (at once, late, twice, or not at all so they come again), and
//! records every set whose acknowledgement the planner confirmed. Such a
//! set delivered again is a violation (the planner's acknowledged sets are
//! durable), and at the end every declaration must be done: no set lost.

use crate::workload::Oracle;
use dingo_client::Client;
use dingo_planner_client::PlannerClient;
use dingo_planner_client::wire::{Callback, DeclarationStatus};
use dingo_types::{BlockId, BlockSet, Declaration, DeclarationId, ReadSets, TaskKind, Timestamp};
use futures::StreamExt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Each declaration's deadline, from when it is made.
const DEADLINE: Duration = Duration::from_secs(20);
/// Files whose blocks one declaration names.
const FILES_PER_DECLARATION: usize = 6;
/// Planner calls give up after this long (a stopped planner holds them).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Violations kept verbatim; later ones are only counted.
const KEEP: usize = 20;

/// What the auditor saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AuditReport {
    /// Declarations the planner accepted (and the sets they name).
    pub declarations: u64,
    pub sets_declared: u64,
    pub callbacks: u64,
    /// Callbacks marked as re-sent (not acknowledged before).
    pub redeliveries: u64,
    /// Acknowledgements the planner confirmed, and the sets in them.
    pub acks_confirmed: u64,
    pub sets_acked: u64,
    /// Acknowledgements that failed (planner down): no promise made.
    pub acks_failed: u64,
    /// Callbacks deliberately left unacknowledged, acknowledged twice, late.
    pub acks_skipped: u64,
    pub acks_doubled: u64,
    pub acks_late: u64,
    /// Sets delivered again after their acknowledgement was confirmed.
    pub acked_sets_redelivered: u64,
    /// Declarations not done by the end of the heal (`lost` work).
    pub declarations_not_done: u64,
    pub violations: Vec<String>,
}

#[derive(Default)]
struct State {
    report: AuditReport,
    /// `(declaration, set key)` of every set whose ack the planner
    /// confirmed, with the delivery that carried it (the first one, if a
    /// set came in two).
    acked: BTreeMap<(u64, u64), u64>,
    declared: Vec<DeclarationId>,
}

impl State {
    fn violation(&mut self, what: String) {
        tracing::error!("{what}");
        if self.report.violations.len() < KEEP {
            self.report.violations.push(what);
        }
    }
}

/// The running auditor; [`Auditor::finish`] ends it with its report.
pub struct Auditor {
    planner: PlannerClient,
    state: Arc<Mutex<State>>,
    /// Stop declaring; acknowledge every callback from now on.
    finishing: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Auditor {
    pub fn start(planner: PlannerClient, storage: Client, oracle: Oracle, seed: u64) -> Auditor {
        let state = Arc::new(Mutex::new(State::default()));
        let finishing = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let declare =
            tokio::spawn(declare_loop(planner.clone(), storage, oracle, state.clone(), finishing.clone(), seed));
        let callbacks =
            tokio::spawn(callback_loop(planner.clone(), state.clone(), finishing.clone(), stop.clone(), seed));
        Auditor { planner, state, finishing, stop, tasks: vec![declare, callbacks] }
    }

    /// Stops declaring, acknowledges everything from now on, and waits (at
    /// most `within`) until the planner reports every declaration done.
    pub async fn finish(mut self, within: Duration) -> AuditReport {
        self.finishing.store(true, Ordering::Relaxed);
        let declared = self.state.lock().expect("audit lock").declared.clone();
        let deadline = Instant::now() + within;
        let mut not_done = declared.len() as u64;
        let mut last_error = String::new();
        while Instant::now() < deadline {
            // The callback task goes on acknowledging while the status call
            // is under way: only acknowledgements confirmed before it was
            // sent must show in its reply (comparing with those confirmed
            // by the time it came back was a false alarm, seen once in CI).
            let confirmed_before = self.state.lock().expect("audit lock").acked.clone();
            match tokio::time::timeout(CALL_TIMEOUT, self.planner.status(&declared)).await {
                Ok(Ok(reply)) => {
                    not_done = reply.declarations.iter().filter(|d| !d.done).count() as u64;
                    let mut state = self.state.lock().expect("audit lock");
                    for v in undercounted(&confirmed_before, &reply.declarations) {
                        state.violation(v);
                    }
                    if not_done == 0 {
                        break;
                    }
                }
                Ok(Err(e)) => last_error = e.to_string(),
                Err(_) => last_error = "status timed out".into(),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        let mut state = self.state.lock().expect("audit lock");
        state.report.declarations_not_done = not_done;
        if not_done > 0 {
            state.violation(format!("{not_done} declarations not done after the heal (last error: {last_error})"));
        }
        state.report.clone()
    }
}

/// Each declaration whose status counts fewer acknowledged sets than the
/// acknowledgements `confirmed` (set → delivery) name for it, described
/// with those sets and deliveries, which is what following it up needs.
fn undercounted(confirmed: &BTreeMap<(u64, u64), u64>, statuses: &[DeclarationStatus]) -> Vec<String> {
    let mut out = Vec::new();
    for d in statuses {
        let sets: Vec<(u64, u64)> = confirmed
            .range((d.declaration, 0)..=(d.declaration, u64::MAX))
            .map(|(&(_, key), &delivery)| (key, delivery))
            .collect();
        if d.acked_sets < sets.len() as u64 {
            out.push(format!(
                "declaration {} reports {} acknowledged sets; {} acknowledgements were confirmed before the \
                 status was asked (set key, delivery): {sets:?}; status: {d:?}",
                d.declaration,
                d.acked_sets,
                sets.len()
            ));
        }
    }
    out
}

async fn declare_loop(
    planner: PlannerClient,
    storage: Client,
    oracle: Oracle,
    state: Arc<Mutex<State>>,
    finishing: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4445_434c);
    while !finishing.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(rng.u64(1000..3000))).await;
        let mut blocks: Vec<u64> = Vec::new();
        for _ in 0..FILES_PER_DECLARATION {
            let Some(w) = oracle.pick(&mut rng) else { break };
            if let Ok(Ok(info)) = tokio::time::timeout(CALL_TIMEOUT, storage.stat(&w.path)).await {
                blocks.extend(info.block_ids);
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        if blocks.is_empty() || finishing.load(Ordering::Relaxed) {
            continue;
        }
        let decl = Declaration {
            task: TaskKind::Fsck,
            read_sets: ReadSets::Sets(blocks.iter().map(|&b| BlockSet::any_of([BlockId(b)])).collect()),
            sets_needed: None,
            bytes_needed: None,
            deadline: Timestamp(dingo_daemon::now_ms() + DEADLINE.as_millis() as u64),
        };
        // A declaration whose reply is lost may exist unknown to us: its
        // callbacks are acknowledged like the others, and audited per set.
        if let Ok(Ok(d)) = tokio::time::timeout(CALL_TIMEOUT, planner.declare(&decl)).await {
            let mut s = state.lock().expect("audit lock");
            s.report.declarations += 1;
            s.report.sets_declared += d.total_sets;
            s.declared.push(d.id);
        }
    }
}

async fn callback_loop(
    planner: PlannerClient,
    state: Arc<Mutex<State>>,
    finishing: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4143_4b53);
    let mut finishing_seen = false;
    while !stop.load(Ordering::Relaxed) {
        let mut stream = match tokio::time::timeout(CALL_TIMEOUT, planner.subscribe()).await {
            Ok(Ok(s)) => s,
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        while !stop.load(Ordering::Relaxed) {
            // Once finishing, subscribe afresh: the callbacks left
            // unacknowledged come again, to be acknowledged now.
            if finishing.load(Ordering::Relaxed) && !finishing_seen {
                finishing_seen = true;
                break;
            }
            match tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
                Err(_) => continue,
                Ok(Some(Ok(cb))) => handle(&planner, &state, &cb, finishing.load(Ordering::Relaxed), &mut rng).await,
                Ok(_) => break,
            }
        }
    }
}

async fn handle(
    planner: &PlannerClient,
    state: &Mutex<State>,
    cb: &Callback,
    finishing: bool,
    rng: &mut fastrand::Rng,
) {
    let keys: Vec<(u64, u64)> = cb.sets.iter().map(|s| (cb.declaration, s.key)).collect();
    {
        let mut s = state.lock().expect("audit lock");
        s.report.callbacks += 1;
        s.report.redeliveries += u64::from(cb.redelivery);
        for &(decl, key) in &keys {
            if s.acked.contains_key(&(decl, key)) {
                s.report.acked_sets_redelivered += 1;
                s.violation(format!(
                    "set {key} of declaration {decl} delivered again (delivery {}) after its acknowledgement was confirmed",
                    cb.delivery
                ));
            }
        }
    }
    let roll = if finishing { 100 } else { rng.u8(..100) };
    if roll < 10 {
        state.lock().expect("audit lock").report.acks_skipped += 1;
        return;
    }
    if roll < 25 {
        state.lock().expect("audit lock").report.acks_late += 1;
        tokio::time::sleep(Duration::from_millis(rng.u64(100..1500))).await;
    }
    let times = if (25..35).contains(&roll) { 2 } else { 1 };
    for attempt in 0..times {
        let ok = matches!(tokio::time::timeout(CALL_TIMEOUT, planner.ack(&[cb.delivery])).await, Ok(Ok(())));
        let mut s = state.lock().expect("audit lock");
        if attempt == 1 {
            s.report.acks_doubled += 1;
            continue;
        }
        if ok {
            s.report.acks_confirmed += 1;
            s.report.sets_acked += keys.len() as u64;
            for &key in &keys {
                s.acked.entry(key).or_insert(cb.delivery);
            }
        } else {
            s.report.acks_failed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(declaration: u64, acked_sets: u64) -> DeclarationStatus {
        DeclarationStatus { declaration, acked_sets, ..Default::default() }
    }

    #[test]
    fn only_a_status_counting_fewer_sets_than_were_confirmed_is_a_violation() {
        let confirmed: BTreeMap<(u64, u64), u64> = [((40, 0), 7), ((40, 1), 7), ((41, 0), 8)].into();
        assert!(undercounted(&confirmed, &[status(40, 2), status(41, 1), status(42, 0)]).is_empty());
        let v = undercounted(&confirmed, &[status(40, 1), status(41, 1)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].starts_with("declaration 40 reports 1 acknowledged sets; 2 acknowledgements"), "{v:?}");
        assert!(v[0].contains("[(0, 7), (1, 7)]"), "{v:?}");
    }
}
