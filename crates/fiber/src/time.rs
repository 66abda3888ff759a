//! Sleeping: parks the fiber on its worker's timers (a thread sleeps with the OS).

use std::time::{Duration, Instant};

use crate::sched;
use crate::task;

/// Sleeps for at least `d`. Inside a fiber only the fiber waits; its worker runs others.
pub fn sleep(d: Duration) {
    sleep_until(Instant::now() + d);
}

/// Sleeps until `deadline` (never returns earlier). Timers of one worker fire in deadline
/// order; equal deadlines in the order they were set.
pub fn sleep_until(deadline: Instant) {
    if !task::in_fiber() {
        let now = Instant::now();
        if deadline > now {
            // A plain thread: blocking it is what the caller asked for.
            #[allow(clippy::disallowed_methods)]
            std::thread::sleep(deadline - now);
        }
        return;
    }
    while Instant::now() < deadline {
        sched::park(Some(deadline));
    }
}
