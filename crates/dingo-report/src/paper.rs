//! What the paper reproduction writes: its summary and runs as JSON and
//! CSV, every figure of the headline and diurnal runs, one chart per
//! sensitivity figure, and the published-vs-measured page as Markdown and
//! HTML.

use crate::html::{Figure, escape, figures_html, html_page};
use crate::plots::{self, LineChart, MODE_COLORS, Series};
use crate::run::write_run;
use crate::{ReportError, create_dir, write_file};
use dingo_sim::csv::paper_runs_csv;
use dingo_sim::paper::{Cluster, PaperRuns, PaperSummary, SINGLE_RUN_FIGURES, SWEEP_FIGURES};
use dingo_sim::sim::{Mode, WALL_UTILIZATION};
use dingo_sim::summary::RunCost;
use std::fmt::Write as _;
use std::path::Path;

/// The figures of a single run that the paper's page shows.
const SINGLE_RUN_STEMS: [&str; 4] = ["utilization", "task_bytes", "io_wall", "budget"];

/// Writes paper.json, runs.csv, every figure, paper.md and paper.html into `dir`.
pub fn write_paper(dir: &Path, runs: &PaperRuns, summary: &PaperSummary) -> Result<(), ReportError> {
    create_dir(dir)?;
    write_file(dir, "paper.json", &serde_json::to_string_pretty(summary)?)?;
    write_file(dir, "runs.csv", &paper_runs_csv(runs))?;
    let mut figures = Vec::new();
    for (p, r) in runs.runs.iter().filter(|(p, _)| SINGLE_RUN_FIGURES.contains(&p.figure)) {
        let sub = format!("{}-cluster-{:?}", p.figure, p.cluster);
        let run_dir = dir.join(&sub);
        write_run(&run_dir, r, &r.summary(RunCost::default()))?;
        for stem in SINGLE_RUN_STEMS {
            if run_dir.join(format!("{stem}.png")).exists() {
                figures.push(Figure {
                    stem: format!("{sub}/{stem}"),
                    caption: format!("{} cluster {:?}: {stem}", p.figure, p.cluster),
                });
            }
        }
    }
    for (figure, parameter, x_label) in SWEEP_FIGURES {
        let stem = format!("{figure}-{parameter}");
        if sweep_chart(dir, runs, figure, parameter, x_label, &stem)? {
            figures.push(Figure { stem, caption: format!("{figure}: utilisation by {x_label}") });
        }
    }
    let mut md = runs.markdown();
    md.push_str("\n## Figures\n\n");
    for f in &figures {
        let _ = writeln!(md, "![{}]({}.png)\n", f.caption, f.stem);
    }
    write_file(dir, "paper.md", &md)?;
    let mut body = String::from("<table><tr><th>figure</th><th>quantity</th><th>published</th><th>measured</th></tr>");
    for r in &summary.rows {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.figure),
            escape(&r.quantity),
            escape(&r.published),
            escape(&r.measured)
        );
    }
    body.push_str("</table>");
    body.push_str(&figures_html(dir, &figures)?);
    write_file(dir, "paper.html", &html_page("Declarative IO paper: published vs measured", &body))?;
    Ok(())
}

/// Utilisation per mode (solid: cluster A, dashed: cluster B) against the
/// parameter; false if the plan has no such points.
fn sweep_chart(
    dir: &Path,
    runs: &PaperRuns,
    figure: &str,
    parameter: &str,
    x_label: &str,
    stem: &str,
) -> Result<bool, ReportError> {
    let mut series = Vec::new();
    for (cluster, points) in runs.sweep_points(figure, parameter) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_sim::fixtures::sim_result;
    use dingo_sim::paper::{PaperOptions, plan};

    #[test]
    fn the_paper_writes_its_data_single_run_figures_sweep_charts_and_pages() {
        let dir = tempfile::tempdir().unwrap();
        let options = PaperOptions::quick();
        let runs = PaperRuns {
            options: options.clone(),
            runs: plan(&options).into_iter().map(|p| (p, sim_result())).collect(),
        };
        let summary = runs.summary(RunCost::default());
        write_paper(dir.path(), &runs, &summary).unwrap();
        for file in [
            "paper.md",
            "paper.json",
            "runs.csv",
            "fig18-demand.png",
            "thesis-6.15-supply.png",
            "fig16-cluster-A/task_bytes.png",
            "fig21-cluster-A/budget.png",
        ] {
            assert!(dir.path().join(file).exists(), "{file}");
        }
        let html = std::fs::read_to_string(dir.path().join("paper.html")).unwrap();
        assert_eq!(html.matches("<tr>").count(), 1 + summary.rows.len());
        // Four figures of each of the three single runs, and the eight sweep charts.
        assert_eq!(html.matches("<svg").count(), 3 * 4 + SWEEP_FIGURES.len(), "{}", html.len());
        let md = std::fs::read_to_string(dir.path().join("paper.md")).unwrap();
        assert!(md.contains("![fig18: utilisation by maintenance demand (MB/s per TB)](fig18-demand.png)"));
    }
}
