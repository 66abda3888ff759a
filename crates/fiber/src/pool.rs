//! The helper threads behind [`crate::spawn_blocking`]: started on demand up to the runtime's
//! limit, exiting after [`IDLE_EXIT`] without work, so an idle server holds none.
//!
//! A leaf of the runtime (std only): the shared runtime state owns one pool, and
//! `blocking.rs` submits to it from a fiber. These are plain threads: the std mutex and
//! condition variable below are legitimate here.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar};
use std::thread;
use std::time::Duration;

/// A helper thread with no work for this long exits.
pub const IDLE_EXIT: Duration = Duration::from_secs(10);

pub(crate) type Job = Box<dyn FnOnce() + Send>;

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

    pub(crate) fn submit(&self, job: Job) {
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
