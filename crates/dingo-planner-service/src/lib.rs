//! The DINGO IO Planner as a durable gRPC service (`dingo planner`). Task
//! clients talk to it through `dingo-planner-client`.
//!
//! The service wraps the pure planner core ([`dingo_planner::Planner`]):
//! - **topology** from the metadata service (`BlockTable`, `ClusterStatus`),
//!   refreshed before each quantum; deleted blocks elide their sets;
//! - **a sans-IO state machine** (`state`): each step returns a `Ready`,
//!   the records to commit and the callbacks to stream; the `driver` runs
//!   the steps off the async workers, commits each `Ready` in redb
//!   (`<data>/planner.redb`) and only then sends, so a restart neither
//!   loses nor repeats anything (see `docs/PLANNER_SERVICE.md`);
//! - **the quantum loop**: plan, persist, then per dispatch group send the
//!   cache directives to the nodes holding the chunks, then stream the
//!   callbacks to their owners;
//! - **auth**: `authorization: Bearer <token>`; each task client sees,
//!   acknowledges and cancels only its own declarations;
//! - **metrics**: the core's per-task accounting on `/metrics`.
//!
//! The service runs with [`run`], configured by [`ServiceConfig`].
//! [`Machine`] opens the state machine's steps to a caller that plays the
//! driver (the deterministic simulation, `dingo-planner-dst`), with a
//! [`MemoryStore`] in place of redb.

mod auth;
pub mod config;
mod driver;
mod error;
mod files;
mod freshness;
mod keys;
mod memory_store;
mod metrics;
mod outbox;
mod records;
mod service;
mod state;
mod store;
mod topology;

pub use config::{BudgetSection, ClientEntry, ConfigError, ServiceConfig, ServiceOverrides};
pub use files::declaration_from_files;
pub use freshness::{may_be_stale, refresh_first};
pub use memory_store::{MemoryStore, StoredTables};
pub use records::RecordError;
pub use service::{RunError, run};
pub use state::seam::{Due, Machine, Message, Step};
