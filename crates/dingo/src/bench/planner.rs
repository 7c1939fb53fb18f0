//! `dingo bench planner`: the paper's scalability test. Builds a cluster of
//! the given raw capacity (80 % full, 256 MB blocks, 25 % 3-way replicated,
//! 75 % RS 6-of-9 and 30-of-33) with the outstanding declarations of the
//! eight maintenance tasks at 2 MB/s per TB, then schedules and dispatches
//! one quantum and reports time and peak memory.

use anyhow::{Context, bail};
use clap::Args;
use dingo_planner::{Budget, DiskBudget, Planner, PlannerConfig};
use dingo_sim::workload::{Mix, SteadyLoad};
use dingo_sim::{ClusterModel, ClusterSpec};
use dingo_types::{Timestamp, Topology, format_bytes, parse_bytes};
use serde::Serialize;
use std::time::{Duration, Instant};

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

#[derive(Serialize)]
struct PlannerBenchReport {
    capacity_bytes: u64,
    disks: u32,
    blocks: u64,
    chunks: u64,
    declarations: u64,
    sets: u64,
    scheduled_sets: u64,
    scheduled_bytes: u64,
    free_bytes: u64,
    budget_bytes: u64,
    dispatch_groups: u64,
    max_pinned_bytes: u64,
    split_loss_bytes: u64,
    planner_memory_bytes: u64,
    build_seconds: f64,
    plan_seconds: f64,
    dispatch_seconds: f64,
    peak_rss_bytes: u64,
}

pub fn run(args: &PlannerBenchArgs) -> anyhow::Result<()> {
    if !(args.demand > 0.0 && args.budget_factor > 0.0 && args.disk_share > 0.0 && args.quantum_secs > 0) {
        bail!("--demand, --budget-factor, --disk-share and --quantum-secs must be positive");
    }
    let started = Instant::now();
    let spec = ClusterSpec { raw_capacity: args.capacity, seed: args.seed, ..ClusterSpec::default() };
    let mut model = ClusterModel::new(spec).context("building the cluster model")?;
    let now = Timestamp::from_secs(30 * 24 * 3600);
    let load = SteadyLoad { demand_mb_s_per_tb: args.demand, mix: Mix::bench(), now, seed: args.seed };
    let quantum = Duration::from_secs(args.quantum_secs);
    let mut planner = Planner::new(PlannerConfig { quantum, ..PlannerConfig::default() });
    let mut sets = 0;
    load.for_each_declaration(&mut model, |model, decl| {
        let id = planner.declare(model, now, &decl).with_context(|| format!("declaring {}", decl.task))?;
        sets += planner.status(id).map_or(0, |s| s.total_sets);
        anyhow::Ok(())
    })?;
    let build_seconds = started.elapsed().as_secs_f64();

    let demand_bytes = args.demand * 1e6 * (args.capacity as f64 / 1e12) * quantum.as_secs_f64();
    let budget = Budget {
        cluster_bytes: (demand_bytes * args.budget_factor) as u64,
        disk_head_time_us: DiskBudget::Uniform((quantum.as_secs_f64() * 1e6 * args.disk_share) as u64),
    };
    let t = Instant::now();
    let (schedule, _report) = planner.schedule(&model, now, &budget);
    let plan_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let dispatch = planner.dispatch(&schedule);
    let dispatch_seconds = t.elapsed().as_secs_f64();

    let report = PlannerBenchReport {
        capacity_bytes: args.capacity,
        disks: model.disk_count(),
        blocks: model.block_count(),
        chunks: model.chunk_count(),
        declarations: planner.outstanding().count() as u64,
        sets,
        scheduled_sets: schedule.sets.len() as u64,
        scheduled_bytes: schedule.physical_bytes(),
        free_bytes: schedule.free_bytes(),
        budget_bytes: budget.cluster_bytes,
        dispatch_groups: dispatch.groups.len() as u64,
        max_pinned_bytes: dispatch.max_pinned_bytes,
        split_loss_bytes: dispatch.split_loss_bytes,
        planner_memory_bytes: planner.memory_bytes(),
        build_seconds,
        plan_seconds,
        dispatch_seconds,
        peak_rss_bytes: super::peak_rss_bytes(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &PlannerBenchReport) {
    println!("planner benchmark: one {} cluster, one quantum", format_bytes(r.capacity_bytes));
    println!("  disks                 {:>16}", r.disks);
    println!("  blocks                {:>16}", r.blocks);
    println!("  chunks                {:>16}", r.chunks);
    println!("  declarations          {:>16}", r.declarations);
    println!("  sets declared         {:>16}", r.sets);
    println!("  sets scheduled        {:>16}", r.scheduled_sets);
    println!(
        "  scheduled disk bytes  {:>16}  (budget {})",
        format_bytes(r.scheduled_bytes),
        format_bytes(r.budget_bytes)
    );
    println!("  free bytes            {:>16}", format_bytes(r.free_bytes));
    println!("  dispatch groups       {:>16}", r.dispatch_groups);
    println!("  max pinned per group  {:>16}", format_bytes(r.max_pinned_bytes));
    println!("  split loss            {:>16}", format_bytes(r.split_loss_bytes));
    println!("  planner memory        {:>16}", format_bytes(r.planner_memory_bytes));
    println!("  build load            {:>15.2}s", r.build_seconds);
    println!("  schedule              {:>15.2}s", r.plan_seconds);
    println!("  dispatch              {:>15.2}s", r.dispatch_seconds);
    println!("  peak RSS              {:>16}", format_bytes(r.peak_rss_bytes));
}
