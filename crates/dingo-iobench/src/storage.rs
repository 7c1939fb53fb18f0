//! The storage benchmark behind `dingo bench io`: on a fresh local 4-node
//! cluster, client write and read throughput for 3-way replication and RS
//! 6+3 with 8 MB blocks, the disk bytes the nodes wrote per second
//! meanwhile, and — in the same run, on the same filesystem, with the same
//! direct IO — raw sequential write and read throughput. Also Reed-Solomon
//! encode and decode speed on one core.
//!
//! Every figure is the median of `trials` rounds; each round measures raw,
//! replicated and EC in turn, so load from other processes on a shared
//! machine, and the bursts a virtual disk's host cache sometimes gives,
//! affect all figures alike and single outliers do not decide.

use crate::BenchError;
use crate::cluster::pattern;
use crate::proc::process_cpu_seconds;
use crate::stats::median;
use bytes::Bytes;
use dingo_client::{Client, IoTag, Redundancy, ec};
use dingo_cluster::LocalCluster;
use dingo_node::chunk::{ChunkWriter, Layout};
use dingo_node::direct::{AlignedBuf, DirectFile};
use dingo_node::disk::Disk;
use dingo_types::{BlockId, ChunkRef};
use futures::TryStreamExt;
use serde::{Serialize, Serializer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const BLOCK: u64 = 8_000_000;
const NODES: u32 = 4;
/// Raw reads use the size of a client's largest read request.
const RAW_READ: u64 = 8 << 20;

#[derive(Clone, Debug)]
pub struct StorageOptions {
    /// The `dingo` executable the cluster runs.
    pub exe: PathBuf,
    /// Directory (on the filesystem to test) for the cluster's data.
    pub dir: PathBuf,
    /// Bytes written and read per redundancy kind and for the raw test.
    pub bytes: u64,
    /// Rounds of measurements; each figure is the median over rounds.
    pub trials: u32,
}

/// The benchmark's figures. Fields are in alphabetical order, the order
/// of the JSON the command has always printed; figures are rounded to two
/// decimals there.
#[derive(Clone, Debug, Serialize)]
pub struct StorageReport {
    pub block_bytes: u64,
    pub bytes: u64,
    pub ec: ClientFigures,
    #[serde(serialize_with = "two_decimals")]
    pub ec_decode_gb_s: f64,
    #[serde(serialize_with = "two_decimals")]
    pub ec_encode_gb_s: f64,
    pub nodes: u32,
    #[serde(serialize_with = "two_decimals")]
    pub raw_read_mb_s: f64,
    #[serde(serialize_with = "two_decimals")]
    pub raw_write_mb_s: f64,
    pub replicated: ClientFigures,
    pub trials: u32,
}

/// One redundancy kind through the client.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ClientFigures {
    #[serde(serialize_with = "two_decimals")]
    pub client_read_mb_s: f64,
    #[serde(serialize_with = "two_decimals")]
    pub client_write_mb_s: f64,
    #[serde(serialize_with = "two_decimals")]
    pub disk_write_mb_s: f64,
    /// CPU seconds per GB of file data, client process and all nodes,
    /// while reading and while writing.
    pub read_cpu_s_per_gb: CpuPerGb,
    pub write_cpu_s_per_gb: CpuPerGb,
}

/// CPU seconds (user + system) per GB of file data moved.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CpuPerGb {
    #[serde(serialize_with = "two_decimals")]
    pub client: f64,
    #[serde(serialize_with = "two_decimals")]
    pub nodes: f64,
}

fn two_decimals<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((x * 100.0).round() / 100.0)
}

/// Runs the benchmark.
pub async fn run(opts: &StorageOptions) -> Result<StorageReport, BenchError> {
    std::fs::create_dir_all(&opts.dir).map_err(BenchError::io(format!("cannot create {}", opts.dir.display())))?;
    let tmp = tempfile::Builder::new()
        .prefix("dingo-bench-")
        .tempdir_in(&opts.dir)
        .map_err(BenchError::io(format!("cannot create a directory in {}", opts.dir.display())))?;
    // No node cache: every client read must reach a disk.
    let config = "[node]\ncache = \"0\"\npinned = \"0\"\n";
    let cluster = crate::cluster::start(&opts.exe, tmp.path(), NODES, 1, config).await?;
    let client = cluster.client()?;
    let data = pattern(opts.bytes);
    let (mut raw, mut reps, mut ecs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..opts.trials {
        raw.push(raw_throughput(tmp.path(), opts.bytes)?);
        reps.push(client_throughput(&client, &cluster, Redundancy::Replicated(3), &data).await?);
        ecs.push(client_throughput(&client, &cluster, Redundancy::Ec { data: 6, parity: 3 }, &data).await?);
    }
    drop(cluster);
    let (ec_encode_gb_s, ec_decode_gb_s) = ec_speed()?;
    Ok(StorageReport {
        block_bytes: BLOCK,
        bytes: opts.bytes,
        ec: median_figures(&ecs),
        ec_decode_gb_s,
        ec_encode_gb_s,
        nodes: NODES,
        raw_read_mb_s: median(raw.iter().map(|r| r.1).collect()),
        raw_write_mb_s: median(raw.iter().map(|r| r.0).collect()),
        replicated: median_figures(&reps),
        trials: opts.trials,
    })
}

impl fmt::Display for StorageReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (raw_write, raw_read) = (self.raw_write_mb_s, self.raw_read_mb_s);
        writeln!(
            f,
            "{} MB per test, {} nodes, 8 MB blocks, median of {} trials",
            self.bytes / 1_000_000,
            self.nodes,
            self.trials
        )?;
        writeln!(f, "raw filesystem (direct IO): write {raw_write:.0} MB/s, read {raw_read:.0} MB/s")?;
        for (name, c) in [("replicated:3", &self.replicated), ("ec:6+3", &self.ec)] {
            writeln!(
                f,
                "{name:<13} client write {:.0} MB/s (disks {:.0} MB/s = {:.0}% of raw), client read {:.0} MB/s ({:.0}% of raw)",
                c.client_write_mb_s,
                c.disk_write_mb_s,
                100.0 * c.disk_write_mb_s / raw_write,
                c.client_read_mb_s,
                100.0 * c.client_read_mb_s / raw_read
            )?;
            writeln!(
                f,
                "{:<13} CPU s per GB: writes {:.2} client + {:.2} nodes, reads {:.2} client + {:.2} nodes",
                "",
                c.write_cpu_s_per_gb.client,
                c.write_cpu_s_per_gb.nodes,
                c.read_cpu_s_per_gb.client,
                c.read_cpu_s_per_gb.nodes
            )?;
        }
        write!(f, "RS 6+3 on one core: encode {:.2} GB/s, decode {:.2} GB/s", self.ec_encode_gb_s, self.ec_decode_gb_s)
    }
}

/// The median of each figure over rounds.
fn median_figures(rounds: &[ClientFigures]) -> ClientFigures {
    let of = |f: &dyn Fn(&ClientFigures) -> f64| median(rounds.iter().map(f).collect());
    ClientFigures {
        client_read_mb_s: of(&|f| f.client_read_mb_s),
        client_write_mb_s: of(&|f| f.client_write_mb_s),
        disk_write_mb_s: of(&|f| f.disk_write_mb_s),
        read_cpu_s_per_gb: CpuPerGb {
            client: of(&|f| f.read_cpu_s_per_gb.client),
            nodes: of(&|f| f.read_cpu_s_per_gb.nodes),
        },
        write_cpu_s_per_gb: CpuPerGb {
            client: of(&|f| f.write_cpu_s_per_gb.client),
            nodes: of(&|f| f.write_cpu_s_per_gb.nodes),
        },
    }
}

fn cpu_seconds(pid: &str) -> Result<f64, BenchError> {
    process_cpu_seconds(pid).map_err(BenchError::io(format!("cannot read the CPU time of process {pid}")))
}

/// CPU seconds used so far by this process (the client) and by the cluster's nodes.
fn cpu_now(cluster: &LocalCluster) -> Result<(f64, f64), BenchError> {
    let mut nodes = 0.0;
    for i in 0..NODES as usize {
        let pid = cluster.node_pid(i).ok_or_else(|| BenchError::Setup("a node is not running".into()))?;
        nodes += cpu_seconds(&pid.to_string())?;
    }
    Ok((cpu_seconds("self")?, nodes))
}

/// CPU seconds per GB of `bytes` of file data since `before` (from [`cpu_now`]).
fn cpu_per_gb(cluster: &LocalCluster, before: (f64, f64), bytes: u64) -> Result<CpuPerGb, BenchError> {
    let now = cpu_now(cluster)?;
    let gb = bytes as f64 / 1e9;
    Ok(CpuPerGb { client: (now.0 - before.0) / gb, nodes: (now.1 - before.1) / gb })
}

fn mb_s(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

/// Raw filesystem throughput with exactly the nodes' IO discipline, so that
/// the client figures compare like with like: chunk files of one block each
/// are written one after another by the node's own [`ChunkWriter`] (1 MiB
/// `O_DIRECT` writes, header and checksum table, `fdatasync`, link into
/// `chunks/`, directory fsync), fed in the client's 1 MiB stream pieces; then
/// each chunk's data is read back with one direct read of the client's read
/// request size. Write MB/s counts the bytes the disk wrote (as the nodes'
/// `disk_write_mb_s` does); read MB/s counts data bytes (as client reads do).
fn raw_throughput(dir: &Path, size: u64) -> Result<(f64, f64), BenchError> {
    let (disk, _) = Disk::open(&dir.join("raw"), None, None)?;
    let piece: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let chunks: Vec<ChunkRef> = (0..size.div_ceil(BLOCK)).map(|i| ChunkRef { block: BlockId(i), copy: 0 }).collect();
    let t = Instant::now();
    for &c in &chunks {
        let mut w = ChunkWriter::create(&disk, c, BLOCK, IoTag::Foreground)?;
        let mut left = BLOCK as usize;
        while left > 0 {
            let n = left.min(piece.len());
            w.append(&piece[..n])?;
            left -= n;
        }
        w.seal()?;
    }
    let write = mb_s(disk.counters.bytes_written.load(Relaxed), t.elapsed());
    // A client reads a block with one request, as here.
    const _: () = assert!(BLOCK <= RAW_READ);
    let layout = Layout { data_len: BLOCK };
    let mut buf = AlignedBuf::zeroed(BLOCK as usize);
    let t = Instant::now();
    for &c in &chunks {
        let path = disk.chunk_path(c);
        let f = DirectFile::open(&path).map_err(BenchError::io(format!("cannot open {}", path.display())))?;
        f.read_exact_at(&mut buf, layout.data_offset())
            .map_err(BenchError::io(format!("cannot read {}", path.display())))?;
    }
    let read = mb_s(chunks.len() as u64 * BLOCK, t.elapsed());
    std::fs::remove_dir_all(&disk.path).map_err(BenchError::io(format!("cannot remove {}", disk.path.display())))?;
    Ok((write, read))
}

async fn disk_bytes_written(client: &Client, cluster: &LocalCluster) -> Result<u64, BenchError> {
    let mut total = 0;
    for i in 0..NODES as usize {
        total += client.node_stats(cluster.node_addr(i)).await?.disks.iter().map(|d| d.bytes_written).sum::<u64>();
    }
    Ok(total)
}

async fn client_throughput(
    client: &Client,
    cluster: &LocalCluster,
    r: Redundancy,
    data: &Bytes,
) -> Result<ClientFigures, BenchError> {
    let path = format!("/bench/{}", r.to_string().replace(':', "-"));
    let n = data.len() as u64;
    let before = disk_bytes_written(client, cluster).await?;
    let cpu = cpu_now(cluster)?;
    let t = Instant::now();
    client.put(&path, r, BLOCK, data.clone()).await?;
    let wt = t.elapsed();
    let write_cpu_s_per_gb = cpu_per_gb(cluster, cpu, n)?;
    let disk = disk_bytes_written(client, cluster).await? - before;
    // Timed: a reader consuming pieces as they come (no copy into one
    // buffer, memory reused), like `dingo fs get`.
    let cpu = cpu_now(cluster)?;
    let t = Instant::now();
    let file = client.stat(&path).await?;
    let mut pieces = client.read_pieces(&file, 0, file.size, IoTag::Foreground)?;
    let mut got = 0;
    while let Some(piece) = pieces.try_next().await? {
        got += piece.len() as u64;
    }
    let rt = t.elapsed();
    let read_cpu_s_per_gb = cpu_per_gb(cluster, cpu, n)?;
    if got != n {
        return Err(BenchError::Check(format!("{r}: read {got} bytes of {n}")));
    }
    // Untimed: the content is right.
    if client.read_file(&file, 0, file.size, IoTag::Foreground).await? != *data {
        return Err(BenchError::Check(format!("{r}: data read back differs")));
    }
    client.delete(&path).await?;
    Ok(ClientFigures {
        client_read_mb_s: mb_s(n, rt),
        client_write_mb_s: mb_s(n, wt),
        disk_write_mb_s: mb_s(disk, wt),
        read_cpu_s_per_gb,
        write_cpu_s_per_gb,
    })
}

/// Encode and decode GB/s of RS 6+3 over 8 MB stripes' worth of shards.
fn ec_speed() -> Result<(f64, f64), BenchError> {
    let (k, m) = (6, 3);
    let stripe: Vec<u8> = (0..48_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let rounds = 5;
    let t = Instant::now();
    let mut parity = Vec::new();
    for _ in 0..rounds {
        parity = ec::encode(&stripe, k, m)?;
    }
    let encode = (stripe.len() * rounds) as f64 / 1e9 / t.elapsed().as_secs_f64();
    let shard = ec::shard_len(stripe.len(), k);
    // Lose three data members: the worst case for a 6+3 decode.
    let mut members: Vec<Option<&[u8]>> = (0..k).map(|i| Some(&stripe[ec::member_range(stripe.len(), k, i)])).collect();
    members.extend(parity.iter().map(|p| Some(p.as_slice())));
    for lost in [0, 2, 4] {
        members[lost] = None;
    }
    let t = Instant::now();
    for _ in 0..rounds {
        let r = ec::member_range(stripe.len(), k, 0);
        let back = ec::reconstruct(&members, k, m, shard, 0, r.len())?;
        if back != stripe[r] {
            return Err(BenchError::Check("EC decode produced wrong data".into()));
        }
    }
    let decode = (stripe.len() * rounds) as f64 / 1e9 / t.elapsed().as_secs_f64();
    Ok((encode, decode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(x: f64) -> ClientFigures {
        ClientFigures {
            client_write_mb_s: x,
            client_read_mb_s: 2.0 * x,
            disk_write_mb_s: 3.0 * x,
            write_cpu_s_per_gb: CpuPerGb { client: 4.0 * x, nodes: 5.0 * x },
            read_cpu_s_per_gb: CpuPerGb { client: 6.0 * x, nodes: 7.0 * x },
        }
    }

    #[test]
    fn figures_are_medians_over_rounds() {
        let m = median_figures(&[figures(1.0), figures(9.0), figures(5.0)]);
        assert_eq!((m.client_write_mb_s, m.client_read_mb_s, m.disk_write_mb_s), (5.0, 10.0, 15.0));
        assert_eq!(
            (
                m.write_cpu_s_per_gb.client,
                m.write_cpu_s_per_gb.nodes,
                m.read_cpu_s_per_gb.client,
                m.read_cpu_s_per_gb.nodes
            ),
            (20.0, 25.0, 30.0, 35.0)
        );
    }

    #[test]
    fn the_json_keeps_its_keys_and_rounds_to_two_decimals() {
        let report = StorageReport {
            block_bytes: BLOCK,
            bytes: 1_000_000,
            ec: figures(1.0 / 3.0),
            ec_decode_gb_s: 2.345_6,
            ec_encode_gb_s: 1.0,
            nodes: NODES,
            raw_read_mb_s: 100.004,
            raw_write_mb_s: 99.996,
            replicated: figures(1.0),
            trials: 1,
        };
        let json = serde_json::to_string(&report).unwrap();
        assert!(json.starts_with(
            "{\"block_bytes\":8000000,\"bytes\":1000000,\"ec\":{\"client_read_mb_s\":0.67,\"client_write_mb_s\":0.33,\
             \"disk_write_mb_s\":1.0,\"read_cpu_s_per_gb\":{\"client\":2.0,\"nodes\":2.33},\"write_cpu_s_per_gb\":\
             {\"client\":1.33,\"nodes\":1.67}},\"ec_decode_gb_s\":2.35,\"ec_encode_gb_s\":1.0,\"nodes\":4,\
             \"raw_read_mb_s\":100.0,\"raw_write_mb_s\":100.0,\"replicated\":"
        ));
        assert!(json.ends_with(",\"trials\":1}"), "{json}");
        let text = report.to_string();
        assert!(text.starts_with("1 MB per test, 4 nodes, 8 MB blocks, median of 1 trials\n"), "{text}");
        assert!(text.ends_with("RS 6+3 on one core: encode 1.00 GB/s, decode 2.35 GB/s"), "{text}");
    }
}
