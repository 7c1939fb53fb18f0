//! One small Bloom filter per set, all packed in one bit array.
//!
//! Bloom filter crates allocate one heap object per filter and size
//! themselves for a target error rate; here there are hundreds of thousands
//! of 40-120-bit filters that must cost exactly their bits (they are most of
//! KSet's DRAM, Table 4.2), so they are slices of one `FixedBitSet`.

use fixedbitset::FixedBitSet;

use crate::hash::probe_hash;

pub struct BloomArray {
    bits_per_set: u32,
    hashes: u32,
    bits: FixedBitSet,
}

impl BloomArray {
    /// `sets` filters of `bits_per_set` bits probed by `hashes` hash functions.
    pub fn new(sets: u32, bits_per_set: u32, hashes: u32) -> BloomArray {
        assert!(bits_per_set > 0 && hashes > 0);
        BloomArray { bits_per_set, hashes, bits: FixedBitSet::with_capacity(sets as usize * bits_per_set as usize) }
    }

    /// Probe positions by double hashing (Kirsch-Mitzenmacher).
    fn probes(&self, set: u32, key: u64) -> impl Iterator<Item = usize> + use<> {
        let h = probe_hash(key);
        let (h1, h2) = (h as u32, (h >> 32) as u32 | 1);
        let (base, width) = (set as usize * self.bits_per_set as usize, self.bits_per_set);
        (0..self.hashes).map(move |i| base + (h1.wrapping_add(i.wrapping_mul(h2)) % width) as usize)
    }

    /// Replaces a set's filter with one over `keys` (done on every set write, L990).
    pub fn rebuild(&mut self, set: u32, keys: impl Iterator<Item = u64>) {
        let base = set as usize * self.bits_per_set as usize;
        self.bits.set_range(base..base + self.bits_per_set as usize, false);
        for key in keys {
            for bit in self.probes(set, key) {
                self.bits.insert(bit);
            }
        }
    }

    /// False means the key is certainly not in the set.
    pub fn may_contain(&self, set: u32, key: u64) -> bool {
        self.probes(set, key).all(|bit| self.bits.contains(bit))
    }

    pub fn dram_bits(&self) -> u64 {
        self.bits.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_a_bounded_false_positive_rate() {
        // 3 bits per object, 2 hashes: the theoretical rate is (1 - e^(-2/3))^2 ≈ 0.22.
        let mut bloom = BloomArray::new(100, 60, 2);
        let mut false_positives = 0;
        for set in 0..100u32 {
            let keys: Vec<u64> = (0..20).map(|i| u64::from(set) * 1000 + i).collect();
            bloom.rebuild(set, keys.iter().copied());
            assert!(keys.iter().all(|&k| bloom.may_contain(set, k)));
            false_positives += (500..600).filter(|&k| bloom.may_contain(set, u64::from(set) * 1000 + k)).count();
        }
        let rate = false_positives as f64 / 10_000.0;
        assert!((0.15..0.30).contains(&rate), "false positive rate {rate}");
    }
}
