//! `dingo sim paper`: runs `dingo_sim::paper`'s plan, draws one figure per
//! paper figure, and writes the data, a Markdown page and an HTML page
//! with the published-vs-measured table.

use super::progress_bar;
use super::report::{self, Figure, RunSummary};
use crate::plots::{self, LineChart, MODE_COLORS, Series};
use anyhow::Context;
use clap::Args;
use dingo_sim::paper::{Cluster, PaperOptions, PaperRuns};
use dingo_sim::sim::{Mode, SimResult, WALL_UTILIZATION};
use dingo_types::parse_bytes;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct PaperArgs {
    /// Small clusters, a short horizon and few points per sweep (minutes; the CI form).
    #[arg(long)]
    quick: bool,
    /// Capacity of the two headline runs (default 100PB; 2PB with --quick).
    #[arg(long, value_parser = parse_bytes)]
    capacity: Option<u64>,
    /// Capacity of the sensitivity runs (default 10PB; 2PB with --quick).
    #[arg(long, value_parser = parse_bytes)]
    sweep_capacity: Option<u64>,
    /// Where to write the figures, data and pages.
    #[arg(long, default_value = "sim-paper")]
    out: PathBuf,
    /// Print one JSON object (per figure, the published and measured values) instead of the table.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Serialize)]
struct PaperSummary<'a> {
    options: &'a PaperOptions,
    rows: Vec<dingo_sim::paper::Row>,
    wall_seconds: f64,
    peak_rss_bytes: u64,
}

pub fn run(args: &PaperArgs) -> anyhow::Result<()> {
    let mut options = if args.quick { PaperOptions::quick() } else { PaperOptions::full() };
    options.capacity_bytes = args.capacity.unwrap_or(options.capacity_bytes);
    options.sweep_capacity_bytes = args.sweep_capacity.unwrap_or(options.sweep_capacity_bytes);
    options.seed = args.seed;
    let started = Instant::now();
    let bar = progress_bar(0, args.json);
    let runs = dingo_sim::paper::run(&options, |i, n, p| {
        bar.set_length(n as u64);
        bar.set_position(i as u64);
        bar.set_message(format!("{} cluster {:?} {}={}", p.figure, p.cluster, p.parameter, p.x));
    })?;
    bar.finish_and_clear();
    let summary = PaperSummary {
        options: &options,
        rows: runs.rows(),
        wall_seconds: started.elapsed().as_secs_f64(),
        peak_rss_bytes: crate::bench::peak_rss_bytes(),
    };
    write(&args.out, &runs, &summary)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", runs.markdown());
        println!("\n{:.0} s; pages: {}", summary.wall_seconds, args.out.join("paper.html").display());
    }
    Ok(())
}

fn write(dir: &Path, runs: &PaperRuns, summary: &PaperSummary) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("paper.json", serde_json::to_string_pretty(summary)?)?;
    write("runs.csv", runs_csv(runs))?;
    let mut figures = Vec::new();
    // Headline runs and the diurnal run: every figure of a single run.
    for (p, r) in runs.runs.iter().filter(|(p, _)| p.figure == "fig16" || p.figure == "fig21") {
        let sub = format!("{}-cluster-{:?}", p.figure, p.cluster);
        let run_dir = dir.join(&sub);
        report::write_run(&run_dir, r, &RunSummary::new(r, 0.0, 0))?;
        for stem in ["utilization", "task_bytes", "io_wall", "budget"] {
            if run_dir.join(format!("{stem}.png")).exists() {
                figures.push((format!("{sub}/{stem}"), format!("{} cluster {:?}: {stem}", p.figure, p.cluster)));
            }
        }
    }
    for (figure, parameter, x_label) in [
        ("fig18", "demand", "maintenance demand (MB/s per TB)"),
        ("fig19", "scrubbing-intensity", "scrubbing intensity (×)"),
        ("fig19", "rebalancing-intensity", "rebalancing intensity (×)"),
        ("fig19", "gc-intensity", "garbage-collection intensity (×)"),
        ("fig20", "transcoding-deadline-days", "transcoding deadline (days)"),
        ("fig20", "gc-deadline-days", "garbage-collection deadline (days)"),
        ("thesis-6.15", "supply", "planner supply (MB/s per TB)"),
        ("thesis-6.16", "cache-gb-per-disk", "cache per disk (GB)"),
    ] {
        let stem = format!("{figure}-{parameter}");
        if sweep_chart(dir, runs, figure, parameter, x_label, &stem)? {
            figures.push((stem.clone(), format!("{figure}: utilisation by {x_label}")));
        }
    }
    let markdown = runs.markdown();
    let mut md = markdown.clone();
    md.push_str("\n## Figures\n\n");
    for (stem, caption) in &figures {
        let _ = writeln!(md, "![{caption}]({stem}.png)\n");
    }
    write("paper.md", md)?;
    let mut body = String::from("<table><tr><th>figure</th><th>quantity</th><th>published</th><th>measured</th></tr>");
    for r in &summary.rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            report::escape(&r.figure),
            report::escape(&r.quantity),
            report::escape(&r.published),
            report::escape(&r.measured)
        );
    }
    body.push_str("</table>");
    let figs: Vec<Figure> = figures.into_iter().map(|(stem, caption)| Figure { stem, caption }).collect();
    body.push_str(&report::figures_html(dir, &figs)?);
    write("paper.html", report::html_page("Declarative IO paper: published vs measured", &body))?;
    Ok(())
}

/// Utilisation per mode (solid: cluster A, dashed: cluster B) and the
/// savings against the parameter; false if the plan has no such points.
fn sweep_chart(
    dir: &Path,
    runs: &PaperRuns,
    figure: &str,
    parameter: &str,
    x_label: &str,
    stem: &str,
) -> anyhow::Result<bool> {
    let mut series = Vec::new();
    for cluster in [Cluster::A, Cluster::B] {
        let points: Vec<(f64, &SimResult)> =
            runs.of(figure, cluster).filter(|(p, _)| p.parameter == parameter).map(|(p, r)| (p.x, r)).collect();
        if points.is_empty() {
            continue;
        }
        for mode in Mode::ALL {
            let pts: Vec<(f64, f64)> =
                points.iter().filter_map(|(x, r)| r.modes.get(mode).map(|m| (*x, m.utilization * 100.0))).collect();
            series.push(Series {
                name: format!("cluster {cluster:?} {mode}"),
                color: MODE_COLORS[mode as usize],
                points: pts,
                dashed: cluster == Cluster::B,
            });
        }
    }
    if series.is_empty() {
        return Ok(false);
    }
    plots::save_line(
        dir,
        stem,
        &LineChart {
            title: format!("{figure}: maintenance disk-head utilisation"),
            x_label: x_label.into(),
            y_label: "mean disk-head utilisation (%)".into(),
            series,
            hline: Some((WALL_UTILIZATION * 100.0, "50 %".into())),
            markers: Vec::new(),
        },
    )?;
    Ok(true)
}

fn runs_csv(runs: &PaperRuns) -> String {
    let mut csv = String::from(
        "figure,cluster,parameter,value,imperative_utilization,declarative_utilization,optimal_utilization,\
         savings_vs_imperative,savings_vs_imperative_skip_deleted,gap_to_optimal,gap_to_optimal_elide_deleted,\
         declarative_deadline_misses,over_budget_quanta,scrub_deleted_fraction\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    for (p, r) in &runs.runs {
        let util = |m: Mode| opt(r.modes.get(m).map(|m| m.utilization));
        let c = &r.comparisons;
        let _ = writeln!(
            csv,
            "{},{:?},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.figure,
            p.cluster,
            p.parameter,
            p.x,
            util(Mode::Imperative),
            util(Mode::Declarative),
            util(Mode::Optimal),
            opt(c.savings_vs_imperative),
            opt(c.savings_vs_imperative_skip_deleted),
            opt(c.gap_to_optimal),
            opt(c.gap_to_optimal_elide_deleted),
            r.modes.declarative.as_ref().map_or(0, |m| m.deadline_misses),
            r.over_budget_quanta,
            opt(r.churn.scrub_deleted_fraction),
        );
    }
    csv
}
