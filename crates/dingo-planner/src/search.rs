//! Two searches the set stores share: a galloping search through a sorted
//! slice, and the intersection of two roaring treemaps without cloning
//! either.

use roaring::RoaringTreemap;

/// The number of leading elements of `sorted` that satisfy `pred`, which
/// must hold for a prefix only: like `partition_point`, but searching
/// outward from the front first, so a walk of ascending lookups through
/// one sorted vector costs the log of each step, not of the whole vector.
pub(crate) fn gallop<T: Copy>(sorted: &[T], pred: impl Fn(T) -> bool) -> usize {
    let mut bound = 1;
    while bound <= sorted.len() && pred(sorted[bound - 1]) {
        bound *= 2;
    }
    let lo = bound / 2;
    let hi = bound.min(sorted.len());
    lo + sorted[lo..hi].partition_point(|&x| pred(x))
}

/// `a ∩ b`. Roaring's `&a & &b` on treemaps clones the smaller map whole
/// before intersecting (megabytes for a quantum's scheduled blocks, on
/// every call); this merges the two maps' bitmaps instead.
pub(crate) fn intersection(a: &RoaringTreemap, b: &RoaringTreemap) -> RoaringTreemap {
    RoaringTreemap::from_bitmaps(a.bitmaps().filter_map(|(high, mine)| {
        let (_, theirs) = b.bitmaps().find(|&(h, _)| h == high)?;
        let both = mine & theirs;
        (!both.is_empty()).then_some((high, both))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gallop_matches_partition_point() {
        let sorted: Vec<u64> = (0..300).map(|i| i * 3).collect();
        for len in [0, 1, 2, 3, 7, 64, 300] {
            for probe in 0..=len as u64 * 3 + 1 {
                let v = &sorted[..len];
                assert_eq!(gallop(v, |x| x < probe), v.partition_point(|&x| x < probe), "len {len} probe {probe}");
            }
        }
    }

    #[test]
    fn intersection_matches_roaring() {
        let a: RoaringTreemap = [1, 5, 70_000, 1 << 33, (1 << 33) + 7].into_iter().collect();
        let b: RoaringTreemap = [5, 6, 70_000, (1 << 33) + 7, 1 << 40].into_iter().collect();
        assert_eq!(intersection(&a, &b), &a & &b);
        assert!(intersection(&a, &RoaringTreemap::new()).is_empty());
    }
}
