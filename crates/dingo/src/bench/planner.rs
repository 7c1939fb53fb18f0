//! `dingo bench planner`: `dingo_sim::bench_planner` (the paper's
//! scalability test) from the command line.

use clap::Args;
use dingo_sim::ClusterSpec;
use dingo_sim::bench_planner::{self, PlannerBenchOptions, PlannerBenchReport};
use dingo_types::{format_bytes, parse_bytes};
use serde::Serialize;
use std::time::Duration;

#[derive(Args)]
pub struct PlannerBenchArgs {
    /// Raw capacity of the synthetic cluster (e.g. 100PB, 1EB).
    #[arg(long, default_value = "100PB", value_parser = parse_bytes)]
    capacity: u64,
    /// Maintenance read demand in MB/s per TB.
    #[arg(long, default_value_t = 2.0)]
    demand: f64,
    /// Quantum length in seconds.
    #[arg(long, default_value_t = 3600)]
    quantum_secs: u64,
    /// Cluster-wide budget as a multiple of the demand over one quantum.
    #[arg(long, default_value_t = 1.5)]
    budget_factor: f64,
    /// Disk-head time each disk may spend on maintenance, as a fraction of the quantum.
    #[arg(long, default_value_t = 0.5)]
    disk_share: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// The report and this process's peak memory.
#[derive(Serialize)]
struct Output {
    #[serde(flatten)]
    report: PlannerBenchReport,
    peak_rss_bytes: u64,
}

pub fn run(args: &PlannerBenchArgs) -> anyhow::Result<()> {
    let report = bench_planner::run(&PlannerBenchOptions {
        cluster: ClusterSpec { raw_capacity: args.capacity, seed: args.seed, ..ClusterSpec::default() },
        demand_mb_s_per_tb: args.demand,
        quantum: Duration::from_secs(args.quantum_secs),
        budget_factor: args.budget_factor,
        disk_share: args.disk_share,
    })?;
    crate::output::print(&Output { report, peak_rss_bytes: super::peak_rss_bytes() }, args.json)
}

/// The report's table, then the peak memory.
impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.report.table())?;
        writeln!(f, "  peak RSS              {:>16}", format_bytes(self.peak_rss_bytes))
    }
}
