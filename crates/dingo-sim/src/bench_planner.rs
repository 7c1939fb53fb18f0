//! The paper's scalability test of the planner: a cluster of the given raw
//! capacity (80 % full, 256 MB blocks, the default layout of 3-way
//! replication, RS 6-of-9 and 30-of-33 as the simulator's world keeps it)
//! with the outstanding declarations of the eight maintenance tasks at a
//! steady demand ([`SteadyLoad`]); one quantum is scheduled and dispatched,
//! and the time each step took is reported.

use crate::mix::Mix;
use crate::workload::SteadyLoad;
use crate::{ModelError, ModelSpec};
use dingo_planner::{Budget, DeclareError, DiskBudget, Planner, PlannerConfig};
use dingo_types::{TaskKind, Timestamp, Topology, format_bytes};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use thiserror::Error;

/// What to build and how much the planner may read. With the `clap`
/// feature these are also `dingo bench planner`'s flags.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PlannerBenchOptions {
    /// Raw capacity of the synthetic cluster (e.g. 100PB, 1EB).
    #[cfg_attr(feature = "clap", arg(long = "capacity", value_name = "CAPACITY", default_value = "100PB", value_parser = dingo_types::parse_bytes))]
    pub capacity_bytes: u64,
    /// Disks per storage node (members of a stripe sit on distinct nodes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelSpec::default().disks_per_node))]
    pub disks_per_node: u32,
    /// Maintenance read demand in MB/s per TB.
    #[cfg_attr(feature = "clap", arg(long = "demand", value_name = "DEMAND", default_value_t = 2.0))]
    pub demand_mb_s_per_tb: f64,
    /// Quantum length in seconds.
    #[cfg_attr(feature = "clap", arg(long = "quantum-secs", value_name = "QUANTUM_SECS", default_value = "3600", value_parser = seconds))]
    pub quantum: Duration,
    /// Cluster-wide budget as a multiple of the demand over one quantum.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.5))]
    pub budget_factor: f64,
    /// Disk-head time each disk may spend on maintenance, as a fraction of the quantum.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.5))]
    pub disk_share: f64,
    /// Seeds the cluster's layout and the load.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
}

/// Whole seconds as a duration (a clap value parser).
#[cfg(feature = "clap")]
fn seconds(s: &str) -> Result<Duration, std::num::ParseIntError> {
    s.parse().map(Duration::from_secs)
}

impl PlannerBenchOptions {
    /// The synthetic cluster: the default layout at this capacity, disks
    /// per node and seed.
    pub fn cluster(&self) -> ModelSpec {
        ModelSpec {
            raw_capacity: self.capacity_bytes,
            disks_per_node: self.disks_per_node,
            seed: self.seed,
            ..ModelSpec::default()
        }
    }
}

#[derive(Debug, Error)]
pub enum PlannerBenchError {
    #[error("the demand, budget factor, disk share and quantum must be positive")]
    NotPositive,
    #[error("building the cluster model")]
    Model(#[from] ModelError),
    #[error("declaring {task}")]
    Declare {
        task: TaskKind,
        #[source]
        error: DeclareError,
    },
}

/// The benchmark's figures; field order is the JSON's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannerBenchReport {
    pub capacity_bytes: u64,
    pub disks: u32,
    pub blocks: u64,
    pub chunks: u64,
    pub declarations: u64,
    pub sets: u64,
    pub scheduled_sets: u64,
    pub scheduled_bytes: u64,
    pub free_bytes: u64,
    pub budget_bytes: u64,
    pub dispatch_groups: u64,
    pub max_pinned_bytes: u64,
    pub split_loss_bytes: u64,
    pub planner_memory_bytes: u64,
    /// Building the model and declaring the load.
    pub build_seconds: f64,
    pub plan_seconds: f64,
    pub dispatch_seconds: f64,
}

/// Builds the cluster and its load, then schedules and dispatches one quantum.
pub fn run(options: &PlannerBenchOptions) -> Result<PlannerBenchReport, PlannerBenchError> {
    let o = options;
    if !(o.demand_mb_s_per_tb > 0.0 && o.budget_factor > 0.0 && o.disk_share > 0.0 && !o.quantum.is_zero()) {
        return Err(PlannerBenchError::NotPositive);
    }
    let started = Instant::now();
    let capacity_bytes = o.capacity_bytes;
    // Mid-month, so every periodic task has jobs of every age open.
    let now = Timestamp::from_secs(30 * 24 * 3600);
    let load = SteadyLoad { demand_mb_s_per_tb: o.demand_mb_s_per_tb, mix: Mix::bench(), quantum: o.quantum, now };
    let mut planner = Planner::new(PlannerConfig { quantum: o.quantum, ..PlannerConfig::default() });
    let mut sets = 0;
    let world = load.for_each_declaration(o.cluster(), |model, decl| {
        let id = planner
            .declare(model, now, &decl)
            .map_err(|error| PlannerBenchError::Declare { task: decl.task, error })?;
        sets += planner.status(id).map_or(0, |s| s.total_sets);
        Ok::<_, PlannerBenchError>(())
    })?;
    let model = world.model;
    let build_seconds = started.elapsed().as_secs_f64();

    let demand_bytes = o.demand_mb_s_per_tb * 1e6 * (capacity_bytes as f64 / 1e12) * o.quantum.as_secs_f64();
    let budget = Budget {
        cluster_bytes: (demand_bytes * o.budget_factor) as u64,
        disk_head_time_us: DiskBudget::Uniform((o.quantum.as_secs_f64() * 1e6 * o.disk_share) as u64),
    };
    let t = Instant::now();
    let (schedule, _report) = planner.schedule(&model, now, &budget);
    let plan_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let dispatch = planner.dispatch(&schedule);
    let dispatch_seconds = t.elapsed().as_secs_f64();

    Ok(PlannerBenchReport {
        capacity_bytes,
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
    })
}

impl PlannerBenchReport {
    /// The figures as a text table, one per line.
    pub fn table(&self) -> String {
        let mut out = format!("planner benchmark: one {} cluster, one quantum\n", format_bytes(self.capacity_bytes));
        let mut line = |label: &str, value: String, note: &str| {
            let _ = writeln!(out, "  {label:<22}{value:>16}{note}");
        };
        line("disks", self.disks.to_string(), "");
        line("blocks", self.blocks.to_string(), "");
        line("chunks", self.chunks.to_string(), "");
        line("declarations", self.declarations.to_string(), "");
        line("sets declared", self.sets.to_string(), "");
        line("sets scheduled", self.scheduled_sets.to_string(), "");
        let budget = format!("  (budget {})", format_bytes(self.budget_bytes));
        line("scheduled disk bytes", format_bytes(self.scheduled_bytes), &budget);
        line("free bytes", format_bytes(self.free_bytes), "");
        line("dispatch groups", self.dispatch_groups.to_string(), "");
        line("max pinned per group", format_bytes(self.max_pinned_bytes), "");
        line("split loss", format_bytes(self.split_loss_bytes), "");
        line("planner memory", format_bytes(self.planner_memory_bytes), "");
        line("build load", format!("{:.2}s", self.build_seconds), "");
        line("schedule", format!("{:.2}s", self.plan_seconds), "");
        line("dispatch", format!("{:.2}s", self.dispatch_seconds), "");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PB: u64 = 1_000_000_000_000_000;

    /// A small cluster: 2 PB, two disks per node.
    fn options() -> PlannerBenchOptions {
        PlannerBenchOptions {
            capacity_bytes: 2 * PB,
            disks_per_node: 2,
            seed: 1,
            demand_mb_s_per_tb: 2.0,
            quantum: Duration::from_secs(3600),
            budget_factor: 1.5,
            disk_share: 0.5,
        }
    }

    #[test]
    fn one_quantum_stays_within_its_budget() {
        let report = run(&options()).unwrap();
        assert!(report.declarations > 0 && report.sets >= report.scheduled_sets);
        assert!(report.scheduled_sets > 0, "{report:?}");
        assert!(report.scheduled_bytes <= report.budget_bytes, "{report:?}");
        // 2 MB/s per TB over 2 PB for an hour, ×1.5.
        assert_eq!(report.budget_bytes, (2e6 * 2_000.0 * 3600.0 * 1.5) as u64);
        assert!(report.table().contains("sets scheduled"));
    }

    #[test]
    fn a_zero_demand_is_refused() {
        let o = PlannerBenchOptions { demand_mb_s_per_tb: 0.0, ..options() };
        assert!(matches!(run(&o), Err(PlannerBenchError::NotPositive)));
    }
}
