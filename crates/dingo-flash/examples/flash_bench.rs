//! Runs the flash-cache benchmark: `cargo run --release -p dingo-flash
//! --example flash_bench -- [quick|full] [OUT_DIR]`.

use std::path::PathBuf;

use dingo_flash::bench::{BenchOptions, BenchSize, markdown, run_bench, write_report};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let size = match args.next().as_deref() {
        None | Some("quick") => BenchSize::Quick,
        Some("full") => BenchSize::Full,
        Some(other) => {
            eprintln!("unknown size {other}: use quick or full");
            std::process::exit(2);
        }
    };
    let out = PathBuf::from(args.next().unwrap_or_else(|| "target/flash-bench".into()));
    let report = run_bench(&BenchOptions { size, seed: 42 });
    write_report(&report, &out)?;
    println!("{}", markdown(&report));
    Ok(())
}
