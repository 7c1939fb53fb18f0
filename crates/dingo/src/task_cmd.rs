//! `dingo task <name>`: run one maintenance task against a cluster, either
//! imperatively at its own pace or declaratively through the planner
//! service. Prints one JSON report per job.

use anyhow::Result;
use dingo_client::Client;
use dingo_tasks::on_demand::{self, Driver, Workload};
use dingo_tasks::{Mode, TaskRequest, imperative};
use dingo_types::{format_bytes, format_duration, parse_duration};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub task: TaskRequest,
    /// imperative or declarative.
    #[arg(long, global = true, default_value = "imperative")]
    pub mode: Mode,
    /// Metadata service address.
    #[arg(long, global = true, env = "DINGO_META", default_value = crate::storage_cmd::DEFAULT_META)]
    pub meta: String,
    /// Planner service address (declarative mode).
    #[arg(long, global = true, env = "DINGO_PLANNER", default_value = crate::planner_cmd::DEFAULT_PLANNER)]
    pub planner: String,
    /// This task client's token (declarative mode).
    #[arg(long, global = true, env = "DINGO_TOKEN", hide_env_values = true, default_value = "")]
    pub token: String,
    /// Reach the planner over TLS, trusting the authority in this PEM file.
    #[arg(long, global = true, env = "DINGO_PLANNER_CA")]
    pub planner_ca: Option<std::path::PathBuf>,
    /// The storage services' credentials.
    #[command(flatten)]
    pub access: crate::storage_cmd::AccessArgs,
    /// Time allowed for the work, e.g. 90s, 30m, 2h.
    #[arg(long, global = true, default_value = "1h", value_parser = parse_duration)]
    pub deadline: Duration,
}

pub async fn run(a: TaskArgs) -> Result<()> {
    let client = Client::new(&a.meta, &a.access.access()?)?;
    let deadline_ms = dingo_daemon::now_ms() + a.deadline.as_millis() as u64;
    let mut jobs = a.task.jobs(&client, deadline_ms).await?;
    if jobs.is_empty() {
        eprintln!("nothing to do");
        return Ok(());
    }
    let progress = on_demand::track(&mut jobs);
    let work = Workload::of(&jobs);
    let what = format!("{} job(s), {} item(s), {}", jobs.len(), work.items, format_bytes(work.bytes));
    let now_ms = dingo_daemon::now_ms();
    let finish_by_ms = imperative::finish_by(now_ms, now_ms + a.deadline.as_millis() as u64);
    let driver = match a.mode {
        Mode::Imperative => {
            // Say so, since a default run takes most of an hour.
            eprintln!(
                "{what}: imperative, paced to finish in {} ({:.0} % of --deadline {}; a shorter deadline goes faster)",
                format_duration(Duration::from_millis(finish_by_ms.saturating_sub(dingo_daemon::now_ms()))),
                imperative::PACE_FRACTION * 100.0,
                format_duration(a.deadline)
            );
            Driver::Imperative { finish_by_ms }
        }
        Mode::Declarative => {
            eprintln!("{what}: declared to the planner at {}, due in {}", a.planner, format_duration(a.deadline));
            Driver::Declarative(crate::planner_cmd::connect(&a.planner, &a.token, a.planner_ca.as_deref())?)
        }
    };
    let bar = progress_bar(work.items);
    let show = {
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(progress.items());
                bar.set_message(format!("{} read", format_bytes(progress.bytes())));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let reports = on_demand::run_jobs(&client, jobs, driver).await;
    show.abort();
    bar.finish_and_clear();
    let reports = reports?;
    for r in &reports {
        outln!("{}", serde_json::to_string(r)?);
    }
    on_demand::verdict(&reports)?;
    Ok(())
}

/// A bar over the work items on stderr, drawn only when stderr is a terminal.
fn progress_bar(items: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    ProgressBar::new(items).with_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} items, {msg}, {elapsed} elapsed, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    )
}
