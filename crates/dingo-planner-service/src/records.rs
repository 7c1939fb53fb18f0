//! The planner service's durable records, as the state machine
//! ([`crate::state`]) produces and restores them: one record type per
//! table, a [`Batch`] of changes to commit together, and everything
//! [`Loaded`] at start. Where they are kept is [`crate::store`]'s job (redb);
//! nothing here does IO.

use dingo_proto::planner as pb;
use prost::Message;
use thiserror::Error;

pub(crate) const NEXT_DELIVERY: &str = "next_delivery";
pub(crate) const NEXT_GROUP: &str = "next_group";

/// Stored records that do not fit together (a value out of range, a
/// delivery without its declaration, ...).
#[derive(Debug, Error)]
#[error("planner records: {0}")]
pub struct RecordError(pub(crate) String);

/// Life of a declaration in the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Live = 0,
    /// Everything needed was delivered and acknowledged (or elided).
    Done = 1,
    Cancelled = 2,
}

impl Phase {
    fn from_u32(v: u32) -> Result<Phase, RecordError> {
        match v {
            0 => Ok(Phase::Live),
            1 => Ok(Phase::Done),
            2 => Ok(Phase::Cancelled),
            _ => Err(RecordError(format!("unknown declaration phase {v}"))),
        }
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeclRecord {
    #[prost(string, tag = "1")]
    pub owner: String,
    #[prost(string, tag = "2")]
    pub task: String,
    #[prost(uint64, tag = "3")]
    pub deadline_ms: u64,
    #[prost(uint64, tag = "4")]
    pub total_sets: u64,
    #[prost(uint64, optional, tag = "5")]
    pub sets_needed: Option<u64>,
    #[prost(uint32, tag = "6")]
    pub phase: u32,
    #[prost(bool, tag = "7")]
    pub missed: bool,
    /// Final counts, written when the declaration leaves `Live`.
    #[prost(uint64, tag = "8")]
    pub elided_sets: u64,
    #[prost(uint64, tag = "9")]
    pub delivered_sets: u64,
    #[prost(uint64, tag = "10")]
    pub acked_sets: u64,
    #[prost(uint64, tag = "11")]
    pub created_ms: u64,
    /// Added after the first release; absent in older records (none).
    #[prost(uint64, optional, tag = "12")]
    pub bytes_needed: Option<u64>,
}

impl DeclRecord {
    pub(crate) fn phase(&self) -> Result<Phase, RecordError> {
        Phase::from_u32(self.phase)
    }
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeliveryRecord {
    #[prost(string, tag = "1")]
    pub owner: String,
    /// With its delivery id and quantum; `redelivery` is always false here.
    #[prost(message, optional, tag = "2")]
    pub callback: Option<pb::Callback>,
    #[prost(uint64, tag = "3")]
    pub at_ms: u64,
    #[prost(uint64, tag = "4")]
    pub group: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub(crate) struct PinRecord {
    #[prost(uint64, tag = "1")]
    pub block: u64,
    #[prost(uint32, tag = "2")]
    pub copy: u32,
    #[prost(uint32, tag = "3")]
    pub disk: u32,
    #[prost(uint64, tag = "4")]
    pub until_ms: u64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct GroupRecord {
    #[prost(uint64, tag = "1")]
    pub at_ms: u64,
    #[prost(message, repeated, tag = "2")]
    pub pins: Vec<PinRecord>,
}

/// Where a delivery is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DeliveryState {
    /// Persisted with its quantum; its dispatch time has not come yet.
    Scheduled = 0,
    /// Its group's directives went out and the callback was offered to the
    /// owner's stream (if one was open); re-sent on every (re)subscription
    /// until acknowledged.
    Dispatched = 1,
    Acked = 2,
}

impl DeliveryState {
    pub(crate) fn from_u8(v: u8) -> Result<Self, RecordError> {
        match v {
            0 => Ok(DeliveryState::Scheduled),
            1 => Ok(DeliveryState::Dispatched),
            2 => Ok(DeliveryState::Acked),
            _ => Err(RecordError(format!("unknown delivery state {v}"))),
        }
    }
}

/// Changes committed together, in one transaction.
#[derive(Default)]
pub(crate) struct Batch {
    pub decls: Vec<(u64, DeclRecord)>,
    pub requests: Vec<(u64, pb::DeclareRequest)>,
    pub drop_requests: Vec<u64>,
    pub deliveries: Vec<(u64, DeliveryRecord)>,
    pub states: Vec<(u64, DeliveryState)>,
    pub drop_deliveries: Vec<u64>,
    pub groups: Vec<(u64, GroupRecord)>,
    pub drop_groups: Vec<u64>,
    pub counters: Vec<(&'static str, u64)>,
    pub budget: Option<pb::Budget>,
}

impl Batch {
    /// Whether committing it would change nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.decls.is_empty()
            && self.requests.is_empty()
            && self.drop_requests.is_empty()
            && self.deliveries.is_empty()
            && self.states.is_empty()
            && self.drop_deliveries.is_empty()
            && self.groups.is_empty()
            && self.drop_groups.is_empty()
            && self.counters.is_empty()
            && self.budget.is_none()
    }
}

/// Everything stored, as loaded at start.
#[derive(Default)]
pub(crate) struct Loaded {
    pub decls: Vec<(u64, DeclRecord)>,
    pub requests: Vec<(u64, pb::DeclareRequest)>,
    pub deliveries: Vec<(u64, DeliveryRecord, DeliveryState)>,
    pub groups: Vec<(u64, GroupRecord)>,
    pub next_delivery: u64,
    pub next_group: u64,
    pub budget: Option<pb::Budget>,
}
