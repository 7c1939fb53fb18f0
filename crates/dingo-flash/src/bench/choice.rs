//! What `dingo bench flash` replays: the synthetic trace, a trace file the
//! user has, or the real engines' cross-check on a prefix of the quick
//! trace. With the `clap` feature, also the command's flags.

use std::path::{Path, PathBuf};

use crate::trace::TraceFormat;

#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BenchChoice {
    /// Replay this Twitter cache-trace CSV instead of the synthetic trace.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "kvcache_trace"))]
    pub twitter_trace: Option<PathBuf>,
    /// Replay this CacheLib kvcache trace CSV (with its header) instead of the synthetic trace.
    #[cfg_attr(feature = "clap", arg(long))]
    pub kvcache_trace: Option<PathBuf>,
    /// Read at most this many requests of the trace.
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_requests: Option<u64>,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 42))]
    pub seed: u64,
    /// Instead: the real engines (pages in a file, O_DIRECT, in a temporary directory under --out or the
    /// system's) against the simulator, on this many requests of the quick trace.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "REQUESTS", num_args = 0..=1, default_missing_value = "600000",
            value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["twitter_trace", "kvcache_trace"])
    )]
    pub real: Option<u64>,
}

impl BenchChoice {
    /// The trace file to replay and its format, if one was named.
    pub fn trace_file(&self) -> Option<(&Path, TraceFormat)> {
        let twitter = self.twitter_trace.as_deref().map(|path| (path, TraceFormat::Twitter));
        twitter.or(self.kvcache_trace.as_deref().map(|path| (path, TraceFormat::Kvcache)))
    }
}
