//! How much each task reads per second, with what period and deadline,
//! and the layout the world keeps so that transcoding always has files.

use crate::model::{ClusterModel, Redundancy, StripeShape};
use crate::sim::SimConfig;
use dingo_types::{TaskKind, Topology};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Per-task event sizes derived from the demand.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Rates {
    /// Bytes per second each task reads.
    pub(super) bytes_per_sec: [f64; TaskKind::COUNT],
    /// Period and deadline each task uses (scrubbing's shortened when the
    /// demand asks for more than one pass over the cluster per period).
    pub(super) period: [Duration; TaskKind::COUNT],
    pub(super) deadline: [Duration; TaskKind::COUNT],
    /// Fraction of the disks one scrubbing event covers (1 unless the
    /// demand is below the paper's, when a pass takes several periods).
    pub(super) scrub_fraction: f64,
}

impl Rates {
    /// Bytes per second each task reads, with `written_bytes` stored.
    /// Scrubbing is sized by coverage, not by its mix share: at the paper's
    /// demand a pass reads every written chunk once per scrubbing period
    /// (Table 2: 30 days); a higher demand (or intensity) scrubs more often
    /// with a deadline cut to the period, a lower one covers part of the
    /// cluster per period (paper §6.4). The other tasks split what is left
    /// of the demand in proportion to their shares. A mix with no
    /// scrubbing share does not scrub.
    pub(super) fn bytes_per_sec(config: &SimConfig, written_bytes: f64) -> [f64; TaskKind::COUNT] {
        let total = config.demand_mb_s_per_tb * 1e6 * config.cluster.raw_capacity as f64 / 1e12;
        let s = TaskKind::Scrubbing.index();
        let scrub_share = config.mix.shares[s];
        let passes = config.demand_mb_s_per_tb / PAPER_DEMAND_MB_S_PER_TB;
        let period = config.mix.timing[s].period.as_secs_f64();
        let scrub_rate = if scrub_share > 0.0 { written_bytes / period * passes } else { 0.0 };
        let others = (total - scrub_rate).max(0.0);
        TaskKind::ALL.map(|t| {
            let nominal = if t.index() == s { scrub_rate } else { others * config.mix.share(t) / (1.0 - scrub_share) };
            nominal * config.intensity[t.index()].max(0.0)
        })
    }

    pub(super) fn new(config: &SimConfig, model: &ClusterModel) -> Rates {
        let s = TaskKind::Scrubbing.index();
        let mut period = TaskKind::ALL.map(|t| config.mix.timing(t).period);
        let mut deadline = TaskKind::ALL.map(|t| config.mix.timing(t).deadline);
        let written_bytes = model.live_chunks() as f64 * model.spec().block_bytes as f64;
        let bytes_per_sec = Rates::bytes_per_sec(config, written_bytes);
        let passes = config.demand_mb_s_per_tb / PAPER_DEMAND_MB_S_PER_TB;
        let scrub_passes = passes * config.intensity[s];
        // Tasks that sample files: an event that would need more files
        // than the cluster holds becomes more frequent events instead.
        let file_bytes = model.spec().block_bytes as f64 * f64::from(model.spec().file_blocks);
        let fsck_bytes = model.spec().block_bytes as f64 * f64::from(config.fsck_blocks.min(model.spec().file_blocks));
        let files = live_files(model).max(1) as f64;
        let events_per_period =
            |t: TaskKind, unit: f64| bytes_per_sec[t.index()] * period[t.index()].as_secs_f64() / unit / files;
        let speedups = [
            (TaskKind::Scrubbing, scrub_passes),
            (TaskKind::Fsck, events_per_period(TaskKind::Fsck, fsck_bytes)),
            (TaskKind::FileScrubbing, events_per_period(TaskKind::FileScrubbing, file_bytes)),
            (TaskKind::Georeplication, events_per_period(TaskKind::Georeplication, file_bytes)),
        ];
        for (t, factor) in speedups {
            if factor > 1.0 {
                period[t.index()] = Duration::from_secs_f64(period[t.index()].as_secs_f64() / factor);
                deadline[t.index()] = deadline[t.index()].min(period[t.index()]);
            }
        }
        Rates { bytes_per_sec, period, deadline, scrub_fraction: scrub_passes.min(1.0) }
    }
}

/// The layout the world starts from and keeps: the configured one, except
/// that a scheme transcoding reads from must hold the files transcoding has
/// in flight (one stage's share over one deadline, plus a tenth): files stay
/// in their scheme until their job commits, so a smaller tier would run out
/// of files and transcoding would read less than its share. The coldest
/// scheme gives up what the others need.
pub(super) fn steady_layout(config: &SimConfig) -> Vec<(Redundancy, f64)> {
    let spec = &config.cluster;
    let mut layout = spec.layout.clone();
    let total: f64 = layout.iter().map(|(_, share)| share).sum();
    if layout.len() < 2 || total <= 0.0 {
        return layout;
    }
    for (_, share) in &mut layout {
        *share /= total;
    }
    let mut chain: Vec<usize> = (0..layout.len()).collect();
    chain.sort_by(|&a, &b| layout[b].0.overhead().total_cmp(&layout[a].0.overhead()));
    let written = spec.raw_capacity as f64 * spec.fill;
    let rates = Rates::bytes_per_sec(config, written);
    let transcoding = TaskKind::Transcoding.index();
    let in_flight =
        rates[transcoding] / (chain.len() - 1) as f64 * config.mix.timing[transcoding].deadline.as_secs_f64();
    let (&coldest, sources) = chain.split_last().expect("two schemes or more");
    for &s in sources {
        let needed = layout[s].0.overhead() * in_flight * 1.1 / written;
        layout[s].1 = layout[s].1.max(needed);
    }
    let others: f64 = sources.iter().map(|&s| layout[s].1).sum();
    if others >= 1.0 {
        // Transcoding asks for more than the cluster holds: no cold tier,
        // and transcoding reads what it can.
        for &s in sources {
            layout[s].1 /= others;
        }
        layout[coldest].1 = 0.0;
    } else {
        layout[coldest].1 = 1.0 - others;
    }
    layout
}

/// The demand (MB/s per TB) at which scrubbing covers the cluster once per
/// period: the paper's default (§6.1).
pub const PAPER_DEMAND_MB_S_PER_TB: f64 = 2.0;

/// Live files: live chunks of each scheme over its chunks per file.
pub(super) fn live_files(model: &ClusterModel) -> u64 {
    (0..model.scheme_count())
        .map(|s| {
            let r = model.scheme(s);
            let per_file = u64::from(model.spec().file_blocks) / r.data_per_stripe() * u64::from(r.stripe_width());
            model.scheme_live_chunks(s) / per_file
        })
        .sum()
}

/// Mean reconstruction read bytes of one disk failure in the cluster as it
/// is: each lost chunk of a replicated block costs one read, of an RS
/// k-of-n stripe k reads.
pub(super) fn bytes_per_failure(model: &ClusterModel) -> f64 {
    let reads: f64 = (0..model.scheme_count())
        .map(|s| {
            let per_chunk = match model.scheme(s) {
                Redundancy::Replicated(_) => 1.0,
                r @ Redundancy::Ec { .. } => r.data_per_stripe() as f64,
            };
            model.scheme_live_chunks(s) as f64 * per_chunk
        })
        .sum();
    reads * model.spec().block_bytes as f64 / f64::from(model.disk_count())
}
