//! The waiting experiment's virtual-time twin: the Waiting gate against a
//! fixed-rate scrubber on the same seeded load, medians of seeds 1-9.
//! (Mean slowdown over one run is a noisy figure: one run's value rests on
//! a few dozen collisions, and a shift of a few ms in when the gate retunes
//! changes it by a third; nine seeds make the median a statement about the
//! mechanism rather than about three draws.)

use dingo_iobench::stats::median;
use dingo_iobench::waiting::model::{WaitSpec, interpolate_at, ratio_at_baseline_slowdown, twin};

#[test]
fn the_waiting_gate_against_a_fixed_rate_scrubber() {
    let spec = WaitSpec::full();
    let runs: Vec<_> = (1..=9).map(|seed| twin(&spec, seed)).collect();
    for (g, &goal_us) in spec.goals_us.iter().enumerate() {
        let slowdown = median(runs.iter().map(|t| t.waiting[g].1).collect());
        let mb_s = median(runs.iter().map(|t| t.waiting[g].2).collect());
        let free = median(runs.iter().map(|t| t.waiting[g].3).collect());
        // The fixed-rate curve of medians per rate.
        let curve: Vec<(f64, f64)> = (0..spec.fixed_rate_shares_ppm.len())
            .map(|r| {
                (
                    median(runs.iter().map(|t| t.fixed_rate[r].1).collect()),
                    median(runs.iter().map(|t| t.fixed_rate[r].2).collect()),
                )
            })
            .collect();
        let (baseline, extrapolated) = interpolate_at(&curve, slowdown);
        eprintln!(
            "goal {goal_us} µs: slowdown {slowdown:.2} ms, scrub {mb_s:.1} MB/s, fixed rate {baseline:.1} MB/s at that \
             slowdown (x{:.1}{}), free bytes {free:.2}; fixed-rate curve {curve:?}",
            mb_s / baseline,
            if extrapolated { ", extrapolated" } else { "" }
        );
        assert!(slowdown <= 1.25 * goal_us as f64 / 1000.0, "slowdown over 1.25 x the goal");
        assert!(!extrapolated, "the fixed-rate sweep must reach the gate's slowdown");
        // The bar is 3x; the twin measures 2.1-2.8x on 27 seeds
        // (docs/IO_CONTROL.md, "Why the waiting bars are missed").
        assert!(mb_s >= 1.5 * baseline, "scrub throughput at equal slowdown");
        assert!(free >= 0.9, "free bytes");
    }
    // The paper's own baseline (Table III's CFQ rows: 64 KB requests after
    // 10 ms of idle time, W:331-340, W:374-405), the paper's comparison
    // (the bar is against the fixed-rate scrubber, above, and is not
    // asserted at 3 x): Waiting's best throughput at a slowdown no larger
    // than the baseline's. The paper reports 4.65-6.2 x at CFQ's 4.4-938 ms.
    let cfq =
        (median(runs.iter().map(|t| t.cfq_like.0).collect()), median(runs.iter().map(|t| t.cfq_like.1).collect()));
    let waiting: Vec<(f64, f64)> = (0..spec.goals_us.len())
        .map(|g| {
            (
                median(runs.iter().map(|t| t.waiting[g].1).collect()),
                median(runs.iter().map(|t| t.waiting[g].2).collect()),
            )
        })
        .collect();
    let ratio = ratio_at_baseline_slowdown(&waiting, cfq).expect("Waiting slows foreground less than CFQ-like");
    eprintln!("CFQ-like: {:.2} MB/s at {:.2} ms; Waiting at no more slowdown: x{ratio:.2}", cfq.1, cfq.0);
    assert!(ratio >= 3.0, "Waiting against the paper's baseline at equal slowdown: x{ratio:.2}");
}
