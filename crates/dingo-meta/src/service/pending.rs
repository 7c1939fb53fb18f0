//! Copies placed but not yet committed. A move or a rebuild asks where to
//! write its new copy (`PlaceChunk`), writes it, then commits it
//! (`ReplaceChunk`); meanwhile the block records do not show it. Without
//! this list, concurrent moves of members of one stripe (a planner callback
//! carries a stripe's members together) each saw the node and disk that held
//! none of them and all picked it: in a demo run three members of one RS 3+2
//! stripe ended on one node, two on one disk, and the node's death lost the
//! stripe.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A placement not committed after this long is forgotten (the writer died
/// or gave up): writing one chunk takes far less.
pub const PENDING_TTL: Duration = Duration::from_secs(120);

/// One placed, uncommitted copy.
#[derive(Clone, Copy, Debug)]
struct Placed {
    /// The redundancy group (stripe, or the block itself) it belongs to.
    group: u64,
    node: u32,
    disk: u32,
    bytes: u64,
    at: Instant,
}

/// Placed, uncommitted copies by `(block, copy)`.
#[derive(Debug, Default)]
pub struct Pending {
    placed: HashMap<(u64, u32), Placed>,
}

impl Pending {
    fn expire(&mut self, now: Instant) {
        self.placed.retain(|_, p| now.duration_since(p.at) < PENDING_TTL);
    }

    /// Nodes of the uncommitted copies of `group`'s chunks other than
    /// `chunk` (one entry per copy).
    pub fn nodes_in_group(&mut self, group: u64, chunk: (u64, u32), now: Instant) -> Vec<u32> {
        self.expire(now);
        self.placed.iter().filter(|(k, p)| p.group == group && **k != chunk).map(|(_, p)| p.node).collect()
    }

    /// Bytes placed on `disk` and not committed yet.
    pub fn bytes_on(&self, disk: u32) -> u64 {
        self.placed.values().filter(|p| p.disk == disk).map(|p| p.bytes).sum()
    }

    /// Records a placement of `chunk`, replacing an earlier one of it (a
    /// writer that failed on one node asks again).
    pub fn add(&mut self, chunk: (u64, u32), group: u64, node: u32, disk: u32, bytes: u64, now: Instant) {
        self.placed.insert(chunk, Placed { group, node, disk, bytes, at: now });
    }

    /// `chunk`'s new copy is committed: the block records show it now.
    pub fn commit(&mut self, chunk: (u64, u32)) {
        self.placed.remove(&chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_copies_count_for_their_group_until_committed_or_expired() {
        let mut p = Pending::default();
        let t0 = Instant::now();
        p.add((10, 0), 10, 5, 11, 4_000, t0);
        p.add((11, 0), 10, 5, 11, 4_000, t0);
        p.add((20, 1), 20, 3, 7, 1_000, t0);
        let mut nodes = p.nodes_in_group(10, (12, 0), t0);
        nodes.sort();
        assert_eq!(nodes, [5, 5]);
        assert_eq!(p.nodes_in_group(10, (10, 0), t0), [5], "a chunk does not count its own placement");
        assert_eq!((p.bytes_on(11), p.bytes_on(7), p.bytes_on(1)), (8_000, 1_000, 0));
        p.commit((10, 0));
        assert_eq!(p.nodes_in_group(10, (12, 0), t0), [5]);
        // Placing the same chunk again replaces its entry.
        p.add((11, 0), 10, 4, 9, 4_000, t0);
        assert_eq!(p.nodes_in_group(10, (12, 0), t0), [4]);
        assert!(p.nodes_in_group(10, (12, 0), t0 + PENDING_TTL).is_empty(), "forgotten after the TTL");
        assert_eq!(p.bytes_on(9), 0);
    }
}
