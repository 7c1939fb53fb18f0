//! Connected components of a quantum's schedule: sets that share a
//! redundancy group (stripe) are joined, so a chunk's readers always fall in
//! one component, and the components are listed in scheduling order.

use crate::scheduler::Schedule;
use rustc_hash::FxHashMap;

/// Working memory of [`component_order`] only, apart from the packing's so
/// that a lean dispatch can give it back in one piece.
#[derive(Default)]
pub(super) struct OrderScratch {
    parent: Vec<u32>,
    starts: Vec<usize>,
    cursor: Vec<usize>,
    bucketed: Vec<(u32, u32)>,
    first_set_of_group: FxHashMap<u32, u32>,
    counts: Vec<u32>,
    /// Each set's lowest redundancy group, and a component's sets keyed by it.
    lowest_group: Vec<u64>,
    keyed: Vec<(u64, u32)>,
}

impl OrderScratch {
    /// Bytes held (capacity), for tests of a lean dispatch.
    #[cfg(test)]
    pub(super) fn capacity_bytes(&self) -> usize {
        self.parent.capacity() * 4
            + (self.starts.capacity() + self.cursor.capacity()) * 8
            + self.bucketed.capacity() * 8
            + self.first_set_of_group.capacity() * 8
            + self.counts.capacity() * 4
            + self.lowest_group.capacity() * 8
            + self.keyed.capacity() * 16
    }
}

/// Union-find with path halving over set indexes.
struct Components {
    parent: Vec<u32>,
}

impl Components {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    /// Joins the two components, keeping the smaller index as the root so a
    /// component's root is its first-scheduled set.
    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        let (keep, join) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[join as usize] = keep;
    }
}

/// Group-index partitions: each partition's hash table stays small enough
/// for the cache, where one table over all reads would miss on every probe.
const GROUP_PARTITIONS: usize = 1024;

/// Scheduled set indexes, grouped by component, components in the order
/// of their first set, and within one by lowest redundancy group
/// (`order_by_lowest_group`). Linear but for that last sort: reads are
/// bucketed by redundancy group (a counting sort), each bucket indexed with
/// a small hash table group → first set, then sets are counting-sorted by
/// root.
pub(super) fn component_order(
    schedule: &Schedule,
    scratch: &mut OrderScratch,
    order: &mut Vec<u32>,
    component_starts: &mut Vec<u32>,
) {
    let n = schedule.sets.len();
    let mut components = Components { parent: std::mem::take(&mut scratch.parent) };
    components.parent.clear();
    components.parent.extend(0..n as u32);
    let max_group = schedule.reads.iter().map(|r| r.group().0).max().unwrap_or(0);
    // About GROUP_PARTITIONS partitions of a power of two groups each (a
    // shift per read, not a division), at most 2^32 groups each so that a
    // group's offset in its partition fits in 32 bits (8 bytes a read
    // bucketed, not 16). Components do not depend on the partitioning.
    let group_bits = u64::BITS - max_group.leading_zeros();
    let shift = group_bits.saturating_sub(GROUP_PARTITIONS.trailing_zeros()).min(32);
    let partitions = usize::try_from(max_group >> shift).expect("at most 2^32 partitions") + 1;
    let partition = |group: u64| (group >> shift) as usize;
    let starts = &mut scratch.starts;
    starts.clear();
    starts.resize(partitions + 1, 0);
    for r in &schedule.reads {
        starts[partition(r.group().0) + 1] += 1;
    }
    for p in 1..=partitions {
        starts[p] += starts[p - 1];
    }
    let bucketed = &mut scratch.bucketed;
    // Every slot is written below before it is read.
    bucketed.resize(schedule.reads.len(), (0, 0));
    let cursor = &mut scratch.cursor;
    cursor.clear();
    cursor.extend_from_slice(starts);
    let lowest_group = &mut scratch.lowest_group;
    lowest_group.clear();
    for s in 0..schedule.sets.len() {
        let mut lowest = u64::MAX;
        for r in schedule.reads_of(s) {
            let p = partition(r.group().0);
            let slot = &mut cursor[p];
            bucketed[*slot] = ((r.group().0 - ((p as u64) << shift)) as u32, s as u32);
            *slot += 1;
            lowest = lowest.min(r.group().0);
        }
        lowest_group.push(lowest);
    }
    let first_set_of_group = &mut scratch.first_set_of_group;
    for p in 0..partitions {
        first_set_of_group.clear();
        for &(group, s) in &bucketed[starts[p]..starts[p + 1]] {
            let first = *first_set_of_group.entry(group).or_insert(s);
            if first != s {
                components.union(first, s);
            }
        }
    }
    // Each set's root, in place (roots are fixed points, and a root is
    // never above its sets, so an ascending pass sees final parents).
    for s in 0..n as u32 {
        let root = components.find(s);
        components.parent[s as usize] = root;
    }
    let roots = &components.parent;
    // Counting sort by root; roots are first sets, so ascending root order
    // is the order in which components were first scheduled.
    let counts = &mut scratch.counts;
    counts.clear();
    counts.resize(n + 1, 0);
    for &r in roots.iter() {
        counts[r as usize + 1] += 1;
    }
    for i in 1..=n {
        counts[i] += counts[i - 1];
    }
    component_starts.clear();
    component_starts.extend((0..n).filter(|&s| roots[s] as usize == s).map(|s| counts[s]));
    order.clear();
    order.resize(n, 0);
    for (s, &r) in roots.iter().enumerate() {
        let slot = &mut counts[r as usize];
        order[*slot as usize] = s as u32;
        *slot += 1;
    }
    scratch.parent = components.parent;
    order_by_lowest_group(&scratch.lowest_group, component_starts, order, &mut scratch.keyed);
}

/// Within each component (listed in scheduling order), orders the sets by
/// their lowest redundancy group (`lowest_group`, by set), keeping
/// scheduling order among equals: the readers of a chunk share its group,
/// so they come side by side, and a component split for the cache (a
/// group's pins on one disk) parts few chunks from their other readers.
fn order_by_lowest_group(
    lowest_group: &[u64],
    component_starts: &[u32],
    order: &mut [u32],
    keyed: &mut Vec<(u64, u32)>,
) {
    for (i, &start) in component_starts.iter().enumerate() {
        let start = start as usize;
        let end = component_starts.get(i + 1).map_or(order.len(), |&e| e as usize);
        if end - start < 2 {
            continue;
        }
        keyed.clear();
        keyed.extend(order[start..end].iter().map(|&s| (lowest_group[s as usize], s)));
        // A radix sort is stable: equal groups keep scheduling order.
        radsort::sort_by_key(keyed, |&(group, _)| group);
        for (slot, &(_, s)) in order[start..end].iter_mut().zip(keyed.iter()) {
            *slot = s;
        }
    }
}
