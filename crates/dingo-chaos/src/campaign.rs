//! One campaign: the cluster, the workload and the auditor, the fault
//! lanes for the campaign's duration, then the heal and the oracle's
//! checks.

use crate::auditor::{AuditReport, Auditor};
use crate::fault::FaultCounts;
use crate::lanes::{self, Lanes, Planted};
use crate::report::{ChaosReport, Check, CorruptionReport, WITHIN_REDUNDANCY, WorkloadReport};
use crate::workload::{self, Oracle, ReadBack, WorkloadCounters};
use crate::{ChaosConfig, ChaosError};
use dingo_client::{Client, IoTag};
use dingo_cluster::{ClusterSpec, LocalCluster, PlannerProcess, PlannerSpec};
use dingo_planner_client::PlannerClient;
use dingo_planner_service::{ClientEntry, ServiceConfig};
use dingo_tasks::on_demand::{self, Driver};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Nodes heartbeat often and are "not alive" soon, so writes avoid an
/// impaired node quickly; nothing is ever marked DEAD (an outage is short,
/// and a campaign tests repair of damage, not of lost nodes).
const STORAGE_CONFIG: &str = "[meta]\ndead_after_ms = 1000\nmark_dead_after_ms = 0\n[node]\nheartbeat_ms = 200\n";
const ADMIN_TOKEN: &str = "chaos-admin";
const MAINTAIN_TOKEN: &str = "maintain-token";
const AUDITOR_TOKEN: &str = "auditor-token";
const HEAL_TOKEN: &str = "heal-token";
/// How long the heal may take to bring every declaration to its end.
const HEAL_TIMEOUT: Duration = Duration::from_secs(180);
/// Scrub rounds of the heal: until one finds nothing to repair.
const HEAL_ROUNDS: usize = 3;
/// Deadline of each heal scrub: the planner paces a declaration to its
/// deadline, and the heal wants it done now.
const HEAL_SCRUB_DEADLINE_MS: u64 = 10_000;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ChaosError + '_ {
    move |source| ChaosError::Io { path: path.to_path_buf(), source }
}

/// Starts the cluster, the planner and the maintenance supervisor.
fn start_cluster(cfg: &ChaosConfig, data: &Path) -> Result<(LocalCluster, PlannerProcess), ChaosError> {
    std::fs::create_dir_all(data).map_err(io_err(data))?;
    let config = data.join("dingo.toml");
    std::fs::write(&config, STORAGE_CONFIG).map_err(io_err(&config))?;
    let mut cluster = LocalCluster::start(ClusterSpec {
        exe: cfg.exe.clone(),
        data: data.join("cluster"),
        nodes: cfg.nodes,
        disks_per_node: cfg.disks_per_node,
        base_port: 0,
        config: Some(config),
        node_args: Vec::new(),
        tls: false,
    })?;
    let mut planner_cfg = ServiceConfig::new(ADMIN_TOKEN);
    planner_cfg.meta = cluster.meta_addr().to_string();
    planner_cfg.quantum_ms = 1000;
    planner_cfg.dispatch_spacing_ms = 250;
    planner_cfg.clients = [("maintain", MAINTAIN_TOKEN), ("auditor", AUDITOR_TOKEN), ("heal", HEAL_TOKEN)]
        .iter()
        .map(|(name, token)| ClientEntry { name: name.to_string(), token: token.to_string() })
        .collect();
    let planner_toml = data.join("planner.toml");
    std::fs::write(&planner_toml, planner_cfg.to_toml()).map_err(io_err(&planner_toml))?;
    let planner = PlannerProcess::start(PlannerSpec {
        exe: cfg.exe.clone(),
        config: planner_toml,
        data: data.join("planner"),
        log: cluster.log_dir().join("planner.log"),
        storage: cluster.credentials().auth.clone(),
    })?;
    let args: Vec<String> = [
        "--interval",
        "1s",
        "--scrub-every",
        "30s",
        "--job-deadline",
        "30s",
        "--planner",
        planner.addr(),
        "--token",
        MAINTAIN_TOKEN,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cluster.start_maintainer(&args)?;
    Ok((cluster, planner))
}

/// Disk id → (directory, node index), from the metadata service.
async fn disk_map(cluster: &LocalCluster, client: &Client) -> Result<HashMap<u32, (PathBuf, usize)>, ChaosError> {
    let status = client.cluster_status().await?;
    let mut disks = HashMap::new();
    for i in 0..cluster.node_count() {
        if let Some(n) = status.nodes.iter().find(|n| n.addr == cluster.node_addr(i)) {
            for d in &n.disks {
                disks.insert(d.id, (PathBuf::from(&d.path), i));
            }
        }
    }
    Ok(disks)
}

/// Runs a campaign to its report. An error is a campaign that could not be
/// run (the cluster did not start); failed checks are in the report.
pub async fn run(cfg: &ChaosConfig) -> Result<ChaosReport, ChaosError> {
    if cfg.duration.is_zero() {
        return Err(ChaosError::NoDuration);
    }
    let started = Instant::now();
    let (data, owned) = match &cfg.data {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("dingo-chaos-{}-{}", cfg.seed, std::process::id())), true),
    };
    let (mut cluster, planner) = start_cluster(cfg, &data)?;
    cluster.wait_ready(Duration::from_secs(60)).await?;
    let client = cluster.client()?;
    let disks = disk_map(&cluster, &client).await?;

    let oracle = Oracle::default();
    let counters = Arc::new(WorkloadCounters::default());
    let stop_workload = Arc::new(AtomicBool::new(false));
    let mut workers = vec![tokio::spawn(workload::write_loop(
        client.clone(),
        oracle.clone(),
        counters.clone(),
        cfg.seed,
        stop_workload.clone(),
    ))];
    for r in 0..2u64 {
        workers.push(tokio::spawn(workload::read_loop(
            client.clone(),
            oracle.clone(),
            counters.clone(),
            cfg.seed ^ r,
            stop_workload.clone(),
        )));
    }
    let auditor_client = PlannerClient::connect(planner.addr(), AUDITOR_TOKEN).expect("a loopback address");
    let auditor = Auditor::start(auditor_client, client.clone(), oracle.clone(), cfg.seed);
    // Faults start once there is something to damage.
    let warm_up = Instant::now() + Duration::from_secs(30);
    while oracle.len() < 5 && Instant::now() < warm_up {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let lanes = Arc::new(Lanes {
        cluster: Mutex::new(cluster),
        planner: Mutex::new(planner),
        client: client.clone(),
        oracle: oracle.clone(),
        rt: tokio::runtime::Handle::current(),
        counts: Mutex::new(FaultCounts::default()),
        planted: Mutex::new(Vec::new()),
        incidents: Mutex::new(Vec::new()),
        disks,
        stop: AtomicBool::new(false),
        done: std::sync::Barrier::new(3),
    });
    // The lanes' threads start daemons again after faults; the heal then
    // restarts every daemon from this (the main) thread, which outlives them.
    let lane_fns: [fn(&Lanes, u64); 3] = [lanes::node_lane, lanes::control_lane, lanes::damage_lane];
    let threads: Vec<_> = lane_fns
        .into_iter()
        .map(|f| {
            let lanes = lanes.clone();
            let seed = cfg.seed;
            std::thread::spawn(move || f(&lanes, seed))
        })
        .collect();
    let faults_started = Instant::now();
    tokio::time::sleep(cfg.duration).await;
    lanes.stop.store(true, Ordering::Relaxed);
    tokio::task::block_in_place(|| {
        for t in threads {
            let _ = t.join();
        }
    });
    let duration_s = faults_started.elapsed().as_secs_f64();
    stop_workload.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.await;
    }
    let lanes = Arc::into_inner(lanes).expect("the lanes' threads have ended");
    let faults = lanes.counts.into_inner().expect("counts lock");
    let planted = lanes.planted.into_inner().expect("planted lock");
    let mut incidents = lanes.incidents.into_inner().expect("incidents lock");
    let mut cluster = lanes.cluster.into_inner().expect("cluster lock");
    let mut planner = lanes.planner.into_inner().expect("planner lock");

    let heal = heal(&mut cluster, &mut planner, &client, &planted).await;
    let corruption = match heal {
        Ok(c) => c,
        Err(e) => {
            incidents.push(format!("the heal failed: {e}"));
            CorruptionReport { planted: planted.len() as u64, ..CorruptionReport::default() }
        }
    };
    let workload = verify_files(&client, &oracle, &counters).await;
    let audit = auditor.finish(HEAL_TIMEOUT).await;
    cluster.restart_maintainer()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    incidents.extend(cluster.check_running().into_iter().map(|e| format!("a daemon exited on its own: {e}")));
    if let Err(e) = planner.check_running() {
        incidents.push(format!("the planner exited on its own: {e}"));
    }
    let checks = checks(&faults, &workload, &corruption, &audit, &incidents);
    let passed = checks.iter().all(|c| c.passed);
    let report = ChaosReport {
        seed: cfg.seed,
        duration_s,
        wall_s: started.elapsed().as_secs_f64(),
        nodes: cluster.node_count(),
        disks_per_node: cfg.disks_per_node,
        within_redundancy: WITHIN_REDUNDANCY,
        faults_total: faults.total(),
        faults,
        workload,
        corruption,
        planner: audit,
        incidents,
        checks,
        passed,
    };
    drop(planner);
    drop(cluster);
    if owned && passed {
        let _ = std::fs::remove_dir_all(&data);
    }
    Ok(report)
}

/// Restarts every daemon, scrubs every disk through the planner until a
/// round finds nothing to repair, and checks each planted chunk's copy.
async fn heal(
    cluster: &mut LocalCluster,
    planner: &mut PlannerProcess,
    client: &Client,
    planted: &[Planted],
) -> Result<CorruptionReport, String> {
    // Restarted nodes read every chunk header afresh: a flip in a header a
    // node held in memory is found only by reading it from the disk.
    tokio::task::block_in_place(|| -> Result<(), String> {
        cluster.kill_maintainer();
        for i in 0..cluster.node_count() {
            cluster.kill_node(i);
        }
        cluster.kill_meta();
        cluster.start_meta().map_err(|e| e.to_string())?;
        for i in 0..cluster.node_count() {
            cluster.start_node(i).map_err(|e| e.to_string())?;
        }
        Ok(())
    })?;
    cluster.wait_ready(Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
    tokio::task::block_in_place(|| planner.restart()).map_err(|e| e.to_string())?;
    let mut report = CorruptionReport { planted: planted.len() as u64, ..CorruptionReport::default() };
    let heal_client = PlannerClient::connect(planner.addr(), HEAL_TOKEN).map_err(|e| e.to_string())?;
    for _ in 0..HEAL_ROUNDS {
        let deadline_ms = dingo_daemon::now_ms() + HEAL_SCRUB_DEADLINE_MS;
        let jobs = on_demand::scrub_disks(client, &[], deadline_ms).await.map_err(|e| e.to_string())?;
        let reports = on_demand::run_jobs(client, jobs, Driver::Declarative(heal_client.clone()))
            .await
            .map_err(|e| e.to_string())?;
        let repaired: u64 = reports.iter().map(|r| r.repaired).sum();
        let failed: u64 = reports.iter().map(|r| r.failed).sum();
        report.heal_scrub_repaired += repaired;
        report.heal_scrub_failed = failed;
        if repaired == 0 && failed == 0 {
            break;
        }
    }
    for p in planted {
        let (block, copy) = (p.chunk.block.0, p.chunk.copy);
        let size = match client.blocks(&[p.chunk.block]).await {
            Ok(recs) => recs.first().map_or(0, |r| r.size),
            Err(e) => return Err(format!("block {block}: {e}")),
        };
        match client.read_copy(p.chunk, 0, size, IoTag::Foreground).await {
            Ok(data) if data.len() as u64 == size => report.repaired += 1,
            Ok(data) => report.unrepaired.push(format!(
                "{:?} copy {copy} of block {block}: {} bytes of {size}",
                p.kind,
                data.len()
            )),
            Err(e) => report.unrepaired.push(format!(
                "{} of copy {copy} of block {block} ({}): {e}",
                p.kind,
                p.path.display()
            )),
        }
    }
    report.still_listed_corrupt = client.cluster_status().await.map_err(|e| e.to_string())?.corrupt.len() as u64;
    Ok(report)
}

/// Reads every acknowledged file back (a failed read is tried again, up to
/// three times).
async fn verify_files(client: &Client, oracle: &Oracle, counters: &WorkloadCounters) -> WorkloadReport {
    let mut report = WorkloadReport {
        writes_acked: counters.writes_acked.load(Ordering::Relaxed),
        bytes_acked: counters.bytes_acked.load(Ordering::Relaxed),
        writes_failed: counters.writes_failed.load(Ordering::Relaxed),
        reads_ok: counters.reads_ok.load(Ordering::Relaxed),
        reads_unavailable: counters.reads_unavailable.load(Ordering::Relaxed),
        reads_mismatched: counters.mismatch_count.load(Ordering::Relaxed),
        mismatches: counters.mismatches.lock().expect("mismatch lock").clone(),
        ..WorkloadReport::default()
    };
    for w in oracle.all() {
        let mut outcome = workload::read_back(client, &w).await;
        for _ in 0..2 {
            if !matches!(outcome, ReadBack::Unavailable(_)) {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            outcome = workload::read_back(client, &w).await;
        }
        let what = match outcome {
            ReadBack::Identical => continue,
            ReadBack::Differs(what) => what,
            ReadBack::Unavailable(e) => format!("{} unreadable after the heal: {e}", w.path),
        };
        report.files_lost += 1;
        report.bytes_lost += w.len;
        if report.mismatches.len() < 20 {
            report.mismatches.push(what);
        }
    }
    report
}

fn check(name: &str, passed: bool, detail: String) -> Check {
    Check { name: name.to_string(), passed, detail }
}

fn checks(
    faults: &FaultCounts,
    w: &WorkloadReport,
    c: &CorruptionReport,
    a: &AuditReport,
    incidents: &[String],
) -> Vec<Check> {
    vec![
        check("every fault kind injected", faults.min() > 0, format!("at least {} of each kind", faults.min())),
        check(
            "acknowledged bytes read back identical after the heal",
            w.writes_acked > 0 && w.files_lost == 0,
            format!("{} files ({} bytes) acknowledged; {} bytes lost", w.writes_acked, w.bytes_acked, w.bytes_lost),
        ),
        check(
            "no wrong bytes read during the campaign",
            w.reads_mismatched == 0,
            format!("{} reads identical, {} wrong", w.reads_ok, w.reads_mismatched),
        ),
        check(
            "every planted corruption detected and repaired",
            c.planted > 0 && c.repaired == c.planted,
            format!(
                "{} of {} planted ({:.1} %)",
                c.repaired,
                c.planted,
                100.0 * c.repaired as f64 / c.planted.max(1) as f64
            ),
        ),
        check(
            "no acknowledged planner set delivered again",
            a.acks_confirmed > 0 && a.acked_sets_redelivered == 0,
            format!("{} sets acknowledged, {} delivered again", a.sets_acked, a.acked_sets_redelivered),
        ),
        check(
            "no declared maintenance work lost",
            a.declarations > 0 && a.declarations_not_done == 0 && a.violations.is_empty(),
            format!("{} of {} declarations done", a.declarations - a.declarations_not_done, a.declarations),
        ),
        check("no daemon exited on its own", incidents.is_empty(), format!("{} incidents", incidents.len())),
    ]
}
