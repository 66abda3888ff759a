//! The kernel's coarse monotonic clock: the time of its last tick (1-4 ms old), read without
//! the TSC, a fraction of the cost of `Instant::now` on a VM (the response cache reads it per
//! request).

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`.
pub fn coarse_monotonic_ms() -> u64 {
    coarse_ms(libc::CLOCK_MONOTONIC_COARSE, false)
}

/// The resolution of [`coarse_monotonic_ms`] in whole milliseconds, rounded up (one tick).
pub fn coarse_monotonic_resolution_ms() -> u64 {
    coarse_ms(libc::CLOCK_MONOTONIC_COARSE, true).max(1)
}

/// `clock_gettime` (or, with `resolution`, `clock_getres`) of `clock`.
fn gettime(clock: libc::clockid_t, resolution: bool) -> Option<libc::timespec> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both calls write one timespec into the live local we lend them.
    let ret = unsafe {
        if resolution {
            libc::clock_getres(clock, &mut ts)
        } else {
            libc::clock_gettime(clock, &mut ts)
        }
    };
    (ret == 0).then_some(ts)
}

fn coarse_ms(clock: libc::clockid_t, resolution: bool) -> u64 {
    let Some(ts) = gettime(clock, resolution) else {
        // Not available (never on Linux since 2.6.32): a 10 ms tick is a safe over-estimate.
        return if resolution { 10 } else { 0 };
    };
    let ms = u64::try_from(ts.tv_sec).unwrap_or(0) * 1000;
    ms + u64::try_from(ts.tv_nsec).unwrap_or(0).div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_coarse_clock_moves_with_the_precise_one() {
        let res = coarse_monotonic_resolution_ms();
        assert!((1..=100).contains(&res), "{res}");
        let t0 = Instant::now();
        let a = coarse_monotonic_ms();
        std::thread::sleep(Duration::from_millis(30));
        let b = coarse_monotonic_ms();
        let most = t0.elapsed().as_millis() as u64 + 1;
        // Each reading is up to a tick old, and rounded up to the millisecond.
        assert!(
            b + res + 1 >= a + 30 && b <= a + most + res + 1,
            "{a} {b} {most}"
        );
        assert!(gettime(-1, false).is_none(), "an invalid clock is EINVAL");
    }
}
