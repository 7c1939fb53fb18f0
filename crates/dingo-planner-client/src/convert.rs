//! Conversions between the wire messages ([`crate::wire`]) and the
//! planner's types (`dingo_types`).

use dingo_proto::planner as pb;
use dingo_proto::planner::declare_request::ReadSets as PbReadSets;
use dingo_types::{
    BlockId, BlockRange, BlockSet, ChunkRef, Declaration, MAX_COPIES, Member, MemberBitmap, ReadSets, TaskKind,
    Timestamp,
};

/// Parses a task name; `gc` is accepted for `garbage-collection`.
pub fn parse_task(name: &str) -> Result<TaskKind, String> {
    if name == "gc" {
        return Ok(TaskKind::GarbageCollection);
    }
    name.parse()
}

pub fn member_to_wire(m: Member) -> pb::Member {
    match m {
        Member::Any(b) => pb::Member { block: b.0, copy: None },
        Member::Copy(c) => pb::Member { block: c.block.0, copy: Some(u32::from(c.copy)) },
    }
}

pub fn member_from_wire(m: &pb::Member) -> Result<Member, String> {
    match m.copy {
        None => Ok(Member::Any(BlockId(m.block))),
        Some(copy) if copy < u32::from(MAX_COPIES) => {
            Ok(Member::Copy(ChunkRef { block: BlockId(m.block), copy: copy as u8 }))
        }
        Some(copy) => Err(format!("copy {copy} of block {} is out of range (at most {MAX_COPIES} copies)", m.block)),
    }
}

/// The wire request of a declaration.
pub fn declaration_to_wire(d: &Declaration) -> pb::DeclareRequest {
    let read_sets = match &d.read_sets {
        ReadSets::Sets(sets) => PbReadSets::Sets(pb::BlockSets {
            sets: sets
                .iter()
                .map(|s| pb::BlockSet {
                    members: s.members.iter().copied().map(member_to_wire).collect(),
                    needed: s.needed,
                })
                .collect(),
        }),
        ReadSets::Ranges(ranges) => PbReadSets::Ranges(pb::BlockRanges {
            ranges: ranges.iter().map(|r| pb::BlockRange { start: r.start.0, len: r.len }).collect(),
        }),
        ReadSets::EachMember(members) => {
            PbReadSets::EachMember(pb::Members { members: members.iter().map(member_to_wire).collect() })
        }
        ReadSets::ChunksOnDisk(disk) => PbReadSets::ChunksOnDisk(disk.0),
        ReadSets::AllChunks => PbReadSets::AllChunks(true),
    };
    pb::DeclareRequest {
        task: d.task.name().to_string(),
        deadline_ms: d.deadline.as_millis(),
        sets_needed: d.sets_needed,
        bytes_needed: d.bytes_needed,
        read_sets: Some(read_sets),
    }
}

/// A declaration from its wire request; the error says what is malformed.
/// Semantic checks (blocks exist, deadline ahead, ...) are the core's.
pub fn declaration_from_wire(r: &pb::DeclareRequest) -> Result<Declaration, String> {
    let task = parse_task(&r.task)?;
    let members = |ms: &[pb::Member]| ms.iter().map(member_from_wire).collect::<Result<Vec<Member>, String>>();
    let read_sets = match r.read_sets.as_ref().ok_or("the declaration names no read sets")? {
        PbReadSets::Sets(s) => ReadSets::Sets(
            s.sets
                .iter()
                .map(|set| members(&set.members).map(|members| BlockSet { members, needed: set.needed }))
                .collect::<Result<_, String>>()?,
        ),
        PbReadSets::Ranges(r) => {
            ReadSets::Ranges(r.ranges.iter().map(|r| BlockRange { start: BlockId(r.start), len: r.len }).collect())
        }
        PbReadSets::EachMember(m) => {
            let list = members(&m.members)?;
            let bitmap: MemberBitmap = list.iter().copied().collect();
            if bitmap.len() != list.len() as u64 {
                let mut seen = std::collections::HashSet::new();
                let dup = list.iter().find(|m| !seen.insert(**m)).expect("a duplicate exists");
                return Err(format!("each_member names {dup} twice"));
            }
            ReadSets::EachMember(bitmap)
        }
        PbReadSets::ChunksOnDisk(disk) => ReadSets::ChunksOnDisk(dingo_types::DiskId(*disk)),
        PbReadSets::AllChunks(true) => ReadSets::AllChunks,
        PbReadSets::AllChunks(false) => return Err("all_chunks must be true when given".into()),
    };
    Ok(Declaration {
        task,
        read_sets,
        sets_needed: r.sets_needed,
        bytes_needed: r.bytes_needed,
        deadline: Timestamp(r.deadline_ms),
    })
}

/// The chunk a callback read names.
pub fn read_chunk(r: &pb::ChunkRead) -> ChunkRef {
    ChunkRef { block: BlockId(r.block), copy: u8::try_from(r.copy).unwrap_or(u8::MAX) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::DiskId;

    fn round_trip(read_sets: ReadSets) {
        let d = Declaration {
            task: TaskKind::Scrubbing,
            read_sets,
            sets_needed: Some(2),
            bytes_needed: None,
            deadline: Timestamp(99),
        };
        assert_eq!(declaration_from_wire(&declaration_to_wire(&d)).unwrap(), d);
    }

    #[test]
    fn declarations_round_trip_through_the_wire() {
        let copy = |b, c| Member::Copy(ChunkRef { block: BlockId(b), copy: c });
        round_trip(ReadSets::Sets(vec![BlockSet::new(vec![Member::Any(BlockId(1)), copy(2, 1)])]));
        round_trip(ReadSets::Sets(vec![BlockSet::choose(vec![Member::Any(BlockId(1)), copy(2, 1)], 1)]));
        round_trip(ReadSets::Ranges(vec![BlockRange { start: BlockId(5), len: 3 }]));
        round_trip(ReadSets::EachMember([copy(1, 0), Member::Any(BlockId(4))].into_iter().collect()));
        round_trip(ReadSets::ChunksOnDisk(DiskId(3)));
        round_trip(ReadSets::AllChunks);
    }

    use proptest::prelude::*;

    fn member() -> impl Strategy<Value = Member> {
        let block = prop_oneof![0u64..64, any::<u64>()];
        prop_oneof![
            block.clone().prop_map(|b| Member::Any(BlockId(b))),
            (block, 0..MAX_COPIES).prop_map(|(b, copy)| Member::Copy(ChunkRef { block: BlockId(b), copy })),
        ]
    }

    fn read_sets() -> impl Strategy<Value = ReadSets> {
        let set = (prop::collection::vec(member(), 0..5), prop::option::of(any::<u32>()))
            .prop_map(|(members, needed)| BlockSet { members, needed });
        let range = (any::<u64>(), any::<u32>()).prop_map(|(start, len)| BlockRange { start: BlockId(start), len });
        prop_oneof![
            prop::collection::vec(set, 0..4).prop_map(ReadSets::Sets),
            prop::collection::vec(range, 0..4).prop_map(ReadSets::Ranges),
            prop::collection::vec(member(), 0..8).prop_map(|m| ReadSets::EachMember(m.into_iter().collect())),
            any::<u32>().prop_map(|d| ReadSets::ChunksOnDisk(DiskId(d))),
            Just(ReadSets::AllChunks),
        ]
    }

    fn declaration() -> impl Strategy<Value = Declaration> {
        let task = (0..TaskKind::COUNT).prop_map(|i| TaskKind::ALL[i]);
        let needed = prop::option::of(any::<u64>());
        (task, read_sets(), needed.clone(), needed, any::<u64>()).prop_map(
            |(task, read_sets, sets_needed, bytes_needed, deadline)| Declaration {
                task,
                read_sets,
                sets_needed,
                bytes_needed,
                deadline: Timestamp(deadline),
            },
        )
    }

    /// A request as any client may send it: task names good, aliased and
    /// unknown, copies in and out of range, members named twice.
    fn request() -> impl Strategy<Value = pb::DeclareRequest> {
        let task = prop_oneof![
            (0..TaskKind::COUNT).prop_map(|i| TaskKind::ALL[i].name().to_string()),
            Just("gc".to_string()),
            "[a-z-]{0,12}",
        ];
        let wire_member = (prop_oneof![0u64..8, any::<u64>()], prop::option::of(prop_oneof![0u32..20, any::<u32>()]))
            .prop_map(|(block, copy)| pb::Member { block, copy });
        let members = prop::collection::vec(wire_member, 0..6);
        let read_sets = prop_oneof![
            prop::collection::vec((members.clone(), prop::option::of(any::<u32>())), 0..3).prop_map(|sets| {
                PbReadSets::Sets(pb::BlockSets {
                    sets: sets.into_iter().map(|(members, needed)| pb::BlockSet { members, needed }).collect(),
                })
            }),
            members.prop_map(|members| PbReadSets::EachMember(pb::Members { members })),
            any::<u32>().prop_map(PbReadSets::ChunksOnDisk),
            any::<bool>().prop_map(PbReadSets::AllChunks),
        ];
        let needed = prop::option::of(any::<u64>());
        (task, any::<u64>(), needed.clone(), needed, prop::option::of(read_sets)).prop_map(
            |(task, deadline_ms, sets_needed, bytes_needed, read_sets)| pb::DeclareRequest {
                task,
                deadline_ms,
                sets_needed,
                bytes_needed,
                read_sets,
            },
        )
    }

    proptest! {
        /// Every declaration the library can express comes back from the
        /// wire as it was (the wire is what other languages speak).
        #[test]
        fn any_declaration_round_trips_through_the_wire(d in declaration()) {
            prop_assert_eq!(declaration_from_wire(&declaration_to_wire(&d)), Ok(d));
        }

        /// Any request is turned into a declaration or refused with a
        /// reason, never a panic; one accepted means the same when sent again.
        #[test]
        fn any_request_is_read_or_refused_with_a_reason(r in request()) {
            match declaration_from_wire(&r) {
                Ok(d) => prop_assert_eq!(declaration_from_wire(&declaration_to_wire(&d)), Ok(d)),
                Err(why) => prop_assert!(!why.is_empty()),
            }
        }
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        let base = pb::DeclareRequest {
            task: "fsck".into(),
            deadline_ms: 1,
            sets_needed: None,
            bytes_needed: None,
            read_sets: None,
        };
        let err = |r: pb::DeclareRequest| declaration_from_wire(&r).unwrap_err();
        assert!(err(base.clone()).contains("no read sets"));
        assert!(err(pb::DeclareRequest { task: "defrag".into(), ..base.clone() }).contains("unknown task"));
        let bad_copy = pb::Member { block: 1, copy: Some(200) };
        let sets =
            PbReadSets::Sets(pb::BlockSets { sets: vec![pb::BlockSet { members: vec![bad_copy], needed: None }] });
        assert!(err(pb::DeclareRequest { read_sets: Some(sets), ..base.clone() }).contains("out of range"));
        let twice = PbReadSets::EachMember(pb::Members { members: vec![pb::Member { block: 1, copy: None }; 2] });
        assert!(err(pb::DeclareRequest { read_sets: Some(twice), ..base.clone() }).contains("twice"));
        assert!(err(pb::DeclareRequest { read_sets: Some(PbReadSets::AllChunks(false)), ..base }).contains("true"));
        assert_eq!(parse_task("gc"), Ok(TaskKind::GarbageCollection));
    }
}
