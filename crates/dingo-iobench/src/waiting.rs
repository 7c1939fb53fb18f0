//! waiting (Practical scrubbing Fig. 15 / Table III analog): scrubbing
//! through the Waiting gate, tuned online for mean-slowdown goals of 1, 2
//! and 4 ms, against a fixed-rate scrubber on the classful scheduler without
//! the gate, on local clusters with HDD emulation.
//!
//! Every disk gets the seeded foreground of the virtual-time twin
//! ([`dingo_iosched::waitexp`]) and one job: foreground only (the reference
//! latencies), a fixed-rate scrubber at one of five rates, a Waiting
//! scrubber that always has work, or planner-like pinned groups read by two
//! declarations (the free-bytes check). The three runs are three seeds,
//! run side by side on separate disks of the same cluster, each cluster
//! with its own reference disks; clusters run one after the other: the
//! baseline (gate off) first, then one per goal.

use crate::BenchError;
use crate::cpu::CpuTimes;
use crate::fgtail::{DiskTarget, median, since_start_us, write_data};
use dingo_client::{Client, IoTag};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_iosched::waitexp::{self, DiskRun, FgRead, Job, WaitSpec, interpolate_at};
use dingo_types::{DeclarationId, TaskKind};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Seeds, i.e. runs, side by side.
pub const RUNS: u32 = 3;
/// Chunks per disk: the groups cycle through them, so a chunk is pinned
/// again only after its last pin expired (6 groups × 2 s > 2 s + 5 s grace
/// with 2 chunks a group).
const FILES_PER_DISK: u32 = 12;

#[derive(Clone, Debug)]
pub struct Options {
    pub exe: PathBuf,
    pub work_dir: PathBuf,
    pub quick: bool,
    pub seed: u64,
}

/// One goal's figures: medians over the runs.
#[derive(Clone, Debug, Serialize)]
pub struct GoalResult {
    pub goal_ms: f64,
    /// Waiting (the mechanism).
    pub slowdown_ms: f64,
    pub scrub_mb_s: f64,
    /// The fixed-rate scrubber's MB/s at the mechanism's slowdown, on its
    /// measured curve (upper envelope, interpolated from the origin).
    pub fixed_rate_scrub_mb_s_at_equal_slowdown: f64,
    /// True when the mechanism's slowdown lies beyond the fixed-rate sweep.
    pub fixed_rate_extrapolated: bool,
    pub scrub_mb_s_ratio: f64,
    pub planned_free_bytes: u64,
    pub achieved_free_bytes: u64,
    pub achieved_free_bytes_ratio: f64,
    /// Per run.
    pub slowdown_ms_runs: Vec<f64>,
    pub scrub_mb_s_runs: Vec<f64>,
    pub cpu_utilisation: f64,
    pub twin_slowdown_ms: f64,
    pub twin_scrub_mb_s: f64,
    pub twin_achieved_free_bytes_ratio: f64,
}

/// One rate of the fixed-rate scrubber (the baseline): medians.
#[derive(Clone, Debug, Serialize)]
pub struct FixedRateResult {
    pub share_of_head_time: f64,
    pub slowdown_ms: f64,
    pub scrub_mb_s: f64,
    pub twin_slowdown_ms: f64,
    pub twin_scrub_mb_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Bars {
    pub slowdown_at_most_1_25_goal: bool,
    pub scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: bool,
    pub achieved_free_bytes_at_least_0_9_of_planned: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: &'static str,
    pub runs: u32,
    pub spec: WaitSpec,
    pub mechanism: Vec<GoalResult>,
    pub baseline: Vec<FixedRateResult>,
    pub baseline_cpu_utilisation: f64,
    pub bars_met: Bars,
    pub head_time_bound: String,
    #[serde(skip)]
    pub series: Vec<SeriesRow>,
}

/// One second of one disk.
#[derive(Clone, Debug)]
pub struct SeriesRow {
    pub cluster: String,
    pub job: String,
    pub run: u32,
    pub second: u64,
    pub fg_reads: u64,
    pub fg_mean_ms: f64,
    pub scrub_bytes: u64,
}

/// What one disk of a cluster measured.
struct DiskResult {
    job: Job,
    run: u32,
    measured: DiskRun,
}

pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let spec = if opts.quick { WaitSpec::quick() } else { WaitSpec::full() };
    let work = tempfile::Builder::new().prefix("dingo-waiting-").tempdir_in(&opts.work_dir).map_err(|source| {
        BenchError::Io { what: format!("cannot create a directory in {}", opts.work_dir.display()), source }
    })?;
    let seeds: Vec<u64> = (0..u64::from(RUNS)).map(|r| opts.seed + r).collect();
    let fgs: Vec<Vec<FgRead>> = seeds.iter().map(|&s| waitexp::foreground(&spec, s)).collect();
    let mut series = Vec::new();

    // The baseline: per run, the reference and every fixed rate.
    let mut jobs = Vec::new();
    for run in 0..RUNS {
        jobs.push((Job::Reference, run));
        for &share_ppm in &spec.fixed_rate_shares_ppm {
            jobs.push((Job::FixedRate { share_ppm }, run));
        }
    }
    progress(&format!(
        "baseline cluster: {} disks (reference + fixed rates, {RUNS} runs), {} s",
        jobs.len(),
        spec.duration_s
    ));
    let (base, base_cpu) =
        one_cluster(opts, &spec, None, &jobs, &fgs, &work.path().join("baseline"), &mut series).await?;
    let reference = |run: u32| base.iter().find(|d| d.job == Job::Reference && d.run == run).map(|d| &d.measured);
    let mut baseline = Vec::new();
    for &share_ppm in &spec.fixed_rate_shares_ppm {
        let (mut slow, mut mb) = (Vec::new(), Vec::new());
        for d in base.iter().filter(|d| d.job == Job::FixedRate { share_ppm }) {
            let r = reference(d.run).ok_or_else(|| BenchError::Setup("no reference disk".into()))?;
            slow.push(waitexp::mean_slowdown_ms(&spec, &fgs[d.run as usize], &d.measured, r));
            mb.push(d.measured.scrub_mb_s(&spec));
        }
        let twin: Vec<(f64, f64)> = fgs
            .iter()
            .map(|fg| {
                let r = waitexp::simulate(&spec, fg, Job::Reference);
                let f = waitexp::simulate(&spec, fg, Job::FixedRate { share_ppm });
                (waitexp::mean_slowdown_ms(&spec, fg, &f, &r), f.scrub_mb_s(&spec))
            })
            .collect();
        baseline.push(FixedRateResult {
            share_of_head_time: share_ppm as f64 / 1e6,
            slowdown_ms: median(slow),
            scrub_mb_s: median(mb),
            twin_slowdown_ms: median(twin.iter().map(|t| t.0).collect()),
            twin_scrub_mb_s: median(twin.iter().map(|t| t.1).collect()),
        });
        progress(&format!(
            "  fixed rate {:.1} %: slowdown {:.2} ms, scrub {:.1} MB/s",
            share_ppm as f64 / 1e4,
            baseline.last().map_or(0.0, |b| b.slowdown_ms),
            baseline.last().map_or(0.0, |b| b.scrub_mb_s)
        ));
    }
    let curve: Vec<(f64, f64)> = baseline.iter().map(|b| (b.slowdown_ms, b.scrub_mb_s)).collect();

    let mut mechanism = Vec::new();
    for &goal_us in &spec.goals_us {
        // Each cluster has its own reference disks: latencies of different
        // clusters differ by more than a goal when the machine is busy.
        let jobs: Vec<(Job, u32)> = (0..RUNS)
            .flat_map(|run| [(Job::Reference, run), (Job::Waiting { goal_us }, run), (Job::Groups { goal_us }, run)])
            .collect();
        progress(&format!(
            "goal {} ms cluster: {} disks (reference, Waiting, pinned groups; {RUNS} runs)",
            goal_us as f64 / 1e3,
            jobs.len()
        ));
        let dir = work.path().join(format!("goal-{goal_us}"));
        let (disks, cpu) = one_cluster(opts, &spec, Some(goal_us), &jobs, &fgs, &dir, &mut series).await?;
        let (mut slow, mut mb) = (Vec::new(), Vec::new());
        let (mut planned, mut achieved) = (Vec::new(), Vec::new());
        let own_reference =
            |run: u32| disks.iter().find(|d| d.job == Job::Reference && d.run == run).map(|d| &d.measured);
        for d in &disks {
            match d.job {
                Job::Waiting { .. } => {
                    let r = own_reference(d.run).ok_or_else(|| BenchError::Setup("no reference disk".into()))?;
                    slow.push(waitexp::mean_slowdown_ms(&spec, &fgs[d.run as usize], &d.measured, r));
                    mb.push(d.measured.scrub_mb_s(&spec));
                }
                Job::Groups { .. } => {
                    planned.push(d.measured.planned_free_bytes as f64);
                    achieved.push(d.measured.achieved_free_bytes as f64);
                }
                Job::Reference | Job::FixedRate { .. } => {}
            }
        }
        let twin: Vec<(f64, f64, f64)> = fgs
            .iter()
            .map(|fg| {
                let r = waitexp::simulate(&spec, fg, Job::Reference);
                let w = waitexp::simulate(&spec, fg, Job::Waiting { goal_us });
                let g = waitexp::simulate(&spec, fg, Job::Groups { goal_us });
                let free = g.achieved_free_bytes as f64 / g.planned_free_bytes.max(1) as f64;
                (waitexp::mean_slowdown_ms(&spec, fg, &w, &r), w.scrub_mb_s(&spec), free)
            })
            .collect();
        let slowdown_ms = median(slow.clone());
        let scrub_mb_s = median(mb.clone());
        let (at_equal, extrapolated) = interpolate_at(&curve, slowdown_ms);
        let free_ratios: Vec<f64> = planned.iter().zip(&achieved).map(|(p, a)| a / p.max(1.0)).collect();
        let result = GoalResult {
            goal_ms: goal_us as f64 / 1e3,
            slowdown_ms,
            scrub_mb_s,
            fixed_rate_scrub_mb_s_at_equal_slowdown: at_equal,
            fixed_rate_extrapolated: extrapolated,
            scrub_mb_s_ratio: if at_equal > 0.0 { scrub_mb_s / at_equal } else { f64::INFINITY },
            planned_free_bytes: median(planned) as u64,
            achieved_free_bytes: median(achieved) as u64,
            achieved_free_bytes_ratio: median(free_ratios),
            slowdown_ms_runs: slow,
            scrub_mb_s_runs: mb,
            cpu_utilisation: cpu,
            twin_slowdown_ms: median(twin.iter().map(|t| t.0).collect()),
            twin_scrub_mb_s: median(twin.iter().map(|t| t.1).collect()),
            twin_achieved_free_bytes_ratio: median(twin.iter().map(|t| t.2).collect()),
        };
        progress(&format!(
            "  slowdown {:.2} ms, scrub {:.1} MB/s (fixed rate {:.1} at equal slowdown), free bytes {:.2}, CPU {:.0} %",
            result.slowdown_ms,
            result.scrub_mb_s,
            result.fixed_rate_scrub_mb_s_at_equal_slowdown,
            result.achieved_free_bytes_ratio,
            cpu * 100.0
        ));
        mechanism.push(result);
    }
    let bars_met = Bars {
        slowdown_at_most_1_25_goal: mechanism.iter().all(|g| g.slowdown_ms <= 1.25 * g.goal_ms),
        scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: mechanism
            .iter()
            .all(|g| !g.fixed_rate_extrapolated && g.scrub_mb_s >= 3.0 * g.fixed_rate_scrub_mb_s_at_equal_slowdown),
        achieved_free_bytes_at_least_0_9_of_planned: mechanism.iter().all(|g| g.achieved_free_bytes_ratio >= 0.9),
    };
    Ok(Report {
        experiment: "waiting",
        runs: RUNS,
        head_time_bound: format!(
            "per disk: foreground about 15 % of head time, maintenance at most what the head has left ({} disk model: \
             {} ms + {} MB/s); keep CPU utilisation well under 60 % so head time, not CPU, sets latency",
            "the demo's",
            spec.positioning_us / 1000,
            spec.transfer_bytes_per_sec / 1_000_000
        ),
        spec,
        mechanism,
        baseline,
        baseline_cpu_utilisation: base_cpu,
        bars_met,
        series,
    })
}

/// Per-second series of every disk, as CSV.
pub fn series_csv(report: &Report) -> String {
    let mut out = String::from("cluster,job,run,second,fg_reads,fg_mean_ms,scrub_bytes\n");
    for r in &report.series {
        out.push_str(&format!(
            "{},{},{},{},{},{:.2},{}\n",
            r.cluster, r.job, r.run, r.second, r.fg_reads, r.fg_mean_ms, r.scrub_bytes
        ));
    }
    out
}

fn job_name(job: Job) -> String {
    match job {
        Job::Reference => "reference".into(),
        Job::Waiting { goal_us } => format!("waiting-{goal_us}us"),
        Job::FixedRate { share_ppm } => format!("fixed-rate-{share_ppm}ppm"),
        Job::Groups { goal_us } => format!("groups-{goal_us}us"),
    }
}

/// Starts a cluster (gate for `goal_us`, or off), runs `jobs[i]` on disk `i`
/// with run `jobs[i].1`'s foreground, and returns what each disk measured
/// and the machine's CPU utilisation.
async fn one_cluster(
    opts: &Options,
    spec: &WaitSpec,
    goal_us: Option<u64>,
    jobs: &[(Job, u32)],
    fgs: &[Vec<FgRead>],
    dir: &Path,
    series: &mut Vec<SeriesRow>,
) -> Result<(Vec<DiskResult>, f64), BenchError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| BenchError::Io { what, source }
    };
    std::fs::create_dir_all(dir).map_err(io("cannot create the run directory"))?;
    let config = dir.join("node.toml");
    // No general cache (every read reaches the head); pinned room for the
    // groups' chunks (at most 4 groups × 2 chunks of 4 MiB per disk).
    let mut text = format!(
        "[node]\ncache = \"0\"\npinned = \"{}\"\nhdd = {{ positioning_us = {}, transfer_bytes_per_sec = {} }}\n\
         [node.io]\nscheduler = \"classful\"\n",
        jobs.len() as u64 * 4 * 2 * spec.scrub_read_bytes,
        spec.positioning_us,
        spec.transfer_bytes_per_sec
    );
    if let Some(g) = goal_us {
        text.push_str(&format!(
            "waiting = {{ goal_ms = {}, window_s = {}, retune_s = {} }}\n",
            g as f64 / 1e3,
            spec.window_us as f64 / 1e6,
            spec.retune_us as f64 / 1e6
        ));
    }
    std::fs::write(&config, text).map_err(io("cannot write the node config"))?;
    // Three disks a node: placement fills one disk of a node first, and
    // chunks move only between nodes, so other nodes must have some to give.
    let disks_per_node = 3;
    let nodes = (jobs.len() as u32).div_ceil(disks_per_node);
    let mut cluster = LocalCluster::start(ClusterSpec {
        exe: opts.exe.clone(),
        data: dir.join("cluster"),
        nodes,
        disks_per_node,
        base_port: 0,
        config: Some(config),
        node_args: Vec::new(),
    })?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let client = Client::new(cluster.meta_addr())?;
    let targets = write_data(&client, spec.scrub_read_bytes, "/waiting", FILES_PER_DISK).await?;
    if targets.len() < jobs.len() {
        return Err(BenchError::Setup(format!("{} disks for {} jobs", targets.len(), jobs.len())));
    }
    let scrub_before = scrub_disk_bytes(&client, &targets).await?;
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
            Job::Reference => {}
            Job::Waiting { .. } => {
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
            Job::FixedRate { share_ppm } => {
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
            Job::Groups { .. } => {
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
    let cpu = match (cpu_before, CpuTimes::now()) {
        (Some(a), Some(b)) => a.utilisation_until(b),
        _ => 0.0,
    };
    let targets: Vec<&DiskTarget> = results.iter().map(|r| &*r.2).collect();
    let scrub_after = scrub_disk_bytes_of(&client, &targets).await?;
    drop(cluster);
    let _ = std::fs::remove_dir_all(dir);
    let cluster_name = goal_us.map_or("baseline".to_string(), |g| format!("goal-{g}us"));
    let mut out = Vec::new();
    for (i, (job, run, _, rec)) in results.into_iter().enumerate() {
        let mut measured = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
        if matches!(job, Job::Groups { .. }) {
            // Read by the declarations minus read from the disk.
            let disk_bytes = scrub_after[i].saturating_sub(scrub_before[i]);
            measured.achieved_free_bytes = measured.achieved_free_bytes.saturating_sub(disk_bytes);
        }
        series.extend(per_second(spec, &fgs[run as usize], &measured, &cluster_name, job, run));
        out.push(DiskResult { job, run, measured });
    }
    Ok((out, cpu))
}

fn per_second(spec: &WaitSpec, fg: &[FgRead], m: &DiskRun, cluster: &str, job: Job, run: u32) -> Vec<SeriesRow> {
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

async fn scrub_disk_bytes(client: &Client, targets: &[DiskTarget]) -> Result<Vec<u64>, BenchError> {
    scrub_disk_bytes_of(client, &targets.iter().collect::<Vec<_>>()).await
}

/// Bytes each disk read for scrubbing, from its node's counters.
async fn scrub_disk_bytes_of(client: &Client, targets: &[&DiskTarget]) -> Result<Vec<u64>, BenchError> {
    let mut out = Vec::new();
    for t in targets {
        let stats = client.node_stats(&t.addr).await?;
        let bytes = stats
            .disks
            .iter()
            .filter(|d| d.disk == t.disk)
            .flat_map(|d| &d.classes)
            .filter(|c| c.class_name == TaskKind::Scrubbing.name())
            .map(|c| c.bytes)
            .sum();
        out.push(bytes);
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
        let offset = rng.u64(..(chunk_bytes - r.bytes) / waitexp::FG_STEP_BYTES + 1) * waitexp::FG_STEP_BYTES;
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

fn scrub_tag(declaration: u64) -> IoTag {
    IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(declaration) }
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
/// plus the grace, and two declarations read them, one outstanding read
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_second_rows_average_latency_by_arrival_and_sum_scrub_by_completion() {
        let spec = WaitSpec::quick();
        let fg = [FgRead { at_us: 100_000, bytes: 65_536 }, FgRead { at_us: 900_000, bytes: 65_536 }];
        let m = DiskRun {
            fg_latency_us: vec![Some(10_000), Some(30_000)],
            scrub_done: vec![(1_500_000, 4 << 20)],
            ..DiskRun::default()
        };
        let rows = per_second(&spec, &fg, &m, "baseline", Job::FixedRate { share_ppm: 50_000 }, 2);
        assert_eq!(rows.len() as u64, spec.duration_s);
        assert_eq!((rows[0].fg_reads, rows[0].fg_mean_ms, rows[0].scrub_bytes), (2, 20.0, 0));
        assert_eq!((rows[1].fg_reads, rows[1].scrub_bytes), (0, 4 << 20));
        let report = Report {
            experiment: "waiting",
            runs: 1,
            spec: spec.clone(),
            mechanism: Vec::new(),
            baseline: Vec::new(),
            baseline_cpu_utilisation: 0.0,
            bars_met: Bars {
                slowdown_at_most_1_25_goal: false,
                scrub_mb_s_at_least_3x_fixed_rate_at_equal_slowdown: false,
                achieved_free_bytes_at_least_0_9_of_planned: false,
            },
            head_time_bound: String::new(),
            series: rows,
        };
        let csv = series_csv(&report);
        assert!(csv.contains("baseline,fixed-rate-50000ppm,2,0,2,20.00,0\n"), "{csv}");
        assert_eq!(csv.lines().count() as u64, 1 + spec.duration_s);
    }
}
