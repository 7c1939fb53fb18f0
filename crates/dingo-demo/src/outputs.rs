//! The files a demo run leaves in its output folder (`docs/DEMO.md`):
//! `summary.json`, `series-<mode>.csv`, `jobs-<mode>.json` and
//! `planner-metrics.txt`, and the figures `disk-reads.{svg,png}` and
//! `fg-latency.{svg,png}`.

use crate::{DemoError, DemoRun, ModeResult, Result, io};
use dingo_types::TaskKind;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

fn pretty_json(what: &str, value: &impl Serialize) -> Result<String> {
    serde_json::to_string_pretty(value).map_err(|source| DemoError::Encode { what: what.into(), source })
}

fn write(path: &Path, text: String) -> Result<()> {
    io(|| format!("cannot write {}", path.display()), std::fs::write(path, text))
}

impl DemoRun {
    /// Writes the summary, each run's series and job reports, and the
    /// planner's last metrics page, and the figure, into `dir`.
    pub fn write_outputs(&self, dir: &Path) -> Result<()> {
        write(&dir.join("summary.json"), pretty_json("the summary", &self.summary)?)?;
        for r in [&self.imperative, &self.declarative] {
            write(&dir.join(format!("series-{}.csv", r.mode)), series_csv(r))?;
            write(&dir.join(format!("jobs-{}.json", r.mode)), pretty_json("the job reports", &r.jobs)?)?;
            if let Some(m) = &r.planner_metrics {
                write(&dir.join("planner-metrics.txt"), m.clone())?;
            }
        }
        crate::figure::write(dir, &self.imperative, &self.declarative, self.summary.scale.quantum)
    }
}

/// Disk bytes read per IO class in each sampling interval, one row per
/// sample: `seconds,foreground,<task>...,kernel_read_bytes`.
pub fn series_csv(r: &ModeResult) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ForegroundLatency, NodeSample};
    use dingo_tasks::Scheduling;

    #[test]
    fn one_row_per_sample_with_every_class() {
        let mut sample = NodeSample { kernel_read_bytes: 7, ..NodeSample::default() };
        sample.disk_bytes_by_class[0] = 5;
        let r = ModeResult {
            mode: Scheduling::Imperative,
            jobs: Vec::new(),
            disk: sample,
            foreground: ForegroundLatency::default(),
            foreground_by_kind: Default::default(),
            series: vec![(0.5, sample), (1.25, NodeSample::default())],
            events: Vec::new(),
            planned_free_bytes: None,
            read_lower_bound_bytes: None,
            planned_series: Vec::new(),
            fg_series: Vec::new(),
            planner_metrics: None,
            wall_seconds: 1.0,
        };
        let csv = series_csv(&r);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let columns = lines[0].split(',').count();
        assert_eq!(columns, 3 + TaskKind::ALL.len());
        assert!(lines[1].starts_with("0.50,5,") && lines[1].ends_with(",7"), "{}", lines[1]);
        assert!(lines.iter().all(|l| l.split(',').count() == columns), "{csv}");
    }
}
