//! The fairness experiment's virtual-time twin: with shares, every active
//! tenant gets at least 95 % of its guarantee in every checked window; the
//! FIFO queue visibly misses.

use dingo_iobench::fairness::model::{FairSpec, simulate, windows};
use dingo_iosched::PolicyKind;

#[test]
fn shares_meet_every_guarantee_and_fifo_misses() {
    for spec in [FairSpec::full(), FairSpec::quick()] {
        let min_ratio = |kind| {
            let w = windows(&spec, &simulate(&spec, kind));
            assert!(!w.is_empty());
            w.iter().map(|s| s.ratio).fold(f64::INFINITY, f64::min)
        };
        let (classful, fifo) = (min_ratio(PolicyKind::Classful), min_ratio(PolicyKind::Fifo));
        eprintln!("phase {} s: lowest share of a guarantee: classful {classful:.3}, fifo {fifo:.3}", spec.phase_s);
        assert!(classful >= 0.95, "classful");
        // Four equal FIFO tenants get 25 % each: the 35 % tenant gets 0.71.
        assert!(fifo < 0.8, "fifo");
    }
}
