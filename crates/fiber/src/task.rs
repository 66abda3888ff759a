//! A fiber's shared half (`Task`), the running fiber's context, suspending, and the workers'
//! message type (`Msg`, which fills in the shared state of `state.rs`). Unparking and parking
//! need the worker's run queue and timers: they are in `sched.rs`, one layer up.
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

use corosensei::{Coroutine, Yielder};

use crate::protocol::AtomicU8;
use crate::stack::PooledStack;
use crate::state;

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
    /// Number of the armed timer, 0 if none. Only the home worker's timers read or write it
    /// (one thread), so they update it with a load and a store, never a locked instruction.
    pub(crate) armed_timer: AtomicU64,
    /// The linger timer this task keeps queued between lingers (`timer.rs`,
    /// [`crate::timer::Timers::add_fifo`]): its number (0: none kept), the deadline it is
    /// queued for and the deadline it now stands for, in nanoseconds after the worker's timer
    /// epoch. Home worker only, as `armed_timer`.
    pub(crate) kept: KeptTimer,
    local: UnsafeCell<LocalPart>,
}

/// See [`Task::kept`].
#[derive(Default)]
pub(crate) struct KeptTimer {
    pub(crate) seq: AtomicU64,
    pub(crate) queued_at: AtomicU64,
    pub(crate) due: AtomicU64,
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
            kept: KeptTimer::default(),
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
        // Nothing holds the task, so no queued timer entry does: none is kept.
        self.kept.seq.store(0, Ordering::Relaxed);
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
