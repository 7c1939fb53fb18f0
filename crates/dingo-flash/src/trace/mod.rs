//! Seeded synthetic request traces: Zipf popularity with churn, one-hit
//! wonders, and log-normal object sizes fitted to the published means and
//! small-object fractions of the thesis' traces. The real traces are not reachable here;
//! only comparisons between systems on the same trace are meaningful.

mod file;
mod kvcache;
mod twitter;

pub use file::{TraceError, TraceFileError, TraceFormat, read_trace_file};
pub use kvcache::{MAX_OP_COUNT, read_kvcache_csv};
pub use twitter::read_twitter_csv;

use serde::Serialize;

use crate::hash::mix64;
use crate::object::Object;

/// Object sizes: log-normal around `mean_bytes`, clamped; a fraction of
/// keys are large objects (for FairyWREN's large-object cache).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SizeModel {
    pub mean_bytes: u32,
    pub sigma: f64,
    pub min_bytes: u32,
    pub max_bytes: u32,
    /// Share of keys that are large objects, uniform in `large_bytes`.
    pub large_fraction: f64,
    pub large_bytes: (u32, u32),
}

/// A request stream.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TraceConfig {
    pub name: &'static str,
    /// Keys in the popularity distribution.
    pub keys: u64,
    pub zipf_alpha: f64,
    /// Share of requests for keys never seen again.
    pub one_hit_wonder_fraction: f64,
    /// Every this many requests, `churn_fraction` of the ranks are swapped
    /// with random others, so popularity drifts (L886).
    pub churn_every_requests: u64,
    pub churn_fraction: f64,
    pub sizes: SizeModel,
    pub seed: u64,
}

impl TraceConfig {
    /// Facebook-like tiny objects: 291 B mean, clamped to [1 B, 2 KiB] (L1046, L1201).
    pub fn fb_like(keys: u64, seed: u64) -> TraceConfig {
        TraceConfig {
            name: "fb-like",
            keys,
            zipf_alpha: 0.9,
            one_hit_wonder_fraction: 0.1,
            churn_every_requests: 10_000,
            churn_fraction: 0.001,
            sizes: SizeModel {
                mean_bytes: 291,
                sigma: 0.7,
                min_bytes: 1,
                max_bytes: 2048,
                large_fraction: 0.0,
                large_bytes: (0, 0),
            },
            seed,
        }
    }

    /// Twitter-like: 271 B mean, all small (L1046, L1641).
    pub fn twitter_like(keys: u64, seed: u64) -> TraceConfig {
        TraceConfig {
            name: "twitter-like",
            sizes: SizeModel { mean_bytes: 271, sigma: 0.5, ..TraceConfig::fb_like(keys, seed).sizes },
            ..TraceConfig::fb_like(keys, seed)
        }
    }

    /// Meta-kvcache-like, FairyWREN's trace (L1641): 395 B mean, objects
    /// under 2 KiB are 95.2 % of requests and 60.2 % of requested bytes. So
    /// small objects average 0.602 × 395 / 0.952 = 250 B and the 4.8 % large
    /// ones 0.398 × 395 / 0.048 = 3275 B: uniform in [2049, 4501] B, most
    /// just over the LOC's threshold.
    pub fn meta_fw(keys: u64, seed: u64) -> TraceConfig {
        TraceConfig {
            name: "meta-fw",
            sizes: SizeModel {
                mean_bytes: 250,
                sigma: 0.7,
                min_bytes: 1,
                max_bytes: 2048,
                large_fraction: 0.048,
                large_bytes: (2049, 4501),
            },
            ..TraceConfig::fb_like(keys, seed)
        }
    }

    /// A key's size: a pure function of the key, so every request for it agrees.
    pub fn size_of(&self, key: u64) -> u32 {
        let s = self.sizes;
        let h = mix64(key ^ self.seed.rotate_left(17));
        let u1 = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let h2 = mix64(h);
        if ((h2 >> 11) as f64) / ((1u64 << 53) as f64) < s.large_fraction {
            let (lo, hi) = s.large_bytes;
            return lo + (mix64(h2) % u64::from(hi - lo + 1)) as u32;
        }
        let u2 = ((mix64(h2) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        // Box-Muller: a standard normal from two uniforms.
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let mu = f64::from(s.mean_bytes).ln() - s.sigma * s.sigma / 2.0;
        ((mu + s.sigma * z).exp().round() as u32).clamp(s.min_bytes, s.max_bytes)
    }

    /// Generates `requests` requests.
    pub fn generate(&self, requests: u64) -> Vec<Object> {
        let mut generator = Generator::new(*self);
        (0..requests).map(|_| generator.next_request()).collect()
    }
}

/// Inverse-CDF Zipf sampling over a precomputed table: exact, and cheap
/// next to a cache lookup (a binary search over `keys` doubles).
struct Generator {
    config: TraceConfig,
    cdf: Vec<f64>,
    rank_to_key: Vec<u64>,
    rng: fastrand::Rng,
    issued: u64,
    next_wonder: u64,
}

/// One-hit-wonder keys live above this bit so they never meet Zipf keys.
const WONDER_BASE: u64 = 1 << 62;

impl Generator {
    fn new(config: TraceConfig) -> Generator {
        assert!(config.keys > 0 && config.zipf_alpha > 0.0);
        let mut cdf = Vec::with_capacity(config.keys as usize);
        let mut total = 0.0;
        for rank in 1..=config.keys {
            total += (rank as f64).powf(-config.zipf_alpha);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Generator {
            config,
            cdf,
            rank_to_key: (0..config.keys).collect(),
            rng: fastrand::Rng::with_seed(config.seed),
            issued: 0,
            next_wonder: WONDER_BASE,
        }
    }

    fn next_request(&mut self) -> Object {
        let c = self.config;
        if c.churn_every_requests > 0 && self.issued > 0 && self.issued.is_multiple_of(c.churn_every_requests) {
            let swaps = (c.keys as f64 * c.churn_fraction).ceil() as u64;
            for _ in 0..swaps {
                let (a, b) = (self.rng.u64(0..c.keys), self.rng.u64(0..c.keys));
                self.rank_to_key.swap(a as usize, b as usize);
            }
        }
        self.issued += 1;
        let key = if self.rng.f64() < c.one_hit_wonder_fraction {
            self.next_wonder += 1;
            self.next_wonder
        } else {
            let u = self.rng.f64();
            let rank = self.cdf.partition_point(|&p| p < u).min(self.cdf.len() - 1);
            self.rank_to_key[rank]
        };
        Object { key, size_bytes: c.size_of(key) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_hit_their_mean_sizes() {
        for (config, want) in
            [(TraceConfig::fb_like(100_000, 3), 291.0), (TraceConfig::twitter_like(100_000, 3), 271.0)]
        {
            let trace = config.generate(50_000);
            let mean = trace.iter().map(|o| f64::from(o.size_bytes)).sum::<f64>() / trace.len() as f64;
            assert!((mean - want).abs() / want < 0.08, "{}: mean {mean:.0}", config.name);
            assert!(trace.iter().all(|o| (1..=2048).contains(&o.size_bytes)));
        }
    }

    #[test]
    fn traces_are_deterministic_and_skewed() {
        let config = TraceConfig::fb_like(10_000, 9);
        let a = config.generate(20_000);
        assert_eq!(a, config.generate(20_000));
        let wonders = a.iter().filter(|o| o.key >= WONDER_BASE).count();
        assert!((1_600..2_400).contains(&wonders), "{wonders} one-hit wonders");
        // Zipf 0.9: the 100 most popular keys draw a large share.
        let top = a.iter().filter(|o| o.key < 100).count();
        assert!(top > 4_000, "{top}");
    }

    /// The Meta preset against the published mix (L1641): mean 395 B,
    /// small objects 95.2 % of requests and 60.2 % of bytes.
    #[test]
    fn meta_preset_matches_the_published_size_mix() {
        let trace = TraceConfig::meta_fw(400_000, 42).generate(400_000);
        let total: u64 = trace.iter().map(|o| u64::from(o.size_bytes)).sum();
        let small: Vec<_> = trace.iter().filter(|o| o.size_bytes <= 2048).collect();
        let small_bytes: u64 = small.iter().map(|o| u64::from(o.size_bytes)).sum();
        let mean = total as f64 / trace.len() as f64;
        let small_requests = small.len() as f64 / trace.len() as f64;
        let small_share = small_bytes as f64 / total as f64;
        assert!((mean - 395.0).abs() < 20.0, "mean {mean:.0} B");
        assert!((small_requests - 0.952).abs() < 0.01, "small requests {small_requests:.3}");
        assert!((small_share - 0.602).abs() < 0.03, "small bytes {small_share:.3}");
    }

    #[test]
    fn a_key_always_has_the_same_size() {
        let config = TraceConfig::meta_fw(1000, 1);
        let trace = config.generate(5_000);
        assert!(trace.iter().all(|o| o.size_bytes == config.size_of(o.key)));
        assert!(trace.iter().any(|o| o.size_bytes > 2048));
    }
}
