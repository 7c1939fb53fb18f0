//! The node's flash tier (`[node.flash]`): pages leaving the DRAM cache
//! (evicted from the general region, or pushed out of a full pinned region
//! while their pin lasts) are written to a flash file laid out in zones by
//! [`dingo_flash::tier::FlashTier`], and read back from it on a DRAM miss.
//!
//! The file is a cache: it is emptied when the node starts. Each page's
//! length and crc32c are kept beside it in memory, so a torn or stale slot
//! (a reader racing the writer, a zone reset under a reader, bit rot) is a
//! miss, never wrong data.

use crate::cache::PageKey;
use crate::direct::{AlignedBuf, DirectFile, align_up};
use crate::error::StoreError;
use crate::lock::relock;
use bytes::Bytes;
use dingo_flash::tier::{Admission, Admitted, FlashTier, Location, TierConfig, TierStats, ZonedMedia};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a node's flash tier is laid out.
#[derive(Clone, Debug)]
pub struct FlashSettings {
    /// The file holding the tier's pages (on the flash device).
    pub path: PathBuf,
    pub zones: u32,
    /// Bytes per zone; a multiple of the cache page (64 KiB).
    pub zone_bytes: u64,
    /// Zones open at once (at least 2; FairyWREN's devices allow 4).
    pub max_active_zones: u32,
    /// Pins ending within this many ms share zones.
    pub pin_bucket_ms: u64,
    /// Device-writes-per-day budget, bytes.
    pub write_budget_bytes_per_day: u64,
}

/// What the tier keeps beside each page.
#[derive(Clone, Copy, Debug)]
struct PageInfo {
    len: u32,
    crc: u32,
    /// Written as pinned overflow: read from the device for the pin's
    /// dispatch group, so it may serve scrubbing as the DRAM pinned region
    /// does.
    pinned: bool,
}

/// Counters of the tier as the node sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlashStats {
    pub tier: TierStats,
    /// Bytes the host asked the device to write, and bytes the device
    /// wrote to its media (their ratio is its write amplification).
    pub host_write_bytes: u64,
    pub device_write_bytes: u64,
    /// Pages whose slot failed its checksum on read (treated as misses).
    pub checksum_misses: u64,
    pub write_errors: u64,
    /// The configured device-writes-per-day budget, bytes.
    pub write_budget_bytes_per_day: u64,
    /// The configured limit on open zones.
    pub max_active_zones: u32,
}

impl FlashStats {
    /// The counters as the `NodeStats` reply carries them.
    pub fn wire(&self) -> dingo_proto::v1::FlashTierStats {
        let t = &self.tier;
        dingo_proto::v1::FlashTierStats {
            evicted_written_bytes: t.evicted_written_bytes,
            pinned_written_bytes: t.pinned_written_bytes,
            host_written_bytes: self.host_write_bytes,
            device_written_bytes: self.device_write_bytes,
            refused_over_budget_bytes: t.refused_over_budget_bytes,
            refused_no_space_bytes: t.refused_no_space_bytes,
            hits: t.hits,
            misses: t.misses,
            zone_resets: t.log_zone_resets + t.pinned_zone_resets,
            pinned_zones_reclaimed_early: t.pinned_zones_reclaimed_early,
            max_open_zones: t.max_open_zones,
            max_active_zones: self.max_active_zones,
            write_budget_bytes_per_day: self.write_budget_bytes_per_day,
            checksum_misses: self.checksum_misses,
        }
    }
}

pub struct NodeFlash {
    tier: Mutex<FlashTier<PageKey, PageInfo, ZonedMedia>>,
    file: DirectFile,
    zone_bytes: u64,
    page_bytes: u64,
    checksum_misses: AtomicU64,
    write_errors: AtomicU64,
}

impl NodeFlash {
    /// Creates the tier, discarding whatever the file held.
    pub fn open(settings: &FlashSettings, page_bytes: u64) -> Result<NodeFlash, StoreError> {
        let invalid = |m: String| StoreError::Invalid(format!("[node.flash]: {m}"));
        if settings.zone_bytes == 0 || !settings.zone_bytes.is_multiple_of(page_bytes) {
            return Err(invalid(format!("zone of {} bytes is not a multiple of {page_bytes}", settings.zone_bytes)));
        }
        let zone_pages = u32::try_from(settings.zone_bytes / page_bytes)
            .map_err(|_| invalid(format!("zone of {} bytes is too large", settings.zone_bytes)))?;
        let config = TierConfig {
            page_bytes,
            zone_pages,
            zones: settings.zones,
            max_active_zones: settings.max_active_zones,
            pin_bucket_ms: settings.pin_bucket_ms,
            write_budget_bytes_per_day: settings.write_budget_bytes_per_day,
            // An hour of budget in a burst.
            write_burst_bytes: settings.write_budget_bytes_per_day / 24,
        };
        let media = ZonedMedia::new(config.zones, config.device_pages_per_zone(), config.max_active_zones);
        let tier = FlashTier::new(config, media).map_err(invalid)?;
        match std::fs::remove_file(&settings.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::io(settings.path.display())(e));
            }
            _ => {}
        }
        let file = DirectFile::create_new(&settings.path).map_err(StoreError::io(settings.path.display()))?;
        Ok(NodeFlash {
            tier: Mutex::new(tier),
            file,
            zone_bytes: settings.zone_bytes,
            page_bytes,
            checksum_misses: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        })
    }

    fn offset(&self, at: Location) -> u64 {
        u64::from(at.zone) * self.zone_bytes + at.offset_bytes
    }

    /// Offers a page leaving DRAM. Runs without the DRAM cache's lock held:
    /// the write is direct IO.
    pub fn offer(&self, key: PageKey, data: &Bytes, why: Admission, now_ms: u64) {
        let Ok(len) = u32::try_from(data.len()) else { return };
        if u64::from(len) > self.page_bytes {
            return;
        }
        let info = PageInfo { len, crc: crc32c::crc32c(data), pinned: matches!(why, Admission::PinnedOverflow { .. }) };
        let at = match relock(&self.tier).admit(key, info, why, now_ms) {
            Admitted::Written(at) => at,
            Admitted::AlreadyCached(_) | Admitted::OverBudget | Admitted::NoSpace => return,
        };
        let mut buf = AlignedBuf::zeroed(align_up(data.len() as u64) as usize);
        buf[..data.len()].copy_from_slice(data);
        if let Err(e) = self.file.write_all_at(&buf, self.offset(at)) {
            tracing::warn!("flash tier write failed: {e}");
            relock(&self.tier).remove_range(key..=key);
            self.write_errors.fetch_add(1, Relaxed);
        }
    }

    /// The page, if the tier has it intact. `for_scrubbing`: only pages
    /// written as pinned overflow qualify (see [`PageInfo::pinned`]).
    pub fn get(&self, key: PageKey, for_scrubbing: bool, now_ms: u64) -> Option<Bytes> {
        let (at, info) = relock(&self.tier).lookup(&key, now_ms)?;
        if for_scrubbing && !info.pinned {
            return None;
        }
        let mut buf = AlignedBuf::zeroed(align_up(u64::from(info.len)) as usize);
        if self.file.read_exact_at(&mut buf, self.offset(at)).is_err() {
            return None;
        }
        let data = &buf[..info.len as usize];
        if crc32c::crc32c(data) != info.crc {
            self.checksum_misses.fetch_add(1, Relaxed);
            return None;
        }
        Some(Bytes::copy_from_slice(data))
    }

    /// Forgets a chunk's pages (deleted, or unpinned).
    pub fn remove_chunk(&self, chunk: dingo_types::ChunkRef) {
        relock(&self.tier).remove_range((chunk, 0)..=(chunk, u64::MAX));
    }

    pub fn stats(&self) -> FlashStats {
        let tier = relock(&self.tier);
        let config = tier.config();
        FlashStats {
            tier: tier.stats(),
            host_write_bytes: tier.device_counters().host_write_bytes,
            device_write_bytes: tier.device_counters().nand_write_bytes,
            checksum_misses: self.checksum_misses.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            write_budget_bytes_per_day: config.write_budget_bytes_per_day,
            max_active_zones: config.max_active_zones,
        }
    }
}
