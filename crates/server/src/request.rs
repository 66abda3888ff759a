//! The request a handler sees: an owned copy of the parsed head plus connection facts.

use std::net::SocketAddr;

use weft_http::conditional::Conditions;
use weft_http::{Method, RequestHead, Version};

/// One parsed request. Owns its head bytes, so it can outlive the connection's read buffer
/// (the pipeline model passes it between stages).
#[derive(Debug, Clone)]
pub struct Request {
    bytes: Vec<u8>,
    head: RequestHead,
    peer: SocketAddr,
    local: SocketAddr,
    /// What the connection's TLS handshake settled; `None` on plain HTTP.
    tls: Option<std::sync::Arc<crate::tls::TlsInfo>>,
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
        Request {
            bytes: bytes.into(),
            head,
            peer,
            local,
            tls: None,
        }
    }

    /// True if the request came over HTTPS (a TLS listener).
    pub fn is_https(&self) -> bool {
        self.tls.is_some()
    }

    /// What the connection's TLS handshake settled (SNI name, ALPN, version); `None` on
    /// plain HTTP.
    pub fn tls(&self) -> Option<&crate::tls::TlsInfo> {
        self.tls.as_deref()
    }

    /// Marks the request as received over the TLS session `tls` described.
    pub(crate) fn set_tls(&mut self, tls: Option<std::sync::Arc<crate::tls::TlsInfo>>) {
        self.tls = tls;
    }

    /// A request made by weft on behalf of `self` (a CGI local redirect, an error page):
    /// `self`'s client, local address and TLS session.
    pub(crate) fn derived(&self, bytes: impl Into<Vec<u8>>, head: RequestHead) -> Request {
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
        self.head.target(&self.bytes)
    }

    /// The path of the target, still percent-encoded, without the query (`/` for an
    /// absolute-form target with an empty path; empty for `*` and CONNECT targets).
    pub fn path(&self) -> &str {
        let p = self.head.path(&self.bytes);
        p.split_once('?').map_or(p, |(path, _)| path)
    }

    /// The query string without `?`, if any.
    pub fn query(&self) -> Option<&str> {
        self.head.path(&self.bytes).split_once('?').map(|(_, q)| q)
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

    /// Every header as (name, value), in the order received.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.head.headers().iter().map(|h| {
            (
                std::str::from_utf8(h.name.get(&self.bytes)).unwrap_or(""),
                h.value.get(&self.bytes),
            )
        })
    }

    /// Takes the parsed head and its bytes out (the connection gives their storage back to its
    /// parser and read buffer).
    pub(crate) fn into_parts(self) -> (RequestHead, Vec<u8>) {
        (self.head, self.bytes)
    }

    /// The parsed head (framing, expectations, spans).
    pub fn head(&self) -> &RequestHead {
        &self.head
    }

    /// The client's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Replaces the client's address (with the one trusted proxies name).
    pub(crate) fn set_peer(&mut self, peer: SocketAddr) {
        self.peer = peer;
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
