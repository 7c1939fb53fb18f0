//! Fuzzing of every parser of untrusted bytes, on the stable toolchain:
//! each [`Target`] feeds mutated valid inputs (and random bytes) to the
//! real decoder — chunk files through the node's store, metadata and
//! planner records, the requests each server's handlers accept, the TOML
//! configs and mix files, the command line's size, duration and redundancy
//! strings — and checks it never panics and keeps its own promises (a
//! chunk read returns the bytes written or an error, an accepted value
//! round-trips).
//!
//! Coverage-guided fuzzers (cargo-fuzz, AFL) need a nightly compiler or
//! an instrumented build; this harness is a plain loop over a seeded
//! mutator, so it runs in `cargo test`. A failing input is printed with the
//! seed and iteration that make it again. `DINGO_FUZZ_ITERS` sets the
//! executions per target (CI runs a few thousand), `DINGO_FUZZ_SEED` the
//! seed; see `docs/RELIABILITY.md`.

pub mod mutate;
pub mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// One decoder under test.
pub trait Target {
    fn name(&self) -> &'static str;
    /// Valid inputs the mutator starts from.
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// One execution. A broken promise panics (a crash, like a panic of
    /// the decoder itself).
    fn run(&mut self, input: &[u8]);
}

/// What a fuzzing run did.
#[derive(Clone, Debug)]
pub struct FuzzStats {
    pub target: &'static str,
    pub executions: u64,
    pub elapsed: Duration,
}

/// A panic of a target on an input.
#[derive(Debug, thiserror::Error)]
#[error(
    "{target} crashed at iteration {iteration} of seed {seed}: {message}\ninput ({len} bytes): {hex}\n\
     reproduce: DINGO_FUZZ_SEED={seed} DINGO_FUZZ_ITERS={iterations} cargo test -p dingo-fuzz --release {target_test}"
)]
pub struct Crash {
    pub target: &'static str,
    pub seed: u64,
    pub iteration: u64,
    pub iterations: u64,
    pub message: String,
    pub len: usize,
    pub hex: String,
    pub target_test: String,
}

/// Executions per target: `DINGO_FUZZ_ITERS`, else `default`.
pub fn iterations(default: u64) -> u64 {
    std::env::var("DINGO_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The run's seed: `DINGO_FUZZ_SEED`, else a fixed one (CI runs the same
/// inputs every time; set a seed to explore others).
pub fn seed() -> u64 {
    std::env::var("DINGO_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x00D1_4600)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `target` on `iterations` inputs of `seed`; the first panic is a
/// [`Crash`].
pub fn run(target: &mut dyn Target, iterations: u64, seed: u64) -> Result<FuzzStats, Crash> {
    let seeds = target.seeds();
    let mut rng = fastrand::Rng::with_seed(seed);
    let started = Instant::now();
    let mut crash = None;
    for iteration in 0..iterations {
        let input = mutate::input(&seeds, &mut rng);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target.run(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            crash = Some(Crash {
                target: target.name(),
                seed,
                iteration,
                iterations,
                message,
                len: input.len(),
                hex: hex(&input),
                target_test: target.name().replace('-', "_"),
            });
            break;
        }
    }
    match crash {
        Some(c) => Err(c),
        None => Ok(FuzzStats { target: target.name(), executions: iterations, elapsed: started.elapsed() }),
    }
}

/// Decodes a hex string (a [`Crash`]'s input), for regression tests.
pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex digits")).collect()
}
