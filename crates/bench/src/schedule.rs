//! The open-loop schedule: at `rate` requests per second over all connections, request `i`
//! (numbered from 0 across the whole run) is meant to go out at `start + i / rate`.
//!
//! A connection takes the next number when it is free, waits for that request's time if it is
//! early, and measures the latency from the *intended* time, not from when it actually sent.
//! When the server stalls, every connection is busy, the numbers whose time has passed wait,
//! and their latency includes the wait — the requests a real open-loop client would have sent
//! during the stall are not silently omitted (coordinated omission, as wrk2 corrects it).

use std::time::{Duration, Instant};

/// Intended send times at a fixed rate.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    /// Nanoseconds between consecutive requests.
    interval_ns: f64,
}

impl Schedule {
    /// `rate` requests per second from `start`; `rate` must be positive and finite.
    pub fn new(start: Instant, rate: f64) -> Schedule {
        assert!(rate > 0.0 && rate.is_finite(), "rate must be positive");
        Schedule {
            start,
            interval_ns: 1e9 / rate,
        }
    }

    /// Offset of request `i` from the start.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_nanos((i as f64 * self.interval_ns).round() as u64)
    }

    /// When request `i` is meant to be sent.
    pub fn intended(&self, i: u64) -> Instant {
        self.start + self.offset(i)
    }

    /// How many requests are due strictly before `start + elapsed` (the requests of a run
    /// that lasts `elapsed`).
    pub fn due_within(&self, elapsed: Duration) -> u64 {
        let n = (elapsed.as_nanos() as f64 / self.interval_ns).ceil();
        n as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evenly_spaced_from_the_start() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, 1000.0);
        assert_eq!(s.intended(0), t0);
        assert_eq!(s.offset(1), Duration::from_millis(1));
        assert_eq!(s.offset(2500), Duration::from_millis(2500));
        assert_eq!(s.intended(7) - s.intended(6), Duration::from_millis(1));
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        // 3 per second: 333.33 ms apart; after 3 million requests exactly 1e6 s, not
        // 3e6 x 333.333 ms rounded each time.
        let s = Schedule::new(Instant::now(), 3.0);
        assert_eq!(s.offset(1), Duration::from_nanos(333_333_333));
        assert_eq!(s.offset(2), Duration::from_nanos(666_666_667));
        assert_eq!(s.offset(3_000_000), Duration::from_secs(1_000_000));
        // Never decreasing, at most 1 ns of rounding from the ideal at each point.
        let mut last = Duration::ZERO;
        for i in 0..10_000 {
            let o = s.offset(i);
            assert!(o >= last);
            let ideal = i as f64 * 1e9 / 3.0;
            assert!((o.as_nanos() as f64 - ideal).abs() <= 1.0);
            last = o;
        }
    }

    #[test]
    fn requests_due_in_a_run() {
        let s = Schedule::new(Instant::now(), 200.0);
        assert_eq!(s.due_within(Duration::from_secs(5)), 1000);
        assert_eq!(s.due_within(Duration::from_millis(4)), 1);
        assert_eq!(s.due_within(Duration::from_micros(5001)), 2);
        assert_eq!(s.due_within(Duration::ZERO), 0);
    }
}
