//! The write path: files created or appended through a [`Writer`], cut into
//! write units written to every assigned chunk location and committed in
//! order; one-shot and streaming puts that clean up after a failure.

use crate::error::ClientError;
use crate::{Client, IoTag, Result, Retry, STREAM_IN_FLIGHT_BYTES, WRITE_ATTEMPTS, WRITE_PIECE, WRITES_IN_FLIGHT, ec};
use bytes::{Buf, Bytes};
use dingo_proto::Redundancy;
use dingo_proto::v1::*;
use dingo_types::ChunkRef;
use std::collections::VecDeque;

/// What [`Client::put_from`] reads: the local file at `local`, or stdin
/// for `-`; with the file's length when known (for a progress bar).
pub async fn open_local(
    local: &std::path::Path,
) -> Result<(Box<dyn tokio::io::AsyncRead + Unpin + Send>, Option<u64>)> {
    if local.as_os_str() == "-" {
        return Ok((Box::new(tokio::io::stdin()), None));
    }
    let file = tokio::fs::File::open(local)
        .await
        .map_err(|e| ClientError::Local(format!("cannot read {}: {e}", local.display())))?;
    let len = file.metadata().await.ok().map(|m| m.len());
    Ok((Box::new(file), len))
}

/// How [`Client::put_from`] stores a file. With the `clap` feature these
/// are also a command line's flags (`dingo fs put`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PutOptions {
    /// replicated:R or ec:K+M.
    #[cfg_attr(feature = "clap", arg(long, default_value = "replicated:3", value_parser = str::parse::<Redundancy>))]
    pub redundancy: Redundancy,
    /// Block size, 64KB .. 1GB (e.g. 8MB).
    #[cfg_attr(
        feature = "clap",
        arg(long = "block-size", value_name = "BLOCK_SIZE", default_value = "8MB", value_parser = dingo_types::parse_bytes)
    )]
    pub block_size_bytes: u64,
    /// Replace an existing file (deleted first; not atomic: between the
    /// two, the path does not exist).
    #[cfg_attr(feature = "clap", arg(long))]
    pub overwrite: bool,
}

impl Client {
    /// Creates a file and returns its writer.
    pub async fn create(&self, path: &str, redundancy: Redundancy, block_size: u64) -> Result<Writer<'_>> {
        let req = CreateFileRequest { path: path.to_string(), redundancy: Some(redundancy.into()), block_size };
        let r = meta_call!(self, Retry::IfNotSent, create_file, req).await?;
        Writer::new(self, r)
    }

    /// Takes the lease of an existing unsealed file to append to it.
    pub async fn open_append(&self, path: &str) -> Result<Writer<'_>> {
        let r = meta_call!(self, Retry::IfNotSent, open_for_append, OpenForAppendRequest { path: path.to_string() })
            .await?;
        Writer::new(self, r)
    }

    /// Creates, writes and seals a file in one go; returns its size. Whole
    /// write units are sent straight from `data`, without copying. If the
    /// write fails, the partial file is deleted (best effort; otherwise its
    /// lease expires and lease recovery closes it).
    pub async fn put(&self, path: &str, redundancy: Redundancy, block_size: u64, data: Bytes) -> Result<u64> {
        self.put_tagged(path, redundancy, block_size, data, IoTag::Foreground).await
    }

    /// [`Client::put`] for `tag`: the nodes schedule every chunk write in
    /// `tag`'s class (a maintenance task's rewrite of a file waits like its
    /// reads, behind foreground).
    pub async fn put_tagged(
        &self,
        path: &str,
        redundancy: Redundancy,
        block_size: u64,
        data: Bytes,
        tag: IoTag,
    ) -> Result<u64> {
        let mut w = self.create(path, redundancy, block_size).await?.tagged(tag);
        let r = match w.append_bytes(data).await {
            Ok(()) => w.seal().await,
            Err(e) => Err(e),
        };
        self.discard_on_error(path, r).await
    }

    /// Like [`Client::put`], reading the content from `reader` in bounded
    /// memory: at most about [`STREAM_IN_FLIGHT_BYTES`] (and never fewer
    /// than one write unit) are read ahead of what the nodes have sealed.
    /// `progress` is called with the bytes read so far. If `interrupt`
    /// completes first (a shutdown signal, say), the write stops and what
    /// it wrote is deleted: [`ClientError::Interrupted`].
    pub async fn put_from(
        &self,
        path: &str,
        options: &PutOptions,
        reader: impl tokio::io::AsyncRead + Unpin,
        progress: impl FnMut(u64),
        interrupt: impl Future<Output = ()>,
    ) -> Result<u64> {
        tokio::select! {
            r = self.put_stream(path, options, reader, progress) => r,
            () = interrupt => {
                // Dropping the put's future stops the writer where it is.
                let not_removed = self.delete(path).await.err().map(|e| e.to_string());
                Err(ClientError::Interrupted { path: path.to_string(), not_removed })
            }
        }
    }

    async fn put_stream<R: tokio::io::AsyncRead + Unpin>(
        &self,
        path: &str,
        &PutOptions { redundancy, block_size_bytes, overwrite }: &PutOptions,
        mut reader: R,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        use tokio::io::AsyncReadExt;
        if overwrite {
            match self.delete(path).await {
                Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
                other => {
                    other?;
                }
            }
        }
        let mut w = self.create(path, redundancy, block_size_bytes).await?;
        let unit = w.unit_len();
        w.max_in_flight = (STREAM_IN_FLIGHT_BYTES / unit.max(1)).clamp(1, WRITES_IN_FLIGHT);
        let r = async {
            let mut read = 0u64;
            loop {
                let mut buf = Vec::with_capacity(unit);
                while buf.len() < unit {
                    let n = (&mut reader)
                        .take((unit - buf.len()) as u64)
                        .read_to_end(&mut buf)
                        .await
                        .map_err(|e| ClientError::Invalid(format!("cannot read the data for {path}: {e}")))?;
                    if n == 0 {
                        break;
                    }
                }
                let last = buf.len() < unit;
                read += buf.len() as u64;
                if last {
                    w.append_and_flush(Bytes::from(buf)).await?;
                } else {
                    w.append_bytes(Bytes::from(buf)).await?;
                }
                progress(read);
                if last {
                    break;
                }
            }
            w.seal().await
        }
        .await;
        self.discard_on_error(path, r).await
    }

    /// Deletes the partial file of a failed put (best effort), passing the
    /// result on.
    async fn discard_on_error(&self, path: &str, r: Result<u64>) -> Result<u64> {
        if let Err(e) = &r {
            tracing::debug!(path, "put failed ({e}); deleting the partial file");
            if let Err(d) = self.delete(path).await {
                tracing::warn!(path, "cannot delete the partial file of a failed put: {d}");
            }
        }
        r
    }

    /// Streams one chunk to a node and has it sealed; the node schedules
    /// its disk writes in `tag`'s class.
    pub(crate) async fn write_chunk(
        &self,
        addr: &str,
        chunk: ChunkRef,
        disk: u32,
        data: Bytes,
        tag: IoTag,
    ) -> Result<()> {
        let total_len = data.len() as u64;
        let pieces = data.len().div_ceil(WRITE_PIECE).max(1);
        let msgs: Vec<WriteChunkRequest> = (0..pieces)
            .map(|i| WriteChunkRequest {
                chunk: (i == 0).then(|| chunk.into()),
                disk,
                data: data.slice(i * WRITE_PIECE..((i + 1) * WRITE_PIECE).min(data.len())),
                seal: i + 1 == pieces,
                total_len,
                io_class: (i == 0).then(|| tag.into()),
            })
            .collect();
        self.node(addr)?.write_chunk(tokio_stream::iter(msgs)).await?;
        Ok(())
    }
}

/// Writes one file. Data is acknowledged unit by unit (see the crate docs):
/// up to `WRITES_IN_FLIGHT` (4) units are written at once, and they are
/// committed strictly in order, so the file never has holes.
/// [`Writer::seal`] writes the remainder and makes the file immutable.
pub struct Writer<'c> {
    client: &'c Client,
    unit: UnitWriter,
    buf: Vec<u8>,
    size: u64,
    in_flight: VecDeque<tokio::task::JoinHandle<Result<Vec<BlockSize>>>>,
    /// Write units in flight at most.
    max_in_flight: usize,
}

impl<'c> Writer<'c> {
    fn new(client: &'c Client, r: OpenFileReply) -> Result<Self> {
        let file = r.file.unwrap_or_default();
        let redundancy = dingo_proto::redundancy(file.redundancy.as_ref()).map_err(ClientError::Unreadable)?;
        let unit = UnitWriter {
            client: client.clone(),
            path: file.path,
            lease: r.lease,
            redundancy,
            block_size: file.block_size,
            tag: IoTag::Foreground,
        };
        Ok(Writer {
            client,
            unit,
            buf: Vec::new(),
            size: file.size,
            in_flight: VecDeque::new(),
            max_in_flight: WRITES_IN_FLIGHT,
        })
    }

    /// Has the nodes schedule this writer's chunk writes in `tag`'s class
    /// (foreground unless set).
    pub fn tagged(mut self, tag: IoTag) -> Self {
        self.unit.tag = tag;
        self
    }

    /// Bytes in one write unit.
    fn unit_len(&self) -> usize {
        let k = match self.unit.redundancy {
            Redundancy::Replicated(_) => 1,
            Redundancy::Ec { data, .. } => u64::from(data),
        };
        (self.unit.block_size * k) as usize
    }

    /// Acknowledged (committed) file size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Buffers data and starts writing every complete unit.
    pub async fn append(&mut self, data: impl AsRef<[u8]>) -> Result<()> {
        let mut data = data.as_ref();
        while !data.is_empty() {
            let n = self.buffer(data);
            data = &data[n..];
            self.start_full_unit().await?;
        }
        Ok(())
    }

    /// Like [`Writer::append`], but whole units that start at a unit
    /// boundary are written straight from `data` (shared, not copied).
    pub async fn append_bytes(&mut self, mut data: Bytes) -> Result<()> {
        let unit = self.unit_len();
        while !data.is_empty() {
            if self.buf.is_empty() && data.len() >= unit {
                self.start_unit(data.split_to(unit)).await?;
                continue;
            }
            let n = self.buffer(&data);
            data.advance(n);
            self.start_full_unit().await?;
        }
        Ok(())
    }

    /// [`Writer::append_bytes`], then [`Writer::flush`]. With nothing
    /// buffered, a short `data` is written straight as the last unit instead
    /// of being copied into a unit-sized buffer first (a wide EC stripe's
    /// buffer is 48 MB).
    pub async fn append_and_flush(&mut self, data: Bytes) -> Result<()> {
        if self.buf.is_empty() && !data.is_empty() && data.len() < self.unit_len() {
            self.start_unit(data).await?;
        } else {
            self.append_bytes(data).await?;
        }
        self.flush().await
    }

    /// Copies as much of `data` as fits into the unit being filled; returns
    /// how much. The buffer is allocated once per unit at its full size.
    fn buffer(&mut self, data: &[u8]) -> usize {
        let unit = self.unit_len();
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(unit);
        }
        let n = (unit - self.buf.len()).min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        n
    }

    /// Starts writing the buffered unit if it is complete.
    async fn start_full_unit(&mut self) -> Result<()> {
        if self.buf.len() < self.unit_len() {
            return Ok(());
        }
        let data = Bytes::from(std::mem::take(&mut self.buf));
        self.start_unit(data).await
    }

    async fn start_unit(&mut self, data: Bytes) -> Result<()> {
        if self.in_flight.len() >= self.max_in_flight {
            self.commit_next().await?;
        }
        self.in_flight.push_back(tokio::spawn(self.unit.clone().write(data)));
        Ok(())
    }

    /// Waits for the oldest unit in flight and commits it.
    async fn commit_next(&mut self) -> Result<()> {
        let Some(task) = self.in_flight.pop_front() else { return Ok(()) };
        let blocks = task.await.map_err(|e| ClientError::Unreadable(format!("write task failed: {e}")))??;
        let req = CommitBlocksRequest { path: self.unit.path.clone(), lease: self.unit.lease, blocks };
        self.size = meta_call!(self.client, Retry::IfNotSent, commit_blocks, req).await?.file_size;
        Ok(())
    }

    /// Writes buffered data as a (possibly short) unit and commits every
    /// unit: on return, everything appended is acknowledged.
    pub async fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let data = Bytes::from(std::mem::take(&mut self.buf));
            self.start_unit(data).await?;
        }
        while !self.in_flight.is_empty() {
            self.commit_next().await?;
        }
        Ok(())
    }

    /// Writes buffered data, then seals the file. Returns its size.
    pub async fn seal(mut self) -> Result<u64> {
        self.flush().await?;
        let req = SealFileRequest { path: self.unit.path.clone(), lease: self.unit.lease };
        Ok(meta_call!(self.client, Retry::IfNotSent, seal_file, req).await?.file_size)
    }
}

/// What a write-unit task needs; owned so the task can run on its own.
#[derive(Clone)]
struct UnitWriter {
    client: Client,
    path: String,
    lease: u64,
    redundancy: Redundancy,
    block_size: u64,
    /// Whom the chunk writes are for.
    tag: IoTag,
}

impl UnitWriter {
    /// Writes one unit's chunks, retrying on fresh placements if nodes fail.
    /// Returns the blocks to commit.
    async fn write(self, data: Bytes) -> Result<Vec<BlockSize>> {
        let mut exclude = Vec::new();
        let mut last = String::new();
        for _ in 0..WRITE_ATTEMPTS {
            match self.attempt(&data, &mut exclude).await {
                Ok(blocks) => return Ok(blocks),
                // The metadata service's refusals (sealed, lease, no space)
                // will not change on retry.
                Err(UnitError::Meta(e)) => return Err(e),
                Err(UnitError::Nodes(e)) => last = e,
            }
        }
        Err(ClientError::WriteFailed { path: self.path.clone(), last })
    }

    /// One attempt: allocate and write all chunks. Nodes that fail are added
    /// to `exclude` for the next attempt.
    async fn attempt(&self, data: &Bytes, exclude: &mut Vec<u32>) -> Result<Vec<BlockSize>, UnitError> {
        let (chunks, sizes): (Vec<Bytes>, Vec<u64>) = match self.redundancy {
            Redundancy::Replicated(_) => (vec![data.clone()], vec![data.len() as u64]),
            Redundancy::Ec { data: k, parity: m } => {
                let (k, m) = (usize::from(k), usize::from(m));
                let d = data.clone();
                let parity = tokio::task::spawn_blocking(move || ec::encode(&d, k, m))
                    .await
                    .map_err(|e| UnitError::Meta(ClientError::Unreadable(e.to_string())))?
                    .map_err(|e| UnitError::Meta(e.into()))?;
                let mut c: Vec<Bytes> = (0..k).map(|i| data.slice(ec::member_range(data.len(), k, i))).collect();
                c.extend(parity.into_iter().map(Bytes::from));
                let sizes = c.iter().map(|b| b.len() as u64).collect();
                (c, sizes)
            }
        };
        let chunk_bytes = sizes.iter().copied().max().unwrap_or(0);
        let req = AllocateBlocksRequest {
            path: self.path.clone(),
            lease: self.lease,
            chunk_bytes,
            exclude_nodes: exclude.clone(),
        };
        let blocks =
            meta_call!(self.client, Retry::IfNotSent, allocate_blocks, req).await.map_err(UnitError::Meta)?.blocks;
        // (block index, location) of every chunk to write.
        let writes = blocks.iter().enumerate().flat_map(|(i, b)| b.chunks.iter().map(move |c| (i, b, c)));
        let results = futures::future::join_all(writes.map(|(i, b, c)| {
            let chunk = ChunkRef { block: dingo_types::BlockId(b.id), copy: c.copy as u8 };
            let data = if matches!(self.redundancy, Redundancy::Replicated(_)) { &chunks[0] } else { &chunks[i] };
            async move {
                let r = self.client.write_chunk(&c.addr, chunk, c.disk, data.clone(), self.tag).await;
                (c.node, r.map_err(|e| format!("{chunk} on {}: {e}", c.addr)))
            }
        }))
        .await;
        let failed: Vec<(u32, String)> =
            results.into_iter().filter_map(|(node, r)| r.err().map(|e| (node, e))).collect();
        if !failed.is_empty() {
            let ids = blocks.iter().map(|b| b.id).collect();
            let req = AbandonBlocksRequest { path: self.path.clone(), lease: self.lease, blocks: ids };
            meta_call!(self.client, Retry::IfNotSent, abandon_blocks, req).await.map_err(UnitError::Meta)?;
            exclude.extend(failed.iter().map(|f| f.0));
            let msg = failed.into_iter().map(|f| f.1).collect::<Vec<_>>().join("; ");
            tracing::warn!(path = %self.path, "write unit failed, retrying elsewhere: {msg}");
            return Err(UnitError::Nodes(msg));
        }
        Ok(blocks.iter().zip(&sizes).map(|(b, &size)| BlockSize { block: b.id, size }).collect())
    }
}

enum UnitError {
    /// The metadata service refused: final.
    Meta(ClientError),
    /// Some node writes failed: retry on other nodes.
    Nodes(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_local_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing-here");
        let err = open_local(&missing).await.err().expect("refused").to_string();
        assert!(err.starts_with("cannot read ") && err.contains("nothing-here"), "{err}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(open_local(&file).await.unwrap().1, Some(5));
    }

    #[test]
    fn an_interrupted_put_says_whether_its_file_is_gone() {
        let gone = ClientError::Interrupted { path: "/a".into(), not_removed: None };
        assert_eq!(gone.to_string(), "interrupted: /a removed");
        let left = ClientError::Interrupted { path: "/a".into(), not_removed: Some("unreachable".into()) };
        assert_eq!(left.to_string(), "interrupted; /a could not be removed (unreachable): `dingo fs rm /a`");
    }
}
