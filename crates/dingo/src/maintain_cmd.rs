//! `dingo maintain`: the maintenance supervisor (`dingo_tasks::supervisor`)
//! against a running cluster, until Ctrl-C or SIGTERM. Prints one JSON
//! line per finished job.

use anyhow::{Context, Result};
use dingo_client::ClientConfig;
use dingo_daemon::shutdown_signal;
use dingo_planner_client::PlannerTarget;
use dingo_tasks::CancelFlag;
use dingo_tasks::declarative::Agent;
use dingo_tasks::supervisor::{self, SupervisorConfig};

/// With `--planner` (or `DINGO_PLANNER`) the jobs run through the IO
/// Planner at that address, declaratively; without it they run
/// imperatively.
#[derive(clap::Args, Debug)]
pub struct MaintainArgs {
    #[command(flatten)]
    client: ClientConfig,
    #[command(flatten)]
    supervisor: SupervisorConfig,
    #[command(flatten)]
    planner: PlannerTarget,
}

pub async fn run(a: MaintainArgs) -> Result<()> {
    a.supervisor.check()?;
    let client = a.client.connect()?;
    let agent = match &a.planner.addr {
        Some(addr) => {
            Some(Agent::spawn(client.clone(), a.planner.connect().with_context(|| format!("planner at {addr}"))?, 0))
        }
        None => None,
    };
    tracing::info!(
        meta = %a.client.meta,
        mode = if agent.is_some() { "declarative" } else { "imperative" },
        "maintenance supervisor running"
    );
    let cancel = CancelFlag::raised_by(shutdown_signal());
    supervisor::run(&client, agent.as_ref(), &a.supervisor, &cancel, |reason, report| {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        v["reason"] = reason.into();
        outln!("{v}");
    })
    .await?;
    Ok(())
}
