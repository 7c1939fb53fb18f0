//! RRIParoo's set rebuild (L996-1009, Fig. 4.8): the on-flash RRIP values
//! of a set, DRAM hit bits applied at rewrite time, and the merge with
//! incoming objects.
//!
//! With `rrip_bits = 0` the same rebuild is FIFO: newest first, oldest out.

use crate::object::Object;

/// An object inside a set, with its RRIP prediction (0 = NEAR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetObject {
    pub object: Object,
    pub rrip: u8,
}

/// RRIP parameters.
#[derive(Clone, Copy, Debug)]
pub struct Rrip {
    bits: u8,
}

impl Rrip {
    /// `bits` in 0..=3: 0 is FIFO, 3 is Kangaroo's default (L1218-1222).
    pub fn new(bits: u8) -> Rrip {
        assert!(bits <= 3, "the packed log entry keeps 3 RRIP bits");
        Rrip { bits }
    }

    pub fn is_fifo(self) -> bool {
        self.bits == 0
    }

    /// FAR: the only value that may be evicted.
    pub fn far(self) -> u8 {
        (1u8 << self.bits).saturating_sub(1)
    }

    /// Where new objects start: one short of FAR (110 for 3 bits).
    pub fn long(self) -> u8 {
        self.far().saturating_sub(1)
    }

    /// One step towards NEAR, for a hit in the log.
    pub fn promote(self, rrip: u8) -> u8 {
        rrip.saturating_sub(1)
    }

    /// Orders a set's objects for refilling. `existing` already has its hit
    /// objects promoted to NEAR; `incoming` (newest first) replace existing
    /// copies of their keys. If no existing object is FAR, all existing ones
    /// age until one is; then everything sorts NEAR→FAR with ties going to
    /// objects already in the set.
    pub fn rank(self, mut existing: Vec<SetObject>, incoming: Vec<SetObject>) -> Vec<SetObject> {
        existing.retain(|e| !incoming.iter().any(|i| i.object.key == e.object.key));
        if self.is_fifo() {
            let mut out = incoming;
            out.extend(existing);
            return out;
        }
        if let Some(max) = existing.iter().map(|e| e.rrip).max() {
            let age = self.far() - max;
            for e in &mut existing {
                e.rrip += age;
            }
        }
        let mut tagged: Vec<(SetObject, bool)> =
            existing.into_iter().map(|e| (e, false)).chain(incoming.into_iter().map(|i| (i, true))).collect();
        tagged.sort_by_key(|&(o, is_incoming)| (o.rrip, is_incoming));
        tagged.into_iter().map(|(o, _)| o).collect()
    }
}

/// Keeps ranked objects in order while they fit `capacity_bytes`; returns
/// the kept ones and how many were evicted.
pub fn fill(ranked: Vec<SetObject>, capacity_bytes: u32) -> (Vec<SetObject>, u32) {
    let mut used = 0u32;
    let mut kept = Vec::with_capacity(ranked.len());
    let mut evicted = 0;
    for o in ranked {
        if used + o.object.size_bytes <= capacity_bytes {
            used += o.object.size_bytes;
            kept.push(o);
        } else {
            evicted += 1;
        }
    }
    (kept, evicted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn so(key: u64, rrip: u8) -> SetObject {
        SetObject { object: Object { key, size_bytes: 100 }, rrip }
    }

    /// The thesis' worked example (Fig. 4.8), in spirit: a hit object is kept
    /// NEAR, the set ages so one object is FAR, log objects join at their
    /// values, ties favour objects already in the set, FAR is evicted.
    #[test]
    fn rebuild_keeps_hits_and_evicts_far() {
        let rrip = Rrip::new(3);
        let existing = vec![so(1, 0), so(2, 5), so(3, 6)];
        let incoming = vec![so(10, 6), so(11, 4)];
        let ranked = rrip.rank(existing, incoming);
        let keys: Vec<u64> = ranked.iter().map(|o| o.object.key).collect();
        // Aged by 1: 1→1, 2→6, 3→7. Then 11 (4), 2 (6, existing first), 10 (6), 3 (7).
        assert_eq!(keys, vec![1, 11, 2, 10, 3]);
        let (kept, evicted) = fill(ranked, 400);
        assert_eq!(evicted, 1);
        assert!(kept.iter().all(|o| o.object.key != 3));
    }

    #[test]
    fn fifo_puts_newest_first() {
        let ranked = Rrip::new(0).rank(vec![so(1, 0), so(2, 0)], vec![so(3, 0)]);
        let (kept, evicted) = fill(ranked, 200);
        assert_eq!(kept.iter().map(|o| o.object.key).collect::<Vec<_>>(), vec![3, 1]);
        assert_eq!(evicted, 1);
    }

    #[test]
    fn incoming_replaces_an_existing_copy() {
        let ranked = Rrip::new(3).rank(vec![so(1, 0)], vec![so(1, 6)]);
        assert_eq!(ranked, vec![so(1, 6)]);
    }
}
