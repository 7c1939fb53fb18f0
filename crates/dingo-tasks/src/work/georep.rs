//! Georeplication of one file: copy it to the remote site, verify the copy
//! there, record it durably.

use super::Outcome;
use super::files::{read_file_with, stored_bytes};
use crate::georep::RemoteSite;
use crate::work::ScheduledCopies;
use bytes::Bytes;
use dingo_client::{Client, ClientError, IoTag};
use dingo_types::{DeclarationId, TaskKind};

/// Reads and writes at the remote site are this task's maintenance there,
/// not tied to a declaration of the local planner.
const REMOTE_TAG: IoTag = IoTag::Maintenance { task: TaskKind::Georeplication, declaration: DeclarationId(0) };

/// What the remote site holds at a path, compared with the local bytes.
enum RemoteCopy {
    Absent,
    Identical,
    /// Something else: an older version, or a write cut short.
    Different {
        sealed: bool,
    },
}

async fn remote_copy(remote: &Client, path: &str, data: &Bytes) -> Result<RemoteCopy, ClientError> {
    let file = match remote.stat(path).await {
        Ok(f) => f,
        Err(e) if e.code() == Some(tonic::Code::NotFound) => return Ok(RemoteCopy::Absent),
        Err(e) => return Err(e),
    };
    if !file.sealed || file.size != data.len() as u64 {
        return Ok(RemoteCopy::Different { sealed: file.sealed });
    }
    let there = remote.read_file(&file, 0, file.size, REMOTE_TAG).await?;
    Ok(if there == *data { RemoteCopy::Identical } else { RemoteCopy::Different { sealed: true } })
}

pub(super) async fn georeplicate(
    client: &Client,
    path: &str,
    file_id: u64,
    site: &RemoteSite,
    copies: &ScheduledCopies,
    tag: IoTag,
) -> Result<Outcome, ClientError> {
    // A redelivered callback, or a job planned before a restart recorded it.
    if site.ledger.contains(path, file_id) {
        return Ok(Outcome::default());
    }
    let file = client.stat(path).await?;
    if file.id != file_id {
        return Ok(Outcome { skipped: true, ..Outcome::default() });
    }
    let data = read_file_with(client, &file, copies, tag).await?;
    let redundancy = dingo_proto::redundancy(file.redundancy.as_ref()).map_err(ClientError::Invalid)?;
    let remote = &site.client;
    let mut out = Outcome { logical_bytes: data.len() as u64, ..Outcome::default() };
    match remote_copy(remote, path, &data).await? {
        // An attempt killed after writing but before recording: only the
        // record is missing.
        RemoteCopy::Identical => {}
        other => {
            if let RemoteCopy::Different { sealed } = other {
                if !sealed {
                    // A writer killed mid-copy left it open; close it first.
                    remote.recover(path, true).await?;
                }
                match remote.delete(path).await {
                    Err(e) if e.code() != Some(tonic::Code::NotFound) => return Err(e),
                    _ => {}
                }
            }
            remote.put_tagged(path, redundancy, file.block_size, data.clone(), REMOTE_TAG).await?;
            out.written_bytes = stored_bytes(redundancy, data.len() as u64);
            if !matches!(remote_copy(remote, path, &data).await?, RemoteCopy::Identical) {
                return Err(ClientError::Unreadable(format!(
                    "the copy of {path} on the remote site differs from the original after writing"
                )));
            }
        }
    }
    site.ledger
        .record(path, file_id, data.len() as u64, crc32c::crc32c(&data))
        .map_err(|e| ClientError::Local(format!("progress file {}: {e}", site.ledger.path().display())))?;
    Ok(out)
}
