//! End-to-end request vectors written by others, sent to the real server:
//!
//! - Apache httpd's `t/apache/http_strict.t` (Apache-2.0): each raw request with the verdict
//!   httpd gives in `HttpProtocolOptions Strict` mode.
//! - nodejs/llhttp's `test/request/*.md` (MIT), rows of type `request` (strict mode): each raw
//!   request with the number of messages llhttp parsed completely and the error it stopped at.
//!
//! Where weft answers differently, the difference is listed below with its reason, and each
//! test asserts that the set of differences is exactly that list: a new difference, or a
//! listed one that went away, fails the test.
//!
//! Every row is sent on its own connection, which is then half-closed, so the server sees the
//! end of the input instead of waiting for a timeout.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{Conn, Model, ReadError, Server};

per_model! {
    apache_http_strict_vectors,
    llhttp_request_vectors,
    host_is_added_only_where_missing,
}

const APACHE: &str = include_str!("../vectors/apache-httpd-http-strict.json");
const LLHTTP: &str = include_str!("../vectors/llhttp-request.json");

/// Apache rows weft answers differently from httpd in strict mode: request → reason.
const APACHE_DISAGREEMENTS: &[(&str, &str)] = &[
    (
        "GET / HTTP/2.0\r\nHost: localhost\r\n\r\n",
        "httpd answers an HTTP/2.0 request line as if it were 1.1; weft answers 505 HTTP Version \
         Not Supported, as RFC 9110 §15.6.6 and §6.2 intend for a major version it does not \
         implement over this framing",
    ),
    (
        "GET / HTTP/1.0\r\r",
        "httpd drops the connection; weft answers 400 (a bare CR is malformed, RFC 9112 §2.2) \
         because a client that gets a status learns why, and the connection still closes",
    ),
    (
        "GET /\r\n",
        "an HTTP/0.9 request: httpd strict drops the connection; weft does not speak HTTP/0.9 \
         and answers 400 in HTTP/1.1 before closing (RFC 9112 §2.3 leaves 0.9 support optional)",
    ),
];

/// Why Apache rows are not sent.
fn apache_skip_reason(request: &str) -> Option<&'static str> {
    if request.starts_with('R') {
        return Some(
            "an `R` row is a response header line that a CGI script must emit; it needs a CGI \
             fixture that weft does not have yet",
        );
    }
    if request.contains("/regression-header") {
        return Some(
            "needs httpd's regression-header CGI fixture (an invalid CGI response header)",
        );
    }
    None
}

/// llhttp rows (`file / name`) weft answers differently from llhttp's strict mode → reason.
const LLHTTP_DISAGREEMENTS: &[(&str, &str)] = &[
    (
        "content-length.md / Content-Length reset when no body is received",
        "an artifact of llhttp's harness: the case runs with `skipBody` (as for a response to \
         HEAD), so llhttp counts two messages; on the wire the second head is the first \
         request's 123-byte body, and weft answers the one PUT",
    ),
    (
        "method.md / M-SEARCH request",
        "`M-SEARCH * HTTP/1.1` (SSDP): weft allows asterisk-form only with OPTIONS \
         (RFC 9112 §3.2.4) and answers 400",
    ),
    (
        "method.md / SOURCE request with ICE",
        "ICE/1.0 is not HTTP; weft answers 400 to any protocol other than HTTP/1.x",
    ),
    (
        "method.md / OPTIONS request with RTSP",
        "RTSP/1.0 is not HTTP; weft answers 400 to any protocol other than HTTP/1.x",
    ),
    (
        "method.md / ANNOUNCE request with RTSP",
        "RTSP/1.0 is not HTTP; weft answers 400 to any protocol other than HTTP/1.x",
    ),
    (
        "sample.md / No HTTP version",
        "`GET /` without a version is HTTP/0.9, which weft does not speak: 400",
    ),
    (
        "transfer-encoding.md / POST with `chunked` as last transfer-encoding",
        "`deflate, chunked`: weft decodes no transfer coding but chunked and answers 501, as \
         RFC 9112 §6.1 recommends for a coding the server does not understand",
    ),
    (
        "transfer-encoding.md / POST with `chunked` as last transfer-encoding (multiple headers)",
        "`deflate` then `chunked` in two fields is the same list: 501 as above",
    ),
    (
        "uri.md / Host terminated by a query string",
        "`http://host?query` (absolute-form with an empty path and a query): weft-http keeps the \
         path as a span of the request bytes and has no `/` to point at, so it refuses the \
         target with 400 (valid per RFC 3986; rare in practice — clients send `http://host/?q`)",
    ),
    (
        "uri.md / `host:port` terminated by a query string",
        "`http://host:port?query`: 400 as above",
    ),
    (
        "uri.md / Fragment in URI",
        "a request target never carries a fragment (RFC 9112 §3.2: origin-form is absolute-path \
         [ \"?\" query ]); weft answers 400, as httpd strict does for `GET /#frag`",
    ),
    (
        "uri.md / `host:port` and basic auth",
        "userinfo in an absolute-form target: RFC 9110 §4.2.4 says a recipient SHOULD treat it \
         as an error; weft answers 400, as httpd strict does for `http://foo@localhost/`",
    ),
];

/// What the server did with one row.
#[derive(Debug, Default)]
struct Exchange {
    statuses: Vec<u16>,
    /// How reading ended if not with a clean close after whole responses.
    error: Option<String>,
}

/// Sends `raw` on a new connection, half-closes, and reads every response until the server
/// closes. `heads[i]`: response `i` answers a HEAD request.
fn exchange(srv: &Server, raw: &[u8], heads: &[bool]) -> Exchange {
    let mut c: Conn = srv.connect();
    // The server may refuse (and close) before reading everything: a failed write is fine.
    let _ = c.try_send(raw);
    c.shutdown_write();
    let mut ex = Exchange::default();
    loop {
        let head = heads.get(ex.statuses.len()).copied().unwrap_or(false);
        match c.read_response_for(head) {
            Ok(r) => ex.statuses.push(r.status),
            Err(ReadError::Closed) => break,
            Err(e) => {
                ex.error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    ex
}

fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("latin-1 request"))
        .collect()
}

fn apache_http_strict_vectors(model: Model) {
    let srv = Server::start(model, "vectors-apache");
    let rows: Vec<Value> = serde_json::from_str(APACHE).expect("apache vectors parse");
    let mut disagreements = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut sent = 0;
    for row in &rows {
        let request = row["request_latin1"].as_str().expect("request_latin1");
        if let Some(reason) = apache_skip_reason(request) {
            skipped.push((request, reason));
            continue;
        }
        sent += 1;
        let expect = &row["expect_strict"];
        let ex = exchange(&srv, &latin1(request), &[]);
        let first = ex.statuses.first().copied();
        let agrees = match expect.as_u64() {
            None => ex.statuses.is_empty() && ex.error.is_none(),
            Some(0) => first.is_some_and(|s| s >= 400),
            Some(1) => first.is_some_and(|s| (200..400).contains(&s)),
            Some(90) => false,
            Some(code) => first == Some(code as u16),
        };
        if !agrees {
            disagreements.insert(request, format!("expected {expect}, got {ex:?}"));
        }
    }
    srv.assert_alive();
    assert_eq!(sent + skipped.len(), rows.len());
    assert_eq!(skipped.len(), 9, "skipped rows: {skipped:#?}");
    let documented: BTreeMap<&str, &str> = APACHE_DISAGREEMENTS.iter().copied().collect();
    let unexpected: Vec<_> = disagreements
        .iter()
        .filter(|(r, _)| !documented.contains_key(*r))
        .collect();
    let gone: Vec<_> = documented
        .keys()
        .filter(|r| !disagreements.contains_key(*r))
        .collect();
    assert!(
        unexpected.is_empty() && gone.is_empty(),
        "undocumented disagreements: {unexpected:#?}\ndocumented ones that now agree: {gone:#?}"
    );
}

/// Statuses that mean the server could not (or would not) parse the message: the opposite of
/// llhttp accepting it. A 501 counts only for a method weft knows, where it can come only from
/// an unimplemented transfer coding; for other methods it is the handler refusing the method.
fn is_parse_rejection(status: u16, method: &str) -> bool {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    matches!(status, 400 | 408 | 411 | 413 | 414 | 431 | 505)
        || (status == 501 && KNOWN.contains(&method))
}

/// A request line as llhttp's cases write them: `METHOD target HTTP/x.y`.
fn request_line(line: &[u8]) -> Option<(&str, &str)> {
    let line = std::str::from_utf8(line).ok()?;
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, _target, version] = parts[..] else {
        return None;
    };
    let token = !method.is_empty()
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    token.then_some((method, version))
}

/// Adds `Host: x` to every HTTP/1.1 request head in `raw` that lacks one (llhttp's cases
/// mostly omit it; an HTTP/1.1 server must refuse such requests). Returns the new bytes and
/// the method of each request line found, in order.
fn prepare_llhttp(raw: &[u8]) -> (Vec<u8>, Vec<String>) {
    let mut inserts = Vec::new();
    let mut methods = Vec::new();
    let mut start = 0;
    while let Some(len) = crate::common::find(&raw[start..], b"\r\n") {
        let line = &raw[start..start + len];
        let next = start + len + 2;
        if let Some((method, version)) = request_line(line) {
            methods.push(method.to_string());
            let head_end =
                crate::common::find(&raw[next..], b"\r\n\r\n").map_or(raw.len(), |i| next + i + 2);
            let fields = if raw[next..].starts_with(b"\r\n") {
                &raw[next..next]
            } else {
                &raw[next..head_end]
            };
            let has_host = fields
                .split(|&b| b == b'\n')
                .any(|l| l.len() >= 5 && l[..5].eq_ignore_ascii_case(b"host:"));
            if version == "HTTP/1.1" && !has_host {
                inserts.push(next);
            }
        }
        start = next;
    }
    let mut out = raw.to_vec();
    for &at in inserts.iter().rev() {
        out.splice(at..at, b"Host: x\r\n".iter().copied());
    }
    (out, methods)
}

fn llhttp_request_vectors(model: Model) {
    let srv = Server::start(model, "vectors-llhttp");
    let rows: Vec<Value> = serde_json::from_str(LLHTTP).expect("llhttp vectors parse");
    let mut disagreements = BTreeMap::new();
    let mut sent = 0;
    for row in rows.iter().filter(|r| r["type"] == "request") {
        let key = format!(
            "{} / {}",
            row["file"].as_str().unwrap(),
            row["name"].as_str().unwrap()
        );
        let raw = row["raw"].as_str().expect("raw").as_bytes();
        let complete = row["complete"].as_u64().expect("complete") as usize;
        let error = row["error"].as_str();
        // llhttp pauses (it does not fail) after a complete CONNECT or Upgrade request: what
        // follows is another protocol's business.
        let upgrade_pause = error.is_some_and(|e| e.contains("Pause on CONNECT/Upgrade"));
        let accepted = error.is_none() || upgrade_pause;
        let (bytes, methods) = prepare_llhttp(raw);
        let heads: Vec<bool> = methods.iter().map(|m| m == "HEAD").collect();
        let ex = exchange(&srv, &bytes, &heads);
        sent += 1;
        let method = |i: usize| methods.get(i).map_or("", String::as_str);
        let rejected_at = ex
            .statuses
            .iter()
            .enumerate()
            .position(|(i, &s)| is_parse_rejection(s, method(i)));
        let agrees = if accepted {
            // Each message llhttp parsed gets a response that is not a parse rejection. After
            // an upgrade, what follows is not HTTP and may be refused; otherwise what follows
            // is an incomplete message and must not be refused either.
            let limit = if upgrade_pause { complete } else { usize::MAX };
            ex.statuses.len() >= complete
                && rejected_at.is_none_or(|i| i >= limit)
                && ex.error.is_none()
        } else {
            // The messages before the error are served; at the error the server answers an
            // error status or closes, and serves nothing after it.
            ex.statuses.len() >= complete
                && rejected_at.is_none_or(|i| i >= complete)
                && ex.statuses[complete..].len() <= 1
                && ex.statuses[complete..].iter().all(|&s| s >= 400)
                && ex.error.is_none()
        };
        if !agrees {
            disagreements.insert(
                key,
                format!(
                    "llhttp: complete={complete} error={error:?}; weft: {ex:?}; sent {:?}",
                    String::from_utf8_lossy(&bytes)
                ),
            );
        }
    }
    srv.assert_alive();
    assert_eq!(sent, 134, "rows of type `request`");
    let documented: BTreeMap<&str, &str> = LLHTTP_DISAGREEMENTS.iter().copied().collect();
    let unexpected: Vec<_> = disagreements
        .iter()
        .filter(|(k, _)| !documented.contains_key(k.as_str()))
        .collect();
    let gone: Vec<_> = documented
        .keys()
        .filter(|k| !disagreements.contains_key(**k))
        .collect();
    assert!(
        unexpected.is_empty() && gone.is_empty(),
        "undocumented disagreements: {unexpected:#?}\ndocumented ones that now agree: {gone:#?}"
    );
}

/// A check of `prepare_llhttp` alone: it starts no server, so the model does not matter.
fn host_is_added_only_where_missing(_model: Model) {
    let (b, m) = prepare_llhttp(
        b"GET / HTTP/1.1\r\n\r\nPUT /x HTTP/1.1\r\nHOST: a\r\n\r\nGET / HTTP/1.0\r\n\r\n",
    );
    assert_eq!(
        String::from_utf8(b).unwrap(),
        "GET / HTTP/1.1\r\nHost: x\r\n\r\nPUT /x HTTP/1.1\r\nHOST: a\r\n\r\nGET / HTTP/1.0\r\n\r\n"
    );
    assert_eq!(m, ["GET", "PUT", "GET"]);
    let (b, _) = prepare_llhttp(b"\r\nGET /t HTTP/1.1\r\nA: b\r\n\r\n");
    assert_eq!(b, b"\r\nGET /t HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n");
}
