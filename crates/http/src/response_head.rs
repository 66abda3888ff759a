//! The response-head parser of weft's upstream client (the reverse proxy): the status line and
//! header section of an HTTP/1.x response, validated strictly, and the body framing they imply
//! for the request they answer (RFC 9112 §6.3).
//!
//! Sans-I/O, like the request parser: call [`ResponseParser::parse`] with the growing buffer
//! until it returns the head's length. The end of the head is looked for from where the last
//! call stopped, so a peer that sends a byte at a time costs linear work, and every verdict
//! depends only on the bytes up to the one that decided it, never on how they were split
//! (fuzzed in `fuzz/`: `response_head`). Bytes that cannot start a response (`HTTP/`), a bare
//! LF or CR, a status line or head over its limit are refused as soon as they arrive, without
//! waiting for the rest.
//!
//! Refused, where a more lenient client would guess (a proxy answers 502 for every one, so a
//! guess can never make a cached connection disagree with its upstream about where a response
//! ends): line ends other than CRLF, obsolete line folding, whitespace before a colon,
//! `Transfer-Encoding` together with `Content-Length` or in an HTTP/1.0 response, any transfer
//! coding other than a single `chunked` (the proxy could not pass it on), conflicting or
//! malformed `Content-Length` values, an HTTP major version other than 1.
//!
//! ```
//! use weft_http::{Limits, ResponseFraming, ResponseParser};
//! let mut p = ResponseParser::new(Limits::default(), false);
//! let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
//! let len = p.parse(buf).unwrap().expect("complete");
//! assert_eq!(&buf[len..], b"hello");
//! assert_eq!(p.head().status(), 200);
//! assert_eq!(p.head().framing(), ResponseFraming::Length(5));
//! assert!(p.head().keep_alive());
//! ```

use std::fmt;

use crate::request::{
    is_tchar, list_elements, parse_decimal, trim_ows, Header, Span, Version, FIELD_VALUE,
};
use crate::Limits;

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body: a 1xx, 204 or 304 response, or one to a HEAD request.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows the head.
    Chunked,
    /// The body is everything until the server closes the connection.
    Close,
}

/// Why a response head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseError {
    /// Not an HTTP/1.x response head, or one with invalid syntax or ambiguous framing.
    Malformed(&'static str),
    /// The status line or the whole head is longer than the limits allow, or it has too
    /// many fields.
    TooLarge,
    /// Valid, but not something this client can relay (a transfer coding other than
    /// chunked, an HTTP major version other than 1).
    Unsupported(&'static str),
}

impl ResponseError {
    /// A short description for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ResponseError::Malformed(r) | ResponseError::Unsupported(r) => r,
            ResponseError::TooLarge => "response head too large",
        }
    }
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for ResponseError {}

/// A parsed response head. Spans refer to the buffer given to [`ResponseParser::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    version: Version,
    status: u16,
    reason: Span,
    headers: Vec<Header>,
    content_length: Option<u64>,
    chunked: bool,
    framing: ResponseFraming,
    keep_alive: bool,
    len: usize,
}

impl Default for ResponseHead {
    fn default() -> Self {
        ResponseHead {
            version: Version::Http11,
            status: 0,
            reason: Span::default(),
            headers: Vec::new(),
            content_length: None,
            chunked: false,
            framing: ResponseFraming::None,
            keep_alive: false,
            len: 0,
        }
    }
}

impl ResponseHead {
    /// The protocol version (`HTTP/1.x` with x > 1 counts as 1.1).
    pub fn version(&self) -> Version {
        self.version
    }
    /// The status code, 100 to 599.
    pub fn status(&self) -> u16 {
        self.status
    }
    /// The reason phrase (possibly empty).
    pub fn reason<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        self.reason.get(buf)
    }
    /// The header fields in the order received.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }
    /// The first value of header `name` (case-insensitive).
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.get(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.get(buf))
    }
    /// The `Content-Length` value, if the response has one (also for a HEAD request's
    /// response, whose framing is [`ResponseFraming::None`]).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }
    /// True if the response is chunked (also for a HEAD request's response).
    pub fn is_chunked(&self) -> bool {
        self.chunked
    }
    /// How the body is delimited.
    pub fn framing(&self) -> ResponseFraming {
        self.framing
    }
    /// True if the connection may carry another request after this response's body.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
    /// True for an interim (1xx) response: the final response follows it.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status)
    }
    /// Length of the head, the final CRLF included.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True if nothing has been parsed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The bytes every response starts with.
const PREFIX: &[u8] = b"HTTP/";

/// Incremental response-head parser for one response. Feed it the same growing buffer until it
/// returns `Ok(Some(head_len))`; then [`ResponseParser::head`] describes the response.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    limits: Limits,
    head_request: bool,
    /// Bytes checked so far.
    scanned: usize,
    /// The first line has ended.
    status_line_done: bool,
    done: bool,
    head: ResponseHead,
}

/// Field-level facts gathered from the header lines.
#[derive(Debug, Default)]
struct Seen {
    content_length: Option<u64>,
    transfer_encoding: bool,
    te_chunked_only: bool,
    conn_close: bool,
    conn_keep_alive: bool,
}

impl ResponseParser {
    /// A parser bounded by `limits` (`max_request_line` bounds the status line,
    /// `max_head_bytes` and `max_headers` the head) for a response to a request that was a
    /// HEAD request if `head_request` (its response has no body whatever it says).
    pub fn new(limits: Limits, head_request: bool) -> ResponseParser {
        ResponseParser {
            limits,
            head_request,
            scanned: 0,
            status_line_done: false,
            done: false,
            head: ResponseHead::default(),
        }
    }

    /// Prepares for the next response (to a HEAD request if `head_request`); keeps
    /// allocations.
    pub fn reset(&mut self, head_request: bool) {
        let mut headers = std::mem::take(&mut self.head.headers);
        headers.clear();
        *self = ResponseParser {
            head: ResponseHead {
                headers,
                ..ResponseHead::default()
            },
            ..ResponseParser::new(self.limits, head_request)
        };
    }

    /// The head parsed by the last call that returned `Ok(Some(_))`.
    pub fn head(&self) -> &ResponseHead {
        &self.head
    }

    /// Parses `buf`, which starts at the first byte of the response and holds every byte
    /// given to previous calls since the parser was made or reset. `Ok(None)`: more bytes are
    /// needed; `Ok(Some(n))`: the head is complete and `n` bytes long.
    ///
    /// Any bytes give a verdict and never a panic; a buffer shorter than one given before
    /// breaks the contract above and may panic.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, ResponseError> {
        if self.done {
            return Ok(Some(self.head.len));
        }
        let max = self.limits.max_head_bytes;
        let window = &buf[..buf.len().min(max)];
        let mut i = self.scanned;
        while i < window.len() {
            let b = window[i];
            if i < PREFIX.len() && b != PREFIX[i] {
                return Err(ResponseError::Malformed("not an HTTP/1.x response"));
            }
            if i > 0 && window[i - 1] == b'\r' && b != b'\n' {
                return Err(ResponseError::Malformed("CR not followed by LF"));
            }
            if b == b'\n' {
                if i == 0 || window[i - 1] != b'\r' {
                    return Err(ResponseError::Malformed("line not terminated by CRLF"));
                }
                self.status_line_done = true;
                if i >= 3 && &window[i - 3..i] == b"\r\n\r" {
                    self.scanned = i + 1;
                    self.finish(&window[..i + 1])?;
                    self.done = true;
                    return Ok(Some(self.head.len));
                }
            } else if !self.status_line_done && i + 1 >= self.limits.max_request_line {
                return Err(ResponseError::TooLarge);
            }
            i += 1;
        }
        self.scanned = i;
        if buf.len() >= max {
            return Err(ResponseError::TooLarge);
        }
        Ok(None)
    }

    /// Parses the complete head `head` (CRLF line ends checked already).
    fn finish(&mut self, head: &[u8]) -> Result<(), ResponseError> {
        let h = &mut self.head;
        h.len = head.len();
        h.headers.clear();
        let line_end = head
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a complete head has a line end");
        status_line(h, &head[..line_end])?;
        let mut seen = Seen::default();
        let mut pos = line_end + 2;
        while pos < head.len() - 2 {
            let end = pos
                + head[pos..]
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .expect("every line ends with CRLF");
            if h.headers.len() >= self.limits.max_headers {
                return Err(ResponseError::TooLarge);
            }
            let header = field_line(head, pos, end)?;
            note_field(&mut seen, header.name.get(head), header.value.get(head))?;
            h.headers.push(header);
            pos = end + 2;
        }
        h.content_length = seen.content_length;
        h.chunked = seen.transfer_encoding;
        if seen.transfer_encoding {
            // RFC 9112 §6.1, §6.3: either of these may be an attempt at response splitting.
            if seen.content_length.is_some() {
                return Err(ResponseError::Malformed(
                    "both Transfer-Encoding and Content-Length",
                ));
            }
            if h.version == Version::Http10 {
                return Err(ResponseError::Malformed(
                    "Transfer-Encoding in an HTTP/1.0 response",
                ));
            }
            if !seen.te_chunked_only {
                return Err(ResponseError::Unsupported(
                    "transfer coding other than chunked",
                ));
            }
        }
        let no_body = self.head_request || h.is_interim() || h.status == 204 || h.status == 304;
        h.framing = if no_body {
            ResponseFraming::None
        } else if seen.transfer_encoding {
            ResponseFraming::Chunked
        } else if let Some(n) = seen.content_length {
            ResponseFraming::Length(n)
        } else {
            ResponseFraming::Close
        };
        h.keep_alive = h.framing != ResponseFraming::Close
            && !seen.conn_close
            && (h.version == Version::Http11 || seen.conn_keep_alive);
        Ok(())
    }
}

/// `HTTP/d.d SP 3DIGIT [SP reason-phrase]` (RFC 9112 §4; the space before an empty reason may
/// be missing, as some servers send it).
fn status_line(h: &mut ResponseHead, line: &[u8]) -> Result<(), ResponseError> {
    let bad = ResponseError::Malformed("malformed status line");
    let [b'H', b'T', b'T', b'P', b'/', major, b'.', minor, rest @ ..] = line else {
        return Err(bad);
    };
    if !major.is_ascii_digit() || !minor.is_ascii_digit() {
        return Err(bad);
    }
    if *major != b'1' {
        return Err(ResponseError::Unsupported(
            "HTTP major version other than 1",
        ));
    }
    h.version = if *minor == b'0' {
        Version::Http10
    } else {
        Version::Http11
    };
    let [b' ', d1 @ b'1'..=b'5', d2, d3, rest @ ..] = rest else {
        return Err(ResponseError::Malformed("malformed status code"));
    };
    if !d2.is_ascii_digit() || !d3.is_ascii_digit() {
        return Err(ResponseError::Malformed("malformed status code"));
    }
    h.status = u16::from(d1 - b'0') * 100 + u16::from(d2 - b'0') * 10 + u16::from(d3 - b'0');
    let reason_start = match rest {
        [] => line.len(),
        [b' ', reason @ ..] => {
            if !reason.iter().all(|&b| FIELD_VALUE[b as usize]) {
                return Err(ResponseError::Malformed(
                    "invalid character in reason phrase",
                ));
            }
            line.len() - reason.len()
        }
        _ => return Err(ResponseError::Malformed("malformed status code")),
    };
    h.reason = Span::new(reason_start, line.len());
    Ok(())
}

/// The field line `head[start..end]` (its CRLF excluded).
fn field_line(head: &[u8], start: usize, end: usize) -> Result<Header, ResponseError> {
    let line = &head[start..end];
    if matches!(line.first(), Some(b' ' | b'\t')) {
        return Err(ResponseError::Malformed("obsolete line folding"));
    }
    let colon = line
        .iter()
        .position(|&b| !is_tchar(b))
        .ok_or(ResponseError::Malformed("field line without colon"))?;
    match line[colon] {
        b':' if colon > 0 => {}
        b':' => return Err(ResponseError::Malformed("empty field name")),
        _ => return Err(ResponseError::Malformed("invalid field name")),
    }
    let raw = &line[colon + 1..];
    if !raw.iter().all(|&b| FIELD_VALUE[b as usize]) {
        return Err(ResponseError::Malformed("invalid character in field value"));
    }
    let value = trim_ows(raw);
    let lead = raw.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    let v_start = start + colon + 1 + lead;
    Ok(Header {
        name: Span::new(start, start + colon),
        value: Span::new(v_start, v_start + value.len()),
    })
}

/// Records what framing and connection management need from one field.
fn note_field(s: &mut Seen, name: &[u8], value: &[u8]) -> Result<(), ResponseError> {
    if name.eq_ignore_ascii_case(b"content-length") {
        // A list of identical values ("5, 5") is one length (RFC 9110 §8.6).
        for element in value.split(|&b| b == b',') {
            let n = parse_decimal(trim_ows(element))
                .ok_or(ResponseError::Malformed("invalid Content-Length"))?;
            match s.content_length {
                Some(prev) if prev != n => {
                    return Err(ResponseError::Malformed(
                        "conflicting Content-Length values",
                    ))
                }
                _ => s.content_length = Some(n),
            }
        }
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        for element in value.split(|&b| b == b',') {
            let coding = trim_ows(element);
            if coding.is_empty() {
                return Err(ResponseError::Malformed("empty transfer coding"));
            }
            // Exactly one `chunked`, over every Transfer-Encoding field.
            s.te_chunked_only = !s.transfer_encoding && coding.eq_ignore_ascii_case(b"chunked");
            s.transfer_encoding = true;
        }
    } else if name.eq_ignore_ascii_case(b"connection") {
        for token in list_elements(value) {
            if token.eq_ignore_ascii_case(b"close") {
                s.conn_close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                s.conn_keep_alive = true;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8], head_request: bool) -> Result<Option<ResponseHead>, ResponseError> {
        let mut p = ResponseParser::new(Limits::default(), head_request);
        Ok(p.parse(buf)?.map(|_| p.head().clone()))
    }

    fn framing(buf: &[u8]) -> ResponseFraming {
        parse(buf, false).unwrap().expect("complete").framing()
    }

    #[test]
    fn parses_status_headers_and_spans() {
        let buf = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nX-A:  v  \r\nContent-Length: 3\r\n\r\nabc";
        let h = parse(buf, false).unwrap().unwrap();
        assert_eq!(h.len(), buf.len() - 3);
        assert_eq!(h.status(), 404);
        assert_eq!(h.reason(buf), b"Not Found");
        assert_eq!(h.version(), Version::Http11);
        assert_eq!(h.header(buf, "x-a"), Some(&b"v"[..]));
        assert_eq!(h.header(buf, "content-type"), Some(&b"text/plain"[..]));
        assert_eq!(h.headers().len(), 3);
        assert_eq!(h.framing(), ResponseFraming::Length(3));
        assert!(h.keep_alive());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        assert_eq!(
            framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ResponseFraming::Chunked
        );
        assert_eq!(
            framing(b"HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n"),
            ResponseFraming::Length(7)
        );
        let close = parse(b"HTTP/1.1 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!(close.framing(), ResponseFraming::Close);
        assert!(!close.keep_alive());
        for no_body in [
            &b"HTTP/1.1 204 No Content\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
        ] {
            assert_eq!(framing(no_body), ResponseFraming::None);
        }
        let head = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(head.framing(), ResponseFraming::None);
        assert_eq!(head.content_length(), Some(10));
        assert!(head.keep_alive());
    }

    #[test]
    fn keep_alive_by_version_and_connection() {
        let ka = |b: &[u8]| parse(b, false).unwrap().unwrap().keep_alive();
        assert!(ka(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(!ka(
            b"HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(ka(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn lenient_only_where_harmless() {
        // A missing reason phrase, with or without its space; a later minor version.
        let buf = b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n";
        let h = parse(buf, false).unwrap().unwrap();
        assert_eq!((h.status(), h.reason(buf)), (200, &b""[..]));
        let h = parse(b"HTTP/1.1 201 \r\n\r\n", false).unwrap().unwrap();
        assert_eq!(h.status(), 201);
        let h = parse(b"HTTP/1.2 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!(h.version(), Version::Http11);
    }

    #[test]
    fn incomplete_until_the_empty_line() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let mut p = ResponseParser::new(Limits::default(), false);
        for end in 0..full.len() - 2 {
            assert_eq!(p.parse(&full[..end]), Ok(None), "at {end}");
        }
        assert_eq!(p.parse(full), Ok(Some(full.len() - 2)));
        assert_eq!(p.parse(full), Ok(Some(full.len() - 2)));
        p.reset(true);
        assert_eq!(p.parse(b"HTTP/1.1 200 OK\r\n"), Ok(None));
    }

    #[test]
    fn refuses_early_what_cannot_be_a_response() {
        for bad in [
            &b"SSH-2.0"[..],
            b"http/1.1",
            b"HTTP/1.1 200 OK\n",
            b"HTTP/1.1\rX",
        ] {
            assert!(
                matches!(parse(bad, false), Err(ResponseError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn refuses_malformed_and_ambiguous_heads() {
        for bad in [
            &b"HTTP/1.1 20 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 X\r\n\r\n",
            b"HTTP/1.1 600 X\r\n\r\n",
            b"HTTP/1.1  200 OK\r\n\r\n",
            b"HTTP/1.1 200 O\x01K\r\n\r\n",
            b"HTTP/1.x 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n Folded: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n",
        ] {
            assert!(
                matches!(parse(bad, false), Err(ResponseError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for unsupported in [
            &b"HTTP/2.0 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        ] {
            assert!(
                matches!(
                    parse(unsupported, false),
                    Err(ResponseError::Unsupported(_))
                ),
                "{:?}",
                String::from_utf8_lossy(unsupported)
            );
        }
    }

    #[test]
    fn limits() {
        let small = Limits {
            max_request_line: 32,
            max_head_bytes: 64,
            max_headers: 2,
            ..Limits::default()
        };
        let mut long_line = b"HTTP/1.1 200 ".to_vec();
        long_line.extend_from_slice(&[b'x'; 40]);
        assert_eq!(
            ResponseParser::new(small, false).parse(&long_line),
            Err(ResponseError::TooLarge)
        );
        let mut long_head = b"HTTP/1.1 200 OK\r\n".to_vec();
        while long_head.len() < 64 {
            long_head.extend_from_slice(b"X-Pad: 0123456789\r\n");
        }
        assert_eq!(
            ResponseParser::new(small, false).parse(&long_head),
            Err(ResponseError::TooLarge)
        );
        assert_eq!(
            ResponseParser::new(small, false)
                .parse(b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
            Err(ResponseError::TooLarge)
        );
        assert!(ResponseParser::new(small, false)
            .parse(b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n")
            .unwrap()
            .is_some());
    }
}
