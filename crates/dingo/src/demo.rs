//! `dingo demo`: runs `dingo_demo`'s experiment and prints its comparison.

use crate::output::ExperimentArgs;
use anyhow::{Context, Result};
use dingo_demo::{DemoConfig, DemoFlags};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub run: ExperimentArgs,
    #[command(flatten)]
    pub demo: DemoFlags,
}

pub async fn run(a: DemoArgs) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the dingo executable")?;
    let config = DemoConfig::from_flags(&a.demo, a.run.quick, exe);
    let run = dingo_demo::run(&config, |mode| {
        if !a.run.json {
            eprintln!("running the timeline with {mode} tasks ...");
        }
    })
    .await?;
    run.write_outputs(&config.out)?;
    a.run.show(&run.summary)?;
    if !a.run.json {
        outln!("outputs in {}", config.out.display());
    }
    Ok(())
}
