//! `dingo bench io`: on a fresh local 4-node cluster, client write and read
//! throughput for 3-way replication and RS 6+3 with 8 MB blocks, the disk
//! bytes the nodes wrote per second meanwhile, and — in the same run, on the
//! same filesystem, with the same direct IO — raw sequential write and read
//! throughput. Also Reed-Solomon encode and decode speed on one core.
//!
//! Every figure is the median of `--trials` rounds; each round measures
//! raw, replicated and EC in turn, so load from other processes on a shared
//! machine, and the bursts a virtual disk's host cache sometimes gives, affect
//! all figures alike and single outliers do not decide.

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use clap::Args;
use dingo_client::{Client, IoTag, Redundancy, ec};
use dingo_cluster::{ClusterSpec, LocalCluster};
use dingo_node::chunk::{ChunkWriter, Layout};
use dingo_node::direct::{AlignedBuf, DirectFile};
use dingo_node::disk::Disk;
use dingo_types::{BlockId, ChunkRef, parse_bytes};
use futures::TryStreamExt;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const BLOCK: u64 = 8_000_000;
const NODES: u32 = 4;
/// Raw reads use the size of a client's largest read request.
const RAW_READ: u64 = 8 << 20;

#[derive(Args, Debug)]
pub struct BenchIoArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Bytes written and read per redundancy kind and for the raw test.
    #[arg(long, default_value = "1GB", value_parser = |s: &str| parse_bytes(s).map_err(|e| e.to_string()))]
    pub size: u64,
    /// Directory (on the filesystem to test) for the cluster's data.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Rounds of measurements; each figure is the median over rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: u32,
}

struct Figures {
    client_write_mb_s: f64,
    client_read_mb_s: f64,
    disk_write_mb_s: f64,
    /// CPU seconds per GB of file data, client process and all nodes, while writing and while reading.
    write_cpu: Cpu,
    read_cpu: Cpu,
}

/// CPU seconds (user + system) per GB of file data moved.
#[derive(Clone, Copy)]
struct Cpu {
    client: f64,
    nodes: f64,
}

/// The median of each figure over rounds.
fn median_figures(rounds: &[Figures]) -> Figures {
    let of = |f: &dyn Fn(&Figures) -> f64| median(rounds.iter().map(f).collect());
    Figures {
        client_write_mb_s: of(&|f| f.client_write_mb_s),
        client_read_mb_s: of(&|f| f.client_read_mb_s),
        disk_write_mb_s: of(&|f| f.disk_write_mb_s),
        write_cpu: Cpu { client: of(&|f| f.write_cpu.client), nodes: of(&|f| f.write_cpu.nodes) },
        read_cpu: Cpu { client: of(&|f| f.read_cpu.client), nodes: of(&|f| f.read_cpu.nodes) },
    }
}

/// CPU seconds (user + system, all threads) a process has used so far, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // Fields after the parenthesised command name start at field 3 (state); utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).with_context(|| format!("{path}: no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        fields.get(i).and_then(|f| f.parse().ok()).with_context(|| format!("{path}: bad field {}", i + 3))
    };
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11)? + ticks(12)?) as f64 / hz)
}

/// CPU seconds used so far by this process (the client) and by the cluster's nodes.
fn cpu_now(cluster: &LocalCluster) -> Result<(f64, f64)> {
    let mut nodes = 0.0;
    for i in 0..NODES as usize {
        let pid = cluster.node_pid(i).context("a node is not running")?;
        nodes += cpu_seconds(&pid.to_string())?;
    }
    Ok((cpu_seconds("self")?, nodes))
}

/// CPU seconds per GB of `bytes` of file data since `before` (from [`cpu_now`]).
fn cpu_per_gb(cluster: &LocalCluster, before: (f64, f64), bytes: u64) -> Result<Cpu> {
    let now = cpu_now(cluster)?;
    let gb = bytes as f64 / 1e9;
    Ok(Cpu { client: (now.0 - before.0) / gb, nodes: (now.1 - before.1) / gb })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] }
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
fn raw_throughput(dir: &Path, size: u64) -> Result<(f64, f64)> {
    let (disk, _) = Disk::open(&dir.join("raw"), None, None)?;
    let piece: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let chunks: Vec<ChunkRef> = (0..size.div_ceil(BLOCK)).map(|i| ChunkRef { block: BlockId(i), copy: 0 }).collect();
    let t = Instant::now();
    for &c in &chunks {
        let mut w = ChunkWriter::create(&disk, c, BLOCK)?;
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
        let f = DirectFile::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        f.read_exact_at(&mut buf, layout.data_offset())?;
    }
    let read = mb_s(chunks.len() as u64 * BLOCK, t.elapsed());
    std::fs::remove_dir_all(&disk.path)?;
    Ok((write, read))
}

async fn disk_bytes_written(client: &Client, cluster: &LocalCluster) -> Result<u64> {
    let mut total = 0;
    for i in 0..NODES as usize {
        total += client.node_stats(cluster.node_addr(i)).await?.disks.iter().map(|d| d.bytes_written).sum::<u64>();
    }
    Ok(total)
}

async fn client_throughput(client: &Client, cluster: &LocalCluster, r: Redundancy, data: &Bytes) -> Result<Figures> {
    let path = format!("/bench/{}", r.to_string().replace(':', "-"));
    let n = data.len() as u64;
    let before = disk_bytes_written(client, cluster).await?;
    let cpu = cpu_now(cluster)?;
    let t = Instant::now();
    client.put(&path, r, BLOCK, data.clone()).await?;
    let wt = t.elapsed();
    let write_cpu = cpu_per_gb(cluster, cpu, n)?;
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
    let read_cpu = cpu_per_gb(cluster, cpu, n)?;
    ensure!(got == n, "{r}: read {got} bytes of {n}");
    // Untimed: the content is right.
    ensure!(client.read_file(&file, 0, file.size, IoTag::Foreground).await? == *data, "{r}: data read back differs");
    client.delete(&path).await?;
    Ok(Figures {
        client_write_mb_s: mb_s(n, wt),
        client_read_mb_s: mb_s(n, rt),
        disk_write_mb_s: mb_s(disk, wt),
        write_cpu,
        read_cpu,
    })
}

/// Encode and decode GB/s of RS 6+3 over 8 MB stripes' worth of shards.
fn ec_speed() -> Result<(f64, f64)> {
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
        ensure!(back == stripe[r], "EC decode produced wrong data");
    }
    let decode = (stripe.len() * rounds) as f64 / 1e9 / t.elapsed().as_secs_f64();
    Ok((encode, decode))
}

pub async fn run(a: BenchIoArgs) -> Result<()> {
    crate::storage_cmd::keep_freed_memory();
    std::fs::create_dir_all(&a.dir).with_context(|| format!("cannot create {}", a.dir.display()))?;
    let tmp = tempfile::Builder::new().prefix("dingo-bench-").tempdir_in(&a.dir)?;
    // No node cache: every client read must reach a disk.
    let config = tmp.path().join("bench.toml");
    std::fs::write(&config, "[node]\ncache = \"0\"\npinned = \"0\"\n")?;
    let mut cluster = LocalCluster::start(ClusterSpec {
        exe: std::env::current_exe()?,
        data: tmp.path().join("cluster"),
        nodes: NODES,
        disks_per_node: 1,
        base_port: 0,
        config: Some(config),
        node_args: Vec::new(),
    })?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let client = Client::new(cluster.meta_addr())?;
    let data: Bytes = (0..a.size).map(|i| (i.wrapping_mul(0x9E37_79B9) >> 13) as u8).collect::<Vec<u8>>().into();
    let (mut raw, mut reps, mut ecs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..a.trials {
        raw.push(raw_throughput(tmp.path(), a.size)?);
        reps.push(client_throughput(&client, &cluster, Redundancy::Replicated(3), &data).await?);
        ecs.push(client_throughput(&client, &cluster, Redundancy::Ec { data: 6, parity: 3 }, &data).await?);
    }
    drop(cluster);
    let raw_write = median(raw.iter().map(|r| r.0).collect());
    let raw_read = median(raw.iter().map(|r| r.1).collect());
    let (rep, ec) = (median_figures(&reps), median_figures(&ecs));
    let (enc, dec) = ec_speed()?;
    let figures = |f: &Figures| {
        json!({
            "client_read_mb_s": round(f.client_read_mb_s),
            "client_write_mb_s": round(f.client_write_mb_s),
            "disk_write_mb_s": round(f.disk_write_mb_s),
            "write_cpu_s_per_gb": {"client": round(f.write_cpu.client), "nodes": round(f.write_cpu.nodes)},
            "read_cpu_s_per_gb": {"client": round(f.read_cpu.client), "nodes": round(f.read_cpu.nodes)},
        })
    };
    if a.json {
        let out = json!({
            "replicated": figures(&rep),
            "ec": figures(&ec),
            "raw_read_mb_s": round(raw_read),
            "raw_write_mb_s": round(raw_write),
            "ec_encode_gb_s": round(enc),
            "ec_decode_gb_s": round(dec),
            "bytes": a.size,
            "trials": a.trials,
            "block_bytes": BLOCK,
            "nodes": NODES,
        });
        println!("{out}");
    } else {
        println!("{} MB per test, {NODES} nodes, 8 MB blocks, median of {} trials", a.size / 1_000_000, a.trials);
        println!("raw filesystem (direct IO): write {raw_write:.0} MB/s, read {raw_read:.0} MB/s");
        for (name, f) in [("replicated:3", &rep), ("ec:6+3", &ec)] {
            println!(
                "{name:<13} client write {:.0} MB/s (disks {:.0} MB/s = {:.0}% of raw), client read {:.0} MB/s ({:.0}% of raw)",
                f.client_write_mb_s,
                f.disk_write_mb_s,
                100.0 * f.disk_write_mb_s / raw_write,
                f.client_read_mb_s,
                100.0 * f.client_read_mb_s / raw_read
            );
            println!(
                "{:<13} CPU s per GB: writes {:.2} client + {:.2} nodes, reads {:.2} client + {:.2} nodes",
                "", f.write_cpu.client, f.write_cpu.nodes, f.read_cpu.client, f.read_cpu.nodes
            );
        }
        println!("RS 6+3 on one core: encode {enc:.2} GB/s, decode {dec:.2} GB/s");
    }
    Ok(())
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        let rounds: Vec<Figures> = [1.0, 9.0, 5.0]
            .iter()
            .map(|&x| Figures {
                client_write_mb_s: x,
                client_read_mb_s: 2.0 * x,
                disk_write_mb_s: 3.0 * x,
                write_cpu: Cpu { client: 4.0 * x, nodes: 5.0 * x },
                read_cpu: Cpu { client: 6.0 * x, nodes: 7.0 * x },
            })
            .collect();
        let m = median_figures(&rounds);
        assert_eq!((m.client_write_mb_s, m.client_read_mb_s, m.disk_write_mb_s), (5.0, 10.0, 15.0));
        assert_eq!(
            (m.write_cpu.client, m.write_cpu.nodes, m.read_cpu.client, m.read_cpu.nodes),
            (20.0, 25.0, 30.0, 35.0)
        );
    }

    #[test]
    fn own_cpu_time_is_read_and_grows() {
        // Spinning must show up as CPU time within seconds (the clock ticks at ~10 ms).
        let before = cpu_seconds("self").unwrap();
        let mut x = 0u64;
        let t = Instant::now();
        while cpu_seconds("self").unwrap() == before {
            assert!(t.elapsed() < Duration::from_secs(10), "CPU time did not grow");
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        assert!(cpu_seconds("0").is_err());
    }
}
