//! A fiber's shared half (`Task`), the running fiber's context, and parking.
//!
//! A `Task` is what other threads may hold (in a channel's waiter slot, a timer, an fd's waiter
//! list): its id, its home worker and an atomic state. Its coroutine lives in a cell that only
//! the home worker thread touches; fibers never migrate between threads (see the README:
//! migration would also make a thread-local address cached across a yield point stale).
//!
//! States: `SCHEDULED` (in a run queue or inbox), `RUNNING`, `NOTIFIED` (unparked while
//! running: its next park returns at once), `PARKED`, `DONE`. Only the worker moves a task
//! out of `SCHEDULED`/`RUNNING`; [`Task::unpark`] moves `PARKED -> SCHEDULED` (and enqueues) or
//! `RUNNING -> NOTIFIED`, so a wake-up racing with a park is never lost. A park may return
//! without a matching unpark (a stale notification): every waiter re-checks its condition.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use corosensei::{Coroutine, Yielder};

use crate::protocol::{self, AtomicU8};
use crate::stack::PooledStack;
use crate::state;
use crate::worker::{self, Local};

pub(crate) use crate::protocol::{DONE, RUNNING, SCHEDULED};

/// What a fiber tells its scheduler when it suspends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Put me at the back of the run queue.
    Yield,
    /// Keep me off the run queue until someone unparks me.
    Park,
}

pub(crate) type Co = Coroutine<(), Suspend, (), PooledStack>;
pub(crate) type FiberYielder = Yielder<(), Suspend>;

/// A fiber body spawned from another thread, boxed to cross to its worker.
pub(crate) type RemoteBody = Box<dyn FnOnce(&FiberYielder, ()) + Send>;

/// A message to a worker from another thread.
pub(crate) enum Msg {
    /// A fiber spawned from elsewhere: the worker gives it a stack and queues it.
    Spawn(Arc<Task>, RemoteBody),
    /// A task of this worker that another thread moved to `SCHEDULED`.
    Wake(Arc<Task>),
    /// An fd registration's epoll reference (the reactor's `IoSlot`), to drop outside any
    /// event batch. Type-erased so that this layer does not name the reactor above it; the
    /// worker only drops it.
    Release(Arc<dyn Send + Sync>),
}

/// The runtime's shared state, with this layer's message type filled in.
pub(crate) type Shared = state::Shared<Msg>;
/// What other threads see of one worker.
pub(crate) type Remote = state::Remote<Msg>;

/// The part of a task only its home worker thread touches.
#[derive(Default)]
pub(crate) struct LocalPart {
    pub(crate) co: Option<Co>,
    /// A connection woken from the idle table whose fiber has no stack yet: the worker binds
    /// one when the task first runs (see `Local::spawn_idle`).
    pub(crate) unstarted: Option<crate::idle::Unstarted>,
    /// Index in the worker's fiber table.
    pub(crate) slot: usize,
    /// Guard page range and usable size of the stack, for the overflow handler.
    pub(crate) guard: (usize, usize, usize),
}

/// The shared half of a fiber.
pub(crate) struct Task {
    pub(crate) id: u64,
    pub(crate) worker: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) state: AtomicU8,
    /// Number of the armed timer, 0 if none (only the home worker's timer heap uses it).
    pub(crate) armed_timer: AtomicU64,
    local: UnsafeCell<LocalPart>,
}

// SAFETY: all fields but `local` are Send + Sync. `local` (holding the !Send coroutine) is only
// accessed through `local_mut`, whose contract restricts it to the home worker thread, and the
// worker takes the coroutine out before it lets the task go (`Drop` checks, and leaks rather
// than drop it elsewhere).
unsafe impl Send for Task {}
// SAFETY: as above: shared access from other threads only touches the atomics and immutables.
unsafe impl Sync for Task {}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("worker", &self.worker)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl Task {
    pub(crate) fn new(id: u64, worker: usize, shared: Arc<Shared>) -> Task {
        Task {
            id,
            worker,
            shared,
            state: AtomicU8::new(SCHEDULED),
            armed_timer: AtomicU64::new(0),
            local: UnsafeCell::new(LocalPart::default()),
        }
    }

    /// Makes a finished task, held by nobody else, new again under fiber id `id`: the
    /// worker's spare tasks spare a heap allocation (and a refcount update on the shared
    /// runtime state) per spawned fiber.
    pub(crate) fn reset(&mut self, id: u64) {
        self.id = id;
        self.state.store(SCHEDULED, Ordering::Relaxed);
        self.armed_timer.store(0, Ordering::Relaxed);
        *self.local.get_mut() = LocalPart::default();
    }

    /// The worker-only part.
    ///
    /// # Safety
    /// Only the home worker thread may call this, and not while another `&mut` from it is live
    /// (the worker never resumes a fiber from inside another's `local_mut`).
    #[allow(clippy::mut_from_ref)] // interior mutability confined to one thread, see Safety
    pub(crate) unsafe fn local_mut(&self) -> &mut LocalPart {
        // SAFETY: the caller guarantees exclusive, same-thread access.
        unsafe { &mut *self.local.get() }
    }

    /// Makes a parked task runnable, or marks a running one notified. Idempotent.
    pub(crate) fn unpark(self: &Arc<Self>) {
        if self.transition_to_scheduled() {
            self.enqueue(self.clone());
        }
    }

    /// As [`Task::unpark`], consuming the reference (saves a refcount round trip).
    pub(crate) fn unpark_owned(self: Arc<Self>) {
        if self.transition_to_scheduled() {
            let me = self.clone();
            self.enqueue(me);
        }
    }

    /// True when the caller must enqueue the task.
    fn transition_to_scheduled(&self) -> bool {
        protocol::unpark(&self.state)
    }

    fn enqueue(&self, me: Arc<Task>) {
        match worker::local_for(&self.shared, self.worker) {
            Some(local) => local.push_ready(me),
            None => self.shared.workers[self.worker].send(Msg::Wake(me)),
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(co) = self.local.get_mut().co.take() {
            // Dropping a coroutine unwinds its stack, which must happen on its own thread; a
            // task only gets here with a coroutine if its worker died abnormally.
            std::mem::forget(co);
        }
    }
}

/// The running fiber's context, on the fiber's own stack.
pub(crate) struct FiberCtx {
    pub(crate) yielder: *const FiberYielder,
    pub(crate) task: *const Arc<Task>,
}

thread_local! {
    /// The fiber running on this thread, or null in scheduler code and on plain threads.
    static CURRENT: Cell<*const FiberCtx> = const { Cell::new(std::ptr::null()) };
}

pub(crate) fn set_current(ctx: *const FiberCtx) {
    CURRENT.with(|c| c.set(ctx));
}

/// Whether the calling code runs inside a fiber.
pub fn in_fiber() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Runs `f` with the current fiber's task, if any.
pub(crate) fn with_current<R>(f: impl FnOnce(&Arc<Task>) -> R) -> Option<R> {
    let ctx = CURRENT.with(|c| c.get());
    if ctx.is_null() {
        return None;
    }
    // SAFETY: a non-null CURRENT points at the FiberCtx on the running fiber's stack, set by
    // the fiber itself and cleared before that frame ends; `task` points into that frame too.
    Some(f(unsafe { &*(*ctx).task }))
}

/// The id of the running fiber, or `None` on a plain thread.
pub fn current_id() -> Option<u64> {
    with_current(|t| t.id)
}

/// Switches back to the scheduler. Must run inside a fiber.
pub(crate) fn suspend(what: Suspend) {
    let ctx = CURRENT.with(|c| c.get());
    assert!(!ctx.is_null(), "weft-fiber: suspend outside a fiber");
    // Restores CURRENT when this fiber runs again, also when it resumes by unwinding (forced
    // unwind at shutdown), so destructors see the right context.
    struct Restore(*const FiberCtx);
    impl Drop for Restore {
        fn drop(&mut self) {
            set_current(self.0);
        }
    }
    let _restore = Restore(ctx);
    // SAFETY: `ctx` is the live context of the running fiber (see `with_current`); its yielder
    // belongs to the coroutine running on this very stack.
    unsafe { (*(*ctx).yielder).suspend(what) };
}

/// Gives the rest of this fiber's turn to the other ready fibers of its worker (FIFO). On a
/// plain thread this is `std::thread::yield_now`.
pub fn yield_now() {
    if in_fiber() {
        suspend(Suspend::Yield);
    } else {
        std::thread::yield_now();
    }
}

/// Parks the current fiber (or thread) until unparked, or until `deadline`. May return
/// spuriously: callers re-check their condition.
pub(crate) fn park(deadline: Option<Instant>) {
    match worker::current_local() {
        Some(local) if in_fiber() => park_fiber(local, deadline),
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

fn park_fiber(local: &Local, deadline: Option<Instant>) {
    let timer = match deadline {
        None => None,
        Some(d) => {
            if d <= Instant::now() {
                return;
            }
            let task = with_current(Arc::clone).expect("in a fiber");
            Some((local.add_timer(d, task.clone()), task))
        }
    };
    suspend(Suspend::Park);
    if let Some((seq, task)) = timer {
        local.cancel_timer(&task, seq);
    }
}

/// Parks the calling fiber `task` (which has queued itself where a wake-up will find it)
/// until it is unparked or `deadline` passes, with its timer in the FIFO lane: for a short
/// wait of one fixed length armed many times a second.
pub(crate) fn park_fifo(local: &Local, deadline: Instant, task: &Arc<Task>) {
    let seq = local.add_fifo_timer(deadline, task.clone());
    suspend(Suspend::Park);
    local.cancel_timer(task, seq);
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
        match with_current(Arc::clone) {
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
