//! `DeclareFiles`: file segments resolved to block sets through the
//! metadata service's `Stat`, when declared (a snapshot).

use dingo_client::{Client, ClientError, Redundancy};
use dingo_proto::planner as pb;
use dingo_proto::v1::FileInfo;
use dingo_types::{BlockId, BlockSet, Declaration, Member, ReadSets, Timestamp};
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
    let task = parse_task(&req.task).map_err(Status::invalid_argument)?;
    // Each file once, STAT_PARALLELISM at a time; errors name the first
    // segment that uses the file.
    let mut first_use: HashMap<&str, String> = HashMap::new();
    for (i, set) in req.sets.iter().enumerate() {
        if set.segments.is_empty() {
            return Err(Status::invalid_argument(format!("set {i} names no file segments")));
        }
        for (j, seg) in set.segments.iter().enumerate() {
            first_use.entry(seg.path.as_str()).or_insert_with(|| format!("set {i}, segment {j}"));
        }
    }
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
    let mut sets = Vec::with_capacity(req.sets.len());
    for (i, set) in req.sets.iter().enumerate() {
        let mut seen = HashSet::new();
        let mut members = Vec::new();
        for (j, seg) in set.segments.iter().enumerate() {
            let blocks = segment_blocks(&files[&seg.path], seg)
                .map_err(|m| Status::invalid_argument(format!("set {i}, segment {j}: {m}")))?;
            members.extend(blocks.into_iter().filter(|b| seen.insert(*b)).map(|b| Member::Any(BlockId(b))));
        }
        sets.push(BlockSet::new(members));
    }
    Ok(Declaration {
        task,
        read_sets: ReadSets::Sets(sets),
        sets_needed: req.sets_needed,
        deadline: Timestamp(req.deadline_ms),
    })
}

/// Block ids holding bytes `offset .. offset + length` of a file: for a
/// replicated file its blocks, for an erasure-coded one the data members.
fn segment_blocks(file: &FileInfo, seg: &pb::FileSegment) -> Result<Vec<u64>, String> {
    let redundancy = Redundancy::try_from(file.redundancy.as_ref())?;
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
}
