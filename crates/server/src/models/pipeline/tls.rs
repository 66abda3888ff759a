//! TLS on the pipeline: the session travels with the connection (`Conn::tls`) from stage to
//! stage and through the poller. Receive runs the handshake without blocking (a step per
//! readiness, parked in the poller under `timeouts.tls_handshake`) and reads plaintext
//! through [`Session::reader`]; process reads request bodies and writes streamed bodies
//! through `tls::TlsStream` over its `PollStream`; send encrypts the response piece by piece
//! ([`write_some`]) and writes the records as the socket takes them. `sendfile` cannot carry
//! TLS: a file body is read into a per-thread buffer and encrypted.

use std::cell::RefCell;
use std::io::{self, IoSlice, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use super::{Conn, Out};
use crate::conn::settle;
use crate::conn::Tail;
use crate::tls::Session as Tls;

/// File bytes encrypted per step of send (two full TLS records).
const FILE_PIECE: usize = 32 * 1024;

thread_local! {
    // Send threads never yield inside a step, so a borrow of the thread's buffer cannot
    // overlap another.
    static FILE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A connection's TLS state.
pub(crate) struct Session {
    pub(crate) conn: Tls,
}

impl Session {
    pub(crate) fn new(conn: Tls) -> Session {
        Session { conn }
    }

    /// The plaintext side for receive: decrypted bytes, then records from the socket.
    pub(crate) fn reader<'a>(&'a mut self, stream: &'a TcpStream) -> Reader<'a> {
        Reader {
            conn: &mut self.conn,
            stream,
        }
    }
}

/// How a step of the handshake ended.
pub(crate) enum Step {
    /// Done: requests may follow (some may be decrypted already).
    Done,
    /// The handshake needs more of the client's bytes.
    More,
    /// Close (logged).
    Closed,
}

/// Runs the handshake as far as the bytes the prelude read (`conn.rbuf`, all of them handed
/// to the session) allow, writing rustls's answers by `deadline`.
pub(crate) fn handshake(conn: &mut Conn, deadline: Instant) -> Step {
    let peer = conn.info.peer;
    let Some(s) = conn.tls.as_deref_mut() else {
        return Step::Done;
    };
    if !conn.rbuf.is_empty() {
        s.conn.feed(conn.rbuf.data());
        conn.rbuf.consume(conn.rbuf.len());
    }
    if let Err(e) = s.conn.process_new_packets() {
        log::info!("{peer}: TLS handshake failed: {e}");
        // The alert rustls queued tells the client why.
        let _ = flush(&mut s.conn, &conn.stream, deadline);
        return Step::Closed;
    }
    if let Err(e) = flush(&mut s.conn, &conn.stream, deadline) {
        log::debug!("{peer}: TLS handshake: {e}");
        return Step::Closed;
    }
    if s.conn.is_handshaking() {
        return Step::More;
    }
    settle(&s.conn, &conn.info);
    conn.prelude.secured(s.conn.alpn_protocol());
    Step::Done
}

/// Writes what rustls has queued. A handshake flight fits a new socket's send buffer, so a
/// full buffer is rare here; then this thread waits in poll(2) up to `deadline`.
fn flush(conn: &mut Tls, stream: &TcpStream, deadline: Instant) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(&mut &*stream) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if !weft_sys::poll::poll_writable(stream.as_raw_fd(), left)? {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "TLS handshake not done in time",
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// True if the session holds decrypted bytes (or the peer's close) the socket will not
/// signal again: the connection goes back to receive instead of waiting.
pub(crate) fn pending(conn: &mut Conn) -> bool {
    conn.tls
        .as_deref_mut()
        .is_some_and(|s| crate::tls::pending(&mut s.conn))
}

/// Gives back the session's empty buffers while the connection waits for its next request.
pub(crate) fn trim(conn: &mut Conn) {
    if let Some(s) = conn.tls.as_deref_mut() {
        s.conn.trim();
    }
}

/// Sends close_notify before the lingering close, as far as the socket takes it now.
pub(crate) fn close_notify(conn: &mut Conn) {
    if let Some(s) = conn.tls.as_deref_mut() {
        s.conn.send_close_notify();
        while s.conn.wants_write() {
            match s.conn.write_tls(&mut &conn.stream) {
                Ok(n) if n > 0 => {}
                _ => return,
            }
        }
    }
}

/// Receive's plaintext reader: `WouldBlock` once the session has no plaintext and the
/// socket no bytes.
pub(crate) struct Reader<'a> {
    conn: &'a mut Tls,
    stream: &'a TcpStream,
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(n) = self.conn.read_plain(buf) {
                return Ok(n);
            }
            // The TCP stream may end without close_notify (as most clients end).
            let n = self.conn.read_tls(&mut &*self.stream)?;
            if n == 0 {
                return Ok(0);
            }
            if let Err(e) = self.conn.process_new_packets() {
                // The alert, if the socket takes it now.
                let _ = self.conn.write_tls(&mut &*self.stream);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

/// Send's step over TLS: first the records already made go out (`WouldBlock`: park for
/// writability), then the next piece of the response is encrypted. Returns the plaintext
/// bytes taken, or `None` once the whole response is encrypted and written.
pub(crate) fn write_some(conn: &mut Conn, out: &Out) -> io::Result<Option<usize>> {
    let Some(s) = conn.tls.as_deref_mut() else {
        return Err(io::Error::other("not a TLS connection"));
    };
    let tls = &mut s.conn;
    while tls.wants_write() {
        if tls.write_tls(&mut &conn.stream)? == 0 {
            return Ok(Some(0));
        }
    }
    if out.sent >= out.total {
        return Ok(None);
    }
    let head = conn.wbuf.as_slice();
    let head_len = head.len() as u64;
    if out.sent < head_len {
        let rest = &head[out.sent as usize..];
        return match &out.tail {
            Tail::Bytes(b) => tls.write_plain_vectored(&[IoSlice::new(rest), IoSlice::new(b)]),
            _ => tls.write_plain(rest),
        }
        .map(Some);
    }
    let done = out.sent - head_len;
    match &out.tail {
        Tail::None | Tail::Stream { .. } | Tail::Tunnel(_) => Ok(None),
        Tail::Bytes(b) => tls.write_plain(&b[done as usize..]).map(Some),
        Tail::File { file, offset, len } => FILE_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            if buf.len() < FILE_PIECE {
                buf.resize(FILE_PIECE, 0);
            }
            let want = usize::try_from(len - done).map_or(FILE_PIECE, |n| n.min(FILE_PIECE));
            let n = file.read_at(&mut buf[..want], offset + done)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                ));
            }
            // rustls takes what fits its outgoing buffer; the rest is read again next step.
            tls.write_plain(&buf[..n]).map(Some)
        }),
    }
}
