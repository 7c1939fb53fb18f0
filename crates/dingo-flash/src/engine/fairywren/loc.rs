//! FairyWREN's large-object cache (L1466-1476): a FIFO log of zone-sized
//! segments with a full DRAM index. Eviction resets a whole zone, so it
//! never copies: write amplification 1.

use std::collections::{HashMap, VecDeque};

use crate::device::{PAGE_BYTES, ZonedDevice};
use crate::object::Object;

pub struct LargeObjectLog {
    zones: VecDeque<u32>,
    free: Vec<u32>,
    zone_pages: u32,
    /// Objects in each sealed zone, and in the DRAM segment buffer.
    contents: HashMap<u32, (u64, Vec<Object>)>,
    buffer: Vec<Object>,
    buffer_bytes: u64,
    /// Segment sequence number of the buffer.
    sequence: u64,
    /// Key → (size, segment sequence) of its newest copy.
    index: HashMap<u64, (u32, u64)>,
    bytes: u64,
}

/// DRAM per indexed object: a 64-bit key and a 32-bit size/location word.
const INDEX_ENTRY_BITS: u64 = 96;

impl LargeObjectLog {
    pub fn new(zones: Vec<u32>, zone_pages: u32) -> LargeObjectLog {
        assert!(zones.len() >= 2, "the large-object log needs two zones");
        LargeObjectLog {
            zones: VecDeque::new(),
            free: zones,
            zone_pages,
            contents: HashMap::new(),
            buffer: Vec::new(),
            buffer_bytes: 0,
            sequence: 0,
            index: HashMap::new(),
            bytes: 0,
        }
    }

    pub fn get(&self, key: u64) -> Option<u32> {
        self.index.get(&key).map(|&(size, _)| size)
    }

    pub fn insert(&mut self, device: &mut ZonedDevice, object: Object) {
        let zone_bytes = u64::from(self.zone_pages) * PAGE_BYTES;
        assert!(u64::from(object.size_bytes) <= zone_bytes, "object larger than a zone");
        if self.buffer_bytes + u64::from(object.size_bytes) > zone_bytes {
            self.seal(device);
        }
        if let Some((old, _)) = self.index.insert(object.key, (object.size_bytes, self.sequence)) {
            self.bytes -= u64::from(old);
        }
        self.bytes += u64::from(object.size_bytes);
        self.buffer_bytes += u64::from(object.size_bytes);
        self.buffer.push(object);
    }

    /// Writes the buffer to a zone, evicting the oldest zone whole if none is free.
    fn seal(&mut self, device: &mut ZonedDevice) {
        if self.free.is_empty() {
            let victim = self.zones.pop_front().expect("a full log has sealed zones");
            let (sequence, objects) = self.contents.remove(&victim).expect("sealed zones have contents");
            for o in objects {
                // Only the newest copy of a key is indexed; older ones are already dead.
                if self.index.get(&o.key).is_some_and(|&(_, s)| s == sequence) {
                    self.index.remove(&o.key);
                    self.bytes -= u64::from(o.size_bytes);
                }
            }
            device.reset(victim).expect("LOC zones exist");
            self.free.push(victim);
        }
        let zone = self.free.pop().expect("a zone was freed");
        device.append(zone, self.zone_pages).expect("an empty LOC zone takes a whole segment");
        self.contents.insert(zone, (self.sequence, std::mem::take(&mut self.buffer)));
        self.zones.push_back(zone);
        self.buffer_bytes = 0;
        self.sequence += 1;
    }

    pub fn objects(&self) -> u64 {
        self.index.len() as u64
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn dram_bits(&self) -> u64 {
        self.index.len() as u64 * INDEX_ENTRY_BITS
    }
}
