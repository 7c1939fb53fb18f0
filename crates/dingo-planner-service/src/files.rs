//! `DeclareFiles`: file segments resolved to block sets through the
//! metadata service's `Stat`, when declared (a snapshot).

use dingo_client::{Client, ClientError, Redundancy};
use dingo_proto::planner as pb;
use dingo_proto::v1::FileInfo;
use dingo_types::{BlockId, BlockSet, Declaration, Member, ReadSets, TaskKind, Timestamp};
use futures::StreamExt;
use std::collections::{HashMap, HashSet};
use tonic::Status;

use dingo_planner_client::convert::parse_task;

/// `Stat` calls in flight while resolving one `DeclareFiles`.
const STAT_PARALLELISM: usize = 16;

/// Resolves file segments to block sets through `Stat` on the metadata
/// service at `meta_addr` (a snapshot).
pub(crate) async fn resolve_files(
    meta: &Client,
    meta_addr: &str,
    req: &pb::DeclareFilesRequest,
) -> Result<Declaration, Status> {
    // Each file once, STAT_PARALLELISM at a time; errors name the first
    // segment that uses the file.
    let (_, first_use) = first_uses(req)?;
    let paths: Vec<String> = first_use.keys().map(|p| p.to_string()).collect();
    let stats: Vec<(String, Result<FileInfo, ClientError>)> = futures::stream::iter(paths)
        .map(|path| async move {
            let r = meta.stat(&path).await;
            (path, r)
        })
        .buffer_unordered(STAT_PARALLELISM)
        .collect()
        .await;
    let mut files: HashMap<String, FileInfo> = HashMap::new();
    for (path, r) in stats {
        let at = &first_use[path.as_str()];
        let file = r.map_err(|e| match e.code() {
            Some(tonic::Code::NotFound) => Status::not_found(format!("{at}: {e}")),
            Some(tonic::Code::InvalidArgument) => Status::invalid_argument(format!("{at}: {e}")),
            _ => Status::unavailable(format!("{at}: metadata service at {}: {e}", meta_addr)),
        })?;
        files.insert(path, file);
    }
    declaration_from_files(req, &files)
}

/// Checks the request's task and that no set is empty; returns the task and
/// where each file is first used (`set i, segment j`), for error messages.
fn first_uses(req: &pb::DeclareFilesRequest) -> Result<(TaskKind, HashMap<&str, String>), Status> {
    let task = parse_task(&req.task).map_err(Status::invalid_argument)?;
    let mut first_use: HashMap<&str, String> = HashMap::new();
    for (i, set) in req.sets.iter().enumerate() {
        if set.segments.is_empty() {
            return Err(Status::invalid_argument(format!("set {i} names no file segments")));
        }
        for (j, seg) in set.segments.iter().enumerate() {
            first_use.entry(seg.path.as_str()).or_insert_with(|| format!("set {i}, segment {j}"));
        }
    }
    Ok((task, first_use))
}

/// The declaration a `DeclareFiles` request names, given the `Stat` of the
/// files it uses (the snapshot `resolve_files` takes): every check of the
/// client's segments, with no IO, so it can be fuzzed without a metadata
/// service. A file missing from `files` is `NOT_FOUND`.
pub fn declaration_from_files(
    req: &pb::DeclareFilesRequest,
    files: &HashMap<String, FileInfo>,
) -> Result<Declaration, Status> {
    let (task, _) = first_uses(req)?;
    let mut sets = Vec::with_capacity(req.sets.len());
    for (i, set) in req.sets.iter().enumerate() {
        let mut seen = HashSet::new();
        let mut members = Vec::new();
        for (j, seg) in set.segments.iter().enumerate() {
            let file = files
                .get(&seg.path)
                .ok_or_else(|| Status::not_found(format!("set {i}, segment {j}: {} does not exist", seg.path)))?;
            let blocks = segment_blocks(file, seg)
                .map_err(|m| Status::invalid_argument(format!("set {i}, segment {j}: {m}")))?;
            members.extend(blocks.into_iter().filter(|b| seen.insert(*b)).map(|b| Member::Any(BlockId(b))));
        }
        sets.push(BlockSet::new(members));
    }
    Ok(Declaration {
        task,
        read_sets: ReadSets::Sets(sets),
        sets_needed: req.sets_needed,
        bytes_needed: req.bytes_needed,
        deadline: Timestamp(req.deadline_ms),
    })
}

/// Block ids holding bytes `offset .. offset + length` of a file: for a
/// replicated file its blocks, for an erasure-coded one the data members.
fn segment_blocks(file: &FileInfo, seg: &pb::FileSegment) -> Result<Vec<u64>, String> {
    let redundancy = dingo_proto::redundancy(file.redundancy.as_ref())?;
    let data: Vec<&dingo_proto::v1::BlockRecord> = match redundancy {
        Redundancy::Replicated(_) => file.blocks.iter().collect(),
        Redundancy::Ec { data, parity } => {
            let width = usize::from(data) + usize::from(parity);
            if !file.blocks.len().is_multiple_of(width) {
                return Err(format!("{} has an incomplete stripe", file.path));
            }
            file.blocks.chunks(width).flat_map(|s| &s[..usize::from(data)]).collect()
        }
    };
    let end = if seg.length == 0 { Some(file.size) } else { seg.offset.checked_add(seg.length) };
    let end = end.filter(|&e| e <= file.size && seg.offset <= file.size).ok_or_else(|| {
        format!(
            "bytes {}..{} are past the end of {} ({} bytes)",
            seg.offset,
            seg.offset.saturating_add(seg.length),
            file.path,
            file.size
        )
    })?;
    if seg.offset == end {
        return Err(format!("the segment covers no bytes of {} ({} bytes)", file.path, file.size));
    }
    let mut pos = 0;
    let mut out = Vec::new();
    for b in data {
        let (from, to) = (pos, pos + b.size);
        pos = to;
        if from < end && to > seg.offset {
            out.push(b.id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_proto::v1::BlockRecord;

    fn file(redundancy: Redundancy, sizes: &[u64]) -> FileInfo {
        let blocks =
            sizes.iter().enumerate().map(|(i, &size)| BlockRecord { id: 100 + i as u64, size, ..Default::default() });
        let blocks: Vec<BlockRecord> = blocks.collect();
        let size = match redundancy {
            Redundancy::Replicated(_) => sizes.iter().sum(),
            Redundancy::Ec { data, parity } => {
                let w = usize::from(data + parity);
                sizes.chunks(w).flat_map(|s| &s[..usize::from(data)]).sum()
            }
        };
        FileInfo { path: "/f".into(), redundancy: Some(redundancy.into()), size, blocks, ..Default::default() }
    }

    fn seg(offset: u64, length: u64) -> pb::FileSegment {
        pb::FileSegment { path: "/f".into(), offset, length }
    }

    #[test]
    fn segments_map_to_the_blocks_holding_their_bytes() {
        let rep = file(Redundancy::Replicated(3), &[10, 10, 5]);
        assert_eq!(segment_blocks(&rep, &seg(0, 0)).unwrap(), vec![100, 101, 102]);
        assert_eq!(segment_blocks(&rep, &seg(9, 2)).unwrap(), vec![100, 101]);
        assert_eq!(segment_blocks(&rep, &seg(20, 5)).unwrap(), vec![102]);
        // EC 2+1: stripes (100, 101 | 102) and (103, 104 | 105); data only.
        let ec = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10, 10, 4, 4, 4]);
        assert_eq!(segment_blocks(&ec, &seg(0, 0)).unwrap(), vec![100, 101, 103, 104]);
        assert_eq!(segment_blocks(&ec, &seg(19, 3)).unwrap(), vec![101, 103]);
    }

    #[test]
    fn segments_past_the_end_or_empty_are_refused() {
        let rep = file(Redundancy::Replicated(3), &[10]);
        assert!(segment_blocks(&rep, &seg(5, 6)).unwrap_err().contains("past the end"));
        assert!(segment_blocks(&rep, &seg(11, 0)).unwrap_err().contains("past the end"));
        assert!(segment_blocks(&rep, &seg(10, 0)).unwrap_err().contains("covers no bytes"));
        assert!(segment_blocks(&rep, &seg(u64::MAX, 2)).unwrap_err().contains("past the end"));
        let ec = file(Redundancy::Ec { data: 2, parity: 1 }, &[10, 10]);
        assert!(segment_blocks(&ec, &seg(0, 0)).unwrap_err().contains("incomplete stripe"));
    }

    #[test]
    fn a_request_becomes_one_set_per_segment_set_and_is_checked_without_io() {
        let files = HashMap::from([("/f".to_string(), file(Redundancy::Replicated(3), &[10, 10, 5]))]);
        let set = |segments| pb::SegmentSet { segments };
        let req = |sets| pb::DeclareFilesRequest {
            task: "fsck".into(),
            deadline_ms: 5,
            sets_needed: None,
            bytes_needed: None,
            sets,
        };
        let d =
            declaration_from_files(&req(vec![set(vec![seg(0, 5), seg(9, 2)]), set(vec![seg(20, 0)])]), &files).unwrap();
        let ReadSets::Sets(sets) = d.read_sets else { panic!("explicit sets") };
        let ids = |s: &BlockSet| s.members.iter().map(|m| m.block().0).collect::<Vec<_>>();
        assert_eq!((ids(&sets[0]), ids(&sets[1])), (vec![100, 101], vec![102]), "a block named twice counts once");
        let missing = pb::FileSegment { path: "/gone".into(), offset: 0, length: 0 };
        assert_eq!(
            declaration_from_files(&req(vec![set(vec![missing])]), &files).unwrap_err().code(),
            tonic::Code::NotFound
        );
        let empty = declaration_from_files(&req(vec![set(vec![])]), &files).unwrap_err();
        assert!(empty.message().contains("names no file segments"), "{empty:?}");
        let bad_task = pb::DeclareFilesRequest { task: "defrag".into(), ..req(vec![set(vec![seg(0, 0)])]) };
        assert_eq!(declaration_from_files(&bad_task, &files).unwrap_err().code(), tonic::Code::InvalidArgument);
    }
}
