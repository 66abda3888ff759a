//! A mutex whose `lock` parks the fiber, not the worker thread; safe to hold across a yield.
//!
//! The lock's handshake lives in [`RawMutex`], generic over how a waiter waits, so that loom can
//! model-check the real code with threads standing in for fibers
//! (`RUSTFLAGS="--cfg loom" cargo test -p weft-fiber --release --lib loom_models`).

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[cfg(loom)]
use loom::sync::atomic::fence;
#[cfg(not(loom))]
use std::sync::atomic::fence;

use super::signal::Signal;
use crate::protocol::AtomicBool;

#[cfg(not(loom))]
type QueueLock<T> = super::lock::Lock<T>;
#[cfg(loom)]
type QueueLock<T> = loom::sync::Mutex<T>;

/// A queued waiter that its unlocker wakes; a clone is the same waiter.
pub(crate) trait Waiter: Clone {
    /// Wakes the waiter (once; it then competes for the lock again).
    fn fire(&self);
}

impl Waiter for Arc<Signal> {
    fn fire(&self) {
        Signal::fire(self);
    }
}

/// The lock's state and wait queue. `lock_with` and `unlock` form a store-buffering
/// (Dekker) handshake: a locker announces `has_waiters` before its last try, an unlocker
/// clears `locked` before it looks at `has_waiters`; a `SeqCst` fence between the store and
/// the load on each side guarantees that either the locker's last try succeeds or the
/// unlocker sees the waiter and wakes the head of the queue. No wake-up is lost. (Without the
/// fences loom, which models `SeqCst` accesses as acquire/release, finds the lost wake-up, as
/// it did for the scheduler's sleep handshake in `protocol.rs`; on x86 the unlocker's `SeqCst`
/// store is already a full barrier and the uncontended lock is one compare-and-swap.)
pub(crate) struct RawMutex<W> {
    locked: AtomicBool,
    has_waiters: AtomicBool,
    queue: QueueLock<VecDeque<W>>,
}

impl<W: Waiter> RawMutex<W> {
    pub(crate) fn new() -> RawMutex<W> {
        RawMutex {
            locked: AtomicBool::new(false),
            has_waiters: AtomicBool::new(false),
            queue: QueueLock::new(VecDeque::new()),
        }
    }

    fn queue(&self) -> impl DerefMut<Target = VecDeque<W>> + '_ {
        #[cfg(not(loom))]
        return self.queue.lock();
        #[cfg(loom)]
        return self.queue.lock().unwrap();
    }

    pub(crate) fn try_acquire(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Acquires the lock; while another holds it, queues the waiter `make` returns and calls
    /// `wait` with it, which must return once the waiter was fired.
    pub(crate) fn lock_with(&self, make: impl Fn() -> W, wait: impl Fn(&W)) {
        if self.try_acquire() {
            return;
        }
        loop {
            let waiter = {
                let mut q = self.queue();
                // Announce the waiter before the last try: an unlock that misses the flag
                // cleared `locked` before this try, which then succeeds.
                self.has_waiters.store(true, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if self.try_acquire() {
                    if q.is_empty() {
                        self.has_waiters.store(false, Ordering::SeqCst);
                    }
                    return;
                }
                let w = make();
                q.push_back(w.clone());
                w
            };
            wait(&waiter);
        }
    }

    pub(crate) fn unlock(&self) {
        self.locked.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.has_waiters.load(Ordering::SeqCst) {
            let next = {
                let mut q = self.queue();
                let next = q.pop_front();
                if q.is_empty() {
                    self.has_waiters.store(false, Ordering::SeqCst);
                }
                next
            };
            if let Some(w) = next {
                w.fire();
            }
        }
    }
}

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
    raw: RawMutex<Arc<Signal>>,
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
            raw: RawMutex::new(),
            data: UnsafeCell::new(v),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks, parking the fiber (or blocking the thread) while another holds the lock.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.raw.lock_with(Signal::for_current, |sig| {
            sig.wait(None);
        });
        MutexGuard { m: self }
    }

    /// Locks if free, without waiting.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.raw.try_acquire().then_some(MutexGuard { m: self })
    }

    /// Mutable access without locking (the borrow proves exclusivity).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
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
        self.m.raw.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;

    /// A thread's waiter: a flag its unlocker sets; waiting spins on it (loom explores every
    /// interleaving of the spin with the rest).
    #[derive(Clone)]
    struct Flag(loom::sync::Arc<AtomicBool>);

    impl Waiter for Flag {
        fn fire(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> Flag {
        Flag(loom::sync::Arc::new(AtomicBool::new(false)))
    }

    fn wait(f: &Flag) {
        while !f.0.load(Ordering::SeqCst) {
            thread::yield_now();
        }
    }

    /// Holders exclude each other, and every waiter gets the lock: a lost wake-up leaves a
    /// thread spinning forever, which loom reports.
    #[test]
    fn lockers_exclude_each_other_and_no_wake_up_is_lost() {
        loom::model(|| {
            let m = loom::sync::Arc::new(RawMutex::<Flag>::new());
            let inside = loom::sync::Arc::new(AtomicUsize::new(0));
            let done = loom::sync::Arc::new(AtomicUsize::new(0));
            let critical = |m: &RawMutex<Flag>, inside: &AtomicUsize, done: &AtomicUsize| {
                m.lock_with(flag, wait);
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                m.unlock();
            };
            let t = {
                let (m, inside, done) = (m.clone(), inside.clone(), done.clone());
                thread::spawn(move || critical(&m, &inside, &done))
            };
            critical(&m, &inside, &done);
            t.join().unwrap();
            assert_eq!(done.load(Ordering::SeqCst), 2);
            assert!(m.try_acquire(), "left locked");
            assert!(!m.has_waiters.load(Ordering::SeqCst), "a stale waiter flag");
        });
    }
}
