//! Draining and decommissioning a node, with real processes on loopback:
//! `dingo cluster drain` under a running `dingo maintain` empties the node
//! while writes go on elsewhere, the metadata service marks it
//! DECOMMISSIONED, and it can then be stopped without any block losing
//! redundancy; drains that would strand a file's redundancy are refused.
//! A disk drain runs through the IO Planner.

use dingo_client::{Client, IoTag, Redundancy};
use std::collections::HashSet;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::{CliTarget, data, spawn_planner, start_cluster};

const MB: u64 = 1_000_000;
/// Generous for a shared 2-core machine: the drain moves about 30 MB.
const DRAIN_DEADLINE: Duration = Duration::from_secs(120);

fn dingo(target: &CliTarget, args: &[&str]) -> Output {
    target.command().args(args).env("DINGO_TIMEOUT", "5s").output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn health(meta: &CliTarget) -> serde_json::Value {
    let out = dingo(meta, &["cluster", "health", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn contains(v: &serde_json::Value, id: u32) -> bool {
    v.as_array().unwrap().contains(&id.into())
}

/// Bytes the node at `addr` has written to its disks so far.
async fn bytes_written(client: &Client, addr: &str) -> u64 {
    client.node_stats(addr).await.unwrap().disks.iter().map(|d| d.bytes_written).sum()
}

/// Every block of `path` has all its chunks, none on `gone` or lost, each
/// replicated block's copies and each stripe's members on distinct nodes.
async fn check_full_redundancy(client: &Client, path: &str, gone: u32) {
    let f = client.stat(path).await.unwrap();
    let r = dingo_proto::redundancy(f.redundancy.as_ref()).unwrap();
    let mut stripe_nodes: std::collections::HashMap<u64, Vec<u32>> = Default::default();
    for b in &f.blocks {
        assert!(b.chunks.iter().all(|c| !c.lost && c.node != gone), "{path} block {}: {:?}", b.id, b.chunks);
        match r {
            Redundancy::Replicated(n) => {
                let nodes: HashSet<u32> = b.chunks.iter().map(|c| c.node).collect();
                assert_eq!(nodes.len(), usize::from(n), "{path} block {}: {:?}", b.id, b.chunks);
            }
            Redundancy::Ec { .. } => {
                assert_eq!(b.chunks.len(), 1, "{path} block {}", b.id);
                stripe_nodes.entry(b.group).or_default().push(b.chunks[0].node);
            }
        }
    }
    for (group, nodes) in stripe_nodes {
        let distinct: HashSet<&u32> = nodes.iter().collect();
        assert_eq!(distinct.len(), r.width(), "{path} stripe {group} members on nodes {nodes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_is_decommissioned_and_can_be_stopped() {
    let config = "[meta]\ndead_after_ms = 1000\nmark_dead_after_ms = 2000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";
    let (mut c, _dir) = start_cluster(5, 1, config, &[]).await;
    c.start_maintainer(&["--interval".into(), "1s".into()]).unwrap();
    let meta = CliTarget::of(&c);
    let client = c.client().unwrap();
    let mut files = vec![
        ("/d/rep".to_string(), Redundancy::Replicated(3), data(12 * MB, 1)),
        ("/d/ec".to_string(), Redundancy::Ec { data: 2, parity: 1 }, data(9 * MB, 2)),
    ];
    for (path, r, bytes) in &files {
        client.put(path, *r, MB, bytes.clone()).await.unwrap();
    }
    assert_eq!(health(&meta)["status"], "HEALTH_OK");
    let victim = c.node_id(0).await.unwrap();
    let victim_addr = c.node_addr(0).to_string();
    let mut held = 0;
    for (path, _, _) in &files {
        held += client
            .stat(path)
            .await
            .unwrap()
            .blocks
            .iter()
            .flat_map(|b| &b.chunks)
            .filter(|ch| ch.node == victim)
            .count();
    }
    assert!(held > 0, "the node to drain holds chunks");

    // Refusals name the reason.
    let out = dingo(&meta, &["cluster", "drain", "--node", "99"]);
    assert!(!out.status.success() && stderr(&out).contains("node 99 is not registered"), "{}", stderr(&out));

    let out = dingo(&meta, &["cluster", "drain", "--node", &victim.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written_at_drain = bytes_written(&client, &victim_addr).await;
    let start = Instant::now();
    let first = health(&meta);
    assert!(contains(&first["nodes_draining"], victim) || contains(&first["nodes_decommissioned"], victim), "{first}");

    // Writes go on during the drain; none may land on the draining node.
    let writer = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut written = Vec::new();
            for i in 0..6u64 {
                let r = if i % 2 == 0 { Redundancy::Replicated(3) } else { Redundancy::Ec { data: 2, parity: 1 } };
                let (path, bytes) = (format!("/d/new{i}"), data(2 * MB, 10 + i));
                client.put(&path, r, MB, bytes.clone()).await.unwrap();
                written.push((path, r, bytes));
            }
            written
        })
    };
    let mut phases: Vec<String> = Vec::new();
    loop {
        let h = health(&meta);
        let phase = if contains(&h["nodes_decommissioned"], victim) {
            "decommissioned".to_string()
        } else {
            format!("draining, {}", if h["moves_outstanding"].as_u64().unwrap() > 0 { "moving" } else { "idle" })
        };
        if phase.starts_with("draining, moving") {
            assert_eq!(h["status"], "HEALTH_WARN", "moves outstanding: {h}");
        }
        if phases.last() != Some(&phase) {
            phases.push(phase.clone());
        }
        if phase == "decommissioned" {
            break;
        }
        assert!(start.elapsed() < DRAIN_DEADLINE, "not decommissioned in {DRAIN_DEADLINE:?}: {phases:?} {h}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = start.elapsed();
    files.extend(tokio::time::timeout(Duration::from_secs(60), writer).await.expect("writes finish").unwrap());
    eprintln!("node drained -> DECOMMISSIONED in {took:?}; health went {phases:?}");
    // The supervisor's state file records the moves once the job ends (the
    // drain may end before the first health poll on a fast machine, so
    // this is the check that they were the supervisor's).
    let state_file = c.data_dir().join("maintain.json");
    loop {
        let state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
        let moved: u64 = state["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "draining")
            .map(|e| e["items_done"].as_u64().unwrap())
            .sum();
        if moved >= held as u64 {
            break;
        }
        assert!(start.elapsed() < DRAIN_DEADLINE, "{held} chunks were on the node, {moved} moved: {state}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The node deletes its old copies with its next heartbeats.
    loop {
        let status = client.cluster_status().await.unwrap();
        let node = status.nodes.iter().find(|n| n.id == victim).unwrap();
        assert_eq!(node.state(), dingo_client::DeviceState::Decommissioned);
        if node.disks.iter().all(|d| d.chunks == 0 && d.used == 0) {
            break;
        }
        assert!(start.elapsed() < DRAIN_DEADLINE, "the decommissioned node still holds chunks: {node:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(bytes_written(&client, &victim_addr).await, written_at_drain, "a chunk was written to the drained node");
    for (path, _, _) in &files {
        check_full_redundancy(&client, path, victim).await;
    }

    // Stopped, it is neither marked DEAD nor a warning, and nothing is lost.
    c.kill_node(0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let h = health(&meta);
    assert!(contains(&h["nodes_decommissioned"], victim), "{h}");
    assert_eq!(
        (h["status"].as_str(), h["under_replicated"].as_u64(), h["lost_blocks"].as_u64()),
        (Some("HEALTH_OK"), Some(0), Some(0)),
        "{h}"
    );
    for (path, _, bytes) in &files {
        assert_eq!(&client.read_all(path, IoTag::Foreground).await.unwrap(), bytes, "{path}");
    }
    let out = dingo(&meta, &["cluster", "decommission", "--node", &victim.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("DECOMMISSIONED"));

    // Four nodes take chunks; draining one more leaves three, enough for
    // replicated:3; a second would not be.
    let (b, d) = (c.node_id(1).await.unwrap(), c.node_id(2).await.unwrap());
    let out = dingo(&meta, &["cluster", "decommission", "--node", &b.to_string(), "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = dingo(&meta, &["cluster", "drain", "--node", &d.to_string()]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("replicated:3 need 3"), "{err}");
    let out = dingo(&meta, &["cluster", "mark-live", "--node", &b.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(contains(&health(&meta)["nodes_live"], b));
    // A dead node has nothing to drain.
    let out = dingo(&meta, &["cluster", "mark-dead", "--node", &victim.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = dingo(&meta, &["cluster", "drain", "--node", &victim.to_string()]);
    assert!(!out.status.success() && stderr(&out).contains("is DEAD"), "{}", stderr(&out));
}

/// A disk drain carried out declaratively: `dingo maintain --planner`
/// declares the moves to a `dingo planner` child process and moves each
/// chunk when called back; the disk's chunks go to other nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_disk_empties_through_the_planner() {
    use dingo_planner_service::{ClientEntry, ServiceConfig};
    let config = "[meta]\ndead_after_ms = 1000\n[node]\nheartbeat_ms = 200\ncache = \"8MB\"\npinned = \"8MB\"\n";
    let (mut c, dir) = start_cluster(4, 2, config, &[]).await;
    let mut cfg = ServiceConfig::new("admin-token");
    cfg.meta = c.meta_addr().to_string();
    cfg.quantum_ms = 1000;
    cfg.clients = vec![ClientEntry { name: "maintain".into(), token: "maintain-token".into() }];
    let planner = spawn_planner(&c, dir.path(), "planner", &cfg);
    let args = ["--interval", "1s", "--job-deadline", "5s", "--planner", planner.addr(), "--token", "maintain-token"];
    c.start_maintainer(&args.map(String::from)).unwrap();
    let meta = CliTarget::of(&c);
    let client = c.client().unwrap();
    let files = [
        ("/p/rep", Redundancy::Replicated(3), data(8 * MB, 3)),
        ("/p/ec", Redundancy::Ec { data: 2, parity: 1 }, data(6 * MB, 4)),
    ];
    for (path, r, bytes) in &files {
        client.put(path, *r, MB, bytes.clone()).await.unwrap();
    }
    // The disk of node 0 holding the most of the files' chunks, counted from
    // the files' own placement: the chunk counts in the cluster status come
    // with heartbeats, and in one loaded run they were all still 0, so the
    // disk picked held nothing and went straight to DECOMMISSIONED.
    let status = client.cluster_status().await.unwrap();
    let node0 = c.node_id(0).await.unwrap();
    let node0_disks: Vec<u32> =
        status.nodes.iter().find(|n| n.id == node0).unwrap().disks.iter().map(|d| d.id).collect();
    let mut held = std::collections::BTreeMap::<u32, usize>::new();
    for (path, _, _) in &files {
        for ch in client.stat(path).await.unwrap().blocks.iter().flat_map(|b| &b.chunks) {
            if node0_disks.contains(&ch.disk) {
                *held.entry(ch.disk).or_default() += 1;
            }
        }
    }
    let disk =
        held.iter().max_by_key(|(d, n)| (**n, std::cmp::Reverse(**d))).map(|(d, _)| *d).expect("node 0 holds a chunk");
    let out = dingo(&meta, &["cluster", "decommission", "--disk", &disk.to_string(), "--progress-every", "1s"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", stderr(&out));
    assert!(stdout.contains(&format!("disk {disk} is DRAINING")), "{stdout}");
    assert!(stdout.contains(&format!("disk {disk} is DECOMMISSIONED")), "{stdout}");
    for (path, _, bytes) in &files {
        let f = client.stat(path).await.unwrap();
        assert!(f.blocks.iter().flat_map(|b| &b.chunks).all(|ch| ch.disk != disk), "{path}");
        // No node is gone: `u32::MAX` names none.
        check_full_redundancy(&client, path, u32::MAX).await;
        assert_eq!(&client.read_all(path, IoTag::Foreground).await.unwrap(), bytes, "{path}");
    }
    let h = health(&meta);
    assert!(h["disks_decommissioned"].as_array().unwrap().contains(&disk.into()), "{h}");
    assert!(contains(&h["nodes_live"], node0), "the node of a drained disk stays in service: {h}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.data_dir().join("maintain.json")).unwrap()).unwrap();
    let drains = state["history"].as_array().unwrap().iter().filter(|e| e["reason"] == "draining").count();
    assert!(drains >= 1, "{state}");
    drop(planner);
}
