//! What a sweep writes: its summary as JSON and CSV, the utilisation chart
//! (and, for a diurnal sweep, the planner's schedule at the largest swing)
//! and one HTML page.

use crate::html::{Figure, escape, figures_html, html_page};
use crate::plots::{self, LineChart, MODE_COLORS, Series, TASK_COLORS};
use crate::run::short_task;
use crate::{ReportError, create_dir, write_file};
use dingo_sim::csv::sweep_csv;
use dingo_sim::sim::{Mode, SimResult, WALL_UTILIZATION};
use dingo_sim::sweep::{SweepKind, SweepPoint, SweepSummary, wall_text};
use dingo_types::{TaskKind, format_bytes};
use std::fmt::Write as _;
use std::path::Path;

/// Writes sweep.json, sweep.csv, the figures and report.html into `dir`;
/// `results` in the order of `points`.
pub fn write_sweep(
    dir: &Path,
    kind: SweepKind,
    points: &[SweepPoint],
    results: &[SimResult],
    summary: &SweepSummary,
) -> Result<(), ReportError> {
    create_dir(dir)?;
    write_file(dir, "sweep.json", &serde_json::to_string_pretty(summary)?)?;
    write_file(dir, "sweep.csv", &sweep_csv(points, results))?;

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
                Some(t) => (format!("{} {mode}", short_task(t)), TASK_COLORS[t.index()]),
                None => (mode.name().to_string(), MODE_COLORS[mode as usize]),
            };
            // Line style tells the modes apart when colours are per task.
            series.push(Series { name, color, points: pts, dashed: line.is_some() && mode != Mode::Declarative });
        }
    }
    let title = format!("Maintenance disk-head utilisation vs {}", kind.x_label());
    plots::save_line(
        dir,
        "sweep",
        &LineChart {
            title,
            x_label: kind.x_label().into(),
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
        kind.x_label(),
        summary.mix,
        format_bytes(summary.capacity_bytes)
    );
    for p in &summary.points {
        let cells: String = p.cells().iter().map(|c| format!("<td>{}</td>", escape(c))).collect();
        let _ = writeln!(body, "<tr>{cells}</tr>");
    }
    body.push_str("</table>\n");
    if let Some(walls) = &summary.io_wall_drive_bytes {
        body.push_str("<p>IO wall (largest simulated drive size under 50 % utilisation, no missed deadline): ");
        let parts: Vec<String> = walls.iter().map(|(mode, w)| format!("{mode} <b>{}</b>", wall_text(*w))).collect();
        body.push_str(&parts.join(", "));
        body.push_str(".</p>\n");
    }
    body.push_str(&figures_html(dir, &figures)?);
    write_file(dir, "report.html", &html_page(&format!("DINGO simulator sweep: {}", kind.x_label()), &body))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_sim::fixtures::sim_result;
    use dingo_sim::sim::SimConfig;
    use dingo_sim::sweep::{points, summarize};

    #[test]
    fn a_diurnal_sweep_writes_its_data_both_charts_and_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let base = SimConfig::default();
        let points = points(SweepKind::Diurnal, &["0", "0.5"], &base).unwrap();
        let results = [sim_result(), sim_result()];
        let summary = summarize(SweepKind::Diurnal, &base, &points, &results);
        write_sweep(dir.path(), SweepKind::Diurnal, &points, &results, &summary).unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&read("sweep.json")).unwrap();
        assert_eq!(json["sweep"], "diurnal");
        assert_eq!(json["points"][1]["value"], 0.5);
        assert_eq!(read("sweep.csv").lines().count(), 1 + 2 * 3);
        let html = read("report.html");
        assert_eq!(html.matches("<svg").count(), 2, "the sweep and the largest swing's schedule");
        assert_eq!(html.matches("<tr>").count(), 1 + 2, "a header and a row per point");
    }
}
