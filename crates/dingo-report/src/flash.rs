//! The flash benchmark's figures (`dingo bench flash --out`), beside the
//! JSON, CSV and Markdown that `dingo_flash::bench::write_report` writes:
//! misses against device writes per system (Fig. 4.10's axes), writes per
//! inserted byte of Kangaroo, FairyWREN and its ablations (Fig. 5.12 and
//! 5.18), and the carbon of each at the deployed scale (Fig. 5.9).

use crate::ReportError;
use crate::plots::{self, BarChart, BarGroup, LineChart, RGBColor, Series};
use dingo_flash::bench::{BenchReport, RunResult};
use std::path::Path;

const SYSTEM_COLORS: [(&str, RGBColor); 3] = [
    ("set-associative", RGBColor(255, 127, 14)),
    ("log-structured", RGBColor(148, 103, 189)),
    ("kangaroo", RGBColor(35, 100, 200)),
];
const APP_COLOR: RGBColor = RGBColor(35, 100, 200);
const DEVICE_COLOR: RGBColor = RGBColor(200, 55, 45);
const DRAM_COLOR: RGBColor = RGBColor(140, 86, 75);

/// Writes `flash-misses-vs-writes`, `flash-writes-per-inserted-byte` and
/// `flash-carbon` (each SVG and PNG) into `dir`.
pub fn write_flash_figures(dir: &Path, report: &BenchReport) -> Result<(), ReportError> {
    crate::create_dir(dir)?;
    plots::save_line(dir, "flash-misses-vs-writes", &misses_vs_writes(report))?;
    plots::save_bars(dir, "flash-writes-per-inserted-byte", &writes_per_inserted_byte(report))?;
    plots::save_bars(dir, "flash-carbon", &carbon(report))
}

/// Each system's best miss ratio at each device write rate it was run at
/// (its lower envelope over the budgeted runs), with the write budget.
fn misses_vs_writes(report: &BenchReport) -> LineChart {
    let series = SYSTEM_COLORS
        .iter()
        .map(|&(system, color)| Series {
            name: system.to_string(),
            color,
            points: lower_envelope(report.runs.iter().filter(|r| r.system == system)),
            dashed: false,
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    LineChart {
        title: "Misses against device writes, equal DRAM (best configuration per write rate)".into(),
        x_label: "device writes (bytes per request)".into(),
        y_label: "miss ratio".into(),
        series,
        hline: None,
        markers: vec![(report.budgets.device_write_bytes_per_request, "write budget".into())],
    }
}

/// (device bytes per request, miss ratio) of the runs, keeping a point only
/// if it misses less than every run that writes less.
fn lower_envelope<'a>(runs: impl Iterator<Item = &'a RunResult>) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = runs.map(|r| (r.device_write_bytes_per_request, r.miss_ratio)).collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best = f64::INFINITY;
    points.retain(|&(_, miss)| {
        let keep = miss < best;
        best = best.min(miss);
        keep
    });
    points
}

/// Fig. 5.18's systems on the all-small trace and Fig. 5.12's pair on the
/// Meta-like one, by short label.
const WRITE_BARS: [(&str, bool, &str); 6] = [
    ("kangaroo", false, "Kangaroo"),
    ("physical-separation", false, "phys. sep."),
    ("fairywren-no-hot-cold", false, "FW no hot/cold"),
    ("fairywren", false, "FairyWREN"),
    ("kangaroo", true, "Kangaroo, Meta"),
    ("fairywren", true, "FW, Meta"),
];

/// NAND bytes per inserted byte, split into the host's writes (app WA) and
/// what the device adds.
fn writes_per_inserted_byte(report: &BenchReport) -> BarChart {
    let groups = WRITE_BARS
        .iter()
        .filter_map(|&(system, meta, label)| {
            let runs = if meta { &report.fairywren_meta } else { &report.fairywren };
            let w = runs.iter().find(|r| r.system == system)?.write_amplification;
            Some(BarGroup {
                label: label.to_string(),
                bars: vec![vec![(w.app, APP_COLOR), ((w.total - w.app).max(0.0), DEVICE_COLOR)]],
            })
        })
        .collect();
    BarChart {
        title: "Flash writes per inserted byte, same flash and DRAM".into(),
        y_label: "NAND bytes per inserted byte".into(),
        groups,
        legend: vec![("host writes (app WA)".into(), APP_COLOR), ("device GC on top".into(), DEVICE_COLOR)],
        hline: None,
    }
}

const CARBON_COLORS: [(&str, RGBColor); 3] = [
    ("kangaroo", RGBColor(35, 100, 200)),
    ("fairywren", RGBColor(218, 165, 32)),
    ("minimum writes", RGBColor(160, 160, 160)),
];

/// Emissions per year of each system (flash, DRAM on top), one group per
/// trace; the densities are in the report's table.
fn carbon(report: &BenchReport) -> BarChart {
    let groups = report
        .footprints
        .iter()
        .map(|trace| BarGroup {
            label: trace.trace.split(' ').next().unwrap_or_default().to_string(),
            bars: CARBON_COLORS
                .iter()
                .filter_map(|&(system, color)| {
                    let f = trace.systems.iter().find(|f| f.system == system)?;
                    Some(vec![(f.flash_kg_co2_per_year, color), (f.dram_kg_co2_per_year, DRAM_COLOR)])
                })
                .collect(),
        })
        .collect();
    let mut legend: Vec<(String, RGBColor)> = CARBON_COLORS.iter().map(|&(s, c)| (s.to_string(), c)).collect();
    legend.push(("DRAM (on top)".into(), DRAM_COLOR));
    BarChart {
        title: "Emissions at the deployed scale, lowest-carbon flash density".into(),
        y_label: "kg CO2 per year".into(),
        groups,
        legend,
        hline: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(system: &str, device_bytes: f64, miss: f64) -> RunResult {
        RunResult {
            system: system.into(),
            label: String::new(),
            admission_probability: 1.0,
            requests: 1,
            miss_ratio: miss,
            app_write_bytes_per_request: device_bytes,
            device_write_bytes_per_request: device_bytes,
            write_amplification: dingo_flash::bench::WriteAmplification { app: 1.0, device: 1.0, total: 1.0 },
            dram_bits_per_object: 1.0,
            dram_bits: 1,
            flash_utilisation: 0.9,
            flash_fill: 0.9,
            max_active_zones: 0,
            bloom_false_positive_reads_per_request: 0.0,
            within_budget: true,
            fairywren_writes: None,
        }
    }

    #[test]
    fn every_figure_is_written() {
        use dingo_flash::bench::{BenchSize, Budgets, TraceFootprints};
        use dingo_flash::carbon::{CacheDeployment, CarbonParams, lowest_carbon};
        let params = CarbonParams::default();
        let deployment = CacheDeployment {
            system: "kangaroo".into(),
            cache_bytes: 2e12,
            nand_write_bytes_per_second: 1e8,
            dram_bytes: 1e9,
            conventional_drive: true,
        };
        let report = BenchReport {
            size: BenchSize::Quick,
            trace: "t".into(),
            budgets: Budgets::for_size(BenchSize::Quick, 2),
            mean_object_bytes: 200,
            runs: vec![run("kangaroo", 500.0, 0.3), run("set-associative", 600.0, 0.4)],
            best_within_budget: Vec::new(),
            fairywren: vec![run("kangaroo", 1400.0, 0.3), run("fairywren", 1300.0, 0.3)],
            meta_trace: "m".into(),
            fairywren_meta: vec![run("kangaroo", 1400.0, 0.3)],
            kangaroo_ablations: Vec::new(),
            footprints: vec![TraceFootprints {
                trace: "t (Zipf 0.9)".into(),
                params,
                systems: vec![lowest_carbon(&params, &deployment)],
            }],
            comparisons: Vec::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        write_flash_figures(dir.path(), &report).unwrap();
        for name in ["flash-misses-vs-writes", "flash-writes-per-inserted-byte", "flash-carbon"] {
            for ext in ["svg", "png"] {
                let file = dir.path().join(format!("{name}.{ext}"));
                assert!(file.metadata().unwrap().len() > 1000, "{}", file.display());
            }
        }
    }

    /// A configuration that writes more and misses more is no better than
    /// one that writes less: it is off the envelope.
    #[test]
    fn the_envelope_keeps_only_points_that_miss_less_for_more_writes() {
        let runs = [run("k", 600.0, 0.40), run("k", 300.0, 0.45), run("k", 900.0, 0.42), run("k", 1200.0, 0.35)];
        assert_eq!(lower_envelope(runs.iter()), [(300.0, 0.45), (600.0, 0.40), (1200.0, 0.35)]);
    }
}
