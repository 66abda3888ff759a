//! One request between its head and its response: the request taken out of the read
//! buffer, the handler run with its body settled (limits, `100 Continue`, drain), whether the
//! connection stays open, and the access-log line. The pipeline's stages call the same.

use std::time::Instant;

use weft_http::response::status_has_no_body;
use weft_http::{BodyFraming, Expect, Method, Parser, Version};

use crate::app::App;
use crate::body::{BodyLimits, ReadBuf, RequestBody};
use crate::log::{Entry, RequestLine};
use crate::net::Transport;
use crate::response::{Body, Response};
use crate::Request;

use super::timing::Times;
use super::ConnInfo;

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
    let bytes = rbuf.split_head(head_len);
    let mut peer = info.client();
    if !real_ip_from.is_empty() {
        peer = real_ip_of(&head, &bytes, peer, real_ip_from);
    }
    Request::with_tls(bytes, head, peer, info.local, info.tls.get().cloned())
}

/// As [`take_request`], into `req` (a finished request of the same connection's scratch, or
/// [`Request::blank`]), reusing its storage.
// Always inlined into the loop, its one caller: out of line it cost a call and a frame
// (29 instructions a request) after an unrelated change moved the compiler's heuristics.
#[inline(always)]
pub(crate) fn refill_request(
    req: &mut Request,
    parser: &mut Parser,
    rbuf: &mut ReadBuf,
    head_len: usize,
    info: &ConnInfo,
    real_ip_from: &[crate::config::Cidr],
) {
    let bytes = &rbuf.data()[..head_len];
    let mut peer = info.client();
    if !real_ip_from.is_empty() {
        peer = real_ip_of(parser.head(), bytes, peer, real_ip_from);
    }
    req.refill(parser, bytes, peer, info.local, info.tls.get());
    rbuf.consume(head_len);
}

/// The client `head` (parsed from `bytes`) stands for when it came from `peer`: its
/// `X-Forwarded-For` if `peer` is a trusted proxy (`real_ip_from`).
pub(super) fn real_ip_of(
    head: &weft_http::RequestHead,
    bytes: &[u8],
    peer: std::net::SocketAddr,
    real_ip_from: &[crate::config::Cidr],
) -> std::net::SocketAddr {
    let xff = head
        .headers()
        .iter()
        .filter(|h| h.name.get(bytes).eq_ignore_ascii_case(b"x-forwarded-for"))
        .map(|h| h.value.get(bytes));
    crate::realip::real_ip(peer, real_ip_from, xff)
}

/// Gives the storage of a finished request back to the parser and read buffer it came from.
// By reference: the request is not moved (moving it copied all 216 bytes), only its two
// buffers are taken out.
#[inline]
pub(crate) fn recycle_request(parser: &mut Parser, rbuf: &mut ReadBuf, req: &mut Request) {
    let (fields, bytes) = req.take_storage();
    parser.recycle_fields(fields);
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
/// and decides whether the connection stays open after the response (`keep_alive`).
// The flag goes out through a reference rather than in a tuple with the response: building
// the tuple copied the response twice more per request.
pub(crate) fn handle<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    req: &Request,
    limits: &weft_http::Limits,
    times: &mut Times,
    keep_alive: &mut bool,
) -> Response {
    let mut body_ok = false;
    let resp = respond(stream, rbuf, app, req, limits, times, &mut body_ok);
    // A stream of unknown length ends an HTTP/1.0 response by closing the connection.
    let close_delimited = req.version() == Version::Http10
        && matches!(&resp.body, Body::Stream(s) if s.known_len().is_none());
    *keep_alive =
        body_ok && req.keep_alive() && !resp.close && !close_delimited && !app.shutdown.closing();
    resp
}

/// Writes the access-log line of a response that went out (`body_len`: the body bytes sent).
#[inline]
pub(crate) fn log_access(app: &App, req: &Request, status: u16, body_len: u64) {
    // Meant to be inlined: with the access log off (the default) this costs no call.
    if let Some(log) = &app.access_log {
        write_access(app, log, req, status, body_len);
    }
}

/// A response cut short (the client went away, stopped reading past the send timeout, or the
/// body's source failed): the error-log line saying why, and the access-log line with the body
/// bytes that went out (`sent`), as nginx logs them. Every model's writer calls it.
pub(crate) fn log_cut(
    app: &App,
    peer: std::net::SocketAddr,
    req: Option<&Request>,
    status: u16,
    sent: u64,
    why: &dyn std::fmt::Display,
) {
    log::info!("{peer}: {status} response cut short: {why}");
    if let Some(req) = req {
        log_access(app, req, status, sent);
    }
}

fn write_access(app: &App, log: &crate::log::AccessLog, req: &Request, status: u16, body_len: u64) {
    let health = &app.cfg.health;
    if !health.log && health.is(req.path()) {
        return;
    }
    let head_only = req.method() == Method::Head;
    log.write(&Entry {
        peer: req.peer_addr().ip(),
        request: RequestLine::Read {
            method: req.method_str(),
            target: req.target(),
            version: version_str(req.version()),
        },
        status,
        body_bytes: if head_only || status_has_no_body(status) {
            0
        } else {
            body_len
        },
        referer: req.header("Referer"),
        user_agent: req.header("User-Agent"),
        req: Some(req),
    });
}

/// Writes the access-log line of a head refused before it was read whole (bad, oversized, or
/// too slow: 400, 414, 431, 505, 408), as nginx logs those: `received` is what had arrived
/// (its first line is logged), `client` the connection's client.
pub(crate) fn log_refused(app: &App, client: std::net::IpAddr, received: &[u8], status: u16) {
    if let Some(log) = &app.access_log {
        log.write(&Entry {
            peer: client,
            request: RequestLine::Raw(received),
            status,
            body_bytes: if status_has_no_body(status) {
                0
            } else {
                failure(status).body.len()
            },
            referer: None,
            user_agent: None,
            req: None,
        });
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
    times: &mut Times,
    in_sync: &mut bool,
) -> Response {
    *in_sync = false;
    let cfg = &app.cfg;
    let head = req.head();
    if head.expect() == Expect::Unsupported {
        *in_sync = head.framing() == BodyFraming::None;
        return Response::error(417);
    }
    if let BodyFraming::Length(n) = head.framing() {
        if n > cfg.limits.max_body {
            log::info!(
                "{}: 413 Content-Length {n} over limit {}",
                req.peer_addr(),
                cfg.limits.max_body
            );
            return Response::error(413);
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
            // A request without a body never reads one: no clock read for it.
            min_rate: (head.framing() != BodyFraming::None)
                .then(|| crate::minrate::MinRate::body(&cfg.timeouts, Instant::now())),
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
                Response::error(status)
            }
            None => {
                // Closed or failed before its end: a 400 for the log (and, on a half-closed
                // connection, for the client), as nginx's "client prematurely closed".
                match err {
                    crate::body::BodyError::Closed => log::info!(
                        "{}: 400 request body cut short: the client closed its side",
                        req.peer_addr()
                    ),
                    other => log::info!("{}: 400 request body: {other:?}", req.peer_addr()),
                }
                let mut r = Response::error(400);
                r.close = true;
                r
            }
        };
    }
    if body.is_finished() {
        *in_sync = true;
        return resp;
    }
    // The handler answered without reading the whole body. A client still waiting for
    // 100 Continue may never send it: close. Otherwise read and drop a bounded remainder.
    if body.continue_pending() {
        return resp;
    }
    let drained = body.drain(app.cfg.limits.max_discard_body);
    // A body the handler left unread can still be malformed or over the limit; then the
    // request as a whole is invalid and gets the body's status, not the handler's success
    // (nginx reads and discards such a body before it answers, to the same effect).
    if let Some(status @ (400 | 413)) = body.error().and_then(|e| e.status()) {
        log::info!("{}: {status} unread request body", req.peer_addr());
        return Response::error(status);
    }
    *in_sync = drained;
    resp
}

fn version_str(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
        Version::Http2 => "HTTP/2.0",
    }
}
