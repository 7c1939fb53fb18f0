//! The service's Prometheus page: the counters the state machine keeps,
//! and their rendering. `/metrics` renders the last published
//! [`MetricsView`], so a scrape never waits for the state (or a quantum
//! being planned).

use dingo_daemon::metrics::MetricsText;
use dingo_planner::TaskStats;
use dingo_types::TaskKind;

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

impl MetricsView {
    /// The Prometheus page.
    pub(crate) fn render(&self) -> String {
        let m = &self.counters;
        let mut t = MetricsText::new();
        type Field = fn(&TaskStats) -> u64;
        let per_task: [(&str, &str, &str, Field); 10] = [
            ("dingo_planner_logical_bytes_total", "counter", "Bytes of live members delivered.", |s| s.logical_bytes),
            ("dingo_planner_disk_bytes_total", "counter", "Bytes newly scheduled from disk.", |s| s.disk_bytes),
            ("dingo_planner_free_bytes_total", "counter", "Bytes delivered riding on another set's read.", |s| {
                s.free_bytes
            }),
            ("dingo_planner_elided_bytes_total", "counter", "Bytes not read because deleted.", |s| s.elided_bytes),
            ("dingo_planner_sets_delivered_total", "counter", "Sets scheduled for delivery.", |s| s.sets_delivered),
            ("dingo_planner_sets_elided_total", "counter", "Sets elided (all blocks deleted or announced).", |s| {
                s.sets_elided
            }),
            ("dingo_planner_overloaded_sets_total", "counter", "Sets delivered flagged overloaded.", |s| {
                s.overloaded_sets
            }),
            ("dingo_planner_deadline_misses_total", "counter", "Declarations that missed their deadline.", |s| {
                s.deadline_misses
            }),
            ("dingo_planner_queued_sets", "gauge", "Sets still to deliver after the last quantum.", |s| s.queued_sets),
            ("dingo_planner_outstanding_declarations", "gauge", "Declarations with work left.", |s| {
                s.outstanding_declarations
            }),
        ];
        for (name, kind, help, field) in per_task {
            t.family(name, kind, help);
            for task in TaskKind::ALL {
                t.sample(name, &[("task", task.name())], field(&m.tasks[task.index()]));
            }
        }
        // Only the pairs that overlapped: 64 mostly-zero series would bury
        // the few that matter.
        let overlap = "dingo_planner_overlap_bytes_total";
        t.family(
            overlap,
            "counter",
            "Bytes a task (`task`) read free on disk reads another task (`paid_by`) paid for.",
        );
        for rider in TaskKind::ALL {
            for payer in TaskKind::ALL {
                let bytes = m.overlap_bytes[rider.index()][payer.index()];
                if bytes > 0 {
                    t.sample(overlap, &[("task", rider.name()), ("paid_by", payer.name())], bytes);
                }
            }
        }
        let scalars: [(&str, &str, &str, String); 15] = [
            (
                "dingo_planner_announced_elided_sets_total",
                "counter",
                "Sets elided before being read because a task announced it was about to delete their blocks.",
                m.announced_elided_sets.to_string(),
            ),
            ("dingo_planner_quanta_total", "counter", "Quanta planned.", m.quanta.to_string()),
            (
                "dingo_planner_last_plan_seconds",
                "gauge",
                "Time to plan the last quantum.",
                m.last_plan_seconds.to_string(),
            ),
            (
                "dingo_planner_last_quantum_physical_bytes",
                "gauge",
                "Disk bytes the last quantum scheduled.",
                m.last_physical_bytes.to_string(),
            ),
            (
                "dingo_planner_split_loss_bytes_total",
                "counter",
                "Re-reads caused by split dispatch groups.",
                m.split_loss_bytes.to_string(),
            ),
            ("dingo_planner_callbacks_dispatched_total", "counter", "Callbacks dispatched.", m.dispatched.to_string()),
            (
                "dingo_planner_callbacks_redelivered_total",
                "counter",
                "Callbacks re-sent on subscription.",
                m.redelivered.to_string(),
            ),
            ("dingo_planner_acks_total", "counter", "Deliveries acknowledged.", m.acked.to_string()),
            (
                "dingo_planner_paused_declarations",
                "gauge",
                "Declarations the last quantum did not schedule because their client had no open stream.",
                m.paused_declarations.to_string(),
            ),
            ("dingo_planner_pins_sent_total", "counter", "Cache directives sent to nodes.", m.pins_sent.to_string()),
            (
                "dingo_planner_pin_errors_total",
                "counter",
                "Cache directives a node did not take.",
                m.pin_errors.to_string(),
            ),
            (
                "dingo_planner_node_budgets_sent_total",
                "counter",
                "Per-quantum budget messages nodes took.",
                m.node_budgets_sent.to_string(),
            ),
            (
                "dingo_planner_node_budget_errors_total",
                "counter",
                "Per-quantum budget messages a node did not take in time.",
                m.node_budget_errors.to_string(),
            ),
            (
                "dingo_planner_slow_disks",
                "gauge",
                "Disks whose head-time budget the last quantum cut because their node reported them slow.",
                m.slow_disks.to_string(),
            ),
            (
                "dingo_planner_topology_errors_total",
                "counter",
                "Failed topology refreshes.",
                m.topology_errors.to_string(),
            ),
        ];
        for (name, kind, help, value) in scalars {
            t.family(name, kind, help).sample(name, &[], value);
        }
        t.family("dingo_planner_blocks", "gauge", "Blocks in the planner's topology.").sample(
            "dingo_planner_blocks",
            &[],
            self.blocks,
        );
        t.family("dingo_planner_subscribers", "gauge", "Open callback streams.").sample(
            "dingo_planner_subscribers",
            &[],
            self.subscribers,
        );
        let bound = "dingo_planner_read_lower_bound_bytes";
        t.family(bound, "gauge", "Disk bytes the work declared since the service started needs, at least.").sample(
            bound,
            &[],
            self.read_lower_bound_bytes,
        );
        let untracked = "dingo_planner_read_lower_bound_untracked_total";
        t.family(untracked, "counter", "Declared members the lower bound left out for lack of room.").sample(
            untracked,
            &[],
            self.lower_bound_untracked,
        );
        t.finish()
    }
}
