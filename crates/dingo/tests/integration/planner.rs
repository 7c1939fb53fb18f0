//! Planner service tests with real processes on loopback: a local storage
//! cluster, a `dingo planner` child process, and task clients using
//! `PlannerClient`. Quanta are one second, so each test takes seconds.

use bytes::Bytes;
use dingo_client::{Client, IoTag, Redundancy};
use dingo_cluster::{LocalCluster, PlannerProcess};
use dingo_planner_client::wire::{Callback, FileSegment};
use dingo_planner_client::{CallbackStream, PlannerClient, read_chunk};
use dingo_planner_service::{ClientEntry, ServiceConfig};
use dingo_types::{BlockId, BlockSet, Declaration, DeclarationId, ReadSets, TaskKind, Timestamp};
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};
use tonic::Code;

use dingo_daemon::metrics::scrape;

use crate::common::{EXE, spawn_planner, start_cluster};

/// Two 64 KiB checksum segments per block.
const BLOCK: u64 = 128 * 1024;
const ADMIN: &str = "admin-token";
const TOKEN_A: &str = "token-a";
const TOKEN_B: &str = "token-b";
const STORAGE_CONFIG: &str =
    "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";

/// A cluster, a planner and a storage client. Field order matters: the
/// planner stops first, the directory goes last.
struct Env {
    planner: PlannerProcess,
    cluster: LocalCluster,
    client: Client,
    /// Disk id → address of its node.
    disk_addr: HashMap<u32, String>,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start(budget: Option<&str>) -> Env {
        let (cluster, dir) = start_cluster(3, 2, STORAGE_CONFIG, &[]).await;
        let mut cfg = ServiceConfig::new(ADMIN);
        cfg.meta = cluster.meta_addr().to_string();
        cfg.quantum_ms = 1000;
        cfg.dispatch_spacing_ms = 250;
        cfg.pin_grace_ms = 3000;
        cfg.budget.cluster_bytes = budget.map(|b| b.parse().expect("a byte limit"));
        cfg.clients = vec![
            ClientEntry { name: "task-a".into(), token: TOKEN_A.into() },
            ClientEntry { name: "task-b".into(), token: TOKEN_B.into() },
        ];
        let planner = spawn_planner(&cluster, dir.path(), "planner", &cfg);
        let client = cluster.client().unwrap();
        let status = client.cluster_status().await.unwrap();
        let disk_addr = status.nodes.iter().flat_map(|n| n.disks.iter().map(|d| (d.id, n.addr.clone()))).collect();
        Env { planner, cluster, client, disk_addr, _dir: dir }
    }

    fn planner(&self, token: &str) -> PlannerClient {
        PlannerClient::connect(self.planner.addr(), token).unwrap()
    }

    /// Writes a replicated file of `blocks` blocks; returns its block ids.
    async fn put(&self, path: &str, blocks: u64) -> Vec<u64> {
        let data: Vec<u8> = (0..blocks * BLOCK).map(|i| (i % 251) as u8).collect();
        self.client.put(path, Redundancy::Replicated(3), BLOCK, Bytes::from(data)).await.unwrap();
        self.client.stat(path).await.unwrap().blocks.iter().map(|b| b.id).collect()
    }

    /// Reads every chunk a callback names, through the normal read path.
    async fn read(&self, cb: &Callback) {
        let tag = IoTag::Maintenance { task: cb.task.parse().unwrap(), declaration: DeclarationId(cb.declaration) };
        for r in cb.sets.iter().flat_map(|s| &s.reads) {
            self.client.read_chunk(&self.disk_addr[&r.disk], read_chunk(r), 0, r.bytes, tag).await.unwrap();
        }
    }

    /// `(disk bytes read, pinned cache hits)` over all nodes.
    async fn node_counters(&self) -> (u64, u64) {
        let (mut bytes, mut pinned) = (0, 0);
        for i in 0..3 {
            let s = self.client.node_stats(self.cluster.node_addr(i)).await.unwrap();
            bytes += s.disks.iter().map(|d| d.bytes_read).sum::<u64>();
            pinned += s.cache.unwrap_or_default().pinned_hits;
        }
        (bytes, pinned)
    }
}

fn in_ms(ms: u64) -> Timestamp {
    Timestamp(dingo_daemon::now_ms() + ms)
}

fn singles(task: TaskKind, blocks: &[u64], deadline: Timestamp) -> Declaration {
    Declaration {
        task,
        read_sets: ReadSets::Sets(blocks.iter().map(|&b| BlockSet::any_of([BlockId(b)])).collect()),
        sets_needed: None,
        bytes_needed: None,
        deadline,
    }
}

/// The next callback, or `None` if the stream ended or failed.
async fn next(stream: &mut CallbackStream, within: Duration) -> Option<Callback> {
    match tokio::time::timeout(within, stream.next()).await {
        Ok(Some(Ok(cb))) => Some(cb),
        Ok(_) => None,
        Err(_) => panic!("no callback within {within:?}"),
    }
}

fn set_keys(cb: &Callback) -> impl Iterator<Item = u64> + '_ {
    cb.sets.iter().map(|s| s.key)
}

async fn wait_done(planner: &PlannerClient, id: DeclarationId) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = planner.status(&[id]).await.unwrap();
        if s.declarations[0].done {
            return;
        }
        assert!(Instant::now() < deadline, "not done: {:?}", s.declarations[0]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_reads_are_pinned_before_the_callbacks_and_declarations_finish_when_acknowledged() {
    let env = Env::start(None).await;
    let blocks = env.put("/p/shared", 6).await;
    let (a, b) = (env.planner(TOKEN_A), env.planner(TOKEN_B));
    let mut stream_a = a.subscribe().await.unwrap();
    let mut stream_b = b.subscribe().await.unwrap();
    // Two tasks want the same blocks in the same quantum: one disk read
    // each, the second reader served from the pinned cache.
    let deadline = in_ms(1500);
    let da = a.declare(&singles(TaskKind::Scrubbing, &blocks, deadline)).await.unwrap();
    let segments = vec![vec![FileSegment { path: "/p/shared".into(), offset: 0, length: 0 }]];
    let db = b.declare_files(TaskKind::FileScrubbing, deadline, None, None, segments).await.unwrap();
    assert_eq!((da.total_sets, db.total_sets), (6, 1));
    let before = env.node_counters().await;
    let (mut physical, mut free) = (0, 0);
    let mut keys_a = Vec::new();
    let mut got_b = false;
    while keys_a.len() < 6 || !got_b {
        tokio::select! {
            cb = next(&mut stream_a, Duration::from_secs(5)), if keys_a.len() < 6 => {
                let cb = cb.unwrap();
                env.read(&cb).await;
                keys_a.extend(set_keys(&cb));
                a.ack(&[cb.delivery]).await.unwrap();
                for r in cb.sets.iter().flat_map(|s| &s.reads) {
                    if r.physical { physical += r.bytes } else { free += r.bytes }
                }
            }
            cb = next(&mut stream_b, Duration::from_secs(5)), if !got_b => {
                let cb = cb.unwrap();
                assert_eq!(cb.sets.len(), 1);
                assert_eq!(cb.sets[0].reads.len(), 6, "the whole file as one set");
                env.read(&cb).await;
                b.ack(&[cb.delivery]).await.unwrap();
                for r in &cb.sets[0].reads {
                    if r.physical { physical += r.bytes } else { free += r.bytes }
                }
                got_b = true;
            }
        }
    }
    keys_a.sort_unstable();
    assert_eq!(keys_a, (0..6).collect::<Vec<u64>>());
    // Unless a quantum started between the two declarations, every block is
    // scheduled once and read twice; either way most second reads are free.
    assert_eq!(physical + free, 12 * BLOCK);
    assert!(free >= 4 * BLOCK, "{free}");
    let after = env.node_counters().await;
    let disk = after.0 - before.0;
    // Without the pins, disk bytes would be physical + free ≥ 1.5 × physical.
    assert!(disk < physical * 5 / 4, "free reads came from the pinned cache: {disk} disk bytes for {physical}");
    assert!(after.1 - before.1 >= free / BLOCK, "pinned hits: {}", after.1 - before.1);
    wait_done(&a, da.id).await;
    wait_done(&b, db.id).await;
    assert!(a.status(&[]).await.unwrap().declarations.is_empty(), "done declarations leave the listing");
    let metrics = scrape(env.planner.metrics_addr()).await.unwrap();
    assert!(metrics.contains("dingo_planner_free_bytes_total{task=\"file-scrubbing\"}"), "{metrics}");
    assert!(!metrics.contains("dingo_planner_pins_sent_total 0\n"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_and_wrong_tokens_are_refused_and_change_nothing() {
    let env = Env::start(None).await;
    let blocks = env.put("/b/file", 3).await;
    let (a, b, admin) = (env.planner(TOKEN_A), env.planner(TOKEN_B), env.planner(ADMIN));
    let good = a.declare(&singles(TaskKind::Fsck, &blocks, in_ms(60_000))).await.unwrap();

    // Tokens.
    assert_eq!(code(env.planner("wrong").status(&[]).await), Some(Code::Unauthenticated));
    let mut raw =
        dingo_proto::planner::planner_client::PlannerClient::connect(format!("http://{}", env.planner.addr()))
            .await
            .unwrap();
    let e = raw.status(dingo_proto::planner::StatusRequest::default()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "no token: {e}");
    assert!(e.message().contains("Bearer"), "{e}");
    assert_eq!(code(b.cancel(good.id).await), Some(Code::PermissionDenied));
    assert_eq!(code(b.status(&[good.id]).await), Some(Code::PermissionDenied));
    assert_eq!(code(a.set_budget(Some(1), Some(1)).await), Some(Code::PermissionDenied));
    assert_eq!(
        code(admin.declare(&singles(TaskKind::Fsck, &blocks, in_ms(60_000))).await),
        Some(Code::PermissionDenied)
    );
    assert_eq!(code(b.ack(&[999_999]).await), Some(Code::NotFound));

    // Bad declarations, each with a message that says what is wrong.
    let bad: Vec<(Declaration, &str)> = vec![
        (singles(TaskKind::Fsck, &[blocks[0], 999_999], in_ms(60_000)), "does not exist"),
        (singles(TaskKind::Fsck, &blocks, Timestamp(1)), "not after the current time"),
        (singles(TaskKind::Fsck, &[], in_ms(60_000)), "names no sets"),
        (
            Declaration { sets_needed: Some(9), ..singles(TaskKind::Rebalancing, &blocks, in_ms(60_000)) },
            "names only 3 sets",
        ),
        (
            Declaration {
                read_sets: ReadSets::ChunksOnDisk(dingo_types::DiskId(99)),
                ..singles(TaskKind::Scrubbing, &[], in_ms(60_000))
            },
            "disk 99 does not exist",
        ),
    ];
    for (d, needle) in bad {
        let e = a.declare(&d).await.unwrap_err();
        assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    let file = |path: &str, offset, length| vec![vec![FileSegment { path: path.into(), offset, length }]];
    let e = a.declare_files(TaskKind::Transcoding, in_ms(60_000), None, None, file("/b/none", 0, 0)).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::NotFound), "{e}");
    let e = a
        .declare_files(TaskKind::Transcoding, in_ms(60_000), None, None, file("/b/file", 0, 4 * BLOCK))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(Code::InvalidArgument), "{e}");
    assert!(e.to_string().contains("past the end"), "{e}");
    let mut wire = dingo_planner_client::convert::declaration_to_wire(&singles(TaskKind::Fsck, &blocks, in_ms(9000)));
    wire.task = "defrag".into();
    let e = a.declare_wire(wire).await.unwrap_err();
    assert!(e.code() == Some(Code::InvalidArgument) && e.to_string().contains("unknown task"), "{e}");

    // Nothing changed: still exactly the one good declaration.
    let listed = admin.status(&[]).await.unwrap().declarations;
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].declaration, listed[0].client.as_str()), (good.id.0, "task-a"));
    assert!(b.status(&[]).await.unwrap().declarations.is_empty());

    // The CLI: status with a client token, budget only with the admin's.
    let cli = |args: &[&str]| Command::new(EXE).args(args).output().unwrap();
    let out = cli(&["planner", "status", "--planner", env.planner.addr(), "--token", TOKEN_A]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("fsck") && text.contains("task-a"), "{text}");
    let out = cli(&["planner", "status", "--json", "--addr", env.planner.addr(), "--token", TOKEN_A]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["declarations"][0]["id"].as_u64(), v["declarations"][0]["task"].as_str()),
        (Some(good.id.0), Some("fsck"))
    );
    let out =
        cli(&["planner", "budget", "set", "--cluster-bytes", "5MB", "--addr", env.planner.addr(), "--token", TOKEN_A]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("admin token"));
    let out = cli(&["planner", "budget", "set", "--cluster-bytes", "lots", "--token", ADMIN]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("invalid size"));
    // `--addr` is still accepted for `--planner`; a missing token is named.
    let out =
        Command::new(EXE).args(["planner", "status", "--addr", env.planner.addr()]).env_remove("DINGO_TOKEN").output();
    let err = String::from_utf8_lossy(&out.unwrap().stderr).into_owned();
    assert!(err.contains("--token"), "{err}");
    a.cancel(good.id).await.unwrap();
    assert_eq!(code(a.cancel(good.id).await), Some(Code::FailedPrecondition));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reconnects_gets_every_unacknowledged_callback() {
    let env = Env::start(None).await;
    let blocks = env.put("/r/file", 8).await;
    let a = env.planner(TOKEN_A);
    let d = a.declare(&singles(TaskKind::Fsck, &blocks, in_ms(8000))).await.unwrap();
    let mut stream = a.subscribe().await.unwrap();
    let first = next(&mut stream, Duration::from_secs(5)).await.unwrap();
    assert!(!first.redelivery);
    // Disconnect without acknowledging. What the quantum under way planned
    // is still dispatched; after it, nothing is scheduled for nobody.
    drop(stream);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let delivered = a.status(&[d.id]).await.unwrap().declarations[0].delivered_sets;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let status = a.status(&[d.id]).await.unwrap();
    assert_eq!(status.declarations[0].delivered_sets, delivered, "dispatch pauses while nobody listens");
    assert!(delivered < 8, "the pause left work: {delivered} of 8 sets delivered");
    let metrics = scrape(env.planner.metrics_addr()).await.unwrap();
    assert!(metrics.contains("dingo_planner_paused_declarations 1\n"), "{metrics}");
    let mut stream = a.subscribe().await.unwrap();
    let mut acked: HashSet<u64> = HashSet::new();
    let mut keys = Vec::new();
    let mut replayed = Vec::new();
    while keys.len() < 8 {
        let cb = next(&mut stream, Duration::from_secs(5)).await.unwrap();
        assert!(acked.insert(cb.delivery), "delivery {} came twice", cb.delivery);
        if cb.redelivery {
            replayed.push(cb.delivery);
        }
        keys.extend(set_keys(&cb));
        a.ack(&[cb.delivery]).await.unwrap();
    }
    // The one the client saw comes first, as a redelivery; those dispatched
    // after it left follow (no stream had them, so not flagged).
    assert_eq!(replayed.first(), Some(&first.delivery), "the unacknowledged callback comes first");
    keys.sort_unstable();
    assert_eq!(keys, (0..8).collect::<Vec<u64>>(), "every set exactly once");
    wait_done(&a, d.id).await;
    // A third subscription has nothing to replay.
    let mut stream = a.subscribe().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(1500), stream.next()).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_killed_mid_run_loses_nothing_and_repeats_nothing_acknowledged() {
    let mut env = Env::start(None).await;
    let blocks = env.put("/k/file", 24).await;
    let a = env.planner(TOKEN_A);
    let d = a.declare(&singles(TaskKind::Fsck, &blocks, in_ms(6000))).await.unwrap();
    let mut stream = a.subscribe().await.unwrap();
    let mut acked: HashSet<u64> = HashSet::new();
    let mut acked_keys: Vec<u64> = Vec::new();
    // Acknowledge callbacks until a third of the sets are done, keeping the
    // last one unacknowledged, then SIGKILL the planner.
    let held = loop {
        let cb = next(&mut stream, Duration::from_secs(5)).await.unwrap();
        if acked_keys.len() >= 8 {
            break cb;
        }
        a.ack(&[cb.delivery]).await.unwrap();
        acked.insert(cb.delivery);
        acked_keys.extend(set_keys(&cb));
    };
    env.planner.kill();
    // Callbacks already on the wire may still arrive (unacknowledged, they
    // come again); then the stream ends with the planner.
    while next(&mut stream, Duration::from_secs(5)).await.is_some() {}
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.planner.restart().unwrap();
    let mut stream = loop {
        match a.subscribe().await {
            Ok(s) => break s,
            Err(e) => {
                eprintln!("resubscribing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut held_seen = false;
    while acked_keys.len() < 24 {
        let cb = next(&mut stream, Duration::from_secs(5)).await.unwrap();
        assert!(!acked.contains(&cb.delivery), "acknowledged delivery {} came again", cb.delivery);
        if cb.delivery == held.delivery {
            assert!(cb.redelivery && cb.sets == held.sets, "{cb:?}");
            held_seen = true;
        }
        a.ack(&[cb.delivery]).await.unwrap();
        acked.insert(cb.delivery);
        acked_keys.extend(set_keys(&cb));
    }
    assert!(held_seen, "the unacknowledged callback was re-sent after the restart");
    acked_keys.sort_unstable();
    assert_eq!(acked_keys, (0..24).collect::<Vec<u64>>(), "every set acknowledged exactly once");
    wait_done(&a, d.id).await;
    let s = &a.status(&[d.id]).await.unwrap().declarations[0];
    assert_eq!((s.delivered_sets, s.acked_sets), (24, 24));
    env.planner.check_running().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_is_never_exceeded_and_changes_at_run_time() {
    let env = Env::start(Some("400KB")).await;
    let blocks = env.put("/q/file", 16).await;
    let a = env.planner(TOKEN_A);
    let mut stream = a.subscribe().await.unwrap();
    // Demand far above the budget: everything due in two quanta.
    let d = a.declare(&singles(TaskKind::Reconstruction, &blocks, in_ms(2000))).await.unwrap();
    // Per quantum: (physical bytes, sets).
    let mut per_quantum: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut sets = 0;
    let mut overloaded = false;
    let mut changed_at = None;
    while sets < 16 {
        let cb = next(&mut stream, Duration::from_secs(5)).await.unwrap();
        overloaded |= cb.overloaded;
        let q = per_quantum.entry(cb.quantum_ms).or_default();
        q.0 += cb.sets.iter().flat_map(|s| &s.reads).filter(|r| r.physical).map(|r| r.bytes).sum::<u64>();
        q.1 += cb.sets.len() as u64;
        sets += cb.sets.len();
        a.ack(&[cb.delivery]).await.unwrap();
        if per_quantum.len() == 2 && changed_at.is_none() {
            // Lift the limit at run time with the CLI; the rest then
            // arrives in one quantum.
            changed_at = Some(dingo_daemon::now_ms());
            let out = Command::new(EXE)
                .args([
                    "planner",
                    "budget",
                    "set",
                    "--cluster-bytes",
                    "0",
                    "--addr",
                    env.planner.addr(),
                    "--token",
                    ADMIN,
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(a.status(&[]).await.unwrap().budget.unwrap().cluster_bytes, 0);
        }
    }
    assert!(overloaded, "a declaration the budget cannot serve in time is flagged");
    let changed_at = changed_at.unwrap();
    let limited: Vec<_> = per_quantum.iter().filter(|(q, _)| **q < changed_at).collect();
    assert!(limited.len() >= 2 && limited.iter().all(|(_, (bytes, _))| *bytes <= 400_000), "{per_quantum:?}");
    assert!(per_quantum.values().any(|&(_, n)| n > 3), "unlimited, a quantum serves more than 400KB: {per_quantum:?}");
    wait_done(&a, d.id).await;
    assert!(a.status(&[d.id]).await.unwrap().declarations[0].missed_deadline);
    let metrics = scrape(env.planner.metrics_addr()).await.unwrap();
    assert!(metrics.contains("dingo_planner_deadline_misses_total{task=\"reconstruction\"} 1"), "{metrics}");
}

/// The gRPC code of a call that must fail.
fn code<T: std::fmt::Debug>(r: Result<T, dingo_planner_client::PlannerClientError>) -> Option<Code> {
    r.unwrap_err().code()
}

/// `dingo planner dst` prints the same campaign on one thread and on
/// three, and `--trace` of one seed lists its steps.
#[test]
fn the_deterministic_simulation_prints_the_same_campaign_on_any_number_of_threads() {
    let dst = |args: &[&str]| {
        let out = Command::new(EXE).args(["planner", "dst", "--steps", "150"]).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let one = dst(&["--seed", "5", "--seeds", "6", "--jobs", "1"]);
    assert!(one.starts_with("6 seeds, 0 violations; "), "{one}");
    assert_eq!(dst(&["--seed", "5", "--seeds", "6", "--jobs", "3"]), one);
    let traced = dst(&["--seed", "5", "--trace"]);
    assert!(traced.lines().count() > 20 && traced.contains("planner starts"), "{traced}");
}
