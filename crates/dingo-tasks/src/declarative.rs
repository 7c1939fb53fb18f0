//! The declarative mode: a task declares its whole job to the IO Planner
//! service once, then does the work set by set as the planner calls back,
//! reading exactly the copies the planner scheduled (and pinned), and
//! acknowledges each callback when its sets are done.
//!
//! Delivery is at least once: after a planner restart or a dropped stream
//! the task subscribes again and gets every unacknowledged callback; one it
//! already carried out is only acknowledged again.

use crate::report::{CancelFlag, JobReport, Scheduling};
use crate::work::{ActionError, Declared, DeletionNotice, Job, Outcome, ScheduledCopies, execute_with_retries};
use dingo_client::{Client, IoTag};
use dingo_planner_client::convert::member_to_wire;
use dingo_planner_client::wire::FileSegment;
use dingo_planner_client::{CallbackStream, PlannerClient, PlannerClientError};
use dingo_proto::planner::{self as pb, BlockSets, DeclareRequest, declare_request::ReadSets};
use dingo_types::{BlockId, DeclarationId, Member, Timestamp};
use futures::{FutureExt, StreamExt};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Sets of one callback carried out at once.
const PARALLEL_SETS: usize = 4;
/// Callbacks waiting on the stream taken at once, and how many of them
/// are carried out at once: a callback holds a dispatch group's sets,
/// often one or two, so carrying them out one by one would leave the
/// task behind the planner's pace (and its pins) on a busy machine.
const MAX_BATCH: usize = 16;
const PARALLEL_CALLBACKS: usize = 4;
/// How often unfinished declarations are checked while no callback comes
/// (the planner may finish one by eliding deleted sets).
const STATUS_POLL: Duration = Duration::from_secs(2);
/// Pause before subscribing again after the stream broke.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(500);
/// Submissions waiting to be declared, at most; [`Agent::submit`] waits
/// for room beyond that, so a caller faster than the planner is slowed
/// instead of growing the agent's memory.
pub const SUBMIT_QUEUE: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum DeclarativeError {
    #[error("planner refused the declaration of {job}: {source}")]
    Declare {
        job: String,
        #[source]
        source: PlannerClientError,
    },
    #[error("planner: {0}")]
    Planner(#[from] PlannerClientError),
    #[error("the task agent has stopped")]
    Stopped,
}

/// What a job is declared as: block sets, or file segments.
enum Request {
    Blocks(DeclareRequest),
    Files(Vec<Vec<FileSegment>>),
}

fn declare_request(job: &Job, margin_ms: u64) -> Result<Request, String> {
    let read_sets = match job.declared {
        Declared::Files => {
            let sets = job.items.iter().map(|i| i.action.file_segment().map(|s| vec![s]));
            return sets.collect::<Option<Vec<_>>>().map(Request::Files).ok_or_else(|| {
                format!("{} {} is declared by file but has items that read no file", job.task, job.label)
            });
        }
        Declared::ChunksOnDisk(disk) => ReadSets::ChunksOnDisk(disk),
        Declared::Items => ReadSets::Sets(BlockSets {
            sets: job
                .items
                .iter()
                .map(|i| pb::BlockSet {
                    members: i.set.members.iter().copied().map(member_to_wire).collect(),
                    needed: i.set.needed,
                })
                .collect(),
        }),
    };
    Ok(Request::Blocks(DeclareRequest {
        task: job.task.name().to_string(),
        deadline_ms: declared_deadline_ms(job, margin_ms),
        sets_needed: job.sets_needed,
        bytes_needed: job.bytes_needed,
        read_sets: Some(read_sets),
    }))
}

/// Leaves the task time to carry out the last callback.
fn declared_deadline_ms(job: &Job, margin_ms: u64) -> u64 {
    job.deadline_ms.saturating_sub(margin_ms)
}

/// A job submitted to an [`Agent`], and where its report goes.
struct Submission {
    job: Job,
    cancel: CancelFlag,
    done: oneshot::Sender<Result<JobReport, DeclarativeError>>,
}

/// A declared job being carried out.
struct Active {
    job: Job,
    report: JobReport,
    /// Deliveries of this job already carried out (a redelivery is only
    /// acknowledged). Dropped with the job, so it never outgrows the jobs
    /// in flight.
    carried_out: HashSet<u64>,
    cancel: CancelFlag,
    done: oneshot::Sender<Result<JobReport, DeclarativeError>>,
}

/// One task client of the planner service: declares the jobs submitted to
/// it and carries them out as callbacks arrive on its single subscription.
/// Lives until every [`Agent`] handle is dropped and no job is left.
#[derive(Clone)]
pub struct Agent {
    submit: mpsc::Sender<Submission>,
}

/// Where the report of a submitted job arrives.
pub type JobHandle = oneshot::Receiver<Result<JobReport, DeclarativeError>>;

impl Agent {
    /// Starts the agent. `margin_ms` is subtracted from each job's deadline
    /// in its declaration, so the last callback still completes in time.
    pub fn spawn(client: Client, planner: PlannerClient, margin_ms: u64) -> Agent {
        let (agent, rx) = Agent::queue();
        let notice = PlannerNotice(planner.clone());
        tokio::spawn(AgentLoop { client, planner, notice, margin_ms, active: HashMap::new() }.run(rx));
        agent
    }

    /// A handle and the bounded queue its submissions go to.
    fn queue() -> (Agent, mpsc::Receiver<Submission>) {
        let (submit, rx) = mpsc::channel(SUBMIT_QUEUE);
        (Agent { submit }, rx)
    }

    /// Declares `job`, once there is room in the queue (see
    /// [`SUBMIT_QUEUE`]); its report arrives on the returned handle when
    /// the planner reports it done, or when `cancel` is set.
    pub async fn submit(&self, job: Job, cancel: CancelFlag) -> JobHandle {
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(s)) = self.submit.send(Submission { job, cancel, done }).await {
            let _ = s.done.send(Err(DeclarativeError::Stopped));
        }
        rx
    }
}

struct AgentLoop {
    client: Client,
    planner: PlannerClient,
    notice: PlannerNotice,
    margin_ms: u64,
    active: HashMap<u64, Active>,
}

impl AgentLoop {
    async fn run(mut self, mut submissions: mpsc::Receiver<Submission>) {
        let mut open = true;
        let mut poll = tokio::time::interval(STATUS_POLL);
        let mut stream: Option<CallbackStream> = None;
        while open || !self.active.is_empty() {
            if stream.is_none() && !self.active.is_empty() {
                match self.planner.subscribe().await {
                    Ok(s) => stream = Some(s),
                    Err(e) if is_transient(&e) => tokio::time::sleep(RESUBSCRIBE_DELAY).await,
                    Err(e) => self.fail_all(e),
                }
                continue;
            }
            tokio::select! {
                s = submissions.recv(), if open => match s {
                    Some(s) => self.declare(s).await,
                    None => open = false,
                },
                c = next_callback(&mut stream) => match c {
                    Some(Ok(callback)) => {
                        let mut batch = vec![callback];
                        while batch.len() < MAX_BATCH {
                            match stream.as_mut().and_then(|s| s.next().now_or_never()) {
                                Some(Some(Ok(c))) => batch.push(c),
                                None => break,
                                // Ended or broke: subscribe again after this batch.
                                Some(_) => {
                                    stream = None;
                                    break;
                                }
                            }
                        }
                        if let Err(e) = self.handle(batch).await {
                            tracing::warn!("planner call failed: {e}");
                            if !is_transient(&e) { self.fail_all(e); }
                        }
                    }
                    Some(Err(e)) if !is_transient(&e) => self.fail_all(e),
                    // Stream ended or broke (planner restart): subscribe again.
                    _ => {
                        stream = None;
                        tokio::time::sleep(RESUBSCRIBE_DELAY).await;
                    }
                },
                _ = poll.tick() => {
                    self.cancel_requested().await;
                    self.check_done().await;
                }
            }
        }
    }

    async fn declare(&mut self, s: Submission) {
        let report = JobReport::new(&s.job, Scheduling::Declarative, dingo_daemon::now_ms());
        if s.job.items.is_empty() {
            let mut report = report;
            report.finished_ms = Some(report.started_ms);
            let _ = s.done.send(Ok(report));
            return;
        }
        let declared = match declare_request(&s.job, self.margin_ms) {
            Ok(Request::Blocks(req)) => self.planner.declare_wire(req).await,
            Ok(Request::Files(sets)) => {
                let deadline = Timestamp(declared_deadline_ms(&s.job, self.margin_ms));
                self.planner.declare_files(s.job.task, deadline, s.job.sets_needed, s.job.bytes_needed, sets).await
            }
            Err(msg) => Err(PlannerClientError::Rpc(tonic::Status::invalid_argument(msg))),
        };
        match declared {
            Ok(declared) => {
                let id = declared.id.0;
                let mut report = report;
                report.declaration = Some(id);
                self.active.insert(
                    id,
                    Active { job: s.job, report, carried_out: HashSet::new(), cancel: s.cancel, done: s.done },
                );
            }
            Err(source) => {
                let job = format!("{} {}", s.job.task, s.job.label);
                let _ = s.done.send(Err(DeclarativeError::Declare { job, source }));
            }
        }
    }

    /// Carries out `callbacks` (several at once), then acknowledges them.
    async fn handle(&mut self, callbacks: Vec<pb::Callback>) -> Result<(), PlannerClientError> {
        let mut todo = Vec::new();
        for c in &callbacks {
            // Unknown declarations are an earlier run's leftovers: nothing to do.
            if let Some(a) = self.active.get_mut(&c.declaration)
                && a.carried_out.insert(c.delivery)
            {
                todo.push(c);
            }
        }
        let mut todo = todo.into_iter();
        let mut running = futures::stream::FuturesUnordered::new();
        let mut done = Vec::new();
        loop {
            while running.len() < PARALLEL_CALLBACKS
                && let Some(c) = todo.next()
            {
                running.push(carry_out(&self.client, &self.active[&c.declaration].job, c, &self.notice));
            }
            match running.next().await {
                Some(out) => done.push(out),
                None => break,
            }
        }
        drop(running);
        for out in done {
            let declaration = out.declaration;
            if let Some(a) = self.active.get_mut(&declaration) {
                out.add_to(&mut a.report);
            }
        }
        let deliveries: Vec<u64> = callbacks.iter().map(|c| c.delivery).collect();
        match self.planner.ack(&deliveries).await {
            // The declaration finished or was cancelled meanwhile.
            Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
            other => other?,
        }
        self.check_done().await;
        Ok(())
    }

    /// Cancels the declarations of jobs whose cancel flag is set.
    async fn cancel_requested(&mut self) {
        let ids: Vec<u64> = self.active.iter().filter(|(_, a)| a.cancel.is_cancelled()).map(|(&id, _)| id).collect();
        for id in ids {
            match self.planner.cancel(DeclarationId(id)).await {
                Ok(_) => {}
                Err(e) if is_transient(&e) => continue,
                // Already finished or gone: cancelling is moot.
                Err(e) => tracing::info!(declaration = id, "cancel: {e}"),
            }
            if let Some(mut a) = self.active.remove(&id) {
                a.report.cancelled = true;
                let _ = a.done.send(Ok(a.report));
            }
        }
    }

    /// Completes the jobs the planner reports done.
    async fn check_done(&mut self) {
        if self.active.is_empty() {
            return;
        }
        let ids: Vec<DeclarationId> = self.active.keys().map(|&id| DeclarationId(id)).collect();
        let status = match self.planner.status(&ids).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("status: {e}");
                return;
            }
        };
        let now = dingo_daemon::now_ms();
        for d in status.declarations.iter().filter(|d| d.done) {
            if let Some(mut a) = self.active.remove(&d.declaration) {
                a.report.finished_ms = Some(now);
                let _ = a.done.send(Ok(a.report));
            }
        }
    }

    fn fail_all(&mut self, e: PlannerClientError) {
        tracing::error!("planner refused this task client: {e}");
        let msg = e.to_string();
        for (_, a) in self.active.drain() {
            let err =
                PlannerClientError::Rpc(tonic::Status::new(e.code().unwrap_or(tonic::Code::Unknown), msg.clone()));
            let _ = a.done.send(Err(DeclarativeError::Planner(err)));
        }
    }
}

async fn next_callback(stream: &mut Option<CallbackStream>) -> Option<Result<pb::Callback, PlannerClientError>> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Errors a restarted or briefly unreachable planner causes.
fn is_transient(e: &PlannerClientError) -> bool {
    matches!(e.code(), Some(tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled))
}

/// What carrying out one callback gave, to add to its job's report.
struct CarriedOut {
    declaration: u64,
    overloaded: bool,
    results: Vec<Result<Result<Outcome, ActionError>, String>>,
}

impl CarriedOut {
    fn add_to(self, report: &mut JobReport) {
        report.callbacks += 1;
        report.overloaded_callbacks += u64::from(self.overloaded);
        for r in self.results {
            match r {
                Ok(outcome) => report.record(outcome),
                Err(msg) => {
                    report.failed += 1;
                    report.errors.push(msg);
                }
            }
        }
    }
}

async fn carry_out(client: &Client, job: &Job, callback: &pb::Callback, notice: &PlannerNotice) -> CarriedOut {
    let tag = IoTag::Maintenance { task: job.task, declaration: DeclarationId(callback.declaration) };
    let sets = callback.sets.clone();
    let results = futures::stream::iter(sets.into_iter().map(|set| carry_out_set(client, job, set, tag, notice)))
        .buffer_unordered(PARALLEL_SETS)
        .collect()
        .await;
    CarriedOut { declaration: callback.declaration, overloaded: callback.overloaded, results }
}

/// Carries out one delivered set, retrying a failed action; `Err` when the
/// set key names nothing of this job.
async fn carry_out_set(
    client: &Client,
    job: &Job,
    set: pb::DeliveredSet,
    tag: IoTag,
    notice: &PlannerNotice,
) -> Result<Result<Outcome, ActionError>, String> {
    let copies: ScheduledCopies = set.reads.iter().map(|r| (BlockId(r.block), r.copy)).collect();
    let Some(action) = job.action_for_key(set.key) else {
        return Err(format!("planner delivered unknown set key {} for {} {}", set.key, job.task, job.label));
    };
    Ok(execute_with_retries(client, &action, &copies, tag, notice).await)
}

/// Passes an action's coming deletions on to the planner
/// (`AnnounceDeletions`: anticipatory elision) without waiting for it:
/// best effort, as the deletion itself, once the planner sees it, elides
/// the same sets (except those of a moved copy, which still exists).
struct PlannerNotice(PlannerClient);

impl DeletionNotice for PlannerNotice {
    fn will_delete(&self, members: Vec<Member>) {
        let planner = self.0.clone();
        tokio::spawn(async move {
            match planner.announce_deletions(&members).await {
                Ok(elided) => tracing::debug!(members = members.len(), elided, "announced deletions"),
                Err(e) => tracing::debug!("announcing {} deletions: {e}", members.len()),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(label: &str) -> Job {
        Job::new(dingo_types::TaskKind::Scrubbing, label.into(), Vec::new(), Declared::Items, 0)
    }

    #[tokio::test]
    async fn a_full_queue_makes_the_submitter_wait_and_a_stopped_agent_says_so() {
        let (agent, mut rx) = Agent::queue();
        for i in 0..SUBMIT_QUEUE {
            drop(agent.submit(job(&i.to_string()), CancelFlag::default()).await);
        }
        let waiting = agent.submit(job("one more"), CancelFlag::default());
        tokio::pin!(waiting);
        let waited = tokio::time::timeout(Duration::from_millis(100), &mut waiting).await;
        assert!(waited.is_err(), "a submission beyond the queue's room must wait");
        assert_eq!(rx.recv().await.expect("queued").job.label, "0");
        let _handle = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("room was made");

        drop(rx);
        let stopped = agent.submit(job("late"), CancelFlag::default()).await;
        assert!(matches!(stopped.await, Ok(Err(DeclarativeError::Stopped))));
    }
}
