//! Replays a trace against one engine and measures it after warm-up.

use serde::Serialize;

use crate::bench::Budgets;
use crate::engine::fairywren::WriteBreakdown;
use crate::engine::{CacheEngine, EngineStats};
use crate::object::Object;

/// Write amplification at each level.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct WriteAmplification {
    /// Host bytes written per admitted byte.
    pub app: f64,
    /// NAND bytes per host byte (measured by the device model).
    pub device: f64,
    /// NAND bytes per admitted byte.
    pub total: f64,
}

/// One system under one configuration, measured after warm-up.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub system: String,
    pub label: String,
    pub admission_probability: f64,
    pub requests: u64,
    pub miss_ratio: f64,
    pub app_write_bytes_per_request: f64,
    pub device_write_bytes_per_request: f64,
    pub write_amplification: WriteAmplification,
    pub dram_bits_per_object: f64,
    pub dram_bits: u64,
    /// Share of the device the engine lays its cache out on.
    pub flash_utilisation: f64,
    /// Share of the device holding live objects at the end.
    pub flash_fill: f64,
    pub max_active_zones: u32,
    /// Wasted set reads (Bloom false positives) per request.
    pub bloom_false_positive_reads_per_request: f64,
    pub within_budget: bool,
    /// FairyWREN only: its flash pages by cause, whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairywren_writes: Option<WriteBreakdown>,
}

/// Replays `trace` look-aside (insert after a miss); counts from the end of warm-up.
pub fn replay(
    engine: &mut dyn CacheEngine,
    trace: &[Object],
    budgets: &Budgets,
    system: &str,
    label: &str,
    admission_probability: f64,
) -> RunResult {
    let warmup = budgets.warmup_requests as usize;
    let mut start = EngineStats::default();
    let mut misses = 0u64;
    for (i, &object) in trace.iter().enumerate() {
        if i == warmup {
            start = engine.stats();
            misses = 0;
        }
        if engine.get(object.key).is_none() {
            misses += 1;
            engine.insert(object);
        }
    }
    let end = engine.stats();
    let requests = (trace.len() - warmup) as u64;
    let device = end.device.since(&start.device);
    let admitted = (end.admitted_bytes - start.admitted_bytes).max(1) as f64;
    let per_request = |bytes: u64| bytes as f64 / requests as f64;
    let device_write_bytes_per_request = per_request(device.nand_write_bytes);
    RunResult {
        system: system.to_string(),
        label: label.to_string(),
        admission_probability,
        requests,
        miss_ratio: misses as f64 / requests as f64,
        app_write_bytes_per_request: per_request(device.host_write_bytes),
        device_write_bytes_per_request,
        write_amplification: WriteAmplification {
            app: device.host_write_bytes as f64 / admitted,
            device: device.write_amplification(),
            total: device.nand_write_bytes as f64 / admitted,
        },
        dram_bits_per_object: end.dram_bits_per_object(),
        dram_bits: end.dram_bits,
        flash_utilisation: end.cache_capacity_bytes as f64 / end.device_capacity_bytes as f64,
        flash_fill: end.stored_bytes as f64 / end.device_capacity_bytes as f64,
        max_active_zones: end.max_active_zones,
        bloom_false_positive_reads_per_request: (end.bloom_false_positives - start.bloom_false_positives) as f64
            / requests as f64,
        within_budget: end.dram_bits <= budgets.dram_budget_bits
            && device_write_bytes_per_request <= budgets.device_write_bytes_per_request,
        fairywren_writes: None,
    }
}
