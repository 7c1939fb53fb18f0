//! Writes carry their IO class end to end, with real processes on loopback:
//! a client's put is foreground at the nodes, a rebalancing move writes its
//! new copy in the best-effort class, a reconstruction in the high class,
//! and a tagged put (transcoding, garbage collection) in its task's class,
//! as the nodes' per-class head time on `/metrics` shows.

use dingo_client::{IoTag, Redundancy};
use dingo_cluster::LocalCluster;
use dingo_daemon::metrics::scrape;
use dingo_types::{BlockId, ChunkRef, DeclarationId, DiskId, TaskKind};

use crate::common::{data, start_cluster};

/// HDD emulation, so every disk has a scheduler and per-class head time.
const CONFIG: &str = "[node]\ncache = \"0\"\npinned = \"0\"\n\
                      hdd = { positioning_us = 4000, transfer_bytes_per_sec = 200000000 }\n";
const MB: u64 = 1 << 20;
/// Modelled head time of writing 1 MiB: 4 ms positioning plus 5.2 ms
/// transfer (the header and checksum table add more).
const WRITE_MB_US: f64 = 9_000.0;

/// Head time served per class (foreground, high, best effort) on each
/// node, in node order.
async fn class_head_time(c: &LocalCluster) -> Vec<[f64; 3]> {
    let mut out = Vec::new();
    for i in 0..c.node_count() {
        let page = scrape(c.metrics_addr(Some(i))).await.unwrap();
        let mut by_class = [0.0; 3];
        for line in page.lines().filter(|l| l.starts_with("dingo_disk_class_head_time_us_total{")) {
            let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            for (slot, class) in by_class.iter_mut().zip(["foreground", "high", "best_effort"]) {
                if line.contains(&format!("class=\"{class}\"")) {
                    *slot += value;
                }
            }
        }
        out.push(by_class);
    }
    out
}

/// Head time each node served per class between two snapshots.
fn served(before: &[[f64; 3]], after: &[[f64; 3]]) -> Vec<[f64; 3]> {
    before.iter().zip(after).map(|(b, a)| [a[0] - b[0], a[1] - b[1], a[2] - b[2]]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_writes_are_served_in_their_tasks_class_and_client_writes_in_foreground() {
    let (c, _dir) = start_cluster(3, 1, CONFIG, &[]).await;
    let client = c.client().unwrap();
    let status = client.cluster_status().await.unwrap();
    let node_of_disk = |disk: u32| {
        let addr = &status.nodes.iter().find(|n| n.disks.iter().any(|d| d.id == disk)).unwrap().addr;
        (0..c.node_count()).find(|&i| c.node_addr(i) == *addr).unwrap()
    };

    // A client's put: foreground wherever its two copies go.
    let t0 = class_head_time(&c).await;
    client.put("/w/f", Redundancy::Replicated(2), MB, data(MB, 1)).await.unwrap();
    let t1 = class_head_time(&c).await;
    let put = served(&t0, &t1);
    assert!(put.iter().map(|s| s[0]).sum::<f64>() >= 2.0 * WRITE_MB_US, "{put:?}");
    assert!(put.iter().all(|s| s[1] == 0.0 && s[2] == 0.0), "{put:?}");

    // A rebalancing move writes its new copy in the best-effort class.
    let b = &client.stat("/w/f").await.unwrap().blocks[0];
    let holders: Vec<u32> = b.chunks.iter().map(|ch| ch.disk).collect();
    let free_disk = status.nodes.iter().flat_map(|n| &n.disks).map(|d| d.id).find(|d| !holders.contains(d)).unwrap();
    let chunk = ChunkRef { block: BlockId(b.id), copy: b.chunks[0].copy as u8 };
    let rebalancing = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(4) };
    let moved = client.move_chunk(chunk, Some(DiskId(free_disk)), rebalancing).await.unwrap();
    assert_eq!(moved.disk, free_disk);
    let t2 = class_head_time(&c).await;
    let target = served(&t1, &t2)[node_of_disk(free_disk)];
    assert!(target[2] >= WRITE_MB_US && target[0] == 0.0 && target[1] == 0.0, "move target: {target:?}");

    // A reconstruction writes its new copy in the high class.
    let reconstruction = IoTag::Maintenance { task: TaskKind::Reconstruction, declaration: DeclarationId(5) };
    let rebuilt = client.rebuild_chunk(chunk, &[], reconstruction).await.unwrap();
    let t3 = class_head_time(&c).await;
    let target = served(&t2, &t3)[node_of_disk(rebuilt.disk)];
    assert!(target[1] >= WRITE_MB_US && target[0] == 0.0 && target[2] == 0.0, "rebuild target: {target:?}");
    assert_eq!(
        client.read_file(&client.stat("/w/f").await.unwrap(), 0, MB, IoTag::Foreground).await.unwrap(),
        data(MB, 1)
    );

    // A tagged put (a transcoding's new file) is best effort everywhere.
    let t4 = class_head_time(&c).await;
    let transcoding = IoTag::Maintenance { task: TaskKind::Transcoding, declaration: DeclarationId(6) };
    client.put_tagged("/w/t", Redundancy::Replicated(2), MB, data(MB, 2), transcoding).await.unwrap();
    let tagged = served(&t4, &class_head_time(&c).await);
    assert!(tagged.iter().map(|s| s[2]).sum::<f64>() >= 2.0 * WRITE_MB_US, "{tagged:?}");
    assert!(tagged.iter().all(|s| s[0] == 0.0 && s[1] == 0.0), "{tagged:?}");
}
