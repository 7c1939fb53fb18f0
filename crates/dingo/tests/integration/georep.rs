//! Georeplication to a second local cluster acting as the remote site:
//! byte-identical copies, a job killed midway and restarted copies each
//! file exactly once, an unreachable remote is a clear error that records
//! nothing — imperatively through `dingo task georep`, and declaratively
//! through a `dingo planner` process with `DeclareFiles`.

use bytes::Bytes;
use dingo_auth::AuthSection;
use dingo_client::{Client, IoTag, Redundancy};
use dingo_cluster::LocalCluster;
use dingo_tasks::georep::{CopyLedger, GeorepConfig, RemoteSite};
use dingo_tasks::plan::FilePick;
use dingo_tasks::work::{ScheduledCopies, execute};
use dingo_tasks::{Action, on_demand};
use dingo_types::{DeclarationId, TaskKind};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{EXE, data, start_cluster, start_planner};

const BLOCK: u64 = 256 * 1024;
const CONFIG: &str = "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\ndisk_capacity = \"24MB\"\n";
const FILES: u64 = 6;

struct Site {
    c: LocalCluster,
    client: Client,
    _dir: tempfile::TempDir,
}

async fn site() -> Site {
    let (c, dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();
    Site { c, client, _dir: dir }
}

/// Block ids the site's metadata service has handed out so far: every
/// write of a file takes new ones, so this counts writes.
async fn blocks_allocated(client: &Client) -> u64 {
    client.block_table(dingo_types::BlockId(0), 1).await.unwrap().end
}

/// Writes the files to replicate, replicated and erasure-coded, of a few
/// blocks each (the last partial).
async fn write_files(client: &Client) -> Vec<(String, Bytes)> {
    let mut files = Vec::new();
    for i in 0..FILES {
        let path = format!("/g/f{i}");
        let content = data(2 * BLOCK + i * 1000 + 1, 40 + i);
        let redundancy = if i % 2 == 0 { Redundancy::Replicated(3) } else { Redundancy::Ec { data: 2, parity: 1 } };
        client.put(&path, redundancy, BLOCK, content.clone()).await.unwrap();
        files.push((path, content));
    }
    files
}

/// `dingo task georep` from `local` to the site at `remote` (`remote_site`'s
/// secret, even where the address is another's).
fn georep_args(local: &Site, remote: &str, remote_site: &Site, state: &Path, deadline: &str) -> Vec<String> {
    let secret = |s: &Site| s.c.credentials().auth.secret_file.clone().expect("a local cluster has a secret");
    ["task", "georep", "--prefix", "/g/", "--remote", remote, "--deadline", deadline, "--meta", local.c.meta_addr()]
        .iter()
        .map(|s| s.to_string())
        .chain(["--state".to_string(), state.display().to_string()])
        .chain(["--secret-file".to_string(), secret(local).display().to_string()])
        .chain(["--remote-secret-file".to_string(), secret(remote_site).display().to_string()])
        .collect()
}

fn remote_auth(site: &Site) -> AuthSection {
    site.c.credentials().auth.clone()
}

fn reports(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(out.stdout.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn progress_lines(state: &Path) -> usize {
    std::fs::read_to_string(state.join("georep-progress.jsonl")).map_or(0, |s| s.lines().count())
}

/// Every file is on the remote site, byte for byte, with its redundancy.
async fn assert_identical(local: &Client, remote: &Client, files: &[(String, Bytes)]) {
    for (path, content) in files {
        assert_eq!(&remote.read_all(path, IoTag::Foreground).await.unwrap(), content, "{path}");
        let (l, r) = (local.stat(path).await.unwrap(), remote.stat(path).await.unwrap());
        assert_eq!((l.redundancy, l.block_size), (r.redundancy, r.block_size), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_job_copies_each_file_exactly_once_and_byte_identical() {
    let local = site().await;
    let remote = site().await;
    let state = tempfile::tempdir().unwrap();
    let (local_before, remote_before) = (blocks_allocated(&local.client).await, blocks_allocated(&remote.client).await);
    let files = write_files(&local.client).await;
    let local_writes = blocks_allocated(&local.client).await - local_before;
    // An earlier attempt wrote the last file to the remote and was killed
    // before recording it: the job must find it there, not write it again.
    let (last, content) = files.last().unwrap();
    let rec = local.client.stat(last).await.unwrap();
    let redundancy = dingo_proto::redundancy(rec.redundancy.as_ref()).unwrap();
    remote.client.put(last, redundancy, BLOCK, content.clone()).await.unwrap();

    // Paced over about 7 s: killed once two files are recorded.
    let args = georep_args(&local, remote.c.meta_addr(), &remote, state.path(), "8s");
    let mut child = Command::new(EXE).args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while progress_lines(state.path()) < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "no progress recorded");
        assert!(child.try_wait().unwrap().is_none(), "the job ended before it was killed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let recorded = progress_lines(state.path());
    assert!((2..FILES as usize).contains(&recorded), "killed midway: {recorded} of {FILES} recorded");

    // Restarted: only what was not recorded is planned and copied.
    let out = Command::new(EXE)
        .args(georep_args(&local, remote.c.meta_addr(), &remote, state.path(), "3s"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = &reports(&out)[0];
    assert_eq!(r["task"], "georeplication");
    assert_eq!(r["items_done"].as_u64(), Some(FILES - recorded as u64), "{r}");
    assert_eq!(r["failed"].as_u64(), Some(0), "{r}");
    assert!(r["label"].as_str().unwrap().contains(&format!("{recorded} of {FILES} files copied before")), "{r}");
    assert!(r["logical_bytes"].as_u64().unwrap() > 0 && r["run_disk_bytes"].is_u64(), "{r}");
    assert_identical(&local.client, &remote.client, &files).await;
    assert_eq!(progress_lines(state.path()), FILES as usize);
    // Each file written to the remote exactly once (the test's own write
    // of the last one included): as many blocks as writing them locally.
    assert_eq!(blocks_allocated(&remote.client).await - remote_before, local_writes);

    // Nothing left: a third run copies nothing.
    let out = Command::new(EXE)
        .args(georep_args(&local, remote.c.meta_addr(), &remote, state.path(), "2s"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(reports(&out)[0]["items_needed"].as_u64(), Some(0));
    assert_eq!(blocks_allocated(&remote.client).await - remote_before, local_writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_is_a_clear_error_and_records_no_progress() {
    let local = site().await;
    let mut remote = site().await;
    let state = tempfile::tempdir().unwrap();
    write_files(&local.client).await;

    // Nothing listens on the remote address: refused before any work.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = Command::new(EXE).args(georep_args(&local, &gone, &remote, state.path(), "2s")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("the remote site at {gone} is unreachable")), "{stderr}");
    assert_eq!(progress_lines(state.path()), 0);

    // The remote goes away after planning: the copy fails naming the
    // file and the site, and nothing is recorded for it.
    let config = GeorepConfig {
        remote_meta: remote.c.meta_addr().to_string(),
        remote_auth: remote_auth(&remote),
        prefix: "/g/".into(),
        state_dir: state.path().to_path_buf(),
        pick: FilePick::ALL,
    };
    let job = on_demand::georeplication(&local.client, &config, dingo_daemon::now_ms() + 60_000).await.unwrap();
    assert_eq!(job.items.len(), FILES as usize);
    remote.c.stop();
    let tag = IoTag::Maintenance { task: TaskKind::Georeplication, declaration: DeclarationId(0) };
    let err = execute(&local.client, &job.items[0].action, &ScheduledCopies::new(), tag).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("georeplicate /g/f0 to {}", remote.c.meta_addr())), "{msg}");
    assert!(CopyLedger::open(state.path(), remote.c.meta_addr()).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_georeplication_goes_through_declare_files() {
    let local = site().await;
    let remote = site().await;
    let dir = tempfile::tempdir().unwrap();
    let mut planner = start_planner(&local.c, dir.path(), "admin-token", &["georep"], 100_000_000);
    let (local_before, remote_before) = (blocks_allocated(&local.client).await, blocks_allocated(&remote.client).await);
    let files = write_files(&local.client).await;
    let local_writes = blocks_allocated(&local.client).await - local_before;
    let state = dir.path().join("georep-state");
    let addr = planner.addr().to_string();
    let mut args = georep_args(&local, remote.c.meta_addr(), &remote, &state, "30s");
    args.extend(["--mode", "declarative", "--planner", &addr, "--token", "georep-token"].map(String::from));
    let out = Command::new(EXE).args(&args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = &reports(&out)[0];
    assert_eq!((r["mode"].as_str(), r["declaration"].is_u64()), (Some("declarative"), true), "{r}");
    assert_eq!((r["items_done"].as_u64(), r["failed"].as_u64()), (Some(FILES), Some(0)), "{r}");
    let logical: u64 = files.iter().map(|(_, c)| c.len() as u64).sum();
    assert_eq!(r["logical_bytes"].as_u64(), Some(logical), "{r}");
    assert!(r["run_disk_bytes"].is_u64(), "{r}");
    assert_identical(&local.client, &remote.client, &files).await;
    assert_eq!(progress_lines(&state), FILES as usize);

    // A redelivered set (after a restart of the task) copies nothing again.
    let config = GeorepConfig {
        remote_meta: remote.c.meta_addr().to_string(),
        remote_auth: remote_auth(&remote),
        prefix: "/g/".into(),
        state_dir: state.clone(),
        pick: FilePick::ALL,
    };
    let site = Arc::new(RemoteSite::connect(&config).await.unwrap());
    let f0 = local.client.stat("/g/f0").await.unwrap();
    let action = Action::Georeplicate { path: f0.path.clone(), file: f0.id, site };
    let tag = IoTag::Maintenance { task: TaskKind::Georeplication, declaration: DeclarationId(0) };
    let again = execute(&local.client, &action, &ScheduledCopies::new(), tag).await.unwrap();
    assert_eq!((again.logical_bytes, again.written_bytes), (0, 0));
    assert_eq!(blocks_allocated(&remote.client).await - remote_before, local_writes, "each file written once");
    planner.check_running().unwrap();
}
