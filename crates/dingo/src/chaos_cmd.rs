//! `dingo chaos`: a randomized fault campaign against a local cluster
//! (`dingo_chaos`); prints its report and fails if a check failed.

use anyhow::Result;
use dingo_chaos::ChaosRequest;

#[derive(clap::Args, Debug)]
pub struct ChaosArgs {
    #[command(flatten)]
    request: ChaosRequest,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub async fn run(a: ChaosArgs) -> Result<()> {
    let report = dingo_chaos::run(&a.request.config(std::env::current_exe()?)).await?;
    crate::output::print(&report, a.json)?;
    anyhow::ensure!(report.passed, "the campaign's checks failed; reproduce with `{}`", report.reproduce());
    Ok(())
}
