//! Each fuzzing target for a bounded number of executions (CI), or
//! `DINGO_FUZZ_ITERS` of them: `DINGO_FUZZ_ITERS=1000000 cargo test -p
//! dingo-fuzz --release -- --nocapture --test-threads 1`.

use dingo_fuzz::Target;
use dingo_fuzz::targets::{chunk_file, cli, config, meta_records, meta_rpc, node_rpc, planner};

fn fuzz(mut target: impl Target, ci_iterations: u64) {
    let iterations = dingo_fuzz::iterations(ci_iterations);
    match dingo_fuzz::run(&mut target, iterations, dingo_fuzz::seed()) {
        Ok(s) => println!(
            "{}: {} executions in {:.1} s ({:.0}/s), no crash",
            s.target,
            s.executions,
            s.elapsed.as_secs_f64(),
            s.executions as f64 / s.elapsed.as_secs_f64().max(1e-9)
        ),
        Err(crash) => panic!("{crash}"),
    }
}

#[test]
fn chunk_file() {
    fuzz(chunk_file::ChunkFile::new(), 3_000);
}

#[test]
fn meta_records() {
    fuzz(meta_records::MetaRecords, 20_000);
}

#[test]
fn planner_records() {
    fuzz(planner::PlannerRecords, 5_000);
}

#[test]
fn meta_requests() {
    fuzz(meta_rpc::MetaRpc::new(), 3_000);
}

#[test]
fn node_requests() {
    fuzz(node_rpc::NodeRpc::new(), 5_000);
}

#[test]
fn planner_requests() {
    fuzz(planner::PlannerRequests::new(), 5_000);
}

#[test]
fn storage_config() {
    fuzz(config::Configs(config::ConfigKind::Storage), 10_000);
}

#[test]
fn planner_config() {
    fuzz(config::Configs(config::ConfigKind::Planner), 10_000);
}

#[test]
fn mix_file() {
    fuzz(config::Configs(config::ConfigKind::Mix), 10_000);
}

#[test]
fn cli_strings() {
    fuzz(cli::CliStrings, 20_000);
}
