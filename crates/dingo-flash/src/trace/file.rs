//! What the trace readers share: their errors, key ids, and reading a
//! whole file in one of the formats.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::hash::mix64;
use crate::object::Object;
use crate::trace::{read_kvcache_csv, read_twitter_csv};

/// A line that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: {reason}")]
    Malformed { line: u64, reason: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A trace file that cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TraceFileError {
    #[error("opening {}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("reading {}", path.display())]
    Read { path: PathBuf, source: TraceError },
    #[error("{} holds fewer than two requests", path.display())]
    TooShort { path: PathBuf },
}

/// The public trace formats a file can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// `twitter/cache-trace` CSV ([`read_twitter_csv`]).
    Twitter,
    /// CacheLib's kvcache CSV with a header ([`read_kvcache_csv`]).
    Kvcache,
}

/// Reads up to `limit` requests of the trace file at `path`; a benchmark
/// needs at least two (one to warm up, one to measure).
pub fn read_trace_file(path: &Path, format: TraceFormat, limit: Option<u64>) -> Result<Vec<Object>, TraceFileError> {
    let file = std::fs::File::open(path).map_err(|source| TraceFileError::Open { path: path.into(), source })?;
    let reader = BufReader::new(file);
    let trace = match format {
        TraceFormat::Twitter => read_twitter_csv(reader, limit),
        TraceFormat::Kvcache => read_kvcache_csv(reader, limit),
    }
    .map_err(|source| TraceFileError::Read { path: path.into(), source })?;
    if trace.len() < 2 {
        return Err(TraceFileError::TooShort { path: path.into() });
    }
    Ok(trace)
}

/// A stable 64-bit id for a key string (FNV-1a, then mixed).
pub(crate) fn key_id(key: &str) -> u64 {
    let fnv = key.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3));
    mix64(fnv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_needs_two_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        std::fs::write(&path, "0,k,1,2,3,get,0\n1,k,1,2,3,set,0\n").unwrap();
        let read = |format| read_trace_file(&path, format, None);
        assert!(matches!(read(TraceFormat::Twitter), Err(TraceFileError::TooShort { .. })));
        std::fs::write(&path, "0,k,1,2,3,get,0\n1,k,1,2,3,get,0\n").unwrap();
        assert_eq!(read(TraceFormat::Twitter).unwrap().len(), 2);
        std::fs::write(&path, "key,op,size,op_count,key_size\nk,GET,10,2,3\n").unwrap();
        assert_eq!(read(TraceFormat::Kvcache).unwrap().len(), 2);
        assert!(matches!(read(TraceFormat::Twitter), Err(TraceFileError::Read { .. })));
        let missing = dir.path().join("missing.csv");
        assert!(matches!(read_trace_file(&missing, TraceFormat::Kvcache, None), Err(TraceFileError::Open { .. })));
    }
}
