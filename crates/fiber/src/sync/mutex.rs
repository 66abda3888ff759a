//! A mutex whose `lock` parks the fiber, not the worker thread; safe to hold across a yield.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::lock::Lock;
use super::signal::Signal;

/// A fiber-aware mutual-exclusion lock.
///
/// Uncontended, `lock` is one compare-and-swap. Contended, the fiber queues itself and parks;
/// `unlock` wakes the first in line, which then competes again (a running fiber may barge in,
/// which keeps the lock busy instead of idle while the woken fiber is scheduled).
///
/// ```
/// use std::sync::Arc;
/// use weft_fiber::sync::Mutex;
/// let rt = weft_fiber::Runtime::builder().workers(2).build().unwrap();
/// let m = Arc::new(Mutex::new(0));
/// let hs: Vec<_> = (0..4).map(|_| {
///     let m = m.clone();
///     rt.spawn(move || for _ in 0..100 { let mut g = m.lock(); weft_fiber::yield_now(); *g += 1; })
/// }).collect();
/// for h in hs { h.join().unwrap(); }
/// assert_eq!(*m.lock(), 400);
/// ```
pub struct Mutex<T: ?Sized> {
    locked: AtomicBool,
    has_waiters: AtomicBool,
    queue: Lock<VecDeque<Arc<Signal>>>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `data` to one holder at a time, like std's Mutex.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above: `&Mutex` only gives `&mut T` through a guard, one at a time.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(v: T) -> Mutex<T> {
        Mutex {
            locked: AtomicBool::new(false),
            has_waiters: AtomicBool::new(false),
            queue: Lock::new(VecDeque::new()),
            data: UnsafeCell::new(v),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    fn try_acquire(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Locks, parking the fiber (or blocking the thread) while another holds the lock.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self.try_acquire() {
            return MutexGuard { m: self };
        }
        loop {
            let sig = {
                let mut q = self.queue.lock();
                // Announce the waiter before the last try: an unlock that misses the flag
                // happened before this try, which then succeeds.
                self.has_waiters.store(true, Ordering::SeqCst);
                if self.try_acquire() {
                    if q.is_empty() {
                        self.has_waiters.store(false, Ordering::SeqCst);
                    }
                    return MutexGuard { m: self };
                }
                let sig = Signal::for_current();
                q.push_back(sig.clone());
                sig
            };
            sig.wait(None);
        }
    }

    /// Locks if free, without waiting.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.try_acquire().then_some(MutexGuard { m: self })
    }

    /// Mutable access without locking (the borrow proves exclusivity).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn unlock(&self) {
        self.locked.store(false, Ordering::SeqCst);
        if self.has_waiters.load(Ordering::SeqCst) {
            let next = {
                let mut q = self.queue.lock();
                let next = q.pop_front();
                if q.is_empty() {
                    self.has_waiters.store(false, Ordering::SeqCst);
                }
                next
            };
            if let Some(s) = next {
                s.fire();
            }
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("Mutex").field("data", &&*g).finish(),
            None => f.debug_struct("Mutex").field("data", &"<locked>").finish(),
        }
    }
}

/// Access to a [`Mutex`]'s value; unlocks on drop.
pub struct MutexGuard<'a, T: ?Sized> {
    m: &'a Mutex<T>,
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this holder owns the lock.
        unsafe { &*self.m.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this holder owns the lock, and `&mut self`
        // makes this the only access through it.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.m.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
