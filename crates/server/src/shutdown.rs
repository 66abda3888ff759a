//! Graceful shutdown: stop accepting, answer each connection's next request with
//! `Connection: close`, let busy ones finish the request in hand, and close the idle ones once
//! `timeouts.drain_idle` has passed.
//!
//! The idle window is Envoy's drain: closing an idle keep-alive connection at once races with a
//! client that sends its next request just then (it reads the end of the connection, or a
//! reset, for a request it cannot know was not served). For `drain_idle` an idle connection
//! still waits for a request, which it is answered with `Connection: close`; only those still
//! silent after the window are closed.
//!
//! A connection marks itself idle before it blocks waiting for a new request and re-checks the
//! window after; at its end the window's flag is set, then the read side of every idle
//! connection is shut. With sequentially consistent ordering on both sides, either the
//! connection sees the flag or the closing sees it idle — it cannot sleep through shutdown.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, Release, SeqCst},
};
use std::sync::{Arc, Mutex};

use weft_fiber::sync::Interrupt;

/// Shutdown state shared by listeners and connections.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// Shared with signal handlers of the `process` model, which only store `true` into it.
    flag: Arc<AtomicBool>,
    /// Set when idle connections are to close: `drain_idle` after `begin` (at once with a
    /// zero window).
    idle_over: AtomicBool,
    /// `timeouts.drain_idle` in milliseconds, as the current generation's configuration says.
    drain_idle_ms: AtomicU64,
    /// Fired by `begin`: ends the accept loops' waits (a fiber's accept; a thread's `poll` on
    /// its eventfd, which only the thread model and the process model's watcher make), so an
    /// idle accept loop sleeps until a client or shutdown comes, with no timeout to look at
    /// the flag, and without touching the listening socket (an upgrade hands it on).
    wake: Interrupt,
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Entry>>,
    /// Listening sockets still open in this process ([`Listening`]).
    listeners: AtomicUsize,
}

/// A registered connection: its socket, the listener it came through (a key the models
/// choose: `models::listener_key`), and
/// since when it is idle between requests (the Unix second; 0 while busy).
#[derive(Debug)]
struct Entry {
    fd: RawFd,
    listener: usize,
    idle: Arc<AtomicU64>,
}

/// Idle connections a full listener closes at most per look ([`reclaim_batch`]; nginx's
/// `ngx_drain_connections` closes up to 32).
pub(crate) const RECLAIM_BATCH: usize = 16;

/// How many idle connections a listener of `max_conns` closes per look while full with a
/// client waiting (each look is [`crate::models::ACCEPT_BACKOFF`] apart): [`RECLAIM_BATCH`],
/// and no more than a 64th of the limit, at least one (a small listener closes one at a time).
pub(crate) fn reclaim_batch(max_conns: u64) -> usize {
    usize::try_from(max_conns / 64)
        .unwrap_or(usize::MAX)
        .clamp(1, RECLAIM_BATCH)
}

/// A listening socket's share in the drain: held beside the socket by the model that accepts
/// on it, dropped once the socket is closed. Responses say `Connection: close` once none is
/// left ([`Shutdown::closing`]): a client told to reconnect then finds the port refusing (or
/// a new process's socket, after an upgrade) rather than a backlog about to be reset.
#[derive(Debug)]
pub(crate) struct Listening(Arc<Shutdown>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listeners.fetch_sub(1, SeqCst);
    }
}

impl Shutdown {
    /// What `begin` fires, for accept loops to wait with.
    pub(crate) fn interrupt(&self) -> &Interrupt {
        &self.wake
    }

    /// True once shutdown has begun.
    pub fn is_set(&self) -> bool {
        self.flag.load(SeqCst)
    }

    /// True once connections are to close after their response in hand: shutdown has begun
    /// and this process's listening sockets are closed (or the idle window has passed,
    /// whatever is still open).
    pub fn closing(&self) -> bool {
        self.is_set() && (self.listeners.load(SeqCst) == 0 || self.idle_over())
    }

    /// Counts a listening socket until the returned guard drops ([`Listening`]).
    pub(crate) fn listening(self: &Arc<Self>) -> Listening {
        self.listeners.fetch_add(1, SeqCst);
        Listening(self.clone())
    }

    /// In a process that holds none of the listening sockets it inherited counts of (the
    /// `process` model's connection processes): none is open.
    pub(crate) fn forget_listeners(&self) {
        self.listeners.store(0, SeqCst);
    }

    /// The idle window of a drain (`timeouts.drain_idle`), from the configuration in force.
    pub(crate) fn set_drain_idle(&self, window: std::time::Duration) {
        let ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
        self.drain_idle_ms.store(ms, Relaxed);
    }

    /// The idle window of a drain.
    pub(crate) fn drain_idle(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.drain_idle_ms.load(Relaxed))
    }

    /// True once idle connections are to close (the drain's idle window has passed).
    pub fn idle_over(&self) -> bool {
        self.idle_over.load(SeqCst)
    }

    /// Starts shutdown: new connections are refused, and each response from here on closes its
    /// connection; idle connections get the drain's idle window for a last request, then are
    /// woken to close (at once with a zero window).
    pub fn begin(self: &Arc<Self>) {
        let first = !self.flag.swap(true, SeqCst);
        self.wake.fire();
        let window = self.drain_idle();
        if window.is_zero() {
            self.close_idle();
            return;
        }
        if !first {
            return;
        }
        let me = self.clone();
        let timer = std::thread::Builder::new()
            .name("weft-drain".into())
            .spawn(move || {
                std::thread::sleep(window);
                me.close_idle();
            });
        if let Err(e) = timer {
            log::warn!("drain: no timer thread ({e}); idle connections close now");
            self.close_idle();
        }
    }

    /// Ends the drain's idle window: idle connections close, and one that falls idle from
    /// here on closes instead of waiting.
    pub(crate) fn close_idle(&self) {
        self.idle_over.store(true, SeqCst);
        self.wake_idle();
    }

    /// What `begin` does to the connections: shuts down the read side of every idle one, so
    /// its wait for a request ends (with what the client had sent, then the end of stream).
    /// For a process-model connection process once it sees the flag its signal handler set
    /// (nothing waits on its interrupt there).
    pub(crate) fn wake_idle(&self) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        for e in conns.values() {
            if e.idle.load(SeqCst) != 0 {
                let _ = weft_sys::socket::shutdown(e.fd, std::net::Shutdown::Read);
            }
        }
    }

    /// A listener at `limits.max_connections` makes room (nginx's reuse of idle keep-alive
    /// connections): shuts the read side of up to `n` of its connections idle between
    /// requests, the longest idle first, so each wakes, reads the end and closes. Returns how
    /// many. A request already received is still read and answered first; one sent as the
    /// close happens meets it, as at the keep-alive timeout.
    pub(crate) fn reclaim(&self, listener: usize, n: usize) -> usize {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut idle: Vec<(u64, &Entry)> = conns
            .values()
            .filter(|e| e.listener == listener)
            .filter_map(|e| match e.idle.load(SeqCst) {
                0 => None,
                since => Some((since, e)),
            })
            .collect();
        idle.sort_unstable_by_key(|&(since, _)| since);
        let mut closed = 0;
        for (_, e) in idle.into_iter().take(n) {
            // Busy from here: a second call picks others while this one closes.
            e.idle.store(0, SeqCst);
            if weft_sys::socket::shutdown(e.fd, std::net::Shutdown::Read).is_ok() {
                closed += 1;
            }
        }
        closed
    }

    /// The flag itself, for a signal handler that begins shutdown by setting it (no locks:
    /// a process-model connection process, whose reads also wait on a pipe the same signal
    /// writes to, wakes and sees it).
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Registers a connection's socket; the registration must be dropped before the socket
    /// is closed (so `begin` never touches a reused descriptor).
    pub fn register(self: &Arc<Self>, fd: RawFd) -> Registration {
        self.register_on(fd, 0)
    }

    /// [`Shutdown::register`] for a connection of `listener` (`models::listener_key`), which
    /// [`Shutdown::reclaim`] may close when that listener is full.
    pub(crate) fn register_on(self: &Arc<Self>, fd: RawFd, listener: usize) -> Registration {
        let id = self.next.fetch_add(1, SeqCst);
        let idle = Arc::new(AtomicU64::new(0));
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id,
            Entry {
                fd,
                listener,
                idle: idle.clone(),
            },
        );
        Registration {
            owner: self.clone(),
            id,
            idle,
        }
    }
}

/// A connection's entry in the shutdown registry.
#[derive(Debug)]
pub struct Registration {
    owner: Arc<Shutdown>,
    id: u64,
    /// Since when the connection is idle (the Unix second), 0 while busy.
    idle: Arc<AtomicU64>,
}

impl Shutdown {
    /// Connections registered idle (waiting for a request), by listener key: the dashboard's
    /// idle count (one look at the registry a second).
    pub(crate) fn idle_by_listener(&self) -> HashMap<usize, u64> {
        let mut out = HashMap::new();
        for e in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            if e.idle.load(Relaxed) != 0 {
                *out.entry(e.listener).or_insert(0) += 1;
            }
        }
        out
    }
}

impl Registration {
    /// Marks the connection idle (waiting for a request) or busy. Returns false once the
    /// drain's idle window has passed, in which case an idle connection should close instead
    /// of waiting.
    pub fn set_idle(&self, idle: bool) -> bool {
        // Only this connection writes its flag, so a relaxed read sees its own last store; an
        // unchanged flag skips the store (a full barrier on x86), and the earlier SeqCst store
        // still orders before the check below.
        // Idle: since when, in whole seconds (the thread's cached `Date` second: an event
        // loop reads no clock for it); it orders `reclaim`'s choice. Never 0 (busy).
        if (self.idle.load(Relaxed) != 0) != idle {
            // Idle needs the full barrier: this store must come before the flag's load below,
            // as `begin`'s flag store comes before its load of this one (otherwise each could
            // miss the other and the connection sleep through shutdown). Busy needs none:
            // nothing is decided on it after the store (`begin` reading a stale "idle" is the
            // same race as reading it just before the store), and on x86 a release store is a
            // plain `mov` where a sequentially consistent one is an `xchg`.
            if idle {
                let since = weft_http::date::now_secs().max(1);
                self.idle.store(since, SeqCst);
            } else {
                self.idle.store(0, Release);
            }
        }
        !self.owner.idle_over()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.owner
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Whether a read on `s` (non-blocking) finds its end now.
    fn at_end(s: &mut UnixStream) -> bool {
        s.set_nonblocking(true).unwrap();
        matches!(s.read(&mut [0u8; 8]), Ok(0))
    }

    #[test]
    fn reclaim_closes_the_longest_idle_of_one_listener_and_no_busy_one() {
        let shutdown = Arc::new(Shutdown::default());
        let mut pairs: Vec<(UnixStream, UnixStream)> =
            (0..4).map(|_| UnixStream::pair().unwrap()).collect();
        // Listener 1: idle since seconds 300, 100 and 200; busy. Listener 2: idle since 50.
        let regs: Vec<Registration> = pairs
            .iter()
            .zip([(1, 300), (1, 100), (1, 200), (2, 50)])
            .map(|((s, _), (listener, since))| {
                let r = shutdown.register_on(s.as_raw_fd(), listener);
                r.idle.store(since, SeqCst);
                r
            })
            .collect();
        let busy = UnixStream::pair().unwrap();
        let _busy = shutdown.register_on(busy.0.as_raw_fd(), 1);
        assert_eq!(shutdown.reclaim(1, 2), 2);
        let mut ends: Vec<bool> = Vec::new();
        for (s, _peer) in &mut pairs {
            ends.push(at_end(s));
        }
        // The two longest idle of listener 1 (since 100 and 200); listener 2's untouched.
        assert_eq!(ends, [false, true, true, false]);
        // Those chosen count as busy now: the next look takes the last idle one.
        assert_eq!(shutdown.reclaim(1, 16), 1);
        assert_eq!(shutdown.reclaim(1, 16), 0);
        // Registrations go before their sockets close.
        drop(regs);
        assert_eq!(shutdown.conns.lock().unwrap().len(), 1);
        drop(pairs);
    }

    #[test]
    fn a_drain_waits_the_idle_window_before_closing_idle_connections() {
        let shutdown = Arc::new(Shutdown::default());
        shutdown.set_drain_idle(std::time::Duration::from_millis(300));
        let (mut idle, _peer) = UnixStream::pair().unwrap();
        let reg = shutdown.register(idle.as_raw_fd());
        assert!(reg.set_idle(true));
        shutdown.begin();
        assert!(shutdown.is_set() && shutdown.closing());
        // Within the window: still waiting for a request, not shut.
        assert!(reg.set_idle(true));
        assert!(!at_end(&mut idle));
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !shutdown.idle_over() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(shutdown.idle_over());
        assert!(at_end(&mut idle), "the idle connection was not shut");
        assert!(
            !reg.set_idle(true),
            "past the window an idle connection closes"
        );
    }

    #[test]
    fn responses_close_only_once_the_listeners_are_closed() {
        let shutdown = Arc::new(Shutdown::default());
        shutdown.set_drain_idle(std::time::Duration::from_secs(60));
        let listening = shutdown.listening();
        shutdown.begin();
        assert!(shutdown.is_set() && !shutdown.closing());
        drop(listening);
        assert!(shutdown.closing());
    }
}
