//! One run of the demo's scripted timeline in one mode, on a fresh local
//! cluster loaded with the same data.
//!
//! Timeline (fractions of the window `T`; the paper's HDFS experiment,
//! compressed, plus the four file-level tasks): scrubbing of every disk,
//! file scrubbing and georeplication of chosen files start at 0 and are
//! due at `T`; a transcoding round starts every `T/5` for the first four
//! fifths, each due `0.3 T` later; garbage collection of the object-store
//! area starts at `0.05 T`, due `0.8 T` later; a node joins at `0.1 T` and
//! rebalancing is due `0.5 T` later; a node dies at `0.3 T` and
//! reconstruction is due `0.3 T` later; fsck of chosen files starts at
//! `0.5 T`, due `0.25 T` later. A foreground client reads random blocks
//! throughout.

use crate::planner::{DemoPlanner, Planned};
use crate::remote::Remote;
use crate::{DemoError, Foreground, ForegroundLatency, Meter, NodeSample, Result, Scale, io};
use bytes::Bytes;
use dingo_client::{Client, Redundancy};

use dingo_tasks::declarative::Agent;
use dingo_tasks::plan::FilePick;
use dingo_tasks::{CancelFlag, Job, JobReport, Scheduling, imperative, plan};
use dingo_types::TaskKind;
use futures::StreamExt;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the demo's files live in the namespace.
pub const PREFIX: &str = "/demo/";
/// Foreground latency is summarised over this many intervals of the window.
const FG_INTERVALS: u32 = 25;
/// Files written at once while loading.
const LOAD_PARALLELISM: usize = 4;

/// Everything measured in one mode.
#[derive(Clone, Debug, Serialize)]
pub struct ModeResult {
    pub mode: Scheduling,
    pub jobs: Vec<JobReport>,
    /// Disk reads since the timeline started, summed over nodes.
    pub disk: NodeSample,
    pub foreground: ForegroundLatency,
    /// The foreground latency of each kind of read (replica, EC member,
    /// degraded EC read).
    pub foreground_by_kind: std::collections::BTreeMap<String, ForegroundLatency>,
    /// (seconds since start, disk bytes read per class in that interval).
    pub series: Vec<(f64, NodeSample)>,
    /// (seconds since start, what happened): the timeline's events as run.
    pub events: Vec<(f64, String)>,
    /// Free bytes the planner scheduled (declarative mode).
    pub planned_free_bytes: Option<u64>,
    /// The planner's lower bound on the disk bytes the declared work
    /// needed (declarative mode).
    pub read_lower_bound_bytes: Option<u64>,
    /// (seconds since start, bytes the planner scheduled from disk and
    /// free in that sampling interval); empty in imperative mode.
    pub planned_series: Vec<(f64, Planned)>,
    /// (seconds since start, foreground latency of the reads finished in
    /// the interval ending then), intervals of `T`/25.
    pub fg_series: Vec<(f64, ForegroundLatency)>,
    /// The planner's metrics page at the end (declarative mode).
    #[serde(skip)]
    pub planner_metrics: Option<String>,
    pub wall_seconds: f64,
}

fn replicated_path(i: u32) -> String {
    format!("{PREFIX}r/{i:05}")
}

fn ec_prefix() -> String {
    format!("{PREFIX}ec/")
}

fn ec_path(i: u32) -> String {
    format!("{}{i:05}", ec_prefix())
}

/// The deterministic content of file `i` of kind `kind` for `seed`.
fn content(seed: u64, kind: u64, i: u32, len: u64) -> Bytes {
    let mut rng = fastrand::Rng::with_seed(seed ^ (kind << 40) ^ u64::from(i));
    let mut v = vec![0u8; len as usize];
    rng.fill(&mut v);
    v.into()
}

async fn load(client: &Client, scale: &Scale, seed: u64) -> Result<()> {
    let files: Vec<(String, Redundancy, Bytes)> = (0..scale.replicated_files)
        .map(|i| (replicated_path(i), Redundancy::Replicated(3), content(seed, 0, i, scale.file_bytes())))
        .chain(
            (0..scale.ec_files)
                .map(|i| (ec_path(i), Redundancy::Ec { data: 3, parity: 2 }, content(seed, 1, i, scale.file_bytes()))),
        )
        .chain(
            crate::area::files(seed, scale.gc_files, scale.file_bytes(), scale.gc_dead_fraction)?
                .into_iter()
                .map(|(path, data)| (path, Redundancy::Ec { data: 3, parity: 2 }, data)),
        )
        .collect();
    let results: Vec<Result<u64>> = futures::stream::iter(files.into_iter().map(|(path, r, data)| async move {
        client
            .put(&path, r, scale.block_size, data)
            .await
            .map_err(|e| DemoError::Timeline(format!("loading {path}: {e}")))
    }))
    .buffer_unordered(LOAD_PARALLELISM)
    .collect()
    .await;
    results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(())
}

/// Runs jobs of one task in the chosen mode and collects their reports.
#[derive(Clone)]
enum Runner {
    Imperative,
    Declarative(Agent),
}

type Pending = tokio::task::JoinHandle<Result<JobReport>>;

impl Runner {
    /// Starts `job`; imperative jobs pace themselves to finish at
    /// [`imperative::PACE_FRACTION`] of their window.
    fn start(&self, client: &Client, job: Job, cancel: CancelFlag) -> Pending {
        let client = client.clone();
        match self {
            Runner::Imperative => tokio::spawn(async move {
                let finish_by = imperative::finish_by(dingo_daemon::now_ms(), job.deadline_ms);
                Ok(imperative::run(&client, &job, finish_by, &cancel).await)
            }),
            Runner::Declarative(agent) => {
                let agent = agent.clone();
                tokio::spawn(async move {
                    let handle = agent.submit(job, cancel).await;
                    Ok(handle.await.map_err(|_| DemoError::Timeline("task agent stopped".into()))??)
                })
            }
        }
    }
}

pub struct Demo {
    pub exe: PathBuf,
    pub scale: Scale,
    pub seed: u64,
}

impl Demo {
    /// Runs the whole timeline in `mode` on a fresh cluster under `dir`.
    pub async fn run(&self, mode: Scheduling, dir: &Path) -> Result<ModeResult> {
        let scale = &self.scale;
        if dir.exists() {
            io(|| format!("cannot clear {}", dir.display()), std::fs::remove_dir_all(dir))?;
        }
        let config = ("storage.toml", &scale.storage_config());
        let mut cluster = crate::start_cluster(&self.exe, dir, config, scale.nodes, scale.disks_per_node).await?;
        let client = cluster.client()?;
        let t = Instant::now();
        load(&client, scale, self.seed).await?;
        let files = scale.replicated_files + scale.ec_files + scale.gc_files + 1;
        tracing::info!(%mode, "loaded {files} files in {:.1} s", t.elapsed().as_secs_f64());
        let planner = match mode {
            Scheduling::Imperative => None,
            Scheduling::Declarative => Some(DemoPlanner::start(
                &self.exe,
                dir,
                (cluster.meta_addr(), &cluster.credentials().auth),
                scale,
                &crate::TASKS,
            )?),
        };
        let mut runners = HashMap::new();
        for task in crate::TASKS {
            let runner = match &planner {
                None => Runner::Imperative,
                Some(p) => {
                    let conn = p.client(task)?;
                    Runner::Declarative(Agent::spawn(client.clone(), conn, 2 * scale.quantum.as_millis() as u64))
                }
            };
            runners.insert(task, runner);
        }
        let runner = |task: TaskKind| &runners[&task];
        let mut remote = Remote::start(&self.exe, &dir.join("remote"), scale, &ec_prefix()).await?;

        let mut meter = Meter::default();
        let mut nodes = scale.nodes as usize;
        meter.sample(&client, &cluster, nodes).await?;
        meter.reset_baseline();
        let foreground = Foreground::default();
        let stop = CancelFlag::default();
        let fg_task = {
            let (meta, access) = (cluster.meta_addr().to_string(), cluster.credentials().access.clone());
            let make_client = move || Client::new(&meta, &access);
            let (interval, seed) = (scale.foreground_interval, self.seed);
            let started = foreground.run_isolated(make_client, PREFIX.to_string(), interval, seed, stop.clone());
            io(|| "cannot start the foreground client".to_string(), started)?
        };

        let start = Instant::now();
        let start_ms = dingo_daemon::now_ms();
        let due = |at: f64| start_ms + scale.at(at).as_millis() as u64;
        let mut pending: Vec<Pending> = Vec::new();
        // Scrubbing: every disk, due at T; one cancel flag per disk.
        let mut scrub_cancels = Vec::new();
        for job in plan::scrubbing(&client, due(1.0)).await? {
            let cancel = CancelFlag::default();
            scrub_cancels.push((job.label.clone(), cancel.clone()));
            pending.push(runner(TaskKind::Scrubbing).start(&client, job, cancel));
        }
        // File scrubbing and georeplication of chosen erasure-coded files
        // (transcoding deletes replicated ones), due at T.
        let pick = |files: u32, salt: u64| FilePick { sample: Some(files as usize), seed: self.seed ^ salt };
        let job = plan::file_scrubbing(&client, &ec_prefix(), pick(scale.file_scrub_files, 1), due(1.0)).await?;
        pending.push(runner(TaskKind::FileScrubbing).start(&client, job, CancelFlag::default()));
        let job =
            plan::georeplication(&client, &remote.site, &ec_prefix(), pick(scale.georep_files, 2), due(1.0)).await?;
        pending.push(runner(TaskKind::Georeplication).start(&client, job, CancelFlag::default()));
        // The rest of the timeline, in time order.
        let rounds = scale.transcode_rounds;
        let batch = scale.replicated_files / (rounds + 1);
        let mut events: Vec<(f64, Event)> = (0..rounds).map(|r| (f64::from(r) * 0.2, Event::Transcode(r))).collect();
        events.push((0.1, Event::AddNode));
        events.push((0.3, Event::FailNode(1)));
        events.push((0.05, Event::CollectGarbage));
        events.push((0.5, Event::Fsck));
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut series = Vec::new();
        let mut last_total = NodeSample::default();
        let mut planned_series = Vec::new();
        let mut last_planned = match &planner {
            Some(p) => p.planned().await?,
            None => Planned::default(),
        };
        let sample_every = scale.window / 50;
        let mut next_sample = start + sample_every;
        let mut events = events.into_iter().peekable();
        let mut events_run = Vec::new();
        loop {
            let now = Instant::now();
            if now >= next_sample {
                meter.sample(&client, &cluster, nodes).await?;
                let total = meter.totals();
                series.push((start.elapsed().as_secs_f64(), total.minus(&last_total)));
                last_total = total;
                if let Some(p) = &planner {
                    let planned = p.planned().await?;
                    planned_series.push((start.elapsed().as_secs_f64(), planned.minus(&last_planned)));
                    last_planned = planned;
                }
                next_sample += sample_every;
            }
            if let Some((at, _)) = events.peek()
                && start.elapsed() >= scale.at(*at)
            {
                let (at, event) = events.next().expect("peeked");
                events_run.push((start.elapsed().as_secs_f64(), event.to_string()));
                match event {
                    Event::Transcode(r) => {
                        let files: Vec<(String, String)> = (r * batch..(r + 1) * batch)
                            .map(|i| (replicated_path(i), format!("{PREFIX}ec/t{i:05}")))
                            .collect();
                        let job = plan::transcoding(
                            &client,
                            &files,
                            Redundancy::Ec { data: 3, parity: 2 },
                            &format!("round {r}"),
                            due(at + 0.3),
                        )
                        .await?;
                        pending.push(runner(TaskKind::Transcoding).start(&client, job, CancelFlag::default()));
                    }
                    Event::AddNode => {
                        nodes = cluster.add_node(scale.disks_per_node)? + 1;
                        cluster.wait_alive(nodes, Duration::from_secs(30)).await?;
                        meter.sample(&client, &cluster, nodes).await?;
                        let job =
                            plan::rebalancing(&client, scale.rebalance_threshold, self.seed, due(at + 0.5)).await?;
                        match job {
                            Some(job) => {
                                pending.push(runner(TaskKind::Rebalancing).start(&client, job, CancelFlag::default()))
                            }
                            None => return Err(DemoError::Timeline("adding a node left no skew to rebalance".into())),
                        }
                    }
                    Event::FailNode(i) => {
                        // Its counters up to the crash still count.
                        meter.sample(&client, &cluster, nodes).await?;
                        let addr = cluster.node_addr(i).to_string();
                        let status = client.cluster_status().await?;
                        let node = status
                            .nodes
                            .iter()
                            .find(|n| n.addr == addr)
                            .ok_or_else(|| DemoError::Timeline("failed node unknown to meta".into()))?;
                        cluster.kill_node(i);
                        client.mark_node_dead(dingo_types::NodeId(node.id)).await?;
                        // Its disks' scrubbing is moot now.
                        for d in &node.disks {
                            let label = format!("disk {}", d.id);
                            scrub_cancels.iter().filter(|(l, _)| *l == label).for_each(|(_, c)| c.cancel());
                        }
                        let job =
                            plan::reconstruction(&client, &format!("node {} failure", node.id), due(at + 0.3)).await?;
                        pending.push(runner(TaskKind::Reconstruction).start(&client, job, CancelFlag::default()));
                    }
                    Event::CollectGarbage => {
                        let job = plan::garbage_collection(&client, &crate::area::area(), FilePick::ALL, due(at + 0.8))
                            .await?;
                        pending.push(runner(TaskKind::GarbageCollection).start(&client, job, CancelFlag::default()));
                    }
                    Event::Fsck => {
                        let pick = pick(scale.fsck_files, 3);
                        let job = plan::fsck(&client, &ec_prefix(), pick, scale.fsck_blocks, due(at + 0.25)).await?;
                        pending.push(runner(TaskKind::Fsck).start(&client, job, CancelFlag::default()));
                    }
                }
                continue;
            }
            if events.peek().is_none() && pending.iter().all(|p| p.is_finished()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut jobs = Vec::new();
        for p in pending {
            jobs.push(p.await.map_err(|e| DemoError::Timeline(format!("task runner panicked: {e}")))??);
        }
        stop.cancel();
        match fg_task.await {
            Ok(outcome) => outcome?,
            Err(_) => return Err(DemoError::Timeline("the foreground client's thread stopped".into())),
        }
        meter.sample(&client, &cluster, nodes).await?;
        let total = meter.totals();
        series.push((start.elapsed().as_secs_f64(), total.minus(&last_total)));
        let (planned_free_bytes, read_lower_bound_bytes, planner_metrics) = match &planner {
            Some(p) => {
                let planned = p.planned().await?;
                planned_series.push((start.elapsed().as_secs_f64(), planned.minus(&last_planned)));
                (Some(planned.free_bytes), Some(p.read_lower_bound_bytes().await?), Some(p.metrics().await?))
            }
            None => (None, None, None),
        };
        drop(planner);
        remote.stop();
        cluster.stop();
        Ok(ModeResult {
            mode,
            jobs,
            disk: total,
            foreground: foreground.latency(),
            foreground_by_kind: foreground.latency_by_kind(),
            series,
            events: events_run,
            planned_free_bytes,
            read_lower_bound_bytes,
            planned_series,
            fg_series: foreground.intervals(start, scale.window / FG_INTERVALS),
            planner_metrics,
            wall_seconds: start.elapsed().as_secs_f64(),
        })
    }
}

enum Event {
    Transcode(u32),
    AddNode,
    FailNode(usize),
    CollectGarbage,
    Fsck,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Transcode(round) => write!(f, "transcoding round {round}"),
            Event::AddNode => write!(f, "node added"),
            Event::FailNode(_) => write!(f, "node killed"),
            Event::CollectGarbage => write!(f, "garbage collection"),
            Event::Fsck => write!(f, "fsck"),
        }
    }
}
