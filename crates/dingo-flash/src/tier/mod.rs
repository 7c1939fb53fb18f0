//! The storage node's flash tier: a second cache level under the node's
//! DRAM cache, laid out for a zoned device the FairyWREN way (whole-zone
//! resets, no copying, so device writes equal host writes).
//!
//! Two kinds of pages arrive:
//! - **evicted** pages, pushed out of the DRAM cache's general region, go to
//!   a log: one open zone at a time, reset oldest first when space is
//!   needed (FIFO eviction of whole zones);
//! - **pinned overflow** pages, of chunks the planner pinned when the DRAM
//!   pinned region is full, go to zones grouped by the end of their pin,
//!   rounded up to a bucket: once that time has passed no page in the zone
//!   is pinned any more, and the zone is reset whole.
//!
//! Writes are admitted against a device-writes-per-day budget (a token
//! bucket); what the budget or the space refuses is counted, never silent.
//!
//! The core is pure like the engines: time comes in as an argument, the
//! flash is a [`TierMedia`] (a counting model, or in a node the same model
//! beside a file holding the payloads), and a [`Location`] says where a
//! page's bytes are.
//!
//! Invariants: every index entry points at a slot of a zone that is not
//! free and holds that key; at most `max_active_zones` zones are open (one
//! for the log, the rest for pinned buckets); a pinned zone is reset only
//! when its bucket's end has passed, or to make room for newer pins when
//! every zone is taken (counted in `pinned_zones_reclaimed_early`).

mod media;

pub mod bench;

pub use media::{ConventionalMedia, TierMedia, ZonedMedia};

use crate::device::{DeviceCounters, PAGE_BYTES};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::RangeBounds;

const MS_PER_DAY: u128 = 86_400_000;

/// Geometry and limits of a flash tier.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TierConfig {
    /// Bytes of one cached page (the node's cache segment); a multiple of
    /// the 4 KiB device page.
    pub page_bytes: u64,
    /// Pages of `page_bytes` per zone.
    pub zone_pages: u32,
    pub zones: u32,
    /// Zones open at once: one log zone plus pinned buckets. FairyWREN
    /// needs 4; at least 2.
    pub max_active_zones: u32,
    /// Pins ending within the same bucket share zones.
    pub pin_bucket_ms: u64,
    /// Device-writes-per-day budget, bytes; refills continuously.
    pub write_budget_bytes_per_day: u64,
    /// Most bytes the budget lets through in a burst.
    pub write_burst_bytes: u64,
}

impl TierConfig {
    /// Device pages (4 KiB) per cached page.
    pub fn device_pages_per_page(&self) -> u32 {
        (self.page_bytes / PAGE_BYTES) as u32
    }

    /// 4 KiB device pages per zone.
    pub fn device_pages_per_zone(&self) -> u32 {
        self.zone_pages * self.device_pages_per_page()
    }

    pub fn capacity_bytes(&self) -> u64 {
        u64::from(self.zones) * u64::from(self.zone_pages) * self.page_bytes
    }

    fn check(&self) -> Result<(), String> {
        if self.page_bytes == 0 || !self.page_bytes.is_multiple_of(PAGE_BYTES) {
            return Err(format!("page of {} bytes is not a multiple of {PAGE_BYTES}", self.page_bytes));
        }
        if self.zones < 2 || self.zone_pages == 0 {
            return Err("a tier needs at least 2 zones of at least one page".into());
        }
        if self.max_active_zones < 2 {
            return Err("a tier needs at least 2 active zones (log and pins)".into());
        }
        if self.pin_bucket_ms == 0 {
            return Err("the pin bucket must be at least 1 ms".into());
        }
        Ok(())
    }
}

/// Where a cached page's bytes are on the flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub zone: u32,
    /// Byte offset inside the zone.
    pub offset_bytes: u64,
}

/// Why a page reaches the tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Evicted from the DRAM cache's general region.
    Evicted,
    /// Its chunk is pinned until `until_ms` and the DRAM pinned region is
    /// full.
    PinnedOverflow { until_ms: u64 },
}

/// What happened to an offered page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    Written(Location),
    /// Already on flash; nothing written.
    AlreadyCached(Location),
    /// Refused: the write budget is spent for now.
    OverBudget,
    /// Refused: every zone holds unexpired pins.
    NoSpace,
}

/// Counters of a tier, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TierStats {
    pub evicted_written_bytes: u64,
    pub pinned_written_bytes: u64,
    pub refused_over_budget_bytes: u64,
    pub refused_no_space_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub log_zone_resets: u64,
    /// Pinned zones reset because their bucket ended.
    pub pinned_zone_resets: u64,
    /// Pinned zones reset before their bucket ended, for space.
    pub pinned_zones_reclaimed_early: u64,
    /// Zones closed before they were full, to respect the open-zone limit.
    pub zones_finished_early: u64,
    pub max_open_zones: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Free,
    /// A log zone; `seq` orders log zones oldest first.
    Log {
        seq: u64,
    },
    /// Holds pages of pins ending by `expires_ms`.
    Pinned {
        expires_ms: u64,
    },
}

struct Zone<K> {
    role: Role,
    open: bool,
    /// Keys in slot order; stale when the index points elsewhere.
    slots: Vec<K>,
}

/// A flash tier caching pages named `K`, keeping a small value `V` beside
/// each (a node keeps the page's length and checksum there).
pub struct FlashTier<K, V, M> {
    config: TierConfig,
    media: M,
    zones: Vec<Zone<K>>,
    /// Page → (zone, slot, its value).
    index: BTreeMap<K, (u32, u32, V)>,
    next_log_seq: u64,
    /// Budget tokens in bytes × ms-per-day, so refills stay exact.
    tokens_scaled: u128,
    refilled_at_ms: u64,
    stats: TierStats,
}

impl<K: Ord + Copy, V: Copy, M: TierMedia> FlashTier<K, V, M> {
    /// An empty tier on `media`, which must have `config.zones` zones of
    /// `config.device_pages_per_zone()` device pages. The budget starts full.
    pub fn new(config: TierConfig, media: M) -> Result<Self, String> {
        config.check()?;
        let zones = (0..config.zones).map(|_| Zone { role: Role::Free, open: false, slots: Vec::new() }).collect();
        Ok(FlashTier {
            config,
            media,
            zones,
            index: BTreeMap::new(),
            next_log_seq: 0,
            tokens_scaled: u128::from(config.write_burst_bytes) * MS_PER_DAY,
            refilled_at_ms: 0,
            stats: TierStats::default(),
        })
    }

    pub fn config(&self) -> TierConfig {
        self.config
    }

    pub fn stats(&self) -> TierStats {
        self.stats
    }

    pub fn device_counters(&self) -> DeviceCounters {
        self.media.counters()
    }

    /// Pages cached now.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn location(&self, zone: u32, slot: u32) -> Location {
        Location { zone, offset_bytes: u64::from(slot) * self.config.page_bytes }
    }

    /// Where `key` is, with its value, if cached; counts a hit or a miss.
    pub fn lookup(&mut self, key: &K, now_ms: u64) -> Option<(Location, V)> {
        self.expire(now_ms);
        let found = self.index.get(key).map(|&(zone, slot, value)| (self.location(zone, slot), value));
        if found.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        found
    }

    /// Forgets the pages in `keys` (a deleted or re-written chunk). Their
    /// space comes back when their zone is reset.
    pub fn remove_range(&mut self, keys: impl RangeBounds<K>) {
        let gone: Vec<K> = self.index.range(keys).map(|(k, _)| *k).collect();
        for k in gone {
            self.index.remove(&k);
        }
    }

    /// Offers one page; `value` is kept beside it. The caller writes the
    /// page's bytes at the location returned.
    pub fn admit(&mut self, key: K, value: V, why: Admission, now_ms: u64) -> Admitted {
        self.expire(now_ms);
        if let Some(&(zone, slot, _)) = self.index.get(&key) {
            return Admitted::AlreadyCached(self.location(zone, slot));
        }
        self.refill(now_ms);
        let page = u128::from(self.config.page_bytes) * MS_PER_DAY;
        if self.tokens_scaled < page {
            self.stats.refused_over_budget_bytes += self.config.page_bytes;
            return Admitted::OverBudget;
        }
        let Some(zone) = self.zone_for(why, now_ms) else {
            self.stats.refused_no_space_bytes += self.config.page_bytes;
            return Admitted::NoSpace;
        };
        let pages = self.config.device_pages_per_page();
        self.media.append(zone, pages).expect("the tier appends only to open zones with room");
        self.tokens_scaled -= page;
        let z = &mut self.zones[zone as usize];
        let slot = z.slots.len() as u32;
        z.slots.push(key);
        if z.slots.len() == self.config.zone_pages as usize {
            // A full zone closes by itself on the device.
            z.open = false;
        }
        self.index.insert(key, (zone, slot, value));
        match why {
            Admission::Evicted => self.stats.evicted_written_bytes += self.config.page_bytes,
            Admission::PinnedOverflow { .. } => self.stats.pinned_written_bytes += self.config.page_bytes,
        }
        Admitted::Written(self.location(zone, slot))
    }

    /// Resets every pinned zone whose bucket has ended.
    pub fn expire(&mut self, now_ms: u64) {
        for zone in 0..self.config.zones {
            if let Role::Pinned { expires_ms } = self.zones[zone as usize].role
                && expires_ms <= now_ms
            {
                self.reset(zone);
                self.stats.pinned_zone_resets += 1;
            }
        }
    }

    fn refill(&mut self, now_ms: u64) {
        let elapsed_ms = u128::from(now_ms.saturating_sub(self.refilled_at_ms));
        self.refilled_at_ms = self.refilled_at_ms.max(now_ms);
        let cap = u128::from(self.config.write_burst_bytes) * MS_PER_DAY;
        let added = elapsed_ms * u128::from(self.config.write_budget_bytes_per_day);
        self.tokens_scaled = (self.tokens_scaled + added).min(cap);
    }

    fn open_zones(&self, pinned: bool) -> impl Iterator<Item = u32> + '_ {
        (0..self.config.zones).filter(move |&z| {
            let zone = &self.zones[z as usize];
            zone.open && matches!(zone.role, Role::Pinned { .. }) == pinned
        })
    }

    /// The open zone a page goes to, opening one if needed.
    fn zone_for(&mut self, why: Admission, now_ms: u64) -> Option<u32> {
        let role = match why {
            Admission::Evicted => {
                if let Some(z) = self.open_zones(false).next() {
                    return Some(z);
                }
                Role::Log { seq: self.next_log_seq }
            }
            Admission::PinnedOverflow { until_ms } => {
                let bucket = self.config.pin_bucket_ms;
                let expires_ms = until_ms.div_ceil(bucket).saturating_mul(bucket).max(now_ms.saturating_add(1));
                let wanted = Role::Pinned { expires_ms };
                if let Some(z) = self.open_zones(true).find(|&z| self.zones[z as usize].role == wanted) {
                    return Some(z);
                }
                // One active zone stays for the log: close the open pinned
                // zone whose pins end first to stay within the limit.
                let pinned_limit = (self.config.max_active_zones - 1) as usize;
                if self.open_zones(true).count() >= pinned_limit {
                    let first = self.open_zones(true).min_by_key(|&z| self.zones[z as usize].role_expiry())?;
                    self.media.finish(first).expect("an open zone can be finished");
                    self.zones[first as usize].open = false;
                    self.stats.zones_finished_early += 1;
                }
                wanted
            }
        };
        let zone = self.free_zone(matches!(why, Admission::PinnedOverflow { .. }))?;
        if let Role::Log { .. } = role {
            self.next_log_seq += 1;
        }
        let z = &mut self.zones[zone as usize];
        z.role = role;
        z.open = true;
        let open = self.zones.iter().filter(|z| z.open).count() as u32;
        debug_assert!(open <= self.config.max_active_zones, "open zones within the limit");
        self.stats.max_open_zones = self.stats.max_open_zones.max(open);
        Some(zone)
    }

    /// A free zone: one never used or reset, else the oldest closed log
    /// zone reset; for pins, else the open log zone or the pinned zone
    /// ending first (newer pins are about to be read, older ones mostly have
    /// been).
    fn free_zone(&mut self, for_pins: bool) -> Option<u32> {
        if let Some(z) = self.zones.iter().position(|z| z.role == Role::Free) {
            return Some(z as u32);
        }
        let oldest_log = |tier: &Self, open: bool| {
            (0..tier.config.zones)
                .filter(|&z| {
                    matches!(tier.zones[z as usize].role, Role::Log { .. }) && tier.zones[z as usize].open == open
                })
                .min_by_key(|&z| tier.zones[z as usize].role_expiry())
        };
        if let Some(z) = oldest_log(self, false) {
            self.reset(z);
            self.stats.log_zone_resets += 1;
            return Some(z);
        }
        if !for_pins {
            return None;
        }
        if let Some(z) = oldest_log(self, true) {
            self.reset(z);
            self.stats.log_zone_resets += 1;
            return Some(z);
        }
        let z = (0..self.config.zones)
            .filter(|&z| !self.zones[z as usize].open)
            .min_by_key(|&z| self.zones[z as usize].role_expiry())?;
        self.reset(z);
        self.stats.pinned_zones_reclaimed_early += 1;
        Some(z)
    }

    fn reset(&mut self, zone: u32) {
        let z = &mut self.zones[zone as usize];
        for (slot, key) in z.slots.drain(..).enumerate() {
            if self.index.get(&key).is_some_and(|&(z, s, _)| (z, s) == (zone, slot as u32)) {
                self.index.remove(&key);
            }
        }
        z.role = Role::Free;
        z.open = false;
        self.media.reset(zone).expect("any zone can be reset");
    }
}

impl<K> Zone<K> {
    /// Order for picking a victim: log zones by age, pinned zones by the
    /// end of their pins.
    fn role_expiry(&self) -> u64 {
        match self.role {
            Role::Free => 0,
            Role::Log { seq } => seq,
            Role::Pinned { expires_ms } => expires_ms,
        }
    }
}

#[cfg(test)]
mod tests;
