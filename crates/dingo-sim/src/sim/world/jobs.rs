//! Job generation: when each task starts a job, and what each job reads
//! (files, chunks of disks, rebalancing candidates, the sets a failure
//! leaves to rebuild).

use super::rates::{bytes_per_failure, live_files};
use super::{Commit, Job, JobSets, World};
use dingo_types::{DiskId, TaskKind, Timestamp, Topology};
use std::time::Duration;

impl World {
    pub(super) fn start_jobs(&mut self, now: Timestamp, started: &mut Vec<u32>) {
        let quantum_end = now.saturating_add(self.config.quantum);
        for task in TaskKind::ALL {
            if self.rates.bytes_per_sec[task.index()] <= 0.0 {
                continue;
            }
            if task == TaskKind::Reconstruction {
                self.fail_disks(now, started);
                continue;
            }
            let period = self.rates.period[task.index()];
            let horizon = self.start.saturating_add(self.config.horizon);
            while self.next_event[task.index()] < quantum_end.min(horizon) {
                let event = self.next_event[task.index()];
                self.next_event[task.index()] = event.saturating_add(period.max(Duration::from_millis(1)));
                // Events split the horizon's demand, so a run generates its
                // nominal demand. From a cold start the first is at the
                // start and the last covers only what is left. From a warm
                // one each sits mid-period and covers the period around it
                // (its part inside the horizon); the last adds a job for
                // any of the horizon left after its period.
                let covered = if self.config.warm_start {
                    let from = event.0.saturating_sub(period.as_millis() as u64 / 2).max(self.start.0);
                    let to = event.saturating_add(period / 2).0;
                    let last = event.saturating_add(period) >= horizon;
                    let tail = if last { horizon.0.saturating_sub(to) } else { 0 };
                    [Duration::from_millis(to.min(horizon.0) - from), Duration::from_millis(tail)]
                } else {
                    [period.min(Duration::from_millis(horizon.0 - event.0)), Duration::ZERO]
                };
                for covered in covered.into_iter().filter(|c| !c.is_zero()) {
                    let bytes = self.rates.bytes_per_sec[task.index()] * covered.as_secs_f64();
                    let scale = covered.as_secs_f64() / period.as_secs_f64();
                    if let Some(job) = self.make_job(task, now, bytes, scale) {
                        started.push(job);
                    }
                }
            }
        }
    }

    /// Whole units of `per_unit` bytes for one event of `task`, carrying the
    /// difference to its next event: rounding to the nearest unit keeps the
    /// run's total within half a unit of the nominal (flooring would lose up
    /// to one, a whole disk failure in a small cluster).
    pub(super) fn units(&mut self, task: TaskKind, bytes: f64, per_unit: f64) -> u64 {
        let c = &mut self.carry[task.index()];
        *c += bytes / per_unit;
        let n = c.round().max(0.0);
        *c -= n;
        n as u64
    }

    pub(super) fn push_job(
        &mut self,
        task: TaskKind,
        now: Timestamp,
        sets: JobSets,
        sets_needed: Option<u64>,
        commits: Vec<Commit>,
    ) -> Option<u32> {
        if sets.is_empty() {
            return None;
        }
        let block_bytes = self.block_bytes();
        let sets_bytes = match &sets {
            JobSets::Files { files, max_blocks } => {
                files.len() as f64 * f64::from((*max_blocks).min(self.model.spec().file_blocks)) * block_bytes
            }
            JobSets::Members(m) => sets_needed.unwrap_or(m.len()) as f64 * block_bytes,
            JobSets::Rebuilds { members, .. } => *members as f64 * block_bytes,
        };
        self.generated_bytes[task.index()] += sets_bytes;
        let id = self.next_job;
        self.next_job += 1;
        let deadline = now.saturating_add(self.rates.deadline[task.index()]);
        self.jobs.insert(id, Job { id, task, arrival: now, deadline, sets, sets_needed, commits });
        Some(id)
    }

    /// One event of `task` reading `bytes`; a scrubbing event covers
    /// `scale` of its period's pass.
    pub(super) fn make_job(&mut self, task: TaskKind, now: Timestamp, bytes: f64, scale: f64) -> Option<u32> {
        let file_bytes = self.file_bytes();
        match task {
            TaskKind::GarbageCollection => {
                let n = self.units(task, bytes, file_bytes);
                // The commit (these files, in their own schemes) is made
                // from the job's files when it closes: one list held, not two.
                let files = self.objects.pick(&self.model, n, &mut self.rngs[task.index()]);
                self.push_job(task, now, JobSets::Files { files, max_blocks: u32::MAX }, None, Vec::new())
            }
            TaskKind::Transcoding => {
                let stages = self.chain.len().saturating_sub(1);
                if stages == 0 {
                    return None;
                }
                let n = self.units(task, bytes, file_bytes * stages as f64);
                let mut all = Vec::new();
                let mut commits = Vec::new();
                for stage in 0..stages {
                    let (from, to) = (self.chain[stage], self.chain[stage + 1]);
                    let files = self.transcode_cursors[stage].take(&self.model, from, n);
                    self.transcode_to.extend(files.iter().map(|&f| (f, to)));
                    all.extend_from_slice(&files);
                    commits.push(Commit { files, to_scheme: Some(to) });
                }
                all.sort_unstable();
                self.push_job(task, now, JobSets::Files { files: all, max_blocks: u32::MAX }, None, commits)
            }
            TaskKind::Georeplication | TaskKind::FileScrubbing => {
                let n = self.units(task, bytes, file_bytes);
                let files = self.random_files(task, n);
                self.push_job(task, now, JobSets::Files { files, max_blocks: u32::MAX }, None, Vec::new())
            }
            TaskKind::Fsck => {
                let blocks = self.config.fsck_blocks.clamp(1, self.model.spec().file_blocks);
                let n = self.units(task, bytes, self.block_bytes() * f64::from(blocks));
                let files = self.random_files(task, n);
                self.push_job(task, now, JobSets::Files { files, max_blocks: blocks }, None, Vec::new())
            }
            TaskKind::Scrubbing => {
                // A pass covers every written chunk (paper appendix A.2); an
                // event covers its fraction of the disks, round-robin.
                let disk_count = f64::from(self.model.disk_count());
                let disks = self.units(task, self.rates.scrub_fraction * scale * disk_count, 1.0);
                let disks = disks.min(u64::from(self.model.disk_count()));
                let chosen: Vec<DiskId> = (0..disks)
                    .map(|_| {
                        let d = DiskId(self.scrub_cursor);
                        self.scrub_cursor = (self.scrub_cursor + 1) % self.model.disk_count();
                        d
                    })
                    .collect();
                // Every disk: the compact whole-cluster form, not a per-disk walk.
                let members = if disks == u64::from(self.model.disk_count()) {
                    self.model.all_chunks()
                } else {
                    self.model.placed_chunks(&chosen)
                };
                self.push_job(task, now, JobSets::Members(members), None, Vec::new())
            }
            TaskKind::Rebalancing => {
                let needed = self.units(task, bytes, self.block_bytes());
                if needed == 0 {
                    return None;
                }
                let disk_count = u64::from(self.model.disk_count());
                let per_disk = (self.model.live_chunks() / disk_count).max(1);
                let wanted = ((needed as f64 * self.config.rebalance_candidates) / per_disk as f64).ceil() as u64;
                let wanted = wanted.clamp(1, (disk_count / 2).max(1));
                let chosen = self.fullest_disks(wanted as usize, now);
                if chosen.is_empty() {
                    return None;
                }
                let until = now.saturating_add(self.rates.deadline[task.index()]);
                for d in &chosen {
                    self.rebalancing_until[d.0 as usize] = until;
                }
                let candidates = self.model.placed_chunks(&chosen);
                let needed = needed.min(candidates.len());
                self.push_job(task, now, JobSets::Members(candidates), Some(needed), Vec::new())
            }
            TaskKind::Reconstruction => unreachable!("reconstruction follows failures"),
        }
    }

    /// Rebalancing's source disks (paper appendix A.2: "disks with skewed
    /// usage"): the `n` holding the most live chunks, fullest first (ties by
    /// id), among those not failed and not already being rebalanced.
    fn fullest_disks(&self, n: usize, now: Timestamp) -> Vec<DiskId> {
        let mut eligible: Vec<(u64, DiskId)> = (0..self.model.disk_count())
            .map(DiskId)
            .filter(|&d| !self.model.is_failed(d) && self.rebalancing_until[d.0 as usize] <= now)
            .map(|d| (u64::MAX - self.model.disk_live_chunks(d), d))
            .collect();
        let n = n.min(eligible.len());
        if n < eligible.len() {
            eligible.select_nth_unstable(n);
        }
        eligible.truncate(n);
        eligible.sort_unstable();
        eligible.into_iter().map(|(_, d)| d).collect()
    }

    /// Disk failures this quantum, at the rate that makes reconstruction
    /// read its share given what a failure costs in the cluster as it is
    /// now; one reconstruction job each. The count carries its fraction to
    /// the next quantum (an exact rate: Poisson counts would put a small
    /// cluster's month 15 % off its share), the disk is drawn at random.
    pub(super) fn fail_disks(&mut self, now: Timestamp, started: &mut Vec<u32>) {
        let task = TaskKind::Reconstruction;
        let bytes = self.rates.bytes_per_sec[task.index()] * self.config.quantum.as_secs_f64();
        let failures = self.units(task, bytes, bytes_per_failure(&self.model).max(1.0));
        for _ in 0..failures {
            let sets = self.fail_a_disk(1.0);
            if let Some(id) = self.push_job(task, now, sets, None, Vec::new()) {
                started.push(id);
            }
        }
    }

    /// Fails a random disk and lists the sets that rebuild the last `left`
    /// fraction of its chunks (all of them at 1; less for a failure whose
    /// rebuild is partly done). The failed disk is replaced at once; its
    /// chunks are rebuilt from the survivors, chosen while the disk is out.
    fn fail_a_disk(&mut self, left: f64) -> JobSets {
        let disk = DiskId(self.failure_rng.below(u64::from(self.model.disk_count())) as u32);
        let lost = self.model.placed_chunks(&[disk]);
        let done = ((1.0 - left.clamp(0.0, 1.0)) * lost.len() as f64) as usize;
        self.model.fail_disk(disk);
        let mut blocks = Vec::with_capacity(lost.len() as usize - done);
        let mut total = 0;
        let mut members = Vec::new();
        for m in lost.iter().skip(done) {
            members.clear();
            if self.model.stripe_survivors(m.block(), &mut members) {
                blocks.push(m.block().0);
                total += members.len() as u64;
            }
        }
        self.model.replace_disk(disk);
        let sets = JobSets::Rebuilds { blocks, members: total, any_k: self.config.rebuild_any_k };
        if cfg!(debug_assertions) {
            // The sets listed with the disk back in are the ones it left.
            let mut again = Vec::new();
            for (i, m) in lost.iter().skip(done).enumerate() {
                again.clear();
                let needed = sets.rebuild(&self.model, i, &mut again);
                members.clear();
                self.model.fail_disk(disk);
                let first_k = self.model.stripe_survivors(m.block(), &mut members);
                self.model.replace_disk(disk);
                assert!(first_k && needed == members.len(), "rebuild set of {} needs {needed}", m.block());
                assert_eq!(again[..members.len()], members, "rebuild set of {}", m.block());
            }
        }
        sets
    }

    /// Starts the jobs the tasks would have open at `now` in steady state,
    /// with this run's generator (the planner benchmark's load): each
    /// periodic task one job per period issued less than a deadline ago,
    /// each `age` old and holding the `1 - age / deadline` of its work not
    /// yet done; reconstruction the failures of one deadline, each with
    /// what is left of its rebuild. The ages sit mid-period, so exactly half
    /// of each task's work over one deadline is open: at a random phase a
    /// task with one job open (scrubbing) would bring anything from none to
    /// all of its pass, and the benchmark's size would be the phase's.
    /// Returns the jobs' ids.
    pub fn start_in_flight(&mut self, now: Timestamp) -> Vec<u32> {
        let mut started = Vec::new();
        for task in TaskKind::ALL {
            let rate = self.rates.bytes_per_sec[task.index()];
            if rate <= 0.0 {
                continue;
            }
            let (period, deadline) = (self.rates.period[task.index()], self.rates.deadline[task.index()]);
            let events = if task == TaskKind::Reconstruction {
                let failures = self.units(task, rate * deadline.as_secs_f64(), bytes_per_failure(&self.model).max(1.0));
                open_events(deadline.div_f64(failures.max(1) as f64), deadline)
            } else {
                open_events(period, deadline)
            };
            for (age, left) in events {
                let arrival = Timestamp(now.0.saturating_sub(age));
                let job = if task == TaskKind::Reconstruction {
                    let sets = self.fail_a_disk(left);
                    self.push_job(task, arrival, sets, None, Vec::new())
                } else {
                    self.make_job(task, arrival, rate * period.as_secs_f64() * left, left)
                };
                started.extend(job);
            }
        }
        started
    }

    /// `n` distinct random live files (every live file if there are no
    /// more), sorted.
    pub(super) fn random_files(&mut self, task: TaskKind, n: u64) -> Vec<u64> {
        let files = self.model.file_count();
        if n >= live_files(&self.model) {
            return (0..files).filter(|&f| self.model.file_live(f)).collect();
        }
        let rng = &mut self.rngs[task.index()];
        let mut taken = fixedbitset::FixedBitSet::with_capacity(usize::try_from(files).expect("fits in memory"));
        let mut picked = Vec::with_capacity(n as usize);
        while (picked.len() as u64) < n {
            let f = rng.below(files);
            if self.model.file_live(f) && !taken.put(f as usize) {
                picked.push(f);
            }
        }
        picked.sort_unstable();
        picked
    }
}

/// Open jobs of a periodic task at one instant: `(age in ms, unfinished
/// fraction)` for each event issued less than one deadline ago, the
/// youngest half a period old.
fn open_events(period: Duration, deadline: Duration) -> Vec<(u64, f64)> {
    let period_ms = (period.as_millis() as u64).max(1);
    let deadline_ms = deadline.as_millis() as u64;
    (0..)
        .map(|k| k * period_ms + period_ms / 2)
        .take_while(|&age| age < deadline_ms)
        .map(|age| (age, 1.0 - age as f64 / deadline_ms as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;
    use crate::sim::SimConfig;

    /// Rebalancing moves data off the fullest disks, and a disk already
    /// being rebalanced (or failed) sits out until that job's deadline.
    #[test]
    fn rebalancing_takes_the_fullest_disks_not_already_rebalancing() {
        let cluster = ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, ..ModelSpec::default() };
        let mut world = World::new(&SimConfig { cluster, ..SimConfig::default() }).unwrap();
        // Skew: delete every file with a chunk on disks 3 and 4.
        let on_3_and_4 = world.model.placed_chunks(&[DiskId(3), DiskId(4)]).blocks();
        let files: Vec<u64> = (0..world.model.file_count())
            .filter(|&f| world.model.file_block_ranges(f).into_iter().flatten().any(|b| on_3_and_4.contains(b)))
            .take(200)
            .collect();
        world.model.delete_files(&files);
        world.model.fail_disk(DiskId(7));
        let by_fill = |w: &World| {
            let mut d: Vec<(u64, u32)> =
                (0..w.model.disk_count()).map(|d| (u64::MAX - w.model.disk_live_chunks(DiskId(d)), d)).collect();
            d.sort_unstable();
            d.into_iter().map(|(_, d)| DiskId(d)).filter(|&d| d != DiskId(7)).collect::<Vec<_>>()
        };
        let order = by_fill(&world);
        let now = Timestamp::ZERO;
        let first = world.fullest_disks(5, now);
        assert_eq!(first, order[..5]);
        assert!(!first.contains(&DiskId(3)) && !first.contains(&DiskId(4)), "emptied disks are not skewed");
        let job = world.make_job(TaskKind::Rebalancing, now, 1e12, 1.0).expect("a rebalancing job");
        let busy: Vec<DiskId> =
            order.iter().copied().filter(|&d| world.rebalancing_until[d.0 as usize] > now).collect();
        assert!(!busy.is_empty() && busy == order[..busy.len()], "the job took the fullest disks: {busy:?}");
        let next = world.fullest_disks(5, now);
        assert_eq!(next, order[busy.len()..busy.len() + 5], "busy disks sit out");
        let after = world.job(job).deadline;
        assert_eq!(world.fullest_disks(5, after), first, "and come back at the job's deadline");
    }

    /// Open work is half of one deadline's: an hourly task with a 36-hour
    /// deadline has 36 jobs open, a monthly one with a monthly deadline one
    /// job half done.
    #[test]
    fn open_events_hold_half_a_deadline_of_work() {
        let hour = Duration::from_secs(3600);
        for (period, deadline, jobs) in [(hour, 36 * hour, 36), (720 * hour, 720 * hour, 1), (6 * hour, 36 * hour, 6)] {
            let events = open_events(period, deadline);
            assert_eq!(events.len(), jobs);
            let left: f64 = events.iter().map(|&(_, left)| left).sum();
            assert!((left - jobs as f64 / 2.0).abs() < 1e-9, "{events:?}");
            assert!(events.iter().all(|&(age, left)| age < deadline.as_millis() as u64 && left > 0.0 && left <= 1.0));
        }
    }
}
