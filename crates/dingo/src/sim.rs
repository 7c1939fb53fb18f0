//! `dingo sim run|resume|sweep|paper`: the datacenter simulator
//! (`dingo_sim::run`, `dingo_sim::paper`) with a progress bar and what the
//! run cost; the files of `--out` are written by `dingo_report`.

use dingo_sim::cost::{CostMeter, peak_rss_bytes};
use dingo_sim::paper::PaperScale;
use dingo_sim::progress_log::ProgressLog;
use dingo_sim::run::{ResumeOptions, RunOptions, RunOutput, Segment, SweepOptions};
use dingo_types::format_bytes;
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Subcommand)]
pub enum SimCommand {
    /// Simulate one cluster over the horizon in one or all modes.
    Run {
        #[command(flatten)]
        options: RunOptions,
        #[command(flatten)]
        output: RunOutput,
    },
    /// Continue a run from its checkpoint to the end; prints what `sim run` would.
    Resume {
        #[command(flatten)]
        options: ResumeOptions,
        #[command(flatten)]
        output: RunOutput,
    },
    /// Simulate a series of clusters varying one parameter.
    Sweep {
        #[command(flatten)]
        options: SweepOptions,
        #[command(flatten)]
        output: RunOutput,
    },
    /// Regenerate every simulator figure of the Declarative IO paper's
    /// evaluation and the thesis' supply and cache studies, with a page
    /// that puts each published number beside the measured one.
    Paper {
        #[command(flatten)]
        scale: PaperScale,
        /// Where to write the figures, data and pages.
        #[arg(long, default_value = "sim-paper")]
        out: PathBuf,
        /// Print one JSON object (per figure, the published and measured values) instead of the table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: SimCommand) -> anyhow::Result<()> {
    let meter = CostMeter::default();
    match command {
        SimCommand::Run { options, output } => show_run(options.start()?, output)?,
        SimCommand::Resume { options, output } => show_run(options.start()?, output)?,
        SimCommand::Sweep { options, output: RunOutput { out, json } } => {
            let mut progress = Progress::new(json, "quanta");
            let sweep = options.run(|p| {
                progress.bar.set_message(format!("points done {}/{}", p.runs_done, p.runs));
                progress.advance(p.quanta_done, p.quanta_expected);
            })?;
            progress.bar.finish_and_clear();
            if let Some(dir) = &out {
                dingo_report::sweep::write_sweep(dir, options.what, &sweep.points, &sweep.results, &sweep.summary)?;
            }
            if json {
                return crate::output::json(&sweep.summary);
            }
            print!("{}", sweep.summary.table());
            if let Some(dir) = &out {
                outln!("report: {}", dir.join("report.html").display());
            }
        }
        SimCommand::Paper { scale, out, json } => {
            let mut progress = Progress::new(json, "runs");
            let runs = dingo_sim::paper::run(&scale.options(), scale.jobs(), |i, n, p| {
                progress.bar.set_message(format!("{} cluster {:?} {}={}", p.figure, p.cluster, p.parameter, p.x));
                progress.advance(i as u64, n as u64);
            })?;
            progress.bar.finish_and_clear();
            let summary = runs.summary(meter.cost());
            dingo_report::paper::write_paper(&out, &runs, &summary)?;
            if json {
                return crate::output::json(&summary);
            }
            print!("{}", runs.markdown());
            outln!("\n{:.0} s; pages: {}", summary.cost.wall_seconds, out.join("paper.html").display());
        }
    }
    Ok(())
}

/// Runs a simulation to its end and prints it as `output` asks.
fn show_run(segment: Segment, RunOutput { out, json }: RunOutput) -> anyhow::Result<()> {
    let mut progress = Progress::new(json, "quanta");
    let config = segment.sim.config();
    progress.bar.set_message(format!("{} {}", config.mix.name, format_bytes(config.cluster.raw_capacity)));
    let (result, cost) = segment.finish(|done, expected| progress.advance(done, expected))?;
    progress.bar.finish_and_clear();
    let summary = result.summary(cost);
    if let Some(dir) = &out {
        dingo_report::run::write_run(dir, &result, &summary)?;
    }
    if json {
        return crate::output::json(&summary);
    }
    print!("{}", result.table());
    outln!("  {:.1} s, peak RSS {}", cost.wall_seconds, format_bytes(cost.peak_rss_bytes));
    if let Some(dir) = &out {
        outln!("  report: {}", dir.join("report.html").display());
    }
    Ok(())
}

/// A run's progress on stderr: indicatif's bar on a terminal, else (`--json`,
/// stderr in a file) a line a minute, so that a long run can be followed.
struct Progress {
    bar: ProgressBar,
    log: Option<ProgressLog>,
}

impl Progress {
    fn new(json: bool, unit: &'static str) -> Progress {
        let template = format!("{{msg}} [{{bar:30}}] {{pos}}/{{len}} {unit}, eta {{eta}}");
        let bar = if json { ProgressBar::hidden() } else { crate::output::progress_bar(Some(0), &template) };
        Progress { log: bar.is_hidden().then(|| ProgressLog::new(Instant::now(), unit)), bar }
    }

    fn advance(&mut self, done: u64, len: u64) {
        self.bar.set_length(len);
        self.bar.set_position(done);
        if let Some(line) = self.log.as_mut().and_then(|log| log.line(Instant::now(), &self.bar.message(), done, len)) {
            eprintln!("{line}, peak RSS {}", format_bytes(peak_rss_bytes()));
        }
    }
}
