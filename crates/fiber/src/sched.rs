//! The part of a worker its fibers reach, and parking: [`Sched`] (the worker's index, the
//! shared state, the FIFO run queue, the timers and the round clock), unparking a task
//! ([`Task::unpark`]), [`park`], and [`Waker`].
//!
//! This is the narrow interface between the fibers and their worker: the reactor, the
//! synchronisation types and the join cells park and wake through it, and never see the worker
//! loop (`worker.rs`), which embeds a `Sched` and runs what it queues. A thread has a current
//! `Sched` exactly while its worker runs ([`current`]).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ptr;
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use crate::protocol;
use crate::state::WorkerStats;
use crate::task::{self, Msg, Remote, Shared, Suspend, Task};
use crate::timer::Timers;

/// What fibers, and the reactor on their behalf, may use of their worker. Only the worker's
/// own thread touches it.
pub(crate) struct Sched {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) run_queue: RefCell<VecDeque<Arc<Task>>>,
    pub(crate) timers: RefCell<Timers>,
    /// The clock as of this worker's last poll of epoll: the base of short, coarse deadlines
    /// ([`Sched::round_now`]).
    round_now: Cell<Instant>,
    /// The same, in nanoseconds after the timers' epoch ([`Sched::round_nanos`]).
    round_nanos: Cell<u64>,
}

thread_local! {
    static CURRENT: Cell<*const Sched> = const { Cell::new(ptr::null()) };
}

/// The scheduler of the worker running on this thread, if any.
pub(crate) fn current() -> Option<&'static Sched> {
    let p = CURRENT.with(|l| l.get());
    // SAFETY: CURRENT is non-null only between `Sched::enter` and `Sched::leave`, which the
    // worker calls around its loop on this thread with a `Sched` that lives in that frame;
    // every caller uses the reference within that call (from fiber or scheduler code of this
    // worker), never stores it.
    unsafe { p.as_ref() }
}

/// This thread's scheduler if it is that of worker `index` of the runtime `shared`.
pub(crate) fn current_for(shared: &Arc<Shared>, index: usize) -> Option<&'static Sched> {
    current().filter(|l| l.index == index && Arc::ptr_eq(&l.shared, shared))
}

/// The scheduler of the calling fiber (`None` in scheduler code or on a plain thread).
pub(crate) fn fiber_sched() -> Option<&'static Sched> {
    if task::in_fiber() {
        current()
    } else {
        None
    }
}

impl Sched {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> Sched {
        let epoch = Instant::now();
        Sched {
            index,
            shared,
            run_queue: RefCell::new(VecDeque::with_capacity(256)),
            timers: RefCell::new(Timers::new(epoch)),
            round_now: Cell::new(epoch),
            round_nanos: Cell::new(0),
        }
    }

    /// Makes `self` this thread's current scheduler until [`Sched::leave`]. The worker calls
    /// it on its own thread with a `Sched` that outlives the pair.
    pub(crate) fn enter(&self) {
        CURRENT.with(|l| l.set(self));
    }

    /// Ends [`Sched::enter`].
    pub(crate) fn leave(&self) {
        CURRENT.with(|l| l.set(ptr::null()));
    }

    pub(crate) fn remote(&self) -> &Remote {
        &self.shared.workers[self.index]
    }

    /// This worker's counters (single writer: this thread).
    pub(crate) fn stats(&self) -> &WorkerStats {
        &self.remote().stats
    }

    /// Queues a task of this worker that was just moved to `SCHEDULED`.
    pub(crate) fn push_ready(&self, task: Arc<Task>) {
        self.run_queue.borrow_mut().push_back(task);
    }

    /// Arms the calling fiber's timer; returns its number for [`Sched::cancel_timer`].
    pub(crate) fn add_timer(&self, deadline: Instant, task: Arc<Task>) -> u64 {
        self.timers.borrow_mut().add(deadline, task)
    }

    /// As [`Sched::add_timer`], for a wait of one fixed length armed many times a second
    /// (the FIFO lane of `timer.rs`, `deadline.rs`), with the deadline `due` on the round
    /// clock's nanosecond scale ([`Sched::round_nanos`]).
    pub(crate) fn add_fifo_timer(&self, due: u64, task: &Arc<Task>) -> u64 {
        self.timers.borrow_mut().add_fifo(due, task)
    }

    /// The clock as of this worker's last poll of epoll, which a busy worker makes every
    /// `IO_POLL_INTERVAL` fiber runs: behind the true time by at most that many runs. A
    /// deadline from it may come that much early; it is for waits where that does not
    /// matter (as nginx's timers run on a clock read once per event-loop turn), saving a
    /// clock read per wait.
    pub(crate) fn round_now(&self) -> Instant {
        self.round_now.get()
    }

    /// [`Sched::round_now`] in nanoseconds after the epoch of this worker's timers (the scale
    /// of [`Sched::add_fifo_timer`]'s deadlines): deadlines on it are integer additions and
    /// comparisons, with no `Instant` arithmetic per wait.
    pub(crate) fn round_nanos(&self) -> u64 {
        self.round_nanos.get()
    }

    /// Sets the round clock to `now` (the worker, after a poll of epoll).
    pub(crate) fn set_round_now(&self, now: Instant) {
        self.round_now.set(now);
        self.round_nanos.set(self.timers.borrow().nanos(now));
    }

    pub(crate) fn cancel_timer(&self, task: &Task, seq: u64) {
        self.timers.borrow_mut().cancel(task, seq);
    }
}

impl Task {
    /// Makes a parked task runnable, or marks a running one notified. Idempotent.
    pub(crate) fn unpark(self: &Arc<Self>) {
        if self.transition_to_scheduled() {
            Task::enqueue(self.clone());
        }
    }

    /// As [`Task::unpark`], consuming the reference: the run queue gets this one, with no
    /// refcount round trip (two atomic operations) on the home worker.
    pub(crate) fn unpark_owned(self: Arc<Self>) {
        if self.transition_to_scheduled() {
            Task::enqueue(self);
        }
    }

    /// True when the caller must enqueue the task.
    fn transition_to_scheduled(&self) -> bool {
        protocol::unpark(&self.state)
    }

    /// Puts `me` (scheduled just now) on its worker's run queue: directly on the home worker,
    /// else through the worker's inbox.
    fn enqueue(me: Arc<Task>) {
        // The scheduler reference is the thread's own, not borrowed from `me`.
        match current_for(&me.shared, me.worker) {
            Some(sched) => sched.push_ready(me),
            None => {
                // `me` moves into the message: the inbox is reached through a reference of
                // its own.
                let shared = Arc::clone(&me.shared);
                shared.workers[me.worker].send(Msg::Wake(me));
            }
        }
    }
}

/// Parks the current fiber (or thread) until unparked, or until `deadline`. May return
/// spuriously: callers re-check their condition.
pub(crate) fn park(deadline: Option<Instant>) {
    match current() {
        Some(sched) if task::in_fiber() => park_fiber(sched, deadline),
        _ => match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = Instant::now();
                if d > now {
                    std::thread::park_timeout(d - now);
                }
            }
        },
    }
}

fn park_fiber(sched: &Sched, deadline: Option<Instant>) {
    let timer = match deadline {
        None => None,
        Some(d) => {
            if d <= Instant::now() {
                return;
            }
            let task = task::with_current(Arc::clone).expect("in a fiber");
            Some((sched.add_timer(d, task.clone()), task))
        }
    };
    task::suspend(Suspend::Park);
    if let Some((seq, task)) = timer {
        sched.cancel_timer(&task, seq);
    }
}

/// Parks the calling fiber `task` (which has queued itself where a wake-up will find it)
/// until it is unparked or the round clock passes `due` ([`Sched::round_nanos`]), with its
/// timer in the FIFO lane: for a short wait of one fixed length armed many times a second.
pub(crate) fn park_fifo(sched: &Sched, due: u64, task: &Arc<Task>) {
    let seq = sched.add_fifo_timer(due, task);
    task::suspend(Suspend::Park);
    sched.cancel_timer(task, seq);
}

/// Something to wake: a fiber or a plain thread.
#[derive(Debug, Clone)]
pub(crate) enum Waker {
    Fiber(Arc<Task>),
    Thread(Thread),
}

impl Waker {
    /// The waker of the calling fiber or thread.
    pub(crate) fn current() -> Waker {
        match task::with_current(Arc::clone) {
            Some(t) => Waker::Fiber(t),
            None => Waker::Thread(std::thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        match self {
            Waker::Fiber(t) => t.unpark_owned(),
            Waker::Thread(t) => t.unpark(),
        }
    }

    pub(crate) fn wake_by_ref(&self) {
        match self {
            Waker::Fiber(t) => t.unpark(),
            Waker::Thread(t) => t.unpark(),
        }
    }
}
