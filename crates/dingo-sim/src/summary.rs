//! The summary of a run: [`SimResult`] without its per-quantum series and
//! per-task split, what `dingo sim run --json` prints and `summary.json`
//! holds, and the text table of a run.

use crate::sim::{Churn, Comparisons, ModeResult, SimResult};
use dingo_types::format_bytes;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One mode's totals over the run (a [`ModeResult`] without its series).
/// The fields are in alphabetical order, the order the JSON has always had.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ModeSummary {
    pub cache_bytes_per_disk: u64,
    pub deadline_misses: u64,
    pub disk_bytes: u64,
    pub elided_bytes: u64,
    pub free_bytes: u64,
    pub io_wall_drive_bytes: Option<u64>,
    pub logical_bytes: u64,
    pub peak_disk_utilization: f64,
    pub utilization: f64,
}

impl From<&ModeResult> for ModeSummary {
    fn from(m: &ModeResult) -> Self {
        ModeSummary {
            cache_bytes_per_disk: m.cache_bytes_per_disk,
            deadline_misses: m.deadline_misses,
            disk_bytes: m.disk_bytes,
            elided_bytes: m.elided_bytes,
            free_bytes: m.free_bytes,
            io_wall_drive_bytes: m.io_wall_drive_bytes,
            logical_bytes: m.logical_bytes,
            peak_disk_utilization: m.peak_disk_utilization,
            utilization: m.utilization,
        }
    }
}

pub use crate::cost::RunCost;

/// The summary of one run; field order is the JSON's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    pub mix: String,
    pub capacity_bytes: u64,
    pub drive_bytes: u64,
    pub disks: u32,
    pub days: f64,
    pub quantum_secs: f64,
    pub quanta: u32,
    pub demand_mb_s_per_tb: f64,
    pub seed: u64,
    /// Per simulated mode, by name.
    pub modes: BTreeMap<&'static str, ModeSummary>,
    /// The skip-deleted imperative and the elide-deleted optimal, by name.
    pub variants: BTreeMap<&'static str, ModeSummary>,
    #[serde(flatten)]
    pub comparisons: Comparisons,
    pub demand_realised: BTreeMap<String, f64>,
    pub scrub_deleted_fraction: Option<f64>,
    pub churn: Churn,
    pub over_budget_quanta: u64,
    #[serde(flatten)]
    pub cost: RunCost,
}

impl SimResult {
    /// Per simulated mode, its totals by mode name.
    pub fn mode_summaries(&self) -> BTreeMap<&'static str, ModeSummary> {
        self.modes.iter().map(|m| (m.mode.name(), ModeSummary::from(m))).collect()
    }

    /// The run's summary, with what it cost the caller.
    pub fn summary(&self, cost: RunCost) -> RunSummary {
        let v = &self.variants;
        let variants = [
            ("imperative_skip_deleted", &v.imperative_skip_deleted),
            ("optimal_elide_deleted", &v.optimal_elide_deleted),
        ]
        .into_iter()
        .filter_map(|(name, m)| m.as_ref().map(|m| (name, ModeSummary::from(m))))
        .collect();
        RunSummary {
            mix: self.mix.clone(),
            capacity_bytes: self.capacity_bytes,
            drive_bytes: self.drive_bytes,
            disks: self.disks,
            days: self.days,
            quantum_secs: self.quantum_secs,
            quanta: self.quanta,
            demand_mb_s_per_tb: self.demand_mb_s_per_tb,
            seed: self.seed,
            modes: self.mode_summaries(),
            variants,
            comparisons: self.comparisons.clone(),
            demand_realised: self.demand_realised.clone(),
            scrub_deleted_fraction: self.churn.scrub_deleted_fraction,
            churn: self.churn.clone(),
            over_budget_quanta: self.over_budget_quanta,
            cost,
        }
    }

    /// The run as a text table, one line per mode, variant and comparison.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} mix, {} of {} drives ({} disks), {:.0} days, demand {} MB/s per TB",
            self.mix,
            format_bytes(self.capacity_bytes),
            format_bytes(self.drive_bytes),
            self.disks,
            self.days,
            self.demand_mb_s_per_tb
        );
        for m in self.modes.iter() {
            let wall = m.io_wall_drive_bytes.map_or("-".to_string(), format_bytes);
            let _ = writeln!(out, "  {m}  IO wall {wall}");
        }
        for (label, variant) in [
            ("imperative, skip deleted + LRU", &self.variants.imperative_skip_deleted),
            ("optimal, elide deleted", &self.variants.optimal_elide_deleted),
        ] {
            if let Some(m) = variant {
                let _ = writeln!(
                    out,
                    "  {label}: disk {}, utilisation {:.1} %",
                    format_bytes(m.disk_bytes),
                    m.utilization * 100.0
                );
            }
        }
        let c = &self.comparisons;
        for (label, value) in [
            ("savings vs imperative (paper: every declared byte)", c.savings_vs_imperative),
            ("savings vs imperative skipping deleted sets", c.savings_vs_imperative_skip_deleted),
            ("gap to optimal (paper: each block once)", c.gap_to_optimal),
            ("gap to optimal eliding deleted sets", c.gap_to_optimal_elide_deleted),
        ] {
            if let Some(v) = value {
                let _ = writeln!(out, "  {label:<52} {:>6.1} %", v * 100.0);
            }
        }
        let realised: Vec<String> = self.demand_realised.iter().map(|(t, v)| format!("{t} {:.2}", v)).collect();
        let _ = writeln!(out, "  demand realised (generated / nominal): {}", realised.join(", "));
        if let Some(f) = self.churn.scrub_deleted_fraction {
            let _ = writeln!(out, "  scrubbing's declared bytes deleted before read: {:.1} %", f * 100.0);
        }
        let _ = writeln!(
            out,
            "  day-0 files deleted by the horizon: {:.1} %; fill {:.1} → {:.1} %",
            self.churn.initial_files_deleted_fraction * 100.0,
            self.churn.fill_start * 100.0,
            self.churn.fill_end * 100.0
        );
        let _ = writeln!(
            out,
            "  quanta {} (with drain), planner over budget in {} quanta",
            self.quanta, self.over_budget_quanta
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sim_result;

    #[test]
    fn the_summary_keeps_the_totals_and_drops_the_series() {
        let r = sim_result();
        let s = r.summary(RunCost { wall_seconds: 1.5, peak_rss_bytes: 42 });
        assert_eq!(s.modes.keys().copied().collect::<Vec<_>>(), ["declarative", "imperative", "optimal"]);
        assert_eq!(s.modes["declarative"].disk_bytes, 600);
        assert_eq!(s.variants.keys().copied().collect::<Vec<_>>(), ["imperative_skip_deleted"]);
        assert_eq!(s.scrub_deleted_fraction, Some(0.25));
        let json = serde_json::to_value(&s).unwrap();
        assert!(json.get("series").is_none() && json["modes"]["optimal"].get("series").is_none());
        // The comparisons and the cost sit at the top level.
        assert_eq!(json["savings_vs_imperative"].as_f64(), Some(0.4));
        assert_eq!(json["peak_rss_bytes"], 42);
        let text = serde_json::to_string(&s).unwrap();
        let mode = serde_json::to_string(&s.modes["optimal"]).unwrap();
        assert!(mode.starts_with(r#"{"cache_bytes_per_disk":4,"deadline_misses":0,"disk_bytes":500,"#), "{mode}");
        assert!(text.ends_with(r#""wall_seconds":1.5,"peak_rss_bytes":42}"#), "the cost comes last: {text}");
    }

    #[test]
    fn the_table_has_a_line_per_mode_and_comparison() {
        let table = sim_result().table();
        for needle in
            ["imperative ", "declarative ", "optimal ", "savings vs imperative (paper", "gap to optimal (paper"]
        {
            assert!(table.contains(needle), "{needle} missing:\n{table}");
        }
        assert!(!table.contains("elide deleted"), "an absent variant is left out:\n{table}");
    }
}
