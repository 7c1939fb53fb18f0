//! `dingo bench iocontrol fairness`: per-tenant guarantees with tenants
//! joining and leaving (`dingo_iobench::fairness`), printed, as JSON, and
//! as files.

use anyhow::Context;
use clap::Args;
use dingo_iobench::fairness::Report;
use dingo_report::plots::{self, LineChart, Series, TASK_COLORS};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct FairnessArgs {
    /// 5 s phases instead of 10 s.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object: mechanism and baseline side by side.
    #[arg(long)]
    json: bool,
    /// Write fairness.json, the per-second series fairness-series.csv and
    /// the plot fairness-tenants.{svg,png} here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where the clusters keep their data.
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

pub async fn run(a: FairnessArgs) -> anyhow::Result<()> {
    let opts =
        dingo_iobench::fairness::Options { exe: std::env::current_exe()?, work_dir: a.dir.clone(), quick: a.quick };
    let report = dingo_iobench::fairness::run(&opts, |line| eprintln!("{line}")).await?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("fairness.json"), &json)?;
        std::fs::write(dir.join("fairness-series.csv"), dingo_iobench::fairness::series_csv(&report))?;
        plot(dir, &report)?;
    }
    if a.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "fairness: 7 phases of {} s, guarantees {:?} MB/s, median of {} runs side by side ({})",
        report.spec.phase_s,
        report.guarantees_mb_s.iter().map(|g| format!("{g:.1}")).collect::<Vec<_>>(),
        report.runs,
        report.head_time_bound
    );
    for r in [&report.mechanism, &report.baseline] {
        println!(
            "{:<9} lowest share of a guarantee in a {} s window {:.3} (runs {:?}; twin {:.3}), {} of {} windows below \
             95 %, CPU {:.0} %",
            r.policy,
            report.spec.window_s,
            r.min_guarantee_ratio,
            r.min_guarantee_ratio_runs,
            r.twin_min_guarantee_ratio,
            r.windows_below_95_percent,
            r.windows_checked,
            r.cpu_utilisation * 100.0
        );
    }
    println!("bars met: {:?}", report.bars_met);
    Ok(())
}

/// Each tenant's MB/s per second in the first run, classful solid, FIFO
/// dashed (PAIO Fig. 10).
fn plot(dir: &Path, r: &Report) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for (p, dashed) in [(&r.mechanism, false), (&r.baseline, true)] {
        let Some(c) = p.completions.first() else { continue };
        for (t, &color) in TASK_COLORS.iter().take(4).enumerate() {
            let (join, leave) = r.spec.active_s(t);
            let points = (join..leave)
                .map(|s| {
                    let bytes: u64 =
                        c.0.iter().filter(|&&(who, at, _)| who == t && at / 1_000_000 == s).map(|x| x.2).sum();
                    (s as f64, bytes as f64 / 1e6)
                })
                .collect();
            series.push(Series {
                name: format!("{} tenant {} (guarantee {:.1} MB/s)", p.policy, t + 1, r.guarantees_mb_s[t]),
                color,
                points,
                dashed,
            });
        }
    }
    plots::save_line(
        dir,
        "fairness-tenants",
        &LineChart {
            title: "Tenants joining and leaving: MB/s per tenant".into(),
            x_label: "seconds".into(),
            y_label: "MB/s read per tenant".into(),
            series,
            hline: None,
            markers: (1..7).map(|p| ((p * r.spec.phase_s) as f64, format!("phase {}", p + 1))).collect(),
        },
    )?;
    Ok(())
}
