//! The request a handler sees: an owned copy of the parsed head plus connection facts.

use std::net::SocketAddr;

use weft_http::conditional::Conditions;
use weft_http::{Method, RequestHead, Span, Version};

/// One parsed request. Owns its head bytes, so it can outlive the connection's read buffer
/// (the pipeline model passes it between stages).
#[derive(Debug, Clone)]
pub struct Request {
    bytes: Vec<u8>,
    head: RequestHead,
    peer: SocketAddr,
    local: SocketAddr,
    /// What the connection's TLS handshake settled; `None` on plain HTTP.
    tls: Option<std::sync::Arc<TlsInfo>>,
    /// `bytes` within the target span are ASCII (the parser admits nothing else; checked
    /// once here so that the text accessors need not validate UTF-8 on every call).
    target_ascii: bool,
    /// When the application took the request, where the access log wants `$request_time`.
    arrived: Stamp,
    /// How long the upstream (proxy, FastCGI) took to answer: `$upstream_response_time`.
    upstream: Stamp,
}

/// Nanoseconds (0: not set), set through a shared reference by whoever learns them.
#[derive(Debug, Default)]
struct Stamp(std::sync::atomic::AtomicU64);

impl Clone for Stamp {
    fn clone(&self) -> Stamp {
        Stamp(std::sync::atomic::AtomicU64::new(self.get()))
    }
}

impl Stamp {
    fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn set(&self, ns: u64) {
        self.0.store(ns, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What [`Stamp`]s of instants count from: the first use in the process.
fn clock_base() -> std::time::Instant {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(std::time::Instant::now)
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// Whether the bytes of `head`'s target in `bytes` are all ASCII (false if the span is not
/// inside `bytes`): what [`Request::target_text`] relies on to read them without validation.
#[inline]
fn target_is_ascii(bytes: &[u8], head: &RequestHead) -> bool {
    let target = head.target_span();
    bytes
        .get(target.start as usize..target.end as usize)
        .is_some_and(<[u8]>::is_ascii)
}

impl Request {
    /// Wraps a head parsed from `bytes` (a `Vec<u8>`, or `Bytes` without a copy when it owns
    /// its whole allocation).
    pub(crate) fn new(
        bytes: impl Into<Vec<u8>>,
        head: RequestHead,
        peer: SocketAddr,
        local: SocketAddr,
    ) -> Request {
        Request::with_tls(bytes.into(), head, peer, local, None)
    }

    /// As [`Request::new`], with the connection's TLS session. Built whole as the caller's
    /// return value (no field set afterwards), so that the compiler can write it in place
    /// rather than copy it out (which it did, 216 bytes, when fields were set afterwards).
    #[inline]
    pub(crate) fn with_tls(
        bytes: Vec<u8>,
        head: RequestHead,
        peer: SocketAddr,
        local: SocketAddr,
        tls: Option<std::sync::Arc<TlsInfo>>,
    ) -> Request {
        let target_ascii = target_is_ascii(&bytes, &head);
        Request {
            target_ascii,
            bytes,
            head,
            peer,
            local,
            tls,
            arrived: Stamp::default(),
            upstream: Stamp::default(),
        }
    }

    /// Notes that the application takes the request now (`$request_time` counts from here).
    pub(crate) fn mark_arrival(&self) {
        let base = clock_base();
        self.arrived.set(nanos(
            std::time::Instant::now().saturating_duration_since(base),
        ));
    }

    /// Since [`Request::mark_arrival`], if it was marked.
    pub(crate) fn elapsed(&self) -> Option<std::time::Duration> {
        let at = self.arrived.get();
        (at != 0).then(|| {
            let at = clock_base() + std::time::Duration::from_nanos(at);
            std::time::Instant::now().saturating_duration_since(at)
        })
    }

    /// Records how long an upstream (a proxied server, a FastCGI application) took to answer
    /// this request, for `$upstream_response_time`.
    pub fn set_upstream_time(&self, d: std::time::Duration) {
        self.upstream.set(nanos(d));
    }

    /// What [`Request::set_upstream_time`] recorded.
    pub fn upstream_time(&self) -> Option<std::time::Duration> {
        let ns = self.upstream.get();
        (ns != 0).then(|| std::time::Duration::from_nanos(ns))
    }

    /// The text of `span`, a part of the request target (an invalid span or non-ASCII bytes,
    /// which the parser never yields, read as empty).
    fn target_text(&self, span: Span) -> &str {
        let target = self.head.target_span();
        let inside = target.start <= span.start && span.start <= span.end && span.end <= target.end;
        if self.target_ascii && inside {
            let b = span.get(&self.bytes);
            // SAFETY: `target_ascii` says `bytes[target]` (in bounds) is all ASCII, and `span`
            // lies within it. The flag is computed (`target_is_ascii`) wherever bytes and head
            // are set: in `with_tls`, and in `refill`, the one place that puts other bytes in;
            // `release` and `take_storage` only empty them, which adds no byte. ASCII is valid
            // UTF-8.
            return unsafe { std::str::from_utf8_unchecked(b) };
        }
        self.bytes
            .get(span.start as usize..span.end as usize)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// True if the request came over HTTPS (a TLS listener).
    pub fn is_https(&self) -> bool {
        self.tls.is_some()
    }

    /// What the connection's TLS handshake settled (SNI name, ALPN, version); `None` on
    /// plain HTTP.
    pub fn tls(&self) -> Option<&TlsInfo> {
        self.tls.as_deref()
    }

    /// A request made by weft on behalf of `self` (a CGI local redirect, an error page):
    /// `self`'s client, local address and TLS session.
    pub(crate) fn derived(&self, bytes: impl Into<Vec<u8>>, head: RequestHead) -> Request {
        let mut head = head;
        if self.version() == Version::Http2 {
            // Made from an HTTP/2 request's head written as HTTP/1.1: the stream it answers
            // is still HTTP/2.
            head.set_version(Version::Http2);
        }
        let mut r = Request::new(bytes, head, self.peer, self.local);
        r.tls = self.tls.clone();
        r
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.head.method()
    }

    /// The method's text (`"GET"`, or an extension method such as `"ECHO"`).
    pub fn method_str(&self) -> &str {
        self.head.method_str(&self.bytes)
    }

    /// The request target exactly as sent.
    pub fn target(&self) -> &str {
        self.target_text(self.head.target_span())
    }

    /// The path of the target, still percent-encoded, without the query (`/` for an
    /// absolute-form target with an empty path; empty for `*` and CONNECT targets).
    pub fn path(&self) -> &str {
        let path = self.head.path_span();
        if path.is_empty() {
            // No bytes to slice: the head knows what an empty path reads as (`/` for an
            // absolute-form target, nothing for `*` and CONNECT).
            return self.head.path(&self.bytes);
        }
        self.target_text(Span {
            start: path.start,
            end: self.head.query_at(),
        })
    }

    /// The query string without `?`, if any.
    pub fn query(&self) -> Option<&str> {
        let path = self.head.path_span();
        let query_at = self.head.query_at();
        (query_at < path.end).then(|| {
            self.target_text(Span {
                start: query_at + 1,
                end: path.end,
            })
        })
    }

    /// The protocol version.
    pub fn version(&self) -> Version {
        self.head.version()
    }

    /// The host the request is for, as sent (`host[:port]`): an absolute-form target's
    /// authority, which replaces the Host field (RFC 9112 §3.2.2: `GET http://other/x` with
    /// `Host: a` is for `other`), else the Host field; `None` when neither names one (an empty
    /// Host, or HTTP/1.0 without it). Routing, forwarding, CGI and logs read the host here,
    /// never from the Host field itself.
    pub fn host(&self) -> Option<&str> {
        let span = self.head.effective_host_span()?;
        std::str::from_utf8(span.get(&self.bytes))
            .ok()
            .filter(|h| !h.is_empty())
    }

    /// [`Request::host`] as sent, bytes and all; empty if the request names no host.
    pub fn host_bytes(&self) -> &[u8] {
        self.head
            .effective_host_span()
            .map_or(&[][..], |span| span.get(&self.bytes))
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.head.header(&self.bytes, name)
    }

    /// The first value of header `name` as text, if it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The precondition fields (RFC 9110 §13.1) and `Range`, found in one pass over the
    /// fields without allocating.
    pub fn conditions(&self) -> Conditions<'_> {
        let mut c = Conditions::default();
        for h in self.head.headers() {
            c.note(h.name.get(&self.bytes), h.value.get(&self.bytes));
        }
        c
    }

    /// True if the request carries one of the five precondition fields (`If-Match`,
    /// `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`, `If-Range`); false is
    /// `conditions().is_unconditional()` without building the conditions.
    pub fn has_preconditions(&self) -> bool {
        // The parser noted it as it read the fields.
        self.head.has_preconditions()
    }

    /// Every header as (name, value), in the order received.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.head.headers().iter().map(|h| {
            (
                std::str::from_utf8(h.name.get(&self.bytes)).unwrap_or(""),
                h.value.get(&self.bytes),
            )
        })
    }

    /// A request with nothing in it, for [`Request::refill`] to fill in place.
    pub(crate) fn blank() -> Request {
        let nowhere = SocketAddr::from(([0, 0, 0, 0], 0));
        Request::with_tls(Vec::new(), RequestHead::default(), nowhere, nowhere, None)
    }

    /// Makes `self` the request whose head `parser` just completed from `bytes`, reusing this
    /// request's storage: the parser's head and this one's change places (the old one, cleared,
    /// is what the parser fills next) and the bytes are copied into this request's own buffer.
    /// What [`Request::with_tls`] builds, without a new request built and moved per head.
    pub(crate) fn refill(
        &mut self,
        parser: &mut weft_http::Parser,
        bytes: &[u8],
        peer: SocketAddr,
        local: SocketAddr,
        tls: Option<&std::sync::Arc<TlsInfo>>,
    ) {
        parser.take_head_into(&mut self.head);
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.target_ascii = target_is_ascii(&self.bytes, &self.head);
        self.peer = peer;
        self.local = local;
        self.arrived.set(0);
        self.upstream.set(0);
        // Compared first: on a connection the session does not change, so this is no
        // reference count update per request.
        if self.tls.as_ref().map(std::sync::Arc::as_ptr) != tls.map(std::sync::Arc::as_ptr) {
            self.tls = tls.cloned();
        }
    }

    /// Lets go of what a request kept between uses of [`Request::refill`] that should not
    /// outlive its connection (the TLS session's facts), and of a head buffer grown past
    /// `max_bytes`.
    pub(crate) fn release(&mut self, max_bytes: usize) {
        self.tls = None;
        if self.bytes.capacity() > max_bytes {
            self.bytes = Vec::new();
        }
    }

    /// Takes the storage of the head's fields and of its bytes out (the connection gives it
    /// back to its parser and read buffer), leaving the request empty.
    #[inline]
    pub(crate) fn take_storage(&mut self) -> (Vec<weft_http::Header>, Vec<u8>) {
        (self.head.take_fields(), std::mem::take(&mut self.bytes))
    }

    /// The parsed head (framing, expectations, spans).
    pub fn head(&self) -> &RequestHead {
        &self.head
    }

    /// The client's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The address the request arrived on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// True if the client allows the connection to stay open.
    pub fn keep_alive(&self) -> bool {
        self.head.keep_alive()
    }
}

/// What the TLS handshake settled, kept per connection in `ConnInfo::tls`.
#[derive(Debug, Clone, Default)]
pub struct TlsInfo {
    /// The host name the client asked for (SNI), lower case; `None` when it sent none. The
    /// virtual-host check (`Host` against SNI, 421) reads it here.
    pub sni: Option<String>,
    /// The application protocol agreed by ALPN (`http/1.1`), if the client offered any.
    pub alpn: Option<Vec<u8>>,
    /// `TLSv1.3` or `TLSv1.2`.
    pub version: &'static str,
    /// The handshake resumed an earlier session (ticket or cache).
    pub resumed: bool,
    /// The client's certificate (`[tls] verify_client`).
    pub client: ClientAuth,
}

/// What a connection's client certificate said (mutual TLS, `[tls] verify_client`).
#[derive(Debug, Clone, Default)]
pub enum ClientAuth {
    /// None was asked for (`verify_client = "off"`).
    #[default]
    NotAsked,
    /// One was asked for and the client sent none.
    None,
    /// One was sent and verified against `[tls] client_ca`.
    Verified(std::sync::Arc<ClientCert>),
}

impl ClientAuth {
    /// `SSL_CLIENT_VERIFY` as Apache and nginx (`$ssl_client_verify`) give it: `SUCCESS` or
    /// `NONE`; `None` when no certificate was asked for.
    pub fn verify(&self) -> Option<&'static str> {
        match self {
            ClientAuth::NotAsked => None,
            ClientAuth::None => Some("NONE"),
            ClientAuth::Verified(_) => Some("SUCCESS"),
        }
    }

    /// The verified certificate, if any.
    pub fn cert(&self) -> Option<&ClientCert> {
        match self {
            ClientAuth::Verified(c) => Some(c),
            _ => None,
        }
    }
}

/// A verified client certificate, as the CGI variables, the proxy's headers and the access
/// log give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Subject, RFC 4514 (`SSL_CLIENT_S_DN`, `$ssl_client_s_dn`).
    pub subject: String,
    /// Issuer, RFC 4514 (`SSL_CLIENT_I_DN`, `$ssl_client_i_dn`).
    pub issuer: String,
    /// Serial number, upper-case hex (`SSL_CLIENT_M_SERIAL`, `$ssl_client_serial`).
    pub serial: String,
    /// SHA-1 of the certificate's DER, lower-case hex (`$ssl_client_fingerprint`).
    pub fingerprint: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> Request {
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        p.parse(raw.as_bytes()).unwrap().expect("a whole head");
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        Request::new(raw.as_bytes().to_vec(), p.take_head(), addr, addr)
    }

    #[test]
    fn path_query_and_target_of_every_form() {
        let cases = [
            (
                "GET /a/b?x=1&y HTTP/1.1\r\nHost: h\r\n\r\n",
                "/a/b",
                Some("x=1&y"),
                "/a/b?x=1&y",
            ),
            ("GET /a HTTP/1.1\r\nHost: h\r\n\r\n", "/a", None, "/a"),
            ("GET /? HTTP/1.1\r\nHost: h\r\n\r\n", "/", Some(""), "/?"),
            (
                "GET /a?b?c HTTP/1.1\r\nHost: h\r\n\r\n",
                "/a",
                Some("b?c"),
                "/a?b?c",
            ),
            (
                "GET http://h HTTP/1.1\r\nHost: h\r\n\r\n",
                "/",
                None,
                "http://h",
            ),
            (
                "GET http://h/p?q HTTP/1.1\r\nHost: h\r\n\r\n",
                "/p",
                Some("q"),
                "http://h/p?q",
            ),
            (
                "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
                "",
                None,
                "h:443",
            ),
            ("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "", None, "*"),
        ];
        for (raw, path, query, target) in cases {
            let r = parsed(raw);
            assert_eq!(r.path(), path, "{raw:?}");
            assert_eq!(r.query(), query, "{raw:?}");
            assert_eq!(r.target(), target, "{raw:?}");
        }
    }

    #[test]
    fn method_names_known_and_extension() {
        assert_eq!(
            parsed("GET / HTTP/1.1\r\nHost: h\r\n\r\n").method_str(),
            "GET"
        );
        assert_eq!(
            parsed("PATCH / HTTP/1.1\r\nHost: h\r\n\r\n").method_str(),
            "PATCH"
        );
        assert_eq!(
            parsed("ECHO / HTTP/1.1\r\nHost: h\r\n\r\n").method_str(),
            "ECHO"
        );
    }

    /// A request refilled in place reads exactly as one built new from the same head: nothing
    /// of the request before shows (fields, query, peer, TLS session), and `release` lets go
    /// of the session and of an oversized buffer.
    #[test]
    fn a_refilled_request_reads_as_a_new_one() {
        use std::sync::Arc;
        let heads: [&[u8]; 3] = [
            b"GET /one?x=1 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
            b"OPTIONS * HTTP/1.0\r\n\r\n",
            b"ECHO /two HTTP/1.1\r\nHost: b.example\r\n\r\n",
        ];
        let peers: [SocketAddr; 3] = [
            "10.0.0.1:1000".parse().unwrap(),
            "[::1]:2000".parse().unwrap(),
            "10.0.0.3:3000".parse().unwrap(),
        ];
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let tls = Arc::new(TlsInfo {
            sni: Some("b.example".into()),
            alpn: None,
            version: "TLSv1.3",
            resumed: false,
            client: Default::default(),
        });
        let sessions = [None, Some(&tls), Some(&tls)];
        let mut parser = weft_http::Parser::new(weft_http::Limits::default());
        let mut req = Request::blank();
        for round in 0..2 {
            for ((raw, peer), session) in heads.iter().zip(peers).zip(sessions) {
                parser.parse(raw).unwrap().expect("a whole head");
                let mut fresh_parser = weft_http::Parser::new(weft_http::Limits::default());
                fresh_parser.parse(raw).unwrap();
                let mut fresh = Request::new(raw.to_vec(), fresh_parser.take_head(), peer, local);
                fresh.tls = session.cloned();
                req.refill(&mut parser, raw, peer, local, session);
                let what = format!("round {round}: {:?}", String::from_utf8_lossy(raw));
                assert_eq!(req.method_str(), fresh.method_str(), "{what}");
                assert_eq!(req.target(), fresh.target(), "{what}");
                assert_eq!(req.path(), fresh.path(), "{what}");
                assert_eq!(req.query(), fresh.query(), "{what}");
                assert_eq!(req.version(), fresh.version(), "{what}");
                assert_eq!(req.host(), fresh.host(), "{what}");
                assert_eq!(req.keep_alive(), fresh.keep_alive(), "{what}");
                assert_eq!(
                    req.headers().collect::<Vec<_>>(),
                    fresh.headers().collect::<Vec<_>>(),
                    "{what}"
                );
                assert_eq!(req.peer_addr(), peer, "{what}");
                assert_eq!(req.local_addr(), local, "{what}");
                assert_eq!(
                    req.tls().map(|t| t.version),
                    session.map(|t| t.version),
                    "{what}"
                );
                assert_eq!(req.is_https(), session.is_some(), "{what}");
            }
        }
        assert_eq!(
            Arc::strong_count(&tls),
            2,
            "the request holds the session once"
        );
        req.bytes.reserve(10_000);
        req.release(8 * 1024);
        assert_eq!(Arc::strong_count(&tls), 1, "release kept the session");
        assert!(
            req.bytes.capacity() <= 8 * 1024,
            "release kept an oversized buffer"
        );
    }

    #[test]
    fn a_span_outside_the_target_reads_through_utf8_validation() {
        // A head that was not parsed from these bytes (as `derived` could be given): the
        // text accessors neither trust the ASCII check nor panic.
        let r = parsed("GET /abc HTTP/1.1\r\nHost: h\r\n\r\n");
        let span = Span { start: 0, end: 3 };
        assert_eq!(r.target_text(span), "GET");
        let far = Span {
            start: 1000,
            end: 1004,
        };
        assert_eq!(r.target_text(far), "");
    }
}
