//! The statistics every experiment uses: medians over runs and percentiles
//! of latency samples.

/// The median: the middle value, or the mean of the two middle values of an
/// even count; 0 when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] }
}

/// Nearest-rank percentile of µs samples, in ms; 0 when empty.
pub fn percentile_ms(samples_us: &[u64], q: f64) -> f64 {
    if samples_us.is_empty() {
        return 0.0;
    }
    let mut s = samples_us.to_vec();
    s.sort_unstable();
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1] as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let samples: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&samples, 0.99), 99.0);
        assert_eq!(percentile_ms(&samples, 0.5), 50.0);
        assert_eq!(percentile_ms(&[7000], 0.99), 7.0);
        assert_eq!(percentile_ms(&[], 0.99), 0.0);
    }
}
