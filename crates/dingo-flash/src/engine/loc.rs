//! The large-object cache (thesis L1466-1476): a FIFO log of segments with a
//! full DRAM index. It decides what goes where; its engine does the flash
//! writes, because FairyWREN's LOC resets whole zones (never copying: write
//! amplification 1) while Kangaroo's, on a conventional drive, overwrites
//! its oldest segment in place and leaves the copying to the FTL's GC.

use std::collections::{HashMap, VecDeque};

use crate::device::PAGE_BYTES;
use crate::object::Object;

/// The flash work an insert needs from the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentWrite {
    /// The segment to write the sealed buffer into (whole).
    pub segment: u32,
    /// The oldest segment, evicted whole to make room (erase it first).
    pub evicted: Option<u32>,
}

pub struct LargeObjectLog {
    /// Sealed segments, oldest first.
    sealed: VecDeque<u32>,
    free: Vec<u32>,
    segment_pages: u32,
    /// Objects in each sealed segment, with the sequence it was sealed at.
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
    /// A log over the given segment ids, each `segment_pages` pages.
    pub fn new(segments: Vec<u32>, segment_pages: u32) -> LargeObjectLog {
        assert!(segments.len() >= 2, "the large-object log needs two segments");
        LargeObjectLog {
            sealed: VecDeque::new(),
            free: segments,
            segment_pages,
            contents: HashMap::new(),
            buffer: Vec::new(),
            buffer_bytes: 0,
            sequence: 0,
            index: HashMap::new(),
            bytes: 0,
        }
    }

    /// The size of `key`'s newest copy and the sealed segment holding it,
    /// `None` for the segment while it is in the DRAM buffer.
    pub fn locate(&self, key: u64) -> Option<(u32, Option<u32>)> {
        let &(size, sequence) = self.index.get(&key)?;
        if sequence == self.sequence {
            return Some((size, None));
        }
        // Sealed segments hold consecutive sequences, oldest first.
        let oldest = self.contents[self.sealed.front()?].0;
        let segment = self.sealed.get((sequence - oldest) as usize).copied()?;
        Some((size, Some(segment)))
    }

    /// The objects sealed into `segment`, in the order written.
    pub fn segment_objects(&self, segment: u32) -> &[Object] {
        self.contents.get(&segment).map_or(&[], |(_, objects)| objects.as_slice())
    }

    /// Buffers `object`; when the buffer is full it is sealed first, and
    /// the returned write says where it goes.
    pub fn insert(&mut self, object: Object) -> Option<SegmentWrite> {
        let segment_bytes = u64::from(self.segment_pages) * PAGE_BYTES;
        assert!(u64::from(object.size_bytes) <= segment_bytes, "object larger than a segment");
        let write = (self.buffer_bytes + u64::from(object.size_bytes) > segment_bytes).then(|| self.seal());
        if let Some((old, _)) = self.index.insert(object.key, (object.size_bytes, self.sequence)) {
            self.bytes -= u64::from(old);
        }
        self.bytes += u64::from(object.size_bytes);
        self.buffer_bytes += u64::from(object.size_bytes);
        self.buffer.push(object);
        write
    }

    /// Seals the buffer into a segment, evicting the oldest one whole if none is free.
    fn seal(&mut self) -> SegmentWrite {
        let evicted = self.free.is_empty().then(|| {
            let victim = self.sealed.pop_front().expect("a full log has sealed segments");
            let (sequence, objects) = self.contents.remove(&victim).expect("sealed segments have contents");
            for o in objects {
                // Only the newest copy of a key is indexed; older ones are already dead.
                if self.index.get(&o.key).is_some_and(|&(_, s)| s == sequence) {
                    self.index.remove(&o.key);
                    self.bytes -= u64::from(o.size_bytes);
                }
            }
            self.free.push(victim);
            victim
        });
        let segment = self.free.pop().expect("a segment was freed");
        self.contents.insert(segment, (self.sequence, std::mem::take(&mut self.buffer)));
        self.sealed.push_back(segment);
        self.buffer_bytes = 0;
        self.sequence += 1;
        SegmentWrite { segment, evicted }
    }

    pub fn segment_pages(&self) -> u32 {
        self.segment_pages
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

#[cfg(test)]
mod tests {
    use super::*;

    /// FIFO: once every segment is sealed, the next seal evicts the oldest
    /// one, and only the objects whose newest copy lived there leave the index.
    #[test]
    fn a_full_log_evicts_its_oldest_segment_whole() {
        let mut log = LargeObjectLog::new(vec![7, 8], 1);
        let object = |key| Object { key, size_bytes: 4096 };
        assert_eq!(log.insert(object(1)), None);
        assert_eq!(log.insert(object(2)), Some(SegmentWrite { segment: 8, evicted: None }));
        assert_eq!(log.insert(object(1)), Some(SegmentWrite { segment: 7, evicted: None }));
        // Key 1's first copy (segment 8) is dead; evicting 8 keeps key 1.
        assert_eq!(log.insert(object(3)), Some(SegmentWrite { segment: 8, evicted: Some(8) }));
        assert_eq!(log.locate(1), Some((4096, Some(8))), "its newest copy");
        assert_eq!(log.locate(2), Some((4096, Some(7))));
        assert_eq!(log.insert(object(4)), Some(SegmentWrite { segment: 7, evicted: Some(7) }));
        assert_eq!(log.locate(2), None, "key 2 was in the evicted segment");
        assert_eq!(log.locate(4), Some((4096, None)), "in the buffer");
        assert_eq!((log.objects(), log.bytes()), (3, 3 * 4096));
    }
}
