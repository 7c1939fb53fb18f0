//! `dingo bench ...`: benchmarks that print their figures (and JSON with
//! `--json`), so targets are checked by measurement, not by timed tests.

pub mod fairness;
pub mod flash;
pub mod iocontrol;
pub mod planner;
pub mod waiting;

/// Peak resident set size of this process, from /proc (Linux); 0 elsewhere.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
