//! What a run of one job did, in the same terms for both modes.

use crate::work::{ActionError, Job, Outcome, Progress};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Asks a running job to stop. Cheap to clone; all clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag raised once `signal` completes (a shutdown signal, say),
    /// by a task on the current tokio runtime.
    pub fn raised_by(signal: impl Future<Output = ()> + Send + 'static) -> CancelFlag {
        let flag = CancelFlag::default();
        let raise = flag.clone();
        tokio::spawn(async move {
            signal.await;
            raise.cancel();
        });
        flag
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Errors kept per job report; later ones are only counted.
const MAX_ERRORS_KEPT: usize = 20;
/// Inconsistencies kept per job report; later ones are only counted.
const MAX_FINDINGS_KEPT: usize = 200;

/// Who schedules a job's reads: the task itself, at its own pace
/// (imperative), or the planner, through declarations (declarative). The
/// simulator's `Mode` adds a modelled lower bound to these two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduling {
    Imperative,
    Declarative,
}

impl fmt::Display for Scheduling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scheduling::Imperative => "imperative",
            Scheduling::Declarative => "declarative",
        })
    }
}

impl std::str::FromStr for Scheduling {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "imperative" => Ok(Scheduling::Imperative),
            "declarative" => Ok(Scheduling::Declarative),
            _ => Err(format!("unknown mode `{s}`; expected imperative or declarative")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobReport {
    pub task: String,
    pub label: String,
    pub mode: Scheduling,
    /// Items the job had to complete.
    pub items_needed: u64,
    /// Items carried out.
    pub items_done: u64,
    /// Items whose data was deleted before they ran (nothing to do).
    pub items_skipped: u64,
    /// Corrupt chunks found and rebuilt.
    pub repaired: u64,
    pub failed: u64,
    pub errors: Vec<String>,
    /// Inconsistencies found and left as they are (fsck), all counted.
    pub inconsistencies: u64,
    /// The first of them, each saying what and where.
    pub findings: Vec<String>,
    /// Bytes the task read, from disk or cache.
    pub logical_bytes: u64,
    /// Bytes the storage nodes read from their disks for this task's IO
    /// class during the whole run that carried this job out (`dingo task`:
    /// all its jobs, which run at once), summed over the nodes; `None` when
    /// not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_disk_bytes: Option<u64>,
    pub written_bytes: u64,
    /// Logical bytes of dead records dropped (garbage collection).
    pub freed_bytes: u64,
    pub started_ms: u64,
    /// When the last needed item completed; `None` while unfinished.
    pub finished_ms: Option<u64>,
    pub deadline_ms: u64,
    /// Planner declaration (declarative mode).
    pub declaration: Option<u64>,
    pub callbacks: u64,
    pub overloaded_callbacks: u64,
    /// Stopped on purpose before completion (e.g. the disk being scrubbed
    /// died); what it had done counts, the rest is moot.
    pub cancelled: bool,
    /// The job's progress handle, if it has one.
    #[serde(skip)]
    pub progress: Option<Progress>,
}

impl JobReport {
    pub fn new(job: &Job, mode: Scheduling, started_ms: u64) -> Self {
        JobReport {
            task: job.task.name().to_string(),
            label: job.label.clone(),
            mode,
            items_needed: job.needed(),
            items_done: 0,
            items_skipped: 0,
            repaired: 0,
            failed: 0,
            errors: Vec::new(),
            inconsistencies: 0,
            findings: Vec::new(),
            logical_bytes: 0,
            run_disk_bytes: None,
            written_bytes: 0,
            freed_bytes: 0,
            started_ms,
            finished_ms: None,
            deadline_ms: job.deadline_ms,
            declaration: None,
            callbacks: 0,
            overloaded_callbacks: 0,
            cancelled: false,
            progress: job.progress.clone(),
        }
    }

    pub fn record(&mut self, result: Result<Outcome, ActionError>) {
        if let Some(p) = &self.progress {
            p.add(1, result.as_ref().map_or(0, |o| o.logical_bytes));
        }
        match result {
            Ok(o) => {
                self.logical_bytes += o.logical_bytes;
                self.written_bytes += o.written_bytes;
                self.freed_bytes += o.freed_bytes;
                self.repaired += o.repaired;
                self.inconsistencies += o.findings.len() as u64;
                let room = MAX_FINDINGS_KEPT.saturating_sub(self.findings.len());
                self.findings.extend(o.findings.into_iter().take(room));
                if o.skipped {
                    self.items_skipped += 1;
                } else {
                    self.items_done += 1;
                }
            }
            Err(e) => {
                self.failed += 1;
                if self.errors.len() < MAX_ERRORS_KEPT {
                    self.errors.push(e.to_string());
                }
            }
        }
    }

    /// Finished after its deadline, or not at all (unless cancelled).
    pub fn missed_deadline(&self) -> bool {
        !self.cancelled && self.finished_ms.is_none_or(|f| f > self.deadline_ms)
    }

    /// Every needed item was done or found deleted, without failures; or
    /// the job was cancelled on purpose.
    pub fn complete(&self) -> bool {
        self.cancelled || (self.finished_ms.is_some() && self.failed == 0)
    }
}

/// Bytes each live node has read from its disks for `task`'s IO class so
/// far, by node address (a sample for [`disk_bytes_between`]). Nodes that
/// do not answer are left out.
pub async fn class_disk_bytes(
    client: &dingo_client::Client,
    task: dingo_types::TaskKind,
) -> Result<std::collections::HashMap<String, u64>, dingo_client::ClientError> {
    let status = client.cluster_status().await?;
    let mut out = std::collections::HashMap::new();
    for n in status.nodes.iter().filter(|n| n.alive) {
        match client.node_stats(&n.addr).await {
            Ok(s) => {
                let bytes =
                    s.disks.iter().flat_map(|d| &d.classes).filter(|c| c.class_name == task.name()).map(|c| c.bytes);
                out.insert(n.addr.clone(), bytes.sum());
            }
            Err(e) => tracing::debug!(node = %n.addr, "no disk counters: {e}"),
        }
    }
    Ok(out)
}

/// Disk bytes read between two samples of [`class_disk_bytes`], summed
/// over the nodes in the second: a node new since the first (or restarted,
/// its counter reset) counts from zero; a node gone since is left out.
pub fn disk_bytes_between(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
) -> u64 {
    after
        .iter()
        .map(|(node, &a)| match before.get(node) {
            Some(&b) if b <= a => a - b,
            _ => a,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flag_is_raised_when_its_signal_completes() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let flag = CancelFlag::raised_by(async move {
            let _ = rx.await;
        });
        tokio::task::yield_now().await;
        assert!(!flag.is_cancelled());
        tx.send(()).unwrap();
        for _ in 0..100 {
            if flag.is_cancelled() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the flag was not raised");
    }

    #[test]
    fn disk_bytes_count_each_node_from_its_first_sample() {
        let sample = |v: &[(&str, u64)]| v.iter().map(|(n, b)| (n.to_string(), *b)).collect();
        let before = sample(&[("a", 100), ("b", 50), ("gone", 70)]);
        // a read 20; b restarted (counter reset) and read 10; c is new.
        let after = sample(&[("a", 120), ("b", 10), ("c", 5)]);
        assert_eq!(disk_bytes_between(&before, &after), 20 + 10 + 5);
    }
}
