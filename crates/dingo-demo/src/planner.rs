//! The planner service of the demo's declarative run: one task client, with
//! its own random token, per maintenance task.

use crate::{DemoError, Result, Scale};
use dingo_auth::AuthSection;
use dingo_cluster::{PlannerProcess, PlannerSpec};
use dingo_planner_client::PlannerClient;
use dingo_planner_service::{BudgetSection, ClientEntry, ServiceConfig};
use dingo_types::TaskKind;
use std::collections::HashMap;
use std::path::Path;

/// Random bytes per token: 128 bits, written as hex.
const TOKEN_BYTES: usize = 16;

/// Bytes the planner scheduled: from disk (counting against its budget),
/// and free (riding on another task's read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Planned {
    pub disk_bytes: u64,
    pub free_bytes: u64,
}

impl Planned {
    pub fn minus(&self, earlier: &Planned) -> Planned {
        Planned {
            disk_bytes: self.disk_bytes.saturating_sub(earlier.disk_bytes),
            free_bytes: self.free_bytes.saturating_sub(earlier.free_bytes),
        }
    }
}

/// A running planner and the tokens of its task clients.
pub struct DemoPlanner {
    process: PlannerProcess,
    admin_token: String,
    tokens: HashMap<TaskKind, String>,
}

/// A bearer token from the operating system's CSPRNG.
fn random_token() -> Result<String> {
    Ok(dingo_auth::random_hex(TOKEN_BYTES)?)
}

impl DemoPlanner {
    /// Starts `dingo planner` against the cluster at `meta` (reached with
    /// `storage`'s credentials), with the demo's quantum and budget.
    pub fn start(
        exe: &Path,
        dir: &Path,
        (meta, storage): (&str, &AuthSection),
        scale: &Scale,
        tasks: &[TaskKind],
    ) -> Result<DemoPlanner> {
        let admin_token = random_token()?;
        let mut cfg = ServiceConfig::new(&admin_token);
        cfg.meta = meta.to_string();
        let quantum_ms = scale.quantum.as_millis() as u64;
        cfg.quantum_ms = quantum_ms;
        // Dispatch groups spread over the first half of the quantum, so
        // every callback is carried out within the quantum.
        cfg.dispatch_spacing_ms = (quantum_ms / 20).max(10);
        cfg.pin_grace_ms = quantum_ms;
        cfg.group_cache = dingo_types::ByteLimit::Bytes(scale.pinned_bytes / 4);
        let budget = scale.budget_bytes_per_sec * quantum_ms / 1000;
        cfg.budget =
            BudgetSection { cluster_bytes: Some(dingo_types::ByteLimit::Bytes(budget)), ..BudgetSection::default() };
        let tokens = tasks.iter().map(|&t| Ok((t, random_token()?))).collect::<Result<HashMap<TaskKind, String>>>()?;
        cfg.clients =
            tokens.iter().map(|(t, token)| ClientEntry { name: t.name().to_string(), token: token.clone() }).collect();
        let config = dir.join("planner.toml");
        crate::io(|| format!("cannot write {}", config.display()), std::fs::write(&config, cfg.to_toml()))?;
        let process = PlannerProcess::start(PlannerSpec {
            exe: exe.to_path_buf(),
            config,
            data: dir.join("planner"),
            log: dir.join("planner.log"),
            storage: storage.clone(),
        })?;
        Ok(DemoPlanner { process, admin_token, tokens })
    }

    pub fn addr(&self) -> &str {
        self.process.addr()
    }

    /// A client of the planner as `task`'s task client.
    pub fn client(&self, task: TaskKind) -> Result<PlannerClient> {
        Ok(PlannerClient::connect(self.addr(), &self.tokens[&task])?)
    }

    /// What the planner has scheduled so far, summed over tasks, from its
    /// status.
    pub async fn planned(&self) -> Result<Planned> {
        let admin = PlannerClient::connect(self.addr(), &self.admin_token)?;
        let status = admin.status(&[]).await?;
        Ok(Planned { disk_bytes: status.planned_disk_bytes, free_bytes: status.planned_free_bytes })
    }

    /// The planner's online lower bound on the disk bytes the work
    /// declared so far needs.
    pub async fn read_lower_bound_bytes(&self) -> Result<u64> {
        let admin = PlannerClient::connect(self.addr(), &self.admin_token)?;
        Ok(admin.status(&[]).await?.read_lower_bound_bytes)
    }

    /// The planner's `/metrics` page, saved with the outputs for reference.
    pub async fn metrics(&self) -> Result<String> {
        dingo_daemon::metrics::scrape(self.process.metrics_addr())
            .await
            .map_err(|source| DemoError::Io { what: "cannot read the planner's metrics".into(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_hex_and_differ() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 2 * TOKEN_BYTES);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
