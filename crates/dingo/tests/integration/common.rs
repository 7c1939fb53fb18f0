//! Helpers shared by the process-test modules: a local cluster in a
//! temporary directory, deterministic data, and damage to chunk files.

use bytes::Bytes;
use dingo_client::Client;
use dingo_cluster::{ClusterSpec, LocalCluster, PlannerProcess, PlannerSpec};
use dingo_planner_service::{ClientEntry, ServiceConfig};
use dingo_types::ChunkRef;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const EXE: &str = env!("CARGO_BIN_EXE_dingo");

/// The JSON a `dingo ... --json` run printed, after checking it succeeded;
/// failures show its stderr.
pub fn json_of_success(out: &std::process::Output, what: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

/// Starts a cluster of `nodes` nodes with `disks_per_node` disks each, every
/// daemon reading `config` (TOML), in a fresh temporary directory, and waits
/// until every node is alive. Keep the directory alive (and drop it last)
/// for as long as the cluster runs.
pub async fn start_cluster(
    nodes: u32,
    disks_per_node: u32,
    config: &str,
    node_args: &[&str],
) -> (LocalCluster, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("dingo.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut c = LocalCluster::start(ClusterSpec {
        exe: EXE.into(),
        data: dir.path().join("data"),
        nodes,
        disks_per_node,
        base_port: 0,
        config: Some(config_path),
        node_args: node_args.iter().map(|s| s.to_string()).collect(),
        tls: false,
    })
    .unwrap();
    c.wait_ready(Duration::from_secs(30)).await.unwrap();
    (c, dir)
}

/// A cluster of one-disk nodes with a client, and the directory it lives in.
pub struct TestCluster {
    pub c: LocalCluster,
    pub client: Client,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    pub async fn start(nodes: u32, config: &str) -> TestCluster {
        let (c, dir) = start_cluster(nodes, 1, config, &[]).await;
        let client = c.client().unwrap();
        TestCluster { c, client, _dir: dir }
    }
}

/// Starts a `dingo planner` process for `cluster` in `dir`
/// (quantum 1 s, dispatches 250 ms apart, per-quantum budget
/// `cluster_bytes`), with admin token `admin` and one task client per name
/// in `clients`, whose token is `<name>-token`.
pub fn start_planner(
    cluster: &LocalCluster,
    dir: &Path,
    admin: &str,
    clients: &[&str],
    cluster_bytes: u64,
) -> PlannerProcess {
    let mut cfg = ServiceConfig::new(admin);
    cfg.meta = cluster.meta_addr().to_string();
    cfg.quantum_ms = 1000;
    cfg.dispatch_spacing_ms = 250;
    cfg.budget.cluster_bytes = Some(dingo_types::ByteLimit::Bytes(cluster_bytes));
    cfg.clients = clients.iter().map(|c| ClientEntry { name: c.to_string(), token: format!("{c}-token") }).collect();
    spawn_planner(cluster, dir, "planner", &cfg)
}

/// Writes `cfg` to `dir/{name}.toml` and starts a `dingo planner` for
/// `cluster` with it, its data in `dir/{name}` and its log in
/// `dir/{name}.log`.
pub fn spawn_planner(cluster: &LocalCluster, dir: &Path, name: &str, cfg: &ServiceConfig) -> PlannerProcess {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, cfg.to_toml()).unwrap();
    PlannerProcess::start(PlannerSpec {
        exe: EXE.into(),
        config,
        data: dir.join(name),
        log: dir.join(format!("{name}.log")),
        storage: cluster.credentials().auth.clone(),
    })
    .unwrap()
}

/// What a `dingo` command needs to reach a cluster: the metadata service's
/// address and the cluster secret's file, given as environment variables.
#[derive(Clone, Debug)]
pub struct CliTarget {
    pub meta: String,
    pub secret_file: PathBuf,
}

impl CliTarget {
    pub fn of(c: &LocalCluster) -> CliTarget {
        let secret_file = c.credentials().auth.secret_file.clone().expect("a local cluster has a secret");
        CliTarget { meta: c.meta_addr().to_string(), secret_file }
    }

    /// `dingo` with `DINGO_META` and `DINGO_SECRET_FILE` set.
    pub fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(EXE);
        cmd.env("DINGO_META", &self.meta).env("DINGO_SECRET_FILE", &self.secret_file);
        cmd
    }
}

/// `len` deterministic bytes that differ with `seed`.
pub fn data(len: u64, seed: u64) -> Bytes {
    (0..len).map(|i| ((i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect::<Vec<u8>>().into()
}

/// Path of the chunk file of `chunk` stored on disk `disk`.
pub async fn chunk_file(client: &Client, disk: u32, chunk: ChunkRef) -> PathBuf {
    let status = client.cluster_status().await.unwrap();
    let d = status.nodes.iter().flat_map(|n| &n.disks).find(|d| d.id == disk).unwrap();
    PathBuf::from(&d.path).join("chunks").join(format!("{}.{}", chunk.block.0, chunk.copy))
}

/// Flips one data byte of a chunk file (data starts at 8192 for chunks of
/// at most 64 MiB).
pub fn flip_byte(path: &Path, at: u64) {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(8192 + at)).unwrap();
    let mut b = [0u8];
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(8192 + at)).unwrap();
    f.write_all(&[b[0] ^ 0x5a]).unwrap();
    f.sync_all().unwrap();
}

/// Replaces the chunk file at `path` with a well-formed one holding `data`
/// for `chunk` (the format of `docs/STORAGE.md`: header, checksum table,
/// data, each 4096-aligned), as a disk could hold after a bug or a stray
/// restore: every checksum matches, only the length differs from what the
/// metadata service recorded. Written aside and renamed in.
pub fn write_chunk_file(path: &Path, chunk: ChunkRef, data: &[u8]) {
    const ALIGN: usize = 4096;
    const SEGMENT: usize = 64 * 1024;
    let align = |n: usize| n.div_ceil(ALIGN) * ALIGN;
    let table: Vec<u8> = data.chunks(SEGMENT).flat_map(|s| crc32c::crc32c(s).to_le_bytes()).collect();
    let mut header = vec![0u8; ALIGN];
    header[0..8].copy_from_slice(b"DINGOCK1");
    header[8..12].copy_from_slice(&(SEGMENT as u32).to_le_bytes());
    header[12..20].copy_from_slice(&chunk.block.0.to_le_bytes());
    header[20..24].copy_from_slice(&u32::from(chunk.copy).to_le_bytes());
    header[24..32].copy_from_slice(&(data.len() as u64).to_le_bytes());
    header[32..36].copy_from_slice(&crc32c::crc32c(&table).to_le_bytes());
    let crc = crc32c::crc32c(&header[0..36]);
    header[36..40].copy_from_slice(&crc.to_le_bytes());
    let mut file = header;
    let table_len = align(table.len());
    file.extend_from_slice(&table);
    file.resize(ALIGN + table_len, 0);
    file.extend_from_slice(data);
    file.resize(ALIGN + table_len + align(data.len()), 0);
    let tmp = path.with_extension("replacing");
    std::fs::write(&tmp, &file).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The value of the `/metrics` sample whose name and labels are `prefix`.
pub fn sample(page: &str, prefix: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(prefix)?.strip_prefix(' ')?.trim().parse().ok())
}
