//! The waiting experiment's clusters: one job per disk (the reference, a
//! fixed-rate scrubber, a Waiting scrubber, or planner-like pinned groups),
//! each disk with its run's seeded foreground.

use super::SeriesRow;
use super::job_name;
use super::model::{self, Background, DiskRun, FgRead, WaitSpec};
use crate::BenchError;
use crate::cluster::{self, DiskTarget, scrub_tag, since_start_us, write_data};
use crate::harness::Options;
use crate::proc::CpuTimes;
use dingo_client::{Client, IoTag};
use dingo_iosched::PolicyKind;
use dingo_iosched::waiting::GateParams;
use dingo_proto::v1::{DiskQuantumBudget, QuantumBudgetRequest};
use dingo_types::TaskKind;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Chunks per disk: the groups cycle through them, so a chunk is pinned
/// again only after its last pin expired (6 groups × 2 s > 2 s + 5 s grace
/// with 2 chunks a group).
const FILES_PER_DISK: u32 = 12;

/// What one disk of a cluster measured.
pub(super) struct DiskResult {
    pub(super) job: Background,
    pub(super) run: u32,
    pub(super) measured: DiskRun,
}

/// The gate every disk of a cluster's nodes runs (`[node.io] waiting`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClusterGate {
    Off,
    /// Tuned online for a mean-slowdown goal.
    Tuned {
        goal_us: u64,
    },
    /// CFQ's fixed parameters, never tuned (the paper's baseline).
    CfqLike,
}

impl ClusterGate {
    /// The node config's `waiting` line, if any.
    fn config_line(self, spec: &WaitSpec) -> Option<String> {
        match self {
            ClusterGate::Off => None,
            ClusterGate::Tuned { goal_us } => Some(format!(
                "waiting = {{ goal_ms = {}, window_s = {}, retune_s = {} }}\n",
                goal_us as f64 / 1e3,
                spec.window_us as f64 / 1e6,
                spec.retune_us as f64 / 1e6
            )),
            ClusterGate::CfqLike => Some(format!(
                "waiting = {{ size = \"{}\", threshold_ms = {} }}\n",
                model::CFQ_REQUEST_BYTES,
                model::CFQ_THRESHOLD_US as f64 / 1e3
            )),
        }
    }

    /// The cluster's name in the per-second series.
    fn name(self) -> String {
        match self {
            ClusterGate::Off => "baseline".into(),
            ClusterGate::Tuned { goal_us } => format!("goal-{goal_us}us"),
            ClusterGate::CfqLike => "cfq-like".into(),
        }
    }
}

/// Starts a cluster with `gate` on every disk, runs `jobs[i]` on disk `i`
/// with run `jobs[i].1`'s foreground, and returns what each disk measured
/// and the machine's CPU utilisation.
pub(super) async fn one_cluster(
    opts: &Options,
    spec: &WaitSpec,
    gate: ClusterGate,
    jobs: &[(Background, u32)],
    fgs: &[Vec<FgRead>],
    dir: &Path,
    series: &mut Vec<SeriesRow>,
) -> Result<(Vec<DiskResult>, f64), BenchError> {
    // No general cache (every read reaches the head); pinned room for the
    // groups' chunks (at most 4 groups × 2 chunks of 4 MiB per disk).
    let pinned_bytes = jobs.len() as u64 * 4 * 2 * spec.scrub_read_bytes;
    let mut config =
        cluster::node_config(pinned_bytes, spec.positioning_us, spec.transfer_bytes_per_sec, PolicyKind::Classful);
    if let Some(line) = gate.config_line(spec) {
        config.push_str(&line);
    }
    // Three disks a node: placement fills one disk of a node first, and
    // chunks move only between nodes, so other nodes must have some to give.
    let disks_per_node = 3;
    let nodes = (jobs.len() as u32).div_ceil(disks_per_node);
    let cluster = cluster::start(&opts.exe, dir, nodes, disks_per_node, &config).await?;
    let client = cluster.client()?;
    let targets = write_data(&client, spec.scrub_read_bytes, "/waiting", FILES_PER_DISK).await?;
    if targets.len() < jobs.len() {
        return Err(BenchError::Setup(format!("{} disks for {} jobs", targets.len(), jobs.len())));
    }
    let before = disk_state(&client, &targets.iter().collect::<Vec<_>>()).await?;
    let start = Instant::now() + Duration::from_millis(300);
    let start_ms = wall_ms() + 300;
    let cpu_before = CpuTimes::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut results = Vec::new();
    for (i, (&(job, run), target)) in jobs.iter().zip(targets).enumerate() {
        let fg = Arc::new(fgs[run as usize].clone());
        let rec = Arc::new(Mutex::new(DiskRun { fg_latency_us: vec![None; fg.len()], ..DiskRun::default() }));
        let target = Arc::new(target);
        tasks.spawn(foreground(client.clone(), target.clone(), fg, spec.scrub_read_bytes, start, rec.clone(), run));
        let declaration = 1 + 2 * i as u64;
        match job {
            Background::Reference => {}
            Background::Waiting { .. } | Background::CfqLike => {
                for k in 0..spec.scrub_outstanding {
                    let offset = k as usize;
                    tasks.spawn(backlogged(
                        client.clone(),
                        spec.clone(),
                        target.clone(),
                        declaration,
                        offset,
                        start,
                        rec.clone(),
                    ));
                }
            }
            Background::FixedRate { share_ppm } => {
                tasks.spawn(fixed_rate(
                    client.clone(),
                    spec.clone(),
                    target.clone(),
                    declaration,
                    share_ppm,
                    start,
                    rec.clone(),
                ));
            }
            Background::Groups { .. } => {
                tasks.spawn(groups(
                    client.clone(),
                    spec.clone(),
                    target.clone(),
                    declaration,
                    start,
                    start_ms,
                    rec.clone(),
                ));
            }
        }
        results.push((job, run, target, rec));
    }
    tokio::time::sleep_until(start + Duration::from_secs(spec.duration_s)).await;
    tasks.shutdown().await;
    let cpu = CpuTimes::utilisation_since(cpu_before);
    let targets: Vec<&DiskTarget> = results.iter().map(|r| &*r.2).collect();
    let after = disk_state(&client, &targets).await?;
    drop(cluster);
    let _ = std::fs::remove_dir_all(dir);
    let cluster_name = gate.name();
    let mut out = Vec::new();
    for (i, (job, run, _, rec)) in results.into_iter().enumerate() {
        let mut measured = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
        match job {
            Background::Groups { .. } => {
                // Read by the declarations minus read from the disk.
                let disk_bytes = after[i].0.saturating_sub(before[i].0);
                measured.achieved_free_bytes = measured.achieved_free_bytes.saturating_sub(disk_bytes);
            }
            Background::Waiting { .. } | Background::CfqLike => measured.gate = after[i].1,
            Background::Reference | Background::FixedRate { .. } => {}
        }
        series.extend(per_second(spec, &fgs[run as usize], &measured, &cluster_name, job, run));
        out.push(DiskResult { job, run, measured });
    }
    Ok((out, cpu))
}

pub(super) fn per_second(
    spec: &WaitSpec,
    fg: &[FgRead],
    m: &DiskRun,
    cluster: &str,
    job: Background,
    run: u32,
) -> Vec<SeriesRow> {
    (0..spec.duration_s)
        .map(|second| {
            let in_second = |t: u64| t / 1_000_000 == second;
            let lat: Vec<u64> =
                fg.iter().zip(&m.fg_latency_us).filter(|(r, _)| in_second(r.at_us)).filter_map(|(_, l)| *l).collect();
            SeriesRow {
                cluster: cluster.to_string(),
                job: job_name(job),
                run,
                second,
                fg_reads: lat.len() as u64,
                fg_mean_ms: if lat.is_empty() { 0.0 } else { lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e3 },
                scrub_bytes: m.scrub_done.iter().filter(|d| in_second(d.0)).map(|d| d.1).sum(),
            }
        })
        .collect()
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// What each disk's node counts: bytes read for scrubbing, and the disk's
/// Waiting gate at this moment, if it has one.
async fn disk_state(client: &Client, targets: &[&DiskTarget]) -> Result<Vec<(u64, Option<GateParams>)>, BenchError> {
    let mut out = Vec::new();
    for t in targets {
        let stats = client.node_stats(&t.addr).await?;
        let disk = stats.disks.iter().find(|d| d.disk == t.disk);
        let bytes = disk
            .iter()
            .flat_map(|d| &d.classes)
            .filter(|c| c.class_name == TaskKind::Scrubbing.name())
            .map(|c| c.bytes)
            .sum();
        let gate = disk
            .and_then(|d| d.gate.as_ref())
            .map(|g| GateParams { size_bytes: g.size_bytes, threshold_us: g.threshold_us });
        out.push((bytes, gate));
    }
    Ok(out)
}

/// The foreground of one disk, open loop: read `i` at its time, its latency
/// recorded by index.
async fn foreground(
    client: Client,
    target: Arc<DiskTarget>,
    fg: Arc<Vec<FgRead>>,
    chunk_bytes: u64,
    start: Instant,
    rec: Arc<Mutex<DiskRun>>,
    run: u32,
) {
    let mut rng = fastrand::Rng::with_seed(u64::from(run) ^ 0x5EED);
    let mut reads = tokio::task::JoinSet::new();
    for (i, r) in fg.iter().copied().enumerate() {
        tokio::time::sleep_until(start + Duration::from_micros(r.at_us)).await;
        let chunk = target.chunks[rng.usize(..target.chunks.len())];
        let offset = rng.u64(..(chunk_bytes - r.bytes) / model::FG_STEP_BYTES + 1) * model::FG_STEP_BYTES;
        let (client, target, rec) = (client.clone(), target.clone(), rec.clone());
        reads.spawn(async move {
            let ok = client.read_chunk(&target.addr, chunk, offset, r.bytes, IoTag::Foreground).await.is_ok();
            let latency_us = since_start_us(start).saturating_sub(r.at_us);
            if ok {
                rec.lock().unwrap_or_else(|p| p.into_inner()).fg_latency_us[i] = Some(latency_us);
            }
        });
        while reads.try_join_next().is_some() {}
    }
    while reads.join_next().await.is_some() {}
}

/// One outstanding read of a scrubber that always has work.
async fn backlogged(
    client: Client,
    spec: WaitSpec,
    target: Arc<DiskTarget>,
    declaration: u64,
    offset: usize,
    start: Instant,
    rec: Arc<Mutex<DiskRun>>,
) {
    tokio::time::sleep_until(start).await;
    for i in 0.. {
        let chunk = target.chunks[(i * 2 + offset) % target.chunks.len()];
        let r = client.read_chunk(&target.addr, chunk, 0, spec.scrub_read_bytes, scrub_tag(declaration)).await;
        if r.is_ok() {
            rec.lock()
                .unwrap_or_else(|p| p.into_inner())
                .scrub_done
                .push((since_start_us(start), spec.scrub_read_bytes));
        }
    }
}

/// Chunk reads issued at a fixed interval, open loop.
async fn fixed_rate(
    client: Client,
    spec: WaitSpec,
    target: Arc<DiskTarget>,
    declaration: u64,
    share_ppm: u64,
    start: Instant,
    rec: Arc<Mutex<DiskRun>>,
) {
    let interval = spec.fixed_rate_interval_us(share_ppm);
    let mut reads = tokio::task::JoinSet::new();
    for i in 0u64.. {
        tokio::time::sleep_until(start + Duration::from_micros(i * interval)).await;
        let chunk = target.chunks[i as usize % target.chunks.len()];
        let (client, target, rec, bytes) = (client.clone(), target.clone(), rec.clone(), spec.scrub_read_bytes);
        reads.spawn(async move {
            if client.read_chunk(&target.addr, chunk, 0, bytes, scrub_tag(declaration)).await.is_ok() {
                rec.lock().unwrap_or_else(|p| p.into_inner()).scrub_done.push((since_start_us(start), bytes));
            }
        });
        while reads.try_join_next().is_some() {}
    }
}

/// Planner-like pinned groups, as in the twin: every `group_us` the node
/// gets a cache directive pinning the group's chunks until the next group
/// plus the grace and the planner's budget for their disk reads
/// (`Node.QuantumBudget`), and two declarations read them, one outstanding read
/// each, in opposite orders. Groups are released until the last one's pins
/// expire within the run. `achieved_free_bytes` collects the bytes both
/// read; the caller subtracts what the disk read.
async fn groups(
    client: Client,
    spec: WaitSpec,
    target: Arc<DiskTarget>,
    declaration: u64,
    start: Instant,
    start_ms: u64,
    rec: Arc<Mutex<DiskRun>>,
) {
    let mut queues = Vec::new();
    let mut readers = tokio::task::JoinSet::new();
    for r in 0..2u64 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<dingo_types::ChunkRef>();
        queues.push(tx);
        let (client, target, rec) = (client.clone(), target.clone(), rec.clone());
        let bytes = spec.scrub_read_bytes;
        readers.spawn(async move {
            while let Some(chunk) = rx.recv().await {
                let tag = scrub_tag(declaration + r);
                if client.read_chunk(&target.addr, chunk, 0, bytes, tag).await.is_ok() {
                    let mut m = rec.lock().unwrap_or_else(|p| p.into_inner());
                    m.scrub_done.push((since_start_us(start), bytes));
                    m.achieved_free_bytes += bytes;
                }
            }
        });
    }
    let chunks = u64::from(spec.group_chunks);
    let mut g = 0u64;
    while spec.group_released(g) {
        tokio::time::sleep_until(start + Duration::from_micros(g * spec.group_us)).await;
        let until_ms = start_ms + ((g + 1) * spec.group_us + spec.pin_grace_us) / 1000;
        let ids: Vec<_> =
            (0..chunks).map(|c| target.chunks[((g * chunks + c) as usize) % target.chunks.len()]).collect();
        if client.cache_directive(&target.addr, ids.iter().map(|&c| (c, until_ms)).collect(), Vec::new()).await.is_ok()
        {
            // The planner's budget for the group's quantum, as the planner
            // service sends it: advice, so a failure only loses the floor.
            let budget = QuantumBudgetRequest {
                quantum_start_ms: start_ms + g * spec.group_us / 1000,
                quantum_end_ms: start_ms + (g + 1) * spec.group_us / 1000,
                disks: vec![DiskQuantumBudget {
                    disk: target.disk,
                    bytes: chunks * spec.scrub_read_bytes,
                    reads: chunks,
                    head_time_us: spec.group_budget_us(),
                }],
            };
            if let Ok(mut node) = client.node(&target.addr) {
                let _ = node.quantum_budget(budget).await;
            }
            rec.lock().unwrap_or_else(|p| p.into_inner()).planned_free_bytes += chunks * spec.scrub_read_bytes;
            for (&a, &b) in ids.iter().zip(ids.iter().rev()) {
                // The readers outlive the loop, so the channels are open.
                let _ = queues[0].send(a);
                let _ = queues[1].send(b);
            }
        }
        g += 1;
    }
    while readers.join_next().await.is_some() {}
}
