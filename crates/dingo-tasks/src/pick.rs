//! Which files a file-level task reads under its prefix: all of them, or a
//! reproducible random sample.

use dingo_client::{Client, ClientError};
use dingo_proto::v1::FileInfo;

/// Which files a file-level task picks under its prefix: every file
/// (`sample` none), or `n` distinct files chosen at random (the simulator's
/// "random files"), reproducibly from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FilePick {
    /// Take this many files chosen at random instead of every file.
    #[cfg_attr(feature = "clap", arg(long = "files", value_name = "FILES"))]
    pub sample: Option<usize>,
    /// Seed of the random choice of --files.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
}

impl FilePick {
    pub const ALL: FilePick = FilePick { sample: None, seed: 0 };
}

/// Sealed, non-empty files under `prefix` in path order (a sample of them
/// if asked). Files still being written are not picked, nor empty ones
/// (nothing to read; the planner refuses a segment without bytes).
/// Each with its block records (a listing carries none); a file deleted
/// since the listing is left out.
pub(crate) async fn pick_files(client: &Client, prefix: &str, pick: FilePick) -> Result<Vec<FileInfo>, ClientError> {
    let mut paths: Vec<String> =
        client.list(prefix).await?.into_iter().filter(|f| f.sealed && f.size > 0).map(|f| f.path).collect();
    paths.sort_unstable();
    if let Some(n) = pick.sample {
        fastrand::Rng::with_seed(pick.seed).shuffle(&mut paths);
        paths.truncate(n);
        paths.sort_unstable();
    }
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        match client.stat(&path).await {
            Ok(f) => files.push(f),
            Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(files)
}
