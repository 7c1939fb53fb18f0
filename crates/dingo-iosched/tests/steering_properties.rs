//! Invariants of the steering policy and the congestion detector
//! (proptest): weights stay in bounds, cuts come at most once per RTT, the
//! weight always comes back, orders are permutations, and a disk on
//! profile never signals.

use dingo_iosched::congestion::{CongestionConfig, CongestionDetector};
use dingo_iosched::steering::{Steering, SteeringConfig};
use proptest::prelude::*;

/// (µs since the previous event, disk, congested)
fn replies() -> impl Strategy<Value = Vec<(u64, u32, bool)>> {
    prop::collection::vec((0u64..200_000, 0u32..4, any::<bool>()), 1..200)
}

proptest! {
    #[test]
    fn cc_stays_in_bounds_and_is_cut_at_most_once_per_rtt(events in replies()) {
        let config = SteeringConfig::default();
        let floor = config.floor_ppm as f64 / 1e6;
        let mut s = Steering::new(config);
        let mut now = 0u64;
        let mut last_cut: [Option<u64>; 4] = [None; 4];
        for (gap, disk, congested) in events {
            now += gap;
            let before = s.cc(disk, now);
            s.on_reply(disk, congested, now);
            let after = s.cc(disk, now);
            prop_assert!((floor..=1.0).contains(&after), "{after}");
            if after < before - 1e-12 {
                prop_assert!(congested);
                if let Some(t) = last_cut[disk as usize] {
                    prop_assert!(now - t >= config.rtt_us, "cut twice within an RTT");
                }
                last_cut[disk as usize] = Some(now);
            } else if !congested {
                prop_assert_eq!(after, before);
            }
        }
        // Without signals every weight comes back to 1 within
        // (1 RTT quiet + 1 / increase RTTs).
        let back = now + config.rtt_us * (1 + 1_000_000 / config.increase_ppm);
        for d in 0..4 {
            prop_assert_eq!(s.cc(d, back), 1.0);
        }
    }

    #[test]
    fn orders_are_permutations_led_by_a_positive_weight(
        events in replies(),
        disks in prop::collection::vec(0u32..6, 1..5),
        seed in any::<u64>(),
    ) {
        let mut s = Steering::new(SteeringConfig::default());
        let mut now = 0;
        for (gap, disk, congested) in events {
            now += gap;
            s.on_reply(disk, congested, now);
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        let order = s.order(&disks, 256 << 10, now, &mut rng);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..disks.len()).collect::<Vec<_>>());
        // The same inputs give the same order.
        let mut rng2 = fastrand::Rng::with_seed(seed);
        prop_assert_eq!(s.order(&disks, 256 << 10, now, &mut rng2), order);
    }

    #[test]
    fn a_disk_on_its_profile_never_signals(costs in prop::collection::vec((1u64..100_000, 0u64..500_000), 1..300)) {
        let mut d = CongestionDetector::new(CongestionConfig::default());
        let mut now = 0;
        for (cost, gap) in costs {
            now += gap;
            d.observe(now, cost, cost);
            prop_assert!(!d.state().congested);
            prop_assert_eq!(d.state().slowness_permille, 1000);
        }
    }

    #[test]
    fn a_disk_slower_than_its_profile_by_more_than_the_threshold_signals(
        costs in prop::collection::vec((1u64..100_000, 0u64..500_000), 1..100),
        factor_permille in 1_101u64..10_000,
    ) {
        let mut d = CongestionDetector::new(CongestionConfig::default());
        let mut now = 0;
        for (cost, gap) in costs {
            now += gap;
            d.observe(now, cost * factor_permille / 1000 + 1, cost);
            prop_assert!(d.state().congested, "{:?}", d.state());
        }
    }
}
