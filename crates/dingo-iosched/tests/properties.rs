//! Property tests of the policies' invariants, driving them with a
//! simulated head.

use dingo_iosched::{Class, Classful, ClassfulConfig, Decision, Fifo, Policy, Request, Unit};
use proptest::prelude::*;

/// A request arriving at `at_us`.
#[derive(Clone, Debug)]
struct Arrival {
    at_us: u64,
    class: Class,
    cost_us: u64,
}

fn class() -> impl Strategy<Value = Class> {
    prop_oneof![
        3 => Just(Class::Foreground),
        1 => Just(Class::High),
        3 => (0u64..3).prop_map(|channel| Class::BestEffort { channel }),
    ]
}

fn arrivals(max: usize) -> impl Strategy<Value = Vec<Arrival>> {
    prop::collection::vec((0u64..2_000_000, class(), 1u64..60_000), 1..max).prop_map(|v| {
        let mut v: Vec<Arrival> =
            v.into_iter().map(|(at_us, class, cost_us)| Arrival { at_us, class, cost_us }).collect();
        v.sort_by_key(|a| a.at_us);
        v
    })
}

/// Served units with their start times, in order; request ids are indices.
fn run(policy: &mut dyn Policy, arrivals: &[Arrival]) -> Vec<(u64, Unit)> {
    let mut served = Vec::new();
    let (mut now, mut next, mut retry) = (0u64, 0usize, None::<u64>);
    loop {
        while next < arrivals.len() && arrivals[next].at_us <= now {
            let a = &arrivals[next];
            policy.enqueue(now, Request { id: next as u64, class: a.class, cost_us: a.cost_us }).unwrap();
            next += 1;
            retry = None;
        }
        if retry.is_none_or(|t| t <= now) {
            match policy.next(now) {
                Decision::Serve(u) => {
                    served.push((now, u));
                    now += u.cost_us;
                    retry = None;
                    continue;
                }
                Decision::Wait { until_us } => {
                    assert!(until_us > now);
                    retry = Some(until_us);
                }
                Decision::Idle => retry = None,
            }
        }
        let arrival = arrivals.get(next).map(|a| a.at_us);
        now = match (arrival, retry) {
            (Some(a), Some(r)) => a.min(r),
            (Some(a), None) => a,
            (None, Some(r)) => r,
            (None, None) => return served,
        };
    }
}

fn unit_max(cfg: &ClassfulConfig) -> u64 {
    cfg.segment_us + cfg.reposition_us
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn fifo_serves_whole_requests_in_arrival_order(arrivals in arrivals(60)) {
        let served = run(&mut Fifo::default(), &arrivals);
        let ids: Vec<u64> = served.iter().map(|(_, u)| u.id).collect();
        prop_assert_eq!(ids, (0..arrivals.len() as u64).collect::<Vec<_>>());
        for (_, u) in &served {
            prop_assert!(u.last);
            prop_assert_eq!(u.cost_us, arrivals[u.id as usize].cost_us);
        }
    }

    #[test]
    fn classful_completes_everything_in_order_at_the_right_cost(arrivals in arrivals(60)) {
        let cfg = ClassfulConfig::default();
        let served = run(&mut Classful::new(cfg), &arrivals);
        let mut paid = vec![0u64; arrivals.len()];
        let mut done = vec![false; arrivals.len()];
        for (_, u) in &served {
            let i = u.id as usize;
            prop_assert!(!done[i], "unit after the last one of request {}", i);
            prop_assert!(u.cost_us <= unit_max(&cfg).max(arrivals[i].cost_us));
            paid[i] += u.cost_us;
            done[i] = u.last;
        }
        for (i, a) in arrivals.iter().enumerate() {
            prop_assert!(done[i], "request {} never completed", i);
            // Re-positioning is the only extra cost.
            prop_assert_eq!((paid[i] - a.cost_us) % cfg.reposition_us, 0);
        }
    }

    #[test]
    fn foreground_waits_behind_at_most_the_unit_in_service_plus_the_reservation(arrivals in arrivals(80)) {
        let cfg = ClassfulConfig::default();
        let served = run(&mut Classful::new(cfg), &arrivals);
        for (start, u) in served.iter().filter(|(_, u)| u.class == Class::Foreground) {
            let arrived = arrivals[u.id as usize].at_us;
            let wait = start - arrived;
            // Maintenance head time that overlapped this request's wait.
            let maintenance: u64 = served
                .iter()
                .filter(|(s, m)| m.class != Class::Foreground && s + m.cost_us > arrived && *s < *start)
                .map(|(s, m)| (s + m.cost_us).min(*start) - (*s).max(arrived))
                .sum();
            let bound = 3 * unit_max(&cfg) + wait * cfg.min_share_ppm / 1_000_000;
            prop_assert!(maintenance <= bound, "waited {} behind {} µs of maintenance (bound {})", wait, maintenance, bound);
        }
    }

    #[test]
    fn backlogged_channels_share_fairly(costs in prop::collection::vec(1_000u64..40_000, 2..4)) {
        // Each channel always has work; no foreground.
        let cfg = ClassfulConfig::default();
        let mut p = Classful::new(cfg);
        let channels = costs.len();
        let mut id = 0u64;
        for _ in 0..50 {
            for (c, &cost) in costs.iter().enumerate() {
                p.enqueue(0, Request { id, class: Class::BestEffort { channel: c as u64 }, cost_us: cost }).unwrap();
                id += 1;
            }
        }
        let mut served = vec![0u64; channels];
        let mut now = 0;
        // Stop before any channel runs dry.
        while served.iter().all(|&s| s < 40 * 1_000) {
            match p.next(now) {
                Decision::Serve(u) => {
                    if let Class::BestEffort { channel } = u.class {
                        served[channel as usize] += u.cost_us;
                    }
                    now += u.cost_us;
                }
                Decision::Wait { until_us } => now = until_us,
                Decision::Idle => break,
            }
            let (lo, hi) = (served.iter().min().unwrap(), served.iter().max().unwrap());
            prop_assert!(hi - lo <= unit_max(&cfg), "shares {:?}", served);
        }
    }

    #[test]
    fn saturating_foreground_never_starves_maintenance(fg_cost in 5_000u64..30_000, be_cost in 5_000u64..80_000) {
        let cfg = ClassfulConfig::default();
        let mut p = Classful::new(cfg);
        let (mut now, mut id, mut maintenance_us) = (0u64, 0u64, 0u64);
        for _ in 0..200 {
            p.enqueue(now, Request { id, class: Class::BestEffort { channel: 0 }, cost_us: be_cost }).unwrap();
            id += 1;
        }
        let horizon = 20_000_000;
        while now < horizon {
            // Keep two foreground requests queued at every decision.
            while p.queued() < 202 {
                p.enqueue(now, Request { id, class: Class::Foreground, cost_us: fg_cost }).unwrap();
                id += 1;
            }
            match p.next(now) {
                Decision::Serve(u) => {
                    if u.class != Class::Foreground {
                        maintenance_us += u.cost_us;
                    }
                    now += u.cost_us;
                }
                Decision::Wait { until_us } => now = until_us,
                Decision::Idle => break,
            }
        }
        // At least min_share of head time, less one unit of slack.
        let floor = now * cfg.min_share_ppm / 1_000_000 - unit_max(&cfg);
        prop_assert!(maintenance_us >= floor, "maintenance got {} of {} µs", maintenance_us, now);
    }
}
