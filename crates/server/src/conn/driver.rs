//! The blocking keep-alive loop ([`serve_inner`]) and its request-head read ([`read_head`]):
//! header-read and keep-alive timeouts, the minimum rate, 408 and 431, idle marking for
//! graceful shutdown, and the lingering close.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use weft_http::{BodyFraming, Parser};

use super::gather::{Gather, GATHER_RESPONSES};
use crate::app::App;
use crate::body::ReadBuf;
use crate::net::Transport;
use crate::Request;

use super::handle::{handle, log_access, refill_request};
use super::head::{head_late, head_step, idle_timeout, mark_busy, mark_idle, HeadDue, HeadStep};
use super::prelude::{refuse, Prelude, Protocol, Reason, Step};
use super::respond::{write_encoded, write_response};
use super::timing::{Stamped, Times};
use super::{encode_append, ConnInfo, OnIdle, Served, Start, READ_BUF};

/// How a head read ended.
enum HeadRead {
    /// The head is `len` bytes; its first byte arrived at `started` (when timed).
    Complete {
        len: usize,
        started: Option<Instant>,
    },
    /// Nothing buffered and nothing to read yet between requests (only with [`OnIdle::Return`]).
    Idle,
    /// Clean end: peer closed, idle timeout, shutdown.
    Closed,
    /// Answer this status, then close.
    Fail(u16, &'static str),
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
    /// The request being served, refilled in place for the next ([`refill_request`]).
    req: Request,
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
            req: Request::blank(),
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
    if s.out.capacity() > 2 * super::gather::GATHER_BYTES {
        s.out = Vec::new();
    }
    s.req.release(crate::body::SPARE_HEAD_MAX);
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < SCRATCH_POOL {
            p.push(s);
        }
    });
}

pub(super) fn serve_inner<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    mut start: Start,
    on_idle: OnIdle,
) -> io::Result<Served> {
    let limits = app.cfg.limits.http();
    loop {
        let mut scratch = take_scratch(&limits);
        let mut gather = Gather::new(stream, std::mem::take(&mut scratch.out));
        let mut result = serve_with(
            &mut gather,
            app,
            info,
            start,
            on_idle,
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
        if let (Ok(Served::Idle), OnIdle::Return { linger }) = (&result, on_idle) {
            if !linger.is_zero() && stream.linger(linger) {
                start = Start::Resumed;
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
    mut start: Start,
    on_idle: OnIdle,
    limits: &weft_http::Limits,
    scratch: &mut Scratch,
) -> io::Result<Served> {
    let cfg = &app.cfg;
    let Scratch {
        parser,
        rbuf,
        wbuf,
        req,
        ..
    } = scratch;
    // What an empty read buffer means: until a request is served in this turn, one is
    // awaited (the turn began because one is coming); after that, the connection is idle.
    let mut when_empty = OnIdle::Wait;
    // Responses gathered so far into the write in progress.
    let mut batch: u32 = 0;
    if let Some(parked) = info.h2.take() {
        // An idle HTTP/2 connection whose client sent again.
        return super::h2::resume(stream, parked, app, info, on_idle);
    }
    if start == Start::Fresh {
        stream.set_write_timeout(Some(cfg.timeouts.send))?;
        stream.set_send_rate(crate::minrate::send_rate(&cfg.timeouts));
        let mut prelude = Prelude::resume(info, &cfg.timeouts, Instant::now());
        match open(stream, rbuf, wbuf, &mut prelude, app, info)? {
            Opened::Open(Protocol::Http1) => {}
            Opened::Open(Protocol::Http2) => {
                // The connection is HTTP/2 to its end: never handed back idle (its state is
                // more than a socket), so the caller closes it when this returns.
                let early = rbuf.data().to_vec();
                rbuf.consume(rbuf.len());
                return super::h2::serve(stream, &early, app, info, on_idle);
            }
            Opened::Handshake { .. } => {
                // TLS listeners run their handshake before this driver (`start_tls`).
                log::error!(
                    "{}: a TLS handshake reached the HTTP driver; closed",
                    info.peer
                );
                return Ok(Served::Closed);
            }
            Opened::Closed => return Ok(Served::Closed),
        }
    }
    let timed = cfg.timing.on();
    // Responses gathered into the write in progress are counted when it goes out.
    let mut tally = crate::metrics::Tally::new(&info.listener);
    loop {
        let mut times = Times::default();
        let read = read_head(stream, rbuf, parser, app, info, start, when_empty);
        let head_len = match read {
            Ok(HeadRead::Complete { len, started }) => {
                times.start = started;
                len
            }
            Ok(HeadRead::Idle) => return Ok(Served::Idle),
            Ok(HeadRead::Closed) => return Ok(Served::Closed),
            Ok(HeadRead::Fail(status, reason)) => {
                answer(stream, rbuf, wbuf, app, info, status, &Reason::Rule(reason));
                return Ok(Served::Closed);
            }
            Err(e) => return Err(e),
        };
        if timed {
            times.head = Some(Instant::now());
            times.first = start == Start::Fresh;
            times.record_head(info);
        }
        start = Start::Resumed;
        when_empty = on_idle;
        refill_request(req, parser, rbuf, head_len, info, &cfg.real_ip_from);
        let req = &*req;
        let mut keep_alive = false;
        let resp = match super::redirect(app, info, req, &mut keep_alive) {
            Some(redirect) => redirect,
            None => handle(stream, rbuf, app, req, limits, &mut times, &mut keep_alive),
        };
        // `keepalive_requests` and `keepalive_time`: this response may be the last.
        keep_alive = keep_alive && info.life.another(cfg);
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
            extra.extend_from_slice(super::extra_headers(app, info));
            let mut out = Stamped {
                inner: &mut *stream,
                first: None,
            };
            let r = write_response(&mut out, wbuf, resp, Some(req), keep_alive, &extra);
            times.record_out(info, out.first);
            r
        } else {
            let extra = super::extra_headers(app, info);
            // Encoded straight after the responses gathered before it.
            stream.write_encoding(|out| encode_append(out, resp, Some(req), keep_alive, extra))
        };
        stream.set_gathering(false);
        let body_len = match result {
            Ok((bytes, body_len)) => {
                tally.add(status, bytes);
                if !gather {
                    tally.flush();
                }
                body_len
            }
            Err(e) => {
                // Cut short (the client went away, or stopped reading past the send
                // timeout): logged with the body bytes that went out, as nginx logs it.
                let sent = crate::net::body_bytes_before(&e);
                super::log_cut(app, info.peer, Some(req), status, sent, &e);
                return Ok(Served::Closed);
            }
        };
        log_access(app, req, status, body_len);
        if !keep_alive {
            // A tunnel (the only 101 that goes out) has ended both ways already: nothing of
            // HTTP's is left to protect with a lingering close.
            if status == 101 || closes_cleanly(req, rbuf) {
                let _ = stream.flush();
            } else {
                linger(stream, rbuf, app.cfg.timeouts.lingering_time);
            }
            return Ok(Served::Closed);
        }
        rbuf.shrink_if_idle(READ_BUF);
    }
}

fn read_head<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    parser: &mut Parser,
    app: &App,
    info: &ConnInfo,
    start: Start,
    on_idle: OnIdle,
) -> io::Result<HeadRead> {
    let cfg = &app.cfg;
    let max = cfg.limits.max_head_bytes + 1;
    let mut due = HeadDue::default();
    let timed = cfg.timing.on();
    // Pipelined, the request was already here.
    let mut started = (timed && !rbuf.is_empty()).then(Instant::now);
    parser.reset();
    loop {
        let step = head_step(parser, rbuf.data(), &mut due, &cfg.timeouts, Instant::now);
        let timeout = match step {
            HeadStep::Complete { head_len } => {
                mark_busy(info);
                return Ok(HeadRead::Complete {
                    len: head_len,
                    started,
                });
            }
            HeadStep::Fail(status, reason) => return Ok(HeadRead::Fail(status, reason)),
            HeadStep::Partial { deadline, .. } => {
                deadline.saturating_duration_since(Instant::now())
            }
            HeadStep::Empty => idle_timeout(start, &cfg.timeouts),
        };
        let empty = step == HeadStep::Empty;
        // What a 408 for this head says: which limit the client ran into.
        let late = match step {
            HeadStep::Partial { late, .. } => late,
            _ => head_late(false),
        };
        // A partial head's deadline passed since the step (or a zero idle timeout): a read
        // timeout of zero would block for ever.
        if timeout.is_zero() {
            return Ok(HeadRead::Fail(408, late));
        }
        if empty {
            if !mark_idle(info, start) {
                return Ok(HeadRead::Closed);
            }
            if let OnIdle::Return { .. } = on_idle {
                return Ok(HeadRead::Idle);
            }
        }
        stream.set_read_timeout(Some(timeout))?;
        match rbuf.fill(stream, max) {
            Ok(0) if !empty => {
                Reason::HeadCut.log(info.peer, None);
                return Ok(HeadRead::Closed);
            }
            Ok(0) => return Ok(HeadRead::Closed),
            Ok(_) => {
                if empty {
                    if timed {
                        started = Some(Instant::now());
                    }
                    mark_busy(info);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::net::timed_out(&e) => {
                return Ok(if empty {
                    HeadRead::Closed
                } else {
                    HeadRead::Fail(408, late)
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

/// How a connection's prelude ended on a blocking transport ([`open`]).
pub(crate) enum Opened {
    /// Requests follow in this protocol (the first bytes of one may be buffered).
    Open(Protocol),
    /// The buffer begins a ClientHello: the caller runs the TLS handshake with it by `until`.
    Handshake { until: Instant },
    /// The connection is to be closed (answered and logged where that was due).
    Closed,
}

/// Drives a connection's prelude (PROXY header, the first bytes of TLS, the count against
/// `limits.conn_per_ip`) over a blocking transport, reading into `rbuf` within each stage's
/// deadline. A refusal is answered from `wbuf` and logged here.
pub(crate) fn open<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    wbuf: &mut Vec<u8>,
    prelude: &mut Prelude,
    app: &App,
    info: &ConnInfo,
) -> io::Result<Opened> {
    loop {
        let now = Instant::now();
        match prelude.step(rbuf.data(), &app.cfg, now) {
            Step::Read { max, until } => {
                // Zero: the deadline passed since the step; the next step says so.
                let left = until
                    .saturating_duration_since(now)
                    .max(Duration::from_millis(1));
                stream.set_read_timeout(Some(left))?;
                match rbuf.fill(stream, max) {
                    Ok(0) => {
                        if let Some(why) = prelude.ended(rbuf.len()) {
                            why.log(info.peer, None);
                        }
                        return Ok(Opened::Closed);
                    }
                    Ok(_) => {}
                    // Timed out: the next step says what the lateness means.
                    Err(e)
                        if e.kind() == io::ErrorKind::Interrupted || crate::net::timed_out(&e) => {}
                    Err(e) => {
                        log::debug!("{}: before its first request: {e}", info.peer);
                        return Ok(Opened::Closed);
                    }
                }
            }
            Step::Proxied { len, client } => {
                rbuf.consume(len);
                let _ = info.proxied.set(client);
            }
            Step::Admit => {
                if let Err(why) = prelude.admit(app, info) {
                    answer(stream, rbuf, wbuf, app, info, 503, &why);
                    return Ok(Opened::Closed);
                }
            }
            Step::Handshake { until } => return Ok(Opened::Handshake { until }),
            Step::Open(protocol) => return Ok(Opened::Open(protocol)),
            Step::Answer(status, why) => {
                answer(stream, rbuf, wbuf, app, info, status, &why);
                return Ok(Opened::Closed);
            }
            Step::Close(why) => {
                why.log(info.peer, None);
                return Ok(Opened::Closed);
            }
        }
    }
}

/// Answers `status` to a request that could not be read (or a connection refused before one),
/// logged once as every model logs it, then closes with a lingering close.
#[cold]
fn answer<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    wbuf: &mut Vec<u8>,
    app: &App,
    info: &ConnInfo,
    status: u16,
    why: &Reason,
) {
    let received = Some(rbuf.data());
    let enc = refuse(
        app,
        info.peer,
        info.client().ip(),
        received,
        status,
        why,
        wbuf,
    );
    let bytes = write_encoded(stream, wbuf, enc).map_or(0, |s| s.0);
    info.listener.response(status, bytes);
    linger(stream, rbuf, app.cfg.timeouts.lingering_time);
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
fn linger<T: Transport>(stream: &mut T, rbuf: &mut ReadBuf, time: Duration) {
    rbuf.consume(rbuf.len());
    drain_close(stream, time);
}

/// The lingering close itself: flushes, half-closes, and reads and drops what the client
/// still sends for up to `time` (or until its end). HTTP/2 closes so after a GOAWAY for an
/// error, whose client may be in the middle of a flood.
#[inline(never)]
pub(super) fn drain_close<T: Transport>(stream: &mut T, time: Duration) {
    let _ = stream.flush();
    if stream.shutdown_write().is_err() {
        return;
    }
    let end = Instant::now() + time;
    let mut scratch = [0u8; 4096];
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
