//! `dingo demo`: the Declarative IO paper's HDFS-cluster experiment on a
//! local DINGO cluster. The same scripted timeline (node added, node failed,
//! scrubbing, periodic transcoding, a foreground reader) runs twice from the
//! same data and seed, once with imperative tasks and once with declarative
//! ones through the planner service, and the disk reads are compared.

mod measure;
mod planner;
mod plot;
mod scenario;

use anyhow::{Context, Result};
use dingo_client::IoTag;
use dingo_tasks::{JobReport, Mode};
use dingo_types::{TaskKind, format_bytes};
use measure::NodeSample;
use scenario::{Demo, ModeResult, Scale};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// A smaller run (about a minute per mode) for CI.
    #[arg(long)]
    pub quick: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Output folder: summary, per-interval series, plots, cluster data.
    #[arg(long, default_value = "./dingo-demo")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the clusters' data directories afterwards.
    #[arg(long)]
    pub keep_data: bool,
}

/// The tasks the demo runs, in report order.
pub const TASKS: [TaskKind; 4] =
    [TaskKind::Scrubbing, TaskKind::Transcoding, TaskKind::Rebalancing, TaskKind::Reconstruction];

pub async fn run(a: DemoArgs) -> Result<()> {
    let scale = if a.quick { Scale::quick() } else { Scale::default_run() };
    let demo = Demo { exe: std::env::current_exe().context("cannot find the dingo executable")?, scale, seed: a.seed };
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut results = Vec::new();
    for mode in [Mode::Imperative, Mode::Declarative] {
        if !a.json {
            eprintln!("running the timeline with {mode} tasks ...");
        }
        let data = a.out.join(format!("data-{mode}"));
        let r = demo.run(mode, &data).await.with_context(|| format!("{mode} run"))?;
        if !a.keep_data {
            let _ = std::fs::remove_dir_all(&data);
        }
        results.push(r);
    }
    let (imp, dec) = (&results[0], &results[1]);
    let summary = summary(&demo.scale, imp, dec);
    std::fs::write(a.out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    for r in &results {
        std::fs::write(a.out.join(format!("series-{}.csv", r.mode)), series_csv(r))?;
        std::fs::write(a.out.join(format!("jobs-{}.json", r.mode)), serde_json::to_string_pretty(&r.jobs)?)?;
        if let Some(m) = &r.planner_metrics {
            std::fs::write(a.out.join("planner-metrics.txt"), m)?;
        }
    }
    plot::disk_reads(&a.out, imp, dec)?;

    if a.json {
        println!("{summary}");
    } else {
        print!("{}", table(imp, dec, &summary));
        println!("outputs in {}", a.out.display());
    }
    Ok(())
}

fn task_jobs(r: &ModeResult, task: TaskKind) -> impl Iterator<Item = &JobReport> {
    r.jobs.iter().filter(move |j| j.task == task.name())
}

fn logical(r: &ModeResult, task: TaskKind) -> u64 {
    task_jobs(r, task).map(|j| j.logical_bytes).sum()
}

fn disk(r: &ModeResult, task: TaskKind) -> u64 {
    r.disk.disk_bytes_by_class[IoTag::Maintenance { task, declaration: dingo_types::DeclarationId(0) }.class_index()]
}

fn misses(r: &ModeResult) -> u64 {
    r.jobs.iter().filter(|j| j.missed_deadline()).count() as u64
}

fn complete(r: &ModeResult) -> bool {
    r.jobs.iter().all(JobReport::complete)
}

fn mode_json(r: &ModeResult) -> serde_json::Value {
    let tasks: serde_json::Map<String, serde_json::Value> = TASKS
        .iter()
        .map(|&t| {
            let jobs: Vec<&JobReport> = task_jobs(r, t).collect();
            let v = json!({
                "logical_bytes": logical(r, t),
                "disk_bytes": disk(r, t),
                "items_done": jobs.iter().map(|j| j.items_done).sum::<u64>(),
                "items_skipped": jobs.iter().map(|j| j.items_skipped).sum::<u64>(),
                "items_needed": jobs.iter().map(|j| j.items_needed).sum::<u64>(),
                "jobs": jobs.len(),
                "jobs_cancelled": jobs.iter().filter(|j| j.cancelled).count(),
                "failed": jobs.iter().map(|j| j.failed).sum::<u64>(),
                "deadline_misses": jobs.iter().filter(|j| j.missed_deadline()).count(),
                "complete": jobs.iter().all(|j| j.complete()),
            });
            (t.name().to_string(), v)
        })
        .collect();
    let logical_bytes: u64 = TASKS.iter().map(|&t| logical(r, t)).sum();
    let maintenance = r.disk.maintenance_disk_bytes();
    json!({
        "disk_bytes": maintenance,
        "logical_bytes": logical_bytes,
        "achieved_free_bytes": logical_bytes.saturating_sub(maintenance),
        "planned_free_bytes": r.planned_free_bytes,
        "foreground_disk_bytes": r.disk.disk_bytes_by_class[0],
        "all_disk_bytes": r.disk.disk_bytes(),
        "kernel_read_bytes": r.disk.kernel_read_bytes,
        "pinned_hits": r.disk.pinned_hits,
        "pinned_overflow_evictions": r.disk.overflow_evictions,
        "deadline_misses": misses(r),
        "work_complete": complete(r),
        "fg_p50_ms": r.fg_p50_ms,
        "fg_p99_ms": r.fg_p99_ms,
        "fg_reads": r.fg_reads,
        "fg_failures": r.fg_failures,
        "wall_seconds": r.wall_seconds,
        "tasks": tasks,
    })
}

/// Relative gap between the nodes' disk counters and the kernel's.
fn counter_gap(s: &NodeSample) -> f64 {
    let k = s.kernel_read_bytes as f64;
    if k == 0.0 { f64::INFINITY } else { (s.disk_bytes() as f64 - k).abs() / k }
}

fn summary(scale: &Scale, imp: &ModeResult, dec: &ModeResult) -> serde_json::Value {
    let (i, d) = (imp.disk.maintenance_disk_bytes() as f64, dec.disk.maintenance_disk_bytes() as f64);
    let ratio = if i > 0.0 { d / i } else { f64::NAN };
    json!({
        "imperative": mode_json(imp),
        "declarative": mode_json(dec),
        "disk_ratio": ratio,
        "savings": 1.0 - ratio,
        "deadline_misses": misses(imp) + misses(dec),
        "work_complete": complete(imp) && complete(dec),
        "fg_p50_ms": dec.fg_p50_ms,
        "fg_p99_ms": dec.fg_p99_ms,
        "fg_p99_ratio": if imp.fg_p99_ms > 0.0 { dec.fg_p99_ms / imp.fg_p99_ms } else { f64::NAN },
        "kernel_counter_gap": counter_gap(&imp.disk).max(counter_gap(&dec.disk)),
        "scale": scale,
    })
}

fn table(imp: &ModeResult, dec: &ModeResult, summary: &serde_json::Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>14} {:>14} {:>14} {:>14}",
        "task", "logical imp", "disk imp", "logical decl", "disk decl"
    );
    for t in TASKS {
        let _ = writeln!(
            out,
            "{:<16} {:>14} {:>14} {:>14} {:>14}",
            t.name(),
            format_bytes(logical(imp, t)),
            format_bytes(disk(imp, t)),
            format_bytes(logical(dec, t)),
            format_bytes(disk(dec, t))
        );
    }
    let total = |r: &ModeResult| TASKS.iter().map(|&t| logical(r, t)).sum::<u64>();
    let _ = writeln!(
        out,
        "{:<16} {:>14} {:>14} {:>14} {:>14}",
        "total",
        format_bytes(total(imp)),
        format_bytes(imp.disk.maintenance_disk_bytes()),
        format_bytes(total(dec)),
        format_bytes(dec.disk.maintenance_disk_bytes())
    );
    let f = |k: &str| summary[k].as_f64().unwrap_or(f64::NAN);
    let _ = writeln!(
        out,
        "declarative / imperative disk bytes: {:.3} (savings {:.1} %)",
        f("disk_ratio"),
        f("savings") * 100.0
    );
    let d = &summary["declarative"];
    let _ = writeln!(
        out,
        "free bytes: scheduled {} achieved {}",
        format_bytes(d["planned_free_bytes"].as_u64().unwrap_or(0)),
        format_bytes(d["achieved_free_bytes"].as_u64().unwrap_or(0))
    );
    let _ = writeln!(
        out,
        "deadline misses: imperative {} declarative {}; all work complete: {}",
        misses(imp),
        misses(dec),
        summary["work_complete"]
    );
    let _ = writeln!(
        out,
        "foreground read latency ms: imperative p50 {:.1} p99 {:.1}; declarative p50 {:.1} p99 {:.1}",
        imp.fg_p50_ms, imp.fg_p99_ms, dec.fg_p50_ms, dec.fg_p99_ms
    );
    let _ = writeln!(
        out,
        "node disk counters vs kernel read_bytes: imperative {} / {}, declarative {} / {}",
        format_bytes(imp.disk.disk_bytes()),
        format_bytes(imp.disk.kernel_read_bytes),
        format_bytes(dec.disk.disk_bytes()),
        format_bytes(dec.disk.kernel_read_bytes)
    );
    out
}

fn series_csv(r: &ModeResult) -> String {
    let mut out = String::from("seconds,foreground");
    for t in TaskKind::ALL {
        let _ = write!(out, ",{}", t.name());
    }
    out.push_str(",kernel_read_bytes\n");
    for (t, s) in &r.series {
        let _ = write!(out, "{t:.2}");
        for b in s.disk_bytes_by_class {
            let _ = write!(out, ",{b}");
        }
        let _ = writeln!(out, ",{}", s.kernel_read_bytes);
    }
    out
}
