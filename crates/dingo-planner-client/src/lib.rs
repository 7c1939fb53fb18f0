//! The task-client library of the DINGO IO Planner service (`dingo
//! planner`): [`PlannerClient`] declares block sets, receives callbacks,
//! acknowledges, cancels and asks for status ([`StatusView`] shows it);
//! [`PlannerTarget`] says where a planner is and who asks; [`convert`] maps the wire
//! messages to the planner's types (`dingo_types`) and back.
//!
//! The wire messages are under [`wire`] (the `dingo.planner.v1` protocol),
//! so that a wire `wire::Callback` is never mistaken for the planner
//! core's `dingo_planner::Callback`. The server is `dingo-planner-service`;
//! this crate does not link it (no redb, no config).

pub mod client;
pub mod convert;
pub mod status;
mod target;

pub use client::{CallbackStream, Declared, PlannerClient, PlannerClientError};
pub use convert::read_chunk;
pub use status::{BudgetChange, BudgetView, DeclarationView, StatusView};
pub use target::{DEFAULT_PLANNER_ADDR, PlannerTarget};

/// The planner protocol's messages, as they travel.
pub use dingo_proto::planner as wire;
