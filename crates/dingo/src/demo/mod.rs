//! `dingo demo`: runs `dingo_demo`'s experiment and prints its comparison.

use crate::output::ExperimentArgs;
use anyhow::{Context, Result};
use dingo_demo::{DemoConfig, Scale};
use dingo_iosched::PolicyKind;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub run: ExperimentArgs,
    /// Output folder: summary, per-interval series, plots, cluster data.
    #[arg(long, default_value = "./dingo-demo")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the clusters' data directories afterwards.
    #[arg(long)]
    pub keep_data: bool,
    /// The emulated disks' IO scheduler: `classful`, or `fifo` for the
    /// baseline.
    #[arg(long, default_value = "classful")]
    pub scheduler: PolicyKind,
}

pub async fn run(a: DemoArgs) -> Result<()> {
    let scale = if a.run.quick { Scale::quick() } else { Scale::default_run() };
    let config = DemoConfig {
        exe: std::env::current_exe().context("cannot find the dingo executable")?,
        scale: Scale { scheduler: a.scheduler, ..scale },
        seed: a.seed,
        out: a.out.clone(),
        keep_data: a.keep_data,
    };
    let run = dingo_demo::run(&config, |mode| {
        if !a.run.json {
            eprintln!("running the timeline with {mode} tasks ...");
        }
    })
    .await?;
    run.write_outputs(&a.out)?;
    a.run.show(&run.summary)?;
    if !a.run.json {
        outln!("outputs in {}", a.out.display());
    }
    Ok(())
}
