use super::*;
use proptest::prelude::*;

const PAGE: u64 = 64 * 1024;

/// 6 zones of 4 pages of 64 KiB; unlimited budget unless a test sets one.
fn config() -> TierConfig {
    TierConfig {
        page_bytes: PAGE,
        zone_pages: 4,
        zones: 6,
        max_active_zones: 4,
        pin_bucket_ms: 1_000,
        write_budget_bytes_per_day: u64::MAX / 2,
        write_burst_bytes: u64::MAX / 2,
    }
}

fn tier(config: TierConfig) -> FlashTier<u64, (), ZonedMedia> {
    let media = ZonedMedia::new(config.zones, config.device_pages_per_zone(), config.max_active_zones);
    FlashTier::new(config, media).unwrap()
}

fn written(a: Admitted) -> bool {
    matches!(a, Admitted::Written(_))
}

/// Every index entry points at a slot of a used zone holding its key, and
/// no more zones are open than allowed.
fn check_invariants<M: TierMedia>(t: &FlashTier<u64, (), M>) {
    for (key, &(zone, slot, ())) in &t.index {
        let z = &t.zones[zone as usize];
        assert_ne!(z.role, Role::Free, "{key} points into a free zone");
        assert_eq!(z.slots.get(slot as usize), Some(key));
    }
    assert!(t.zones.iter().filter(|z| z.open).count() as u32 <= t.config.max_active_zones);
}

#[test]
fn pinned_pages_stay_until_their_bucket_ends_then_go_with_their_zone() {
    let mut t = tier(config());
    for k in 0..3 {
        assert!(written(t.admit(k, (), Admission::PinnedOverflow { until_ms: 1_500 }, 10)));
    }
    // Pins ending in the same 1 s bucket share one zone.
    let zone = t.lookup(&0, 20).unwrap().0.zone;
    assert!((1..3).all(|k| t.lookup(&k, 20).unwrap().0.zone == zone));
    assert!(t.lookup(&2, 1_999).is_some());
    assert!(t.lookup(&2, 2_000).is_none(), "the bucket ends at 2 s");
    assert_eq!(t.stats().pinned_zone_resets, 1);
    assert!(t.is_empty());
    check_invariants(&t);
}

#[test]
fn the_log_drops_its_oldest_zone_first() {
    let mut t = tier(config());
    // 6 zones × 4 pages: page 24 needs a reset of the oldest log zone.
    for k in 0..25 {
        assert!(written(t.admit(k, (), Admission::Evicted, 0)), "page {k}");
    }
    assert_eq!(t.stats().log_zone_resets, 1);
    assert!((0..4).all(|k| t.lookup(&k, 0).is_none()), "the first zone's pages went");
    assert!((4..25).all(|k| t.lookup(&k, 0).is_some()));
    check_invariants(&t);
}

#[test]
fn pins_take_space_from_the_log_and_the_log_never_takes_it_from_pins() {
    let mut t = tier(config());
    for k in 0..24 {
        assert!(written(t.admit(k, (), Admission::Evicted, 0)));
    }
    for k in 100..124 {
        assert!(written(t.admit(k, (), Admission::PinnedOverflow { until_ms: 5_000 }, 0)), "pin {k}");
    }
    assert_eq!(t.admit(999, (), Admission::Evicted, 1), Admitted::NoSpace);
    assert_eq!(t.stats().refused_no_space_bytes, PAGE);
    // Once the pins end, the log has room again.
    assert!(written(t.admit(999, (), Admission::Evicted, 5_000)));
    check_invariants(&t);
}

#[test]
fn the_write_budget_refuses_then_refills() {
    // Two pages of burst, and 100 pages a day: one page per 864 s.
    let c = TierConfig { write_burst_bytes: 2 * PAGE, write_budget_bytes_per_day: 100 * PAGE, ..config() };
    let mut t = tier(c);
    assert!(written(t.admit(1, (), Admission::Evicted, 0)));
    assert!(written(t.admit(2, (), Admission::Evicted, 0)));
    assert_eq!(t.admit(3, (), Admission::Evicted, 0), Admitted::OverBudget);
    assert_eq!(t.admit(3, (), Admission::Evicted, 863_999), Admitted::OverBudget);
    assert!(written(t.admit(3, (), Admission::Evicted, 864_000)));
    assert_eq!(t.stats().refused_over_budget_bytes, 2 * PAGE);
    assert_eq!(t.device_counters().host_write_bytes, 3 * PAGE);
}

#[test]
fn a_page_already_cached_is_not_written_again_and_removal_forgets() {
    let mut t = tier(config());
    let first = t.admit(7, (), Admission::Evicted, 0);
    let Admitted::Written(at) = first else { panic!("{first:?}") };
    assert_eq!(t.admit(7, (), Admission::PinnedOverflow { until_ms: 100 }, 0), Admitted::AlreadyCached(at));
    assert_eq!(t.device_counters().host_write_bytes, PAGE);
    t.remove_range(5..=9);
    assert!(t.lookup(&7, 0).is_none());
}

#[test]
fn invalid_geometry_is_refused() {
    for bad in [
        TierConfig { page_bytes: 1000, ..config() },
        TierConfig { zones: 1, ..config() },
        TierConfig { max_active_zones: 1, ..config() },
        TierConfig { pin_bucket_ms: 0, ..config() },
    ] {
        let media = ZonedMedia::new(4, 64, 4);
        assert!(FlashTier::<u64, (), _>::new(bad, media).is_err(), "{bad:?}");
    }
}

proptest! {
    /// Any sequence of offers, lookups and removals keeps the index true,
    /// stays within the open-zone limit, and on a zoned device writes
    /// exactly what the host wrote.
    #[test]
    fn any_workload_keeps_the_invariants(
        ops in proptest::collection::vec((0u8..4, 0u64..40, 0u64..4_000), 1..300),
    ) {
        let mut t = tier(config());
        let mut now_ms = 0;
        for (op, key, dt) in ops {
            now_ms += dt / 8;
            match op {
                0 => { t.admit(key, (), Admission::Evicted, now_ms); }
                1 => { t.admit(key, (), Admission::PinnedOverflow { until_ms: now_ms + dt }, now_ms); }
                2 => { t.lookup(&key, now_ms); }
                _ => t.remove_range(key..key + 3),
            }
            check_invariants(&t);
        }
        let d = t.device_counters();
        prop_assert_eq!(d.nand_write_bytes, d.host_write_bytes);
        prop_assert!(t.stats().max_open_zones <= 4);
    }
}
