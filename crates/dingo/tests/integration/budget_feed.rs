//! The planner's per-quantum budget feed with real processes on loopback:
//! every node hears what the planner scheduled on its disks each quantum,
//! and a disk slowed by `InjectSlowdown` reports its slowness in the reply,
//! so the next quanta read the other copies instead.

use bytes::Bytes;
use dingo_client::{Client, DiskSlowdown, IoTag, Redundancy};
use dingo_daemon::metrics::scrape;
use dingo_planner_client::wire::Callback;
use dingo_planner_client::{CallbackStream, PlannerClient, read_chunk};
use dingo_planner_service::{ClientEntry, ServiceConfig};
use dingo_types::{BlockId, BlockSet, ChunkRef, Declaration, DeclarationId, DiskId, ReadSets, TaskKind, Timestamp};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{sample, spawn_planner, start_cluster};

/// HDD emulation (so every disk has a scheduler to take the budget), no
/// general cache (so every read reaches the head), fault injection allowed.
const CONFIG: &str = "[meta]\ndead_after_ms = 2000\n[node]\nheartbeat_ms = 200\ncache = \"0\"\npinned = \"4MB\"\n\
                      fault_injection = true\n\
                      hdd = { positioning_us = 4000, transfer_bytes_per_sec = 200000000 }\n";
const BLOCK: u64 = 128 * 1024;
const BLOCKS: u64 = 9;
const TOKEN: &str = "token-scrub";

/// One chunk read a callback named.
#[derive(Debug)]
struct Read {
    disk: u32,
    physical: bool,
    chunk: ChunkRef,
}

/// A scrub of every block (any copy) due in 1.5 s: its reads, carried out
/// and acknowledged.
async fn scrub(
    planner: &PlannerClient,
    stream: &mut CallbackStream,
    client: &Client,
    addr: &HashMap<u32, String>,
) -> Vec<Read> {
    let deadline = Timestamp(dingo_daemon::now_ms() + 1500);
    let sets = (0..BLOCKS).map(|b| BlockSet::any_of([BlockId(b)])).collect();
    let decl = Declaration {
        task: TaskKind::Scrubbing,
        read_sets: ReadSets::Sets(sets),
        sets_needed: None,
        bytes_needed: None,
        deadline,
    };
    let id = planner.declare(&decl).await.unwrap().id;
    let (mut sets, mut reads) = (0, Vec::new());
    while sets < BLOCKS {
        let cb: Callback = match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
            Ok(Some(Ok(cb))) => cb,
            other => panic!("no callback: {other:?}"),
        };
        assert_eq!(cb.declaration, id.0);
        let tag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(cb.declaration) };
        for r in cb.sets.iter().flat_map(|s| &s.reads) {
            client.read_chunk(&addr[&r.disk], read_chunk(r), 0, r.bytes, tag).await.unwrap();
            reads.push(Read { disk: r.disk, physical: r.physical, chunk: read_chunk(r) });
        }
        sets += cb.sets.len() as u64;
        planner.ack(&[cb.delivery]).await.unwrap();
    }
    reads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_receive_each_quantums_budget_and_a_slow_disk_gets_less_work() {
    let (cluster, dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let mut cfg = ServiceConfig::new("admin");
    cfg.meta = cluster.meta_addr().to_string();
    cfg.quantum_ms = 1000;
    cfg.dispatch_spacing_ms = 250;
    cfg.pin_grace_ms = 3000;
    cfg.clients = vec![ClientEntry { name: "scrub".into(), token: TOKEN.into() }];
    let planner_process = spawn_planner(&cluster, dir.path(), "planner", &cfg);

    let client = cluster.client().unwrap();
    let data: Vec<u8> = (0..BLOCKS * BLOCK).map(|i| (i % 251) as u8).collect();
    client.put("/b/f", Redundancy::Replicated(3), BLOCK, Bytes::from(data)).await.unwrap();
    let status = client.cluster_status().await.unwrap();
    let addr: HashMap<u32, String> =
        status.nodes.iter().flat_map(|n| n.disks.iter().map(|d| (d.id, n.addr.clone()))).collect();
    let metrics_of: HashMap<u32, &str> = (0..3)
        .map(|i| {
            let node = status.nodes.iter().find(|n| n.addr == cluster.node_addr(i)).unwrap();
            (node.disks[0].id, cluster.metrics_addr(Some(i)))
        })
        .collect();
    let planner = PlannerClient::connect(planner_process.addr(), TOKEN).unwrap();
    let mut stream = planner.subscribe().await.unwrap();

    // On profile, the reads spread over the three disks, and each disk's
    // node hears the head time planned there.
    let reads = scrub(&planner, &mut stream, &client, &addr).await;
    let slow = reads.iter().find(|r| r.physical).expect("some disk read");
    let (slow, slow_chunk) = (slow.disk, slow.chunk);
    for (&disk, metrics) in &metrics_of {
        let page = scrape(metrics).await.unwrap();
        let budgets = sample(&page, &format!("dingo_disk_planner_budgets_total{{disk=\"{disk}\"}}"));
        assert!(budgets.is_some_and(|n| n >= 1.0), "disk {disk}: {page}");
        let planned = sample(&page, &format!("dingo_disk_planner_budget_head_time_us_total{{disk=\"{disk}\"}}"));
        let read_here = reads.iter().any(|r| r.disk == disk && r.physical);
        assert_eq!(planned.is_some_and(|us| us > 0.0), read_here, "disk {disk}: {page}");
    }

    // Slowed 5×, the disk says so in its next budget reply (after one read
    // shows it), and the planner cuts its budget.
    let lasting = Duration::from_secs(600);
    client
        .inject_slowdown(DiskSlowdown { disk: DiskId(slow), factor: 5.0, after: Duration::ZERO, lasting })
        .await
        .unwrap();
    client.read_chunk(&addr[&slow], slow_chunk, 0, BLOCK, IoTag::Foreground).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let page = scrape(planner_process.metrics_addr()).await.unwrap();
        if sample(&page, "dingo_planner_slow_disks") == Some(1.0) {
            assert!(sample(&page, "dingo_planner_node_budgets_sent_total").is_some_and(|n| n >= 3.0), "{page}");
            break;
        }
        assert!(Instant::now() < until, "the planner never saw the slow disk: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reads = scrub(&planner, &mut stream, &client, &addr).await;
    let physical_on_slow = reads.iter().filter(|r| r.disk == slow && r.physical).count();
    assert_eq!(physical_on_slow, 0, "every block has copies on fast disks: {reads:?}");
}
