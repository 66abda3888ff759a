//! The runtime: its builder, the handle fibers and threads spawn through, and the fiber
//! counters a status page reads. The top of the crate: it starts the workers (`worker.rs`) over
//! the shared state (`state.rs`).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

use crate::guard;
use crate::join::{self, JoinError, JoinHandle};
use crate::pool::BlockingPool;
pub use crate::state::SpawnPolicy;
use crate::state::{Config, WorkerIo};
use crate::task::{self, Msg, Remote, Shared, Task};
use crate::worker;

/// Default usable stack size of a fiber: 64 KiB (plus one guard page). Pages are touched
/// lazily, so a fiber that uses 6 KiB costs about 8 KiB of memory.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;
/// Default number of free stacks a worker keeps warm (resident) for reuse.
pub const DEFAULT_WARM_STACKS: usize = 1024;
/// Default upper bound of threads in the [`crate::spawn_blocking`] pool.
pub const DEFAULT_BLOCKING_THREADS: usize = 64;
/// Fibers each worker lets wait in [`crate::net::TcpStream::linger`] at once, by default: no
/// limit.
pub const DEFAULT_MAX_LINGERING: usize = usize::MAX;

/// Configures and starts a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    workers: Option<usize>,
    stack_size: usize,
    warm_stacks: usize,
    policy: SpawnPolicy,
    blocking_threads: usize,
    name: String,
    on_round: Option<fn()>,
    max_lingering: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: None,
            stack_size: DEFAULT_STACK_SIZE,
            warm_stacks: DEFAULT_WARM_STACKS,
            policy: SpawnPolicy::Local,
            blocking_threads: DEFAULT_BLOCKING_THREADS,
            name: "weft-fiber".into(),
            on_round: None,
            max_lingering: DEFAULT_MAX_LINGERING,
        }
    }
}

impl Builder {
    /// Number of worker threads (default: one per available core).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n.max(1));
        self
    }

    /// Usable stack bytes per fiber (rounded up to pages; default [`DEFAULT_STACK_SIZE`]).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Free stacks each worker keeps resident for reuse (default [`DEFAULT_WARM_STACKS`]);
    /// stacks freed beyond this give their pages back to the kernel.
    pub fn warm_stacks(mut self, n: usize) -> Self {
        self.warm_stacks = n;
        self
    }

    /// Placement of fibers spawned from inside a fiber with [`crate::spawn`].
    pub fn spawn_policy(mut self, p: SpawnPolicy) -> Self {
        self.policy = p;
        self
    }

    /// Most threads [`crate::spawn_blocking`] may run at once (default
    /// [`DEFAULT_BLOCKING_THREADS`]).
    pub fn blocking_threads(mut self, n: usize) -> Self {
        self.blocking_threads = n.max(1);
        self
    }

    /// A function each worker calls on its own thread after every poll for I/O events, before
    /// it runs the fibers the events woke: the start of a scheduling round. A place to refresh
    /// per-thread caches once per round (the time of day, as an event loop keeps it) instead
    /// of once per use.
    pub fn on_round(mut self, f: fn()) -> Self {
        self.on_round = Some(f);
        self
    }

    /// Most fibers each worker lets wait in [`crate::net::TcpStream::linger`] at once (default
    /// [`DEFAULT_MAX_LINGERING`]: no limit); past it, `linger` answers `Ok(false)` at once, so
    /// the caller parks the connection without a fiber. A lingering fiber keeps its stack, and
    /// a stack is touched again only when its connection's next request comes: with more
    /// connections busy than a core's cache holds stacks of, each of those returns to a cold
    /// stack, while connections woken from the idle table run on one warm stack in turn.
    pub fn max_lingering(mut self, n: usize) -> Self {
        self.max_lingering = n;
        self
    }

    /// Thread name prefix (default `weft-fiber`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Starts the worker threads.
    pub fn build(self) -> io::Result<Runtime> {
        guard::install_process_handler()?;
        let n = self
            .workers
            .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
        let mut workers = Vec::with_capacity(n);
        for _ in 0..n {
            workers.push(Remote::new()?);
        }
        let config = Config {
            stack_size: self.stack_size,
            warm_stacks: self.warm_stacks,
            policy: self.policy,
            on_round: self.on_round,
            max_lingering: self.max_lingering,
        };
        let blocking = BlockingPool::new(self.blocking_threads, format!("{}-blocking", self.name));
        let shared = Arc::new(Shared::new(workers.into_boxed_slice(), config, blocking));
        let mut threads = Vec::with_capacity(n);
        for index in 0..n {
            let s = shared.clone();
            let t = thread::Builder::new()
                .name(format!("{}-{index}", self.name))
                .spawn(move || worker::worker_main(s, index));
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let rt = Runtime {
                        handle: Handle { shared },
                        threads,
                    };
                    drop(rt);
                    return Err(e);
                }
            }
        }
        Ok(Runtime {
            handle: Handle { shared },
            threads,
        })
    }
}

/// Spawns `f` on worker `index` (modulo the number of workers): directly when called on that
/// worker, else through its mailbox.
fn spawn_on<F, T>(shared: &Arc<Shared>, index: usize, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let index = index % shared.workers.len();
    if let Some(local) = worker::local_for(shared, index) {
        return local.spawn(f);
    }
    let task = Arc::new(Task::new(join::next_id(), index, shared.clone()));
    let (handle, body) = join::fiber_body(task.clone(), f);
    shared.workers[index].send(Msg::Spawn(task, Box::new(body)));
    handle
}

/// Adds one direction's counters of a worker to a snapshot.
fn add_io(io: &WorkerIo, c: &mut IoCounters) {
    c.calls += io.calls.load(Ordering::Relaxed);
    c.would_block += io.would_block.load(Ordering::Relaxed);
    c.skipped += io.skipped.load(Ordering::Relaxed);
}

/// A cheap, cloneable reference to a runtime, for spawning from anywhere.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.workers.len())
            .finish()
    }
}

impl Handle {
    /// The runtime of the calling worker thread (fiber or scheduler code), if any.
    pub fn try_current() -> Option<Handle> {
        worker::current_local().map(|l| Handle {
            shared: l.sched.shared.clone(),
        })
    }

    /// The runtime of the calling fiber.
    ///
    /// # Panics
    /// Outside a runtime's worker thread.
    pub fn current() -> Handle {
        Handle::try_current().expect("weft-fiber: Handle::current() outside a runtime")
    }

    /// Spawns a fiber on the next worker in turn.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_on(&self.shared, self.shared.next_worker(), f)
    }

    /// Spawns a fiber on worker `worker` (modulo the number of workers).
    pub fn spawn_on<F, T>(&self, worker: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_on(&self.shared, worker, f)
    }

    /// Runs `f` in a fiber and waits for its result (blocking a plain thread, parking a fiber).
    /// A panic in `f` is resumed in the caller.
    ///
    /// # Panics
    /// If `f` panics, or the runtime shuts down before `f` finishes.
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.spawn(f).join() {
            Ok(v) => v,
            Err(JoinError::Panic(p)) => std::panic::resume_unwind(p),
            Err(JoinError::Cancelled) => panic!("weft-fiber: runtime shut down during block_on"),
        }
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// A snapshot of the fiber counters (each counter is exact for its worker at some instant
    /// during the call; the sum is approximate while fibers run).
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            workers: self.shared.workers.len(),
            stack_size: self.shared.config.stack_size,
            ..Stats::default()
        };
        for w in self.shared.workers.iter() {
            let st = &w.stats;
            let live = st.live.load(Ordering::Relaxed);
            let ready = st.ready.load(Ordering::Relaxed);
            let running = st.running.load(Ordering::Relaxed);
            s.spawned += st.spawned.load(Ordering::Relaxed);
            s.finished += st.finished.load(Ordering::Relaxed);
            s.switches += st.switches.load(Ordering::Relaxed);
            s.ready += ready;
            s.running += running;
            s.blocked += live.saturating_sub(ready + running);
            s.idle += st.idle.load(Ordering::Relaxed);
            s.lingering += st.lingering.load(Ordering::Relaxed);
            s.stacks_discarded += st.stacks_discarded.load(Ordering::Relaxed);
            s.stacks_warm += st.stacks_warm.load(Ordering::Relaxed);
            add_io(&st.reads, &mut s.reads);
            add_io(&st.writes, &mut s.writes);
            s.per_worker_switches
                .push(st.switches.load(Ordering::Relaxed));
        }
        s
    }
}

/// Fiber counters of a runtime, for a status page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Worker threads.
    pub workers: usize,
    /// Fibers ever started.
    pub spawned: u64,
    /// Fibers that ended (returned, panicked or were cancelled at shutdown).
    pub finished: u64,
    /// Fibers in a run queue.
    pub ready: usize,
    /// Fibers on a CPU right now (at most one per worker).
    pub running: usize,
    /// Fibers parked (waiting for I/O, a timer, a lock, a channel, a join).
    pub blocked: usize,
    /// Fiber resumptions (context switches into a fiber) in total.
    pub switches: u64,
    /// Resumptions per worker: how evenly the load spreads.
    pub per_worker_switches: Vec<u64>,
    /// Connections parked without a fiber by
    /// [`TcpStream::when_readable`](crate::net::TcpStream::when_readable), waiting for a byte.
    pub idle: usize,
    /// Fibers waiting in [`TcpStream::linger`](crate::net::TcpStream::linger) (also counted
    /// in `blocked`).
    pub lingering: usize,
    /// Read-direction operations of fibers (`read`, `accept`) on sockets and pipes.
    pub reads: IoCounters,
    /// Write-direction operations of fibers (`write`, `send`, `sendfile`, `connect`).
    pub writes: IoCounters,
    /// Free fiber stacks whose pages were given back to the kernel (past the warm limit, or
    /// unused for a whole decay period while the worker was idle); as of each worker's last
    /// sleep.
    pub stacks_discarded: u64,
    /// Free fiber stacks whose pages are kept for the next fibers; as of each worker's last
    /// sleep.
    pub stacks_warm: usize,
    /// Bytes of one fiber stack (its guard page not counted).
    pub stack_size: usize,
}

/// How the fibers' I/O operations of one direction went (plain threads are not counted).
///
/// With readiness tracking a keep-alive connection should show `calls` close to the number of
/// requests and few `would_block`: an operation on an fd known to be drained parks first
/// (`skipped`) and makes its syscall after the next epoll edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// System calls made (`read`, `accept4`, `send`, `sendmsg`, `sendfile`, ...).
    pub calls: u64,
    /// Of those, how many failed with `EAGAIN` (the fiber then parked).
    pub would_block: u64,
    /// Operations that parked without a syscall: the fd was known not ready (a short read
    /// or write, or an `EAGAIN`, and no epoll edge since).
    pub skipped: u64,
}

/// A fiber runtime: worker threads, each with its scheduler, reactor and timers.
///
/// ```
/// let rt = weft_fiber::Runtime::builder().workers(2).build().unwrap();
/// let sum = rt.block_on(|| {
///     let hs: Vec<_> = (0..10u64).map(|i| weft_fiber::spawn(move || i * i)).collect();
///     hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
/// });
/// assert_eq!(sum, 285);
/// ```
pub struct Runtime {
    handle: Handle,
    threads: Vec<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.handle.workers())
            .finish()
    }
}

impl Runtime {
    /// A builder with the defaults (one worker per core, 64 KiB stacks).
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A runtime with the defaults.
    pub fn new() -> io::Result<Runtime> {
        Builder::default().build()
    }

    /// A handle for spawning from other threads or fibers.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// See [`Handle::spawn`].
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle.spawn(f)
    }

    /// See [`Handle::spawn_on`].
    pub fn spawn_on<F, T>(&self, worker: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle.spawn_on(worker, f)
    }

    /// See [`Handle::block_on`].
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle.block_on(f)
    }

    /// See [`Handle::stats`].
    pub fn stats(&self) -> Stats {
        self.handle.stats()
    }

    /// Stops the workers and waits for them. Fibers still alive are unwound on their worker
    /// (destructors run) and their handles report [`JoinError::Cancelled`]; a fiber that should
    /// finish its work must be joined (or counted with a `WaitGroup`) before. Also called by
    /// `Drop`.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let shared = &self.handle.shared;
        shared.shutdown.store(true, Ordering::SeqCst);
        for w in shared.workers.iter() {
            w.eventfd.notify();
        }
        let me = thread::current().id();
        for t in self.threads.drain(..) {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
        shared.blocking.shutdown();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spawns a fiber from inside a fiber: on the current worker (or the next in turn, with
/// [`SpawnPolicy::RoundRobin`]).
///
/// # Panics
/// Outside a runtime's worker thread: use [`Runtime::spawn`] or [`Handle::spawn`] there.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let local = worker::current_local()
        .expect("weft_fiber::spawn outside a runtime: use Runtime::spawn or Handle::spawn");
    match local.sched.shared.config.policy {
        SpawnPolicy::Local => local.spawn(f),
        SpawnPolicy::RoundRobin => {
            let i = local.sched.shared.next_worker();
            spawn_on(&local.sched.shared, i, f)
        }
    }
}

/// The id of the running fiber (`None` on a plain thread).
pub fn current_id() -> Option<u64> {
    task::current_id()
}
