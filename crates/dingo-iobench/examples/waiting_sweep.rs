//! The waiting twin over many seeds and run lengths: where the figures in
//! docs/IO_CONTROL.md ("Long runs") come from.
//!
//! ```text
//! cargo run --release -p dingo-iobench --example waiting_sweep -- \
//!     [--spec full|quick|long] [--duration-s N] [--warmup-s N] [--window-s N] \
//!     [--retune-s N] [--seeds FIRST-LAST] [--per-seed] \\
//!     [--burst-max N] [--gap-means-ms A,B,C] [--gap-weights-ppm A,B,C]
//! ```
//!
//! Prints, per goal, the medians over the seeds of the gate's mean slowdown,
//! scrub MB/s and free bytes, the fixed-rate scrubber's MB/s at that
//! slowdown on its curve of medians (classful, the bar's baseline; and FIFO,
//! the node before issue 15, for information), and the CFQ-like baseline.

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use dingo_iobench::stats::median;
use dingo_iobench::waiting::model::{
    Background, WaitSpec, foreground, interpolate_at, mean_slowdown_ms, simulate, simulate_on,
};
use dingo_iosched::PolicyKind;

/// FIFO fixed rates, ppm of head time: lower than the classful sweep's,
/// since a whole 4 MiB read ahead of foreground costs far more slowdown.
const FIFO_SHARES_PPM: [u64; 6] = [5_000, 10_000, 25_000, 50_000, 100_000, 200_000];

/// The waiting twin over many seeds; options override the chosen spec.
#[derive(Parser)]
struct Args {
    /// The load and timing to start from: the real experiment's one-minute
    /// runs (`full`), its `--quick` form, or half-hour runs with the node's
    /// tuning window (`long`).
    #[arg(long, value_enum, default_value_t = Spec::Full)]
    spec: Spec,
    #[arg(long)]
    duration_s: Option<u64>,
    #[arg(long)]
    warmup_s: Option<u64>,
    /// Foreground trace the tuner replays, s.
    #[arg(long)]
    window_s: Option<u64>,
    #[arg(long)]
    retune_s: Option<u64>,
    /// Seeds to run, `FIRST-LAST`.
    #[arg(long, default_value = "1-9", value_parser = seed_range)]
    seeds: (u64, u64),
    /// Print each seed's figures and the gate's final `(s, t)`.
    #[arg(long)]
    per_seed: bool,
    /// Most foreground reads in a burst.
    #[arg(long)]
    burst_max: Option<u32>,
    /// Means of the three idle-gap phases, ms.
    #[arg(long, value_delimiter = ',')]
    gap_means_ms: Option<Vec<u64>>,
    /// Weights of the three idle-gap phases, ppm.
    #[arg(long, value_delimiter = ',')]
    gap_weights_ppm: Option<Vec<u64>>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Spec {
    Full,
    Quick,
    Long,
}

fn seed_range(value: &str) -> anyhow::Result<(u64, u64)> {
    let (a, b) = value.split_once('-').with_context(|| format!("{value}: expected FIRST-LAST"))?;
    let seeds: (u64, u64) = (a.parse()?, b.parse()?);
    if seeds.0 > seeds.1 {
        bail!("{value}: first after last");
    }
    Ok(seeds)
}

/// The three values of a comma-separated option.
fn three(option: &str, values: Vec<u64>) -> anyhow::Result<[u64; 3]> {
    values.try_into().map_err(|v: Vec<u64>| anyhow::anyhow!("{option}: expected 3 numbers, got {}", v.len()))
}

impl Args {
    fn spec(&self) -> anyhow::Result<WaitSpec> {
        let mut spec = match self.spec {
            Spec::Full => WaitSpec::full(),
            Spec::Quick => WaitSpec::quick(),
            Spec::Long => WaitSpec::long(),
        };
        spec.duration_s = self.duration_s.unwrap_or(spec.duration_s);
        spec.warmup_s = self.warmup_s.unwrap_or(spec.warmup_s);
        spec.window_us = self.window_s.map_or(spec.window_us, |s| s * 1_000_000);
        spec.retune_us = self.retune_s.map_or(spec.retune_us, |s| s * 1_000_000);
        spec.burst_max = self.burst_max.unwrap_or(spec.burst_max);
        if let Some(ms) = self.gap_means_ms.clone() {
            spec.gap_means_us = three("--gap-means-ms", ms)?.map(|ms| ms * 1_000);
        }
        if let Some(ppm) = self.gap_weights_ppm.clone() {
            spec.gap_weights_ppm = three("--gap-weights-ppm", ppm)?;
        }
        if spec.warmup_s + spec.tail_s >= spec.duration_s {
            bail!(
                "warm-up {} s + tail {} s leave nothing of {} s to measure",
                spec.warmup_s,
                spec.tail_s,
                spec.duration_s
            );
        }
        Ok(spec)
    }
}

/// One seed's figures.
struct Seed {
    /// Per goal: (slowdown ms, MB/s, free bytes achieved / planned).
    waiting: Vec<(f64, f64, f64)>,
    /// Per goal: the gate's (s KiB, t ms) at the end of the run.
    gate: Vec<(u64, f64)>,
    fixed: Vec<(f64, f64)>,
    fifo: Vec<(f64, f64)>,
    cfq: (f64, f64),
}

fn one_seed(spec: &WaitSpec, seed: u64) -> Seed {
    let fg = foreground(spec, seed);
    let reference = simulate(spec, &fg, Background::Reference);
    let point = |run: &dingo_iobench::waiting::model::DiskRun| {
        (mean_slowdown_ms(spec, &fg, run, &reference), run.scrub_mb_s(spec))
    };
    let (mut waiting, mut gate) = (Vec::new(), Vec::new());
    for &goal_us in &spec.goals_us {
        let w = simulate(spec, &fg, Background::Waiting { goal_us });
        let (slow, mb) = point(&w);
        let g = simulate(spec, &fg, Background::Groups { goal_us });
        waiting.push((slow, mb, g.achieved_free_bytes as f64 / g.planned_free_bytes.max(1) as f64));
        gate.push(w.gate.map_or((0, 0.0), |p| (p.size_bytes >> 10, p.threshold_us as f64 / 1e3)));
    }
    let fixed = spec
        .fixed_rate_shares_ppm
        .iter()
        .map(|&share_ppm| point(&simulate(spec, &fg, Background::FixedRate { share_ppm })))
        .collect();
    let fifo = FIFO_SHARES_PPM
        .iter()
        .map(|&share_ppm| point(&simulate_on(spec, &fg, Background::FixedRate { share_ppm }, PolicyKind::Fifo)))
        .collect();
    let cfq = point(&simulate(spec, &fg, Background::CfqLike));
    Seed { waiting, gate, fixed, fifo, cfq }
}

/// The curve of medians per rate.
fn curve(runs: &[Seed], pick: impl Fn(&Seed) -> &Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    (0..pick(&runs[0]).len())
        .map(|i| {
            (median(runs.iter().map(|r| pick(r)[i].0).collect()), median(runs.iter().map(|r| pick(r)[i].1).collect()))
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (spec, seeds, per_seed) = (args.spec()?, args.seeds, args.per_seed);
    let started = std::time::Instant::now();
    let runs: Vec<Seed> = (seeds.0..=seeds.1).map(|s| one_seed(&spec, s)).collect();
    println!(
        "twin: {} s per run, figures {}-{} s, window {} s, retune {} s, seeds {}-{} ({:.1} s to compute)",
        spec.duration_s,
        spec.warmup_s,
        spec.duration_s - spec.tail_s,
        spec.window_us / 1_000_000,
        spec.retune_us / 1_000_000,
        seeds.0,
        seeds.1,
        started.elapsed().as_secs_f64()
    );
    let fixed = curve(&runs, |r| &r.fixed);
    let fifo = curve(&runs, |r| &r.fifo);
    println!("fixed rate, classful (the bar's baseline): {}", show(&fixed, &spec.fixed_rate_shares_ppm));
    println!("fixed rate, FIFO (information only): {}", show(&fifo, &FIFO_SHARES_PPM));
    for (g, &goal_us) in spec.goals_us.iter().enumerate() {
        let slow: Vec<f64> = runs.iter().map(|r| r.waiting[g].0).collect();
        let mb: Vec<f64> = runs.iter().map(|r| r.waiting[g].1).collect();
        let free = median(runs.iter().map(|r| r.waiting[g].2).collect());
        let over = slow.iter().filter(|&&s| s > 1.25 * goal_us as f64 / 1e3).count();
        let (s, m) = (median(slow.clone()), median(mb.clone()));
        let (base, ext) = interpolate_at(&fixed, s);
        let (base_fifo, ext_fifo) = interpolate_at(&fifo, s);
        println!(
            "goal {} ms: slowdown median {s:.2} ms (mean {:.2}, {over} of {} seeds over 1.25 x goal), scrub {m:.1} \
             MB/s, free bytes {free:.2}; fixed rate at that slowdown {base:.2} MB/s (x{:.2}{}), FIFO fixed rate \
             {base_fifo:.2} MB/s (x{:.2}{})",
            goal_us as f64 / 1e3,
            slow.iter().sum::<f64>() / slow.len() as f64,
            slow.len(),
            m / base,
            if ext { ", extrapolated" } else { "" },
            m / base_fifo,
            if ext_fifo { ", extrapolated" } else { "" },
        );
        if per_seed {
            let cells: Vec<String> = slow.iter().zip(&mb).map(|(s, m)| format!("{s:.2}/{m:.1}")).collect();
            println!("  per seed (ms/MB/s): {}", cells.join(" "));
            let gates: Vec<String> = runs.iter().map(|r| format!("{}K/{:.0}ms", r.gate[g].0, r.gate[g].1)).collect();
            println!("  gate at the end (s/t): {}", gates.join(" "));
        }
    }
    let cfq = (median(runs.iter().map(|r| r.cfq.0).collect()), median(runs.iter().map(|r| r.cfq.1).collect()));
    println!("CFQ-like: {:.2} ms, {:.2} MB/s", cfq.0, cfq.1);
    Ok(())
}

fn show(curve: &[(f64, f64)], shares_ppm: &[u64]) -> String {
    let cells: Vec<String> = curve
        .iter()
        .zip(shares_ppm)
        .map(|((s, m), share)| format!("{:.1} %: {s:.2} ms {m:.2} MB/s", *share as f64 / 1e4))
        .collect();
    cells.join("; ")
}
