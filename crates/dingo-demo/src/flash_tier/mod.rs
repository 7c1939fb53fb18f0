//! The node flash tier measured on a running cluster (`dingo bench
//! flash-tier --live`): the demo's declarative timeline, with every node's
//! DRAM pinned region shrunk below what the planner pins, run once with
//! DRAM only and once with `[node.flash]` (a zoned device emulated in a
//! file), from the same data and seed. Every figure comes from the nodes'
//! own counters (`NodeStats`) and the demo's foreground client.
//!
//! Runs alternate their order (DRAM first, then flash first, ...) so a
//! change in the machine's load over time does not favour one arm.

mod report;

pub use report::{ArmResult, Bar, FlashTierLiveReport};

use crate::scenario::Demo;
use crate::{ModeSummary, Result, Scale};
use dingo_node::config_file::FlashSection;
use dingo_tasks::Scheduling;
use dingo_types::ByteSize;
use serde::Serialize;
use std::path::PathBuf;

/// The two arms of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arm {
    DramOnly,
    Flash,
}

impl Arm {
    pub fn name(self) -> &'static str {
        match self {
            Arm::DramOnly => "dram-only",
            Arm::Flash => "flash",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct FlashTierLiveConfig {
    /// The `dingo` executable, started for every daemon.
    pub exe: PathBuf,
    /// The demo's scale; its `node_pinned_bytes` and `flash` are set per arm.
    pub scale: Scale,
    pub seed: u64,
    /// Each run's cluster lives in `data-<arm>-<run>` under it.
    pub out: PathBuf,
    pub keep_data: bool,
    /// Repetitions of the pair; the report gives medians.
    pub runs: u32,
    /// The pinned region each node really has (the planner still plans
    /// for `scale.pinned_bytes`).
    pub node_pinned_bytes: u64,
    /// Each node's flash tier in the flash arm.
    pub flash: FlashSection,
}

impl FlashTierLiveConfig {
    /// The standard experiment: the demo's default (or `--quick`) scale,
    /// each node's pinned region cut from 256 MB to 2 MB, half a 4 MB
    /// chunk, so a pinned chunk's first pages are pushed out while it is
    /// still being read (at 8 MB the quick run's overflow caused almost no
    /// re-reads: the sharing readers come close together), and 256 MiB of
    /// flash per node in 2 MiB zones, pins grouped by the second, a 1
    /// TB/day write budget.
    pub fn standard(quick: bool, exe: PathBuf, out: PathBuf) -> FlashTierLiveConfig {
        let scale = if quick { Scale::quick() } else { Scale::default_run() };
        FlashTierLiveConfig {
            exe,
            scale,
            seed: 1,
            out,
            keep_data: false,
            runs: 1,
            node_pinned_bytes: 2_000_000,
            flash: FlashSection {
                path: "flash.img".into(),
                zones: 128,
                zone_pages: 32,
                max_active_zones: 4,
                pin_bucket_ms: 1000,
                write_budget_per_day: ByteSize(1_000_000_000_000),
            },
        }
    }
}

/// The flags of `dingo bench flash-tier` that choose and shape the live
/// experiment.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LiveFlags {
    /// Run the demo's declarative timeline on real local clusters, each
    /// node's pinned region shrunk, with DRAM only and with `[node.flash]`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub live: bool,
    /// With --live: repetitions of the pair (the report gives medians).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1, requires = "live",
        value_parser = clap::value_parser!(u32).range(1..)))]
    pub runs: u32,
    /// With --live: each node's pinned region [default: 2MB].
    #[cfg_attr(feature = "clap", arg(long, value_parser = dingo_types::parse_bytes, requires = "live"))]
    pub pinned: Option<u64>,
    /// With --live: where the clusters' data go.
    #[cfg_attr(feature = "clap", arg(long, default_value = "./dingo-flash-tier", requires = "live"))]
    pub out: PathBuf,
    /// With --live: keep the clusters' data directories afterwards.
    #[cfg_attr(feature = "clap", arg(long, requires = "live"))]
    pub keep_data: bool,
}

impl FlashTierLiveConfig {
    /// The standard experiment (quick or not) with `flags` applied.
    pub fn from_flags(flags: &LiveFlags, quick: bool, seed: u64, exe: PathBuf) -> FlashTierLiveConfig {
        let standard = FlashTierLiveConfig::standard(quick, exe, flags.out.clone());
        FlashTierLiveConfig {
            seed,
            runs: flags.runs,
            keep_data: flags.keep_data,
            node_pinned_bytes: flags.pinned.unwrap_or(standard.node_pinned_bytes),
            ..standard
        }
    }
}

/// Runs both arms `config.runs` times; `starting(run, arm)` is called
/// before each.
pub async fn run(config: &FlashTierLiveConfig, mut starting: impl FnMut(u32, Arm)) -> Result<FlashTierLiveReport> {
    crate::io(|| format!("cannot create {}", config.out.display()), std::fs::create_dir_all(&config.out))?;
    let mut arms = Vec::new();
    for run in 0..config.runs {
        let order = if run % 2 == 0 { [Arm::DramOnly, Arm::Flash] } else { [Arm::Flash, Arm::DramOnly] };
        for arm in order {
            starting(run, arm);
            let scale = Scale {
                node_pinned_bytes: Some(config.node_pinned_bytes),
                flash: (arm == Arm::Flash).then(|| config.flash.clone()),
                ..config.scale.clone()
            };
            let demo = Demo { exe: config.exe.clone(), scale, seed: config.seed };
            let data = config.out.join(format!("data-{}-{run}", arm.name()));
            let r = demo
                .run(Scheduling::Declarative, &data)
                .await
                .map_err(|e| crate::DemoError::Timeline(format!("{} arm, run {run}: {e}", arm.name())))?;
            if !config.keep_data {
                let _ = std::fs::remove_dir_all(&data);
            }
            arms.push(ArmResult::new(arm, run, &r, &ModeSummary::new(&r)));
        }
    }
    Ok(FlashTierLiveReport::new(config, arms))
}
