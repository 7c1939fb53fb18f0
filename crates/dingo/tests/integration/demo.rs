//! End to end: `dingo demo --quick --json` runs the whole timeline twice
//! (imperative, then declarative tasks) on real local clusters with a real
//! planner service, and its summary must show complete work, no missed
//! deadlines, fewer disk reads with declarative tasks, and node disk
//! counters that agree with the kernel's per-process `read_bytes`.

use std::process::Command;

use crate::common::{EXE, json_of_success};

#[test]
fn quick_demo_saves_disk_reads_and_completes_all_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["demo", "--quick", "--json", "--out"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let s = json_of_success(&out, "demo");
    for mode in ["imperative", "declarative"] {
        let m = &s[mode];
        assert_eq!(m["work_complete"], true, "{mode}: {}", m["tasks"]);
        assert!(m["disk_bytes"].as_u64().unwrap() > 0, "{mode} read nothing");
        for task in [
            "scrubbing",
            "transcoding",
            "rebalancing",
            "reconstruction",
            "garbage-collection",
            "file-scrubbing",
            "fsck",
            "georeplication",
        ] {
            assert!(m["tasks"][task]["items_done"].as_u64().unwrap() > 0, "{mode}: {task} did nothing");
        }
        assert!(m["fg_reads"].as_u64().unwrap() > 0, "{mode}: no foreground reads");
    }
    // The imperative baseline paces itself by the wall clock, so on a
    // loaded machine it may run late; the planner must not.
    assert_eq!(s["declarative"]["deadline_misses"], 0, "{}", s["declarative"]["tasks"]);
    // Read through the planner's Status reply, not scraped from its metrics.
    assert!(s["declarative"]["planned_free_bytes"].as_u64().unwrap() > 0, "the planner scheduled nothing free");
    assert!(s["imperative"]["planned_free_bytes"].is_null());
    let ratio = s["disk_ratio"].as_f64().unwrap();
    assert!(ratio < 1.0, "declarative read as much as imperative: {ratio}");
    let gap = s["kernel_counter_gap"].as_f64().unwrap();
    assert!(gap <= 0.05, "node counters and kernel read_bytes differ by {:.1} %", gap * 100.0);
    for file in [
        "summary.json",
        "series-imperative.csv",
        "series-declarative.csv",
        "planner-metrics.txt",
        "disk-reads.png",
        "disk-reads.svg",
        "fg-latency.png",
        "fg-latency.svg",
    ] {
        assert!(dir.path().join(file).exists(), "{file} missing");
    }
    assert!(!dir.path().join("data-imperative").exists(), "cluster data left behind");
}
