//! `spawn_blocking`: runs a blocking call (disk I/O, DNS, `waitpid`) on a helper thread and parks
//! the calling fiber until it returns.
//!
//! Threads are started on demand up to the runtime's limit and exit after [`IDLE_EXIT`] without
//! work, so an idle server holds none. These are plain threads: the std mutex and condition
//! variable below are legitimate there.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar};
use std::thread;
use std::time::Duration;

use crate::join::{JoinError, JoinInner};
use crate::worker;

/// A helper thread with no work for this long exits.
pub const IDLE_EXIT: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

struct PoolState {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

struct PoolShared {
    // Plain threads only, never a fiber: a std Mutex with a Condvar is the right tool here.
    #[allow(clippy::disallowed_types)]
    state: std::sync::Mutex<PoolState>,
    cond: Condvar,
    max_threads: usize,
    name: String,
}

/// A runtime's pool of helper threads.
pub(crate) struct BlockingPool {
    shared: Arc<PoolShared>,
}

impl BlockingPool {
    #[allow(clippy::disallowed_types)] // see PoolShared::state
    pub(crate) fn new(max_threads: usize, name: String) -> BlockingPool {
        BlockingPool {
            shared: Arc::new(PoolShared {
                state: std::sync::Mutex::new(PoolState {
                    jobs: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    shutdown: false,
                }),
                cond: Condvar::new(),
                max_threads,
                name,
            }),
        }
    }

    fn submit(&self, job: Job) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.jobs.push_back(job);
        if st.idle > 0 {
            self.shared.cond.notify_one();
        } else if st.threads < self.shared.max_threads {
            let shared = self.shared.clone();
            let name = format!("{}-{}", shared.name, st.threads);
            if thread::Builder::new()
                .name(name)
                .spawn(move || helper(shared))
                .is_ok()
            {
                st.threads += 1;
            } else if st.threads == 0 {
                // No helper can be started: run it here rather than never.
                let job = st.jobs.pop_back().expect("just pushed");
                drop(st);
                job();
            }
        }
    }

    /// Lets idle helpers exit; busy ones finish their job first.
    pub(crate) fn shutdown(&self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shutdown = true;
        self.shared.cond.notify_all();
    }
}

fn helper(shared: Arc<PoolShared>) {
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = st.jobs.pop_front() {
            drop(st);
            job();
            st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        if st.shutdown {
            break;
        }
        st.idle += 1;
        let (guard, timeout) = shared
            .cond
            .wait_timeout(st, IDLE_EXIT)
            .unwrap_or_else(|e| e.into_inner());
        st = guard;
        st.idle -= 1;
        if timeout.timed_out() && st.jobs.is_empty() {
            break;
        }
    }
    st.threads -= 1;
}

/// Runs `f` on the runtime's blocking pool and parks the calling fiber until it returns; a
/// panic in `f` is resumed in the caller. Outside a fiber it simply calls `f` (a plain thread
/// may block), so the same handler code runs in every model.
///
/// ```
/// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
/// let n = rt.block_on(|| weft_fiber::spawn_blocking(|| std::fs::read_dir(".").unwrap().count()));
/// assert!(n > 0);
/// ```
pub fn spawn_blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let local = match worker::current_local() {
        Some(l) if crate::in_fiber() => l,
        _ => return f(),
    };
    let cell = Arc::new(JoinInner::new());
    let done = cell.clone();
    local.shared.blocking.submit(Box::new(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panic);
        done.complete(r);
    }));
    match cell.wait(None).expect("no deadline") {
        Ok(v) => v,
        Err(JoinError::Panic(p)) => panic::resume_unwind(p),
        Err(JoinError::Cancelled) => unreachable!("blocking jobs are never cancelled"),
    }
}
