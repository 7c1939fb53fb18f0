//! steering (Sandook Fig. 7c / Fig. 9 analog): open-loop foreground reads
//! of 3-way replicated blocks on a 3-node × 2-disk local cluster with HDD
//! emulation while one disk runs 5× slower — for 2.3 s, later for good —
//! with the client's replica steering against random replica choice.
//!
//! The load, statistics and bars are those of the virtual-time twin
//! ([`model`]). The faults go through the fault-injection RPC
//! (`Client::inject_slowdown`, what `dingo cluster slow-disk` calls; the
//! nodes run with `fault_injection = true`), sent just before the load
//! starts with delays that place them on the load's clock.

pub mod model;

use crate::BenchError;
use crate::cluster::{self, pattern, since_start_us};
use crate::harness::{Options, alternate};
use crate::output::{Chart, Experiment, Tone};
use crate::proc::CpuTimes;
use crate::stats::median;
use dingo_client::{Client, DiskSlowdown, FileInfo, IoTag, Redundancy, ReplicaChoice};
use dingo_cluster::LocalCluster;
use dingo_iosched::PolicyKind;
use dingo_report::plots::{LineChart, Series};
use dingo_types::{BlockId, ChunkRef, DiskId};
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
/// From the fault-injection calls to the start of the load: room for the
/// calls to land before the first fault could be due.
const INJECTION_LEAD: Duration = Duration::from_millis(500);

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
/// scheduler (fault injection is allowed in every experiment's config).
fn node_config(spec: &SteerSpec) -> String {
    cluster::node_config(0, spec.positioning_us, spec.transfer_bytes_per_sec, PolicyKind::Classful)
}

/// The two faults on the load's clock: (the experiment's disk number, from
/// when, for how long).
fn faults(spec: &SteerSpec) -> [(u32, Duration, Duration); 2] {
    let ms = Duration::from_millis;
    [
        (spec.transient_disk, ms(spec.transient_at_ms), ms(spec.transient_ms)),
        // To the end of the load, and beyond while reads drain.
        (
            spec.persistent_disk,
            ms(spec.persistent_at_ms),
            ms((spec.duration_s * 1000).saturating_sub(spec.persistent_at_ms) + 60_000),
        ),
    ]
}

/// Sends the faults so that they start on time if the load starts at
/// `start`; `disk_index` maps metadata disk ids to the experiment's numbers.
async fn inject_faults(
    client: &Client,
    spec: &SteerSpec,
    disk_index: &HashMap<u32, u32>,
    start: Instant,
) -> Result<(), BenchError> {
    for (number, from_start, lasting) in faults(spec) {
        let id = disk_index
            .iter()
            .find_map(|(&id, &n)| (n == number).then_some(id))
            .ok_or_else(|| BenchError::Setup(format!("disk {number} is not in the cluster")))?;
        let after = (start + from_start).saturating_duration_since(Instant::now());
        let factor = spec.factor_permille as f64 / 1000.0;
        client.inject_slowdown(DiskSlowdown { disk: DiskId(id), factor, after, lasting }).await?;
    }
    Ok(())
}

async fn one_run(
    opts: &Options,
    spec: &SteerSpec,
    choice: ReplicaChoice,
    seed: u64,
    dir: &Path,
) -> Result<(SteerSummary, f64), BenchError> {
    let cluster = cluster::start(&opts.exe, dir, spec.nodes, spec.disks_per_node, &node_config(spec)).await?;
    let client = cluster.client()?.with_replica_choice(choice);
    let blocks = write_data(&client, spec).await?;
    warm_up(&client, &blocks).await?;
    let disk_index = disk_indexes(&client, &cluster, spec, spec.nodes as usize - 1).await?;
    let start = Instant::now() + INJECTION_LEAD;
    inject_faults(&client, spec, &disk_index, start).await?;
    if Instant::now() > start {
        return Err(BenchError::Setup(format!(
            "injecting the faults took longer than the {INJECTION_LEAD:?} before the load"
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
    fn the_faults_are_the_twins_on_the_loads_clock() {
        let spec = SteerSpec::quick();
        let ms = Duration::from_millis;
        assert_eq!(
            faults(&spec),
            [
                (spec.transient_disk, ms(6_500), ms(2_300)),
                (spec.persistent_disk, ms(16_000), ms(30_000 - 16_000 + 60_000)),
            ]
        );
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
