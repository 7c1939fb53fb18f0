//! The thesis' analytical models, used as test oracles.

/// DLWA of FIFO+ GC under uniform random page writes (Eq. 5.1-5.3):
/// `E = b(1 - (1 - 1/(u·b))^(t·E))` solved for the expected valid pages `E`
/// of a victim, then `DLWA = b / E[X | X > 0]` with `X ~ Bin(b, E/b)`.
/// `b` = pages per erase unit, `t` = physical and `u` = user erase units.
/// Uses `P(X > 0) = 1 - (1 - p)^b`, correcting the exponent at L1432.
pub fn fifo_plus_dlwa(eu_pages: u32, total_eus: f64, user_eus: f64) -> f64 {
    assert!(total_eus > user_eus && user_eus > 0.0);
    let b = f64::from(eu_pages);
    let miss = 1.0 - 1.0 / (user_eus * b);
    // Damped fixed-point iteration; the map is a contraction near the root.
    let mut e = b / 2.0;
    for _ in 0..10_000 {
        let next = b * (1.0 - miss.powf(total_eus * e));
        if (next - e).abs() < 1e-12 {
            break;
        }
        e = 0.5 * e + 0.5 * next;
    }
    let p = e / b;
    let conditional = e / (1.0 - (1.0 - p).powf(b));
    b / conditional
}

/// Theorem 1's simplified KLog → KSet model, counted directly: with `q`
/// objects flushed from the whole log into `s` sets of `w` objects each,
/// the number per set is Poisson(λ = q/s) and every set holding at least
/// `n` of them is rewritten, so app-level WA = 1 + w·P[X ≥ n]/λ
/// (the thesis' Theorem 1, ch. 4; 11.9 at the thesis' L751 parameters).
pub fn klog_direct_alwa(lambda: f64, objects_per_set: f64, threshold: u32) -> f64 {
    assert!(lambda > 0.0 && threshold >= 1);
    let mut term = (-lambda).exp();
    let mut below = 0.0;
    for k in 0..threshold {
        if k > 0 {
            term *= lambda / f64::from(k);
        }
        below += term;
    }
    1.0 + objects_per_set * (1.0 - below) / lambda
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study's recomputation (check_fifoplus_dlwa.py, 7 % OP).
    #[test]
    fn fifo_plus_model_matches_the_study_table() {
        let total_pages = f64::from(1u32 << 18);
        for (kb, want) in [(8u32, 1.87), (16, 3.30), (32, 5.20), (64, 6.94), (128, 7.72)] {
            let b = kb / 4;
            let t = (total_pages / f64::from(b)).floor();
            let got = fifo_plus_dlwa(b, t, t / 1.07);
            assert!((got - want).abs() < 0.02, "{kb} KiB: {got:.3} vs {want}");
        }
    }

    /// check_theorem1.py: 25.4 / 11.9 / 4.6 for n = 1, 2, 3 at q = 5e8, s = 4.6e8, w = 40.
    #[test]
    fn direct_count_matches_the_study() {
        let lambda = 5e8 / 4.6e8;
        for (n, want) in [(1, 25.4), (2, 11.9), (3, 4.6)] {
            let got = klog_direct_alwa(lambda, 40.0, n);
            assert!((got - want).abs() < 0.06, "n={n}: {got:.2} vs {want}");
        }
    }
}
