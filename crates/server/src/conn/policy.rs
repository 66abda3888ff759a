//! What the connection adds to HTTP from the listener it came through: a plain listener with
//! `redirect_https` answers with a 308 to the same URL over https ([`redirect`]), and a
//! connection over TLS gets the `[tls] hsts` header on every response ([`extra_headers`]).
//! Ahead of both, and of sites, locations, access rules and rate limits: `[acme]`'s HTTP-01
//! answers (a CA's validation must not be redirected, refused or limited away).

use std::sync::atomic::{AtomicU16, Ordering::Relaxed};

use crate::app::App;
use crate::response::Response;
use crate::Request;

use super::ConnInfo;

/// The port a plain listener's `redirect_https` sends clients to: the first TLS listener's
/// (set when it is bound, so port 0 resolves).
static HTTPS_PORT: AtomicU16 = AtomicU16::new(0);

/// Records the bound port of a TLS listener (the first one wins).
pub(crate) fn note_https_port(port: u16) {
    let _ = HTTPS_PORT.compare_exchange(0, port, Relaxed, Relaxed);
}

/// Header lines every response on `info`'s connection gets from the TLS settings (HSTS).
pub(crate) fn extra_headers<'a>(app: &'a App, info: &ConnInfo) -> &'a [u8] {
    match &app.tls {
        Some(t) if info.tls.get().is_some() => &t.hsts_line,
        _ => b"",
    }
}

/// On a plain listener with `redirect_https`: the 308 to the same URL over https, with
/// whether the connection may stay open set in `keep_alive`, as `conn::handle` sets it (a
/// request body is not read: the connection closes after the answer, as nginx's `return 308`
/// discards it). `None` elsewhere, `keep_alive` untouched.
#[inline]
pub(crate) fn redirect(
    app: &App,
    info: &ConnInfo,
    req: &Request,
    keep_alive: &mut bool,
) -> Option<Response> {
    if app.acme_http.is_some() {
        if let Some(answer) = acme_http01(app, req, keep_alive) {
            return Some(answer);
        }
    }
    // Meant to be inlined: the usual answer (no redirect on this listener) costs no call.
    if !info.listener.redirect_https() || info.tls.get().is_some() {
        return None;
    }
    redirect_to_https(app, info, req, keep_alive)
}

/// `[acme]`'s answer to an HTTP-01 validation of a token it waits on (RFC 8555 §8.3: the key
/// authorization, as text), with `keep_alive` set as [`redirect`] sets it; `None` for any
/// other request, and for a token no order waits on (the request is served as usual, so a
/// certbot beside weft still works).
#[cold]
fn acme_http01(app: &App, req: &Request, keep_alive: &mut bool) -> Option<Response> {
    let path = req.path();
    if !path.starts_with(crate::acme::serve::HTTP01_PREFIX)
        || !matches!(
            req.method(),
            weft_http::Method::Get | weft_http::Method::Head
        )
    {
        return None;
    }
    let answer = app.acme_http.as_ref()?.answer(path)?;
    log::info!(
        "{}: HTTP-01 validation of {path}: answered",
        req.peer_addr()
    );
    let no_body = matches!(
        req.head().framing(),
        weft_http::BodyFraming::None | weft_http::BodyFraming::Length(0)
    );
    let mut resp = Response::text(200, answer).header("Cache-Control", "no-store");
    if !no_body {
        resp.close = true;
    }
    *keep_alive = no_body && req.keep_alive();
    Some(resp)
}

/// Paths a plain listener with `redirect_https` still serves over plain HTTP: ACME's
/// HTTP-01 challenges (a certificate is fetched over port 80 before there is one to redirect
/// to, as nginx setups keep a `location /.well-known/acme-challenge/` in the port-80 server).
const PLAIN_PREFIXES: &[&str] = &["/.well-known/acme-challenge/"];

/// The 308 of [`redirect`], and whether the connection may stay open (`keep_alive`); `None`
/// for the health check (a load balancer probes the port it balances, and counts a 3xx as
/// down) and ACME challenges ([`PLAIN_PREFIXES`]).
#[cold]
fn redirect_to_https(
    app: &App,
    info: &ConnInfo,
    req: &Request,
    keep_alive: &mut bool,
) -> Option<Response> {
    let path = req.path();
    if app.cfg.health.is(path) || PLAIN_PREFIXES.iter().any(|p| path.starts_with(p)) {
        return None;
    }
    // The effective host: an absolute-form target's authority before the Host field.
    let host = req
        .host()
        .map(strip_port)
        .filter(|h| !h.is_empty() && h.bytes().all(host_byte))
        .map_or_else(|| url_host(info.local.ip()), str::to_string);
    let port = match HTTPS_PORT.load(Relaxed) {
        0 | 443 => String::new(),
        p => format!(":{p}"),
    };
    // The path and query as sent (still percent-encoded), of an origin-form or absolute-form
    // target alike; `*` (OPTIONS) and authority-form (CONNECT) go to `/`.
    let path = match (path, req.query()) {
        (p, _) if !p.starts_with('/') => "/".to_string(),
        (p, Some(q)) => format!("{p}?{q}"),
        (p, None) => p.to_string(),
    };
    let mut resp = Response::error(308).header("Location", format!("https://{host}{port}{path}"));
    let no_body = matches!(
        req.head().framing(),
        weft_http::BodyFraming::None | weft_http::BodyFraming::Length(0)
    );
    if !no_body {
        resp.close = true;
    }
    *keep_alive = no_body && req.keep_alive();
    Some(resp)
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Bytes a host in a Location may hold (anything else and the local address is used).
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':' | b'_')
}

fn url_host(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::strip_port;

    #[test]
    fn strip_port_keeps_ipv6_brackets() {
        assert_eq!(strip_port("example.com:8080"), "example.com");
        assert_eq!(strip_port("example.com"), "example.com");
        assert_eq!(strip_port("[::1]:8080"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
    }
}
