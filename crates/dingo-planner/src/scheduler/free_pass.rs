//! Pass 2 of a quantum: every set that became entirely free, on several
//! threads at once.

use super::{QuantumState, Schedule, Scheduled, ScheduledSet, SharedScheduled};
use crate::declaration::DeclState;
use dingo_types::Topology;
use std::ops::Range;
use std::sync::Mutex;

/// The sets one free-pass worker took for declaration `decl`: `sets`
/// indexes its own schedule's sets.
struct FreeTaken {
    decl: usize,
    sets: Range<usize>,
    taken: u64,
}

impl<T: Topology> QuantumState<'_, T> {
    /// Pass 2: takes, for every declaration, the sets that became entirely
    /// free. These change nothing shared (no physical read), so `threads`
    /// workers serve declarations at once, each into its own schedule, and
    /// their sets are joined in declaration order: the same schedule one
    /// thread would make. On the main thread, which sets the simulator's
    /// wall time, this pass was a third of the planner's work.
    pub(super) fn free_pass(&mut self, decls: &mut [&mut DeclState], threads: u32, spares: &mut Vec<Schedule>)
    where
        T: Sync,
    {
        if self.scheduled.blocks.is_empty() {
            return;
        }
        let SharedScheduled::Owned(scheduled) =
            std::mem::replace(&mut self.scheduled, SharedScheduled::Owned(Scheduled::default()))
        else {
            unreachable!("only a free-pass worker borrows")
        };
        // The main thread takes declarations from the front, writing into
        // the schedule in place; helpers take them from the back, each
        // into a schedule of its own, appended after. Every helper's
        // declaration comes after every one of the main thread's, so the
        // sets end up in declaration order. Declarations are handed out one
        // at a time (the lock is released before the work), so a worker
        // that drew a heavy one does not hold up the others.
        let next = Mutex::new(decls.iter_mut().enumerate());
        let helpers = threads.max(1) as usize - 1;
        spares.resize_with(helpers, Schedule::default);
        let buffers = Mutex::new(std::mem::take(spares));
        let (topo, budget) = (self.topo, self.budget);
        let helper = || {
            let mut buffer = buffers.lock().expect("a free-pass worker panicked").pop().unwrap_or_default();
            buffer.clear();
            let mut worker = QuantumState::new(topo, budget, SharedScheduled::Borrowed(&scheduled), buffer);
            let mut done = Vec::new();
            loop {
                let drawn = next.lock().expect("a free-pass worker panicked").next_back();
                let Some((i, d)) = drawn else { break };
                let first_set = worker.schedule.sets.len();
                let taken = worker.take_touching(d, i as u32, d.needed_left(), true);
                done.push(FreeTaken { decl: i, sets: first_set..worker.schedule.sets.len(), taken });
            }
            (worker.schedule, worker.report, done)
        };
        let mut main =
            QuantumState::new(topo, budget, SharedScheduled::Borrowed(&scheduled), std::mem::take(&mut self.schedule));
        main.report = std::mem::take(&mut self.report);
        let workers = std::thread::scope(|s| {
            let helpers: Vec<_> = (0..helpers).map(|_| s.spawn(helper)).collect();
            loop {
                let drawn = next.lock().expect("a free-pass worker panicked").next();
                let Some((i, d)) = drawn else { break };
                let taken = main.take_touching(d, i as u32, d.needed_left(), true);
                main.schedule.decls[i].taken += taken;
            }
            helpers.into_iter().map(|h| h.join().expect("a free-pass worker panicked")).collect::<Vec<_>>()
        });
        self.schedule = main.schedule;
        self.report = main.report;
        self.scheduled = SharedScheduled::Owned(scheduled);
        let mut order: Vec<(usize, &FreeTaken)> =
            workers.iter().enumerate().flat_map(|(w, (_, _, done))| done.iter().map(move |t| (w, t))).collect();
        order.sort_unstable_by_key(|&(_, t)| t.decl);
        for (w, t) in order {
            let schedule = &workers[w].0;
            self.schedule.decls[t.decl].taken += t.taken;
            if t.sets.is_empty() {
                continue;
            }
            let reads_end = schedule.sets.get(t.sets.end).map_or(schedule.reads.len(), |s| s.first_read as usize);
            let reads = schedule.sets[t.sets.start].first_read as usize..reads_end;
            let base = self.schedule.reads.len() - reads.start;
            self.schedule.sets.extend(schedule.sets[t.sets.clone()].iter().map(|s| ScheduledSet {
                first_read: u32::try_from(base + s.first_read as usize).expect("over 4G reads in one quantum"),
                ..*s
            }));
            self.schedule.block_bytes.absorb(&schedule.block_bytes, &schedule.reads[reads.clone()]);
            self.schedule.reads.extend_from_slice(&schedule.reads[reads]);
        }
        for (_, report, _) in &workers {
            for (total, worker) in self.report.tasks.iter_mut().zip(&report.tasks) {
                total.add(worker);
            }
        }
        *spares = workers.into_iter().map(|(schedule, _, _)| schedule).collect();
    }
}
