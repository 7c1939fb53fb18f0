//! `dingo sim sweep`: one parameter varied over a list of values, every
//! point a full simulation in all modes.

use super::report::{self, Figure};
use super::{ScenarioArgs, progress_bar, simulate};
use crate::plots::{self, LineChart, MODE_COLORS, Series, TASK_COLORS};
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use dingo_sim::sim::{Mode, Modes, SimConfig, SimResult, WALL_UTILIZATION, io_wall_search};
use dingo_types::{TaskKind, format_bytes, parse_bytes};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepKind {
    /// Maintenance demand in MB/s per TB (default 1.0 to 3.5).
    Demand,
    /// ×factor of garbage collection, rebalancing and scrubbing, each alone (default 1, 2, 4).
    Intensity,
    /// Deadline in days of garbage collection and transcoding, each alone (default 1, 3, 5, 7).
    Deadline,
    /// Diurnal swing of the planner's budget (default 0, 0.25, 0.5, 0.75).
    Diurnal,
    /// Cache per disk (default 256MB, 1GB, 4GB, 16GB).
    Cache,
    /// Drive size (default 16TB to 96TB); finds each mode's IO wall.
    DriveSize,
    /// The planner's budget as a supply in MB/s per TB (default 0.5 to 3);
    /// use with --leftover fill for the thesis' Fig. 6.15.
    Supply,
}

#[derive(Args)]
pub struct SweepArgs {
    /// The parameter to vary.
    #[arg(value_enum)]
    what: SweepKind,
    /// Comma-separated values to try instead of the defaults (sizes for
    /// cache and drive-size, e.g. 16TB,32TB).
    #[arg(long, value_delimiter = ',')]
    values: Vec<String>,
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Write sweep.json, sweep.csv, the figures and report.html here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of a table (and no progress bar).
    #[arg(long)]
    json: bool,
}

/// One point of a sweep: its configuration and where it goes on the chart.
struct Point {
    /// The line it belongs to: a task for intensity and deadline sweeps.
    line: Option<TaskKind>,
    x: f64,
    config: SimConfig,
}

#[derive(Serialize)]
struct PointResult {
    task: Option<String>,
    value: f64,
    modes: serde_json::Map<String, serde_json::Value>,
    savings_vs_imperative: Option<f64>,
    gap_to_optimal: Option<f64>,
    over_budget_quanta: u64,
}

#[derive(Serialize)]
struct SweepSummary {
    sweep: SweepKind,
    mix: String,
    capacity_bytes: u64,
    points: Vec<PointResult>,
    /// Drive-size sweeps: per mode, the largest simulated drive size under
    /// 50 % utilisation with no missed deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    io_wall_drive_bytes: Option<serde_json::Map<String, serde_json::Value>>,
}

fn default_values(kind: SweepKind) -> &'static [&'static str] {
    match kind {
        SweepKind::Demand => &["1.0", "1.5", "2.0", "2.5", "3.0", "3.5"],
        SweepKind::Intensity => &["1", "2", "4"],
        SweepKind::Deadline => &["1", "3", "5", "7"],
        SweepKind::Diurnal => &["0", "0.25", "0.5", "0.75"],
        SweepKind::Cache => &["256MB", "1GB", "4GB", "16GB"],
        SweepKind::DriveSize => &["16TB", "24TB", "32TB", "48TB", "64TB", "96TB"],
        SweepKind::Supply => &["0.5", "0.75", "1.0", "1.5", "2.0", "3.0"],
    }
}

fn number(s: &str) -> anyhow::Result<f64> {
    let v: f64 = s.trim().parse().with_context(|| format!("`{s}` is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        bail!("`{s}` must be a non-negative number");
    }
    Ok(v)
}

fn points(kind: SweepKind, values: &[String], base: &SimConfig) -> anyhow::Result<Vec<Point>> {
    let mut out = Vec::new();
    let per_task = |tasks: &[TaskKind], out: &mut Vec<Point>, set: &dyn Fn(&mut SimConfig, TaskKind, f64)| {
        for &task in tasks {
            for v in values {
                let x = number(v)?;
                let mut config = base.clone();
                set(&mut config, task, x);
                out.push(Point { line: Some(task), x, config });
            }
        }
        anyhow::Ok(())
    };
    match kind {
        SweepKind::Intensity => per_task(
            &[TaskKind::GarbageCollection, TaskKind::Rebalancing, TaskKind::Scrubbing],
            &mut out,
            &|c, t, x| c.intensity[t.index()] = x,
        )?,
        SweepKind::Deadline => {
            per_task(&[TaskKind::GarbageCollection, TaskKind::Transcoding], &mut out, &|c, t, x| {
                c.mix.timing[t.index()].deadline = Duration::from_secs_f64(x * 86_400.0)
            })?;
            if out.iter().any(|p| p.x <= 0.0) {
                bail!("deadlines must be positive");
            }
        }
        _ => {
            for v in values {
                let mut config = base.clone();
                let x = match kind {
                    SweepKind::Demand => {
                        config.demand_mb_s_per_tb = number(v)?;
                        config.demand_mb_s_per_tb
                    }
                    SweepKind::Diurnal => {
                        config.diurnal_amplitude = number(v)?;
                        config.diurnal_amplitude
                    }
                    SweepKind::Cache => {
                        config.cache_per_disk = parse_bytes(v)?;
                        config.cache_per_disk as f64 / 1e9
                    }
                    SweepKind::DriveSize => {
                        config.cluster.drive_bytes = parse_bytes(v)?;
                        config.cluster.drive_bytes as f64 / 1e12
                    }
                    SweepKind::Supply => {
                        let supply = number(v)?;
                        if supply <= 0.0 {
                            bail!("the supply must be positive");
                        }
                        config.supply_mb_s_per_tb = Some(supply);
                        supply
                    }
                    SweepKind::Intensity | SweepKind::Deadline => unreachable!("handled above"),
                };
                out.push(Point { line: None, x, config });
            }
        }
    }
    Ok(out)
}

fn x_label(kind: SweepKind) -> &'static str {
    match kind {
        SweepKind::Demand => "maintenance demand (MB/s per TB)",
        SweepKind::Intensity => "task intensity (× its share of the demand)",
        SweepKind::Deadline => "deadline (days)",
        SweepKind::Diurnal => "diurnal budget swing (amplitude)",
        SweepKind::Cache => "cache per disk (GB)",
        SweepKind::DriveSize => "drive size (TB)",
        SweepKind::Supply => "planner supply (MB/s per TB)",
    }
}

pub fn run(args: &SweepArgs) -> anyhow::Result<()> {
    let base = args.scenario.config(Modes::ALL)?;
    let values: Vec<String> = if args.values.is_empty() {
        default_values(args.what).iter().map(|s| s.to_string()).collect()
    } else {
        args.values.clone()
    };
    let points = points(args.what, &values, &base)?;
    let bar = progress_bar(0, args.json);
    // Identical configurations (×1 of every task) are simulated once.
    let mut done: Vec<(SimConfig, SimResult)> = Vec::new();
    let mut results = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let result = match done.iter().find(|(c, _)| *c == p.config) {
            Some((_, r)) => r.clone(),
            None => {
                bar.set_message(format!("point {}/{}", i + 1, points.len()));
                let r = simulate(p.config.clone(), &bar)?;
                done.push((p.config.clone(), r.clone()));
                r
            }
        };
        results.push(result);
    }
    bar.finish_and_clear();
    let summary = summarize(args.what, &base, &points, &results);
    if let Some(dir) = &args.out {
        write_sweep(dir, args.what, &points, &results, &summary)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_table(args.what, &summary);
        if let Some(dir) = &args.out {
            println!("report: {}", dir.join("report.html").display());
        }
    }
    Ok(())
}

fn summarize(kind: SweepKind, base: &SimConfig, points: &[Point], results: &[SimResult]) -> SweepSummary {
    let point_results = points
        .iter()
        .zip(results)
        .map(|(p, r)| PointResult {
            task: p.line.map(|t| t.name().to_string()),
            value: p.x,
            modes: report::mode_summaries(r),
            savings_vs_imperative: r.comparisons.savings_vs_imperative,
            gap_to_optimal: r.comparisons.gap_to_optimal,
            over_budget_quanta: r.over_budget_quanta,
        })
        .collect();
    let io_wall_drive_bytes = (kind == SweepKind::DriveSize).then(|| {
        Mode::ALL
            .iter()
            .map(|&mode| {
                let samples: Vec<(u64, f64, u64)> = results
                    .iter()
                    .filter_map(|r| r.modes.get(mode).map(|m| (r.drive_bytes, m.utilization, m.deadline_misses)))
                    .collect();
                (mode.name().to_string(), serde_json::json!(io_wall_search(&samples)))
            })
            .collect()
    });
    SweepSummary {
        sweep: kind,
        mix: base.mix.name.clone(),
        capacity_bytes: base.cluster.raw_capacity,
        points: point_results,
        io_wall_drive_bytes,
    }
}

fn util(p: &PointResult, mode: Mode) -> Option<f64> {
    p.modes.get(mode.name()).and_then(|m| m["utilization"].as_f64())
}

fn print_table(kind: SweepKind, s: &SweepSummary) {
    println!("sweep {} ({} mix, {})", x_label(kind), s.mix, format_bytes(s.capacity_bytes));
    println!(
        "  {:<20} {:>8} {:>12} {:>12} {:>12} {:>9} {:>8} {:>7}",
        "task", "value", "imperative", "declarative", "optimal", "savings", "gap", "misses"
    );
    for p in &s.points {
        let u = |m| util(p, m).map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        let misses = p.modes.get("declarative").and_then(|m| m["deadline_misses"].as_u64()).unwrap_or(0);
        println!(
            "  {:<20} {:>8} {:>12} {:>12} {:>12} {:>9} {:>8} {:>7}",
            p.task.as_deref().unwrap_or("-"),
            p.value,
            u(Mode::Imperative),
            u(Mode::Declarative),
            u(Mode::Optimal),
            p.savings_vs_imperative.map_or("-".into(), |v| format!("{:.1} %", v * 100.0)),
            p.gap_to_optimal.map_or("-".into(), |v| format!("{:.1} %", v * 100.0)),
            misses
        );
    }
    if let Some(walls) = &s.io_wall_drive_bytes {
        for (mode, wall) in walls {
            let wall = wall.as_u64().map_or("below the smallest size".into(), format_bytes);
            println!("  IO wall ({mode}): {wall}");
        }
    }
}

fn write_sweep(
    dir: &Path,
    kind: SweepKind,
    points: &[Point],
    results: &[SimResult],
    summary: &SweepSummary,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("sweep.json", serde_json::to_string_pretty(summary)?)?;
    let mut csv = String::from(
        "task,value,mode,logical_bytes,disk_bytes,utilization,deadline_misses,savings_vs_imperative,gap_to_optimal,over_budget_quanta\n",
    );
    for (p, r) in points.iter().zip(results) {
        for m in r.modes.iter() {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{:.6},{},{},{},{}",
                p.line.map_or("", |t| t.name()),
                p.x,
                m.mode,
                m.logical_bytes,
                m.disk_bytes,
                m.utilization,
                m.deadline_misses,
                r.comparisons.savings_vs_imperative.map_or(String::new(), |v| format!("{v:.6}")),
                r.comparisons.gap_to_optimal.map_or(String::new(), |v| format!("{v:.6}")),
                r.over_budget_quanta
            );
        }
    }
    write("sweep.csv", csv)?;

    let lines: Vec<Option<TaskKind>> = {
        let mut l: Vec<Option<TaskKind>> = points.iter().map(|p| p.line).collect();
        l.dedup();
        l
    };
    let mut series = Vec::new();
    for &line in &lines {
        for mode in Mode::ALL {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .zip(results)
                .filter(|(p, _)| p.line == line)
                .filter_map(|(p, r)| r.modes.get(mode).map(|m| (p.x, m.utilization * 100.0)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let (name, color) = match line {
                Some(t) => (format!("{} {mode}", report::short_task(t)), TASK_COLORS[t.index()]),
                None => (mode.name().to_string(), MODE_COLORS[mode as usize]),
            };
            // Line style tells the modes apart when colours are per task.
            series.push(Series { name, color, points: pts, dashed: line.is_some() && mode != Mode::Declarative });
        }
    }
    let title = format!("Maintenance disk-head utilisation vs {}", x_label(kind));
    plots::save_line(
        dir,
        "sweep",
        &LineChart {
            title,
            x_label: x_label(kind).into(),
            y_label: "mean disk-head utilisation (%)".into(),
            series,
            hline: Some((WALL_UTILIZATION * 100.0, "50 % (IO wall line)".into())),
            markers: Vec::new(),
        },
    )?;
    let mut figures = vec![Figure {
        stem: "sweep".into(),
        caption: match kind {
            SweepKind::Intensity | SweepKind::Deadline => {
                "Utilisation per point; one colour per task varied (the others at their defaults); solid: \
                 declarative, dashed: imperative and optimal."
                    .into()
            }
            _ => "Utilisation of each mode at each point.".into(),
        },
    }];
    if kind == SweepKind::Diurnal
        && let Some((p, r)) = points.iter().zip(results).max_by(|a, b| a.0.x.total_cmp(&b.0.x))
        && let Some(d) = r.modes.get(Mode::Declarative)
    {
        let to_tb = |v: Option<u64>| v.unwrap_or(0) as f64 / 1e12;
        plots::save_line(
            dir,
            "diurnal_budget",
            &LineChart {
                title: format!("Planner schedule under a diurnal budget (swing {})", p.x),
                x_label: "day".into(),
                y_label: "TB per quantum".into(),
                series: vec![
                    Series {
                        name: "budget".into(),
                        color: plots::BUDGET_COLOR,
                        points: d.series.iter().map(|q| (q.start_hours / 24.0, to_tb(q.budget_bytes))).collect(),
                        dashed: true,
                    },
                    Series {
                        name: "scheduled by the planner".into(),
                        color: MODE_COLORS[Mode::Declarative as usize],
                        points: d.series.iter().map(|q| (q.start_hours / 24.0, to_tb(q.planned_disk_bytes))).collect(),
                        dashed: false,
                    },
                ],
                hline: None,
                markers: Vec::new(),
            },
        )?;
        figures.push(Figure {
            stem: "diurnal_budget".into(),
            caption: format!(
                "The largest swing: the planner's schedule stays under the budget in every quantum \
                 ({} quanta over budget).",
                r.over_budget_quanta
            ),
        });
    }
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Sweep of {} on the {} mix, {} raw capacity. Data: <a href=\"sweep.json\">sweep.json</a>, \
         <a href=\"sweep.csv\">sweep.csv</a>.</p>\n<table><tr><th>task</th><th>value</th><th>imperative</th>\
         <th>declarative</th><th>optimal</th><th>savings</th><th>gap to optimal</th><th>misses</th>\
         <th>over budget</th></tr>\n",
        x_label(kind),
        summary.mix,
        format_bytes(summary.capacity_bytes)
    );
    for p in &summary.points {
        let u = |m| util(p, m).map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        let misses = p.modes.get("declarative").and_then(|m| m["deadline_misses"].as_u64()).unwrap_or(0);
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.task.as_deref().unwrap_or("-"),
            p.value,
            u(Mode::Imperative),
            u(Mode::Declarative),
            u(Mode::Optimal),
            pct(p.savings_vs_imperative),
            pct(p.gap_to_optimal),
            misses,
            p.over_budget_quanta
        );
    }
    body.push_str("</table>\n");
    if let Some(walls) = &summary.io_wall_drive_bytes {
        body.push_str("<p>IO wall (largest simulated drive size under 50 % utilisation, no missed deadline): ");
        let parts: Vec<String> = walls
            .iter()
            .map(|(mode, w)| {
                format!("{mode} <b>{}</b>", w.as_u64().map_or("below the smallest size".into(), format_bytes))
            })
            .collect();
        body.push_str(&parts.join(", "));
        body.push_str(".</p>\n");
    }
    body.push_str(&report::figures_html(dir, &figures)?);
    write("report.html", report::html_page(&format!("DINGO simulator sweep: {}", x_label(kind)), &body))?;
    Ok(())
}
