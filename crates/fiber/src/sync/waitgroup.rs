//! A Go-style wait group: count work in with `add`, out with `done`, and `wait` for zero.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lock::Lock;
use crate::sched::{self, Waker};

struct State {
    count: usize,
    waiters: Vec<Waker>,
}

/// Waits for a set of fibers (or threads) to finish. Clones share one counter.
///
/// ```
/// use weft_fiber::sync::WaitGroup;
/// let rt = weft_fiber::Runtime::builder().workers(2).build().unwrap();
/// let wg = WaitGroup::new();
/// for _ in 0..8 {
///     wg.add(1);
///     let wg = wg.clone();
///     rt.spawn(move || { weft_fiber::yield_now(); wg.done(); });
/// }
/// wg.wait(); // from a plain thread; inside a fiber it parks the fiber
/// assert_eq!(wg.count(), 0);
/// ```
#[derive(Clone)]
pub struct WaitGroup {
    inner: Arc<Lock<State>>,
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl WaitGroup {
    /// A group with a count of zero.
    pub fn new() -> WaitGroup {
        WaitGroup {
            inner: Arc::new(Lock::new(State {
                count: 0,
                waiters: Vec::new(),
            })),
        }
    }

    /// Adds `n` to the count.
    pub fn add(&self, n: usize) {
        self.inner.lock().count += n;
    }

    /// Subtracts one; at zero, wakes every waiter.
    ///
    /// # Panics
    /// If the count is already zero.
    pub fn done(&self) {
        let waiters = {
            let mut s = self.inner.lock();
            assert!(s.count > 0, "WaitGroup::done with a count of zero");
            s.count -= 1;
            if s.count == 0 {
                std::mem::take(&mut s.waiters)
            } else {
                Vec::new()
            }
        };
        for w in waiters {
            w.wake();
        }
    }

    /// The current count.
    pub fn count(&self) -> usize {
        self.inner.lock().count
    }

    /// Waits until the count is zero.
    pub fn wait(&self) {
        self.wait_deadline(None);
    }

    /// Waits until the count is zero or `timeout` passes; true if it reached zero.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.wait_deadline(Some(Instant::now() + timeout))
    }

    fn wait_deadline(&self, deadline: Option<Instant>) -> bool {
        loop {
            {
                let mut s = self.inner.lock();
                if s.count == 0 {
                    return true;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return false;
                }
                s.waiters.push(Waker::current());
            }
            sched::park(deadline);
        }
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("count", &self.count())
            .finish()
    }
}
