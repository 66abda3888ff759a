//! Results of finished fibers: [`JoinHandle`] and the cell a fiber leaves its result in (the
//! paper's `TerminatedFibers` list, one entry per fiber, freed when the result is taken or the
//! handle dropped).

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sched::{self, Waker};
use crate::sync::lock::Lock;
use crate::task::{self, FiberCtx, FiberYielder, Task};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh fiber id (process-wide, never reused).
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// Set while a worker unwinds its fibers at shutdown, so a fiber's own `catch_unwind` lets
    /// corosensei's forced-unwind payload through instead of reporting it as a panic.
    static CANCELLING: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn set_cancelling(on: bool) {
    CANCELLING.with(|c| c.set(on));
}

/// Why [`JoinHandle::join`] has no value.
pub enum JoinError {
    /// The fiber panicked; the payload is what `panic!` was given.
    Panic(Box<dyn Any + Send + 'static>),
    /// The fiber never finished: its runtime shut down first, or no stack could be mapped
    /// for it.
    Cancelled,
}

impl JoinError {
    /// Whether the fiber panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panic(_))
    }

    /// Whether the fiber was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panic(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            JoinError::Cancelled => None,
        }
    }

    /// The panic payload, e.g. for `std::panic::resume_unwind`.
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self {
            JoinError::Panic(p) => Some(p),
            JoinError::Cancelled => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panic(_) => write!(f, "Panic({:?})", self.panic_message().unwrap_or("..")),
            JoinError::Cancelled => write!(f, "Cancelled"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panic(_) => write!(
                f,
                "fiber panicked: {}",
                self.panic_message().unwrap_or("(non-string payload)")
            ),
            JoinError::Cancelled => write!(f, "fiber cancelled"),
        }
    }
}

impl std::error::Error for JoinError {}

struct JoinState<T> {
    result: Option<Result<T, JoinError>>,
    done: bool,
    waiter: Option<Waker>,
}

/// Where a fiber (or a blocking job) leaves its result.
pub(crate) struct JoinInner<T> {
    state: Lock<JoinState<T>>,
}

impl<T> JoinInner<T> {
    pub(crate) fn new() -> JoinInner<T> {
        JoinInner {
            state: Lock::new(JoinState {
                result: None,
                done: false,
                waiter: None,
            }),
        }
    }

    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        let waiter = {
            let mut s = self.state.lock();
            s.result = Some(r);
            s.done = true;
            s.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }

    fn is_done(&self) -> bool {
        self.state.lock().done
    }

    /// Waits for the result; `None` if `deadline` passed first.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Option<Result<T, JoinError>> {
        loop {
            {
                let mut s = self.state.lock();
                if let Some(r) = s.result.take() {
                    return Some(r);
                }
                assert!(!s.done, "weft-fiber: result taken twice");
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    s.waiter = None;
                    return None;
                }
                s.waiter = Some(Waker::current());
            }
            sched::park(deadline);
        }
    }
}

/// Completes the join cell with `Cancelled` if the fiber body is dropped before it finishes
/// (never started, or unwound at shutdown).
struct CancelOnDrop<T>(Option<Arc<JoinInner<T>>>);

impl<T> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        if let Some(j) = self.0.take() {
            j.complete(Err(JoinError::Cancelled));
        }
    }
}

/// The handle to a fiber's result. Dropping it detaches the fiber.
pub struct JoinHandle<T> {
    inner: Arc<JoinInner<T>>,
    id: u64,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id)
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(inner: Arc<JoinInner<T>>, id: u64) -> JoinHandle<T> {
        JoinHandle { inner, id }
    }

    /// The fiber's id (as [`crate::current_id`] returns inside it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the fiber has ended (returned, panicked or was cancelled).
    pub fn is_finished(&self) -> bool {
        self.inner.is_done()
    }

    /// Waits for the fiber to end and takes its result. Inside a fiber this parks the fiber;
    /// on a plain thread it blocks the thread.
    pub fn join(self) -> Result<T, JoinError> {
        self.inner.wait(None).expect("no deadline")
    }

    /// As [`JoinHandle::join`], giving the handle back if `timeout` passes first.
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, JoinError>, JoinHandle<T>> {
        match self.inner.wait(Some(Instant::now() + timeout)) {
            Some(r) => Ok(r),
            None => Err(self),
        }
    }
}

/// Builds the coroutine body of a fiber running `f`, and its handle.
pub(crate) fn fiber_body<F, T>(
    task: Arc<Task>,
    f: F,
) -> (
    JoinHandle<T>,
    impl FnOnce(&FiberYielder, ()) + Send + 'static,
)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let inner = Arc::new(JoinInner::new());
    let handle = JoinHandle::new(inner.clone(), task.id);
    let mut guard = CancelOnDrop(Some(inner));
    let body = move |yielder: &FiberYielder, ()| {
        let ctx = FiberCtx {
            yielder,
            task: &task,
        };
        task::set_current(&ctx);
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        task::set_current(std::ptr::null());
        let join = guard.0.take().expect("body runs once");
        match result {
            Ok(v) => join.complete(Ok(v)),
            Err(payload) if CANCELLING.with(|c| c.get()) => {
                join.complete(Err(JoinError::Cancelled));
                panic::resume_unwind(payload);
            }
            Err(payload) => join.complete(Err(JoinError::Panic(payload))),
        }
    };
    (handle, body)
}

/// Builds the coroutine body of a fiber running `f` that nobody joins: no handle and no shared
/// result slot to allocate and complete (the reactor's idle connections, one per request). A
/// panic is reported by the panic hook and ends only this fiber, as with a dropped handle.
pub(crate) fn detached_body<F>(task: Arc<Task>, f: F) -> impl FnOnce(&FiberYielder, ()) + 'static
where
    F: FnOnce() + Send + 'static,
{
    move |yielder: &FiberYielder, ()| {
        let ctx = FiberCtx {
            yielder,
            task: &task,
        };
        task::set_current(&ctx);
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        task::set_current(std::ptr::null());
        if let Err(payload) = result {
            if CANCELLING.with(|c| c.get()) {
                panic::resume_unwind(payload);
            }
        }
    }
}
