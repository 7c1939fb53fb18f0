//! The simulated disk head the one-disk twins (fg-tail, waiting, fairness)
//! share: the node's policy served by a non-preemptive head on a simulated
//! clock that jumps from event to event. The steering twin has several
//! disks and only foreground reads, so it keeps a loop of its own.

use dingo_iosched::{Decision, Policy, Unit};

/// What a twin puts on the head.
pub trait Load {
    /// Enqueues into `policy` everything due by `now_us`.
    fn admit(&mut self, policy: &mut dyn Policy, now_us: u64);
    /// Request `id`'s last unit finished at `now_us`.
    fn complete(&mut self, id: u64, now_us: u64);
    /// The next time the load will have something to admit, if any.
    fn next_event_us(&self, now_us: u64) -> Option<u64>;
}

/// Serves `load` with `policy` from time 0 until `end_us`, or until nothing
/// is left to happen. As [`Policy`] requires, the policy is asked for work
/// only when the head is free, each unit holds the head for its cost, and a
/// policy that waits for tokens is asked again at its time or when the load
/// admits something sooner.
pub fn drive(policy: &mut dyn Policy, load: &mut impl Load, end_us: u64) {
    // The unit in service and when it ends; when throttled, when to retry.
    let mut busy: Option<(Unit, u64)> = None;
    let mut retry_at: Option<u64> = None;
    let mut now = 0u64;
    loop {
        load.admit(policy, now);
        if let Some((unit, until)) = busy
            && until <= now
        {
            busy = None;
            if unit.last {
                load.complete(unit.id, now);
            }
            continue;
        }
        if busy.is_none() && retry_at.is_none_or(|t| t <= now) {
            retry_at = None;
            match policy.next(now) {
                Decision::Serve(unit) => busy = Some((unit, now + unit.cost_us)),
                Decision::Wait { until_us } => retry_at = Some(until_us),
                Decision::Idle => {}
            }
        }
        let head = if busy.is_some() { busy.map(|b| b.1) } else { retry_at };
        match [head, load.next_event_us(now)].into_iter().flatten().min() {
            Some(t) if t <= end_us => now = t.max(now),
            // Past the end, or nothing left to happen.
            _ => return,
        }
        // A new arrival may be served while the policy waits for tokens.
        if busy.is_none() {
            retry_at = retry_at.map(|t| t.min(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_iosched::{Class, Fifo, Request};

    /// Two foreground reads of 10 µs, arriving at 0 and 5 µs.
    #[derive(Default)]
    struct TwoReads {
        admitted: usize,
        done: Vec<(u64, u64)>,
    }

    impl Load for TwoReads {
        fn admit(&mut self, policy: &mut dyn Policy, now_us: u64) {
            while self.admitted < 2 && self.admitted as u64 * 5 <= now_us {
                let id = self.admitted as u64;
                policy.enqueue(now_us, Request { id, class: Class::Foreground, cost_us: 10, planned: true }).unwrap();
                self.admitted += 1;
            }
        }
        fn complete(&mut self, id: u64, now_us: u64) {
            self.done.push((id, now_us));
        }
        fn next_event_us(&self, _now_us: u64) -> Option<u64> {
            (self.admitted < 2).then_some(self.admitted as u64 * 5)
        }
    }

    #[test]
    fn the_head_serves_one_unit_at_a_time_until_the_end() {
        let mut load = TwoReads::default();
        drive(&mut Fifo::default(), &mut load, 1_000);
        assert_eq!(load.done, vec![(0, 10), (1, 20)]);
        // A run that ends first leaves the second read unfinished.
        let mut load = TwoReads::default();
        drive(&mut Fifo::default(), &mut load, 15);
        assert_eq!(load.done, vec![(0, 10)]);
    }
}
