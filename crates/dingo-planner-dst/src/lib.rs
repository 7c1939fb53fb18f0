//! Deterministic simulation of the planner service (`dingo planner dst`).
//!
//! One process, one thread, no clock, no network, no disk: the service's
//! sans-IO state machine ([`dingo_planner_service::Machine`]) is driven by
//! a scheduler seeded from one number, with simulated time, an in-memory
//! store that commits each step atomically, task clients that disconnect,
//! ack late, ack twice, ack what they were never given and crash, and a
//! planner that crashes and restarts from its store between any two steps
//! of its persister. After every step the oracle checks the service's
//! promises; a broken one is a [`Violation`] naming the seed, the step and
//! the command that replays it. The same seed always makes the same run.
//! What is modelled and what is not: `docs/PLANNER_SERVICE.md`.

mod client;
mod oracle;
mod sim;
mod world;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// Steps of the fault phase per seed, unless told otherwise.
pub const DEFAULT_STEPS: u32 = 1000;

/// How each seed runs; with the `clap` feature, also `dingo planner dst`'s
/// flags.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Options {
    /// Steps of the fault phase per seed; the drain follows.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_STEPS))]
    pub steps: u32,
    /// Keep each seed's trace (and print it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub trace: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { steps: DEFAULT_STEPS, trace: false }
    }
}

impl Options {
    /// The command that replays `seed` with these options.
    pub fn reproduce(&self, seed: u64) -> String {
        let steps = if self.steps == DEFAULT_STEPS { String::new() } else { format!(" --steps {}", self.steps) };
        format!("cargo run --release -p dingo -- planner dst --seed {seed}{steps} --trace")
    }
}

/// A broken promise of the service.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("seed {seed}, step {step}: {message}\n  reproduce: {reproduce}")]
pub struct Violation {
    pub seed: u64,
    pub step: u64,
    pub message: String,
    pub reproduce: String,
    /// The trace up to the violation, if asked for.
    pub trace: Vec<String>,
}

/// Declares [`Counts`] from one list: each counter's field, doc and
/// label, so that summing seeds and printing totals cannot miss one.
macro_rules! counts {
    ($($(#[doc = $doc:literal])* $field:ident: $label:literal,)*) => {
        /// What a run did, counted; summed over the seeds of a campaign.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Counts {
            $($(#[doc = $doc])* pub $field: u64,)*
        }

        impl std::ops::AddAssign<&Counts> for Counts {
            fn add_assign(&mut self, other: &Counts) {
                $(self.$field += other.$field;)*
            }
        }

        impl Counts {
            /// Each counter with its label, in declaration order.
            pub fn labelled(&self) -> Vec<(u64, &'static str)> {
                vec![$((self.$field, $label)),*]
            }
        }
    };
}

counts! {
    quanta: "quanta",
    declarations: "declarations",
    deliveries_seen: "deliveries",
    acks: "acks",
    refusals: "refusals",
    planner_crashes: "planner crashes",
    client_crashes: "client crashes",
    /// Blocks deleted by tasks, and sets the planner elided at once on an
    /// announcement of such a deletion.
    blocks_deleted: "blocks deleted",
    announced_elided_sets: "sets elided on announcement",
    /// Declarations done with sets elided (never delivered: deleted).
    declarations_with_elided_sets: "declarations done with elided sets",
    /// Times a node went down.
    node_outages: "node outages",
    /// Blocks tasks wrote during the run, and quanta the planner skipped
    /// with the metadata service unreachable.
    blocks_written: "blocks written",
    quanta_skipped: "quanta skipped",
    /// Copies a rebalancer moved (announced or not), and copies lost until
    /// a repair.
    copies_moved: "copies moved",
    copies_lost: "copies lost",
    /// Declarations refused on a stale topology and tried again after a
    /// refresh, as the service does.
    stale_retries: "declarations retried on a refreshed topology",
    /// Sets planned in a quantum beside another set reading a different
    /// block of their redundancy group (one dispatch component for both).
    sets_sharing_a_group: "sets sharing a redundancy group",
    /// Reads planned of erasure-coded blocks' chunks: a block's only copy.
    single_copy_reads: "reads of erasure-coded chunks",
    /// Quanta planned with the budget scaled by a diurnal multiplier other
    /// than one, and quanta planned after the hour the run started in.
    diurnal_scaled_quanta: "quanta at a diurnal multiplier other than one",
    quanta_past_the_hour: "quanta in the run's second hour",
    /// Cache directives of dispatch groups checked against their reads.
    pins_checked: "pins checked",
    /// Disks reported congested and slower than their model (the planner
    /// cuts their head-time budget while it believes them).
    slow_disk_reports: "slow disks reported",
    /// Declarations' statuses compared with the oracle, with every step
    /// durable.
    statuses_checked: "statuses checked",
}

/// What one seed's run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub seed: u64,
    pub counts: Counts,
    /// A hash of the whole trace: equal for equal runs.
    pub trace_digest: u64,
    /// The trace, if asked for.
    pub trace: Vec<String>,
}

/// The run's events, hashed as they happen (and kept if asked).
struct Trace {
    hasher: DefaultHasher,
    keep: bool,
    lines: Vec<String>,
}

impl Trace {
    fn new(keep: bool) -> Trace {
        Trace { hasher: DefaultHasher::new(), keep, lines: Vec::new() }
    }

    fn push(&mut self, line: String) {
        line.hash(&mut self.hasher);
        if self.keep {
            self.lines.push(line);
        }
    }

    fn digest(&self) -> u64 {
        self.hasher.finish()
    }
}

/// Runs one seed.
pub fn run_seed(seed: u64, options: &Options) -> Result<Summary, Violation> {
    sim::Sim::new(seed, options).run()
}

/// What a run of many seeds found.
#[derive(Clone, Debug, Default)]
pub struct Campaign {
    pub seeds: u64,
    pub violations: Vec<Violation>,
    /// Sums over the seeds that passed.
    pub totals: Counts,
    /// Every seed's trace, one after the other, if the options asked for it.
    pub trace: Vec<String>,
}

/// One line of totals, then each violation.
impl std::fmt::Display for Campaign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let counts: Vec<String> =
            self.totals.labelled().into_iter().map(|(count, label)| format!("{count} {label}")).collect();
        writeln!(f, "{} seeds, {} violations; {}", self.seeds, self.violations.len(), counts.join(", "))?;
        self.violations.iter().try_for_each(|v| writeln!(f, "{v}"))
    }
}

/// Runs seeds `first..first + count` on `jobs` threads, stopping at the
/// first violation if `stop_at_first`. Seeds are handed out one at a time
/// and their results put back in seed order, so the campaign (totals,
/// violations, traces) is the same on any number of threads; with
/// `stop_at_first` it ends at the lowest failing seed, as one thread would.
///
/// Written on `std::thread::scope`, as `dingo_sim::sweep::run_distinct`
/// is: the workspace has no rayon, and this loop is a shared counter and a
/// sort.
pub fn run_seeds(first: u64, count: u64, options: &Options, stop_at_first: bool, jobs: usize) -> Campaign {
    let count = count.min(u64::MAX - first);
    let next = AtomicU64::new(0);
    // The offset of the lowest failing seed seen, once stopping: seeds
    // after it need not run.
    let stop_after = AtomicU64::new(u64::MAX);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let offset = next.fetch_add(1, Ordering::Relaxed);
                    if offset >= count || offset > stop_after.load(Ordering::Relaxed) {
                        break;
                    }
                    let result = run_seed(first + offset, options);
                    if stop_at_first && result.is_err() {
                        stop_after.fetch_min(offset, Ordering::Relaxed);
                    }
                    results.lock().expect("a seed's thread panicked").push((offset, result));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("a seed's thread panicked");
    results.sort_unstable_by_key(|&(offset, _)| offset);
    let mut campaign = Campaign::default();
    for (_, result) in results {
        campaign.seeds += 1;
        match result {
            Ok(mut s) => {
                campaign.trace.append(&mut s.trace);
                campaign.totals += &s.counts;
            }
            Err(v) => {
                campaign.trace.extend(v.trace.iter().cloned());
                campaign.violations.push(v);
                if stop_at_first {
                    break;
                }
            }
        }
    }
    campaign
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_seeds_keep_every_promise() {
        let campaign = run_seeds(0, 1000, &Options::default(), false, 1);
        let shown: Vec<String> = campaign.violations.iter().take(5).map(ToString::to_string).collect();
        assert!(campaign.violations.is_empty(), "{} violations:\n{}", campaign.violations.len(), shown.join("\n"));
        let t = &campaign.totals;
        eprintln!("{} seeds: {t:?}", campaign.seeds);
        assert!(t.planner_crashes > 0 && t.client_crashes > 0 && t.refusals > 0 && t.acks > 0, "{t:?}");
        // Deletions reach the planner both ways and end declarations early.
        assert!(t.blocks_deleted > 0 && t.announced_elided_sets > 0 && t.declarations_with_elided_sets > 0, "{t:?}");
        assert!(t.node_outages > 0 && t.blocks_written > 0 && t.quanta_skipped > 0, "{t:?}");
        assert!(t.copies_moved > 0 && t.copies_lost > 0 && t.stale_retries > 0, "{t:?}");
        assert!(t.sets_sharing_a_group > 0 && t.pins_checked > 0 && t.slow_disk_reports > 0, "{t:?}");
        assert!(t.statuses_checked > 0 && t.single_copy_reads > 0, "{t:?}");
        assert!(t.diurnal_scaled_quanta > 0 && t.quanta_past_the_hour > 0, "{t:?}");
    }

    /// Short fault phases: the drain starts before the run's first hour
    /// ends and crosses into the next (seed 6 at 150 steps once ran its
    /// drain into an hour whose budget no set fits).
    #[test]
    fn short_runs_keep_every_promise_too() {
        let campaign = run_seeds(0, 300, &Options { steps: 150, trace: false }, false, 1);
        let shown: Vec<String> = campaign.violations.iter().take(3).map(ToString::to_string).collect();
        assert!(campaign.violations.is_empty(), "{} violations:\n{}", campaign.violations.len(), shown.join("\n"));
    }

    #[test]
    fn a_campaign_keeps_the_traces_asked_for_and_shows_its_totals() {
        let quiet = run_seeds(3, 2, &Options { steps: 50, trace: false }, false, 1);
        assert!(quiet.trace.is_empty());
        let traced = run_seeds(3, 2, &Options { steps: 50, trace: true }, false, 1);
        let one = run_seed(3, &Options { steps: 50, trace: true }).unwrap().trace;
        assert!(traced.trace.len() > one.len() && traced.trace.starts_with(&one));
        let text = traced.to_string();
        assert!(text.starts_with("2 seeds, 0 violations; "), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    #[test]
    fn a_campaign_is_the_same_on_any_number_of_threads() {
        let options = Options { steps: 200, trace: true };
        let one = run_seeds(10, 24, &options, false, 1);
        assert_eq!(one.seeds, 24);
        for jobs in [2, 3, 8] {
            let many = run_seeds(10, 24, &options, false, jobs);
            assert_eq!((many.seeds, &many.totals, &many.trace), (one.seeds, &one.totals, &one.trace), "{jobs} threads");
            assert_eq!(many.violations.len(), one.violations.len());
        }
        let stopping = run_seeds(10, 24, &options, true, 3);
        assert_eq!((stopping.seeds, &stopping.totals), (24, &one.totals), "no violation: every seed runs");
        assert_eq!(run_seeds(u64::MAX - 1, 5, &options, false, 2).seeds, 1, "seeds end at the last id");
    }

    #[test]
    fn a_seed_replays_identically() {
        let options = Options { trace: true, ..Options::default() };
        let first = run_seed(7, &options).unwrap();
        assert_eq!(first, run_seed(7, &options).unwrap());
        assert!(first.trace.len() > 100);
        assert_ne!(first.trace_digest, run_seed(8, &options).unwrap().trace_digest);
    }
}
