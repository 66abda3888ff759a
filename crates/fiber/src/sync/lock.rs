//! The runtime's internal lock: a `std::sync::Mutex` for critical sections that never park.
//!
//! Every use holds it for a few loads and stores (push a waker, pop a message) and never across
//! a yield or park, so two fibers of one worker cannot deadlock on it and the OS mutex is
//! uncontended in the common case. Poisoning is ignored: no critical section can panic halfway
//! through an invariant.

use std::sync::MutexGuard;

/// A short-critical-section lock (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Lock<T>(
    // The one place the crate uses `std::sync::Mutex`: never held across a park (module docs).
    #[allow(clippy::disallowed_types)] std::sync::Mutex<T>,
);

impl<T> Lock<T> {
    #[allow(clippy::disallowed_types)] // see the field
    pub(crate) const fn new(v: T) -> Lock<T> {
        Lock(std::sync::Mutex::new(v))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
