//! The file-level maintenance tasks against a real local cluster: file
//! scrubbing repairs a flipped byte, fsck finds planted inconsistencies,
//! garbage collection keeps every live record and frees the dead — run
//! imperatively through `dingo task`, and declaratively through a `dingo
//! planner` process with `DeclareFiles`, whose snapshot semantics let the
//! task finish when declared files are deleted or replaced meanwhile.

use bytes::Bytes;
use dingo_client::{Client, IoTag, Redundancy, copy_of};
use dingo_cluster::PlannerProcess;
use dingo_planner_client::PlannerClient;
use dingo_proto::v1::FileInfo;
use dingo_tasks::declarative::Agent;
use dingo_tasks::objects::{self, Record};
use dingo_tasks::plan::{self, FilePick};
use dingo_tasks::work::{ScheduledCopies, execute};
use dingo_tasks::{Action, CancelFlag, JobReport};
use dingo_types::{BlockId, ChunkRef, DeclarationId, TaskKind};
use std::collections::BTreeMap;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{CliTarget, TestCluster, chunk_file, data, flip_byte, start_planner, write_chunk_file};

const BLOCK: u64 = 256 * 1024;
const CONFIG: &str = "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\ndisk_capacity = \"24MB\"\n";
const ADMIN: &str = "admin-token";

async fn cluster(nodes: u32) -> TestCluster {
    TestCluster::start(nodes, CONFIG).await
}

fn run_task(t: &TestCluster, args: &[&str]) -> (Output, Vec<serde_json::Value>) {
    let out = CliTarget::of(&t.c).command().args(["task"]).args(args).output().unwrap();
    let reports =
        String::from_utf8(out.stdout.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out, reports)
}

/// Runs `dingo task ARGS`, which must succeed; its one job's report.
fn task(t: &TestCluster, args: &[&str]) -> serde_json::Value {
    let (out, mut reports) = run_task(t, args);
    assert!(out.status.success(), "dingo task {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.pop().unwrap()
}

fn u(v: &serde_json::Value, field: &str) -> u64 {
    v[field].as_u64().unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// Path of the chunk file of copy `copy` of `block` in `file`.
async fn chunk_path(client: &Client, file: &FileInfo, block: usize, copy: u32) -> std::path::PathBuf {
    let b = &file.blocks[block];
    let disk = b.chunks.iter().find(|c| c.copy == copy).unwrap().disk;
    chunk_file(client, disk, ChunkRef { block: BlockId(b.id), copy: copy as u8 }).await
}

/// Every copy of every block of `path` reads back as `content`.
async fn assert_every_copy(client: &Client, path: &str, content: &Bytes) {
    let file = client.stat(path).await.unwrap();
    for d in dingo_client::data_blocks(&file).unwrap() {
        for c in &d.block.chunks {
            let got =
                client.read_copy(copy_of(d.block, c.copy).unwrap(), 0, d.block.size, IoTag::Foreground).await.unwrap();
            let want = content.slice(d.offset as usize..(d.offset + d.block.size) as usize);
            assert!(got == want, "{path} block {} copy {} differs", d.block.id, c.copy);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_scrubbing_repairs_flipped_bytes_and_fsck_reports_planted_inconsistencies() {
    let t = cluster(4).await;
    let rep = data(3 * BLOCK, 1);
    let ec = data(5 * BLOCK / 2, 2);
    t.client.put("/f/rep", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    t.client.put("/f/ec", Redundancy::Ec { data: 2, parity: 1 }, BLOCK, ec.clone()).await.unwrap();
    // The imperative scrub reads copy 0 first; an EC member has no other.
    let rep_file = t.client.stat("/f/rep").await.unwrap();
    let ec_file = t.client.stat("/f/ec").await.unwrap();
    flip_byte(&chunk_path(&t.client, &rep_file, 1, 0).await, 1000);
    flip_byte(&chunk_path(&t.client, &ec_file, 0, 0).await, 77);

    let r = task(&t, &["file-scrub", "--prefix", "/f/", "--deadline", "2s"]);
    assert_eq!(r["task"], "file-scrubbing");
    assert_eq!((u(&r, "items_done"), u(&r, "repaired"), u(&r, "failed")), (2, 2, 0), "{r}");
    assert_eq!(u(&r, "logical_bytes"), rep.len() as u64 + ec.len() as u64, "{r}");
    // Every byte read came off a disk (fresh cluster, nothing cached), so
    // the nodes' count of the task's disk reads covers the logical reads.
    assert!(u(&r, "run_disk_bytes") >= u(&r, "logical_bytes"), "{r}");
    assert_every_copy(&t.client, "/f/rep", &rep).await;
    assert_every_copy(&t.client, "/f/ec", &ec).await;
    // Nothing is left to find.
    let r = task(&t, &["file-scrub", "--prefix", "/f/", "--deadline", "2s"]);
    assert_eq!((u(&r, "items_done"), u(&r, "repaired")), (2, 0), "{r}");

    // Fsck: a clean file, one whose first block holds more on disk (every
    // copy) than the metadata says, one whose first member fails its
    // checksum.
    let good = data(3 * BLOCK, 3);
    let long = data(2 * BLOCK, 4);
    let flip = data(2 * BLOCK, 5);
    t.client.put("/k/good", Redundancy::Replicated(3), BLOCK, good).await.unwrap();
    t.client.put("/k/long", Redundancy::Replicated(3), BLOCK, long.clone()).await.unwrap();
    t.client.put("/k/flip", Redundancy::Ec { data: 2, parity: 1 }, BLOCK, flip).await.unwrap();
    let long_file = t.client.stat("/k/long").await.unwrap();
    let first = &long_file.blocks[0];
    let mut grown = long.slice(..BLOCK as usize).to_vec();
    grown.extend_from_slice(&[7u8; 5000]);
    for c in &first.chunks {
        let chunk = ChunkRef { block: BlockId(first.id), copy: c.copy as u8 };
        write_chunk_file(&chunk_path(&t.client, &long_file, 0, c.copy).await, chunk, &grown);
    }
    let flip_file = t.client.stat("/k/flip").await.unwrap();
    flip_byte(&chunk_path(&t.client, &flip_file, 0, 0).await, 4321);

    let (out, reports) = run_task(&t, &["fsck", "--prefix", "/k/", "--deadline", "2s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "fsck must fail when it finds something");
    assert!(stderr.contains("fsck found 2 inconsistencies"), "{stderr}");
    let r = &reports[0];
    assert_eq!((u(r, "items_done"), u(r, "failed"), u(r, "inconsistencies")), (3, 0, 2), "{r}");
    let findings: Vec<&str> = r["findings"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let long_finding = format!("/k/long: block {} copy 0 holds more than the {BLOCK} bytes its record says", first.id);
    assert!(findings.contains(&long_finding.as_str()), "{findings:?}");
    let flip_finding = format!("/k/flip: block {} copy 0 does not match its checksums", flip_file.blocks[0].id);
    assert!(findings.iter().any(|f| f.starts_with(&flip_finding)), "{findings:?}");
    // Two data blocks of each of three files, read once each.
    assert_eq!(u(r, "logical_bytes"), 6 * BLOCK, "{r}");
    // Fsck reports, it does not repair: the checksum failure is still there.
    assert!(t.client.read_copy(copy_of(&flip_file.blocks[0], 0).unwrap(), 0, BLOCK, IoTag::Foreground).await.is_err());
}

/// A data file of `n` records with keys `<name>-<i>` and values of varied
/// lengths (some spanning blocks).
fn records(name: &str, n: usize, seed: u64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let len = (i as u64 * 7919 + seed * 104_729) % (3 * BLOCK / 4);
            Record { key: Bytes::from(format!("{name}-{i}")), value: data(len, seed * 1000 + i as u64) }
        })
        .collect()
}

/// Data files of an area, path → their records.
async fn area_files(client: &Client, area: &str) -> BTreeMap<String, Vec<Record>> {
    let mut out = BTreeMap::new();
    for f in client.list(&objects::data_prefix(area)).await.unwrap() {
        let bytes = client.read_all(&f.path, IoTag::Foreground).await.unwrap();
        out.insert(f.path.clone(), objects::parse(&bytes).unwrap().into_iter().map(|p| p.record).collect());
    }
    out
}

/// Writes the area of the GC tests: four data files — some dead records,
/// one all dead, one none dead — and a tombstone file. Returns the records
/// expected to survive per original file (none: the file is dropped) and
/// the bytes of dead records.
async fn write_area(client: &Client, area: &str) -> (BTreeMap<String, Vec<Record>>, u64) {
    let files: Vec<(&str, Redundancy, Vec<Record>)> = vec![
        ("seg-1", Redundancy::Replicated(3), records("a", 12, 1)),
        ("seg-2", Redundancy::Ec { data: 2, parity: 1 }, records("b", 10, 2)),
        ("seg-3", Redundancy::Replicated(3), records("c", 4, 3)),
        ("seg-4", Redundancy::Replicated(3), records("d", 5, 4)),
    ];
    let dead = |key: &[u8]| {
        let k = std::str::from_utf8(key).unwrap();
        k.starts_with("c-")
            || (!k.starts_with("d-")
                && k.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().unwrap() % 3 == 1)
    };
    let mut survivors = BTreeMap::new();
    let (mut tombstones, mut dead_bytes) = (Vec::new(), 0);
    for (name, redundancy, rs) in files {
        let path = format!("{}{name}", objects::data_prefix(area));
        client.put(&path, redundancy, BLOCK, objects::encode_all(&rs).unwrap()).await.unwrap();
        let live: Vec<Record> = rs.iter().filter(|r| !dead(&r.key)).cloned().collect();
        for r in rs.iter().filter(|r| dead(&r.key)) {
            dead_bytes += (objects::RECORD_HEADER + r.key.len() + r.value.len()) as u64;
            tombstones.push(Record { key: r.key.clone(), value: Bytes::new() });
        }
        survivors.insert(path, live);
    }
    // A tombstone for an object that lived elsewhere changes nothing here.
    tombstones.push(Record { key: Bytes::from_static(b"elsewhere-1"), value: Bytes::new() });
    let tomb = format!("{}t-1", objects::tombstone_prefix(area));
    client.put(&tomb, Redundancy::Replicated(3), BLOCK, objects::encode_all(&tombstones).unwrap()).await.unwrap();
    (survivors, dead_bytes)
}

/// After a GC of the area written by [`write_area`]: every live record is
/// there byte for byte, under the next generation of its file if that file
/// had dead records, and nothing dead is left.
async fn assert_collected(client: &Client, area: &str, survivors: &BTreeMap<String, Vec<Record>>) {
    let now = area_files(client, area).await;
    let mut expected = BTreeMap::new();
    for (path, live) in survivors {
        if path.ends_with("seg-4") {
            expected.insert(path.clone(), live.clone());
        } else if !live.is_empty() {
            expected.insert(objects::next_generation(path), live.clone());
        }
    }
    assert_eq!(now, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_keeps_every_live_record_and_frees_the_dead() {
    let t = cluster(4).await;
    let (survivors, dead_bytes) = write_area(&t.client, "/obj").await;
    let r = task(&t, &["gc", "--area", "/obj", "--deadline", "2s"]);
    assert_eq!(r["task"], "garbage-collection");
    assert_eq!((u(&r, "items_done"), u(&r, "failed")), (4, 0), "{r}");
    assert_eq!(u(&r, "freed_bytes"), dead_bytes, "{r}");
    assert!(u(&r, "run_disk_bytes") > 0 && u(&r, "logical_bytes") > 0, "{r}");
    assert_collected(&t.client, "/obj", &survivors).await;

    // A data file that does not parse is refused with its name and the
    // offset of the bad record, and kept byte for byte.
    let mut bad = objects::encode_all(&records("e", 3, 5)).unwrap().to_vec();
    let at = bad.len() - 10;
    bad[at] ^= 0xff;
    let bad = Bytes::from(bad);
    t.client.put("/obj/data/seg-5", Redundancy::Replicated(3), BLOCK, bad.clone()).await.unwrap();
    let (out, reports) = run_task(&t, &["gc", "--area", "/obj", "--deadline", "2s"]);
    assert!(!out.status.success());
    let r = &reports[0];
    assert_eq!(u(r, "failed"), 1, "{r}");
    let error = r["errors"][0].as_str().unwrap();
    assert!(error.contains("/obj/data/seg-5 is not a well-formed data file, left as it is"), "{error}");
    assert!(error.contains("checksum mismatch"), "{error}");
    assert_eq!(t.client.read_all("/obj/data/seg-5", IoTag::Foreground).await.unwrap(), bad);
}

/// Declared reads whose scheduled copy became unreachable (its node died
/// after the plan, not yet marked dead) are read from another copy: the
/// file-level tasks never fail work they can do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tasks_read_another_copy_when_the_scheduled_one_is_unreachable() {
    let mut t = cluster(5).await;
    let rep = data(2 * BLOCK, 21);
    let ec = data(2 * BLOCK, 22);
    t.client.put("/u/rep", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    t.client.put("/u/ec", Redundancy::Ec { data: 2, parity: 1 }, BLOCK, ec.clone()).await.unwrap();
    let gc_records = records("g", 4, 23);
    t.client
        .put("/u/obj/data/s", Redundancy::Replicated(3), BLOCK, objects::encode_all(&gc_records).unwrap())
        .await
        .unwrap();
    let rep_file = t.client.stat("/u/rep").await.unwrap();
    let ec_file = t.client.stat("/u/ec").await.unwrap();
    let gc_file = t.client.stat("/u/obj/data/s").await.unwrap();
    // The node of copy 0 of the replicated file's first block dies.
    let victim = rep_file.blocks[0].chunks.iter().find(|c| c.copy == 0).unwrap().addr.clone();
    let index = (0..5).find(|&i| t.c.node_addr(i) == victim).unwrap();
    t.c.kill_node(index);
    // Scheduled: copy 0 of everything (the EC member on the dead node, if
    // any, has only that copy: it is read degraded).
    let copy0 = |f: &FileInfo| -> ScheduledCopies { f.blocks.iter().map(|b| (BlockId(b.id), 0)).collect() };
    let tag = |task| IoTag::Maintenance { task, declaration: DeclarationId(1) };
    for file in [&rep_file, &ec_file] {
        let blocks: Vec<u64> = dingo_client::data_blocks(file).unwrap().iter().map(|d| d.block.id).collect();
        let action = Action::FileScrub { path: file.path.clone(), file: file.id, blocks };
        let out = execute(&t.client, &action, &copy0(file), tag(TaskKind::FileScrubbing)).await.unwrap();
        assert_eq!((out.skipped, out.repaired, out.logical_bytes), (false, 0, file.size), "{}", file.path);
        let action = Action::Fsck { path: file.path.clone(), file: file.id, first_bytes: file.size };
        let out = execute(&t.client, &action, &copy0(file), tag(TaskKind::Fsck)).await.unwrap();
        assert!(out.findings.is_empty(), "{}: {:?}", file.path, out.findings);
    }
    let mut dead = objects::Tombstones::default();
    dead.insert(gc_records[1].key.clone());
    let action = Action::Collect {
        path: gc_file.path.clone(),
        file: gc_file.id,
        to: objects::next_generation(&gc_file.path),
        dead: Arc::new(dead),
    };
    let out = execute(&t.client, &action, &copy0(&gc_file), tag(TaskKind::GarbageCollection)).await.unwrap();
    assert_eq!(out.logical_bytes, gc_file.size);
    let left = t.client.read_all("/u/obj/data/s@1", IoTag::Foreground).await.unwrap();
    let want: Vec<Record> = gc_records.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, r)| r.clone()).collect();
    assert_eq!(left, objects::encode_all(&want).unwrap());
}

/// A planner whose budget starts at one byte per quantum (nothing gets
/// scheduled until the test raises it), with one task client per task.
fn planner(t: &TestCluster, dir: &std::path::Path, clients: &[&str]) -> PlannerProcess {
    start_planner(&t.c, dir, ADMIN, clients, 1)
}

/// Waits until the task client `token` has `n` live declarations.
async fn wait_declared(planner: &PlannerClient, n: usize) {
    for _ in 0..200 {
        if planner.status(&[]).await.unwrap().declarations.len() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never declared");
}

async fn report(handle: dingo_tasks::declarative::JobHandle) -> JobReport {
    tokio::time::timeout(Duration::from_secs(60), handle).await.expect("job finished in time").unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_file_tasks_go_through_declare_files_and_survive_files_changing_after_declaring() {
    let t = cluster(4).await;
    let dir = tempfile::tempdir().unwrap();
    let mut planner_process = planner(&t, dir.path(), &["file-scrubber", "fsck", "gc"]);
    let admin = PlannerClient::connect(planner_process.addr(), ADMIN).unwrap();
    let agent = |name: &str| {
        let p = PlannerClient::connect(planner_process.addr(), &format!("{name}-token")).unwrap();
        (Agent::spawn(t.client.clone(), p.clone(), 0), p)
    };
    let deadline = || dingo_daemon::now_ms() + 60_000;

    let (a, b, c) = (data(3 * BLOCK, 31), data(2 * BLOCK, 32), data(5 * BLOCK / 2, 33));
    t.client.put("/d/a", Redundancy::Replicated(3), BLOCK, a).await.unwrap();
    t.client.put("/d/b", Redundancy::Replicated(3), BLOCK, b).await.unwrap();
    t.client.put("/d/c", Redundancy::Ec { data: 2, parity: 1 }, BLOCK, c.clone()).await.unwrap();
    // Any copy of an EC member is its only copy: the planner must schedule
    // the flipped one.
    let c_file = t.client.stat("/d/c").await.unwrap();
    flip_byte(&chunk_path(&t.client, &c_file, 0, 0).await, 99);

    // Declared, then /d/a deleted and /d/b replaced before anything is
    // scheduled: the declaration is a snapshot of the old blocks, which the
    // planner elides; the task finishes without failing.
    let (scrubber, scrub_planner) = agent("file-scrubber");
    let job = plan::file_scrubbing(&t.client, "/d/", FilePick::ALL, deadline()).await.unwrap();
    assert_eq!(job.items.len(), 3);
    let scrub = scrubber.submit(job, CancelFlag::default()).await;
    wait_declared(&scrub_planner, 1).await;
    t.client.delete("/d/a").await.unwrap();
    t.client.delete("/d/b").await.unwrap();
    let b2 = data(BLOCK, 34);
    t.client.put("/d/b", Redundancy::Replicated(3), BLOCK, b2.clone()).await.unwrap();
    admin.set_budget(Some(0), None).await.unwrap();
    let r = report(scrub).await;
    assert!(r.complete(), "{r:?}");
    assert_eq!((r.items_done, r.items_skipped, r.failed, r.repaired), (1, 0, 0, 1), "{r:?}");
    // The two changed files' sets were elided, never delivered.
    let id = dingo_types::DeclarationId(r.declaration.expect("declared"));
    let status = scrub_planner.status(&[id]).await.unwrap().declarations.pop().unwrap();
    assert_eq!((status.total_sets, status.delivered_sets, status.elided_sets), (3, 1, 2), "{status:?}");
    assert_eq!(r.logical_bytes, c.len() as u64);
    assert_every_copy(&t.client, "/d/c", &c).await;
    assert_eq!(t.client.read_all("/d/b", IoTag::Foreground).await.unwrap(), b2);

    // Fsck through the command, and GC, declared by file as well.
    let addr = planner_process.addr().to_string();
    let args = ["fsck", "--prefix", "/d/", "--mode", "declarative", "--planner", &addr, "--token", "fsck-token"];
    let r = task(&t, &args);
    assert_eq!((r["mode"].as_str(), r["declaration"].is_u64()), (Some("declarative"), true), "{r}");
    assert_eq!((u(&r, "items_done"), u(&r, "inconsistencies"), u(&r, "failed")), (2, 0, 0), "{r}");
    // Two blocks of /d/c (its data members 0 and 1) and the one of /d/b.
    assert_eq!(u(&r, "logical_bytes"), 3 * BLOCK, "{r}");
    assert!(r["run_disk_bytes"].is_u64(), "{r}");

    let (survivors, dead_bytes) = write_area(&t.client, "/obj").await;
    let (gc, _) = agent("gc");
    let job = plan::garbage_collection(&t.client, "/obj", FilePick::ALL, deadline()).await.unwrap();
    let r = report(gc.submit(job, CancelFlag::default()).await).await;
    assert!(r.complete(), "{r:?}");
    assert_eq!((r.items_done, r.freed_bytes), (4, dead_bytes), "{r:?}");
    assert_collected(&t.client, "/obj", &survivors).await;
    planner_process.check_running().unwrap();
}

/// Rebalancing declared with byte-denominated flexibility moves what its
/// bytes need and no more, and announces each copy it moved: a waiting
/// scrub of the old disk then skips those copies (anticipatory elision:
/// the copies still exist, on other disks, so only the announcement can
/// tell the planner a scrub of that disk need not read them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_rebalancing_moves_its_bytes_and_a_waiting_scrub_skips_the_moved_copies() {
    use dingo_tasks::work::{Declared, Job, WorkItem, set_of};
    let t = cluster(4).await;
    let dir = tempfile::tempdir().unwrap();
    let planner_process = planner(&t, dir.path(), &["scrubber", "balancer"]);
    let admin = PlannerClient::connect(planner_process.addr(), ADMIN).unwrap();
    t.client.put("/r/f", Redundancy::Replicated(3), BLOCK, data(6 * BLOCK, 41)).await.unwrap();
    let file = t.client.stat("/r/f").await.unwrap();
    // The disk holding most of the file's 18 chunks (at least 5 of them on
    // 4 nodes): the first block's first copy's disk held only 2 in one run,
    // as placement is random.
    let mut per_disk = std::collections::BTreeMap::<u32, usize>::new();
    for c in file.blocks.iter().flat_map(|b| &b.chunks) {
        *per_disk.entry(c.disk).or_default() += 1;
    }
    let disk = per_disk.iter().max_by_key(|(d, n)| (**n, std::cmp::Reverse(**d))).map(|(d, _)| *d).unwrap();
    let on_disk = t.client.chunks_on_disk(dingo_types::DiskId(disk)).await.unwrap();
    assert!(on_disk.len() >= 3, "{on_disk:?}");

    // A scrub of that disk, by a client with no callback stream: the
    // planner schedules nothing for it, so only elision can touch it.
    let scrubber = PlannerClient::connect(planner_process.addr(), "scrubber-token").unwrap();
    let deadline = dingo_types::Timestamp(dingo_daemon::now_ms() + 120_000);
    let scrub = dingo_types::Declaration {
        task: TaskKind::Scrubbing,
        read_sets: dingo_types::ReadSets::ChunksOnDisk(dingo_types::DiskId(disk)),
        sets_needed: None,
        bytes_needed: None,
        deadline,
    };
    let scrub = scrubber.declare(&scrub).await.unwrap();

    // Move at least 1.5 blocks' worth off the disk, any of its chunks.
    let items: Vec<WorkItem> = on_disk
        .iter()
        .map(|&c| {
            let action = Action::Move(c);
            WorkItem { set: set_of(&action, &[]), action, bytes: BLOCK }
        })
        .collect();
    let label = format!("1.5 blocks off disk {disk}");
    let job = Job::new(TaskKind::Rebalancing, label, items, Declared::Items, dingo_daemon::now_ms() + 60_000);
    let job = Job { bytes_needed: Some(3 * BLOCK / 2), ..job };
    let balancer = PlannerClient::connect(planner_process.addr(), "balancer-token").unwrap();
    let agent = Agent::spawn(t.client.clone(), balancer, 0);
    let handle = agent.submit(job, CancelFlag::default()).await;
    admin.set_budget(Some(0), None).await.unwrap();
    let r = report(handle).await;
    assert!(r.complete(), "{r:?}");
    assert_eq!((r.items_done, r.failed), (2, 0), "two blocks reach 1.5 blocks' bytes, a third is not moved: {r:?}");
    let left = t.client.chunks_on_disk(dingo_types::DiskId(disk)).await.unwrap();
    assert_eq!(left.len(), on_disk.len() - 2);

    // The announcements are sent without waiting: allow them to land.
    let mut status = None;
    for _ in 0..100 {
        let s = scrubber.status(&[scrub.id]).await.unwrap().declarations.pop().unwrap();
        if s.elided_sets == 2 {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = status.expect("the two moved copies were elided from the waiting scrub");
    assert_eq!((status.delivered_sets, status.total_sets), (0, on_disk.len() as u64), "{status:?}");
}
