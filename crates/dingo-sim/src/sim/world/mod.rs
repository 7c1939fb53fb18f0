//! The simulated world: the cluster over time and the maintenance jobs its
//! eight tasks start. It evolves the same way whatever mode reads it — every
//! random choice and every change of the cluster depends only on the seed
//! and the clock — so the three modes see the same events and are
//! comparable.
//!
//! Life cycle of data (DESIGN §5, paper appendix A.2): files are transcoded
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
use crate::model::{ClusterModel, ModelError, ModelSpec, StripeShape};
use crate::rng::SplitMix64;
use dingo_types::{
    BlockId, BlockRange, BlockSet, ChunkRef, DiskId, Member, MemberBitmap, ReadSets, TaskKind, Timestamp,
};
use roaring::RoaringTreemap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

mod jobs;
mod rates;

pub use rates::PAPER_DEMAND_MB_S_PER_TB;
use rates::{Rates, steady_layout};

/// What a job reads, kept in the form every mode can walk, as compactly
/// as the modes allow (a 1 EB month holds hundreds of millions of sets).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum JobSets {
    /// One set per file: its first `max_blocks` blocks (all of them for
    /// whole-file reads), any copy of each block.
    Files { files: Vec<u64>, max_blocks: u32 },
    /// One set per member (exact copies: scrubbing, rebalancing candidates).
    Members(MemberBitmap),
    /// Reconstruction: one set per lost chunk, named by its block. The set
    /// is what `ClusterModel::stripe_survivors` gives for the block: any copy of a
    /// replicated block, or the first `k` other members of its stripe;
    /// with `any_k`, any `k` of all `n − 1` (`stripe_all_survivors`).
    /// Only one disk is ever out at a time, so those are the survivors the
    /// failure left, whenever they are listed. `members`: of all sets, the
    /// members they need read (`k` per erasure-coded set).
    Rebuilds { blocks: Vec<u64>, members: u64, any_k: bool },
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

    /// Appends the members of rebuild set `i` to `out`; returns how many of
    /// them it needs (all, but `k` of an erasure-coded stripe's survivors
    /// with `any_k`).
    pub fn rebuild(&self, model: &ClusterModel, i: usize, out: &mut Vec<Member>) -> usize {
        let JobSets::Rebuilds { blocks, any_k, .. } = self else { panic!("not a reconstruction job") };
        let start = out.len();
        let needed = if *any_k {
            model.stripe_all_survivors(BlockId(blocks[i]), out)
        } else {
            model.stripe_survivors(BlockId(blocks[i]), out).then(|| (out.len() - start) as u32)
        };
        debug_assert!(needed.is_some(), "a rebuild set lost its survivors");
        needed.unwrap_or(0) as usize
    }

    /// Appends the reads of rebuild set `i` to `out`: each member's chunk
    /// to read and its disk ([`ClusterModel::stripe_survivor_reads`]).
    pub fn rebuild_reads(&self, model: &ClusterModel, i: usize, out: &mut Vec<(ChunkRef, DiskId)>) {
        let JobSets::Rebuilds { blocks, .. } = self else { panic!("not a reconstruction job") };
        let found = model.stripe_survivor_reads(BlockId(blocks[i]), out);
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
                            let needed = self.rebuild(model, i, &mut members);
                            if needed < members.len() {
                                BlockSet::choose(members.clone(), needed as u32)
                            } else {
                                BlockSet::new(members.clone())
                            }
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
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Commit {
    files: Vec<u64>,
    /// Scheme of the rewritten files; `None`: each file's own scheme (GC).
    to_scheme: Option<usize>,
}

/// One maintenance job: what one event of one task reads, by when.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub id: u32,
    pub task: TaskKind,
    pub arrival: Timestamp,
    pub deadline: Timestamp,
    pub sets: JobSets,
    /// `None`: every set; `Some(n)`: any `n` of them (rebalancing).
    pub sets_needed: Option<u64>,
    /// Transcoding's moves; garbage collection's rewrite of its own files
    /// is made from `sets` at close ([`World::close_due`]).
    commits: Vec<Commit>,
}

impl Job {
    /// The declaration the job makes in declarative mode.
    pub fn declaration(&self, model: &ClusterModel) -> dingo_types::Declaration {
        dingo_types::Declaration {
            task: self.task,
            read_sets: self.sets.to_read_sets(model),
            sets_needed: self.sets_needed,
            bytes_needed: None,
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

#[derive(Serialize, Deserialize)]
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
    /// Per disk: the deadline of the rebalancing job moving data off it,
    /// which keeps it out of later jobs until then.
    rebalancing_until: Vec<Timestamp>,
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
    /// [`TaskKind::index`]: jobs started in the horizon.
    generated_bytes: [f64; TaskKind::COUNT],
    /// The same for the jobs in flight at a warm start.
    warm_bytes: [f64; TaskKind::COUNT],
    /// Files that existed at the start (ids below this).
    initial_files: u64,
    /// The run's first instant: 0, or for a warm start late enough that
    /// every job open then arrived at or after 0 ([`warm_epoch`]).
    start: Timestamp,
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
        let spec = ModelSpec { layout: steady_layout(config), ..config.cluster.clone() };
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
        let disk_count = dingo_types::Topology::disk_count(&model);
        let start = if config.warm_start { warm_epoch(config, &rates) } else { Timestamp::ZERO };
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
            rebalancing_until: vec![Timestamp::ZERO; disk_count as usize],
            objects,
            ingest_due: 0,
            transcode_to: FxHashMap::default(),
            jobs: BTreeMap::new(),
            pending_commits: Vec::new(),
            next_job: 0,
            target_chunks,
            generated_bytes: [0.0; TaskKind::COUNT],
            warm_bytes: [0.0; TaskKind::COUNT],
            initial_files: model_files,
            start,
        })
    }

    /// The run's first instant (see [`SimConfig::warm_start`]).
    pub fn start(&self) -> Timestamp {
        self.start
    }

    /// Starts the jobs a cluster in steady state has open at the run's
    /// start ([`Self::start_in_flight`]) and times each periodic task's
    /// next event half a period on, where the youngest open job leaves it
    /// (half the horizon on for a period longer than the horizon, whose
    /// one event then covers the whole horizon's demand).
    /// Their work is demand from before the horizon: it counts in
    /// [`Self::declared_bytes`], not in [`Self::generated_bytes`]. Returns
    /// the jobs' ids.
    pub fn warm_start(&mut self) -> Vec<u32> {
        let started = self.start_in_flight(self.start);
        for task in TaskKind::ALL {
            let first = self.rates.period[task.index()].min(self.config.horizon) / 2;
            self.next_event[task.index()] = self.start.saturating_add(first);
        }
        self.warm_bytes = std::mem::take(&mut self.generated_bytes);
        started
    }

    pub fn job(&self, id: u32) -> &Job {
        &self.jobs[&id]
    }

    /// Takes job `id` out of the world without committing anything (the
    /// planner benchmark hands each job to the planner and keeps no copy).
    pub fn remove_job(&mut self, id: u32) -> Option<Job> {
        self.jobs.remove(&id)
    }

    /// Jobs whose window is still open.
    pub fn open_jobs(&self) -> usize {
        self.jobs.len()
    }

    /// The latest deadline of the open jobs.
    pub fn last_deadline(&self) -> Option<Timestamp> {
        self.jobs.values().map(|j| j.deadline).max()
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

    /// Logical bytes the jobs `task` started in the horizon declared so far.
    pub fn generated_bytes(&self, task: TaskKind) -> f64 {
        self.generated_bytes[task.index()]
    }

    /// Logical bytes all of `task`'s jobs declared: those in flight at a
    /// warm start too, so what the modes read.
    pub fn declared_bytes(&self, task: TaskKind) -> f64 {
        self.generated_bytes[task.index()] + self.warm_bytes[task.index()]
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
            if let (TaskKind::GarbageCollection, JobSets::Files { files, .. }) = (job.task, &job.sets) {
                self.pending_commits.push(Commit { files: files.clone(), to_scheme: None });
            }
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
        u64::from(self.model.spec().file_blocks) / r.data_per_stripe() * u64::from(r.stripe_width())
    }

    fn file_bytes(&self) -> f64 {
        self.model.spec().block_bytes as f64 * f64::from(self.model.spec().file_blocks)
    }

    fn block_bytes(&self) -> f64 {
        self.model.spec().block_bytes as f64
    }
}

/// Where a warm run's clock starts: the longest deadline of the tasks that
/// run, rounded up to whole days (the diurnal budget keeps its phase) and
/// quanta, so every job open at the start arrived at or after 0.
fn warm_epoch(config: &SimConfig, rates: &Rates) -> Timestamp {
    const DAY_MS: u64 = 86_400_000;
    let longest = TaskKind::ALL
        .iter()
        .filter(|t| rates.bytes_per_sec[t.index()] > 0.0)
        .map(|t| rates.deadline[t.index()].as_millis() as u64)
        .max()
        .unwrap_or(0);
    let quantum_ms = (config.quantum.as_millis() as u64).max(1);
    Timestamp(longest.div_ceil(DAY_MS).saturating_mul(DAY_MS).div_ceil(quantum_ms).saturating_mul(quantum_ms))
}
