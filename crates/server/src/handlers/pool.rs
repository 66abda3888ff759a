//! Idle keep-alive connections to a backend (a proxied upstream, a FastCGI application): the
//! most recently used one is checked out for a request, and one is given back only when both
//! sides allow another request on it. Each pool is swept by one reaper thread for the process,
//! which closes a connection once it has been idle past the pool's `idle_timeout`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// A connection a [`Pool`] can keep.
pub(crate) trait Idle: Send + 'static {
    /// True if the backend has not closed the connection (nor sent anything unasked),
    /// checked without waiting.
    fn is_open(&self) -> bool;

    /// Whether to take it from the pool for a request: [`Idle::is_open`] unless the caller
    /// can tell a dead one cheaply once it writes.
    fn is_open_to_take(&self) -> bool {
        self.is_open()
    }
}

/// Idle connections of one backend, most recently used last.
pub(crate) struct Pool<C> {
    idle: Mutex<Vec<(C, Instant)>>,
    max_idle: usize,
    idle_timeout: Duration,
    /// The [`Reaper`] knows this pool.
    watched: AtomicBool,
    /// Requests waiting for a connection the backend's limit holds back (FastCGI's
    /// `max_conns`): while there are any, a connection put here is closed instead, so that its
    /// place goes to one of them.
    waiting: AtomicUsize,
}

impl<C: Idle> Pool<C> {
    /// An empty pool keeping at most `max_idle` connections, each for `idle_timeout` (closed
    /// then by the [`Reaper`] if no request took it first).
    pub(crate) fn new(max_idle: usize, idle_timeout: Duration) -> Arc<Pool<C>> {
        Arc::new(Pool {
            idle: Mutex::new(Vec::new()),
            max_idle,
            idle_timeout,
            watched: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
        })
    }

    /// Runs `wait` (which blocks until a place is free) as a request waiting for one: a
    /// connection put back meanwhile, or found here once the request says it waits, is
    /// closed for it or given to it (`Ok(Some)`); `Ok(None)` once `wait` returned.
    pub(crate) fn wait_for<E>(&self, wait: impl FnOnce() -> Result<(), E>) -> Result<Option<C>, E> {
        self.waiting.fetch_add(1, SeqCst);
        // Put back before this request said it waits: take it (after: `put` closes it).
        let r = match self.take() {
            Some(c) => Ok(Some(c)),
            None => wait().map(|()| None),
        };
        self.waiting.fetch_sub(1, SeqCst);
        r
    }

    /// Closes one idle connection if a request waits for a place (see [`Pool::wait_for`]).
    fn yield_to_waiting(&self) {
        if self.waiting.load(SeqCst) > 0 {
            let newest = self.lock().pop();
            drop(newest);
        }
    }

    /// The most recently used idle connection that is still open. The lock is held only to
    /// take or put an entry, never across I/O (so never across a fiber's park).
    pub(crate) fn take(&self) -> Option<C> {
        loop {
            let (conn, since) = self.lock().pop()?;
            if since.elapsed() >= self.idle_timeout {
                // Every other entry is older still.
                let stale = std::mem::take(&mut *self.lock());
                drop(stale);
                return None;
            }
            if conn.is_open_to_take() {
                return Some(conn);
            }
        }
    }

    /// Keeps `conn` for the next request (the oldest goes if the pool is full).
    pub(crate) fn put(self: &Arc<Self>, conn: C) {
        if self.max_idle == 0 || self.waiting.load(SeqCst) > 0 {
            return;
        }
        let evicted = {
            let mut idle = self.lock();
            let fresh = idle
                .iter()
                .position(|(_, since)| since.elapsed() < self.idle_timeout)
                .unwrap_or(idle.len());
            let mut evicted: Vec<(C, Instant)> = idle.drain(..fresh).collect();
            if idle.len() >= self.max_idle {
                evicted.push(idle.remove(0));
            }
            idle.push((conn, Instant::now()));
            evicted
        };
        drop(evicted);
        // A request that began to wait while this one was put found the pool empty.
        self.yield_to_waiting();
        // After the push: a reaper that looked at the pool before it is told (see `watch`).
        if let Some(r) = reaper() {
            let me: Arc<dyn Sweep> = self.clone();
            r.watch(&me, &self.watched, Instant::now() + self.idle_timeout);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(C, Instant)>> {
        // A panic while holding it cannot leave the list inconsistent: keep using it.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the [`Reaper`] asks of a pool, whatever its connections are.
trait Sweep: Send + Sync {
    /// Drops the entries past their idle time and those the backend closed; returns when the
    /// oldest one left expires.
    fn sweep(&self) -> Option<Instant>;
}

impl<C: Idle> Sweep for Pool<C> {
    /// The entries are looked at outside the lock (a request may take or put meanwhile) and
    /// the open ones go back before any put since, which are newer.
    fn sweep(&self) -> Option<Instant> {
        let taken = std::mem::take(&mut *self.lock());
        let (kept, dropped): (Vec<_>, Vec<_>) = taken
            .into_iter()
            .partition(|(conn, since)| since.elapsed() < self.idle_timeout && conn.is_open());
        drop(dropped);
        let mut idle = self.lock();
        let newer = std::mem::replace(&mut *idle, kept);
        idle.extend(newer);
        // More than `max_idle` only if requests put that many meanwhile: the oldest go.
        let excess = idle.len().saturating_sub(self.max_idle);
        let evicted: Vec<_> = idle.drain(..excess).collect();
        let next = idle.first().map(|(_, since)| *since + self.idle_timeout);
        drop(idle);
        drop(evicted);
        // A request may have found the pool empty while the sweep held its entries.
        self.yield_to_waiting();
        next
    }
}

/// Closes idle backend connections once they are past `idle_timeout`, as nginx's
/// `keepalive_timeout` in an upstream block does, rather than when a request next looks (a
/// connection the backend closed would sit in CLOSE-WAIT until then). One thread for the
/// process, started by the first connection pooled; it sleeps until the earliest expiry,
/// and with nothing pooled until a connection is (no wake-ups while idle).
struct Reaper {
    pools: Mutex<Vec<Weak<dyn Sweep>>>,
    /// When the thread wakes next, ns after `base`; `u64::MAX` while it sleeps until woken.
    wakes_at: AtomicU64,
    base: Instant,
    wake: weft_sys::epoll::EventFd,
}

/// The process's reaper; `None` if it could not be started (no descriptor or thread to
/// spare: then a pool is swept only when a request takes from it).
fn reaper() -> Option<&'static Reaper> {
    static REAPER: OnceLock<Option<Reaper>> = OnceLock::new();
    REAPER
        .get_or_init(|| {
            let wake = match weft_sys::epoll::EventFd::new() {
                Ok(w) => w,
                Err(e) => {
                    log::warn!("idle backend connections close when next looked at: {e}");
                    return None;
                }
            };
            let started = std::thread::Builder::new()
                .name("weft-pool-reaper".into())
                .spawn(|| {
                    if let Some(r) = reaper() {
                        r.run();
                    }
                });
            if let Err(e) = started {
                log::warn!("idle backend connections close when next looked at: {e}");
                return None;
            }
            Some(Reaper {
                pools: Mutex::new(Vec::new()),
                wakes_at: AtomicU64::new(u64::MAX),
                base: Instant::now(),
                wake,
            })
        })
        .as_ref()
}

impl Reaper {
    /// Notes that `pool` holds a connection expiring at `expires` (called after it was put
    /// there), and wakes the thread if it would not wake by then: once per quiet spell, since
    /// a pool in steady use expires no earlier than the entries the thread already waits for.
    /// The thread says it sleeps with no deadline (`u64::MAX`) before it sweeps, so a
    /// connection put while it sweeps either is seen by the sweep or wakes it again.
    fn watch(&self, pool: &Arc<dyn Sweep>, watched: &AtomicBool, expires: Instant) {
        if !watched.swap(true, SeqCst) {
            let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
            pools.push(Arc::downgrade(pool));
        }
        let at = self.nanos(expires);
        // The plain load first: in steady use nothing changes and no locked operation runs.
        if at < self.wakes_at.load(SeqCst) && self.wakes_at.fetch_min(at, SeqCst) > at {
            self.wake.notify();
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    fn run(&self) {
        use std::os::fd::AsRawFd;
        loop {
            self.wakes_at.store(u64::MAX, SeqCst);
            self.wake.drain();
            // Every pool swept; forgotten once its configuration is gone (a reload).
            let pools: Vec<Arc<dyn Sweep>> = {
                let mut weak = self.pools.lock().unwrap_or_else(|e| e.into_inner());
                weak.retain(|p| p.strong_count() > 0);
                weak.iter().filter_map(Weak::upgrade).collect()
            };
            let next = pools.iter().filter_map(|p| p.sweep()).min();
            drop(pools);
            let Some(next) = next else {
                // Nothing pooled: sleep until a connection is (its `watch` wakes us).
                let _ = weft_sys::poll::poll_readable_any(&[self.wake.as_raw_fd()], Duration::MAX);
                continue;
            };
            let at = self.nanos(next);
            // A connection put since the sweep may have lowered it already.
            let _ = self.wakes_at.fetch_min(at, SeqCst);
            let wait = next.saturating_duration_since(Instant::now());
            let _ = weft_sys::poll::poll_readable_any(&[self.wake.as_raw_fd()], wait);
        }
    }
}
