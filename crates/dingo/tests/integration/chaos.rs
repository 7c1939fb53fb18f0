//! A short chaos campaign (`dingo chaos`) as a process test: a local
//! cluster with the planner and declarative maintenance, faults of every
//! kind for 40 s, then the heal and the oracle's checks.

use std::process::Command;

use crate::common::EXE;

#[test]
fn a_short_campaign_injects_every_fault_kind_and_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["chaos", "--duration", "40s", "--seed", "18", "--json", "--data"])
        .arg(dir.path().join("chaos"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report["passed"], true);
    for (kind, n) in report["faults"].as_object().unwrap() {
        assert!(n.as_u64().unwrap() > 0, "no {kind} fault injected");
    }
    assert_eq!(report["faults"].as_object().unwrap().len(), 8);
    let c = &report["corruption"];
    assert!(c["planted"].as_u64().unwrap() > 0);
    assert_eq!(c["planted"], c["repaired"]);
    assert_eq!(report["workload"]["bytes_lost"], 0);
    assert_eq!(report["planner"]["acked_sets_redelivered"], 0);
    assert!(report["planner"]["acks_confirmed"].as_u64().unwrap() > 0);
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.len() >= 7 && checks.iter().all(|c| c["passed"] == true));
}
