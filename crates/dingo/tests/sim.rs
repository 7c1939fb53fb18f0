//! `dingo sim` end to end on a small cluster: the JSON summary's shape, the
//! files, figures and report a run writes, a sweep, and bad input.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_dingo");

/// A short mix: cluster 1's shares with the month-long tasks' deadlines
/// shortened to two days, so a two-day run does not drain for a month
/// (scrubbing keeps its 30-day period: it covers what its pace reaches in
/// two days).
const MIX: &str = r#"
name = "short"
source = "test: cluster-1 shares, month-long tasks shortened"
[shares]
reconstruction = 21
scrubbing = 2
garbage-collection = 42
transcoding = 15
rebalancing = 14
file-scrubbing = 4
fsck = 2
[timing.scrubbing]
deadline_hours = 48
[timing.file-scrubbing]
period_hours = 48
deadline_hours = 48
[timing.fsck]
period_hours = 48
deadline_hours = 48
"#;

fn dingo(args: &[&str]) -> std::process::Output {
    Command::new(EXE).args(args).output().expect("dingo runs")
}

fn small_args(mix: &str) -> Vec<String> {
    ["--mix", mix, "--capacity", "2PB", "--disks-per-node", "2", "--days", "2"].map(String::from).to_vec()
}

#[test]
fn a_run_prints_the_summary_and_writes_data_figures_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mix = dir.path().join("short.toml");
    std::fs::write(&mix, MIX).unwrap();
    let out = dir.path().join("report");
    let mut args: Vec<String> = vec!["sim".into(), "run".into()];
    args.extend(small_args(mix.to_str().unwrap()));
    args.extend(["--json".into(), "--out".into(), out.to_str().unwrap().into()]);
    let output = dingo(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    for mode in ["imperative", "declarative", "optimal"] {
        let m = &summary["modes"][mode];
        for key in ["logical_bytes", "disk_bytes", "utilization", "deadline_misses"] {
            assert!(m[key].is_number(), "{mode}.{key} missing: {summary}");
        }
    }
    let disk = |mode: &str| summary["modes"][mode]["disk_bytes"].as_u64().unwrap();
    assert!(disk("optimal") <= disk("declarative") && disk("declarative") <= disk("imperative"));
    assert_eq!(disk("imperative"), summary["modes"]["imperative"]["logical_bytes"].as_u64().unwrap());
    assert!(summary["savings_vs_imperative"].as_f64().unwrap() > 0.0);
    assert!(summary["gap_to_optimal"].as_f64().unwrap() >= 0.0);
    for key in ["savings_vs_imperative_skip_deleted", "gap_to_optimal_elide_deleted", "wall_seconds"] {
        assert!(summary[key].is_number(), "{key} missing: {summary}");
    }
    assert!(summary["peak_rss_bytes"].as_u64().unwrap() > 0);
    for variant in ["imperative_skip_deleted", "optimal_elide_deleted"] {
        assert!(summary["variants"][variant]["disk_bytes"].is_number(), "{variant} missing");
    }
    let realised = summary["demand_realised"].as_object().unwrap();
    // Each task's figure is there (validation.rs checks their values over a
    // month; two days may hold no disk failure).
    assert_eq!(realised.len(), 7, "{realised:?}");
    let gc = realised["garbage-collection"].as_f64().unwrap();
    assert!((gc - 1.0).abs() < 0.05, "garbage collection realised {gc}");
    assert!(summary["scrub_deleted_fraction"].is_number());
    assert!(summary["churn"]["fill_end"].as_f64().unwrap() > 0.7);
    assert_eq!(summary["mix"], "short");

    for figure in ["utilization", "task_bytes", "deadline_misses", "cache", "budget", "io_wall"] {
        for ext in ["svg", "png"] {
            let path = out.join(format!("{figure}.{ext}"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(bytes.len() > 1000, "{} is nearly empty", path.display());
        }
    }
    assert!(std::fs::read(out.join("utilization.png")).unwrap().starts_with(b"\x89PNG"));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 6, "every figure is inlined");
    assert!(html.contains("Savings vs imperative"));
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(file, summary, "summary.json holds what --json prints");
    let quanta = std::fs::read_to_string(out.join("quanta.csv")).unwrap();
    assert!(quanta.starts_with("mode,quantum,") && quanta.lines().count() > 3 * 16);
    let tasks = std::fs::read_to_string(out.join("tasks.csv")).unwrap();
    assert_eq!(tasks.lines().count(), 1 + 3 * 8);
}

#[test]
fn a_sweep_runs_each_point_and_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let mix = dir.path().join("short.toml");
    std::fs::write(&mix, MIX).unwrap();
    let out = dir.path().join("sweep");
    let mut args: Vec<String> = ["sim", "sweep", "cache", "--values", "256MB,4GB"].map(String::from).to_vec();
    args.extend(small_args(mix.to_str().unwrap()));
    args.extend(["--json".into(), "--out".into(), out.to_str().unwrap().into()]);
    let output = dingo(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let points = summary["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["value"].as_f64(), Some(4.0));
    for file in ["sweep.json", "sweep.csv", "sweep.svg", "sweep.png", "report.html"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(file, summary, "sweep.json holds what --json prints");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "a row per point and mode:\n{csv}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n[shares]\ndefrag = 3\n").unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["sim", "run", "--mix", bad.to_str().unwrap()], "defrag"),
        (&["sim", "run", "--capacity", "2PB", "--disks-per-node", "1", "--supply", "0"], "supply"),
        (
            &["sim", "run", "--capacity", "2PB", "--disks-per-node", "1", "--gc-subset", "2"],
            "garbage-collection subset",
        ),
        (&["sim", "run", "--preset", "cluster-9"], "cluster-1"),
        (&["sim", "run", "--capacity", "2PB"], "fewer disks per node"),
        (&["sim", "run", "--intensity", "fsck"], "TASK=NUMBER"),
    ];
    for (args, expected) in cases {
        let output = dingo(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn the_paper_reproduction_writes_every_figure_and_its_published_vs_measured_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("paper");
    let output = dingo(&["sim", "paper", "--quick", "--json", "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let rows = summary["rows"].as_array().unwrap();
    for figure in [
        "Fig. 16a",
        "Fig. 16b",
        "Takeaway 4",
        "Takeaway 6",
        "Takeaway 7",
        "Fig. 18",
        "Fig. 19",
        "Fig. 20",
        "Fig. 21",
        "Thesis Fig. 6.15",
        "Thesis Fig. 6.16",
    ] {
        let row = rows.iter().find(|r| r["figure"] == figure).unwrap_or_else(|| panic!("{figure} missing"));
        assert!(!row["published"].as_str().unwrap().is_empty() && !row["measured"].as_str().unwrap().is_empty());
        assert!(row["measured_value"].is_number(), "{figure}: nothing measured: {row}");
    }
    for file in [
        "paper.md",
        "paper.html",
        "paper.json",
        "runs.csv",
        "fig18-demand.png",
        "thesis-6.15-supply.png",
        "fig16-cluster-A/task_bytes.png",
        "fig21-cluster-A/budget.png",
    ] {
        assert!(out.join(file).exists(), "{file}");
    }
    let page = std::fs::read_to_string(out.join("paper.md")).unwrap();
    assert!(page.contains("| figure | quantity | published | measured |"));
}

/// The summary without what the run cost (wall time, peak RSS), which
/// differs from run to run.
fn without_cost(stdout: &[u8]) -> serde_json::Value {
    let mut summary: serde_json::Value = serde_json::from_slice(stdout).expect("one JSON object");
    let fields = summary.as_object_mut().unwrap();
    for key in ["wall_seconds", "peak_rss_bytes"] {
        assert!(fields.remove(key).is_some(), "{key} missing");
    }
    summary
}

#[test]
fn a_run_killed_after_a_checkpoint_resumes_to_the_uninterrupted_result() {
    let dir = tempfile::tempdir().unwrap();
    let mix = dir.path().join("short.toml");
    std::fs::write(&mix, MIX).unwrap();
    let mut args: Vec<String> = vec!["sim".into(), "run".into()];
    args.extend(small_args(mix.to_str().unwrap()));
    args.push("--json".into());
    let whole = dingo(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    // A checkpoint after every quantum; the process dies once the first is there.
    let checkpoint = dir.path().join("run.ckpt");
    args.extend(["--checkpoint".into(), checkpoint.to_str().unwrap().into(), "--checkpoint-every".into(), "0".into()]);
    let mut child = Command::new(EXE).args(&args).stdout(std::process::Stdio::null()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !checkpoint.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let resumed = dingo(&["sim", "resume", checkpoint.to_str().unwrap(), "--json"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(without_cost(&resumed.stdout), without_cost(&whole.stdout));
    std::fs::write(&checkpoint, "not a checkpoint").unwrap();
    let refused = dingo(&["sim", "resume", checkpoint.to_str().unwrap()]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("is not a simulation checkpoint"), "{stderr}");
}
