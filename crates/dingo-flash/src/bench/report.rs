//! Writes a report: JSON, a CSV of every run, and a Markdown page.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::bench::{BenchReport, DEPLOYED_DRIVE_BYTES, DEPLOYED_REQUESTS_PER_SECOND, RunResult, TraceFootprints};

/// Writes `flash.json`, `flash-runs.csv` and `flash.md` into `dir`.
pub fn write_report(report: &BenchReport, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("flash.json"), serde_json::to_string_pretty(report)?)?;
    std::fs::write(dir.join("flash-runs.csv"), runs_csv(report))?;
    std::fs::write(dir.join("flash.md"), markdown(report))?;
    Ok(())
}

fn runs_csv(report: &BenchReport) -> String {
    let mut out = String::from(
        "system,label,admission_probability,miss_ratio,app_write_bytes_per_request,device_write_bytes_per_request,\
         app_wa,device_wa,total_wa,dram_bits_per_object,flash_utilisation,flash_fill,max_active_zones,\
         bloom_false_positive_reads_per_request,within_budget\n",
    );
    let all = report.runs.iter().chain(&report.fairywren).chain(&report.fairywren_meta);
    for r in all.chain(&report.kangaroo_ablations) {
        let w = r.write_amplification;
        let _ = writeln!(
            out,
            "{},{},{},{:.5},{:.1},{:.1},{:.3},{:.3},{:.3},{:.2},{:.3},{:.3},{},{:.4},{}",
            r.system,
            r.label,
            r.admission_probability,
            r.miss_ratio,
            r.app_write_bytes_per_request,
            r.device_write_bytes_per_request,
            w.app,
            w.device,
            w.total,
            r.dram_bits_per_object,
            r.flash_utilisation,
            r.flash_fill,
            r.max_active_zones,
            r.bloom_false_positive_reads_per_request,
            r.within_budget
        );
    }
    out
}

/// The report as text is its Markdown page.
impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&markdown(self))
    }
}

/// The Markdown page: budgets, best runs, published vs measured, all runs.
pub fn markdown(report: &BenchReport) -> String {
    let b = report.budgets;
    let mut out = String::new();
    let _ = writeln!(out, "# dingo-flash benchmark ({:?})\n", report.size);
    let _ = writeln!(
        out,
        "Device {} MiB, DRAM budget {} KiB of metadata (1:125), device-write budget {} B/request; \
         trace {}, {} requests ({} warm-up, not measured).\n",
        b.device_bytes >> 20,
        b.dram_budget_bits / 8 / 1024,
        b.device_write_bytes_per_request,
        report.trace,
        b.requests,
        b.warmup_requests
    );
    let _ = writeln!(out, "## Published vs measured\n");
    let _ = writeln!(out, "| claim | thesis | measured | bar | met |\n|---|---|---|---|---|");
    for c in &report.comparisons {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            c.claim,
            c.published,
            c.measured,
            c.bar,
            if c.met { "yes" } else { "no" }
        );
    }
    let _ = writeln!(out, "\n## Best run per system within both budgets\n");
    table(&mut out, report.best_within_budget.iter());
    let _ = writeln!(out, "\n## Kangaroo vs FairyWREN, same flash and DRAM, no write budget\n");
    table(&mut out, report.fairywren.iter());
    breakdown(&mut out, &report.fairywren);
    out.push_str(&meta_markdown(&report.meta_trace, &report.fairywren_meta));
    out.push_str(&footprints_markdown(&report.footprints));
    let _ = writeln!(out, "\n## Kangaroo ablations, admitting everything\n");
    table(&mut out, report.kangaroo_ablations.iter());
    let _ = writeln!(out, "\n## Every budgeted run\n");
    table(&mut out, report.runs.iter());
    out
}

/// The Meta-like comparison (Fig. 5.12) as a Markdown section.
pub fn meta_markdown(trace: &str, runs: &[RunResult]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Kangaroo vs FairyWREN on the Meta-like trace (Fig. 5.12), both with a 10 % LOC\n\nTrace {trace}.\n"
    );
    table(&mut out, runs.iter());
    breakdown(&mut out, runs);
    out
}

/// The carbon and cost section: each trace's systems on their
/// lowest-carbon density, and FairyWREN's cut against Kangaroo.
fn footprints_markdown(footprints: &[TraceFootprints]) -> String {
    let mut out = String::new();
    let Some(params) = footprints.first().map(|f| f.params) else {
        return out;
    };
    let _ = writeln!(
        out,
        "\n## Carbon and cost, deployed at {:.0} TB and {:.0} K requests/s for {:.0} years (Fig. 5.13-5.16 method)\n\n\
         Each system's measured device writes per request and index DRAM (runs above, everything admitted), \
         on the flash density that emits least (`dingo_flash::carbon`). CPU left out (the same server for all).\n\n\
         | trace | system | density | flash bought | sized by | flash kg CO2/yr | DRAM kg CO2/yr | flash $/yr | DRAM $/yr |\n\
         |---|---|---|---|---|---|---|---|---|",
        DEPLOYED_DRIVE_BYTES / 1e12,
        DEPLOYED_REQUESTS_PER_SECOND / 1e3,
        params.lifetime_years
    );
    for trace in footprints {
        for f in &trace.systems {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} TB | {} | {:.1} | {:.1} | {:.0} | {:.0} |",
                trace.trace,
                f.system,
                f.density.name(),
                f.flash_bytes / 1e12,
                if f.write_bound { "writes" } else { "capacity" },
                f.flash_kg_co2_per_year,
                f.dram_kg_co2_per_year,
                f.flash_dollars_per_year,
                f.dram_dollars_per_year
            );
        }
    }
    out.push('\n');
    for trace in footprints {
        if let Some((carbon, cost)) = trace.fairywren_vs_kangaroo() {
            let _ = writeln!(
                out,
                "- {}: FairyWREN's flash carbon {:+.1} %, flash cost {:+.1} % against Kangaroo's \
                 (thesis: −33 % and −35 %, Twitter trace at a 30 % miss ratio, Fig. 5.1).",
                trace.trace,
                carbon * 100.0,
                cost * 100.0
            );
        }
    }
    out
}

/// FairyWREN's flash pages by cause, for the runs that have them.
fn breakdown(out: &mut String, runs: &[RunResult]) {
    let _ = writeln!(
        out,
        "\nFairyWREN's flash pages by cause (whole run; LOC segments not counted), and FWLog objects each kind of set write absorbed per page:\n\n| system | log segments | FWLog flushes | GC packs | GC copies | objects per flush page | objects per GC-pack page |\n|---|---|---|---|---|---|---|"
    );
    for r in runs {
        if let Some(w) = r.fairywren_writes {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.2} | {:.2} |",
                r.system,
                w.log_pages,
                w.flush_pages,
                w.gc_pack_pages,
                w.gc_copy_pages,
                w.flush_objects as f64 / w.flush_pages.max(1) as f64,
                w.gc_pack_objects as f64 / w.gc_pack_pages.max(1) as f64
            );
        }
    }
}

fn table<'a>(out: &mut String, runs: impl Iterator<Item = &'a RunResult>) {
    let _ = writeln!(
        out,
        "| system | config | miss ratio | app B/req | device B/req | app WA | device WA | total WA | DRAM b/obj | flash used | max zones | in budget |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in runs {
        let w = r.write_amplification;
        let _ = writeln!(
            out,
            "| {} | {} | {:.4} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} % | {} | {} |",
            r.system,
            r.label,
            r.miss_ratio,
            r.app_write_bytes_per_request,
            r.device_write_bytes_per_request,
            w.app,
            w.device,
            w.total,
            r.dram_bits_per_object,
            r.flash_utilisation * 100.0,
            r.max_active_zones,
            if r.within_budget { "yes" } else { "no" }
        );
    }
}
