//! Request vectors written by others (see `vectors/README.md` for sources and licences),
//! replayed against the parser and the chunked decoder.
//!
//! Every case whose verdict differs from the one its authors expect is listed below with the
//! reason; each is a choice RFC 9110/9112 allows (or a behaviour that belongs to the server,
//! not the parser). The tests assert that the differences are exactly those listed, so a new
//! difference, or a listed one that went away, fails them.

use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use weft_http::{BodyFraming, ChunkedDecoder, Error, Limits, Method, Parser};

/// The error the parser gives an HTTP/1.1 head without Host. llhttp does not require Host, so
/// its cases mostly lack one: when a message gets exactly this error, the replay adds
/// `Host: x` after its request line and parses it again.
const MISSING_HOST: Error = Error::BadRequest("HTTP/1.1 request without Host");

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Latin-1 when every char fits in a byte, UTF-8 otherwise (see the README).
fn bytes_of(s: &str) -> Vec<u8> {
    if s.chars().all(|c| u32::from(c) < 0x100) {
        s.chars().map(|c| c as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

fn show(req: &[u8]) -> String {
    req.escape_ascii().to_string()
}

// ---- Apache httpd t/apache/http_strict.t --------------------------------------------------

/// The parser's verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Success,
    /// The head is not complete: the server would wait for more (and time out with 408).
    Incomplete,
    Status(u16),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Success => f.write_str("success"),
            Verdict::Incomplete => f.write_str("incomplete"),
            Verdict::Status(s) => write!(f, "{s}"),
        }
    }
}

fn verdict(req: &[u8]) -> Verdict {
    match Parser::new(Limits::default()).parse(req) {
        Ok(Some(_)) => Verdict::Success,
        Ok(None) => Verdict::Incomplete,
        Err(e) => Verdict::Status(e.status()),
    }
}

/// True if `ours` is what `expect_strict` asks for, at the parser's level.
fn apache_agrees(expect: &Value, ours: Verdict) -> bool {
    match expect.as_u64() {
        // Connection dropped without a response: the parser cannot drop a connection.
        None => false,
        // An HTTP/0.9 reply: weft speaks no HTTP/0.9.
        Some(90) => false,
        Some(0) => matches!(ours, Verdict::Status(s) if s >= 400),
        // Any success; a plain 200 is one too, since serving the resource is the server's job.
        Some(1) | Some(200) => ours == Verdict::Success,
        Some(status) => ours == Verdict::Status(status as u16),
    }
}

/// Rows for the server's black-box tests, not the parser's.
const APACHE_SKIPPED: &[(&str, &str)] = &[
    (
        "R",
        "rows starting with `R` are response headers a CGI fixture emits; they test the \
         server's CGI gateway (500/502 for an invalid one)",
    ),
    (
        "GET /regression-header HTTP/1.1\r\nHost:localhost\r\n\r\n",
        "the 500 comes from a server-side handler; the request itself is valid",
    ),
];

/// (request, our verdict, why it differs from `expect_strict`).
const APACHE_DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "get / HTTP/1.0\r\n\r\n",
        "success",
        "methods are case-sensitive tokens (RFC 9110 §9.1): `get` is a valid, unknown method, so \
         the parser accepts it and the server answers 501 for it: Apache's verdict, one layer up",
    ),
    (
        "GET / HTTP/2.0\r\nHost: localhost\r\n\r\n",
        "505",
        "a well-formed version with a major other than 1 gets 505 (RFC 9110 §15.6.6); Apache \
         answers it as HTTP/1.x",
    ),
    (
        "GET / HTTP/1.0\r\r",
        "400",
        "a bare CR is invalid (RFC 9112 §2.2): answered with 400 at once rather than by \
         dropping the connection",
    ),
    (
        "GET /\r\n",
        "400",
        "HTTP/0.9 is not supported (RFC 9112 §2.3 leaves it to the server): a request line \
         without a version gets 400 rather than a dropped connection or an HTTP/0.9 reply",
    ),
];

#[test]
fn apache_http_strict() {
    let rows = load("apache-httpd-http-strict.json");
    assert_eq!(rows.len(), 88);
    let mut differences = Vec::new();
    let mut skipped = 0;
    for row in &rows {
        let text = row["request_latin1"].as_str().unwrap();
        if text.starts_with('R') || APACHE_SKIPPED.iter().any(|(r, _)| *r == text) {
            skipped += 1;
            continue;
        }
        let req = bytes_of(text);
        let ours = verdict(&req);
        if !apache_agrees(&row["expect_strict"], ours) {
            differences.push((text.to_string(), ours.to_string()));
        }
    }
    assert_eq!(skipped, 9);
    let mut listed: Vec<(String, String)> = APACHE_DIFFERENCES
        .iter()
        .map(|(r, v, _)| (r.to_string(), v.to_string()))
        .collect();
    differences.sort();
    listed.sort();
    assert_eq!(
        differences, listed,
        "differences from Apache's strict verdicts changed"
    );
}

// ---- nodejs/llhttp test/request/*.md -------------------------------------------------------

/// How a replay of a byte stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Every byte was consumed by complete messages.
    Clean,
    /// A head or body is incomplete: the server waits for more.
    Pending,
    /// A message without keep-alive was followed by more bytes, which the server ignores when
    /// it closes the connection.
    Closed,
    /// A CONNECT request was accepted: what follows is not HTTP.
    Tunnel,
    /// Refused with this status.
    Error(u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    complete: usize,
    end: End,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = match self.end {
            End::Clean => "clean".to_string(),
            End::Pending => "pending".to_string(),
            End::Closed => "closed".to_string(),
            End::Tunnel => "tunnel".to_string(),
            End::Error(s) => s.to_string(),
        };
        write!(f, "{}, {end}", self.complete)
    }
}

/// Parses `raw` message after message as a connection would: head, then the body its framing
/// says, then the next message. Returns the outcome and whether a Host field was added.
fn replay(raw: &[u8]) -> (Outcome, bool) {
    let mut buf = raw.to_vec();
    let mut at = 0;
    let mut complete = 0;
    let mut added_host = false;
    let limits = Limits::default();
    let end = 'messages: loop {
        if at == buf.len() {
            break End::Clean;
        }
        let mut p = Parser::new(limits);
        let head = match p.parse(&buf[at..]) {
            Ok(Some(_)) => p.take_head(),
            Ok(None) => break End::Pending,
            Err(e) if e == MISSING_HOST => {
                let mut line_start = at;
                while buf[line_start..].starts_with(b"\r\n") {
                    line_start += 2;
                }
                let eol = line_start
                    + buf[line_start..]
                        .windows(2)
                        .position(|w| w == b"\r\n")
                        .unwrap();
                buf.splice(eol + 2..eol + 2, b"Host: x\r\n".iter().copied());
                added_host = true;
                continue;
            }
            Err(e) => break End::Error(e.status()),
        };
        at += head.len();
        if head.method() == Method::Connect {
            complete += 1;
            break End::Tunnel;
        }
        match head.framing() {
            BodyFraming::None => {}
            BodyFraming::Length(n) => {
                if ((buf.len() - at) as u64) < n {
                    break End::Pending;
                }
                at += n as usize;
            }
            BodyFraming::Chunked => {
                let mut d = ChunkedDecoder::new(&limits);
                loop {
                    match d.decode(&buf[at..]) {
                        Err(e) => break 'messages End::Error(e.status()),
                        Ok(step) => {
                            at += step.consumed;
                            if step.done {
                                break;
                            }
                            if at == buf.len() {
                                break 'messages End::Pending;
                            }
                        }
                    }
                }
            }
        }
        complete += 1;
        if !head.keep_alive() && at < buf.len() {
            break End::Closed;
        }
    };
    (Outcome { complete, end }, added_host)
}

/// What llhttp's verdict means in terms of an `Outcome`.
fn llhttp_agrees(error: Option<&str>, complete: usize, ours: Outcome) -> bool {
    if ours.complete != complete {
        return false;
    }
    match error {
        None => matches!(ours.end, End::Clean | End::Pending),
        // llhttp pauses on CONNECT and Upgrade and hands the bytes after to the user. weft's
        // parser ignores Upgrade (the server does not switch protocols), so anything but an
        // error after the same number of messages agrees.
        Some(e) if e.contains("Pause on") => !matches!(ours.end, End::Error(_)),
        Some(e) if e.contains("Data after `Connection: close`") => ours.end == End::Closed,
        Some(_) => matches!(ours.end, End::Error(_)),
    }
}

/// Strict-mode cases (`request`, `request-finish`) where weft differs from llhttp:
/// ("file / name", our outcome, reason). Outcomes read "complete messages, how it ends".
const LLHTTP_DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "content-length.md / Content-Length reset when no body is received",
        "0, pending",
        "llhttp's test skips the body from a callback; by RFC 9112 §6.3 the 43 bytes after the \
         head are the start of the 123-byte body",
    ),
    (
        "invalid.md / HTTP protocol and ANNOUNCE method",
        "1, clean",
        "any token is a method (RFC 9110 §9.1); llhttp knows a fixed list. The server answers \
         501 for a method it does not implement",
    ),
    (
        "invalid.md / Invalid method",
        "1, clean",
        "`MKCOLA` is a valid token, so a valid method (RFC 9110 §9.1); the server answers 501",
    ),
    (
        "invalid.md / Invalid HTTP version",
        "0, pending",
        "the request line `GET / HTTP/5.6` has no line end yet; weft checks the version when \
         the line is complete (then 505) and only the method before that",
    ),
    (
        "method.md / M-SEARCH request",
        "0, 400",
        "the asterisk-form is only for OPTIONS (RFC 9112 §3.2.4); M-SEARCH is SSDP over UDP, \
         not HTTP",
    ),
    (
        "method.md / SOURCE request with ICE",
        "0, 400",
        "`ICE/1.0` is not an HTTP-version (RFC 9112 §2.3); weft speaks HTTP only",
    ),
    (
        "method.md / OPTIONS request with RTSP",
        "0, 400",
        "`RTSP/1.0` is not an HTTP-version (RFC 9112 §2.3); weft speaks HTTP only",
    ),
    (
        "method.md / ANNOUNCE request with RTSP",
        "0, 400",
        "`RTSP/1.0` is not an HTTP-version (RFC 9112 §2.3); weft speaks HTTP only",
    ),
    (
        "method.md / PRI request HTTP2",
        "0, 400",
        "the HTTP/2 preface is not an HTTP/1.1 request (asterisk-form with a method other than \
         OPTIONS); weft has no HTTP/2, so it is refused rather than paused on",
    ),
    (
        "sample.md / No HTTP version",
        "0, 400",
        "HTTP/0.9 is not supported (RFC 9112 §2.3 leaves it to the server)",
    ),
    (
        "transfer-encoding.md / POST with `chunked` as last transfer-encoding",
        "0, 400",
        "the target carries a fragment (`#hey`), which is not part of a request-target (RFC \
         9112 §3.2); without it weft would answer 501 for the `deflate` coding",
    ),
    (
        "transfer-encoding.md / POST with `chunked` as last transfer-encoding (multiple headers)",
        "0, 400",
        "the target carries a fragment (`#hey`), which is not part of a request-target (RFC \
         9112 §3.2); without it weft would answer 501 for the `deflate` coding",
    ),
    (
        "uri.md / Host terminated by a query string",
        "0, 400",
        "an absolute-form target with a query but an empty path: its origin-form (`/?q`, RFC \
         9112 §3.2.1) is not a span of the buffer, which is how `RequestHead::path` answers; \
         such targets are sent only to proxies, which weft is not",
    ),
    (
        "uri.md / `host:port` terminated by a query string",
        "0, 400",
        "an absolute-form target with a query but an empty path (as above)",
    ),
    (
        "uri.md / Fragment in URI",
        "0, 400",
        "a fragment is not part of a request-target (RFC 9112 §3.2); clients never send one",
    ),
    (
        "uri.md / `host:port` and basic auth",
        "0, 400",
        "userinfo in an http(s) target: RFC 9110 §4.2.4 says to treat it as an error",
    ),
];

/// Lenient-mode cases: weft has no lenient modes, so each should get the strict verdict.
/// Those with a strict twin (the same bytes as a `request` case) are checked against it
/// above; those without one are recorded here: ("file / name", our outcome, note).
const LLHTTP_LENIENT_ONLY: &[(&str, &str, &str)] = &[
    (
        "connection.md / Resetting flags when keep-alive is off (1.0, lenient)",
        "1, closed",
        "as llhttp strict: an HTTP/1.0 message without keep-alive ends the connection",
    ),
    (
        "connection.md / Multiple tokens with folding",
        "0, 400",
        "obs-fold is refused (RFC 9112 §5.2)",
    ),
    (
        "connection.md / Multiple tokens with folding, LWS, and CRLF",
        "0, 400",
        "obs-fold is refused (RFC 9112 §5.2)",
    ),
    (
        "invalid.md / Only LFs present (lenient)",
        "0, 400",
        "bare LF is refused",
    ),
    (
        "lenient-headers.md / Header value (lenient)",
        "0, 400",
        "a control character in a field value is refused",
    ),
    (
        "lenient-headers.md / Second request header value (lenient)",
        "1, 400",
        "a control character in a field value is refused",
    ),
    (
        "lenient-header-value-relaxed.md / CR without LF in header value should be rejected even with relaxed flag",
        "0, 400",
        "as llhttp: refused",
    ),
    (
        "lenient-header-value-relaxed.md / Space after start line must still fail",
        "0, 400",
        "as llhttp: refused",
    ),
    (
        "lenient-version.md / Invalid HTTP version (lenient)",
        "0, 505",
        "a major version other than 1 gets 505",
    ),
    (
        "sample.md / Line folding in header value with CRLF",
        "0, 400",
        "obs-fold is refused (RFC 9112 §5.2)",
    ),
    (
        "sample.md / X-SSL-Nonsense",
        "0, 400",
        "obs-fold is refused (RFC 9112 §5.2)",
    ),
    (
        "transfer-encoding.md / Invalid OBS fold after chunked value",
        "0, 400",
        "obs-fold is refused (RFC 9112 §5.2)",
    ),
    (
        "transfer-encoding.md / POST with `Transfer-Encoding` and `Content-Length` (lenient)",
        "0, 400",
        "Transfer-Encoding with Content-Length is refused (RFC 9112 §6.1)",
    ),
    (
        "transfer-encoding.md / Chunk header not terminated by CRLF (lenient)",
        "0, 400",
        "a bare CR in a chunk-size line is refused",
    ),
];

fn key(row: &Value) -> String {
    format!(
        "{} / {}",
        row["file"].as_str().unwrap(),
        row["name"].as_str().unwrap()
    )
}

fn is_strict(row: &Value) -> bool {
    matches!(row["type"].as_str().unwrap(), "request" | "request-finish")
}

#[test]
fn llhttp_requests() {
    let rows = load("llhttp-request.json");
    assert_eq!(rows.len(), 166);
    // The strict verdict for each request, to hold lenient cases to.
    let strict: HashMap<&str, &Value> = rows
        .iter()
        .filter(|r| is_strict(r))
        .map(|r| (r["raw"].as_str().unwrap(), r))
        .collect();
    let mut differences = Vec::new();
    let mut lenient_only = Vec::new();
    let mut hosts_added = 0;
    for row in &rows {
        let raw = row["raw"].as_str().unwrap();
        let (ours, added) = replay(&bytes_of(raw));
        hosts_added += usize::from(added);
        let expected = if is_strict(row) {
            Some(row)
        } else {
            strict.get(raw).copied()
        };
        match expected {
            Some(exp) => {
                let error = exp["error"].as_str();
                let complete = exp["complete"].as_u64().unwrap() as usize;
                if !llhttp_agrees(error, complete, ours) {
                    differences.push((key(row), ours.to_string()));
                }
            }
            None => lenient_only.push((key(row), ours.to_string())),
        }
    }
    assert!(hosts_added > 50, "{hosts_added}");

    let mut listed: Vec<(String, String)> = LLHTTP_DIFFERENCES
        .iter()
        .map(|(k, v, _)| (k.to_string(), v.to_string()))
        .collect();
    differences.sort();
    listed.sort();
    assert_eq!(
        differences, listed,
        "differences from llhttp's strict verdicts changed"
    );

    let mut recorded: Vec<(String, String)> = LLHTTP_LENIENT_ONLY
        .iter()
        .map(|(k, v, _)| (k.to_string(), v.to_string()))
        .collect();
    lenient_only.sort();
    recorded.sort();
    assert_eq!(
        lenient_only, recorded,
        "verdicts on lenient-only cases changed"
    );
}

/// No vector, whole or fed in two pieces at every split point, makes the parser disagree
/// with itself.
#[test]
fn vectors_split_anywhere_agree_with_whole() {
    let mut all: Vec<Vec<u8>> = load("apache-httpd-http-strict.json")
        .iter()
        .map(|r| bytes_of(r["request_latin1"].as_str().unwrap()))
        .collect();
    all.extend(
        load("llhttp-request.json")
            .iter()
            .map(|r| bytes_of(r["raw"].as_str().unwrap())),
    );
    for req in &all {
        let whole = Parser::new(Limits::default()).parse(req);
        for split in 0..req.len() {
            let mut p = Parser::new(Limits::default());
            let first = p.parse(&req[..split]);
            let second = match first {
                Ok(None) => p.parse(req),
                done => done,
            };
            let same = match (&whole, &second) {
                (Ok(a), Ok(b)) => a == b,
                (Err(a), Err(b)) => a.status() == b.status(),
                _ => false,
            };
            assert!(
                same,
                "{} split at {split}: whole {whole:?}, split {second:?}",
                show(req)
            );
        }
    }
}
