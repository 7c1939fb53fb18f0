//! The end of a run: faults stop, every client subscribes and acknowledges
//! everything at once, and quanta run until every declaration is finished
//! — or clearly will not be — then the oracle's end checks.

use super::Sim;
use crate::Violation;

impl Sim<'_> {
    pub(super) fn drain(&mut self) -> Result<(), Violation> {
        // Every task makes the deletion and the move it announced, every
        // lost copy is repaired; the node down and the metadata service
        // come back.
        self.world.make_due_deletions(None);
        self.world.make_due_moves(None);
        while !self.world.lost_copies().is_empty() {
            self.repair_copy();
        }
        self.world.dead_node = None;
        self.world.meta_down_until = None;
        if self.planner.is_none() {
            self.restart()?;
        }
        // Every node replies its disks are on profile again, and keeps
        // quiet from now on.
        self.faults_stopped = true;
        let p = self.process();
        for disk in std::mem::take(&mut p.slowness).into_keys() {
            p.machine.note_slowness(disk, false, 1000);
        }
        self.note(|| "faults stop".into());
        // Any one set fits every budget (`World::budget`), and the most
        // urgent declaration is owed at least one set a quantum, so each
        // quantum serves a set while any is left. The oracle counts what
        // is committed: the steps queued so far go first (a declaration
        // accepted just before the faults stopped is needed too).
        self.flush()?;
        let bound_quanta = self.oracle.needed_left() + 5;
        let mut quanta = 0;
        loop {
            self.step += 1;
            for c in 0..self.clients.len() {
                self.subscribe(c, false)?;
            }
            self.flush()?;
            for c in 0..self.clients.len() {
                self.clients[c].take_inbox(self.now_ms, || 0);
                self.ack(c, false)?;
            }
            self.flush()?;
            if self.unfinished()?.is_empty() || quanta > bound_quanta {
                break;
            }
            let p = self.process();
            if p.pins_in_flight.is_some() {
                self.complete_pins()?;
                continue;
            }
            let next_group = p.machine.next_group_at().unwrap_or(u64::MAX);
            let wake_ms = next_group.min(p.next_quantum_ms);
            if wake_ms > self.now_ms {
                self.advance(wake_ms - self.now_ms);
            }
            // The drain's bound needs any one set to fit each quantum's
            // budget, which an hour whose diurnal multiplier is under one
            // may not allow: such hours pass without a quantum.
            let full_hour_ms = self.world.first_full_hour_from(self.now_ms);
            if full_hour_ms > self.now_ms {
                self.advance(full_hour_ms - self.now_ms);
                self.note(|| "the drain waits for an hour at full budget or more".into());
            }
            let planning = next_group > self.now_ms;
            self.timer()?;
            quanta += u64::from(planning);
        }
        let ids = self.oracle.declared_ids();
        let statuses = self.process().machine.status(&ids).map_err(|e| self.violation(format!("status: {e}")))?;
        self.summary.counts.declarations_with_elided_sets =
            self.oracle.at_end(&statuses).map_err(|m| self.violation(m))?;
        Ok(())
    }

    /// Works through the persister's queue.
    fn flush(&mut self) -> Result<(), Violation> {
        while !self.process().queue.is_empty() {
            self.persist()?;
        }
        Ok(())
    }

    /// Declarations neither done nor cancelled, as the planner reports them.
    fn unfinished(&mut self) -> Result<Vec<u64>, Violation> {
        let ids = self.oracle.declared_ids();
        let statuses = self.process().machine.status(&ids).map_err(|e| self.violation(format!("status: {e}")))?;
        Ok(statuses.iter().filter(|s| !s.done && !s.cancelled).map(|s| s.declaration).collect())
    }
}
