//! The reverse proxy: requests under a configured prefix (or, for a fallback upstream,
//! everything that is not a file, as the pipeline paper hands dynamic requests to a server
//! behind it) are forwarded to an upstream HTTP/1.1 server over a pool of keep-alive
//! connections, with our own upstream client (the response head is parsed by
//! [`weft_http::ResponseParser`], chunked bodies decoded by [`weft_http::ChunkedDecoder`]).
//!
//! What it promises:
//! - **Routing**: a prefix matches when both the request path and its normalised form start
//!   with it, so `/api/../secret` is not forwarded by an `/api/` mount (the upstream would
//!   resolve it outside the prefix). Mounts are tried in configuration order, before CGI
//!   and static files. The fallback entry (`fallback = true`, `--proxy '*=URL'`) takes GET
//!   and HEAD requests the static files answer 404, and every other method no route took.
//!   CONNECT is never forwarded (405).
//! - **Headers**: hop-by-hop fields are removed both ways: `Connection` and every field it
//!   names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
//!   `Proxy-Authorization`, `Proxy-Authenticate`. `Expect` is answered here (the client gets
//!   `100 Continue` when the body is first read), not forwarded. `X-Forwarded-For` gets the
//!   client's address appended to what the client sent; `X-Forwarded-Proto` (`http`, `https` over TLS) and
//!   `X-Forwarded-Host` (the request's host) replace the client's; `Via` gets `1.x weft`
//!   appended both ways. `Host` is the request's host by default (`host = "upstream"`: the
//!   upstream's authority). The request's host is [`Request::host`]: an absolute-form
//!   target's authority replaces the client's `Host` (RFC 9112 §3.2.2).
//! - **No ambiguous request upstream**: the client's request was already refused if its
//!   framing was ambiguous (weft-http); every framing field it sent is dropped and exactly one
//!   is written from the parsed framing: `Content-Length` for a sized body (also `0` when the
//!   client sent `Content-Length: 0`), `Transfer-Encoding: chunked` for a chunked one.
//! - **Request buffering** (`request_buffering`, on by default as nginx's
//!   `proxy_request_buffering`): the whole request body is read (bounded by `limits.max_body`,
//!   chunked framing checked, under the body timeouts and minimum rate) before an upstream
//!   connection is taken, so a request that turns out malformed never reaches the upstream;
//!   it goes up with a `Content-Length`.
//! - **Streaming**: without request buffering, the request body is copied to the upstream a
//!   piece at a time as it arrives (a chunked body is re-chunked); the response body streams
//!   back through [`Body::Stream`]: its `Content-Length` passed on, a chunked body decoded and
//!   re-chunked by the driver, a close-delimited body read until the upstream closes. Memory
//!   per request stays at a few buffers whatever the body size.
//! - **Pool**: per upstream, at most `max_idle` idle connections, most recently used first,
//!   each closed after `idle_timeout` idle or when a non-blocking read shows it closed (or
//!   holding unexpected bytes) at checkout. A connection returns to the pool only after a
//!   whole request went out and a whole response came back that both sides allow to be kept
//!   alive; any error, timeout or cut body closes it.
//! - **Retry**: a request is sent once more, on a fresh connection, only if a pooled
//!   connection turned out dead before any byte of the response (write error, or end of
//!   stream or reset at the first read), the method is idempotent (RFC 9110 §9.2.2) and the
//!   request has no body or a buffered one (a body already streamed cannot be replayed).
//! - **Failures**: connection refused or unreachable, a malformed or unsupported upstream
//!   response (see `weft_http::ResponseParser`), or a dead connection that cannot be retried:
//!   502. Connect timeout or read timeout before the response head: 504. Once the response
//!   has begun, a failure ends the client connection mid-body (no last chunk, or fewer bytes
//!   than the `Content-Length`), so the client can tell. Each is logged once.
//! - **No blocked worker**: upstream sockets are [`weft_fiber::net::TcpStream`]s, which park
//!   the fiber on the fiber model and block the connection's own thread on the thread and
//!   process models. Upstream names are resolved once, when the server starts.
//!
//! The request body is written before the response is read (as a simple client does): an
//! upstream that answers early without reading a large body holds the request until the
//! write times out (`read_timeout`), unless it closes the connection, in which case what it
//! sent is relayed if it can be read.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_fiber::net::TcpStream;
use weft_http::response::{valid_name, valid_value};
use weft_http::{
    BodyFraming, ChunkedDecoder, Limits, Method, ResponseFraming, ResponseParser, TargetForm,
    Version,
};

use crate::body::{ReadBuf, RequestBody};
use crate::config::{ProxyConfig, ProxyHost};
use crate::handlers::path::normalize;
use crate::response::{Body, BodyStream, Response};
use crate::Request;

/// Bytes per body read or write.
const PIECE: usize = 16 * 1024;
/// Initial read buffer of an upstream connection (it grows to the head limit if needed).
const READ_BUF: usize = 8 * 1024;
/// Largest chunked-body bytes held unread (a chunk-size line, extensions, trailers).
const CHUNKED_BUF_MAX: usize = 64 * 1024;
/// Fields never forwarded in either direction (RFC 9110 §7.6.1, and RFC 2616's list).
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Every proxy mount of the application.
#[derive(Debug)]
pub struct Proxy {
    mounts: Vec<(String, Arc<Upstream>)>,
    fallback: Option<Arc<Upstream>>,
}

impl Proxy {
    /// The mounts `cfgs` describe (`None` if there are none); resolves every upstream.
    pub fn new(cfgs: &[ProxyConfig]) -> io::Result<Option<Proxy>> {
        if cfgs.is_empty() {
            return Ok(None);
        }
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        let mut proxy = Proxy {
            mounts: Vec::new(),
            fallback: None,
        };
        for cfg in cfgs {
            let up = Arc::new(Upstream::new(cfg)?);
            if cfg.fallback {
                if proxy.fallback.is_some() {
                    return Err(invalid("more than one proxy has `fallback = true`".into()));
                }
                proxy.fallback = Some(up.clone());
            }
            if !cfg.prefix.is_empty() {
                if !cfg.prefix.starts_with('/') {
                    return Err(invalid(format!(
                        "proxy prefix `{}` must start with `/`",
                        cfg.prefix
                    )));
                }
                proxy.mounts.push((cfg.prefix.clone(), up));
            } else if !cfg.fallback {
                return Err(invalid(format!(
                    "proxy to {} needs a `prefix` or `fallback = true`",
                    cfg.upstream
                )));
            }
        }
        Ok(Some(proxy))
    }

    /// The upstream mounted at a prefix of `path` (still percent-encoded), if any.
    pub fn route(&self, path: &str) -> Option<&Arc<Upstream>> {
        let (_, up) = self
            .mounts
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()) && normal_starts(path, prefix))?;
        Some(up)
    }

    /// The upstream for everything that is not a file, if one is configured.
    pub fn fallback(&self) -> Option<&Arc<Upstream>> {
        self.fallback.as_ref()
    }
}

/// True if the normalised form of `path` starts with `prefix` too.
fn normal_starts(path: &str, prefix: &str) -> bool {
    let Ok(n) = normalize(path) else {
        return false;
    };
    let mut p = Vec::with_capacity(n.rel.len() + 2);
    p.push(b'/');
    p.extend_from_slice(&n.rel);
    if n.trailing_slash && !n.rel.is_empty() {
        p.push(b'/');
    }
    p.starts_with(prefix.as_bytes())
}

/// One upstream server and its pool of idle connections.
pub struct Upstream {
    /// The URL as configured, for logs.
    url: String,
    addr: SocketAddr,
    /// `host[:port]` from the URL, for `Host` in upstream mode.
    authority: String,
    host: ProxyHost,
    connect_timeout: Duration,
    read_timeout: Duration,
    limits: Limits,
    pool: Pool,
    /// `request_buffering`: the whole body is read before the upstream is contacted.
    buffering: bool,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .field("addr", &self.addr)
            .finish()
    }
}

/// Parses `http://HOST[:PORT][/]` into (authority, host, port).
fn parse_url(url: &str) -> Result<(String, String, u16), String> {
    let rest = url.strip_prefix("http://").ok_or(format!(
        "proxy upstream `{url}`: only http:// URLs are supported"
    ))?;
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
        None => 80,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((authority.to_string(), host.to_string(), port))
}

impl Upstream {
    fn new(cfg: &ProxyConfig) -> io::Result<Upstream> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        let (authority, host, port) = parse_url(&cfg.upstream).map_err(invalid)?;
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| invalid(format!("proxy upstream `{}`: {e}", cfg.upstream)))?
            .next()
            .ok_or_else(|| invalid(format!("proxy upstream `{}`: no address", cfg.upstream)))?;
        Ok(Upstream {
            url: cfg.upstream.clone(),
            addr,
            authority,
            host: cfg.host,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            limits: Limits::default(),
            buffering: cfg.request_buffering,
            pool: Pool {
                idle: Mutex::new(Vec::new()),
                max_idle: cfg.max_idle,
                idle_timeout: cfg.idle_timeout,
            },
        })
    }

    /// Forwards `req` and its body; the response streams from the upstream as it is sent.
    pub fn forward(self: &Arc<Self>, req: &Request, body: &mut RequestBody<'_>) -> Response {
        match self.exchange(req, body) {
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
        let mut conn = self.checkout()?;
        loop {
            let sent = match &buffered {
                Some(data) => self.send_buffered(&conn, &head, data),
                None => self.send(&mut conn, &head, framing, body),
            };
            match sent {
                Ok(()) => {}
                Err(Sent::Dead(e)) if conn.reused && replayable => {
                    log::debug!("proxy {}: pooled connection dead ({e}); retrying", self.url);
                    conn = self.connect()?;
                    continue;
                }
                Err(Sent::Dead(e)) | Err(Sent::Upstream(e)) => {
                    // The upstream may have answered early and closed: relay that if it did.
                    if framing == BodyFraming::None {
                        return Err(io_failure("writing the request", &e));
                    }
                    log::debug!("proxy {}: writing the body: {e}", self.url);
                    conn.keep = false;
                }
                Err(Sent::Client) => {
                    // The driver answers the body's error (400, 408, 413).
                    return Err(Failure::new(400, "the client's request body failed"));
                }
            }
            match self.read_head(&mut conn, req.method() == Method::Head) {
                Ok(parser) => return Ok(self.response(conn, parser, req)),
                Err(HeadError::Dead(e)) if conn.reused && replayable => {
                    log::debug!("proxy {}: pooled connection dead ({e}); retrying", self.url);
                    conn = self.connect()?;
                }
                Err(HeadError::Dead(e)) => return Err(io_failure("reading the response", &e)),
                Err(HeadError::Failed(f)) => return Err(f),
            }
        }
    }

    /// A pooled connection, or a new one.
    fn checkout(&self) -> Result<Conn, Failure> {
        match self.pool.take() {
            Some(c) => Ok(c),
            None => self.connect(),
        }
    }

    fn connect(&self) -> Result<Conn, Failure> {
        let stream = TcpStream::connect_timeout(&self.addr, self.connect_timeout)
            .map_err(|e| io_failure("connecting", &e))?;
        let setup = stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(Some(self.read_timeout)))
            .and_then(|()| stream.set_write_timeout(Some(self.read_timeout)));
        setup.map_err(|e| io_failure("setting up the connection", &e))?;
        Ok(Conn {
            stream,
            rbuf: ReadBuf::new(READ_BUF),
            reused: false,
            keep: true,
        })
    }

    /// The request head as it goes upstream.
    /// `framing`: the body's as it goes upstream (a buffered body has a length).
    fn request_head(&self, req: &Request, framing: BodyFraming) -> Vec<u8> {
        let mut h = Vec::with_capacity(512 + req.head().len());
        h.extend_from_slice(req.method_str().as_bytes());
        h.push(b' ');
        match req.head().target_form() {
            TargetForm::Absolute => {
                h.extend_from_slice(req.path().as_bytes());
                if let Some(q) = req.query() {
                    h.push(b'?');
                    h.extend_from_slice(q.as_bytes());
                }
            }
            _ => h.extend_from_slice(req.target().as_bytes()),
        }
        h.extend_from_slice(b" HTTP/1.1\r\n");
        let named = connection_tokens(
            req.headers()
                .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
                .map(|(_, v)| v),
        );
        let mut xff: Vec<u8> = Vec::new();
        let mut via: Vec<u8> = Vec::new();
        for (name, value) in req.headers() {
            if name.eq_ignore_ascii_case("x-forwarded-for") {
                append_list(&mut xff, value);
            } else if name.eq_ignore_ascii_case("via") {
                append_list(&mut via, value);
            }
            if is_hop_by_hop(name, &named)
                || [
                    "host",
                    "content-length",
                    "expect",
                    "x-forwarded-for",
                    "x-forwarded-proto",
                    "x-forwarded-host",
                    "via",
                ]
                .iter()
                .any(|f| name.eq_ignore_ascii_case(f))
            {
                continue;
            }
            field(&mut h, name, value);
        }
        // The request's host: an absolute-form target's authority replaces the Host field
        // (RFC 9112 §3.2.2), so the upstream sees the host the client asked for.
        let client_host = req.host().map(str::as_bytes);
        let host = match (self.host, client_host) {
            (ProxyHost::Client, Some(v)) => v,
            _ => self.authority.as_bytes(),
        };
        field(&mut h, "Host", host);
        match framing {
            BodyFraming::Length(n) => weft_http::response::write_content_length(n, &mut h),
            BodyFraming::Chunked => h.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            BodyFraming::None if req.header("Content-Length").is_some() => {
                h.extend_from_slice(b"Content-Length: 0\r\n");
            }
            BodyFraming::None => {}
        }
        append_list(&mut xff, req.peer_addr().ip().to_string().as_bytes());
        field(&mut h, "X-Forwarded-For", &xff);
        h.extend_from_slice(if req.is_https() {
            b"X-Forwarded-Proto: https\r\n"
        } else {
            b"X-Forwarded-Proto: http\r\n"
        });
        if let Some(v) = client_host {
            field(&mut h, "X-Forwarded-Host", v);
        }
        append_list(&mut via, via_entry(req.version()).as_bytes());
        field(&mut h, "Via", &via);
        h.extend_from_slice(b"\r\n");
        h
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

    /// Reads the final response head (skipping interim 1xx responses).
    fn read_head(&self, conn: &mut Conn, head_request: bool) -> Result<ResponseParser, HeadError> {
        let mut parser = ResponseParser::new(self.limits, head_request);
        let mut got_any = false;
        loop {
            if !conn.rbuf.is_empty() {
                match parser.parse(conn.rbuf.data()) {
                    Ok(Some(n)) if parser.head().is_interim() => {
                        if parser.head().status() == 101 {
                            return Err(HeadError::Failed(Failure::new(
                                502,
                                "upstream switched protocols unasked",
                            )));
                        }
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
                Err(e)
                    if !got_any
                        && matches!(
                            e.kind(),
                            io::ErrorKind::ConnectionReset
                                | io::ErrorKind::ConnectionAborted
                                | io::ErrorKind::BrokenPipe
                        ) =>
                {
                    return Err(HeadError::Dead(e))
                }
                Err(e) => return Err(HeadError::Failed(io_failure("reading the response", &e))),
            }
        }
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
        let raw = conn.rbuf.data();
        let mut resp = Response::new(head.status());
        let named = connection_tokens(
            head.headers()
                .iter()
                .filter(|h| h.name.get(raw).eq_ignore_ascii_case(b"connection"))
                .map(|h| h.value.get(raw)),
        );
        let mut via: Vec<u8> = Vec::new();
        for h in head.headers() {
            let (name, value) = (h.name.get(raw), h.value.get(raw));
            // Names are tokens (checked by the parser), so ASCII.
            let name = std::str::from_utf8(name).unwrap_or("");
            if name.eq_ignore_ascii_case("via") {
                append_list(&mut via, value);
                continue;
            }
            if is_hop_by_hop(name, &named) || name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            resp.headers
                .push((name.to_string().into(), value.to_vec().into()));
        }
        append_list(&mut via, via_entry(head.version()).as_bytes());
        resp.headers.push(("Via".into(), via.into()));
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
                UpstreamBody::new(self.clone(), conn, State::Length(n)),
                n,
            )),
            ResponseFraming::Chunked => {
                let decoder = ChunkedDecoder::new(&self.limits);
                Body::Stream(BodyStream::new(UpstreamBody::new(
                    self.clone(),
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
                    conn,
                    State::Close,
                )))
            }
        };
        resp
    }

    /// Returns `conn` to the pool if it may carry another request.
    fn release(&self, mut conn: Conn) {
        if conn.keep && conn.rbuf.is_empty() {
            conn.reused = true;
            self.pool.put(conn);
        }
    }
}

/// Why a request could not be relayed: the status to answer and a line for the log.
#[derive(Debug)]
struct Failure {
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

/// 504 for a timeout, 502 for anything else.
fn io_failure(what: &str, e: &io::Error) -> Failure {
    let status = if is_timeout(e) { 504 } else { 502 };
    Failure::new(status, format!("{what}: {e}"))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
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

/// RFC 9110 §9.2.2.
fn is_idempotent(m: Method) -> bool {
    matches!(
        m,
        Method::Get | Method::Head | Method::Put | Method::Delete | Method::Options | Method::Trace
    )
}

/// The field names listed in `Connection` values, lower-cased.
fn connection_tokens<'a>(values: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        for t in v.split(|&b| b == b',') {
            let t = t.trim_ascii();
            if !t.is_empty() {
                out.push(String::from_utf8_lossy(t).to_ascii_lowercase());
            }
        }
    }
    out
}

fn is_hop_by_hop(name: &str, named: &[String]) -> bool {
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h))
        || named.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// Appends `value` to a comma-separated list.
fn append_list(list: &mut Vec<u8>, value: &[u8]) {
    let value = value.trim_ascii();
    if value.is_empty() {
        return;
    }
    if !list.is_empty() {
        list.extend_from_slice(b", ");
    }
    list.extend_from_slice(value);
}

/// Appends `name: value\r\n` (both already valid: from a parsed head, or built here from
/// valid parts).
fn field(h: &mut Vec<u8>, name: &str, value: &[u8]) {
    debug_assert!(valid_name(name.as_bytes()) && valid_value(value));
    weft_http::response::write_header_unchecked(name, value, h);
}

/// This hop's `Via` entry for a message received with `version`.
fn via_entry(version: Version) -> &'static str {
    match version {
        Version::Http10 => "1.0 weft",
        Version::Http11 => "1.1 weft",
    }
}

/// One connection to an upstream.
struct Conn {
    stream: TcpStream,
    /// Bytes received and not yet consumed.
    rbuf: ReadBuf,
    /// It came from the pool (so it may have died while idle).
    reused: bool,
    /// Both sides allow another request on it (so far).
    keep: bool,
}

/// Idle connections of one upstream, most recently used last.
struct Pool {
    idle: Mutex<Vec<(Conn, Instant)>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    /// The most recently used idle connection that is still open. The lock is held only to
    /// take or put an entry, never across I/O (so never across a fiber's park).
    fn take(&self) -> Option<Conn> {
        loop {
            let (conn, since) = self.lock().pop()?;
            if since.elapsed() >= self.idle_timeout {
                // Every other entry is older still.
                let stale = std::mem::take(&mut *self.lock());
                drop(stale);
                return None;
            }
            if conn.is_open() {
                return Some(conn);
            }
        }
    }

    fn put(&self, conn: Conn) {
        if self.max_idle == 0 {
            return;
        }
        let evicted = {
            let mut idle = self.lock();
            let fresh = idle
                .iter()
                .position(|(_, since)| since.elapsed() < self.idle_timeout)
                .unwrap_or(idle.len());
            let mut evicted: Vec<(Conn, Instant)> = idle.drain(..fresh).collect();
            if idle.len() >= self.max_idle {
                evicted.push(idle.remove(0));
            }
            idle.push((conn, Instant::now()));
            evicted
        };
        drop(evicted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Conn, Instant)>> {
        // A panic while holding it cannot leave the list inconsistent: keep using it.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Conn {
    /// True if the upstream has not closed the connection (nor sent anything unasked),
    /// checked without waiting.
    fn is_open(&self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read_deadline(&mut b, Instant::now()) {
            Err(e) => is_timeout(&e),
            Ok(_) => false,
        }
    }
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
    conn: Option<Conn>,
    state: State,
}

impl UpstreamBody {
    fn new(upstream: Arc<Upstream>, conn: Conn, state: State) -> UpstreamBody {
        UpstreamBody {
            upstream,
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
            log::warn!("proxy {}: response body cut: {e}", self.upstream.url);
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
            ("127.0.0.1:9000".into(), "127.0.0.1".into(), 9000)
        );
        assert_eq!(
            parse_url("http://backend/").unwrap(),
            ("backend".into(), "backend".into(), 80)
        );
        assert_eq!(
            parse_url("http://[::1]:8080").unwrap(),
            ("[::1]:8080".into(), "::1".into(), 8080)
        );
        for bad in [
            "https://x",
            "http://",
            "http://x/path",
            "http://x:99999",
            "http://u@x",
            "x:80",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefix_must_hold_after_normalising() {
        assert!(normal_starts("/api/x", "/api/"));
        assert!(normal_starts("/api/", "/api/"));
        assert!(normal_starts("/api/./x", "/api/"));
        assert!(!normal_starts("/api/../secret", "/api/"));
        assert!(!normal_starts("/api/%2e%2e/secret", "/api/"));
        assert!(!normal_starts("/api", "/api/"));
    }

    #[test]
    fn connection_names_are_hop_by_hop() {
        let named = connection_tokens([&b"close, X-Secret , ,Keep-Alive"[..]].into_iter());
        assert_eq!(named, ["close", "x-secret", "keep-alive"]);
        assert!(is_hop_by_hop("x-SECRET", &named));
        assert!(is_hop_by_hop("Transfer-Encoding", &[]));
        assert!(is_hop_by_hop("Proxy-Authorization", &[]));
        assert!(!is_hop_by_hop("X-Other", &named));
    }
}
