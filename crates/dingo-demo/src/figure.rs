//! The demo's figures, the paper's two figures of its HDFS prototype:
//! disk reads over time in both modes with the planner's scheduled and
//! free reads (Fig. 14, `disk-reads.{svg,png}`), and the foreground
//! reads' latency per interval in both modes (Fig. 15,
//! `fg-latency.{svg,png}`).

use crate::planner::Planned;
use crate::{ModeResult, NodeSample, Result};
use dingo_report::plots::{self, LineChart, RGBColor, Series};
use std::path::Path;
use std::time::Duration;

/// The paper's colours: the baseline blue, DINGO orange, the planner's
/// reads from disk red and its free reads green.
const IMPERATIVE: RGBColor = RGBColor(31, 119, 180);
const DECLARATIVE: RGBColor = RGBColor(255, 127, 14);
const SCHEDULED: RGBColor = RGBColor(214, 39, 40);
const FREE: RGBColor = RGBColor(44, 160, 44);

fn color(r: &ModeResult) -> RGBColor {
    match r.mode {
        dingo_tasks::Scheduling::Imperative => IMPERATIVE,
        dingo_tasks::Scheduling::Declarative => DECLARATIVE,
    }
}

/// MB/s per interval of a series of (seconds at the interval's end,
/// bytes in the interval).
fn rates<T>(series: &[(f64, T)], bytes: impl Fn(&T) -> u64) -> Vec<(f64, f64)> {
    let mut last = 0.0;
    series
        .iter()
        .map(|(t, s)| {
            let dt = (t - last).max(1e-3);
            last = *t;
            (*t, bytes(s) as f64 / 1e6 / dt)
        })
        .collect()
}

/// Bytes the planner scheduled per quantum: it schedules at the start of
/// each quantum, so samples taken more often than that would show a spike
/// and gaps. Each bin ends at a multiple of `quantum` seconds.
fn per_quantum(series: &[(f64, Planned)], quantum: f64) -> Vec<(f64, Planned)> {
    let mut bins: Vec<(f64, Planned)> = Vec::new();
    for (t, p) in series {
        let end = ((t / quantum).ceil().max(1.0)) * quantum;
        match bins.last_mut() {
            Some((last_end, sum)) if (*last_end - end).abs() < 1e-9 => {
                sum.disk_bytes += p.disk_bytes;
                sum.free_bytes += p.free_bytes;
            }
            _ => bins.push((end, *p)),
        }
    }
    bins
}

fn line(name: String, color: RGBColor, points: Vec<(f64, f64)>, dashed: bool) -> Series {
    Series { name, color, points, dashed }
}

/// Writes both figures into `dir`.
pub fn write(dir: &Path, imperative: &ModeResult, declarative: &ModeResult, quantum: Duration) -> Result<()> {
    disk_reads(dir, imperative, declarative, quantum)?;
    foreground_latency(dir, imperative, declarative)
}

/// Fig. 14: maintenance (solid) and foreground (dashed) disk reads of both
/// modes, and what the planner scheduled in the declarative run: reads
/// from disk (counting against its budget) and free reads.
fn disk_reads(dir: &Path, imperative: &ModeResult, declarative: &ModeResult, quantum: Duration) -> Result<()> {
    let mut series = Vec::new();
    for r in [imperative, declarative] {
        let maintenance = rates(&r.series, NodeSample::maintenance_disk_bytes);
        series.push(line(format!("{} maintenance, disk", r.mode), color(r), maintenance, false));
    }
    let planned = &per_quantum(&declarative.planned_series, quantum.as_secs_f64());
    series.push(line("planner: scheduled from disk".into(), SCHEDULED, rates(planned, |p| p.disk_bytes), false));
    series.push(line("planner: scheduled free".into(), FREE, rates(planned, |p| p.free_bytes), false));
    for r in [imperative, declarative] {
        let foreground = rates(&r.series, |s| s.disk_bytes_by_class[0]);
        series.push(line(format!("{} foreground, disk", r.mode), color(r), foreground, true));
    }
    plots::save_line(
        dir,
        "disk-reads",
        &LineChart {
            title: "Disk reads over the demo timeline (paper Fig. 14)".into(),
            x_label: "seconds since the timeline started".into(),
            y_label: "MB/s (all nodes)".into(),
            series,
            hline: None,
            // Both modes run the same script; the imperative run's times mark it.
            markers: imperative.events.clone(),
        },
    )?;
    Ok(())
}

/// Fig. 15: foreground p50 (dashed) and p99 (solid) per interval.
fn foreground_latency(dir: &Path, imperative: &ModeResult, declarative: &ModeResult) -> Result<()> {
    let mut series = Vec::new();
    for r in [imperative, declarative] {
        let p99 = r.fg_series.iter().map(|(t, l)| (*t, l.p99_ms)).collect();
        let p50 = r.fg_series.iter().map(|(t, l)| (*t, l.p50_ms)).collect();
        series.push(line(format!("{} p99", r.mode), color(r), p99, false));
        series.push(line(format!("{} p50", r.mode), color(r), p50, true));
    }
    plots::save_line(
        dir,
        "fg-latency",
        &LineChart {
            title: "Foreground read latency per interval (paper Fig. 15)".into(),
            x_label: "seconds since the timeline started".into(),
            y_label: "latency of a block read, ms".into(),
            series,
            hline: None,
            markers: imperative.events.clone(),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planner_samples_sum_per_quantum() {
        let p = |disk_bytes| Planned { disk_bytes, free_bytes: 1 };
        let samples = [(0.8, p(10)), (1.6, p(0)), (2.0, p(5)), (2.4, p(7)), (5.9, p(1))];
        let bins = per_quantum(&samples, 2.0);
        assert_eq!(bins, vec![(2.0, Planned { disk_bytes: 15, free_bytes: 3 }), (4.0, p(7)), (6.0, p(1))]);
    }
}
