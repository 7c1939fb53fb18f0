//! Counting device models behind one trait.
//!
//! Payload bytes are never stored: a model tracks only where pages live, so
//! it can count what the NAND really writes. Device-level write
//! amplification (DLWA) is then *measured* as NAND bytes over host bytes,
//! never looked up from a curve (the thesis' simulator assumed it, L1040).

mod ftl;
mod zoned;

pub use ftl::{FtlConfig, FtlDevice, GcPolicy};
pub use zoned::{ZoneState, ZonedConfig, ZonedDevice};

use serde::Serialize;

/// Bytes per flash page for every model: 4 KiB, the set size Kangaroo
/// matches (L988).
pub const PAGE_BYTES: u64 = 4096;

/// What a device has written, cumulatively.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceCounters {
    /// Bytes the host asked to write.
    pub host_write_bytes: u64,
    /// Bytes programmed into NAND: host writes plus GC copies.
    pub nand_write_bytes: u64,
    /// Erase-unit (or zone) erasures.
    pub erases: u64,
}

impl DeviceCounters {
    /// Counters accumulated since `earlier`.
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        DeviceCounters {
            host_write_bytes: self.host_write_bytes - earlier.host_write_bytes,
            nand_write_bytes: self.nand_write_bytes - earlier.nand_write_bytes,
            erases: self.erases - earlier.erases,
        }
    }

    /// NAND bytes per host byte; 1.0 when nothing was written.
    pub fn write_amplification(&self) -> f64 {
        if self.host_write_bytes == 0 { 1.0 } else { self.nand_write_bytes as f64 / self.host_write_bytes as f64 }
    }
}

/// The part every device model shares: its size and its write counters.
/// The write interfaces differ on purpose (an FTL takes writes anywhere, a
/// zoned device only at a write pointer), so engines hold the concrete model
/// they need and the benchmark reads any of them through this trait.
pub trait Device {
    /// Host-visible capacity in pages of [`PAGE_BYTES`].
    fn capacity_pages(&self) -> u64;
    /// Cumulative write counters.
    fn counters(&self) -> DeviceCounters;
    /// Host-visible capacity in bytes.
    fn capacity_bytes(&self) -> u64 {
        self.capacity_pages() * PAGE_BYTES
    }
}

/// Why a device refused an operation.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    /// An address past the host-visible capacity.
    #[error("page {page} + {pages} is past the capacity of {capacity_pages} pages")]
    OutOfRange { page: u64, pages: u64, capacity_pages: u64 },
    /// A zone append would pass the zone's capacity.
    #[error("zone {zone} has {free_pages} pages left, asked for {pages}")]
    ZoneFull { zone: u32, free_pages: u64, pages: u64 },
    /// Opening one more zone would pass the active-zone limit.
    #[error("opening zone {zone} would exceed the limit of {limit} active zones")]
    TooManyActiveZones { zone: u32, limit: u32 },
}
