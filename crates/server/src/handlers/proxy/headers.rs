//! The header fields that cross the proxy, both ways: hop-by-hop fields removed,
//! `X-Forwarded-*` and `Via` added, `Host` chosen, the body's framing written once.

use weft_http::response::{valid_name, valid_value};
use weft_http::{BodyFraming, ResponseHead, TargetForm, Version};

use super::client::Upstream;
use crate::config::ProxyHost;
use crate::response::Response;
use crate::Request;

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

/// The protocol a request asks to switch to (its `Upgrade` value), if it asks: HTTP/1.1,
/// `upgrade` among its `Connection` tokens, an `Upgrade` field, and no body (a WebSocket's
/// handshake is a GET). Only such a request is forwarded with its `Upgrade`, and only its `101`
/// turns the connection into a tunnel.
pub(super) fn upgrade_asked(req: &Request) -> Option<&[u8]> {
    if req.version() != Version::Http11 || req.head().framing() != BodyFraming::None {
        return None;
    }
    let asks = connection_tokens(
        req.headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .map(|(_, v)| v),
    )
    .iter()
    .any(|t| t == "upgrade");
    let value = req.header("Upgrade")?.trim_ascii();
    (asks && !value.is_empty()).then_some(value)
}

/// The `Upgrade` value of a response head (`raw`: the bytes it was parsed from).
pub(super) fn upgrade_of<'a>(head: &ResponseHead, raw: &'a [u8]) -> Option<&'a [u8]> {
    head.headers()
        .iter()
        .find(|h| h.name.get(raw).eq_ignore_ascii_case(b"upgrade"))
        .map(|h| h.value.get(raw).trim_ascii())
        .filter(|v| !v.is_empty())
}

impl Upstream {
    /// The request head as it goes upstream.
    /// `framing`: the body's as it goes upstream (a buffered body has a length).
    pub(super) fn request_head(&self, req: &Request, framing: BodyFraming) -> Vec<u8> {
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
            // nginx's `underscores_in_headers off`: see `ProxyConfig::underscores_in_headers`.
            if (!self.underscores && name.contains('_'))
                || is_hop_by_hop(name, &named)
                // This hop's word on the client certificate (below), never the client's.
                || is_client_cert_field(name)
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
        client_cert_fields(&mut h, req);
        append_list(&mut via, via_entry(req.version()).as_bytes());
        field(&mut h, "Via", &via);
        // The one hop-by-hop pair that goes on: the client's wish to switch protocols (nginx
        // with `proxy_set_header Upgrade $http_upgrade; Connection "upgrade"`).
        if let Some(protocol) = upgrade_asked(req) {
            h.extend_from_slice(b"Connection: upgrade\r\n");
            field(&mut h, "Upgrade", protocol);
        }
        h.extend_from_slice(b"\r\n");
        h
    }
}

/// Whether `name` is one of the fields that carry the client certificate to the upstream
/// (`X-SSL-Client-*`): a client's own are dropped, whatever the listener, so an upstream that
/// trusts them hears them from weft only.
fn is_client_cert_field(name: &str) -> bool {
    name.len() >= 13 && name[..13].eq_ignore_ascii_case("x-ssl-client-")
}

/// What the TLS handshake said of the client's certificate, for the upstream (`[tls]
/// verify_client`; the fields nginx configurations pass with `proxy_set_header`):
/// `X-SSL-Client-Verify` (`SUCCESS` or `NONE`), and for a verified certificate
/// `X-SSL-Client-S-DN`, `X-SSL-Client-I-DN` (RFC 4514) and `X-SSL-Client-Serial`.
fn client_cert_fields(h: &mut Vec<u8>, req: &Request) {
    let Some(client) = req.tls().map(|t| &t.client) else {
        return;
    };
    if let Some(v) = client.verify() {
        field(h, "X-SSL-Client-Verify", v.as_bytes());
    }
    if let Some(c) = client.cert() {
        field(h, "X-SSL-Client-S-DN", c.subject.as_bytes());
        field(h, "X-SSL-Client-I-DN", c.issuer.as_bytes());
        field(h, "X-SSL-Client-Serial", c.serial.as_bytes());
    }
}

/// An upstream's `103 Early Hints` for the client: its fields less the hop-by-hop ones.
pub(super) fn early_hints(head: &ResponseHead, raw: &[u8]) -> Vec<u8> {
    let named = connection_tokens(
        head.headers()
            .iter()
            .filter(|h| h.name.get(raw).eq_ignore_ascii_case(b"connection"))
            .map(|h| h.value.get(raw)),
    );
    let mut out = b"HTTP/1.1 103 Early Hints\r\n".to_vec();
    for h in head.headers() {
        let (name, value) = (h.name.get(raw), h.value.get(raw));
        let name_text = std::str::from_utf8(name).unwrap_or("");
        if is_hop_by_hop(name_text, &named) || name_text.eq_ignore_ascii_case("content-length") {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The client's response head: the upstream's status and fields (`raw`: the bytes `head` was
/// parsed from) less the hop-by-hop ones and `Content-Length` (the driver writes the framing),
/// and this hop appended to `Via`.
pub(super) fn response_head(head: &ResponseHead, raw: &[u8]) -> Response {
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
    resp
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
        Version::Http2 => "2 weft",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
