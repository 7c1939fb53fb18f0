//! Storage tests with real processes on loopback: every daemon is a `dingo`
//! child process; faults are real SIGKILLs and real bytes flipped on disk.

use bytes::Bytes;
use dingo_client::{
    BlockRecord, ChunkFault, ChunkLocation, Client, ClientError, DeviceState, IoTag, Redundancy, copy_of,
};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_daemon::metrics::scrape;
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, NodeId, TaskKind};
use std::io::{BufRead, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{EXE, chunk_file, data, flip_byte, start_cluster};

const MB: u64 = 1_000_000;
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
    let (c, dir) = start_cluster(nodes, 2, CONFIG, node_args).await;
    TestCluster { c, dir }
}

async fn read_all(client: &Client, path: &str) -> Bytes {
    client.read_all(path, IoTag::Foreground).await.unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_for_both_redundancy_kinds() {
    let t = cluster(4, &[]).await;
    let client = t.c.client().unwrap();
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
    // Append to an unsealed file in several calls, then seal. Then shared bytes: they first complete
    // the buffered unit (copied), then a whole unit goes out as is, and the rest is buffered.
    let mut w = client.create("/t/appended", EC, MB).await.unwrap();
    let d = data(19 * MB + 3, 99);
    let copied = 7 * MB + 3;
    for piece in d[..copied as usize].chunks(700_001) {
        w.append(piece).await.unwrap();
    }
    w.append_bytes(d.slice(copied as usize..)).await.unwrap();
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
    let client = t.c.client().unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bytes_are_detected_and_repaired_from_redundancy() {
    let t = cluster(4, &[]).await;
    let client = t.c.client().unwrap();
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
    let client = t.c.client().unwrap();
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
    let table = client.block_table(BlockId(0), 1000).await.unwrap();
    assert_eq!(table.end, ids.last().unwrap() + 1);
    assert_eq!(table.rows.len() as u64, table.end, "block ids are dense");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_damages_nothing() {
    // Each disk holds at most 4 MB.
    let t = cluster(3, &["--capacity", "4MB"]).await;
    let client = t.c.client().unwrap();
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
    // Unreadable data directories: a disk whose label is garbage, a
    // metadata directory whose database is garbage. Both stay untouched.
    let bad_disk = t.dir.path().join("bad-disk");
    std::fs::create_dir(&bad_disk).unwrap();
    std::fs::write(bad_disk.join("DINGO_DISK"), "garbage").unwrap();
    let bad_meta = t.dir.path().join("bad-meta");
    std::fs::create_dir(&bad_meta).unwrap();
    let garbage = vec![0x5au8; 64 * 1024];
    std::fs::write(bad_meta.join("meta.redb"), &garbage).unwrap();
    let good_disk = t.dir.path().join("good-disk");
    let runs: [(&[&str], &str); 7] = [
        (&["meta", "--data", "/tmp", "--config", bad_config.to_str().unwrap()], "malformed config"),
        (
            &["node", "--disk", good_disk.to_str().unwrap(), "--config", bad_config.to_str().unwrap()],
            "malformed config",
        ),
        (&["node", "--disk", not_a_dir.to_str().unwrap(), "--listen", "127.0.0.1:0"], "file"),
        (&["node", "--disk", bad_disk.to_str().unwrap(), "--listen", "127.0.0.1:0"], "not a DINGO disk label"),
        (&["meta", "--data", not_a_dir.to_str().unwrap(), "--listen", "127.0.0.1:0"], "metadata directory"),
        (&["meta", "--data", bad_meta.to_str().unwrap(), "--listen", "127.0.0.1:0"], "metadata directory"),
        (&["fs", "put", "/nonexistent/x", "/y", "--meta", t.c.meta_addr()], "cannot read /nonexistent/x"),
    ];
    for (args, expect) in runs {
        // With the cluster's secret, so that each run fails on what it tests.
        let secret = t.c.credentials().auth.secret_file.clone().unwrap();
        let out = Command::new(EXE).args(args).env("DINGO_SECRET_FILE", secret).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expect), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(bad_disk.join("DINGO_DISK")).unwrap(), "garbage");
    assert_eq!(std::fs::read(bad_meta.join("meta.redb")).unwrap(), garbage);
    assert_eq!(read_all(&client, "/b/keep").await, keep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_chunks_are_served_from_cache_and_counted() {
    let t = cluster(3, &[]).await;
    let client = t.c.client().unwrap();
    client.put("/p/a", R3, MB, data(MB, 11)).await.unwrap();
    let b = &client.stat("/p/a").await.unwrap().blocks[0];
    let c = &b.chunks[0];
    let chunk = ChunkRef { block: BlockId(b.id), copy: c.copy as u8 };
    let scrub = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(77) };
    let until = dingo_daemon::now_ms() + 60_000;
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
        s2.disks.iter().flat_map(|d| &d.classes).filter(|c| c.class_name == "scrubbing").map(|c| c.bytes).sum::<u64>();
    assert!(class >= MB, "scrubbing bytes counted: {class}");
    assert!(s2.declarations.iter().any(|d| d.declaration_id == 77 && d.bytes == 2 * MB));
    // Unpinned, the next maintenance read goes to disk again.
    client.cache_directive(&c.addr, vec![], vec![chunk]).await.unwrap();
    client.read_chunk(&c.addr, chunk, 0, MB, scrub).await.unwrap();
    let s3 = client.node_stats(&c.addr).await.unwrap();
    assert!(disk_reads(&s3) > disk_reads(&s2));
    // The node exposes the counters on /metrics.
    let node_index = (0..3).find(|&i| t.c.node_addr(i) == c.addr).unwrap();
    let page = scrape(t.c.metrics_addr(Some(node_index))).await.unwrap();
    assert!(page.contains("dingo_cache_pinned_hits_total") && page.contains("class=\"scrubbing\""), "{page}");
    assert!(scrape(t.c.metrics_addr(None)).await.unwrap().contains("dingo_meta_nodes{state=\"alive\"} 3"));
}

/// gRPC libraries accept 4 MiB per message by default: a whole 8 MB chunk
/// comes through `ReadChunkStream`, not `ReadChunk`, to a client with
/// default settings (tonic's default is the same 4 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_configured_grpc_client_reads_an_8_mb_chunk_as_a_stream() {
    use dingo_proto::v1::{ReadChunkRequest, node_client::NodeClient};
    use futures::TryStreamExt;
    let t = cluster(3, &[]).await;
    let client = t.c.client().unwrap();
    let block_bytes = 8 * MB;
    client.put("/big/a", R3, block_bytes, data(block_bytes, 5)).await.unwrap();
    let b = &client.stat("/big/a").await.unwrap().blocks[0];
    let c = &b.chunks[0];
    let request = || ReadChunkRequest {
        chunk: Some(chunk_at(b, c).into()),
        offset: 0,
        len: block_bytes,
        io_class: Some(IoTag::Foreground.into()),
    };
    // Default message limits, as any gRPC library has; only the cluster
    // secret is added.
    let access = &t.c.credentials().access;
    let channel = access.endpoint(&c.addr).unwrap().connect().await.unwrap();
    let mut node = NodeClient::with_interceptor(channel, access.credentials());
    let whole = node.read_chunk(request()).await.unwrap_err();
    assert_eq!(whole.code(), tonic::Code::OutOfRange, "{whole:?}");
    let pieces: Vec<_> = node.read_chunk_stream(request()).await.unwrap().into_inner().try_collect().await.unwrap();
    assert!(pieces.len() == 8 && pieces.iter().all(|p| p.data.len() <= 1 << 20), "{} pieces", pieces.len());
    let joined: Vec<u8> = pieces.iter().flat_map(|p| p.data.iter().copied()).collect();
    assert_eq!(Bytes::from(joined), data(block_bytes, 5));
}

/// A cluster serving TLS: files are written and read back over it; a
/// plain-text client with the right secret is refused by the metadata
/// service and by the nodes; a TLS client without the secret too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_works_end_to_end_and_refuses_plain_text() {
    use dingo_auth::{ClusterAccess, ClusterSecret};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("dingo.toml");
    std::fs::write(&config, "[node]\nheartbeat_ms = 200\n").unwrap();
    let mut c = LocalCluster::start(ClusterSpec {
        exe: EXE.into(),
        data: dir.path().join("data"),
        nodes: 3,
        disks_per_node: 1,
        base_port: 0,
        config: Some(config),
        node_args: Vec::new(),
        tls: true,
    })
    .unwrap();
    c.wait_ready(Duration::from_secs(30)).await.unwrap();
    assert!(c.credentials().access.uses_tls());
    let client = c.client().unwrap();
    let d = data(3 * MB + 7, 21);
    client.put("/tls/f", R3, MB, d.clone()).await.unwrap();
    assert_eq!(read_all(&client, "/tls/f").await, d);

    let secret = c.credentials().access.secret().clone();
    let plain = Client::new(c.meta_addr(), &ClusterAccess::new(secret.clone(), None).unwrap()).unwrap();
    let refused = plain.stat("/tls/f").await.unwrap_err();
    assert!(matches!(refused, ClientError::Service { .. }), "{refused}");
    let node_addr = client.stat("/tls/f").await.unwrap().blocks[0].chunks[0].addr.clone();
    let stats = plain.node(&node_addr).unwrap().node_stats(dingo_proto::v1::NodeStatsRequest {}).await;
    assert!(stats.is_err(), "a node refuses plain text");

    let ca = c.credentials().auth.ca.clone().unwrap();
    let stranger = ClusterAccess::new(ClusterSecret::generate().unwrap(), Some(&ca)).unwrap();
    let e = Client::new(c.meta_addr(), &stranger).unwrap().stat("/tls/f").await.unwrap_err();
    assert!(matches!(&e, ClientError::Rpc(s) if s.code() == tonic::Code::Unauthenticated), "{e}");
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
        let secret = data_dir.join("cluster.secret");
        let out =
            Command::new(EXE).args(args).env("DINGO_META", &meta).env("DINGO_SECRET_FILE", secret).output().unwrap();
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
    // SAFETY: kill(2) on a pid this test started; no memory is involved.
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

// ------------------------------------------------------------ maintenance

/// Small blocks keep the maintenance tests fast.
const BS: u64 = 200_000;
const RS32: Redundancy = Redundancy::Ec { data: 3, parity: 2 };
const FG: IoTag = IoTag::Foreground;

fn tag(task: TaskKind, declaration: u64) -> IoTag {
    IoTag::Maintenance { task, declaration: DeclarationId(declaration) }
}

fn chunk(block: u64, copy: u32) -> ChunkRef {
    ChunkRef { block: BlockId(block), copy: copy as u8 }
}

fn chunk_at(b: &BlockRecord, c: &ChunkLocation) -> ChunkRef {
    chunk(b.id, c.copy)
}

/// Bytes the nodes served to maintenance reads of planner declaration `id`.
async fn declaration_bytes(client: &Client, t: &TestCluster, id: u64) -> u64 {
    let mut total = 0;
    for i in 0..t.c.node_count() {
        if let Ok(s) = client.node_stats(t.c.node_addr(i)).await {
            total += s.declarations.iter().filter(|d| d.declaration_id == id).map(|d| d.bytes).sum::<u64>();
        }
    }
    total
}

/// Polls `check` until it holds, for at most 10 s.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn disk_used(client: &Client, disk: u32) -> u64 {
    let s = client.cluster_status().await.unwrap();
    s.nodes.iter().flat_map(|n| &n.disks).find(|d| d.id == disk).unwrap().used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_copies_are_read_rebuilt_and_moved() {
    let mut t = cluster(4, &[]).await;
    let client = t.c.client().unwrap();
    let rep = data(3 * BS, 21);
    let ec = data(3 * BS - 1000, 22);
    client.put("/x/rep", R3, BS, rep.clone()).await.unwrap();
    client.put("/x/ec", RS32, BS, ec.clone()).await.unwrap();
    let rb = client.stat("/x/rep").await.unwrap().blocks;
    let eb = client.stat("/x/ec").await.unwrap().blocks;
    assert_eq!((rb.len(), eb.len()), (3, 5));

    // Block records by id, in the order asked; unknown ids are refused.
    assert_eq!(
        client.blocks(&[BlockId(eb[4].id), BlockId(rb[1].id)]).await.unwrap(),
        vec![eb[4].clone(), rb[1].clone()]
    );
    let e = client.blocks(&[BlockId(1 << 40)]).await.unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::NotFound), "{e}");

    // Every exact copy reads back; so does an EC member (copy 0).
    let b = &rb[1];
    for c in &b.chunks {
        let got = client.read_copy(copy_of(b, c.copy).unwrap(), 10, 1000, FG).await.unwrap();
        assert_eq!(got, rep.slice(BS as usize + 10..BS as usize + 1010));
    }
    let parity = client.read_copy(copy_of(&eb[4], 0).unwrap(), 0, eb[4].size, FG).await.unwrap();
    assert_eq!(parity.len() as u64, eb[4].size);
    let e = client.read_copy(copy_of(b, 7).unwrap(), 0, 10, FG).await.unwrap_err();
    assert!(matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }), "{e}");
    let c0 = &b.chunks[0];
    assert!(client.chunks_on_disk(DiskId(c0.disk)).await.unwrap().contains(&chunk_at(b, c0)));
    assert!(client.chunks_on_disk(DiskId(9_999)).await.unwrap_err().to_string().contains("not registered"));

    // A damaged copy reads as corrupt (away from the cached first segment),
    // and its node reports it.
    let damaged = chunk_at(b, c0);
    let damaged_file = chunk_file(&client, c0.disk, damaged).await;
    flip_byte(&damaged_file, 150_000);
    let e = client.read_copy(copy_of(b, c0.copy).unwrap(), 150_000, 100, FG).await.unwrap_err();
    assert!(matches!(e, ClientError::Chunk { fault: ChunkFault::Corrupt, .. }), "{e}");
    let meta_metrics = t.c.metrics_addr(None).to_string();
    eventually("the corrupt chunk is reported", || {
        let addr = meta_metrics.clone();
        async move { scrape(&addr).await.unwrap().contains("dingo_meta_corrupt_chunk_reports_total 1") }
    })
    .await;

    // Rebuilt from another copy, with tagged reads, on the node that held
    // no copy; the damaged file goes.
    let repair = tag(TaskKind::Reconstruction, 5);
    let new = client.rebuild_chunk(damaged, &[], repair).await.unwrap();
    assert!(b.chunks.iter().all(|c| c.node != new.node), "{new:?}");
    assert_eq!(
        client.read_copy(copy_of(b, c0.copy).unwrap(), 0, BS, FG).await.unwrap(),
        rep.slice(BS as usize..2 * BS as usize)
    );
    assert_eq!(declaration_bytes(&client, &t, 5).await, BS, "source reads carry the tag");
    assert!(!damaged_file.exists(), "the old copy is deleted at once");

    // EC: a parity member from chosen sources, a data member from any.
    let sources: Vec<ChunkRef> = eb[..3].iter().map(|m| chunk(m.id, 0)).collect();
    let new = client.rebuild_chunk(chunk(eb[4].id, 0), &sources, repair).await.unwrap();
    assert_ne!(new.disk, eb[4].chunks[0].disk);
    assert_eq!(client.read_copy(copy_of(&eb[4], 0).unwrap(), 0, eb[4].size, FG).await.unwrap(), parity);
    client.rebuild_chunk(chunk(eb[1].id, 0), &[], repair).await.unwrap();
    let member1 = dingo_client::ec::member_range(ec.len(), 3, 1);
    assert_eq!(client.read_copy(copy_of(&eb[1], 0).unwrap(), 0, eb[1].size, FG).await.unwrap(), ec.slice(member1));
    for bad in [vec![chunk(eb[1].id, 0)], vec![chunk(rb[0].id, 0)]] {
        let e = client.rebuild_chunk(chunk(eb[1].id, 0), &bad, repair).await.unwrap_err();
        assert!(matches!(e, ClientError::Invalid(_)), "{e}");
    }

    // Moving: to the emptiest disk of a node without a copy, and the disk
    // usage the metadata service reports follows within heartbeats.
    let balance = tag(TaskKind::Rebalancing, 6);
    let m = chunk_at(&rb[0], &rb[0].chunks[1]);
    let old_disk = rb[0].chunks[1].disk;
    let old_used = disk_used(&client, old_disk).await;
    let moved = client.move_chunk(m, None, balance).await.unwrap();
    assert!(rb[0].chunks.iter().all(|c| c.node != moved.node), "{moved:?}");
    assert_eq!(declaration_bytes(&client, &t, 6).await, BS, "the read carries the tag");
    assert!(!client.chunks_on_disk(DiskId(old_disk)).await.unwrap().contains(&m));
    assert!(client.chunks_on_disk(DiskId(moved.disk)).await.unwrap().contains(&m));
    eventually("the old disk's usage drops", || {
        let client = client.clone();
        async move { disk_used(&client, old_disk).await < old_used }
    })
    .await;
    // Not to a node that already holds the chunk.
    let status = client.cluster_status().await.unwrap();
    let holder = status.nodes.iter().find(|n| n.id == moved.node).unwrap();
    let sibling = holder.disks.iter().find(|d| d.id != moved.disk).unwrap().id;
    let e = client.move_chunk(m, Some(DiskId(sibling)), balance).await.unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e}");

    // A node added at run time receives chunks.
    let i = t.c.add_node(2).unwrap();
    t.c.wait_alive(5, READY).await.unwrap();
    let id = t.c.node_id(i).await.unwrap();
    let status = client.cluster_status().await.unwrap();
    let fresh = status.nodes.iter().find(|n| n.id == id).unwrap().disks[1].id;
    let moved = client.move_chunk(m, Some(DiskId(fresh)), balance).await.unwrap();
    assert_eq!((moved.node, moved.disk), (id, fresh));
    assert_eq!(read_all(&client, "/x/rep").await, rep);
    assert_eq!(read_all(&client, "/x/ec").await, ec);

    // Deleted blocks have no copies to read or rebuild.
    client.delete("/x/rep").await.unwrap();
    let e = client.read_copy(copy_of(&rb[2], 0).unwrap(), 0, 10, FG).await.unwrap_err();
    assert!(matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }), "{e}");
    let e = client.rebuild_chunk(chunk(rb[2].id, 0), &[], repair).await.unwrap_err();
    assert!(matches!(e, ClientError::Chunk { fault: ChunkFault::Missing, .. }), "{e}");
}

/// Every chunk location of the files, as `(chunk, disk, node)`.
async fn locations(client: &Client, paths: &[&str]) -> Vec<(ChunkRef, u32, u32)> {
    let mut out = Vec::new();
    for p in paths {
        for b in client.stat(p).await.unwrap().blocks {
            out.extend(b.chunks.iter().map(|c| (chunk_at(&b, c), c.disk, c.node)));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_nodes_and_disks_lose_chunks_that_rebuilds_restore() {
    let mut t = cluster(4, &[]).await;
    let client = t.c.client().unwrap();
    let rep = data(3 * BS + 7, 31);
    let ec = data(5 * BS, 32);
    client.put("/d/rep", R3, BS, rep.clone()).await.unwrap();
    client.put("/d/ec", RS32, BS, ec.clone()).await.unwrap();
    let files = ["/d/rep", "/d/ec"];
    assert!(client.lost_chunks().await.unwrap().is_empty());

    // A crashed node, marked dead: exactly its chunks are lost.
    t.c.kill_node(1);
    let dead = t.c.node_id(1).await.unwrap();
    client.mark_node_dead(NodeId(dead)).await.unwrap();
    let status = client.cluster_status().await.unwrap();
    let n = status.nodes.iter().find(|n| n.id == dead).unwrap();
    assert_eq!(n.state(), DeviceState::Dead);
    assert!(n.disks.iter().all(|d| d.state() == DeviceState::Dead));
    let mut lost = client.lost_chunks().await.unwrap();
    lost.sort();
    let expected: Vec<ChunkRef> =
        locations(&client, &files).await.into_iter().filter(|l| l.2 == dead).map(|l| l.0).collect();
    assert!(!expected.is_empty());
    assert_eq!(lost, expected);
    let e = client.read_copy(lost[0], 0, 10, FG).await.unwrap_err();
    assert!(matches!(e, ClientError::Chunk { fault: ChunkFault::Unavailable, .. }), "{e}");

    let repair = tag(TaskKind::Reconstruction, 9);
    for &c in &lost {
        let at = client.rebuild_chunk(c, &[], repair).await.unwrap();
        assert_ne!(at.node, dead);
    }
    assert!(client.lost_chunks().await.unwrap().is_empty());
    assert!(locations(&client, &files).await.iter().all(|l| l.2 != dead));
    assert_eq!(read_all(&client, "/d/rep").await, rep);
    assert_eq!(read_all(&client, "/d/ec").await, ec);

    // A dead disk on a live node: its chunks are lost, new data avoids it.
    let disk = client.stat("/d/rep").await.unwrap().blocks[0].chunks[0].disk;
    let on_disk = client.chunks_on_disk(DiskId(disk)).await.unwrap();
    client.mark_disk_dead(DiskId(disk)).await.unwrap();
    assert_eq!(client.lost_chunks().await.unwrap(), on_disk);
    client.put("/d/new", R3, BS, data(4 * BS, 33)).await.unwrap();
    assert!(locations(&client, &["/d/new"]).await.iter().all(|l| l.1 != disk));
    for &c in &on_disk {
        client.rebuild_chunk(c, &[], repair).await.unwrap();
    }
    assert!(client.lost_chunks().await.unwrap().is_empty());
    assert_eq!(read_all(&client, "/d/rep").await, rep);

    // The marks are durable; unknown ids are refused.
    t.c.kill_meta();
    t.c.start_meta().unwrap();
    t.c.wait_alive(3, READY).await.unwrap();
    let status = client.cluster_status().await.unwrap();
    assert_eq!(status.nodes.iter().find(|n| n.id == dead).unwrap().state(), DeviceState::Dead);
    let d = status.nodes.iter().flat_map(|n| &n.disks).find(|d| d.id == disk).unwrap();
    assert_eq!(d.state(), DeviceState::Dead);
    client.set_disk_state(DiskId(disk), DeviceState::Live).await.unwrap();
    assert!(client.mark_node_dead(NodeId(999)).await.unwrap_err().to_string().contains("not registered"));
    assert_eq!(read_all(&client, "/d/ec").await, ec);
}

/// Chunks the nodes last reported holding, over all disks.
async fn chunks_reported(client: &Client) -> u64 {
    let s = client.cluster_status().await.unwrap();
    s.nodes.iter().flat_map(|n| &n.disks).map(|d| d.chunks).sum()
}

/// A 3-node cluster of one disk each with `config`, holding the 3-way
/// replicated file `/kept` of `kept` in 1 MB blocks.
async fn cluster_keeping(config: &str, kept: &Bytes) -> (TestCluster, Client) {
    let (c, dir) = start_cluster(3, 1, config, &[]).await;
    let client = c.client().unwrap();
    client.put("/kept", R3, MB, kept.clone()).await.unwrap();
    (TestCluster { c, dir }, client)
}

/// Regression: a writer that died after writing chunks but before
/// committing them left its blocks open, and the chunks on the nodes,
/// forever. Once its lease expires they are deleted; committed data stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_writers_uncommitted_chunks_are_freed() {
    let kept = data(2 * MB, 1);
    let (_cluster, client) = cluster_keeping("[meta]\nlease_ttl_ms = 1000\n[node]\nheartbeat_ms = 200\n", &kept).await;
    // Four whole units start writing at once and nothing commits them
    // before the writer is gone.
    let mut w = client.create("/dies", R3, MB).await.unwrap();
    w.append(data(4 * MB, 2)).await.unwrap();
    drop(w);
    let orphans = [2, 3, 4, 5];
    eventually("the dead writer's chunks are on the nodes", || async {
        chunks_reported(&client).await == 6 + 3 * orphans.len() as u64
    })
    .await;
    eventually("its blocks are deleted and its chunks freed", || async {
        let blocks = client.blocks(&orphans.map(BlockId)).await.unwrap();
        blocks.iter().all(|b| b.state() == dingo_proto::v1::BlockState::Deleted) && chunks_reported(&client).await == 6
    })
    .await;
    assert_eq!(read_all(&client, "/kept").await, kept);
    // Nothing was committed, so lease recovery removed the file; the path
    // is free for another writer.
    eventually("the empty file is removed", || async { client.stat("/dies").await.is_err() }).await;
    let mut w = client.create("/dies", R3, MB).await.unwrap();
    w.append(data(MB, 3)).await.unwrap();
    assert_eq!(w.seal().await.unwrap(), MB);
    assert_eq!(read_all(&client, "/dies").await, data(MB, 3));
}

/// A chunk that no block record places on its disk (here written straight
/// to a node under a block id never allocated) is deleted once older than
/// the node's orphan grace period; every chunk of a file stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_chunks_are_deleted_and_known_ones_kept() {
    let kept = data(3 * MB, 4);
    let (_cluster, client) = cluster_keeping("[node]\nheartbeat_ms = 100\norphan_grace_ms = 300\n", &kept).await;
    let status = client.cluster_status().await.unwrap();
    let node = &status.nodes[0];
    let stray = dingo_proto::v1::WriteChunkRequest {
        chunk: Some(dingo_proto::v1::ChunkId { block: 1_000_000, copy: 0 }),
        disk: node.disks[0].id,
        data: data(1000, 5),
        seal: true,
        total_len: 1000,
        io_class: None,
    };
    let mut node_client = client.node(&node.addr).unwrap();
    node_client.write_chunk(futures::stream::iter([stray])).await.unwrap();
    eventually("the stray chunk is reported", || async { chunks_reported(&client).await == 9 + 1 }).await;
    eventually("the stray chunk is deleted", || async { chunks_reported(&client).await == 9 }).await;
    // Checks keep running: the known chunks are past the grace period too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(chunks_reported(&client).await, 9);
    assert_eq!(read_all(&client, "/kept").await, kept);
}

/// A foreground degraded read asks for one stripe member more than it
/// needs and decodes from the first `k` to arrive, so a member on a hung
/// node (stopped, its port open) does not hold the read for the client's
/// 60 s call timeout. Before, it read exactly `k` members, in order, and
/// waited for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_foreground_read_does_not_wait_for_a_hung_member() {
    let mut t = cluster(4, &[]).await;
    let client = t.c.client().unwrap();
    let ec = data(2 * MB, 31);
    client.put("/h/ec", Redundancy::Ec { data: 2, parity: 2 }, MB, ec.clone()).await.unwrap();
    let f = client.stat("/h/ec").await.unwrap();
    // One stripe: data members 0 and 1, parity 2 and 3, each on its own node.
    let nodes: Vec<usize> = f
        .blocks
        .iter()
        .map(|b| (0..4).find(|&i| t.c.node_addr(i) == b.chunks[0].addr).expect("a cluster node"))
        .collect();
    assert_eq!(
        nodes.iter().collect::<std::collections::BTreeSet<_>>().len(),
        4,
        "members on distinct nodes: {nodes:?}"
    );
    // Member 0's node dies (its read is degraded); member 1's node hangs.
    t.c.kill_node(nodes[0]);
    t.c.signal_node(nodes[1], libc::SIGSTOP);
    let got = tokio::time::timeout(Duration::from_secs(30), client.read("/h/ec", 0, MB, IoTag::Foreground)).await;
    t.c.signal_node(nodes[1], libc::SIGCONT);
    let got = got.expect("the degraded read waited 30 s for the hung member").unwrap();
    assert_eq!(got, ec.slice(..MB as usize));
}
