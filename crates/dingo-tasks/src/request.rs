//! One task and its parameters, as `dingo task` asks for it and a program
//! can build it: [`TaskRequest::jobs`] chooses the jobs from the cluster's
//! state. With the `clap` feature it is also the command line's subcommand,
//! so the flags and their help live beside what they mean.

use crate::georep::GeorepConfig;
use crate::on_demand::{self, OnDemandError};
use crate::plan::{self, FilePick};
use crate::work::Job;
use dingo_auth::AuthSection;
use dingo_client::{Client, Redundancy};
use dingo_types::DiskId;
use std::path::PathBuf;

/// Each variant is a verb and also answers to its task's name in the
/// planner, reports and metrics (`scrubbing`, `garbage-collection`, ...).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
pub enum TaskRequest {
    /// Verify every chunk of the given disks (all live disks by default),
    /// that exact copy; rebuild corrupt chunks from redundancy.
    #[cfg_attr(feature = "clap", command(visible_alias = "scrubbing"))]
    Scrub {
        #[cfg_attr(feature = "clap", arg(long = "disk"))]
        disks: Vec<DiskId>,
    },
    /// Rebuild every chunk lost on dead disks or nodes.
    #[cfg_attr(feature = "clap", command(visible_alias = "reconstruction"))]
    Reconstruct,
    /// Move chunks from disks above the mean utilisation to those below.
    #[cfg_attr(feature = "clap", command(visible_alias = "rebalancing"))]
    Rebalance {
        /// How far above (or below) the mean a disk must be, as a fraction.
        #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.1))]
        threshold: f64,
        #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
        seed: u64,
    },
    /// Re-encode the files under a prefix (e.g. replicated → RS), writing
    /// each as `<path><suffix>` and deleting the original.
    #[cfg_attr(feature = "clap", command(visible_alias = "transcoding"))]
    Transcode {
        #[cfg_attr(feature = "clap", arg(long))]
        prefix: String,
        #[cfg_attr(feature = "clap", arg(long, default_value = "ec:6+3", value_parser = str::parse::<Redundancy>))]
        to: Redundancy,
        #[cfg_attr(feature = "clap", arg(long, default_value = ".rs"))]
        suffix: String,
    },
    /// Read every data block of the files under a prefix (any copy),
    /// verifying checksums; rebuild a bad copy from a good one.
    #[cfg_attr(feature = "clap", command(visible_alias = "file-scrubbing"))]
    FileScrub {
        /// Files whose path starts with this.
        #[cfg_attr(feature = "clap", arg(long))]
        prefix: String,
        #[cfg_attr(feature = "clap", command(flatten))]
        pick: FilePick,
    },
    /// Check the files under a prefix against the metadata (blocks, copies,
    /// stripes, sizes), reading their first blocks and checking what the
    /// nodes hold (length, checksums); reports what does not match and
    /// exits with an error if anything does. Repairs nothing.
    Fsck {
        /// Files whose path starts with this.
        #[cfg_attr(feature = "clap", arg(long))]
        prefix: String,
        /// Data blocks read per file (at least 1).
        #[cfg_attr(feature = "clap", arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..)))]
        blocks: u16,
        #[cfg_attr(feature = "clap", command(flatten))]
        pick: FilePick,
    },
    /// Garbage-collect an object-store area (AREA/data/ record files,
    /// AREA/deleted/ tombstones; docs/STORAGE.md): each data file is read,
    /// its live records rewritten to a new file, and the old one deleted.
    #[cfg_attr(feature = "clap", command(visible_alias = "garbage-collection"))]
    Gc {
        /// The area's path prefix (its files are AREA/data/* and AREA/deleted/*).
        #[cfg_attr(feature = "clap", arg(long))]
        area: String,
        #[cfg_attr(feature = "clap", command(flatten))]
        pick: FilePick,
    },
    /// Copy the files under a prefix to a second DINGO cluster (the remote
    /// site; same paths, same redundancy), verify each copy there, and
    /// record it in a progress file so a restarted job copies nothing twice.
    #[cfg_attr(feature = "clap", command(visible_alias = "georeplication"))]
    Georep {
        /// The remote site's metadata service address.
        #[cfg_attr(feature = "clap", arg(long))]
        remote: String,
        /// File holding the remote site's cluster secret.
        #[cfg_attr(feature = "clap", arg(long, env = "DINGO_REMOTE_SECRET_FILE"))]
        remote_secret_file: Option<PathBuf>,
        /// The remote site's certificate authority, if it serves TLS.
        #[cfg_attr(feature = "clap", arg(long, env = "DINGO_REMOTE_CA"))]
        remote_ca: Option<PathBuf>,
        /// Files whose path starts with this.
        #[cfg_attr(feature = "clap", arg(long))]
        prefix: String,
        /// Directory of the job's progress file.
        #[cfg_attr(feature = "clap", arg(long, default_value = "georep-state"))]
        state: PathBuf,
        #[cfg_attr(feature = "clap", command(flatten))]
        pick: FilePick,
    },
}

impl TaskRequest {
    /// The jobs that carry out this request now, each due at `deadline_ms`;
    /// empty if there is nothing to do.
    pub async fn jobs(&self, client: &Client, deadline_ms: u64) -> Result<Vec<Job>, OnDemandError> {
        Ok(match self {
            TaskRequest::Scrub { disks } => on_demand::scrub_disks(client, disks, deadline_ms).await?,
            TaskRequest::Reconstruct => vec![plan::reconstruction(client, "lost chunks", deadline_ms).await?],
            TaskRequest::Rebalance { threshold, seed } => {
                plan::rebalancing(client, *threshold, *seed, deadline_ms).await?.into_iter().collect()
            }
            TaskRequest::Transcode { prefix, to, suffix } => {
                vec![on_demand::transcode_prefix(client, prefix, *to, suffix, deadline_ms).await?]
            }
            TaskRequest::FileScrub { prefix, pick } => {
                vec![plan::file_scrubbing(client, prefix, *pick, deadline_ms).await?]
            }
            TaskRequest::Fsck { prefix, blocks, pick } => {
                vec![plan::fsck(client, prefix, *pick, usize::from(*blocks), deadline_ms).await?]
            }
            TaskRequest::Gc { area, pick } => vec![plan::garbage_collection(client, area, *pick, deadline_ms).await?],
            TaskRequest::Georep { remote, remote_secret_file, remote_ca, prefix, state, pick } => {
                let config = GeorepConfig {
                    remote_meta: remote.clone(),
                    remote_auth: AuthSection { secret_file: remote_secret_file.clone(), ca: remote_ca.clone() },
                    prefix: prefix.clone(),
                    state_dir: state.clone(),
                    pick: *pick,
                };
                vec![on_demand::georeplication(client, &config, deadline_ms).await?]
            }
        })
    }
}

#[cfg(all(test, feature = "clap"))]
mod tests {
    use super::*;
    use clap::Parser;
    use dingo_types::TaskKind;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        task: TaskRequest,
    }

    #[test]
    fn every_task_answers_to_its_planner_name() {
        for kind in TaskKind::ALL {
            let mut args = vec!["dingo", kind.name()];
            args.extend(match kind {
                TaskKind::Transcoding | TaskKind::FileScrubbing | TaskKind::Fsck => vec!["--prefix", "/p/"],
                TaskKind::GarbageCollection => vec!["--area", "/a"],
                TaskKind::Georeplication => vec!["--remote", "127.0.0.1:1", "--prefix", "/p/"],
                _ => vec![],
            });
            assert!(Cli::try_parse_from(&args).is_ok(), "{args:?}");
        }
        assert!(Cli::try_parse_from(["dingo", "fsck", "--prefix", "/p/", "--blocks", "0"]).is_err());
    }

    #[test]
    fn flags_fill_the_request() {
        let cli = Cli::try_parse_from(["dingo", "scrub", "--disk", "3", "--disk", "5"]).unwrap();
        assert_eq!(cli.task, TaskRequest::Scrub { disks: vec![DiskId(3), DiskId(5)] });
        let cli = Cli::try_parse_from(["dingo", "gc", "--area", "/a", "--files", "4"]).unwrap();
        assert_eq!(cli.task, TaskRequest::Gc { area: "/a".into(), pick: FilePick { sample: Some(4), seed: 1 } });
    }
}
