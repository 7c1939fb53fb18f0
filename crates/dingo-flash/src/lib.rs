//! DINGO's flash cache tier: tiny-object flash caches (Kangaroo, FairyWREN)
//! and their baselines over counting device models, plus the benchmark
//! that compares them. See README.md for the design and its sources.
//!
//! The core is pure and deterministic: engines and devices never read a
//! clock, a file or a random source they were not handed; a seed and a
//! trace fix every result. Only [`bench::write_report`], the trace
//! readers and [`real`] (the real engine's page file) touch IO.
//!
//! Entry points: [`bench::run_bench`] / [`bench::run_bench_on`] produce a
//! [`bench::BenchReport`]; the engines implement [`engine::CacheEngine`];
//! the devices implement [`device::Device`].

pub mod bench;
mod bloom;
pub mod carbon;
pub mod device;
pub mod engine;
mod hash;
pub mod index;
mod log;
pub mod model;
pub mod object;
pub mod page;
pub mod real;
mod set;
pub mod tier;
pub mod trace;
