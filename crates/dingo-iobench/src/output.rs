//! Writing an experiment's results: one JSON object (printed with `--json`
//! and stored), the per-second series as CSV, and the plots, described here
//! as data and drawn by the caller's renderer (the command draws them with
//! plotters; this crate carries no drawing code).

use crate::BenchError;
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

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub tone: Tone,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A horizontal reference line (value, label).
    pub hline: Option<(f64, String)>,
    /// Events on the x axis (value, label).
    pub markers: Vec<(f64, String)>,
}

/// A plot and the stem of its files.
#[derive(Clone, Debug)]
pub struct Chart {
    pub file_stem: &'static str,
    pub chart: LineChart,
}

/// Draws `chart` into `dir` as `{file_stem}.*`.
pub type Renderer<'a> = &'a dyn Fn(&Path, &str, &LineChart) -> Result<(), String>;

/// The report as the JSON the command prints and stores.
pub fn json(report: &impl Experiment) -> Result<String, BenchError> {
    Ok(serde_json::to_string_pretty(report)?)
}

/// Writes `{name}.json`, `{name}-series.csv` and the plots into `dir`.
pub fn write_files(report: &impl Experiment, dir: &Path, render: Renderer) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(BenchError::io(format!("cannot create {}", dir.display())))?;
    let write = |file: String, text: String| {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(BenchError::io(format!("cannot write {}", path.display())))
    };
    write(format!("{}.json", report.name()), json(report)?)?;
    write(format!("{}-series.csv", report.name()), report.series_csv())?;
    for c in report.charts() {
        render(dir, c.file_stem, &c.chart)
            .map_err(|message| BenchError::Plot { chart: c.file_stem.to_string(), message })?;
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
                series: Vec::new(),
                hline: None,
                markers: Vec::new(),
            };
            vec![Chart { file_stem: "tiny-plot", chart }]
        }
    }

    #[test]
    fn the_files_are_named_after_the_experiment_and_plots_go_to_the_renderer() {
        let dir = tempfile::tempdir().unwrap();
        let drawn = std::cell::RefCell::new(Vec::new());
        let render = |d: &Path, stem: &str, _: &LineChart| {
            drawn.borrow_mut().push((d.to_path_buf(), stem.to_string()));
            Ok(())
        };
        write_files(&Tiny { value: 7 }, dir.path(), &render).unwrap();
        let json = std::fs::read_to_string(dir.path().join("tiny.json")).unwrap();
        assert_eq!(json, "{\n  \"value\": 7\n}");
        assert_eq!(std::fs::read_to_string(dir.path().join("tiny-series.csv")).unwrap(), "second,value\n0,1\n");
        assert_eq!(*drawn.borrow(), vec![(dir.path().to_path_buf(), "tiny-plot".to_string())]);
        let failing = |_: &Path, _: &str, _: &LineChart| Err("no font".to_string());
        let e = write_files(&Tiny { value: 7 }, dir.path(), &failing).unwrap_err();
        assert_eq!(e.to_string(), "cannot draw tiny-plot: no font");
    }
}
