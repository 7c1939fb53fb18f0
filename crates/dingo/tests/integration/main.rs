//! The `dingo` crate's process tests, one module per subject, in one test
//! binary: each file used to be its own binary linking the whole stack, and
//! linking (and compiling the shared client code) once per file cost CI
//! minutes; in one binary the slow wall-clock-paced tests (chaos, demo,
//! flash tier) also overlap with the rest instead of running one after
//! another. Run one subject with `cargo test -p dingo --test integration chaos::`.
//! `tests/sim.rs` stays a binary of its own: its simulator runs are
//! CPU-bound (about 65 s of CPU in 73 s), and several tests here are
//! timing-sensitive (steering's weights recover over wall time).

mod common;

mod budget_feed;
mod chaos;
mod conformance;
mod demo;
mod drain;
mod file_tasks;
mod flash_bench;
mod flash_tier_live;
mod georep;
mod operator;
mod planner;
mod steering;
mod storage;
mod tasks;
mod write_classes;
