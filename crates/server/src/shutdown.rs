//! Graceful shutdown: stop accepting, wake connections idle between requests, let busy ones
//! finish the request in hand, then close.
//!
//! A connection marks itself idle before it blocks waiting for a new request and re-checks the
//! flag after; `begin` sets the flag and then shuts down the read side of every idle
//! connection. With sequentially consistent ordering on both sides, either the connection sees
//! the flag or `begin` sees it idle — it cannot sleep through shutdown.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, Release, SeqCst},
};
use std::sync::{Arc, Mutex};

use weft_fiber::sync::Interrupt;

/// Shutdown state shared by listeners and connections.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// Shared with signal handlers of the `process` model, which only store `true` into it.
    flag: Arc<AtomicBool>,
    /// Fired by `begin`: ends the accept loops' waits (a fiber's accept; a thread's `poll` on
    /// its eventfd, which only the thread model and the process model's watcher make), so an
    /// idle accept loop sleeps until a client or shutdown comes, with no timeout to look at
    /// the flag, and without touching the listening socket (an upgrade hands it on).
    wake: Interrupt,
    next: AtomicU64,
    conns: Mutex<HashMap<u64, (RawFd, Arc<AtomicBool>)>>,
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

    /// Starts shutdown: new connections are refused and idle ones are woken to close.
    pub fn begin(&self) {
        self.flag.store(true, SeqCst);
        self.wake.fire();
        self.wake_idle();
    }

    /// What `begin` does to the connections: shuts down the read side of every idle one, so
    /// its wait for a request ends (with what the client had sent, then the end of stream).
    /// For a process-model connection process once it sees the flag its signal handler set
    /// (nothing waits on its interrupt there).
    pub(crate) fn wake_idle(&self) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        for (fd, idle) in conns.values() {
            if idle.load(SeqCst) {
                let _ = weft_sys::socket::shutdown(*fd, std::net::Shutdown::Read);
            }
        }
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
        let id = self.next.fetch_add(1, SeqCst);
        let idle = Arc::new(AtomicBool::new(false));
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (fd, idle.clone()));
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
    idle: Arc<AtomicBool>,
}

impl Registration {
    /// Marks the connection idle (waiting for a request) or busy. Returns false if shutdown
    /// has begun, in which case an idle connection should close instead of waiting.
    pub fn set_idle(&self, idle: bool) -> bool {
        // Only this connection writes its flag, so a relaxed read sees its own last store; an
        // unchanged flag skips the store (a full barrier on x86), and the earlier SeqCst store
        // still orders before the check below.
        if self.idle.load(Relaxed) != idle {
            // Idle needs the full barrier: this store must come before the flag's load below,
            // as `begin`'s flag store comes before its load of this one (otherwise each could
            // miss the other and the connection sleep through shutdown). Busy needs none:
            // nothing is decided on it after the store (`begin` reading a stale "idle" is the
            // same race as reading it just before the store), and on x86 a release store is a
            // plain `mov` where a sequentially consistent one is an `xchg`.
            self.idle.store(idle, if idle { SeqCst } else { Release });
        }
        !self.owner.is_set()
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
