//! The flash-tier benchmark: a storage node's cache under the demo's kind
//! of load, replayed in simulated time with DRAM only, with a zoned flash
//! tier, and with the same tier on a conventional SSD.
//!
//! Every quantum the planner pins a group of chunks until the end of a
//! window; several tasks read each pinned chunk at random moments in that
//! window (the first read comes from disk, the others are what the pin is
//! for); foreground readers read a skewed working set through the general
//! region. The DRAM pinned region is smaller than the pins need, so some
//! pinned pages are pushed out before their last reader: without flash
//! those readers go back to disk. The replay counts those re-reads, the
//! flash writes and the device's own writes.

use super::{Admission, ConventionalMedia, FlashTier, TierConfig, TierMedia, TierStats, ZonedMedia};
use crate::device::{DeviceCounters, FtlConfig, GcPolicy};
use lru::LruCache;
use serde::Serialize;

/// The load and the node's cache sizes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FlashTierBenchConfig {
    pub seed: u64,
    pub duration_ms: u64,
    /// A dispatch group is pinned every quantum.
    pub quantum_ms: u64,
    /// How long a group's pins last, from the start of its quantum.
    pub pin_window_ms: u64,
    pub chunks_per_group: u32,
    /// Cache pages (of `tier.page_bytes`) per chunk.
    pub chunk_pages: u32,
    /// Tasks reading each pinned chunk.
    pub readers_per_chunk: u32,
    pub dram_pinned_pages: u32,
    pub dram_general_pages: u32,
    pub foreground_reads_per_quantum: u32,
    /// Chunks the foreground reads, the first ones far more often.
    pub foreground_chunks: u64,
    pub tier: TierConfig,
    /// Hidden over-provisioning of the conventional SSD.
    pub ssd_hidden_op: f64,
}

impl FlashTierBenchConfig {
    /// Two simulated hours of 30 s quanta with 60 s pins; `quick` runs 10
    /// minutes.
    pub fn standard(quick: bool) -> FlashTierBenchConfig {
        const PAGE: u64 = 64 * 1024;
        const TB: u64 = 1_000_000_000_000;
        FlashTierBenchConfig {
            seed: 1,
            duration_ms: if quick { 600_000 } else { 7_200_000 },
            quantum_ms: 30_000,
            pin_window_ms: 60_000,
            chunks_per_group: 100,
            chunk_pages: 32,
            readers_per_chunk: 3,
            // Two overlapping groups pin 6,400 pages; DRAM holds 2,000.
            dram_pinned_pages: 2_000,
            dram_general_pages: 2_000,
            foreground_reads_per_quantum: 3_000,
            foreground_chunks: 2_000,
            tier: TierConfig {
                page_bytes: PAGE,
                zone_pages: 256,
                zones: 64,
                max_active_zones: 4,
                pin_bucket_ms: 10_000,
                // A 1 TB SSD at one drive write per day, of which the tier
                // uses 1 GiB of space; an hour's worth of burst.
                write_budget_bytes_per_day: TB,
                write_burst_bytes: TB / 24,
            },
            ssd_hidden_op: 0.07,
        }
    }
}

/// One configuration's figures.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TierRun {
    /// First reads of pinned chunks: the reads the planner scheduled.
    pub planned_disk_read_bytes: u64,
    /// Later readers of a pinned chunk who went to disk because its page had
    /// been pushed out of DRAM (and was not on flash).
    pub pin_overflow_reread_bytes: u64,
    pub foreground_disk_read_bytes: u64,
    pub pinned_flash_hit_bytes: u64,
    pub foreground_flash_hit_bytes: u64,
    pub tier: Option<TierStats>,
    pub device: Option<DeviceCounters>,
    /// Device bytes written per simulated day.
    pub device_write_bytes_per_day: f64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct FlashTierReport {
    pub config: FlashTierBenchConfig,
    pub dram_only: TierRun,
    pub zoned: TierRun,
    pub conventional: TierRun,
    /// 1 - zoned re-reads / DRAM-only re-reads.
    pub pin_overflow_reread_reduction: f64,
    pub zoned_write_amplification: f64,
    pub conventional_write_amplification: f64,
    /// The zoned tier's device writes per day over its budget.
    pub zoned_writes_of_budget: f64,
}

/// The three configurations side by side in GB, then the headline ratios.
impl std::fmt::Display for FlashTierReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gb = |b: u64| b as f64 / 1e9;
        writeln!(f, "{:<28} {:>10} {:>10} {:>13}", "", "DRAM only", "zoned", "conventional")?;
        for (name, get) in [
            ("planned disk reads, GB", (|t| t.planned_disk_read_bytes) as fn(&TierRun) -> u64),
            ("pin-overflow re-reads, GB", |t| t.pin_overflow_reread_bytes),
            ("foreground disk reads, GB", |t| t.foreground_disk_read_bytes),
            ("flash device writes, GB", |t| t.device.map_or(0, |d| d.nand_write_bytes)),
        ] {
            let (dram, zoned, conventional) = (get(&self.dram_only), get(&self.zoned), get(&self.conventional));
            writeln!(f, "{name:<28} {:>10.2} {:>10.2} {:>13.2}", gb(dram), gb(zoned), gb(conventional))?;
        }
        writeln!(
            f,
            "pin-overflow re-reads cut {:.1} %; write amplification zoned {:.3}, conventional {:.3}; \
             zoned writes {:.0} % of the budget",
            self.pin_overflow_reread_reduction * 100.0,
            self.zoned_write_amplification,
            self.conventional_write_amplification,
            self.zoned_writes_of_budget * 100.0
        )
    }
}

/// Runs the three configurations on the same load.
pub fn run_flash_tier_bench(config: &FlashTierBenchConfig) -> Result<FlashTierReport, String> {
    let t = config.tier;
    let dram_only = replay(config, None::<FlashTier<Page, (), ZonedMedia>>);
    let zoned_media = ZonedMedia::new(t.zones, t.device_pages_per_zone(), t.max_active_zones);
    let zoned = replay(config, Some(FlashTier::new(t, zoned_media)?));
    let ftl = FtlConfig { logical_pages: 0, eu_pages: 64, hidden_op: config.ssd_hidden_op, gc: GcPolicy::Greedy };
    let conventional_media = ConventionalMedia::new(t.zones, t.device_pages_per_zone(), ftl);
    let conventional = replay(config, Some(FlashTier::new(t, conventional_media)?));
    let wa = |r: &TierRun| r.device.map_or(1.0, |d| d.write_amplification());
    Ok(FlashTierReport {
        config: *config,
        dram_only,
        zoned,
        conventional,
        pin_overflow_reread_reduction: if dram_only.pin_overflow_reread_bytes == 0 {
            0.0
        } else {
            1.0 - zoned.pin_overflow_reread_bytes as f64 / dram_only.pin_overflow_reread_bytes as f64
        },
        zoned_write_amplification: wa(&zoned),
        conventional_write_amplification: wa(&conventional),
        zoned_writes_of_budget: zoned.device_write_bytes_per_day / t.write_budget_bytes_per_day as f64,
    })
}

/// A page of a chunk: (chunk, page index).
type Page = (u64, u32);

#[derive(Clone, Copy)]
enum Event {
    /// A read of a whole pinned chunk; `first` is the planned disk read.
    PinnedRead {
        chunk: u64,
        until_ms: u64,
        first: bool,
    },
    ForegroundRead {
        chunk: u64,
    },
}

fn replay<M: TierMedia>(config: &FlashTierBenchConfig, mut tier: Option<FlashTier<Page, (), M>>) -> TierRun {
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let page_bytes = config.tier.page_bytes;
    let cap = |pages: u32| std::num::NonZeroUsize::new(pages.max(1) as usize).expect("at least one");
    // Pinned pages by their pin's end, so expired pins leave DRAM.
    let mut pinned: LruCache<Page, u64> = LruCache::new(cap(config.dram_pinned_pages));
    let mut general: LruCache<Page, ()> = LruCache::new(cap(config.dram_general_pages));
    let mut run = TierRun::default();
    let mut next_chunk = 1u64 << 40;
    let quanta = config.duration_ms / config.quantum_ms;
    // Events of the window ahead, by time.
    let mut events: std::collections::BTreeMap<(u64, u64), Event> = std::collections::BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut std::collections::BTreeMap<(u64, u64), Event>, at_ms: u64, e: Event| {
        seq += 1;
        events.insert((at_ms, seq), e);
    };
    for q in 0..quanta {
        let start_ms = q * config.quantum_ms;
        let until_ms = start_ms + config.pin_window_ms;
        for _ in 0..config.chunks_per_group {
            let chunk = next_chunk;
            next_chunk += 1;
            let mut times: Vec<u64> =
                (0..config.readers_per_chunk).map(|_| start_ms + rng.u64(0..config.pin_window_ms)).collect();
            times.sort_unstable();
            for (i, at_ms) in times.into_iter().enumerate() {
                push(&mut events, at_ms, Event::PinnedRead { chunk, until_ms, first: i == 0 });
            }
        }
        for _ in 0..config.foreground_reads_per_quantum {
            // Squaring a uniform draw favours the first chunks.
            let u = rng.f64();
            let chunk = ((u * u) * config.foreground_chunks as f64) as u64;
            push(&mut events, start_ms + rng.u64(0..config.quantum_ms), Event::ForegroundRead { chunk });
        }
        // Replay what happens before the next quantum starts.
        let horizon_ms = start_ms + config.quantum_ms;
        while let Some(entry) = events.first_entry() {
            let &(at_ms, _) = entry.key();
            if at_ms >= horizon_ms && q + 1 < quanta {
                break;
            }
            let event = entry.remove();
            match event {
                Event::PinnedRead { chunk, until_ms, first } => {
                    for p in 0..config.chunk_pages {
                        let page = (chunk, p);
                        if pinned.get(&page).is_some_and(|&end| end > at_ms) {
                            continue;
                        }
                        if !first {
                            if let Some(t) = tier.as_mut()
                                && t.lookup(&page, at_ms).is_some()
                            {
                                run.pinned_flash_hit_bytes += page_bytes;
                                continue;
                            }
                            run.pin_overflow_reread_bytes += page_bytes;
                        } else {
                            run.planned_disk_read_bytes += page_bytes;
                        }
                        if let Some((old, end)) = pinned.push(page, until_ms)
                            && old != page
                            && end > at_ms
                            && let Some(t) = tier.as_mut()
                        {
                            t.admit(old, (), Admission::PinnedOverflow { until_ms: end }, at_ms);
                        }
                    }
                }
                Event::ForegroundRead { chunk } => {
                    let page = (chunk, rng.u32(0..config.chunk_pages));
                    if general.get(&page).is_some() {
                        continue;
                    }
                    match tier.as_mut().map(|t| t.lookup(&page, at_ms)) {
                        Some(Some(_)) => run.foreground_flash_hit_bytes += page_bytes,
                        _ => run.foreground_disk_read_bytes += page_bytes,
                    }
                    if let Some((old, ())) = general.push(page, ())
                        && old != page
                        && let Some(t) = tier.as_mut()
                    {
                        t.admit(old, (), Admission::Evicted, at_ms);
                    }
                }
            }
        }
    }
    if let Some(t) = tier {
        let device = t.device_counters();
        run.device_write_bytes_per_day =
            device.nand_write_bytes as f64 * 86_400_000.0 / (quanta * config.quantum_ms).max(1) as f64;
        run.tier = Some(t.stats());
        run.device = Some(device);
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zoned_tier_serves_overflowed_pins_without_write_amplification() {
        let report = run_flash_tier_bench(&FlashTierBenchConfig::standard(true)).unwrap();
        assert!(report.dram_only.pin_overflow_reread_bytes > 0, "DRAM alone is too small for the pins");
        assert!(report.zoned.pinned_flash_hit_bytes > 0);
        assert!(report.pin_overflow_reread_reduction > 0.5, "{report:?}");
        assert_eq!(report.zoned_write_amplification, 1.0);
        assert!(report.zoned.tier.unwrap().max_open_zones <= 4);
        // Every configuration saw the same load.
        assert_eq!(report.dram_only.planned_disk_read_bytes, report.zoned.planned_disk_read_bytes);
        assert_eq!(report.zoned.planned_disk_read_bytes, report.conventional.planned_disk_read_bytes);
        let text = report.to_string();
        assert!(text.lines().nth(2).is_some_and(|l| l.starts_with("pin-overflow re-reads, GB")), "{text}");
        assert!(text.contains("write amplification zoned 1.000"), "{text}");
    }
}
