//! What a run writes: its summary and full result as JSON, the CSV files,
//! the figures and one HTML page that embeds them.

use crate::html::{Figure, escape, figures_html, html_page, percent};
use crate::plots::{
    self, BUDGET_COLOR, BarChart, BarGroup, DISK_COLOR, ELIDED_COLOR, LineChart, MODE_COLORS, REALIZED_COLOR, Series,
    TASK_COLORS,
};
use crate::{ReportError, create_dir, write_file};
use dingo_sim::csv::{quanta_csv, tasks_csv};
use dingo_sim::sim::{Mode, SimResult, WALL_UTILIZATION};
use dingo_sim::summary::RunSummary;
use dingo_types::{TaskKind, format_bytes};
use std::fmt::Write as _;
use std::path::Path;

const TB: f64 = 1e12;

pub(crate) fn mode_color(mode: Mode) -> plotters::style::RGBColor {
    MODE_COLORS[mode as usize]
}

/// Writes summary.json, result.json, quanta.csv, tasks.csv, the figures
/// and report.html into `dir`.
pub fn write_run(dir: &Path, r: &SimResult, summary: &RunSummary) -> Result<(), ReportError> {
    create_dir(dir)?;
    write_file(dir, "summary.json", &serde_json::to_string_pretty(summary)?)?;
    write_file(dir, "result.json", &serde_json::to_string(r)?)?;
    write_file(dir, "quanta.csv", &quanta_csv(r))?;
    write_file(dir, "tasks.csv", &tasks_csv(r))?;
    let figures = run_figures(dir, r)?;
    write_file(dir, "report.html", &run_html(dir, r, summary, &figures)?)?;
    Ok(())
}

fn days(hours: f64) -> f64 {
    hours / 24.0
}

fn run_figures(dir: &Path, r: &SimResult) -> Result<Vec<Figure>, ReportError> {
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
                  whose read brought them in (declarative: of a dispatch group's readers, the one with the nearest \
                  deadline, as the paper attributes them), and bytes not read because the blocks were deleted first \
                  (light)."
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

fn run_html(dir: &Path, r: &SimResult, s: &RunSummary, figures: &[Figure]) -> Result<String, ReportError> {
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
        percent(s.comparisons.savings_vs_imperative),
        percent(s.comparisons.gap_to_optimal),
        s.over_budget_quanta,
        s.cost.wall_seconds,
        format_bytes(s.cost.peak_rss_bytes)
    );
    body.push_str(&figures_html(dir, figures)?);
    Ok(html_page("DINGO datacenter simulation", &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_sim::fixtures::sim_result;
    use dingo_sim::summary::RunCost;

    #[test]
    fn a_run_writes_its_data_every_figure_and_one_page() {
        let dir = tempfile::tempdir().unwrap();
        let r = sim_result();
        write_run(dir.path(), &r, &r.summary(RunCost { wall_seconds: 2.0, peak_rss_bytes: 3 })).unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let back: SimResult = serde_json::from_str(&read("result.json")).unwrap();
        assert_eq!(back, r, "result.json holds the whole result");
        let summary: serde_json::Value = serde_json::from_str(&read("summary.json")).unwrap();
        assert_eq!(summary["modes"]["declarative"]["disk_bytes"], 600);
        assert_eq!(read("quanta.csv"), quanta_csv(&r));
        assert_eq!(read("tasks.csv"), tasks_csv(&r));
        let html = read("report.html");
        assert_eq!(html.matches("<svg").count(), 6, "every figure is inlined");
        assert!(html.contains("Savings vs imperative: <b>40.0 %</b>"), "{html}");
        let png = std::fs::read(dir.path().join("utilization.png")).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
    }

    #[test]
    fn without_declarative_mode_there_is_no_cache_or_budget_figure() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = sim_result();
        r.modes.declarative = None;
        write_run(dir.path(), &r, &r.summary(RunCost::default())).unwrap();
        assert!(!dir.path().join("cache.svg").exists() && !dir.path().join("budget.svg").exists());
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert_eq!(html.matches("<svg").count(), 4);
    }
}
