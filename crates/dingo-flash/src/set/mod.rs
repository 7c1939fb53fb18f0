//! Sets of objects on flash: KSet, BigHash's buckets and FairyWREN's subsets.
//!
//! The array keeps what the flash holds (each set's objects, sorted
//! NEAR→FAR) and what DRAM holds per set: a Bloom filter and RRIParoo's hit
//! bits, one per object position; positions past the last bit (the FAR end)
//! go untracked (L1000). Writing sets to a device is the caller's job.

mod rrip;

pub use rrip::{Rrip, SetObject, fill};

use fixedbitset::FixedBitSet;

use crate::bloom::BloomArray;
use crate::object::Object;

/// Per-set DRAM sizing.
#[derive(Clone, Copy, Debug)]
pub struct SetDram {
    pub bloom_bits_per_set: u32,
    pub bloom_hashes: u32,
    pub hit_bits_per_set: u32,
}

pub struct SetArray {
    set_bytes: u32,
    sets: Vec<Vec<SetObject>>,
    bloom: BloomArray,
    hit_bits_per_set: u32,
    hits: FixedBitSet,
    objects: u64,
    bytes: u64,
    bloom_false_positives: u64,
}

impl SetArray {
    pub fn new(sets: u32, set_bytes: u32, dram: SetDram) -> SetArray {
        SetArray {
            set_bytes,
            sets: vec![Vec::new(); sets as usize],
            bloom: BloomArray::new(sets, dram.bloom_bits_per_set, dram.bloom_hashes),
            hit_bits_per_set: dram.hit_bits_per_set,
            hits: FixedBitSet::with_capacity(sets as usize * dram.hit_bits_per_set as usize),
            objects: 0,
            bytes: 0,
            bloom_false_positives: 0,
        }
    }

    pub fn sets(&self) -> u32 {
        self.sets.len() as u32
    }

    pub fn set_bytes(&self) -> u32 {
        self.set_bytes
    }

    /// Looks a key up: the Bloom filter first, then a (simulated) set read.
    /// A hit marks the object's hit bit.
    pub fn lookup(&mut self, set: u32, key: u64) -> Option<u32> {
        if !self.bloom.may_contain(set, key) {
            return None;
        }
        let found = self.sets[set as usize].iter().position(|o| o.object.key == key);
        match found {
            Some(pos) => {
                if (pos as u32) < self.hit_bits_per_set {
                    self.hits.insert(set as usize * self.hit_bits_per_set as usize + pos);
                }
                Some(self.sets[set as usize][pos].object.size_bytes)
            }
            None => {
                self.bloom_false_positives += 1;
                None
            }
        }
    }

    /// Removes a set's objects for a rebuild, with hit objects promoted to
    /// NEAR and the hit bits cleared.
    pub fn take(&mut self, set: u32) -> Vec<SetObject> {
        let mut objects = std::mem::take(&mut self.sets[set as usize]);
        let base = set as usize * self.hit_bits_per_set as usize;
        for (pos, o) in objects.iter_mut().enumerate().take(self.hit_bits_per_set as usize) {
            if self.hits.contains(base + pos) {
                o.rrip = 0;
            }
        }
        self.hits.set_range(base..base + self.hit_bits_per_set as usize, false);
        self.objects -= objects.len() as u64;
        self.bytes -= objects.iter().map(|o| u64::from(o.object.size_bytes)).sum::<u64>();
        objects
    }

    /// Stores a set's new contents (ranked NEAR→FAR) and rebuilds its filter.
    pub fn store(&mut self, set: u32, objects: Vec<SetObject>) {
        let bytes: u64 = objects.iter().map(|o| u64::from(o.object.size_bytes)).sum();
        assert!(bytes <= u64::from(self.set_bytes), "set {set} overfull: {bytes} bytes");
        debug_assert!(self.sets[set as usize].is_empty(), "store follows take");
        self.bloom.rebuild(set, objects.iter().map(|o| o.object.key));
        self.objects += objects.len() as u64;
        self.bytes += bytes;
        self.sets[set as usize] = objects;
    }

    /// What set `set` holds, NEAR to FAR: what its page holds.
    pub fn objects_of(&self, set: u32) -> impl Iterator<Item = Object> + '_ {
        self.sets[set as usize].iter().map(|o| o.object)
    }

    pub fn objects(&self) -> u64 {
        self.objects
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn bloom_false_positives(&self) -> u64 {
        self.bloom_false_positives
    }

    pub fn dram_bits(&self) -> u64 {
        self.bloom.dram_bits() + self.hits.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;

    #[test]
    fn hit_bits_promote_on_the_next_rebuild_only() {
        let dram = SetDram { bloom_bits_per_set: 64, bloom_hashes: 2, hit_bits_per_set: 1 };
        let mut sets = SetArray::new(2, 4096, dram);
        let o = |key| SetObject { object: Object { key, size_bytes: 100 }, rrip: 6 };
        sets.store(1, vec![o(1), o(2)]);
        assert_eq!(sets.lookup(1, 1), Some(100));
        assert_eq!(sets.lookup(1, 2), Some(100)); // position 1: untracked
        assert_eq!(sets.lookup(1, 3), None);
        let taken = sets.take(1);
        assert_eq!(taken.iter().map(|o| o.rrip).collect::<Vec<_>>(), vec![0, 6]);
        assert_eq!(sets.objects(), 0);
        assert_eq!(sets.dram_bits(), 2 * 64 + 2);
    }
}
