//! Sets that need only some of their members
//! ([`dingo_types::BlockSet::needed`]): which of the staged reads to keep.

use super::QuantumState;
use dingo_types::Topology;

impl<T: Topology> QuantumState<'_, T> {
    /// Keeps `needed` of the staged reads of a set that needs only that
    /// many: the free ones first, then physical reads on the disks with the
    /// most head time left (as [`Self::pick_copy`] picks a copy), in member
    /// order among equals; the kept reads stay in member order. Spreading
    /// the physical reads is what lets a rebuild keep its pace when some of
    /// its stripes' disks are busy (measured: docs/SIMULATOR.md). Returns
    /// their physical bytes, and adds their head time to `pending_us`.
    pub(super) fn choose_staged(&mut self, needed: usize) -> u64 {
        let mut order: Vec<(bool, std::cmp::Reverse<u64>, usize)> = (0..self.staged.len())
            .map(|i| {
                let r = &self.staged[i];
                let used = self.scheduled.disk_used_us[r.disk().0 as usize];
                let left = self.budget.disk_limit_us(r.disk().0).saturating_sub(used);
                // Free reads first (`false` sorts first); then most head time left.
                (r.physical(), std::cmp::Reverse(if r.physical() { left } else { 0 }), i)
            })
            .collect();
        order.sort_unstable();
        order.truncate(needed);
        // Back to member order: each kept read moves down, never up.
        order.sort_unstable_by_key(|&(_, _, i)| i);
        let mut new_bytes = 0;
        for (to, &(_, _, from)) in order.iter().enumerate() {
            self.staged[to] = self.staged[from];
            self.staged_bytes[to] = self.staged_bytes[from];
            self.staged_us[to] = self.staged_us[from];
            if self.staged[to].physical() {
                new_bytes += self.staged_bytes[to];
                self.pending_us.add(self.staged[to].disk(), self.staged_us[to]);
            }
        }
        self.staged.truncate(order.len());
        self.staged_bytes.truncate(order.len());
        self.staged_us.truncate(order.len());
        new_bytes
    }
}
