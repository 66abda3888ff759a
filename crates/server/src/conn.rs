//! The connection driver: the keep-alive loop over any [`Transport`], shared by every model
//! that gives a connection its own flow of control (thread, fiber, process).
//!
//! read head → route → handler (reads the body if it wants it) → finish the body → write
//! the response → again, while both sides keep the connection. Pipelined requests are served
//! in order from the bytes already buffered. Each failure maps to one status and one log line.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_http::response::{self as enc, status_has_no_body};
use weft_http::{BodyFraming, Expect, Method, Parser, Version};

use crate::app::App;
use crate::body::{BodyLimits, ReadBuf, RequestBody};
use crate::log::Entry;
use crate::metrics::ListenerMetrics;
use crate::net::Transport;
use crate::response::{Body, Response};
use crate::shutdown::Registration;
use crate::Request;

/// Initial read buffer per connection; grows to the head limit for large heads.
const READ_BUF: usize = 4096;
/// Body bytes a handler left unread that are read and dropped to keep the connection;
/// more than this and the connection is closed instead (nginx discards similarly).
const DRAIN_LIMIT: u64 = 64 * 1024;
/// After the last response on a connection, how long unread input is drained before the
/// socket closes, so a close with unread data cannot reset the response away (nginx
/// `lingering_time`).
const LINGER: Duration = Duration::from_secs(2);
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
    Complete(usize),
    /// Nothing buffered and nothing to read yet between requests (only when asked to return).
    Idle,
    /// Clean end: peer closed, idle timeout, shutdown.
    Closed,
    /// Answer this status, then close.
    Fail(u16, &'static str),
}

/// Serves requests on `stream` until either side ends the connection.
pub fn serve<T: Transport>(stream: &mut T, app: &App, info: &ConnInfo) -> io::Result<()> {
    serve_inner(stream, app, info, false, true).map(drop)
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
    serve_inner(stream, app, info, true, !resumed)
}

/// The buffers and parser one connection uses while it is being served. Between requests of
/// an idle connection (and after it closes) they go back to a small per-thread pool, so a
/// fiber worker reuses a few warm sets instead of allocating and zeroing 4 KiB per wake-up.
struct Scratch {
    parser: Parser,
    rbuf: ReadBuf,
    wbuf: Vec<u8>,
}

/// Sets kept per thread; more than this are freed.
const SCRATCH_POOL: usize = 32;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Scratch>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn take_scratch(limits: weft_http::Limits) -> Scratch {
    let pooled = POOL.with(|p| p.borrow_mut().pop());
    match pooled {
        Some(s) if *s.parser.limits() == limits => s,
        _ => Scratch {
            parser: Parser::new(limits),
            rbuf: ReadBuf::new(READ_BUF),
            wbuf: Vec::with_capacity(512),
        },
    }
}

fn give_scratch(mut s: Scratch) {
    s.rbuf.consume(s.rbuf.len());
    s.rbuf.shrink_if_idle(READ_BUF);
    s.wbuf.clear();
    if s.wbuf.capacity() > 64 * 1024 {
        s.wbuf = Vec::with_capacity(512);
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
) -> io::Result<Served> {
    let mut scratch = take_scratch(app.cfg.limits.http());
    let result = serve_with(stream, app, info, return_when_idle, first, &mut scratch);
    give_scratch(scratch);
    result
}

fn serve_with<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    return_when_idle: bool,
    mut first: bool,
    scratch: &mut Scratch,
) -> io::Result<Served> {
    let cfg = &app.cfg;
    let limits = cfg.limits.http();
    let Scratch { parser, rbuf, wbuf } = scratch;
    let mut served_any = false;
    if first {
        stream.set_write_timeout(Some(cfg.timeouts.send))?;
    }
    loop {
        let may_idle = return_when_idle && served_any;
        let head_len = match read_head(stream, rbuf, parser, app, info, first, may_idle) {
            Ok(HeadRead::Complete(n)) => n,
            Ok(HeadRead::Idle) => return Ok(Served::Idle),
            Ok(HeadRead::Closed) => return Ok(Served::Closed),
            Ok(HeadRead::Fail(status, reason)) => {
                log::info!("{}: {status} {reason}", info.peer);
                let mut resp = Response::error(status);
                resp.close = true;
                let bytes = write_response(stream, wbuf, resp, None, false).unwrap_or(0);
                info.listener.response(status, bytes);
                linger(stream, rbuf);
                return Ok(Served::Closed);
            }
            Err(e) => return Err(e),
        };
        first = false;
        served_any = true;
        let head = parser.take_head();
        let req = Request::new(
            Bytes::copy_from_slice(&rbuf.data()[..head_len]),
            head,
            info.peer,
            info.local,
        );
        rbuf.consume(head_len);

        let (resp, body_ok) = respond(stream, rbuf, app, &req, &limits);
        let keep_alive = body_ok && req.keep_alive() && !resp.close && !app.shutdown.is_set();
        let status = resp.status;
        let body_len = resp.body.len();
        let head_only = req.method() == Method::Head;
        let result = write_response(stream, wbuf, resp, Some(&req), keep_alive);
        match result {
            Ok(bytes) => info.listener.response(status, bytes),
            Err(e) => {
                log::debug!("{}: write failed: {e}", info.peer);
                return Ok(Served::Closed);
            }
        }
        if let Some(log) = &app.access_log {
            log.write(&Entry {
                peer: info.peer.ip(),
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
        if !keep_alive {
            linger(stream, rbuf);
            return Ok(Served::Closed);
        }
        rbuf.shrink_if_idle(READ_BUF);
    }
}

/// Runs the handler and settles the body. Returns the response and whether the connection is
/// still in sync (the whole body consumed).
fn respond<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    req: &Request,
    limits: &weft_http::Limits,
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
            http: *limits,
            read_buf_max: limits.max_head_bytes.max(64 * 1024),
        },
    );
    let resp = app.handle(req, &mut body);
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
    let mut deadline: Option<Instant> = None;
    parser.reset();
    loop {
        if !rbuf.is_empty() {
            match parser.parse(rbuf.data()) {
                Ok(Some(n)) => {
                    if let Some(r) = &info.registration {
                        r.set_idle(false);
                    }
                    return Ok(HeadRead::Complete(n));
                }
                Ok(None) => {}
                Err(e) => return Ok(HeadRead::Fail(e.status(), e.reason())),
            }
        }
        let partial = !rbuf.is_empty();
        let timeout = match (partial, deadline) {
            (true, Some(d)) => d.saturating_duration_since(Instant::now()),
            (true, None) => {
                let d = Instant::now() + cfg.timeouts.header_read;
                deadline = Some(d);
                cfg.timeouts.header_read
            }
            (false, _) if first => cfg.timeouts.header_read,
            (false, _) => cfg.timeouts.keepalive,
        };
        if timeout.is_zero() {
            return Ok(HeadRead::Fail(408, "request head not received in time"));
        }
        if !partial {
            if let Some(r) = &info.registration {
                if !r.set_idle(true) {
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
                    HeadRead::Fail(408, "request head not received in time")
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

/// Encodes and writes a response; returns the bytes written. `req` is `None` for a response
/// to a request that could not be parsed.
fn write_response<T: Transport>(
    stream: &mut T,
    wbuf: &mut Vec<u8>,
    resp: Response,
    req: Option<&Request>,
    keep_alive: bool,
) -> io::Result<u64> {
    if let Body::Prepared(entry) = &resp.body {
        return write_prepared(stream, wbuf, entry, req, keep_alive);
    }
    let resp = match encode_head(wbuf, &resp, req, keep_alive) {
        Ok(()) => resp,
        Err(bad) => {
            log::error!("handler produced an invalid header {bad:?}; answering 500");
            let mut r = Response::error(500);
            r.close = !keep_alive;
            encode_head(wbuf, &r, req, keep_alive).expect("built-in headers are valid");
            r
        }
    };
    let head_only =
        req.is_some_and(|r| r.method() == Method::Head) || status_has_no_body(resp.status);
    let head_len = wbuf.len() as u64;
    if head_only {
        stream.write_all(wbuf)?;
        return Ok(head_len);
    }
    match &resp.body {
        Body::Empty => stream.write_all(wbuf)?,
        Body::Bytes(b) if b.len() <= COALESCE_BODY => {
            wbuf.extend_from_slice(b);
            stream.write_all(wbuf)?;
        }
        Body::Bytes(b) => stream.write_all_vectored2(wbuf, b)?,
        Body::File { file, offset, len } => {
            stream.write_head(wbuf)?;
            stream.send_file(file, *offset, *len)?;
        }
        Body::Prepared(_) => unreachable!("sent by write_prepared"),
    }
    Ok(head_len + resp.body.len())
}

/// Sends a cached response: its pre-encoded head with `Date` and `Connection` spliced in, and
/// its shared body, in one vectored write (one write for a small body, copied after the head).
fn write_prepared<T: Transport>(
    stream: &mut T,
    wbuf: &mut Vec<u8>,
    entry: &crate::cache::Entry,
    req: Option<&Request>,
    keep_alive: bool,
) -> io::Result<u64> {
    wbuf.clear();
    wbuf.extend_from_slice(crate::cache::HEAD_PREFIX);
    enc::write_date(wbuf);
    wbuf.extend_from_slice(entry.fields());
    if !keep_alive {
        wbuf.extend_from_slice(b"Connection: close\r\n");
    } else if req.is_some_and(|r| r.version() == Version::Http10) {
        wbuf.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    wbuf.extend_from_slice(b"\r\n");
    let head_len = wbuf.len() as u64;
    let body = entry.body();
    if req.is_some_and(|r| r.method() == Method::Head) {
        stream.write_all(wbuf)?;
        return Ok(head_len);
    }
    if body.len() <= COALESCE_BODY {
        wbuf.extend_from_slice(body);
        stream.write_all(wbuf)?;
    } else {
        stream.write_all_vectored2(wbuf, body)?;
    }
    Ok(head_len + body.len() as u64)
}

/// Writes the head of `resp` into `wbuf`; on an invalid handler header returns its name.
fn encode_head(
    wbuf: &mut Vec<u8>,
    resp: &Response,
    req: Option<&Request>,
    keep_alive: bool,
) -> Result<(), String> {
    wbuf.clear();
    enc::write_status_line(resp.status, wbuf);
    wbuf.extend_from_slice(b"Server: weft\r\n");
    enc::write_date(wbuf);
    for (name, value) in &resp.headers {
        if is_managed(name) {
            continue;
        }
        enc::write_header(name, value, wbuf).map_err(|_| name.to_string())?;
    }
    if !(100..200).contains(&resp.status) && resp.status != 204 && resp.status != 304 {
        enc::write_content_length(resp.body.len(), wbuf);
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

/// Half-closes and drains what the client still sends, briefly, so the kernel does not
/// answer unread data with a reset that could destroy the response in flight.
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

fn version_str(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
    }
}
