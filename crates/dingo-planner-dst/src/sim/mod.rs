//! One seed's run: a scheduler that picks, step by step, what happens next
//! — a client request, the planner's timer, the persister committing or
//! sending, time passing, a client or the planner crashing — and checks
//! the oracle after each. Then a drain without faults, and the end checks.
//!
//! The simulated driver mirrors `crate::driver` of the service: a step
//! runs on the state at once and queues its `Step`; one persister works
//! through the queue in order — commit, send the messages (a few at a
//! time, so a crash can fall between them), answer the caller. A planner
//! crash drops the machine and the queue wherever they are; the restart
//! reads only the [`MemoryStore`].

mod client_actions;
mod drain;

use crate::client::Client;
use crate::oracle::{DeclInfo, Oracle};
use crate::world::{FIRST_HOUR_ENDS_MS, MAX_START_DELAY_MS, QUANTUM_MS, START_MS, World};
use crate::{Options, Summary, Trace, Violation};
use dingo_planner_service::{Due, Machine, MemoryStore, Message, Step};
use dingo_proto::planner as pb;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What a queued step was, for the oracle and the answer.
enum Request {
    Declare {
        client: usize,
        id: u64,
        info: DeclInfo,
    },
    Subscribe {
        client: usize,
        stream: u64,
    },
    Ack {
        client: usize,
        ids: Vec<u64>,
    },
    Cancel {
        client: usize,
        id: u64,
    },
    /// A task's `AnnounceDeletions` of a block it is about to delete, or
    /// of a copy it is about to move away.
    Announce {
        member: dingo_types::Member,
    },
    Budget(pb::Budget),
    Plan,
    Dispatch,
}

impl Request {
    fn label(&self) -> String {
        match self {
            Request::Declare { id, .. } => format!("declaration {id}"),
            Request::Subscribe { stream, .. } => format!("subscription {stream}"),
            Request::Ack { ids, .. } => format!("ack {ids:?}"),
            Request::Cancel { id, .. } => format!("cancel {id}"),
            Request::Announce { member } => format!("announcement of {member}"),
            Request::Budget(b) => format!("budget {b:?}"),
            Request::Plan => "quantum".into(),
            Request::Dispatch => "dispatch".into(),
        }
    }
}

struct Pending {
    step: Step,
    request: Request,
    committed: bool,
    outbox: VecDeque<Message>,
    /// Streams found gone while sending, with the deliveries they missed.
    ended: BTreeMap<u64, Vec<u64>>,
}

enum Job {
    Apply(Box<Pending>),
    /// A client's side of a stream went away.
    Closed(u64),
}

/// The planner process: the machine and what only lives in its memory.
struct Process {
    machine: Machine,
    queue: VecDeque<Job>,
    next_quantum_ms: u64,
    /// A dispatch group whose cache directives are on their way.
    pins_in_flight: Option<Due>,
    /// The quantum loop waits for its own step to be answered.
    timer_busy: bool,
    /// Which client opened each stream of this process.
    streams: BTreeMap<u64, usize>,
    /// The budget set last, as the admin knows it.
    budget: pb::Budget,
    /// What nodes last replied of each disk's slowness: `(congested,
    /// permille)`, kept in memory only, as the driver does.
    slowness: BTreeMap<u32, (bool, u32)>,
}

impl Process {
    /// The next quantum starts one quantum after this one, or one after
    /// `now_ms` if the loop fell behind (as the driver does).
    fn schedule_next_quantum(&mut self, now_ms: u64) {
        self.next_quantum_ms = if self.next_quantum_ms + QUANTUM_MS > now_ms {
            self.next_quantum_ms + QUANTUM_MS
        } else {
            now_ms + QUANTUM_MS
        };
    }
}

pub(crate) struct Sim<'a> {
    seed: u64,
    options: &'a Options,
    rng: fastrand::Rng,
    world: World,
    now_ms: u64,
    step: u64,
    store: MemoryStore,
    planner: Option<Process>,
    down_until_ms: u64,
    budget_committed: pb::Budget,
    clients: Vec<Client>,
    oracle: Oracle,
    trace: Trace,
    summary: Summary,
    /// The drain has begun: no more faults (nodes report their disks on
    /// profile).
    faults_stopped: bool,
}

impl<'a> Sim<'a> {
    pub(crate) fn new(seed: u64, options: &'a Options) -> Sim<'a> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let world = World::generate(&mut rng);
        let clients = world.clients.iter().map(|n| Client::new(n)).collect();
        let budget_committed = world.config.base_budget();
        let start_ms = START_MS + rng.u64(0..=MAX_START_DELAY_MS);
        Sim {
            seed,
            options,
            rng,
            world,
            now_ms: start_ms,
            step: 0,
            store: MemoryStore::default(),
            planner: None,
            down_until_ms: start_ms,
            budget_committed,
            clients,
            oracle: Oracle::default(),
            trace: Trace::new(options.trace),
            summary: Summary { seed, ..Summary::default() },
            faults_stopped: false,
        }
    }

    pub(crate) fn run(mut self) -> Result<Summary, Violation> {
        self.restart()?;
        for step in 0..u64::from(self.options.steps) {
            self.step = step;
            self.act()?;
        }
        self.drain()?;
        self.summary.trace_digest = self.trace.digest();
        self.summary.trace = self.trace.lines;
        Ok(self.summary)
    }

    fn violation(&self, message: String) -> Violation {
        Violation {
            seed: self.seed,
            step: self.step,
            message,
            reproduce: self.options.reproduce(self.seed),
            trace: self.trace.lines.clone(),
        }
    }

    fn check(&self, r: Result<(), String>) -> Result<(), Violation> {
        r.map_err(|m| self.violation(m))
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        let line = format!("{} +{}ms {}", self.step, self.now_ms - START_MS, what());
        self.trace.push(line);
    }

    fn process(&mut self) -> &mut Process {
        self.planner.as_mut().expect("the planner is up")
    }

    /// One step of the fault phase.
    fn act(&mut self) -> Result<(), Violation> {
        if self.planner.is_none() {
            // The planner reads the metadata service to start.
            if self.now_ms >= self.down_until_ms && self.world.meta_down_until.is_none() {
                return self.restart();
            }
            return self.client_act(false);
        }
        match self.rng.u32(0..100) {
            0..30 if !self.process().queue.is_empty() => self.persist(),
            30..42 => self.timer(),
            42..50 if self.process().pins_in_flight.is_some() => self.complete_pins(),
            50..80 => self.client_act(true),
            80..97 => {
                {
                    let ms = self.rng.u64(1..=400);
                    self.advance(ms)
                };
                Ok(())
            }
            97 => {
                self.crash_planner();
                Ok(())
            }
            98 => self.admin_budget(),
            99 => {
                match self.rng.u8(0..3) {
                    0 => self.node_dies_or_returns(),
                    1 => self.metadata_service_goes_away(),
                    _ => self.copy_lost(),
                }
                Ok(())
            }
            // A persister or pin step with nothing to do: time passes.
            _ => {
                {
                    let ms = self.rng.u64(1..=50);
                    self.advance(ms)
                };
                Ok(())
            }
        }
    }

    /// A node goes down (its copies unreadable until it returns), or the
    /// one that is down comes back.
    fn node_dies_or_returns(&mut self) {
        let nodes = self.world.disks.len().div_ceil(2) as u32;
        self.world.dead_node = match self.world.dead_node {
            Some(n) => {
                self.note(|| format!("node {n} is back"));
                None
            }
            None => {
                let n = self.rng.u32(0..nodes);
                self.summary.counts.node_outages += 1;
                self.note(|| format!("node {n} goes down"));
                Some(n)
            }
        };
    }

    /// A node replies to its quantum budget with a disk's slowness: half
    /// the time congested and up to four times slower than its model (the
    /// planner then cuts the disk's head-time budget), else on profile.
    fn disk_slowness_reported(&mut self) {
        let disk = self.rng.u32(0..self.world.disks.len() as u32);
        let congested = self.rng.bool();
        let permille = if congested { self.rng.u32(900..=4000) } else { self.rng.u32(900..=1100) };
        let p = self.process();
        p.machine.note_slowness(disk, congested, permille);
        p.slowness.insert(disk, (congested, permille));
        if congested && permille > 1000 {
            self.summary.counts.slow_disk_reports += 1;
        }
        self.note(|| format!("disk {disk} reported {permille}‰ of its model, congested: {congested}"));
    }

    /// A disk loses one copy of a block whose other copy is on a disk (the
    /// metadata service then lists the copy on no disk) until a repair.
    fn copy_lost(&mut self) {
        let Some((block, copy)) = self.world.movable_copy(&mut self.rng) else { return };
        self.world.place_copy((block, copy), crate::world::NO_DISK);
        self.summary.counts.copies_lost += 1;
        self.note(|| format!("copy {copy} of block {block} is lost"));
    }

    /// The metadata service becomes unreachable for up to 3 quanta, unless
    /// it already is.
    fn metadata_service_goes_away(&mut self) {
        if self.world.meta_down_until.is_none() {
            let until = self.now_ms + self.rng.u64(1..=3 * QUANTUM_MS);
            self.world.meta_down_until = Some(until);
            self.note(|| format!("the metadata service is unreachable until +{}ms", until - START_MS));
        }
    }

    /// Time passes; the announced deletions and moves it brings are made,
    /// and the metadata service comes back when its outage is over.
    fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        self.world.make_due_deletions(Some(self.now_ms));
        self.world.make_due_moves(Some(self.now_ms));
        if self.world.meta_down_until.is_some_and(|until| until <= self.now_ms) {
            self.world.meta_down_until = None;
            self.note(|| "the metadata service is back".into());
        }
    }

    /// The planner reads the metadata service: its view catches up.
    fn refresh_planner(&mut self) {
        let (rows, cluster) = self.world.snapshot();
        self.process().machine.refresh_topology(rows, cluster);
    }

    fn restart(&mut self) -> Result<(), Violation> {
        let (rows, cluster) = self.world.snapshot();
        let w = &self.world;
        let machine = Machine::start(w.config.clone(), &self.store, rows, cluster, self.now_ms)
            .map_err(|e| self.violation(format!("the planner cannot restart from its store: {e}")))?;
        self.planner = Some(Process {
            machine,
            queue: VecDeque::new(),
            next_quantum_ms: self.now_ms,
            pins_in_flight: None,
            timer_busy: false,
            streams: BTreeMap::new(),
            budget: self.budget_committed,
            slowness: BTreeMap::new(),
        });
        self.note(|| "planner starts".into());
        Ok(())
    }

    fn crash_planner(&mut self) {
        let Some(p) = self.planner.take() else { return };
        let head = match p.queue.front() {
            Some(Job::Apply(x)) if x.committed => format!("after a commit, {} messages unsent", x.outbox.len()),
            Some(_) => "before a commit".into(),
            None => "idle".into(),
        };
        for c in &mut self.clients {
            c.stream = None;
        }
        self.down_until_ms = self.now_ms + self.rng.u64(0..=2 * QUANTUM_MS);
        self.summary.counts.planner_crashes += 1;
        self.note(|| format!("planner crashes ({head}, {} steps queued)", p.queue.len()));
    }

    /// Runs a request on the machine; a refusal must leave it unchanged.
    /// Returns the answer, or the refusal.
    fn request<T, E: std::fmt::Display>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Machine) -> Result<T, E>,
    ) -> Result<Result<T, E>, Violation> {
        let machine = &mut self.process().machine;
        let before = machine.fingerprint();
        match f(machine) {
            Ok(t) => Ok(Ok(t)),
            Err(e) => {
                let changed = machine.fingerprint() != before;
                self.summary.counts.refusals += 1;
                self.note(|| format!("{what} refused: {e}"));
                if changed {
                    return Err(self.violation(format!("the refused {what} ({e}) changed the planner's state")));
                }
                Ok(Err(e))
            }
        }
    }

    fn queue(&mut self, step: Step, request: Request) {
        let pending = Pending { step, request, committed: false, outbox: VecDeque::new(), ended: BTreeMap::new() };
        self.process().queue.push_back(Job::Apply(Box::new(pending)));
    }

    /// The quantum loop: a due group's directives go out, or a quantum is
    /// planned; it waits for its own step before it looks again.
    fn timer(&mut self) -> Result<(), Violation> {
        let (now, meta_down) = (self.now_ms, self.world.meta_down_until.is_some());
        let p = self.process();
        if p.timer_busy || p.pins_in_flight.is_some() {
            return Ok(());
        }
        if p.machine.next_group_at().is_some_and(|at| at <= now) {
            p.pins_in_flight = p.machine.take_due(now);
            p.timer_busy = true;
            let p = self.planner.as_ref().expect("the planner is up");
            if let Some(due) = &p.pins_in_flight {
                // The planner's own word on which declarations are done or
                // cancelled (invariant 11 checks it against the oracle).
                let ids = self.oracle.declarations_of(due.deliveries());
                let statuses = p.machine.status(&ids).map_err(|e| self.violation(format!("status: {e}")))?;
                let finished = statuses.iter().filter(|s| s.done || s.cancelled).map(|s| s.declaration).collect();
                self.check(self.oracle.group_pins(&self.world, due, now, &finished))?;
                self.summary.counts.pins_checked +=
                    due.pins().iter().map(|(_, chunks)| chunks.len() as u64).sum::<u64>();
            }
            self.note(|| "a dispatch group is due".into());
            return Ok(());
        }
        if now < p.next_quantum_ms {
            return Ok(());
        }
        // The driver reads the metadata service before it plans, and skips
        // the quantum if it cannot.
        if meta_down {
            p.schedule_next_quantum(now);
            self.summary.counts.quanta_skipped += 1;
            self.note(|| "quantum skipped: the metadata service is unreachable".into());
            return Ok(());
        }
        self.refresh_planner();
        let last_set = self.process().budget;
        let budget = Oracle::budget_in_force(&self.world, &last_set, now);
        let p = self.process();
        if p.machine.budget_at(now) != budget {
            let got = p.machine.budget_at(now);
            return Err(self.violation(format!(
                "the planner plans with budget {got:?}; the last one set is {last_set:?}, {budget:?} this hour"
            )));
        }
        let step = p.machine.plan_quantum(now);
        p.schedule_next_quantum(now);
        p.timer_busy = true;
        let slowness = &self.planner.as_ref().expect("the planner is up").slowness;
        let limits = Oracle::disk_limits_us(&self.world, &budget, slowness);
        self.check(Oracle::within_budget(&self.world, &budget, &limits, step.planned()))?;
        self.check(Oracle::reads_nothing_gone(&self.world, step.planned()))?;
        let planned = step.planned().count();
        self.summary.counts.quanta += 1;
        self.summary.counts.sets_sharing_a_group += self.world.sets_sharing_a_group(step.planned());
        self.summary.counts.single_copy_reads += self.world.single_copy_reads(step.planned());
        self.summary.counts.diurnal_scaled_quanta += u64::from(self.world.diurnal_multiplier(now) != 1.0);
        self.summary.counts.quanta_past_the_hour += u64::from(now >= FIRST_HOUR_ENDS_MS);
        self.note(|| format!("quantum planned: {planned} deliveries"));
        self.queue(step, Request::Plan);
        // Nodes reply to the quantum's budgets with their disks' slowness
        // (here one disk's, half the time, while faults go on).
        if !self.faults_stopped && self.rng.bool() {
            self.disk_slowness_reported();
        }
        Ok(())
    }

    fn complete_pins(&mut self) -> Result<(), Violation> {
        let p = self.process();
        let Some(due) = p.pins_in_flight.take() else { return Ok(()) };
        let step = p.machine.complete(&due);
        self.note(|| "a dispatch group's callbacks go out".into());
        self.queue(step, Request::Dispatch);
        Ok(())
    }

    fn admin_budget(&mut self) -> Result<(), Violation> {
        let drawn = self.world.budget(&mut self.rng);
        let cluster_bytes = self.rng.bool().then_some(drawn.cluster_bytes);
        let head_us = self.rng.bool().then_some(drawn.disk_head_time_us);
        let p = self.process();
        let expected = pb::Budget {
            cluster_bytes: cluster_bytes.unwrap_or(p.budget.cluster_bytes),
            disk_head_time_us: head_us.unwrap_or(p.budget.disk_head_time_us),
        };
        let (budget, step) = p.machine.set_budget(cluster_bytes, head_us);
        if budget != expected {
            return Err(self.violation(format!("SetBudget gave {budget:?}, expected {expected:?}")));
        }
        self.process().budget = budget;
        self.note(|| format!("budget set to {budget:?}"));
        self.queue(step, Request::Budget(budget));
        Ok(())
    }

    /// Once every step is durable (the queue holds nothing uncommitted),
    /// the planner's `Status` of each declaration agrees with the oracle
    /// ([`Oracle::statuses_agree`]).
    fn check_statuses_if_durable(&mut self) -> Result<(), Violation> {
        let p = self.process();
        if !p.queue.iter().all(|job| matches!(job, Job::Closed(_)) || matches!(job, Job::Apply(a) if a.committed)) {
            return Ok(());
        }
        let ids = self.oracle.declared_ids();
        let statuses = self.process().machine.status(&ids).map_err(|e| self.violation(format!("status: {e}")))?;
        self.summary.counts.statuses_checked += statuses.len() as u64;
        self.check(self.oracle.statuses_agree(&statuses))
    }

    /// The persister's next piece of work: commit the head step, send a
    /// few of its messages, or answer its caller.
    fn persist(&mut self) -> Result<(), Violation> {
        let sends = self.rng.usize(1..=3);
        let p = self.process();
        let mut pending = match p.queue.pop_front() {
            None => return Ok(()),
            Some(Job::Closed(stream)) => {
                p.machine.close_stream(stream, &[]);
                return Ok(());
            }
            Some(Job::Apply(pending)) => pending,
        };
        if !pending.committed {
            pending.step.commit(&mut self.store);
            pending.committed = true;
            pending.outbox = pending.step.messages().into();
            let label = pending.request.label();
            self.note(|| format!("commit: {label}"));
            let r = self.committed(&pending.request, &pending.step);
            self.process().queue.push_front(Job::Apply(pending));
            self.check(r)?;
            return self.check_statuses_if_durable();
        }
        for _ in 0..sends {
            let Some(message) = pending.outbox.pop_front() else { break };
            let Message::Callback { stream, callback } = message else { continue };
            let Some(&client) = self.process().streams.get(&stream) else {
                return Err(self.violation(format!("a callback on stream {stream}, never opened")));
            };
            let owner = self.clients[client].name.clone();
            self.note(|| format!("send delivery {} to {owner} on stream {stream}", callback.delivery));
            self.check(self.oracle.sent(&owner, &callback))?;
            if self.clients[client].stream == Some(stream) {
                self.oracle.received(&owner, callback.delivery);
                self.clients[client].inbox.push(callback);
            } else {
                pending.ended.entry(stream).or_default().push(callback.delivery);
            }
        }
        if !pending.outbox.is_empty() {
            self.process().queue.push_front(Job::Apply(pending));
            return Ok(());
        }
        for (stream, unsent) in &pending.ended {
            self.process().machine.close_stream(*stream, unsent);
        }
        let label = pending.request.label();
        self.note(|| format!("answered: {label}"));
        self.answered(pending.request);
        Ok(())
    }

    /// The oracle's news of a step made durable.
    fn committed(&mut self, request: &Request, step: &Step) -> Result<(), String> {
        match request {
            Request::Declare { id, info, .. } => self.oracle.declared(*id, info.clone()),
            Request::Ack { client, ids } => self.oracle.acked(&self.clients[*client].name, ids),
            Request::Cancel { id, .. } => {
                self.oracle.cancelled(*id);
                Ok(())
            }
            Request::Budget(b) => {
                self.budget_committed = *b;
                Ok(())
            }
            Request::Announce { .. } => Ok(()),
            Request::Plan => {
                self.summary.counts.deliveries_seen += step.planned().count() as u64;
                self.oracle.planned(step.planned(), &self.world.seen_deleted)
            }
            Request::Subscribe { client, stream } => {
                let replayed: BTreeSet<u64> = step
                    .messages()
                    .into_iter()
                    .filter_map(|m| match m {
                        Message::Callback { stream: s, callback } if s == *stream => Some(callback.delivery),
                        _ => None,
                    })
                    .collect();
                self.oracle.replay(&self.clients[*client].name, &replayed)
            }
            Request::Dispatch => Ok(()),
        }
    }

    /// The step's caller hears back.
    fn answered(&mut self, request: Request) {
        match request {
            Request::Declare { client, id, .. } => self.clients[client].decls.push(id),
            Request::Ack { client, ids } => {
                let c = &mut self.clients[client];
                c.unsure.retain(|d| !ids.contains(d));
                c.acked.extend(ids);
            }
            Request::Cancel { client, id } => self.clients[client].decls.retain(|&d| d != id),
            Request::Plan | Request::Dispatch => self.process().timer_busy = false,
            Request::Subscribe { .. } | Request::Budget(_) | Request::Announce { .. } => {}
        }
    }
}
