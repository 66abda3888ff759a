//! The connection driver: the keep-alive loop over any [`Transport`], shared by every model
//! that gives a connection its own flow of control (thread, fiber, process).
//!
//! read head → route → handler (reads the body if it wants it) → finish the body → write
//! the response → again, while both sides keep the connection. Pipelined requests are served
//! in order from the bytes already buffered. Each failure maps to one status and one log line.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_http::response::{self as enc, status_has_no_body};
use weft_http::{BodyFraming, Expect, Method, Parser, Version};

use crate::app::App;
use crate::body::{BodyLimits, ReadBuf, RequestBody};
use crate::gather::{Gather, GATHER_RESPONSES};
use crate::log::Entry;
use crate::metrics::{ListenerMetrics, Phase};
use crate::net::Transport;
use crate::response::{Body, BodyStream, Response};
use crate::shutdown::Registration;
use crate::Request;

/// Initial read buffer per connection; grows to the head limit for large heads.
pub(crate) const READ_BUF: usize = 4096;
/// Body bytes a handler left unread that are read and dropped to keep the connection;
/// more than this and the connection is closed instead (nginx discards similarly).
const DRAIN_LIMIT: u64 = 64 * 1024;
/// After the last response on a connection, how long unread input is drained before the
/// socket closes, so a close with unread data cannot reset the response away (nginx
/// `lingering_time`).
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// Largest body copied into the head buffer to go out in one write; larger bodies go out as
/// a vectored write of head and body.
const COALESCE_BODY: usize = 2048;

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
}

impl ConnInfo {
    /// The client's address: the PROXY protocol header's, else the socket's peer.
    pub fn client(&self) -> SocketAddr {
        self.proxied.get().copied().flatten().unwrap_or(self.peer)
    }

    /// True while a PROXY protocol header is still to be read before the first request.
    pub(crate) fn awaits_proxy_header(&self) -> bool {
        self.listener.proxy_protocol() && self.proxied.get().is_none()
    }
}

/// Counts the connection against `limits.conn_per_ip` by its client address (the PROXY
/// header's, once read); false if that address has as many open already: the caller answers
/// 503, logs it, and closes. True at once for a connection already counted.
pub(crate) fn admit(app: &App, info: &ConnInfo) -> bool {
    if info.client_slot.get().is_some() {
        return true;
    }
    match crate::limits_ip::admit(&app.clients, &app.cfg, info.client().ip()) {
        Ok(slot) => {
            let _ = info.client_slot.set(slot);
            true
        }
        Err(_) => false,
    }
}

/// What [`take_proxy_header`] found at the front of the read buffer.
#[derive(Debug)]
pub(crate) enum ProxyStep {
    /// Not all of the header yet: read more.
    NeedMore,
    /// Taken (and consumed); `info.proxied` is set.
    Done,
    /// Not a PROXY header: close the connection (after logging why).
    Bad(weft_http::proxy_protocol::ProxyError),
}

/// Takes a PROXY protocol header off the front of `rbuf`, recording what it says in
/// `info.proxied`; the bytes after it stay for the request.
pub(crate) fn take_proxy_header(rbuf: &mut ReadBuf, info: &ConnInfo) -> ProxyStep {
    use weft_http::proxy_protocol::{parse, Parsed, Proxied};
    match parse(rbuf.data()) {
        Ok(Parsed::Partial) => ProxyStep::NeedMore,
        Ok(Parsed::Done { proxied, len }) => {
            rbuf.consume(len);
            let client = match proxied {
                Proxied::Tcp { source, .. } => Some(source),
                Proxied::Local => None,
            };
            let _ = info.proxied.set(client);
            ProxyStep::Done
        }
        Err(e) => ProxyStep::Bad(e),
    }
}

/// The read buffer's limit while a PROXY header is read: room for the longest one.
pub(crate) fn proxy_read_max(cfg: &crate::config::Config) -> usize {
    (cfg.limits.max_head_bytes + 1).max(16 + weft_http::proxy_protocol::V2_MAX_PAYLOAD)
}

/// Reads the PROXY protocol header a connection must start with, within the header-read
/// timeout. False (with a log line) when the connection is to be closed: no header, a bad one,
/// the client gone, or too slow.
pub(crate) fn read_proxy_header<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    info: &ConnInfo,
) -> io::Result<bool> {
    let timeout = app.cfg.timeouts.header_read;
    let deadline = Instant::now() + timeout;
    let max = proxy_read_max(&app.cfg);
    loop {
        if !rbuf.is_empty() {
            match take_proxy_header(rbuf, info) {
                ProxyStep::Done => return Ok(true),
                ProxyStep::Bad(e) => {
                    log::info!("{}: {e}; connection closed", info.peer);
                    return Ok(false);
                }
                ProxyStep::NeedMore => {}
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            log::info!(
                "{}: no PROXY header within {timeout:?}; connection closed",
                info.peer
            );
            return Ok(false);
        }
        stream.set_read_timeout(Some(left))?;
        match rbuf.fill(stream, max) {
            Ok(0) => {
                log::info!("{}: closed before its PROXY header", info.peer);
                return Ok(false);
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                log::info!(
                    "{}: no PROXY header within {timeout:?}; connection closed",
                    info.peer
                );
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
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

/// How a head read ended.
enum HeadRead {
    /// The head is `len` bytes; its first byte arrived at `started` (when timed).
    Complete {
        len: usize,
        started: Option<Instant>,
    },
    /// Nothing buffered and nothing to read yet between requests (only when asked to return).
    Idle,
    /// Clean end: peer closed, idle timeout, shutdown.
    Closed,
    /// Answer this status, then close.
    Fail(u16, &'static str),
}

/// Serves requests on `stream` until either side ends the connection.
pub fn serve<T: Transport>(stream: &mut T, app: &App, info: &ConnInfo) -> io::Result<()> {
    serve_inner(stream, app, info, false, true, Duration::ZERO).map(drop)
}

/// Serves requests until the connection ends or falls idle between requests: then it returns
/// [`Served::Idle`] with nothing buffered, so the caller can hold the connection as a socket
/// and a few bytes of state instead of a stack and buffers. `resumed`: the connection has
/// served requests before (its idle wait uses the keep-alive timeout).
pub fn serve_until_idle<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    resumed: bool,
) -> io::Result<Served> {
    serve_inner(stream, app, info, true, !resumed, linger_period(&app.cfg))
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
    serve_inner(stream, app, info, true, true, period)
}

/// How long a connection served by [`serve_until_idle`] waits in its fiber for the next
/// request before it is returned idle: `fiber.linger`, at most half the keep-alive timeout.
pub fn linger_period(cfg: &crate::config::Config) -> Duration {
    cfg.fiber.linger.min(cfg.timeouts.keepalive / 2)
}

/// The buffers and parser one connection uses while it is being served. Between requests of
/// an idle connection (and after it closes) they go back to a small per-thread pool, so a
/// fiber worker reuses a few warm sets instead of allocating and zeroing 4 KiB per wake-up.
struct Scratch {
    parser: Parser,
    rbuf: ReadBuf,
    wbuf: Vec<u8>,
    /// Responses of pipelined requests gathered into one write ([`Gather`]).
    out: Vec<u8>,
}

/// Sets kept per thread; more than this are freed.
const SCRATCH_POOL: usize = 32;

thread_local! {
    // Boxed: a set is several hundred bytes, and it moves in and out of the pool per request
    // of a lingering connection (moving a box is moving a pointer).
    #[allow(clippy::vec_box)]
    static POOL: std::cell::RefCell<Vec<Box<Scratch>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn take_scratch(limits: &weft_http::Limits) -> Box<Scratch> {
    let pooled = POOL.with(|p| p.borrow_mut().pop());
    match pooled {
        Some(s) if s.parser.limits() == limits => s,
        _ => Box::new(Scratch {
            parser: Parser::new(*limits),
            rbuf: ReadBuf::new(READ_BUF),
            wbuf: Vec::with_capacity(512),
            out: Vec::new(),
        }),
    }
}

fn give_scratch(mut s: Box<Scratch>) {
    s.rbuf.consume(s.rbuf.len());
    s.rbuf.shrink_if_idle(READ_BUF);
    s.wbuf.clear();
    if s.wbuf.capacity() > 64 * 1024 {
        s.wbuf = Vec::with_capacity(512);
    }
    if s.out.capacity() > 2 * crate::gather::GATHER_BYTES {
        s.out = Vec::new();
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < SCRATCH_POOL {
            p.push(s);
        }
    });
}

fn serve_inner<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    return_when_idle: bool,
    first: bool,
    period: Duration,
) -> io::Result<Served> {
    let mut first = first;
    let limits = app.cfg.limits.http();
    loop {
        let mut scratch = take_scratch(&limits);
        let mut gather = Gather::new(stream, std::mem::take(&mut scratch.out));
        let mut result = serve_with(
            &mut gather,
            app,
            info,
            return_when_idle,
            first,
            &limits,
            &mut scratch,
        );
        // Whatever way the turn ended, nothing stays held back.
        if gather.flush_gathered().is_err() {
            result = Ok(Served::Closed);
        }
        scratch.out = gather.into_buf();
        give_scratch(scratch);
        // Idle: wait a little for the next request in this fiber (its buffers back in the
        // pool meanwhile, so a burst of lingering connections leaves no heap behind), and
        // hand the connection back only if none comes.
        if let Ok(Served::Idle) = result {
            if !period.is_zero() && stream.linger(period) {
                first = false;
                continue;
            }
        }
        return result;
    }
}

fn serve_with<T: Transport>(
    stream: &mut Gather<'_, T>,
    app: &App,
    info: &ConnInfo,
    return_when_idle: bool,
    mut first: bool,
    limits: &weft_http::Limits,
    scratch: &mut Scratch,
) -> io::Result<Served> {
    let cfg = &app.cfg;
    let Scratch {
        parser, rbuf, wbuf, ..
    } = scratch;
    let mut served_any = false;
    // Responses gathered so far into the write in progress.
    let mut batch: u32 = 0;
    if first {
        stream.set_write_timeout(Some(cfg.timeouts.send))?;
        if info.awaits_proxy_header() && !read_proxy_header(stream, rbuf, app, info)? {
            return Ok(Served::Closed);
        }
        if !admit(app, info) {
            log::info!(
                "{}: 503 more than limits.conn_per_ip = {} connections open from {}",
                info.peer,
                cfg.limits.conn_per_ip,
                info.client().ip()
            );
            let bytes =
                write_response(stream, wbuf, failure(503), None, false, b"").map_or(0, |s| s.0);
            info.listener.response(503, bytes);
            linger(stream, rbuf);
            return Ok(Served::Closed);
        }
    }
    let timed = cfg.timing.on();
    loop {
        let may_idle = return_when_idle && served_any;
        let mut times = Times::default();
        let read = read_head(stream, rbuf, parser, app, info, first, may_idle);
        let head_len = match read {
            Ok(HeadRead::Complete { len, started }) => {
                times.start = started;
                len
            }
            Ok(HeadRead::Idle) => return Ok(Served::Idle),
            Ok(HeadRead::Closed) => return Ok(Served::Closed),
            Ok(HeadRead::Fail(status, reason)) => {
                log::info!("{}: {status} {reason}", info.peer);
                let bytes = write_response(stream, wbuf, failure(status), None, false, b"")
                    .map_or(0, |s| s.0);
                info.listener.response(status, bytes);
                linger(stream, rbuf);
                return Ok(Served::Closed);
            }
            Err(e) => return Err(e),
        };
        if timed {
            times.head = Some(Instant::now());
            times.first = first;
            times.record_head(info);
        }
        first = false;
        served_any = true;
        let req = take_request(parser, rbuf, head_len, info, &cfg.real_ip_from);
        let (resp, keep_alive) = match crate::tls::redirect(info, &req) {
            Some(redirect) => redirect,
            None => handle(stream, rbuf, app, &req, limits, &mut times),
        };
        let status = resp.status;
        // Another request already buffered (pipelined): this response waits to go out with
        // the next ones, in one write (bounded in bytes and count).
        let gather = keep_alive && !rbuf.is_empty() && batch < GATHER_RESPONSES;
        batch = if gather { batch + 1 } else { 0 };
        stream.set_gathering(gather);
        let result = if timed {
            let mut extra = if cfg.timing.server_timing {
                times.server_timing(info)
            } else {
                Vec::new()
            };
            extra.extend_from_slice(crate::tls::extra_headers(app, info));
            let mut out = Stamped {
                inner: &mut *stream,
                first: None,
            };
            let r = write_response(&mut out, wbuf, resp, Some(&req), keep_alive, &extra);
            times.record_out(info, out.first);
            r
        } else {
            let extra = crate::tls::extra_headers(app, info);
            write_response(stream, wbuf, resp, Some(&req), keep_alive, extra)
        };
        stream.set_gathering(false);
        let body_len = match result {
            Ok((bytes, body_len)) => {
                info.listener.response(status, bytes);
                body_len
            }
            Err(e) => {
                log::debug!("{}: write failed: {e}", info.peer);
                return Ok(Served::Closed);
            }
        };
        log_access(app, &req, status, body_len);
        if !keep_alive {
            if closes_cleanly(&req, rbuf) {
                let _ = stream.flush();
            } else {
                linger(stream, rbuf);
            }
            return Ok(Served::Closed);
        }
        recycle_request(parser, rbuf, req);
        rbuf.shrink_if_idle(READ_BUF);
    }
}

/// Takes the request whose head of `head_len` bytes the parser just completed out of the read
/// buffer (the bytes after it stay: a body or pipelined requests).
pub(crate) fn take_request(
    parser: &mut Parser,
    rbuf: &mut ReadBuf,
    head_len: usize,
    info: &ConnInfo,
    real_ip_from: &[crate::config::Cidr],
) -> Request {
    let head = parser.take_head();
    let mut req = Request::new(rbuf.split_head(head_len), head, info.client(), info.local);
    req.set_tls(info.tls.get().cloned());
    if !real_ip_from.is_empty() {
        let xff = req
            .headers()
            .filter(|(name, _)| name.eq_ignore_ascii_case("x-forwarded-for"))
            .map(|(_, value)| value);
        let client = crate::realip::real_ip(info.client(), real_ip_from, xff);
        req.set_peer(client);
    }
    req
}

/// Gives the storage of a finished request back to the parser and read buffer it came from.
pub(crate) fn recycle_request(parser: &mut Parser, rbuf: &mut ReadBuf, req: Request) {
    let (head, bytes) = req.into_parts();
    parser.recycle(head);
    rbuf.recycle_head(bytes);
}

/// The response to a request head that could not be read (`status` from a parse error, a
/// timeout or a size limit); the connection closes after it.
pub(crate) fn failure(status: u16) -> Response {
    let mut resp = Response::error(status);
    resp.close = true;
    resp
}

/// Runs the handler for `req` (reading its body from `rbuf`, then `stream`), settles the body,
/// and decides whether the connection stays open after the response.
pub(crate) fn handle<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    req: &Request,
    limits: &weft_http::Limits,
    times: &mut Times,
) -> (Response, bool) {
    let (resp, body_ok) = respond(stream, rbuf, app, req, limits, times);
    // A stream of unknown length ends an HTTP/1.0 response by closing the connection.
    let close_delimited = req.version() == Version::Http10
        && matches!(&resp.body, Body::Stream(s) if s.known_len().is_none());
    let keep_alive =
        body_ok && req.keep_alive() && !resp.close && !close_delimited && !app.shutdown.is_set();
    (resp, keep_alive)
}

/// Writes the access-log line of a response that went out (`body_len`: the body bytes sent).
pub(crate) fn log_access(app: &App, req: &Request, status: u16, body_len: u64) {
    let Some(log) = &app.access_log else {
        return;
    };
    let health = &app.cfg.health;
    if !health.log && !health.path.is_empty() && req.path() == health.path {
        return;
    }
    let head_only = req.method() == Method::Head;
    log.write(&Entry {
        peer: req.peer_addr().ip(),
        method: req.method_str(),
        target: req.target(),
        version: version_str(req.version()),
        status,
        body_bytes: if head_only || status_has_no_body(status) {
            0
        } else {
            body_len
        },
        referer: req.header("Referer"),
        user_agent: req.header("User-Agent"),
    });
}

/// Runs the handler and settles the body. Returns the response and whether the connection is
/// still in sync (the whole body consumed).
fn respond<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    req: &Request,
    limits: &weft_http::Limits,
    times: &mut Times,
) -> (Response, bool) {
    let cfg = &app.cfg;
    let head = req.head();
    if head.expect() == Expect::Unsupported {
        let ok = head.framing() == BodyFraming::None;
        return (Response::error(417), ok);
    }
    if let BodyFraming::Length(n) = head.framing() {
        if n > cfg.limits.max_body {
            log::info!(
                "{}: 413 Content-Length {n} over limit {}",
                req.peer_addr(),
                cfg.limits.max_body
            );
            return (Response::error(413), false);
        }
    }
    let mut body = RequestBody::new(
        head.framing(),
        head.expect() == Expect::Continue && req.version() == Version::Http11,
        rbuf,
        stream,
        BodyLimits {
            max: cfg.limits.max_body,
            timeout: cfg.timeouts.body_read,
            min_rate: crate::minrate::MinRate::body(&cfg.timeouts, Instant::now()),
            http: *limits,
            read_buf_max: limits.max_head_bytes.max(64 * 1024),
        },
    );
    let resp = if times.head.is_some() {
        body.set_timed(true);
        let t0 = Instant::now();
        let resp = app.handle(req, &mut body);
        let read = body.read_time();
        // Added to a wait for a body read ahead before the handler (the pipeline's receive).
        times.body += read;
        times.handler = Some(t0.elapsed().saturating_sub(read));
        resp
    } else {
        app.handle(req, &mut body)
    };
    if let Some(err) = body.error() {
        return match err.status() {
            Some(status) => {
                log::info!("{}: {status} request body: {err:?}", req.peer_addr());
                (Response::error(status), false)
            }
            None => {
                let mut r = Response::error(400);
                r.close = true;
                (r, false)
            }
        };
    }
    if body.is_finished() {
        return (resp, true);
    }
    // The handler answered without reading the whole body. A client still waiting for
    // 100 Continue may never send it: close. Otherwise read and drop a bounded remainder.
    if body.continue_pending() {
        return (resp, false);
    }
    let in_sync = body.drain(DRAIN_LIMIT);
    // A body the handler left unread can still be malformed or over the limit; then the
    // request as a whole is invalid and gets the body's status, not the handler's success
    // (nginx reads and discards such a body before it answers, to the same effect).
    if let Some(status @ (400 | 413)) = body.error().and_then(|e| e.status()) {
        log::info!("{}: {status} unread request body", req.peer_addr());
        return (Response::error(status), false);
    }
    (resp, in_sync)
}

fn read_head<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    parser: &mut Parser,
    app: &App,
    info: &ConnInfo,
    first: bool,
    may_idle: bool,
) -> io::Result<HeadRead> {
    let cfg = &app.cfg;
    let max = cfg.limits.max_head_bytes + 1;
    // The header-read deadline and the minimum-rate rule, from the head's first byte.
    let mut deadline: Option<(Instant, crate::minrate::MinRate)> = None;
    let mut too_slow = false;
    let timed = cfg.timing.on();
    // Pipelined, the request was already here.
    let mut started = (timed && !rbuf.is_empty()).then(Instant::now);
    parser.reset();
    loop {
        if !rbuf.is_empty() {
            match parser.parse(rbuf.data()) {
                Ok(Some(n)) => {
                    if let Some(r) = &info.registration {
                        r.set_idle(false);
                    }
                    return Ok(HeadRead::Complete { len: n, started });
                }
                Ok(None) => {}
                Err(e) => return Ok(HeadRead::Fail(e.status(), e.reason())),
            }
        }
        let partial = !rbuf.is_empty();
        if partial && deadline.is_none() {
            let now = Instant::now();
            deadline = Some((
                now + cfg.timeouts.header_read,
                crate::minrate::MinRate::head(&cfg.timeouts, now),
            ));
        }
        let timeout = match deadline.filter(|_| partial) {
            Some((d, rate)) => {
                // Each byte received extends the minimum-rate deadline (`minrate.rs`).
                let (d, slow) = rate.earliest(rbuf.len() as u64, d);
                too_slow = slow;
                d.saturating_duration_since(Instant::now())
            }
            None if first => cfg.timeouts.header_read,
            None => cfg.timeouts.keepalive,
        };
        if timeout.is_zero() {
            return Ok(HeadRead::Fail(408, head_late(too_slow)));
        }
        if !partial {
            if let Some(r) = &info.registration {
                // A new connection's first request is awaited even while draining (it stays
                // busy, so shutdown does not wake it): its client was accepted and has sent,
                // or is about to send, a request that closing now would lose (an upgrade's
                // new process serves everything accepted after this one stopped).
                if !first && !r.set_idle(true) {
                    return Ok(HeadRead::Closed);
                }
            }
            if may_idle {
                return Ok(HeadRead::Idle);
            }
        }
        stream.set_read_timeout(Some(timeout))?;
        match rbuf.fill(stream, max) {
            Ok(0) if partial => {
                log::debug!("{}: closed in the middle of a request head", info.peer);
                return Ok(HeadRead::Closed);
            }
            Ok(0) => return Ok(HeadRead::Closed),
            Ok(_) => {
                if !partial {
                    if timed {
                        started = Some(Instant::now());
                    }
                    if let Some(r) = &info.registration {
                        r.set_idle(false);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(if partial {
                    HeadRead::Fail(408, head_late(too_slow))
                } else {
                    HeadRead::Closed
                });
            }
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
                return Ok(HeadRead::Fail(431, "request head too large"))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ) =>
            {
                return Ok(HeadRead::Closed)
            }
            Err(e) => return Err(e),
        }
    }
}

/// The reason logged with a 408 for a head cut short: which limit the client ran into.
pub(crate) fn head_late(too_slow: bool) -> &'static str {
    if too_slow {
        "request head below timeouts.header_min_rate"
    } else {
        "request head not received in time"
    }
}

/// Encodes and writes a response; returns the bytes written and the body bytes among them.
/// `req` is `None` for a response to a request that could not be parsed.
fn write_response<T: Transport>(
    stream: &mut T,
    wbuf: &mut Vec<u8>,
    resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> io::Result<(u64, u64)> {
    let out = encode_response(wbuf, resp, req, keep_alive, extra);
    write_encoded(stream, wbuf, out)
}

/// Writes a response [`encode_response`] left in `wbuf` and `out`, blocking until it is all
/// out; returns the bytes written and the body bytes among them.
pub(crate) fn write_encoded<T: Transport>(
    stream: &mut T,
    wbuf: &[u8],
    out: Encoded,
) -> io::Result<(u64, u64)> {
    match out.tail {
        Tail::None => stream.write_all(wbuf)?,
        Tail::Bytes(b) => stream.write_all_vectored2(wbuf, &b)?,
        Tail::File { file, offset, len } => {
            stream.write_head(wbuf)?;
            stream.send_file(&file, offset, len)?;
        }
        Tail::Stream { mut body, chunked } => {
            stream.write_all(wbuf)?;
            let n = send_stream(stream, &mut body, chunked)?;
            return Ok((wbuf.len() as u64 + n, n));
        }
    }
    Ok((out.bytes, out.body_len))
}

/// What goes out after the bytes [`encode_response`] left in the write buffer.
#[derive(Debug)]
pub(crate) enum Tail {
    /// Nothing: the buffer holds the whole response.
    None,
    /// Body bytes in memory (shared, not copied), sent with the head in one vectored write.
    Bytes(Bytes),
    /// `len` bytes of `file` from `offset`, sent with `sendfile(2)` after the head.
    File {
        file: Arc<std::fs::File>,
        offset: u64,
        len: u64,
    },
    /// A body read while it is sent ([`send_stream`]), chunked or not.
    Stream { body: BodyStream, chunked: bool },
}

/// A response encoded for the wire: the head (with a small body copied after it) is in the
/// write buffer and `tail` follows it; `bytes` is the length of the whole and `body_len` of
/// the body (for a stream: of the head only and 0, as the rest is known once it is sent).
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) tail: Tail,
    pub(crate) bytes: u64,
    pub(crate) body_len: u64,
}

/// Encodes `resp` for the wire into `wbuf` (cleared first), without any I/O: every model
/// writes what this returns, a blocking one at once ([`write_encoded`]), the pipeline's send
/// stage piece by piece. `req` is `None` for a response to a request that could not be
/// parsed; `extra` is header lines to add (`Server-Timing`).
pub(crate) fn encode_response(
    wbuf: &mut Vec<u8>,
    resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Encoded {
    if let Body::Prepared(entry) = &resp.body {
        return encode_prepared(wbuf, entry, req, keep_alive, extra);
    }
    let mut resp = match encode_head(wbuf, &resp, req, keep_alive, extra) {
        Ok(()) => resp,
        Err(bad) => {
            log::error!("handler produced an invalid header {bad:?}; answering 500");
            let mut r = Response::error(500);
            r.close = !keep_alive;
            encode_head(wbuf, &r, req, keep_alive, extra).expect("built-in headers are valid");
            r
        }
    };
    crate::response::recycle_headers(std::mem::take(&mut resp.headers));
    let head_only =
        req.is_some_and(|r| r.method() == Method::Head) || status_has_no_body(resp.status);
    let head_len = wbuf.len() as u64;
    if head_only {
        return Encoded {
            tail: Tail::None,
            bytes: head_len,
            body_len: 0,
        };
    }
    let body_len = resp.body.len();
    let tail = match resp.body {
        Body::Empty => Tail::None,
        Body::Bytes(b) if b.len() <= COALESCE_BODY => {
            wbuf.extend_from_slice(&b);
            Tail::None
        }
        Body::Bytes(b) => Tail::Bytes(b),
        Body::File { file, offset, len } => Tail::File { file, offset, len },
        Body::Stream(body) => {
            let chunked =
                body.known_len().is_none() && req.is_some_and(|r| r.version() == Version::Http11);
            return Encoded {
                tail: Tail::Stream { body, chunked },
                bytes: head_len,
                body_len: 0,
            };
        }
        Body::Prepared(_) => unreachable!("encoded by encode_prepared"),
    };
    Encoded {
        tail,
        bytes: head_len + body_len,
        body_len,
    }
}

/// Sends a streamed body as it is read: exactly its length if known, else chunked (HTTP/1.1)
/// or raw until the reader ends (HTTP/1.0, the connection closes after it). Returns the body
/// bytes sent. A read error, or a reader that ends before its length, is an error: the
/// connection ends without the last chunk, so the client sees the body is incomplete.
fn send_stream<T: Transport>(
    stream: &mut T,
    body: &mut BodyStream,
    chunked: bool,
) -> io::Result<u64> {
    /// Bytes read per write (one chunk each).
    const PIECE: usize = 16 * 1024;
    /// Room before the data for the chunk-size line.
    const PAD: usize = 18;
    let mut buf = vec![0u8; PAD + PIECE + 2];
    let limit = body.known_len();
    let mut sent = 0u64;
    loop {
        let want = limit.map_or(PIECE, |l| {
            usize::try_from(l - sent).unwrap_or(PIECE).min(PIECE)
        });
        if want == 0 {
            return Ok(sent);
        }
        let n = match body.reader().read(&mut buf[PAD..PAD + want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sent += n as u64;
        if chunked {
            let mut line = [0u8; 18];
            let k = weft_http::chunked::encode_size_line(n, &mut line);
            buf[PAD - k..PAD].copy_from_slice(&line[..k]);
            buf[PAD + n..PAD + n + 2].copy_from_slice(weft_http::chunked::CHUNK_END);
            stream.write_all(&buf[PAD - k..PAD + n + 2])?;
        } else {
            stream.write_all(&buf[PAD..PAD + n])?;
        }
    }
    if limit.is_some_and(|l| sent < l) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "streamed body shorter than its length",
        ));
    }
    if chunked {
        stream.write_all(weft_http::chunked::LAST_CHUNK)?;
    }
    Ok(sent)
}

/// Encodes a cached response: its pre-encoded head with `Date` and `Connection` spliced in,
/// and its shared body (copied after the head when small, so it goes out in one write).
fn encode_prepared(
    wbuf: &mut Vec<u8>,
    entry: &crate::cache::Entry,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Encoded {
    wbuf.clear();
    wbuf.extend_from_slice(crate::cache::HEAD_PREFIX);
    enc::write_date(wbuf);
    wbuf.extend_from_slice(entry.fields());
    wbuf.extend_from_slice(extra);
    if !keep_alive {
        wbuf.extend_from_slice(b"Connection: close\r\n");
    } else if req.is_some_and(|r| r.version() == Version::Http10) {
        wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    wbuf.extend_from_slice(b"\r\n");
    let head_len = wbuf.len() as u64;
    let body = entry.body();
    if req.is_some_and(|r| r.method() == Method::Head) {
        return Encoded {
            tail: Tail::None,
            bytes: head_len,
            body_len: 0,
        };
    }
    let tail = if body.len() <= COALESCE_BODY {
        wbuf.extend_from_slice(body);
        Tail::None
    } else {
        Tail::Bytes(body.clone())
    };
    Encoded {
        tail,
        bytes: head_len + body.len() as u64,
        body_len: body.len() as u64,
    }
}

/// Writes the head of `resp` into `wbuf`; on an invalid handler header returns its name.
fn encode_head(
    wbuf: &mut Vec<u8>,
    resp: &Response,
    req: Option<&Request>,
    keep_alive: bool,
    extra: &[u8],
) -> Result<(), String> {
    wbuf.clear();
    enc::write_status_line(resp.status, wbuf);
    wbuf.extend_from_slice(b"Server: weft\r\n");
    enc::write_date(wbuf);
    wbuf.extend_from_slice(extra);
    for (name, value) in &resp.headers {
        if is_managed(name) {
            continue;
        }
        enc::write_header(name, value, wbuf).map_err(|_| name.to_string())?;
    }
    if !(100..200).contains(&resp.status) && resp.status != 204 && resp.status != 304 {
        match &resp.body {
            Body::Stream(s) if s.known_len().is_none() => {
                if req.is_some_and(|r| r.version() == Version::Http11) {
                    wbuf.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                }
            }
            body => enc::write_content_length(body.len(), wbuf),
        }
    }
    if !keep_alive {
        wbuf.extend_from_slice(b"Connection: close\r\n");
    } else if req.is_some_and(|r| r.version() == Version::Http10) {
        wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    wbuf.extend_from_slice(b"\r\n");
    Ok(())
}

/// Headers the driver writes itself; a handler's copy is dropped.
fn is_managed(name: &str) -> bool {
    [
        "content-length",
        "connection",
        "date",
        "server",
        "transfer-encoding",
        "keep-alive",
    ]
    .iter()
    .any(|m| name.eq_ignore_ascii_case(m))
}

/// Whether the connection can be closed at once after answering `req`, without the half-close
/// and drain of [`linger`]: the client itself asked to close (`Connection: close`, or HTTP/1.0
/// without keep-alive), so it sends no further request (RFC 9112 §9.6); the request had no
/// body; and nothing after it was received. No unread byte can then turn the close into a
/// reset (nginx closes such connections at once too; lingering costs a shutdown, a read and
/// the client's round trip). Anything else lingers.
fn closes_cleanly(req: &Request, rbuf: &ReadBuf) -> bool {
    !req.head().keep_alive()
        && matches!(
            req.head().framing(),
            BodyFraming::None | BodyFraming::Length(0)
        )
        && rbuf.is_empty()
}

/// Half-closes and drains what the client still sends, briefly, so the kernel does not
/// answer unread data with a reset that could destroy the response in flight.
// Never inlined: its 4 KiB scratch buffer would otherwise join the frame of the serve loop
// that calls it, on every fiber's stack (`fiber.stack_size`; tests/fiber_only.rs).
#[inline(never)]
fn linger<T: Transport>(stream: &mut T, rbuf: &mut ReadBuf) {
    let _ = stream.flush();
    if stream.shutdown_write().is_err() {
        return;
    }
    let end = Instant::now() + LINGER;
    let mut scratch = [0u8; 4096];
    rbuf.consume(rbuf.len());
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Clock readings of one request, taken only when `[timing]` is on.
#[derive(Debug, Default)]
pub(crate) struct Times {
    /// The request's first byte arrived (or, pipelined, its turn came).
    pub(crate) start: Option<Instant>,
    /// Its head was complete.
    pub(crate) head: Option<Instant>,
    /// The connection's first request (the only one with an `accept` phase).
    pub(crate) first: bool,
    /// Time inside the handler's body reads.
    body: Duration,
    /// The handler's time less `body`.
    handler: Option<Duration>,
}

impl Times {
    /// Counts a wait for body bytes outside the handler's reads (a body read ahead).
    pub(crate) fn add_body_wait(&mut self, d: Duration) {
        self.body += d;
    }

    fn since_accept(&self, info: &ConnInfo) -> Option<Duration> {
        Some(self.start?.saturating_duration_since(info.accepted?))
    }

    fn head_time(&self) -> Option<Duration> {
        Some(self.head?.saturating_duration_since(self.start?))
    }

    pub(crate) fn record_head(&self, info: &ConnInfo) {
        if self.first {
            if let Some(d) = self.since_accept(info) {
                info.listener.phase(Phase::AcceptToFirstByte, d);
            }
        }
        if let Some(d) = self.head_time() {
            info.listener.phase(Phase::Head, d);
        }
    }

    /// After the response: body, handler and output phases.
    pub(crate) fn record_out(&self, info: &ConnInfo, first_out: Option<Instant>) {
        let Some(head) = self.head else { return };
        let l = &info.listener;
        if let Some(h) = self.handler {
            l.phase(Phase::BodyRead, self.body);
            l.phase(Phase::Handler, h);
        }
        if let Some(t) = first_out {
            l.phase(Phase::FirstByteOut, t.saturating_duration_since(head));
            l.phase(Phase::LastByteOut, head.elapsed());
        }
    }

    /// A `Server-Timing` field (milliseconds) with what is known before the response goes
    /// out; `accept` only for a connection's first request.
    pub(crate) fn server_timing(&self, info: &ConnInfo) -> Vec<u8> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut parts = Vec::new();
        if self.first {
            if let Some(d) = self.since_accept(info) {
                parts.push(format!("accept;dur={:.3}", ms(d)));
            }
        }
        if let Some(d) = self.head_time() {
            parts.push(format!("head;dur={:.3}", ms(d)));
        }
        if let Some(h) = self.handler {
            parts.push(format!("body;dur={:.3}", ms(self.body)));
            parts.push(format!("handler;dur={:.3}", ms(h)));
        }
        format!("Server-Timing: {}\r\n", parts.join(", ")).into_bytes()
    }
}

/// A transport that notes when the first response byte went out (for `[timing]`).
struct Stamped<'a, T: Transport> {
    inner: &'a mut T,
    first: Option<Instant>,
}

impl<T: Transport> Stamped<'_, T> {
    fn stamp<V>(&mut self, r: &io::Result<V>) {
        if self.first.is_none() && r.is_ok() {
            self.first = Some(Instant::now());
        }
    }
}

impl<T: Transport> io::Read for Stamped<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl<T: Transport> io::Write for Stamped<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        self.stamp(&r);
        r
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let r = self.inner.write_vectored(bufs);
        self.stamp(&r);
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<T: Transport> Transport for Stamped<'_, T> {
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_read_timeout(timeout)
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_write_timeout(timeout)
    }

    fn write_head(&mut self, head: &[u8]) -> io::Result<()> {
        let r = self.inner.write_head(head);
        self.stamp(&r);
        r
    }

    fn write_all_vectored2(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let r = self.inner.write_all_vectored2(a, b);
        self.stamp(&r);
        r
    }

    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        let r = self.inner.send_file(file, offset, len);
        self.stamp(&r);
        r
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.inner.shutdown_write()
    }
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Route;
    use crate::config::{Config, Model};
    use crate::gather::Recorder;

    /// Serves `input` on an app whose `/n` answers the request's query; returns the writes.
    fn serve_all(input: &[u8]) -> Vec<Vec<u8>> {
        let route = Route {
            method: None,
            path: "/n".into(),
            prefix: false,
            handler: Arc::new(|req: &Request, _: &mut RequestBody<'_>| {
                Response::text(200, format!("<{}>", req.query().unwrap_or("")))
            }),
        };
        let cfg = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        let app = App::new(cfg, vec![route]).unwrap();
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let info = ConnInfo {
            peer: addr,
            local: addr,
            listener: Arc::new(ListenerMetrics::new(addr, Model::Thread)),
            registration: None,
            accepted: None,
            proxied: Default::default(),
            client_slot: Default::default(),
            tls: Default::default(),
        };
        let mut wire = Recorder {
            input: input.to_vec(),
            writes: Vec::new(),
        };
        serve(&mut wire, &app, &info).unwrap();
        wire.writes
    }

    fn bodies(out: &[u8]) -> Vec<String> {
        let text = String::from_utf8_lossy(out);
        text.split("HTTP/1.1 ")
            .skip(1)
            .map(|r| {
                let status = &r[..3];
                let body = r.split("\r\n\r\n").nth(1).unwrap_or("");
                format!("{status}{body}")
            })
            .collect()
    }

    #[test]
    fn pipelined_responses_go_out_in_one_write_in_order() {
        let input: Vec<u8> = (0..16)
            .flat_map(|i| format!("GET /n?{i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
            .collect();
        let writes = serve_all(&input);
        assert_eq!(writes.len(), 1, "one write for the whole batch");
        let want: Vec<String> = (0..16).map(|i| format!("200<{i}>")).collect();
        assert_eq!(bodies(&writes[0]), want);
    }

    #[test]
    fn a_close_in_the_middle_of_a_batch_ends_it_there() {
        let mut input = Vec::new();
        input.extend_from_slice(b"GET /n?a HTTP/1.1\r\nHost: x\r\n\r\n");
        input.extend_from_slice(b"HEAD /n?b HTTP/1.1\r\nHost: x\r\n\r\n");
        input.extend_from_slice(b"GET /n?c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        input.extend_from_slice(b"GET /n?d HTTP/1.1\r\nHost: x\r\n\r\n");
        let writes = serve_all(&input);
        assert_eq!(writes.len(), 1, "{writes:?}");
        let out = String::from_utf8(writes.concat()).unwrap();
        // The HEAD response has its length but no body; the batch ends with the close.
        assert_eq!(bodies(out.as_bytes()), ["200<a>", "200", "200<c>"]);
        assert!(out.contains("Content-Length: 3\r\n"), "{out}");
        assert!(!out.contains("<b>") && !out.contains("<d>"), "{out}");
        let last = out.rsplit("HTTP/1.1 ").next().unwrap();
        assert!(last.contains("Connection: close\r\n"), "{out}");
    }

    #[test]
    fn more_pipelined_requests_than_a_batch_holds_take_more_writes() {
        let n = GATHER_RESPONSES as usize * 2 + 5;
        let input: Vec<u8> = (0..n)
            .flat_map(|i| format!("GET /n?{i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
            .collect();
        let writes = serve_all(&input);
        // Each write carries at most a batch (and the read buffer may split the input).
        assert!(writes.len() >= 3, "{} writes", writes.len());
        for w in &writes {
            assert!(bodies(w).len() <= GATHER_RESPONSES as usize + 1);
        }
        let want: Vec<String> = (0..n).map(|i| format!("200<{i}>")).collect();
        assert_eq!(bodies(&writes.concat()), want);
    }
}
