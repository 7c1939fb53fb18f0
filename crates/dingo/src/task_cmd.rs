//! `dingo task <name>`: run one maintenance task against a cluster, either
//! imperatively at its own pace or declaratively through the planner
//! service. Prints one JSON report per job.

use anyhow::Result;
use dingo_client::ClientConfig;
use dingo_planner_client::PlannerTarget;
use dingo_tasks::on_demand::{self, Driver, Workload};
use dingo_tasks::{Scheduling, TaskRequest, imperative};
use dingo_types::{format_bytes, format_duration, parse_duration};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub task: TaskRequest,
    /// imperative or declarative.
    #[arg(long, global = true, default_value = "imperative")]
    pub mode: Scheduling,
    /// The storage cluster.
    #[command(flatten)]
    pub client: ClientConfig,
    /// The planner service (declarative mode).
    #[command(flatten)]
    pub planner: PlannerTarget,
    /// Time allowed for the work, e.g. 90s, 30m, 2h.
    #[arg(long, global = true, default_value = "1h", value_parser = parse_duration)]
    pub deadline: Duration,
}

pub async fn run(a: TaskArgs) -> Result<()> {
    let client = a.client.connect()?;
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
        Scheduling::Imperative => {
            // Say so, since a default run takes most of an hour.
            eprintln!(
                "{what}: imperative, paced to finish in {} ({:.0} % of --deadline {}; a shorter deadline goes faster)",
                format_duration(Duration::from_millis(finish_by_ms.saturating_sub(dingo_daemon::now_ms()))),
                imperative::PACE_FRACTION * 100.0,
                format_duration(a.deadline)
            );
            Driver::Imperative { finish_by_ms }
        }
        Scheduling::Declarative => {
            eprintln!(
                "{what}: declared to the planner at {}, due in {}",
                a.planner.addr(),
                format_duration(a.deadline)
            );
            Driver::Declarative(a.planner.connect()?)
        }
    };
    let template = "[{bar:30}] {pos}/{len} items, {msg}, {elapsed} elapsed, eta {eta}";
    let bar = crate::output::progress_bar(Some(work.items), template);
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
        crate::output::json(r)?;
    }
    on_demand::verdict(&reports)?;
    Ok(())
}
