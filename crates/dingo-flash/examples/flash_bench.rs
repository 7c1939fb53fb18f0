//! Runs the flash-cache benchmark:
//! `cargo run --release -p dingo-flash --example flash_bench -- [quick|full] [OUT_DIR] [TWITTER_CSV]`.
//! With a Twitter cache-trace CSV the systems replay it instead of the
//! synthetic trace (sized by `quick`/`full`). `meta-quick` / `meta-full`
//! run only Fig. 5.12's comparison on the Meta-like trace and print it.
//! `real-quick [REQUESTS] [DIR]` replays the first REQUESTS (default 600000)
//! of the quick trace through the simulated and the real Kangaroo, then
//! FairyWREN (their pages in a file in a new temporary directory under DIR,
//! default the system's), and prints the cross-checks.

use std::io::BufReader;
use std::path::PathBuf;

use dingo_flash::bench::{
    BenchOptions, BenchSize, markdown, meta_markdown, run_bench, run_bench_on, run_meta_comparison, write_report,
};
use dingo_flash::real::run_real_cross_checks;
use dingo_flash::trace::read_twitter_csv;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (size, meta_only) = match args.next().as_deref() {
        None | Some("quick") => (BenchSize::Quick, false),
        Some("full") => (BenchSize::Full, false),
        Some("meta-quick") => (BenchSize::Quick, true),
        Some("meta-full") => (BenchSize::Full, true),
        Some("real-quick") => return real_quick(args.next(), args.next()),
        Some(other) => {
            return Err(format!("unknown size {other}: use quick, full, meta-quick, meta-full or real-quick").into());
        }
    };
    if meta_only {
        let (trace, runs) = run_meta_comparison(&BenchOptions { size, seed: 42 });
        println!("{}", meta_markdown(&trace, &runs));
        return Ok(());
    }
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

/// The real engines against the simulator on a prefix of the quick trace.
fn real_quick(requests: Option<String>, dir: Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    let requests: usize = requests.as_deref().unwrap_or("600000").parse()?;
    print!("{}", run_real_cross_checks(requests, 42, dir.as_deref().map(std::path::Path::new))?);
    Ok(())
}
