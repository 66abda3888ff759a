//! Reading HTTP/1.1 responses as a load generator needs to: the status, the body's framing
//! (Content-Length, chunked, until close, none for HEAD/1xx/204/304) and whether the
//! connection stays open — never the header values or the body bytes themselves.
//!
//! [`ResponseParser`] is sans-I/O: it is fed bytes and says how many it consumed and whether
//! the response is complete. [`read_response`] drives it over any read function with a
//! caller-owned buffer, so a connection reuses one buffer and one parser for every request and
//! the hot path allocates nothing. Chunked bodies go through weft-http's [`ChunkedDecoder`].

use std::io;

use weft_http::{ChunkedDecoder, Limits};

/// Longest response head accepted (status line, fields, empty line); a longer one is a
/// protocol error. The read buffer must be at least this large.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Why a response could not be read.
#[derive(Debug)]
pub enum ResponseError {
    /// The read failed (reset, timeout: the `io::ErrorKind` tells).
    Io(io::Error),
    /// The connection ended before the response did (`Closed` when no byte of it had come).
    Truncated,
    /// The connection ended before any byte of the response.
    Closed,
    /// Bytes that are not an HTTP/1.x response.
    Malformed(&'static str),
}

/// What the head of a response said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Head {
    /// Status code of the final (non-1xx) response.
    pub status: u16,
    /// The connection closes after this response (`Connection: close`, HTTP/1.0 without
    /// keep-alive, or a body framed by the close).
    pub close: bool,
    /// Declared `Content-Length`, if any.
    pub content_length: Option<u64>,
    /// The body is chunked.
    pub chunked: bool,
}

/// One complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// The final response's head.
    pub head: Head,
    /// Body bytes (decoded length for a chunked body).
    pub body_bytes: u64,
    /// Every byte of the response read from the connection, heads included.
    pub wire_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a complete head; `scanned` bytes are known not to hold its end.
    Head {
        scanned: usize,
    },
    /// Body bytes left.
    Length(u64),
    Chunked,
    UntilClose,
    Done,
}

/// Incremental response reader; reuse it with [`ResponseParser::reset`] for the next response.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    head_request: bool,
    head: Head,
    body_bytes: u64,
    wire_bytes: u64,
    chunked: ChunkedDecoder,
}

/// Result of one [`ResponseParser::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input consumed. A head is consumed only when complete, so bytes left
    /// unconsumed must be offered again, with more after them.
    pub consumed: usize,
    /// The response is complete.
    pub done: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        ResponseParser::new()
    }
}

impl ResponseParser {
    /// A parser for the response to a request other than HEAD.
    pub fn new() -> ResponseParser {
        ResponseParser {
            state: State::Head { scanned: 0 },
            head_request: false,
            head: Head::default(),
            body_bytes: 0,
            wire_bytes: 0,
            chunked: ChunkedDecoder::new(&Limits::default()),
        }
    }

    /// Gets ready for the next response; `head_request`: it answers a HEAD (no body whatever
    /// the head says).
    pub fn reset(&mut self, head_request: bool) {
        self.state = State::Head { scanned: 0 };
        self.head_request = head_request;
        self.head = Head::default();
        self.body_bytes = 0;
        self.wire_bytes = 0;
    }

    /// The response so far (complete once `advance` said `done`).
    pub fn summary(&self) -> Summary {
        Summary {
            head: self.head,
            body_bytes: self.body_bytes,
            wire_bytes: self.wire_bytes,
        }
    }

    /// Whether the next read may end the response by end of stream.
    fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// Feeds `input` (the unconsumed bytes received so far).
    pub fn advance(&mut self, input: &[u8]) -> Result<Progress, ResponseError> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.state {
                State::Done => break,
                State::Head { scanned } => {
                    let Some(end) = head_end(rest, scanned) else {
                        if rest.len() >= MAX_HEAD_BYTES {
                            return Err(ResponseError::Malformed("response head too large"));
                        }
                        self.state = State::Head {
                            scanned: rest.len(),
                        };
                        break;
                    };
                    let head = parse_head(&rest[..end])?;
                    used += end;
                    self.wire_bytes += end as u64;
                    self.start_body(head);
                }
                State::Length(left) => {
                    let n = left.min(rest.len() as u64);
                    used += n as usize;
                    self.body_bytes += n;
                    self.wire_bytes += n;
                    self.state = if n == left {
                        State::Done
                    } else {
                        State::Length(left - n)
                    };
                    if rest.len() as u64 <= left {
                        break;
                    }
                }
                State::Chunked => {
                    if rest.is_empty() {
                        break;
                    }
                    let step = self
                        .chunked
                        .decode(rest)
                        .map_err(|_| ResponseError::Malformed("bad chunked body"))?;
                    used += step.consumed;
                    self.wire_bytes += step.consumed as u64;
                    self.body_bytes += (step.data.1 - step.data.0) as u64;
                    if step.done {
                        self.state = State::Done;
                    } else if step.consumed == 0 {
                        break;
                    }
                }
                State::UntilClose => {
                    used += rest.len();
                    self.body_bytes += rest.len() as u64;
                    self.wire_bytes += rest.len() as u64;
                    break;
                }
            }
        }
        Ok(Progress {
            consumed: used,
            done: self.state == State::Done,
        })
    }

    /// The connection ended: completes a body framed by the close, else an error.
    pub fn eof(&mut self) -> Result<(), ResponseError> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            State::Head { scanned: 0 } if self.wire_bytes == 0 => Err(ResponseError::Closed),
            _ => Err(ResponseError::Truncated),
        }
    }

    fn start_body(&mut self, head: Head) {
        let interim = (100..200).contains(&head.status) && head.status != 101;
        if interim {
            // 100 Continue, 103 Early Hints: the final response follows.
            self.state = State::Head { scanned: 0 };
            return;
        }
        self.head = head;
        let no_body = self.head_request || matches!(head.status, 101 | 204 | 304);
        self.state = if no_body {
            State::Done
        } else if head.chunked {
            self.chunked = ChunkedDecoder::new(&Limits::default());
            State::Chunked
        } else if let Some(n) = head.content_length {
            if n == 0 {
                State::Done
            } else {
                State::Length(n)
            }
        } else {
            self.head.close = true;
            State::UntilClose
        };
        if head.status == 101 {
            self.head.close = true;
        }
    }
}

/// Length of the head (through its empty line) if `buf` holds all of it; `scanned` bytes at
/// the start are known not to contain the end.
fn head_end(buf: &[u8], scanned: usize) -> Option<usize> {
    let from = scanned.saturating_sub(3);
    memchr::memmem::find(&buf[from..], b"\r\n\r\n").map(|i| from + i + 4)
}

/// Parses a complete head (through the CRLFCRLF).
fn parse_head(head: &[u8]) -> Result<Head, ResponseError> {
    // Without the last "\n\r\n", every line (status line included) ends with its CR.
    let mut lines = head[..head.len() - 3].split(|&b| b == b'\n');
    let Some(status_line) = lines.next().and_then(|l| l.strip_suffix(b"\r")) else {
        return Err(ResponseError::Malformed("status line without CR"));
    };
    // "HTTP/1.1 200 OK": version, space, three digits, then a space or the end.
    if status_line.len() < 12
        || !status_line.starts_with(b"HTTP/1.")
        || status_line[8] != b' '
        || status_line.get(12).is_some_and(|&b| b != b' ')
    {
        return Err(ResponseError::Malformed("bad status line"));
    }
    let minor = status_line[7];
    let digits = &status_line[9..12];
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(ResponseError::Malformed("bad status code"));
    }
    let status = digits
        .iter()
        .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let mut h = Head {
        status,
        close: minor == b'0',
        content_length: None,
        chunked: false,
    };
    let mut te = false;
    for line in lines {
        let Some(line) = line.strip_suffix(b"\r") else {
            return Err(ResponseError::Malformed("header line without CR"));
        };
        let Some(colon) = memchr::memchr(b':', line) else {
            return Err(ResponseError::Malformed("header line without colon"));
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.is_empty() || name.iter().any(|&b| b == b' ' || b == b'\t') {
            return Err(ResponseError::Malformed("bad header name"));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_length(value)?;
            if h.content_length.is_some_and(|old| old != n) {
                return Err(ResponseError::Malformed("conflicting Content-Length"));
            }
            h.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            te = true;
            // Chunked only when it is the last coding applied.
            h.chunked = value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|c| trim(c).eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                if token.eq_ignore_ascii_case(b"close") {
                    h.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && minor == b'0' {
                    h.close = false;
                }
            }
        }
    }
    if te {
        // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3); a non-chunked coding
        // is framed by the close.
        h.content_length = None;
    }
    Ok(h)
}

fn parse_length(v: &[u8]) -> Result<u64, ResponseError> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return Err(ResponseError::Malformed("bad Content-Length"));
    }
    Ok(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| b != b' ' && b != b'\t');
    let end = v.iter().rposition(|&b| b != b' ' && b != b'\t');
    match (start, end) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    }
}

/// A connection's read buffer: bytes received and not yet consumed are `buf[start..end]`.
/// Kept between responses so that nothing is lost if a server sends more than one answer.
#[derive(Debug)]
pub struct ReadBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl ReadBuf {
    /// A buffer of `size` bytes (at least [`MAX_HEAD_BYTES`]).
    pub fn new(size: usize) -> ReadBuf {
        ReadBuf {
            buf: vec![0; size.max(MAX_HEAD_BYTES)].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Forgets buffered bytes (a new connection).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}

/// Reads one response with `parser` (already [`reset`](ResponseParser::reset) for it), calling
/// `read` for more bytes as needed.
pub fn read_response(
    parser: &mut ResponseParser,
    rb: &mut ReadBuf,
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
) -> Result<Summary, ResponseError> {
    loop {
        let p = parser.advance(&rb.buf[rb.start..rb.end])?;
        rb.start += p.consumed;
        if rb.start == rb.end {
            rb.start = 0;
            rb.end = 0;
        }
        if p.done {
            return Ok(parser.summary());
        }
        if rb.end == rb.buf.len() {
            // A partial head at the end of the buffer: move it to the front.
            rb.buf.copy_within(rb.start..rb.end, 0);
            rb.end -= rb.start;
            rb.start = 0;
        }
        let n = loop {
            match read(&mut rb.buf[rb.end..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if parser.until_close() && is_reset(&e) => break 0,
                r => break r.map_err(ResponseError::Io)?,
            }
        };
        if n == 0 {
            parser.eof()?;
            return Ok(parser.summary());
        }
        rb.end += n;
    }
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `wire` as responses, handing it over in pieces of the given lengths (the last
    /// piece repeats), then end of stream.
    fn read_all(wire: &[u8], pieces: &[usize], head: bool, count: usize) -> Vec<Summary> {
        let mut parser = ResponseParser::new();
        let mut rb = ReadBuf::new(0);
        let mut pos = 0;
        let mut i = 0;
        let mut out = Vec::new();
        for _ in 0..count {
            parser.reset(head);
            let s = read_response(&mut parser, &mut rb, |buf| {
                let want = pieces[i.min(pieces.len() - 1)];
                i += 1;
                let n = want.min(buf.len()).min(wire.len() - pos);
                buf[..n].copy_from_slice(&wire[pos..pos + n]);
                pos += n;
                Ok(n)
            })
            .unwrap_or_else(|e| panic!("{e:?} reading {:?}", String::from_utf8_lossy(wire)));
            out.push(s);
        }
        assert_eq!(pos, wire.len(), "every byte consumed");
        out
    }

    const CL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nhello\r\n1;ext=1\r\n \r\nc\r\n world again\r\n0\r\nTrailer: t\r\n\r\n";

    #[test]
    fn content_length() {
        let s = read_all(CL, &[4096], false, 1)[0];
        assert_eq!(s.head.status, 200);
        assert_eq!(s.head.content_length, Some(5));
        assert!(!s.head.close);
        assert_eq!(s.body_bytes, 5);
        assert_eq!(s.wire_bytes, CL.len() as u64);
    }

    #[test]
    fn chunked_body() {
        let s = read_all(CHUNKED, &[4096], false, 1)[0];
        assert!(s.head.chunked);
        assert_eq!(s.body_bytes, 5 + 1 + 12);
        assert_eq!(s.wire_bytes, CHUNKED.len() as u64);
    }

    #[test]
    fn split_at_every_byte() {
        // Two responses back to back on one connection, cut in two at every offset, and
        // also delivered one byte per read.
        for wire in [CL, CHUNKED] {
            let both = [wire, wire].concat();
            let whole = read_all(&both, &[both.len()], false, 2);
            for cut in 1..both.len() {
                assert_eq!(
                    read_all(&both, &[cut, both.len()], false, 2),
                    whole,
                    "cut at {cut}"
                );
            }
            assert_eq!(read_all(&both, &[1], false, 2), whole);
        }
    }

    #[test]
    fn body_framed_by_close() {
        let wire = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nuntil the end";
        for pieces in [&[4096][..], &[1]] {
            let s = read_all(wire, pieces, false, 1)[0];
            assert!(s.head.close);
            assert_eq!(s.body_bytes, 13);
        }
    }

    #[test]
    fn connection_close_and_http10() {
        let wire = b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n";
        assert!(read_all(wire, &[4096], false, 1)[0].head.close);
        let wire = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert!(read_all(wire, &[4096], false, 1)[0].head.close);
        let wire = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        assert!(!read_all(wire, &[4096], false, 1)[0].head.close);
    }

    #[test]
    fn head_request_and_bodiless_statuses_have_no_body() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10541\r\n\r\n";
        let s = read_all(wire, &[4096], true, 1)[0];
        assert_eq!((s.head.content_length, s.body_bytes), (Some(10541), 0));
        for status in ["204 No Content", "304 Not Modified"] {
            let wire = format!("HTTP/1.1 {status}\r\nContent-Length: 7\r\n\r\n");
            let s = read_all(wire.as_bytes(), &[4096], false, 1)[0];
            assert_eq!(s.body_bytes, 0);
        }
    }

    #[test]
    fn interim_responses_are_skipped() {
        let wire =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        let s = read_all(wire, &[1], false, 1)[0];
        assert_eq!((s.head.status, s.body_bytes), (201, 2));
        assert_eq!(s.wire_bytes, wire.len() as u64);
    }

    #[test]
    fn transfer_encoding_overrides_content_length() {
        let wire =
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let s = read_all(wire, &[4096], false, 1)[0];
        assert!(s.head.chunked);
        assert_eq!(s.body_bytes, 0);
    }

    fn error_of(wire: &[u8]) -> ResponseError {
        let mut parser = ResponseParser::new();
        let mut rb = ReadBuf::new(0);
        let mut left = wire;
        read_response(&mut parser, &mut rb, |buf| {
            let n = buf.len().min(left.len());
            buf[..n].copy_from_slice(&left[..n]);
            left = &left[n..];
            Ok(n)
        })
        .expect_err("an error")
    }

    #[test]
    fn malformed_and_truncated() {
        assert!(matches!(error_of(b""), ResponseError::Closed));
        assert!(matches!(
            error_of(b"HTTP/1.1 200"),
            ResponseError::Truncated
        ));
        assert!(matches!(
            error_of(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"),
            ResponseError::Truncated
        ));
        for bad in [
            &b"SMTP/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(
                matches!(error_of(bad), ResponseError::Malformed(_)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = [&b"HTTP/1.1 200 OK\r\nX: "[..], &[b'a'; MAX_HEAD_BYTES]].concat();
        assert!(matches!(error_of(&huge), ResponseError::Malformed(_)));
    }

    #[test]
    fn reset_while_reading_until_close_ends_the_body() {
        let mut parser = ResponseParser::new();
        let mut rb = ReadBuf::new(0);
        let mut calls = 0;
        let s = read_response(&mut parser, &mut rb, |buf| {
            calls += 1;
            if calls == 1 {
                let w = b"HTTP/1.1 200 OK\r\n\r\nabc";
                buf[..w.len()].copy_from_slice(w);
                Ok(w.len())
            } else {
                Err(io::ErrorKind::ConnectionReset.into())
            }
        })
        .unwrap();
        assert_eq!(s.body_bytes, 3);
    }
}
