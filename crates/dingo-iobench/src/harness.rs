//! What every IO-control experiment takes and how the ones that compare two
//! policies run them: in turn, run by run, so that load from other
//! processes on a shared machine falls on both alike.

use crate::BenchError;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// The options the experiments share.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `dingo` executable the clusters run.
    pub exe: PathBuf,
    /// Where cluster data goes (a temporary directory inside).
    pub work_dir: PathBuf,
    /// The short form of the experiment (the same shape, less time).
    pub quick: bool,
    /// Runs per policy; figures are medians over them. fg-tail and steering
    /// run them one after another, waiting and fairness side by side on
    /// separate disks of one cluster.
    pub runs: u32,
    /// Seeds the load; run `r` uses `seed + r`. fairness's load is
    /// closed-loop and needs none.
    pub seed: u64,
}

impl Options {
    /// A fresh directory for the experiment's clusters, removed when dropped.
    pub(crate) fn work(&self, prefix: &str) -> Result<TempDir, BenchError> {
        if self.runs == 0 {
            return Err(BenchError::Setup("an experiment needs at least one run".into()));
        }
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&self.work_dir)
            .map_err(BenchError::io(format!("cannot create a directory in {}", self.work_dir.display())))
    }
}

/// One policy's runs: what each measured and the machine's CPU utilisation
/// meanwhile.
pub struct PolicyRuns<S> {
    pub summaries: Vec<S>,
    pub cpu_utilisation: Vec<f64>,
}

/// Runs `one_run(policy, seed, dir)` `opts.runs` times for each of the two
/// policies, alternating, each in a fresh directory under `work` that is
/// removed after (cluster data is large). `describe` turns a run's result
/// and CPU utilisation into a progress line.
pub(crate) async fn alternate<P: Copy, S>(
    opts: &Options,
    work: &Path,
    policies: [(P, &str); 2],
    duration_s: u64,
    mut one_run: impl AsyncFnMut(P, u64, &Path) -> Result<(S, f64), BenchError>,
    describe: impl Fn(&S, f64) -> String,
    progress: &mut impl FnMut(&str),
) -> Result<[PolicyRuns<S>; 2], BenchError> {
    let mut out = [(); 2].map(|_| PolicyRuns { summaries: Vec::new(), cpu_utilisation: Vec::new() });
    for run in 0..opts.runs {
        for (p, &(policy, name)) in policies.iter().enumerate() {
            progress(&format!("run {}/{} {name}: {duration_s} s of load", run + 1, opts.runs));
            let dir = work.join(format!("{name}-{run}"));
            let (summary, cpu) = one_run(policy, opts.seed + u64::from(run), &dir).await?;
            progress(&describe(&summary, cpu));
            out[p].summaries.push(summary);
            out[p].cpu_utilisation.push(cpu);
            // Cluster data is large; free it before the next run.
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(out)
}
