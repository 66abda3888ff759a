//! TLS over any [`Transport`]: the handshake ([`handshake`]) and a transport that reads and
//! writes plaintext through a rustls session ([`TlsStream`]).
//!
//! The inner transport decides how waiting happens: over the fiber `TcpStream` a read or
//! write that would block parks the fiber exactly where the plain socket would; over a
//! blocking stream it blocks the thread. The session itself ([`Session`]) is owned by
//! the model's per-connection state, so it survives the fiber model's parking without a
//! fiber; [`pending`] says whether it holds plaintext already decrypted, which must be served
//! before the connection waits on its socket again.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::time::{Duration, Instant};

use weft_fiber::sync::Interrupt;

use super::session::Session;
use crate::net::{End, EndIo, Transport};

/// Bytes of a file read per write when a file goes out over TLS (sendfile cannot encrypt):
/// two full TLS records per system call.
const FILE_CHUNK: usize = 32 * 1024;

thread_local! {
    /// One file buffer per thread, taken while a file is sent and put back after: a fiber
    /// that parks mid-file keeps it, and another fiber on the thread meanwhile makes its own.
    static FILE_BUF: Cell<Option<Box<[u8]>>> = const { Cell::new(None) };
}

/// Writes everything rustls has queued for the peer.
pub(crate) fn flush_tls<T: Write>(conn: &mut Session, inner: &mut T) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(inner) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether `conn` holds decrypted bytes (or the peer's close) that a read would return
/// without touching the socket: then the connection must not wait for readiness.
pub(crate) fn pending(conn: &mut Session) -> bool {
    match conn.process_new_packets() {
        Ok(()) => conn.has_plain(),
        // A read reports the error.
        Err(_) => true,
    }
}

/// A transport that speaks plaintext to the connection driver and TLS to `inner`.
pub(crate) struct TlsStream<'a, T> {
    inner: &'a mut T,
    conn: &'a mut Session,
}

impl<'a, T: Transport> TlsStream<'a, T> {
    pub(crate) fn new(inner: &'a mut T, conn: &'a mut Session) -> Self {
        TlsStream { inner, conn }
    }

    fn flush_tls(&mut self) -> io::Result<()> {
        flush_tls(self.conn, self.inner)
    }

    /// Reads and decrypts more records; `Ok(false)` at the end of the TCP stream. With `or`,
    /// a wait for the records ends as [`Transport::read_or`]'s does.
    fn read_records_with(&mut self, or: Option<(Instant, &Interrupt)>) -> io::Result<bool> {
        // Anything queued (an alert, a key update's answer) goes out before waiting, and
        // what a large answer grew is given back.
        self.flush_tls()?;
        self.conn.trim_excess();
        let n = loop {
            let got = match or {
                None => self.conn.read_tls(self.inner),
                Some((end, wake)) => self.conn.read_tls(&mut ReadOr {
                    inner: &mut *self.inner,
                    end,
                    wake,
                }),
            };
            match got {
                // A signal: again. With `or`, the same kind says the wake-up fired: the caller's.
                Err(e) if e.kind() == io::ErrorKind::Interrupted && or.is_none() => {}
                r => break r?,
            }
        };
        if n == 0 {
            return Ok(false);
        }
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.flush_tls();
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(true)
    }
}

impl<T: Transport> Read for TlsStream<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_with(buf, None)
    }
}

impl<T: Transport> TlsStream<'_, T> {
    /// Plaintext already decrypted, else records read and decrypted (with `or`, a wait for
    /// them ends as [`Transport::read_or`]'s does).
    #[inline]
    fn read_with(
        &mut self,
        buf: &mut [u8],
        or: Option<(Instant, &Interrupt)>,
    ) -> io::Result<usize> {
        loop {
            if let Some(n) = self.conn.read_plain(buf) {
                return Ok(n);
            }
            // The TCP stream may end without close_notify: most HTTP clients close so, and
            // HTTP framing, not TLS, says whether a request was whole.
            if !self.read_records_with(or)? {
                return Ok(0);
            }
        }
    }
}

impl<T: Transport> Write for TlsStream<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let n = self.conn.write_plain(buf)?;
            self.flush_tls()?;
            // 0 only while rustls' outgoing buffer was full; it has just been emptied.
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        loop {
            let n = self.conn.write_plain_vectored(bufs)?;
            self.flush_tls()?;
            if n > 0 || bufs.iter().all(|b| b.is_empty()) {
                return Ok(n);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tls()?;
        self.inner.flush()
    }
}

/// A TLS connection as a tunnel's end: records read and written without waiting through
/// the socket's own end ([`End`]).
struct TlsEnd<'a> {
    conn: &'a mut Session,
    inner: Box<dyn End + 'a>,
}

impl End for TlsEnd<'_> {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(n) = self.conn.read_plain(buf) {
                return Ok(n);
            }
            if self.conn.read_tls(&mut EndIo(&mut *self.inner))? == 0 {
                // The TCP stream ended (with or without close_notify).
                return Ok(0);
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.try_flush();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }

    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut n = self.conn.write_plain(buf)?;
        if n == 0 && !buf.is_empty() {
            // The send queue is full: what the socket takes now makes room.
            self.try_flush()?;
            n = self.conn.write_plain(buf)?;
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        self.try_flush()?;
        Ok(n)
    }

    fn try_flush(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut EndIo(&mut *self.inner)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn close_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        // What the socket does not take now is lost with the close that follows; the relay
        // flushes before it closes a side, so only the alert itself can be.
        let _ = self.try_flush()?;
        self.inner.close_write()
    }

    fn wait<'b>(
        &'b mut self,
        read: bool,
        write: bool,
        stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'b>>,
    ) {
        let write = write || self.conn.wants_write();
        self.inner.wait(read, write, stop, out)
    }
}

/// The TCP side of [`TlsStream::read_records_with`]: reads that end at a deadline or a
/// wake-up.
struct ReadOr<'a, T> {
    inner: &'a mut T,
    end: Instant,
    wake: &'a Interrupt,
}

impl<T: Transport> Read for ReadOr<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.inner.read_or(buf, left, self.wake)
    }
}

impl<T: Transport> Transport for TlsStream<'_, T> {
    fn tunnel_end(&mut self) -> Option<Box<dyn End + '_>> {
        let inner = self.inner.tunnel_end()?;
        Some(Box::new(TlsEnd {
            conn: &mut *self.conn,
            inner,
        }))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_read_timeout(timeout)
    }

    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &Interrupt,
    ) -> io::Result<usize> {
        // Plaintext already decrypted is read whether or not `wake` fired.
        self.read_with(buf, Some((Instant::now() + timeout, wake)))
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_write_timeout(timeout)
    }

    fn set_send_rate(&mut self, rule: Option<crate::minrate::SendRate>) {
        self.inner.set_send_rate(rule);
    }

    fn linger(&mut self, period: Duration) -> bool {
        // Decrypted bytes already here are the next request: no wait on the socket.
        pending(self.conn) || self.inner.linger(period)
    }

    /// Encrypts the head without sending it: it goes out with the body's first records.
    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            let n = self.conn.write_plain(head)?;
            if n == 0 {
                self.flush_tls()?;
            }
            head = &head[n..];
        }
        Ok(())
    }

    /// A file over TLS is read into a reused buffer and encrypted: the kernel cannot
    /// `sendfile` into a TLS session (kTLS would; see ARCHITECTURE.md).
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let mut buf = FILE_BUF
            .with(Cell::take)
            .unwrap_or_else(|| vec![0u8; FILE_CHUNK].into_boxed_slice());
        let sent = self.send_file_with(&mut buf, file, offset, len);
        FILE_BUF.with(|b| b.set(Some(buf)));
        sent
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush_tls()?;
        self.inner.shutdown_write()
    }
}

impl<T: Transport> TlsStream<'_, T> {
    fn send_file_with(
        &mut self,
        buf: &mut [u8],
        file: &File,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        crate::net::copy_file(self, buf, file, offset, len)?;
        // The head alone, for an empty range; what the session holds goes out now.
        self.flush_tls().map_err(|e| crate::net::cut(len, e))
    }
}
