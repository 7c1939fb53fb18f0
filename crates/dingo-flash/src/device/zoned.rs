//! A zoned (WREN) device: zones written only at their write pointer, reset
//! whole by the host, and a hard limit on simultaneously open zones.
//!
//! The device never moves data, so its NAND bytes equal host bytes: any
//! garbage collection is the host's and shows up as application-level write
//! amplification instead.
//!
//! Invariants: a zone's write pointer never exceeds its capacity; the number
//! of open zones never exceeds `max_active_zones` (FairyWREN needs 4, L1374).

use super::{Device, DeviceCounters, DeviceError, PAGE_BYTES};

/// Zoned device geometry.
#[derive(Clone, Copy, Debug)]
pub struct ZonedConfig {
    pub zones: u32,
    pub zone_pages: u32,
    pub max_active_zones: u32,
}

/// A zone's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Empty,
    /// Written but not full: counts against the active-zone limit.
    Open,
    /// Full or finished: readable, writable only after a reset.
    Full,
}

/// Counting model of a zoned device.
pub struct ZonedDevice {
    config: ZonedConfig,
    write_pointer: Vec<u32>,
    state: Vec<ZoneState>,
    active: u32,
    max_active_seen: u32,
    counters: DeviceCounters,
}

impl ZonedDevice {
    pub fn new(config: ZonedConfig) -> ZonedDevice {
        assert!(config.zones > 0 && config.zone_pages > 0 && config.max_active_zones > 0);
        ZonedDevice {
            config,
            write_pointer: vec![0; config.zones as usize],
            state: vec![ZoneState::Empty; config.zones as usize],
            active: 0,
            max_active_seen: 0,
            counters: DeviceCounters::default(),
        }
    }

    pub fn config(&self) -> ZonedConfig {
        self.config
    }

    pub fn state(&self, zone: u32) -> ZoneState {
        self.state[zone as usize]
    }

    /// Appends `pages` at the zone's write pointer and returns the first
    /// page's offset inside the zone. A zone that fills becomes `Full` and
    /// stops counting as active.
    pub fn append(&mut self, zone: u32, pages: u32) -> Result<u32, DeviceError> {
        self.check_zone(zone)?;
        let wp = self.write_pointer[zone as usize];
        let free_pages = match self.state[zone as usize] {
            ZoneState::Full => 0,
            _ => self.config.zone_pages - wp,
        };
        if pages > free_pages {
            return Err(DeviceError::ZoneFull { zone, free_pages: u64::from(free_pages), pages: u64::from(pages) });
        }
        if self.state[zone as usize] == ZoneState::Empty && pages > 0 {
            if self.active == self.config.max_active_zones {
                return Err(DeviceError::TooManyActiveZones { zone, limit: self.config.max_active_zones });
            }
            self.state[zone as usize] = ZoneState::Open;
            self.active += 1;
            self.max_active_seen = self.max_active_seen.max(self.active);
        }
        self.write_pointer[zone as usize] = wp + pages;
        let bytes = u64::from(pages) * PAGE_BYTES;
        self.counters.host_write_bytes += bytes;
        self.counters.nand_write_bytes += bytes;
        if wp + pages == self.config.zone_pages && pages > 0 {
            self.close(zone);
        }
        Ok(wp)
    }

    /// Closes an open zone early; its remaining capacity is lost until reset.
    pub fn finish(&mut self, zone: u32) -> Result<(), DeviceError> {
        self.check_zone(zone)?;
        if self.state[zone as usize] == ZoneState::Open {
            self.close(zone);
        }
        Ok(())
    }

    /// Erases a zone: write pointer back to 0.
    pub fn reset(&mut self, zone: u32) -> Result<(), DeviceError> {
        self.check_zone(zone)?;
        if self.state[zone as usize] == ZoneState::Open {
            self.active -= 1;
        }
        if self.write_pointer[zone as usize] > 0 {
            self.counters.erases += 1;
        }
        self.state[zone as usize] = ZoneState::Empty;
        self.write_pointer[zone as usize] = 0;
        Ok(())
    }

    /// Pages written in a zone since its last reset.
    pub fn write_pointer(&self, zone: u32) -> u32 {
        self.write_pointer[zone as usize]
    }

    /// Zones open right now.
    pub fn active_zones(&self) -> u32 {
        self.active
    }

    /// The most zones ever open at once.
    pub fn max_active_seen(&self) -> u32 {
        self.max_active_seen
    }

    fn close(&mut self, zone: u32) {
        self.state[zone as usize] = ZoneState::Full;
        self.active -= 1;
    }

    fn check_zone(&self, zone: u32) -> Result<(), DeviceError> {
        if zone >= self.config.zones {
            return Err(DeviceError::OutOfRange {
                page: u64::from(zone) * u64::from(self.config.zone_pages),
                pages: 0,
                capacity_pages: self.capacity_pages(),
            });
        }
        Ok(())
    }
}

impl Device for ZonedDevice {
    fn capacity_pages(&self) -> u64 {
        u64::from(self.config.zones) * u64::from(self.config.zone_pages)
    }

    fn counters(&self) -> DeviceCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn device(max_active_zones: u32) -> ZonedDevice {
        ZonedDevice::new(ZonedConfig { zones: 8, zone_pages: 4, max_active_zones })
    }

    #[test]
    fn appends_follow_the_write_pointer_and_fill_closes() {
        let mut d = device(2);
        assert_eq!(d.append(0, 3).unwrap(), 0);
        assert_eq!(d.state(0), ZoneState::Open);
        assert_eq!(d.append(0, 1).unwrap(), 3);
        assert_eq!(d.state(0), ZoneState::Full);
        assert_eq!(d.active_zones(), 0);
        assert!(matches!(d.append(0, 1), Err(DeviceError::ZoneFull { .. })));
        d.reset(0).unwrap();
        assert_eq!(d.append(0, 4).unwrap(), 0);
        assert_eq!(d.counters().write_amplification(), 1.0);
        assert_eq!(d.counters().erases, 1);
    }

    #[test]
    fn active_zone_limit_is_enforced() {
        let mut d = device(2);
        d.append(0, 1).unwrap();
        d.append(1, 1).unwrap();
        assert_eq!(d.append(2, 1), Err(DeviceError::TooManyActiveZones { zone: 2, limit: 2 }));
        d.finish(0).unwrap();
        d.append(2, 1).unwrap();
        assert_eq!(d.max_active_seen(), 2);
    }

    proptest! {
        /// Whatever the host does, at most the limit of zones are ever open
        /// and refused operations change nothing.
        #[test]
        fn never_more_than_the_limit_active(ops in prop::collection::vec((0u8..3, 0u32..8, 1u32..4), 1..300)) {
            let mut d = device(4);
            for (op, zone, pages) in ops {
                let before = d.counters();
                let result = match op {
                    0 => d.append(zone, pages).map(|_| ()),
                    1 => d.finish(zone),
                    _ => d.reset(zone),
                };
                if result.is_err() {
                    prop_assert_eq!(d.counters(), before);
                }
                prop_assert!(d.active_zones() <= 4);
            }
            prop_assert!(d.max_active_seen() <= 4);
            prop_assert_eq!(d.counters().nand_write_bytes, d.counters().host_write_bytes);
        }
    }
}
