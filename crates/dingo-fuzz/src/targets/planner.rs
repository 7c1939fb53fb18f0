//! The planner service: the requests its handlers accept (`Declare`,
//! `DeclareFiles`, `Ack`, `Cancel`, `Status`, `SetBudget`), decoded from the
//! wire and applied to the service's state machine (`DeclareFiles` through
//! `declaration_from_files` over two files' `Stat`, as a snapshot) (`Machine`, the same code the
//! daemon steps), and the records it restores at a restart, decoded from
//! the bytes its redb tables hold. A refused request must leave the state
//! unchanged; stored records must either restore or be refused with an
//! error.

use crate::Target;
use dingo_planner_client::convert::{declaration_from_wire, declaration_to_wire};
use dingo_planner_service::{Machine, MemoryStore, ServiceConfig, Step, StoredTables, declaration_from_files};
use dingo_proto::planner as pb;
use dingo_proto::v1::{
    BlockRecord, BlockRow, BlockState, ClusterStatusReply, DiskModel, DiskStatus, FileInfo, NodeStatus, Redundancy,
};
use dingo_types::{BlockId, BlockRange, BlockSet, Declaration, DiskId, ReadSets, TaskKind, Timestamp};
use prost::Message;
use std::collections::HashMap;

const START_MS: u64 = 1_700_000_000_000;
const OWNER: &str = "client";
const BLOCKS: u64 = 24;
/// Executions between restarts of the machine from its store.
const RESTART_EVERY: u64 = 200;

fn config() -> ServiceConfig {
    let mut cfg = ServiceConfig::new("admin");
    cfg.quantum_ms = 1000;
    cfg.dispatch_spacing_ms = 250;
    cfg
}

/// Four disks on two nodes; block `b` has copies on disks `b % 4` and
/// `(b + 1) % 4`.
fn rows() -> Vec<BlockRow> {
    (0..BLOCKS)
        .map(|id| BlockRow {
            id,
            size: 100_000 + id * 1000,
            state: BlockState::Sealed as i32,
            group: id,
            disks: vec![(id % 4) as u32, ((id + 1) % 4) as u32],
        })
        .collect()
}

fn cluster() -> ClusterStatusReply {
    let disk = |id| DiskStatus {
        id,
        model: Some(DiskModel { positioning_us: 8000, transfer_bytes_per_sec: 150_000_000 }),
        ..Default::default()
    };
    let nodes = (0..2u32)
        .map(|n| NodeStatus {
            id: n,
            addr: format!("node-{n}"),
            alive: true,
            disks: vec![disk(2 * n), disk(2 * n + 1)],
            ..Default::default()
        })
        .collect();
    ClusterStatusReply { nodes, ..Default::default() }
}

/// The `Stat` of two files over the cluster's blocks: `/rep` (replicated,
/// blocks 0-7) and `/ec` (RS 2+1, blocks 8-13: two stripes).
fn files() -> HashMap<String, FileInfo> {
    let file = |path: &str, redundancy: Redundancy, ids: std::ops::Range<u64>, data_per_stripe: u64| {
        let blocks: Vec<BlockRecord> =
            ids.map(|id| BlockRecord { id, size: 100_000 + id * 1000, ..Default::default() }).collect();
        let width = (redundancy.data + redundancy.parity).max(1) as usize;
        let size = if redundancy.data == 0 {
            blocks.iter().map(|b| b.size).sum()
        } else {
            blocks.chunks(width).flat_map(|s| &s[..data_per_stripe as usize]).map(|b| b.size).sum()
        };
        (
            path.to_string(),
            FileInfo {
                path: path.into(),
                redundancy: Some(redundancy),
                size,
                blocks,
                sealed: true,
                ..Default::default()
            },
        )
    };
    HashMap::from([
        file("/rep", Redundancy { replicas: 3, data: 0, parity: 0 }, 0..8, 0),
        file("/ec", Redundancy { replicas: 0, data: 2, parity: 1 }, 8..14, 2),
    ])
}

fn declarations(now_ms: u64) -> Vec<Declaration> {
    let deadline = Timestamp(now_ms + 5000);
    vec![
        Declaration {
            task: TaskKind::Scrubbing,
            read_sets: ReadSets::Sets((0..6).map(|b| BlockSet::any_of([BlockId(b), BlockId(b + 6)])).collect()),
            sets_needed: None,
            bytes_needed: None,
            deadline,
        },
        Declaration {
            task: TaskKind::Fsck,
            read_sets: ReadSets::Ranges(vec![
                BlockRange { start: BlockId(2), len: 3 },
                BlockRange { start: BlockId(10), len: 2 },
            ]),
            sets_needed: Some(1),
            bytes_needed: None,
            deadline,
        },
        Declaration {
            task: TaskKind::Rebalancing,
            read_sets: ReadSets::ChunksOnDisk(DiskId(1)),
            sets_needed: None,
            bytes_needed: None,
            deadline,
        },
    ]
}

/// A machine driven through requests; restarted from its store now and then.
pub struct PlannerRequests {
    machine: Machine,
    files: HashMap<String, FileInfo>,
    store: MemoryStore,
    now_ms: u64,
    executions: u64,
}

impl PlannerRequests {
    pub fn new() -> PlannerRequests {
        let store = MemoryStore::default();
        let machine = Machine::start(config(), &store, rows(), cluster(), START_MS).expect("an empty store starts");
        PlannerRequests { machine, files: files(), store, now_ms: START_MS, executions: 0 }
    }

    /// A quantum: plan, then dispatch every group due, committing each step.
    fn quantum(&mut self) {
        self.now_ms += 1000;
        self.machine.plan_quantum(self.now_ms).commit(&mut self.store);
        while let Some(due) = self.machine.take_due(self.now_ms + 1000) {
            self.machine.complete(&due).commit(&mut self.store);
        }
    }
}

impl Default for PlannerRequests {
    fn default() -> Self {
        Self::new()
    }
}

/// The request kinds, by an input's first byte.
const DECLARE: u8 = 0;
const ACK: u8 = 1;
const CANCEL: u8 = 2;
const STATUS: u8 = 3;
const BUDGET: u8 = 4;
const DECLARE_FILES: u8 = 6;
const KINDS: u8 = 7;

fn framed(kind: u8, body: Vec<u8>) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend(body);
    v
}

impl Target for PlannerRequests {
    fn name(&self) -> &'static str {
        "planner-requests"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds: Vec<Vec<u8>> = declarations(START_MS + 60_000)
            .iter()
            .map(|d| framed(DECLARE, declaration_to_wire(d).encode_to_vec()))
            .collect();
        seeds.push(framed(ACK, pb::AckRequest { deliveries: vec![1, 2, 3] }.encode_to_vec()));
        seeds.push(framed(CANCEL, pb::CancelRequest { declaration: 1 }.encode_to_vec()));
        seeds.push(framed(STATUS, pb::StatusRequest { declarations: vec![1, 2] }.encode_to_vec()));
        let budget = pb::SetBudgetRequest { cluster_bytes: Some(3_000_000), disk_head_time_us: Some(500_000) };
        seeds.push(framed(BUDGET, budget.encode_to_vec()));
        seeds.push(vec![5]);
        let segment = |path: &str, offset, length| pb::FileSegment { path: path.into(), offset, length };
        let declare_files = pb::DeclareFilesRequest {
            task: "file-scrubbing".into(),
            deadline_ms: START_MS + 60_000,
            sets_needed: None,
            bytes_needed: None,
            sets: vec![
                pb::SegmentSet { segments: vec![segment("/rep", 0, 0)] },
                pb::SegmentSet { segments: vec![segment("/ec", 150_000, 100_000), segment("/rep", 99_000, 5_000)] },
            ],
        };
        seeds.push(framed(DECLARE_FILES, declare_files.encode_to_vec()));
        seeds
    }

    fn run(&mut self, input: &[u8]) {
        self.executions += 1;
        if self.executions.is_multiple_of(RESTART_EVERY) {
            // A restart from what was committed, as after a crash; then a
            // fresh machine, so the state stays small.
            Machine::start(config(), &self.store, rows(), cluster(), self.now_ms).expect("committed state restores");
            *self = PlannerRequests::new();
        }
        let Some((&kind, body)) = input.split_first() else { return };
        let before = self.machine.fingerprint();
        let refused = match kind % KINDS {
            DECLARE => match pb::DeclareRequest::decode(body)
                .map_err(|e| e.to_string())
                .and_then(|r| declaration_from_wire(&r))
            {
                Ok(d) => applied(&mut self.store, self.machine.declare(OWNER, &d, self.now_ms).ok().map(|(_, s)| s)),
                Err(_) => return,
            },
            DECLARE_FILES => match pb::DeclareFilesRequest::decode(body) {
                Ok(r) => match declaration_from_files(&r, &self.files) {
                    Ok(d) => {
                        applied(&mut self.store, self.machine.declare(OWNER, &d, self.now_ms).ok().map(|(_, s)| s))
                    }
                    Err(_) => true,
                },
                Err(_) => return,
            },
            ACK => match pb::AckRequest::decode(body) {
                Ok(r) => applied(&mut self.store, self.machine.ack(OWNER, &r.deliveries).ok()),
                Err(_) => return,
            },
            CANCEL => match pb::CancelRequest::decode(body) {
                Ok(r) => applied(&mut self.store, self.machine.cancel(OWNER, r.declaration).ok().map(|(_, s)| s)),
                Err(_) => return,
            },
            STATUS => match pb::StatusRequest::decode(body) {
                Ok(r) => {
                    let _ = self.machine.status(&r.declarations);
                    true
                }
                Err(_) => return,
            },
            BUDGET => match pb::SetBudgetRequest::decode(body) {
                Ok(r) => {
                    let (_, step) = self.machine.set_budget(r.cluster_bytes, r.disk_head_time_us);
                    step.commit(&mut self.store);
                    let _ = self.machine.budget_at(self.now_ms);
                    false
                }
                Err(_) => return,
            },
            _ => {
                let (_, step) = self.machine.subscribe(OWNER);
                step.commit(&mut self.store);
                self.quantum();
                false
            }
        };
        if refused {
            assert_eq!(self.machine.fingerprint(), before, "a refused or read-only request changed the state");
        }
    }
}

/// Commits an accepted request's step; `true` (refused) when there is none.
fn applied(store: &mut MemoryStore, step: Option<Step>) -> bool {
    match step {
        Some(step) => {
            step.commit(store);
            false
        }
        None => true,
    }
}

/// The planner's stored tables, framed as one byte string: rows of
/// `[table][key: u64 LE][length: u32 LE][value]`.
fn frame(t: &StoredTables) -> Vec<u8> {
    let mut out = Vec::new();
    let mut row = |table: u8, key: u64, value: &[u8]| {
        out.push(table);
        out.extend(key.to_le_bytes());
        out.extend((value.len() as u32).to_le_bytes());
        out.extend(value);
    };
    for (table, rows) in [(0, &t.decls), (1, &t.requests), (2, &t.deliveries), (4, &t.groups)] {
        for (k, v) in rows {
            row(table, *k, v);
        }
    }
    for &(k, s) in &t.states {
        row(3, k, &[s]);
    }
    if let Some(v) = t.next_delivery {
        row(5, 0, &v.to_le_bytes());
    }
    if let Some(v) = t.next_group {
        row(6, 0, &v.to_le_bytes());
    }
    if let Some(b) = &t.budget {
        row(7, 0, b);
    }
    out
}

/// The tables of a framed input; a frame cut short ends the input.
fn unframe(mut input: &[u8]) -> StoredTables {
    let mut t = StoredTables::default();
    while input.len() >= 13 {
        let table = input[0];
        let key = u64::from_le_bytes(input[1..9].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(input[9..13].try_into().expect("4 bytes")) as usize;
        let Some(value) = input.get(13..13 + len) else { break };
        let value = value.to_vec();
        let num = || value.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        match table % 8 {
            0 => t.decls.push((key, value)),
            1 => t.requests.push((key, value)),
            2 => t.deliveries.push((key, value)),
            3 => t.states.push((key, value.first().copied().unwrap_or(0))),
            4 => t.groups.push((key, value)),
            5 => t.next_delivery = num(),
            6 => t.next_group = num(),
            _ => t.budget = Some(value),
        }
        input = &input[13 + len..];
    }
    t
}

pub struct PlannerRecords;

impl Target for PlannerRecords {
    fn name(&self) -> &'static str {
        "planner-records"
    }

    /// Stores of a planner run through declarations, quanta, dispatches,
    /// a cancel and acknowledgements.
    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut p = PlannerRequests::new();
        let mut seeds = Vec::new();
        for d in declarations(START_MS) {
            let (_, step) = p.machine.declare(OWNER, &d, p.now_ms).expect("a valid declaration");
            step.commit(&mut p.store);
        }
        let (_, step) = p.machine.subscribe(OWNER);
        step.commit(&mut p.store);
        for round in 0..4u64 {
            p.quantum();
            if round == 1 {
                p.machine.ack(OWNER, &[1, 2]).map(|s| s.commit(&mut p.store)).ok();
            }
            if round == 2 {
                p.machine.cancel(OWNER, 2).map(|(_, s)| s.commit(&mut p.store)).ok();
            }
            let tables = p.store.to_tables();
            assert_eq!(MemoryStore::from_tables(&tables).as_ref().ok(), Some(&p.store), "tables round-trip");
            seeds.push(frame(&tables));
        }
        seeds
    }

    fn run(&mut self, input: &[u8]) {
        let Ok(store) = MemoryStore::from_tables(&unframe(input)) else { return };
        let Ok(mut machine) = Machine::start(config(), &store, rows(), cluster(), START_MS + 10_000) else { return };
        let _ = machine.status(&[]);
        let mut store = store;
        let (_, step) = machine.subscribe(OWNER);
        step.commit(&mut store);
        machine.plan_quantum(START_MS + 11_000).commit(&mut store);
        while let Some(due) = machine.take_due(START_MS + 12_000) {
            machine.complete(&due).commit(&mut store);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declare_files_seed_reaches_the_state_machine() {
        let mut target = PlannerRequests::new();
        let seed = target.seeds().into_iter().find(|s| s[0] == DECLARE_FILES).expect("a DeclareFiles seed");
        let request = pb::DeclareFilesRequest::decode(&seed[1..]).unwrap();
        let declaration = declaration_from_files(&request, &target.files).unwrap();
        assert!(target.machine.declare(OWNER, &declaration, target.now_ms).is_ok());
    }
}
