//! The demo's figure: disk reads over time in both modes (the paper's
//! Fig. 14/15 for the HDFS experiment), `disk-reads.{svg,png}`.

use crate::{ModeResult, NodeSample, Result};
use dingo_report::plots::{self, LineChart, MODE_COLORS, Series};
use std::path::Path;
/// MB/s read from disk per sampling interval: (seconds, rate).
fn rates(r: &ModeResult, bytes: impl Fn(&NodeSample) -> u64) -> Vec<(f64, f64)> {
    let mut last = 0.0;
    r.series
        .iter()
        .map(|(t, s)| {
            let dt = (t - last).max(1e-3);
            last = *t;
            (*t, bytes(s) as f64 / 1e6 / dt)
        })
        .collect()
}

/// Writes `disk-reads.svg` and `disk-reads.png` into `dir`.
pub fn disk_reads(dir: &Path, imperative: &ModeResult, declarative: &ModeResult) -> Result<()> {
    let mut series = Vec::new();
    for (r, color) in [(imperative, MODE_COLORS[0]), (declarative, MODE_COLORS[1])] {
        series.push(Series {
            name: format!("{} maintenance", r.mode),
            color,
            points: rates(r, |s| s.maintenance_disk_bytes()),
            dashed: false,
        });
        series.push(Series {
            name: format!("{} foreground", r.mode),
            color,
            points: rates(r, |s| s.disk_bytes_by_class[0]),
            dashed: true,
        });
    }
    plots::save_line(
        dir,
        "disk-reads",
        &LineChart {
            title: "Disk reads over the demo timeline".into(),
            x_label: "seconds since the timeline started".into(),
            y_label: "MB/s read from disk (all nodes)".into(),
            series,
            hline: None,
            // Both modes run the same script; the imperative run's times mark it.
            markers: imperative.events.clone(),
        },
    )?;
    Ok(())
}
