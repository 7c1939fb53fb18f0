//! Checkpoints (`dingo_sim::sim::checkpoint`): a run saved after some
//! quanta and resumed from the file, in a fresh `Simulation`, ends with
//! exactly the result of the uninterrupted run; a damaged file is refused.

use dingo_sim::ModelSpec;
use dingo_sim::sim::{CheckpointError, SimConfig, SimResult, Simulation};
use std::path::Path;
use std::time::Duration;

const PB: u64 = 1_000_000_000_000_000;
const DAY: u64 = 24 * 3600;

/// validation.rs's small cluster: 2 PB, one disk per node, every mode, the
/// month-long tasks squeezed into a three-day horizon.
fn config() -> SimConfig {
    let mut config = SimConfig {
        cluster: ModelSpec { raw_capacity: 2 * PB, disks_per_node: 1, seed: 11, ..ModelSpec::default() },
        horizon: Duration::from_secs(3 * DAY),
        ..SimConfig::default()
    };
    config.squeeze_into_horizon();
    config
}

fn json(result: SimResult) -> String {
    serde_json::to_string(&result).unwrap()
}

/// A simulation that has run `quanta` steps.
fn after(quanta: u32) -> Simulation {
    let mut sim = Simulation::new(config()).unwrap();
    for _ in 0..quanta {
        assert!(sim.step().unwrap(), "the run is longer than {quanta} quanta");
    }
    sim
}

fn finish(sim: Simulation) -> String {
    json(sim.run(|_| {}).unwrap())
}

#[test]
fn a_resumed_run_ends_with_the_uninterrupted_result() {
    let uninterrupted = finish(after(0));
    let dir = tempfile::tempdir().unwrap();
    // 0: before the first quantum; 1 and 9: right after a step, with the
    // declarative replay of the last plan still in flight.
    for k in [0, 1, 9] {
        let path = dir.path().join(format!("after-{k}.ckpt"));
        let mut sim = after(k);
        sim.save_checkpoint(&path).unwrap();
        assert!(!path.with_extension("ckpt.tmp").exists(), "the temporary file was renamed");
        let resumed = Simulation::load_checkpoint(&path).unwrap();
        assert_eq!(resumed.quanta_done(), k);
        assert_eq!(resumed.config(), &config());
        assert_eq!(finish(resumed), uninterrupted, "resumed after {k} quanta");
        assert_eq!(finish(sim), uninterrupted, "the run that saved after {k} quanta goes on unchanged");
    }
}

#[test]
fn a_run_resumed_twice_from_the_same_path_ends_with_the_uninterrupted_result() {
    let uninterrupted = finish(after(0));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let mut sim = after(3);
    sim.save_checkpoint(&path).unwrap();
    let mut sim = Simulation::load_checkpoint(&path).unwrap();
    for _ in 0..4 {
        sim.step().unwrap();
    }
    sim.save_checkpoint(&path).unwrap();
    let sim = Simulation::load_checkpoint(&path).unwrap();
    assert_eq!(sim.quanta_done(), 7);
    assert_eq!(finish(sim), uninterrupted);
}

#[test]
fn the_cost_of_earlier_processes_carries_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let mut sim = after(2);
    let saved = sim.cost_meter().cost();
    sim.save_checkpoint(&path).unwrap();
    let resumed = Simulation::load_checkpoint(&path).unwrap().cost_meter().cost();
    assert!(resumed.wall_seconds >= saved.wall_seconds, "{resumed:?} after {saved:?}");
    assert!(resumed.peak_rss_bytes >= saved.peak_rss_bytes);
}

fn load_err(path: &Path) -> CheckpointError {
    match Simulation::load_checkpoint(path) {
        Ok(_) => panic!("a damaged checkpoint loaded"),
        Err(e) => e,
    }
}

#[test]
fn a_damaged_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    after(2).save_checkpoint(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let damaged = dir.path().join("damaged.ckpt");
    let check = |bytes: &[u8], expect: fn(&CheckpointError) -> bool| {
        std::fs::write(&damaged, bytes).unwrap();
        let error = load_err(&damaged);
        assert!(expect(&error), "{error}");
    };
    for at in [good.len() / 3, good.len() / 2, good.len() - 5, good.len() - 1] {
        let mut flipped = good.clone();
        flipped[at] ^= 0x10;
        check(&flipped, |e| matches!(e, CheckpointError::Corrupt { .. }));
    }
    for len in [good.len() - 1, good.len() / 2, 40] {
        check(&good[..len], |e| matches!(e, CheckpointError::Corrupt { .. }));
    }
    check(&good[..10], |e| matches!(e, CheckpointError::NotACheckpoint { .. }));
    check(b"not a checkpoint at all, just some text", |e| matches!(e, CheckpointError::NotACheckpoint { .. }));
    let mut other_version = good.clone();
    other_version[16] = other_version[16].wrapping_add(1);
    check(&other_version, |e| matches!(e, CheckpointError::Version { .. }));
    let missing = load_err(&dir.path().join("missing.ckpt"));
    assert!(matches!(missing, CheckpointError::Io { .. }), "{missing}");
    assert!(Simulation::load_checkpoint(&path).is_ok(), "the good file still loads");
}
