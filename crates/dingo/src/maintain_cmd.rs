//! `dingo maintain`: the maintenance supervisor (`dingo_tasks::supervisor`)
//! against a running cluster, until Ctrl-C or SIGTERM. Prints one JSON
//! line per finished job.

use crate::storage_cmd::ClientArgs;
use anyhow::{Context, Result};
use dingo_daemon::shutdown_signal;
use dingo_tasks::CancelFlag;
use dingo_tasks::declarative::Agent;
use dingo_tasks::supervisor::{self, SupervisorConfig};
use dingo_types::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct MaintainArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// State file (nodes seen, last scrub, job history); kept across restarts.
    #[arg(long, default_value = "dingo-maintain.json")]
    state: PathBuf,
    /// How often to look at the cluster, e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    interval: Duration,
    /// Scrub every live disk this often, e.g. 7d.
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    scrub_every: Duration,
    /// Deadline given to each job (the planner paces declared work to it).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    job_deadline: Duration,
    /// Rebalance disks this fraction above the mean utilisation.
    #[arg(long, default_value_t = 0.1)]
    rebalance_threshold: f64,
    /// Run the jobs through the IO Planner at this address (declaratively);
    /// without it they run imperatively.
    #[arg(long, env = "DINGO_PLANNER")]
    planner: Option<String>,
    /// This task client's planner token.
    #[arg(long, env = "DINGO_TOKEN", hide_env_values = true, default_value = "")]
    token: String,
    /// Reach the planner over TLS, trusting the authority in this PEM file.
    #[arg(long, env = "DINGO_PLANNER_CA")]
    planner_ca: Option<PathBuf>,
}

pub async fn run(a: MaintainArgs) -> Result<()> {
    anyhow::ensure!(!a.interval.is_zero(), "--interval must be positive");
    anyhow::ensure!(!a.scrub_every.is_zero(), "--scrub-every must be positive");
    anyhow::ensure!(!a.job_deadline.is_zero(), "--job-deadline must be positive");
    let client = a.client.client()?;
    let agent = match &a.planner {
        Some(addr) => Some(Agent::spawn(
            client.clone(),
            crate::planner_cmd::connect(addr, &a.token, a.planner_ca.as_deref())
                .with_context(|| format!("planner at {addr}"))?,
            0,
        )),
        None => None,
    };
    let cfg = SupervisorConfig {
        interval: a.interval,
        scrub_every: a.scrub_every,
        job_deadline: a.job_deadline,
        rebalance_threshold: a.rebalance_threshold,
        state_file: a.state,
    };
    tracing::info!(
        meta = %a.client.meta,
        mode = if agent.is_some() { "declarative" } else { "imperative" },
        "maintenance supervisor running"
    );
    let cancel = CancelFlag::default();
    let stop = cancel.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        stop.cancel();
    });
    supervisor::run(&client, agent.as_ref(), &cfg, &cancel, |reason, report| {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        v["reason"] = reason.into();
        outln!("{v}");
    })
    .await?;
    Ok(())
}
