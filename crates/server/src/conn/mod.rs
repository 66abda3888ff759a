//! The connection driver: the keep-alive loop over any [`Transport`], shared by every model
//! that gives a connection its own flow of control (thread, fiber, process).
//!
//! read head → route → handler (reads the body if it wants it) → finish the body → write
//! the response → again, while both sides keep the connection. Pipelined requests are served
//! in order from the bytes already buffered. Each failure maps to one status and one log line.
//!
//! The pieces: [`driver`] (the keep-alive loop and the head read), [`head`] (the request-head
//! rules without I/O, which the pipeline's receive stage applies too), [`handle`] (one request:
//! handler, body, access log), [`respond`] (encoding a response and writing it), [`timing`]
//! (`[timing]` clock readings). Before all of them, [`prelude`]: what a new connection must
//! say before it carries requests (PROXY header, TLS's first bytes, the count against
//! `limits.conn_per_ip`), one state machine that every model drives. The models and TLS use
//! them through the names re-exported here.

mod driver;
mod gather;
mod h2;
mod handle;
mod head;
mod policy;
mod prelude;
mod respond;
mod secure;
mod timing;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::App;
use crate::metrics::ListenerMetrics;
use crate::net::Transport;
use crate::shutdown::Registration;

use driver::serve_inner;
pub(crate) use driver::{open, Opened};
pub(crate) use h2::{serve_staged as serve_h2_staged, H2Park, Job, Stage};
pub(crate) use handle::{
    failure, handle, log_access, log_cut, log_refused, recycle_request, take_request,
};
pub(crate) use head::{
    head_late, head_step, idle_timeout, mark_busy, mark_idle, HeadDue, HeadStep,
};
pub(crate) use policy::{extra_headers, note_https_port, redirect};
pub(crate) use prelude::{
    count, proxy_read_max, refuse, BodyDue, BodyStep, Prelude, Protocol, Reason, Step,
};
pub(crate) use respond::{
    encode_append, encode_response, relay_tunnel, write_encoded, Encoded, Tail,
};
pub(crate) use secure::{serve_tls, settle, start_tls};
pub(crate) use timing::Times;

/// Initial read buffer per connection; grows to the head limit for large heads.
pub(crate) const READ_BUF: usize = 4096;

/// Facts about one connection.
#[derive(Debug)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub listener: Arc<ListenerMetrics>,
    /// Registration for graceful shutdown (absent where a model handles it otherwise).
    pub registration: Option<Registration>,
    /// When the connection was accepted, if requests are timed (`[timing]`).
    pub accepted: Option<Instant>,
    /// Set once the PROXY protocol header is read (`[[listen]] proxy_protocol`): the client's
    /// address it gave, or `None` for a header that gave none (a balancer's health check).
    pub proxied: std::sync::OnceLock<Option<SocketAddr>>,
    /// Set once the connection is counted against `limits.conn_per_ip` ([`admit`]); its
    /// count ends when this drops.
    pub client_slot: std::sync::OnceLock<crate::limits_ip::ConnSlot>,
    /// Set once the TLS handshake of a connection on a TLS listener is done: the SNI name,
    /// ALPN protocol and version (`crate::tls::TlsInfo`). Unset on plain connections.
    pub tls: std::sync::OnceLock<std::sync::Arc<crate::tls::TlsInfo>>,
    /// An idle HTTP/2 connection's state while the model holds it without a flow of control
    /// (the fiber model; empty elsewhere).
    pub(crate) h2: h2::H2Park,
    /// Its requests so far and its age, against `limits.keepalive_requests` and
    /// `timeouts.keepalive_time`.
    pub(crate) life: Life,
}

/// What bounds a connection's keep-alive besides its idle timeout: the requests it has carried
/// and when it was accepted (nginx's `keepalive_requests` and `keepalive_time`).
#[derive(Debug)]
pub(crate) struct Life {
    served: std::sync::atomic::AtomicU32,
    /// The Unix second of its accept (the thread's cached `Date` second: on an event loop no
    /// clock read; `keepalive_time` is counted in whole seconds, as nginx's default of an hour
    /// hardly needs finer).
    born: u64,
}

impl Life {
    /// A connection accepted now.
    pub(crate) fn now() -> Life {
        Life::since(weft_http::date::now_secs())
    }

    /// A connection accepted at the Unix second `born` (the `process` model's master took it
    /// before the child serving it existed).
    pub(crate) fn since(born: u64) -> Life {
        Life {
            served: std::sync::atomic::AtomicU32::new(0),
            born,
        }
    }

    /// Counts a request; true if the connection may carry another after it.
    #[inline]
    pub(crate) fn another(&self, cfg: &crate::config::Config) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        // Only the connection's own flow of control counts: a load and a store, no locked
        // instruction.
        let n = self.served.load(Relaxed).saturating_add(1);
        self.served.store(n, Relaxed);
        let max = cfg.limits.keepalive_requests;
        if max != 0 && n >= max {
            return false;
        }
        let time = &cfg.timeouts.keepalive_time;
        // Whole seconds, at least one for any time set.
        time.is_zero()
            || weft_http::date::now_secs().saturating_sub(self.born) < time.as_secs().max(1)
    }
}

impl ConnInfo {
    /// The client's address: the PROXY protocol header's, else the socket's peer.
    pub fn client(&self) -> SocketAddr {
        self.proxied.get().copied().flatten().unwrap_or(self.peer)
    }
}

/// Why [`serve_until_idle`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The connection is finished: close it.
    Closed,
    /// A response went out, nothing of the next request has arrived yet, and the connection
    /// may stay open: the model may park it (without a stack) until it is readable, then call
    /// [`serve_until_idle`] again.
    Idle,
}

/// Where a turn of the driver starts on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A new connection: the send timeout, its PROXY header and `limits.conn_per_ip` come
    /// first, and its first head is awaited for the header-read timeout, even while the server
    /// drains (its client was accepted and is sending a request).
    Fresh,
    /// A connection that has served requests before (woken from idle, or lingered): its next
    /// head is awaited for the keep-alive timeout, and a drain ends it.
    Resumed,
}

/// What a turn of the driver does when a connection falls idle between requests (a response
/// went out and nothing of the next request is buffered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnIdle {
    /// Wait for the next request in this flow of control ([`serve`]).
    Wait,
    /// Wait up to `linger` in it (`Transport::linger`; zero: not at all), then return
    /// [`Served::Idle`] so the model can park the connection without a stack
    /// ([`serve_until_idle`], [`serve_lingering`]).
    Return { linger: Duration },
}

/// Serves requests on `stream` until either side ends the connection.
pub fn serve<T: Transport>(stream: &mut T, app: &App, info: &ConnInfo) -> io::Result<()> {
    serve_inner(stream, app, info, Start::Fresh, OnIdle::Wait).map(drop)
}

/// Serves requests until the connection ends or falls idle between requests: then it returns
/// [`Served::Idle`] with nothing buffered, so the caller can hold the connection as a socket
/// and a few bytes of state instead of a stack and buffers. It lingers for
/// [`linger_period`] first.
pub fn serve_until_idle<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    start: Start,
) -> io::Result<Served> {
    let on_idle = OnIdle::Return {
        linger: linger_period(&app.cfg),
    };
    serve_inner(stream, app, info, start, on_idle)
}

/// [`serve_until_idle`] for a connection's first request on this transport, lingering up to
/// `period` between requests (the `process` model's connection processes keep their
/// connection for the keep-alive timeout; their transport cuts the wait short under
/// pressure).
pub(crate) fn serve_lingering<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    period: Duration,
) -> io::Result<Served> {
    serve_inner(
        stream,
        app,
        info,
        Start::Fresh,
        OnIdle::Return { linger: period },
    )
}

/// How long a connection served by [`serve_until_idle`] waits in its fiber for the next
/// request before it is returned idle: `fiber.linger`, at most half the keep-alive timeout.
pub fn linger_period(cfg: &crate::config::Config) -> Duration {
    cfg.fiber.linger.min(cfg.timeouts.keepalive / 2)
}

#[cfg(test)]
mod tests;
