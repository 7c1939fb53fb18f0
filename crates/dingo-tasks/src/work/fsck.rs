//! Checking files against the metadata: the metadata alone
//! ([`check_metadata`]), then the data the nodes hold.

use super::{Outcome, ScheduledCopies, block_record, is_corrupt, is_sealed};
use dingo_client::{ChunkFault, Client, ClientError, IoTag, Redundancy};
use dingo_proto::v1::FileInfo;
use dingo_types::BlockId;

/// What the metadata of `file` says that cannot be right, without reading
/// any data: blocks out of order or not the file's, wrong states, copies
/// or stripe members missing or lost, sizes that do not add up.
pub fn check_metadata(file: &FileInfo) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |m: String| out.push(format!("{}: {m}", file.path));
    if !file.sealed {
        note("not sealed".into());
    }
    let redundancy = match dingo_proto::redundancy(file.redundancy.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            note(format!("unreadable redundancy: {e}"));
            return out;
        }
    };
    let ids: Vec<u64> = file.blocks.iter().map(|b| b.id).collect();
    if ids != file.block_ids {
        note(format!("block list {:?} does not match the block records {ids:?}", file.block_ids));
    }
    for b in &file.blocks {
        if !is_sealed(b) {
            note(format!("block {} is {:?}, not sealed", b.id, b.state()));
        }
        if b.file != file.id {
            note(format!("block {} belongs to file {}, not {}", b.id, b.file, file.id));
        }
        if b.redundancy != file.redundancy {
            note(format!("block {} has redundancy {:?}, the file {:?}", b.id, b.redundancy, file.redundancy));
        }
        if b.size > file.block_size {
            note(format!("block {} holds {} bytes, more than the block size {}", b.id, b.size, file.block_size));
        }
        let lost = b.chunks.iter().filter(|c| c.lost).count();
        if lost > 0 {
            note(format!("block {}: {lost} of {} copies lost (disk or node dead)", b.id, b.chunks.len()));
        }
    }
    let data_bytes: u64 = match redundancy {
        Redundancy::Replicated(r) => {
            for b in &file.blocks {
                let mut copies: Vec<u32> = b.chunks.iter().map(|c| c.copy).collect();
                copies.sort_unstable();
                if copies != (0..u32::from(r)).collect::<Vec<_>>() {
                    note(format!("block {} has copies {copies:?}, expected 0..{r}", b.id));
                }
                let mut nodes: Vec<u32> = b.chunks.iter().map(|c| c.node).collect();
                nodes.sort_unstable();
                nodes.dedup();
                if nodes.len() != b.chunks.len() {
                    note(format!("block {} has two copies on one node", b.id));
                }
                if b.group != b.id || b.ec_index != 0 {
                    note(format!("block {} of a replicated file has group {} member {}", b.id, b.group, b.ec_index));
                }
            }
            file.blocks.iter().map(|b| b.size).sum()
        }
        Redundancy::Ec { data, parity } => {
            let (k, width) = (usize::from(data), usize::from(data) + usize::from(parity));
            if !file.blocks.len().is_multiple_of(width) {
                note(format!("{} blocks is not a whole number of {data}+{parity} stripes", file.blocks.len()));
            }
            for stripe in file.blocks.chunks(width) {
                for (i, b) in stripe.iter().enumerate() {
                    if b.group != stripe[0].id || b.ec_index as usize != i {
                        note(format!(
                            "block {} is member {} of group {}, expected {i} of {}",
                            b.id, b.ec_index, b.group, stripe[0].id
                        ));
                    }
                    if b.chunks.len() != 1 || b.chunks[0].copy != 0 {
                        note(format!("stripe member {} has {} chunks, expected copy 0 only", b.id, b.chunks.len()));
                    }
                }
                if stripe.len() < width {
                    continue;
                }
                let shard = stripe[k].size;
                if let Some(p) = stripe[k..].iter().find(|p| p.size != shard) {
                    note(format!(
                        "parity block {} holds {} bytes, parity {} holds {shard}",
                        p.id, p.size, stripe[k].id
                    ));
                }
                if let Some(d) = stripe[..k].iter().find(|d| d.size > shard) {
                    note(format!(
                        "data block {} holds {} bytes, more than its stripe's parity ({shard})",
                        d.id, d.size
                    ));
                }
            }
            file.blocks.chunks(width).flat_map(|s| s.iter().take(k)).map(|b| b.size).sum()
        }
    };
    if data_bytes != file.size {
        note(format!("data blocks hold {data_bytes} bytes, the file's size is {}", file.size));
    }
    out
}

/// Reads one block the way fsck does: a copy in full, then one byte past
/// its recorded size (which must not exist). Returns what does not match.
async fn fsck_block(
    client: &Client,
    file: &FileInfo,
    d: &dingo_client::DataBlock<'_>,
    first: Option<u32>,
    tag: IoTag,
) -> Result<Vec<String>, ClientError> {
    let (path, rec) = (&file.path, d.block);
    let mut order: Vec<(bool, bool, u32)> =
        rec.chunks.iter().map(|c| (Some(c.copy) != first, c.lost, c.copy)).collect();
    order.sort_unstable();
    let mut findings = Vec::new();
    let mut unavailable = None;
    for (_, _, copy) in order {
        let at = format!("{path}: block {} copy {copy}", rec.id);
        let chunk = dingo_client::copy_of(rec, copy)?;
        match client.read_copy(chunk, 0, rec.size, tag).await {
            Ok(_) => {
                match client.read_copy(chunk, rec.size, 1, tag).await {
                    Ok(_) => findings.push(format!("{at} holds more than the {} bytes its record says", rec.size)),
                    Err(e) if e.code() == Some(tonic::Code::OutOfRange) => {}
                    // Unreachable since the first read: what was read matched.
                    Err(e) => tracing::debug!("{at}: probe past the end: {e}"),
                }
                return Ok(findings);
            }
            Err(e) if e.code() == Some(tonic::Code::OutOfRange) => {
                findings.push(format!("{at} holds fewer than the {} bytes its record says ({e})", rec.size))
            }
            Err(e) if is_corrupt(&e) => findings.push(format!("{at} does not match its checksums ({e})")),
            Err(e @ ClientError::Chunk { fault: ChunkFault::Missing, .. }) => {
                if !is_sealed(&block_record(client, BlockId(rec.id)).await?) {
                    return Err(e);
                }
                findings.push(format!("{at} is missing on its node ({e})"));
            }
            Err(e) => unavailable = Some(e),
        }
    }
    // Every copy answered and was inconsistent: that is the finding. If
    // some could not be reached, the check is not done: try again later —
    // unless it is the only copy of an EC member, whose node is down: then
    // read it degraded from its stripe (which checks the members read), and
    // leave the member to reconstruction.
    match unavailable {
        Some(e) if rec.chunks.len() == 1 && findings.is_empty() => {
            tracing::debug!(block = rec.id, "reading an unreachable member degraded: {e}");
            client.read_file(file, d.offset, rec.size, tag).await?;
            Ok(findings)
        }
        Some(e) => Err(e),
        None => Ok(findings),
    }
}

pub(super) async fn fsck(
    client: &Client,
    path: &str,
    file_id: u64,
    first_bytes: u64,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    let file = client.stat(path).await?;
    if file.id != file_id {
        // Replaced since it was planned: the file checked is gone.
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    let mut out = Outcome { findings: check_metadata(&file), ..Outcome::default() };
    let blocks = match dingo_client::data_blocks(&file) {
        Ok(b) => b,
        Err(e) => {
            out.findings.push(format!("{path}: cannot lay out its data blocks: {e}"));
            return Ok(out);
        }
    };
    for d in blocks.iter().take_while(|d| d.offset < first_bytes) {
        out.findings.extend(fsck_block(client, &file, d, copies.get(&BlockId(d.block.id)).copied(), tag).await?);
        out.logical_bytes += d.block.size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_proto::v1::{BlockRecord, BlockState};

    fn location(copy: u32, node: u32) -> dingo_proto::v1::ChunkLocation {
        dingo_proto::v1::ChunkLocation { copy, disk: node, node, ..Default::default() }
    }

    /// A sealed replicated(2) file of two blocks of 100 and 50 bytes.
    fn file() -> FileInfo {
        let redundancy = Some(Redundancy::Replicated(2).into());
        let block = |id, size| BlockRecord {
            id,
            file: 9,
            size,
            state: BlockState::Sealed as i32,
            group: id,
            ec_index: 0,
            redundancy,
            chunks: vec![location(0, 1), location(1, 2)],
        };
        FileInfo {
            id: 9,
            path: "/f".into(),
            redundancy,
            block_size: 100,
            size: 150,
            sealed: true,
            block_ids: vec![3, 4],
            blocks: vec![block(3, 100), block(4, 50)],
            ..Default::default()
        }
    }

    #[test]
    fn metadata_checks_find_what_does_not_add_up() {
        assert_eq!(check_metadata(&file()), Vec::<String>::new());
        let mut f = file();
        f.size = 160;
        assert_eq!(check_metadata(&f), vec!["/f: data blocks hold 150 bytes, the file's size is 160"]);
        let mut f = file();
        f.blocks[1].chunks[1] = location(1, 1);
        f.blocks[0].file = 8;
        f.block_ids.reverse();
        assert_eq!(
            check_metadata(&f),
            vec![
                "/f: block list [4, 3] does not match the block records [3, 4]",
                "/f: block 3 belongs to file 8, not 9",
                "/f: block 4 has two copies on one node",
            ]
        );
        let mut f = file();
        f.blocks[0].chunks.pop();
        f.blocks[1].chunks[0].lost = true;
        f.blocks[1].size = 120;
        f.size = 220;
        assert_eq!(
            check_metadata(&f),
            vec![
                "/f: block 4 holds 120 bytes, more than the block size 100",
                "/f: block 4: 1 of 2 copies lost (disk or node dead)",
                "/f: block 3 has copies [0], expected 0..2",
            ]
        );
    }
}
