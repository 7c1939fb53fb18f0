//! The local clusters the experiments run on: the node config the IO-control
//! experiments start from, starting a cluster, laying out data so every disk
//! holds chunks, and the run's clock.

use crate::BenchError;
use bytes::Bytes;
use dingo_client::{Client, IoTag, Redundancy};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_iosched::PolicyKind;
use dingo_types::{ChunkRef, DeclarationId, TaskKind};
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// The `[node]` config every experiment starts from: HDD emulation with
/// the given model, no general cache (every read reaches the emulated
/// head), `pinned_bytes` of pinned cache, `scheduler` on every disk, and
/// the fault-injection RPC allowed (an experiment may slow a disk through
/// it, as steering does). Callers append `[node.io]` lines of their own.
pub fn node_config(
    pinned_bytes: u64,
    positioning_us: u64,
    transfer_bytes_per_sec: u64,
    scheduler: PolicyKind,
) -> String {
    format!(
        "[node]\nfault_injection = true\ncache = \"0\"\npinned = \"{pinned_bytes}\"\nhdd = {{ positioning_us = {positioning_us}, \
         transfer_bytes_per_sec = {transfer_bytes_per_sec} }}\n[node.io]\nscheduler = \"{}\"\n",
        scheduler.name()
    )
}

/// Writes `config` to `dir/node.toml` and starts a cluster with its data in
/// `dir/cluster`, ready for clients.
pub async fn start(
    exe: &Path,
    dir: &Path,
    nodes: u32,
    disks_per_node: u32,
    config: &str,
) -> Result<LocalCluster, BenchError> {
    std::fs::create_dir_all(dir).map_err(BenchError::io("cannot create the run directory"))?;
    let path = dir.join("node.toml");
    std::fs::write(&path, config).map_err(BenchError::io("cannot write the node config"))?;
    let mut cluster = LocalCluster::start(ClusterSpec {
        exe: exe.to_path_buf(),
        data: dir.join("cluster"),
        nodes,
        disks_per_node,
        base_port: 0,
        config: Some(path),
        node_args: Vec::new(),
        tls: false,
    })?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    Ok(cluster)
}

/// A disk of the cluster with the chunks stored on it.
pub struct DiskTarget {
    pub disk: u32,
    pub addr: String,
    pub chunks: Vec<ChunkRef>,
}

/// Deterministic, incompressible-looking data of `len` bytes.
pub fn pattern(len: u64) -> Bytes {
    (0..len).map(|i| (i.wrapping_mul(0x9E37_79B9) >> 13) as u8).collect::<Vec<u8>>().into()
}

/// Writes single-copy one-block files of `block` bytes under `prefix` (the
/// experiments read chunks by disk, so redundancy plays no part), moves
/// chunks so that every disk holds at least `files_per_disk`, and lists each
/// disk's chunks, by disk id.
pub async fn write_data(
    client: &Client,
    block: u64,
    prefix: &str,
    files_per_disk: u32,
) -> Result<Vec<DiskTarget>, BenchError> {
    let data = pattern(block);
    let status = client.cluster_status().await?;
    let disks: u32 = status.nodes.iter().map(|n| n.disks.len() as u32).sum();
    let writes = (0..disks * files_per_disk).map(|i| {
        let data = data.clone();
        async move { client.put(&format!("{prefix}/{i}"), Redundancy::Replicated(1), block, data).await }
    });
    futures::future::try_join_all(writes).await?;
    // (disk, node index, chunks)
    let mut lists = Vec::new();
    for (n, node) in status.nodes.iter().enumerate() {
        for disk in &node.disks {
            lists.push((disk.id, n, client.chunks_on_disk(dingo_types::DiskId(disk.id)).await?));
        }
    }
    // Placement may fill one disk of a node first; move chunks there from
    // the fullest disk of another node (copies may not share a node).
    let want = files_per_disk as usize;
    for i in 0..lists.len() {
        while lists[i].2.len() < want {
            let donor = (0..lists.len()).filter(|&j| lists[j].1 != lists[i].1).max_by_key(|&j| lists[j].2.len());
            let Some(donor) = donor.filter(|&j| lists[j].2.len() > want) else { break };
            let Some(chunk) = lists[donor].2.pop() else { break };
            let tag = IoTag::Maintenance { task: TaskKind::Rebalancing, declaration: DeclarationId(0) };
            client.move_chunk(chunk, Some(dingo_types::DiskId(lists[i].0)), tag).await?;
            lists[i].2.push(chunk);
        }
    }
    let mut targets = Vec::new();
    for (disk, n, chunks) in lists {
        if chunks.is_empty() {
            return Err(BenchError::Setup(format!("disk {disk} holds no chunk after the writes")));
        }
        targets.push(DiskTarget { disk, addr: status.nodes[n].addr.clone(), chunks });
    }
    targets.sort_by_key(|t| t.disk);
    Ok(targets)
}

/// µs since the run's `start` (0 before it).
pub fn since_start_us(start: Instant) -> u64 {
    u64::try_from(Instant::now().saturating_duration_since(start).as_micros()).unwrap_or(u64::MAX)
}

/// A scrub read of `declaration`.
pub fn scrub_tag(declaration: u64) -> IoTag {
    IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(declaration) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_config_parses_as_toml_with_the_given_values() {
        let text = node_config(1 << 20, 8_000, 60_000_000, PolicyKind::Fifo) + "segment = \"1048576\"\n";
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["node"]["pinned"].as_str(), Some("1048576"));
        assert_eq!(v["node"]["cache"].as_str(), Some("0"));
        assert_eq!(v["node"]["fault_injection"].as_bool(), Some(true));
        assert_eq!(v["node"]["hdd"]["positioning_us"].as_integer(), Some(8_000));
        assert_eq!(v["node"]["io"]["scheduler"].as_str(), Some("fifo"));
        assert_eq!(v["node"]["io"]["segment"].as_str(), Some("1048576"));
    }
}
