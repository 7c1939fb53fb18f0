//! Chunk placement: which disks receive the chunks of a new block or stripe.
//!
//! Rules, in order:
//! 1. Only live nodes not excluded by the caller, and only disks with room
//!    for the chunk (the service leaves out DEAD, DRAINING and
//!    DECOMMISSIONED nodes and disks before calling).
//! 2. Chunks go to distinct nodes. Replicas must (a second copy on the same
//!    node protects nothing against a node loss); EC members may wrap around
//!    when the stripe is wider than the cluster, and then spread evenly: each
//!    round uses every eligible node at most once.
//! 3. Among eligible nodes, choice is random, weighted by free space, so
//!    fuller nodes fill more slowly; on the node, the disk with most free
//!    space not yet used by this block or stripe.
//!
//! A new copy of one existing chunk ([`place_one`], for rebuilds and moves)
//! goes to a node holding as few other chunks of its block or stripe as
//! possible, then to the emptiest disk or a random one weighted by free space.

use crate::error::MetaError;
use dingo_proto::Redundancy;
use dingo_types::format_bytes;
use std::collections::HashMap;

/// A live node and the free bytes of each of its disks.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub node: u32,
    pub disks: Vec<(u32, u64)>,
}

/// Picks `n` `(node, disk)` slots for chunks of `chunk_bytes` each.
pub fn place(
    mut nodes: Vec<Candidate>,
    n: usize,
    chunk_bytes: u64,
    distinct_nodes: bool,
) -> Result<Vec<(u32, u32)>, MetaError> {
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(n);
    let mut round: Vec<u32> = Vec::new();
    while out.len() < n {
        let room = |c: &Candidate| c.disks.iter().map(|d| d.1).filter(|&f| f >= chunk_bytes).max();
        let eligible: Vec<(usize, u64)> = nodes
            .iter()
            .enumerate()
            .filter(|(_, c)| !round.contains(&c.node))
            .filter_map(|(i, c)| room(c).map(|free| (i, free)))
            .collect();
        if eligible.is_empty() {
            let qualifying = nodes.iter().filter(|c| room(c).is_some()).count();
            if round.is_empty() || distinct_nodes || qualifying == 0 {
                return Err(MetaError::NoPlacement(format!(
                    "need {n} chunk(s) of {} on {}distinct live nodes, but only {qualifying} live node(s) have room",
                    format_bytes(chunk_bytes),
                    if distinct_nodes { "" } else { "preferably " }
                )));
            }
            round.clear();
            continue;
        }
        let (i, _) = eligible[weighted_pick(eligible.iter().map(|e| e.1))];
        let node = &mut nodes[i];
        let used: Vec<u32> = out.iter().map(|o| o.1).collect();
        let disk = node
            .disks
            .iter_mut()
            .filter(|d| d.1 >= chunk_bytes)
            .max_by_key(|d| (!used.contains(&d.0), d.1))
            .expect("node has room");
        disk.1 -= chunk_bytes;
        out.push((node.node, disk.0));
        round.push(node.node);
    }
    Ok(out)
}

/// Index of a random item, each chosen with probability proportional to its
/// weight (uniformly if all weights are zero). `weights` must not be empty.
fn weighted_pick(weights: impl Iterator<Item = u64> + Clone) -> usize {
    let total: f64 = weights.clone().map(|w| w as f64).sum();
    let n = weights.clone().count();
    if total <= 0.0 {
        return fastrand::usize(..n);
    }
    let mut pick = fastrand::f64() * total;
    weights
        .enumerate()
        .find(|&(_, w)| {
            pick -= w as f64;
            pick <= 0.0
        })
        .map_or(n - 1, |(i, _)| i)
}

/// Picks the `(node, disk)` for a new copy of one chunk of `chunk_bytes`:
/// among disks with room, those on nodes holding the fewest other chunks of
/// the same block or stripe (`held`: node → count); of those, the emptiest
/// disk if `emptiest`, else a random one weighted by free space.
pub fn place_one(
    nodes: &[Candidate],
    held: &HashMap<u32, usize>,
    chunk_bytes: u64,
    emptiest: bool,
) -> Result<(u32, u32), MetaError> {
    let held_on = |node: u32| held.get(&node).copied().unwrap_or(0);
    let slots: Vec<(u32, u32, u64)> =
        nodes.iter().flat_map(|c| c.disks.iter().filter(|d| d.1 >= chunk_bytes).map(|d| (c.node, d.0, d.1))).collect();
    let Some(fewest) = slots.iter().map(|s| held_on(s.0)).min() else {
        return Err(MetaError::NoPlacement(format!(
            "no live disk with room for a chunk of {} on an eligible node",
            format_bytes(chunk_bytes)
        )));
    };
    let best: Vec<&(u32, u32, u64)> = slots.iter().filter(|s| held_on(s.0) == fewest).collect();
    let chosen = if emptiest {
        best.iter().max_by_key(|s| s.2).expect("non-empty")
    } else {
        best[weighted_pick(best.iter().map(|s| s.2))]
    };
    Ok((chosen.0, chosen.1))
}

/// Live nodes a file's new chunks need: one per replica; for an EC
/// stripe, enough that no node holds more members than the stripe has
/// parity (members wrap evenly), so it survives a node loss.
pub fn nodes_needed(r: Redundancy) -> usize {
    match r {
        Redundancy::Replicated(copies) => usize::from(copies),
        Redundancy::Ec { parity, .. } => r.width().div_ceil(usize::from(parity.max(1))),
    }
}

/// Refuses a drain that would leave `eligible_nodes` (live, not dead or
/// draining, with a disk that takes chunks) too few for one of `files`'
/// redundancies: its chunks could not all move off the drained devices.
pub fn check_drain(what: &str, eligible_nodes: usize, files: &[Redundancy]) -> Result<(), MetaError> {
    match files.iter().copied().filter(|&r| nodes_needed(r) > eligible_nodes).max_by_key(|&r| nodes_needed(r)) {
        None => Ok(()),
        Some(r) => Err(MetaError::Refused(format!(
            "draining {what} would leave {eligible_nodes} live node(s) taking new chunks, but files with \
             redundancy {r} need {}; add nodes or undo other drains first",
            nodes_needed(r)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn cluster(nodes: u32, disks: u32, free: u64) -> Vec<Candidate> {
        (0..nodes).map(|n| Candidate { node: n, disks: (0..disks).map(|d| (n * disks + d, free)).collect() }).collect()
    }

    #[test]
    fn replicas_land_on_distinct_nodes() {
        for _ in 0..50 {
            let p = place(cluster(5, 2, 100), 3, 10, true).unwrap();
            let nodes: HashSet<_> = p.iter().map(|x| x.0).collect();
            assert_eq!(nodes.len(), 3);
        }
        let e = place(cluster(2, 4, 100), 3, 10, true).unwrap_err().to_string();
        assert!(e.contains("only 2 live node(s)"), "{e}");
    }

    #[test]
    fn wide_stripes_wrap_evenly_on_distinct_disks() {
        let p = place(cluster(4, 3, 100), 9, 10, false).unwrap();
        let mut per_node = [0; 4];
        p.iter().for_each(|x| per_node[x.0 as usize] += 1);
        per_node.sort();
        assert_eq!(per_node, [2, 2, 2, 3]);
        let disks: HashSet<_> = p.iter().map(|x| x.1).collect();
        assert_eq!(disks.len(), 9);
    }

    #[test]
    fn full_disks_are_skipped_and_free_space_weighs() {
        let mut c = cluster(3, 1, 100);
        c[0].disks[0].1 = 5;
        for _ in 0..20 {
            assert!(place(c.clone(), 2, 10, true).unwrap().iter().all(|x| x.0 != 0));
        }
        assert!(place(c.clone(), 3, 10, true).is_err());
        let mut counts = [0; 2];
        let skew = vec![Candidate { node: 0, disks: vec![(0, 900)] }, Candidate { node: 1, disks: vec![(1, 100)] }];
        for _ in 0..1000 {
            counts[place(skew.clone(), 1, 1, true).unwrap()[0].0 as usize] += 1;
        }
        assert!(counts[0] > 800 && counts[1] > 50, "{counts:?}");
    }

    #[test]
    fn a_single_copy_avoids_nodes_of_its_group_and_prefers_free_space() {
        let mut c = cluster(4, 2, 100);
        c[3].disks[1].1 = 500;
        let held = HashMap::from([(0, 2), (1, 1), (2, 1)]);
        // Node 3 holds nothing of the group: always chosen, emptiest disk 7.
        assert_eq!(place_one(&c, &held, 10, true).unwrap(), (3, 7));
        for _ in 0..20 {
            assert_eq!(place_one(&c, &held, 10, false).unwrap().0, 3);
        }
        // Without room on node 3, the nodes holding one chunk come next.
        c[3].disks.iter_mut().for_each(|d| d.1 = 5);
        for _ in 0..20 {
            assert!([1, 2].contains(&place_one(&c, &held, 10, false).unwrap().0));
        }
        let e = place_one(&c, &held, 1000, false).unwrap_err().to_string();
        assert!(e.contains("no live disk with room"), "{e}");
    }

    #[test]
    fn drains_leave_enough_nodes_for_every_redundancy() {
        assert_eq!(nodes_needed(Redundancy::Replicated(3)), 3);
        assert_eq!(nodes_needed(Redundancy::Ec { data: 6, parity: 3 }), 3);
        assert_eq!(nodes_needed(Redundancy::Ec { data: 2, parity: 1 }), 3);
        let files = [Redundancy::Replicated(2), Redundancy::Ec { data: 6, parity: 3 }, Redundancy::Replicated(3)];
        check_drain("node 1", 3, &files).unwrap();
        let e = check_drain("node 1", 2, &files).unwrap_err();
        assert!(matches!(e, MetaError::Refused(_)), "{e}");
        assert!(e.to_string().contains("leave 2 live node(s)") && e.to_string().contains("need 3"), "{e}");
        check_drain("node 1", 0, &[]).unwrap();
    }
}
