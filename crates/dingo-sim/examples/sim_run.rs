//! `dingo sim run --json` without the CLI: the same scenario options and
//! the same summary, from a binary that builds in seconds rather than with
//! the whole workspace, for profiling the simulator (docs/SIMULATOR.md).
//! `--full` prints the whole result (every quantum's series) instead.
//!
//! `cargo run --release -p dingo-sim --features clap --example sim_run -- --capacity 10PB --disks-per-node 4 --json`

use clap::Parser;
use dingo_sim::run::{RunOptions, RunOutput};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    run: RunOptions,
    /// Accepted for the CLI's spelling; the output is always JSON, and
    /// `--out` writes nothing.
    #[command(flatten)]
    _output: RunOutput,
    /// Print the whole result instead of the summary.
    #[arg(long)]
    full: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let started = std::time::Instant::now();
    let show_progress = std::env::var_os("SIM_RUN_PROGRESS").is_some();
    let (result, cost) = args.run.start()?.finish(|done, _| {
        if show_progress {
            let (main, all) = (cpu_seconds("thread-self"), cpu_seconds("self"));
            eprintln!("quantum {done} wall {:.1} s cpu main {main:.1} all {all:.1}", started.elapsed().as_secs_f64());
        }
    })?;
    // The main thread's CPU time is the run's critical path (the planner);
    // with the whole process's, it says what more cores could gain.
    eprintln!("cpu_seconds main {:.1} all {:.1}", cpu_seconds("thread-self"), cpu_seconds("self"));
    if args.full {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("{}", serde_json::to_string(&result.summary(cost))?);
    }
    Ok(())
}

/// User + system CPU seconds of `/proc/<which>/stat` (0 if unreadable).
fn cpu_seconds(which: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{which}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line, in clock ticks (100 a second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = rest.split_whitespace().skip(11).take(2).filter_map(|f| f.parse::<u64>().ok()).sum();
    ticks as f64 / 100.0
}
