//! The `dingo` command. A thin dispatcher: each subcommand's logic lives in
//! its own module or library crate.

#[macro_use]
mod output;

mod bench;
mod bench_io;
mod chaos_cmd;
mod demo;
mod maintain_cmd;
mod planner_cmd;
mod sim;
mod storage_cmd;
mod task_cmd;
mod tls_cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "dingo", version, about = "DINGO: declarative IO for distributed storage")]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run the metadata service.
    Meta(dingo_cluster::MetaFlags),
    /// Run a storage node.
    Node(dingo_cluster::NodeFlags),
    /// Run or inspect a local cluster.
    #[command(subcommand)]
    Cluster(storage_cmd::ClusterCommand),
    /// File operations.
    #[command(subcommand)]
    Fs(storage_cmd::FsCommand),
    /// Run the IO Planner service, or change its budget and show its status.
    Planner(planner_cmd::PlannerArgs),
    /// Run one maintenance task, imperatively or through the planner.
    Task(task_cmd::TaskArgs),
    /// The maintenance supervisor: runs reconstruction when chunks are
    /// lost, rebalancing when a node joins and scrubbing on schedule.
    Maintain(maintain_cmd::MaintainArgs),
    /// The HDFS-cluster experiment on a local cluster: the same timeline
    /// with imperative and with declarative tasks, compared.
    ///
    /// About a minute per mode with --quick.
    Demo(demo::DemoArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// A randomized fault campaign against a local cluster, checked
    /// against an oracle of acknowledged writes.
    Chaos(chaos_cmd::ChaosArgs),
    /// The datacenter simulator: maintenance IO in imperative, declarative and optimal modes.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// TLS certificates for the gRPC endpoints.
    #[command(subcommand)]
    Tls(tls_cmd::TlsCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Client and raw disk throughput, EC encode/decode speed.
    Io(bench_io::BenchIoArgs),
    /// Schedule and dispatch one quantum of a steady-state load on a
    /// synthetic cluster of the given capacity.
    Planner(bench::planner::PlannerBenchArgs),
    /// Flash cache engines (set-associative, log-structured, Kangaroo,
    /// FairyWREN) on counting device models, at equal DRAM and device-write budgets.
    ///
    /// Minutes; seconds with --quick. The text report is a Markdown page.
    Flash(bench::flash::FlashBenchArgs),
    /// The node's flash tier replayed under a demo-like load: DRAM only, a
    /// zoned tier, and the same tier on a conventional SSD.
    ///
    /// Two simulated hours; ten minutes with --quick. With --live, the
    /// demo's declarative timeline on real local clusters instead, each
    /// node's pinned region shrunk, DRAM only and with `[node.flash]`:
    /// about 10 minutes per run at default scale, 4 with --quick.
    FlashTier(bench::flash_tier::FlashTierBenchArgs),
    /// Node-level IO control experiments (docs/IO_CONTROL.md): the classful disk
    /// scheduler against today's FIFO queue on a local cluster.
    #[command(subcommand)]
    Iocontrol(bench::iocontrol::IoControlCommand),
}

fn main() -> std::process::ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let code = runtime.block_on(run());
    // Not a plain drop: that waits for every blocking thread, and tokio's
    // stdin reader (`fs put -`) blocks in read(2) until the pipe closes, so
    // an interrupted put would hang until its producer finished.
    runtime.shutdown_background();
    code
}

async fn run() -> std::process::ExitCode {
    dingo_daemon::init_logging();
    let result = match Cli::parse().command {
        Commands::Meta(a) => storage_cmd::run_meta(a).await,
        Commands::Node(a) => storage_cmd::run_node(a).await,
        Commands::Cluster(c) => storage_cmd::run_cluster(c).await,
        Commands::Fs(c) => storage_cmd::run_fs(c).await,
        Commands::Planner(a) => planner_cmd::run(a).await,
        Commands::Task(a) => task_cmd::run(a).await,
        Commands::Maintain(a) => maintain_cmd::run(a).await,
        Commands::Demo(a) => demo::run(a).await,
        Commands::Bench(BenchCommand::Io(a)) => bench_io::run(a).await,
        Commands::Bench(BenchCommand::Planner(a)) => bench::planner::run(&a),
        Commands::Bench(BenchCommand::Flash(a)) => bench::flash::run(&a),
        Commands::Bench(BenchCommand::FlashTier(a)) => bench::flash_tier::run(&a).await,
        Commands::Bench(BenchCommand::Iocontrol(c)) => bench::iocontrol::run(c).await,
        Commands::Chaos(a) => chaos_cmd::run(a).await,
        Commands::Sim(c) => sim::run(c),
        Commands::Tls(c) => tls_cmd::run(c),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// clap checks the flags' definitions (names unique across flattened
    /// and global flags, groups, defaults) only when asked.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        super::Cli::command().debug_assert();
    }
}
