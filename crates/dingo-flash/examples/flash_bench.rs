//! Runs the flash-cache benchmark:
//! `cargo run --release -p dingo-flash --example flash_bench -- [quick|full] [OUT_DIR] [TWITTER_CSV]`.
//! With a Twitter cache-trace CSV the systems replay it instead of the
//! synthetic trace (sized by `quick`/`full`).

use std::io::BufReader;
use std::path::PathBuf;

use dingo_flash::bench::{BenchOptions, BenchSize, markdown, run_bench, run_bench_on, write_report};
use dingo_flash::trace::read_twitter_csv;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let size = match args.next().as_deref() {
        None | Some("quick") => BenchSize::Quick,
        Some("full") => BenchSize::Full,
        Some(other) => return Err(format!("unknown size {other}: use quick or full").into()),
    };
    let out = PathBuf::from(args.next().unwrap_or_else(|| "target/flash-bench".into()));
    let options = BenchOptions { size, seed: 42 };
    let report = match args.next() {
        Some(path) => {
            let file = std::fs::File::open(&path)?;
            let trace = read_twitter_csv(BufReader::new(file), None)?;
            run_bench_on(&options, &path, &trace)
        }
        None => run_bench(&options),
    };
    write_report(&report, &out)?;
    println!("{}", markdown(&report));
    Ok(())
}
