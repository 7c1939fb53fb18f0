//! FWSets' storage (L1480-1484): sets kept as objects in log-structured
//! zones, one write stream per subset kind (hot, cold), a DRAM location per
//! subset, and a FIFO of sealed zones for garbage collection.
//!
//! Invariants: each subset has at most one live location; a page of a
//! sealed zone is live iff the location table points at it; every stream
//! has at most one open zone.

use std::collections::VecDeque;

use crate::device::ZonedDevice;

/// Which subset of a set: with hot/cold the "hot" subset holds the
/// unpopular, often rewritten objects (L1515); without it there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subset {
    Hot = 0,
    Cold = 1,
}

const NOWHERE: u32 = u32::MAX;

/// A subset written into a zone, in write order.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    pub set: u32,
    pub subset: Subset,
    pub page: u32,
}

pub struct SetZones {
    zone_pages: u32,
    /// Pages per subset write (1 for 4 KiB subsets, 2 for an 8 KiB set).
    subset_pages: u32,
    location: [Vec<u32>; 2],
    open: [Option<u32>; 2],
    contents: Vec<Vec<Placed>>,
    /// Live subsets per zone.
    live: Vec<u32>,
    /// Sealed zones of each stream, oldest first: each subset kind is its
    /// own log (L1515).
    sealed: [VecDeque<u32>; 2],
}

impl SetZones {
    /// `hot_cold` false keeps only the hot stream.
    pub fn new(sets: u32, zones: u32, zone_pages: u32, subset_pages: u32, hot_cold: bool) -> SetZones {
        assert!(zone_pages.is_multiple_of(subset_pages), "subsets must tile a zone");
        let cold = if hot_cold { vec![NOWHERE; sets as usize] } else { Vec::new() };
        SetZones {
            zone_pages,
            subset_pages,
            location: [vec![NOWHERE; sets as usize], cold],
            open: [None, None],
            contents: vec![Vec::new(); zones as usize],
            live: vec![0; zones as usize],
            sealed: [VecDeque::new(), VecDeque::new()],
        }
    }

    /// The open zone of a stream if it can take one more subset; otherwise
    /// finishes it (queueing it for GC) and returns None.
    pub fn open_with_room(&mut self, device: &mut ZonedDevice, subset: Subset) -> Option<u32> {
        let zone = self.open[subset as usize]?;
        if device.write_pointer(zone) + self.subset_pages <= self.zone_pages {
            return Some(zone);
        }
        device.finish(zone).expect("open zones exist");
        self.sealed[subset as usize].push_back(zone);
        self.open[subset as usize] = None;
        None
    }

    pub fn set_open(&mut self, subset: Subset, zone: u32) {
        assert!(self.open[subset as usize].is_none(), "one open zone per stream");
        self.open[subset as usize] = Some(zone);
    }

    /// Appends a subset at its stream's open zone (which has room); returns
    /// the device page it starts at.
    pub fn append(&mut self, device: &mut ZonedDevice, set: u32, subset: Subset) -> u32 {
        let zone = self.open[subset as usize].expect("caller opened a zone");
        let offset = device.append(zone, self.subset_pages).expect("the open zone has room");
        let page = zone * self.zone_pages + offset;
        let old = std::mem::replace(&mut self.location[subset as usize][set as usize], page);
        if old != NOWHERE {
            self.live[(old / self.zone_pages) as usize] -= 1;
        }
        self.live[zone as usize] += 1;
        self.contents[zone as usize].push(Placed { set, subset, page });
        page
    }

    /// The device page a subset was last written at, if ever.
    pub fn location(&self, set: u32, subset: Subset) -> Option<u32> {
        let page = self.location[subset as usize][set as usize];
        (page != NOWHERE).then_some(page)
    }

    pub fn subset_pages(&self) -> u32 {
        self.subset_pages
    }

    /// The GC victim: the sealed zone of either log with the fewest live
    /// subsets (greedy), removed from its queue, with its live subsets.
    /// Greedy rather than FIFO so that GC leaves cold zones, whose subsets
    /// rarely die, alone and a pass always frees more than it copies.
    pub fn take_victim(&mut self) -> Option<(u32, Vec<Placed>)> {
        let (stream, at) = (0..2)
            .flat_map(|stream| self.sealed[stream].iter().enumerate().map(move |(at, &z)| (stream, at, z)))
            .min_by_key(|&(_, _, z)| self.live[z as usize])
            .map(|(stream, at, _)| (stream, at))?;
        let zone = self.sealed[stream].remove(at).expect("found above");
        let placed = std::mem::take(&mut self.contents[zone as usize]);
        let live: Vec<Placed> =
            placed.into_iter().filter(|p| self.location[p.subset as usize][p.set as usize] == p.page).collect();
        debug_assert_eq!(live.len() as u32, self.live[zone as usize]);
        Some((zone, live))
    }

    /// DRAM for the location table: 32 bits per subset.
    pub fn dram_bits(&self) -> u64 {
        self.location.iter().map(|l| l.len() as u64 * 32).sum()
    }
}
