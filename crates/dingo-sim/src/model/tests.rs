use super::*;
use dingo_types::{BlockId, BlockProblem, BlockState, ChunkRef, DiskId, Member, MemberBitmap, Topology};

fn small() -> ClusterModel {
    // 2 PB of 24 TB drives, 2 per node: 84 disks on 42 nodes.
    let spec = ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, ..ModelSpec::default() };
    ClusterModel::new(spec).unwrap()
}

#[test]
fn fill_and_layout_follow_the_spec() {
    let m = small();
    let raw_used = m.chunk_count() as f64 * m.spec().block_bytes as f64;
    let target = m.spec().raw_capacity as f64 * m.spec().fill;
    assert!((raw_used - target).abs() / target < 0.01, "{raw_used} vs {target}");
    assert_eq!(m.disk_count(), 84);
}

#[test]
fn chunks_on_a_disk_are_exactly_the_chunks_placed_there() {
    let m = small();
    let mut seen = 0;
    for d in 0..m.disk_count() {
        for member in m.chunks_on_disk(DiskId(d)).iter() {
            let Member::Copy(chunk) = member else { panic!("disk chunks are exact copies") };
            assert_eq!(m.copy_disk(chunk), Some(DiskId(d)));
            seen += 1;
        }
    }
    assert_eq!(seen, m.chunk_count());
    assert_eq!(m.all_chunks().len(), m.chunk_count());
}

#[test]
fn members_of_a_group_sit_on_distinct_nodes() {
    let m = small();
    let per_node = m.spec().disks_per_node;
    for b in (0..m.block_count()).step_by(97) {
        let block = BlockId(b);
        let info = m.block(block).unwrap();
        let mut nodes: Vec<u32> = if info.copies > 1 {
            (0..info.copies).map(|c| m.copy_disk(ChunkRef { block, copy: c }).unwrap().0 / per_node).collect()
        } else {
            let group = m.group_blocks(block);
            assert!(group.iter().all(|&g| m.block(g).unwrap().group == info.group));
            group.iter().map(|&g| m.copy_disk(ChunkRef { block: g, copy: 0 }).unwrap().0 / per_node).collect()
        };
        let n = nodes.len();
        nodes.sort_unstable();
        nodes.dedup();
        assert_eq!(nodes.len(), n, "{block} shares a node within its group");
    }
}

#[test]
fn failed_disks_and_deletions_hide_chunks_and_checks_catch_them() {
    let mut m = small();
    let before = m.all_chunks().len();
    let on_disk = m.chunks_on_disk(DiskId(5)).len();
    m.fail_disk(DiskId(5));
    assert_eq!(m.all_chunks().len(), before - on_disk);
    let file = m.file_blocks(0);
    m.delete_blocks(&(file.start.0..file.end()).collect());
    assert_eq!(m.check_range(file), Err(BlockProblem::Deleted(file.start)));
    assert_eq!(m.block(file.start).unwrap().state, BlockState::Deleted);
    let past_end = BlockRange { start: BlockId(m.block_count()), len: 1 };
    assert!(matches!(m.check_range(past_end), Err(BlockProblem::Unknown(_))));
}

#[test]
fn block_copies_agrees_with_block_and_copy_disk() {
    let mut m = small();
    m.fail_disk(DiskId(5));
    let file = m.file_blocks(0);
    m.delete_blocks(&(file.start.0..file.end()).collect());
    let mut disks = Vec::new();
    let mut lost = 0;
    for b in (0..m.block_count() + 2).map(BlockId) {
        let info = m.block_copies(b, &mut disks);
        assert_eq!(info, m.block(b), "{b}");
        let expected: Vec<_> =
            (0..info.map_or(0, |i| i.copies)).map(|copy| m.copy_disk(ChunkRef { block: b, copy })).collect();
        assert_eq!(disks, expected, "{b}");
        lost += disks.iter().filter(|d| d.is_none()).count();
    }
    assert!(lost > 0, "the failed disk's copies show as lost");
    // The batched lookup of first live copies agrees, across regions
    // and past the last block.
    let mut firsts = Vec::new();
    m.first_live_copies(0..m.block_count() + 2, &mut firsts);
    for (b, first) in (0..m.block_count() + 2).zip(&firsts) {
        m.block_copies(BlockId(b), &mut disks);
        let expected = (0..).zip(&disks).find_map(|(copy, d)| d.map(|d| (copy, d)));
        assert_eq!(*first, expected, "{b}");
    }
    // And over ranges starting anywhere in a stripe (a file's blocks, a
    // fsck's first blocks): each range's answer is the whole lookup's.
    let whole = firsts.clone();
    for start in (0..m.block_count() + 2).step_by(1009) {
        for len in [1, 5, 31, 70] {
            let end = (start + len).min(m.block_count() + 2);
            m.first_live_copies(start..end, &mut firsts);
            assert_eq!(firsts, whole[start as usize..end as usize], "{start}..{end}");
        }
    }
    // So does the range lookup, over ranges of every kind: within a
    // region's data or parity blocks, across the two, across regions, and
    // past the last block, compared with the trait's block-by-block default.
    struct OneByOne<'a>(&'a ClusterModel);
    impl Topology for OneByOne<'_> {
        fn block(&self, id: BlockId) -> Option<dingo_types::BlockInfo> {
            self.0.block(id)
        }
        fn copy_disk(&self, chunk: ChunkRef) -> Option<DiskId> {
            self.0.copy_disk(chunk)
        }
        fn disk_count(&self) -> u32 {
            self.0.disk_count()
        }
        fn disk_model(&self, disk: DiskId) -> dingo_types::DiskModel {
            self.0.disk_model(disk)
        }
        fn chunks_on_disk(&self, disk: DiskId) -> dingo_types::MemberBitmap {
            self.0.chunks_on_disk(disk)
        }
        fn all_chunks(&self) -> dingo_types::MemberBitmap {
            self.0.all_chunks()
        }
    }
    let (mut infos, mut expected_infos, mut expected_disks) = (Vec::new(), Vec::new(), Vec::new());
    let end = m.block_count() + 3;
    let mut starts: Vec<u64> = m.regions.iter().flat_map(|r| [r.first, r.parity_first(), r.end]).collect();
    starts.extend((0..end).step_by(37));
    for start in starts {
        for len in [1, 2, 5, 29, 31, 64, 200] {
            let range = start.saturating_sub(len / 2)..(start + len).min(end);
            m.range_copies(range.clone(), &mut infos, &mut disks);
            OneByOne(&m).range_copies(range.clone(), &mut expected_infos, &mut expected_disks);
            assert_eq!((&infos, &disks), (&expected_infos, &expected_disks), "{range:?}");
        }
    }
}

#[test]
fn too_few_nodes_for_a_stripe_is_a_clear_error() {
    let spec = ModelSpec { raw_capacity: 100_000_000_000_000, ..ModelSpec::default() };
    let err = ClusterModel::new(spec).unwrap_err();
    assert!(err.to_string().contains("at least 3 nodes"), "{err}");
}

#[test]
fn deleting_files_removes_exactly_their_data_and_parity_chunks() {
    let mut m = small();
    assert_eq!(m.live_chunks(), m.chunk_count());
    // One file of each scheme: its ranges cover the stripes of its blocks.
    let files: Vec<u64> = (0..m.scheme_count()).map(|s| m.scheme_file_ranges(s).next().unwrap().start).collect();
    let mut expected = RoaringTreemap::new();
    let mut chunks = 0;
    for &f in &files {
        for b in m.file_blocks(f).blocks() {
            expected.extend(m.group_blocks(b).into_iter().map(|g| g.0));
        }
        let range = m.file_blocks(f);
        chunks += match m.scheme(m.file_scheme(f)) {
            Redundancy::Replicated(copies) => u64::from(range.len) * u64::from(copies),
            r => u64::from(range.len) / r.data_per_stripe() * u64::from(r.stripe_width()),
        };
    }
    let gone = m.delete_files(&files);
    assert_eq!(gone, expected);
    for b in 0..m.block_count() {
        let deleted = m.block(BlockId(b)).unwrap().state == BlockState::Deleted;
        assert_eq!(deleted, gone.contains(b), "block {b}");
    }
    assert_eq!(m.live_chunks(), m.chunk_count() - chunks);
    assert!(files.iter().all(|&f| !m.file_live(f)));
    assert!(m.delete_files(&files).is_empty(), "deleting twice deletes nothing");
    assert_eq!(m.live_chunks(), m.chunk_count() - chunks);
}

#[test]
fn added_files_land_in_a_new_region_of_their_scheme_and_replaced_disks_come_back() {
    let mut m = small();
    let before = m.live_chunks();
    let new = m.add_files(1, 4);
    assert_eq!(m.scheme_file_ranges(1).last(), Some(new.clone()));
    assert!(new.clone().all(|f| m.file_live(f) && m.file_scheme(f) == 1));
    let r = m.scheme(1);
    assert_eq!(
        m.live_chunks() - before,
        4 * u64::from(m.spec().file_blocks) / r.data_per_stripe() * u64::from(r.stripe_width())
    );
    let chunk = ChunkRef { block: m.file_blocks(new.start).start, copy: 0 };
    let disk = m.copy_disk(chunk).unwrap();
    m.fail_disk(disk);
    assert_eq!(m.copy_disk(chunk), None);
    m.replace_disk(disk);
    assert_eq!(m.copy_disk(chunk), Some(disk));
}

#[test]
fn stripe_survivors_are_the_live_members_each_lookup_finds() {
    // The per-member definition: every other member of the stripe (the
    // block itself if replicated) whose copy `copy_disk` finds on a live
    // disk, the first `k` of them, or none if fewer.
    let reference = |m: &ClusterModel, block: BlockId| -> Option<Vec<Member>> {
        let group = m.group_blocks(block);
        if group.len() == 1 {
            let copies = m.block(block)?.copies;
            return (0..copies)
                .any(|copy| m.copy_disk(ChunkRef { block, copy }).is_some())
                .then(|| vec![Member::Any(block)]);
        }
        let k = m.redundancy_of(block)?.data_per_stripe() as usize;
        let live: Vec<Member> = group
            .into_iter()
            .filter(|&b| b != block && m.copy_disk(ChunkRef { block: b, copy: 0 }).is_some())
            .take(k)
            .map(Member::Any)
            .collect();
        (live.len() == k).then_some(live)
    };
    let mut m = small();
    // Two disks out at once, so that some stripes lack survivors.
    let lost = m.chunks_on_disk(DiskId(3));
    m.fail_disk(DiskId(3));
    m.fail_disk(DiskId(40));
    let mut out = vec![Member::Any(BlockId(u64::MAX))];
    let blocks = lost.iter().map(|c| c.block()).chain((0..m.block_count() + 5).step_by(89).map(BlockId));
    for block in blocks {
        out.truncate(1);
        let found = m.stripe_survivors(block, &mut out);
        assert_eq!(found.then(|| out[1..].to_vec()), reference(&m, block), "{block}");
        assert!(found || out.len() == 1, "nothing appended when none are found");
        // With their reads: each member's first live copy, as
        // `block_copies` finds it.
        let mut reads = vec![(ChunkRef { block: BlockId(u64::MAX), copy: 0 }, DiskId(0))];
        assert_eq!(m.stripe_survivor_reads(block, &mut reads), found);
        let expected: Vec<(ChunkRef, DiskId)> = out[1..]
            .iter()
            .map(|member| {
                let mut disks = Vec::new();
                m.block_copies(member.block(), &mut disks);
                let (copy, disk) = (0..).zip(&disks).find_map(|(c, d)| d.map(|d| (c, d))).expect("a live copy");
                (ChunkRef { block: member.block(), copy }, disk)
            })
            .collect();
        assert_eq!(reads[1..], expected, "{block}");
    }
}

#[test]
fn per_disk_live_chunks_follow_placement_through_deletions_and_new_files() {
    let mut m = small();
    let check = |m: &ClusterModel| {
        let mut total = 0;
        for d in 0..m.disk_count() {
            let listed = m.placed_chunks(&[DiskId(d)]).len();
            assert_eq!(m.disk_live_chunks(DiskId(d)), listed, "disk {d}");
            total += listed;
        }
        assert_eq!(total, m.live_chunks());
        // Several disks (one listed twice) list the union of each one's.
        let disks = [DiskId(5), DiskId(0), DiskId(17), DiskId(5), DiskId(60)];
        let mut union = MemberBitmap::new();
        for d in &disks {
            let one = m.placed_chunks(&[*d]);
            for copy in 0..one.copy_slots() {
                union.insert_copies(copy, one.copy(copy).unwrap());
            }
        }
        let listed = m.placed_chunks(&disks);
        assert_eq!(listed.len(), union.len());
        assert!(union.iter().all(|member| listed.contains(member)));
    };
    check(&m);
    // Whole files of every scheme, loose blocks (a replicated one and an
    // erasure-coded one), then new regions, small and large.
    let files: Vec<u64> = (0..m.file_count()).step_by(37).collect();
    m.delete_files(&files);
    check(&m);
    let loose = m.file_blocks(1).start.0 + 3;
    let ec_file = (0..m.file_count()).find(|&f| m.file_scheme(f) != m.file_scheme(1) && m.file_live(f)).unwrap();
    let ec_parity = m.file_block_ranges(ec_file)[1].start;
    assert!(!m.file_block_ranges(ec_file)[1].is_empty(), "an erasure-coded file");
    m.delete_blocks(&RoaringTreemap::from_iter([loose, m.file_blocks(ec_file).start.0 + 1, ec_parity]));
    check(&m);
    m.add_files(1, 3);
    m.add_files(0, 50_000);
    check(&m);
}
