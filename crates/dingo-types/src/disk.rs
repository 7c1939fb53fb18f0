//! The disk-head time model (SPEC §3): a read costs one positioning delay
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
        let transfer = (u128::from(bytes) * 1_000_000).div_ceil(u128::from(self.transfer_bytes_per_sec.max(1)));
        self.positioning_us.saturating_add(u64::try_from(transfer).unwrap_or(u64::MAX))
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
    fn an_empty_read_still_pays_positioning() {
        assert_eq!(DiskModel::HDD.head_time_us(0), 10_000);
    }
}
