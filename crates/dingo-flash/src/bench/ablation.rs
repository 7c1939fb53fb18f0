//! Kangaroo's ablations (Fig. 4.14): each knob moved alone from the
//! defaults, every run admitting everything so writes compare directly.

use crate::bench::{Budgets, RunResult, replay};
use crate::engine::kangaroo::{Kangaroo, KangarooConfig};
use crate::object::Object;

pub fn kangaroo_ablations(budgets: &Budgets, trace: &[Object], mean_object_bytes: u32, seed: u64) -> Vec<RunResult> {
    let base = KangarooConfig {
        admission_probability: 1.0,
        seed,
        ..KangarooConfig::new(budgets.device_pages(), mean_object_bytes)
    };
    let variants: [(&str, KangarooConfig); 9] = [
        ("defaults", base),
        ("FIFO sets (0 RRIP bits)", KangarooConfig { rrip_bits: 0, ..base }),
        ("RRIParoo 1 bit", KangarooConfig { rrip_bits: 1, ..base }),
        ("threshold 1", KangarooConfig { threshold: 1, ..base }),
        ("threshold 3", KangarooConfig { threshold: 3, ..base }),
        ("log 2.5 %", KangarooConfig { log_fraction: 0.025, ..base }),
        ("log 10 %", KangarooConfig { log_fraction: 0.10, ..base }),
        ("no readmission", KangarooConfig { readmit_hits: false, ..base }),
        ("admission p=0.5", KangarooConfig { admission_probability: 0.5, ..base }),
    ];
    variants
        .into_iter()
        .map(|(label, config)| {
            let mut k = Kangaroo::new(config);
            replay(&mut k, trace, budgets, "kangaroo", label, config.admission_probability)
        })
        .collect()
}
