//! The fuzzing targets, one per parser of untrusted bytes.

pub mod chunk_file;
pub mod cli;
pub mod config;
pub mod meta_records;
pub mod meta_rpc;
pub mod node_rpc;
pub mod planner;
