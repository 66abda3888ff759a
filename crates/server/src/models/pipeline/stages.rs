//! The four stages' work. Each takes one connection, does its step, and says where the
//! connection goes next ([`Next`]); the worker loop in `mod.rs` measures the step and hands
//! the connection on. HTTP is `conn`'s: receive parses with weft-http's parser, process runs
//! `conn::handle` (routing, handlers, body framing and limits) and `conn::encode_response`,
//! send writes what the encoding left.

use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::poller::Wait;
use super::{Conn, Next, Out, Phase, Pipeline};
use crate::conn::{self, ConnInfo, Start, Tail};
use crate::metrics::OpenGuard;
use crate::models::AcceptGate;
use crate::net::Transport;
use weft_sys::{poll, socket};

/// Accept: takes one connection from the listener, or waits until one comes or `stop` (the
/// shutdown interrupt's eventfd) turns readable, with no timeout. `None`: no connection this
/// time (the caller looks at its permit and at shutdown again).
pub(crate) fn accept(
    p: &Pipeline,
    listener: &std::net::TcpListener,
    gate: &mut AcceptGate,
    stop: std::os::fd::RawFd,
) -> Option<Box<Conn>> {
    if gate.at_capacity(&p.lm, || crate::models::backlog_waits(listener.as_raw_fd())) {
        std::thread::sleep(crate::models::ACCEPT_BACKOFF);
        return None;
    }
    match listener.accept() {
        Ok((stream, peer)) => {
            // Another accept thread may have filled the last slot meanwhile: hold the new
            // connection unserved (as if still in the backlog) until one frees.
            while gate.at_capacity(&p.lm, || true) && !p.app.shutdown.is_set() {
                std::thread::sleep(crate::models::ACCEPT_BACKOFF);
            }
            let accept = p.stage(super::controller::Stage::Accept);
            let t0 = accept.begin();
            let conn = new_conn(p, stream, peer);
            accept.end(t0);
            conn
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            let _ = poll::poll_readable_any(&[listener.as_raw_fd(), stop], super::SLEEP);
            None
        }
        Err(e) => {
            if gate.failed(&p.lm, &e) {
                std::thread::sleep(crate::models::ACCEPT_BACKOFF);
            }
            None
        }
    }
}

fn new_conn(p: &Pipeline, stream: TcpStream, peer: std::net::SocketAddr) -> Option<Box<Conn>> {
    let app = p.live.current();
    let accepted = app.cfg.timing.on().then(Instant::now);
    if let Err(e) = stream.set_nonblocking(true) {
        log::debug!("{peer}: cannot make the socket non-blocking: {e}");
        return None;
    }
    let local = crate::models::local_addr(&p.lm, || stream.local_addr());
    // A TLS listener's connection starts its session here; the handshake runs in receive.
    let tls = if p.lm.tls() {
        let Some(t) = &app.tls else {
            log::error!("{peer}: TLS listener without certificates; closed");
            return None;
        };
        match crate::tls::Session::of(t, &p.lm) {
            Ok(c) => Some(Box::new(super::tls::Session::new(c))),
            Err(e) => {
                log::error!("{peer}: TLS session: {e}");
                return None;
            }
        }
    } else {
        None
    };
    let prelude = conn::Prelude::new(&p.lm, &app.cfg.timeouts, Instant::now());
    let send_rate = crate::minrate::send_rate(&app.cfg.timeouts);
    let guard = OpenGuard::new(p.lm.clone());
    let key = crate::models::listener_key(&p.lm);
    let registration = Some(p.app.shutdown.register_on(stream.as_raw_fd(), key));
    Some(Box::new(Conn {
        info: ConnInfo {
            peer,
            local,
            listener: p.lm.clone(),
            registration,
            accepted,
            proxied: Default::default(),
            client_slot: Default::default(),
            h2: Default::default(),
            tls: Default::default(),
            life: crate::conn::Life::now(),
        },
        stream,
        _guard: guard,
        parser: weft_http::Parser::new(app.cfg.limits.http()),
        app,
        rbuf: crate::body::ReadBuf::new(conn::READ_BUF),
        wbuf: Vec::with_capacity(512),
        start: Start::Fresh,
        prelude,
        head_due: conn::HeadDue::default(),
        late: None,
        phase: Phase::Head,
        times: conn::Times::default(),
        reg: None,
        maybe_unread: false,
        tls,
        send_rate,
        send_waited: Duration::ZERO,
        stalled: None,
    }))
}

/// Receive: reads what the socket has and parses the request head. A complete head goes to
/// process; an incomplete one waits in the poller (with the header-read deadline from its
/// first byte); a bad one gets its error status.
pub(crate) fn receive(mut conn: Box<Conn>) -> Next {
    match conn.phase {
        Phase::Body { .. } => return receive_body(conn),
        Phase::Ready(_) => return Next::Process(conn),
        Phase::Head | Phase::Send(_) | Phase::Linger(_) => {}
    }
    if !conn.prelude.is_open() {
        conn = match open(conn) {
            Ok(conn) => conn,
            Err(next) => return next,
        };
    }
    let app = conn.app.clone();
    let cfg = &app.cfg;
    let fresh = conn.start == Start::Fresh;
    let max = cfg.limits.max_head_bytes + 1;
    let timed = cfg.timing.on();
    if timed && conn.times.start.is_none() && !conn.rbuf.is_empty() {
        // Pipelined: the request was already here; its turn comes now.
        conn.times.start = Some(Instant::now());
    }
    loop {
        {
            // The same rules as the blocking driver's (`conn::head_step`).
            let c = &mut *conn;
            let step = conn::head_step(
                &mut c.parser,
                c.rbuf.data(),
                &mut c.head_due,
                &cfg.timeouts,
                Instant::now,
            );
            match step {
                conn::HeadStep::Complete { head_len: n } => {
                    conn::mark_busy(&c.info);
                    if timed {
                        c.times.head = Some(Instant::now());
                        c.times.first = fresh;
                        c.times.record_head(&c.info);
                    }
                    let req = conn::take_request(
                        &mut c.parser,
                        &mut c.rbuf,
                        n,
                        &c.info,
                        &cfg.real_ip_from,
                    );
                    c.head_due = conn::HeadDue::default();
                    c.late = None;
                    c.start = Start::Resumed;
                    let body = c.rbuf.data();
                    if let Some(due) = conn::BodyDue::begin(req.head(), body, cfg, Instant::now()) {
                        c.phase = Phase::Body { req, due };
                        return receive_body(conn);
                    }
                    c.phase = Phase::Ready(req);
                    return Next::Process(conn);
                }
                conn::HeadStep::Fail(status, reason) => {
                    return fail(conn, status, &conn::Reason::Rule(reason))
                }
                conn::HeadStep::Partial { .. } | conn::HeadStep::Empty => {}
            }
        }
        let c = &mut *conn;
        let was_empty = c.rbuf.is_empty();
        let filled = match c.tls.as_deref_mut() {
            Some(t) => c.rbuf.fill(&mut t.reader(&c.stream), max),
            None => c.rbuf.fill(&mut c.stream, max),
        };
        match filled {
            Ok(0) => {
                if let Some(why) = c.prelude.ended(c.rbuf.len()) {
                    why.log(c.info.peer, None);
                }
                return Next::Close(conn);
            }
            Ok(_) => {
                c.maybe_unread = c.rbuf.is_full(max);
                if timed && was_empty {
                    c.times.start = Some(Instant::now());
                }
                conn::mark_busy(&c.info);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.maybe_unread = false;
                return wait_for_request(conn);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
                return fail(conn, 431, &conn::Reason::Rule("request head too large"))
            }
            Err(e) => {
                log::debug!("{}: read failed: {e}", conn.info.peer);
                return Next::Close(conn);
            }
        }
    }
}

/// Drives a new connection's prelude (`conn::Prelude`: PROXY header, TLS handshake, the
/// count against `limits.conn_per_ip`) as far as the bytes that have come allow: the
/// connection back once requests may be read, else where it goes (parked until its next
/// bytes or deadline, answered, closed).
fn open(mut conn: Box<Conn>) -> Result<Box<Conn>, Next> {
    let app = conn.app.clone();
    loop {
        let now = Instant::now();
        let c = &mut *conn;
        match c.prelude.step(c.rbuf.data(), &app.cfg, now) {
            conn::Step::Open(conn::Protocol::Http1) => return Ok(conn),
            conn::Step::Open(conn::Protocol::Http2) => return Err(Next::Http2(conn)),
            conn::Step::Read { max, until } => match c.rbuf.fill(&mut &c.stream, max) {
                Ok(0) => {
                    if let Some(why) = c.prelude.ended(c.rbuf.len()) {
                        why.log(c.info.peer, None);
                    }
                    return Err(Next::Close(conn));
                }
                Ok(_) => {
                    c.maybe_unread = c.rbuf.is_full(max);
                    conn::mark_busy(&c.info);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.maybe_unread = false;
                    return Err(Next::Park(conn, Wait::Request, until));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("{}: before its first request: {e}", c.info.peer);
                    return Err(Next::Close(conn));
                }
            },
            conn::Step::Proxied { len, client } => {
                c.rbuf.consume(len);
                let _ = c.info.proxied.set(client);
            }
            conn::Step::Admit => {
                if let Err(why) = c.prelude.admit(&app, &c.info) {
                    return Err(fail(conn, 503, &why));
                }
            }
            conn::Step::Handshake { until } => match super::tls::handshake(c, until) {
                super::tls::Step::Done => {}
                super::tls::Step::More => {}
                super::tls::Step::Closed => return Err(Next::Close(conn)),
            },
            conn::Step::Answer(status, why) => {
                // Plain HTTP on a TLS listener is answered in plain text (as nginx); an answer
                // after a handshake goes through the session.
                if why == conn::Reason::PlainHttp {
                    conn.tls = None;
                }
                return Err(fail(conn, status, &why));
            }
            conn::Step::Close(why) => {
                why.log(c.info.peer, None);
                return Err(Next::Close(conn));
            }
        }
    }
}

/// Parks a connection until its next request bytes arrive: a partial head until its
/// header-read deadline, an idle connection until the keep-alive timeout (the header-read
/// timeout before its first request), unless shutdown has begun.
fn wait_for_request(mut conn: Box<Conn>) -> Next {
    if let Some((d, slow)) = conn.head_due.due(conn.rbuf.len()) {
        conn.late = slow.then(|| conn::head_late(true));
        return Next::Park(conn, Wait::Request, d);
    }
    if !conn::mark_idle(&conn.info, conn.start) {
        return Next::Close(conn);
    }
    let idle = conn::idle_timeout(conn.start, &conn.app.cfg.timeouts);
    Next::Park(conn, Wait::Request, Instant::now() + idle)
}

/// Reads ahead the body of the request in [`Phase::Body`] while it is at most
/// `limits.client_body_buffer` bytes (nginx reads a body into its `client_body_buffer_size`
/// the same way): a slow body waits in the poller, not in a process thread blocked on it, and
/// goes to process only once whole. Past the body-read timeout since its last bytes, or below
/// `timeouts.body_min_rate`, it gets 408.
fn receive_body(mut conn: Box<Conn>) -> Next {
    let app = conn.app.clone();
    let cfg = &app.cfg;
    let bound = cfg.limits.client_body_buffer;
    // Room for the whole body and the start of a pipelined request after it.
    let max = bound + conn::READ_BUF;
    loop {
        let c = &mut *conn;
        let Phase::Body { req, due } = &c.phase else {
            return Next::Process(conn);
        };
        let (until, why) = match due.step(req.head(), c.rbuf.data(), cfg, Instant::now()) {
            conn::BodyStep::Ready => {
                c.phase = match std::mem::replace(&mut c.phase, Phase::Head) {
                    Phase::Body { req, .. } => Phase::Ready(req),
                    other => other,
                };
                c.late = None;
                // The wait is the body phase's, as if the handler had read it (`[timing]`).
                if let Some(head) = c.times.head {
                    c.times.add_body_wait(head.elapsed());
                }
                return Next::Process(conn);
            }
            conn::BodyStep::Late(why) => return fail(conn, 408, &conn::Reason::Rule(why)),
            conn::BodyStep::Read { until, late } => (until, late),
        };
        match c.rbuf.fill(&mut c.stream, max) {
            Ok(0) => {
                // The client closed its side before the end of the body: process serves the
                // request as the other models do (a handler that reads the body meets its
                // end and answers 400; one that does not answers as usual).
                c.phase = match std::mem::replace(&mut c.phase, Phase::Head) {
                    Phase::Body { req, .. } => Phase::Ready(req),
                    other => other,
                };
                c.late = None;
                return Next::Process(conn);
            }
            Ok(_) => {
                c.maybe_unread = c.rbuf.is_full(max);
                // nginx's client_body_timeout: between two reads.
                if let Phase::Body { due, .. } = &mut c.phase {
                    due.progressed(&cfg.timeouts, Instant::now());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.maybe_unread = false;
                c.late = Some(why);
                return Next::Park(conn, Wait::Request, until);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::debug!("{}: read failed: {e}", c.info.peer);
                return Next::Close(conn);
            }
        }
    }
}

/// Answers `status` to a request that could not be read (its head, or the body read ahead),
/// or to a connection refused before one, then closes. A request whose head was read is
/// logged as such once the answer is sent, as the other models log it; a head that was not
/// is logged with its first line now.
pub(crate) fn fail(mut conn: Box<Conn>, status: u16, why: &conn::Reason) -> Next {
    let req = match std::mem::replace(&mut conn.phase, Phase::Head) {
        Phase::Body { req, .. } | Phase::Ready(req) => Some(req),
        _ => None,
    };
    let c = &mut *conn;
    let received = req.is_none().then(|| c.rbuf.data());
    let (peer, client) = (c.info.peer, c.info.client().ip());
    let enc = conn::refuse(&c.app, peer, client, received, status, why, &mut c.wbuf);
    conn.phase = Phase::Send(Out {
        tail: enc.tail,
        total: enc.bytes,
        sent: 0,
        keep_alive: false,
        status,
        body_len: enc.body_len,
        first_out: None,
        req,
    });
    Next::Send(conn)
}

/// Process: runs the handler (which may read the request body, blocking this thread up to the
/// body-read timeout), settles the body and encodes the response for send. A streamed body (a
/// CGI script's output) is written here, blocking up to the send timeout per write: its
/// reader blocks anyway, and send's threads must never wait on a handler's pipe.
pub(crate) fn process(mut conn: Box<Conn>) -> Next {
    let req = match std::mem::replace(&mut conn.phase, Phase::Head) {
        Phase::Ready(req) | Phase::Body { req, .. } => req,
        _ => return Next::Close(conn),
    };
    let app = conn.app.clone();
    let c = &mut *conn;
    let mut poll = PollStream {
        stream: &c.stream,
        read_timeout: None,
        write_timeout: Some(app.cfg.timeouts.send),
    };
    let mut parts = Parts {
        rbuf: &mut c.rbuf,
        wbuf: &mut c.wbuf,
        times: &mut c.times,
        info: &c.info,
    };
    // Over TLS, bodies are read and streamed responses written through the session.
    let out = match c.tls.as_deref_mut() {
        Some(t) => respond(
            &mut crate::tls::TlsStream::new(&mut poll, &mut t.conn),
            &mut parts,
            &app,
            req,
        ),
        None => respond(&mut poll, &mut parts, &app, req),
    };
    match out {
        Some(out) if matches!(out.tail, Tail::Tunnel(_)) => {
            conn.phase = Phase::Send(out);
            Next::Tunnel(conn)
        }
        Some(out) => {
            conn.phase = Phase::Send(out);
            Next::Send(conn)
        }
        None => Next::Close(conn),
    }
}

/// A `101`'s tunnel, out of the stages to a thread of its own (the stages' threads are
/// shared by every connection; a tunnel may last hours): the head goes out, then the relay
/// runs until the tunnel ends, and the connection closes.
pub(crate) fn detach_tunnel(mut conn: Box<Conn>) {
    // Out of the poller: the relay waits on the socket itself.
    conn.reg = None;
    let spawned = std::thread::Builder::new()
        .name("weft-tunnel".into())
        .stack_size(TUNNEL_STACK)
        .spawn(move || run_tunnel(conn));
    if let Err(e) = spawned {
        log::error!("cannot start a thread for a tunnel: {e}");
    }
}

/// A tunnel thread's stack: the relay's frames and, over TLS, rustls' record work.
const TUNNEL_STACK: usize = 256 * 1024;

fn run_tunnel(mut conn: Box<Conn>) {
    let Phase::Send(mut out) = std::mem::replace(&mut conn.phase, Phase::Head) else {
        return;
    };
    let Tail::Tunnel(mut t) = std::mem::replace(&mut out.tail, Tail::None) else {
        return;
    };
    let app = conn.app.clone();
    let c = &mut *conn;
    let mut poll = PollStream {
        stream: &c.stream,
        read_timeout: None,
        write_timeout: Some(app.cfg.timeouts.send),
    };
    let head = c.wbuf.as_slice();
    let relayed = match c.tls.as_deref_mut() {
        Some(tls) => head_then_relay(
            &mut crate::tls::TlsStream::new(&mut poll, &mut tls.conn),
            head,
            &mut t,
        ),
        None => head_then_relay(&mut poll, head, &mut t),
    };
    match relayed {
        Ok(down) => {
            c.info
                .listener
                .response(out.status, head.len() as u64 + down);
            if let Some(req) = &out.req {
                conn::log_access(&app, req, out.status, down);
            }
        }
        Err(e) => conn::log_cut(&app, c.info.peer, out.req.as_ref(), out.status, 0, &e),
    }
}

/// Writes a `101` head, then relays the tunnel; the bytes that went to the client after it.
fn head_then_relay<T: Transport>(
    stream: &mut T,
    head: &[u8],
    t: &mut crate::tunnel::Tunnel,
) -> io::Result<u64> {
    stream.write_all(head)?;
    stream.flush()?;
    Ok(conn::relay_tunnel(stream, t).down)
}

/// The parts of a connection process works on beside its stream.
struct Parts<'a> {
    rbuf: &'a mut crate::body::ReadBuf,
    wbuf: &'a mut Vec<u8>,
    times: &'a mut conn::Times,
    info: &'a ConnInfo,
}

/// Process's work over `stream` (the connection's socket, or its TLS session): the handler,
/// the encoding, and a streamed body. `None`: the connection is to be closed.
fn respond<T: Transport>(
    stream: &mut T,
    c: &mut Parts<'_>,
    app: &crate::App,
    req: crate::Request,
) -> Option<Out> {
    let cfg = &app.cfg;
    let limits = cfg.limits.http();
    let mut keep_alive = false;
    let resp = match conn::redirect(app, c.info, &req, &mut keep_alive) {
        Some(redirect) => redirect,
        None => conn::handle(stream, c.rbuf, app, &req, &limits, c.times, &mut keep_alive),
    };
    // `keepalive_requests` and `keepalive_time`, as the blocking driver applies them.
    keep_alive = keep_alive && c.info.life.another(cfg);
    let status = resp.status;
    let mut extra = if cfg.timing.server_timing && c.times.head.is_some() {
        c.times.server_timing(c.info)
    } else {
        Vec::new()
    };
    extra.extend_from_slice(conn::extra_headers(app, c.info));
    let enc = conn::encode_response(c.wbuf, resp, Some(&req), keep_alive, &extra);
    let mut out = Out {
        total: enc.bytes,
        body_len: enc.body_len,
        tail: Tail::None,
        sent: 0,
        keep_alive,
        status,
        first_out: None,
        req: Some(req),
    };
    if matches!(enc.tail, Tail::Stream { .. }) {
        out.first_out = Some(Instant::now());
        match conn::write_encoded(stream, c.wbuf, enc) {
            Ok((bytes, body_len)) => {
                out.total = bytes;
                out.sent = bytes;
                out.body_len = body_len;
            }
            Err(e) => {
                let sent = crate::net::body_bytes_before(&e);
                conn::log_cut(app, c.info.peer, out.req.as_ref(), status, sent, &e);
                return None;
            }
        }
    } else {
        out.tail = enc.tail;
    }
    Some(out)
}

/// [`conn::log_cut`] for a response the send stage was writing: the body bytes sent are what
/// went out past its head.
pub(crate) fn log_cut(conn: &Conn, out: &Out, why: &dyn std::fmt::Display) {
    let sent = out.sent.saturating_sub(out.total - out.body_len);
    let req = out.req.as_ref();
    conn::log_cut(&conn.app, conn.info.peer, req, out.status, sent, why);
}

/// Send: writes as much of the response as the socket takes (vectored head and body, or head
/// and `sendfile`). A partial write waits in the poller for writability, with the send
/// timeout; a finished response is counted and logged, and the connection goes on to its next
/// request (receive at once if bytes of it are buffered) or to a lingering close.
pub(crate) fn send(p: &Pipeline, mut conn: Box<Conn>) -> Next {
    let Phase::Send(mut out) = std::mem::replace(&mut conn.phase, Phase::Head) else {
        return Next::Close(conn);
    };
    // Back from a wait for writability: it counts against the minimum send rate.
    if let Some((since, _)) = conn.stalled.take() {
        conn.send_waited += since.elapsed();
    }
    loop {
        let written = if conn.tls.is_some() {
            super::tls::write_some(&mut conn, &out)
        } else {
            write_some(&conn, &out)
        };
        match written {
            Ok(None) => break,
            Ok(Some(0)) => {
                log::debug!("{}: write returned 0", conn.info.peer);
                return Next::Close(conn);
            }
            Ok(Some(n)) => {
                out.sent += n as u64;
                if out.first_out.is_none() && conn.app.cfg.timing.on() {
                    out.first_out = Some(Instant::now());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                conn.phase = Phase::Send(out);
                let now = Instant::now();
                let send = Some(conn.app.cfg.timeouts.send);
                // (The send queue's length: a system call on this slow path only.)
                let left = conn.send_rate.as_ref().and_then(|r| {
                    let taken = weft_sys::socket::bytes_acked(conn.stream.as_raw_fd()).ok()?;
                    Some(r.left(taken, conn.send_waited))
                });
                let (wait, by_rate) = crate::minrate::SendRate::bound(left, send);
                conn.stalled = Some((now, by_rate));
                let deadline = now + wait.unwrap_or(conn.app.cfg.timeouts.send);
                return Next::Park(conn, Wait::Writable, deadline);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log_cut(&conn, &out, &e);
                return Next::Close(conn);
            }
        }
    }
    p.lm.response(out.status, out.total);
    if conn.times.head.is_some() {
        conn.times.record_out(&conn.info, out.first_out);
    }
    conn.times = conn::Times::default();
    if let Some(mut req) = out.req {
        conn::log_access(&conn.app, &req, out.status, out.body_len);
        conn::recycle_request(&mut conn.parser, &mut conn.rbuf, &mut req);
    }
    if !out.keep_alive {
        return linger(conn);
    }
    conn.rbuf.shrink_if_idle(conn::READ_BUF);
    if conn.rbuf.is_empty() && !super::tls::pending(&mut conn) {
        super::tls::trim(&mut conn);
        wait_for_request(conn)
    } else {
        Next::Reparse(conn)
    }
}

/// Writes the next piece of `out`: `Ok(None)` once everything is out.
fn write_some(conn: &Conn, out: &Out) -> io::Result<Option<usize>> {
    let head = conn.wbuf.as_slice();
    let head_len = head.len() as u64;
    if out.sent >= out.total {
        return Ok(None);
    }
    let mut s = &conn.stream;
    if out.sent < head_len {
        let rest = &head[out.sent as usize..];
        return match &out.tail {
            Tail::None => s.write(rest),
            Tail::Bytes(b) => s.write_vectored(&[IoSlice::new(rest), IoSlice::new(b)]),
            Tail::File { .. } => {
                socket::send_nowait(conn.stream.as_raw_fd(), rest, socket::MSG_MORE)
            }
            Tail::Stream { .. } | Tail::Tunnel(_) => Err(io::Error::other(
                "a streamed body or a tunnel is written by its own thread",
            )),
        }
        .map(Some);
    }
    let done = out.sent - head_len;
    match &out.tail {
        Tail::None | Tail::Stream { .. } | Tail::Tunnel(_) => Ok(None),
        Tail::Bytes(b) => s.write(&b[done as usize..]).map(Some),
        Tail::File { file, offset, len } => {
            let mut at = offset + done;
            let chunk = usize::try_from(len - done)
                .unwrap_or(usize::MAX)
                .min(1 << 30);
            match socket::sendfile(conn.stream.as_raw_fd(), file.as_raw_fd(), &mut at, chunk)? {
                0 => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                )),
                n => Ok(Some(n)),
            }
        }
    }
}

/// After the last response: half-close, then let the poller drain what the client still
/// sends for a short while, so unread data cannot reset the response away (`conn`'s linger,
/// without holding a thread).
fn linger(mut conn: Box<Conn>) -> Next {
    super::tls::close_notify(&mut conn);
    if conn.stream.shutdown(std::net::Shutdown::Write).is_err() {
        return Next::Close(conn);
    }
    let n = conn.rbuf.len();
    conn.rbuf.consume(n);
    let until = Instant::now() + conn.app.cfg.timeouts.lingering_time;
    conn.phase = Phase::Linger(until);
    Next::Park(conn, Wait::Linger, until)
}

/// The process stage's view of a non-blocking socket as a blocking [`Transport`]: a read or
/// write that would block waits in poll(2) up to the timeout the body reader set. Only request
/// bodies (and `100 Continue`) go through it; heads and responses never block a thread.
struct PollStream<'a> {
    stream: &'a TcpStream,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl PollStream<'_> {
    fn wait(&self, writable: bool) -> io::Result<()> {
        let fd = self.stream.as_raw_fd();
        let (timeout, ready) = if writable {
            let t = self.write_timeout.unwrap_or(Duration::MAX);
            (t, poll::poll_writable(fd, t)?)
        } else {
            let t = self.read_timeout.unwrap_or(Duration::MAX);
            (t, poll::poll_readable(fd, t)?)
        };
        if ready {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no progress in {timeout:?}"),
            ))
        }
    }
}

impl Read for PollStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(false)?,
                r => return r,
            }
        }
    }
}

impl Write for PollStream<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.stream.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(true)?,
                r => return r,
            }
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        loop {
            match self.stream.write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(true)?,
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for PollStream<'_> {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
        use std::os::fd::AsFd;
        Some(Box::new(crate::net::RawEnd {
            fd: self.stream.as_fd(),
            stop: None,
        }))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.write_timeout = timeout;
        Ok(())
    }
}
