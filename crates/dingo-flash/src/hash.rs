//! Key hashing. Keys are already 64-bit ids, so one strong finaliser is all
//! we need; a hashing crate would only add an indirection around these five
//! lines (the SplitMix64 finaliser, public domain, Steele et al. 2014).

/// Mixes all 64 input bits into every output bit.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hash that places a key: its set, partition and bucket come from it.
pub fn place_hash(key: u64) -> u64 {
    mix64(key)
}

/// A second, independent hash for tags and Bloom filter probes, so that keys
/// colliding on a set do not also collide on their tag.
pub fn probe_hash(key: u64) -> u64 {
    mix64(key ^ 0xD6E8_FEB8_6659_FD93)
}

/// The set a key maps to among `sets` sets.
pub fn set_of(key: u64, sets: u32) -> u32 {
    assert!(sets > 0);
    // Lemire's multiply-shift range reduction: unbiased enough and no division.
    ((u128::from(place_hash(key) >> 32) * u128::from(sets)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_of_spreads_keys_evenly() {
        let sets = 64u32;
        let mut counts = vec![0u32; sets as usize];
        for key in 0..64_000u64 {
            counts[set_of(key, sets) as usize] += 1;
        }
        // 1000 expected per set; a fair hash stays well within ±20 %.
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }
}
