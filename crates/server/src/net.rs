//! The stream a connection driver runs over. Each model supplies its own: the thread and
//! process models a blocking `std::net::TcpStream`, the fiber model a stream that yields its
//! fiber instead of blocking. `conn::serve` sees only this trait.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use weft_sys::{poll, socket};

/// The error that ended a response after `sent` bytes of its body had gone out (a client that
/// went away, a send timeout, a file that shrank): the access log records those bytes, as
/// nginx's `$body_bytes_sent`. The error's kind is its source's.
#[derive(Debug)]
pub(crate) struct Cut {
    sent: u64,
    source: io::Error,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (after {} body bytes)", self.source, self.sent)
    }
}

impl std::error::Error for Cut {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// True for what a read or write returns when its timeout ran out: `EAGAIN` under
/// `SO_RCVTIMEO`/`SO_SNDTIMEO` (or on a non-blocking socket), `TimedOut` from a fiber stream.
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// `e`, noting that `sent` bytes of the body went out before it (nothing to note for none).
pub(crate) fn cut(sent: u64, e: io::Error) -> io::Error {
    if sent == 0 || e.get_ref().is_some_and(|r| r.is::<Cut>()) {
        e
    } else {
        io::Error::new(e.kind(), Cut { sent, source: e })
    }
}

/// The body bytes that went out before the error `e` ended a response ([`cut`]).
pub(crate) fn body_bytes_before(e: &io::Error) -> u64 {
    e.get_ref()
        .and_then(|r| r.downcast_ref::<Cut>())
        .map_or(0, |c| c.sent)
}

/// Writes `len` bytes of `file` from `offset` to `out` through `buf`; an error after part of
/// them went out says how much ([`cut`]).
pub(crate) fn copy_file<W: Write + ?Sized>(
    out: &mut W,
    buf: &mut [u8],
    file: &File,
    offset: u64,
    len: u64,
) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut sent = 0u64;
    while sent < len {
        let want = usize::try_from(len - sent).map_or(buf.len(), |n| n.min(buf.len()));
        let n = match file.read_at(&mut buf[..want], offset + sent) {
            Ok(0) => {
                let e =
                    io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being sent");
                return Err(cut(sent, e));
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cut(sent, e)),
        };
        out.write_all(&buf[..n]).map_err(|e| cut(sent, e))?;
        sent += n as u64;
    }
    Ok(())
}

/// Bytes of the second buffer among the first `off` of `a` then it.
fn body_sent(off: usize, a: &[u8]) -> u64 {
    off.saturating_sub(a.len()) as u64
}

/// How often [`Transport::read_or`]'s default looks at its wake-up.
pub(crate) const WAKE_POLL: Duration = Duration::from_millis(2);

/// One side of a tunnel (an upgraded connection relayed both ways, `crate::tunnel`): a
/// stream read and written without waiting, whose waits the relay makes itself, on both
/// sides at once.
pub(crate) trait End {
    /// Reads what is there: `WouldBlock` when nothing is, 0 at the end of the stream.
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes what the stream takes now: `WouldBlock` when it takes nothing.
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Sends what the end holds back (a TLS session's records); true once none is left.
    fn try_flush(&mut self) -> io::Result<bool> {
        Ok(true)
    }
    /// Ends the sending direction once what is held back is out (TLS: `close_notify` first).
    fn close_write(&mut self) -> io::Result<()>;
    /// Adds to `out` what to wait on before the next try: readable if `read`, writable if
    /// `write` or if records are held back; with `stop`, also what turns readable when the
    /// connection must end, where the relay cannot learn it otherwise (a `process`-model
    /// connection process's stop pipe).
    fn wait<'a>(
        &'a mut self,
        read: bool,
        write: bool,
        stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'a>>,
    );
}

/// A socket as a tunnel's end, by its descriptor: the thread, process and pipeline models'.
pub(crate) struct RawEnd<'a> {
    pub(crate) fd: std::os::fd::BorrowedFd<'a>,
    pub(crate) stop: Option<std::os::fd::BorrowedFd<'a>>,
}

impl End for RawEnd<'_> {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        socket::recv_nowait(self.fd.as_raw_fd(), buf)
    }
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        socket::send_nowait(self.fd.as_raw_fd(), buf, 0)
    }
    fn close_write(&mut self) -> io::Result<()> {
        socket::shutdown(self.fd.as_raw_fd(), Shutdown::Write)
    }
    fn wait<'a>(
        &'a mut self,
        read: bool,
        write: bool,
        stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'a>>,
    ) {
        out.push(weft_fiber::net::Wait::fd(self.fd, read, write));
        if let (true, Some(fd)) = (stop, self.stop) {
            out.push(weft_fiber::net::Wait::fd(fd, true, false));
        }
    }
}

impl<E: End + ?Sized> End for &mut E {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (**self).try_read(buf)
    }
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (**self).try_write(buf)
    }
    fn try_flush(&mut self) -> io::Result<bool> {
        (**self).try_flush()
    }
    fn close_write(&mut self) -> io::Result<()> {
        (**self).close_write()
    }
    fn wait<'a>(
        &'a mut self,
        read: bool,
        write: bool,
        stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'a>>,
    ) {
        (**self).wait(read, write, stop, out)
    }
}

/// An end whose first bytes were read off its socket before (a `process`-model connection's
/// first head, read by the master): they are read first.
pub(crate) struct Prefixed<'a, E> {
    pub(crate) pre: &'a [u8],
    pub(crate) end: E,
}

impl<E: End> End for Prefixed<'_, E> {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pre.is_empty() {
            return self.end.try_read(buf);
        }
        let n = buf.len().min(self.pre.len());
        buf[..n].copy_from_slice(&self.pre[..n]);
        self.pre = &self.pre[n..];
        Ok(n)
    }
    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.end.try_write(buf)
    }
    fn try_flush(&mut self) -> io::Result<bool> {
        self.end.try_flush()
    }
    fn close_write(&mut self) -> io::Result<()> {
        self.end.close_write()
    }
    fn wait<'a>(
        &'a mut self,
        read: bool,
        write: bool,
        stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'a>>,
    ) {
        // Bytes of the prefix are there already: the relay reads before it waits.
        self.end.wait(read, write, stop, out)
    }
}

/// A fiber socket as a tunnel's end (the fiber model's connections, and upstream sockets on
/// every model): in a fiber its waits park the fiber. `$wait` makes its [`weft_fiber::net::Wait`].
macro_rules! fiber_end {
    ($socket:ty, $wait:ident) => {
        impl End for $socket {
            fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                <$socket>::try_read(self, buf)
            }
            fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
                <$socket>::try_write(self, buf)
            }
            fn close_write(&mut self) -> io::Result<()> {
                self.shutdown(Shutdown::Write)
            }
            fn wait<'a>(
                &'a mut self,
                read: bool,
                write: bool,
                _stop: bool,
                out: &mut Vec<weft_fiber::net::Wait<'a>>,
            ) {
                out.push(weft_fiber::net::Wait::$wait(self, read, write));
            }
        }
    };
}

fiber_end!(weft_fiber::net::TcpStream, tcp);
fiber_end!(weft_fiber::net::UnixStream, unix);

/// An [`End`] as `Read` and `Write` that never wait (`WouldBlock` passes through): for a TLS
/// session's record I/O over it.
pub(crate) struct EndIo<'a, 'b>(pub(crate) &'a mut (dyn End + 'b));

impl Read for EndIo<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for EndIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A bidirectional byte stream with timeouts and a zero-copy file path.
pub trait Transport: Read + Write {
    /// Bounds the next reads: a read that waits longer fails with `WouldBlock` or `TimedOut`.
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// Bounds each write the same way (a client that stops reading).
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// Puts the connection's sends under the minimum send rate (`timeouts.send_min_rate`,
    /// [`SendRate`]): the waits for room count against it, and a wait that runs out of it
    /// fails with `TimedOut` ([`SendRate::slow_reader`]). The default (a transport with no
    /// socket of its own) ignores it; wrappers pass it to what they wrap.
    fn set_send_rate(&mut self, _rule: Option<SendRate>) {}

    /// Between requests, with nothing buffered: waits up to about `period` for the next
    /// bytes and says whether a read may find some (or the end of the stream). `false` (the
    /// default: a transport that cannot wait cheaply) hands the connection back to be parked.
    fn linger(&mut self, _period: Duration) -> bool {
        false
    }

    /// As `read`, but a wait for bytes also ends, with `ErrorKind::Interrupted`, once `wake`
    /// has fired, and with `TimedOut` after `timeout`: for a connection that waits on its
    /// client and on work of its own at once (HTTP/2 streams whose handlers run elsewhere).
    /// The caller re-arms `wake` before it looks for that work. The default, for a transport
    /// that cannot wait on both, reads in slices of [`WAKE_POLL`] and looks at `wake` between
    /// them; the sockets of the fiber, thread and pipeline models wait on both at once.
    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &weft_fiber::sync::Interrupt,
    ) -> io::Result<usize> {
        let end = std::time::Instant::now() + timeout;
        loop {
            if wake.is_fired() {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.set_read_timeout(Some(left.min(WAKE_POLL)))?;
            match self.read(buf) {
                Err(e) if timed_out(&e) => {}
                r => return r,
            }
        }
    }

    /// Writes all of `head`, hinting that more data follows at once (a body), so the kernel
    /// may coalesce them.
    fn write_head(&mut self, head: &[u8]) -> io::Result<()> {
        self.write_all(head)
    }

    /// Writes all of `bufs` (e.g. a head and a body) with as few system calls as possible. An
    /// error after part of `b` went out says how much ([`cut`]).
    fn write_all_vectored2(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let mut off = 0usize;
        let total = a.len() + b.len();
        while off < total {
            let n = if off < a.len() {
                self.write_vectored(&[IoSlice::new(&a[off..]), IoSlice::new(b)])
            } else {
                self.write(&b[off - a.len()..])
            };
            match n {
                Ok(0) => return Err(cut(body_sent(off, a), io::ErrorKind::WriteZero.into())),
                Ok(n) => off += n,
                Err(e) => return Err(cut(body_sent(off, a), e)),
            }
        }
        Ok(())
    }

    /// Sends `len` bytes of `file` from `offset`. The default copies through user space
    /// ([`copy_file`]); socket transports override it with `sendfile(2)`. An error after part
    /// of it went out says how much ([`cut`]), as every override does.
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        copy_file(self, &mut vec![0u8; 64 * 1024], file, offset, len)
    }

    /// Closes the sending direction (the peer reads end of stream) after all data is out.
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The connection as a tunnel's end (after a `101 Switching Protocols`), if this
    /// transport can be one; none (the default): the tunnel is refused with 502.
    fn tunnel_end(&mut self) -> Option<Box<dyn End + '_>> {
        None
    }
}

/// A blocking TCP stream, as the thread and process models use. Caches the timeouts it set so
/// an unchanged timeout costs no system call.
#[derive(Debug)]
pub struct BlockingStream {
    inner: TcpStream,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// The minimum send rate ([`Transport::set_send_rate`]), and the time sends waited.
    rate: Option<SendRate>,
    waited: Duration,
    /// How long a send may wait for room before it gives up with `WouldBlock` instead
    /// ([`BlockingStream::set_stall`]); `None`: it waits the send timeout.
    stall: Option<Duration>,
}

impl BlockingStream {
    /// The socket as a tunnel's end, with `stop` as [`End::stop_fd`].
    pub(crate) fn raw_end<'a>(&'a self, stop: Option<std::os::fd::BorrowedFd<'a>>) -> RawEnd<'a> {
        use std::os::fd::AsFd;
        RawEnd {
            fd: self.inner.as_fd(),
            stop,
        }
    }

    /// Wraps an accepted stream.
    pub fn new(inner: TcpStream) -> BlockingStream {
        BlockingStream {
            inner,
            read_timeout: None,
            write_timeout: None,
            rate: None,
            waited: Duration::ZERO,
            stall: None,
        }
    }

    /// A send that finds no room for `stall` fails with `WouldBlock` (having sent nothing in
    /// that call: a partial send returns what it sent), so that the caller can hand what is
    /// left to someone else (the process model's write completion); `None`: sends wait as
    /// long as the send timeout and the minimum rate allow.
    pub(crate) fn set_stall(&mut self, stall: Option<Duration>) {
        self.stall = stall;
    }

    /// Waits until `fd` has room to send, within the send timeout, the minimum rate's time
    /// left and the stall bound, counting the wait against the rate.
    fn wait_room(&mut self, fd: RawFd) -> io::Result<()> {
        // A wait is the slow path: the send queue's length costs a system call here only.
        // (Where the kernel cannot say what the client took, the send timeout alone.)
        let left = self.rate.as_ref().and_then(|r| {
            let taken = socket::bytes_acked(fd).ok()?;
            Some(r.left(taken, self.waited))
        });
        let (mut wait, rule_binds) = SendRate::bound(left, self.write_timeout);
        let mut stalls = false;
        if let Some(stall) = self.stall {
            if wait.is_none_or(|w| stall < w) {
                (wait, stalls) = (Some(stall), true);
            }
        }
        let began = self.rate.is_some().then(Instant::now);
        let ready = poll::poll_writable(fd, wait.unwrap_or(Duration::MAX))?;
        if let Some(began) = began {
            self.waited += began.elapsed();
        }
        match (ready, &self.rate) {
            (true, _) => Ok(()),
            (false, _) if stalls => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the client takes no more for now",
            )),
            (false, Some(r)) if rule_binds => Err(r.slow_reader()),
            (false, _) => Err(io::Error::new(io::ErrorKind::TimedOut, "send timeout")),
        }
    }

    /// One send of `buf` with `MSG_MORE` (a head, its body follows), waiting for room as
    /// every send; returns what it took.
    pub(crate) fn send_more(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_waiting(|fd| socket::send_nowait(fd, buf, socket::MSG_MORE))
    }

    fn send_file_nonblocking(&mut self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let mut at = offset;
        self.send_file_loop(file, &mut at, offset + len)
            .map_err(|e| cut(at - offset, e))
    }

    /// Sends the file from `*offset` (advanced as bytes go out) to `end`.
    fn send_file_loop(&mut self, file: &File, offset: &mut u64, end: u64) -> io::Result<()> {
        let fd = self.inner.as_raw_fd();
        while *offset < end {
            let chunk = usize::try_from(end - *offset)
                .unwrap_or(usize::MAX)
                .min(1 << 30);
            match socket::sendfile(fd, file.as_raw_fd(), offset, chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being sent",
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_room(fd)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The descriptor, for the shutdown registry.
    pub fn raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl BlockingStream {
    /// Runs `send` (a non-blocking send) until it takes bytes, waiting for room up to the
    /// write timeout each time it finds none: `timeouts.send` bounds each wait without
    /// progress, as nginx's `send_timeout`, and the minimum send rate all of them
    /// ([`BlockingStream::wait_room`]). (`SO_SNDTIMEO` restarts with every call and lets
    /// a call that took some bytes before the wait count as progress, so a reader that
    /// stopped held the thread two or three times as long.)
    fn send_waiting(
        &mut self,
        mut send: impl FnMut(RawFd) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let fd = self.inner.as_raw_fd();
        loop {
            match send(fd) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_room(fd)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_waiting(|fd| socket::send_nowait(fd, buf, 0))
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.send_waiting(|fd| socket::sendmsg_nowait(fd, bufs))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A zero timeout means "none" to `set_read_timeout`; std refuses zero, so clamp to 1 ms.
fn nonzero(t: Option<Duration>) -> Option<Duration> {
    t.map(|d| d.max(Duration::from_millis(1)))
}

impl Transport for BlockingStream {
    fn tunnel_end(&mut self) -> Option<Box<dyn End + '_>> {
        Some(Box::new(self.raw_end(None)))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = nonzero(timeout);
        if self.read_timeout != timeout {
            self.inner.set_read_timeout(timeout)?;
            self.read_timeout = timeout;
        }
        Ok(())
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = nonzero(timeout);
        if self.write_timeout != timeout {
            self.inner.set_write_timeout(timeout)?;
            self.write_timeout = timeout;
        }
        Ok(())
    }

    fn set_send_rate(&mut self, rule: Option<SendRate>) {
        self.rate = rule;
        self.waited = Duration::ZERO;
    }

    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &weft_fiber::sync::Interrupt,
    ) -> io::Result<usize> {
        let fd = self.inner.as_raw_fd();
        let end = std::time::Instant::now() + timeout;
        loop {
            // The socket first: what is there is read whether or not `wake` fired.
            match socket::recv_nowait(fd, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
            if wake.is_fired() {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let also = wake.eventfd()?.as_raw_fd();
            poll::poll_fd_or(fd, poll::POLLIN, Some(also), Some(left))?;
        }
    }

    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            match self.send_waiting(|fd| socket::send_nowait(fd, head, socket::MSG_MORE))? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => head = &head[n..],
            }
        }
        Ok(())
    }

    /// `sendfile(2)` on a blocking socket ignores `SO_SNDTIMEO` (seen on Linux 6.18: a client
    /// that stops reading holds the thread forever), so the file goes out with the socket
    /// non-blocking and the send timeout enforced by poll(2) between calls.
    fn send_file(&mut self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        self.inner.set_nonblocking(true)?;
        let sent = self.send_file_nonblocking(file, offset, len);
        let restored = self.inner.set_nonblocking(false);
        sent.and(restored)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.inner.shutdown(Shutdown::Write)
    }
}

/// The time `bytes` earn at `rate` bytes/s (`rate` > 0): whole seconds and the remainder
/// apart, so a huge count cannot overflow; `None` past what a Duration holds.
pub(crate) fn earned(bytes: u64, rate: u64) -> Option<Duration> {
    Duration::from_secs(bytes / rate).checked_add(Duration::from_nanos(
        u64::try_from(u128::from(bytes % rate) * 1_000_000_000 / u128::from(rate))
            .unwrap_or(u64::MAX),
    ))
}

/// The minimum send rate of one connection (`timeouts.send_min_rate`), counted against the
/// time its sends wait for the client to make room: sends may wait `grace + taken / rate` in
/// all, every byte the client took earning `1 / rate` seconds, the head and body rules' arithmetic
/// (mod_reqtimeout's `MinRate`, `minrate.rs`) turned to responses. Only waits count, so a response the
/// server itself paces (server-sent events, a slow upstream) is never cut, and a client that
/// took most of a large file quickly has earned a long pause; a reader slower than the rate
/// (a few bytes every few seconds, which keeps `timeouts.send` from ever firing) runs out
/// after about `grace` plus what its bytes earned, and the response is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendRate {
    grace: Duration,
    /// Bytes per second (> 0).
    rate: u64,
}

impl SendRate {
    /// The rule at `rate` bytes/s after `grace` (`timeouts.send_min_rate`,
    /// `min_rate_grace`: [`crate::minrate::send_rate`]); `None` for `rate = 0` (off).
    pub(crate) fn new(rate: u64, grace: Duration) -> Option<SendRate> {
        (rate > 0).then_some(SendRate { grace, rate })
    }

    /// How much longer sends may wait, in all (zero: the client is slower than the rate),
    /// having waited `waited` so far while the client took `taken` bytes (what its kernel
    /// acknowledged, `weft_sys::socket::bytes_acked`: a count of bytes written would credit
    /// the megabytes the server's send buffer swallows at once, an hour's worth). Read on a
    /// slow path only: when a send has waited.
    pub(crate) fn left(&self, taken: u64, waited: Duration) -> Duration {
        earned(taken, self.rate)
            .and_then(|e| e.checked_add(self.grace))
            .unwrap_or(Duration::MAX)
            .saturating_sub(waited)
    }

    /// The next wait for room, bounded by `timeout` (the send timeout; `None`: none) and by
    /// `left` (the rule's [`SendRate::left`], if there is a rule), and whether the rule's
    /// bound is the one that binds.
    pub(crate) fn bound(
        left: Option<Duration>,
        timeout: Option<Duration>,
    ) -> (Option<Duration>, bool) {
        match (left, timeout) {
            (Some(left), Some(t)) if left < t => (Some(left), true),
            (Some(left), None) => (Some(left), true),
            (_, t) => (t, false),
        }
    }

    /// The error a send that ran out of the rule's time fails with (`TimedOut`).
    pub(crate) fn slow_reader(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the client read slower than timeouts.send_min_rate ({} bytes/s)",
                self.rate
            ),
        )
    }
}
