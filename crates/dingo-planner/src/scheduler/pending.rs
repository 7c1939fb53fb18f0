//! Head time a set being resolved would add, per disk.

use dingo_types::DiskId;

/// Marks a disk with nothing pending in [`PendingHeadTime::slot_of_disk`].
const NO_SLOT: u32 = u32::MAX;

/// The head time each disk would take on if the set being resolved were
/// scheduled, in the order the disks were first named.
///
/// A set's reads used to be summed by a linear search of the disks named
/// so far: quadratic in the disks a set spans (a file's stretch, a stripe
/// of tens of members), and a visible share of the scheduler's per-read
/// time. A slot per disk id makes each read's addition constant time; only
/// the slots the set used are reset, so a set costs its own disks, not the
/// cluster's.
#[derive(Debug, Default)]
pub(super) struct PendingHeadTime {
    /// `(disk, head time in µs)`, in order of first use.
    by_disk: Vec<(DiskId, u64)>,
    /// Index of each disk's entry in `by_disk`, or [`NO_SLOT`]; sized on
    /// first use to the highest disk id seen.
    slot_of_disk: Vec<u32>,
}

impl PendingHeadTime {
    pub(super) fn clear(&mut self) {
        for &(disk, _) in &self.by_disk {
            self.slot_of_disk[disk.0 as usize] = NO_SLOT;
        }
        self.by_disk.clear();
    }

    pub(super) fn add(&mut self, disk: DiskId, us: u64) {
        let d = disk.0 as usize;
        if self.slot_of_disk.len() <= d {
            self.slot_of_disk.resize(d + 1, NO_SLOT);
        }
        match self.slot_of_disk[d] {
            NO_SLOT => {
                self.slot_of_disk[d] = u32::try_from(self.by_disk.len()).expect("under 4G disks in one set");
                self.by_disk.push((disk, us));
            }
            slot => self.by_disk[slot as usize].1 += us,
        }
    }

    /// Each disk named since the last clear and its head time, in order of
    /// first use.
    pub(super) fn iter(&self) -> impl Iterator<Item = (DiskId, u64)> + '_ {
        self.by_disk.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_per_disk_in_first_use_order_like_a_linear_search() {
        let mut state = 7u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut pending = PendingHeadTime::default();
        for round in 0..200 {
            pending.clear();
            // The list the scheduler kept before: a linear search per read.
            let mut expected: Vec<(DiskId, u64)> = Vec::new();
            let disks = 1 + round % 50;
            for _ in 0..next() % 100 {
                let (disk, us) = (DiskId((next() % disks) as u32), next() % 1000);
                match expected.iter_mut().find(|(d, _)| *d == disk) {
                    Some((_, total)) => *total += us,
                    None => expected.push((disk, us)),
                }
                pending.add(disk, us);
            }
            assert_eq!(pending.iter().collect::<Vec<_>>(), expected, "round {round}");
        }
    }
}
