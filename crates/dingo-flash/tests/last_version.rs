//! For every engine: an object found is the last version inserted under
//! its key (look-aside protocol: insert only after a miss).

use std::collections::HashMap;

use dingo_flash::engine::CacheEngine;
use dingo_flash::engine::fairywren::{FairyWren, FairyWrenConfig};
use dingo_flash::engine::kangaroo::{Kangaroo, KangarooConfig};
use dingo_flash::engine::log_structured::{LogStructured, LogStructuredConfig};
use dingo_flash::engine::set_assoc::{SetAssoc, SetAssocConfig};
use dingo_flash::object::Object;
use proptest::prelude::*;

fn engines() -> Vec<Box<dyn CacheEngine>> {
    let pages = 2048;
    vec![
        Box::new(SetAssoc::new(SetAssocConfig {
            device_pages: pages,
            cache_fraction: 0.8,
            admission_probability: 0.9,
            mean_object_bytes: 500,
            bloom_bits_per_object: 3.0,
            seed: 1,
        })),
        Box::new(LogStructured::new(LogStructuredConfig {
            device_pages: pages,
            max_cache_fraction: 0.9,
            dram_budget_bits: 200_000,
            segment_pages: 8,
            admission_probability: 0.9,
            mean_object_bytes: 500,
            seed: 1,
        })),
        Box::new(Kangaroo::new(KangarooConfig { partitions: 2, segment_pages: 4, ..KangarooConfig::new(pages, 500) })),
        Box::new(Kangaroo::new(KangarooConfig {
            partitions: 2,
            segment_pages: 4,
            loc_fraction: 0.1,
            loc_segment_pages: 8,
            ..KangarooConfig::new(pages, 500)
        })),
        Box::new(FairyWren::new(FairyWrenConfig::new(pages, 32, 500))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn found_objects_are_the_last_inserted(ops in prop::collection::vec((0u64..3000, 1u32..4000), 1..5000)) {
        for mut engine in engines() {
            let mut last = HashMap::new();
            for &(key, size) in &ops {
                match engine.get(key) {
                    Some(found) => prop_assert_eq!(Some(&found), last.get(&key)),
                    None => {
                        engine.insert(Object { key, size_bytes: size });
                        last.insert(key, size);
                    }
                }
            }
            let s = engine.stats();
            prop_assert!(s.device.nand_write_bytes >= s.device.host_write_bytes);
            prop_assert!(s.stored_bytes <= s.device_capacity_bytes);
        }
    }
}
