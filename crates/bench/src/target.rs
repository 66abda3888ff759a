//! What to request: an `http://` or `https://` URL resolved once to a socket address, and the
//! request bytes encoded once, so that sending a request is a single write of a shared buffer.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// One URL to load, with its request encoded.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Where to connect (the first address the host resolved to).
    pub addr: SocketAddr,
    /// The whole request: head and body.
    pub request: Arc<[u8]>,
    /// The request is HEAD: its response has no body.
    pub head: bool,
    /// An `https://` URL: the name to verify and the client configuration.
    pub tls: Option<crate::tls::TlsTarget>,
}

/// How to build each request.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Method token (`GET`, `POST`, ...).
    pub method: String,
    /// Extra header lines, `Name: value` each.
    pub headers: Vec<String>,
    /// Request body, sent with a `Content-Length`.
    pub body: Option<Vec<u8>>,
    /// Ask the server to close the connection after the response.
    pub close: bool,
}

impl Default for RequestSpec {
    fn default() -> Self {
        RequestSpec {
            method: "GET".into(),
            headers: Vec::new(),
            body: None,
            close: false,
        }
    }
}

/// A URL or header that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// `http://host[:port][/path[?query]]` split into authority, host:port to resolve, and the
/// request target.
pub fn split_url(url: &str) -> Result<(&str, String, &str), BadInput> {
    match split_any_url(url)? {
        (false, authority, hostport, path) => Ok((authority, hostport, path)),
        (true, ..) => Err(BadInput(format!("{url}: only http:// URLs are supported"))),
    }
}

/// `http://` or `https://host[:port][/path[?query]]` split into whether it is https,
/// authority, host:port to resolve (port 80 or 443 by default), and the request target.
pub fn split_any_url(url: &str) -> Result<(bool, &str, String, &str), BadInput> {
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) => (true, rest),
        (None, None) => {
            return Err(BadInput(format!(
                "{url}: only http:// and https:// URLs are supported"
            )))
        }
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(BadInput(format!(
            "{url}: no host, or user info (unsupported)"
        )));
    }
    let has_port = match authority.rfind(':') {
        // `[::1]` alone has colons inside the brackets only.
        Some(i) => {
            !authority.ends_with(']') && authority[i + 1..].bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    };
    let hostport = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    // A target of only a query ("http://h?x") gets its "/" when the request is encoded.
    let path = match path.split('#').next() {
        Some("") | None => "/",
        Some(p) => p,
    };
    Ok((tls, authority, hostport, path))
}

/// Encodes the request for `target` on `authority`.
pub fn encode_request(spec: &RequestSpec, authority: &str, target: &str) -> Vec<u8> {
    let has = |name: &str| {
        spec.headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let query = if target.starts_with('/') { "" } else { "/" };
    let mut r = format!("{} {query}{target} HTTP/1.1\r\n", spec.method);
    if !has("host") {
        r.push_str(&format!("Host: {authority}\r\n"));
    }
    for h in &spec.headers {
        r.push_str(h.trim_end_matches(['\r', '\n']));
        r.push_str("\r\n");
    }
    if let Some(body) = &spec.body {
        if !has("content-length") {
            r.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
    }
    if spec.close && !has("connection") {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    let mut bytes = r.into_bytes();
    if let Some(body) = &spec.body {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// Checks a `-H` argument: `Name: value` with a token name.
pub fn check_header(h: &str) -> Result<(), BadInput> {
    let bad = || BadInput(format!("header {h:?}: expected 'Name: value'"));
    let (name, value) = h.split_once(':').ok_or_else(bad)?;
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) || value.contains(['\r', '\n']) {
        return Err(bad());
    }
    Ok(())
}

/// The host of an authority: without its port (an IPv6 literal keeps its brackets).
fn host_of(authority: &str) -> &str {
    match authority.rfind(':') {
        Some(i)
            if !authority.ends_with(']')
                && authority[i + 1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &authority[..i]
        }
        _ => authority,
    }
}

impl Target {
    /// Parses and resolves `url`, encoding its request from `spec`. An `https://` URL gets the
    /// default client configuration ([`crate::tls::default_config`]: the system's CAs);
    /// [`Target::with_tls`] chooses another.
    pub fn new(url: &str, spec: &RequestSpec) -> Result<Target, BadInput> {
        Target::with_tls(url, spec, None)
    }

    /// As [`Target::new`], an `https://` URL with `config` when given.
    pub fn with_tls(
        url: &str,
        spec: &RequestSpec,
        config: Option<&std::sync::Arc<rustls::ClientConfig>>,
    ) -> Result<Target, BadInput> {
        let (tls, authority, hostport, path) = split_any_url(url)?;
        let tls = if tls {
            Some(crate::tls::TlsTarget {
                name: crate::tls::server_name(host_of(authority))?,
                config: match config {
                    Some(c) => c.clone(),
                    None => crate::tls::default_config()?,
                },
            })
        } else {
            None
        };
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| BadInput(format!("{url}: cannot resolve {hostport}: {e}")))?
            .next()
            .ok_or_else(|| BadInput(format!("{url}: {hostport} resolved to nothing")))?;
        Ok(Target {
            url: url.to_string(),
            addr,
            request: encode_request(spec, authority, path).into(),
            head: spec.method.eq_ignore_ascii_case("HEAD"),
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:8080/echo?x=1").unwrap(),
            ("127.0.0.1:8080", "127.0.0.1:8080".into(), "/echo?x=1")
        );
        assert_eq!(
            split_url("http://localhost").unwrap(),
            ("localhost", "localhost:80".into(), "/")
        );
        assert_eq!(
            split_url("http://[::1]:81/a#frag").unwrap(),
            ("[::1]:81", "[::1]:81".into(), "/a")
        );
        assert_eq!(split_url("http://[::1]").unwrap().1, "[::1]:80");
        assert!(split_url("https://x/").is_err());
        assert_eq!(
            split_any_url("https://x/a").unwrap(),
            (true, "x", "x:443".into(), "/a")
        );
        assert_eq!(
            split_any_url("https://[::1]:8443").unwrap(),
            (true, "[::1]:8443", "[::1]:8443".into(), "/")
        );
        assert!(!split_any_url("http://x/").unwrap().0);
        assert!(split_any_url("ftp://x/").is_err());
        assert_eq!(host_of("[::1]:8443"), "[::1]");
        assert_eq!(host_of("[::1]"), "[::1]");
        assert_eq!(host_of("localhost:1"), "localhost");
        assert_eq!(host_of("localhost"), "localhost");
        assert!(split_url("http:///x").is_err());
    }

    #[test]
    fn requests() {
        let spec = RequestSpec::default();
        assert_eq!(
            encode_request(&spec, "h:1", "/echo"),
            b"GET /echo HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
        let spec = RequestSpec {
            method: "POST".into(),
            headers: vec!["Host: other".into(), "X-A: b".into()],
            body: Some(b"data".to_vec()),
            close: true,
        };
        assert_eq!(
            encode_request(&spec, "h:1", "/p"),
            &b"POST /p HTTP/1.1\r\nHost: other\r\nX-A: b\r\nContent-Length: 4\r\nConnection: close\r\n\r\ndata"[..]
        );
    }

    #[test]
    fn headers() {
        assert!(check_header("X-Test: 1").is_ok());
        assert!(check_header("X-Test:").is_ok());
        assert!(check_header("no colon").is_err());
        assert!(check_header("Bad Name: 1").is_err());
        assert!(check_header("X: a\r\nInjected: 1").is_err());
    }
}
