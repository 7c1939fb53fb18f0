//! The set-associative baseline, like CacheLib's BigHash (the thesis' SA,
//! L457, L1032): 4 KiB sets on an FTL, a Bloom filter per set, FIFO within
//! a set, one set rewrite per admitted object.

use serde::Serialize;

use crate::device::{Device, FtlConfig, FtlDevice, GcPolicy, PAGE_BYTES};
use crate::engine::{CacheEngine, EngineStats, RandomAdmission, fraction_of, pages_bytes, per_set_bits};
use crate::hash::set_of;
use crate::object::{MAX_SMALL_OBJECT_BYTES, Object};
use crate::set::{Rrip, SetArray, SetDram, SetObject, fill};

#[derive(Clone, Copy, Debug, Serialize)]
pub struct SetAssocConfig {
    pub device_pages: u64,
    /// Share of the device holding sets; the rest is extra OP, the knob SA
    /// turns to cut device write amplification (81 % in Fig. 4.9).
    pub cache_fraction: f64,
    pub admission_probability: f64,
    pub mean_object_bytes: u32,
    pub bloom_bits_per_object: f64,
    pub seed: u64,
}

pub struct SetAssoc {
    device: FtlDevice,
    sets: SetArray,
    admission: RandomAdmission,
    stats: EngineStats,
}

impl SetAssoc {
    pub fn new(config: SetAssocConfig) -> SetAssoc {
        let sets = fraction_of(config.device_pages, config.cache_fraction) as u32;
        assert!(sets > 0);
        let set_bytes = PAGE_BYTES as u32;
        let dram = SetDram {
            bloom_bits_per_set: per_set_bits(set_bytes, config.mean_object_bytes, config.bloom_bits_per_object),
            bloom_hashes: 2,
            hit_bits_per_set: 0,
        };
        let device = FtlDevice::new(FtlConfig {
            logical_pages: config.device_pages,
            eu_pages: 64,
            hidden_op: 0.07,
            gc: GcPolicy::Greedy,
        });
        SetAssoc {
            stats: EngineStats {
                cache_capacity_bytes: pages_bytes(u64::from(sets)),
                device_capacity_bytes: device.capacity_bytes(),
                ..EngineStats::default()
            },
            device,
            sets: SetArray::new(sets, set_bytes, dram),
            admission: RandomAdmission::new(config.admission_probability, config.seed),
        }
    }
}

impl CacheEngine for SetAssoc {
    fn get(&mut self, key: u64) -> Option<u32> {
        self.sets.lookup(set_of(key, self.sets.sets()), key)
    }

    fn insert(&mut self, object: Object) {
        self.stats.offered_bytes += u64::from(object.size_bytes);
        if object.size_bytes > MAX_SMALL_OBJECT_BYTES || !self.admission.admit() {
            return;
        }
        self.stats.admitted_bytes += u64::from(object.size_bytes);
        let set = set_of(object.key, self.sets.sets());
        let existing = self.sets.take(set);
        let incoming = vec![SetObject { object, rrip: 0 }];
        let (kept, _evicted) = fill(Rrip::new(0).rank(existing, incoming), self.sets.set_bytes());
        self.sets.store(set, kept);
        self.device.write(u64::from(set), 1).expect("sets lie inside the device");
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            device: self.device.counters(),
            dram_bits: self.sets.dram_bits(),
            stored_objects: self.sets.objects(),
            stored_bytes: self.sets.bytes(),
            bloom_false_positives: self.sets.bloom_false_positives(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admitted_object_costs_one_set_write() {
        let mut sa = SetAssoc::new(SetAssocConfig {
            device_pages: 1024,
            cache_fraction: 0.9,
            admission_probability: 1.0,
            mean_object_bytes: 300,
            bloom_bits_per_object: 3.0,
            seed: 1,
        });
        for key in 0..5000 {
            sa.insert(Object { key, size_bytes: 300 });
        }
        let s = sa.stats();
        assert_eq!(s.device.host_write_bytes, 5000 * PAGE_BYTES);
        assert_eq!(sa.get(4999), Some(300));
        assert!(s.stored_bytes <= s.cache_capacity_bytes);
    }
}
