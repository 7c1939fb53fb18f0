//! Today's emulated disk: one queue, whole requests in arrival order.

use crate::{Decision, Policy, Request, SchedError, Unit};
use std::collections::VecDeque;

/// First in, first out, never segmented, never throttled.
///
/// Invariant: units are served in exactly the order of `enqueue` calls, one
/// unit per request, each costing its whole request.
#[derive(Debug, Default)]
pub struct Fifo {
    queue: VecDeque<Request>,
}

impl Policy for Fifo {
    fn enqueue(&mut self, _now_us: u64, request: Request) -> Result<(), SchedError> {
        if self.queue.iter().any(|r| r.id == request.id) {
            return Err(SchedError::DuplicateId(request.id));
        }
        self.queue.push_back(request);
        Ok(())
    }

    fn next(&mut self, _now_us: u64) -> Decision {
        match self.queue.pop_front() {
            Some(r) => Decision::Serve(Unit { id: r.id, class: r.class, cost_us: r.cost_us, last: true }),
            None => Decision::Idle,
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }
}
