//! What the live flash-tier experiment measured: each arm's counters per
//! run, their medians, and the bars against them.

use super::{Arm, FlashTierLiveConfig};
use crate::meter::FlashSample;
use crate::{ModeResult, ModeSummary};
use dingo_report::stats::median;
use serde::Serialize;
use std::fmt;

const MS_PER_DAY: f64 = 86_400_000.0;

/// One arm of one run.
#[derive(Clone, Debug, Serialize)]
pub struct ArmResult {
    pub arm: Arm,
    pub run: u32,
    /// Bytes of pinned pages read from disk again, while pinned, after an
    /// overflow pushed them out of DRAM: the re-reads the overflow caused.
    pub pinned_reread_bytes: u64,
    pub pinned_overflow_evictions: u64,
    pub pinned_hits: u64,
    pub flash_hits: u64,
    /// Maintenance and foreground bytes the nodes read from their disks.
    pub maintenance_disk_bytes: u64,
    pub foreground_disk_bytes: u64,
    pub fg_p50_ms: f64,
    pub fg_p99_ms: f64,
    pub fg_reads: u64,
    pub work_complete: bool,
    pub deadline_misses: u64,
    /// Summed over nodes (zone peak and budget: the largest of any node).
    pub flash: FlashSample,
    /// Device bytes written per host byte (1 without writes).
    pub write_amplification: f64,
    /// The busiest node's flash writes at the run's rate, per day, over
    /// its budget: ≤ 1 means the budget sustains them without its burst.
    pub budget_use: f64,
    pub wall_seconds: f64,
}

impl ArmResult {
    pub fn new(arm: Arm, run: u32, r: &ModeResult, s: &ModeSummary) -> ArmResult {
        let f = r.disk.flash;
        let write_amplification =
            if f.host_written_bytes == 0 { 1.0 } else { f.device_written_bytes as f64 / f.host_written_bytes as f64 };
        let days = r.wall_seconds * 1000.0 / MS_PER_DAY;
        let budget_use = if f.write_budget_bytes_per_day == 0 || days <= 0.0 {
            0.0
        } else {
            f.max_node_host_written_bytes as f64 / days / f.write_budget_bytes_per_day as f64
        };
        ArmResult {
            arm,
            run,
            pinned_reread_bytes: r.disk.pinned_reread_bytes,
            pinned_overflow_evictions: r.disk.overflow_evictions,
            pinned_hits: r.disk.pinned_hits,
            flash_hits: r.disk.flash_hits,
            maintenance_disk_bytes: r.disk.maintenance_disk_bytes(),
            foreground_disk_bytes: r.disk.disk_bytes_by_class[0],
            fg_p50_ms: r.foreground.p50_ms,
            fg_p99_ms: r.foreground.p99_ms,
            fg_reads: r.foreground.reads,
            work_complete: s.work_complete,
            deadline_misses: s.deadline_misses,
            flash: f,
            write_amplification,
            budget_use,
            wall_seconds: r.wall_seconds,
        }
    }
}

/// One of the bars, as measured.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    pub claim: String,
    pub bar: String,
    pub measured: String,
    pub met: bool,
}

/// Medians of one arm over the runs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ArmMedians {
    pub pinned_reread_bytes: f64,
    pub pinned_overflow_evictions: f64,
    pub maintenance_disk_bytes: f64,
    pub fg_p50_ms: f64,
    pub fg_p99_ms: f64,
    pub flash_host_written_bytes: f64,
    pub flash_device_written_bytes: f64,
    pub budget_use: f64,
}

/// The whole experiment.
#[derive(Clone, Debug, Serialize)]
pub struct FlashTierLiveReport {
    pub nodes: u32,
    pub window_seconds: f64,
    /// What the planner plans for, and what each node has.
    pub planned_pinned_bytes: u64,
    pub node_pinned_bytes: u64,
    pub flash_bytes_per_node: u64,
    pub zone_bytes: u64,
    pub max_active_zones: u32,
    pub write_budget_bytes_per_day: u64,
    pub runs: u32,
    pub results: Vec<ArmResult>,
    pub dram_only: ArmMedians,
    pub flash: ArmMedians,
    pub bars: Vec<Bar>,
}

fn medians(results: &[ArmResult], arm: Arm) -> ArmMedians {
    let of = |get: fn(&ArmResult) -> f64| median(results.iter().filter(|r| r.arm == arm).map(get).collect());
    ArmMedians {
        pinned_reread_bytes: of(|r| r.pinned_reread_bytes as f64),
        pinned_overflow_evictions: of(|r| r.pinned_overflow_evictions as f64),
        maintenance_disk_bytes: of(|r| r.maintenance_disk_bytes as f64),
        fg_p50_ms: of(|r| r.fg_p50_ms),
        fg_p99_ms: of(|r| r.fg_p99_ms),
        flash_host_written_bytes: of(|r| r.flash.host_written_bytes as f64),
        flash_device_written_bytes: of(|r| r.flash.device_written_bytes as f64),
        budget_use: of(|r| r.budget_use),
    }
}

fn bars(results: &[ArmResult], dram: &ArmMedians, flash: &ArmMedians) -> Vec<Bar> {
    let flash_runs: Vec<&ArmResult> = results.iter().filter(|r| r.arm == Arm::Flash).collect();
    let fall = if dram.pinned_reread_bytes > 0.0 {
        1.0 - flash.pinned_reread_bytes / dram.pinned_reread_bytes
    } else {
        // The shrunk region never overflowed into a re-read: nothing to cut.
        f64::NAN
    };
    let p99_ratio = flash.fg_p99_ms / dram.fg_p99_ms;
    let exact_wa = flash_runs.iter().all(|r| r.flash.device_written_bytes == r.flash.host_written_bytes);
    let most_zones = flash_runs.iter().map(|r| r.flash.max_open_zones).max().unwrap_or(0);
    let zone_limit = flash_runs.iter().map(|r| r.flash.max_active_zones).max().unwrap_or(0);
    let refused: u64 = flash_runs.iter().map(|r| r.flash.refused_over_budget_bytes).sum();
    vec![
        Bar {
            claim: "re-reads from disk caused by pin overflow, flash vs DRAM only".into(),
            bar: "fall ≥ 80 %".into(),
            measured: format!(
                "fall {:.1} % ({} vs {})",
                fall * 100.0,
                gb(flash.pinned_reread_bytes),
                gb(dram.pinned_reread_bytes)
            ),
            met: fall >= 0.8,
        },
        Bar {
            claim: "foreground p99, flash vs DRAM only".into(),
            bar: "≤ 1.1×".into(),
            measured: format!("{p99_ratio:.3}× ({:.1} vs {:.1} ms)", flash.fg_p99_ms, dram.fg_p99_ms),
            met: p99_ratio <= 1.1,
        },
        Bar {
            claim: "flash writes within the configured budget".into(),
            bar: "busiest node's rate ≤ budget, nothing refused unseen".into(),
            measured: format!(
                "{:.1} % of the budget at the run's rate; {} refused over budget (counted)",
                flash.budget_use * 100.0,
                gb(refused as f64)
            ),
            met: flash.budget_use <= 1.0,
        },
        Bar {
            claim: "zoned device write amplification".into(),
            bar: "exactly 1.0".into(),
            measured: format!(
                "{} device / {} host bytes{}",
                flash.flash_device_written_bytes,
                flash.flash_host_written_bytes,
                if exact_wa { " (equal in every run)" } else { " (differ)" }
            ),
            met: exact_wa && !flash_runs.is_empty(),
        },
        Bar {
            claim: "most zones open at once".into(),
            bar: format!("≤ {zone_limit}"),
            measured: most_zones.to_string(),
            met: most_zones <= zone_limit && zone_limit > 0,
        },
    ]
}

impl FlashTierLiveReport {
    pub fn new(config: &FlashTierLiveConfig, results: Vec<ArmResult>) -> FlashTierLiveReport {
        let dram_only = medians(&results, Arm::DramOnly);
        let flash = medians(&results, Arm::Flash);
        let page = dingo_node::chunk::SEGMENT;
        FlashTierLiveReport {
            nodes: config.scale.nodes,
            window_seconds: config.scale.window.as_secs_f64(),
            planned_pinned_bytes: config.scale.pinned_bytes,
            node_pinned_bytes: config.node_pinned_bytes,
            flash_bytes_per_node: u64::from(config.flash.zones) * u64::from(config.flash.zone_pages) * page,
            zone_bytes: u64::from(config.flash.zone_pages) * page,
            max_active_zones: config.flash.max_active_zones,
            write_budget_bytes_per_day: config.flash.write_budget_per_day.bytes(),
            runs: config.runs,
            bars: bars(&results, &dram_only, &flash),
            results,
            dram_only,
            flash,
        }
    }
}

fn gb(bytes: f64) -> String {
    format!("{:.3} GB", bytes / 1e9)
}

impl fmt::Display for FlashTierLiveReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "node flash tier on a live cluster: {} nodes, {:.0} s window, pinned region {} MB per node \
             (the planner plans for {} MB), flash {} MiB per node in {} MiB zones, ≤ {} open, budget {} GB/day; \
             {} run(s), medians",
            self.nodes,
            self.window_seconds,
            self.node_pinned_bytes / 1_000_000,
            self.planned_pinned_bytes / 1_000_000,
            self.flash_bytes_per_node >> 20,
            self.zone_bytes >> 20,
            self.max_active_zones,
            self.write_budget_bytes_per_day / 1_000_000_000,
            self.runs,
        )?;
        writeln!(f)?;
        writeln!(f, "| | DRAM only | flash tier |")?;
        writeln!(f, "|---|---|---|")?;
        let (d, l) = (&self.dram_only, &self.flash);
        let rows: [(&str, String, String); 7] = [
            ("re-reads from disk caused by pin overflow", gb(d.pinned_reread_bytes), gb(l.pinned_reread_bytes)),
            (
                "pinned pages pushed out of DRAM",
                format!("{:.0}", d.pinned_overflow_evictions),
                format!("{:.0}", l.pinned_overflow_evictions),
            ),
            ("maintenance disk reads", gb(d.maintenance_disk_bytes), gb(l.maintenance_disk_bytes)),
            ("foreground p50", format!("{:.1} ms", d.fg_p50_ms), format!("{:.1} ms", l.fg_p50_ms)),
            ("foreground p99", format!("{:.1} ms", d.fg_p99_ms), format!("{:.1} ms", l.fg_p99_ms)),
            (
                "flash host / device writes",
                "–".into(),
                format!("{} / {}", gb(l.flash_host_written_bytes), gb(l.flash_device_written_bytes)),
            ),
            ("busiest node's flash writes per day / budget", "–".into(), format!("{:.3}", l.budget_use)),
        ];
        for (what, dram, flash) in rows {
            writeln!(f, "| {what} | {dram} | {flash} |")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "| run | arm | re-reads | fg p50 / p99 ms | flash host / device bytes | pinned to flash | \
             refused (budget / space) / dropped | max zones | work complete | deadline misses |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        for r in &self.results {
            let l = &r.flash;
            writeln!(
                f,
                "| {} | {} | {} | {:.1} / {:.1} | {} / {} | {} | {} / {} / {} | {} | {} | {} |",
                r.run,
                r.arm.name(),
                gb(r.pinned_reread_bytes as f64),
                r.fg_p50_ms,
                r.fg_p99_ms,
                l.host_written_bytes,
                l.device_written_bytes,
                gb(l.pinned_written_bytes as f64),
                gb(l.refused_over_budget_bytes as f64),
                gb(l.refused_no_space_bytes as f64),
                gb(l.dropped_queue_full_bytes as f64),
                l.max_open_zones,
                r.work_complete,
                r.deadline_misses
            )?;
        }
        writeln!(f)?;
        writeln!(f, "| claim | bar | measured | met |")?;
        writeln!(f, "|---|---|---|---|")?;
        for b in &self.bars {
            writeln!(f, "| {} | {} | {} | {} |", b.claim, b.bar, b.measured, if b.met { "yes" } else { "no" })?;
        }
        Ok(())
    }
}
