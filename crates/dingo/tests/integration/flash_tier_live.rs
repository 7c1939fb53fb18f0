//! End to end: `dingo bench flash-tier --live --quick --json` runs the
//! demo's declarative timeline twice on real local clusters with each
//! node's pinned region shrunk, DRAM only and with `[node.flash]`. The
//! shrunk region must overflow into re-reads from disk with DRAM only;
//! the flash tier must take pinned overflow, cut those re-reads, write
//! exactly what the host asked (a zoned device), and keep to its zone limit.

use std::process::Command;

use crate::common::{EXE, json_of_success};

#[test]
fn quick_live_flash_tier_takes_pinned_overflow_off_the_disks() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["bench", "flash-tier", "--live", "--quick", "--json", "--out"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let s = json_of_success(&out, "flash-tier --live");
    let results = s["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "one run of each arm");
    let arm = |name: &str| results.iter().find(|r| r["arm"] == name).unwrap_or_else(|| panic!("no {name} arm"));
    let (dram, flash) = (arm("dram-only"), arm("flash"));
    for r in [dram, flash] {
        assert_eq!(r["work_complete"], true, "{r}");
        assert!(r["fg_reads"].as_u64().unwrap() > 0, "{r}");
    }
    let u = |r: &serde_json::Value, path: &[&str]| {
        path.iter().fold(r, |v, k| &v[*k]).as_u64().unwrap_or_else(|| panic!("{path:?} in {r}"))
    };
    let dram_rereads = u(dram, &["pinned_reread_bytes"]);
    assert!(u(dram, &["pinned_overflow_evictions"]) > 0, "the shrunk pinned region never overflowed: {dram}");
    assert!(dram_rereads > 0, "overflow caused no re-reads with DRAM only: {dram}");
    assert_eq!(u(dram, &["flash", "host_written_bytes"]), 0, "no tier, no flash writes");
    assert!(u(flash, &["flash", "pinned_written_bytes"]) > 0, "no pinned overflow reached flash: {flash}");
    assert!(u(flash, &["pinned_reread_bytes"]) < dram_rereads, "flash cut no re-reads: {flash}");
    let host = u(flash, &["flash", "host_written_bytes"]);
    assert_eq!(u(flash, &["flash", "device_written_bytes"]), host, "a zoned device writes what the host writes");
    assert!(u(flash, &["flash", "max_open_zones"]) <= u(flash, &["flash", "max_active_zones"]));
    assert_eq!(s["bars"].as_array().unwrap().len(), 5, "{}", s["bars"]);
}
