//! The log-structured baseline (the thesis' LS, L1032): a circular log over
//! flash with a full DRAM index and FIFO eviction, i.e. KLog indexing the
//! whole cache. Its capacity is what its DRAM budget can index.
//!
//! The index is the same 48-bit chained index Kangaroo uses, with hash
//! buckets instead of sets, so its DRAM cost is measured from the same
//! structure rather than assumed (the thesis charged LS 30 bits/object).

use serde::Serialize;

use crate::device::{Device, FtlConfig, FtlDevice, GcPolicy, PAGE_BYTES};
use crate::engine::kangaroo::tables_for;
use crate::engine::{CacheEngine, EngineStats, RandomAdmission, fraction_of, pages_bytes};
use crate::hash::{place_hash, probe_hash};
use crate::index::{ENTRY_BITS, HEAD_BITS, tag_of};
use crate::log::{AppendError, SegmentLog};
use crate::object::{MAX_SMALL_OBJECT_BYTES, Object};

/// Objects per hash bucket the index is sized for.
const OBJECTS_PER_BUCKET: u64 = 4;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct LogStructuredConfig {
    pub device_pages: u64,
    /// Most of the device the log may use.
    pub max_cache_fraction: f64,
    /// DRAM the index may use: it caps the log at the objects it can index.
    pub dram_budget_bits: u64,
    pub segment_pages: u32,
    pub admission_probability: f64,
    pub mean_object_bytes: u32,
    pub seed: u64,
}

pub struct LogStructured {
    device: FtlDevice,
    log: SegmentLog,
    buckets: u32,
    segment_pages: u32,
    admission: RandomAdmission,
    stats: EngineStats,
}

impl LogStructured {
    pub fn new(config: LogStructuredConfig) -> LogStructured {
        // Per object: one entry plus a share of a bucket head.
        let bits_per_object = u64::from(ENTRY_BITS) + u64::from(HEAD_BITS) / OBJECTS_PER_BUCKET;
        let indexable_objects = config.dram_budget_bits / bits_per_object;
        let dram_pages = indexable_objects * u64::from(config.mean_object_bytes) / PAGE_BYTES;
        let max_pages = fraction_of(config.device_pages, config.max_cache_fraction);
        let slots = (dram_pages.min(max_pages) / u64::from(config.segment_pages)) as u32;
        let log_pages = u64::from(slots) * u64::from(config.segment_pages);
        let objects = log_pages * PAGE_BYTES / u64::from(config.mean_object_bytes);
        let buckets = objects.div_ceil(OBJECTS_PER_BUCKET).max(1) as u32;
        let device = FtlDevice::new(FtlConfig {
            logical_pages: config.device_pages,
            eu_pages: 64,
            hidden_op: 0.07,
            gc: GcPolicy::Greedy,
        });
        LogStructured {
            stats: EngineStats {
                cache_capacity_bytes: pages_bytes(log_pages),
                device_capacity_bytes: device.capacity_bytes(),
                dram_buffer_bytes: pages_bytes(u64::from(config.segment_pages)),
                ..EngineStats::default()
            },
            device,
            log: SegmentLog::new(slots, config.segment_pages, buckets, tables_for(objects * 2, buckets)),
            buckets,
            segment_pages: config.segment_pages,
            admission: RandomAdmission::new(config.admission_probability, config.seed),
        }
    }

    fn place(&self, key: u64) -> (u32, u16) {
        ((place_hash(key) % u64::from(self.buckets)) as u32, tag_of(probe_hash(key)))
    }

    /// Seals the buffer; FIFO eviction drops the oldest segment whole.
    fn seal(&mut self) {
        if !self.log.has_free_slot() {
            let oldest = self.log.oldest_sealed().expect("a full log has sealed segments");
            for live in self.log.live_in_slot(oldest) {
                let (bucket, _) = self.place(live.object.key);
                self.log.remove(bucket, live.entry);
            }
            self.log.free_slot(oldest);
        }
        let slot = self.log.seal();
        let seg_pages = u64::from(self.segment_pages);
        self.device.write(u64::from(slot) * seg_pages, seg_pages).expect("the log lies inside the device");
    }
}

impl CacheEngine for LogStructured {
    fn get(&mut self, key: u64) -> Option<u32> {
        let (bucket, tag) = self.place(key);
        self.log.lookup(key, bucket, tag).map(|l| l.object.size_bytes)
    }

    fn insert(&mut self, object: Object) {
        self.stats.offered_bytes += u64::from(object.size_bytes);
        if object.size_bytes > MAX_SMALL_OBJECT_BYTES || !self.admission.admit() {
            return;
        }
        self.stats.admitted_bytes += u64::from(object.size_bytes);
        let (bucket, tag) = self.place(object.key);
        loop {
            match self.log.append(object, bucket, tag, 0) {
                Ok(_) | Err(AppendError::TableFull(_)) => return,
                Err(AppendError::SegmentFull) => self.seal(),
            }
        }
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            device: self.device.counters(),
            dram_bits: self.log.index_dram_bits(),
            stored_objects: self.log.live_objects(),
            stored_bytes: self.log.live_bytes(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_the_dram_budget_and_writes_are_sequential() {
        let config = LogStructuredConfig {
            device_pages: 8192,
            max_cache_fraction: 0.93,
            dram_budget_bits: 52 * 20_000,
            segment_pages: 16,
            admission_probability: 1.0,
            mean_object_bytes: 200,
            seed: 1,
        };
        let mut ls = LogStructured::new(config);
        for key in 0..200_000u64 {
            ls.insert(Object { key, size_bytes: 200 });
        }
        let s = ls.stats();
        // About 20,000 objects indexable: roughly 1000 pages of 200 B objects.
        assert!((18_000..=20_500).contains(&s.stored_objects), "{s:?}");
        assert!(s.dram_bits <= config.dram_budget_bits, "{s:?}");
        // A circular log overwrites whole erase units: no GC copies.
        assert!(s.device.write_amplification() < 1.01, "{s:?}");
        assert_eq!(ls.get(199_999), Some(200));
        assert_eq!(ls.get(0), None);
    }
}
