//! Dispatch groups' cache directives: which chunks a group pins, and
//! which pins it drops (lapsed, or for readers that are gone).

use super::*;

/// Clients `a` (fsck) and `b` (scrubbing) each declare block 0 and
/// subscribe, and a quantum is planned at `T0`; returns `b`'s declaration.
fn two_readers_of_block_0() -> (Driver, DeclarationId) {
    let mut d = Driver::new();
    d.declare("a", &singles(0..1, T0 + 1000), T0).unwrap();
    let mut scrub = singles(0..1, T0 + 1000);
    scrub.task = TaskKind::Scrubbing;
    let b = d.declare("b", &scrub, T0).unwrap();
    d.subscribe("a");
    d.subscribe("b");
    d.plan(T0);
    (d, b)
}

/// Two tasks reading the same block share its chunk: the group pins it
/// on its node until after the group's time plus the grace; a group taken
/// after that has lost its pins, and says how many (a metric).
#[test]
fn a_group_pins_shared_chunks_and_counts_the_pins_it_took_too_late() {
    for late in [false, true] {
        let (mut d, _) = two_readers_of_block_0();
        let at = d.state.next_group_at().expect("a group");
        let taken_at = if late { at + 60_000 } else { at };
        let due = d.state.take_due_group(taken_at).expect("due");
        assert_eq!(due.at_ms, at);
        let pinned: Vec<(ChunkRef, u64)> = due.pins.iter().flat_map(|(_, chunks)| chunks.iter().copied()).collect();
        if late {
            assert!(pinned.is_empty() && due.lapsed_pins == 1, "{:?}, {} lapsed", due.pins, due.lapsed_pins);
            assert!(d.page().contains("\ndingo_planner_pins_lapsed_total 1\n"), "{}", d.page());
        } else {
            assert_eq!(due.lapsed_pins, 0);
            let blocks: Vec<u64> = pinned.iter().map(|(c, _)| c.block.0).collect();
            assert_eq!(blocks, [0], "the shared chunk, once: {:?}", due.pins);
            assert!(pinned.iter().all(|&(_, until)| until >= at + config().pin_grace_ms));
            for (node, chunks) in &due.pins {
                for (chunk, _) in chunks {
                    // Copy c of block b is on disk (b + c) % 4 ([`topo`]).
                    let disk = DiskId(((chunk.block.0 + u64::from(chunk.copy)) % 4) as u32);
                    assert_eq!(Some(node.as_str()), d.state.topo.node_of(disk), "pinned where its copy is");
                }
            }
        }
    }
}

/// A pin is for readers still to come: if one of the two tasks sharing a
/// chunk cancels between the quantum's planning and its group's dispatch,
/// the group pins nothing (its one reader reads from disk), before and
/// after a restart, and says how many pins it dropped (a metric).
#[test]
fn a_group_drops_the_pins_whose_readers_were_cancelled() {
    for restart in [false, true] {
        let (mut d, b) = two_readers_of_block_0();
        d.cancel(&Caller::Client("b".into()), b.0).unwrap();
        if restart {
            let Driver { tables, state, .. } = d;
            d = Driver::restart(tables, state.topo);
        }
        let at = d.state.next_group_at().expect("a group");
        let due = d.state.take_due_group(at).expect("due");
        assert!(due.pins.is_empty() && due.lapsed_pins == 0, "{:?}", due.pins);
        assert_eq!(due.deliveries.len(), if restart { 1 } else { 2 }, "a restart lists the live delivery only");
        assert!(d.page().contains("\ndingo_planner_pins_unneeded_total 1\n"), "{}", d.page());
    }
}
