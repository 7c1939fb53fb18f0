//! The simulated world: the cluster over time and the maintenance jobs its
//! eight tasks start. It evolves the same way whatever mode reads it — every
//! random choice and every change of the cluster depends only on the seed
//! and the clock — so the three modes see the same events and are
//! comparable.
//!
//! Life cycle of data (SPEC §7, paper appendix A.2): files are ingested
//! 3-way replicated, transcoded with age to RS 6-of-9 and then RS 30-of-33
//! (rewritten, old blocks deleted), rewritten in place by garbage
//! collection, and the oldest are deleted by their owners to keep the fill
//! at its target. Disks fail at random and are replaced at once;
//! reconstruction rebuilds their chunks from the survivors.
//!
//! A rewriting job (GC, transcoding) commits its rewrites when its window
//! closes, at its deadline: every mode has read the files by then, and
//! commits happen at the same instant in every mode.

use super::SimConfig;
use crate::model::{ClusterModel, ModelError, Redundancy};
use crate::rng::SplitMix64;
use crate::workload::surviving_set;
use dingo_types::{BlockRange, BlockSet, DiskId, Member, MemberBitmap, ReadSets, TaskKind, Timestamp, Topology};
use fixedbitset::FixedBitSet;
use roaring::RoaringTreemap;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a job reads, kept in the form every mode can walk.
#[derive(Clone, Debug)]
pub enum JobSets {
    /// One set per range of blocks of one file, any copy of each block.
    Files(Vec<BlockRange>),
    /// One set per member (exact copies: scrubbing, rebalancing candidates).
    Members(MemberBitmap),
    /// Explicit sets (reconstruction: the survivors of each broken stripe),
    /// flattened: set `i` is `keys[offsets[i]..offsets[i + 1]]` as [`Member::key`]s.
    Stripes { keys: Vec<u64>, offsets: Vec<u32> },
}

impl JobSets {
    pub fn len(&self) -> u64 {
        match self {
            JobSets::Files(r) => r.len() as u64,
            JobSets::Members(m) => m.len(),
            JobSets::Stripes { offsets, .. } => offsets.len().saturating_sub(1) as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members of stripe set `i`.
    pub fn stripe(&self, i: usize) -> impl Iterator<Item = Member> + '_ {
        let JobSets::Stripes { keys, offsets } = self else { panic!("not a stripe job") };
        keys[offsets[i] as usize..offsets[i + 1] as usize].iter().map(|&k| Member::from_key(k))
    }

    fn to_read_sets(&self) -> ReadSets {
        match self {
            JobSets::Files(r) => ReadSets::Ranges(r.clone()),
            JobSets::Members(m) => ReadSets::EachMember(m.clone()),
            JobSets::Stripes { offsets, .. } => {
                ReadSets::Sets((0..offsets.len() - 1).map(|i| BlockSet::new(self.stripe(i).collect())).collect())
            }
        }
    }
}

/// Whether `task`'s jobs need only some of their sets (rebalancing: any
/// `n` of its candidates). A deleted candidate of such a job saves no read
/// — the job still moves `n` chunks — so no mode counts it as avoided.
pub fn data_flexible(task: TaskKind) -> bool {
    task == TaskKind::Rebalancing
}

/// What a job changes when its window closes.
#[derive(Clone, Debug)]
struct Commit {
    files: Vec<u64>,
    /// Scheme of the rewritten files; `None`: each file's own scheme (GC).
    to_scheme: Option<usize>,
}

/// One maintenance job: what one event of one task reads, by when.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: u32,
    pub task: TaskKind,
    pub arrival: Timestamp,
    pub deadline: Timestamp,
    pub sets: JobSets,
    /// `None`: every set; `Some(n)`: any `n` of them (rebalancing).
    pub sets_needed: Option<u64>,
    commits: Vec<Commit>,
}

impl Job {
    /// The declaration the job makes in declarative mode.
    pub fn declaration(&self) -> dingo_types::Declaration {
        dingo_types::Declaration {
            task: self.task,
            read_sets: self.sets.to_read_sets(),
            sets_needed: self.sets_needed,
            deadline: self.deadline,
        }
    }

    /// Sets the job must read.
    pub fn sets_to_read(&self) -> u64 {
        self.sets_needed.unwrap_or(self.sets.len())
    }

    #[cfg(test)]
    pub(crate) fn for_test(task: TaskKind, sets: JobSets, sets_needed: Option<u64>, deadline: Timestamp) -> Job {
        Job { id: 0, task, arrival: Timestamp::ZERO, deadline, sets, sets_needed, commits: Vec::new() }
    }
}

/// Oldest-first walk over the files of one scheme.
#[derive(Clone, Copy, Debug, Default)]
struct FileCursor {
    next: u64,
}

impl FileCursor {
    /// Up to `n` live files of `scheme` at or after the cursor that
    /// `accept`s, oldest first; the cursor moves past every file it looked at.
    fn take(&mut self, model: &ClusterModel, scheme: usize, n: u64, accept: impl Fn(u64) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        if n == 0 {
            return out;
        }
        for range in model.scheme_file_ranges(scheme) {
            for f in range.start.max(self.next)..range.end {
                self.next = f + 1;
                if model.file_live(f) && accept(f) {
                    out.push(f);
                    if out.len() as u64 == n {
                        return out;
                    }
                }
            }
        }
        out
    }
}

/// Per-task event sizes derived from the demand.
#[derive(Clone, Debug)]
struct Rates {
    /// Bytes per second each task reads.
    bytes_per_sec: [f64; TaskKind::COUNT],
    /// Period and deadline each task uses (scrubbing's shortened if one
    /// period's share is more than the whole cluster).
    period: [Duration; TaskKind::COUNT],
    deadline: [Duration; TaskKind::COUNT],
    /// Expected reconstruction bytes one disk failure causes.
    bytes_per_failure: f64,
}

pub struct World {
    pub model: ClusterModel,
    config: SimConfig,
    rates: Rates,
    /// Transcoding chain: layout schemes by decreasing overhead.
    chain: Vec<usize>,
    rngs: [SplitMix64; TaskKind::COUNT],
    /// Failures and ingest draw from their own stream.
    failure_rng: SplitMix64,
    next_event: [Timestamp; TaskKind::COUNT],
    /// Fractional files/disks carried between events so rates stay exact.
    carry: [f64; TaskKind::COUNT],
    ingest_carry: f64,
    transcode_cursors: Vec<FileCursor>,
    delete_cursor: FileCursor,
    scrub_cursor: u32,
    /// Files a pending rewrite owns; nobody else rewrites or deletes them.
    claimed: ClaimedFiles,
    jobs: BTreeMap<u32, Job>,
    pending_commits: Vec<Commit>,
    next_job: u32,
    target_chunks: u64,
}

/// What changed at the start of one quantum.
#[derive(Debug, Default)]
pub struct QuantumEvents {
    /// Blocks deleted at this instant.
    pub deleted: RoaringTreemap,
    /// Jobs started now.
    pub started: Vec<u32>,
}

impl World {
    pub fn new(config: &SimConfig) -> Result<World, ModelError> {
        let model = ClusterModel::new(config.cluster.clone())?;
        let mut chain: Vec<usize> = (0..model.scheme_count()).collect();
        chain.sort_by(|&a, &b| model.scheme(b).overhead().total_cmp(&model.scheme(a).overhead()));
        let rates = Rates::new(config, &model);
        let mut seeds = SplitMix64::new(config.cluster.seed ^ 0x05EE_D0FD_16E0);
        let rngs = TaskKind::ALL.map(|_| SplitMix64::new(seeds.next_u64()));
        let failure_rng = SplitMix64::new(seeds.next_u64());
        let target_chunks = model.live_chunks();
        Ok(World {
            transcode_cursors: vec![FileCursor::default(); chain.len()],
            model,
            config: config.clone(),
            rates,
            chain,
            rngs,
            failure_rng,
            next_event: [Timestamp::ZERO; TaskKind::COUNT],
            carry: [0.0; TaskKind::COUNT],
            ingest_carry: 0.0,
            delete_cursor: FileCursor::default(),
            scrub_cursor: 0,
            claimed: ClaimedFiles::default(),
            jobs: BTreeMap::new(),
            pending_commits: Vec::new(),
            next_job: 0,
            target_chunks,
        })
    }

    pub fn job(&self, id: u32) -> &Job {
        &self.jobs[&id]
    }

    /// Jobs whose window is still open.
    pub fn open_jobs(&self) -> usize {
        self.jobs.len()
    }

    /// Bytes per second task `task` reads at the configured demand.
    pub fn task_rate(&self, task: TaskKind) -> f64 {
        self.rates.bytes_per_sec[task.index()]
    }

    /// The deadline each task's jobs get.
    pub fn deadline(&self, task: TaskKind) -> Duration {
        self.rates.deadline[task.index()]
    }

    /// Closes the jobs whose deadline is at or before `now`, the start of
    /// a quantum, and returns them. Their commits wait for [`Self::advance`],
    /// so the cluster still looks as it did during their window.
    pub fn close_due(&mut self, now: Timestamp) -> Vec<Job> {
        let due: Vec<u32> = self.jobs.values().filter(|j| j.deadline <= now).map(|j| j.id).collect();
        let mut closed = Vec::new();
        for id in due {
            let mut job = self.jobs.remove(&id).expect("due job exists");
            self.pending_commits.append(&mut job.commits);
            closed.push(job);
        }
        closed
    }

    /// Advances the world to `now`: commits of closed jobs, ingest and the
    /// owners' deletions, then this quantum's new jobs. `new_work`: whether
    /// tasks still start jobs and data is still ingested (false while
    /// draining after the horizon).
    pub fn advance(&mut self, now: Timestamp, new_work: bool) -> QuantumEvents {
        let mut events = QuantumEvents::default();
        for commit in std::mem::take(&mut self.pending_commits) {
            self.apply(commit, &mut events.deleted);
        }
        if new_work {
            self.ingest_and_expire(&mut events.deleted);
            self.start_jobs(now, &mut events.started);
        }
        events
    }

    fn apply(&mut self, commit: Commit, deleted: &mut RoaringTreemap) {
        for &f in &commit.files {
            self.claimed.remove(f);
        }
        let live: Vec<u64> = commit.files.iter().copied().filter(|&f| self.model.file_live(f)).collect();
        let mut per_scheme = vec![0u64; self.model.scheme_count()];
        for &f in &live {
            per_scheme[commit.to_scheme.unwrap_or_else(|| self.model.file_scheme(f))] += 1;
        }
        *deleted |= self.model.delete_files(&live);
        for (scheme, files) in per_scheme.into_iter().enumerate() {
            self.model.add_files(scheme, files);
        }
    }

    /// Ingests new replicated files at the rate transcoding moves them on,
    /// then deletes the oldest files of the last scheme while the cluster
    /// is over its fill target (owners deleting old data).
    fn ingest_and_expire(&mut self, deleted: &mut RoaringTreemap) {
        if self.chain.len() > 1 {
            let per_sec = self.rates.bytes_per_sec[TaskKind::Transcoding.index()] / (self.chain.len() - 1) as f64;
            self.ingest_carry += per_sec * self.config.quantum.as_secs_f64() / self.file_bytes();
            let files = self.ingest_carry.floor();
            self.ingest_carry -= files;
            self.model.add_files(self.chain[0], files as u64);
        }
        let last = *self.chain.last().expect("at least one scheme");
        let over = self.model.live_chunks().saturating_sub(self.target_chunks);
        let claimed = &self.claimed;
        let victims = self
            .delete_cursor
            .take(&self.model, last, over.div_ceil(self.chunks_per_file(last)), |f| !claimed.contains(f));
        *deleted |= self.model.delete_files(&victims);
    }

    fn chunks_per_file(&self, scheme: usize) -> u64 {
        let r = self.model.scheme(scheme);
        u64::from(self.model.spec().file_blocks) / r.data_per_stripe() * u64::from(r.width())
    }

    fn file_bytes(&self) -> f64 {
        self.model.spec().block_bytes as f64 * f64::from(self.model.spec().file_blocks)
    }

    fn block_bytes(&self) -> f64 {
        self.model.spec().block_bytes as f64
    }

    fn start_jobs(&mut self, now: Timestamp, started: &mut Vec<u32>) {
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
            while self.next_event[task.index()] < quantum_end {
                let event = self.next_event[task.index()];
                self.next_event[task.index()] = event.saturating_add(period.max(Duration::from_millis(1)));
                let bytes = self.rates.bytes_per_sec[task.index()] * period.as_secs_f64();
                if let Some(job) = self.make_job(task, now, bytes) {
                    started.push(job);
                }
            }
        }
    }

    /// Whole units of `per_unit` bytes for one event of `task`, carrying the
    /// remainder to its next event.
    fn units(&mut self, task: TaskKind, bytes: f64, per_unit: f64) -> u64 {
        let c = &mut self.carry[task.index()];
        *c += bytes / per_unit;
        let n = c.floor();
        *c -= n;
        n as u64
    }

    fn push_job(
        &mut self,
        task: TaskKind,
        now: Timestamp,
        sets: JobSets,
        sets_needed: Option<u64>,
        commits: Vec<Commit>,
    ) -> Option<u32> {
        if sets.is_empty() {
            for c in &commits {
                for &f in &c.files {
                    self.claimed.remove(f);
                }
            }
            return None;
        }
        let id = self.next_job;
        self.next_job += 1;
        let deadline = now.saturating_add(self.rates.deadline[task.index()]);
        self.jobs.insert(id, Job { id, task, arrival: now, deadline, sets, sets_needed, commits });
        Some(id)
    }

    fn make_job(&mut self, task: TaskKind, now: Timestamp, bytes: f64) -> Option<u32> {
        let file_bytes = self.file_bytes();
        match task {
            TaskKind::GarbageCollection => {
                let n = self.units(task, bytes, file_bytes);
                let files = self.random_files(task, n, true);
                for &f in &files {
                    self.claimed.insert(f);
                }
                let ranges = self.ranges(&files, u32::MAX);
                self.push_job(task, now, JobSets::Files(ranges), None, vec![Commit { files, to_scheme: None }])
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
                    let claimed = &self.claimed;
                    let files = self.transcode_cursors[stage].take(&self.model, from, n, |f| !claimed.contains(f));
                    for &f in &files {
                        self.claimed.insert(f);
                    }
                    all.extend_from_slice(&files);
                    commits.push(Commit { files, to_scheme: Some(to) });
                }
                all.sort_unstable();
                let ranges = self.ranges(&all, u32::MAX);
                self.push_job(task, now, JobSets::Files(ranges), None, commits)
            }
            TaskKind::Georeplication | TaskKind::FileScrubbing => {
                let n = self.units(task, bytes, file_bytes);
                let files = self.random_files(task, n, false);
                let ranges = self.ranges(&files, u32::MAX);
                self.push_job(task, now, JobSets::Files(ranges), None, Vec::new())
            }
            TaskKind::Fsck => {
                let blocks = self.config.fsck_blocks.clamp(1, self.model.spec().file_blocks);
                let n = self.units(task, bytes, self.block_bytes() * f64::from(blocks));
                let files = self.random_files(task, n, false);
                let ranges = self.ranges(&files, blocks);
                self.push_job(task, now, JobSets::Files(ranges), None, Vec::new())
            }
            TaskKind::Scrubbing => {
                let per_disk =
                    self.model.live_chunks() as f64 * self.block_bytes() / f64::from(self.model.disk_count());
                let disks = self.units(task, bytes, per_disk).min(u64::from(self.model.disk_count()));
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
                let rng = &mut self.rngs[task.index()];
                let mut chosen: Vec<DiskId> = Vec::new();
                while (chosen.len() as u64) < wanted {
                    let d = DiskId(rng.below(disk_count) as u32);
                    if !chosen.contains(&d) {
                        chosen.push(d);
                    }
                }
                let candidates = self.model.placed_chunks(&chosen);
                let needed = needed.min(candidates.len());
                self.push_job(task, now, JobSets::Members(candidates), Some(needed), Vec::new())
            }
            TaskKind::Reconstruction => unreachable!("reconstruction follows failures"),
        }
    }

    /// Disk failures this quantum (Poisson, at the rate that makes
    /// reconstruction read its share); one reconstruction job each. The
    /// failed disk is replaced at once; its chunks are rebuilt from the
    /// survivors, chosen while the disk is out.
    fn fail_disks(&mut self, now: Timestamp, started: &mut Vec<u32>) {
        let task = TaskKind::Reconstruction;
        let mean = self.rates.bytes_per_sec[task.index()] * self.config.quantum.as_secs_f64()
            / self.rates.bytes_per_failure.max(1.0);
        let failures = poisson(&mut self.failure_rng, mean);
        for _ in 0..failures {
            let disk = DiskId(self.failure_rng.below(u64::from(self.model.disk_count())) as u32);
            let lost = self.model.placed_chunks(&[disk]);
            self.model.fail_disk(disk);
            let mut keys = Vec::new();
            let mut offsets = vec![0u32];
            for m in lost.iter() {
                if let Some(set) = surviving_set(&self.model, m.block()) {
                    keys.extend(set.members.iter().map(|m| m.key()));
                    offsets.push(u32::try_from(keys.len()).expect("under 4G members per failure"));
                }
            }
            self.model.replace_disk(disk);
            if let Some(id) = self.push_job(task, now, JobSets::Stripes { keys, offsets }, None, Vec::new()) {
                started.push(id);
            }
        }
    }

    /// `n` distinct random live files (not claimed by a pending rewrite when
    /// `unclaimed`), sorted.
    fn random_files(&mut self, task: TaskKind, n: u64, unclaimed: bool) -> Vec<u64> {
        let files = self.model.file_count();
        let rng = &mut self.rngs[task.index()];
        let mut picked = Vec::with_capacity(n as usize);
        let mut attempts = 0u64;
        let limit = n.saturating_mul(64) + 1024;
        while (picked.len() as u64) < n && attempts < limit {
            attempts += 1;
            let f = rng.below(files);
            if self.model.file_live(f) && !(unclaimed && self.claimed.contains(f)) {
                picked.push(f);
            }
        }
        picked.sort_unstable();
        picked.dedup();
        picked
    }

    /// The first `max_blocks` blocks of each file, as sorted ranges.
    fn ranges(&self, files: &[u64], max_blocks: u32) -> Vec<BlockRange> {
        files
            .iter()
            .map(|&f| {
                let r = self.model.file_blocks(f);
                BlockRange { start: r.start, len: r.len.min(max_blocks) }
            })
            .collect()
    }
}

impl Rates {
    fn new(config: &SimConfig, model: &ClusterModel) -> Rates {
        let capacity_tb = model.spec().raw_capacity as f64 / 1e12;
        let total = config.demand_mb_s_per_tb * 1e6 * capacity_tb;
        let bytes_per_sec = TaskKind::ALL.map(|t| total * config.mix.share(t) * config.intensity[t.index()].max(0.0));
        let mut period = TaskKind::ALL.map(|t| config.mix.timing(t).period);
        let mut deadline = TaskKind::ALL.map(|t| config.mix.timing(t).deadline);
        // Scrubbing covers whole disks. If one period's share is more than
        // the cluster holds, scrub the whole cluster more often, and shorten
        // the deadline so a scrub never overlaps the next (as the paper does
        // when it scales demand).
        let s = TaskKind::Scrubbing.index();
        let cluster_bytes = model.live_chunks() as f64 * model.spec().block_bytes as f64;
        let per_period = bytes_per_sec[s] * period[s].as_secs_f64();
        if per_period > cluster_bytes && cluster_bytes > 0.0 {
            period[s] = Duration::from_secs_f64(period[s].as_secs_f64() * cluster_bytes / per_period);
            deadline[s] = deadline[s].min(period[s]);
        }
        Rates { bytes_per_sec, period, deadline, bytes_per_failure: bytes_per_failure(model) }
    }
}

/// A set of file ids, one bit per file: random picks of files test it
/// millions of times a quantum, most of them on files long deleted.
#[derive(Debug, Default)]
struct ClaimedFiles(FixedBitSet);

impl ClaimedFiles {
    fn insert(&mut self, file: u64) {
        self.0.grow_and_insert(usize::try_from(file).expect("file ids fit in memory"));
    }

    fn remove(&mut self, file: u64) {
        if let Ok(i) = usize::try_from(file)
            && i < self.0.len()
        {
            self.0.set(i, false);
        }
    }

    fn contains(&self, file: u64) -> bool {
        usize::try_from(file).is_ok_and(|i| self.0.contains(i))
    }
}

/// Mean reconstruction read bytes of one disk failure: each lost chunk of a
/// replicated block costs one read, of an RS k-of-n stripe k reads.
fn bytes_per_failure(model: &ClusterModel) -> f64 {
    let reads: f64 = (0..model.scheme_count())
        .map(|s| {
            let r = model.scheme(s);
            let files: u64 = model.scheme_file_ranges(s).map(|f| f.end - f.start).sum();
            let chunks = files * u64::from(model.spec().file_blocks) / r.data_per_stripe() * u64::from(r.width());
            let per_chunk = match r {
                Redundancy::Replicated { .. } => 1.0,
                Redundancy::ErasureCoded { .. } => r.data_per_stripe() as f64,
            };
            chunks as f64 * per_chunk
        })
        .sum();
    reads * model.spec().block_bytes as f64 / f64::from(model.disk_count())
}

/// A Poisson draw (Knuth's method, in steps of at most 30 so `exp` stays
/// representable for large means).
fn poisson(rng: &mut SplitMix64, mean: f64) -> u64 {
    let mut left = mean.max(0.0);
    let mut count = 0;
    while left > 0.0 {
        let step = left.min(30.0);
        left -= step;
        let limit = (-step).exp();
        let mut p = rng.unit();
        while p > limit {
            count += 1;
            p *= rng.unit();
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_files_grow_on_demand_and_forget_cleanly() {
        let mut claimed = ClaimedFiles::default();
        assert!(!claimed.contains(5));
        claimed.remove(1 << 40);
        claimed.insert(70);
        claimed.insert(3);
        assert!(claimed.contains(70) && claimed.contains(3) && !claimed.contains(4));
        claimed.remove(70);
        assert!(!claimed.contains(70) && claimed.contains(3));
    }

    #[test]
    fn poisson_draws_have_the_right_mean() {
        let mut rng = SplitMix64::new(4);
        for mean in [0.3, 2.0, 75.0] {
            let n = 4000;
            let total: u64 = (0..n).map(|_| poisson(&mut rng, mean)).sum();
            let got = total as f64 / n as f64;
            assert!((got - mean).abs() < 0.05 * mean + 0.05, "mean {mean}: got {got}");
        }
    }
}
