//! Cache engines and what they share: the interface the benchmark drives,
//! their statistics, and random pre-flash admission.

pub mod fairywren;
pub mod kangaroo;
pub mod loc;
pub mod log_structured;
pub mod set_assoc;

use serde::Serialize;

use crate::device::{DeviceCounters, PAGE_BYTES};
use crate::object::Object;

/// A look-aside flash cache: the caller inserts what it missed.
pub trait CacheEngine {
    /// The stored size of `key`, if cached. A lookup may update eviction
    /// metadata, never flash.
    fn get(&mut self, key: u64) -> Option<u32>;
    /// Offers an object after a miss; the engine may decline it.
    fn insert(&mut self, object: Object);
    fn stats(&self) -> EngineStats;
}

/// Counters and sizes an engine reports.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct EngineStats {
    /// Bytes offered to `insert`.
    pub offered_bytes: u64,
    /// Bytes that passed pre-flash admission.
    pub admitted_bytes: u64,
    pub device: DeviceCounters,
    /// DRAM metadata (indexes, filters, hit bits), from the data structures.
    pub dram_bits: u64,
    /// Fixed DRAM write buffers, kept apart as Table 4.2 does.
    pub dram_buffer_bytes: u64,
    pub stored_objects: u64,
    pub stored_bytes: u64,
    /// Flash the engine lays its cache out on.
    pub cache_capacity_bytes: u64,
    /// The device's host-visible capacity.
    pub device_capacity_bytes: u64,
    /// Most zones ever open at once (zoned devices only).
    pub max_active_zones: u32,
    /// Set reads a Bloom filter let through for a key the set lacked.
    pub bloom_false_positives: u64,
}

impl EngineStats {
    pub fn dram_bits_per_object(&self) -> f64 {
        self.dram_bits as f64 / self.stored_objects.max(1) as f64
    }
}

/// Random pre-flash admission with probability `p` (CacheLib's
/// `RejectRandomAP`, used by every system in the thesis, L1036).
pub struct RandomAdmission {
    probability: f64,
    rng: fastrand::Rng,
}

impl RandomAdmission {
    pub fn new(probability: f64, seed: u64) -> RandomAdmission {
        assert!((0.0..=1.0).contains(&probability), "admission probability {probability}");
        RandomAdmission { probability, rng: fastrand::Rng::with_seed(seed) }
    }

    pub fn admit(&mut self) -> bool {
        self.probability >= 1.0 || self.rng.f64() < self.probability
    }
}

/// Sizing of per-set DRAM from the expected objects per set: `bits` per
/// object rounded up, at least one.
pub fn per_set_bits(set_bytes: u32, mean_object_bytes: u32, bits_per_object: f64) -> u32 {
    let objects = f64::from(set_bytes) / f64::from(mean_object_bytes.max(1));
    ((objects * bits_per_object).ceil() as u32).max(1)
}

/// Pages of `fraction` of `pages`, rounded down.
pub fn fraction_of(pages: u64, fraction: f64) -> u64 {
    assert!((0.0..=1.0).contains(&fraction), "fraction {fraction}");
    (pages as f64 * fraction) as u64
}

/// Bytes in `pages` pages.
pub fn pages_bytes(pages: u64) -> u64 {
    pages * PAGE_BYTES
}
