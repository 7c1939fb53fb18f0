//! Replica steering with real processes on loopback: one node's emulated
//! disk runs 20× slower than its model; its read replies say so, its
//! `/metrics` shows it, and a steering client sends few reads there while
//! random choice keeps sending a third.

use dingo_client::{Client, IoTag, Redundancy, ReplicaChoice};
use dingo_daemon::metrics::scrape;
use std::time::Duration;

mod common;
use common::{data, start_cluster};

const CONFIG: &str = "[node]\ncache = \"0\"\npinned = \"0\"\n\
                      hdd = { positioning_us = 4000, transfer_bytes_per_sec = 200000000 }\n";
const READS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_avoids_a_slow_disk_that_random_choice_keeps_using() {
    let (mut c, dir) = start_cluster(2, 1, CONFIG, &[]).await;
    // The slowdown names the node's own disk number, so only the third
    // node, started from this config, gets it.
    let slow = "[node.io]\nslowdown = [{ disk = 0, factor = 20.0, after_ms = 0, for_ms = 600000 }]\n";
    std::fs::write(dir.path().join("dingo.toml"), format!("{CONFIG}{slow}")).unwrap();
    let third = c.add_node(1).unwrap();
    c.wait_ready(Duration::from_secs(30)).await.unwrap();
    let slow_disk = Client::new(c.meta_addr()).unwrap().cluster_status().await.unwrap().nodes[..]
        .iter()
        .find(|n| n.addr == c.node_addr(third))
        .expect("third node registered")
        .disks[0]
        .id;

    let writer = Client::new(c.meta_addr()).unwrap();
    writer.put("/s/f", Redundancy::Replicated(3), 1 << 20, data(8 << 20, 1)).await.unwrap();
    let file = writer.stat("/s/f").await.unwrap();
    let mut on_slow = Vec::new();
    for choice in [ReplicaChoice::Steering, ReplicaChoice::Random] {
        let client = Client::new(c.meta_addr()).unwrap().with_replica_choice(choice);
        let mut n = 0;
        for i in 0..READS as u64 {
            let offset = (i % 32) * (256 << 10);
            let (bytes, disk) = client.read_traced(&file, offset, 64 << 10, IoTag::Foreground).await.unwrap();
            assert_eq!(bytes, data(8 << 20, 1).slice(offset as usize..(offset + (64 << 10)) as usize));
            n += usize::from(disk == Some(slow_disk));
        }
        on_slow.push(n);
    }
    // Random: a third of 60 (binomial, below 10 with p < 0.5 %); steering:
    // every reply from the slow disk halves its weight.
    assert!(on_slow[0] <= 8 && on_slow[1] >= 10, "reads on the slow disk (steering, random): {on_slow:?}");
    let page = scrape(c.metrics_addr(Some(third))).await.unwrap();
    assert!(page.contains(&format!("dingo_disk_congested{{disk=\"{slow_disk}\"}} 1")), "{page}");
    assert!(page.contains(&format!("dingo_disk_slowness_ratio{{disk=\"{slow_disk}\"}} 20")), "{page}");
}
