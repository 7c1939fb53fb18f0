//! A typed view of the planner's status for programs and people: it
//! serializes to the JSON of `dingo planner status --json` and renders
//! (`Display`) as its table. Fields are declared in alphabetical order
//! because that is the order the JSON has always had.

use crate::wire;
use dingo_types::{DeclarationId, format_bytes};
use serde::Serialize;
use std::fmt;

/// The per-quantum budget; 0 means unlimited in either field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BudgetView {
    pub cluster_bytes: u64,
    pub disk_head_time_us: u64,
}

impl From<Option<wire::Budget>> for BudgetView {
    fn from(b: Option<wire::Budget>) -> BudgetView {
        let b = b.unwrap_or_default();
        BudgetView { cluster_bytes: b.cluster_bytes, disk_head_time_us: b.disk_head_time_us }
    }
}

/// `500.00 MB and 100 ms of head time per disk`.
impl fmt::Display for BudgetView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = if self.cluster_bytes == 0 { "unlimited bytes".into() } else { format_bytes(self.cluster_bytes) };
        let head = match self.disk_head_time_us {
            0 => "unlimited".into(),
            us => format!("{} ms", us / 1000),
        };
        write!(f, "{bytes} and {head} of head time per disk")
    }
}

/// A change of the per-quantum budget: the limits given replace the
/// planner's, the others are kept; 0 means unlimited. With the `clap`
/// feature, `dingo planner budget set`'s flags (at least one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[cfg_attr(feature = "clap", command(group(clap::ArgGroup::new("limit").required(true).multiple(true))))]
pub struct BudgetChange {
    /// Bytes read from disk per quantum, cluster-wide (e.g. 500MB; 0 = unlimited).
    #[cfg_attr(feature = "clap", arg(long, group = "limit", value_parser = dingo_types::parse_bytes))]
    pub cluster_bytes: Option<u64>,
    /// Disk-head time per disk per quantum in milliseconds (0 = unlimited).
    #[cfg_attr(feature = "clap", arg(long, group = "limit"))]
    pub disk_head_time_ms: Option<u64>,
}

impl BudgetChange {
    /// The head time in microseconds, as the wire has it; `None` if it
    /// does not fit.
    pub fn disk_head_time_us(&self) -> Option<Option<u64>> {
        self.disk_head_time_ms.map(|ms| ms.checked_mul(1000)).map_or(Some(None), |us| us.map(Some))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeclarationView {
    pub acked_sets: u64,
    /// Byte-denominated flexibility, as declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_needed: Option<u64>,
    pub cancelled: bool,
    /// The task client's name in the planner's config.
    pub client: String,
    pub deadline_ms: u64,
    pub delivered_sets: u64,
    pub done: bool,
    pub elided_sets: u64,
    pub id: DeclarationId,
    pub missed_deadline: bool,
    pub sets_needed: Option<u64>,
    pub task: String,
    pub total_sets: u64,
}

impl DeclarationView {
    /// `done`, `cancelled`, `late` or `open`.
    pub fn state(&self) -> &'static str {
        match (self.done, self.cancelled, self.missed_deadline) {
            (true, _, _) => "done",
            (_, true, _) => "cancelled",
            (false, false, true) => "late",
            (false, false, false) => "open",
        }
    }
}

/// The planner's declarations, next quantum and budget, as seen at `now_ms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusView {
    pub budget: BudgetView,
    pub declarations: Vec<DeclarationView>,
    pub next_quantum_ms: u64,
    /// When the status was taken: the text shows times relative to it.
    #[serde(skip)]
    pub now_ms: u64,
}

impl StatusView {
    pub fn new(reply: wire::StatusReply, now_ms: u64) -> StatusView {
        let declarations = reply
            .declarations
            .into_iter()
            .map(|d| DeclarationView {
                acked_sets: d.acked_sets,
                bytes_needed: d.bytes_needed,
                cancelled: d.cancelled,
                client: d.client,
                deadline_ms: d.deadline_ms,
                delivered_sets: d.delivered_sets,
                done: d.done,
                elided_sets: d.elided_sets,
                id: DeclarationId(d.declaration),
                missed_deadline: d.missed_deadline,
                sets_needed: d.sets_needed,
                task: d.task,
                total_sets: d.total_sets,
            })
            .collect();
        StatusView { budget: reply.budget.into(), declarations, next_quantum_ms: reply.next_quantum_ms, now_ms }
    }
}

impl fmt::Display for StatusView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "next quantum in {:.1}s; budget {}",
            self.next_quantum_ms.saturating_sub(self.now_ms) as f64 / 1000.0,
            self.budget
        )?;
        writeln!(
            f,
            "{:>6} {:<16} {:<14} {:>10} {:>8} {:>9} {:>6} {:>6}  state",
            "id", "task", "client", "deadline", "sets", "delivered", "acked", "elided"
        )?;
        for d in &self.declarations {
            let due_ms = d.deadline_ms as i64 - self.now_ms as i64;
            let sets = match (d.sets_needed, d.bytes_needed) {
                (Some(n), _) => format!("{n}/{}", d.total_sets),
                (None, Some(bytes)) => format!("{} of {}", format_bytes(bytes), d.total_sets),
                (None, None) => d.total_sets.to_string(),
            };
            writeln!(
                f,
                "{:>6} {:<16} {:<14} {:>9.0}s {:>8} {:>9} {:>6} {:>6}  {}",
                d.id.0,
                d.task,
                d.client,
                due_ms as f64 / 1000.0,
                sets,
                d.delivered_sets,
                d.acked_sets,
                d.elided_sets,
                d.state()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_change_converts_head_time_or_refuses_an_overflow() {
        assert_eq!(BudgetChange::default().disk_head_time_us(), Some(None));
        let ms = BudgetChange { disk_head_time_ms: Some(250), ..BudgetChange::default() };
        assert_eq!(ms.disk_head_time_us(), Some(Some(250_000)));
        assert_eq!(BudgetChange { disk_head_time_ms: Some(u64::MAX), cluster_bytes: None }.disk_head_time_us(), None);
    }

    fn reply() -> wire::StatusReply {
        wire::StatusReply {
            declarations: vec![wire::DeclarationStatus {
                declaration: 4,
                task: "scrubbing".into(),
                client: "scrubber".into(),
                deadline_ms: 70_000,
                total_sets: 10,
                sets_needed: Some(5),
                delivered_sets: 3,
                acked_sets: 2,
                missed_deadline: true,
                ..wire::DeclarationStatus::default()
            }],
            next_quantum_ms: 12_500,
            budget: Some(wire::Budget { cluster_bytes: 500_000_000, disk_head_time_us: 0 }),
            planned_free_bytes: 0,
            planned_disk_bytes: 0,
            read_lower_bound_bytes: 0,
        }
    }

    #[test]
    fn json_keeps_its_keys_and_order() {
        assert_eq!(
            serde_json::to_string(&StatusView::new(reply(), 10_000)).unwrap(),
            r#"{"budget":{"cluster_bytes":500000000,"disk_head_time_us":0},"declarations":[{"acked_sets":2,"cancelled":false,"client":"scrubber","deadline_ms":70000,"delivered_sets":3,"done":false,"elided_sets":0,"id":4,"missed_deadline":true,"sets_needed":5,"task":"scrubbing","total_sets":10}],"next_quantum_ms":12500}"#
        );
    }

    #[test]
    fn text_shows_times_from_now_and_the_state() {
        let text = StatusView::new(reply(), 10_000).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "next quantum in 2.5s; budget 500.00 MB and unlimited of head time per disk");
        assert_eq!(
            lines[2],
            "     4 scrubbing        scrubber              60s     5/10         3      2      0  late"
        );
    }

    #[test]
    fn a_byte_flexible_declaration_shows_its_bytes() {
        let mut r = reply();
        r.declarations[0].sets_needed = None;
        r.declarations[0].bytes_needed = Some(3_000_000);
        let view = StatusView::new(r, 10_000);
        assert!(view.to_string().lines().nth(2).unwrap().contains("3.00 MB of 10"), "{view}");
        assert!(serde_json::to_string(&view).unwrap().contains(r#""bytes_needed":3000000"#));
    }

    #[test]
    fn zero_is_unlimited() {
        let b = BudgetView { cluster_bytes: 0, disk_head_time_us: 250_000 };
        assert_eq!(b.to_string(), "unlimited bytes and 250 ms of head time per disk");
    }
}
