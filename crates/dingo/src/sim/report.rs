//! What a run or a sweep writes: JSON, CSV, the figures (SVG and PNG) and
//! one HTML report that embeds them.

use crate::plots::{
    self, BUDGET_COLOR, BarChart, BarGroup, DISK_COLOR, ELIDED_COLOR, LineChart, MODE_COLORS, REALIZED_COLOR, Series,
    TASK_COLORS,
};
use anyhow::Context;
use dingo_sim::sim::{Churn, Comparisons, Mode, ModeResult, SimResult, WALL_UTILIZATION};
use dingo_types::{TaskKind, format_bytes};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

const TB: f64 = 1e12;

fn mode_color(mode: Mode) -> plotters::style::RGBColor {
    MODE_COLORS[mode as usize]
}

/// The per-mode figures of the `--json` summary.
#[derive(Serialize)]
pub struct ModeSummary {
    pub logical_bytes: u64,
    pub disk_bytes: u64,
    pub free_bytes: u64,
    pub elided_bytes: u64,
    pub utilization: f64,
    pub peak_disk_utilization: f64,
    pub deadline_misses: u64,
    pub io_wall_drive_bytes: Option<u64>,
    pub cache_bytes_per_disk: u64,
}

impl From<&ModeResult> for ModeSummary {
    fn from(m: &ModeResult) -> Self {
        ModeSummary {
            logical_bytes: m.logical_bytes,
            disk_bytes: m.disk_bytes,
            free_bytes: m.free_bytes,
            elided_bytes: m.elided_bytes,
            utilization: m.utilization,
            peak_disk_utilization: m.peak_disk_utilization,
            deadline_misses: m.deadline_misses,
            io_wall_drive_bytes: m.io_wall_drive_bytes,
            cache_bytes_per_disk: m.cache_bytes_per_disk,
        }
    }
}

/// Per mode, by name; absent modes are left out.
pub fn mode_summaries(r: &SimResult) -> serde_json::Map<String, serde_json::Value> {
    r.modes
        .iter()
        .map(|m| (m.mode.name().to_string(), serde_json::to_value(ModeSummary::from(m)).expect("serialisable")))
        .collect()
}

/// The baseline's and the bound's variants, by name.
pub fn variant_summaries(r: &SimResult) -> serde_json::Map<String, serde_json::Value> {
    let v = &r.variants;
    [("imperative_skip_deleted", &v.imperative_skip_deleted), ("optimal_elide_deleted", &v.optimal_elide_deleted)]
        .into_iter()
        .filter_map(|(name, m)| {
            m.as_ref().map(|m| (name.to_string(), serde_json::to_value(ModeSummary::from(m)).expect("serialisable")))
        })
        .collect()
}

/// The one JSON object `dingo sim run --json` prints.
#[derive(Serialize)]
pub struct RunSummary<'a> {
    pub mix: &'a str,
    pub capacity_bytes: u64,
    pub drive_bytes: u64,
    pub disks: u32,
    pub days: f64,
    pub quantum_secs: f64,
    pub quanta: u32,
    pub demand_mb_s_per_tb: f64,
    pub seed: u64,
    pub modes: serde_json::Map<String, serde_json::Value>,
    /// The skip-deleted imperative and the elide-deleted optimal.
    pub variants: serde_json::Map<String, serde_json::Value>,
    #[serde(flatten)]
    pub comparisons: &'a Comparisons,
    pub demand_realised: &'a BTreeMap<String, f64>,
    pub scrub_deleted_fraction: Option<f64>,
    pub churn: &'a Churn,
    pub over_budget_quanta: u64,
    pub wall_seconds: f64,
    pub peak_rss_bytes: u64,
}

impl<'a> RunSummary<'a> {
    pub fn new(r: &'a SimResult, wall_seconds: f64, peak_rss_bytes: u64) -> Self {
        RunSummary {
            mix: &r.mix,
            capacity_bytes: r.capacity_bytes,
            drive_bytes: r.drive_bytes,
            disks: r.disks,
            days: r.days,
            quantum_secs: r.quantum_secs,
            quanta: r.quanta,
            demand_mb_s_per_tb: r.demand_mb_s_per_tb,
            seed: r.seed,
            modes: mode_summaries(r),
            variants: variant_summaries(r),
            comparisons: &r.comparisons,
            demand_realised: &r.demand_realised,
            scrub_deleted_fraction: r.churn.scrub_deleted_fraction,
            churn: &r.churn,
            over_budget_quanta: r.over_budget_quanta,
            wall_seconds,
            peak_rss_bytes,
        }
    }
}

pub fn print_run_table(s: &RunSummary, r: &SimResult) {
    println!(
        "{} mix, {} of {} drives ({} disks), {:.0} days, demand {} MB/s per TB",
        s.mix,
        format_bytes(s.capacity_bytes),
        format_bytes(s.drive_bytes),
        s.disks,
        s.days,
        s.demand_mb_s_per_tb
    );
    for m in r.modes.iter() {
        let wall = m.io_wall_drive_bytes.map_or("-".to_string(), format_bytes);
        println!("  {m}  IO wall {wall}");
    }
    for (label, variant) in [
        ("imperative, skip deleted + LRU", &r.variants.imperative_skip_deleted),
        ("optimal, elide deleted", &r.variants.optimal_elide_deleted),
    ] {
        if let Some(m) = variant {
            println!("  {label}: disk {}, utilisation {:.1} %", format_bytes(m.disk_bytes), m.utilization * 100.0);
        }
    }
    let c = s.comparisons;
    for (label, value) in [
        ("savings vs imperative (paper: every declared byte)", c.savings_vs_imperative),
        ("savings vs imperative skipping deleted sets", c.savings_vs_imperative_skip_deleted),
        ("gap to optimal (paper: each block once)", c.gap_to_optimal),
        ("gap to optimal eliding deleted sets", c.gap_to_optimal_elide_deleted),
    ] {
        if let Some(v) = value {
            println!("  {label:<52} {:>6.1} %", v * 100.0);
        }
    }
    let realised: Vec<String> = s.demand_realised.iter().map(|(t, v)| format!("{t} {:.2}", v)).collect();
    println!("  demand realised (generated / nominal): {}", realised.join(", "));
    if let Some(f) = s.scrub_deleted_fraction {
        println!("  scrubbing's declared bytes deleted before read: {:.1} %", f * 100.0);
    }
    println!(
        "  day-0 files deleted by the horizon: {:.1} %; fill {:.1} → {:.1} %",
        s.churn.initial_files_deleted_fraction * 100.0,
        s.churn.fill_start * 100.0,
        s.churn.fill_end * 100.0
    );
    println!("  quanta {} (with drain), planner over budget in {} quanta", s.quanta, s.over_budget_quanta);
    println!("  {:.1} s, peak RSS {}", s.wall_seconds, format_bytes(s.peak_rss_bytes));
}

/// Writes summary.json, quanta.csv, tasks.csv, the figures and report.html.
pub fn write_run(dir: &Path, r: &SimResult, summary: &RunSummary) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("summary.json", serde_json::to_string_pretty(summary)?)?;
    write("result.json", serde_json::to_string(r)?)?;
    write("quanta.csv", quanta_csv(r))?;
    write("tasks.csv", tasks_csv(r))?;
    let figures = run_figures(dir, r)?;
    write("report.html", run_html(dir, r, summary, &figures)?)?;
    Ok(())
}

fn quanta_csv(r: &SimResult) -> String {
    let mut out = String::from(
        "mode,quantum,start_hours,logical_bytes,disk_bytes,head_time_us,utilization,max_disk_utilization,\
         deadline_misses,budget_bytes,planned_disk_bytes,max_disk_pinned_bytes\n",
    );
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    for m in r.modes.iter() {
        for (i, p) in m.series.iter().enumerate() {
            let util = p.head_time_us as f64 / 1e6 / (f64::from(r.disks) * r.quantum_secs);
            let peak = p.max_disk_head_time_us as f64 / 1e6 / r.quantum_secs;
            let _ = writeln!(
                out,
                "{},{i},{},{},{},{},{util:.6},{peak:.6},{},{},{},{}",
                m.mode,
                p.start_hours,
                p.logical_bytes,
                p.disk_bytes,
                p.head_time_us,
                p.deadline_misses,
                opt(p.budget_bytes),
                opt(p.planned_disk_bytes),
                opt(p.max_disk_pinned_bytes)
            );
        }
    }
    out
}

fn tasks_csv(r: &SimResult) -> String {
    let mut out = String::from("mode,task,logical_bytes,disk_bytes,free_bytes,elided_bytes,deadline_misses");
    for t in TaskKind::ALL {
        let _ = write!(out, ",free_from_{}", t.name());
    }
    out.push('\n');
    for m in r.modes.iter() {
        for t in &m.tasks {
            let _ = write!(
                out,
                "{},{},{},{},{},{},{}",
                m.mode, t.task, t.logical_bytes, t.disk_bytes, t.free_bytes, t.elided_bytes, t.deadline_misses
            );
            for f in t.free_bytes_from {
                let _ = write!(out, ",{f}");
            }
            out.push('\n');
        }
    }
    out
}

/// A figure of the report: file stem and caption.
pub struct Figure {
    pub stem: String,
    pub caption: String,
}

fn days(hours: f64) -> f64 {
    hours / 24.0
}

fn run_figures(dir: &Path, r: &SimResult) -> anyhow::Result<Vec<Figure>> {
    let mut figures = Vec::new();
    let disks_time = f64::from(r.disks) * r.quantum_secs;

    // Disk-head utilisation per mode over time.
    let mut series = Vec::new();
    for m in r.modes.iter() {
        let points: Vec<(f64, f64)> = match m.mode {
            // Optimal has no schedule: its mean over the horizon.
            Mode::Optimal => {
                let end = m.series.last().map_or(r.days * 24.0, |p| p.start_hours);
                vec![(0.0, m.utilization * 100.0), (days(end), m.utilization * 100.0)]
            }
            _ => m
                .series
                .iter()
                .map(|p| (days(p.start_hours), p.head_time_us as f64 / 1e6 / disks_time * 100.0))
                .collect(),
        };
        series.push(Series {
            name: format!("{} (mean {:.1} %)", m.mode, m.utilization * 100.0),
            color: mode_color(m.mode),
            points,
            dashed: m.mode == Mode::Optimal,
        });
    }
    plots::save_line(
        dir,
        "utilization",
        &LineChart {
            title: "Disk-head utilisation by maintenance reads".into(),
            x_label: "day".into(),
            y_label: "mean disk-head utilisation (%)".into(),
            series,
            hline: Some((WALL_UTILIZATION * 100.0, "50 % (IO wall line)".into())),
            markers: vec![(r.days, "horizon: no new work after it".into())],
        },
    )?;
    figures.push(Figure {
        stem: "utilization".into(),
        caption: "Mean disk-head utilisation per quantum. After the horizon the run drains: no new jobs, \
                  the last ones finish. Optimal has no schedule; its line is its mean."
            .into(),
    });

    // Bytes per task: disk / free by overlapped task / avoided (deleted).
    let mut groups = Vec::new();
    for t in TaskKind::ALL {
        let bars: Vec<Vec<(f64, plotters::style::RGBColor)>> = r
            .modes
            .iter()
            .filter(|m| m.mode != Mode::Optimal)
            .map(|m| {
                let tt = m.task(t);
                let mut segments = vec![(tt.disk_bytes as f64 / TB, DISK_COLOR)];
                for (owner, &bytes) in tt.free_bytes_from.iter().enumerate() {
                    segments.push((bytes as f64 / TB, TASK_COLORS[owner]));
                }
                segments.push((tt.elided_bytes as f64 / TB, ELIDED_COLOR));
                segments
            })
            .collect();
        if bars.iter().flatten().any(|s| s.0 > 0.0) {
            groups.push(BarGroup { label: short_task(t).to_string(), bars });
        }
    }
    let mut legend = vec![("read from disk".to_string(), DISK_COLOR)];
    legend
        .extend(TaskKind::ALL.iter().map(|t| (format!("free, overlapped {}", short_task(*t)), TASK_COLORS[t.index()])));
    legend.push(("avoided: deleted".to_string(), ELIDED_COLOR));
    plots::save_bars(
        dir,
        "task_bytes",
        &BarChart {
            title: "Bytes read per task (left bar imperative, right bar declarative)".into(),
            y_label: "TB".into(),
            groups,
            legend,
            hline: None,
        },
    )?;
    figures.push(Figure {
        stem: "task_bytes".into(),
        caption: "Per task: bytes read from disk (dark), bytes served free from the cache coloured by the task \
                  whose read brought them in, and bytes not read because the blocks were deleted first (light)."
            .into(),
    });

    // Deadline misses.
    let mut series = Vec::new();
    for m in r.modes.iter().filter(|m| m.mode != Mode::Optimal) {
        let mut total = 0;
        let points = m
            .series
            .iter()
            .map(|p| {
                total += p.deadline_misses;
                (days(p.start_hours), total as f64)
            })
            .collect();
        series.push(Series {
            name: format!("{} ({} missed)", m.mode, m.deadline_misses),
            color: mode_color(m.mode),
            points,
            dashed: false,
        });
    }
    plots::save_line(
        dir,
        "deadline_misses",
        &LineChart {
            title: "Deadline misses (cumulative)".into(),
            x_label: "day".into(),
            y_label: "declarations past their deadline".into(),
            series,
            hline: None,
            markers: vec![(r.days, "horizon: no new work after it".into())],
        },
    )?;
    figures.push(Figure {
        stem: "deadline_misses".into(),
        caption: "Declarations that reached their deadline with work left. Imperative jobs pace themselves to \
                  finish exactly at their deadline."
            .into(),
    });

    // Cache needed (declarative pins) and the planner's budget.
    if let Some(d) = r.modes.get(Mode::Declarative) {
        let pinned =
            d.series.iter().map(|p| (days(p.start_hours), p.max_disk_pinned_bytes.unwrap_or(0) as f64 / 1e9)).collect();
        plots::save_line(
            dir,
            "cache",
            &LineChart {
                title: "Cache needed: most bytes pinned on one disk".into(),
                x_label: "day".into(),
                y_label: "GB per disk".into(),
                series: vec![Series {
                    name: format!("pinned (directives asked up to {})", format_bytes(d.cache_bytes_per_disk)),
                    color: mode_color(Mode::Declarative),
                    points: pinned,
                    dashed: false,
                }],
                hline: Some((r.cache_per_disk_bytes as f64 / 1e9, "configured cache per disk".into())),
                markers: Vec::new(),
            },
        )?;
        figures.push(Figure {
            stem: "cache".into(),
            caption: format!(
                "Most bytes the cache directives held pinned on any one disk, per quantum. The directives \
                 asked for at most {} on one disk ({:.0} MB per TB of disk); {} of pins did not fit the \
                 configured region, and their extra readers went to disk.",
                format_bytes(d.cache_bytes_per_disk),
                d.cache_bytes_per_disk as f64 / (r.drive_bytes as f64 / TB) / 1e6,
                format_bytes(r.refused_pin_bytes)
            ),
        });
        let series = vec![
            Series {
                name: "budget".into(),
                color: BUDGET_COLOR,
                points: d
                    .series
                    .iter()
                    .map(|p| (days(p.start_hours), p.budget_bytes.unwrap_or(0) as f64 / TB))
                    .collect(),
                dashed: true,
            },
            // Realised reads first, the plan dashed on top: they nearly coincide.
            Series {
                name: "read from disk".into(),
                color: REALIZED_COLOR,
                points: d.series.iter().map(|p| (days(p.start_hours), p.disk_bytes as f64 / TB)).collect(),
                dashed: false,
            },
            Series {
                name: "scheduled by the planner".into(),
                color: mode_color(Mode::Declarative),
                points: d
                    .series
                    .iter()
                    .map(|p| (days(p.start_hours), p.planned_disk_bytes.unwrap_or(0) as f64 / TB))
                    .collect(),
                dashed: true,
            },
        ];
        plots::save_line(
            dir,
            "budget",
            &LineChart {
                title: "Declarative disk reads per quantum against the planner's budget".into(),
                x_label: "day".into(),
                y_label: "TB per quantum".into(),
                series,
                hline: None,
                markers: Vec::new(),
            },
        )?;
        figures.push(Figure {
            stem: "budget".into(),
            caption: "The planner's cluster-wide budget, what it scheduled from disk, and what was really read \
                      (scheduled plus any read the pinned cache could not absorb)."
                .into(),
        });
    }

    // The IO wall per mode.
    let groups: Vec<BarGroup> = r
        .modes
        .iter()
        .map(|m| BarGroup {
            label: m.mode.name().to_string(),
            bars: vec![vec![(m.io_wall_drive_bytes.unwrap_or(0) as f64 / TB, mode_color(m.mode))]],
        })
        .collect();
    plots::save_bars(
        dir,
        "io_wall",
        &BarChart {
            title: "IO wall: largest drive with maintenance under 50 % of disk time".into(),
            y_label: "drive size (TB)".into(),
            groups,
            legend: r.modes.iter().map(|m| (m.mode.name().to_string(), mode_color(m.mode))).collect(),
            hline: Some((r.drive_bytes as f64 / TB, "simulated drive size".into())),
        },
    )?;
    figures.push(Figure {
        stem: "io_wall".into(),
        caption: "Utilisation grows linearly with drive size at a fixed demand per TB, so each mode's wall is \
                  the simulated drive size × 50 % / its utilisation. `dingo sim sweep drive-size` measures it \
                  by simulating each size."
            .into(),
    });
    Ok(figures)
}

/// Short task names for axis labels.
pub fn short_task(t: TaskKind) -> &'static str {
    match t {
        TaskKind::Reconstruction => "recon",
        TaskKind::Scrubbing => "scrub",
        TaskKind::GarbageCollection => "gc",
        TaskKind::Transcoding => "transc",
        TaskKind::Rebalancing => "rebal",
        TaskKind::Georeplication => "geo",
        TaskKind::FileScrubbing => "fscrub",
        TaskKind::Fsck => "fsck",
    }
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG of a figure, for inlining (without its XML declaration).
fn inline_svg(dir: &Path, stem: &str) -> anyhow::Result<String> {
    let path = dir.join(format!("{stem}.svg"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(match text.find("<svg") {
        Some(i) => text[i..].to_string(),
        None => text,
    })
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1060px;margin:2em auto;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}figure{margin:2em 0}\
figcaption{color:#555;font-size:.92em;margin-top:.3em}svg{max-width:100%;height:auto}";

pub fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style>\
         </head><body><h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

pub fn figures_html(dir: &Path, figures: &[Figure]) -> anyhow::Result<String> {
    let mut out = String::new();
    for f in figures {
        let _ = writeln!(
            out,
            "<figure>{}<figcaption>{} (<a href=\"{s}.png\">PNG</a>, <a href=\"{s}.svg\">SVG</a>)</figcaption></figure>",
            inline_svg(dir, &f.stem)?,
            escape(&f.caption),
            s = f.stem
        );
    }
    Ok(out)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0))
}

fn run_html(dir: &Path, r: &SimResult, s: &RunSummary, figures: &[Figure]) -> anyhow::Result<String> {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p>Mix <b>{}</b> ({}); {} raw of {} drives ({} disks); {:.0} days of {:.0}-hour quanta ({} simulated \
         with the drain); maintenance demand {} MB/s per TB; cache {} per disk; seed {}.</p>",
        escape(&r.mix),
        escape(&r.mix_source),
        format_bytes(r.capacity_bytes),
        format_bytes(r.drive_bytes),
        r.disks,
        r.days,
        r.quantum_secs / 3600.0,
        r.quanta,
        r.demand_mb_s_per_tb,
        format_bytes(r.cache_per_disk_bytes),
        r.seed
    );
    body.push_str(
        "<table><tr><th>mode</th><th>logical</th><th>disk</th><th>free</th><th>avoided (deleted)</th>\
         <th>utilisation</th><th>busiest disk</th><th>deadline misses</th><th>IO wall</th><th>cache per disk</th></tr>\n",
    );
    for m in r.modes.iter() {
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td><td>{:.1} %</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            m.mode,
            format_bytes(m.logical_bytes),
            format_bytes(m.disk_bytes),
            format_bytes(m.free_bytes),
            format_bytes(m.elided_bytes),
            m.utilization * 100.0,
            m.peak_disk_utilization * 100.0,
            m.deadline_misses,
            m.io_wall_drive_bytes.map_or("-".into(), format_bytes),
            format_bytes(m.cache_bytes_per_disk)
        );
    }
    let _ = write!(
        body,
        "</table><p>Savings vs imperative: <b>{}</b>. Gap to optimal: <b>{}</b>. Quanta the planner went over its \
         budget: {}. Run took {:.1} s, peak RSS {}.</p>\n<p>Data: <a href=\"summary.json\">summary.json</a>, \
         <a href=\"result.json\">result.json</a>, <a href=\"quanta.csv\">quanta.csv</a>, \
         <a href=\"tasks.csv\">tasks.csv</a>.</p>\n",
        pct(s.comparisons.savings_vs_imperative),
        pct(s.comparisons.gap_to_optimal),
        s.over_budget_quanta,
        s.wall_seconds,
        format_bytes(s.peak_rss_bytes)
    );
    body.push_str(&figures_html(dir, figures)?);
    Ok(html_page("DINGO datacenter simulation", &body))
}
