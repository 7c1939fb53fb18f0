//! The real engine (Kangaroo with its pages in a file) against the
//! simulator on the same trace, and what a corrupted byte does.

use std::time::Instant;

use dingo_flash::bench::Budgets;
use dingo_flash::device::PAGE_BYTES;
use dingo_flash::engine::CacheEngine;
use dingo_flash::engine::fairywren::{FairyWren, FairyWrenConfig};
use dingo_flash::engine::kangaroo::{Kangaroo, KangarooConfig};
use dingo_flash::object::Object;
use dingo_flash::real::{FilePages, RealSystem, real_markdown, run_real_bench};
use dingo_flash::trace::TraceConfig;

/// The smallest device the default KLog geometry fits (two 16-page
/// segments in each of 4 partitions).
const DEVICE_PAGES: u64 = 4096;

#[test]
fn real_kangaroo_matches_the_simulator_and_verifies_every_hit() {
    real_engine_matches_the_simulator(RealSystem::Kangaroo);
}

#[test]
fn real_fairywren_matches_the_simulator_and_verifies_every_hit() {
    real_engine_matches_the_simulator(RealSystem::FairyWren);
}

fn real_engine_matches_the_simulator(system: RealSystem) {
    let started = Instant::now();
    // Kept small for a debug build: a flash hit costs a direct read.
    let trace = TraceConfig::fb_like(80_000, 42).generate(80_000);
    let budgets = Budgets {
        device_bytes: DEVICE_PAGES * PAGE_BYTES,
        dram_budget_bits: DEVICE_PAGES * PAGE_BYTES * 8 / 125,
        device_write_bytes_per_request: 625.0,
        requests: trace.len() as u64,
        warmup_requests: trace.len() as u64 / 2,
    };
    let dir = tempfile::tempdir().unwrap();
    let report = run_real_bench(system, "fb-like small", &trace, &budgets, 42, dir.path()).unwrap();
    println!("{}", real_markdown(&report));
    assert!(report.agrees_within(0.10), "{:?}", report.cross_checks());
    // The code is shared, so the runs are not just close but identical.
    let (sim, real) = (&report.simulator, &report.real.result);
    assert_eq!(sim.miss_ratio, real.miss_ratio);
    assert_eq!(sim.device_write_bytes_per_request, real.device_write_bytes_per_request);
    let file = report.real.file;
    assert!(file.verified > 10_000, "hits must come from flash: {file:?}");
    assert_eq!(file.verified, file.reads, "every flash hit verified: {file:?}");
    assert_eq!((file.corrupt, file.missing, file.oversized_pages, file.io_errors), (0, 0, 0, 0));
    assert!(report.real.get.ops > 0 && report.real.put.ops > 0 && report.real.get.p99_us >= report.real.get.p50_us);
    println!("test took {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn a_corrupted_byte_in_the_file_is_a_miss_not_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.img");
    let config = KangarooConfig { admission_probability: 1.0, ..KangarooConfig::new(DEVICE_PAGES, 200) };
    let mut k = Kangaroo::with_pages(config, FilePages::create(&path).unwrap());
    let object = |key| Object { key, size_bytes: 200 };
    for key in 0..40_000u64 {
        if k.get(key).is_none() {
            k.insert(object(key));
        }
    }
    // A key the engine serves by reading the file (not from its DRAM buffer).
    let key = (0..1_000u64)
        .find(|&key| {
            let reads = k.pages().stats().reads;
            k.get(key) == Some(200) && k.pages().stats().reads == reads + 1
        })
        .expect("early keys have moved to flash");
    let before = k.pages().stats();
    assert_eq!((before.corrupt, before.verified), (0, before.reads));

    // Flip the first payload byte of every stored copy of the key: each
    // record is `key u64 | size u32 | payload`.
    let mut bytes = std::fs::read(&path).unwrap();
    let mut record = key.to_le_bytes().to_vec();
    record.extend_from_slice(&200u32.to_le_bytes());
    let copies: Vec<usize> =
        bytes.windows(record.len()).enumerate().filter(|(_, w)| *w == record).map(|(at, _)| at).collect();
    assert!(!copies.is_empty());
    for at in &copies {
        bytes[at + record.len()] ^= 0x01;
    }
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &bytes, 0).unwrap();
    file.sync_all().unwrap();

    assert_eq!(k.get(key), None, "a corrupted page must read as a miss");
    let after = k.pages().stats();
    assert_eq!((after.reads, after.corrupt, after.verified), (before.reads + 1, 1, before.verified));
    // Look-aside: the miss is inserted again and served, verified, later.
    k.insert(object(key));
    assert_eq!(k.get(key), Some(200));
}

#[test]
fn large_objects_are_read_back_from_loc_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = KangarooConfig {
        admission_probability: 1.0,
        loc_fraction: 0.1,
        loc_segment_pages: 8,
        ..KangarooConfig::new(DEVICE_PAGES, 200)
    };
    let mut k = Kangaroo::with_pages(config, FilePages::create(&dir.path().join("pages.img")).unwrap());
    // 3000 B objects straddle pages: ten to a 32 KiB segment.
    for key in 0..2_000u64 {
        k.insert(Object { key, size_bytes: 3000 });
    }
    let reads = k.pages().stats().reads;
    assert_eq!(k.get(1_999), Some(3000), "in the open segment");
    assert_eq!(k.pages().stats().reads, reads, "served from DRAM");
    assert_eq!(k.get(1_600), Some(3000), "in a sealed segment");
    let s = k.pages().stats();
    assert_eq!((s.reads, s.verified, s.corrupt), (reads + 1, reads + 1, 0));
    assert_eq!(k.get(5), None, "evicted with its segment");
}

/// Random gets and inserts (look-aside) of objects of 1 B to 4 KiB, so
/// that KLog, KSet, FWLog, both subsets and both LOCs all serve hits:
/// the real engine answers every get exactly as the simulator does.
#[test]
fn real_engines_answer_every_get_as_the_simulator_does() {
    let mut rng = fastrand::Rng::with_seed(7);
    let ops: Vec<Object> =
        (0..20_000).map(|_| Object { key: rng.u64(0..3_000), size_bytes: rng.u32(1..=4096) }).collect();
    let dir = tempfile::tempdir().unwrap();
    let replay_both = |sim: &mut dyn CacheEngine, real: &mut dyn CacheEngine| {
        let mut hits = 0;
        for &o in &ops {
            let found = real.get(o.key);
            assert_eq!(found, sim.get(o.key), "key {}", o.key);
            if found.is_none() {
                sim.insert(o);
                real.insert(o);
            } else {
                hits += 1;
            }
        }
        hits
    };

    let k = KangarooConfig {
        admission_probability: 1.0,
        threshold: 1,
        partitions: 2,
        segment_pages: 4,
        loc_fraction: 0.1,
        loc_segment_pages: 4,
        ..KangarooConfig::new(2048, 1000)
    };
    let mut real = Kangaroo::with_pages(k, FilePages::create(&dir.path().join("k.img")).unwrap());
    let hits = replay_both(&mut Kangaroo::new(k), &mut real);
    let s = real.pages().stats();
    assert!(s.verified > 1_000 && hits > 2_000, "{hits} hits, {s:?}");
    assert_eq!((s.verified, s.corrupt, s.missing, s.io_errors), (s.reads, 0, 0, 0));

    let fw = FairyWrenConfig { seed: 3, ..FairyWrenConfig::new(2048, 16, 1000) };
    let mut real = FairyWren::with_pages(fw, FilePages::create(&dir.path().join("fw.img")).unwrap());
    let hits = replay_both(&mut FairyWren::new(fw), &mut real);
    let s = real.pages().stats();
    assert!(s.verified > 1_000 && hits > 2_000, "{hits} hits, {s:?}");
    assert_eq!((s.verified, s.corrupt, s.missing, s.io_errors), (s.reads, 0, 0, 0));
}
