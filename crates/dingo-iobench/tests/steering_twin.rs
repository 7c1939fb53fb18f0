//! The steering experiment's virtual-time twin: the client's steering
//! policy, the node's congestion detector and the classful scheduler,
//! driven by a simulated clock, must meet the bars against random
//! replica choice on the same seeded load.

use dingo_iobench::steering::model::{SteerBars, SteerSpec, SteerSummary, simulate};
use dingo_iosched::steering::ReplicaChoice;

fn show(seed: u64, name: &str, s: &SteerSummary) {
    eprintln!(
        "seed {seed} {name}: reads {} pre p90 {:.1} ms, fault max p90 {:.1} ms ({:.2}x), share pre {:.3} at 1 s {:.3} \
         recovered {:.3}, persistent p50/p90/p99 {:.1}/{:.1}/{:.1} ms",
        s.reads,
        s.pre_fault_p90_ms,
        s.fault_max_p90_ms,
        s.fault_max_p90_ratio,
        s.pre_fault_share,
        s.share_1s_after_onset,
        s.recovered_share,
        s.persistent_p50_ms,
        s.persistent_p90_ms,
        s.persistent_p99_ms
    );
}

#[test]
fn steering_meets_the_bars_against_random() {
    for spec in [SteerSpec::quick(), SteerSpec::full()] {
        check(&spec);
    }
}

fn check(spec: &SteerSpec) {
    let spec = *spec;
    for seed in [1, 2, 3] {
        let random = simulate(&spec, ReplicaChoice::Random, seed);
        let steering = simulate(&spec, ReplicaChoice::Steering, seed);
        show(seed, "random", &random);
        show(seed, "steering", &steering);
        let bars = SteerBars::evaluate(&steering, &random);
        assert!(bars.all(), "seed {seed}: {bars:?}");
    }
}
