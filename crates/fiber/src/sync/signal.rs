//! A one-shot wake-up flag for wait queues whose entries must not go stale.
//!
//! A park may return without its waker being used (a stale notification). A waiter that then
//! re-queued itself would leave its old entry behind, and a waker popped later could go to a
//! fiber that no longer waits, losing the wake-up. With a `Signal` the waiter stays parked until
//! its own entry has been popped and fired, so the queue never holds stale entries.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::sched::{self, Waker};

#[derive(Debug)]
pub(crate) struct Signal {
    waker: Waker,
    fired: AtomicBool,
}

impl Signal {
    /// A signal that wakes the calling fiber or thread.
    pub(crate) fn for_current() -> Arc<Signal> {
        Arc::new(Signal {
            waker: Waker::current(),
            fired: AtomicBool::new(false),
        })
    }

    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.waker.wake_by_ref();
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Parks until fired (true) or `deadline` passes (false).
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.is_fired() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return self.is_fired();
            }
            sched::park(deadline);
        }
    }
}
