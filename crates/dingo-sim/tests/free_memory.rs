//! [`dingo_sim::cost::release_free_memory`] hands back what glibc keeps.
//! A file of its own: it reads the whole process's resident set, which
//! other tests running beside it in one process would move.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn trimming_returns_freed_heap_pages_to_the_kernel() {
    fn resident_bytes() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).expect("a VmRSS line");
        kb.trim().trim_end_matches("kB").trim().parse::<u64>().expect("kB") * 1024
    }
    // 64 MiB in 4 KiB blocks, each far below the mmap threshold, so they
    // sit in the heap, written so their pages are resident.
    let blocks: Vec<Vec<u8>> = (0..16_384).map(|_| vec![1u8; 4096]).collect();
    // Allocated last and kept, so the heap cannot shrink from its top.
    let kept = vec![1u8; 4096];
    drop(blocks);
    let before = resident_bytes();
    dingo_sim::cost::release_free_memory();
    let after = resident_bytes();
    assert!(
        before.saturating_sub(after) >= 32 << 20,
        "resident {before} bytes before the trim, {after} after: glibc kept the freed blocks"
    );
    assert_eq!(kept[4095], 1);
}
