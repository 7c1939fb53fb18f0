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
    /// Replica steering around a slow disk (Sandook Fig. 7c/9 analog):
    /// weighted replica choice with congestion signals against random.
    Steering(SteeringArgs),
    /// Idle-time scrubbing (Practical scrubbing Fig. 15 / Table III
    /// analog): the Waiting gate tuned for 1, 2 and 4 ms of mean slowdown
    /// against a fixed-rate scrubber.
    Waiting(super::waiting::WaitingArgs),
    /// Per-tenant guarantees with tenants joining and leaving (PAIO Fig. 10
    /// analog): declarations with shares against the FIFO queue.
    Fairness(super::fairness::FairnessArgs),
}

#[derive(Args)]
pub struct SteeringArgs {
    /// Half a minute of load per run instead of one.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object: steering and random side by side.
    #[arg(long)]
    json: bool,
    /// Write steering.json, the per-second series steering-series.csv and
    /// the plots here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Runs per replica choice; figures are medians.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the clusters keep their data.
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
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
    match cmd {
        IoControlCommand::FgTail(a) => fg_tail(a).await,
        IoControlCommand::Steering(a) => steering(a).await,
        IoControlCommand::Waiting(a) => super::waiting::run(a).await,
        IoControlCommand::Fairness(a) => super::fairness::run(a).await,
    }
}

async fn fg_tail(a: FgTailArgs) -> anyhow::Result<()> {
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

async fn steering(a: SteeringArgs) -> anyhow::Result<()> {
    use dingo_iobench::steering;
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    let opts = steering::Options {
        exe: std::env::current_exe()?,
        work_dir: a.dir.clone(),
        quick: a.quick,
        runs: a.runs,
        seed: a.seed,
    };
    let report = steering::run(&opts, |line| eprintln!("{line}")).await?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("steering.json"), &json)?;
        std::fs::write(dir.join("steering-series.csv"), steering::series_csv(&report))?;
        steering_plots(dir, &report)?;
    }
    if a.json {
        println!("{json}");
        return Ok(());
    }
    let spec = &report.spec;
    println!(
        "steering: {} disks, disk {} 5x slower from {:.1} s for {:.1} s, disk {} from {:.1} s on; {} s per run, \
         median of {} runs ({})",
        spec.disks(),
        spec.transient_disk,
        spec.transient_at_ms as f64 / 1000.0,
        spec.transient_ms as f64 / 1000.0,
        spec.persistent_disk,
        spec.persistent_at_ms as f64 / 1000.0,
        spec.duration_s,
        report.runs,
        report.head_time_bound
    );
    for r in [&report.steering, &report.random] {
        let m = &r.median;
        println!(
            "{:<9} p90 {:>5.1} ms before, worst 1 s window {:>7.1} ms ({:>5.2}x); slow disk share {:.3} -> {:.3} \
             -> {:.3}; persistent p50/p99 {:.1}/{:.1} ms; CPU {:.0} %",
            r.policy,
            m.pre_fault_p90_ms,
            m.fault_max_p90_ms,
            m.fault_max_p90_ratio,
            m.pre_fault_share,
            m.share_1s_after_onset,
            m.recovered_share,
            m.persistent_p50_ms,
            m.persistent_p99_ms,
            r.cpu_utilisation * 100.0
        );
    }
    let b = &report.bars_met;
    println!(
        "bars: p90 <= 1.5x pre-fault {}; random p90 >= 3x {}; slow share -50 % within 1 s {}; recovers {}; \
         persistent p99 {:.2}x random's (<= 0.5) {}",
        b.p90_within_1_5x_of_pre_fault,
        b.random_p90_rises_3x,
        b.slow_share_falls_half_within_1s,
        b.slow_share_recovers,
        report.persistent_p99_ratio,
        b.persistent_p99_at_most_half_of_random
    );
    println!(
        "virtual-time twin: worst window {:.2}x vs {:.2}x, persistent p99 {:.1} vs {:.1} ms",
        report.twin_steering.fault_max_p90_ratio,
        report.twin_random.fault_max_p90_ratio,
        report.twin_steering.persistent_p99_ms,
        report.twin_random.persistent_p99_ms
    );
    Ok(())
}

/// The p90 of each policy per second (own scales: random's reaches
/// seconds) and the slowed disks' shares, with the faults marked.
fn steering_plots(dir: &std::path::Path, report: &dingo_iobench::steering::Report) -> anyhow::Result<()> {
    use dingo_report::plots::{self, LineChart, MODE_COLORS, Series};
    let spec = &report.spec;
    let markers = vec![
        (spec.transient_at_ms as f64 / 1000.0, "disk slowed 5x".to_string()),
        ((spec.transient_at_ms + spec.transient_ms) as f64 / 1000.0, "back to normal".to_string()),
        (spec.persistent_at_ms as f64 / 1000.0, "another disk slowed for good".to_string()),
    ];
    let w = &report.windows;
    let points = |f: fn(&dingo_iobench::steering::Window) -> f64| -> Vec<(f64, f64)> {
        w.iter().map(|x| (x.second as f64 + 0.5, f(x))).collect()
    };
    for (name, policy, pre, color, get) in [
        (
            "steering-p90",
            "steering",
            report.steering.median.pre_fault_p90_ms,
            MODE_COLORS[1],
            (|x: &dingo_iobench::steering::Window| x.steering_p90_ms) as fn(&dingo_iobench::steering::Window) -> f64,
        ),
        ("random-p90", "random", report.random.median.pre_fault_p90_ms, MODE_COLORS[0], |x| x.random_p90_ms),
    ] {
        plots::save_line(
            dir,
            name,
            &LineChart {
                title: format!("Foreground p90 per second, {policy} replica choice (median of {} runs)", report.runs),
                x_label: "time (s)".into(),
                y_label: "p90 latency (ms)".into(),
                series: vec![Series { name: policy.into(), color, points: points(get), dashed: false }],
                hline: Some((1.5 * pre, "1.5 x pre-fault p90".into())),
                markers: markers.clone(),
            },
        )?;
    }
    plots::save_line(
        dir,
        "steering-share",
        &LineChart {
            title: "Share of reads served by the slowed disks".into(),
            x_label: "time (s)".into(),
            y_label: "share of the second's reads".into(),
            series: vec![
                Series {
                    name: "steering, disk slowed for 2.3 s".into(),
                    color: MODE_COLORS[1],
                    points: points(|x| x.steering_slow_disk_share),
                    dashed: false,
                },
                Series {
                    name: "random, disk slowed for 2.3 s".into(),
                    color: MODE_COLORS[0],
                    points: points(|x| x.random_slow_disk_share),
                    dashed: false,
                },
                Series {
                    name: "steering, disk slowed for good".into(),
                    color: MODE_COLORS[1],
                    points: points(|x| x.steering_persistent_disk_share),
                    dashed: true,
                },
                Series {
                    name: "random, disk slowed for good".into(),
                    color: MODE_COLORS[0],
                    points: points(|x| x.random_persistent_disk_share),
                    dashed: true,
                },
            ],
            hline: None,
            markers,
        },
    )?;
    Ok(())
}
