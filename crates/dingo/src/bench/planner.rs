//! `dingo bench planner`: `dingo_sim::bench_planner` (the paper's
//! scalability test) with this process's peak memory.

use dingo_sim::bench_planner::{PlannerBenchOptions, PlannerBenchReport};
use dingo_types::format_bytes;

#[derive(clap::Args)]
pub struct PlannerBenchArgs {
    #[command(flatten)]
    options: PlannerBenchOptions,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// The report and this process's peak memory.
#[derive(serde::Serialize)]
struct Output {
    #[serde(flatten)]
    report: PlannerBenchReport,
    peak_rss_bytes: u64,
}

pub fn run(args: &PlannerBenchArgs) -> anyhow::Result<()> {
    let report = dingo_sim::bench_planner::run(&args.options)?;
    crate::output::print(&Output { report, peak_rss_bytes: dingo_sim::cost::peak_rss_bytes() }, args.json)
}

/// The report's table, then the peak memory.
impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.report.table())?;
        writeln!(f, "  peak RSS              {:>16}", format_bytes(self.peak_rss_bytes))
    }
}
