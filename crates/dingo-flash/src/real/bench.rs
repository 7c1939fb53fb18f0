//! The real engine against the simulator: one trace replayed through an
//! engine (Kangaroo or FairyWREN) twice, same configuration and seed, once
//! with no payloads and once with its pages in a file; the same [`replay`]
//! measures both, and the real run also times every get and put.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::bench::{BenchSize, Budgets, RunResult, mean_size, replay, synthetic_trace};
use crate::engine::fairywren::{FairyWren, FairyWrenConfig};
use crate::engine::kangaroo::{Kangaroo, KangarooConfig};
use crate::engine::{CacheEngine, EngineStats};
use crate::object::Object;
use crate::real::{FilePages, FileStats, RealError};

/// Latency and throughput of one kind of operation, after warm-up.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct OpTiming {
    pub ops: u64,
    /// Operations per second of time spent inside them (one thread).
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Puts that seal a segment (and write sets or run GC) show only here.
    pub p999_us: f64,
}

impl OpTiming {
    fn of(mut nanos: Vec<u64>) -> OpTiming {
        if nanos.is_empty() {
            return OpTiming::default();
        }
        let total_secs = nanos.iter().sum::<u64>() as f64 / 1e9;
        nanos.sort_unstable();
        let at = |q: f64| nanos[((nanos.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
        OpTiming {
            ops: nanos.len() as u64,
            ops_per_sec: nanos.len() as f64 / total_secs.max(1e-9),
            p50_us: at(0.50),
            p99_us: at(0.99),
            p999_us: at(0.999),
        }
    }
}

/// The real engine's run: the simulator's measures plus timings and the file's counters.
#[derive(Clone, Debug, Serialize)]
pub struct RealRun {
    pub result: RunResult,
    /// Every get (one per request).
    pub get: OpTiming,
    /// Every insert after a miss, admitted or not.
    pub put: OpTiming,
    /// Whether the page file bypassed the page cache.
    pub o_direct: bool,
    /// Whole run, warm-up included.
    pub file: FileStats,
    pub wall_secs: f64,
}

/// The engines the real bench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RealSystem {
    /// Kangaroo on the FTL model: defaults (log 5 %, n = 2, RRIP 3), admission 1.
    Kangaroo,
    /// FairyWREN on the zoned model: defaults (Table 5.4), 256 zones as in the benchmark.
    FairyWren,
}

impl RealSystem {
    pub fn name(self) -> &'static str {
        match self {
            RealSystem::Kangaroo => "kangaroo",
            RealSystem::FairyWren => "fairywren",
        }
    }
}

/// The configuration both runs of a system share.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum RealConfig {
    Kangaroo(KangarooConfig),
    FairyWren(FairyWrenConfig),
}

/// Zones of the FairyWREN device, as in the benchmark's comparison.
const FAIRYWREN_ZONES: u64 = 256;

/// The simulator and the real engine on one trace.
#[derive(Clone, Debug, Serialize)]
pub struct RealBenchReport {
    pub system: RealSystem,
    pub trace: String,
    pub budgets: Budgets,
    pub config: RealConfig,
    pub simulator: RunResult,
    pub simulator_wall_secs: f64,
    pub real: RealRun,
}

/// A measure of both runs and their ratio.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CrossCheck {
    pub measure: &'static str,
    pub simulator: f64,
    pub real: f64,
}

impl CrossCheck {
    /// Real over simulated; 1.0 when both are zero.
    pub fn ratio(&self) -> f64 {
        if self.simulator == 0.0 && self.real == 0.0 { 1.0 } else { self.real / self.simulator }
    }
}

impl RealBenchReport {
    /// Miss ratio and write rates, simulator against real.
    pub fn cross_checks(&self) -> [CrossCheck; 3] {
        let (s, r) = (&self.simulator, &self.real.result);
        [
            CrossCheck { measure: "miss ratio", simulator: s.miss_ratio, real: r.miss_ratio },
            CrossCheck {
                measure: "app write B/req",
                simulator: s.app_write_bytes_per_request,
                real: r.app_write_bytes_per_request,
            },
            CrossCheck {
                measure: "device write B/req",
                simulator: s.device_write_bytes_per_request,
                real: r.device_write_bytes_per_request,
            },
        ]
    }

    /// Whether every cross-checked measure is within `tolerance` (0.1 = 10 %).
    pub fn agrees_within(&self, tolerance: f64) -> bool {
        self.cross_checks().iter().all(|c| (c.ratio() - 1.0).abs() <= tolerance)
    }
}

/// The engine under test, timed per operation once warm-up is over.
struct Timed<'a, E> {
    engine: &'a mut E,
    warmup_requests: u64,
    requests: u64,
    get_nanos: Vec<u64>,
    put_nanos: Vec<u64>,
}

impl<E: CacheEngine> CacheEngine for Timed<'_, E> {
    fn get(&mut self, key: u64) -> Option<u32> {
        // Every request starts with one get, so this counts requests.
        self.requests += 1;
        let start = Instant::now();
        let found = self.engine.get(key);
        if self.requests > self.warmup_requests {
            self.get_nanos.push(start.elapsed().as_nanos() as u64);
        }
        found
    }

    fn insert(&mut self, object: Object) {
        let start = Instant::now();
        self.engine.insert(object);
        if self.requests > self.warmup_requests {
            self.put_nanos.push(start.elapsed().as_nanos() as u64);
        }
    }

    fn stats(&self) -> EngineStats {
        self.engine.stats()
    }
}

/// A system's configuration on the budgets' device, sized for `trace`'s
/// mean object, everything admitted.
pub fn real_bench_config(system: RealSystem, budgets: &Budgets, trace: &[Object], seed: u64) -> RealConfig {
    let (pages, mean) = (budgets.device_pages(), mean_size(trace));
    match system {
        RealSystem::Kangaroo => RealConfig::Kangaroo(KangarooConfig {
            admission_probability: 1.0,
            seed,
            ..KangarooConfig::new(pages, mean)
        }),
        RealSystem::FairyWren => RealConfig::FairyWren(FairyWrenConfig {
            admission_probability: 1.0,
            seed,
            ..FairyWrenConfig::new(pages, (pages / FAIRYWREN_ZONES) as u32, mean)
        }),
    }
}

/// The real engine's replay, timed.
struct TimedRun {
    result: RunResult,
    get: OpTiming,
    put: OpTiming,
    wall_secs: f64,
}

fn replay_timed(engine: &mut impl CacheEngine, trace: &[Object], budgets: &Budgets, system: &str) -> TimedRun {
    let mut timed = Timed {
        engine,
        warmup_requests: budgets.warmup_requests,
        requests: 0,
        get_nanos: Vec::with_capacity(trace.len()),
        put_nanos: Vec::new(),
    };
    let started = Instant::now();
    let result = replay(&mut timed, trace, budgets, system, "real", 1.0);
    let wall_secs = started.elapsed().as_secs_f64();
    TimedRun { result, get: OpTiming::of(timed.get_nanos), put: OpTiming::of(timed.put_nanos), wall_secs }
}

/// Replays `trace` through the simulated and the real `system`
/// ([`real_bench_config`]); the real one's pages live in a new file in `dir`.
pub fn run_real_bench(
    system: RealSystem,
    trace_name: &str,
    trace: &[Object],
    budgets: &Budgets,
    seed: u64,
    dir: &Path,
) -> Result<RealBenchReport, RealError> {
    assert!(trace.len() as u64 > budgets.warmup_requests, "nothing left to measure after warm-up");
    let config = real_bench_config(system, budgets, trace, seed);
    let pages = FilePages::create(&dir.join(format!("{}-pages.img", system.name())))?;
    let o_direct = pages.is_direct();
    let sim_name = format!("{} (simulator)", system.name());
    let real_name = format!("{} (real)", system.name());
    let started = Instant::now();
    let (simulator, simulator_wall_secs, run, mut pages) = match config {
        RealConfig::Kangaroo(c) => {
            let simulator = replay(&mut Kangaroo::new(c), trace, budgets, &sim_name, "simulator", 1.0);
            let simulator_wall_secs = started.elapsed().as_secs_f64();
            let mut engine = Kangaroo::with_pages(c, pages);
            let run = replay_timed(&mut engine, trace, budgets, &real_name);
            (simulator, simulator_wall_secs, run, engine.into_pages())
        }
        RealConfig::FairyWren(c) => {
            let simulator = replay(&mut FairyWren::new(c), trace, budgets, &sim_name, "simulator", 1.0);
            let simulator_wall_secs = started.elapsed().as_secs_f64();
            let mut engine = FairyWren::with_pages(c, pages);
            let run = replay_timed(&mut engine, trace, budgets, &real_name);
            (simulator, simulator_wall_secs, run, engine.into_pages())
        }
    };
    if let Some(error) = pages.take_error() {
        return Err(error);
    }
    let TimedRun { result, get, put, wall_secs } = run;
    Ok(RealBenchReport {
        system,
        trace: trace_name.to_string(),
        budgets: *budgets,
        config,
        simulator,
        simulator_wall_secs,
        real: RealRun { result, get, put, o_direct, file: pages.stats(), wall_secs },
    })
}

/// The report as Markdown: both runs, the cross-check and the file's counters.
pub fn real_markdown(report: &RealBenchReport) -> String {
    let (s, r) = (&report.simulator, &report.real);
    let mut out = format!(
        "{} (defaults, admission 1) on trace {}: {} requests measured after {} of warm-up; device {} MiB.\n\n",
        report.system.name(),
        report.trace,
        s.requests,
        report.budgets.warmup_requests,
        report.budgets.device_bytes >> 20
    );
    out += "| engine | miss ratio | app B/req | device B/req | get ops/s | get p50 / p99 / p99.9 µs | put ops/s | put p50 / p99 / p99.9 µs | O_DIRECT | wall s |\n";
    out += "|---|---|---|---|---|---|---|---|---|---|\n";
    out += &format!(
        "| simulator | {:.4} | {:.0} | {:.0} | – | – | – | – | – | {:.1} |\n",
        s.miss_ratio, s.app_write_bytes_per_request, s.device_write_bytes_per_request, report.simulator_wall_secs
    );
    let direct = if r.o_direct { "yes" } else { "no: the filesystem refused it, buffered IO (page-cache latencies)" };
    out += &format!(
        "| real (file) | {:.4} | {:.0} | {:.0} | {:.0} | {:.1} / {:.1} / {:.1} | {:.0} | {:.1} / {:.1} / {:.1} | {direct} | {:.1} |\n\n",
        r.result.miss_ratio,
        r.result.app_write_bytes_per_request,
        r.result.device_write_bytes_per_request,
        r.get.ops_per_sec,
        r.get.p50_us,
        r.get.p99_us,
        r.get.p999_us,
        r.put.ops_per_sec,
        r.put.p50_us,
        r.put.p99_us,
        r.put.p999_us,
        r.wall_secs
    );
    out += "| measure | simulator | real | real / simulator | within 10 % |\n|---|---|---|---|---|\n";
    for c in report.cross_checks() {
        let ok = if (c.ratio() - 1.0).abs() <= 0.1 { "yes" } else { "no" };
        out += &format!("| {} | {:.4} | {:.4} | {:.4} | {ok} |\n", c.measure, c.simulator, c.real, c.ratio());
    }
    let f = &r.file;
    out += &format!(
        "\nPage file (whole run): {} pages written ({} MiB), {} flash reads ({} MiB), {} verified, {} corrupt, {} missing, {} oversized pages, {} IO errors.\n",
        f.pages_written,
        f.write_bytes >> 20,
        f.reads,
        f.read_bytes >> 20,
        f.verified,
        f.corrupt,
        f.missing,
        f.oversized_pages,
        f.io_errors
    );
    out
}

/// Both engines, simulated and real, on one prefix of the quick synthetic
/// trace (`dingo bench flash --real`).
#[derive(Clone, Debug, Serialize)]
pub struct RealCrossChecks {
    pub reports: Vec<RealBenchReport>,
}

impl std::fmt::Display for RealCrossChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.reports.iter().try_for_each(|r| writeln!(f, "{}", real_markdown(r)))
    }
}

/// Replays the first `requests` of the quick synthetic trace through the
/// simulated and the real Kangaroo, then FairyWREN, their pages in files
/// in a new temporary directory under `parent` (the system's if `None`),
/// removed afterwards. `requests` must be at least 1.
pub fn run_real_cross_checks(requests: usize, seed: u64, parent: Option<&Path>) -> Result<RealCrossChecks, RealError> {
    let (name, mut trace) = synthetic_trace(BenchSize::Quick, seed);
    trace.truncate(requests);
    let budgets = Budgets::for_size(BenchSize::Quick, trace.len() as u64);
    let dir = match parent {
        Some(parent) => tempfile::tempdir_in(parent),
        None => tempfile::tempdir(),
    }
    .map_err(|source| RealError::Create { path: parent.unwrap_or(&std::env::temp_dir()).to_path_buf(), source })?;
    let trace_name = format!("{name}, first {}", trace.len());
    let reports = [RealSystem::Kangaroo, RealSystem::FairyWren]
        .into_iter()
        .map(|system| run_real_bench(system, &trace_name, &trace, &budgets, seed, dir.path()))
        .collect::<Result<_, _>>()?;
    Ok(RealCrossChecks { reports })
}
