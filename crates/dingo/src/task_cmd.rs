//! `dingo task <name>`: run one maintenance task against a cluster, either
//! imperatively at its own pace or declaratively through the planner
//! service. Prints one JSON report per job.

use anyhow::Result;
use dingo_client::{Client, Redundancy};
use dingo_tasks::on_demand::{self, Driver, Workload};
use dingo_tasks::plan::FilePick;
use dingo_tasks::{Job, Mode, imperative, plan};
use dingo_types::format_bytes;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub task: TaskName,
    /// imperative or declarative.
    #[arg(long, global = true, default_value = "imperative")]
    pub mode: Mode,
    /// Metadata service address.
    #[arg(long, global = true, env = "DINGO_META", default_value = crate::storage_cmd::DEFAULT_META)]
    pub meta: String,
    /// Planner service address (declarative mode).
    #[arg(long, global = true, env = "DINGO_PLANNER", default_value = crate::planner_cmd::DEFAULT_PLANNER)]
    pub planner: String,
    /// This task client's token (declarative mode).
    #[arg(long, global = true, env = "DINGO_TOKEN", hide_env_values = true, default_value = "")]
    pub token: String,
    /// Reach the planner over TLS, trusting the authority in this PEM file.
    #[arg(long, global = true, env = "DINGO_PLANNER_CA")]
    pub planner_ca: Option<std::path::PathBuf>,
    /// The storage services' credentials.
    #[command(flatten)]
    pub access: crate::storage_cmd::AccessArgs,
    /// Time allowed for the work, e.g. 90s, 30m, 2h.
    #[arg(long, global = true, default_value = "1h", value_parser = parse_duration)]
    pub deadline: Duration,
}

/// Subcommands are verbs; each also answers to its task's name in the
/// planner, reports and metrics (`scrubbing`, `garbage-collection`, ...).
#[derive(clap::Subcommand, Debug)]
pub enum TaskName {
    /// Verify every chunk of the given disks (all live disks by default),
    /// that exact copy; rebuild corrupt chunks from redundancy.
    #[command(visible_alias = "scrubbing")]
    Scrub {
        #[arg(long = "disk")]
        disks: Vec<u32>,
    },
    /// Rebuild every chunk lost on dead disks or nodes.
    #[command(visible_alias = "reconstruction")]
    Reconstruct,
    /// Move chunks from disks above the mean utilisation to those below.
    #[command(visible_alias = "rebalancing")]
    Rebalance {
        /// How far above (or below) the mean a disk must be, as a fraction.
        #[arg(long, default_value_t = 0.1)]
        threshold: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Re-encode the files under a prefix (e.g. replicated → RS), writing
    /// each as `<path><suffix>` and deleting the original.
    #[command(visible_alias = "transcoding")]
    Transcode {
        #[arg(long)]
        prefix: String,
        #[arg(long, default_value = "ec:6+3", value_parser = str::parse::<Redundancy>)]
        to: Redundancy,
        #[arg(long, default_value = ".rs")]
        suffix: String,
    },
    /// Read every data block of the files under a prefix (any copy),
    /// verifying checksums; rebuild a bad copy from a good one.
    #[command(visible_alias = "file-scrubbing")]
    FileScrub {
        /// Files whose path starts with this.
        #[arg(long)]
        prefix: String,
        #[command(flatten)]
        pick: PickArgs,
    },
    /// Check the files under a prefix against the metadata (blocks, copies,
    /// stripes, sizes), reading their first blocks and checking what the
    /// nodes hold (length, checksums); reports what does not match and
    /// exits with an error if anything does. Repairs nothing.
    Fsck {
        /// Files whose path starts with this.
        #[arg(long)]
        prefix: String,
        /// Data blocks read per file (at least 1).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
        blocks: u16,
        #[command(flatten)]
        pick: PickArgs,
    },
    /// Garbage-collect an object-store area (AREA/data/ record files,
    /// AREA/deleted/ tombstones; docs/STORAGE.md): each data file is read,
    /// its live records rewritten to a new file, and the old one deleted.
    #[command(visible_alias = "garbage-collection")]
    Gc {
        /// The area's path prefix (its files are AREA/data/* and AREA/deleted/*).
        #[arg(long)]
        area: String,
        #[command(flatten)]
        pick: PickArgs,
    },
}

/// Which files a file-level task takes.
#[derive(clap::Args, Debug)]
pub struct PickArgs {
    /// Take this many files chosen at random instead of every file.
    #[arg(long)]
    files: Option<usize>,
    /// Seed of the random choice of --files.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl PickArgs {
    fn pick(&self) -> FilePick {
        FilePick { sample: self.files, seed: self.seed }
    }
}

/// Accepts `90s`, `30m`, `2h`, `1d` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("invalid duration `{s}`; expected e.g. 90s, 30m, 2h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => return Err(format!("invalid duration unit in `{s}`; use s, m, h or d")),
    };
    Ok(Duration::from_secs(secs))
}

pub async fn run(a: TaskArgs) -> Result<()> {
    let client = Client::new(&a.meta, &a.access.access()?)?;
    let deadline_ms = dingo_daemon::now_ms() + a.deadline.as_millis() as u64;
    let mut jobs: Vec<Job> = match &a.task {
        TaskName::Scrub { disks } => on_demand::scrub_disks(&client, disks, deadline_ms).await?,
        TaskName::Reconstruct => vec![plan::reconstruction(&client, "lost chunks", deadline_ms).await?],
        TaskName::Rebalance { threshold, seed } => {
            plan::rebalancing(&client, *threshold, *seed, deadline_ms).await?.into_iter().collect()
        }
        TaskName::Transcode { prefix, to, suffix } => {
            vec![on_demand::transcode_prefix(&client, prefix, *to, suffix, deadline_ms).await?]
        }
        TaskName::FileScrub { prefix, pick } => {
            vec![plan::file_scrubbing(&client, prefix, pick.pick(), deadline_ms).await?]
        }
        TaskName::Fsck { prefix, blocks, pick } => {
            vec![plan::fsck(&client, prefix, pick.pick(), usize::from(*blocks), deadline_ms).await?]
        }
        TaskName::Gc { area, pick } => vec![plan::garbage_collection(&client, area, pick.pick(), deadline_ms).await?],
    };
    if jobs.is_empty() {
        eprintln!("nothing to do");
        return Ok(());
    }
    let progress = on_demand::track(&mut jobs);
    let work = Workload::of(&jobs);
    let what = format!("{} job(s), {} item(s), {}", jobs.len(), work.items, format_bytes(work.bytes));
    let now_ms = dingo_daemon::now_ms();
    let finish_by_ms = imperative::finish_by(now_ms, now_ms + a.deadline.as_millis() as u64);
    let driver = match a.mode {
        Mode::Imperative => {
            // Say so, since a default run takes most of an hour.
            eprintln!(
                "{what}: imperative, paced to finish in {} ({:.0} % of --deadline {}; a shorter deadline goes faster)",
                humantime(Duration::from_millis(finish_by_ms.saturating_sub(dingo_daemon::now_ms()))),
                imperative::PACE_FRACTION * 100.0,
                humantime(a.deadline)
            );
            Driver::Imperative { finish_by_ms }
        }
        Mode::Declarative => {
            eprintln!("{what}: declared to the planner at {}, due in {}", a.planner, humantime(a.deadline));
            Driver::Declarative(crate::planner_cmd::connect(&a.planner, &a.token, a.planner_ca.as_deref())?)
        }
    };
    let bar = progress_bar(work.items);
    let show = {
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(progress.items());
                bar.set_message(format!("{} read", format_bytes(progress.bytes())));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let reports = on_demand::run_jobs(&client, jobs, driver).await;
    show.abort();
    bar.finish_and_clear();
    let reports = reports?;
    for r in &reports {
        outln!("{}", serde_json::to_string(r)?);
    }
    on_demand::verdict(&reports)?;
    Ok(())
}

/// `1h 02m`, `3m 05s`, `42s`.
fn humantime(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A bar over the work items on stderr, drawn only when stderr is a terminal.
fn progress_bar(items: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    ProgressBar::new(items).with_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} items, {msg}, {elapsed} elapsed, eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("3w").is_err());
    }

    #[test]
    fn every_task_answers_to_its_planner_name() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            task: TaskName,
        }
        for kind in dingo_types::TaskKind::ALL.into_iter().filter(|k| *k != dingo_types::TaskKind::Georeplication) {
            let mut args = vec!["dingo", kind.name()];
            args.extend(match kind {
                dingo_types::TaskKind::Transcoding
                | dingo_types::TaskKind::FileScrubbing
                | dingo_types::TaskKind::Fsck => {
                    vec!["--prefix", "/p/"]
                }
                dingo_types::TaskKind::GarbageCollection => vec!["--area", "/a"],
                _ => vec![],
            });
            assert!(Cli::try_parse_from(&args).is_ok(), "{args:?}");
        }
        assert!(Cli::try_parse_from(["dingo", "fsck", "--prefix", "/p/", "--blocks", "0"]).is_err());
    }

    #[test]
    fn human_durations() {
        assert_eq!(humantime(Duration::from_secs(42)), "42s");
        assert_eq!(humantime(Duration::from_secs(185)), "3m 05s");
        assert_eq!(humantime(Duration::from_secs(3720)), "1h 02m");
    }
}
