//! The simulated world: the cluster over time and the maintenance jobs its
//! eight tasks start. It evolves the same way whatever mode reads it — every
//! random choice and every change of the cluster depends only on the seed
//! and the clock — so the three modes see the same events and are
//! comparable.
//!
//! Life cycle of data (SPEC §7, paper appendix A.2): files are transcoded
//! with age from 3-way replication to RS 6-of-9 and then RS 30-of-33
//! (rewritten, old blocks deleted); as many new replicated files are
//! ingested as transcoding moves on, so the layout holds; the owners delete
//! the oldest RS 30-of-33 files to keep the fill at its target. Garbage
//! collection rewrites random files of a designated object/KV-store subset
//! in their own scheme. Disks fail at random and are replaced at once;
//! reconstruction rebuilds their chunks from the survivors.
//!
//! A rewriting job (GC, transcoding) commits its rewrites when its window
//! closes, at its deadline: every mode has read the files by then, and
//! commits happen at the same instant in every mode. Nothing is claimed: a
//! file may be picked by several jobs, and a commit skips the files that an
//! earlier commit or the owners already deleted, as a real store would.

use super::SimConfig;
use super::files::{FileCursor, ObjectFiles};
use crate::model::{ClusterModel, ClusterSpec, ModelError, Redundancy};
use crate::rng::SplitMix64;
use crate::workload::surviving_members;
use dingo_types::{
    BlockId, BlockRange, BlockSet, DiskId, Member, MemberBitmap, ReadSets, TaskKind, Timestamp, Topology,
};
use roaring::RoaringTreemap;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a job reads, kept in the form every mode can walk, as compactly
/// as the modes allow (a 1 EB month holds hundreds of millions of sets).
#[derive(Clone, Debug)]
pub enum JobSets {
    /// One set per file: its first `max_blocks` blocks (all of them for
    /// whole-file reads), any copy of each block.
    Files { files: Vec<u64>, max_blocks: u32 },
    /// One set per member (exact copies: scrubbing, rebalancing candidates).
    Members(MemberBitmap),
    /// Reconstruction: one set per lost chunk, named by its block. The set
    /// is what [`surviving_members`] gives for the block: any copy of a
    /// replicated block, or the first `k` other members of its stripe.
    /// Only one disk is ever out at a time, so those are the survivors the
    /// failure left, whenever they are listed. `members`: of all sets.
    Rebuilds { blocks: Vec<u64>, members: u64 },
}

impl JobSets {
    pub fn len(&self) -> u64 {
        match self {
            JobSets::Files { files, .. } => files.len() as u64,
            JobSets::Members(m) => m.len(),
            JobSets::Rebuilds { blocks, .. } => blocks.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The blocks of file set `i`.
    pub fn file_range(&self, model: &ClusterModel, i: usize) -> BlockRange {
        let JobSets::Files { files, max_blocks } = self else { panic!("not a file job") };
        let r = model.file_blocks(files[i]);
        BlockRange { start: r.start, len: r.len.min(*max_blocks) }
    }

    /// Appends the members of rebuild set `i` to `out`.
    pub fn rebuild(&self, model: &ClusterModel, i: usize, out: &mut Vec<Member>) {
        let JobSets::Rebuilds { blocks, .. } = self else { panic!("not a reconstruction job") };
        let found = surviving_members(model, BlockId(blocks[i]), out);
        debug_assert!(found, "a rebuild set lost its survivors");
    }

    fn to_read_sets(&self, model: &ClusterModel) -> ReadSets {
        match self {
            JobSets::Files { files, .. } => {
                ReadSets::Ranges((0..files.len()).map(|i| self.file_range(model, i)).collect())
            }
            JobSets::Members(m) => ReadSets::EachMember(m.clone()),
            JobSets::Rebuilds { blocks, .. } => {
                let mut members = Vec::new();
                ReadSets::Sets(
                    (0..blocks.len())
                        .map(|i| {
                            members.clear();
                            self.rebuild(model, i, &mut members);
                            BlockSet::new(members.clone())
                        })
                        .collect(),
                )
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
    pub fn declaration(&self, model: &ClusterModel) -> dingo_types::Declaration {
        dingo_types::Declaration {
            task: self.task,
            read_sets: self.sets.to_read_sets(model),
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

/// Per-task event sizes derived from the demand.
#[derive(Clone, Debug)]
struct Rates {
    /// Bytes per second each task reads.
    bytes_per_sec: [f64; TaskKind::COUNT],
    /// Period and deadline each task uses (scrubbing's shortened when the
    /// demand asks for more than one pass over the cluster per period).
    period: [Duration; TaskKind::COUNT],
    deadline: [Duration; TaskKind::COUNT],
    /// Fraction of the disks one scrubbing event covers (1 unless the
    /// demand is below the paper's, when a pass takes several periods).
    scrub_fraction: f64,
}

pub struct World {
    pub model: ClusterModel,
    config: SimConfig,
    rates: Rates,
    /// Transcoding chain: layout schemes by decreasing overhead.
    chain: Vec<usize>,
    rngs: [SplitMix64; TaskKind::COUNT],
    /// Failed disks are drawn from their own stream.
    failure_rng: SplitMix64,
    next_event: [Timestamp; TaskKind::COUNT],
    /// Fractional files/disks/failures carried between events so rates stay exact.
    carry: [f64; TaskKind::COUNT],
    transcode_cursors: Vec<FileCursor>,
    delete_cursor: FileCursor,
    scrub_cursor: u32,
    /// The object/KV-store files garbage collection rewrites.
    objects: ObjectFiles,
    /// Replicated files to ingest: as many as transcoding moved on.
    ingest_due: u64,
    /// Files a pending transcoding job will move, and the scheme it moves
    /// them to: garbage collection rewriting one of them writes it there
    /// (the rewrite does the transcoding, and the layout's flows stay balanced).
    transcode_to: FxHashMap<u64, usize>,
    jobs: BTreeMap<u32, Job>,
    pending_commits: Vec<Commit>,
    next_job: u32,
    target_chunks: u64,
    /// Logical bytes each task's jobs declared (what it must read), by
    /// [`TaskKind::index`].
    generated_bytes: [f64; TaskKind::COUNT],
    /// Files that existed at the start (ids below this).
    initial_files: u64,
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
        let spec = ClusterSpec { layout: steady_layout(config), ..config.cluster.clone() };
        let model = ClusterModel::new(spec)?;
        let mut chain: Vec<usize> = (0..model.scheme_count()).collect();
        chain.sort_by(|&a, &b| model.scheme(b).overhead().total_cmp(&model.scheme(a).overhead()));
        let rates = Rates::new(config, &model);
        let mut seeds = SplitMix64::new(config.cluster.seed ^ 0x05EE_D0FD_16E0);
        let rngs = TaskKind::ALL.map(|_| SplitMix64::new(seeds.next_u64()));
        let failure_rng = SplitMix64::new(seeds.next_u64());
        let objects = ObjectFiles::new(&model, config.gc_subset_fraction, &mut SplitMix64::new(seeds.next_u64()));
        let target_chunks = model.live_chunks();
        let model_files = model.file_count();
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
            delete_cursor: FileCursor::default(),
            scrub_cursor: 0,
            objects,
            ingest_due: 0,
            transcode_to: FxHashMap::default(),
            jobs: BTreeMap::new(),
            pending_commits: Vec::new(),
            next_job: 0,
            target_chunks,
            generated_bytes: [0.0; TaskKind::COUNT],
            initial_files: model_files,
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

    /// Logical bytes `task` reads per second at the configured demand and
    /// intensity, times the horizon: what its jobs should declare.
    pub fn nominal_bytes(&self, task: TaskKind) -> f64 {
        self.task_rate(task) * self.config.horizon.as_secs_f64()
    }

    /// Logical bytes `task`'s jobs declared so far.
    pub fn generated_bytes(&self, task: TaskKind) -> f64 {
        self.generated_bytes[task.index()]
    }

    /// Fraction of the files that existed at the start that are deleted now.
    pub fn initial_files_deleted_fraction(&self) -> f64 {
        if self.initial_files == 0 {
            return 0.0;
        }
        let live = (0..self.initial_files).filter(|&f| self.model.file_live(f)).count() as u64;
        1.0 - live as f64 / self.initial_files as f64
    }

    /// Fraction of the live raw bytes stored with each scheme (by scheme index).
    pub fn layout(&self) -> Vec<f64> {
        let total = self.model.live_chunks().max(1) as f64;
        (0..self.model.scheme_count()).map(|s| self.model.scheme_live_chunks(s) as f64 / total).collect()
    }

    /// Live raw bytes over raw capacity.
    pub fn fill(&self) -> f64 {
        self.model.live_chunks() as f64 * self.block_bytes() / self.model.spec().raw_capacity as f64
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

    /// Rewrites a closed job's files that are still live (the others were
    /// rewritten or deleted since it picked them) into new files, which
    /// keep their place in the object/KV-store subset.
    fn apply(&mut self, commit: Commit, deleted: &mut RoaringTreemap) {
        let live: Vec<u64> = commit.files.iter().copied().filter(|&f| self.model.file_live(f)).collect();
        // New files per (scheme, object-store member).
        let mut new_files = vec![[0u64; 2]; self.model.scheme_count()];
        for &f in &live {
            let to = match commit.to_scheme {
                Some(to) => Some(to),
                None => self.transcode_to.get(&f).copied(),
            };
            let scheme = to.unwrap_or_else(|| self.model.file_scheme(f));
            new_files[scheme][usize::from(self.objects.contains(f))] += 1;
            if self.chain.len() > 1 && to == Some(self.chain[1]) {
                self.ingest_due += 1;
            }
        }
        if commit.to_scheme.is_some() {
            for f in &commit.files {
                self.transcode_to.remove(f);
            }
        }
        *deleted |= self.delete_files(&live);
        for (scheme, [plain, objects]) in new_files.into_iter().enumerate() {
            self.model.add_files(scheme, plain);
            for f in self.model.add_files(scheme, objects) {
                self.objects.insert(f);
            }
        }
    }

    /// Deletes live files, keeping the object-store subset's count.
    fn delete_files(&mut self, files: &[u64]) -> RoaringTreemap {
        for &f in files {
            if self.model.file_live(f) {
                self.objects.forget(f);
            }
        }
        self.model.delete_files(files)
    }

    /// Ingests as many new replicated files as transcoding moved on (so the
    /// layout holds; new files refill the object-store subset where the
    /// owners deleted members), then deletes the oldest files of the last
    /// scheme while the cluster is over its fill target (owners deleting
    /// old data).
    fn ingest_and_expire(&mut self, deleted: &mut RoaringTreemap) {
        let files = std::mem::take(&mut self.ingest_due);
        let objects = files.min(self.objects.deficit());
        self.model.add_files(self.chain[0], files - objects);
        for f in self.model.add_files(self.chain[0], objects) {
            self.objects.insert(f);
        }
        let last = *self.chain.last().expect("at least one scheme");
        let over = self.model.live_chunks().saturating_sub(self.target_chunks);
        let victims = self.delete_cursor.take(&self.model, last, over.div_ceil(self.chunks_per_file(last)));
        *deleted |= self.delete_files(&victims);
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
            let horizon = Timestamp(self.config.horizon.as_millis() as u64);
            while self.next_event[task.index()] < quantum_end.min(horizon) {
                let event = self.next_event[task.index()];
                self.next_event[task.index()] = event.saturating_add(period.max(Duration::from_millis(1)));
                // An event covers its period; the last one only what is
                // left of the horizon, so a run generates its nominal demand.
                let covered = period.min(Duration::from_millis(horizon.0 - event.0)).as_secs_f64();
                let bytes = self.rates.bytes_per_sec[task.index()] * covered;
                let scale = covered / period.as_secs_f64();
                if let Some(job) = self.make_job(task, now, bytes, scale) {
                    started.push(job);
                }
            }
        }
    }

    /// Whole units of `per_unit` bytes for one event of `task`, carrying the
    /// difference to its next event: rounding to the nearest unit keeps the
    /// run's total within half a unit of the nominal (flooring would lose up
    /// to one, a whole disk failure in a small cluster).
    fn units(&mut self, task: TaskKind, bytes: f64, per_unit: f64) -> u64 {
        let c = &mut self.carry[task.index()];
        *c += bytes / per_unit;
        let n = c.round().max(0.0);
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
    fn make_job(&mut self, task: TaskKind, now: Timestamp, bytes: f64, scale: f64) -> Option<u32> {
        let file_bytes = self.file_bytes();
        match task {
            TaskKind::GarbageCollection => {
                let n = self.units(task, bytes, file_bytes);
                let files = self.objects.pick(&self.model, n, &mut self.rngs[task.index()]);
                let sets = JobSets::Files { files: files.clone(), max_blocks: u32::MAX };
                self.push_job(task, now, sets, None, vec![Commit { files, to_scheme: None }])
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

    /// Disk failures this quantum, at the rate that makes reconstruction
    /// read its share given what a failure costs in the cluster as it is
    /// now; one reconstruction job each. The count carries its fraction to
    /// the next quantum (an exact rate: Poisson counts would put a small
    /// cluster's month 15 % off its share), the disk is drawn at random.
    /// The failed disk is replaced at once; its chunks are rebuilt from the
    /// survivors, chosen while the disk is out.
    fn fail_disks(&mut self, now: Timestamp, started: &mut Vec<u32>) {
        let task = TaskKind::Reconstruction;
        let bytes = self.rates.bytes_per_sec[task.index()] * self.config.quantum.as_secs_f64();
        let failures = self.units(task, bytes, bytes_per_failure(&self.model).max(1.0));
        for _ in 0..failures {
            let disk = DiskId(self.failure_rng.below(u64::from(self.model.disk_count())) as u32);
            let lost = self.model.placed_chunks(&[disk]);
            self.model.fail_disk(disk);
            let mut blocks = Vec::with_capacity(lost.len() as usize);
            let mut total = 0;
            let mut members = Vec::new();
            for m in lost.iter() {
                members.clear();
                if surviving_members(&self.model, m.block(), &mut members) {
                    blocks.push(m.block().0);
                    total += members.len() as u64;
                }
            }
            self.model.replace_disk(disk);
            let sets = JobSets::Rebuilds { blocks, members: total };
            if cfg!(debug_assertions) {
                // The sets listed with the disk back in are the ones it left.
                let mut again = Vec::new();
                for (i, m) in lost.iter().enumerate() {
                    again.clear();
                    sets.rebuild(&self.model, i, &mut again);
                    members.clear();
                    self.model.fail_disk(disk);
                    surviving_members(&self.model, m.block(), &mut members);
                    self.model.replace_disk(disk);
                    assert_eq!(again, members, "rebuild set of {}", m.block());
                }
            }
            if let Some(id) = self.push_job(task, now, sets, None, Vec::new()) {
                started.push(id);
            }
        }
    }

    /// `n` distinct random live files (every live file if there are no
    /// more), sorted.
    fn random_files(&mut self, task: TaskKind, n: u64) -> Vec<u64> {
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

impl Rates {
    /// Bytes per second each task reads, with `written_bytes` stored.
    /// Scrubbing is sized by coverage, not by its mix share: at the paper's
    /// demand a pass reads every written chunk once per scrubbing period
    /// (Table 2: 30 days); a higher demand (or intensity) scrubs more often
    /// with a deadline cut to the period, a lower one covers part of the
    /// cluster per period (paper §6.4). The other tasks split what is left
    /// of the demand in proportion to their shares. A mix with no
    /// scrubbing share does not scrub.
    fn bytes_per_sec(config: &SimConfig, written_bytes: f64) -> [f64; TaskKind::COUNT] {
        let total = config.demand_mb_s_per_tb * 1e6 * config.cluster.raw_capacity as f64 / 1e12;
        let s = TaskKind::Scrubbing.index();
        let scrub_share = config.mix.shares[s];
        let passes = config.demand_mb_s_per_tb / PAPER_DEMAND_MB_S_PER_TB;
        let period = config.mix.timing[s].period.as_secs_f64();
        let scrub_rate = if scrub_share > 0.0 { written_bytes / period * passes } else { 0.0 };
        let others = (total - scrub_rate).max(0.0);
        TaskKind::ALL.map(|t| {
            let nominal = if t.index() == s { scrub_rate } else { others * config.mix.share(t) / (1.0 - scrub_share) };
            nominal * config.intensity[t.index()].max(0.0)
        })
    }

    fn new(config: &SimConfig, model: &ClusterModel) -> Rates {
        let s = TaskKind::Scrubbing.index();
        let mut period = TaskKind::ALL.map(|t| config.mix.timing(t).period);
        let mut deadline = TaskKind::ALL.map(|t| config.mix.timing(t).deadline);
        let written_bytes = model.live_chunks() as f64 * model.spec().block_bytes as f64;
        let bytes_per_sec = Rates::bytes_per_sec(config, written_bytes);
        let passes = config.demand_mb_s_per_tb / PAPER_DEMAND_MB_S_PER_TB;
        let scrub_passes = passes * config.intensity[s];
        // Tasks that sample files: an event that would need more files
        // than the cluster holds becomes more frequent events instead.
        let file_bytes = model.spec().block_bytes as f64 * f64::from(model.spec().file_blocks);
        let fsck_bytes = model.spec().block_bytes as f64 * f64::from(config.fsck_blocks.min(model.spec().file_blocks));
        let files = live_files(model).max(1) as f64;
        let events_per_period =
            |t: TaskKind, unit: f64| bytes_per_sec[t.index()] * period[t.index()].as_secs_f64() / unit / files;
        let speedups = [
            (TaskKind::Scrubbing, scrub_passes),
            (TaskKind::Fsck, events_per_period(TaskKind::Fsck, fsck_bytes)),
            (TaskKind::FileScrubbing, events_per_period(TaskKind::FileScrubbing, file_bytes)),
            (TaskKind::Georeplication, events_per_period(TaskKind::Georeplication, file_bytes)),
        ];
        for (t, factor) in speedups {
            if factor > 1.0 {
                period[t.index()] = Duration::from_secs_f64(period[t.index()].as_secs_f64() / factor);
                deadline[t.index()] = deadline[t.index()].min(period[t.index()]);
            }
        }
        Rates { bytes_per_sec, period, deadline, scrub_fraction: scrub_passes.min(1.0) }
    }
}

/// The layout the world starts from and keeps: the configured one, except
/// that a scheme transcoding reads from must hold the files transcoding has
/// in flight (one stage's share over one deadline, plus a tenth): files stay
/// in their scheme until their job commits, so a smaller tier would run out
/// of files and transcoding would read less than its share. The coldest
/// scheme gives up what the others need.
fn steady_layout(config: &SimConfig) -> Vec<(Redundancy, f64)> {
    let spec = &config.cluster;
    let mut layout = spec.layout.clone();
    let total: f64 = layout.iter().map(|(_, share)| share).sum();
    if layout.len() < 2 || total <= 0.0 {
        return layout;
    }
    for (_, share) in &mut layout {
        *share /= total;
    }
    let mut chain: Vec<usize> = (0..layout.len()).collect();
    chain.sort_by(|&a, &b| layout[b].0.overhead().total_cmp(&layout[a].0.overhead()));
    let written = spec.raw_capacity as f64 * spec.fill;
    let rates = Rates::bytes_per_sec(config, written);
    let transcoding = TaskKind::Transcoding.index();
    let in_flight =
        rates[transcoding] / (chain.len() - 1) as f64 * config.mix.timing[transcoding].deadline.as_secs_f64();
    let (&coldest, sources) = chain.split_last().expect("two schemes or more");
    for &s in sources {
        let needed = layout[s].0.overhead() * in_flight * 1.1 / written;
        layout[s].1 = layout[s].1.max(needed);
    }
    let others: f64 = sources.iter().map(|&s| layout[s].1).sum();
    if others >= 1.0 {
        // Transcoding asks for more than the cluster holds: no cold tier,
        // and transcoding reads what it can.
        for &s in sources {
            layout[s].1 /= others;
        }
        layout[coldest].1 = 0.0;
    } else {
        layout[coldest].1 = 1.0 - others;
    }
    layout
}

/// The demand (MB/s per TB) at which scrubbing covers the cluster once per
/// period: the paper's default (§6.1).
pub const PAPER_DEMAND_MB_S_PER_TB: f64 = 2.0;

/// Live files: live chunks of each scheme over its chunks per file.
fn live_files(model: &ClusterModel) -> u64 {
    (0..model.scheme_count())
        .map(|s| {
            let r = model.scheme(s);
            let per_file = u64::from(model.spec().file_blocks) / r.data_per_stripe() * u64::from(r.width());
            model.scheme_live_chunks(s) / per_file
        })
        .sum()
}

/// Mean reconstruction read bytes of one disk failure in the cluster as it
/// is: each lost chunk of a replicated block costs one read, of an RS
/// k-of-n stripe k reads.
fn bytes_per_failure(model: &ClusterModel) -> f64 {
    let reads: f64 = (0..model.scheme_count())
        .map(|s| {
            let per_chunk = match model.scheme(s) {
                Redundancy::Replicated { .. } => 1.0,
                r @ Redundancy::ErasureCoded { .. } => r.data_per_stripe() as f64,
            };
            model.scheme_live_chunks(s) as f64 * per_chunk
        })
        .sum();
    reads * model.spec().block_bytes as f64 / f64::from(model.disk_count())
}
