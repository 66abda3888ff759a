//! The `Date` field value (IMF-fixdate, RFC 9110 §5.6.7), formatted at most once a second per
//! thread: every response carries it, and formatting a date costs far more than a lookup.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

thread_local! {
    static CACHE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
    /// How this thread reads the clock: see [`Clock`].
    static CLOCK: Cell<Clock> = const { Cell::new(Clock::EveryCall) };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// A plain thread: every call reads the clock.
    EveryCall,
    /// An event-loop thread that called [`new_round`] since the cache was last checked.
    RoundStale,
    /// An event-loop thread whose cache was checked in the current round.
    RoundFresh,
}

/// Marks the start of an event-loop round on the calling thread (after a poll for I/O, before
/// the work it woke): from then on this thread reads the clock at most once per round, as
/// nginx updates its cached time once per loop iteration. A `Date` can then lag by the length
/// of one round — the time the loop spends between two polls.
pub fn new_round() {
    CLOCK.with(|c| c.set(Clock::RoundStale));
}

/// The current time as an IMF-fixdate, reformatted when the second changes.
pub fn now() -> [u8; DATE_LEN] {
    now_stamped().1
}

/// The Unix second [`now`] stands for: on an event-loop thread in a round that has read the
/// clock, no clock read at all.
pub fn now_secs() -> u64 {
    if CLOCK.with(Cell::get) == Clock::RoundFresh {
        return CACHE.with(Cell::get).0;
    }
    now_stamped().0
}

/// [`now`] and the Unix second it stands for: a caller that keeps bytes built around the date
/// (a whole response-head prefix, say) rebuilds them only when the second changes.
pub fn now_stamped() -> (u64, [u8; DATE_LEN]) {
    let clock = CLOCK.with(Cell::get);
    if clock == Clock::RoundFresh {
        return CACHE.with(Cell::get);
    }
    if clock == Clock::RoundStale {
        CLOCK.with(|c| c.set(Clock::RoundFresh));
    }
    let secs = unix_secs_coarse();
    CACHE.with(|c| {
        let (cached, value) = c.get();
        if cached == secs {
            return (secs, value);
        }
        let value = format(UNIX_EPOCH + std::time::Duration::from_secs(secs));
        c.set((secs, value));
        (secs, value)
    })
}

/// Whole seconds since the epoch from the kernel's coarse clock: the time of the last tick
/// (1-4 ms old), read without the TSC, a fraction of the cost of `SystemTime::now` on a VM
/// (every response reads it; a `Date` has one-second resolution anyway).
#[cfg(target_os = "linux")]
fn unix_secs_coarse() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the one we lend it.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if ret == 0 {
        u64::try_from(ts.tv_sec).unwrap_or(0)
    } else {
        unix_secs_precise()
    }
}

#[cfg(not(target_os = "linux"))]
fn unix_secs_coarse() -> u64 {
    unix_secs_precise()
}

fn unix_secs_precise() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Formats `t` as an IMF-fixdate.
pub fn format(t: SystemTime) -> [u8; DATE_LEN] {
    let s = httpdate::fmt_http_date(t);
    let mut out = [b' '; DATE_LEN];
    let n = s.len().min(DATE_LEN);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime), as `If-Modified-Since` carries.
pub fn parse(v: &[u8]) -> Option<SystemTime> {
    httpdate::parse_http_date(std::str::from_utf8(v).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_imf_fixdate() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(&format(t), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(parse(b"garbage"), None);
    }

    #[test]
    fn the_coarse_clock_agrees_with_the_system_clock() {
        let before = unix_secs_precise();
        let coarse = unix_secs_coarse();
        let after = unix_secs_precise();
        // The coarse clock lags by at most a tick, so it may still read the previous second.
        assert!(
            coarse + 1 >= before && coarse <= after,
            "{before} {coarse} {after}"
        );
    }

    #[test]
    fn a_round_reads_the_clock_once() {
        // On a fresh thread: the cache starts empty, so a cached value shows up as the
        // sentinel second below and a clock read as a real date.
        std::thread::spawn(|| {
            CACHE.with(|c| c.set((0, *b"Thu, 01 Jan 1970 00:00:00 GMT")));
            // A plain thread reads the clock on every call.
            assert_ne!(&now(), b"Thu, 01 Jan 1970 00:00:00 GMT");
            new_round();
            let first = now();
            assert!(parse(&first).is_some());
            // Within the round the cached value is returned as is, even if stale.
            CACHE.with(|c| c.set((0, *b"Thu, 01 Jan 1970 00:00:00 GMT")));
            assert_eq!(&now(), b"Thu, 01 Jan 1970 00:00:00 GMT");
            // The next round reads the clock again.
            new_round();
            assert_ne!(&now(), b"Thu, 01 Jan 1970 00:00:00 GMT");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn now_is_cached_and_current() {
        let a = now();
        let b = now();
        let fresh = format(SystemTime::now());
        // Within one second all three agree; across a second boundary `b` may equal `fresh`.
        assert!(a == b || b == fresh);
        assert!(parse(&b).is_some());
    }
}
