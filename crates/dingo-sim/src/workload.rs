//! The planner benchmark's load: what the eight maintenance tasks have
//! declared and not yet finished at one instant of a steady month, made by
//! the simulator's own job generator ([`World::start_in_flight`]).

use crate::ModelError;
use crate::mix::Mix;
use crate::model::{ClusterModel, ModelSpec};
use crate::sim::{SimConfig, World};
use dingo_types::{Declaration, Timestamp};
use std::time::Duration;

/// A steady-state outstanding load: the jobs of the eight tasks open at
/// `now`, as the planner sees them mid-month.
#[derive(Clone, Debug)]
pub struct SteadyLoad {
    /// Maintenance read demand in MB/s per TB of raw capacity.
    pub demand_mb_s_per_tb: f64,
    pub mix: Mix,
    pub quantum: Duration,
    pub now: Timestamp,
}

impl SteadyLoad {
    /// The simulator's configuration of this load on `cluster` (its seed
    /// seeds the layout and every job).
    pub fn config(&self, cluster: ModelSpec) -> SimConfig {
        SimConfig {
            cluster,
            mix: self.mix.clone(),
            demand_mb_s_per_tb: self.demand_mb_s_per_tb,
            quantum: self.quantum,
            ..SimConfig::default()
        }
    }

    /// Builds the world of `cluster`, starts the jobs open at `now` and
    /// hands each one's declaration to `declare`, dropping the world's job
    /// as it goes: at 1 EB the read sets take gigabytes, and a caller that
    /// declares them to a planner then holds each set about once (in the
    /// world's job or in the planner), plus the declaration handed over.
    /// Stops at `declare`'s first error; returns the world (its model is
    /// what the planner plans on).
    pub fn for_each_declaration<E: From<ModelError>>(
        &self,
        cluster: ModelSpec,
        mut declare: impl FnMut(&ClusterModel, Declaration) -> Result<(), E>,
    ) -> Result<World, E> {
        let mut world = World::new(&self.config(cluster))?;
        for id in world.start_in_flight(self.now) {
            let job = world.remove_job(id).expect("a job just started is open");
            let declaration = job.declaration(&world.model);
            drop(job);
            declare(&world.model, declaration)?;
        }
        Ok(world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::REPLICATED_3;
    use dingo_types::{DiskId, TaskKind, Topology};

    fn load(demand_mb_s_per_tb: f64) -> SteadyLoad {
        SteadyLoad {
            demand_mb_s_per_tb,
            mix: Mix::bench(),
            quantum: Duration::from_secs(3600),
            now: Timestamp::from_secs(30 * 24 * 3600),
        }
    }

    #[test]
    fn steady_load_declares_every_task_and_about_half_a_deadline_of_its_work() {
        let spec =
            ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, seed: 3, ..ModelSpec::default() };
        // Five scrubbing passes a month, and enough failures in a 36-hour
        // deadline for a cluster this small to have one.
        let load = load(10.0);
        let mut planner = dingo_planner::Planner::new(dingo_planner::PlannerConfig::default());
        let world = load
            .for_each_declaration(spec, |model, d| {
                planner.declare(model, load.now, &d).unwrap_or_else(|e| panic!("{}: {e}", d.task));
                assert!(d.deadline > load.now, "{} declared a job already due", d.task);
                Ok::<_, ModelError>(())
            })
            .unwrap();
        assert_eq!(world.open_jobs(), 0, "the world keeps no copy of a declared job");
        assert!((0..world.model.disk_count()).all(|d| !world.model.is_failed(DiskId(d))));
        let total: f64 = TaskKind::ALL.iter().map(|&t| world.task_rate(t)).sum();
        let demand = 10.0 * 1e6 * 2000.0;
        assert!((total - demand).abs() / demand < 0.01, "{total} vs {demand}");
        for task in TaskKind::ALL {
            // Open work is on average half of one deadline's: a random
            // phase puts one period's events anywhere in it.
            let expected = world.task_rate(task) * world.deadline(task).as_secs_f64() / 2.0;
            let got = world.generated_bytes(task);
            assert!(got > 0.0, "{task} declared nothing");
            assert!(got < 3.0 * expected, "{task}: {got} bytes open, {expected} expected");
        }
    }

    /// Regression (the benchmark's old generator drew disks for ever once
    /// every disk had failed): a reconstruction demand many times what the
    /// cluster holds ends, and leaves every disk in service.
    #[test]
    fn a_huge_reconstruction_demand_ends_with_every_disk_live() {
        // Eight disks on eight nodes, every file three-way replicated.
        let spec = ModelSpec {
            raw_capacity: 200_000_000_000_000,
            disks_per_node: 1,
            layout: vec![(REPLICATED_3, 1.0)],
            ..ModelSpec::default()
        };
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let world = load(2_000.0).for_each_declaration(spec, |_, _| Ok::<_, ModelError>(())).unwrap();
            done.send(world.model).expect("the test waits for the model");
        });
        let model = finished.recv_timeout(Duration::from_secs(120)).expect("reconstruction never ended");
        assert!((0..model.disk_count()).all(|d| !model.is_failed(DiskId(d))));
    }
}
