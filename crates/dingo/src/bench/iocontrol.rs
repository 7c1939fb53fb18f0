//! `dingo bench iocontrol <experiment>`: the node-level IO-control
//! experiments of issue 15 (`dingo_iobench`), mechanism against today's
//! behaviour on a local cluster with HDD emulation.

use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum IoControlCommand {
    /// Foreground tail latency under maintenance (PAIO Fig. 5-9 analog):
    /// classful scheduler against the FIFO disk queue.
    FgTail(FgTailArgs),
    /// Idle-time scrubbing (Practical scrubbing Fig. 15 / Table III
    /// analog): the Waiting gate tuned for 1, 2 and 4 ms of mean slowdown
    /// against a fixed-rate scrubber.
    Waiting(super::waiting::WaitingArgs),
    /// Per-tenant guarantees with tenants joining and leaving (PAIO Fig. 10
    /// analog): declarations with shares against the FIFO queue.
    Fairness(super::fairness::FairnessArgs),
}

#[derive(Args)]
pub struct FgTailArgs {
    /// One minute of load per run instead of three.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object: mechanism and baseline side by side.
    #[arg(long)]
    json: bool,
    /// Write fg-tail.json and the per-second series fg-tail-series.csv here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runs per policy; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the clusters keep their data.
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

pub async fn run(cmd: IoControlCommand) -> anyhow::Result<()> {
    let a = match cmd {
        IoControlCommand::FgTail(a) => a,
        IoControlCommand::Waiting(a) => return super::waiting::run(a).await,
        IoControlCommand::Fairness(a) => return super::fairness::run(a).await,
    };
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    let opts = dingo_iobench::fgtail::Options {
        exe: std::env::current_exe()?,
        work_dir: a.dir.clone(),
        quick: a.quick,
        runs: a.runs,
        seed: a.seed,
    };
    let report = dingo_iobench::fgtail::run(&opts, |line| eprintln!("{line}")).await?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("fg-tail.json"), &json)?;
        std::fs::write(dir.join("fg-tail-series.csv"), dingo_iobench::fgtail::series_csv(&report))?;
    }
    if a.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "fg-tail: {} disks, {} s per run, median of {} runs ({})",
        report.disks, report.spec.duration_s, report.runs, report.head_time_bound
    );
    for r in [&report.mechanism, &report.baseline] {
        println!(
            "{:<9} foreground p50 {:>6.1} ms, p99 {:>6.1} ms, peak p99 {:>6.1} ms; maintenance {} MB, deadline misses {}, CPU {:.0} %",
            r.policy,
            r.p50_ms,
            r.p99_ms,
            r.peak_p99_ms,
            r.maintenance_bytes / 1_000_000,
            r.deadline_misses,
            r.cpu_utilisation * 100.0
        );
    }
    println!(
        "classful / fifo: peak p99 {:.2} (bar <= 0.33), p99 {:.2} (bar <= 0.5), maintenance bytes {:.2} (bar >= 0.9)",
        report.peak_p99_ratio, report.p99_ratio, report.maintenance_bytes_ratio
    );
    println!(
        "virtual-time twin: peak p99 {:.1} vs {:.1} ms, p99 {:.1} vs {:.1} ms",
        report.twin_mechanism.peak_p99_ms,
        report.twin_baseline.peak_p99_ms,
        report.twin_mechanism.p99_ms,
        report.twin_baseline.p99_ms
    );
    Ok(())
}
