//! A worker's timers: the fibers' deadlines in a [`DeadlineQueue`] (`deadline.rs`: a FIFO
//! lane and a heap, cancelled lazily, with bounded garbage).
//!
//! A fiber has at most one armed timer (it parks in one place at a time); its task records the
//! sequence number of that timer. Cancelling only clears that number (no queue operation); a
//! popped entry whose number no longer matches is dead and skipped. A wait of one fixed short
//! length armed again and again — a busy connection's fiber lingering between requests
//! (`Source::linger`) — goes in the FIFO lane ([`Timers::add_fifo`]): no heap sift, and its
//! entries leave from the front, dead or due, so the lane never holds more than one wait
//! period of arms and its dead entries need no compaction ([`Timed::COMPACT_FIFO`] is false).
//! Its sequence numbers carry [`FIFO_BIT`], so cancelling one does not count toward the
//! heap's compaction.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::deadline::{DeadlineQueue, Expiry, Lane, Timed};
use crate::task::Task;

/// Marks the sequence number of a timer in the FIFO lane.
const FIFO_BIT: u64 = 1 << 63;

struct Entry {
    deadline: Instant,
    seq: u64,
    task: Arc<Task>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        // Equal deadlines fire in the order they were armed.
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

impl Timed for Entry {
    // Short waits: a dead entry leaves the FIFO lane's front within one wait period.
    const COMPACT_FIFO: bool = false;

    fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Entry {
    fn live(&self) -> bool {
        self.task.armed_timer.load(Ordering::Relaxed) == self.seq
    }
}

/// The lane of the timer numbered `seq`.
fn lane(seq: u64) -> Lane {
    if seq & FIFO_BIT == 0 {
        Lane::Heap
    } else {
        Lane::Fifo
    }
}

/// Expiry of the timers: wakes a due task with the scheduler's wake function.
struct Fire<W>(W);

impl<W: FnMut(Arc<Task>)> Expiry<Entry> for Fire<W> {
    fn live(&self, e: &Entry) -> bool {
        e.live()
    }

    fn due(&mut self, e: Entry) {
        e.task.armed_timer.store(0, Ordering::Relaxed);
        (self.0)(e.task);
    }
}

/// The timers of one worker (only its thread touches them).
#[derive(Default)]
pub(crate) struct Timers {
    queue: DeadlineQueue<Entry>,
    next_seq: u64,
}

impl Timers {
    /// Arms `task`'s timer for `deadline` (replacing an armed one); returns its number.
    pub(crate) fn add(&mut self, deadline: Instant, task: Arc<Task>) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.replace_armed(&task, seq);
        self.queue.push_heap(Entry {
            deadline,
            seq,
            task,
        });
        seq
    }

    /// As [`Timers::add`], in the FIFO lane when `deadline` keeps it in order (else in the
    /// heap). For short waits of one fixed length armed many times a second.
    pub(crate) fn add_fifo(&mut self, deadline: Instant, task: Arc<Task>) -> u64 {
        if !self.queue.fits_fifo(deadline) {
            return self.add(deadline, task);
        }
        self.next_seq += 1;
        let seq = self.next_seq | FIFO_BIT;
        self.replace_armed(&task, seq);
        self.queue.push_fifo(Entry {
            deadline,
            seq,
            task,
        });
        seq
    }

    /// Records `seq` as `task`'s armed timer; one it replaces is dead.
    fn replace_armed(&mut self, task: &Task, seq: u64) {
        // A load and a store, not a `swap` (a locked instruction): only the home worker's
        // timers touch `armed_timer` (fibers never leave their worker), so nothing can come
        // between the two.
        let old = task.armed_timer.load(Ordering::Relaxed);
        task.armed_timer.store(seq, Ordering::Relaxed);
        if old != 0 {
            self.queue.died(lane(old), Entry::live);
        }
    }

    /// Disarms timer `seq` of `task` if it has not fired.
    pub(crate) fn cancel(&mut self, task: &Task, seq: u64) {
        // Load and store for the compare-and-swap, as in `replace_armed`.
        if task.armed_timer.load(Ordering::Relaxed) == seq {
            task.armed_timer.store(0, Ordering::Relaxed);
            self.queue.died(lane(seq), Entry::live);
        }
    }

    /// Unparks (with `wake`: the scheduler's `Task::unpark_owned`) the tasks whose deadline
    /// is at or before `now`; returns the next deadline.
    pub(crate) fn fire(&mut self, now: Instant, wake: impl FnMut(Arc<Task>)) -> Option<Instant> {
        self.queue.expire(now, &mut Fire(wake))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Gives back the FIFO lane's memory a burst left (the worker calls it as it goes idle).
    pub(crate) fn shrink(&mut self) {
        self.queue.shrink();
    }

    pub(crate) fn clear(&mut self) {
        self.queue.clear();
    }
}
