//! `dingo bench iocontrol waiting`: the Waiting gate against a fixed-rate
//! scrubber (`dingo_iobench::waiting`), printed, as JSON, and as files.

use anyhow::Context;
use clap::Args;
use dingo_iobench::waiting::Report;
use dingo_report::plots::{self, LineChart, MODE_COLORS, Series};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct WaitingArgs {
    /// 40 s of load per cluster instead of 60.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object: mechanism and baseline side by side.
    #[arg(long)]
    json: bool,
    /// Write waiting.json, the per-second series waiting-series.csv and the
    /// plot waiting-slowdown.{svg,png} here.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the clusters keep their data.
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

pub async fn run(a: WaitingArgs) -> anyhow::Result<()> {
    let opts = dingo_iobench::waiting::Options {
        exe: std::env::current_exe()?,
        work_dir: a.dir.clone(),
        quick: a.quick,
        seed: a.seed,
    };
    let report = dingo_iobench::waiting::run(&opts, |line| eprintln!("{line}")).await?;
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("waiting.json"), &json)?;
        std::fs::write(dir.join("waiting-series.csv"), dingo_iobench::waiting::series_csv(&report))?;
        plot(dir, &report)?;
    }
    if a.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "waiting: {} s per cluster, median of {} runs side by side ({})",
        report.spec.duration_s, report.runs, report.head_time_bound
    );
    for b in &report.baseline {
        println!(
            "fixed rate {:>4.1} % of head time: slowdown {:>5.2} ms, scrub {:>5.1} MB/s (twin {:.2} ms, {:.1} MB/s)",
            b.share_of_head_time * 100.0,
            b.slowdown_ms,
            b.scrub_mb_s,
            b.twin_slowdown_ms,
            b.twin_scrub_mb_s
        );
    }
    for g in &report.mechanism {
        println!(
            "Waiting goal {} ms: slowdown {:.2} ms (bar <= {:.2}), scrub {:.1} MB/s = {:.1} x fixed rate at equal \
             slowdown{} (bar >= 3), free bytes {:.2} of planned (bar >= 0.9), CPU {:.0} %; twin {:.2} ms, {:.1} MB/s, {:.2}",
            g.goal_ms,
            g.slowdown_ms,
            1.25 * g.goal_ms,
            g.scrub_mb_s,
            g.scrub_mb_s_ratio,
            if g.fixed_rate_extrapolated { " (extrapolated)" } else { "" },
            g.achieved_free_bytes_ratio,
            g.cpu_utilisation * 100.0,
            g.twin_slowdown_ms,
            g.twin_scrub_mb_s,
            g.twin_achieved_free_bytes_ratio
        );
    }
    println!("bars met: {:?}", report.bars_met);
    Ok(())
}

/// Scrub MB/s against mean slowdown: Waiting's three goals and the
/// fixed-rate sweep, measured and twin (Practical scrubbing Fig. 15).
fn plot(dir: &Path, r: &Report) -> anyhow::Result<()> {
    let line = |name: &str, color, dashed, points: Vec<(f64, f64)>| Series { name: name.into(), color, points, dashed };
    let mut fixed: Vec<(f64, f64)> = r.baseline.iter().map(|b| (b.slowdown_ms, b.scrub_mb_s)).collect();
    let mut fixed_twin: Vec<(f64, f64)> = r.baseline.iter().map(|b| (b.twin_slowdown_ms, b.twin_scrub_mb_s)).collect();
    fixed.sort_by(|a, b| a.0.total_cmp(&b.0));
    fixed_twin.sort_by(|a, b| a.0.total_cmp(&b.0));
    plots::save_line(
        dir,
        "waiting-slowdown",
        &LineChart {
            title: "Scrub throughput against foreground slowdown".into(),
            x_label: "mean foreground slowdown (ms)".into(),
            y_label: "scrub MB/s per disk".into(),
            series: vec![
                line(
                    "Waiting (goals 1, 2, 4 ms)",
                    MODE_COLORS[1],
                    false,
                    r.mechanism.iter().map(|g| (g.slowdown_ms, g.scrub_mb_s)).collect(),
                ),
                line(
                    "Waiting, twin",
                    MODE_COLORS[1],
                    true,
                    r.mechanism.iter().map(|g| (g.twin_slowdown_ms, g.twin_scrub_mb_s)).collect(),
                ),
                line("fixed rate", MODE_COLORS[0], false, fixed),
                line("fixed rate, twin", MODE_COLORS[0], true, fixed_twin),
            ],
            hline: None,
            markers: Vec::new(),
        },
    )?;
    Ok(())
}
