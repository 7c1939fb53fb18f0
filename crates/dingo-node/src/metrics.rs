//! The node's `/metrics` page: its stats reply, its cache and flash tier,
//! and the emulated heads' schedulers, read at scrape time.

use crate::head::{Head, WAIT_BUCKETS_MS};
use crate::service::stats;
use crate::store::Store;
use dingo_daemon::metrics::Registry;
use dingo_daemon::metrics::{Histogram, Page};
use dingo_iosched::Class;
use dingo_iosched::waiting::GateState;
use dingo_proto::v1::{DiskStats, NodeStatsReply};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// The registry `GET /metrics` encodes: the node's families, read from
/// `store` on each scrape.
pub fn registry(store: Arc<Store>) -> Registry {
    dingo_daemon::metrics::registry(move |m| write(&store, m))
}

/// A per-disk metric: name, help and how to read its value.
type DiskCounter = (&'static str, &'static str, fn(&DiskStats) -> u64);

/// Writes the node's metric families.
pub fn write(store: &Store, m: &mut Page<'_>) -> fmt::Result {
    let s = stats(store);
    let per_disk: [DiskCounter; 6] = [
        ("dingo_disk_read_bytes_total", "Bytes read from the device.", |d| d.bytes_read),
        ("dingo_disk_read_requests_total", "Read requests sent to the device.", |d| d.read_requests),
        ("dingo_disk_written_bytes_total", "Bytes written to the device.", |d| d.bytes_written),
        ("dingo_disk_write_requests_total", "Write requests sent to the device.", |d| d.write_requests),
        ("dingo_disk_head_time_us_total", "Device busy time (modelled for emulated HDDs).", |d| d.head_time_us),
        ("dingo_disk_checksum_errors_total", "Checksum mismatches found on reads.", |d| d.checksum_errors),
    ];
    let disk_label = |d: &DiskStats| [("disk", d.disk.to_string())];
    for (name, help, get) in per_disk {
        m.counters(name, help, s.disks.iter().map(|d| (disk_label(d), get(d))))?;
    }
    m.gauges(
        "dingo_disk_direct_io",
        "1 if reads bypass the page cache with O_DIRECT.",
        s.disks.iter().map(|d| (disk_label(d), u64::from(d.direct_io))),
    )?;
    for (name, help, bytes) in [
        ("dingo_disk_class_read_bytes_total", "Bytes read from the device per IO class.", true),
        ("dingo_disk_class_read_requests_total", "Read requests per IO class.", false),
    ] {
        let samples = s.disks.iter().flat_map(|d| {
            d.classes.iter().map(move |c| {
                let v = if bytes { c.bytes } else { c.requests };
                ([("disk", d.disk.to_string()), ("class", c.class_name.clone())], v)
            })
        });
        m.counters(name, help, samples)?;
    }
    write_heads(store, &s, m)?;
    write_cache(store, &s, m)
}

/// The DRAM cache, orphan deletion and the flash tier.
fn write_cache(store: &Store, s: &NodeStatsReply, m: &mut Page<'_>) -> fmt::Result {
    let c = s.cache.unwrap_or_default();
    for (name, help, v) in [
        ("dingo_cache_hits_total", "Cache page hits.", c.hits),
        ("dingo_cache_misses_total", "Cache page misses.", c.misses),
        ("dingo_cache_pinned_hits_total", "Hits served by the pinned region.", c.pinned_hits),
        ("dingo_cache_overflow_evictions_total", "Pinned pages evicted early on overflow.", c.overflow_evictions),
        (
            "dingo_cache_pinned_reread_bytes_total",
            "Bytes of pinned pages read from disk again, while pinned, after an overflow pushed them out.",
            c.pinned_reread_bytes,
        ),
    ] {
        m.counter(name, help, v)?;
    }
    m.gauge("dingo_cache_general_bytes", "Bytes in the general region.", c.general_bytes)?;
    m.gauge("dingo_cache_pinned_bytes", "Bytes in the pinned region.", c.pinned_bytes)?;
    m.counter(
        "dingo_node_orphan_chunks_deleted_total",
        "Chunks deleted because no block record placed them here.",
        store.orphans_deleted.load(Relaxed),
    )?;
    let Some(f) = store.cache.flash_stats() else { return Ok(()) };
    m.gauge(
        "dingo_flash_max_open_zones",
        "Most zones open at once since the node started.",
        u64::from(f.tier.max_open_zones),
    )?;
    m.gauge(
        "dingo_flash_write_budget_bytes_per_day",
        "The configured device-writes-per-day budget.",
        f.write_budget_bytes_per_day,
    )?;
    for (name, help, v) in [
        ("dingo_flash_hits_total", "Cache pages served from the flash tier.", f.tier.hits),
        ("dingo_flash_misses_total", "DRAM misses the flash tier did not serve.", f.tier.misses),
        (
            "dingo_flash_evicted_written_bytes_total",
            "Bytes of pages evicted from DRAM written to flash.",
            f.tier.evicted_written_bytes,
        ),
        (
            "dingo_flash_pinned_written_bytes_total",
            "Bytes of pinned overflow written to flash.",
            f.tier.pinned_written_bytes,
        ),
        ("dingo_flash_host_written_bytes_total", "Bytes the tier asked the flash device to write.", f.host_write_bytes),
        ("dingo_flash_device_written_bytes_total", "Bytes the flash device wrote.", f.device_write_bytes),
        (
            "dingo_flash_refused_over_budget_bytes_total",
            "Bytes refused by the writes-per-day budget.",
            f.tier.refused_over_budget_bytes,
        ),
        (
            "dingo_flash_refused_no_space_bytes_total",
            "Bytes refused: every zone held live pins.",
            f.tier.refused_no_space_bytes,
        ),
        ("dingo_flash_zone_resets_total", "Zones reset whole.", f.tier.log_zone_resets + f.tier.pinned_zone_resets),
        ("dingo_flash_checksum_misses_total", "Flash pages that failed their checksum.", f.checksum_misses),
        (
            "dingo_flash_dropped_queue_full_bytes_total",
            "Bytes not offered to flash: its writer was behind.",
            f.dropped_queue_full_bytes,
        ),
    ] {
        m.counter(name, help, v)?;
    }
    Ok(())
}

/// Per-disk, per-class metrics of the emulated heads' schedulers.
fn write_heads(store: &Store, s: &NodeStatsReply, m: &mut Page<'_>) -> fmt::Result {
    let heads: Vec<(String, &Head)> =
        s.disks.iter().zip(&store.disks).filter_map(|(st, d)| Some((st.disk.to_string(), d.head.as_ref()?))).collect();
    let disk = |d: &String| [("disk", d.clone())];
    m.gauges(
        "dingo_disk_scheduler",
        "1 for the IO scheduler policy of each emulated disk ([node.io] scheduler).",
        heads.iter().map(|(d, head)| ([("disk", d.as_str()), ("policy", head.scheduler.name())], 1u64)),
    )?;
    let congestion: Vec<_> = heads.iter().map(|(d, head)| (d, head.congestion())).collect();
    m.gauges(
        "dingo_disk_congested",
        "1 while the emulated disk runs more than 10 % above its model (the steering signal).",
        congestion.iter().map(|(d, c)| (disk(d), u64::from(c.congested))),
    )?;
    m.gauges(
        "dingo_disk_slowness_ratio",
        "Observed over modelled head time of the disk's recent requests (1: on profile).",
        congestion.iter().map(|(d, c)| (disk(d), c.slowness_permille as f64 / 1000.0)),
    )?;
    m.counters(
        "dingo_disk_planner_budgets_total",
        "Per-quantum budgets received from the planner.",
        heads.iter().map(|(d, h)| (disk(d), h.budgets_received.load(Relaxed))),
    )?;
    m.counters(
        "dingo_disk_planner_budget_head_time_us_total",
        "Head time the planner's budgets held, µs.",
        heads.iter().map(|(d, h)| (disk(d), h.budgeted_us.load(Relaxed))),
    )?;
    m.gauges(
        "dingo_disk_planner_budget_left_us",
        "Head time of the current quantum's budget not yet served, µs.",
        heads.iter().map(|(d, h)| (disk(d), h.planned_left_us())),
    )?;
    let per_class = || {
        heads
            .iter()
            .flat_map(|(d, h)| Class::LABELS.iter().enumerate().map(move |(i, class)| (d.as_str(), *h, i, *class)))
    };
    m.counters(
        "dingo_disk_class_head_time_us_total",
        "Emulated head time served per scheduling class, µs.",
        per_class().map(|(d, h, i, class)| ([("disk", d), ("class", class)], h.classes[i].served_us.load(Relaxed))),
    )?;
    m.counters(
        "dingo_disk_queue_wait_behind_us_total",
        "Head time requests of a class waited behind units of each class (`behind`): the rest of the unit in \
         service at their arrival and every unit started before theirs, µs.",
        per_class().flat_map(|(d, h, i, class)| {
            Class::LABELS.iter().enumerate().map(move |(j, behind)| {
                ([("disk", d), ("class", class), ("behind", behind)], h.classes[i].waited_behind_us[j].load(Relaxed))
            })
        }),
    )?;
    let gates: Vec<(&String, GateState)> = heads.iter().filter_map(|(d, head)| Some((d, head.gate()?))).collect();
    if !gates.is_empty() {
        type GateGauge = fn(&GateState) -> f64;
        let gauges: [(&str, &str, GateGauge); 5] = [
            ("dingo_disk_gate_open", "1 while the Waiting gate lets best effort fire.", |g| {
                f64::from(u8::from(g.open))
            }),
            ("dingo_disk_gate_size_bytes", "The Waiting gate's request size.", |g| g.params.size_bytes as f64),
            ("dingo_disk_gate_threshold_seconds", "Foreground idle time before the Waiting gate opens.", |g| {
                g.params.threshold_us as f64 / 1e6
            }),
            (
                "dingo_disk_gate_predicted_slowdown_seconds",
                "Mean foreground slowdown the last tune predicted for the gate's parameters.",
                |g| g.prediction.map_or(0.0, |p| p.mean_slowdown_us / 1e6),
            ),
            ("dingo_disk_gate_retunes", "Times the Waiting gate's tuner ran.", |g| g.retunes as f64),
        ];
        for (name, help, get) in gauges {
            m.gauges(name, help, gates.iter().map(|(d, g)| (disk(d), get(g))))?;
        }
    }
    m.histograms(
        "dingo_disk_queue_wait_seconds",
        "Time requests waited for the emulated head, per scheduling class.",
        per_class().map(|(d, h, i, class)| {
            let c = &h.classes[i];
            let buckets = WAIT_BUCKETS_MS
                .iter()
                .enumerate()
                .map(|(b, le_ms)| (*le_ms as f64 / 1000.0, c.wait_buckets[b].load(Relaxed)))
                .collect();
            let waits =
                Histogram { sum: c.wait_us_sum.load(Relaxed) as f64 / 1e6, count: c.waits.load(Relaxed), buckets };
            ([("disk", d), ("class", class)], waits)
        }),
    )
}
