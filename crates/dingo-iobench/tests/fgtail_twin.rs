//! The fg-tail experiment's virtual-time twin: the classful policy must meet
//! the bars against FIFO on the same seeded load.

use dingo_iobench::fgtail::model::{FgTailSpec, simulate};
use dingo_iosched::{ClassfulConfig, PolicyKind};

#[test]
fn classful_meets_the_fg_tail_bars_against_fifo() {
    let spec = FgTailSpec::full();
    for seed in [1, 2, 3] {
        let fifo = simulate(&spec, PolicyKind::Fifo, ClassfulConfig::default(), 6, seed);
        let classful = simulate(&spec, PolicyKind::Classful, ClassfulConfig::default(), 6, seed);
        let show = |name: &str, s: &dingo_iobench::fgtail::model::RunSummary| {
            eprintln!(
                "seed {seed} {name}: reads {} p50 {:.1} p99 {:.1} peak p99 {:.1} mad {:.1} ms, maintenance {} MB, misses {}",
                s.fg_reads,
                s.p50_ms,
                s.p99_ms,
                s.peak_p99_ms,
                s.p99_mad_ms,
                s.maintenance_bytes / 1_000_000,
                s.deadline_misses
            )
        };
        show("fifo", &fifo);
        show("classful", &classful);
        assert!(classful.peak_p99_ms * 3.0 <= fifo.peak_p99_ms, "peak p99");
        assert!(classful.p99_ms * 2.0 <= fifo.p99_ms, "overall p99");
        assert!(classful.maintenance_bytes as f64 >= 0.9 * fifo.maintenance_bytes as f64, "maintenance bytes");
        assert_eq!(classful.deadline_misses, 0, "deadlines");
    }
}
