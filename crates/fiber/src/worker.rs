//! One scheduler thread: a FIFO run queue (the paper's policy), a cross-thread inbox, timers,
//! and the epoll reactor it waits in when nothing is ready.
//!
//! The loop: drain the inbox if its flag is set; run the fiber at the head of the run queue
//! until it yields, parks or ends; every [`IO_POLL_INTERVAL`] runs, poll epoll without waiting
//! and fire due timers, so a busy worker still sees I/O. With nothing ready it fires due timers
//! and blocks in `epoll_wait` until the next deadline; it never spins. Other threads wake it by
//! pushing to its inbox and writing its eventfd — the write is skipped unless the worker said
//! it was about to sleep (a store/load pair in sequentially consistent order on both sides).
//!
//! The run queue, the timers and the round clock are in the worker's [`Sched`] (`sched.rs`),
//! the part of a worker its fibers may touch; this module adds the loop, the fiber table, the
//! stack pool, the epoll event batch and the idle table, which no lower layer sees.

use std::cell::{Cell, RefCell};
use std::io;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corosensei::CoroutineResult;

use crate::guard;
use crate::idle::{FnCall, IdleCall, IdleFn, IdleKey, IdleTable};
use crate::join::{self, JoinHandle};
use crate::protocol;
use crate::reactor::{IoSlot, Source};
use crate::readiness::Readiness;
use crate::sched::Sched;
use crate::stack::StackPool;
use crate::state::{bump, WorkerStats};
use crate::task::{self, Co, FiberYielder, Msg, Remote, Shared, Suspend, Task};
use crate::task::{DONE, RUNNING, SCHEDULED};
use weft_sys::epoll::Events;

/// Fibers run between two non-blocking polls of epoll and the timers on a busy worker (a prime,
/// as tokio's `event_interval`, so it does not beat with periodic workloads).
const IO_POLL_INTERVAL: u32 = 61;
/// Warm free stacks a worker keeps however long it is idle (see `StackPool::decay`).
const IDLE_WARM_STACKS: usize = 64;
/// The period of the stack pool's decay: warm stacks no fiber used for a whole period are
/// given back, so a stack is resident at most two periods after its last use. Trimming at
/// every idle moment instead made a program that spawns a burst, waits, and spawns again
/// fault every stack in anew (about one page fault per fiber: 10x the create cost).
const STACK_DECAY: Duration = Duration::from_millis(500);
/// Events taken from epoll per call.
const EVENTS_PER_POLL: usize = 256;
/// Finished tasks a worker keeps for its next spawns (about 200 bytes each).
const SPARE_TASKS: usize = 256;

/// The worker's own state, on its thread's stack. Fibers, the reactor and the sync types see
/// only its [`Sched`] (through `sched::current`); `net` (to park an idle connection) and the
/// runtime (to spawn) reach the whole through [`LOCAL`].
pub(crate) struct Local {
    /// What its fibers see of this worker (`sched.rs`).
    pub(crate) sched: Sched,
    fibers: RefCell<Slab>,
    stacks: StackPool,
    spare: RefCell<Vec<Msg>>,
    events: RefCell<Events>,
    /// Connections parked without a fiber.
    idle: RefCell<IdleTable>,
    /// Parked connections made readable by the current event batch (kept for its buffer).
    idle_due: RefCell<Vec<IdleKey>>,
    /// When the stack pool's next decay is due.
    stack_decay_at: Cell<Instant>,
    /// Finished tasks nobody else held, ready for reuse ([`Local::new_task`]).
    spare_tasks: RefCell<Vec<Arc<Task>>>,
}

thread_local! {
    static LOCAL: Cell<*const Local> = const { Cell::new(ptr::null()) };
}

/// The worker running on this thread, if any.
pub(crate) fn current_local() -> Option<&'static Local> {
    let p = LOCAL.with(|l| l.get());
    // SAFETY: LOCAL is non-null only while `Local::run` executes on this thread, and `Local`
    // lives in that frame; every caller uses the reference within that call (from fiber or
    // scheduler code of this worker), never stores it.
    unsafe { p.as_ref() }
}

/// This thread's worker if it is worker `index` of the runtime `shared`.
pub(crate) fn local_for(shared: &Arc<Shared>, index: usize) -> Option<&'static Local> {
    current_local().filter(|l| l.sched.index == index && Arc::ptr_eq(&l.sched.shared, shared))
}

impl Local {
    fn remote(&self) -> &Remote {
        self.sched.remote()
    }

    /// This worker's counters (single writer: this thread).
    pub(crate) fn stats(&self) -> &WorkerStats {
        self.sched.stats()
    }

    /// Spawns `f` as a fiber of this worker, at the back of its run queue.
    pub(crate) fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let task = self.new_task();
        let (handle, body) = join::fiber_body(task.clone(), f);
        self.adopt(task, body);
        handle
    }

    /// A new task of this worker: a spare one made new, else a fresh allocation.
    fn new_task(&self) -> Arc<Task> {
        let id = join::next_id();
        if let Some(mut t) = self.spare_tasks.borrow_mut().pop() {
            Arc::get_mut(&mut t)
                .expect("a spare task has no other holder")
                .reset(id);
            return t;
        }
        Arc::new(Task::new(id, self.sched.index, self.sched.shared.clone()))
    }

    /// Keeps a finished task for reuse if nobody else holds it (no timer entry, waiter slot
    /// or waker still refers to it; a join handle never does) and there is room.
    fn recycle(&self, mut task: Arc<Task>) {
        let mut spare = self.spare_tasks.borrow_mut();
        if spare.len() < SPARE_TASKS && Arc::get_mut(&mut task).is_some() {
            spare.push(task);
        }
    }

    /// Gives `task` a stack and a coroutine running `body`, and queues it.
    pub(crate) fn adopt<B>(&self, task: Arc<Task>, body: B)
    where
        B: FnOnce(&FiberYielder, ()) + 'static,
    {
        if !self.bind_stack(&task, body) {
            // No memory for a stack: dropping the body reported `Cancelled` to the handle.
            task.state.store(DONE, Ordering::Release);
            return;
        }
        self.enlist(task);
    }

    /// Gives `task` (new, or queued without a coroutine) a pooled stack and a coroutine running
    /// `body`; false, with `body` dropped, when there is no memory for a stack.
    fn bind_stack<B>(&self, task: &Arc<Task>, body: B) -> bool
    where
        B: FnOnce(&FiberYielder, ()) + 'static,
    {
        let Ok(stack) = self.stacks.get() else {
            return false;
        };
        let (lo, hi) = stack.guard_range();
        let size = self.sched.shared.config.stack_size;
        // SAFETY: we are the task's home worker and nobody else holds its local part (it is
        // new, or queued and not running).
        let lp = unsafe { task.local_mut() };
        lp.co = Some(Co::with_stack(stack, body));
        lp.guard = (lo, hi, size);
        true
    }

    /// Enters a new task in the fiber table and queues it.
    fn enlist(&self, task: Arc<Task>) {
        let slot = self.fibers.borrow_mut().insert(task.clone());
        // SAFETY: home worker; the task is new and nobody else holds its local part.
        unsafe { task.local_mut() }.slot = slot;
        let st = &self.remote().stats;
        bump(&st.spawned);
        st.live.store(self.fibers.borrow().len, Ordering::Relaxed);
        self.sched.run_queue.borrow_mut().push_back(task);
    }

    /// Unparks every task, and spawns every parked connection, whose deadline has passed;
    /// returns the next deadline.
    fn fire_timers(&self, now: Instant) -> Option<Instant> {
        let next = self.sched.timers.borrow_mut().fire(now, Task::unpark_owned);
        if !self.idle.borrow().has_timers() {
            return next;
        }
        let mut expired: Vec<IdleFn> = Vec::new();
        let next_idle = self.idle.borrow_mut().expire(now, &mut expired);
        if !expired.is_empty() {
            self.idle_gauge();
            for f in expired {
                self.spawn_idle(f, Readiness::TimedOut);
            }
        }
        match (next, next_idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn has_timers(&self) -> bool {
        !self.sched.timers.borrow().is_empty() || self.idle.borrow().has_timers()
    }

    /// Parks `stream` without a fiber until it is readable or `timeout` passes, then spawns
    /// `f` on this worker (see `TcpStream::when_readable`; `src` finds the stream's reactor
    /// source). Runs in a fiber of this worker. The stream goes into the one box that holds
    /// `f`, so the idle table and a woken task hold a callback and nothing of the stream's type.
    pub(crate) fn park_idle<S, F>(
        &self,
        mut stream: S,
        src: fn(&mut S) -> &mut Source,
        timeout: Option<Duration>,
        f: F,
    ) where
        S: Send + 'static,
        F: FnOnce(S, Readiness) + Send + 'static,
    {
        let registered = src(&mut stream).home_registration(&self.sched);
        let call: IdleFn = Box::new(FnCall(move |r| {
            if r == Readiness::TimedOut {
                // Left by its timeout, no edge took it: the registration forgets the key.
                src(&mut stream).forget_idle();
            }
            f(stream, r)
        }));
        self.park_call(registered, call, timeout);
    }

    /// As [`Local::park_idle`] for a connection whose state holds its stream
    /// (`TcpStream::park`; `src` finds the stream's source in it): the state's own box is the
    /// callback, so nothing is allocated.
    pub(crate) fn park_state<P: IdleCall + 'static>(
        &self,
        mut state: Box<P>,
        src: fn(&mut P) -> &mut Source,
        timeout: Option<Duration>,
    ) {
        let registered = src(&mut state).home_registration(&self.sched);
        self.park_call(registered, state, timeout);
    }

    /// The rest of a park: `call` waits in the idle table for an edge on `registered` or for
    /// `timeout`, or is spawned at once when the socket is already readable, cannot be
    /// registered, or the timeout is zero.
    fn park_call(
        &self,
        registered: io::Result<Arc<IoSlot>>,
        call: IdleFn,
        timeout: Option<Duration>,
    ) {
        let slot = match registered {
            Ok(s) => s,
            // Not pollable (or out of memory for the epoll item): let the callback's read see.
            Err(_) => return self.spawn_idle(call, Readiness::Readable),
        };
        if slot.readable_now(&self.sched) {
            return self.spawn_idle(call, Readiness::Readable);
        }
        let deadline = match timeout {
            None => None,
            Some(t) if t.is_zero() => return self.spawn_idle(call, Readiness::TimedOut),
            // On the round clock (no clock read per park; see `round_now`): keep-alive
            // timeouts need no finer measure, and deadlines one period after a clock that
            // only moves forward arrive in order, for the idle table's FIFO lane.
            Some(t) => Some(self.sched.round_now() + t),
        };
        let key = self.idle.borrow_mut().insert(call, deadline);
        slot.set_idle(key);
        self.idle_gauge();
    }

    /// A parked connection turned readable: spawn its callback (if it is still parked).
    fn wake_idle(&self, key: IdleKey) {
        let taken = self.idle.borrow_mut().take(key);
        if let Some(f) = taken {
            self.idle_gauge();
            self.spawn_idle(f, Readiness::Readable);
        }
    }

    /// Queues a fiber for a woken parked connection. Its stack is bound when it first runs,
    /// not here: an epoll batch may wake hundreds of connections, and each one that runs to its
    /// next park and ends before the next starts then reuses the one warm stack the previous
    /// gave back, instead of each touching a stack of its own.
    fn spawn_idle(&self, f: IdleFn, r: Readiness) {
        let task = self.new_task();
        // SAFETY: home worker; the task is new and nobody else holds its local part.
        unsafe { task.local_mut() }.unstarted = Some((f, r));
        self.enlist(task);
    }

    fn idle_gauge(&self) {
        let n = self.idle.borrow().len();
        self.stats().idle.store(n, Ordering::Relaxed);
    }

    fn drain_inbox(&self) {
        let remote = self.remote();
        remote.has_msgs.store(false, Ordering::SeqCst);
        let mut batch = self.spare.take();
        std::mem::swap(&mut batch, &mut remote.inbox.lock().msgs);
        for msg in batch.drain(..) {
            self.handle(msg);
        }
        *self.spare.borrow_mut() = batch;
    }

    fn handle(&self, msg: Msg) {
        match msg {
            Msg::Spawn(task, body) => self.adopt(task, body),
            Msg::Wake(task) => self.sched.push_ready(task),
            Msg::Release(slot) => drop(slot),
        }
    }

    /// Runs one fiber until it suspends or ends.
    fn run_task(&self, task: Arc<Task>) {
        task.state.store(RUNNING, Ordering::Relaxed);
        let st = &self.remote().stats;
        // SAFETY: we are the home worker and hold no other local part while this one is live
        // (a fiber spawning another touches only the new task's part).
        let mut lp = unsafe { task.local_mut() };
        if let Some((f, r)) = lp.unstarted.take() {
            let body = join::detached_body(task.clone(), move || f.call(r));
            if !self.bind_stack(&task, body) {
                // No memory for a stack: the connection closes with the dropped callback.
                self.finish(&task);
                return;
            }
            // SAFETY: as above; the reference `bind_stack` took has ended.
            lp = unsafe { task.local_mut() };
        }
        guard::enter(lp.guard, task.id);
        st.running.store(1, Ordering::Relaxed);
        let co = lp.co.as_mut().expect("a queued task has a coroutine");
        let result = co.resume(());
        task::set_current(ptr::null());
        st.running.store(0, Ordering::Relaxed);
        bump(&st.switches);
        match result {
            CoroutineResult::Yield(Suspend::Yield) => {
                task.state.store(SCHEDULED, Ordering::Relaxed);
                self.sched.run_queue.borrow_mut().push_back(task);
            }
            CoroutineResult::Yield(Suspend::Park) => {
                if !protocol::park(&task.state) {
                    // Unparked while it was still running: run it again.
                    self.sched.run_queue.borrow_mut().push_back(task);
                }
            }
            CoroutineResult::Return(()) => {
                self.finish(&task);
                self.recycle(task);
            }
        }
    }

    fn finish(&self, task: &Arc<Task>) {
        // SAFETY: home worker, no other local part live.
        let lp = unsafe { task.local_mut() };
        if let Some(co) = lp.co.take() {
            drop(co.into_stack()); // back to the pool
        }
        self.fibers.borrow_mut().remove(lp.slot);
        task.state.store(DONE, Ordering::Release);
        let st = &self.remote().stats;
        st.live.store(self.fibers.borrow().len, Ordering::Relaxed);
        bump(&st.finished);
    }

    /// Waits for I/O events up to `timeout_ms` (-1: forever), wakes their waiters and spawns
    /// the parked connections they made readable.
    fn poll_io(&self, timeout_ms: i32) {
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let mut due = self.idle_due.take();
        {
            let mut events = self.events.borrow_mut();
            // An error (none is expected of a live epoll) reads as no events.
            let _ = self.remote().epoll.wait(&mut events, timeout);
            for ev in events.iter() {
                let (flags, data) = (ev.events, ev.token);
                if data == 0 {
                    self.remote().eventfd.drain();
                } else {
                    // SAFETY: non-zero data is a pointer leaked by `IoSlot::register` into this
                    // epoll; that reference is released only through our own inbox (or on this
                    // thread after EPOLL_CTL_DEL), never while we process this batch: parked
                    // connections are spawned (which may drop a stream) after the loop.
                    let slot = unsafe { &*(data as *const IoSlot) };
                    if let Some(key) = slot.on_event(flags) {
                        due.push(key);
                    }
                }
            }
        }
        for key in due.drain(..) {
            self.wake_idle(key);
        }
        *self.idle_due.borrow_mut() = due;
    }

    fn run(&self) {
        let remote = self.remote();
        let mut tick: u32 = 0;
        loop {
            if remote.has_msgs.load(Ordering::Relaxed) {
                self.drain_inbox();
            }
            if self.sched.shared.shutdown.load(Ordering::Relaxed) {
                break;
            }
            let next = self.sched.run_queue.borrow_mut().pop_front();
            if let Some(task) = next {
                self.run_task(task);
                tick = tick.wrapping_add(1);
                if tick.is_multiple_of(IO_POLL_INTERVAL) {
                    self.poll_io(0);
                    let now = Instant::now();
                    self.begin_round(now);
                    if self.has_timers() {
                        self.fire_timers(now);
                    }
                    remote
                        .stats
                        .ready
                        .store(self.sched.run_queue.borrow().len(), Ordering::Relaxed);
                }
                continue;
            }
            remote.stats.ready.store(0, Ordering::Relaxed);
            // Every firing sets the round clock first, so a fiber its timer woke finds the
            // round clock past its deadline.
            let now = Instant::now();
            self.sched.set_round_now(now);
            let timeout = match self.fire_timers(now) {
                None => -1,
                Some(at) => ms_until(at, now),
            };
            if !self.sched.run_queue.borrow().is_empty() {
                continue;
            }
            if !protocol::announce_sleep(&remote.sleeping, &remote.has_msgs) {
                continue;
            }
            if self.sched.shared.shutdown.load(Ordering::SeqCst) {
                remote.sleeping.store(false, Ordering::Relaxed);
                continue;
            }
            // Going idle: warm stacks no fiber used for a period give their pages back.
            let timeout = self.decay_stacks(now, timeout);
            let discarded = self.stacks.discards();
            remote
                .stats
                .stacks_discarded
                .store(discarded, Ordering::Relaxed);
            remote
                .stats
                .stacks_warm
                .store(self.stacks.warm_len(), Ordering::Relaxed);
            self.sched.timers.borrow_mut().shrink();
            self.poll_io(timeout);
            self.begin_round(Instant::now());
            remote.sleeping.store(false, Ordering::Relaxed);
        }
        self.teardown();
    }

    /// Runs the stack pool's decay if it is due, and returns the poll timeout (`timeout`,
    /// -1: none) shortened so that an idle worker wakes for the next decay while it still
    /// holds spare warm stacks. Nothing to do, and no clock read, on most sleeps.
    fn decay_stacks(&self, now: Instant, timeout: i32) -> i32 {
        if !self.stacks.warm_beyond(IDLE_WARM_STACKS) {
            return timeout;
        }
        let mut at = self.stack_decay_at.get();
        if now >= at {
            self.stacks.decay(IDLE_WARM_STACKS);
            at = now + STACK_DECAY;
            self.stack_decay_at.set(at);
            if !self.stacks.warm_beyond(IDLE_WARM_STACKS) {
                return timeout;
            }
        }
        let until = ms_until(at, now);
        if timeout < 0 {
            until
        } else {
            timeout.min(until)
        }
    }

    /// Starts a scheduling round after a poll of epoll: sets the round clock to `now` (just
    /// read) and calls the runtime's round hook ([`crate::Builder::on_round`]), if any.
    fn begin_round(&self, now: Instant) {
        self.sched.set_round_now(now);
        if let Some(f) = self.sched.shared.config.on_round {
            f();
        }
    }

    /// Cancels everything left: queued spawns, live fibers (unwound on this thread, their
    /// handles report `Cancelled`) and parked connections (closed, their callbacks dropped
    /// without running).
    fn teardown(&self) {
        let remote = self.remote();
        let msgs = {
            let mut inbox = remote.inbox.lock();
            inbox.closed = true;
            std::mem::take(&mut inbox.msgs)
        };
        drop(msgs);
        join::set_cancelling(true);
        let tasks: Vec<Arc<Task>> = self.fibers.borrow_mut().drain();
        for t in &tasks {
            // SAFETY: home worker, no other local part live.
            let lp = unsafe { t.local_mut() };
            let (co, unstarted) = (lp.co.take(), lp.unstarted.take());
            drop(co); // forced unwind of a suspended fiber, or drop of an unstarted body
            drop(unstarted); // a woken connection that never ran: closed
            task::set_current(ptr::null());
            t.state.store(DONE, Ordering::Release);
        }
        join::set_cancelling(false);
        drop(tasks);
        // After the unwinding, which might have parked a connection on its way out.
        let parked = self.idle.borrow_mut().drain();
        drop(parked);
        self.sched.run_queue.borrow_mut().clear();
        self.sched.timers.borrow_mut().clear();
        // Releases that raced with `closed` were dropped with `msgs`; later ones drop directly.
        let late = std::mem::take(&mut remote.inbox.lock().msgs);
        drop(late);
        remote.stats.live.store(0, Ordering::Relaxed);
        remote.stats.ready.store(0, Ordering::Relaxed);
        remote.stats.idle.store(0, Ordering::Relaxed);
    }
}

/// Milliseconds from `now` (just read) until `at`, rounded up so a timer never fires early.
fn ms_until(at: Instant, now: Instant) -> i32 {
    let d = at.saturating_duration_since(now);
    d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
}

/// The body of worker thread `index`.
pub(crate) fn worker_main(shared: Arc<Shared>, index: usize) {
    let _altstack = guard::ThreadGuard::install();
    let local = Local {
        stacks: StackPool::new(shared.config.stack_size, shared.config.warm_stacks),
        sched: Sched::new(index, shared),
        fibers: RefCell::new(Slab::default()),
        spare: RefCell::new(Vec::new()),
        events: RefCell::new(Events::with_capacity(EVENTS_PER_POLL)),
        idle: RefCell::new(IdleTable::default()),
        idle_due: RefCell::new(Vec::new()),
        stack_decay_at: Cell::new(Instant::now()),
        spare_tasks: RefCell::new(Vec::new()),
    };
    LOCAL.with(|l| l.set(&local));
    local.sched.enter();
    local.run();
    local.sched.leave();
    LOCAL.with(|l| l.set(ptr::null()));
}

/// The live fibers of a worker, for teardown and the live count.
#[derive(Default)]
struct Slab {
    entries: Vec<Option<Arc<Task>>>,
    free: Vec<usize>,
    len: usize,
}

impl Slab {
    fn insert(&mut self, t: Arc<Task>) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = Some(t);
                i
            }
            None => {
                self.entries.push(Some(t));
                self.entries.len() - 1
            }
        }
    }

    fn remove(&mut self, i: usize) {
        if self.entries[i].take().is_some() {
            self.len -= 1;
            self.free.push(i);
        }
    }

    fn drain(&mut self) -> Vec<Arc<Task>> {
        self.free.clear();
        self.len = 0;
        self.entries.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn a_finished_task_nobody_holds_is_reused_by_the_next_spawn() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        rt.spawn(|| {
            let local = current_local().expect("on a worker");
            let spare = || local.spare_tasks.borrow().len();
            assert_eq!(spare(), 0, "no fiber has ended yet");
            // The handle holds no task: once the fiber ends, its task is the worker's alone.
            let h = local.spawn(|| 7);
            task::yield_now();
            assert_eq!(h.join().unwrap(), 7);
            assert_eq!(spare(), 1, "the finished task was kept");
            let kept = Arc::as_ptr(local.spare_tasks.borrow().last().unwrap());
            let reused = local.new_task();
            assert_eq!(Arc::as_ptr(&reused), kept, "the next task is the kept one");
            assert_eq!(reused.state.load(Ordering::Relaxed), SCHEDULED);
            assert_eq!(reused.armed_timer.load(Ordering::Relaxed), 0);
            // A task someone else still holds when it ends is not kept.
            let held = local.new_task();
            let other = held.clone();
            let (_handle, body) = join::fiber_body(held.clone(), || ());
            local.adopt(held, body);
            task::yield_now();
            assert_eq!(other.state.load(Ordering::Relaxed), DONE);
            assert_eq!(spare(), 0, "held elsewhere: not kept");
            drop(reused);
        })
        .join()
        .unwrap();
        rt.shutdown();
    }
}
