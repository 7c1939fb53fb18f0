//! Typed views of the cluster and its files for programs and people: each
//! serializes to the JSON of `dingo cluster status --json` and `dingo fs
//! ls|stat --json`, and renders (`Display`) as their text. Fields are
//! declared in alphabetical order because that is the order the JSON has
//! always had.

use crate::{DeviceState, FileInfo, Health};
use dingo_proto::v1::{ClusterStatusReply, DiskStatus, NodeStatus};
use dingo_types::{BlockId, DiskId, NodeId, format_bytes};
use serde::{Serialize, Serializer};
use std::fmt;

/// The operator's name of a device state (`LIVE`, `DEAD`, ...).
pub fn state_name(state: DeviceState) -> &'static str {
    match state {
        DeviceState::Live => "LIVE",
        DeviceState::Dead => "DEAD",
        DeviceState::Draining => "DRAINING",
        DeviceState::Decommissioned => "DECOMMISSIONED",
        DeviceState::Unspecified => "UNSPECIFIED",
    }
}

fn serialize_state<S: Serializer>(state: &DeviceState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state_name(*state))
}

/// Nodes, disks, usage and liveness (`dingo cluster status`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterView {
    /// Block records, sealed or not.
    pub blocks: u64,
    pub files: u64,
    pub nodes: Vec<NodeView>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeView {
    pub addr: String,
    /// Heartbeating.
    pub alive: bool,
    pub disks: Vec<DiskView>,
    /// None if no heartbeat came since the metadata service started.
    pub heartbeat_age_ms: Option<u64>,
    pub id: NodeId,
    #[serde(serialize_with = "serialize_state")]
    pub state: DeviceState,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskView {
    #[serde(rename = "capacity")]
    pub capacity_bytes: u64,
    pub chunks: u64,
    /// While draining: what block records still place on the disk.
    #[serde(rename = "drain_bytes_left")]
    pub drain_left_bytes: u64,
    pub drain_chunks_left: u64,
    pub id: DiskId,
    /// Left out of its heartbeating node's last report.
    pub left_out: bool,
    pub path: String,
    #[serde(serialize_with = "serialize_state")]
    pub state: DeviceState,
    #[serde(rename = "used")]
    pub used_bytes: u64,
}

impl From<&DiskStatus> for DiskView {
    fn from(d: &DiskStatus) -> DiskView {
        DiskView {
            capacity_bytes: d.capacity,
            chunks: d.chunks,
            drain_left_bytes: d.drain_bytes_left,
            drain_chunks_left: d.drain_chunks_left,
            id: DiskId(d.id),
            left_out: d.left_out,
            path: d.path.clone(),
            state: d.state(),
            used_bytes: d.used,
        }
    }
}

impl From<&NodeStatus> for NodeView {
    fn from(n: &NodeStatus) -> NodeView {
        NodeView {
            addr: n.addr.clone(),
            alive: n.alive,
            disks: n.disks.iter().map(DiskView::from).collect(),
            // The wire says "never" with u64::MAX.
            heartbeat_age_ms: (n.heartbeat_age_ms != u64::MAX).then_some(n.heartbeat_age_ms),
            id: NodeId(n.id),
            state: n.state(),
        }
    }
}

impl From<&ClusterStatusReply> for ClusterView {
    fn from(s: &ClusterStatusReply) -> ClusterView {
        ClusterView { blocks: s.blocks, files: s.files, nodes: s.nodes.iter().map(NodeView::from).collect() }
    }
}

impl fmt::Display for ClusterView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} file(s), {} block record(s)", self.files, self.blocks)?;
        writeln!(f, "{:<5} {:<22} {:<6} {:<14} {:>8}  disks", "node", "address", "hb", "state", "hb age")?;
        for n in &self.nodes {
            let age = n.heartbeat_age_ms.map_or_else(|| "-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
            let hb = if n.alive { "alive" } else { "silent" };
            writeln!(f, "{:<5} {:<22} {:<6} {:<14} {:>8}", n.id.0, n.addr, hb, state_name(n.state), age)?;
            for d in &n.disks {
                let left = if d.state == DeviceState::Draining {
                    format!("  ({} chunk(s), {} left to move)", d.drain_chunks_left, format_bytes(d.drain_left_bytes))
                } else {
                    String::new()
                };
                let state =
                    if d.left_out { format!("{} silent", state_name(d.state)) } else { state_name(d.state).into() };
                writeln!(
                    f,
                    "        disk {:<4} {:<14} {:>12} used of {:>12}  {:>6} chunks  {}{left}",
                    d.id.0,
                    state,
                    format_bytes(d.used_bytes),
                    format_bytes(d.capacity_bytes),
                    d.chunks,
                    d.path
                )?;
            }
        }
        Ok(())
    }
}

/// The text of `dingo cluster health`.
impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn ids(raw: impl Iterator<Item = u32>) -> String {
            let raw: Vec<u32> = raw.collect();
            if raw.is_empty() { String::new() } else { format!(" {raw:?}") }
        }
        let nodes = |v: &[NodeId]| ids(v.iter().map(|n| n.0));
        let disks = |v: &[DiskId]| ids(v.iter().map(|d| d.0));
        writeln!(f, "{}", self.status)?;
        writeln!(
            f,
            "nodes: {} live, {} silent{}, {} dead{}, {} draining{}, {} decommissioned{}",
            self.nodes_live.len(),
            self.nodes_silent.len(),
            nodes(&self.nodes_silent),
            self.nodes_dead.len(),
            nodes(&self.nodes_dead),
            self.nodes_draining.len(),
            nodes(&self.nodes_draining),
            self.nodes_decommissioned.len(),
            nodes(&self.nodes_decommissioned)
        )?;
        let draining: Vec<DiskId> = self.disks_draining.iter().map(|d| d.disk).collect();
        writeln!(
            f,
            "disks: {} live, {} silent{}, {} dead{}, {} draining{}, {} decommissioned{}",
            self.disks_live,
            self.disks_silent.len(),
            disks(&self.disks_silent),
            self.disks_dead.len(),
            disks(&self.disks_dead),
            draining.len(),
            disks(&draining),
            self.disks_decommissioned.len(),
            disks(&self.disks_decommissioned)
        )?;
        writeln!(f, "data:  {} file(s), {} sealed block(s)", self.files, self.blocks)?;
        writeln!(
            f,
            "redundancy: {} block(s) under-replicated, {} lost; {} chunk(s) lost, {} corrupt",
            self.under_replicated, self.lost_blocks, self.lost_chunks, self.corrupt_chunks
        )?;
        writeln!(f, "files: {} open, {} with an expired lease", self.open_files, self.expired_leases)?;
        writeln!(f, "repair outstanding: {} chunk(s)", self.repair_outstanding)?;
        writeln!(
            f,
            "moves outstanding (draining): {} chunk(s), {}",
            self.moves_outstanding,
            format_bytes(self.move_bytes_outstanding)
        )
    }
}

/// A file's state for listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileState {
    Sealed,
    Open,
    /// Open with its writer's lease expired: lease recovery will close it.
    LeaseExpired,
}

impl FileState {
    pub fn of(file: &FileInfo, now_ms: u64) -> FileState {
        match (file.sealed, file.lease_expiry_ms < now_ms) {
            (true, _) => FileState::Sealed,
            (false, false) => FileState::Open,
            (false, true) => FileState::LeaseExpired,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FileState::Sealed => "sealed",
            FileState::Open => "open",
            FileState::LeaseExpired => "open, lease expired",
        }
    }
}

impl Serialize for FileState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One file (`dingo fs stat`; in a [`Listing`] without its blocks).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileView {
    #[serde(rename = "block_size")]
    pub block_size_bytes: u64,
    /// Present in `stat`, not in listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<Vec<BlockView>>,
    pub created_ms: u64,
    pub path: String,
    /// `replicated:R` or `ec:K+M`; empty if the record names none.
    pub redundancy: String,
    pub sealed: bool,
    #[serde(rename = "size")]
    pub size_bytes: u64,
    pub state: FileState,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockView {
    pub chunks: Vec<ChunkView>,
    pub group: u64,
    pub id: BlockId,
    /// Position in its EC stripe (0 for a replicated block).
    pub member: u32,
    #[serde(rename = "size")]
    pub size_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChunkView {
    pub addr: String,
    pub copy: u32,
    pub disk: DiskId,
    pub lost: bool,
    pub node: NodeId,
}

impl FileView {
    /// The view of `file` at `now_ms` (which decides whether its lease
    /// expired), with its blocks if `with_blocks`.
    pub fn new(file: &FileInfo, now_ms: u64, with_blocks: bool) -> FileView {
        let blocks = with_blocks.then(|| {
            file.blocks
                .iter()
                .map(|b| BlockView {
                    chunks: b
                        .chunks
                        .iter()
                        .map(|c| ChunkView {
                            addr: c.addr.clone(),
                            copy: c.copy,
                            disk: DiskId(c.disk),
                            lost: c.lost,
                            node: NodeId(c.node),
                        })
                        .collect(),
                    group: b.group,
                    id: BlockId(b.id),
                    member: b.ec_index,
                    size_bytes: b.size,
                })
                .collect()
        });
        FileView {
            block_size_bytes: file.block_size,
            blocks,
            created_ms: file.created_ms,
            path: file.path.clone(),
            redundancy: dingo_proto::redundancy(file.redundancy.as_ref()).map(|r| r.to_string()).unwrap_or_default(),
            sealed: file.sealed,
            size_bytes: file.size,
            state: FileState::of(file, now_ms),
        }
    }
}

/// The text of `dingo fs stat`: the file, then one line per block.
impl fmt::Display for FileView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} ({} bytes), {}, block size {}, {}",
            self.path,
            format_bytes(self.size_bytes),
            self.size_bytes,
            self.redundancy,
            format_bytes(self.block_size_bytes),
            self.state.name()
        )?;
        for b in self.blocks.iter().flatten() {
            let chunks: Vec<String> = b
                .chunks
                .iter()
                .map(|c| {
                    format!("copy {} disk {} @ {}{}", c.copy, c.disk.0, c.addr, if c.lost { " (lost)" } else { "" })
                })
                .collect();
            writeln!(
                f,
                "  block {} group {} member {} size {}: {}",
                b.id.0,
                b.group,
                b.member,
                format_bytes(b.size_bytes),
                chunks.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Files under a prefix (`dingo fs ls`): serializes as an array, renders as
/// one line per file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Listing(pub Vec<FileView>);

impl Listing {
    pub fn new(files: &[FileInfo], now_ms: u64) -> Listing {
        Listing(files.iter().map(|f| FileView::new(f, now_ms, false)).collect())
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.0 {
            writeln!(
                f,
                "{:>12}  {:<14} {:<20} {}",
                format_bytes(file.size_bytes),
                file.redundancy,
                file.state.name(),
                file.path
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_proto::v1::{BlockRecord, ChunkLocation};

    fn cluster() -> ClusterStatusReply {
        ClusterStatusReply {
            files: 2,
            blocks: 9,
            nodes: vec![NodeStatus {
                id: 3,
                addr: "127.0.0.1:7410".into(),
                alive: false,
                heartbeat_age_ms: u64::MAX,
                state: DeviceState::Draining as i32,
                disks: vec![DiskStatus {
                    id: 5,
                    path: "/d/5".into(),
                    capacity: 2_000_000,
                    used: 1_000_000,
                    chunks: 4,
                    state: DeviceState::Draining as i32,
                    drain_chunks_left: 4,
                    drain_bytes_left: 1_000_000,
                    ..DiskStatus::default()
                }],
            }],
            ..ClusterStatusReply::default()
        }
    }

    #[test]
    fn cluster_json_keeps_its_keys_and_order() {
        let json = serde_json::to_string(&ClusterView::from(&cluster())).unwrap();
        assert_eq!(
            json,
            r#"{"blocks":9,"files":2,"nodes":[{"addr":"127.0.0.1:7410","alive":false,"disks":[{"capacity":2000000,"chunks":4,"drain_bytes_left":1000000,"drain_chunks_left":4,"id":5,"left_out":false,"path":"/d/5","state":"DRAINING","used":1000000}],"heartbeat_age_ms":null,"id":3,"state":"DRAINING"}]}"#
        );
    }

    #[test]
    fn cluster_text_shows_a_drain_and_a_node_never_heard_from() {
        let text = ClusterView::from(&cluster()).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "2 file(s), 9 block record(s)");
        assert!(lines[2].starts_with("3     127.0.0.1:7410         silent DRAINING              -"), "{}", lines[2]);
        assert!(lines[3].ends_with("/d/5  (4 chunk(s), 1.00 MB left to move)"), "{}", lines[3]);
    }

    fn file(sealed: bool, lease_expiry_ms: u64) -> FileInfo {
        FileInfo {
            path: "/a/f".into(),
            size: 3_000_000,
            block_size: 1_000_000,
            sealed,
            lease_expiry_ms,
            created_ms: 7,
            blocks: vec![BlockRecord {
                id: 6,
                group: 6,
                ec_index: 1,
                size: 1_000_000,
                chunks: vec![ChunkLocation { copy: 0, disk: 2, node: 1, addr: "n1:1".into(), lost: true }],
                ..BlockRecord::default()
            }],
            ..FileInfo::default()
        }
    }

    #[test]
    fn a_file_is_open_until_its_lease_expires() {
        assert_eq!(FileState::of(&file(true, 0), 100), FileState::Sealed);
        assert_eq!(FileState::of(&file(false, 200), 100), FileState::Open);
        assert_eq!(FileState::of(&file(false, 99), 100), FileState::LeaseExpired);
    }

    #[test]
    fn file_views_in_json_and_text() {
        let stat = FileView::new(&file(false, 99), 100, true);
        assert_eq!(
            serde_json::to_string(&stat).unwrap(),
            r#"{"block_size":1000000,"blocks":[{"chunks":[{"addr":"n1:1","copy":0,"disk":2,"lost":true,"node":1}],"group":6,"id":6,"member":1,"size":1000000}],"created_ms":7,"path":"/a/f","redundancy":"","sealed":false,"size":3000000,"state":"open, lease expired"}"#
        );
        assert_eq!(
            stat.to_string(),
            "/a/f: 3.00 MB (3000000 bytes), , block size 1.00 MB, open, lease expired\n  \
             block 6 group 6 member 1 size 1.00 MB: copy 0 disk 2 @ n1:1 (lost)\n"
        );
        let listing = Listing::new(&[file(true, 0)], 100);
        assert!(!serde_json::to_string(&listing).unwrap().contains("blocks"));
        assert_eq!(listing.to_string(), format!("{:>12}  {:<14} {:<20} /a/f\n", "3.00 MB", "", "sealed"));
    }

    #[test]
    fn health_text_names_the_devices_in_each_state() {
        let mut h = Health {
            status: "HEALTH_WARN".into(),
            nodes_live: vec![NodeId(0), NodeId(1)],
            nodes_draining: vec![NodeId(2)],
            disks_live: 3,
            disks_dead: vec![DiskId(1)],
            disks_draining: vec![crate::DrainProgress {
                disk: DiskId(5),
                node: NodeId(2),
                chunks_left: 4,
                bytes_left: 7,
            }],
            move_bytes_outstanding: 3_500_000,
            ..Health::default()
        };
        h.moves_outstanding = 4;
        let text = h.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "nodes: 2 live, 0 silent, 0 dead, 1 draining [2], 0 decommissioned");
        assert_eq!(lines[2], "disks: 3 live, 0 silent, 1 dead [1], 1 draining [5], 0 decommissioned");
        assert_eq!(lines[7], "moves outstanding (draining): 4 chunk(s), 3.50 MB");
    }
}
