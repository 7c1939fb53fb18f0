//! End to end: `dingo bench flash --quick --kvcache-trace CSV --out DIR`
//! replays a CacheLib kvcache trace through every engine and writes the
//! report, its data and its figures; a trace without its header is
//! refused with a clear error.

use std::fmt::Write as _;
use std::process::Command;

use crate::common::{EXE, json_of_success};

#[test]
fn a_kvcache_trace_is_replayed_and_its_report_and_figures_written() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("kvcache.csv");
    let mut csv = String::from("key,op,size,op_count,key_size\n");
    for i in 0..3000u64 {
        let key = (i * 7919) % 500;
        let _ = writeln!(csv, "k{key},GET,{},1,20", 100 + key % 300);
    }
    std::fs::write(&trace, csv).unwrap();
    let out_dir = dir.path().join("out");
    let out = Command::new(EXE)
        .args(["bench", "flash", "--quick", "--json", "--kvcache-trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let report = json_of_success(&out, "bench flash");
    assert_eq!(report["trace"], trace.display().to_string());
    assert_eq!(report["budgets"]["requests"], 3000);
    assert!(!report["footprints"].as_array().unwrap().is_empty());
    for file in ["flash.json", "flash-runs.csv", "flash.md", "flash-misses-vs-writes.png", "flash-carbon.svg"] {
        assert!(out_dir.join(file).metadata().unwrap().len() > 0, "{file}");
    }

    std::fs::write(&trace, "k1,GET,100,1,20\nk2,GET,100,1,20\n").unwrap();
    let out = Command::new(EXE).args(["bench", "flash", "--quick", "--kvcache-trace"]).arg(&trace).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no column \"key\""), "{stderr}");
}

/// `--real`: both real engines against the simulator on a prefix of the
/// quick trace, their page files in a temporary directory under `--out`
/// that is gone afterwards; no requests at all is refused.
#[test]
fn the_real_engines_are_cross_checked_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["bench", "flash", "--json", "--real", "20000", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let report = json_of_success(&out, "bench flash --real");
    let reports = report["reports"].as_array().unwrap();
    assert_eq!(reports.iter().map(|r| r["system"].as_str().unwrap()).collect::<Vec<_>>(), ["kangaroo", "fairywren"]);
    for r in reports {
        let (simulated, real) = (&r["simulator"], &r["real"]["result"]);
        assert!(simulated["requests"].as_u64().unwrap() > 0, "{r}");
        let ratio = real["miss_ratio"].as_f64().unwrap() / simulated["miss_ratio"].as_f64().unwrap();
        assert!((ratio - 1.0).abs() <= 0.1, "{r}");
        assert_eq!(r["real"]["file"]["corrupt"], 0, "{r}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the page files outlived the run");

    let out = Command::new(EXE).args(["bench", "flash", "--real", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--real"), "{}", String::from_utf8_lossy(&out.stderr));
}
