//! Maintenance workloads: how much each task reads (a demand in MB/s per TB
//! split by a *mix*), how often it declares and with what deadline, and the
//! declarations it makes on a [`ClusterModel`].

use crate::model::{ClusterModel, RS_30_33, Redundancy};
use crate::rng::SplitMix64;
use dingo_types::{
    BlockId, BlockRange, BlockSet, Declaration, DiskId, Member, ReadSets, TaskKind, Timestamp, Topology,
};
use std::time::Duration;

pub use crate::mix::{Mix, Timing, default_timing};

/// Candidate chunks rebalancing declares per chunk it must move (the
/// simulator's default, `SimConfig::rebalance_candidates`, and the
/// benchmark's fixed rule).
pub const REBALANCE_CANDIDATES_PER_MOVE: f64 = 4.0;

/// How often a task declares and how long each declaration may take
/// (the paper's Table 2).
pub fn timing(task: TaskKind) -> (Duration, Duration) {
    let t = default_timing(task);
    (t.period, t.deadline)
}

/// A steady-state outstanding load: what the eight tasks have declared and
/// not yet finished at one instant, as the planner sees it mid-month.
#[derive(Clone, Debug)]
pub struct SteadyLoad {
    /// Maintenance read demand in MB/s per TB of raw capacity.
    pub demand_mb_s_per_tb: f64,
    pub mix: Mix,
    pub now: Timestamp,
    pub seed: u64,
}

impl SteadyLoad {
    /// Bytes per second task `task` reads. Scrubbing reads the whole
    /// cluster once per period whatever its share; the other tasks split
    /// the rest of the demand by their shares, renormalised without
    /// scrubbing.
    pub fn task_rate(&self, model: &ClusterModel, task: TaskKind) -> f64 {
        let capacity_tb = model.spec().raw_capacity as f64 / 1e12;
        let total = self.demand_mb_s_per_tb * 1e6 * capacity_tb;
        let (scrub_period, _) = timing(TaskKind::Scrubbing);
        let scrub = model.chunk_count() as f64 * model.spec().block_bytes as f64 / scrub_period.as_secs_f64();
        if task == TaskKind::Scrubbing {
            return scrub;
        }
        let others: f64 = 1.0 - self.mix.share(TaskKind::Scrubbing);
        (total - scrub).max(0.0) * self.mix.share(task) / others.max(f64::MIN_POSITIVE)
    }

    /// Fails disks for reconstruction and builds every outstanding
    /// declaration. Each periodic task has one declaration per period that
    /// is still open, issued `age` ago and `1 - age / deadline` unfinished.
    /// Each goes to `declare` as soon as it is built, so a caller that declares it to a planner holds
    /// one declaration's read sets at a time, not all of them (at 1 EB the
    /// read sets of every declaration take gigabytes). Reconstruction's come
    /// first, after every disk failure, as later ones must not name lost
    /// chunks. Stops at `declare`'s first error.
    pub fn for_each_declaration<E>(
        &self,
        model: &mut ClusterModel,
        mut declare: impl FnMut(&ClusterModel, Declaration) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rng = SplitMix64::new(self.seed);
        // Failures first: later declarations must not name lost chunks.
        for decl in self.reconstruction(model, &mut rng) {
            declare(model, decl)?;
        }
        let model = &*model;
        let block = model.spec().block_bytes as f64;
        let file_bytes = block * f64::from(model.spec().file_blocks);
        for task in TaskKind::ALL {
            if task == TaskKind::Reconstruction {
                continue;
            }
            let rate = self.task_rate(model, task);
            let (period, deadline) = timing(task);
            for (age, left) in open_events(period, deadline, &mut rng) {
                let bytes = rate * period.as_secs_f64() * left;
                let deadline = Timestamp(self.now.0 + (deadline.as_millis() as u64).saturating_sub(age));
                let (read_sets, sets_needed) = match task {
                    TaskKind::Scrubbing => {
                        let mut all = model.all_chunks();
                        let done = ((1.0 - left) * model.block_count() as f64) as u64;
                        let mut scrubbed = roaring::RoaringTreemap::new();
                        scrubbed.insert_range(0..done);
                        all.remove_blocks(&scrubbed);
                        (ReadSets::EachMember(all), None)
                    }
                    TaskKind::Rebalancing => self.rebalancing(model, bytes / block, &mut rng),
                    TaskKind::Fsck => {
                        (ReadSets::Ranges(random_files(model, (bytes / (2.0 * block)) as u64, 2, None, &mut rng)), None)
                    }
                    TaskKind::Transcoding => {
                        // Aged replicated and RS 6-of-9 files move up a scheme.
                        let from = |r: Redundancy| r != RS_30_33;
                        let files = (bytes / file_bytes) as u64;
                        (ReadSets::Ranges(random_files(model, files, u32::MAX, Some(&from), &mut rng)), None)
                    }
                    _ => {
                        let files = (bytes / file_bytes) as u64;
                        (ReadSets::Ranges(random_files(model, files, u32::MAX, None, &mut rng)), None)
                    }
                };
                if read_sets_len(&read_sets) > 0 {
                    declare(model, Declaration { bytes_needed: None, task, read_sets, sets_needed, deadline })?;
                }
            }
        }
        Ok(())
    }

    /// Rebalancing: candidates are every chunk on enough over-full disks
    /// that moving a quarter of them covers the bytes to move.
    ///
    /// The world's rebalancing jobs (`sim::World`) use the same number of
    /// candidates per move but draw their disks differently (distinct disks,
    /// sized by live chunks, up to half the cluster): one shared generator
    /// would change the random streams, and with them every figure of
    /// `dingo bench planner`, which is kept comparable across versions.
    fn rebalancing(&self, model: &ClusterModel, blocks: f64, rng: &mut SplitMix64) -> (ReadSets, Option<u64>) {
        let needed = blocks as u64;
        let per_disk = (model.chunk_count() / u64::from(model.disk_count())).max(1);
        let candidates = (needed as f64 * REBALANCE_CANDIDATES_PER_MOVE).ceil() as u64;
        let disks = candidates.div_ceil(per_disk).clamp(1, u64::from(model.disk_count()) / 4 + 1);
        let chosen: Vec<DiskId> = (0..disks)
            .map(|_| DiskId(rng.below(u64::from(model.disk_count())) as u32))
            .filter(|&d| !model.is_failed(d))
            .collect();
        let candidates = model.placed_chunks(&chosen);
        let needed = needed.clamp(1, candidates.len().max(1));
        (ReadSets::EachMember(candidates), Some(needed))
    }

    /// Reconstruction: fail disks until the stripes they broke need about
    /// the task's outstanding bytes; one declaration per failed disk whose
    /// sets are each broken stripe's surviving data (any `k` members).
    fn reconstruction(&self, model: &mut ClusterModel, rng: &mut SplitMix64) -> Vec<Declaration> {
        let rate = self.task_rate(model, TaskKind::Reconstruction);
        let (_, deadline) = timing(TaskKind::Reconstruction);
        // Steady state: on average half of the deadline's work is open.
        let mut outstanding = rate * deadline.as_secs_f64() / 2.0;
        let mut out = Vec::new();
        // A demand larger than the cluster can lose stops once every disk is out.
        let mut live_disks = (0..model.disk_count()).filter(|&d| !model.is_failed(DiskId(d))).count();
        while outstanding > 0.0 && live_disks > 0 {
            let disk = DiskId(rng.below(u64::from(model.disk_count())) as u32);
            if model.is_failed(disk) {
                continue;
            }
            let lost = model.chunks_on_disk(disk);
            model.fail_disk(disk);
            live_disks -= 1;
            let age_fraction = rng.unit();
            // The first `age_fraction` of the work is done already.
            let done = (age_fraction * lost.len() as f64) as usize;
            let sets: Vec<BlockSet> = lost.iter().skip(done).filter_map(|m| surviving_set(model, m.block())).collect();
            let bytes: f64 = sets.iter().map(|s| s.members.len() as f64).sum::<f64>() * model.spec().block_bytes as f64;
            outstanding -= bytes.max(1.0);
            if !sets.is_empty() {
                let left =
                    Duration::from_secs_f64(deadline.as_secs_f64() * (1.0 - age_fraction)).max(Duration::from_secs(1));
                out.push(Declaration {
                    task: TaskKind::Reconstruction,
                    read_sets: ReadSets::Sets(sets),
                    sets_needed: None,
                    bytes_needed: None,
                    deadline: self.now.saturating_add(left),
                });
            }
        }
        out
    }
}

/// The members of [`surviving_set`], appended to `out`; false (and
/// nothing appended) if there is no such set.
pub(crate) fn surviving_members(model: &ClusterModel, block: BlockId, out: &mut Vec<Member>) -> bool {
    model.stripe_survivors(block, out)
}

/// The set reconstruction reads to rebuild a lost chunk of `block`: any
/// live copy of a replicated block, or `k` live members of its stripe.
pub(crate) fn surviving_set(model: &ClusterModel, block: BlockId) -> Option<BlockSet> {
    let mut members = Vec::new();
    surviving_members(model, block, &mut members).then(|| BlockSet::new(members))
}

fn read_sets_len(sets: &ReadSets) -> u64 {
    match sets {
        ReadSets::Sets(s) => s.len() as u64,
        ReadSets::Ranges(r) => r.len() as u64,
        ReadSets::EachMember(m) => m.len(),
        ReadSets::ChunksOnDisk(_) | ReadSets::AllChunks => 1,
    }
}

/// Open declarations of a periodic task: `(age in ms, unfinished fraction)`
/// for each event issued less than one deadline ago, with a random phase.
fn open_events(period: Duration, deadline: Duration, rng: &mut SplitMix64) -> Vec<(u64, f64)> {
    let period_ms = period.as_millis() as u64;
    let deadline_ms = deadline.as_millis() as u64;
    let phase = rng.below(period_ms.max(1));
    (0..)
        .map(|k| phase + k * period_ms)
        .take_while(|&age| age < deadline_ms)
        .map(|age| (age, 1.0 - age as f64 / deadline_ms as f64))
        .collect()
}

/// `count` distinct random files (of the schemes `from` accepts), each as
/// the range of its first `max_blocks` blocks, sorted. Not the world's
/// `random_files`: this one gives up after a bounded number of draws and
/// keeps deleted files out by `check_range` afterwards, and sharing one
/// would change `dingo bench planner`'s streams and figures.
fn random_files(
    model: &ClusterModel,
    count: u64,
    max_blocks: u32,
    from: Option<&dyn Fn(Redundancy) -> bool>,
    rng: &mut SplitMix64,
) -> Vec<BlockRange> {
    let files = model.file_count();
    let mut picked: Vec<u64> = Vec::with_capacity(count as usize);
    let mut attempts = 0u64;
    while (picked.len() as u64) < count.min(files) && attempts < count.saturating_mul(4) + 16 {
        attempts += 1;
        let f = rng.below(files);
        if from.is_none_or(|accept| accept(model.scheme(model.file_scheme(f)))) {
            picked.push(f);
        }
    }
    picked.sort_unstable();
    picked.dedup();
    picked
        .into_iter()
        .map(|f| {
            let r = model.file_blocks(f);
            BlockRange { start: r.start, len: r.len.min(max_blocks) }
        })
        .filter(|r| model.check_range(*r).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelSpec, REPLICATED_3};

    #[test]
    fn steady_load_declares_every_task_and_matches_the_demand() {
        let spec =
            ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, seed: 3, ..ModelSpec::default() };
        let mut model = ClusterModel::new(spec).unwrap();
        let load = SteadyLoad { demand_mb_s_per_tb: 2.0, mix: Mix::bench(), now: Timestamp(0), seed: 9 };
        let mut decls = Vec::new();
        load.for_each_declaration(&mut model, |_, d| {
            decls.push(d);
            Ok::<_, ()>(())
        })
        .unwrap();
        for task in TaskKind::ALL {
            assert!(decls.iter().any(|d| d.task == task), "{task} declared nothing");
        }
        let total: f64 = TaskKind::ALL.iter().map(|&t| load.task_rate(&model, t)).sum();
        let demand = 2.0 * 1e6 * 2000.0;
        assert!((total - demand).abs() / demand < 0.01, "{total} vs {demand}");
        let mut planner = dingo_planner::Planner::new(dingo_planner::PlannerConfig::default());
        for d in &decls {
            planner.declare(&model, Timestamp(0), d).unwrap_or_else(|e| panic!("{}: {e}", d.task));
        }
    }

    /// Regression: a reconstruction demand larger than the whole cluster
    /// used to draw disks for ever once every disk had failed.
    #[test]
    fn reconstruction_stops_once_every_disk_has_failed() {
        // Eight disks on eight nodes, every file three-way replicated.
        let spec = ModelSpec {
            raw_capacity: 200_000_000_000_000,
            disks_per_node: 1,
            layout: vec![(REPLICATED_3, 1.0)],
            ..ModelSpec::default()
        };
        let mut model = ClusterModel::new(spec).unwrap();
        let load = SteadyLoad { demand_mb_s_per_tb: 1e9, mix: Mix::bench(), now: Timestamp(0), seed: 9 };
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            load.reconstruction(&mut model, &mut SplitMix64::new(1));
            done.send(model).expect("the test waits for the model");
        });
        let model = finished.recv_timeout(Duration::from_secs(120)).expect("reconstruction never ended");
        assert!((0..model.disk_count()).all(|d| model.is_failed(DiskId(d))));
    }
}
