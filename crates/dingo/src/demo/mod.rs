//! `dingo demo`: runs `dingo_demo`'s experiment, prints its comparison and
//! draws its figure.

mod plot;

use anyhow::{Context, Result};
use dingo_demo::{DemoConfig, DemoSummary, ModeSummary, Scale, TASKS};
use dingo_iosched::PolicyKind;
use dingo_types::format_bytes;
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
    /// The emulated disks' IO scheduler: `classful`, or `fifo` for the
    /// baseline.
    #[arg(long, default_value = "classful", value_parser = parse_scheduler)]
    pub scheduler: PolicyKind,
}

fn parse_scheduler(name: &str) -> Result<PolicyKind, String> {
    [PolicyKind::Classful, PolicyKind::Fifo]
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| format!("`{name}` is not a scheduler; use classful or fifo"))
}

pub async fn run(a: DemoArgs) -> Result<()> {
    let config = DemoConfig {
        exe: std::env::current_exe().context("cannot find the dingo executable")?,
        scale: Scale { scheduler: a.scheduler, ..if a.quick { Scale::quick() } else { Scale::default_run() } },
        seed: a.seed,
        out: a.out.clone(),
        keep_data: a.keep_data,
    };
    let run = dingo_demo::run(&config, |mode| {
        if !a.json {
            eprintln!("running the timeline with {mode} tasks ...");
        }
    })
    .await?;
    run.write_outputs(&a.out)?;
    plot::disk_reads(&a.out, &run.imperative, &run.declarative)?;
    if a.json {
        println!("{}", serde_json::to_string(&run.summary)?);
    } else {
        print!("{}", table(&run.summary));
        println!("outputs in {}", a.out.display());
    }
    Ok(())
}

fn table(s: &DemoSummary) -> String {
    let (imp, dec) = (&s.imperative, &s.declarative);
    let row = |name: &str, cells: [u64; 4]| {
        let [a, b, c, d] = cells.map(format_bytes);
        format!("{name:<16} {a:>14} {b:>14} {c:>14} {d:>14}\n")
    };
    let mut out =
        format!("{:<16} {:>14} {:>14} {:>14} {:>14}\n", "task", "logical imp", "disk imp", "logical decl", "disk decl");
    let task = |m: &ModeSummary, name: &str| m.tasks.get(name).map_or((0, 0), |t| (t.logical_bytes, t.disk_bytes));
    for t in TASKS {
        let ((li, di), (ld, dd)) = (task(imp, t.name()), task(dec, t.name()));
        out += &row(t.name(), [li, di, ld, dd]);
    }
    out += &row("total", [imp.logical_bytes, imp.disk_bytes, dec.logical_bytes, dec.disk_bytes]);
    let _ =
        writeln!(out, "declarative / imperative disk bytes: {:.3} (savings {:.1} %)", s.disk_ratio, s.savings * 100.0);
    let _ = writeln!(
        out,
        "free bytes: scheduled {} achieved {}",
        format_bytes(dec.planned_free_bytes.unwrap_or(0)),
        format_bytes(dec.achieved_free_bytes)
    );
    let _ = writeln!(
        out,
        "deadline misses: imperative {} declarative {}; all work complete: {}",
        imp.deadline_misses, dec.deadline_misses, s.work_complete
    );
    let _ = writeln!(
        out,
        "foreground read latency ms: imperative p50 {:.1} p99 {:.1}; declarative p50 {:.1} p99 {:.1}",
        imp.fg_p50_ms, imp.fg_p99_ms, dec.fg_p50_ms, dec.fg_p99_ms
    );
    let _ = writeln!(
        out,
        "node disk counters vs kernel read_bytes: imperative {} / {}, declarative {} / {}",
        format_bytes(imp.all_disk_bytes),
        format_bytes(imp.kernel_read_bytes),
        format_bytes(dec.all_disk_bytes),
        format_bytes(dec.kernel_read_bytes)
    );
    out
}
