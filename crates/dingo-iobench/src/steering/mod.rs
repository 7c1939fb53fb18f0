//! steering (Sandook Fig. 7c / Fig. 9 analog): open-loop foreground reads
//! of 3-way replicated blocks on a 3-node × 2-disk local cluster with HDD
//! emulation while one disk runs 5× slower — for 2.3 s, later for good —
//! with the client's replica steering against random replica choice.
//!
//! The load, statistics and bars are those of the virtual-time twin
//! ([`model`]). The faults use the node's `[node.io]
//! slowdown` injection, which counts from the node's start and names the
//! node's own disk number; so the last node, which holds both slowed disks,
//! is started after the others with a config that adds them, and the load
//! starts a fixed margin after it.

pub mod model;

use crate::BenchError;
use crate::cluster::{self, pattern, since_start_us};
use crate::harness::{Options, alternate};
use crate::output::{Chart, Experiment, Tone};
use crate::proc::CpuTimes;
use crate::stats::median;
use dingo_client::{Client, FileInfo, IoTag, Redundancy, ReplicaChoice};
use dingo_cluster::LocalCluster;
use dingo_iosched::PolicyKind;
use dingo_report::plots::{LineChart, Series};
use dingo_types::{BlockId, ChunkRef};
use model::{Recorder, SteerBars, SteerSecond, SteerSpec, SteerSummary, arrivals, simulate};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Blocks per file written.
const BLOCKS_PER_FILE: u32 = 8;
/// From the slowed node's start to the start of the load: room for it to
/// register and for the data to be written.
const SETUP_MARGIN: Duration = Duration::from_secs(15);

/// One replica choice's figures: medians over the runs (per second too).
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub policy: &'static str,
    #[serde(flatten)]
    pub median: SteerSummary,
    /// Machine-wide CPU utilisation (all cores) during the load, median.
    pub cpu_utilisation: f64,
    #[serde(skip)]
    pub runs: Vec<SteerSummary>,
}

/// One 1 s window, both policies side by side (medians over the runs).
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    pub second: u64,
    pub steering_p90_ms: f64,
    pub random_p90_ms: f64,
    pub steering_p99_ms: f64,
    pub random_p99_ms: f64,
    /// Share of the second's reads served by the disk slowed for a window.
    pub steering_slow_disk_share: f64,
    pub random_slow_disk_share: f64,
    /// Share served by the disk slowed for good (from `persistent_at_ms`).
    pub steering_persistent_disk_share: f64,
    pub random_persistent_disk_share: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub experiment: &'static str,
    pub runs: u32,
    pub spec: SteerSpec,
    pub steering: PolicyResult,
    pub random: PolicyResult,
    /// steering / random p99 with one disk persistently slow.
    pub persistent_p99_ratio: f64,
    /// The bars on the medians.
    pub bars_met: SteerBars,
    pub windows: Vec<Window>,
    /// The virtual-time twin's figures for the same load and seed.
    pub twin_steering: SteerSummary,
    pub twin_random: SteerSummary,
    pub head_time_bound: String,
}

/// Runs the experiment: `runs` runs of each replica choice, alternating.
pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let spec = if opts.quick { SteerSpec::quick() } else { SteerSpec::full() };
    let work = opts.work("dingo-steering-")?;
    let choices = [ReplicaChoice::Steering, ReplicaChoice::Random].map(|c| (c, c.name()));
    let [steer, random] = alternate(
        opts,
        work.path(),
        choices,
        spec.duration_s,
        async |choice, seed, dir: &Path| one_run(opts, &spec, choice, seed, dir).await,
        |s: &SteerSummary, cpu| {
            format!(
                "  p90 before {:.1} ms, worst 1 s window in the fault {:.1} ms ({:.2}x); slow disk share {:.3} -> {:.3} \
                 (1 s after onset) -> {:.3}; persistent p99 {:.1} ms; {} reads, {} errors; CPU {:.0} %",
                s.pre_fault_p90_ms,
                s.fault_max_p90_ms,
                s.fault_max_p90_ratio,
                s.pre_fault_share,
                s.share_1s_after_onset,
                s.recovered_share,
                s.persistent_p99_ms,
                s.reads,
                s.errors,
                cpu * 100.0
            )
        },
        &mut progress,
    )
    .await?;
    let steering = aggregate("steering", steer.summaries, &steer.cpu_utilisation);
    let random = aggregate("random", random.summaries, &random.cpu_utilisation);
    let windows = windows(&steering, &random);
    let bars_met = SteerBars::evaluate(&steering.median, &random.median);
    let twin = |choice| SteerSummary { series: Vec::new(), ..simulate(&spec, choice, opts.seed) };
    let persistent_p99_ratio = if random.median.persistent_p99_ms > 0.0 {
        steering.median.persistent_p99_ms / random.median.persistent_p99_ms
    } else {
        f64::NAN
    };
    Ok(Report {
        experiment: "steering",
        runs: opts.runs,
        spec,
        persistent_p99_ratio,
        bars_met,
        windows,
        twin_steering: twin(ReplicaChoice::Steering),
        twin_random: twin(ReplicaChoice::Random),
        head_time_bound: format!(
            "offered foreground head time {} % per disk (256 KiB reads, {} disks); keep CPU utilisation well under \
             60 % (2 shared cores) so that head time, not CPU, sets latency",
            spec.util_ppm / 10_000,
            spec.disks()
        ),
        steering,
        random,
    })
}

/// Medians over the runs, field by field and second by second.
fn aggregate(policy: &'static str, runs: Vec<SteerSummary>, cpu: &[f64]) -> PolicyResult {
    let m = |f: fn(&SteerSummary) -> f64| median(runs.iter().map(f).collect());
    let seconds = runs.iter().map(|r| r.series.len()).min().unwrap_or(0);
    let series = (0..seconds)
        .map(|i| {
            let s = |f: fn(&SteerSecond) -> f64| median(runs.iter().map(|r| f(&r.series[i])).collect());
            SteerSecond {
                second: i as u64,
                reads: s(|x| x.reads as f64) as u64,
                p90_ms: s(|x| x.p90_ms),
                p99_ms: s(|x| x.p99_ms),
                transient_disk_share: s(|x| x.transient_disk_share),
                persistent_disk_share: s(|x| x.persistent_disk_share),
            }
        })
        .collect();
    let median = SteerSummary {
        reads: m(|r| r.reads as f64) as u64,
        errors: runs.iter().map(|r| r.errors).sum(),
        pre_fault_p90_ms: m(|r| r.pre_fault_p90_ms),
        fault_max_p90_ms: m(|r| r.fault_max_p90_ms),
        fault_max_p90_ratio: m(|r| r.fault_max_p90_ratio),
        pre_fault_share: m(|r| r.pre_fault_share),
        share_1s_after_onset: m(|r| r.share_1s_after_onset),
        recovered_share: m(|r| r.recovered_share),
        share_drop: m(|r| r.share_drop),
        share_recovery: m(|r| r.share_recovery),
        persistent_p50_ms: m(|r| r.persistent_p50_ms),
        persistent_p90_ms: m(|r| r.persistent_p90_ms),
        persistent_p99_ms: m(|r| r.persistent_p99_ms),
        series,
    };
    PolicyResult { policy, median, cpu_utilisation: crate::stats::median(cpu.to_vec()), runs }
}

fn windows(steering: &PolicyResult, random: &PolicyResult) -> Vec<Window> {
    steering
        .median
        .series
        .iter()
        .zip(&random.median.series)
        .map(|(s, r)| Window {
            second: s.second,
            steering_p90_ms: s.p90_ms,
            random_p90_ms: r.p90_ms,
            steering_p99_ms: s.p99_ms,
            random_p99_ms: r.p99_ms,
            steering_slow_disk_share: s.transient_disk_share,
            random_slow_disk_share: r.transient_disk_share,
            steering_persistent_disk_share: s.persistent_disk_share,
            random_persistent_disk_share: r.persistent_disk_share,
        })
        .collect()
}

impl Experiment for Report {
    fn name(&self) -> &'static str {
        self.experiment
    }

    fn series_csv(&self) -> String {
        let mut out = String::from("policy,run,second,reads,p90_ms,p99_ms,slow_disk_share,persistent_disk_share\n");
        for r in [&self.steering, &self.random] {
            for (i, run) in r.runs.iter().enumerate() {
                for s in &run.series {
                    out.push_str(&format!(
                        "{},{i},{},{},{:.2},{:.2},{:.4},{:.4}\n",
                        r.policy,
                        s.second,
                        s.reads,
                        s.p90_ms,
                        s.p99_ms,
                        s.transient_disk_share,
                        s.persistent_disk_share
                    ));
                }
            }
        }
        out
    }

    /// The p90 of each replica choice per second (own scales: random's
    /// reaches seconds) and the slowed disks' shares, with the faults marked.
    fn charts(&self) -> Vec<Chart> {
        let spec = &self.spec;
        let markers = vec![
            (spec.transient_at_ms as f64 / 1000.0, "disk slowed 5x".to_string()),
            ((spec.transient_at_ms + spec.transient_ms) as f64 / 1000.0, "back to normal".to_string()),
            (spec.persistent_at_ms as f64 / 1000.0, "another disk slowed for good".to_string()),
        ];
        let points = |f: fn(&Window) -> f64| -> Vec<(f64, f64)> {
            self.windows.iter().map(|x| (x.second as f64 + 0.5, f(x))).collect()
        };
        let line =
            |name: &str, tone, points, dashed| Series { name: name.into(), color: Tone::color(tone), points, dashed };
        let p90 = |file_stem, policy: &str, pre: f64, tone, get: fn(&Window) -> f64| Chart {
            file_stem,
            chart: LineChart {
                title: format!("Foreground p90 per second, {policy} replica choice (median of {} runs)", self.runs),
                x_label: "time (s)".into(),
                y_label: "p90 latency (ms)".into(),
                series: vec![line(policy, tone, points(get), false)],
                hline: Some((1.5 * pre, "1.5 x pre-fault p90".into())),
                markers: markers.clone(),
            },
        };
        let share = Chart {
            file_stem: "steering-share",
            chart: LineChart {
                title: "Share of reads served by the slowed disks".into(),
                x_label: "time (s)".into(),
                y_label: "share of the second's reads".into(),
                series: vec![
                    line(
                        "steering, disk slowed for 2.3 s",
                        Tone::Mechanism,
                        points(|x| x.steering_slow_disk_share),
                        false,
                    ),
                    line("random, disk slowed for 2.3 s", Tone::Baseline, points(|x| x.random_slow_disk_share), false),
                    line(
                        "steering, disk slowed for good",
                        Tone::Mechanism,
                        points(|x| x.steering_persistent_disk_share),
                        true,
                    ),
                    line(
                        "random, disk slowed for good",
                        Tone::Baseline,
                        points(|x| x.random_persistent_disk_share),
                        true,
                    ),
                ],
                hline: None,
                markers: markers.clone(),
            },
        };
        vec![
            p90("steering-p90", "steering", self.steering.median.pre_fault_p90_ms, Tone::Mechanism, |x| {
                x.steering_p90_ms
            }),
            p90("random-p90", "random", self.random.median.pre_fault_p90_ms, Tone::Baseline, |x| x.random_p90_ms),
            share,
        ]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = &self.spec;
        writeln!(
            f,
            "steering: {} disks, disk {} 5x slower from {:.1} s for {:.1} s, disk {} from {:.1} s on; {} s per run, \
             median of {} runs ({})",
            spec.disks(),
            spec.transient_disk,
            spec.transient_at_ms as f64 / 1000.0,
            spec.transient_ms as f64 / 1000.0,
            spec.persistent_disk,
            spec.persistent_at_ms as f64 / 1000.0,
            spec.duration_s,
            self.runs,
            self.head_time_bound
        )?;
        for r in [&self.steering, &self.random] {
            let m = &r.median;
            writeln!(
                f,
                "{:<9} p90 {:>5.1} ms before, worst 1 s window {:>7.1} ms ({:>5.2}x); slow disk share {:.3} -> {:.3} \
                 -> {:.3}; persistent p50/p99 {:.1}/{:.1} ms; CPU {:.0} %",
                r.policy,
                m.pre_fault_p90_ms,
                m.fault_max_p90_ms,
                m.fault_max_p90_ratio,
                m.pre_fault_share,
                m.share_1s_after_onset,
                m.recovered_share,
                m.persistent_p50_ms,
                m.persistent_p99_ms,
                r.cpu_utilisation * 100.0
            )?;
        }
        let b = &self.bars_met;
        writeln!(
            f,
            "bars: p90 <= 1.5x pre-fault {}; random p90 >= 3x {}; slow share -50 % within 1 s {}; recovers {}; \
             persistent p99 {:.2}x random's (<= 0.5) {}",
            b.p90_within_1_5x_of_pre_fault,
            b.random_p90_rises_3x,
            b.slow_share_falls_half_within_1s,
            b.slow_share_recovers,
            self.persistent_p99_ratio,
            b.persistent_p99_at_most_half_of_random
        )?;
        write!(
            f,
            "virtual-time twin: worst window {:.2}x vs {:.2}x, persistent p99 {:.1} vs {:.1} ms",
            self.twin_steering.fault_max_p90_ratio,
            self.twin_random.fault_max_p90_ratio,
            self.twin_steering.persistent_p99_ms,
            self.twin_random.persistent_p99_ms
        )
    }
}

/// The config every node gets: HDD emulation, no cache, the classful
/// scheduler.
fn node_config(spec: &SteerSpec) -> String {
    cluster::node_config(0, spec.positioning_us, spec.transfer_bytes_per_sec, PolicyKind::Classful)
}

/// The slowdowns of the last node's disks, counted from its start.
fn slowdowns(spec: &SteerSpec) -> Result<String, BenchError> {
    let last = spec.nodes - 1;
    let local = |disk: u32| {
        if disk / spec.disks_per_node == last {
            Ok(disk % spec.disks_per_node)
        } else {
            Err(BenchError::Setup(format!("slowed disk {disk} is not on the last node")))
        }
    };
    let margin_ms = SETUP_MARGIN.as_millis() as u64;
    let factor = spec.factor_permille as f64 / 1000.0;
    Ok(format!(
        "slowdown = [{{ disk = {}, factor = {factor}, after_ms = {}, for_ms = {} }}, \
         {{ disk = {}, factor = {factor}, after_ms = {}, for_ms = {} }}]\n",
        local(spec.transient_disk)?,
        margin_ms + spec.transient_at_ms,
        spec.transient_ms,
        local(spec.persistent_disk)?,
        margin_ms + spec.persistent_at_ms,
        // To the end of the load, and beyond while reads drain.
        (spec.duration_s * 1000).saturating_sub(spec.persistent_at_ms) + 60_000,
    ))
}

async fn one_run(
    opts: &Options,
    spec: &SteerSpec,
    choice: ReplicaChoice,
    seed: u64,
    dir: &Path,
) -> Result<(SteerSummary, f64), BenchError> {
    let mut cluster = cluster::start(&opts.exe, dir, spec.nodes - 1, spec.disks_per_node, &node_config(spec)).await?;
    // The other nodes have read their config; the last one reads this.
    std::fs::write(dir.join("node.toml"), node_config(spec) + &slowdowns(spec)?)
        .map_err(BenchError::io("cannot write the node config"))?;
    let node_started = Instant::now();
    let last = cluster.add_node(spec.disks_per_node)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let client = cluster.client()?.with_replica_choice(choice);
    let blocks = write_data(&client, spec).await?;
    warm_up(&client, &blocks).await?;
    let disk_index = disk_indexes(&client, &cluster, spec, last).await?;
    let start = node_started + SETUP_MARGIN;
    if Instant::now() + Duration::from_millis(200) > start {
        return Err(BenchError::Setup(format!(
            "setting up took {:?}, more than the {SETUP_MARGIN:?} the slowdown schedule allows",
            node_started.elapsed()
        )));
    }

    let rec = Arc::new(Mutex::new(Recorder::default()));
    let mut reads = tokio::task::JoinSet::new();
    tokio::time::sleep_until(start).await;
    let cpu_before = CpuTimes::now();
    let (blocks, disk_index) = (Arc::new(blocks), Arc::new(disk_index));
    for a in arrivals(spec, seed) {
        tokio::time::sleep_until(start + Duration::from_micros(a.at_us)).await;
        let (client, rec, blocks, disk_index) = (client.clone(), rec.clone(), blocks.clone(), disk_index.clone());
        let len = spec.read_bytes;
        reads.spawn(async move {
            let (file, block_offset) = &blocks[a.block as usize];
            let r = client.read_traced(file, block_offset + a.offset, len, IoTag::Foreground).await;
            let latency_us = since_start_us(start).saturating_sub(a.at_us);
            let mut rec = rec.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok((_, Some(disk))) => {
                    rec.read(a.at_us, latency_us, disk_index.get(&disk).copied().unwrap_or(u32::MAX))
                }
                _ => rec.error(),
            }
        });
        // Reap finished reads so the set stays small.
        while reads.try_join_next().is_some() {}
    }
    tokio::time::sleep_until(start + Duration::from_secs(spec.duration_s)).await;
    // Reads still in flight at the end are not counted, as in the twin.
    reads.shutdown().await;
    let cpu = CpuTimes::utilisation_since(cpu_before);
    drop(cluster);
    let rec = std::mem::take(&mut *rec.lock().unwrap_or_else(|p| p.into_inner()));
    Ok((rec.summary(spec), cpu))
}

/// Writes the experiment's blocks as 3-way replicated files and returns,
/// per block, its file and offset there.
async fn write_data(client: &Client, spec: &SteerSpec) -> Result<Vec<(FileInfo, u64)>, BenchError> {
    let block = spec.block_bytes;
    let file_bytes = block * u64::from(BLOCKS_PER_FILE);
    let data = pattern(file_bytes);
    let files = spec.blocks.div_ceil(BLOCKS_PER_FILE);
    let writes = (0..files).map(|i| {
        let data = data.clone();
        async move {
            let path = format!("/steering/{i}");
            client.put(&path, Redundancy::Replicated(spec.nodes as u8), block, data).await?;
            client.stat(&path).await
        }
    });
    let infos = futures::future::try_join_all(writes).await?;
    Ok((0..spec.blocks)
        .map(|b| (infos[(b / BLOCKS_PER_FILE) as usize].clone(), u64::from(b % BLOCKS_PER_FILE) * block))
        .collect())
}

/// Reads a little of every copy once, so that each chunk's header and
/// checksum table are loaded before the load starts (a first read costs an
/// extra head access, which the twin does not model).
async fn warm_up(client: &Client, blocks: &[(FileInfo, u64)]) -> Result<(), BenchError> {
    let mut files: Vec<&FileInfo> = blocks.iter().map(|b| &b.0).collect();
    files.dedup_by_key(|f| f.id);
    let reads = files.iter().flat_map(|f| &f.blocks).flat_map(|b| {
        b.chunks.iter().map(move |c| {
            let chunk = ChunkRef { block: BlockId(b.id), copy: c.copy as u8 };
            client.read_chunk(&c.addr, chunk, 0, 4096, IoTag::Foreground)
        })
    });
    futures::future::try_join_all(reads).await?;
    Ok(())
}

/// Metadata disk id → the experiment's disk number (`node × disks_per_node
/// + d` for the node's `disk<d>` directory).
async fn disk_indexes(
    client: &Client,
    cluster: &LocalCluster,
    spec: &SteerSpec,
    nodes: usize,
) -> Result<HashMap<u32, u32>, BenchError> {
    let status = client.cluster_status().await?;
    let mut out = HashMap::new();
    for n in 0..=nodes {
        let node = status
            .nodes
            .iter()
            .find(|s| s.addr == cluster.node_addr(n))
            .ok_or_else(|| BenchError::Setup(format!("node {n} has not registered")))?;
        for d in &node.disks {
            let local = Path::new(&d.path)
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_prefix("disk"))
                .and_then(|i| i.parse::<u32>().ok())
                .ok_or_else(|| BenchError::Setup(format!("unexpected disk directory {}", d.path)))?;
            out.insert(d.id, n as u32 * spec.disks_per_node + local);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowdowns_name_the_last_nodes_disks_after_the_margin() {
        let spec = SteerSpec::quick();
        let s = slowdowns(&spec).unwrap();
        assert_eq!(
            s,
            "slowdown = [{ disk = 0, factor = 5, after_ms = 21500, for_ms = 2300 }, \
             { disk = 1, factor = 5, after_ms = 31000, for_ms = 74000 }]\n"
        );
        let elsewhere = SteerSpec { transient_disk: 0, ..spec };
        assert!(slowdowns(&elsewhere).is_err());
    }

    #[test]
    fn figures_are_medians_per_field_and_per_second() {
        let run = |p99: f64, p90_first: f64| SteerSummary {
            persistent_p99_ms: p99,
            series: vec![SteerSecond { p90_ms: p90_first, ..SteerSecond::default() }],
            ..SteerSummary::default()
        };
        let r = aggregate("steering", vec![run(9.0, 1.0), run(1.0, 3.0), run(4.0, 2.0)], &[0.3, 0.1, 0.2]);
        assert_eq!(r.median.persistent_p99_ms, 4.0);
        assert_eq!(r.median.series[0].p90_ms, 2.0);
        assert_eq!(r.cpu_utilisation, 0.2);
        let w = windows(&r, &r);
        assert_eq!((w.len(), w[0].steering_p90_ms, w[0].random_p90_ms), (1, 2.0, 2.0));
    }
}
