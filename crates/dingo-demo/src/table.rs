//! The demo's comparison as text (`dingo demo`): bytes per task in both
//! modes, the ratio, free bytes, deadlines, latency and the disk counters.

use crate::{DemoSummary, ModeSummary, TASKS};
use dingo_types::format_bytes;
use std::fmt;

impl fmt::Display for DemoSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (imp, dec) = (&self.imperative, &self.declarative);
        let row = |f: &mut fmt::Formatter<'_>, name: &str, cells: [u64; 4]| {
            let [a, b, c, d] = cells.map(format_bytes);
            writeln!(f, "{name:<16} {a:>14} {b:>14} {c:>14} {d:>14}")
        };
        writeln!(
            f,
            "{:<16} {:>14} {:>14} {:>14} {:>14}",
            "task", "logical imp", "disk imp", "logical decl", "disk decl"
        )?;
        let task = |m: &ModeSummary, name: &str| m.tasks.get(name).map_or((0, 0), |t| (t.logical_bytes, t.disk_bytes));
        for t in TASKS {
            let ((li, di), (ld, dd)) = (task(imp, t.name()), task(dec, t.name()));
            row(f, t.name(), [li, di, ld, dd])?;
        }
        row(f, "total", [imp.logical_bytes, imp.disk_bytes, dec.logical_bytes, dec.disk_bytes])?;
        writeln!(
            f,
            "declarative / imperative disk bytes: {:.3} (savings {:.1} %)",
            self.disk_ratio,
            self.savings * 100.0
        )?;
        writeln!(
            f,
            "free bytes: scheduled {} achieved {}",
            format_bytes(dec.planned_free_bytes.unwrap_or(0)),
            format_bytes(dec.achieved_free_bytes)
        )?;
        if let Some(bound) = dec.read_lower_bound_bytes {
            writeln!(f, "planner's lower bound on the reads needed: {}", format_bytes(bound))?;
        }
        writeln!(
            f,
            "deadline misses: imperative {} declarative {}; all work complete: {}",
            imp.deadline_misses, dec.deadline_misses, self.work_complete
        )?;
        writeln!(
            f,
            "foreground read latency ms: imperative p50 {:.1} p99 {:.1}; declarative p50 {:.1} p99 {:.1}",
            imp.fg_p50_ms, imp.fg_p99_ms, dec.fg_p50_ms, dec.fg_p99_ms
        )?;
        writeln!(
            f,
            "node disk counters vs kernel read_bytes: imperative {} / {}, declarative {} / {}",
            format_bytes(imp.all_disk_bytes),
            format_bytes(imp.kernel_read_bytes),
            format_bytes(dec.all_disk_bytes),
            format_bytes(dec.kernel_read_bytes)
        )
    }
}
