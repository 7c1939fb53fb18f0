//! What an operator meets, with real processes on loopback: interrupted
//! and failed puts leave nothing behind, a dead writer's lease is
//! recovered, a paused metadata service gives errors within the client's
//! deadline, and a failed `fs get` leaves the local file as it was.

use dingo_client::{Client, ClientError, IoTag, Redundancy};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{CliTarget, data, start_cluster};

const MB: u64 = 1_000_000;
const CONFIG: &str = "[meta]\ndead_after_ms = 1000\nlease_ttl_ms = 1500\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";

/// Silent nodes and disks are marked DEAD after 2 s, so `dingo maintain`
/// repairs within a test's time.
const SELF_REPAIRING: &str = "[meta]\ndead_after_ms = 1000\nmark_dead_after_ms = 2000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";

fn dingo(target: &CliTarget, args: &[&str]) -> Output {
    target.command().args(args).env("DINGO_TIMEOUT", "3s").output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn gone(client: &Client, path: &str) -> bool {
    matches!(client.stat(path).await, Err(e) if e.code() == Some(tonic::Code::NotFound))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_and_failed_puts_leave_nothing_behind() {
    let (c, dir) = start_cluster(4, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();

    // A put from a pipe that stalls after 20 MB, then SIGTERM.
    let mut put = CliTarget::of(&c)
        .command()
        .args(["fs", "put", "-", "/int/f", "--block-size", "1MB"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = put.stdin.take().unwrap();
    stdin.write_all(&data(20 * MB, 1)).unwrap();
    let start = Instant::now();
    while client.stat("/int/f").await.map(|f| f.size).unwrap_or(0) < 10 * MB {
        assert!(start.elapsed() < Duration::from_secs(20), "the put never committed anything");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // SAFETY: kill(2) on a pid this test started; no memory is involved.
    unsafe { libc::kill(put.id() as i32, libc::SIGTERM) };
    // Its stdin stays open: the put must exit anyway (it used to hang in
    // the runtime's drop, waiting on tokio's blocking stdin reader).
    let start = Instant::now();
    while put.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            put.kill().unwrap();
            panic!("the interrupted put did not exit within 20 s while its stdin was open");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = put.wait_with_output().unwrap();
    drop(stdin);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("interrupted: /int/f removed"), "{}", stderr(&out));
    assert!(gone(&client, "/int/f").await, "the partial file was removed");

    // Puts refused by the metadata service (too many replicas, bad block
    // size) leave no file either, and a retry at the same path works.
    let local = dir.path().join("small");
    std::fs::write(&local, data(3 * MB, 2)).unwrap();
    let l = local.to_str().unwrap();
    let out = dingo(&CliTarget::of(&c), &["fs", "put", l, "/int/g", "--redundancy", "replicated:5"]);
    assert!(!out.status.success());
    assert!(gone(&client, "/int/g").await, "failed put left {:?}", client.stat("/int/g").await.map(|f| f.size));
    let out = dingo(&CliTarget::of(&c), &["fs", "put", l, "/int/g", "--block-size", "1"]);
    assert!(stderr(&out).contains("64 KiB"), "{}", stderr(&out));
    let out = dingo(&CliTarget::of(&c), &["fs", "put", l, "/int/g", "--block-size", "1MB"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // An existing file is kept unless --overwrite.
    let out = dingo(&CliTarget::of(&c), &["fs", "put", l, "/int/g"]);
    assert!(stderr(&out).contains("file already exists: /int/g"), "{}", stderr(&out));
    std::fs::write(&local, data(MB, 3)).unwrap();
    let out = dingo(&CliTarget::of(&c), &["fs", "put", l, "/int/g", "--overwrite"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(client.read_all("/int/g", IoTag::Foreground).await.unwrap(), data(MB, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_file_is_sealed_at_its_committed_length_or_removed() {
    let (c, dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();
    // A writer commits 2.5 MB, then dies (never seals); another dies
    // before committing anything.
    let d = data(2 * MB + MB / 2, 4);
    let mut w = client.create("/lease/partial", Redundancy::Replicated(3), MB).await.unwrap();
    w.append(&d).await.unwrap();
    w.flush().await.unwrap();
    drop(w);
    drop(client.create("/lease/empty", Redundancy::Replicated(3), MB).await.unwrap());

    // While open: readers are told, and a local file is not touched.
    let local = dir.path().join("keep.txt");
    std::fs::write(&local, "hello").unwrap();
    let out = dingo(&CliTarget::of(&c), &["fs", "get", "/lease/partial", local.to_str().unwrap()]);
    assert!(stderr(&out).contains("/lease/partial is open"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&local).unwrap(), "hello");
    let out = dingo(&CliTarget::of(&c), &["fs", "recover", "/lease/partial"]);
    assert!(stderr(&out).contains("being written by another client"), "{}", stderr(&out));
    let ls = String::from_utf8(dingo(&CliTarget::of(&c), &["fs", "ls", "/lease/"]).stdout).unwrap();
    assert!(ls.contains("open") && ls.contains("/lease/partial"), "{ls}");

    // The metadata service recovers both once the leases expire (1.5 s;
    // swept every 0.75 s): sealed at the acknowledged length, or removed.
    let start = Instant::now();
    while !client.stat("/lease/partial").await.unwrap().sealed || !gone(&client, "/lease/empty").await {
        assert!(start.elapsed() < Duration::from_secs(10), "leases not recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.read_all("/lease/partial", IoTag::Foreground).await.unwrap(), d);
    let out = dingo(&CliTarget::of(&c), &["fs", "get", "/lease/partial", local.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&local).unwrap(), d);

    // An operator may close a live lease by force.
    let mut w = client.create("/lease/forced", Redundancy::Replicated(3), MB).await.unwrap();
    w.append(&d).await.unwrap();
    w.flush().await.unwrap();
    let out = dingo(&CliTarget::of(&c), &["fs", "recover", "/lease/forced", "--force"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("sealed at 2.50 MB"), "{}", stderr(&out));
    let e = w.seal().await.unwrap_err();
    assert!(e.to_string().contains("sealed"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_get_leaves_the_local_file_intact() {
    let (c, dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();
    client.put("/g/f", Redundancy::Replicated(3), MB, data(2 * MB, 5)).await.unwrap();
    let local = dir.path().join("keep.txt");
    std::fs::write(&local, "hello\n").unwrap();
    let l = local.to_str().unwrap();
    for args in [
        vec!["fs", "get", "/g/f", l, "--offset", "99999999"],
        vec!["fs", "get", "/g/missing", l],
        vec!["fs", "get", "/g/f", l, "--meta", "127.0.0.1:1"],
    ] {
        let out = dingo(&CliTarget::of(&c), &args);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(std::fs::read_to_string(&local).unwrap(), "hello\n", "{args:?}");
    }
    // Every node down: the read fails midway, the file stays.
    let status = client.cluster_status().await.unwrap();
    let out = dingo(&CliTarget::of(&c), &["fs", "get", "/g/f", l]);
    assert!(out.status.success());
    std::fs::write(&local, "hello\n").unwrap();
    drop(status);
    let mut c = c;
    for i in 0..3 {
        c.kill_node(i);
    }
    let out = dingo(&CliTarget::of(&c), &["fs", "get", "/g/f", l]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no readable copy"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&local).unwrap(), "hello\n");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".dingo-part"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_metadata_service_gives_errors_within_the_deadline() {
    let (c, _dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();
    client.put("/p/f", Redundancy::Replicated(3), MB, data(MB, 6)).await.unwrap();
    let pid = c.meta_pid().unwrap() as i32;
    // SAFETY: kill(2) on a pid this test started; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let checks = [(vec!["fs", "ls", "/p/"], "list"), (vec!["fs", "get", "/p/f", "-"], "stat")];
    let mut results = Vec::new();
    for (args, op) in checks {
        let start = Instant::now();
        let out = dingo(&CliTarget::of(&c), &args);
        results.push((args, op, start.elapsed(), out));
    }
    // The library: the same, as a typed error.
    let start = Instant::now();
    let e = client.clone().with_deadline(Duration::from_secs(1)).stat("/p/f").await.unwrap_err();
    let lib_elapsed = start.elapsed();
    // SAFETY: kill(2) on a pid this test started; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    for (args, op, elapsed, out) in results {
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(elapsed < Duration::from_secs(6), "{args:?} took {elapsed:?} with a 3 s deadline");
        let expected = format!("{op} on the metadata service at {} failed", c.meta_addr());
        assert!(err.contains(&expected), "{args:?}: {err}");
        assert_eq!(err.matches(c.meta_addr()).count(), 1, "the address is named once: {err}");
    }
    assert!(matches!(e, ClientError::Service { code: tonic::Code::DeadlineExceeded, .. }), "{e}");
    assert!(lib_elapsed < Duration::from_secs(3), "{lib_elapsed:?}");
    // Resumed, the service answers again.
    assert_eq!(client.read_all("/p/f", IoTag::Foreground).await.unwrap(), data(MB, 6));
    // Nothing listening: named too.
    let out = dingo(&CliTarget { meta: "127.0.0.1:1".into(), ..CliTarget::of(&c) }, &["fs", "ls"]);
    let err = stderr(&out);
    assert!(
        err.contains("list on the metadata service at 127.0.0.1:1 failed") && err.contains("onnection refused"),
        "{err}"
    );
}

/// A node is killed under `dingo maintain`: the metadata service marks it
/// dead after its heartbeats stop, the supervisor rebuilds what it held,
/// and `cluster health` shows each step; no command is typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_is_repaired_without_a_command() {
    let (mut c, _dir) = start_cluster(4, 1, SELF_REPAIRING, &[]).await;
    c.start_maintainer(&["--interval".into(), "1s".into()]).unwrap();
    let client = c.client().unwrap();
    let rep = data(6 * MB, 7);
    let ec = data(5 * MB, 8);
    client.put("/k/rep", Redundancy::Replicated(3), MB, rep.clone()).await.unwrap();
    client.put("/k/ec", Redundancy::Ec { data: 2, parity: 1 }, MB, ec.clone()).await.unwrap();
    let health = |c: &dingo_cluster::LocalCluster| {
        let out = dingo(&CliTarget::of(c), &["cluster", "health", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(health(&c)["status"], "HEALTH_OK");

    let victim = c.node_id(0).await.unwrap();
    c.kill_node(0);
    let start = Instant::now();
    let mut seen = Vec::new();
    let repaired = loop {
        let h = health(&c);
        let phase = if h["nodes_silent"].as_array().unwrap().contains(&victim.into()) {
            "silent"
        } else if h["nodes_dead"].as_array().unwrap().contains(&victim.into()) {
            if h["repair_outstanding"].as_u64().unwrap() > 0 { "dead, repairing" } else { "dead, repaired" }
        } else {
            "live"
        };
        if seen.last() != Some(&phase) {
            seen.push(phase);
        }
        if phase == "dead, repaired" {
            break h;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "not repaired in 2 minutes: {seen:?} {h}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let took = start.elapsed();
    eprintln!("node killed -> full redundancy in {took:?}; health went {seen:?}");
    assert!(seen.contains(&"dead, repairing") || seen.contains(&"silent"), "{seen:?}");
    assert_eq!((repaired["under_replicated"].as_u64(), repaired["lost_blocks"].as_u64()), (Some(0), Some(0)));
    assert_eq!(repaired["status"], "HEALTH_WARN", "a dead node stays a warning until an operator acts");
    // Every block has its full redundancy on live nodes, and reads back.
    for path in ["/k/rep", "/k/ec"] {
        let f = client.stat(path).await.unwrap();
        for b in &f.blocks {
            assert!(b.chunks.iter().all(|ch| !ch.lost && ch.node != victim), "{path} block {}: {:?}", b.id, b.chunks);
        }
    }
    assert_eq!(client.read_all("/k/rep", IoTag::Foreground).await.unwrap(), rep);
    assert_eq!(client.read_all("/k/ec", IoTag::Foreground).await.unwrap(), ec);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.data_dir().join("maintain.json")).unwrap()).unwrap();
    assert!(state["jobs"]["reconstruction"].as_u64().unwrap() >= 1, "{state}");
}

/// A 4-node cluster of two disks each that marks silent devices DEAD
/// within seconds, with `dingo maintain` running, holding `{dir}/rep`
/// (replicated) and `{dir}/ec` (erasure-coded); with their bytes.
async fn repairing_cluster_with_two_files(
    dir: &str,
    seed: u64,
) -> (dingo_cluster::LocalCluster, tempfile::TempDir, Client, bytes::Bytes, bytes::Bytes) {
    let (mut c, tmp) = start_cluster(4, 2, SELF_REPAIRING, &[]).await;
    c.start_maintainer(&["--interval".into(), "1s".into()]).unwrap();
    let client = c.client().unwrap();
    let rep = data(6 * MB, seed);
    let ec = data(5 * MB, seed + 1);
    client.put(&format!("{dir}/rep"), Redundancy::Replicated(3), MB, rep.clone()).await.unwrap();
    client.put(&format!("{dir}/ec"), Redundancy::Ec { data: 2, parity: 1 }, MB, ec.clone()).await.unwrap();
    (c, tmp, client, rep, ec)
}

/// The id and directory of the disk holding the first copy of `path`'s
/// first block.
async fn first_copys_disk(client: &Client, path: &str) -> (u32, std::path::PathBuf) {
    let disk = client.stat(path).await.unwrap().blocks[0].chunks[0].disk;
    let status = client.cluster_status().await.unwrap();
    let dir = &status.nodes.iter().flat_map(|n| &n.disks).find(|d| d.id == disk).unwrap().path;
    (disk, dir.into())
}

/// A disk that fails while its node runs (here: its directory disappears,
/// as when it is unmounted) is left out of the node's heartbeats, marked
/// DEAD by the metadata service, and its chunks are rebuilt elsewhere by
/// `dingo maintain`, with no command typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_disk_is_marked_dead_and_repaired_without_a_command() {
    let (_c, _dir, client, rep, ec) = repairing_cluster_with_two_files("/d", 9).await;
    let (victim, path) = first_copys_disk(&client, "/d/rep").await;
    std::fs::rename(&path, format!("{}.failed", path.display())).unwrap();

    let start = Instant::now();
    let on_victim = |f: &dingo_proto::v1::FileInfo| f.blocks.iter().flat_map(|b| &b.chunks).any(|ch| ch.disk == victim);
    loop {
        let h = client.health().await.unwrap();
        let placed =
            on_victim(&client.stat("/d/rep").await.unwrap()) || on_victim(&client.stat("/d/ec").await.unwrap());
        if h.disks_dead.contains(&dingo_types::DiskId(victim)) && h.repair_outstanding == 0 && !placed {
            assert_eq!((h.under_replicated, h.lost_blocks), (0, 0), "{h:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "disk {victim} not marked dead and repaired in 2 minutes: {h:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("disk failed -> marked dead and repaired in {:?}", start.elapsed());
    assert_eq!(client.read_all("/d/rep", IoTag::Foreground).await.unwrap(), rep);
    assert_eq!(client.read_all("/d/ec", IoTag::Foreground).await.unwrap(), ec);
}

/// A failed disk replaced by a blank one while its node is down (the
/// operator's usual repair): the node starts with the new disk, which
/// registers under a new id and takes new chunks; the old disk, missing
/// from the node, is marked DEAD and its chunks rebuilt, with no command
/// typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_replaced_while_its_node_was_down_joins_blank_and_the_old_one_is_repaired() {
    let (mut c, _dir, client, rep, ec) = repairing_cluster_with_two_files("/r", 11).await;
    let (victim, path) = first_copys_disk(&client, "/r/rep").await;
    let (node, _) = (0..c.node_count())
        .flat_map(|i| (0..2).map(move |d| (i, d)))
        .find(|&(i, d)| c.disk_dir(i, d).canonicalize().ok() == path.canonicalize().ok())
        .expect("the victim disk's node");
    c.kill_node(node);
    std::fs::remove_dir_all(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    c.start_node(node).unwrap();

    let start = Instant::now();
    let on_victim = |f: &dingo_proto::v1::FileInfo| f.blocks.iter().flat_map(|b| &b.chunks).any(|ch| ch.disk == victim);
    let mut seen_silent = false;
    let replacement = loop {
        let h = client.health().await.unwrap();
        if h.disks_silent.contains(&dingo_types::DiskId(victim)) {
            seen_silent = true;
            assert_eq!(h.status, "HEALTH_WARN", "{h:?}");
        }
        let placed =
            on_victim(&client.stat("/r/rep").await.unwrap()) || on_victim(&client.stat("/r/ec").await.unwrap());
        let status = client.cluster_status().await.unwrap();
        let new_disk =
            status.nodes.iter().flat_map(|n| &n.disks).find(|d| {
                d.id != victim && std::path::Path::new(&d.path).canonicalize().ok() == path.canonicalize().ok()
            });
        if let Some(new_disk) = new_disk
            && h.disks_dead.contains(&dingo_types::DiskId(victim))
            && h.repair_outstanding == 0
            && !placed
        {
            assert_eq!((h.under_replicated, h.lost_blocks), (0, 0), "{h:?}");
            break new_disk.id;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "disk {victim} not replaced and repaired in 2 minutes: {h:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "disk {victim} replaced by disk {replacement}, repaired in {:?}; seen silent before DEAD: {seen_silent}",
        start.elapsed()
    );
    assert_eq!(client.read_all("/r/rep", IoTag::Foreground).await.unwrap(), rep);
    assert_eq!(client.read_all("/r/ec", IoTag::Foreground).await.unwrap(), ec);
    // The new disk takes writes: enough files that one lands on it.
    let mut landed = false;
    for i in 0..20 {
        let path = format!("/r/new{i}");
        let bytes = data(MB, 100 + i);
        client.put(&path, Redundancy::Replicated(3), MB, bytes.clone()).await.unwrap();
        assert_eq!(client.read_all(&path, IoTag::Foreground).await.unwrap(), bytes);
        let f = client.stat(&path).await.unwrap();
        landed |= f.blocks.iter().flat_map(|b| &b.chunks).any(|ch| ch.disk == replacement);
        if landed {
            break;
        }
    }
    assert!(landed, "no new chunk landed on the replacement disk {replacement}");
}

/// A chunk file lost while its node was down (here: deleted) is reported
/// by the node when it starts again, from the metadata service's list of
/// what it places there, and rebuilt elsewhere at once, not when a scrub
/// next meets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_lost_while_its_node_was_down_is_reported_on_restart_and_rebuilt() {
    let (mut c, _dir) = start_cluster(4, 1, SELF_REPAIRING, &[]).await;
    // Scrubbing only in days: the node's report must be what finds it.
    c.start_maintainer(&["--interval".into(), "1s".into(), "--scrub-every".into(), "7d".into()]).unwrap();
    let client = c.client().unwrap();
    let rep = data(3 * MB, 21);
    client.put("/m/rep", Redundancy::Replicated(3), MB, rep.clone()).await.unwrap();
    let block = client.stat("/m/rep").await.unwrap().blocks[1].clone();
    let lost = block.chunks[0].clone();
    let node = (0..c.node_count())
        .find(|&i| c.disk_dir(i, 0).join("chunks").join(format!("{}.{}", block.id, lost.copy)).exists());
    let node = node.expect("the chunk's node");
    c.kill_node(node);
    std::fs::remove_file(c.disk_dir(node, 0).join("chunks").join(format!("{}.{}", block.id, lost.copy))).unwrap();
    c.start_node(node).unwrap();

    let start = Instant::now();
    loop {
        let now = client.stat("/m/rep").await.unwrap().blocks[1].clone();
        let copy = now.chunks.iter().find(|ch| ch.copy == lost.copy).expect("the copy");
        let h = client.health().await.unwrap();
        if copy.disk != lost.disk && h.repair_outstanding == 0 {
            eprintln!("lost chunk found and rebuilt on disk {} in {:?}", copy.disk, start.elapsed());
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the lost chunk was not rebuilt in a minute: {now:?} {h:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(client.read_all("/m/rep", IoTag::Foreground).await.unwrap(), rep);
}
