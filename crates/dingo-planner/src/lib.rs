//! The DINGO IO Planner core.
//!
//! Tasks *declare* the block sets they must read and a deadline; every
//! scheduling quantum the planner picks which sets to serve within an IO
//! budget so that reads shared by several tasks happen together, then cuts
//! the quantum into dispatch groups with cache directives so a small pinned
//! cache catches the reuse.
//!
//! The core is pure and deterministic: it never reads a clock, a disk or the
//! network. Time, budgets and cluster state (a [`dingo_types::Topology`])
//! are inputs, so the planner service, the simulator and the tests drive the
//! same code and any scenario replays exactly.
//!
//! Flow of one declaration: [`Planner::declare`] validates it and stores its
//! sets compactly; [`Planner::schedule`] (the rate-based scheduler) picks sets
//! for a quantum; [`Planner::dispatch`] groups them into callbacks and
//! [`CacheDirective`]s; the caller delivers the callbacks, and the task reads
//! the chunks named in them through the normal read path.

mod accounting;
pub mod bits_serde;
mod config;
mod declaration;
mod dispatcher;
pub mod elision;
mod error;
mod explicit;
mod lower_bound;
mod planner;
mod scheduler;
mod search;
mod sets;
pub mod table;
mod validate;

pub use accounting::{QuantumReport, TaskStats};
pub use config::{Budget, DiskBudget, LeftoverPolicy, Limits, PlannerConfig, TaskCaps};
pub use declaration::DeclarationStatus;
pub use dispatcher::{
    CacheDirective, Callback, DeliveredRead, DeliveredSet, Dispatch, DispatchGroup, DispatchScratch, GroupPin,
    dispatch, dispatch_into,
};
pub use error::{CancelError, DeclareError, RestoreError};
pub use lower_bound::ReadLowerBound;
pub use planner::{Planner, PreparedDeclaration, QuantumPlan};
pub use scheduler::{
    BlockBytes, ChunkRead, MAX_SCHEDULED_BLOCK_ID, MAX_SCHEDULED_DISKS, Schedule, ScheduledDecl, ScheduledSet,
};
