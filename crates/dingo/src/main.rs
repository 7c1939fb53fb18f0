//! `dingo`: one command for everything DINGO runs.

mod bench;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "dingo", version, about = "Declarative IO for distributed storage")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure a component and print its figures.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(cmd) => bench::run(cmd),
    }
}
