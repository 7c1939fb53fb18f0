//! Progress for runs followed through a log rather than a terminal (a
//! month at 1 EB takes hours): a line every [`LOG_EVERY`], none for runs
//! shorter than that, the clock passed in.

use std::time::{Duration, Instant};

/// Every how often [`ProgressLog::line`] gives a line.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

pub struct ProgressLog {
    /// What is counted: quanta, or the paper's runs.
    unit: &'static str,
    started: Instant,
    last: Instant,
}

impl ProgressLog {
    pub fn new(now: Instant, unit: &'static str) -> ProgressLog {
        ProgressLog { unit, started: now, last: now }
    }

    /// `what: done/len unit, seconds since the start`, if a line is due at
    /// `now` (a clock read before the last line's is not a minute later).
    pub fn line(&mut self, now: Instant, what: &str, done: u64, len: u64) -> Option<String> {
        if now.saturating_duration_since(self.last) < LOG_EVERY {
            return None;
        }
        self.last = now;
        let secs = now.saturating_duration_since(self.started).as_secs_f64();
        Some(format!("{what}: {done}/{len} {}, {secs:.0} s", self.unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_due_once_a_minute() {
        let start = Instant::now();
        let mut log = ProgressLog::new(start, "quanta");
        assert_eq!(log.line(start, "run", 0, 10), None);
        assert_eq!(log.line(start + LOG_EVERY - Duration::from_millis(1), "run", 1, 10), None);
        assert_eq!(log.line(start + LOG_EVERY, "run", 2, 10).as_deref(), Some("run: 2/10 quanta, 60 s"));
        assert_eq!(log.line(start + LOG_EVERY + Duration::from_secs(59), "run", 3, 10), None);
        assert_eq!(log.line(start, "run", 3, 10), None, "a clock read earlier");
        assert_eq!(log.line(start + 2 * LOG_EVERY, "run", 4, 10).as_deref(), Some("run: 4/10 quanta, 120 s"));
    }
}
