//! The service's Prometheus page: the counters the state machine keeps,
//! and the families they are written as. `/metrics` renders the last published
//! [`MetricsView`], so a scrape never waits for the state (or a quantum
//! being planned).

use dingo_daemon::metrics::Page;
use dingo_planner::TaskStats;
use dingo_types::TaskKind;
use std::fmt;

/// Counters for `/metrics`.
#[derive(Clone, Default)]
pub(crate) struct Metrics {
    /// Per task: cumulative over quanta, except the queue snapshots.
    pub(crate) tasks: [TaskStats; TaskKind::COUNT],
    pub(crate) quanta: u64,
    pub(crate) last_plan_seconds: f64,
    pub(crate) last_physical_bytes: u64,
    pub(crate) split_loss_bytes: u64,
    pub(crate) dispatched: u64,
    pub(crate) redelivered: u64,
    pub(crate) acked: u64,
    /// Declarations the last quantum skipped: their client had no stream.
    pub(crate) paused_declarations: u64,
    /// `overlap_bytes[rider][payer]`: bytes `rider` read free on disk reads
    /// `payer` paid for, summed over quanta (the overlap matrix).
    pub(crate) overlap_bytes: [[u64; TaskKind::COUNT]; TaskKind::COUNT],
    pub(crate) pins_sent: u64,
    pub(crate) pin_errors: u64,
    /// Cache directives dropped because they lapsed before their group
    /// went out (the planner fell behind, or restarted).
    pub(crate) pins_lapsed: u64,
    /// Cache directives dropped because fewer than two of the reads they
    /// were made for are still to come (the others' declarations were
    /// cancelled or done).
    pub(crate) pins_unneeded: u64,
    /// Per-quantum budget messages a node took, and those it did not.
    pub(crate) node_budgets_sent: u64,
    pub(crate) node_budget_errors: u64,
    /// Disks whose budget the last quantum cut for slowness.
    pub(crate) slow_disks: u64,
    pub(crate) topology_errors: u64,
    /// Sets elided by tasks' announced deletions (`AnnounceDeletions`).
    pub(crate) announced_elided_sets: u64,
}

/// What `/metrics` shows: the counters and the two gauges read from the
/// state when it was last published.
#[derive(Clone, Default)]
pub(crate) struct MetricsView {
    pub(crate) counters: Metrics,
    /// Blocks in the planner's topology.
    pub(crate) blocks: u64,
    /// Open callback streams.
    pub(crate) subscribers: u64,
    /// The online lower bound on the disk bytes the declared work needs.
    pub(crate) read_lower_bound_bytes: u64,
    /// Members the bound left out for lack of room.
    pub(crate) lower_bound_untracked: u64,
}

/// One figure without labels, as the page shows it.
enum Scalar {
    Counter(u64),
    Gauge(u64),
    Seconds(f64),
}

impl MetricsView {
    /// Writes the service's metric families.
    pub(crate) fn write(&self, page: &mut Page<'_>) -> fmt::Result {
        let m = &self.counters;
        type Field = fn(&TaskStats) -> u64;
        let per_task: [(&str, &str, Field); 8] = [
            ("dingo_planner_logical_bytes_total", "Bytes of live members delivered.", |s| s.logical_bytes),
            ("dingo_planner_disk_bytes_total", "Bytes newly scheduled from disk.", |s| s.disk_bytes),
            ("dingo_planner_free_bytes_total", "Bytes delivered riding on another set's read.", |s| s.free_bytes),
            ("dingo_planner_elided_bytes_total", "Bytes not read because deleted.", |s| s.elided_bytes),
            ("dingo_planner_sets_delivered_total", "Sets scheduled for delivery.", |s| s.sets_delivered),
            ("dingo_planner_sets_elided_total", "Sets elided (all blocks deleted or announced).", |s| s.sets_elided),
            ("dingo_planner_overloaded_sets_total", "Sets delivered flagged overloaded.", |s| s.overloaded_sets),
            ("dingo_planner_deadline_misses_total", "Declarations that missed their deadline.", |s| s.deadline_misses),
        ];
        let by_task = |field: Field| TaskKind::ALL.map(|task| ([("task", task.name())], field(&m.tasks[task.index()])));
        for (name, help, field) in per_task {
            page.counters(name, help, by_task(field))?;
        }
        let queues: [(&str, &str, Field); 2] = [
            ("dingo_planner_queued_sets", "Sets still to deliver after the last quantum.", |s| s.queued_sets),
            ("dingo_planner_outstanding_declarations", "Declarations with work left.", |s| s.outstanding_declarations),
        ];
        for (name, help, field) in queues {
            page.gauges(name, help, by_task(field))?;
        }
        // Only the pairs that overlapped: 64 mostly-zero series would bury
        // the few that matter.
        let overlapped = TaskKind::ALL.into_iter().flat_map(|rider| {
            TaskKind::ALL.into_iter().filter_map(move |payer| {
                let bytes = m.overlap_bytes[rider.index()][payer.index()];
                (bytes > 0).then(|| ([("task", rider.name()), ("paid_by", payer.name())], bytes))
            })
        });
        page.counters(
            "dingo_planner_overlap_bytes_total",
            "Bytes a task (`task`) read free on disk reads another task (`paid_by`) paid for.",
            overlapped,
        )?;
        use Scalar::{Counter, Gauge};
        let scalars: [(&str, &str, Scalar); 21] = [
            (
                "dingo_planner_announced_elided_sets_total",
                "Sets elided before being read because a task announced it was about to delete their blocks.",
                Counter(m.announced_elided_sets),
            ),
            ("dingo_planner_quanta_total", "Quanta planned.", Counter(m.quanta)),
            ("dingo_planner_last_plan_seconds", "Time to plan the last quantum.", Scalar::Seconds(m.last_plan_seconds)),
            (
                "dingo_planner_last_quantum_physical_bytes",
                "Disk bytes the last quantum scheduled.",
                Gauge(m.last_physical_bytes),
            ),
            (
                "dingo_planner_split_loss_bytes_total",
                "Re-reads caused by split dispatch groups.",
                Counter(m.split_loss_bytes),
            ),
            ("dingo_planner_callbacks_dispatched_total", "Callbacks dispatched.", Counter(m.dispatched)),
            ("dingo_planner_callbacks_redelivered_total", "Callbacks re-sent on subscription.", Counter(m.redelivered)),
            ("dingo_planner_acks_total", "Deliveries acknowledged.", Counter(m.acked)),
            (
                "dingo_planner_paused_declarations",
                "Declarations the last quantum did not schedule because their client had no open stream.",
                Gauge(m.paused_declarations),
            ),
            ("dingo_planner_pins_sent_total", "Cache directives sent to nodes.", Counter(m.pins_sent)),
            ("dingo_planner_pin_errors_total", "Cache directives a node did not take.", Counter(m.pin_errors)),
            (
                "dingo_planner_pins_lapsed_total",
                "Cache directives dropped because they lapsed before their dispatch group went out.",
                Counter(m.pins_lapsed),
            ),
            (
                "dingo_planner_pins_unneeded_total",
                "Cache directives dropped because fewer than two of their reads were still to come when their \
                 dispatch group went out.",
                Counter(m.pins_unneeded),
            ),
            (
                "dingo_planner_node_budgets_sent_total",
                "Per-quantum budget messages nodes took.",
                Counter(m.node_budgets_sent),
            ),
            (
                "dingo_planner_node_budget_errors_total",
                "Per-quantum budget messages a node did not take in time.",
                Counter(m.node_budget_errors),
            ),
            (
                "dingo_planner_slow_disks",
                "Disks whose head-time budget the last quantum cut because their node reported them slow.",
                Gauge(m.slow_disks),
            ),
            ("dingo_planner_topology_errors_total", "Failed topology refreshes.", Counter(m.topology_errors)),
            ("dingo_planner_blocks", "Blocks in the planner's topology.", Gauge(self.blocks)),
            ("dingo_planner_subscribers", "Open callback streams.", Gauge(self.subscribers)),
            (
                "dingo_planner_read_lower_bound_bytes",
                "Disk bytes the work declared since the service started needs, at least.",
                Gauge(self.read_lower_bound_bytes),
            ),
            (
                "dingo_planner_read_lower_bound_untracked_total",
                "Declared members the lower bound left out for lack of room.",
                Counter(self.lower_bound_untracked),
            ),
        ];
        for (name, help, value) in scalars {
            match value {
                Counter(v) => page.counter(name, help, v)?,
                Gauge(v) => page.gauge(name, help, v)?,
                Scalar::Seconds(v) => page.gauge(name, help, v)?,
            }
        }
        Ok(())
    }

    /// The page as `GET /metrics` serves it.
    #[cfg(test)]
    pub(crate) fn render(&self) -> String {
        let view = self.clone();
        dingo_daemon::metrics::encode(&dingo_daemon::metrics::registry(move |page| view.write(page)))
            .expect("a page of plain figures encodes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The families on the page, in order, with their types: what the
    /// hand-written encoder this replaced served (scrapers and dashboards
    /// depend on the names).
    #[test]
    fn the_page_keeps_its_families_names_and_types() {
        let page = MetricsView::default().render();
        let families: Vec<&str> = page.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        let expected = [
            "dingo_planner_logical_bytes_total counter",
            "dingo_planner_disk_bytes_total counter",
            "dingo_planner_free_bytes_total counter",
            "dingo_planner_elided_bytes_total counter",
            "dingo_planner_sets_delivered_total counter",
            "dingo_planner_sets_elided_total counter",
            "dingo_planner_overloaded_sets_total counter",
            "dingo_planner_deadline_misses_total counter",
            "dingo_planner_queued_sets gauge",
            "dingo_planner_outstanding_declarations gauge",
            "dingo_planner_overlap_bytes_total counter",
            "dingo_planner_announced_elided_sets_total counter",
            "dingo_planner_quanta_total counter",
            "dingo_planner_last_plan_seconds gauge",
            "dingo_planner_last_quantum_physical_bytes gauge",
            "dingo_planner_split_loss_bytes_total counter",
            "dingo_planner_callbacks_dispatched_total counter",
            "dingo_planner_callbacks_redelivered_total counter",
            "dingo_planner_acks_total counter",
            "dingo_planner_paused_declarations gauge",
            "dingo_planner_pins_sent_total counter",
            "dingo_planner_pin_errors_total counter",
            "dingo_planner_pins_lapsed_total counter",
            "dingo_planner_pins_unneeded_total counter",
            "dingo_planner_node_budgets_sent_total counter",
            "dingo_planner_node_budget_errors_total counter",
            "dingo_planner_slow_disks gauge",
            "dingo_planner_topology_errors_total counter",
            "dingo_planner_blocks gauge",
            "dingo_planner_subscribers gauge",
            "dingo_planner_read_lower_bound_bytes gauge",
            "dingo_planner_read_lower_bound_untracked_total counter",
        ];
        assert_eq!(families, expected);
        assert!(page.contains("\ndingo_planner_logical_bytes_total{task=\"scrubbing\"} 0\n"), "{page}");
        assert!(page.contains("\ndingo_planner_last_plan_seconds 0.0\n"), "{page}");
    }
}
