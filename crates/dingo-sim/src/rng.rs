//! A tiny seeded generator (SplitMix64). The model needs reproducible
//! streams from a `--seed` and nothing else; statistical quality beyond
//! SplitMix64's is not needed for placement and sampling.
//!
//! Hand-written rather than taken from `rand`: every published figure of
//! the simulator depends on these exact streams, and `rand` does not promise
//! that `StdRng` or its range sampling give the same values from one release
//! to the next. Here the streams are frozen, and the golden values in the
//! tests fail if they ever change.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by 128-bit multiply (no modulo bias worth
    /// caring about at these sizes).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_bounds_hold() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
            assert!((0.0..1.0).contains(&b.unit()));
        }
    }

    /// The published SplitMix64 outputs (seeds 0 and 1234567), and this
    /// module's mapping of them to `below` and `unit`: a change to any
    /// shifts every simulated figure, and must be made knowingly.
    #[test]
    fn streams_are_frozen() {
        let mut zero = SplitMix64::new(0);
        let firsts = [zero.next_u64(), zero.next_u64(), zero.next_u64()];
        assert_eq!(firsts, [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F]);
        let mut reference = SplitMix64::new(1_234_567);
        assert_eq!([reference.next_u64(), reference.next_u64()], [0x599E_D017_FB08_FC85, 0x2C73_F084_5854_0FA5]);
        let mut below = SplitMix64::new(7);
        assert_eq!([0; 5].map(|_| below.below(1000)), [389, 16, 900, 582, 452]);
        let mut unit = SplitMix64::new(7);
        assert_eq!([unit.unit(), unit.unit()], [0.3898297483912715, 0.01678829452815611]);
    }
}
