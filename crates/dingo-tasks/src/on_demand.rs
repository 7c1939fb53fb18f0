//! One task run on demand (`dingo task`): choosing its jobs, running them
//! in either mode while the nodes count the disk bytes they read, and
//! judging the reports.

use crate::declarative::{Agent, DeclarativeError};
use crate::georep::{GeorepConfig, GeorepError, RemoteSite};
use crate::report::{CancelFlag, JobReport};
use crate::work::{Job, Progress};
use crate::{imperative, plan, report};
use dingo_client::{Client, ClientError, Redundancy};
use dingo_planner_client::PlannerClient;
use dingo_types::DiskId;
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OnDemandError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Agent(#[from] DeclarativeError),
    #[error(transparent)]
    Georep(#[from] GeorepError),
    #[error("some of the disks {} are unknown or not alive", disk_list(.0))]
    UnknownDisks(Vec<DiskId>),
    #[error("some work failed; see the reports")]
    WorkFailed,
    #[error("{task} found {count} inconsistenc{}; see the reports", if *count == 1 { "y" } else { "ies" })]
    Inconsistent { task: String, count: u64 },
}

/// `[1, 2]`, as the error has always said it.
fn disk_list(disks: &[DiskId]) -> String {
    format!("{:?}", disks.iter().map(|d| d.0).collect::<Vec<_>>())
}

/// Scrubbing of `disks`, or of every live disk when empty.
pub async fn scrub_disks(client: &Client, disks: &[DiskId], deadline_ms: u64) -> Result<Vec<Job>, OnDemandError> {
    let all = plan::scrubbing(client, deadline_ms).await?;
    if disks.is_empty() {
        return Ok(all);
    }
    let wanted: Vec<String> = disks.iter().map(DiskId::to_string).collect();
    let jobs: Vec<Job> = all.into_iter().filter(|j| wanted.contains(&j.label)).collect();
    if jobs.len() != disks.len() {
        return Err(OnDemandError::UnknownDisks(disks.to_vec()));
    }
    Ok(jobs)
}

/// Transcoding of the sealed files under `prefix` to `to`, each written as
/// `<path><suffix>`; files already ending in `suffix` are left alone.
pub async fn transcode_prefix(
    client: &Client,
    prefix: &str,
    to: Redundancy,
    suffix: &str,
    deadline_ms: u64,
) -> Result<Job, ClientError> {
    let files: Vec<(String, String)> = client
        .list(prefix)
        .await?
        .into_iter()
        .filter(|f| f.sealed && !f.path.ends_with(suffix))
        .map(|f| (f.path.clone(), format!("{}{suffix}", f.path)))
        .collect();
    plan::transcoding(client, &files, to, prefix, deadline_ms).await
}

/// Georeplication as `config` says: connects to the remote site (an error
/// if it does not answer, before any progress is recorded), then plans the
/// files not yet copied there.
pub async fn georeplication(client: &Client, config: &GeorepConfig, deadline_ms: u64) -> Result<Job, OnDemandError> {
    let site = Arc::new(RemoteSite::connect(config).await?);
    Ok(plan::georeplication(client, &site, &config.prefix, config.pick, deadline_ms).await?)
}

/// How much work a list of jobs holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// Items the jobs need done.
    pub items: u64,
    /// Bytes those items read.
    pub bytes: u64,
}

impl Workload {
    pub fn of(jobs: &[Job]) -> Workload {
        Workload {
            items: jobs.iter().map(Job::needed).sum(),
            bytes: jobs.iter().flat_map(|j| j.items.iter().take(j.needed() as usize)).map(|i| i.bytes).sum(),
        }
    }
}

/// One progress counter shared by all `jobs`.
pub fn track(jobs: &mut [Job]) -> Progress {
    let progress = Progress::default();
    for j in jobs {
        j.progress = Some(progress.clone());
    }
    progress
}

/// Which mode runs the jobs.
pub enum Driver {
    /// Each job paced to finish at this unix millisecond.
    Imperative { finish_by_ms: u64 },
    /// Declared through this planner task client.
    Declarative(PlannerClient),
}

/// Runs `jobs` (all of one task) to the end; each report carries the disk
/// bytes the nodes read for the task's IO class during the whole run.
pub async fn run_jobs(client: &Client, jobs: Vec<Job>, driver: Driver) -> Result<Vec<JobReport>, OnDemandError> {
    let Some(task) = jobs.first().map(|j| j.task) else { return Ok(Vec::new()) };
    let before = report::class_disk_bytes(client, task).await?;
    let mut reports = match driver {
        Driver::Imperative { finish_by_ms } => {
            let cancel = CancelFlag::default();
            futures::future::join_all(jobs.iter().map(|j| imperative::run(client, j, finish_by_ms, &cancel))).await
        }
        Driver::Declarative(planner) => {
            let agent = Agent::spawn(client.clone(), planner, 0);
            let mut handles = Vec::with_capacity(jobs.len());
            for job in jobs {
                handles.push(agent.submit(job, CancelFlag::default()).await);
            }
            let mut reports = Vec::new();
            for h in handles {
                reports.push(h.await.map_err(|_| DeclarativeError::Stopped)??);
            }
            reports
        }
    };
    let disk_bytes = report::disk_bytes_between(&before, &report::class_disk_bytes(client, task).await?);
    for r in &mut reports {
        r.run_disk_bytes = Some(disk_bytes);
    }
    Ok(reports)
}

/// An error if any job left work undone, or found inconsistencies.
pub fn verdict(reports: &[JobReport]) -> Result<(), OnDemandError> {
    if !reports.iter().all(JobReport::complete) {
        return Err(OnDemandError::WorkFailed);
    }
    let count: u64 = reports.iter().map(|r| r.inconsistencies).sum();
    match reports.first() {
        Some(r) if count > 0 => Err(OnDemandError::Inconsistent { task: r.task.clone(), count }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, Declared, WorkItem, work::set_of};
    use dingo_types::{BlockId, ChunkRef, TaskKind};

    fn job(items: u64, sets_needed: Option<u64>) -> Job {
        let items = (0..items)
            .map(|b| {
                let action = Action::Move(ChunkRef { block: BlockId(b), copy: 0 });
                WorkItem { set: set_of(&action, &[]), action, bytes: 10 * (b + 1) }
            })
            .collect();
        Job { sets_needed, ..Job::new(TaskKind::Fsck, "j".into(), items, Declared::Items, 0) }
    }

    #[test]
    fn bytes_needed_counts_the_first_items_that_total_them() {
        // Items of 10, 20, 30, 40, 50 bytes.
        let needs = |bytes| Job { sets_needed: None, bytes_needed: Some(bytes), ..job(5, None) }.needed();
        assert_eq!((needs(1), needs(10), needs(11), needs(30), needs(31), needs(150)), (1, 1, 2, 2, 3, 5));
        assert!(Job { bytes_needed: Some(1), ..job(5, None) }.is_flexible() && !job(5, None).is_flexible());
    }

    #[test]
    fn workload_counts_only_the_items_needed() {
        let w = Workload::of(&[job(3, None), job(3, Some(2))]);
        assert_eq!(w, Workload { items: 5, bytes: 60 + 30 });
        let mut jobs = [job(1, None), job(1, None)];
        let progress = track(&mut jobs);
        assert!(jobs.iter().all(|j| j.progress.is_some()));
        assert_eq!(progress.items(), 0);
    }

    #[test]
    fn verdict_names_failures_then_inconsistencies() {
        let j = job(1, None);
        let mut done = JobReport::new(&j, crate::Scheduling::Imperative, 0);
        done.items_done = 1;
        done.finished_ms = Some(1);
        assert!(verdict(&[done.clone()]).is_ok());
        let mut found = done.clone();
        found.inconsistencies = 2;
        let e = verdict(&[done.clone(), found]).unwrap_err().to_string();
        assert_eq!(e, "fsck found 2 inconsistencies; see the reports");
        let undone = JobReport::new(&j, crate::Scheduling::Imperative, 0);
        assert!(matches!(verdict(&[done, undone]), Err(OnDemandError::WorkFailed)));
    }
}
