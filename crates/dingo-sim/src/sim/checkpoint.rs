//! Checkpoints: a [`Simulation`]'s whole state written at a quantum
//! boundary, so that a run longer than a process may live spans several
//! processes and ends with exactly the result of an uninterrupted run.
//!
//! The file: the magic bytes, the format version (little-endian `u32`), a
//! header (the [`SimConfig`], the quanta done, the [`RunCost`] of the
//! processes so far), the simulation itself, then a CRC-32C of every byte
//! before it. Header and state are bincode, streamed through a buffer (a
//! 1 EB run's state is gigabytes). Loading checks the checksum over the
//! whole file before decoding anything, so a truncated or damaged file is
//! refused, never half-loaded. Writing goes to `PATH.tmp`, renamed over
//! `PATH` once complete: a crash mid-write leaves the last checkpoint.

use super::{SimConfig, Simulation};
use crate::cost::{CostMeter, RunCost};
use bincode::Options;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use thiserror::Error;

const MAGIC: &[u8; 16] = b"DINGO-SIM-CKPT\r\n";
/// Bump on any change to the state's types: a checkpoint is read only by
/// the code that wrote it.
const VERSION: u32 = 2;
const BUFFER_BYTES: usize = 1 << 20;

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("checkpoint {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a simulation checkpoint")]
    NotACheckpoint { path: PathBuf },
    #[error("checkpoint {path} has format version {found}; this build reads version {VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("checkpoint {path} is corrupt or truncated ({reason})")]
    Corrupt { path: PathBuf, reason: String },
    #[error("writing checkpoint {path}: {source}")]
    Encode { path: PathBuf, source: bincode::Error },
}

/// What a checkpoint says about itself ahead of the state.
#[derive(Serialize, Deserialize)]
struct Header {
    config: SimConfig,
    quanta_done: u32,
    cost: RunCost,
}

/// Varint integers: most of the state is small counters and ids.
fn encoding() -> impl Options {
    bincode::DefaultOptions::new()
}

/// A writer that keeps the CRC-32C of everything written through it.
struct Crc32cWriter<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for Crc32cWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Simulation {
    /// Writes the whole state to `path` (through `PATH.tmp`), first waiting
    /// for the declarative replay in flight: a checkpoint is taken between
    /// two [`Simulation::step`]s.
    pub fn save_checkpoint(&mut self, path: &Path) -> Result<(), CheckpointError> {
        if let Some(declarative) = &mut self.declarative {
            declarative.wait_for_replay();
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let written = self.write_checkpoint(&tmp);
        if written.is_err() {
            // Best effort: the error that matters is the write's.
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        std::fs::rename(&tmp, path).map_err(io_error(path))
    }

    fn write_checkpoint(&self, path: &Path) -> Result<(), CheckpointError> {
        let file = File::create(path).map_err(io_error(path))?;
        let mut out = Crc32cWriter { inner: BufWriter::with_capacity(BUFFER_BYTES, file), crc: 0 };
        out.write_all(MAGIC).map_err(io_error(path))?;
        out.write_all(&VERSION.to_le_bytes()).map_err(io_error(path))?;
        let header = Header { config: self.config.clone(), quanta_done: self.quantum, cost: self.meter.cost() };
        let encode = |source| CheckpointError::Encode { path: path.to_path_buf(), source };
        encoding().serialize_into(&mut out, &header).map_err(encode)?;
        encoding().serialize_into(&mut out, self).map_err(encode)?;
        let Crc32cWriter { mut inner, crc } = out;
        inner.write_all(&crc.to_le_bytes()).map_err(io_error(path))?;
        let file = inner.into_inner().map_err(|e| io_error(path)(e.into_error()))?;
        file.sync_all().map_err(io_error(path))
    }

    /// Reads a checkpoint written by [`Self::save_checkpoint`]: the run
    /// continues from where it was saved, its cost counted on from the
    /// earlier processes'.
    pub fn load_checkpoint(path: &Path) -> Result<Simulation, CheckpointError> {
        let meter_started = Instant::now();
        let body_bytes = verify(path)?;
        let file = File::open(path).map_err(io_error(path))?;
        let mut input = BufReader::with_capacity(BUFFER_BYTES, file).take(body_bytes);
        let mut prefix = [0; MAGIC.len() + 4];
        input.read_exact(&mut prefix).map_err(io_error(path))?;
        let corrupt = |reason: String| CheckpointError::Corrupt { path: path.to_path_buf(), reason };
        let header: Header = encoding().deserialize_from(&mut input).map_err(|e| corrupt(e.to_string()))?;
        let mut sim: Simulation = encoding().deserialize_from(&mut input).map_err(|e| corrupt(e.to_string()))?;
        if input.limit() != 0 {
            return Err(corrupt(format!("{} bytes after the state", input.limit())));
        }
        if header.config != sim.config || header.quanta_done != sim.quantum {
            return Err(corrupt("the header does not describe the state".into()));
        }
        sim.meter = CostMeter::since(header.cost, meter_started);
        Ok(sim)
    }
}

/// Checks the magic bytes, the version and the checksum of the checkpoint
/// at `path`; returns the length of what the checksum covers.
fn verify(path: &Path) -> Result<u64, CheckpointError> {
    let file = File::open(path).map_err(io_error(path))?;
    let len = file.metadata().map_err(io_error(path))?.len();
    let mut input = BufReader::with_capacity(BUFFER_BYTES, file);
    let mut prefix = [0; MAGIC.len() + 4];
    if len < (prefix.len() + 4) as u64 || input.read_exact(&mut prefix).is_err() || &prefix[..MAGIC.len()] != MAGIC {
        return Err(CheckpointError::NotACheckpoint { path: path.to_path_buf() });
    }
    let found = u32::from_le_bytes(prefix[MAGIC.len()..].try_into().expect("4 bytes"));
    if found != VERSION {
        return Err(CheckpointError::Version { path: path.to_path_buf(), found });
    }
    let body_bytes = len - 4;
    let mut crc = crc32c::crc32c(&prefix);
    let mut rest = (&mut input).take(body_bytes - prefix.len() as u64);
    let mut buf = vec![0; BUFFER_BYTES];
    loop {
        let n = rest.read(&mut buf).map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
    }
    let mut stored = [0; 4];
    input.read_exact(&mut stored).map_err(io_error(path))?;
    if crc != u32::from_le_bytes(stored) {
        let reason = "checksum mismatch".to_string();
        return Err(CheckpointError::Corrupt { path: path.to_path_buf(), reason });
    }
    Ok(body_bytes)
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { path: path.to_path_buf(), source }
}
