//! The state machine's steps opened to a caller that plays the driver
//! itself: the deterministic simulation (`dingo-planner-dst`) runs them
//! with simulated time, commits each [`Step`] to a [`MemoryStore`] and
//! delivers its messages over a simulated network, crashing and restarting
//! the machine wherever it likes. A thin wrapper: every method is one step
//! of [`State`], refusals map to the gRPC status a client would see.

use super::{DueGroup, Outgoing, Ready, State, StreamId};
use crate::auth::Caller;
use crate::config::ServiceConfig;
use crate::memory_store::MemoryStore;
use crate::records::RecordError;
use crate::topology::{MetaTopology, Snapshot};
use dingo_planner::DeclareError;
use dingo_proto::planner as pb;
use dingo_proto::v1::{BlockRow, ClusterStatusReply};
use dingo_types::{ChunkRef, Declaration, DeclarationId, MemberBitmap};
use tonic::Status;

/// The planner service's state machine without its driver.
pub struct Machine {
    state: State,
}

/// What one accepted step asks of its driver: commit it, then send its
/// messages, then answer.
pub struct Step(Ready);

/// One message a step sends on a callback stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Callback {
        stream: u64,
        callback: pb::Callback,
    },
    /// The stream ends: its client subscribed again.
    Replaced {
        stream: u64,
    },
}

/// A dispatch group taken out of the queue whose cache directives are
/// (in the real driver) on their way to the nodes; [`Machine::complete`]
/// then dispatches its callbacks. Other steps may run in between.
pub struct Due(DueGroup);

impl Due {
    /// When the group was due (Unix ms).
    pub fn at_ms(&self) -> u64 {
        self.0.at_ms
    }

    /// The deliveries of the group, as planned (a cancelled declaration's
    /// included; [`Machine::complete`] skips those).
    pub fn deliveries(&self) -> &[u64] {
        &self.0.deliveries
    }

    /// Node address → the chunks to pin there, each with its lapse time
    /// (Unix ms): the group's pins that had not lapsed when it was taken,
    /// on nodes the planner knows alive.
    pub fn pins(&self) -> &[(String, Vec<(ChunkRef, u64)>)] {
        &self.0.pins
    }

    /// Pins the group lost because they lapsed before it was taken.
    pub fn lapsed_pins(&self) -> u64 {
        self.0.lapsed_pins
    }
}

impl Step {
    /// Commits the step's records to `store`, atomically.
    pub fn commit(&self, store: &mut MemoryStore) {
        store.commit(&self.0.batch);
    }

    /// The messages to send once the step is committed, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.0
            .messages
            .iter()
            .map(|m| match &m.item {
                Outgoing::Callback(callback) => Message::Callback { stream: m.stream.0, callback: callback.clone() },
                Outgoing::Replaced(_) => Message::Replaced { stream: m.stream.0 },
            })
            .collect()
    }

    /// The callbacks of the deliveries this step stores (a quantum's plan),
    /// to be dispatched later.
    pub fn planned(&self) -> impl Iterator<Item = &pb::Callback> {
        self.0.batch.deliveries.iter().filter_map(|(_, rec)| rec.callback.as_ref())
    }
}

impl Machine {
    /// A start (or restart) from what `store` holds, with the cluster as
    /// the metadata service would report it.
    pub fn start(
        config: ServiceConfig,
        store: &MemoryStore,
        rows: Vec<BlockRow>,
        cluster: ClusterStatusReply,
        now_ms: u64,
    ) -> Result<Machine, RecordError> {
        let mut topo = MetaTopology::default();
        topo.apply(Snapshot { rows, cluster });
        Ok(Machine { state: State::restore(config, store.load()?, topo, now_ms)? })
    }

    /// A fresh view of the metadata service, as the driver fetches before
    /// each quantum: sets whose blocks were all deleted are elided.
    /// Nothing is stored (a restart reads the topology afresh).
    pub fn refresh_topology(&mut self, rows: Vec<BlockRow>, cluster: ClusterStatusReply) {
        self.state.apply_topology(Snapshot { rows, cluster });
    }

    /// `AnnounceDeletions`: a task is about to delete `members`; returns the
    /// sets elided. A step that stores nothing, as in the service.
    pub fn announce_deletions(&mut self, members: &MemberBitmap) -> (u64, Step) {
        (self.state.announce_deletions(members), Step(Ready::default()))
    }

    pub fn declare(
        &mut self,
        owner: &str,
        decl: &Declaration,
        now_ms: u64,
    ) -> Result<(DeclarationId, Step), DeclareError> {
        self.state.declare(owner, decl, now_ms).map(|(accepted, ready)| (accepted.id, Step(ready)))
    }

    /// Opens a callback stream for `owner`; returns its id.
    pub fn subscribe(&mut self, owner: &str) -> (u64, Step) {
        let (stream, ready) = self.state.subscribe(owner);
        (stream.0, Step(ready))
    }

    /// The driver's news that `stream` ended before it took the callbacks
    /// of deliveries `unsent`.
    pub fn close_stream(&mut self, stream: u64, unsent: &[u64]) {
        self.state.close_stream(StreamId(stream), unsent);
    }

    pub fn ack(&mut self, owner: &str, deliveries: &[u64]) -> Result<Step, Status> {
        self.state.ack(owner, deliveries).map(Step).map_err(Status::from)
    }

    /// Cancels a declaration of task client `owner`; returns the sets
    /// delivered.
    pub fn cancel(&mut self, owner: &str, declaration: u64) -> Result<(u64, Step), Status> {
        let (delivered, ready) = self.state.cancel(&Caller::Client(owner.into()), declaration)?;
        Ok((delivered, Step(ready)))
    }

    /// The administrator's `SetBudget` (0 = unlimited).
    pub fn set_budget(&mut self, cluster_bytes: Option<u64>, disk_head_time_us: Option<u64>) -> (pb::Budget, Step) {
        let (budget, ready) = self.state.set_budget(cluster_bytes, disk_head_time_us);
        (budget, Step(ready))
    }

    /// A node's reply to its quantum budget: `disk` is `permille` as slow
    /// as its model, `congested` if its node says so (what the driver
    /// records for the next quantum's budget cut).
    pub fn note_slowness(&mut self, disk: u32, congested: bool, permille: u32) {
        self.state.note_slowness(disk, super::DiskSlowness { congested, permille });
    }

    /// The budget of the quantum starting at `now_ms`.
    pub fn budget_at(&self, now_ms: u64) -> pb::Budget {
        self.state.budget_at(now_ms)
    }

    pub fn plan_quantum(&mut self, now_ms: u64) -> Step {
        Step(self.state.plan_quantum(now_ms))
    }

    /// When the next queued dispatch group is due.
    pub fn next_group_at(&self) -> Option<u64> {
        self.state.next_group_at()
    }

    /// Takes the earliest group due at `now_ms` out of the queue.
    pub fn take_due(&mut self, now_ms: u64) -> Option<Due> {
        self.state.take_due_group(now_ms).map(Due)
    }

    /// Dispatches a group taken by [`Self::take_due`].
    pub fn complete(&mut self, due: &Due) -> Step {
        Step(self.state.complete_group(&due.0))
    }

    /// The administrator's `Status` of the given declarations.
    pub fn status(&self, ids: &[u64]) -> Result<Vec<pb::DeclarationStatus>, Status> {
        self.state.status(&Caller::Admin, ids).map_err(Status::from)
    }

    /// Everything the machine holds but its configuration and counters:
    /// equal before and after a step means the step changed nothing.
    pub fn fingerprint(&self) -> String {
        self.state.fingerprint()
    }
}
