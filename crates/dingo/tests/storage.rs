//! Storage tests with real processes on loopback: every daemon is a `dingo`
//! child process; faults are real SIGKILLs and real bytes flipped on disk.

use bytes::Bytes;
use dingo_client::{Client, ClientError, IoTag, Redundancy};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_types::{BlockId, ChunkRef, DeclarationId, TaskKind};
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MB: u64 = 1_000_000;
const EXE: &str = env!("CARGO_BIN_EXE_dingo");
const R3: Redundancy = Redundancy::Replicated(3);
const EC: Redundancy = Redundancy::Ec { data: 6, parity: 3 };
const READY: Duration = Duration::from_secs(30);

/// A cluster in its own temporary directory. Field order matters: the
/// cluster stops before its directory is removed.
struct TestCluster {
    c: LocalCluster,
    dir: tempfile::TempDir,
}

/// Fast heartbeats so that dead nodes are noticed within a second.
const CONFIG: &str = "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";

async fn cluster(nodes: u32, node_args: &[&str]) -> TestCluster {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("dingo.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut c = LocalCluster::start(ClusterSpec {
        exe: EXE.into(),
        data: dir.path().join("data"),
        nodes,
        disks_per_node: 2,
        base_port: 0,
        config: Some(config),
        node_args: node_args.iter().map(|s| s.to_string()).collect(),
    })
    .unwrap();
    c.wait_ready(READY).await.unwrap();
    TestCluster { c, dir }
}

fn data(len: u64, seed: u64) -> Bytes {
    (0..len).map(|i| ((i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect::<Vec<u8>>().into()
}

async fn read_all(client: &Client, path: &str) -> Bytes {
    client.read_all(path, IoTag::Foreground).await.unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_for_both_redundancy_kinds() {
    let t = cluster(4, &[]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    for (i, len) in [0, 1, MB - 1, 3 * MB + 12_345].into_iter().enumerate() {
        for (kind, r) in [("rep", R3), ("ec", EC)] {
            let path = format!("/t/{kind}{i}");
            let d = data(len, i as u64);
            assert_eq!(client.put(&path, r, MB, d.clone()).await.unwrap(), len);
            assert_eq!(read_all(&client, &path).await, d, "{path}");
            if len > 10 {
                let got = client.read(&path, len / 3, len / 2, IoTag::Foreground).await.unwrap();
                assert_eq!(got, d.slice((len / 3) as usize..(len / 3 + len / 2) as usize), "{path} ranged");
            }
        }
    }
    // Append to an unsealed file in several calls, then seal.
    let mut w = client.create("/t/appended", EC, MB).await.unwrap();
    let d = data(7 * MB + 3, 99);
    for piece in d.chunks(700_001) {
        w.append(piece).await.unwrap();
    }
    w.flush().await.unwrap();
    assert_eq!(w.size(), d.len() as u64);
    drop(w);
    // The lease is still held, so another writer must wait.
    let e = client.open_append("/t/appended").await.err().unwrap();
    assert!(e.to_string().contains("being written by another client"), "{e}");
    assert_eq!(read_all(&client, "/t/appended").await, d);
    let stat = client.stat("/t/rep3").await.unwrap();
    assert_eq!(stat.blocks.len(), 4);
    assert!(stat.blocks.iter().all(|b| b.chunks.len() == 3));
    let stat = client.stat("/t/ec3").await.unwrap();
    assert_eq!(stat.blocks.len(), 9);
    assert!(stat.blocks.iter().all(|b| b.group == stat.blocks[0].group));
    // Deleting frees the chunks on the nodes.
    let mut files = Vec::new();
    for b in &stat.blocks {
        for c in &b.chunks {
            files.push(chunk_file(&client, c.disk, ChunkRef { block: BlockId(b.id), copy: c.copy as u8 }).await);
        }
    }
    let stat = client.stat("/t/rep3").await.unwrap();
    for b in &stat.blocks {
        for c in &b.chunks {
            files.push(chunk_file(&client, c.disk, ChunkRef { block: BlockId(b.id), copy: c.copy as u8 }).await);
        }
    }
    assert!(files.iter().all(|f| f.exists()));
    client.delete("/t/rep3").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while files[9..].iter().any(|f| f.exists()) {
        assert!(Instant::now() < deadline, "chunks of the deleted file were not removed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(files[..9].iter().all(|f| f.exists()), "other files' chunks stay");
    let e = client.read_all("/t/rep3", IoTag::Foreground).await.unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::NotFound), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_nodes_lose_no_acknowledged_byte() {
    let mut t = cluster(4, &[]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    let rep = data(5 * MB + 17, 1);
    let ec = data(13 * MB + 5, 2);
    client.put("/k/rep", R3, MB, rep.clone()).await.unwrap();
    client.put("/k/ec", EC, MB, ec.clone()).await.unwrap();

    // Kill a node in the middle of a long write of each kind. Every unit the
    // writer saw acknowledged must be readable afterwards.
    for (i, (path, r)) in [("/k/during-rep", R3), ("/k/during-ec", EC)].into_iter().enumerate() {
        let victim = i + 2;
        let mut w = client.create(path, r, MB).await.unwrap();
        let d = data(24 * MB, 10 + i as u64);
        let mut killed_at = None;
        for (n, piece) in d.chunks(MB as usize / 2).enumerate() {
            w.append(piece).await.unwrap();
            if n == 12 {
                t.c.kill_node(victim);
                killed_at = Some(w.size());
            }
        }
        let size = w.seal().await.unwrap();
        assert_eq!(size, d.len() as u64);
        assert!(killed_at.unwrap() < size, "the kill happened during the write");
        assert_eq!(read_all(&client, path).await, d, "{path}");
        let f = client.stat(path).await.unwrap();
        let victim_addr = t.c.node_addr(victim).to_string();
        let last_blocks = &f.blocks[f.blocks.len() - r.width()..];
        assert!(
            last_blocks.iter().flat_map(|b| &b.chunks).all(|c| c.addr != victim_addr),
            "blocks written after the kill avoid the dead node"
        );
        t.c.start_node(victim).unwrap();
        t.c.wait_alive(4, READY).await.unwrap();
    }

    // Kill a node after the writes: replicated reads fall back, EC reads rebuild.
    t.c.kill_node(0);
    assert_eq!(read_all(&client, "/k/rep").await, rep);
    assert_eq!(read_all(&client, "/k/ec").await, ec);
    let got = client.read("/k/ec", 2 * MB + 7, 5 * MB, IoTag::Foreground).await.unwrap();
    assert_eq!(got, ec.slice((2 * MB + 7) as usize..(7 * MB + 7) as usize));
    // Two of four nodes down: one replica of each block is left.
    t.c.kill_node(1);
    assert_eq!(read_all(&client, "/k/rep").await, rep);
}

/// Path of the chunk file of `chunk` stored on disk `disk`.
async fn chunk_file(client: &Client, disk: u32, chunk: ChunkRef) -> PathBuf {
    let status = client.cluster_status().await.unwrap();
    let d = status.nodes.iter().flat_map(|n| &n.disks).find(|d| d.id == disk).unwrap();
    PathBuf::from(&d.path).join("chunks").join(format!("{}.{}", chunk.block.0, chunk.copy))
}

/// Flips one data byte of a chunk file (data starts at 8192 for chunks of
/// at most 64 MiB).
fn flip_byte(path: &PathBuf, at: u64) {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(8192 + at)).unwrap();
    let mut b = [0u8];
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(8192 + at)).unwrap();
    f.write_all(&[b[0] ^ 0x5a]).unwrap();
    f.sync_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bytes_are_detected_and_repaired_from_redundancy() {
    let t = cluster(4, &[]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    let rep = data(3 * MB, 3);
    let ec = data(6 * MB, 4);
    client.put("/c/rep", R3, MB, rep.clone()).await.unwrap();
    client.put("/c/ec", EC, MB, ec.clone()).await.unwrap();
    // Damage two of the three copies of every replicated block, and data
    // member 0 of the EC stripe.
    for b in client.stat("/c/rep").await.unwrap().blocks {
        for c in &b.chunks[..2] {
            let chunk = ChunkRef { block: BlockId(b.id), copy: c.copy as u8 };
            flip_byte(&chunk_file(&client, c.disk, chunk).await, 500_000);
        }
    }
    let ec_blocks = client.stat("/c/ec").await.unwrap().blocks;
    let m0 = &ec_blocks[0];
    flip_byte(&chunk_file(&client, m0.chunks[0].disk, ChunkRef { block: BlockId(m0.id), copy: 0 }).await, 10);

    assert_eq!(read_all(&client, "/c/rep").await, rep);
    assert_eq!(read_all(&client, "/c/ec").await, ec);
    // An exact-copy read of a damaged chunk reports the corruption.
    let addr = &m0.chunks[0].addr;
    let e = client
        .read_chunk(addr, ChunkRef { block: BlockId(m0.id), copy: 0 }, 0, 100, IoTag::Foreground)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::DataLoss), "{e}");
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    let mut errors = 0;
    for i in 0..4 {
        errors +=
            client.node_stats(t.c.node_addr(i)).await.unwrap().disks.iter().map(|d| d.checksum_errors).sum::<u64>();
    }
    assert!(errors >= 2, "nodes counted {errors} checksum errors");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_survives_a_metadata_service_crash() {
    let mut t = cluster(3, &[]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    let a = data(2 * MB + 1, 5);
    client.put("/m/a", R3, MB, a.clone()).await.unwrap();
    // An unsealed file: its acknowledged (committed) block must survive too.
    let mut w = client.create("/m/open", R3, MB).await.unwrap();
    let b = data(MB, 6);
    w.append(&b).await.unwrap();
    w.flush().await.unwrap();
    assert_eq!(w.size(), MB);
    drop(w);
    t.c.kill_meta();
    t.c.start_meta().unwrap();
    t.c.wait_alive(3, READY).await.unwrap();
    let files: Vec<String> = client.list("/m/").await.unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(files, ["/m/a", "/m/open"]);
    assert_eq!(read_all(&client, "/m/a").await, a);
    assert_eq!(read_all(&client, "/m/open").await, b);
    // New writes work after the restart and get fresh block ids.
    client.put("/m/c", EC, MB, data(MB, 7)).await.unwrap();
    let ids: Vec<u64> = client.stat("/m/c").await.unwrap().blocks.iter().map(|b| b.id).collect();
    let table = client.block_table(0, 1000).await.unwrap();
    assert_eq!(table.end, ids.last().unwrap() + 1);
    assert_eq!(table.rows.len() as u64, table.end, "block ids are dense");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_damages_nothing() {
    // Each disk holds at most 4 MB.
    let t = cluster(3, &["--capacity", "4MB"]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    let keep = data(MB, 8);
    client.put("/b/keep", R3, MB, keep.clone()).await.unwrap();

    let e = client.read_all("/b/missing", IoTag::Foreground).await.unwrap_err();
    assert!(e.to_string().contains("no such file: /b/missing"), "{e}");
    let e = client.read("/b/keep", MB - 10, 11, IoTag::Foreground).await.unwrap_err();
    assert!(matches!(e, ClientError::PastEnd { .. }) && e.to_string().contains("past the end"), "{e}");
    let e = client.open_append("/b/keep").await.err().unwrap();
    assert!(e.to_string().contains("sealed"), "{e}");
    let e = client.create("/b/keep", R3, MB).await.err().unwrap();
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = client.create("relative/path", R3, MB).await.err().unwrap();
    assert!(e.to_string().contains("must be absolute"), "{e}");
    // More than the cluster can hold: 3 copies of 30 MB on 6 disks of 4 MB.
    let e = client.put("/b/huge", R3, MB, data(30 * MB, 9)).await.unwrap_err();
    assert!(e.to_string().contains("room") || e.to_string().contains("full"), "{e}");
    assert_eq!(read_all(&client, "/b/keep").await, keep);

    // Daemons refuse bad setups with a clear message and a failure status.
    let bad_config = t.dir.path().join("bad.toml");
    std::fs::write(&bad_config, "[node]\ncache = 12\n").unwrap();
    let not_a_dir = t.dir.path().join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let runs: [(&[&str], &str); 4] = [
        (&["meta", "--data", "/tmp", "--config", bad_config.to_str().unwrap()], "malformed config"),
        (&["node", "--disk", not_a_dir.to_str().unwrap(), "--listen", "127.0.0.1:0"], "file"),
        (&["meta", "--data", not_a_dir.to_str().unwrap(), "--listen", "127.0.0.1:0"], "metadata directory"),
        (&["fs", "put", "/nonexistent/x", "/y", "--meta", t.c.meta_addr()], "cannot read /nonexistent/x"),
    ];
    for (args, expect) in runs {
        let out = Command::new(EXE).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expect), "{args:?}: {stderr}");
    }
    assert_eq!(read_all(&client, "/b/keep").await, keep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_chunks_are_served_from_cache_and_counted() {
    let t = cluster(3, &[]).await;
    let client = Client::new(t.c.meta_addr()).unwrap();
    client.put("/p/a", R3, MB, data(MB, 11)).await.unwrap();
    let b = &client.stat("/p/a").await.unwrap().blocks[0];
    let c = &b.chunks[0];
    let chunk = ChunkRef { block: BlockId(b.id), copy: c.copy as u8 };
    let scrub = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(77) };
    let until = dingo_proto::now_ms() + 60_000;
    client.cache_directive(&c.addr, vec![(chunk, until)], vec![]).await.unwrap();
    let disk_reads = |s: &dingo_proto::v1::NodeStatsReply| s.disks.iter().map(|d| d.bytes_read).sum::<u64>();
    let s0 = client.node_stats(&c.addr).await.unwrap();
    let first = client.read_chunk(&c.addr, chunk, 0, MB, scrub).await.unwrap();
    let s1 = client.node_stats(&c.addr).await.unwrap();
    let second = client.read_chunk(&c.addr, chunk, 0, MB, scrub).await.unwrap();
    let s2 = client.node_stats(&c.addr).await.unwrap();
    assert_eq!(first, second);
    assert!(disk_reads(&s1) - disk_reads(&s0) >= MB, "first read from disk");
    assert_eq!(disk_reads(&s2), disk_reads(&s1), "second read from the pinned region");
    assert!(s2.cache.unwrap().pinned_hits > 0);
    let class =
        s2.disks.iter().flat_map(|d| &d.classes).filter(|c| c.class == "scrubbing").map(|c| c.bytes).sum::<u64>();
    assert!(class >= MB, "scrubbing bytes counted: {class}");
    assert!(s2.declarations.iter().any(|d| d.declaration_id == 77 && d.bytes == 2 * MB));
    // Unpinned, the next maintenance read goes to disk again.
    client.cache_directive(&c.addr, vec![], vec![chunk]).await.unwrap();
    client.read_chunk(&c.addr, chunk, 0, MB, scrub).await.unwrap();
    let s3 = client.node_stats(&c.addr).await.unwrap();
    assert!(disk_reads(&s3) > disk_reads(&s2));
    // The node exposes the counters on /metrics.
    let node_index = (0..3).find(|&i| t.c.node_addr(i) == c.addr).unwrap();
    let page = http_get(t.c.metrics_addr(Some(node_index)));
    assert!(page.contains("dingo_cache_pinned_hits_total") && page.contains("class=\"scrubbing\""), "{page}");
    assert!(http_get(t.c.metrics_addr(None)).contains("dingo_meta_nodes{state=\"alive\"} 3"));
}

fn http_get(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// `dingo cluster up` and the `fs` and `status` commands, as a user runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_cluster_up_fs_commands_and_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut up = Command::new(EXE)
        .args(["cluster", "up", "--nodes", "3", "--disks-per-node", "2", "--base-port", "0", "--data"])
        .arg(&data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    // Kept open until the end: `cluster up` prints as it stops.
    let mut up_out = std::io::BufReader::new(up.stdout.take().unwrap());
    up_out.read_line(&mut line).unwrap();
    let meta =
        line.split_whitespace().find(|w| w.starts_with("127.0.0.1:")).unwrap_or_else(|| panic!("{line}")).to_string();
    let dingo = |args: &[&str]| {
        let out = Command::new(EXE).args(args).env("DINGO_META", &meta).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let local = dir.path().join("in");
    let d = data(2 * MB + 3, 12);
    std::fs::write(&local, &d).unwrap();
    dingo(&["fs", "put", local.to_str().unwrap(), "/cli/a", "--block-size", "1MB"]);
    dingo(&["fs", "put", local.to_str().unwrap(), "/cli/b", "--redundancy", "ec:2+1", "--block-size", "1MB"]);
    let back = dir.path().join("out");
    dingo(&["fs", "get", "/cli/b", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), d);
    let ls = dingo(&["fs", "ls", "/cli"]);
    assert!(ls.contains("/cli/a") && ls.contains("ec:2+1"), "{ls}");
    assert!(dingo(&["fs", "stat", "/cli/a"]).contains("block"));
    let status = dingo(&["cluster", "status"]);
    assert_eq!(status.matches("alive").count(), 3, "{status}");
    dingo(&["fs", "rm", "/cli/a"]);
    assert!(!dingo(&["fs", "ls"]).contains("/cli/a"));
    // Ctrl-C stops everything cleanly.
    unsafe { libc::kill(up.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "cluster up did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let mut rest = String::new();
    up_out.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("stopping cluster"), "{rest}");
    let out = Command::new(EXE).args(["cluster", "status", "--meta", &meta]).output().unwrap();
    assert!(!out.status.success(), "the metadata service is gone");
}
