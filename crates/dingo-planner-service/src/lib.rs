//! The DINGO IO Planner as a durable gRPC service (`dingo planner`), and
//! the library task clients use to talk to it.
//!
//! The service wraps the pure planner core ([`dingo_planner::Planner`]):
//! - **topology** from the metadata service (`BlockTable`, `ClusterStatus`),
//!   refreshed before each quantum; deleted blocks elide their sets;
//! - **durability** in redb (`<data>/planner.redb`): declarations,
//!   deliveries and acknowledgements, written ahead of every effect so a
//!   restart neither loses nor repeats anything (see `state`'s docs and
//!   `docs/PLANNER_SERVICE.md`);
//! - **the quantum loop**: plan, persist, then per dispatch group send the
//!   cache directives to the nodes holding the chunks, then stream the
//!   callbacks to their owners;
//! - **auth**: `authorization: Bearer <token>`; each task client sees,
//!   acknowledges and cancels only its own declarations;
//! - **metrics**: the core's per-task accounting on `/metrics`.
//!
//! Task clients use [`PlannerClient`]; the service runs with [`run`].

mod auth;
pub mod client;
pub mod config;
pub mod convert;
mod driver;
mod error;
mod files;
mod keys;
mod metrics;
mod outbox;
mod records;
mod service;
mod state;
mod store;
mod topology;

pub use client::{CallbackStream, Declared, PlannerClient, PlannerClientError};
pub use config::{BudgetSection, ClientEntry, ConfigError, ServiceConfig};
pub use convert::read_chunk;
pub use dingo_proto::planner::{
    Budget, Callback, ChunkRead, DeclarationStatus, DeliveredSet, FileSegment, StatusReply,
};
pub use service::{RunError, run};
