//! Concurrency models: who runs which piece of a request's work, and when. Each model only
//! accepts connections and drives `conn::serve` (or its stages); none re-implements HTTP.

pub(crate) mod completion;
pub mod fiber;
pub mod pipeline;
pub mod process;
pub mod thread;
pub(crate) mod wheel;

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::metrics::ListenerMetrics;

/// Pause after accept fails for lack of descriptors or memory, or while the listener is at
/// `limits.max_connections` (no busy loop).
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// An accept loop repeats a warning at most this often.
const WARN_EVERY: Duration = Duration::from_secs(5);

/// The accept-loop state every model shares: the connection limit and rate-limited warnings.
#[derive(Debug)]
pub(crate) struct AcceptGate {
    max_conns: u64,
    last_warning: Option<Instant>,
    /// Where the listener's idle keep-alive connections are registered, to close some when it
    /// is full ([`crate::shutdown::Shutdown::reclaim`]); `None` where the model reclaims them
    /// itself (the `process` model's master).
    reclaim: Option<std::sync::Arc<crate::shutdown::Shutdown>>,
}

impl AcceptGate {
    pub(crate) fn new(
        max_conns: usize,
        reclaim: Option<std::sync::Arc<crate::shutdown::Shutdown>>,
    ) -> AcceptGate {
        AcceptGate {
            max_conns: max_conns as u64,
            last_warning: None,
            reclaim,
        }
    }

    /// Logs `msg` unless a warning went out in the last few seconds.
    pub(crate) fn warn(&mut self, msg: impl FnOnce() -> String) {
        if self.last_warning.is_none_or(|t| t.elapsed() > WARN_EVERY) {
            log::warn!("{}", msg());
            self.last_warning = Some(Instant::now());
        }
    }

    /// Sorts an accept error: false for the harmless ones (a signal, a client that gave up
    /// before being accepted); true, with a rate-limited warning, for a real failure (EMFILE,
    /// ENFILE, ENOBUFS, ENOMEM), after which the caller pauses [`ACCEPT_BACKOFF`] and keeps
    /// serving the connections it has.
    pub(crate) fn failed(&mut self, lm: &ListenerMetrics, e: &std::io::Error) -> bool {
        use std::io::ErrorKind::{ConnectionAborted, Interrupted};
        if matches!(e.kind(), Interrupted | ConnectionAborted) {
            return false;
        }
        self.warn(|| format!("{}: accept failed: {e}; backing off", lm.addr));
        true
    }

    /// True while the listener has `limits.max_connections` open. Then, if a client is
    /// `waiting` (in the listen backlog, or accepted and held), it closes (with a rate-limited
    /// warning) up to [`crate::shutdown::reclaim_batch`] of the listener's idle keep-alive
    /// connections, longest idle first, as nginx reuses them, so that client is served rather
    /// than left waiting; the caller pauses [`ACCEPT_BACKOFF`] meanwhile. With no client
    /// waiting, a full listener closes nothing.
    pub(crate) fn at_capacity(
        &mut self,
        lm: &ListenerMetrics,
        waiting: impl FnOnce() -> bool,
    ) -> bool {
        let full = lm.open.load(Relaxed) >= self.max_conns;
        if full {
            let reclaim = self.reclaim.as_ref().filter(|_| waiting());
            let closed = reclaim.map_or(0, |s| {
                s.reclaim(
                    listener_key(lm),
                    crate::shutdown::reclaim_batch(self.max_conns),
                )
            });
            lm.reclaimed
                .fetch_add(closed as u64, std::sync::atomic::Ordering::Relaxed);
            let max = self.max_conns;
            self.warn(|| {
                format!(
                    "{}: {max} connections open (limits.max_connections); closing idle \
                     keep-alive connections ({closed} now), accepting as they close",
                    lm.addr
                )
            });
        }
        full
    }
}

/// What the shutdown registry names a listener by (for [`crate::shutdown::Shutdown::reclaim`]):
/// its metrics' address in memory.
pub(crate) fn listener_key(lm: &ListenerMetrics) -> usize {
    lm.key()
}

/// Whether a client waits in `listener`'s backlog (the listening socket is readable).
pub(crate) fn backlog_waits(listener: std::os::fd::RawFd) -> bool {
    weft_sys::poll::poll_readable_any(&[listener], Duration::ZERO).is_ok_and(|r| !r.is_empty())
}

/// The local address of a connection accepted on `lm`'s listener: the listener's own address
/// when it is bound to one IP (every connection arrives there), and `getsockname` only for a
/// wildcard listener (0.0.0.0 or ::), where the IP depends on the connection.
pub(crate) fn local_addr(
    lm: &ListenerMetrics,
    query: impl FnOnce() -> std::io::Result<std::net::SocketAddr>,
) -> std::net::SocketAddr {
    if lm.addr.ip().is_unspecified() {
        query().unwrap_or(lm.addr)
    } else {
        lm.addr
    }
}

#[cfg(test)]
mod local_addr_tests {
    use super::*;

    #[test]
    fn only_a_wildcard_listener_asks_the_socket() {
        let specific = ListenerMetrics::new(
            "127.0.0.1:8080".parse().unwrap(),
            crate::config::Model::Fiber,
        );
        let asked = std::cell::Cell::new(false);
        let got = local_addr(&specific, || {
            asked.set(true);
            Ok("127.0.0.2:8080".parse().unwrap())
        });
        assert_eq!(got, "127.0.0.1:8080".parse().unwrap());
        assert!(!asked.get());
        let wildcard =
            ListenerMetrics::new("0.0.0.0:8080".parse().unwrap(), crate::config::Model::Fiber);
        let got = local_addr(&wildcard, || Ok("10.0.0.5:8080".parse().unwrap()));
        assert_eq!(got, "10.0.0.5:8080".parse().unwrap());
        let got = local_addr(&wildcard, || Err(std::io::Error::other("gone")));
        assert_eq!(got, "0.0.0.0:8080".parse().unwrap());
    }
}
