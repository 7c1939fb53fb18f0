//! Maintenance tasks against a real local cluster (imperative mode; the
//! declarative mode runs in the demo test): scrubbing repairs a flipped
//! byte, transcoding re-encodes files losslessly, reconstruction restores
//! what a dead node held, rebalancing fills a new node.

use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy, copy_of};
use dingo_tasks::work::{ScheduledCopies, execute};
use dingo_tasks::{Action, CancelFlag, imperative, plan};
use dingo_types::ChunkRef;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{CliTarget, TestCluster, chunk_file, data, flip_byte};

const BLOCK: u64 = 256 * 1024;
const CONFIG: &str = "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\ndisk_capacity = \"3MB\"\n";

async fn cluster(nodes: u32) -> TestCluster {
    TestCluster::start(nodes, CONFIG).await
}

fn task(t: &TestCluster, args: &[&str]) -> Vec<serde_json::Value> {
    let out = CliTarget::of(&t.c).command().args(["task"]).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dingo task {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Path of the chunk file of `chunk`, wherever it is stored now.
async fn current_chunk_file(client: &Client, chunk: ChunkRef) -> PathBuf {
    let rec = client.blocks(&[chunk.block]).await.unwrap().pop().unwrap();
    let disk = rec.chunks.iter().find(|c| c.copy == u32::from(chunk.copy)).unwrap().disk;
    chunk_file(client, disk, chunk).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrubbing_repairs_corruption_and_transcoding_keeps_content() {
    let t = cluster(5).await;
    let rep = data(3 * BLOCK, 1);
    t.client.put("/t/rep", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    let first = t.client.stat("/t/rep").await.unwrap().blocks[0].id;
    let damaged = ChunkRef { block: dingo_types::BlockId(first), copy: 1 };
    flip_byte(&current_chunk_file(&t.client, damaged).await, 1000);

    let reports = task(&t, &["scrub", "--deadline", "2s"]);
    assert_eq!(reports.len(), 5, "one job per disk");
    let repaired: u64 = reports.iter().map(|r| r["repaired"].as_u64().unwrap()).sum();
    assert_eq!(repaired, 1, "{reports:?}");
    let scrubbed: u64 = reports.iter().map(|r| r["items_done"].as_u64().unwrap()).sum();
    assert_eq!(scrubbed, 9, "every copy of every block verified");
    // The damaged copy reads clean now, wherever it was rebuilt.
    let fixed = t
        .client
        .read_copy(ChunkRef { block: dingo_types::BlockId(first), copy: 1 }, 0, BLOCK, IoTag::Foreground)
        .await
        .unwrap();
    assert_eq!(fixed, rep.slice(..BLOCK as usize));

    let reports = task(&t, &["transcode", "--prefix", "/t/", "--to", "ec:3+2", "--deadline", "2s"]);
    assert_eq!(reports[0]["items_done"], 1);
    assert!(t.client.stat("/t/rep").await.is_err(), "the original is deleted");
    let back = t.client.read_all("/t/rep.rs", IoTag::Foreground).await.unwrap();
    assert_eq!(back, rep);
    let info = t.client.stat("/t/rep.rs").await.unwrap();
    assert_eq!(dingo_proto::redundancy(info.redundancy.as_ref()).unwrap(), Redundancy::Ec { data: 3, parity: 2 });
}

/// Chunk files deleted, truncated or emptied behind a running node's back
/// are reported as missing or corrupt (not as internal errors), so reads
/// fall back to other copies and scrubbing rebuilds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrubbing_repairs_chunk_files_deleted_truncated_or_emptied_on_a_live_node() {
    let t = cluster(4).await;
    let rep = data(3 * BLOCK, 7);
    t.client.put("/t/lost", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    let blocks: Vec<u64> = t.client.stat("/t/lost").await.unwrap().blocks.iter().map(|b| b.id).collect();
    let damaged: Vec<ChunkRef> =
        blocks.iter().zip([0u8, 1, 2]).map(|(&b, copy)| ChunkRef { block: dingo_types::BlockId(b), copy }).collect();
    std::fs::remove_file(current_chunk_file(&t.client, damaged[0]).await).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(current_chunk_file(&t.client, damaged[1]).await).unwrap();
    f.set_len(8192 + 1000).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(current_chunk_file(&t.client, damaged[2]).await).unwrap();
    f.set_len(0).unwrap();
    for (c, fault) in damaged.iter().zip([ChunkFault::Missing, ChunkFault::Corrupt, ChunkFault::Corrupt]) {
        match t.client.read_copy(*c, 0, BLOCK, IoTag::Foreground).await {
            Err(ClientError::Chunk { fault: f, .. }) => assert_eq!(f, fault, "{c}"),
            other => panic!("{c}: {other:?}"),
        }
    }
    // Readers fall back to the good copies.
    assert_eq!(t.client.read_all("/t/lost", IoTag::Foreground).await.unwrap(), rep);

    let reports = task(&t, &["scrub", "--deadline", "2s"]);
    let repaired: u64 = reports.iter().map(|r| r["repaired"].as_u64().unwrap()).sum();
    let failed: u64 = reports.iter().map(|r| r["failed"].as_u64().unwrap()).sum();
    assert_eq!((repaired, failed), (3, 0), "{reports:?}");
    for (i, c) in damaged.iter().enumerate() {
        let got = t.client.read_copy(*c, 0, BLOCK, IoTag::Foreground).await.unwrap();
        assert_eq!(got, rep.slice(i * BLOCK as usize..(i + 1) * BLOCK as usize), "{c} rebuilt");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconstruction_restores_a_dead_node_and_rebalancing_fills_a_new_one() {
    let mut t = cluster(6).await;
    let ec = data(6 * BLOCK, 2);
    let rep = data(4 * BLOCK, 3);
    t.client.put("/r/ec", Redundancy::Ec { data: 3, parity: 2 }, BLOCK, ec.clone()).await.unwrap();
    t.client.put("/r/rep", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    let deadline = || dingo_daemon::now_ms() + 2_000;
    let never = CancelFlag::default();

    // A node dies: everything it held is rebuilt elsewhere.
    let status = t.client.cluster_status().await.unwrap();
    let victim = status.nodes.iter().find(|n| n.addr == t.c.node_addr(0)).unwrap().id;
    t.c.kill_node(0);
    t.client.mark_node_dead(dingo_types::NodeId(victim)).await.unwrap();
    let lost = t.client.lost_chunks().await.unwrap();
    assert!(!lost.is_empty());
    // Regression (a demo run): scrubbing a copy of the node killed while
    // its disk's scrub was under way failed the scrub; the copy is lost
    // and rebuilding it is reconstruction's work, so it is skipped.
    let rec = t.client.blocks(&[lost[0].block]).await.unwrap().pop().unwrap();
    let disk = rec.chunks.iter().find(|c| c.copy == u32::from(lost[0].copy)).unwrap().disk;
    let tag = IoTag::Maintenance { task: dingo_types::TaskKind::Scrubbing, declaration: dingo_types::DeclarationId(0) };
    let scrub = Action::Scrub { chunk: lost[0], disk };
    let out = execute(&t.client, &scrub, &ScheduledCopies::new(), tag).await.unwrap();
    assert!(out.skipped && out.logical_bytes == 0, "{out:?}");
    let job = plan::reconstruction(&t.client, "node 0", deadline()).await.unwrap();
    assert_eq!(job.items.len(), lost.len());
    // An EC member is rebuilt from any 3 of its stripe's 4 survivors (the
    // planner would choose); a replicated copy from one other copy.
    for item in &job.items {
        let Action::Rebuild { sources, needed, .. } = &item.action else { panic!("{item:?}") };
        let shape = if sources.len() > 1 { (4, 3, Some(3)) } else { (1, 1, None) };
        assert_eq!((sources.len(), *needed, item.set.needed), shape, "{item:?}");
        assert_eq!(item.bytes, u64::from(*needed) * BLOCK, "{item:?}");
    }
    let report = imperative::run(&t.client, &job, deadline(), &never).await;
    assert!(report.complete(), "{report:?}");
    assert_eq!(report.items_done, lost.len() as u64);
    // Each rebuild read `needed` sources, not every survivor.
    assert_eq!(report.logical_bytes, job.items.iter().map(|i| i.bytes).sum::<u64>());
    assert!(t.client.lost_chunks().await.unwrap().is_empty());
    assert_eq!(t.client.read_all("/r/ec", IoTag::Foreground).await.unwrap(), ec);
    assert_eq!(t.client.read_all("/r/rep", IoTag::Foreground).await.unwrap(), rep);

    // A node joins: rebalancing moves chunks onto it.
    let added = t.c.add_node(1).unwrap();
    t.c.wait_alive(6, Duration::from_secs(30)).await.unwrap();
    let job = plan::rebalancing(&t.client, 0.05, 1, deadline()).await.unwrap().expect("a new empty node is skew");
    // Declared in bytes (the deficit), not as a count of chunks.
    let (needed_bytes, needed) = (job.bytes_needed.expect("rebalancing needs bytes"), job.needed());
    assert!(job.sets_needed.is_none() && needed >= 1);
    let report = imperative::run(&t.client, &job, deadline(), &never).await;
    assert!(report.complete(), "{report:?}");
    assert_eq!(report.items_done, needed);
    assert!(report.logical_bytes >= needed_bytes, "moved {} of {needed_bytes} bytes", report.logical_bytes);
    let status = t.client.cluster_status().await.unwrap();
    let new_node = status.nodes.iter().find(|n| n.addr == t.c.node_addr(added)).unwrap();
    let on_new: Vec<ChunkRef> = t.client.chunks_on_disk(dingo_types::DiskId(new_node.disks[0].id)).await.unwrap();
    // Chunks of one block or stripe never share a node, so a few moves may
    // land elsewhere; most go to the empty node.
    assert!(on_new.len() as u64 * 2 >= needed, "{} of {needed} moves reached the new node", on_new.len());
    assert_eq!(t.client.read_all("/r/ec", IoTag::Foreground).await.unwrap(), ec);
    assert_eq!(t.client.read_all("/r/rep", IoTag::Foreground).await.unwrap(), rep);
}

/// Index in the local cluster of the node serving `addr`.
fn node_index(t: &TestCluster, addr: &str, nodes: usize) -> usize {
    (0..nodes).find(|&i| t.c.node_addr(i) == addr).expect("a node of this cluster")
}

/// Declarative runs read the copies the planner scheduled. When such a
/// copy's node dies after the plan, transcoding and reconstruction read
/// other copies instead of failing (a demo run lost a transcoding file this
/// way), and transcoding an EC file reads its data members only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_copies_that_became_unreadable_are_read_elsewhere() {
    let mut t = cluster(7).await;
    let tag =
        IoTag::Maintenance { task: dingo_types::TaskKind::Transcoding, declaration: dingo_types::DeclarationId(1) };
    let rep = data(3 * BLOCK, 11);
    let ec = data(5 * BLOCK / 2, 12);
    t.client.put("/s/rep", Redundancy::Replicated(3), BLOCK, rep.clone()).await.unwrap();
    t.client.put("/s/ec", Redundancy::Ec { data: 2, parity: 1 }, BLOCK, ec.clone()).await.unwrap();

    // Scheduled: copy 0 of every block of both files (for EC, members and
    // parity alike, as the planner's "any copy" of a block).
    let schedule = |f: &dingo_proto::v1::FileInfo| -> ScheduledCopies {
        f.blocks.iter().map(|b| (dingo_types::BlockId(b.id), 0)).collect()
    };
    let ec_file = t.client.stat("/s/ec").await.unwrap();
    let to = Redundancy::Replicated(3);
    let action = Action::Transcode { from: "/s/ec".into(), to: "/s/ec.r".into(), redundancy: to };
    let out = execute(&t.client, &action, &schedule(&ec_file), tag).await.unwrap();
    assert_eq!(out.logical_bytes, ec.len() as u64, "parity members are not file bytes");
    assert_eq!(t.client.read_all("/s/ec.r", IoTag::Foreground).await.unwrap(), ec);

    // The node holding copy 0 of the first block dies after the plan (not
    // yet marked dead).
    let file = t.client.stat("/s/rep").await.unwrap();
    let first = &file.blocks[0];
    let at = |copy: u32| first.chunks.iter().find(|c| c.copy == copy).unwrap().addr.clone();
    t.c.kill_node(node_index(&t, &at(0), 7));

    // Reconstruction: copy 2 is lost; the planner chose copy 0 as source.
    let victim = t.client.cluster_status().await.unwrap().nodes.into_iter().find(|n| n.addr == at(2)).unwrap().id;
    t.c.kill_node(node_index(&t, &at(2), 7));
    t.client.mark_node_dead(dingo_types::NodeId(victim)).await.unwrap();
    let block = dingo_types::BlockId(first.id);
    let lost = ChunkRef { block, copy: 2 };
    let action = Action::Rebuild { lost, sources: vec![ChunkRef { block, copy: 1 }], needed: 1 };
    let copies: ScheduledCopies = [(block, 0)].into_iter().collect();
    let out = execute(&t.client, &action, &copies, tag).await.unwrap();
    assert_eq!(out.written_bytes, BLOCK);
    let copy2 = t.client.read_copy(copy_of(first, 2).unwrap(), 0, BLOCK, IoTag::Foreground).await.unwrap();
    assert_eq!(copy2, rep.slice(..BLOCK as usize));

    // Transcoding: copy 0 of the first block is on the dead node.
    let action = Action::Transcode {
        from: "/s/rep".into(),
        to: "/s/rep.rs".into(),
        redundancy: Redundancy::Ec { data: 2, parity: 1 },
    };
    let out = execute(&t.client, &action, &schedule(&file), tag).await.unwrap();
    assert_eq!((out.skipped, out.logical_bytes), (false, rep.len() as u64));
    assert_eq!(t.client.read_all("/s/rep.rs", IoTag::Foreground).await.unwrap(), rep);
}
