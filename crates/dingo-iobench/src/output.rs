//! Writing an experiment's results: one JSON object (printed with `--json`
//! and stored), the per-second series as CSV, and the plots, drawn with
//! `dingo_report`'s charts.

use crate::BenchError;
use dingo_report::plots::{self, LineChart, MODE_COLORS, RGBColor, TASK_COLORS};
use serde::Serialize;
use std::fmt::Display;
use std::path::Path;

/// An experiment's typed report.
pub trait Experiment: Serialize + Display {
    /// The files are `{name}.json` and `{name}-series.csv`.
    fn name(&self) -> &'static str;
    /// Every run's per-second series, as CSV with a header line.
    fn series_csv(&self) -> String;
    /// The plots, each saved under its file stem.
    fn charts(&self) -> Vec<Chart> {
        Vec::new()
    }
}

/// Which colour a series takes: the mechanism's and the baseline's are the
/// same in every plot, tenants get one each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    Mechanism,
    Baseline,
    Tenant(usize),
}

impl Tone {
    pub fn color(self) -> RGBColor {
        match self {
            Tone::Mechanism => MODE_COLORS[1],
            Tone::Baseline => MODE_COLORS[0],
            Tone::Tenant(t) => TASK_COLORS[t % TASK_COLORS.len()],
        }
    }
}

/// A plot and the stem of its files.
#[derive(Clone, Debug)]
pub struct Chart {
    pub file_stem: &'static str,
    pub chart: LineChart,
}

/// The report as the JSON the command prints and stores.
pub fn json(report: &impl Experiment) -> Result<String, BenchError> {
    Ok(serde_json::to_string_pretty(report)?)
}

/// Writes `{name}.json`, `{name}-series.csv` and the plots into `dir`.
pub fn write_files(report: &impl Experiment, dir: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(BenchError::io(format!("cannot create {}", dir.display())))?;
    let write = |file: String, text: String| {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(BenchError::io(format!("cannot write {}", path.display())))
    };
    write(format!("{}.json", report.name()), json(report)?)?;
    write(format!("{}-series.csv", report.name()), report.series_csv())?;
    for c in report.charts() {
        plots::save_line(dir, c.file_stem, &c.chart)
            .map_err(|e| BenchError::Plot { chart: c.file_stem.to_string(), message: e.to_string() })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Tiny {
        value: u32,
    }

    impl Display for Tiny {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "value {}", self.value)
        }
    }

    impl Experiment for Tiny {
        fn name(&self) -> &'static str {
            "tiny"
        }
        fn series_csv(&self) -> String {
            "second,value\n0,1\n".into()
        }
        fn charts(&self) -> Vec<Chart> {
            let chart = LineChart {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                series: vec![plots::Series {
                    name: "s".into(),
                    color: Tone::Mechanism.color(),
                    points: vec![(0.0, 1.0), (1.0, 2.0)],
                    dashed: false,
                }],
                hline: None,
                markers: Vec::new(),
            };
            vec![Chart { file_stem: "tiny-plot", chart }]
        }
    }

    #[test]
    fn the_files_are_named_after_the_experiment_and_the_plots_drawn() {
        let dir = tempfile::tempdir().unwrap();
        write_files(&Tiny { value: 7 }, dir.path()).unwrap();
        let json = std::fs::read_to_string(dir.path().join("tiny.json")).unwrap();
        assert_eq!(json, "{\n  \"value\": 7\n}");
        assert_eq!(std::fs::read_to_string(dir.path().join("tiny-series.csv")).unwrap(), "second,value\n0,1\n");
        assert!(dir.path().join("tiny-plot.svg").is_file() && dir.path().join("tiny-plot.png").is_file());
    }

    #[test]
    fn mechanism_and_baseline_keep_their_colours_and_tenants_wrap() {
        assert_eq!(Tone::Mechanism.color(), MODE_COLORS[1]);
        assert_eq!(Tone::Baseline.color(), MODE_COLORS[0]);
        assert_eq!(Tone::Tenant(TASK_COLORS.len() + 1).color(), TASK_COLORS[1]);
    }
}
