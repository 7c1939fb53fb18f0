//! The planner service of the demo's declarative run: one task client (with
//! its own random token) per maintenance task.

use super::scenario::Scale;
use anyhow::{Context, Result};

use dingo_cluster::{PlannerProcess, PlannerSpec};
use dingo_planner_service::{BudgetSection, ClientEntry, ServiceConfig};
use dingo_types::TaskKind;
use std::collections::HashMap;
use std::path::Path;

/// A running planner and the tokens of its task clients.
pub struct DemoPlanner {
    process: PlannerProcess,
    tokens: HashMap<TaskKind, String>,
}

fn random_token() -> String {
    (0..32).map(|_| fastrand::alphanumeric()).collect()
}

impl DemoPlanner {
    /// Starts `dingo planner` against the cluster at `meta`, with the
    /// demo's quantum and budget.
    pub fn start(exe: &Path, dir: &Path, meta: &str, scale: &Scale, tasks: &[TaskKind]) -> Result<DemoPlanner> {
        let mut cfg = ServiceConfig::new(&random_token());
        cfg.meta = meta.to_string();
        cfg.quantum_ms = scale.quantum.as_millis() as u64;
        // Dispatch groups spread over the first half of the quantum, so
        // every callback is carried out within the quantum.
        cfg.dispatch_spacing_ms = (scale.quantum.as_millis() as u64 / 20).max(10);
        cfg.pin_grace_ms = scale.quantum.as_millis() as u64;
        cfg.group_cache = format!("{}", scale.pinned_bytes / 4);
        let budget = scale.budget_bytes_per_sec * scale.quantum.as_millis() as u64 / 1000;
        cfg.budget = BudgetSection { cluster_bytes: Some(budget.to_string()), ..BudgetSection::default() };
        let tokens: HashMap<TaskKind, String> = tasks.iter().map(|&t| (t, random_token())).collect();
        cfg.clients =
            tokens.iter().map(|(t, token)| ClientEntry { name: t.name().to_string(), token: token.clone() }).collect();
        let config = dir.join("planner.toml");
        std::fs::write(&config, cfg.to_toml()).with_context(|| format!("cannot write {}", config.display()))?;
        let process = PlannerProcess::start(PlannerSpec {
            exe: exe.to_path_buf(),
            config,
            data: dir.join("planner"),
            log: dir.join("planner.log"),
        })?;
        Ok(DemoPlanner { process, tokens })
    }

    pub fn addr(&self) -> &str {
        self.process.addr()
    }

    pub fn token(&self, task: TaskKind) -> &str {
        &self.tokens[&task]
    }

    /// The planner's `/metrics` page.
    pub async fn metrics(&self) -> Result<String> {
        Ok(dingo_proto::metrics::scrape(self.process.metrics_addr()).await?)
    }
}

/// Free bytes the planner scheduled (reads riding on another task's read),
/// summed over tasks, from its metrics page.
pub fn planned_free_bytes(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("dingo_planner_free_bytes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
