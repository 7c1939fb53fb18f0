//! The disk-head time model (DESIGN §1): a read costs one positioning delay
//! plus its bytes at the transfer rate. Budgets and results are kept in
//! head-time microseconds as well as bytes.

use serde::{Deserialize, Serialize};

/// Service-time parameters of one disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskModel {
    /// Seek plus rotational delay per request, in microseconds.
    pub positioning_us: u64,
    /// Sustained transfer rate in bytes per second. Never zero.
    pub transfer_bytes_per_sec: u64,
}

impl DiskModel {
    /// A nearline HDD: 10 ms positioning, 150 MB/s.
    pub const HDD: DiskModel = DiskModel { positioning_us: 10_000, transfer_bytes_per_sec: 150_000_000 };

    /// Head time of one request of `bytes` bytes, in microseconds.
    pub fn head_time_us(&self, bytes: u64) -> u64 {
        debug_assert!(self.transfer_bytes_per_sec > 0, "transfer rate must be positive");
        let rate = self.transfer_bytes_per_sec.max(1);
        // 64-bit division unless the product overflows (requests over 18 TB):
        // the planner computes this for every read it schedules.
        let transfer = match bytes.checked_mul(1_000_000) {
            Some(scaled) => scaled.div_ceil(rate),
            None => u64::try_from((u128::from(bytes) * 1_000_000).div_ceil(u128::from(rate))).unwrap_or(u64::MAX),
        };
        self.positioning_us.saturating_add(transfer)
    }
}

impl Default for DiskModel {
    fn default() -> Self {
        Self::HDD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_reads_a_256mb_block_in_about_1_7_seconds() {
        let t = DiskModel::HDD.head_time_us(256_000_000);
        assert_eq!(t, 10_000 + 1_706_667);
    }

    #[test]
    fn huge_requests_take_the_wide_path_with_the_same_rounding() {
        let model = DiskModel { positioning_us: 0, transfer_bytes_per_sec: 3 };
        assert_eq!(model.head_time_us(1), 333_334);
        let huge = u64::MAX / 1_000;
        let exact = (u128::from(huge) * 1_000_000).div_ceil(3);
        assert_eq!(u128::from(model.head_time_us(huge)), exact.min(u128::from(u64::MAX)));
    }

    #[test]
    fn an_empty_read_still_pays_positioning() {
        assert_eq!(DiskModel::HDD.head_time_us(0), 10_000);
    }
}
