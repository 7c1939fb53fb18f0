//! The maintenance supervisor (`dingo maintain`): a long-running loop that
//! runs the maintenance tasks when the cluster needs them, with no command
//! typed:
//!
//! - **reconstruction** whenever chunks are lost (a disk or node marked
//!   DEAD, by an operator or by the metadata service after missed
//!   heartbeats) or reported corrupt or missing by their nodes;
//! - **rebalancing** when a node joins (a live node not seen before);
//! - **draining**: every chunk on a DRAINING disk or node is moved off it
//!   (the rebalancing move), after which the metadata service marks it
//!   DECOMMISSIONED;
//! - **scrubbing** of every live disk every `scrub_every`.
//!
//! Jobs go through the IO Planner when one is configured (declaratively),
//! else run imperatively at full speed. What the supervisor knows (nodes
//! seen, when it last scrubbed, the last jobs and totals) is kept in a JSON
//! state file, replaced atomically after every job, so a restart neither
//! re-scrubs at once nor forgets which nodes are new.

use crate::declarative::Agent;
use crate::report::{CancelFlag, JobReport};
use crate::{Job, imperative, plan};
use dingo_client::{Client, ClientError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Jobs kept in the state file's history.
const HISTORY: usize = 50;

/// How the supervisor runs; with the `clap` feature, also `dingo
/// maintain`'s flags.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SupervisorConfig {
    /// How often to look at the cluster, e.g. 5s.
    #[cfg_attr(feature = "clap", arg(long, default_value = "5s", value_parser = dingo_types::parse_duration))]
    pub interval: Duration,
    /// Scrub every live disk this often, e.g. 7d.
    #[cfg_attr(feature = "clap", arg(long, default_value = "7d", value_parser = dingo_types::parse_duration))]
    pub scrub_every: Duration,
    /// Deadline given to each job (the planner paces declared work to it).
    #[cfg_attr(feature = "clap", arg(long, default_value = "1h", value_parser = dingo_types::parse_duration))]
    pub job_deadline: Duration,
    /// Rebalance disks this fraction above the mean utilisation.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.1))]
    pub rebalance_threshold: f64,
    /// State file (nodes seen, last scrub, job history); kept across restarts.
    #[cfg_attr(feature = "clap", arg(long = "state", default_value = "dingo-maintain.json"))]
    pub state_file: PathBuf,
}

impl SupervisorConfig {
    /// An error naming the first period that is zero (a zero interval
    /// would spin; a zero scrub period or deadline means nothing).
    pub fn check(&self) -> Result<(), SupervisorError> {
        let periods =
            [("--interval", self.interval), ("--scrub-every", self.scrub_every), ("--job-deadline", self.job_deadline)];
        match periods.into_iter().find(|(_, d)| d.is_zero()) {
            Some((name, _)) => Err(SupervisorError::Config(format!("{name} must be positive"))),
            None => Ok(()),
        }
    }
}

/// What the supervisor remembers across restarts.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SupervisorState {
    /// Nodes seen live so far (a node not in it is new).
    pub known_nodes: Vec<u32>,
    /// When the last scrub of every disk started, unix ms (0: never).
    pub last_scrub_ms: u64,
    /// Jobs completed per task.
    pub jobs: BTreeMap<String, u64>,
    /// Chunks rebuilt, moved or repaired per task.
    pub items: BTreeMap<String, u64>,
    /// The last jobs, newest last.
    pub history: Vec<HistoryEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HistoryEntry {
    pub task: String,
    pub label: String,
    /// Why it ran: "lost chunks", "new node 5", "schedule".
    pub reason: String,
    pub started_ms: u64,
    pub finished_ms: Option<u64>,
    pub items_done: u64,
    pub failed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("state file {path}: {detail}")]
    State { path: PathBuf, detail: String },
    #[error("{0}")]
    Config(String),
}

impl SupervisorState {
    /// Loads the state file; a missing file is a fresh state.
    pub fn load(path: &Path) -> Result<Self, SupervisorError> {
        let err = |detail: String| SupervisorError::State { path: path.to_path_buf(), detail };
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| err(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// Writes the state file atomically (temporary file, fsync, rename).
    pub fn save(&self, path: &Path) -> Result<(), SupervisorError> {
        let err = |detail: String| SupervisorError::State { path: path.to_path_buf(), detail };
        let tmp = path.with_extension("tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| err(e.to_string()))?;
        (|| {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })()
        .map_err(|e| err(e.to_string()))
    }

    fn record(&mut self, reason: &str, r: &JobReport) {
        *self.jobs.entry(r.task.clone()).or_default() += 1;
        *self.items.entry(r.task.clone()).or_default() += r.items_done;
        self.history.push(HistoryEntry {
            task: r.task.clone(),
            label: r.label.clone(),
            reason: reason.to_string(),
            started_ms: r.started_ms,
            finished_ms: r.finished_ms,
            items_done: r.items_done,
            failed: r.failed,
        });
        let excess = self.history.len().saturating_sub(HISTORY);
        self.history.drain(..excess);
    }
}

/// Runs the supervisor until `cancel` is set. `agent`: the planner's task
/// client (declarative mode); `None`: imperative. `on_report` sees every
/// finished job.
pub async fn run(
    client: &Client,
    agent: Option<&Agent>,
    cfg: &SupervisorConfig,
    cancel: &CancelFlag,
    mut on_report: impl FnMut(&str, &JobReport),
) -> Result<(), SupervisorError> {
    cfg.check()?;
    let mut state = SupervisorState::load(&cfg.state_file)?;
    if state.last_scrub_ms == 0 {
        // The first scrub is due one period after the supervisor first ran.
        state.last_scrub_ms = dingo_daemon::now_ms();
        state.save(&cfg.state_file)?;
    }
    while !cancel.is_cancelled() {
        match step(client, agent, cfg, cancel, &mut state, &mut on_report).await {
            Ok(()) => {}
            // The metadata service may be restarting: try again next round.
            Err(SupervisorError::Client(e)) => tracing::warn!("maintenance round failed: {e}"),
            Err(e) => return Err(e),
        }
        let mut waited = Duration::ZERO;
        while waited < cfg.interval && !cancel.is_cancelled() {
            let step = Duration::from_millis(200).min(cfg.interval - waited);
            tokio::time::sleep(step).await;
            waited += step;
        }
    }
    Ok(())
}

/// One look at the cluster: runs what is due, in order of urgency.
async fn step(
    client: &Client,
    agent: Option<&Agent>,
    cfg: &SupervisorConfig,
    cancel: &CancelFlag,
    state: &mut SupervisorState,
    on_report: &mut impl FnMut(&str, &JobReport),
) -> Result<(), SupervisorError> {
    let deadline_ms = || dingo_daemon::now_ms() + cfg.job_deadline.as_millis() as u64;
    let mut due: Vec<(String, Job)> = Vec::new();
    if !client.lost_chunks().await?.is_empty() {
        let job = plan::reconstruction(client, "lost chunks", deadline_ms()).await?;
        if !job.items.is_empty() {
            due.push(("lost chunks".into(), job));
        }
    }
    let status = client.cluster_status().await?;
    if let Some(job) = plan::draining(client, &status, deadline_ms()).await? {
        due.push(("draining".into(), job));
    }
    let live: Vec<u32> =
        status.nodes.iter().filter(|n| n.alive && n.state() != dingo_client::DeviceState::Dead).map(|n| n.id).collect();
    let new: Vec<u32> = live.iter().copied().filter(|n| !state.known_nodes.contains(n)).collect();
    if !new.is_empty() {
        let first_look = state.known_nodes.is_empty();
        state.known_nodes.extend(&new);
        state.known_nodes.sort_unstable();
        state.save(&cfg.state_file)?;
        if !first_look {
            let reason = format!("new node(s) {new:?}");
            if let Some(job) = plan::rebalancing(client, cfg.rebalance_threshold, 1, deadline_ms()).await? {
                due.push((reason, job));
            }
        }
    }
    if dingo_daemon::now_ms().saturating_sub(state.last_scrub_ms) >= cfg.scrub_every.as_millis() as u64 {
        state.last_scrub_ms = dingo_daemon::now_ms();
        state.save(&cfg.state_file)?;
        for job in plan::scrubbing(client, deadline_ms()).await? {
            due.push(("schedule".into(), job));
        }
    }
    for (reason, job) in due {
        if cancel.is_cancelled() {
            break;
        }
        tracing::info!(task = job.task.name(), label = %job.label, items = job.items.len(), %reason, "maintenance job");
        let report = match agent {
            // At full speed: the supervisor's work is due now.
            None => imperative::run(client, &job, dingo_daemon::now_ms(), cancel).await,
            Some(agent) => match agent.submit(job, cancel.clone()).await.await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    tracing::warn!("the planner did not take the job: {e}");
                    continue;
                }
                Err(_) => {
                    tracing::warn!("the planner agent stopped");
                    continue;
                }
            },
        };
        state.record(&reason, &report);
        state.save(&cfg.state_file)?;
        on_report(&reason, &report);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_a_restart_and_keeps_a_bounded_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("maintain.json");
        assert_eq!(SupervisorState::load(&path).unwrap(), SupervisorState::default());
        let mut s = SupervisorState { known_nodes: vec![1, 2], last_scrub_ms: 7, ..Default::default() };
        let job = Job::new(
            dingo_types::TaskKind::Reconstruction,
            "lost chunks".into(),
            Vec::new(),
            crate::Declared::Items,
            0,
        );
        let mut r = JobReport::new(&job, crate::Scheduling::Imperative, 1);
        r.items_done = 3;
        for _ in 0..HISTORY + 5 {
            s.record("lost chunks", &r);
        }
        s.save(&path).unwrap();
        let back = SupervisorState::load(&path).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.history.len(), HISTORY);
        assert_eq!(back.items["reconstruction"], 3 * (HISTORY as u64 + 5));
        std::fs::write(&path, "{").unwrap();
        assert!(SupervisorState::load(&path).unwrap_err().to_string().contains("maintain.json"));
    }

    #[test]
    fn a_zero_period_is_refused_by_its_flag() {
        let cfg = SupervisorConfig {
            interval: Duration::from_secs(5),
            scrub_every: Duration::from_secs(60),
            job_deadline: Duration::from_secs(60),
            rebalance_threshold: 0.1,
            state_file: "m.json".into(),
        };
        assert!(cfg.check().is_ok());
        let zero = SupervisorConfig { scrub_every: Duration::ZERO, ..cfg.clone() };
        assert_eq!(zero.check().unwrap_err().to_string(), "--scrub-every must be positive");
        let zero = SupervisorConfig { interval: Duration::ZERO, ..cfg };
        assert_eq!(zero.check().unwrap_err().to_string(), "--interval must be positive");
    }
}
