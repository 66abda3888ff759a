//! A raw HTTP/1.1 client over `std::net::TcpStream` that reads responses with correct framing.
//! Every read has a timeout and every response read an overall deadline, so a test that meets
//! a server that stopped answering fails instead of hanging.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Longest wait for one read of a socket.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a whole response.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);

/// One parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was framed by the connection closing (no Content-Length, not chunked).
    pub until_close: bool,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many fields named `name` there are.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// True if the response says the connection closes after it.
    pub fn closes(&self) -> bool {
        self.header("Connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Why no response could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The server closed (or reset) the connection before sending any byte of a response.
    Closed,
    /// No complete response before the deadline; the bytes received so far.
    Timeout(Vec<u8>),
    /// The connection ended in the middle of a response; the bytes received so far.
    Truncated(Vec<u8>),
    /// Bytes that are not an HTTP/1.x response.
    Malformed(String),
    /// Another socket error.
    Io(io::Error),
}

/// A client connection that reads responses with correct framing.
#[derive(Debug)]
pub struct Conn {
    pub stream: TcpStream,
    /// Received bytes not yet consumed by a response.
    buf: Vec<u8>,
    eof: bool,
}

impl Conn {
    /// Connects to `addr` with read and write timeouts set.
    pub fn connect(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Conn::from_stream(stream)
    }

    /// Wraps an already connected stream, with read and write timeouts set.
    pub fn from_stream(stream: TcpStream) -> Conn {
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
            eof: false,
        }
    }

    /// Writes all of `bytes`; panics on failure.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Writes all of `bytes`; an error (the server already closed) is returned, not fatal.
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Half-closes: the server reads end-of-file after what was sent.
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Reads one response to a request other than HEAD.
    pub fn read_response(&mut self) -> Result<Response, ReadError> {
        self.read_response_for(false)
    }

    /// Reads one response to a HEAD request (no body whatever the headers say).
    pub fn read_head_response(&mut self) -> Result<Response, ReadError> {
        self.read_response_for(true)
    }

    /// Reads one response; `head` if it answers a HEAD request. A 1xx interim response is
    /// returned like any other (read again for the final one).
    pub fn read_response_for(&mut self, head: bool) -> Result<Response, ReadError> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if self.eof {
                return Err(if self.buf.is_empty() {
                    ReadError::Closed
                } else {
                    ReadError::Truncated(std::mem::take(&mut self.buf))
                });
            }
            self.fill(deadline)?;
        };
        let head_text = String::from_utf8(self.buf[..head_end - 4].to_vec())
            .map_err(|_| ReadError::Malformed("response head is not UTF-8".into()))?;
        let mut lines = head_text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status: u16 = parts
            .next()
            .and_then(|s| (s.len() == 3).then_some(s))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ReadError::Malformed(format!("status line {status_line:?}")))?;
        if !version.starts_with("HTTP/1.") {
            return Err(ReadError::Malformed(format!("status line {status_line:?}")));
        }
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for line in lines {
            let (n, v) = line
                .split_once(':')
                .ok_or_else(|| ReadError::Malformed(format!("header line {line:?}")))?;
            if n.is_empty() || n.contains([' ', '\t']) {
                return Err(ReadError::Malformed(format!("header name in {line:?}")));
            }
            headers.push((n.to_string(), v.trim().to_string()));
        }
        self.buf.drain(..head_end);
        let mut resp = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            until_close: false,
        };
        if head || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        let chunked = resp
            .header("Transfer-Encoding")
            .is_some_and(|te| te.to_ascii_lowercase().trim().ends_with("chunked"));
        if chunked {
            resp.body = self.read_chunked(deadline)?;
        } else if let Some(cl) = resp.header("Content-Length") {
            let n: usize = cl
                .parse()
                .map_err(|_| ReadError::Malformed(format!("Content-Length {cl:?}")))?;
            while self.buf.len() < n {
                if self.eof {
                    return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
                }
                self.fill(deadline)?;
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            while !self.eof {
                self.fill(deadline)?;
            }
            resp.body = std::mem::take(&mut self.buf);
            resp.until_close = true;
        }
        Ok(resp)
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        loop {
            let line_end = self.read_line(deadline)?;
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            self.buf.drain(..line_end + 2);
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| ReadError::Malformed(format!("chunk size line {line:?}")))?;
            if size == 0 {
                // Trailer fields, then the empty line.
                loop {
                    let end = self.read_line(deadline)?;
                    self.buf.drain(..end + 2);
                    if end == 0 {
                        return Ok(body);
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if self.eof {
                    return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
                }
                self.fill(deadline)?;
            }
            body.extend_from_slice(&self.buf[..size]);
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(ReadError::Malformed(
                    "chunk data not followed by CRLF".into(),
                ));
            }
            self.buf.drain(..size + 2);
        }
    }

    /// Offset of the next CRLF in the buffer, reading until there is one.
    fn read_line(&mut self, deadline: Instant) -> Result<usize, ReadError> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                return Ok(i);
            }
            if self.eof {
                return Err(ReadError::Truncated(std::mem::take(&mut self.buf)));
            }
            self.fill(deadline)?;
        }
    }

    /// Reads more bytes into the buffer (sets `eof` at end of stream or on a reset).
    fn fill(&mut self, deadline: Instant) -> Result<(), ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Timeout(self.buf.clone()));
        }
        self.stream
            .set_read_timeout(Some(left.min(READ_TIMEOUT)))
            .map_err(ReadError::Io)?;
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => self.eof = true,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadError::Timeout(self.buf.clone()))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                self.eof = true
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
        Ok(())
    }

    /// Waits up to `timeout` for the server to close the connection; true if it did, without
    /// sending anything more. Panics if bytes arrive.
    #[track_caller]
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes before close: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let deadline = Instant::now() + timeout;
        while !self.eof {
            match self.fill(deadline) {
                Ok(()) => {}
                Err(ReadError::Timeout(_)) => return false,
                Err(e) => panic!("waiting for close: {e:?}"),
            }
            assert!(
                self.buf.is_empty(),
                "unexpected bytes instead of close: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
        true
    }

    /// Reads responses until the server closes the connection (or a read fails); returns
    /// them and how reading ended (`None`: a clean close).
    pub fn read_all_responses(&mut self) -> (Vec<Response>, Option<ReadError>) {
        let mut out = Vec::new();
        loop {
            match self.read_response() {
                Ok(r) => out.push(r),
                Err(ReadError::Closed) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// True if nothing is buffered and the connection has ended.
    pub fn at_eof(&self) -> bool {
        self.eof && self.buf.is_empty()
    }
}

/// Offset of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Encodes `body` as one chunk per `piece` bytes plus the last chunk.
pub fn chunked(body: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(piece.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
