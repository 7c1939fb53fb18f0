//! The flash a tier writes to, seen as zones: a zoned device as it is, or a
//! conventional SSD whose logical space is cut into zone-sized ranges.

use crate::device::{Device, DeviceCounters, DeviceError, FtlConfig, FtlDevice, ZonedConfig, ZonedDevice};

/// Zone operations of the tier's flash, in 4 KiB device pages.
pub trait TierMedia {
    /// Appends `pages` at `zone`'s write pointer.
    fn append(&mut self, zone: u32, pages: u32) -> Result<(), DeviceError>;
    /// Closes an open zone; its unwritten space is lost until reset.
    fn finish(&mut self, zone: u32) -> Result<(), DeviceError>;
    /// Empties a zone.
    fn reset(&mut self, zone: u32) -> Result<(), DeviceError>;
    fn counters(&self) -> DeviceCounters;
}

/// A zoned (ZNS-style) device: a reset erases the zone, nothing is copied,
/// so device writes equal host writes.
pub struct ZonedMedia(pub ZonedDevice);

impl ZonedMedia {
    pub fn new(zones: u32, zone_pages: u32, max_active_zones: u32) -> ZonedMedia {
        ZonedMedia(ZonedDevice::new(ZonedConfig { zones, zone_pages, max_active_zones }))
    }
}

impl TierMedia for ZonedMedia {
    fn append(&mut self, zone: u32, pages: u32) -> Result<(), DeviceError> {
        self.0.append(zone, pages).map(|_| ())
    }

    fn finish(&mut self, zone: u32) -> Result<(), DeviceError> {
        self.0.finish(zone)
    }

    fn reset(&mut self, zone: u32) -> Result<(), DeviceError> {
        self.0.reset(zone)
    }

    fn counters(&self) -> DeviceCounters {
        self.0.counters()
    }
}

/// A conventional SSD with a page-mapped FTL, written zone by zone at
/// logical offsets. A "reset" only moves the tier's write pointer back: the
/// drive learns the old pages are dead only when they are overwritten, so
/// its garbage collection copies them meanwhile (no TRIM, as with a cache
/// file on a filesystem that does not discard).
pub struct ConventionalMedia {
    device: FtlDevice,
    zone_pages: u32,
    write_pointer: Vec<u32>,
}

impl ConventionalMedia {
    pub fn new(zones: u32, zone_pages: u32, ftl: FtlConfig) -> ConventionalMedia {
        let logical_pages = u64::from(zones) * u64::from(zone_pages);
        ConventionalMedia {
            device: FtlDevice::new(FtlConfig { logical_pages, ..ftl }),
            zone_pages,
            write_pointer: vec![0; zones as usize],
        }
    }
}

impl TierMedia for ConventionalMedia {
    fn append(&mut self, zone: u32, pages: u32) -> Result<(), DeviceError> {
        let wp = self.write_pointer[zone as usize];
        if wp + pages > self.zone_pages {
            let free_pages = u64::from(self.zone_pages - wp);
            return Err(DeviceError::ZoneFull { zone, free_pages, pages: u64::from(pages) });
        }
        let first = u64::from(zone) * u64::from(self.zone_pages) + u64::from(wp);
        self.device.write(first, u64::from(pages))?;
        self.write_pointer[zone as usize] = wp + pages;
        Ok(())
    }

    fn finish(&mut self, _zone: u32) -> Result<(), DeviceError> {
        Ok(())
    }

    fn reset(&mut self, zone: u32) -> Result<(), DeviceError> {
        self.write_pointer[zone as usize] = 0;
        Ok(())
    }

    fn counters(&self) -> DeviceCounters {
        self.device.counters()
    }
}
