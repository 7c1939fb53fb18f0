//! A token bucket counting disk-head time.
//!
//! Hand-written rather than taken from a crate (`governor`, `leaky-bucket`):
//! those read the wall clock and count cells, while the scheduler core must
//! take time as an input and count head-time microseconds.

/// Tokens are head-time µs; the bucket refills continuously at `share_ppm`
/// parts per million of elapsed time, up to `capacity_us`, and may go into
/// debt down to `-floor_us` (a unit is served whole once any token is left).
#[derive(Clone, Debug)]
pub struct Bucket {
    tokens_us: i64,
    /// Refill left over from integer division, in µs × ppm.
    remainder: u64,
    share_ppm: u64,
    capacity_us: i64,
    floor_us: i64,
    last_us: u64,
}

pub const PPM: u64 = 1_000_000;

impl Bucket {
    /// A full bucket.
    pub fn new(share_ppm: u64, capacity_us: u64, floor_us: u64, now_us: u64) -> Self {
        let capacity_us = i64::try_from(capacity_us).unwrap_or(i64::MAX);
        Bucket {
            tokens_us: capacity_us,
            remainder: 0,
            share_ppm: share_ppm.min(PPM),
            capacity_us,
            floor_us: i64::try_from(floor_us).unwrap_or(i64::MAX),
            last_us: now_us,
        }
    }

    pub fn refill(&mut self, now_us: u64) {
        let elapsed = now_us.saturating_sub(self.last_us);
        self.last_us = self.last_us.max(now_us);
        let scaled = u128::from(elapsed) * u128::from(self.share_ppm) + u128::from(self.remainder);
        let add = scaled / u128::from(PPM);
        self.remainder = (scaled % u128::from(PPM)) as u64;
        let add = i64::try_from(add).unwrap_or(i64::MAX);
        self.tokens_us = self.tokens_us.saturating_add(add).min(self.capacity_us);
        if self.tokens_us == self.capacity_us {
            self.remainder = 0;
        }
    }

    pub fn tokens_us(&self) -> i64 {
        self.tokens_us
    }

    pub fn take(&mut self, cost_us: u64) {
        let cost = i64::try_from(cost_us).unwrap_or(i64::MAX);
        self.tokens_us = self.tokens_us.saturating_sub(cost).max(-self.floor_us);
    }

    /// Changes the rate (and the capacity, which is `window_us` of it).
    pub fn set_share(&mut self, now_us: u64, share_ppm: u64, window_us: u64) {
        self.refill(now_us);
        self.share_ppm = share_ppm.min(PPM);
        let cap = u128::from(window_us) * u128::from(self.share_ppm) / u128::from(PPM);
        self.capacity_us = i64::try_from(cap).unwrap_or(i64::MAX);
        self.tokens_us = self.tokens_us.min(self.capacity_us);
    }

    /// Changes the rate, keeping the capacity.
    pub fn set_rate(&mut self, now_us: u64, share_ppm: u64) {
        self.refill(now_us);
        self.share_ppm = share_ppm.min(PPM);
    }

    /// Drops any credit (positive tokens) accrued up to `now_us`, keeping
    /// debt: a bucket that should only fill while its class waits.
    pub fn forget_credit(&mut self, now_us: u64) {
        self.refill(now_us);
        if self.tokens_us > 0 {
            self.tokens_us = 0;
            self.remainder = 0;
        }
    }

    /// Forgives debt beyond `max_debt_us` accrued up to `now_us`.
    pub fn cap_debt(&mut self, now_us: u64, max_debt_us: u64) {
        self.refill(now_us);
        self.tokens_us = self.tokens_us.max(-i64::try_from(max_debt_us).unwrap_or(i64::MAX));
    }

    pub fn share_ppm(&self) -> u64 {
        self.share_ppm
    }

    /// When the bucket, refilled from `last`, holds at least `need_us`
    /// tokens; `None` if it never will (zero rate or too small a capacity).
    pub fn ready_at(&self, need_us: i64) -> Option<u64> {
        if self.tokens_us >= need_us {
            return Some(self.last_us);
        }
        if self.share_ppm == 0 || need_us > self.capacity_us {
            return None;
        }
        let missing = u128::try_from(need_us - self.tokens_us).ok()? * u128::from(PPM);
        let wait = missing.saturating_sub(u128::from(self.remainder)).div_ceil(u128::from(self.share_ppm));
        Some(self.last_us.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_at_its_share_up_to_capacity() {
        let mut b = Bucket::new(250_000, 1_000, 0, 0);
        b.take(1_000);
        assert_eq!(b.tokens_us(), 0);
        b.refill(2_000);
        assert_eq!(b.tokens_us(), 500);
        b.refill(100_000);
        assert_eq!(b.tokens_us(), 1_000);
    }

    #[test]
    fn debt_stops_at_the_floor_and_ready_at_is_exact() {
        let mut b = Bucket::new(100_000, 500, 200, 0);
        b.take(10_000);
        assert_eq!(b.tokens_us(), -200);
        assert_eq!(b.ready_at(1), Some(2_010));
        b.refill(2_009);
        assert_eq!(b.tokens_us(), 0);
        b.refill(2_010);
        assert_eq!(b.tokens_us(), 1);
        assert_eq!(b.ready_at(501), None);
    }

    #[test]
    fn forgetting_credit_keeps_debt() {
        let mut b = Bucket::new(100_000, 500, 200, 0);
        b.forget_credit(0);
        assert_eq!(b.tokens_us(), 0);
        b.refill(1_000);
        assert_eq!(b.tokens_us(), 100);
        b.take(400);
        b.forget_credit(1_000);
        assert_eq!(b.tokens_us(), -200, "debt stays");
    }

    #[test]
    fn capping_debt_forgives_only_the_excess() {
        let mut b = Bucket::new(100_000, 500, 1_000, 0);
        b.take(2_000);
        assert_eq!(b.tokens_us(), -1_000);
        b.cap_debt(0, 300);
        assert_eq!(b.tokens_us(), -300);
        b.cap_debt(1_000, 300);
        assert_eq!(b.tokens_us(), -200, "refilled first, nothing more forgiven");
    }
}
