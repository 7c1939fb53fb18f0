//! `dingo planner`: runs the IO Planner service (`--config FILE`), or talks
//! to a running one (`budget set`, `status`).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use dingo_daemon::shutdown_signal;
use dingo_planner_client::{BudgetView, PlannerClient, StatusView};
use dingo_planner_service::ServiceConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

pub const DEFAULT_PLANNER: &str = "127.0.0.1:7500";

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PlannerArgs {
    #[command(subcommand)]
    command: Option<PlannerCommand>,
    /// The service's TOML config (see docs/PLANNER_SERVICE.md).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    /// Data directory (overrides `data` in the config).
    #[arg(long)]
    data: Option<PathBuf>,
    /// gRPC listen address (overrides `listen`).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Prometheus /metrics address (overrides `metrics`).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// The cluster secret's file, for calling the metadata service and the
    /// nodes (overrides `storage.secret_file`).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// The storage services serve TLS: trust the authority in this PEM
    /// file (overrides `storage.ca`).
    #[arg(long)]
    ca: Option<PathBuf>,
}

/// Where the planner is and who is asking.
#[derive(Args, Debug)]
struct Target {
    #[arg(long, env = "DINGO_PLANNER", default_value = DEFAULT_PLANNER)]
    addr: String,
    /// A client token, or the admin token.
    #[arg(long, env = "DINGO_TOKEN", hide_env_values = true)]
    token: String,
    /// Connect over TLS, trusting the certificate authority in this PEM file.
    #[arg(long, env = "DINGO_PLANNER_CA")]
    ca: Option<PathBuf>,
}

/// A planner client, over TLS when `ca` names the authority to trust.
pub fn connect(addr: &str, token: &str, ca: Option<&std::path::Path>) -> Result<PlannerClient> {
    Ok(match ca {
        Some(ca) => PlannerClient::connect_tls(addr, token, ca)?,
        None => PlannerClient::connect(addr, token)?,
    })
}

#[derive(Subcommand, Debug)]
enum PlannerCommand {
    /// Change the per-quantum budget from the next quantum on (admin token).
    #[command(subcommand)]
    Budget(BudgetCommand),
    /// Outstanding declarations (the caller's, or every client's with the
    /// admin token), the next quantum and its budget.
    Status {
        #[command(flatten)]
        target: Target,
        /// Show these declarations (also finished ones) instead.
        #[arg(long = "declaration")]
        declarations: Vec<u64>,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Deterministic simulation of the service (docs/PLANNER_SERVICE.md):
    /// seeds `--seed` .. `--seed + --seeds`; exits with an error on a violation.
    Dst {
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Steps of the fault phase per seed.
        #[arg(long, default_value_t = dingo_planner_dst::DEFAULT_STEPS)]
        steps: u32,
        /// Print each seed's trace.
        #[arg(long)]
        trace: bool,
    },
}

#[derive(Subcommand, Debug)]
enum BudgetCommand {
    /// Change the budget (persisted; the diurnal curve, if any, still
    /// applies). A limit not given is kept.
    #[command(group(clap::ArgGroup::new("limit").required(true).multiple(true)))]
    Set {
        /// Bytes read from disk per quantum, cluster-wide (e.g. 500MB; 0 = unlimited).
        #[arg(long, group = "limit", value_parser = crate::storage_cmd::parse_size)]
        cluster_bytes: Option<u64>,
        /// Disk-head time per disk per quantum in milliseconds (0 = unlimited).
        #[arg(long, group = "limit")]
        disk_head_time_ms: Option<u64>,
        #[command(flatten)]
        target: Target,
    },
}

pub async fn run(a: PlannerArgs) -> Result<()> {
    match a.command {
        None => {
            let config = a.config.context("--config FILE is required")?;
            let mut cfg = ServiceConfig::load(&config)?;
            cfg.storage = cfg.storage.overridden(a.secret_file, a.ca);
            serve(cfg, a.data, a.listen, a.metrics).await
        }
        Some(PlannerCommand::Budget(BudgetCommand::Set { cluster_bytes, disk_head_time_ms, target })) => {
            let client = connect(&target.addr, &target.token, target.ca.as_deref())?;
            let us = disk_head_time_ms
                .map(|ms| ms.checked_mul(1000).context("--disk-head-time-ms is too large"))
                .transpose()?;
            client.set_budget(cluster_bytes, us).await.with_context(|| format!("planner at {}", target.addr))?;
            let budget = BudgetView::from(client.status(&[]).await?.budget);
            outln!("budget: {budget} per quantum");
            Ok(())
        }
        Some(PlannerCommand::Status { target, declarations, json }) => status(&target, &declarations, json).await,
        Some(PlannerCommand::Dst { seed, seeds, steps, trace }) => dst(seed, seeds, steps, trace),
    }
}

fn dst(first: u64, seeds: u64, steps: u32, trace: bool) -> Result<()> {
    let options = dingo_planner_dst::Options { steps, trace };
    let campaign = dingo_planner_dst::run_seeds(first, seeds, &options, seeds == 1);
    if trace {
        for seed in first..first + seeds {
            let lines = dingo_planner_dst::run_seed(seed, &options).map_or_else(|v| v.trace, |s| s.trace);
            lines.iter().for_each(|line| outln!("{line}"));
        }
    }
    let t = &campaign.totals;
    outln!(
        "{} seeds, {} violations; {} quanta, {} declarations, {} deliveries, {} acks, {} refusals, {} planner crashes, {} client crashes",
        campaign.seeds,
        campaign.violations.len(),
        t.quanta,
        t.declarations,
        t.deliveries_seen,
        t.acks,
        t.refusals,
        t.planner_crashes,
        t.client_crashes
    );
    campaign.violations.iter().for_each(|v| outln!("{v}"));
    anyhow::ensure!(campaign.violations.is_empty(), "the simulation found {} violations", campaign.violations.len());
    Ok(())
}

async fn serve(
    mut cfg: ServiceConfig,
    data: Option<PathBuf>,
    listen: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
) -> Result<()> {
    if let Some(d) = data {
        cfg.data = Some(d);
    }
    if let Some(l) = listen {
        cfg.listen = l.to_string();
    }
    if let Some(m) = metrics {
        cfg.metrics = Some(m.to_string());
    }
    dingo_planner_service::run(cfg, shutdown_signal()).await?;
    Ok(())
}

async fn status(target: &Target, ids: &[u64], json: bool) -> Result<()> {
    let client = connect(&target.addr, &target.token, target.ca.as_deref())?;
    let ids: Vec<_> = ids.iter().map(|&i| dingo_types::DeclarationId(i)).collect();
    let s = client.status(&ids).await.with_context(|| format!("planner at {}", target.addr))?;
    crate::output::print(&StatusView::new(s, dingo_daemon::now_ms()), json)
}
