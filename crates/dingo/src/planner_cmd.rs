//! `dingo planner`: runs the IO Planner service (`--config FILE`), talks to
//! a running one (`budget set`, `status`), or simulates it (`dst`).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use dingo_daemon::shutdown_signal;
use dingo_planner_client::{BudgetChange, PlannerTarget, StatusView};
use dingo_planner_service::{ServiceConfig, ServiceOverrides};
use dingo_types::DeclarationId;
use std::path::PathBuf;

/// The service's flags override its config file; `--secret-file` and
/// `--ca` override its `[storage]` table (how it calls the metadata
/// service and the nodes).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PlannerArgs {
    #[command(subcommand)]
    command: Option<PlannerCommand>,
    /// The service's TOML config (see docs/PLANNER_SERVICE.md).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    #[command(flatten)]
    overrides: ServiceOverrides,
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
        target: PlannerTarget,
        /// Show these declarations (also finished ones) instead.
        #[arg(long = "declaration")]
        declarations: Vec<DeclarationId>,
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
        /// Seeds run at once (default: the machine's cores); the output does not depend on it.
        #[arg(long)]
        jobs: Option<std::num::NonZeroUsize>,
        #[command(flatten)]
        options: dingo_planner_dst::Options,
    },
}

#[derive(Subcommand, Debug)]
enum BudgetCommand {
    /// Change the budget (persisted; the diurnal curve, if any, still
    /// applies). A limit not given is kept.
    Set {
        #[command(flatten)]
        change: BudgetChange,
        #[command(flatten)]
        target: PlannerTarget,
    },
}

pub async fn run(a: PlannerArgs) -> Result<()> {
    match a.command {
        None => {
            let cfg = ServiceConfig::load(&a.config.context("--config FILE is required")?)?;
            dingo_planner_service::run(cfg.overridden(&a.overrides), shutdown_signal()).await?;
            Ok(())
        }
        Some(PlannerCommand::Budget(BudgetCommand::Set { change, target })) => {
            let budget = target.connect()?.change_budget(&change).await;
            outln!("budget: {} per quantum", budget.with_context(|| format!("planner at {}", target.addr()))?);
            Ok(())
        }
        Some(PlannerCommand::Status { target, declarations, json }) => {
            let status = target.connect()?.status(&declarations).await;
            let status = status.with_context(|| format!("planner at {}", target.addr()))?;
            crate::output::print(&StatusView::new(status, dingo_daemon::now_ms()), json)
        }
        Some(PlannerCommand::Dst { seed, seeds, jobs, options }) => {
            let jobs = dingo_sim::sweep::jobs_or_cores(jobs);
            let campaign = dingo_planner_dst::run_seeds(seed, seeds, &options, seeds == 1, jobs);
            campaign.trace.iter().for_each(|line| outln!("{line}"));
            crate::output::write_stdout(format_args!("{campaign}"));
            let violations = campaign.violations.len();
            anyhow::ensure!(violations == 0, "the simulation found {violations} violations");
            Ok(())
        }
    }
}
