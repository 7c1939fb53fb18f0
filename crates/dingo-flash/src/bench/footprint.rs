//! Measured write rates and DRAM put through the carbon and cost model
//! (Fig. 5.13-5.16): each system of the Kangaroo-vs-FairyWREN comparisons
//! deployed at the thesis' scale, on its lowest-carbon flash density.

use serde::Serialize;

use crate::bench::{Budgets, RunResult};
use crate::carbon::{CacheDeployment, CarbonParams, Footprint, lowest_carbon};

/// The deployment the bench's runs are scaled to: a 2 TB drive serving
/// 100 K requests/s (the thesis' ch. 4 setting, L1034-1036; the write
/// budget of 625 B/request is the same point). Bytes per request do not
/// change under the thesis' scaling, so a run's rates carry over.
pub const DEPLOYED_DRIVE_BYTES: f64 = 2e12;
pub const DEPLOYED_REQUESTS_PER_SECOND: f64 = 100_000.0;

/// One trace's systems, their footprints, and FairyWREN's cut against Kangaroo.
#[derive(Clone, Debug, Serialize)]
pub struct TraceFootprints {
    pub trace: String,
    pub params: CarbonParams,
    /// Kangaroo, FairyWREN and "minimum writes" (FairyWREN's inserted bytes
    /// written once, no index DRAM: the thesis' idealised cache, L1667).
    pub systems: Vec<Footprint>,
}

impl TraceFootprints {
    fn find(&self, system: &str) -> Option<&Footprint> {
        self.systems.iter().find(|f| f.system == system)
    }

    /// FairyWREN's flash emissions and cost relative to Kangaroo's, minus one.
    pub fn fairywren_vs_kangaroo(&self) -> Option<(f64, f64)> {
        let (k, f) = (self.find("kangaroo")?, self.find("fairywren")?);
        Some((
            f.flash_kg_co2_per_year / k.flash_kg_co2_per_year - 1.0,
            f.flash_dollars_per_year / k.flash_dollars_per_year - 1.0,
        ))
    }
}

/// Footprints of `kangaroo` and `fairywren` (runs on the same trace and
/// device, everything admitted) at the deployed scale.
pub fn footprints(trace: &str, budgets: &Budgets, kangaroo: &RunResult, fairywren: &RunResult) -> TraceFootprints {
    let params = CarbonParams::default();
    let scale = DEPLOYED_DRIVE_BYTES / budgets.device_bytes as f64;
    let deploy = |run: &RunResult, conventional_drive: bool| CacheDeployment {
        system: run.system.clone(),
        cache_bytes: DEPLOYED_DRIVE_BYTES,
        nand_write_bytes_per_second: run.device_write_bytes_per_request * DEPLOYED_REQUESTS_PER_SECOND,
        dram_bytes: run.dram_bits as f64 / 8.0 * scale,
        conventional_drive,
    };
    // Total WA is zero only when nothing was written (a trace that fits).
    let inserted_bytes_per_request = if fairywren.write_amplification.total > 0.0 {
        fairywren.device_write_bytes_per_request / fairywren.write_amplification.total
    } else {
        0.0
    };
    let minimum = CacheDeployment {
        system: "minimum writes".into(),
        cache_bytes: DEPLOYED_DRIVE_BYTES,
        nand_write_bytes_per_second: inserted_bytes_per_request * DEPLOYED_REQUESTS_PER_SECOND,
        dram_bytes: 0.0,
        conventional_drive: false,
    };
    let systems =
        [deploy(kangaroo, true), deploy(fairywren, false), minimum].iter().map(|d| lowest_carbon(&params, d)).collect();
    TraceFootprints { trace: trace.to_string(), params, systems }
}
