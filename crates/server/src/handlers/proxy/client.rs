//! Forwarding one request upstream and relaying the response: request buffering or
//! streaming, the servers of the group tried in turn (`retry_on`), one retry on a dead pooled
//! connection, the response head read past interim responses, and the body streamed back as
//! it arrives.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_http::{BodyFraming, ChunkedDecoder, Limits, Method, ResponseFraming, ResponseParser};

use super::group::Group;
use super::headers;
use super::pool::Conn;
use crate::body::RequestBody;
use crate::config::{ProxyConfig, ProxyHost};
pub(super) use crate::handlers::{is_dead_connection, is_idempotent, is_timeout};
use crate::response::{Body, BodyStream, Response};
use crate::Request;

/// Bytes per body read or write.
const PIECE: usize = 16 * 1024;
/// Largest chunked-body bytes held unread (a chunk-size line, extensions, trailers).
const CHUNKED_BUF_MAX: usize = 64 * 1024;

/// One mount's upstream: the group of servers it balances over (one, for a URL) and the
/// mount's settings.
pub struct Upstream {
    /// The URL or `upstream:NAME` as configured, for logs.
    url: String,
    /// Its servers, their pools and their health.
    pub(super) group: Arc<Group>,
    /// `host[:port]` from the URL, or the group's name, for `Host` in upstream mode (nginx's
    /// `$proxy_host`).
    pub(super) authority: String,
    pub(super) host: ProxyHost,
    pub(super) connect_timeout: Duration,
    pub(super) read_timeout: Duration,
    limits: Limits,
    /// `request_buffering`: the whole body is read before the upstream is contacted.
    buffering: bool,
    /// `underscores_in_headers`: fields whose names contain `_` go upstream too.
    pub(super) underscores: bool,
    /// An `https://` upstream's TLS client.
    pub(super) tls: Option<super::tls::UpstreamTls>,
    /// `tunnel_idle`: a tunnel with no byte either way for this long closes.
    tunnel_idle: Duration,
    /// The server's shutdown, which ends tunnels after the drain's idle window.
    shutdown: Arc<crate::shutdown::Shutdown>,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .field("group", &self.group)
            .finish()
    }
}

/// Parses `http://HOST[:PORT][/]` or `https://...` into (authority, host, port, https).
fn parse_url(url: &str) -> Result<(String, String, u16, bool), String> {
    let (rest, https) = match url.strip_prefix("https://") {
        Some(r) => (r, true),
        None => (
            url.strip_prefix("http://").ok_or(format!(
                "proxy upstream `{url}`: expected http://, https:// or upstream:NAME"
            ))?,
            false,
        ),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "proxy upstream `{url}`: expected http://HOST[:PORT] (no path)"
        ));
    }
    if !weft_http::valid_authority(authority.as_bytes()) {
        return Err(format!("proxy upstream `{url}`: invalid host"));
    }
    // `valid_authority` checked the shape: brackets balanced, at most one port colon.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("proxy upstream `{url}`: bad port"))?,
        None if https => 443,
        None => 80,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((authority.to_string(), host.to_string(), port, https))
}

impl Upstream {
    /// The mount `cfg` describes: a URL's server resolved now, or the group of `groups` its
    /// `upstream:NAME` names.
    pub(super) fn new(cfg: &ProxyConfig, groups: &super::Groups) -> io::Result<Upstream> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        let mut tls = None;
        let (group, authority) = match cfg.upstream.strip_prefix("upstream:") {
            Some(name) => {
                let g = groups.get(name).ok_or_else(|| {
                    invalid(format!(
                        "proxy upstream `{}`: no [[upstream]] is named `{name}`",
                        cfg.upstream
                    ))
                })?;
                // The group's servers speak TLS if it says so (`[[upstream]] tls`).
                tls = g.tls.clone();
                (g.clone(), name.to_string())
            }
            None => {
                let (authority, host, port, https) = parse_url(&cfg.upstream).map_err(invalid)?;
                if https {
                    let keys = super::tls::TlsKeys::of_proxy(cfg);
                    tls = Some(super::tls::UpstreamTls::new(keys, &host).map_err(invalid)?);
                }
                let addr = (host.as_str(), port)
                    .to_socket_addrs()
                    .map_err(|e| invalid(format!("proxy upstream `{}`: {e}", cfg.upstream)))?
                    .next()
                    .ok_or_else(|| {
                        invalid(format!("proxy upstream `{}`: no address", cfg.upstream))
                    })?;
                let addr = crate::handlers::sock::Addr::Tcp(addr);
                let name = super::group::host_of(&format!("{host}:{port}"));
                let g = Group::single(
                    &cfg.upstream,
                    addr,
                    name,
                    cfg.resolve_every,
                    cfg.max_idle,
                    cfg.idle_timeout,
                );
                groups.adopt(g.clone());
                (g, authority)
            }
        };
        Ok(Upstream {
            url: cfg.upstream.clone(),
            group,
            authority,
            host: cfg.host,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            limits: Limits::default(),
            buffering: cfg.request_buffering,
            underscores: cfg.underscores_in_headers,
            tls,
            tunnel_idle: cfg.tunnel_idle,
            shutdown: groups.shutdown().clone(),
        })
    }

    /// Forwards `req` and its body; the response streams from the upstream as it is sent.
    pub fn forward(self: &Arc<Self>, req: &Request, body: &mut RequestBody<'_>) -> Response {
        let t0 = std::time::Instant::now();
        let outcome = self.exchange(req, body);
        // `$upstream_response_time`: to the upstream's response head (or its failure).
        req.set_upstream_time(t0.elapsed());
        match outcome {
            Ok(resp) => resp,
            Err(Failure { status, why }) => {
                log::warn!(
                    "{}: proxy {} {} to {}: {why}; answering {status}",
                    req.peer_addr(),
                    req.method_str(),
                    req.target(),
                    self.url
                );
                Response::error(status)
            }
        }
    }

    fn exchange(
        self: &Arc<Self>,
        req: &Request,
        body: &mut RequestBody<'_>,
    ) -> Result<Response, Failure> {
        if req.method() == Method::Connect {
            return Err(Failure::new(405, "CONNECT is not forwarded"));
        }
        // An upstream that answers TRACE echoes the request back, with whatever credentials
        // the client's browser attached (cross-site tracing); nginx answers it 405 itself.
        if req.method() == Method::Trace {
            return Err(Failure::new(405, "TRACE is not forwarded"));
        }
        // `get` is not GET (RFC 9110 §9.1), and weft answers it 501 when it serves the request
        // itself; an upstream that folds case would take it for GET. One rule for both paths.
        if Method::miscased(req.method_str().as_bytes()).is_some() {
            return Err(Failure::new(
                501,
                "method in other letter case than registered is not forwarded",
            ));
        }
        let mut framing = req.head().framing();
        // nginx's proxy_request_buffering: the whole body, its framing checked and its size
        // bounded by `limits.max_body` (the body reader's limit), before any upstream
        // connection: a request that turns out malformed, too large or too slow never
        // reaches the upstream (the driver answers the body's 400, 413 or 408).
        let buffered = if self.buffering && framing != BodyFraming::None {
            match body.read_all() {
                Ok(data) => {
                    framing = BodyFraming::Length(data.len() as u64);
                    Some(data)
                }
                Err(_) => {
                    return Err(Failure::new(
                        400,
                        "the client's request body failed; nothing went upstream",
                    ))
                }
            }
        } else {
            None
        };
        let head = self.request_head(req, framing);
        // Only a request whose body is at hand (none, or buffered) can be sent twice.
        let replayable =
            is_idempotent(req.method()) && (framing == BodyFraming::None || buffered.is_some());
        let group = &self.group;
        let started = Instant::now();
        let mut tried: Vec<usize> = Vec::new();
        let mut last: Option<Failure> = None;
        while tried.len() < group.tries {
            if !tried.is_empty()
                && !group.try_timeout.is_zero()
                && started.elapsed() >= group.try_timeout
            {
                break;
            }
            let Some(i) = group.pick(req, &tried) else {
                break;
            };
            tried.push(i);
            let more = replayable && tried.len() < group.tries;
            match self.attempt(i, req, body, &head, framing, buffered.as_deref()) {
                Ok(resp) if more && group.retry.status(resp.status) => {
                    // The answer goes if another server can be asked; else it is the answer.
                    if group.pick(req, &tried).is_none() {
                        group.succeeded(i);
                        return Ok(resp);
                    }
                    let why = format!("answered {}", resp.status);
                    group.failed(i, &why);
                    log::info!(
                        "{}: proxy {}: server {} {why}; trying the next",
                        req.peer_addr(),
                        self.url,
                        group.servers[i].name
                    );
                    last = Some(Failure::new(resp.status, why));
                }
                Ok(resp) => {
                    group.succeeded(i);
                    return Ok(resp);
                }
                Err(Attempt::Next(f, timeout)) => {
                    group.failed(i, &f.why);
                    let allowed = if timeout {
                        group.retry.timeout
                    } else {
                        group.retry.error
                    };
                    if !(more && allowed) {
                        return Err(f);
                    }
                    log::info!(
                        "{}: proxy {}: server {}: {}; trying the next",
                        req.peer_addr(),
                        self.url,
                        group.servers[i].name,
                        f.why
                    );
                    last = Some(f);
                }
                Err(Attempt::Counted(f)) => {
                    group.failed(i, &f.why);
                    return Err(f);
                }
                Err(Attempt::Final(f)) => return Err(f),
            }
        }
        Err(last.unwrap_or_else(|| Failure::new(502, "no server of the group is up")))
    }

    /// One try on server `i`: the request out (again on a fresh connection if a pooled one
    /// turns out dead, and the request can be sent twice), the response head in.
    fn attempt(
        self: &Arc<Self>,
        i: usize,
        req: &Request,
        body: &mut RequestBody<'_>,
        head: &[u8],
        framing: BodyFraming,
        buffered: Option<&[u8]>,
    ) -> Result<Response, Attempt> {
        let replayable =
            is_idempotent(req.method()) && (framing == BodyFraming::None || buffered.is_some());
        let mut conn = self.checkout(i).map_err(Attempt::tried)?;
        conn.flight = Some(self.group.begin(i));
        loop {
            let sent_at = Instant::now();
            let sent = match buffered {
                Some(data) => self.send_buffered(&conn, head, data),
                None => self.send(&mut conn, head, framing, body),
            };
            match sent {
                Ok(()) => {}
                Err(Sent::Dead(e)) if conn.reused && replayable => {
                    log::debug!("proxy {}: pooled connection dead ({e}); retrying", self.url);
                    conn = self.reconnect(i)?;
                    continue;
                }
                Err(Sent::Dead(e)) | Err(Sent::Upstream(e)) => {
                    // The upstream may have answered early and closed: relay that if it did.
                    if framing == BodyFraming::None {
                        return Err(Attempt::tried(io_failure("writing the request", &e)));
                    }
                    log::debug!("proxy {}: writing the body: {e}", self.url);
                    conn.keep = false;
                }
                Err(Sent::Client) => {
                    // The driver answers the body's error (400, 408, 413).
                    return Err(Attempt::Final(Failure::new(
                        400,
                        "the client's request body failed",
                    )));
                }
            }
            // 103 Early Hints go on to an HTTP/1.1 client as they come (nginx's
            // `early_hints`); other 1xx are the proxy's own business.
            let hints_ok = req.version() == weft_http::Version::Http11;
            let mut hints = |head: &weft_http::ResponseHead, raw: &[u8]| {
                if hints_ok && head.status() == 103 {
                    let _ = body.interim(&headers::early_hints(head, raw));
                }
            };
            let upgrade = headers::upgrade_asked(req).is_some();
            let head_request = req.method() == Method::Head;
            let head = self.read_head(&mut conn, head_request, upgrade, &mut hints);
            if head.is_ok() {
                self.group.responded(i, sent_at.elapsed());
            }
            match head {
                Ok(parser) if parser.head().status() == 101 => {
                    return self.tunnel(conn, &parser, body)
                }
                Ok(parser) => return Ok(self.response(conn, parser, req)),
                Err(HeadError::Dead(e)) if conn.reused && replayable => {
                    log::debug!("proxy {}: pooled connection dead ({e}); retrying", self.url);
                    conn = self.reconnect(i)?;
                }
                Err(HeadError::Dead(e)) => {
                    return Err(Attempt::tried(io_failure("reading the response", &e)))
                }
                Err(HeadError::Failed(f)) if f.status == 504 => return Err(Attempt::Next(f, true)),
                // A malformed answer counts against the server, and goes to the client.
                Err(HeadError::Failed(f)) => return Err(Attempt::Counted(f)),
            }
        }
    }

    /// A fresh connection to server `i`, counted in flight.
    fn reconnect(&self, i: usize) -> Result<Conn, Attempt> {
        let mut conn = self.connect(i).map_err(Attempt::tried)?;
        conn.flight = Some(self.group.begin(i));
        Ok(conn)
    }

    /// Writes the head and a body read in full beforehand.
    fn send_buffered(&self, conn: &Conn, head: &[u8], data: &[u8]) -> Result<(), Sent> {
        let dead = |e: io::Error| {
            if is_timeout(&e) {
                Sent::Upstream(e)
            } else {
                Sent::Dead(e)
            }
        };
        (&conn.stream).write_all(head).map_err(dead)?;
        (&conn.stream).write_all(data).map_err(Sent::Upstream)
    }

    /// Writes the head and streams the body.
    fn send(
        &self,
        conn: &mut Conn,
        head: &[u8],
        framing: BodyFraming,
        body: &mut RequestBody<'_>,
    ) -> Result<(), Sent> {
        let dead = |e: io::Error| {
            if is_timeout(&e) {
                Sent::Upstream(e)
            } else {
                Sent::Dead(e)
            }
        };
        if framing == BodyFraming::None {
            return (&conn.stream).write_all(head).map_err(dead);
        }
        (&conn.stream).write_all(head).map_err(dead)?;
        let chunked = framing == BodyFraming::Chunked;
        // Room before the data for a chunk-size line, after it for its CRLF.
        const PAD: usize = 18;
        let mut buf = vec![0u8; PAD + PIECE + 2];
        loop {
            let n = match body.read(&mut buf[PAD..PAD + PIECE]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(Sent::Client),
            };
            let out = if chunked {
                let mut line = [0u8; 18];
                let k = weft_http::chunked::encode_size_line(n, &mut line);
                buf[PAD - k..PAD].copy_from_slice(&line[..k]);
                buf[PAD + n..PAD + n + 2].copy_from_slice(weft_http::chunked::CHUNK_END);
                &buf[PAD - k..PAD + n + 2]
            } else {
                &buf[PAD..PAD + n]
            };
            (&conn.stream).write_all(out).map_err(Sent::Upstream)?;
        }
        if chunked {
            (&conn.stream)
                .write_all(weft_http::chunked::LAST_CHUNK)
                .map_err(Sent::Upstream)?;
        }
        Ok(())
    }

    /// Reads the final response head; interim 1xx responses go to `interim` (with the bytes
    /// they were parsed from) and are skipped.
    /// `upgrade`: the request asked to switch protocols, so a `101` is its final answer.
    fn read_head(
        &self,
        conn: &mut Conn,
        head_request: bool,
        upgrade: bool,
        interim: &mut dyn FnMut(&weft_http::ResponseHead, &[u8]),
    ) -> Result<ResponseParser, HeadError> {
        let mut parser = ResponseParser::new(self.limits, head_request);
        let mut got_any = false;
        loop {
            if !conn.rbuf.is_empty() {
                match parser.parse(conn.rbuf.data()) {
                    Ok(Some(_)) if upgrade && parser.head().status() == 101 => return Ok(parser),
                    Ok(Some(n)) if parser.head().is_interim() => {
                        // A switch the request did not ask for would take the connection out
                        // of HTTP framing behind the client's back (request smuggling).
                        if parser.head().status() == 101 {
                            return Err(HeadError::Failed(Failure::new(
                                502,
                                "upstream switched protocols unasked",
                            )));
                        }
                        interim(parser.head(), &conn.rbuf.data()[..n]);
                        conn.rbuf.consume(n);
                        parser.reset(head_request);
                        continue;
                    }
                    Ok(Some(_)) => return Ok(parser),
                    Ok(None) => {}
                    Err(e) => {
                        return Err(HeadError::Failed(Failure::new(
                            502,
                            format!("malformed response head: {e}"),
                        )))
                    }
                }
            }
            match conn
                .rbuf
                .fill(&mut &conn.stream, self.limits.max_head_bytes + 1)
            {
                Ok(0) if !got_any => {
                    return Err(HeadError::Dead(io::ErrorKind::UnexpectedEof.into()))
                }
                Ok(0) => {
                    return Err(HeadError::Failed(Failure::new(
                        502,
                        "upstream closed the connection inside the response head",
                    )))
                }
                Ok(_) => got_any = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    return Err(HeadError::Failed(Failure::new(
                        504,
                        format!("no response within {:?}", self.read_timeout),
                    )))
                }
                Err(e) if !got_any && is_dead_connection(&e) => return Err(HeadError::Dead(e)),
                Err(e) => return Err(HeadError::Failed(io_failure("reading the response", &e))),
            }
        }
    }

    /// The client's `101` to an upgrade the upstream accepted: the upstream connection leaves
    /// the pool for good and becomes the tunnel's other side.
    fn tunnel(
        &self,
        mut conn: Conn,
        parser: &ResponseParser,
        body: &mut RequestBody<'_>,
    ) -> Result<Response, Attempt> {
        let head = parser.head();
        let raw = conn.rbuf.data();
        let Some(protocol) = headers::upgrade_of(head, raw).map(<[u8]>::to_vec) else {
            return Err(Attempt::Counted(Failure::new(
                502,
                "upstream answered 101 without an Upgrade field",
            )));
        };
        let mut resp = headers::response_head(head, raw);
        resp.headers.push(("Upgrade".into(), protocol.into()));
        let head_len = head.len();
        conn.rbuf.consume(head_len);
        // Bytes of the new protocol that came with the head: the client's first.
        let to_client = conn.rbuf.data().to_vec();
        let open = self.group.tunnel(conn.server);
        conn.flight = None;
        resp.body = Body::Tunnel(Box::new(crate::tunnel::Tunnel {
            upstream: Box::new(conn.stream),
            to_client,
            to_upstream: body.take_after(),
            idle: self.tunnel_idle,
            shutdown: self.shutdown.clone(),
            on_end: Some(Box::new(move |_| drop(open))),
        }));
        resp.close = true;
        Ok(resp)
    }

    /// The response to send the client, its body streaming from `conn`.
    fn response(
        self: &Arc<Self>,
        mut conn: Conn,
        parser: ResponseParser,
        req: &Request,
    ) -> Response {
        let head = parser.head();
        let head_len = head.len();
        let mut resp = headers::response_head(head, conn.rbuf.data());
        let framing = head.framing();
        let keep = head.keep_alive();
        let content_length = head.content_length();
        let chunked_head = head.is_chunked();
        conn.rbuf.consume(head_len);
        conn.keep &= keep;
        resp.body = match framing {
            ResponseFraming::None => {
                self.release(conn);
                if req.method() == Method::Head {
                    // The driver sends no body to a HEAD request: pass the upstream's length on.
                    match content_length {
                        Some(n) => Body::Stream(BodyStream::with_len(io::empty(), n)),
                        None if chunked_head => Body::Stream(BodyStream::new(io::empty())),
                        None => Body::Empty,
                    }
                } else {
                    Body::Empty
                }
            }
            ResponseFraming::Length(n) if conn.rbuf.len() as u64 >= n => {
                // The whole body came with the head: send it with its length at once.
                let n = usize::try_from(n).expect("no larger than the buffer");
                let bytes = Bytes::copy_from_slice(&conn.rbuf.data()[..n]);
                conn.rbuf.consume(n);
                self.release(conn);
                Body::Bytes(bytes)
            }
            ResponseFraming::Length(n) => Body::Stream(BodyStream::with_len(
                UpstreamBody::new(self.clone(), req.peer_addr(), conn, State::Length(n)),
                n,
            )),
            ResponseFraming::Chunked => {
                let decoder = ChunkedDecoder::new(&self.limits);
                Body::Stream(BodyStream::new(UpstreamBody::new(
                    self.clone(),
                    req.peer_addr(),
                    conn,
                    State::Chunked {
                        decoder,
                        pending: 0,
                    },
                )))
            }
            ResponseFraming::Close => {
                conn.keep = false;
                Body::Stream(BodyStream::new(UpstreamBody::new(
                    self.clone(),
                    req.peer_addr(),
                    conn,
                    State::Close,
                )))
            }
        };
        resp
    }
}

/// Why a request could not be relayed: the status to answer and a line for the log.
#[derive(Debug)]
pub(super) struct Failure {
    status: u16,
    why: String,
}

impl Failure {
    fn new(status: u16, why: impl Into<String>) -> Failure {
        Failure {
            status,
            why: why.into(),
        }
    }
}

/// How one try on a server failed.
pub(super) enum Attempt {
    /// Before any byte of a response: the next server may take it (`true`: a timeout, else an
    /// error, as `retry_on` tells them apart).
    Next(Failure, bool),
    /// A failure the server is blamed for, answered to the client as it is.
    Counted(Failure),
    /// Not the server's doing (the client's body): answered as it is.
    Final(Failure),
}

impl Attempt {
    /// A failure to connect or to exchange with the server, by its status: 504 a timeout.
    fn tried(f: Failure) -> Attempt {
        let timeout = f.status == 504;
        Attempt::Next(f, timeout)
    }
}

/// 504 for a timeout, 502 for anything else.
pub(super) fn io_failure(what: &str, e: &io::Error) -> Failure {
    let status = if is_timeout(e) { 504 } else { 502 };
    Failure::new(status, format!("{what}: {e}"))
}

/// How sending a request failed.
enum Sent {
    /// The upstream connection failed in a way a dead pooled connection does.
    Dead(io::Error),
    /// The upstream failed otherwise (or while the body was going out).
    Upstream(io::Error),
    /// Reading the client's body failed.
    Client,
}

/// How reading a response head failed.
enum HeadError {
    /// Closed or reset before any byte: a pooled connection the upstream had dropped.
    Dead(io::Error),
    Failed(Failure),
}

/// Where a response body stands.
enum State {
    /// This many bytes left.
    Length(u64),
    /// `pending` decoded data bytes sit at the front of the read buffer.
    Chunked {
        decoder: ChunkedDecoder,
        pending: usize,
    },
    /// Until the upstream closes.
    Close,
    Done,
}

/// A response body read from the upstream while the driver sends it. Once the body has
/// ended the connection goes back to the pool (if it may); dropped before that, it closes.
struct UpstreamBody {
    upstream: Arc<Upstream>,
    /// The client the body goes to, for the log line of a body cut short.
    peer: std::net::SocketAddr,
    conn: Option<Conn>,
    state: State,
}

impl UpstreamBody {
    fn new(
        upstream: Arc<Upstream>,
        peer: std::net::SocketAddr,
        conn: Conn,
        state: State,
    ) -> UpstreamBody {
        UpstreamBody {
            upstream,
            peer,
            conn: Some(conn),
            state,
        }
    }

    fn finish(&mut self) {
        self.state = State::Done;
        if let Some(conn) = self.conn.take() {
            self.upstream.release(conn);
        }
    }

    fn read_inner(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(0);
        };
        loop {
            match &mut self.state {
                State::Done => return Ok(0),
                State::Length(left) => {
                    let want = usize::try_from(*left).unwrap_or(usize::MAX).min(out.len());
                    let n = if conn.rbuf.is_empty() {
                        match (&conn.stream).read(&mut out[..want])? {
                            0 => return Err(cut_short()),
                            n => n,
                        }
                    } else {
                        let n = want.min(conn.rbuf.len());
                        out[..n].copy_from_slice(&conn.rbuf.data()[..n]);
                        conn.rbuf.consume(n);
                        n
                    };
                    *left -= n as u64;
                    if *left == 0 {
                        // The driver stops reading at the length: release now, not at EOF.
                        self.finish();
                    }
                    return Ok(n);
                }
                State::Close => {
                    let n = if conn.rbuf.is_empty() {
                        (&conn.stream).read(out)?
                    } else {
                        let n = out.len().min(conn.rbuf.len());
                        out[..n].copy_from_slice(&conn.rbuf.data()[..n]);
                        conn.rbuf.consume(n);
                        n
                    };
                    if n == 0 {
                        self.finish();
                    }
                    return Ok(n);
                }
                State::Chunked { decoder, pending } => {
                    if *pending > 0 {
                        let n = (*pending).min(out.len());
                        out[..n].copy_from_slice(&conn.rbuf.data()[..n]);
                        conn.rbuf.consume(n);
                        *pending -= n;
                        return Ok(n);
                    }
                    if decoder.is_done() {
                        self.finish();
                        return Ok(0);
                    }
                    if conn.rbuf.is_empty() {
                        fill(conn)?;
                        continue;
                    }
                    let step = decoder.decode(conn.rbuf.data()).map_err(|e| {
                        io::Error::new(io::ErrorKind::InvalidData, format!("upstream body: {e}"))
                    })?;
                    let (d0, d1) = step.data;
                    if d1 > d0 {
                        conn.rbuf.consume(d0);
                        *pending = d1 - d0;
                    } else {
                        conn.rbuf.consume(step.consumed);
                        if !step.done && (conn.rbuf.is_empty() || step.consumed == 0) {
                            fill(conn)?;
                        }
                    }
                }
            }
        }
    }
}

/// Reads more of a chunked body into the buffer; the end of stream is an error there.
fn fill(conn: &mut Conn) -> io::Result<()> {
    match conn.rbuf.fill(&mut &conn.stream, CHUNKED_BUF_MAX)? {
        0 => Err(cut_short()),
        _ => Ok(()),
    }
}

fn cut_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "upstream closed the connection inside the response body",
    )
}

impl Read for UpstreamBody {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        self.read_inner(out).inspect_err(|e| {
            log::warn!(
                "{}: proxy {}: response body cut: {e}",
                self.peer,
                self.upstream.url
            );
            // Whatever was in flight makes the connection useless.
            self.conn = None;
            self.state = State::Done;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:9000").unwrap(),
            ("127.0.0.1:9000".into(), "127.0.0.1".into(), 9000, false)
        );
        assert_eq!(
            parse_url("http://backend/").unwrap(),
            ("backend".into(), "backend".into(), 80, false)
        );
        assert_eq!(
            parse_url("http://[::1]:8080").unwrap(),
            ("[::1]:8080".into(), "::1".into(), 8080, false)
        );
        assert_eq!(
            parse_url("https://api.example").unwrap(),
            ("api.example".into(), "api.example".into(), 443, true)
        );
        for bad in [
            "ftp://x",
            "http://",
            "http://x/path",
            "http://x:99999",
            "http://u@x",
            "x:80",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
