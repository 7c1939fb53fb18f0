//! DINGO's datacenter model.
//!
//! [`ClusterModel`] is a cluster of 100 PB-1 EB whose placement is computed
//! (Ceph-like placement groups), not stored, so it costs megabytes however
//! many blocks it holds. [`workload`] turns a maintenance demand and a task
//! mix into the declarations the eight maintenance tasks make. The planner
//! benchmark and the datacenter simulator ([`sim`]) both run on this one
//! model. [`scenario`] is a simulation's options, [`sweep`] varies one parameter over many runs,
//! [`run`] runs either from its options with progress reports (and resumes a
//! run from its checkpoint, [`sim::checkpoint`]), [`cost`] adds up what it
//! costs the machine, [`summary`] and
//! [`csv`] are what a run reports, [`bench_planner`] times one quantum of
//! the planner at scale.

pub mod bench_planner;
pub mod cost;
pub mod csv;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod mix;
pub mod model;
pub mod paper;
pub mod progress_log;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod summary;
pub mod sweep;
pub mod workload;

pub use model::{ClusterModel, ModelError, ModelSpec, Redundancy};
