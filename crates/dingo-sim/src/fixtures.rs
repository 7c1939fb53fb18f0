//! Small hand-made results with round figures, for tests here and in the
//! crates that render results (`dingo-report`): enabled by the `fixtures`
//! feature.

use crate::sim::{Churn, Comparisons, Mode, ModeResult, ModeResults, QuantumPoint, SimResult, TaskTotals, Variants};
use dingo_types::TaskKind;
use std::collections::BTreeMap;

/// A mode result with round figures and `quanta` points of series.
pub fn mode_result(mode: Mode, disk_bytes: u64, quanta: u32) -> ModeResult {
    ModeResult {
        mode,
        logical_bytes: 1000,
        disk_bytes,
        free_bytes: 1000 - disk_bytes,
        elided_bytes: 7,
        head_time_us: 5_000_000,
        utilization: disk_bytes as f64 / 2000.0,
        peak_disk_utilization: 0.75,
        deadline_misses: 0,
        io_wall_drive_bytes: Some(48),
        cache_bytes_per_disk: 4,
        tasks: TaskKind::ALL
            .iter()
            .map(|t| TaskTotals { task: t.name().into(), logical_bytes: 10, ..TaskTotals::default() })
            .collect(),
        series: (0..quanta)
            .map(|q| QuantumPoint {
                start_hours: f64::from(q) * 3.0,
                disk_bytes: 10,
                head_time_us: 3_600_000,
                budget_bytes: (mode == Mode::Declarative).then_some(99),
                ..QuantumPoint::default()
            })
            .collect(),
    }
}

/// A run of two quanta with all three modes and both variants.
pub fn sim_result() -> SimResult {
    let modes = ModeResults {
        imperative: Some(mode_result(Mode::Imperative, 1000, 2)),
        declarative: Some(mode_result(Mode::Declarative, 600, 2)),
        optimal: Some(mode_result(Mode::Optimal, 500, 2)),
    };
    let variants =
        Variants { imperative_skip_deleted: Some(mode_result(Mode::Imperative, 900, 0)), optimal_elide_deleted: None };
    let comparisons = Comparisons::new(&modes, &variants);
    SimResult {
        mix: "cluster-1".into(),
        mix_source: "test".into(),
        capacity_bytes: 2_000,
        drive_bytes: 48,
        disks: 2,
        days: 0.25,
        quantum_secs: 3.0 * 3600.0,
        quanta: 2,
        demand_mb_s_per_tb: 2.0,
        cache_per_disk_bytes: 4,
        seed: 1,
        modes,
        variants,
        comparisons,
        demand_realised: BTreeMap::from([("scrubbing".to_string(), 1.0)]),
        churn: Churn { scrub_deleted_fraction: Some(0.25), ..Churn::default() },
        over_budget_quanta: 0,
        refused_pin_bytes: 0,
    }
}
