//! The thesis' carbon and cost model of a flash cache (ch. 5, L1645-1663):
//! buy enough flash for the cache's capacity *and* for its write rate over
//! the desired lifetime, at the flash density that emits least, and add
//! the DRAM its index needs. Pure arithmetic over measured inputs.
//!
//! - Flash bought = max(cache capacity (+7 % hidden over-provisioning on a
//!   conventional drive), NAND writes over the lifetime / endurance).
//! - Denser flash holds more per cell but endures fewer writes (Table 5.5);
//!   emissions and cost follow the cells, not the bytes (L1653).
//! - Emissions = embodied / lifetime + operational (ACT's method, L1660):
//!   per-GB embodied factors of ACT (`western_digital_2019` flash 10.7 g/GB,
//!   `ddr4_10nm` DRAM 65 g/GB, both over a 0.875 fab yield), a 50/50
//!   wind-solar grid at 26 g/kWh, devices at 70 % of their power.
//! - The CPU is the same server whichever cache runs on it, so it is left
//!   out: it shifts every total alike and changes no comparison.
//!
//! Constants not in the thesis' text come from its artifact's inputs
//! (`saramcallister/ACT`, read for the numbers only); each is a field of
//! [`CarbonParams`] so a user can put in their own.

use serde::Serialize;

const SECONDS_PER_YEAR: f64 = 365.25 * 86_400.0;
const HOURS_PER_YEAR: f64 = 365.25 * 24.0;
const GB: f64 = 1e9;

/// Bits per flash cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Density {
    Slc,
    Mlc,
    Tlc,
    Qlc,
    Plc,
}

impl Density {
    pub const ALL: [Density; 5] = [Density::Slc, Density::Mlc, Density::Tlc, Density::Qlc, Density::Plc];

    pub fn name(self) -> &'static str {
        match self {
            Density::Slc => "SLC",
            Density::Mlc => "MLC",
            Density::Tlc => "TLC",
            Density::Qlc => "QLC",
            Density::Plc => "PLC",
        }
    }

    /// Write endurance relative to TLC (Table 5.5).
    pub fn endurance_factor(self) -> f64 {
        match self {
            Density::Slc => 4.4,
            Density::Mlc => 4.0,
            Density::Tlc => 1.0,
            Density::Qlc => 0.32,
            Density::Plc => 0.16,
        }
    }

    /// Emissions and cost of a byte relative to TLC (Table 5.5's capacity
    /// discount, inverted: a PLC byte costs 0.6 of a TLC byte).
    pub fn cost_factor(self) -> f64 {
        match self {
            Density::Slc => 3.0,
            Density::Mlc => 1.5,
            Density::Tlc => 1.0,
            Density::Qlc => 0.75,
            Density::Plc => 0.6,
        }
    }
}

/// The model's constants.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CarbonParams {
    pub lifetime_years: f64,
    /// Full-device writes a TLC drive endures: 3 per day (the artifact's
    /// DWPD) for the 5 years drives are rated for (L1627).
    pub tlc_endurance_device_writes: f64,
    /// Hidden over-provisioning of a conventional (LBA) drive (L1651).
    pub conventional_over_provisioning: f64,
    pub flash_embodied_g_per_gb: f64,
    pub dram_embodied_g_per_gb: f64,
    /// ECC bytes per DRAM byte.
    pub dram_ecc_overhead: f64,
    pub grid_g_per_kwh: f64,
    /// Watts of one flash drive in use and its capacity (the WD SN840's data sheet).
    pub flash_watts_per_drive: f64,
    pub flash_drive_bytes: f64,
    pub dram_watts_per_gb: f64,
    /// Share of peak power drawn on average.
    pub power_usage: f64,
    /// Flash price, linear in capacity (the artifact's fit of Micron 7300 prices).
    pub flash_dollars_per_tb: f64,
    pub flash_dollars_fixed: f64,
    pub dram_dollars_per_gb: f64,
}

impl Default for CarbonParams {
    /// The thesis' six-year deployment with its artifact's constants.
    fn default() -> Self {
        const FAB_YIELD: f64 = 0.875;
        CarbonParams {
            lifetime_years: 6.0,
            tlc_endurance_device_writes: 3.0 * 365.0 * 5.0,
            conventional_over_provisioning: 0.07,
            flash_embodied_g_per_gb: 10.7 / FAB_YIELD,
            dram_embodied_g_per_gb: 65.0 / FAB_YIELD,
            dram_ecc_overhead: 1.0 / 8.0,
            grid_g_per_kwh: 26.0,
            flash_watts_per_drive: 18.0,
            flash_drive_bytes: 768.0 * GB,
            dram_watts_per_gb: 3.0 / 8.0,
            power_usage: 0.7,
            flash_dollars_per_tb: 163.99,
            flash_dollars_fixed: 122.78,
            dram_dollars_per_gb: 5.53,
        }
    }
}

/// One cache as deployed: what it stores, writes and keeps in DRAM.
#[derive(Clone, Debug, Serialize)]
pub struct CacheDeployment {
    pub system: String,
    /// Flash the cache lays out its objects on.
    pub cache_bytes: f64,
    /// Bytes written to NAND per second (device write amplification included).
    pub nand_write_bytes_per_second: f64,
    pub dram_bytes: f64,
    /// On a conventional drive (hidden over-provisioning) or a zoned one (none).
    pub conventional_drive: bool,
}

/// A deployment's flash, emissions and cost on one density, per year.
#[derive(Clone, Debug, Serialize)]
pub struct Footprint {
    pub system: String,
    pub density: Density,
    /// Flash bought, bytes of this density.
    pub flash_bytes: f64,
    /// Whether the write rate, not the capacity, sized the flash.
    pub write_bound: bool,
    pub flash_kg_co2_per_year: f64,
    pub dram_kg_co2_per_year: f64,
    pub flash_dollars_per_year: f64,
    pub dram_dollars_per_year: f64,
}

impl Footprint {
    pub fn kg_co2_per_year(&self) -> f64 {
        self.flash_kg_co2_per_year + self.dram_kg_co2_per_year
    }

    pub fn dollars_per_year(&self) -> f64 {
        self.flash_dollars_per_year + self.dram_dollars_per_year
    }
}

/// `deployment` on flash of `density` for the params' lifetime.
pub fn footprint(params: &CarbonParams, deployment: &CacheDeployment, density: Density) -> Footprint {
    assert!(params.lifetime_years > 0.0 && deployment.cache_bytes > 0.0);
    let years = params.lifetime_years;
    let capacity_bytes = if deployment.conventional_drive {
        deployment.cache_bytes * (1.0 + params.conventional_over_provisioning)
    } else {
        deployment.cache_bytes
    };
    let lifetime_writes_bytes = deployment.nand_write_bytes_per_second * years * SECONDS_PER_YEAR;
    let endurance = params.tlc_endurance_device_writes * density.endurance_factor();
    let wear_bytes = lifetime_writes_bytes / endurance;
    let flash_bytes = capacity_bytes.max(wear_bytes);
    // Emissions and price follow cells: a byte of this density weighs its
    // cost factor of a TLC byte.
    let tlc_equivalent_gb = flash_bytes * density.cost_factor() / GB;
    let drives = (flash_bytes / params.flash_drive_bytes).ceil();
    let kwh_per_year = |watts: f64| watts * params.power_usage * HOURS_PER_YEAR / 1000.0;
    let flash_kg_co2_per_year = (tlc_equivalent_gb * params.flash_embodied_g_per_gb / years
        + kwh_per_year(drives * params.flash_watts_per_drive) * params.grid_g_per_kwh)
        / 1000.0;
    let dram_gb = deployment.dram_bytes / GB;
    let dram_kg_co2_per_year = (dram_gb * (1.0 + params.dram_ecc_overhead) * params.dram_embodied_g_per_gb / years
        + kwh_per_year(dram_gb * params.dram_watts_per_gb) * params.grid_g_per_kwh)
        / 1000.0;
    Footprint {
        system: deployment.system.clone(),
        density,
        flash_bytes,
        write_bound: wear_bytes > capacity_bytes,
        flash_kg_co2_per_year,
        dram_kg_co2_per_year,
        flash_dollars_per_year: (tlc_equivalent_gb / 1000.0 * params.flash_dollars_per_tb + params.flash_dollars_fixed)
            / years,
        dram_dollars_per_year: dram_gb * params.dram_dollars_per_gb / years,
    }
}

/// The density that emits least for `deployment` (Fig. 5.14's choice).
pub fn lowest_carbon(params: &CarbonParams, deployment: &CacheDeployment) -> Footprint {
    Density::ALL
        .into_iter()
        .map(|d| footprint(params, deployment, d))
        .min_by(|a, b| a.kg_co2_per_year().total_cmp(&b.kg_co2_per_year()))
        .expect("five densities")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(nand_mb_s: f64, conventional_drive: bool) -> CacheDeployment {
        CacheDeployment {
            system: "c".into(),
            cache_bytes: 400.0 * GB,
            nand_write_bytes_per_second: nand_mb_s * 1e6,
            dram_bytes: 0.0,
            conventional_drive,
        }
    }

    /// Capacity sizes flash until the writes outlast it; then flash grows
    /// with the write rate and shrinks with endurance.
    #[test]
    fn flash_is_the_larger_of_capacity_and_wear() {
        let p = CarbonParams::default();
        let idle = footprint(&p, &cache(0.0, false), Density::Tlc);
        assert_eq!(idle.flash_bytes, 400.0 * GB);
        assert!(!idle.write_bound);
        assert_eq!(footprint(&p, &cache(0.0, true), Density::Tlc).flash_bytes, 428.0 * GB);
        // 97.4 MB/s for 6 years over 5,475 device writes: 3.37 TB of TLC.
        let busy = footprint(&p, &cache(97.4, true), Density::Tlc);
        assert!(busy.write_bound);
        let want = 97.4e6 * 6.0 * SECONDS_PER_YEAR / 5475.0;
        assert!((busy.flash_bytes - want).abs() < 1.0, "{}", busy.flash_bytes);
        let qlc = footprint(&p, &cache(97.4, true), Density::Qlc);
        assert!((qlc.flash_bytes / busy.flash_bytes - 1.0 / 0.32).abs() < 1e-9);
    }

    /// An idle cache is cheapest on the densest flash; a write-heavy one
    /// is not (Takeaway 6: density alone does not cut emissions).
    #[test]
    fn the_best_density_depends_on_the_write_rate() {
        let p = CarbonParams::default();
        assert_eq!(lowest_carbon(&p, &cache(0.0, false)).density, Density::Plc);
        let heavy = lowest_carbon(&p, &cache(97.4, true));
        // Which of SLC and MLC wins turns on whole drives' power; never the dense ones.
        assert!(matches!(heavy.density, Density::Slc | Density::Mlc), "{heavy:?}");
        let light = lowest_carbon(&p, &cache(7.8, false));
        assert!(light.kg_co2_per_year() < heavy.kg_co2_per_year() / 2.0, "{light:?} vs {heavy:?}");
    }

    /// The thesis' on-flash comparison through the model (its artifact's
    /// inputs: 400 GB caches on the Meta trace; Kangaroo 97.4 MB/s of NAND
    /// writes and 1.44 GB of DRAM, FairyWREN 7.8 MB/s and 1.90 GB).
    #[test]
    fn the_thesis_inputs_give_fairywren_the_smaller_footprint() {
        let p = CarbonParams::default();
        let deploy = |nand_mb_s: f64, dram_gb: f64, conventional_drive: bool| CacheDeployment {
            dram_bytes: dram_gb * GB,
            ..cache(nand_mb_s, conventional_drive)
        };
        let kangaroo = lowest_carbon(&p, &deploy(97.4, 1.44, true));
        let fairywren = lowest_carbon(&p, &deploy(7.8, 1.90, false));
        let carbon_cut = 1.0 - fairywren.flash_kg_co2_per_year / kangaroo.flash_kg_co2_per_year;
        let cost_cut = 1.0 - fairywren.flash_dollars_per_year / kangaroo.flash_dollars_per_year;
        assert!(kangaroo.write_bound && !fairywren.write_bound, "{kangaroo:?} {fairywren:?}");
        assert!(carbon_cut > 0.3 && cost_cut > 0.3, "carbon −{carbon_cut:.3}, cost −{cost_cut:.3}");
    }

    #[test]
    fn dram_adds_ecc_and_power() {
        let p = CarbonParams::default();
        let with_dram = CacheDeployment { dram_bytes: 8.0 * GB, ..cache(0.0, false) };
        let f = footprint(&p, &with_dram, Density::Tlc);
        let embodied = 9.0 * 65.0 / 0.875 / 6.0;
        let operational = 3.0 * 0.7 * HOURS_PER_YEAR / 1000.0 * 26.0;
        assert!((f.dram_kg_co2_per_year * 1000.0 - embodied - operational).abs() < 1e-6);
        assert!((f.dram_dollars_per_year - 8.0 * 5.53 / 6.0).abs() < 1e-9);
    }
}
