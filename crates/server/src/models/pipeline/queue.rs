//! One stage's thread pool: a bounded FIFO task queue and the permits that decide how many of
//! the stage's threads may take tasks.
//!
//! Every thread of a stage is started with the pipeline and has a fixed index; a thread whose
//! index is at or above the stage's `active` count is parked on `permit` and takes no task, so
//! the controller grows or shrinks a stage by changing one number, never by creating or
//! destroying threads (the paper's "switch-like" threads). A full queue makes `push` wait: the
//! stage before it slows down instead of the queue growing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A stage's queue and pool.
#[derive(Debug)]
pub(crate) struct Stage<T> {
    inner: Mutex<Inner<T>>,
    /// Active threads wait here for a task.
    not_empty: Condvar,
    /// Producers wait here for room.
    not_full: Condvar,
    /// Threads beyond `active` wait here for a permit.
    permit: Condvar,
    cap: usize,
    /// Threads running a task now.
    busy: AtomicUsize,
    /// Tasks finished, and the time spent on them, since the start.
    done: AtomicU64,
    service_ns: AtomicU64,
}

#[derive(Debug)]
struct Inner<T> {
    items: VecDeque<T>,
    active: usize,
    closed: bool,
}

impl<T> Stage<T> {
    /// A stage whose queue holds `cap` tasks, with `active` threads allowed.
    pub(crate) fn new(cap: usize, active: usize) -> Stage<T> {
        Stage {
            inner: Mutex::new(Inner {
                items: VecDeque::with_capacity(cap.min(4096)),
                active,
                closed: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            permit: Condvar::new(),
            cap,
            busy: AtomicUsize::new(0),
            done: AtomicU64::new(0),
            service_ns: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item`, waiting while the queue is full. Gives the item back if the stage has
    /// been closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut g = self.lock();
        while g.items.len() >= self.cap && !g.closed {
            g = self.not_full.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        if g.closed {
            return Err(item);
        }
        g.items.push_back(item);
        drop(g);
        self.not_empty.notify_one();
        Ok(())
    }

    /// Queues `item` if there is room now; gives it back if the queue is full or closed.
    pub(crate) fn try_push(&self, item: T) -> Result<(), T> {
        let mut g = self.lock();
        if g.closed || g.items.len() >= self.cap {
            return Err(item);
        }
        g.items.push_back(item);
        drop(g);
        self.not_empty.notify_one();
        Ok(())
    }

    /// The next task for thread `idx`, waiting for a permit and then for a task. `None` once
    /// the stage is closed: the thread exits.
    pub(crate) fn pop(&self, idx: usize) -> Option<T> {
        let mut g = self.lock();
        loop {
            if g.closed {
                return None;
            }
            if idx >= g.active {
                g = self.permit.wait(g).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            if let Some(item) = g.items.pop_front() {
                drop(g);
                self.not_full.notify_one();
                return Some(item);
            }
            g = self.not_empty.wait(g).unwrap_or_else(|e| e.into_inner());
            if idx >= g.active && !g.items.is_empty() {
                // Woken for a task but parked meanwhile: pass the wake-up on to an active
                // thread so the task is not left waiting.
                self.not_empty.notify_one();
            }
        }
    }

    /// Waits until thread `idx` holds a permit (for a stage whose work does not come from the
    /// queue: accept). False once the stage is closed.
    pub(crate) fn wait_permit(&self, idx: usize) -> bool {
        let mut g = self.lock();
        while !g.closed && idx >= g.active {
            g = self.permit.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.closed
    }

    /// Allows `n` threads to take tasks; threads beyond it park after their current task.
    pub(crate) fn set_active(&self, n: usize) {
        let mut g = self.lock();
        if g.active == n {
            return;
        }
        g.active = n;
        drop(g);
        self.permit.notify_all();
        // Waiters that lost their permit move to the permit wait.
        self.not_empty.notify_all();
    }

    /// Threads allowed to take tasks.
    pub(crate) fn active(&self) -> usize {
        self.lock().active
    }

    /// Tasks waiting.
    pub(crate) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Ends the stage: waiting threads and producers return, and queued tasks are dropped.
    pub(crate) fn close(&self) {
        let items = {
            let mut g = self.lock();
            g.closed = true;
            std::mem::take(&mut g.items)
        };
        self.permit.notify_all();
        self.not_empty.notify_all();
        self.not_full.notify_all();
        drop(items);
    }

    /// Marks a task started; pass the result to [`Stage::end`].
    pub(crate) fn begin(&self) -> Instant {
        self.busy.fetch_add(1, Relaxed);
        Instant::now()
    }

    /// Marks a task begun at `t0` finished.
    pub(crate) fn end(&self, t0: Instant) {
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.service_ns.fetch_add(ns, Relaxed);
        self.done.fetch_add(1, Relaxed);
        self.busy.fetch_sub(1, Relaxed);
    }

    /// Threads running a task now.
    pub(crate) fn busy(&self) -> usize {
        self.busy.load(Relaxed)
    }

    /// Tasks finished and their total service time since the start.
    pub(crate) fn totals(&self) -> (u64, Duration) {
        (
            self.done.load(Relaxed),
            Duration::from_nanos(self.service_ns.load(Relaxed)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_bounded_and_closable() {
        let s: Stage<u32> = Stage::new(2, 1);
        s.push(1).unwrap();
        s.try_push(2).unwrap();
        assert_eq!(s.try_push(3), Err(3), "full");
        assert_eq!(s.len(), 2);
        assert_eq!(s.pop(0), Some(1));
        s.push(3).unwrap();
        assert_eq!(s.pop(0), Some(2));
        assert_eq!(s.pop(0), Some(3));
        s.close();
        assert_eq!(s.pop(0), None);
        assert_eq!(s.push(4), Err(4));
        assert!(!s.wait_permit(0));
    }

    #[test]
    fn a_full_queue_makes_the_producer_wait_for_room() {
        let s: Arc<Stage<u32>> = Arc::new(Stage::new(1, 1));
        s.push(1).unwrap();
        let s2 = s.clone();
        let producer = std::thread::spawn(move || s2.push(2));
        // The producer can only finish once a task is taken.
        assert_eq!(s.pop(0), Some(1));
        producer.join().unwrap().unwrap();
        assert_eq!(s.pop(0), Some(2));
    }

    #[test]
    fn a_thread_without_a_permit_takes_no_task_until_given_one() {
        let s: Arc<Stage<u32>> = Arc::new(Stage::new(8, 1));
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = s.clone();
        let parked = std::thread::spawn(move || {
            while let Some(v) = s2.pop(1) {
                tx.send(v).unwrap();
            }
        });
        s.push(7).unwrap();
        // Thread 0 (active) gets it; thread 1 is parked.
        assert_eq!(s.pop(0), Some(7));
        assert!(rx.try_recv().is_err());
        s.set_active(2);
        assert_eq!(s.active(), 2);
        s.push(8).unwrap();
        assert_eq!(rx.recv().unwrap(), 8);
        s.close();
        parked.join().unwrap();
    }

    #[test]
    fn service_time_and_busy_are_counted() {
        let s: Stage<u32> = Stage::new(1, 1);
        let t0 = s.begin();
        assert_eq!(s.busy(), 1);
        s.end(t0);
        assert_eq!(s.busy(), 0);
        assert_eq!(s.totals().0, 1);
    }
}
