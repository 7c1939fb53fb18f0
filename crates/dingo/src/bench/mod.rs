//! `dingo bench ...`: benchmarks that print their figures (and JSON with
//! `--json`), so targets are checked by measurement, not by timed tests.

pub mod flash;
pub mod flash_tier;
pub mod iocontrol;
pub mod planner;
