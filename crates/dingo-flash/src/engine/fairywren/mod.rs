//! FairyWREN (thesis ch. 5) on a zoned device: a large-object log (LOC)
//! and a small-object cache (SOC) of FWLog + FWSets whose sets are stored
//! log-structured, garbage-collected by *nest packing* (each live set a GC
//! pass copies absorbs its FWLog objects, L1497-1503), and split into hot
//! and cold subsets (L1512-1523).
//!
//! Zones: LOC ring | SOC pool shared by FWLog segments and FWSets' hot and
//! cold streams; `RESERVE_ZONES` stay free for GC copies. Open zones: at most
//! hot + cold + one being filled by a segment write, within the device's
//! limit of 4 (L1525).
//!
//! Payloads: as in Kangaroo, every zone write also goes to the engine's
//! [`PageStore`] (FWLog segments page by page, subsets and LOC segments as
//! one extent each) and every flash hit is read back through it.
//!
//! Ablations (Fig. 5.18): `nest_packing = false` is "physical separation"
//! (GC copies sets unchanged); `hot_cold = false` keeps one 8 KiB subset.

mod fwsets;

use serde::Serialize;

use crate::device::{Device, PAGE_BYTES, ZonedConfig, ZonedDevice};
use crate::engine::loc::LargeObjectLog;
use crate::engine::{CacheEngine, EngineStats, RandomAdmission, pages_bytes, per_set_bits};
use crate::hash::{probe_hash, set_of};
use crate::index::tag_of;
use crate::log::{AppendError, LiveObject, SegmentLog};
use crate::object::{MAX_SMALL_OBJECT_BYTES, Object};
use crate::page::{NoPages, PageStore};
use crate::set::{Rrip, SetArray, SetDram, SetObject, fill};
use fwsets::{SetZones, Subset};

/// Free SOC zones kept for GC: GC starts with at least this many.
const RESERVE_ZONES: usize = 6;
/// Inside GC, a re-split (two pages for one) runs only while more than this
/// many zones are free; plain rewrites need at most one new zone per stream
/// for a whole victim, so GC can never exhaust the pool.
const GC_RESPLIT_FLOOR: usize = 4;
/// FairyWREN's active zones: LOC, FWLog, hot, cold (L1525).
pub const MAX_ACTIVE_ZONES: u32 = 4;

/// Where FairyWREN's flash pages went, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriteBreakdown {
    /// FWLog segments (the LOC's are not counted).
    pub log_pages: u64,
    /// Subsets written because FWLog evicted into their set.
    pub flush_pages: u64,
    /// Hot subsets rewritten by GC that absorbed FWLog objects.
    pub gc_pack_pages: u64,
    /// Subsets GC copied unchanged.
    pub gc_copy_pages: u64,
    /// FWLog objects absorbed by FWLog flushes (into any subset write).
    pub flush_objects: u64,
    /// FWLog objects absorbed by GC packs (nest packing).
    pub gc_pack_objects: u64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct FairyWrenConfig {
    pub zones: u32,
    pub zone_pages: u32,
    /// Share of zones for large objects (10 %, Table 5.4).
    pub loc_fraction: f64,
    /// Share of SOC zones for FWLog (5 %, Table 5.4).
    pub log_fraction: f64,
    /// FWSets over-provisioning (5 %, Table 5.4).
    pub set_op: f64,
    /// Nest packing on (FairyWREN) or off ("physical separation").
    pub nest_packing: bool,
    /// Hot/cold subsets of 4 KiB each, or one 8 KiB set.
    pub hot_cold: bool,
    /// Re-split hot and cold every this many nest packings of a set (5).
    pub resplit_every: u8,
    /// FWLog objects of a set needed to flush them (1 in the artifact).
    pub threshold: u32,
    pub admission_probability: f64,
    pub rrip_bits: u8,
    pub mean_object_bytes: u32,
    pub seed: u64,
}

impl FairyWrenConfig {
    pub fn new(device_pages: u64, zone_pages: u32, mean_object_bytes: u32) -> FairyWrenConfig {
        FairyWrenConfig {
            zones: (device_pages / u64::from(zone_pages)) as u32,
            zone_pages,
            loc_fraction: 0.1,
            log_fraction: 0.05,
            set_op: 0.05,
            nest_packing: true,
            hot_cold: true,
            resplit_every: 5,
            threshold: 1,
            admission_probability: 1.0,
            rrip_bits: 3,
            mean_object_bytes,
            seed: 1,
        }
    }
}

pub struct FairyWren<S: PageStore = NoPages> {
    config: FairyWrenConfig,
    device: ZonedDevice,
    loc: LargeObjectLog,
    fwlog: SegmentLog,
    /// FWLog slot → the zone holding it.
    fwlog_zone: Vec<u32>,
    /// Subsets: index 0 hot (or the whole set), 1 cold.
    subsets: Vec<SetArray>,
    zones: SetZones,
    /// Nest packings of each set since its last re-split.
    packings: Vec<u8>,
    free_soc: Vec<u32>,
    in_gc: bool,
    /// What the current subset writes are for.
    cause: Cause,
    breakdown: WriteBreakdown,
    rrip: Rrip,
    admission: RandomAdmission,
    stats: EngineStats,
    /// Where the pages' contents go: nowhere in the simulator.
    pages: S,
}

impl FairyWren {
    /// The simulator: no payloads stored.
    pub fn new(config: FairyWrenConfig) -> FairyWren {
        FairyWren::with_pages(config, NoPages)
    }
}

impl<S: PageStore> FairyWren<S> {
    /// An engine whose zone writes and flash hits also go through `pages`.
    pub fn with_pages(config: FairyWrenConfig, pages: S) -> FairyWren<S> {
        let zones = config.zones;
        let loc_zones = ((f64::from(zones) * config.loc_fraction) as u32).max(2);
        let soc_zones = zones - loc_zones;
        let log_zones = ((f64::from(soc_zones) * config.log_fraction) as u32).max(2);
        let set_zones = soc_zones - log_zones - RESERVE_ZONES as u32;
        let subset_bytes = if config.hot_cold { PAGE_BYTES as u32 } else { 2 * PAGE_BYTES as u32 };
        let set_pages = 2;
        let sets = (f64::from(set_zones * config.zone_pages) / (f64::from(set_pages) * (1.0 + config.set_op))) as u32;
        let dram = SetDram {
            bloom_bits_per_set: per_set_bits(subset_bytes, config.mean_object_bytes, 3.0),
            bloom_hashes: 2,
            hit_bits_per_set: per_set_bits(subset_bytes, config.mean_object_bytes, 1.0),
        };
        let subset_count = if config.hot_cold { 2 } else { 1 };
        let log_objects = u64::from(log_zones * config.zone_pages) * PAGE_BYTES / u64::from(config.mean_object_bytes);
        let device =
            ZonedDevice::new(ZonedConfig { zones, zone_pages: config.zone_pages, max_active_zones: MAX_ACTIVE_ZONES });
        FairyWren {
            stats: EngineStats {
                cache_capacity_bytes: pages_bytes(
                    u64::from(loc_zones + log_zones) * u64::from(config.zone_pages) + u64::from(sets) * 2,
                ),
                device_capacity_bytes: device.capacity_bytes(),
                dram_buffer_bytes: 2 * pages_bytes(u64::from(config.zone_pages)),
                ..EngineStats::default()
            },
            device,
            loc: LargeObjectLog::new((0..loc_zones).collect(), config.zone_pages),
            fwlog: SegmentLog::new(
                log_zones,
                config.zone_pages,
                sets,
                crate::engine::kangaroo::tables_for(log_objects * 2, sets),
            ),
            fwlog_zone: vec![u32::MAX; log_zones as usize],
            subsets: (0..subset_count).map(|_| SetArray::new(sets, subset_bytes, dram)).collect(),
            zones: SetZones::new(sets, zones, config.zone_pages, subset_bytes / PAGE_BYTES as u32, config.hot_cold),
            packings: vec![0; if config.hot_cold { sets as usize } else { 0 }],
            free_soc: (loc_zones..zones).rev().collect(),
            in_gc: false,
            cause: Cause::Flush,
            breakdown: WriteBreakdown::default(),
            rrip: Rrip::new(config.rrip_bits),
            admission: RandomAdmission::new(config.admission_probability, config.seed),
            config,
            pages,
        }
    }

    /// The page store, for its counters.
    pub fn pages(&self) -> &S {
        &self.pages
    }

    /// The page store, once the engine is done with it.
    pub fn into_pages(self) -> S {
        self.pages
    }

    fn place(&self, key: u64) -> (u32, u16) {
        (set_of(key, self.subsets[0].sets()), tag_of(probe_hash(key)))
    }

    /// A free SOC zone; outside GC, first collects FWSets down to the reserve.
    fn take_zone(&mut self) -> u32 {
        let mut rounds = 0;
        while !self.in_gc && self.free_soc.len() <= RESERVE_ZONES {
            rounds += 1;
            assert!(rounds <= 4 * self.config.zones, "FWSets GC makes no progress");
            self.collect_fwsets_zone();
        }
        self.free_soc.pop().expect("GC reserve exhausted")
    }

    /// Writes one subset of `set` to its stream.
    fn write_subset(&mut self, set: u32, subset: Subset) {
        while self.zones.open_with_room(&mut self.device, subset).is_none() {
            let zone = self.take_zone();
            // GC inside take_zone may have opened this stream already.
            if self.zones.open_with_room(&mut self.device, subset).is_some() {
                self.free_soc.push(zone);
            } else {
                self.zones.set_open(subset, zone);
            }
        }
        let page = self.zones.append(&mut self.device, set, subset);
        let pages = u64::from(self.subsets[0].set_bytes()) / PAGE_BYTES;
        if self.pages.stores_pages() {
            // A GC copy rewrites the subset as it is; a pack stored it first.
            let objects: Vec<Object> = self.subsets[subset as usize].objects_of(set).collect();
            self.pages.write_extent(u64::from(page), pages, &objects);
        }
        match self.cause {
            Cause::Flush => self.breakdown.flush_pages += pages,
            Cause::GcPack => self.breakdown.gc_pack_pages += pages,
            Cause::GcCopy => self.breakdown.gc_copy_pages += pages,
        }
    }

    /// Nest-packs `incoming` FWLog objects into `set` (newest first).
    /// With hot/cold, new objects go to the hot subset; every
    /// `resplit_every`-th packing (or when `resplit` is forced) both subsets
    /// are merged, re-split by popularity and both written (L1518).
    fn pack_set(&mut self, set: u32, incoming: Vec<SetObject>, resplit: bool) {
        let absorbed = incoming.len() as u64;
        match self.cause {
            Cause::Flush => self.breakdown.flush_objects += absorbed,
            Cause::GcPack => self.breakdown.gc_pack_objects += absorbed,
            Cause::GcCopy => debug_assert_eq!(absorbed, 0, "a GC copy absorbs nothing"),
        }
        if !self.config.hot_cold {
            let existing = self.subsets[0].take(set);
            let (kept, _) = fill(self.rrip.rank(existing, incoming), self.subsets[0].set_bytes());
            self.subsets[0].store(set, kept);
            self.write_subset(set, Subset::Hot);
            return;
        }
        let s = set as usize;
        self.packings[s] = self.packings[s].saturating_add(1);
        let due = self.packings[s] >= self.config.resplit_every && self.may_resplit();
        if resplit || due {
            self.packings[s] = 0;
            let mut existing = self.subsets[0].take(set);
            existing.extend(self.subsets[1].take(set));
            let subset_bytes = self.subsets[0].set_bytes();
            let (ranked, _) = fill(self.rrip.rank(existing, incoming), 2 * subset_bytes);
            // Most popular first: they fill the cold subset, the rest the hot one.
            let (cold, rest) = split_fitting(ranked, subset_bytes);
            let (hot, _) = fill(rest, subset_bytes);
            self.subsets[1].store(set, cold);
            self.subsets[0].store(set, hot);
            self.write_subset(set, Subset::Hot);
            self.write_subset(set, Subset::Cold);
        } else {
            let existing = self.subsets[0].take(set);
            let (kept, _) = fill(self.rrip.rank(existing, incoming), self.subsets[0].set_bytes());
            self.subsets[0].store(set, kept);
            self.write_subset(set, Subset::Hot);
        }
    }

    /// Whether a two-page re-split may run now (see [`GC_RESPLIT_FLOOR`]).
    fn may_resplit(&self) -> bool {
        !self.in_gc || self.free_soc.len() > GC_RESPLIT_FLOOR
    }

    /// Removes every FWLog object of `set` and returns them as set objects.
    fn drain_log(&mut self, set: u32) -> Vec<SetObject> {
        let group: Vec<LiveObject> = self.fwlog.bucket_objects(set);
        group
            .into_iter()
            .map(|l| {
                self.fwlog.remove(set, l.entry);
                SetObject { object: l.object, rrip: l.rrip }
            })
            .collect()
    }

    /// GC of the oldest FWSets zone: each live hot subset is nest-packed
    /// (absorbing its set's FWLog objects when nest packing is on), each live
    /// cold subset copied; then the zone is reset.
    fn collect_fwsets_zone(&mut self) {
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let outer_cause = self.cause;
        let (zone, live) = self.zones.take_victim().expect("a full SOC has sealed FWSets zones");
        for placed in live {
            match placed.subset {
                Subset::Hot => {
                    let incoming = if self.config.nest_packing { self.drain_log(placed.set) } else { Vec::new() };
                    if incoming.is_empty() {
                        self.cause = Cause::GcCopy;
                        self.write_subset(placed.set, Subset::Hot);
                    } else {
                        self.cause = Cause::GcPack;
                        self.pack_set(placed.set, incoming, false);
                    }
                }
                Subset::Cold => {
                    // The whole set is a victim: with nest packing it is
                    // re-split with its FWLog objects, both halves written.
                    let incoming = if self.config.nest_packing && self.may_resplit() {
                        self.drain_log(placed.set)
                    } else {
                        Vec::new()
                    };
                    if incoming.is_empty() {
                        self.cause = Cause::GcCopy;
                        self.write_subset(placed.set, Subset::Cold);
                    } else {
                        self.cause = Cause::GcPack;
                        self.pack_set(placed.set, incoming, true);
                    }
                }
            }
        }
        self.cause = outer_cause;
        self.device.reset(zone).expect("SOC zones exist");
        self.free_soc.push(zone);
        self.in_gc = was_in_gc;
        self.reclaim_empty_log_zones();
    }

    /// FWLog segments emptied by nest packing are reset without copying.
    fn reclaim_empty_log_zones(&mut self) {
        for slot in self.fwlog.sealed_slots() {
            if self.fwlog.live_count(slot) == 0 {
                self.fwlog.free_slot(slot);
                self.release_log_zone(slot);
            }
        }
    }

    fn release_log_zone(&mut self, slot: u32) {
        let zone = std::mem::replace(&mut self.fwlog_zone[slot as usize], u32::MAX);
        self.device.reset(zone).expect("FWLog zones exist");
        self.free_soc.push(zone);
    }

    /// FWLog is full: evict its oldest segment into FWSets (L1497-1503).
    fn flush_oldest_log_zone(&mut self) {
        let slot = self.fwlog.oldest_sealed().expect("a full FWLog has sealed segments");
        for live in self.fwlog.live_in_slot(slot) {
            let (set, tag) = self.place(live.object.key);
            if self.fwlog.lookup(live.object.key, set, tag).is_none() {
                continue;
            }
            if self.fwlog.bucket_objects(set).len() as u32 >= self.config.threshold {
                let incoming = self.drain_log(set);
                self.pack_set(set, incoming, false);
            } else {
                let current = self.fwlog.lookup(live.object.key, set, tag).expect("checked above");
                self.fwlog.remove(set, current.entry);
            }
        }
        // Nest packing may already have emptied and released the slot.
        if self.fwlog.sealed_slots().contains(&slot) {
            self.fwlog.free_slot(slot);
            self.release_log_zone(slot);
        }
    }

    /// Seals FWLog's buffer into a zone, making room first. When both logs
    /// are full, FWSets goes first (L1501).
    fn seal_log(&mut self) {
        while !self.fwlog.has_free_slot() {
            if self.free_soc.len() <= RESERVE_ZONES {
                self.collect_fwsets_zone();
            } else {
                self.flush_oldest_log_zone();
            }
        }
        let zone = self.take_zone();
        let slot = self.fwlog.seal();
        self.device.append(zone, self.config.zone_pages).expect("an empty zone takes a whole segment");
        if self.pages.stores_pages() {
            let page = u64::from(zone) * u64::from(self.config.zone_pages);
            self.pages.write_pages(page, &self.fwlog.slot_objects(slot));
        }
        self.fwlog_zone[slot as usize] = zone;
        self.breakdown.log_pages += u64::from(self.config.zone_pages);
    }

    /// Pages written so far, by cause (LOC segments are not counted here).
    pub fn write_breakdown(&self) -> WriteBreakdown {
        self.breakdown
    }

    /// DRAM of the small-object cache alone, bits.
    pub fn soc_dram_bits(&self) -> u64 {
        self.fwlog.index_dram_bits()
            + self.subsets.iter().map(SetArray::dram_bits).sum::<u64>()
            + self.zones.dram_bits()
            + self.packings.len() as u64 * 8
    }

    /// Objects in the small-object cache.
    pub fn soc_objects(&self) -> u64 {
        self.fwlog.live_objects() + self.subsets.iter().map(SetArray::objects).sum::<u64>()
    }

    pub fn device(&self) -> &ZonedDevice {
        &self.device
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Flush,
    GcPack,
    GcCopy,
}

/// Splits ranked objects into those that fit `capacity_bytes` in order and the rest.
fn split_fitting(ranked: Vec<SetObject>, capacity_bytes: u32) -> (Vec<SetObject>, Vec<SetObject>) {
    let mut used = 0;
    ranked.into_iter().partition(|o| {
        let fits = used + o.object.size_bytes <= capacity_bytes;
        if fits {
            used += o.object.size_bytes;
        }
        fits
    })
}

impl<S: PageStore> CacheEngine for FairyWren<S> {
    fn get(&mut self, key: u64) -> Option<u32> {
        let zone_pages = u64::from(self.config.zone_pages);
        if let Some((size, segment)) = self.loc.locate(key) {
            // The open segment is DRAM; a sealed one (a zone) is read whole.
            let verified =
                segment.is_none_or(|z| self.pages.read_verified(u64::from(z) * zone_pages, zone_pages, key, size));
            return verified.then_some(size);
        }
        let (set, tag) = self.place(key);
        if let Some(live) = self.fwlog.lookup(key, set, tag) {
            let size = live.object.size_bytes;
            if let Some(offset) = self.fwlog.flash_page(live.entry) {
                let (slot, in_zone) = (u64::from(offset) / zone_pages, u64::from(offset) % zone_pages);
                let page = u64::from(self.fwlog_zone[slot as usize]) * zone_pages + in_zone;
                if !self.pages.read_verified(page, 1, key, size) {
                    return None;
                }
            }
            self.fwlog.set_rrip(live.entry, self.rrip.promote(live.rrip));
            return Some(size);
        }
        // Cold subsets hold the popular objects: try them first.
        let subset_pages = u64::from(self.zones.subset_pages());
        for (i, subset) in [Subset::Hot, Subset::Cold].into_iter().enumerate().take(self.subsets.len()).rev() {
            if let Some(size) = self.subsets[i].lookup(set, key) {
                let page = self.zones.location(set, subset).map(u64::from);
                let verified = page.is_some_and(|p| self.pages.read_verified(p, subset_pages, key, size));
                return verified.then_some(size);
            }
        }
        None
    }

    fn insert(&mut self, object: Object) {
        self.stats.offered_bytes += u64::from(object.size_bytes);
        if !self.admission.admit() {
            return;
        }
        self.stats.admitted_bytes += u64::from(object.size_bytes);
        if object.size_bytes > MAX_SMALL_OBJECT_BYTES {
            if let Some(write) = self.loc.insert(object) {
                if let Some(victim) = write.evicted {
                    self.device.reset(victim).expect("LOC zones exist");
                }
                self.device
                    .append(write.segment, self.config.zone_pages)
                    .expect("an empty LOC zone takes a whole segment");
                if self.pages.stores_pages() {
                    let pages = u64::from(self.config.zone_pages);
                    self.pages.write_extent(
                        u64::from(write.segment) * pages,
                        pages,
                        self.loc.segment_objects(write.segment),
                    );
                }
            }
            return;
        }
        let (set, tag) = self.place(object.key);
        loop {
            match self.fwlog.append(object, set, tag, self.rrip.long()) {
                Ok(_) | Err(AppendError::TableFull(_)) => return,
                Err(AppendError::SegmentFull) => self.seal_log(),
            }
        }
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            device: self.device.counters(),
            dram_bits: self.soc_dram_bits() + self.loc.dram_bits(),
            stored_objects: self.soc_objects() + self.loc.objects(),
            stored_bytes: self.fwlog.live_bytes()
                + self.subsets.iter().map(SetArray::bytes).sum::<u64>()
                + self.loc.bytes(),
            max_active_zones: self.device.max_active_seen(),
            bloom_false_positives: self.subsets.iter().map(SetArray::bloom_false_positives).sum(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests;
