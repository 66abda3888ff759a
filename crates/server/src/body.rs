//! The connection's read buffer and the request-body reader handlers read from.
//!
//! A body is framed by the head (`Content-Length` or chunked, decided by weft-http); the reader
//! serves bytes already buffered first, then reads the stream, enforces the body size limit
//! and the body-read timeout, and sends `100 Continue` the first time a handler asks for data
//! of a request that expects it. Problems are recorded for the driver, which answers the
//! matching status (400, 408, 413) and closes the connection.

use std::io::{self, Read};
use std::time::Duration;

use weft_http::{BodyFraming, ChunkedDecoder, Limits};

use crate::net::Transport;

/// A growable read buffer holding bytes received but not yet consumed. Bytes are read into
/// already-initialised memory, so no `unsafe` is needed; the buffer is zeroed once per growth.
#[derive(Debug)]
pub struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Storage for the next [`ReadBuf::split_head`], given back by [`ReadBuf::recycle_head`]:
    /// a keep-alive connection copies each head out without an allocation.
    spare: Vec<u8>,
}

/// A recycled head copy larger than this is freed instead of kept.
pub(crate) const SPARE_HEAD_MAX: usize = 8 * 1024;

impl ReadBuf {
    /// An empty buffer of `capacity` bytes.
    pub fn new(capacity: usize) -> ReadBuf {
        ReadBuf {
            buf: vec![0; capacity],
            start: 0,
            end: 0,
            spare: Vec::new(),
        }
    }

    /// Moves the first `n` unconsumed bytes (a request head) out into an owned buffer.
    pub fn split_head(&mut self, n: usize) -> Vec<u8> {
        let mut head = std::mem::take(&mut self.spare);
        head.clear();
        head.extend_from_slice(&self.data()[..n]);
        self.consume(n);
        head
    }

    /// Gives back a buffer from [`ReadBuf::split_head`] once its request is done.
    #[inline]
    pub fn recycle_head(&mut self, head: Vec<u8>) {
        if head.capacity() <= SPARE_HEAD_MAX && head.capacity() > self.spare.capacity() {
            self.spare = head;
        }
    }

    /// The unconsumed bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Number of unconsumed bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True if nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Drops the first `n` unconsumed bytes.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads once from `r`, keeping at most `max` unconsumed bytes in total. Returns the bytes
    /// read (0: end of stream). With `max` unconsumed bytes already held it returns an error.
    pub fn fill<R: Read + ?Sized>(&mut self, r: &mut R, max: usize) -> io::Result<usize> {
        if self.len() >= max {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "read buffer limit reached",
            ));
        }
        if self.end == self.buf.len() {
            self.compact();
            if self.end == self.buf.len() {
                let new_len = (self.buf.len() * 2).clamp(1024, max.max(1024));
                self.buf.resize(new_len, 0);
            }
        }
        let room = (max - self.len()).min(self.buf.len() - self.end);
        let n = r.read(&mut self.buf[self.end..self.end + room])?;
        self.end += n;
        Ok(n)
    }

    /// Moves the unconsumed bytes to the front, so the room behind them is all there is.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// The unconsumed bytes, writable (a TLS session decrypts records in place).
    pub(crate) fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    /// Room for at least `n` more bytes behind the unconsumed ones (growing the buffer if
    /// need be), for a writer that reports what it wrote with [`ReadBuf::filled`].
    pub(crate) fn spare(&mut self, n: usize) -> &mut [u8] {
        if self.buf.len() - self.end < n {
            self.compact();
            if self.buf.len() - self.end < n {
                self.buf.resize(self.end + n, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Counts `n` bytes written into [`ReadBuf::spare`] as unconsumed.
    pub(crate) fn filled(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }

    /// Appends `bytes`.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.spare(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.filled(bytes.len());
    }

    /// Gives the whole allocation back once the buffer is empty and larger than `keep` bytes
    /// (`keep` 0: whenever it is empty).
    pub(crate) fn release_if_idle(&mut self, keep: usize) {
        if self.is_empty() && self.buf.len() > keep {
            self.buf = Vec::new();
        }
    }

    /// The bytes allocated.
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.buf.capacity()
    }

    /// The last `fill` (with this `max`) took all the room it had: the source may hold more.
    pub fn is_full(&self, max: usize) -> bool {
        self.end == self.buf.len() || self.len() >= max
    }

    /// Releases memory beyond `capacity` once the buffer is empty (after a large request).
    pub fn shrink_if_idle(&mut self, capacity: usize) {
        if self.is_empty() && self.buf.len() > capacity {
            self.buf.truncate(capacity);
            self.buf.shrink_to_fit();
        }
    }
}

/// Why a body could not be read; the driver answers with [`BodyError::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// More than the configured maximum body size: 413.
    TooLarge,
    /// Chunked framing was broken: 400.
    Malformed(weft_http::Error),
    /// The client stopped sending before the body-read timeout: 408.
    Timeout,
    /// The client sent the body slower than `timeouts.body_min_rate`: 408.
    TooSlow,
    /// The client closed the connection before the end of the body: no response possible.
    Closed,
    /// Another I/O error: no response possible.
    Io(io::ErrorKind),
}

impl BodyError {
    /// The status to answer with, if the connection can still carry one.
    pub fn status(&self) -> Option<u16> {
        match self {
            BodyError::TooLarge => Some(413),
            BodyError::Malformed(e) => Some(e.status()),
            BodyError::Timeout | BodyError::TooSlow => Some(408),
            BodyError::Closed | BodyError::Io(_) => None,
        }
    }

    fn to_io(self) -> io::Error {
        let kind = match self {
            BodyError::TooLarge => io::ErrorKind::FileTooLarge,
            BodyError::Malformed(_) => io::ErrorKind::InvalidData,
            BodyError::Timeout | BodyError::TooSlow => io::ErrorKind::TimedOut,
            BodyError::Closed => io::ErrorKind::UnexpectedEof,
            BodyError::Io(k) => k,
        };
        io::Error::new(kind, format!("request body: {self:?}"))
    }
}

#[derive(Debug)]
enum State {
    Length(u64),
    /// `pending` decoded data bytes sit at the front of the read buffer.
    Chunked {
        decoder: ChunkedDecoder,
        pending: usize,
    },
    Done,
}

/// The interim response sent before reading a body the client holds back.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The body of one request, readable with [`std::io::Read`].
pub struct RequestBody<'a> {
    rbuf: &'a mut ReadBuf,
    stream: &'a mut dyn Transport,
    state: State,
    continue_pending: bool,
    max: u64,
    received: u64,
    timeout: Duration,
    /// The minimum-rate rule, from the moment the reader was made (the head complete);
    /// `None` for a request without a body.
    min_rate: Option<crate::minrate::MinRate>,
    /// Bytes that arrived for this body (buffered with the head, then read): what the rule
    /// counts, so a handler that reads slowly is not taken for a slow client.
    arrived: u64,
    read_buf_max: usize,
    error: Option<BodyError>,
    /// Measure the time spent in reads (`[timing]`).
    timed: bool,
    read_time: Duration,
}

impl std::fmt::Debug for RequestBody<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBody")
            .field("state", &self.state)
            .field("received", &self.received)
            .field("error", &self.error)
            .finish()
    }
}

/// Bounds one body read.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Largest body accepted (413 past it).
    pub max: u64,
    /// Longest wait for the next body bytes (408 past it).
    pub timeout: Duration,
    /// Bounds on chunked framing.
    pub http: Limits,
    /// Largest amount of buffered unread data.
    pub read_buf_max: usize,
    /// The minimum-rate rule over the whole body (`timeouts.body_min_rate`); `None` for a
    /// request framed without a body (nothing is read, so nothing is timed).
    pub(crate) min_rate: Option<crate::minrate::MinRate>,
}

impl<'a> RequestBody<'a> {
    /// A reader for a body framed by `framing`. `expect_continue`: the client waits for
    /// `100 Continue` (sent on the first read).
    pub(crate) fn new(
        framing: BodyFraming,
        expect_continue: bool,
        rbuf: &'a mut ReadBuf,
        stream: &'a mut dyn Transport,
        limits: BodyLimits,
    ) -> RequestBody<'a> {
        let arrived = rbuf.len() as u64;
        let state = match framing {
            BodyFraming::None => State::Done,
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::Chunked => State::Chunked {
                decoder: ChunkedDecoder::new(&limits.http),
                pending: 0,
            },
        };
        let continue_pending = expect_continue && !matches!(state, State::Done);
        RequestBody {
            rbuf,
            stream,
            state,
            continue_pending,
            max: limits.max,
            received: 0,
            timeout: limits.timeout,
            min_rate: limits.min_rate,
            arrived,
            read_buf_max: limits.read_buf_max,
            error: None,
            timed: false,
            read_time: Duration::ZERO,
        }
    }

    /// Measures the time spent in reads from now on (see [`RequestBody::read_time`]).
    pub(crate) fn set_timed(&mut self, on: bool) {
        self.timed = on;
    }

    /// Time spent waiting for and reading body bytes while timed.
    pub(crate) fn read_time(&self) -> Duration {
        self.read_time
    }

    /// True once the whole body has been read (or the request had none).
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Writes an interim response (`bytes`: a whole `1xx` head, e.g. a proxied `103 Early
    /// Hints`) to the client ahead of the final one. Over HTTP/2 it goes nowhere (the
    /// handler's transport there writes nothing).
    pub(crate) fn interim(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Takes the bytes the client sent after this request and its body that are buffered
    /// already (a tunnel's first bytes, sent before its `101`). Only once the body is read.
    pub(crate) fn take_after(&mut self) -> Vec<u8> {
        if !self.is_finished() {
            return Vec::new();
        }
        let out = self.rbuf.data().to_vec();
        self.rbuf.consume(out.len());
        // The connection reads no more requests: its read buffer's memory goes back (a quiet
        // WebSocket can hold its tunnel for hours).
        self.rbuf.release_if_idle(0);
        out
    }

    /// True if the client still waits for `100 Continue` (no body byte was asked for).
    pub(crate) fn continue_pending(&self) -> bool {
        self.continue_pending
    }

    /// The error that stopped reading, if any.
    pub fn error(&self) -> Option<BodyError> {
        self.error
    }

    /// Reads the whole body into a vector (bounded by the body size limit).
    pub fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        if let State::Length(n) = self.state {
            v.reserve(usize::try_from(n.min(self.max)).unwrap_or(0));
        }
        self.read_to_end(&mut v)?;
        Ok(v)
    }

    /// Reads and discards up to `limit` bytes; true if the body ended within them.
    pub(crate) fn drain(&mut self, limit: u64) -> bool {
        let mut scratch = [0u8; 4096];
        let mut left = limit;
        while !self.is_finished() {
            if left == 0 || self.error.is_some() {
                return false;
            }
            match self.read(&mut scratch[..usize::try_from(left.min(4096)).unwrap_or(4096)]) {
                Ok(0) => break,
                Ok(n) => left -= n as u64,
                Err(_) => return false,
            }
        }
        self.is_finished()
    }

    fn fail(&mut self, e: BodyError) -> io::Error {
        self.error = Some(e);
        e.to_io()
    }

    /// Bounds the next read by the body-read timeout and the minimum-rate deadline; says
    /// whether the latter is the one that binds.
    fn arm_timeout(&mut self) -> Result<bool, BodyError> {
        let now = std::time::Instant::now();
        let idle = now + self.timeout;
        let (deadline, slow) = self
            .min_rate
            .map_or((idle, false), |r| r.earliest(self.arrived, idle));
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(BodyError::TooSlow);
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(|e| BodyError::Io(e.kind()))?;
        Ok(slow)
    }

    fn read_stream(&mut self, out: &mut [u8]) -> Result<usize, BodyError> {
        let slow = self.arm_timeout()?;
        loop {
            match self.stream.read(out) {
                Ok(0) => return Err(BodyError::Closed),
                Ok(n) => {
                    self.arrived += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if crate::net::timed_out(&e) => {
                    return Err(if slow {
                        BodyError::TooSlow
                    } else {
                        BodyError::Timeout
                    })
                }
                Err(e) => return Err(BodyError::Io(e.kind())),
            }
        }
    }

    fn fill_rbuf(&mut self) -> Result<(), BodyError> {
        let slow = self.arm_timeout()?;
        loop {
            match self.rbuf.fill(self.stream, self.read_buf_max) {
                Ok(0) => return Err(BodyError::Closed),
                Ok(n) => {
                    self.arrived += n as u64;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if crate::net::timed_out(&e) => {
                    return Err(if slow {
                        BodyError::TooSlow
                    } else {
                        BodyError::Timeout
                    })
                }
                Err(e) => return Err(BodyError::Io(e.kind())),
            }
        }
    }

    fn read_inner(&mut self, out: &mut [u8]) -> Result<usize, BodyError> {
        if self.continue_pending {
            self.continue_pending = false;
            self.stream
                .write_all(CONTINUE)
                .map_err(|e| BodyError::Io(e.kind()))?;
        }
        loop {
            match &mut self.state {
                State::Done => return Ok(0),
                State::Length(left) => {
                    let want = usize::try_from(*left).unwrap_or(usize::MAX).min(out.len());
                    let n = if !self.rbuf.is_empty() {
                        let n = want.min(self.rbuf.len());
                        out[..n].copy_from_slice(&self.rbuf.data()[..n]);
                        self.rbuf.consume(n);
                        n
                    } else {
                        // At most `want` <= `left` bytes: never reads into the next request.
                        self.read_stream(&mut out[..want])?
                    };
                    if let State::Length(left) = &mut self.state {
                        *left -= n as u64;
                        if *left == 0 {
                            self.state = State::Done;
                        }
                    }
                    return Ok(n);
                }
                State::Chunked { decoder, pending } => {
                    if *pending > 0 {
                        let n = (*pending).min(out.len());
                        out[..n].copy_from_slice(&self.rbuf.data()[..n]);
                        self.rbuf.consume(n);
                        *pending -= n;
                        return Ok(n);
                    }
                    if decoder.is_done() {
                        self.state = State::Done;
                        return Ok(0);
                    }
                    if self.rbuf.is_empty() {
                        self.fill_rbuf()?;
                        continue;
                    }
                    let step = decoder
                        .decode(self.rbuf.data())
                        .map_err(BodyError::Malformed)?;
                    let (d0, d1) = step.data;
                    // What the size lines so far announce: over the limit is a 413 now, not
                    // once the client has sent that much (nginx checks each chunk's size).
                    let announced = self
                        .received
                        .saturating_add((d1 - d0) as u64)
                        .saturating_add(decoder.data_left());
                    if announced > self.max {
                        return Err(BodyError::TooLarge);
                    }
                    if d1 > d0 {
                        // Data is always the tail of what a step consumed.
                        debug_assert_eq!(d1, step.consumed);
                        self.rbuf.consume(d0);
                        *pending = d1 - d0;
                    } else {
                        self.rbuf.consume(step.consumed);
                        // Framing bytes only: the decoder consumes every byte it is given
                        // until data or the end, so an empty buffer means read more.
                        if !step.done && (self.rbuf.is_empty() || step.consumed == 0) {
                            self.fill_rbuf()?;
                        }
                    }
                }
            }
        }
    }
}

impl Read for RequestBody<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.error {
            return Err(e.to_io());
        }
        if out.is_empty() {
            return Ok(0);
        }
        let started = self.timed.then(std::time::Instant::now);
        let result = self.read_inner(out);
        if let Some(t) = started {
            self.read_time += t.elapsed();
        }
        match result {
            Ok(n) => {
                self.received += n as u64;
                if self.received > self.max {
                    return Err(self.fail(BodyError::TooLarge));
                }
                Ok(n)
            }
            Err(e) => Err(self.fail(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReadBuf;

    #[test]
    fn split_head_reuses_the_recycled_storage() {
        let mut rbuf = ReadBuf::new(64);
        let mut src: &[u8] = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        rbuf.fill(&mut src, 1024).unwrap();
        let first = rbuf.split_head(19);
        assert_eq!(first, b"GET /a HTTP/1.1\r\n\r\n");
        assert_eq!(rbuf.data(), b"GET /b HTTP/1.1\r\n\r\n");
        let storage = first.as_ptr();
        rbuf.recycle_head(first);
        let second = rbuf.split_head(19);
        assert_eq!(second, b"GET /b HTTP/1.1\r\n\r\n");
        assert_eq!(
            second.as_ptr(),
            storage,
            "the head copy was not made in the recycled buffer"
        );
        assert!(rbuf.is_empty());
        // A copy over the cap is dropped rather than kept.
        rbuf.recycle_head(Vec::with_capacity(super::SPARE_HEAD_MAX + 1));
        assert!(rbuf.spare.capacity() <= super::SPARE_HEAD_MAX);
    }
}
