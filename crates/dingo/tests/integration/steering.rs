//! Replica steering with real processes on loopback: one node's emulated
//! disk runs 20× slower than its model; its read replies say so, its
//! `/metrics` shows it, and a steering client sends few reads there while
//! random choice keeps sending a third.

use dingo_client::{IoTag, Redundancy, ReplicaChoice};
use dingo_daemon::metrics::scrape;
use std::time::Duration;

use crate::common::{CliTarget, data, sample, start_cluster};

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
    let slow_disk = c.client().unwrap().cluster_status().await.unwrap().nodes[..]
        .iter()
        .find(|n| n.addr == c.node_addr(third))
        .expect("third node registered")
        .disks[0]
        .id;

    let writer = c.client().unwrap();
    // Generated once: regenerating 8 MiB per read in the loop below slowed
    // each read enough (at opt-level 0) for the slow disk's weight to
    // recover between reads.
    let content = data(8 << 20, 1);
    writer.put("/s/f", Redundancy::Replicated(3), 1 << 20, content.clone()).await.unwrap();
    let file = writer.stat("/s/f").await.unwrap();
    let mut on_slow = Vec::new();
    for choice in [ReplicaChoice::Steering, ReplicaChoice::Random] {
        let client = c.client().unwrap().with_replica_choice(choice);
        let mut n = 0;
        for i in 0..READS as u64 {
            let offset = (i % 32) * (256 << 10);
            let (bytes, disk) = client.read_traced(&file, offset, 64 << 10, IoTag::Foreground).await.unwrap();
            assert_eq!(bytes, content.slice(offset as usize..(offset + (64 << 10)) as usize));
            n += usize::from(disk == Some(slow_disk));
        }
        on_slow.push(n);
    }
    // Random: a third of 60 (binomial, below 10 with p < 0.5 %); steering:
    // every reply from the slow disk halves its weight.
    assert!(on_slow[0] <= 8 && on_slow[1] >= 10, "reads on the slow disk (steering, random): {on_slow:?}");
    let page = scrape(c.metrics_addr(Some(third))).await.unwrap();
    assert_eq!(sample(&page, &format!("dingo_disk_congested{{disk=\"{slow_disk}\"}}")), Some(1.0), "{page}");
    assert_eq!(sample(&page, &format!("dingo_disk_slowness_ratio{{disk=\"{slow_disk}\"}}")), Some(20.0), "{page}");
}

/// `dingo cluster slow-disk` slows one chosen disk of a running cluster
/// (the `InjectSlowdown` RPC), and only where the node allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_slowed_at_run_time_reports_its_slowness_and_others_refuse() {
    for allowed in [false, true] {
        let config = format!("{CONFIG}fault_injection = {allowed}\n");
        let (c, _dir) = start_cluster(2, 1, &config, &[]).await;
        let status = c.client().unwrap().cluster_status().await.unwrap();
        let (node, disk) = (&status.nodes[1], status.nodes[1].disks[0].id);
        let out = CliTarget::of(&c)
            .command()
            .args(["cluster", "slow-disk", "--disk", &disk.to_string()])
            .args(["--factor", "20", "--for", "600s"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !allowed {
            assert!(!out.status.success() && stderr.contains("fault injection is not allowed"), "{stderr}");
            continue;
        }
        assert!(out.status.success(), "{stderr}");
        let writer = c.client().unwrap();
        writer.put("/s/f", Redundancy::Replicated(2), 1 << 20, data(4 << 20, 2)).await.unwrap();
        let file = writer.stat("/s/f").await.unwrap();
        // Random choice reaches both copies; each read on the slow disk
        // takes 20 times its modelled time.
        let reader = c.client().unwrap().with_replica_choice(ReplicaChoice::Random);
        for i in 0..16u64 {
            reader.read_traced(&file, (i % 4) << 20, 64 << 10, IoTag::Foreground).await.unwrap();
        }
        let index = (0..c.node_count()).find(|&i| c.node_addr(i) == node.addr).expect("one of the cluster's nodes");
        let page = scrape(c.metrics_addr(Some(index))).await.unwrap();
        assert_eq!(sample(&page, &format!("dingo_disk_slowness_ratio{{disk=\"{disk}\"}}")), Some(20.0), "{page}");
    }
}
