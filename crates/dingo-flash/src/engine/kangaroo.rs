//! Kangaroo (thesis ch. 4): KLog, a small partitioned log with a
//! set-bucketed DRAM index, in front of KSet, a large set-associative store
//! with per-set Bloom filters and RRIParoo, joined by threshold admission.
//!
//! Layout on the FTL's logical space: `[LOC | KLog partitions | KSet sets |
//! unused]`; the unused tail is extra over-provisioning (Kangaroo uses 93 %
//! of flash, Table 4.3). The large-object cache (LOC) is empty by default, as
//! in ch. 4 where every object is small; FairyWREN's comparison on the Meta
//! trace gives both systems one of 10 % (Table 5.4), and Kangaroo's then
//! shares the FTL (and its garbage collection) with the sets.
//!
//! Payloads: every flash write also goes to the engine's [`PageStore`]
//! (KLog segments and KSet sets page by page, LOC segments as one extent),
//! and every flash hit is read back through it; a read that fails
//! verification is a miss. The simulator's store, [`NoPages`], does nothing,
//! so the same code is the simulator and, over `crate::real`, the real engine.
//!
//! Invariants: an object lives in at most one KLog partition (its set's);
//! a KLog object moves to KSet only together with every other KLog object
//! of its set and only when there are at least `threshold` of them.

use serde::Serialize;

use crate::device::{Device, FtlConfig, FtlDevice, GcPolicy, PAGE_BYTES};
use crate::engine::loc::LargeObjectLog;
use crate::engine::{CacheEngine, EngineStats, RandomAdmission, fraction_of, pages_bytes, per_set_bits};
use crate::hash::{probe_hash, set_of};
use crate::index::tag_of;
use crate::log::{AppendError, LiveObject, SegmentLog};
use crate::object::{MAX_SMALL_OBJECT_BYTES, Object};
use crate::page::{NoPages, PageStore};
use crate::set::{Rrip, SetArray, SetDram, SetObject, fill};

/// Kangaroo's parameters; defaults from Table 4.3 and L941-966.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct KangarooConfig {
    /// Host-visible device pages.
    pub device_pages: u64,
    /// Share of the device the cache uses (0.93).
    pub cache_fraction: f64,
    /// Share of the cache for objects over 2 KiB (0: they are not cached).
    pub loc_fraction: f64,
    /// Pages per LOC segment.
    pub loc_segment_pages: u32,
    /// Share of the small-object cache that is KLog (0.05).
    pub log_fraction: f64,
    /// KLog partitions (64 at full scale).
    pub partitions: u32,
    /// Pages per KLog segment (64 = 256 KiB in the code).
    pub segment_pages: u32,
    /// Minimum KLog objects of one set to move them to KSet (2).
    pub threshold: u32,
    /// Pre-flash admission probability (0.9 in Table 4.3).
    pub admission_probability: f64,
    /// RRIP bits; 0 is FIFO (3).
    pub rrip_bits: u8,
    /// Readmit KLog objects that were hit instead of dropping them (L984).
    pub readmit_hits: bool,
    /// Flush the whole log at once instead of one segment: the simplified
    /// model of Theorem 1, for checking against it (L745-756).
    pub whole_log_flush: bool,
    /// Expected object size, to size per-set DRAM.
    pub mean_object_bytes: u32,
    /// Bloom filter bits per expected object (3, Table 4.2).
    pub bloom_bits_per_object: f64,
    /// RRIParoo hit bits per expected object (1, Table 4.2).
    pub hit_bits_per_object: f64,
    pub seed: u64,
}

impl KangarooConfig {
    pub fn new(device_pages: u64, mean_object_bytes: u32) -> KangarooConfig {
        KangarooConfig {
            device_pages,
            cache_fraction: 0.93,
            loc_fraction: 0.0,
            loc_segment_pages: 64,
            log_fraction: 0.05,
            partitions: 4,
            segment_pages: 16,
            threshold: 2,
            admission_probability: 0.9,
            rrip_bits: 3,
            readmit_hits: true,
            whole_log_flush: false,
            mean_object_bytes,
            bloom_bits_per_object: 3.0,
            hit_bits_per_object: 1.0,
            seed: 1,
        }
    }
}

pub struct Kangaroo<S: PageStore = NoPages> {
    config: KangarooConfig,
    device: FtlDevice,
    klog: Vec<SegmentLog>,
    slots_per_partition: u32,
    kset: SetArray,
    kset_base_page: u64,
    /// KLog starts after the LOC.
    klog_base_page: u64,
    /// Large objects, if the LOC has space; its segments come first on the device.
    loc: Option<LargeObjectLog>,
    rrip: Rrip,
    admission: RandomAdmission,
    stats: EngineStats,
    /// Where the pages' contents go: nowhere in the simulator.
    pages: S,
}

/// Sizes an index: enough 16-bit-addressed tables for `entries`, at most one per bucket.
pub(crate) fn tables_for(entries: u64, buckets: u32) -> u32 {
    (entries.div_ceil(30_000) as u32).clamp(1, buckets)
}

impl Kangaroo {
    /// The simulator: no payloads stored.
    pub fn new(config: KangarooConfig) -> Kangaroo {
        Kangaroo::with_pages(config, NoPages)
    }

    /// Table 4.2's measurement: a default Kangaroo (everything admitted) on
    /// `device_pages`, filled with four times its capacity of
    /// `object_bytes`-byte objects; its stats, for DRAM bits per object.
    pub fn stats_when_full(device_pages: u64, object_bytes: u32) -> EngineStats {
        let mut k = Kangaroo::new(KangarooConfig {
            admission_probability: 1.0,
            ..KangarooConfig::new(device_pages, object_bytes)
        });
        let objects = 4 * device_pages * PAGE_BYTES / u64::from(object_bytes);
        for key in 0..objects {
            k.insert(Object { key, size_bytes: object_bytes });
        }
        k.stats()
    }
}

impl<S: PageStore> Kangaroo<S> {
    /// An engine whose flash writes and hits also go through `pages`.
    pub fn with_pages(config: KangarooConfig, pages: S) -> Kangaroo<S> {
        let cache_pages = fraction_of(config.device_pages, config.cache_fraction);
        let loc_segments = (fraction_of(cache_pages, config.loc_fraction) / u64::from(config.loc_segment_pages)) as u32;
        let loc = (loc_segments > 0).then(|| {
            assert!(loc_segments >= 2, "a LOC needs two segments of {} pages", config.loc_segment_pages);
            LargeObjectLog::new((0..loc_segments).rev().collect(), config.loc_segment_pages)
        });
        let loc_pages = u64::from(loc_segments) * u64::from(config.loc_segment_pages);
        let soc_pages = cache_pages - loc_pages;
        let log_pages = fraction_of(soc_pages, config.log_fraction);
        let slots = (log_pages / (u64::from(config.partitions) * u64::from(config.segment_pages))) as u32;
        assert!(slots >= 2, "KLog too small for {} partitions of 2 segments", config.partitions);
        let log_pages = u64::from(slots * config.partitions * config.segment_pages);
        let sets = (soc_pages - log_pages) as u32;
        let buckets = sets.div_ceil(config.partitions);
        let log_objects_per_partition =
            u64::from(slots * config.segment_pages) * PAGE_BYTES / u64::from(config.mean_object_bytes);
        let tables = tables_for(log_objects_per_partition * 2, buckets);
        let klog =
            (0..config.partitions).map(|_| SegmentLog::new(slots, config.segment_pages, buckets, tables)).collect();
        let set_bytes = PAGE_BYTES as u32;
        let dram = SetDram {
            bloom_bits_per_set: per_set_bits(set_bytes, config.mean_object_bytes, config.bloom_bits_per_object),
            bloom_hashes: 2,
            hit_bits_per_set: per_set_bits(set_bytes, config.mean_object_bytes, config.hit_bits_per_object),
        };
        let device = FtlDevice::new(FtlConfig {
            logical_pages: config.device_pages,
            eu_pages: 64,
            hidden_op: 0.07,
            gc: GcPolicy::Greedy,
        });
        let stats = EngineStats {
            cache_capacity_bytes: pages_bytes(loc_pages + log_pages + u64::from(sets)),
            device_capacity_bytes: device.capacity_bytes(),
            dram_buffer_bytes: u64::from(config.partitions) * pages_bytes(u64::from(config.segment_pages)),
            ..EngineStats::default()
        };
        Kangaroo {
            device,
            klog,
            slots_per_partition: slots,
            kset: SetArray::new(sets, set_bytes, dram),
            kset_base_page: loc_pages + log_pages,
            klog_base_page: loc_pages,
            loc,
            rrip: Rrip::new(config.rrip_bits),
            admission: RandomAdmission::new(config.admission_probability, config.seed),
            stats,
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

    /// First device page of KLog partition `p`.
    fn partition_base_page(&self, p: usize) -> u64 {
        self.klog_base_page + p as u64 * u64::from(self.slots_per_partition) * u64::from(self.config.segment_pages)
    }

    /// (set, partition, bucket, tag) of a key.
    fn place(&self, key: u64) -> (u32, usize, u32, u16) {
        let set = set_of(key, self.kset.sets());
        let partitions = self.config.partitions;
        (set, (set % partitions) as usize, set / partitions, tag_of(probe_hash(key)))
    }

    fn log_append(&mut self, object: Object, rrip: u8) {
        let (_, p, bucket, tag) = self.place(object.key);
        loop {
            match self.klog[p].append(object, bucket, tag, rrip) {
                Ok(_) | Err(AppendError::TableFull(_)) => return,
                Err(AppendError::SegmentFull) => self.seal_partition(p),
            }
        }
    }

    /// Writes partition `p`'s buffer out, first flushing its oldest segments
    /// to KSet until a slot is free; readmitted objects rejoin afterwards.
    fn seal_partition(&mut self, p: usize) {
        let mut readmit = Vec::new();
        while !self.klog[p].has_free_slot() {
            if self.config.whole_log_flush {
                for _ in self.klog[p].sealed_slots() {
                    self.flush_oldest(p, &mut readmit);
                }
            } else {
                self.flush_oldest(p, &mut readmit);
            }
        }
        let slot = self.klog[p].seal();
        let seg_pages = u64::from(self.config.segment_pages);
        let page = self.partition_base_page(p) + u64::from(slot) * seg_pages;
        self.device.write(page, seg_pages).expect("KLog lies inside the device");
        if self.pages.stores_pages() {
            self.pages.write_pages(page, &self.klog[p].slot_objects(slot));
        }
        let long = self.rrip.long();
        for object in readmit {
            self.log_append(object, long);
        }
    }

    /// KLog → KSet for the oldest segment of partition `p` (L978-984).
    fn flush_oldest(&mut self, p: usize, readmit: &mut Vec<Object>) {
        let slot = self.klog[p].oldest_sealed().expect("a full log has sealed segments");
        for live in self.klog[p].live_in_slot(slot) {
            let (set, _, bucket, tag) = self.place(live.object.key);
            // An earlier move of this set may already have taken it.
            let Some(current) = self.klog[p].lookup(live.object.key, bucket, tag) else {
                continue;
            };
            let group = self.klog[p].bucket_objects(bucket);
            if group.len() as u32 >= self.config.threshold {
                for g in &group {
                    self.klog[p].remove(bucket, g.entry);
                }
                self.write_set(set, &group);
            } else {
                self.klog[p].remove(bucket, current.entry);
                if self.config.readmit_hits && current.rrip < self.rrip.long() {
                    readmit.push(current.object);
                }
            }
        }
        self.klog[p].free_slot(slot);
    }

    /// One KSet set write: RRIParoo merge of the set and its KLog objects.
    fn write_set(&mut self, set: u32, incoming: &[LiveObject]) {
        let existing = self.kset.take(set);
        let incoming = incoming.iter().map(|l| SetObject { object: l.object, rrip: l.rrip }).collect();
        let (kept, _evicted) = fill(self.rrip.rank(existing, incoming), self.kset.set_bytes());
        let page = self.kset_base_page + u64::from(set);
        if self.pages.stores_pages() {
            self.pages.write_pages(page, &[kept.iter().map(|o| o.object).collect()]);
        }
        self.kset.store(set, kept);
        self.device.write(page, 1).expect("KSet lies inside the device");
    }

    /// KSet's set count.
    pub fn sets(&self) -> u32 {
        self.kset.sets()
    }

    /// KLog segments per partition and pages per segment.
    pub fn log_geometry(&self) -> (u32, u32) {
        (self.slots_per_partition, self.config.segment_pages)
    }
}

impl<S: PageStore> CacheEngine for Kangaroo<S> {
    fn get(&mut self, key: u64) -> Option<u32> {
        if let Some(loc) = &self.loc
            && let Some((size, segment)) = loc.locate(key)
        {
            let pages = u64::from(loc.segment_pages());
            // The open segment is DRAM; a sealed one is read back whole, since
            // the index keeps no offset inside it.
            let verified = segment.is_none_or(|s| self.pages.read_verified(u64::from(s) * pages, pages, key, size));
            return verified.then_some(size);
        }
        let (set, p, bucket, tag) = self.place(key);
        if let Some(live) = self.klog[p].lookup(key, bucket, tag) {
            let size = live.object.size_bytes;
            if let Some(offset) = self.klog[p].flash_page(live.entry) {
                let page = self.partition_base_page(p) + u64::from(offset);
                if !self.pages.read_verified(page, 1, key, size) {
                    return None;
                }
            }
            self.klog[p].set_rrip(live.entry, self.rrip.promote(live.rrip));
            return Some(size);
        }
        let size = self.kset.lookup(set, key)?;
        self.pages.read_verified(self.kset_base_page + u64::from(set), 1, key, size).then_some(size)
    }

    fn insert(&mut self, object: Object) {
        self.stats.offered_bytes += u64::from(object.size_bytes);
        let large = object.size_bytes > MAX_SMALL_OBJECT_BYTES;
        if (large && self.loc.is_none()) || !self.admission.admit() {
            return;
        }
        self.stats.admitted_bytes += u64::from(object.size_bytes);
        if large {
            let loc = self.loc.as_mut().expect("checked above");
            if let Some(write) = loc.insert(object) {
                // The evicted segment is simply overwritten: the FTL's GC
                // copies whatever else shares its erase units.
                let pages = u64::from(loc.segment_pages());
                let page = u64::from(write.segment) * pages;
                self.device.write(page, pages).expect("the LOC lies inside the device");
                if self.pages.stores_pages() {
                    self.pages.write_extent(page, pages, loc.segment_objects(write.segment));
                }
            }
            return;
        }
        // A newer version replaces any KSet copy when it moves there; until
        // then KLog, searched first, shadows it.
        self.log_append(object, self.rrip.long());
    }

    fn stats(&self) -> EngineStats {
        let log_objects: u64 = self.klog.iter().map(SegmentLog::live_objects).sum();
        let log_bytes: u64 = self.klog.iter().map(SegmentLog::live_bytes).sum();
        let (loc_objects, loc_bytes, loc_bits) =
            self.loc.as_ref().map_or((0, 0, 0), |l| (l.objects(), l.bytes(), l.dram_bits()));
        EngineStats {
            device: self.device.counters(),
            dram_bits: self.klog.iter().map(SegmentLog::index_dram_bits).sum::<u64>()
                + self.kset.dram_bits()
                + loc_bits,
            stored_objects: log_objects + self.kset.objects() + loc_objects,
            stored_bytes: log_bytes + self.kset.bytes() + loc_bytes,
            bloom_false_positives: self.kset.bloom_false_positives(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small(device_pages: u64) -> KangarooConfig {
        KangarooConfig { admission_probability: 1.0, ..KangarooConfig::new(device_pages, 200) }
    }

    /// Table 4.2's bar: Kangaroo's DRAM at 200 B objects ≤ 7.5 bits/object
    /// (7.0 in the thesis), measured on a full cache.
    #[test]
    fn dram_is_at_most_7_5_bits_per_object_at_200_bytes() {
        let s = Kangaroo::stats_when_full(1 << 13, 200);
        let bits = s.dram_bits_per_object();
        assert!(bits <= 7.5, "{bits:.2} bits/object over {} objects", s.stored_objects);
        // The cache really is full: ≥ 90 % of its capacity holds objects.
        assert!(s.stored_bytes as f64 >= 0.9 * s.cache_capacity_bytes as f64, "{s:?}");
    }

    #[test]
    fn threshold_two_writes_fewer_sets_than_threshold_one() {
        let host_bytes = |threshold| {
            let mut k = Kangaroo::new(KangarooConfig { threshold, readmit_hits: false, ..small(1 << 13) });
            for key in 0..100_000u64 {
                k.insert(Object { key, size_bytes: 300 });
            }
            k.stats().device.host_write_bytes
        };
        let (one, two) = (host_bytes(1), host_bytes(2));
        assert!(two * 10 < one * 8, "threshold 2 wrote {two} bytes, threshold 1 {one}");
    }

    /// With a LOC, objects over 2 KiB are cached, written a whole segment at
    /// a time onto the same FTL and evicted oldest segment first; without
    /// one they are declined.
    #[test]
    fn large_objects_go_to_the_loc_on_the_same_ftl() {
        let object = |key| Object { key, size_bytes: 3000 };
        let mut none = Kangaroo::new(small(1 << 12));
        none.insert(object(1));
        assert_eq!((none.get(1), none.stats().admitted_bytes), (None, 0));

        let mut k = Kangaroo::new(KangarooConfig { loc_fraction: 0.1, loc_segment_pages: 8, ..small(1 << 12) });
        // 10 % of 0.93 × 4096 pages: 47 segments of 8 pages, 10 objects each.
        for key in 0..2_000u64 {
            k.insert(object(key));
        }
        let s = k.stats();
        assert_eq!(s.admitted_bytes, 2_000 * 3000);
        assert_eq!(s.device.host_write_bytes, 199 * 8 * PAGE_BYTES, "one segment write per 10 objects");
        assert_eq!(s.stored_objects, 47 * 10 + 10, "47 sealed segments and the buffer");
        assert_eq!((k.get(1_999), k.get(1_520), k.get(1_519)), (Some(3000), Some(3000), None));
        // Small objects still go through KLog, after the LOC's pages.
        k.insert(Object { key: 9, size_bytes: 100 });
        assert_eq!(k.get(9), Some(100));
    }

    /// The simulator in whole-log-flush mode against Theorem 1's direct
    /// balls-into-bins count (the thesis, ch. 4), within 3 %.
    #[test]
    fn whole_log_flush_matches_the_direct_count() {
        let object_bytes = 102u32;
        let per_page = PAGE_BYTES as u32 / object_bytes;
        for threshold in [1, 2, 3] {
            let mut k = Kangaroo::new(KangarooConfig {
                partitions: 1,
                segment_pages: 4,
                log_fraction: 0.028,
                threshold,
                readmit_hits: false,
                whole_log_flush: true,
                ..small(1 << 14)
            });
            let (slots, seg_pages) = k.log_geometry();
            // Each whole-log flush empties every sealed segment.
            let flushed = f64::from((slots - 1) * seg_pages * per_page);
            let lambda = flushed / f64::from(k.sets());
            let mut key = 0u64;
            let mut insert = |k: &mut Kangaroo, n: u64| {
                for _ in 0..n {
                    k.insert(Object { key, size_bytes: object_bytes });
                    key += 1;
                }
            };
            insert(&mut k, 400_000);
            let start = k.stats();
            insert(&mut k, 600_000);
            let end = k.stats();
            let host = (end.device.host_write_bytes - start.device.host_write_bytes) as f64;
            let measured = host / (end.admitted_bytes - start.admitted_bytes) as f64;
            let log_cost = PAGE_BYTES as f64 / f64::from(per_page * object_bytes);
            let w = PAGE_BYTES as f64 / f64::from(object_bytes);
            let model = crate::model::klog_direct_alwa(lambda, w, threshold) - 1.0 + log_cost;
            let error = (measured - model).abs() / model;
            assert!(error <= 0.03, "n={threshold} λ={lambda:.3}: sim {measured:.3} model {model:.3}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// Whatever is found is the last version inserted under that key.
        #[test]
        fn found_objects_are_the_last_inserted(ops in prop::collection::vec((0u64..3000, 1u32..4096), 1..6000)) {
            let mut k = Kangaroo::new(KangarooConfig {
                threshold: 1,
                partitions: 2,
                segment_pages: 4,
                loc_fraction: 0.1,
                loc_segment_pages: 4,
                ..small(2048)
            });
            let mut last = std::collections::HashMap::new();
            for (key, size) in ops {
                // Look-aside protocol: insert only after a miss.
                match k.get(key) {
                    Some(found) => prop_assert_eq!(Some(&found), last.get(&key)),
                    None => {
                        k.insert(Object { key, size_bytes: size });
                        last.insert(key, size);
                    }
                }
            }
            for (&key, &size) in &last {
                if let Some(found) = k.get(key) {
                    prop_assert_eq!(found, size);
                }
            }
        }
    }
}
