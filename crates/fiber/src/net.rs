//! Fiber-aware sockets: [`TcpListener`], [`TcpStream`], and the client side of a Unix stream
//! socket, [`UnixStream`].
//!
//! Sockets are non-blocking. An operation that would block parks the calling fiber until the
//! socket is ready (or its timeout passes: `ErrorKind::TimedOut`); called from a plain thread
//! it blocks that thread in `poll(2)` instead, so handler code runs unchanged in a thread model.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use socket2::{Domain, SockRef, Socket, Type};

use crate::interrupt::Interrupt;
use crate::reactor::{never_drained, short_read, short_write, Source};
pub use crate::readiness::Readiness;
use crate::readiness::{Deadline, Dir};
use crate::task;
use crate::worker;
use weft_sys::poll::{poll_fd, POLLIN, POLLRDHUP};
use weft_sys::{errno, socket};

fn no_addr() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "no socket address to use")
}

fn to_inet(a: socket2::SockAddr) -> io::Result<SocketAddr> {
    a.as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP socket address"))
}

/// A TCP listening socket whose `accept` parks the fiber.
///
/// ```
/// use std::io::{Read, Write};
/// use weft_fiber::net::{TcpListener, TcpStream};
/// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
/// let l = TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = l.local_addr().unwrap();
/// rt.spawn(move || {
///     let (mut s, _) = l.accept().unwrap();
///     let mut b = [0; 4];
///     s.read_exact(&mut b).unwrap();
///     s.write_all(&b).unwrap();
/// });
/// let reply = rt.block_on(move || {
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"ping").unwrap();
///     let mut b = [0; 4];
///     c.read_exact(&mut b).unwrap();
///     b
/// });
/// assert_eq!(&reply, b"ping");
/// ```
#[derive(Debug)]
pub struct TcpListener {
    src: Source,
}

impl TcpListener {
    /// Binds to `addr` (std's defaults: `SO_REUSEADDR`, backlog 128). For other options build
    /// the socket with `socket2` and use [`TcpListener::from_std`].
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::from_std(std::net::TcpListener::bind(addr)?)
    }

    /// Takes over a std listener (switching it to non-blocking mode).
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            src: Source::new(OwnedFd::from(l))?,
        })
    }

    /// Gives the socket back as a blocking std listener.
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let fd = self.src.into_fd();
        weft_sys::fd::set_nonblocking(&fd, false)?;
        Ok(std::net::TcpListener::from(fd))
    }

    /// Waits for a connection; the new stream is non-blocking and close-on-exec.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = self.src.io(Dir::Read, never_drained, socket::accept)?;
        Ok((
            TcpStream {
                src: Source::from_nonblocking(fd),
            },
            addr,
        ))
    }

    /// As [`TcpListener::accept`], but the wait ends with `ErrorKind::Interrupted` once `int`
    /// has fired (a connection already waiting is still returned): for an accept loop that
    /// must stop on shutdown without polling a flag on a timeout. The accept timeout, if set,
    /// still applies.
    pub fn accept_interruptible(&self, int: &Interrupt) -> io::Result<(TcpStream, SocketAddr)> {
        let deadline = match self.src.timeout(Dir::Read) {
            None => Deadline::Never,
            Some(t) => Deadline::After(t),
        };
        let (fd, addr) = self.src.io_until_or(
            Dir::Read,
            deadline,
            Some(int),
            never_drained,
            socket::accept,
        )?;
        Ok((
            TcpStream {
                src: Source::from_nonblocking(fd),
            },
            addr,
        ))
    }

    /// Bounds each `accept` (`None`: wait forever).
    pub fn set_accept_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Read, t)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_inet(SockRef::from(self.src.owned()).local_addr()?)
    }
}

/// A TCP connection whose reads and writes park the fiber while the socket is not ready.
///
/// `Read` and `Write` are implemented for `TcpStream` and `&TcpStream`, so one fiber may read
/// while another writes the same stream. Socket options not wrapped here are one call away
/// through `socket2::SockRef::from(&stream)` (it implements `AsFd`).
#[derive(Debug)]
pub struct TcpStream {
    src: Source,
}

impl TcpStream {
    /// Connects to the first address of `addr` that accepts (non-blocking connect: the fiber
    /// parks until the handshake completes). Resolving a host *name* calls `getaddrinfo`,
    /// which blocks the worker: inside a fiber pass a `SocketAddr`, or resolve with
    /// [`crate::spawn_blocking`] first.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_deadline(&a, Deadline::Never) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(no_addr))
    }

    /// Connects to `addr`, giving up after `timeout` (`ErrorKind::TimedOut`).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        TcpStream::connect_deadline(addr, Deadline::At(Instant::now() + timeout))
    }

    fn connect_deadline(addr: &SocketAddr, deadline: Deadline) -> io::Result<TcpStream> {
        let target = socket2::SockAddr::from(*addr);
        let src = connect_source(Domain::for_address(*addr), &target, deadline)?;
        Ok(TcpStream { src })
    }

    /// Takes over a std stream (switching it to non-blocking mode).
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            src: Source::new(OwnedFd::from(s))?,
        })
    }

    /// Gives the socket back as a blocking std stream.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let fd = self.src.into_fd();
        weft_sys::fd::set_nonblocking(&fd, false)?;
        Ok(std::net::TcpStream::from(fd))
    }

    fn sock(&self) -> SockRef<'_> {
        SockRef::from(self.src.owned())
    }

    /// Bounds each read (`None`: wait forever); a read that waits longer fails with
    /// `ErrorKind::TimedOut`. `Some(Duration::ZERO)` is an error, as in std.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Read, t)
    }

    /// Bounds each write (and each `sendfile` call) the same way.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Write, t)
    }

    /// The time writes and `sendfile` calls on this stream have waited for room in the send
    /// buffer, in all (a client slower than the server): what a minimum send rate is
    /// measured against. Writes that find room cost no clock read.
    pub fn write_waited(&self) -> Duration {
        self.src.write_waited()
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.src.timeout(Dir::Read)
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> Option<Duration> {
        self.src.timeout(Dir::Write)
    }

    /// Reads into `buf`, failing with `TimedOut` at `deadline` (ignores the read timeout).
    pub fn read_deadline(&self, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io_until(Dir::Read, Deadline::At(deadline), short_read(want), |fd| {
                socket::recv(fd, buf)
            })
    }

    /// Reads into `buf` as `read` does, but a wait for bytes also ends, with
    /// `ErrorKind::Interrupted`, once `int` has fired (a socket already seen readable is
    /// read first), and with `TimedOut` at `deadline` (`None`: the read timeout): for a fiber or
    /// thread that waits on its client and on work of its own at once (an HTTP/2 connection
    /// whose streams' handlers run elsewhere). Re-arm `int` ([`Interrupt::rearm`]) before
    /// looking for that work, then call this.
    pub fn read_or(
        &self,
        buf: &mut [u8],
        deadline: Option<Instant>,
        int: &Interrupt,
    ) -> io::Result<usize> {
        let want = buf.len();
        let deadline = match (deadline, self.src.timeout(Dir::Read)) {
            (Some(at), _) => Deadline::At(at),
            (None, Some(t)) => Deadline::After(t),
            (None, None) => Deadline::Never,
        };
        self.src
            .io_until_or(Dir::Read, deadline, Some(int), short_read(want), |fd| {
                socket::recv(fd, buf)
            })
    }

    /// Reads what is there into `buf` without waiting: `WouldBlock` when nothing is (then
    /// [`wait_any`] waits for more).
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .try_io(Dir::Read, short_read(want), |fd| socket::recv(fd, buf))
    }

    /// Writes what the socket takes of `buf` without waiting: `WouldBlock` when it takes
    /// nothing.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.src.try_io(Dir::Write, short_write(buf.len()), |fd| {
            socket::send(fd, buf)
        })
    }

    /// Writes from `buf`, failing with `TimedOut` at `deadline` (ignores the write timeout).
    pub fn write_deadline(&self, buf: &[u8], deadline: Instant) -> io::Result<usize> {
        self.src.io_until(
            Dir::Write,
            Deadline::At(deadline),
            short_write(buf.len()),
            |fd| socket::send(fd, buf),
        )
    }

    /// As `write`, with `MSG_MORE`: the kernel may hold the bytes back to coalesce them with
    /// the next write or `sendfile` (a response head before its body). The next plain write
    /// flushes them.
    pub fn write_more(&self, buf: &[u8]) -> io::Result<usize> {
        self.src.io(Dir::Write, short_write(buf.len()), |fd| {
            socket::send_flags(fd, buf, socket::MSG_MORE)
        })
    }

    /// Sends up to `len` bytes of `file` from `offset` with `sendfile(2)` (zero copy); returns
    /// the bytes sent (0: `offset` is at or past the end of the file).
    pub fn sendfile(&self, file: &File, offset: u64, len: usize) -> io::Result<usize> {
        let mut off = offset;
        let in_fd = file.as_raw_fd();
        // A short sendfile may mean the file ended: it says nothing about the socket.
        self.src.io(Dir::Write, never_drained, |fd| {
            socket::sendfile(fd, in_fd, &mut off, len)
        })
    }

    /// Sends exactly `len` bytes of `file` from `offset`, parking as the send buffer fills.
    /// Fails with `UnexpectedEof` if the file is shorter.
    pub fn sendfile_all(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let chunk = usize::try_from(end - off).unwrap_or(usize::MAX);
            let n = self.sendfile(file, off, chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ended before the requested range",
                ));
            }
            off += n as u64;
        }
        Ok(())
    }

    /// Shuts down one or both directions.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock().shutdown(how)
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.sock().set_tcp_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.sock().tcp_nodelay()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        to_inet(self.sock().peer_addr()?)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_inet(self.sock().local_addr()?)
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock().take_error()
    }

    /// Waits in the calling fiber, for about `period`, for this connection to turn readable:
    /// `Ok(true)` when a read may find bytes, the end of the stream or an error (at once if
    /// it already may; always outside a fiber, where the read blocks the thread as usual),
    /// `Ok(false)` when `period` passed with nothing to read — or at once, without waiting,
    /// when this worker already has its most lingering fibers ([`crate::Builder::max_lingering`]).
    ///
    /// The step before [`TcpStream::when_readable`] for a keep-alive connection between
    /// requests: a busy one (the next request within `period`) keeps its fiber and buffers,
    /// and one that stays quiet is then parked without a fiber. The wait costs no clock read
    /// and no timer-heap entry (`period` runs on the worker's clock of its last epoll poll,
    /// so it may end up to one scheduling round early), so it is cheap enough for every
    /// request. No read timeout applies to it.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::time::Duration;
    /// use weft_fiber::net::{TcpListener, TcpStream};
    ///
    /// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let server = rt.spawn(move || {
    ///     let (mut s, _) = l.accept().unwrap();
    ///     // Nothing sent yet: the wait ends empty-handed.
    ///     assert!(!s.linger(Duration::from_millis(20)).unwrap());
    ///     // The client writes now: readable well within the period.
    ///     assert!(s.linger(Duration::from_secs(10)).unwrap());
    ///     let mut b = [0; 4];
    ///     s.read_exact(&mut b).unwrap();
    ///     b
    /// });
    /// let mut c = TcpStream::connect(addr).unwrap();
    /// std::thread::sleep(Duration::from_millis(100));
    /// c.write_all(b"ping").unwrap();
    /// assert_eq!(&server.join().unwrap(), b"ping");
    /// ```
    pub fn linger(&mut self, period: Duration) -> io::Result<bool> {
        self.src.linger(period)
    }

    /// Parks this connection without a fiber until it is readable, then runs `f` in a new
    /// fiber: the way to keep an idle keep-alive connection for a few hundred bytes instead of
    /// a parked fiber's stack page.
    ///
    /// Called from a fiber, it registers the socket with the calling fiber's worker (moving
    /// the registration there if another worker's epoll held it), keeps the stream and the
    /// boxed `f` in the worker's table — no fiber, no stack — and returns at once. When the
    /// socket turns readable (bytes, peer close or reset, or `shutdown(SHUT_RD)` from any
    /// thread), `f(stream, Readiness::Readable)` is spawned as a fiber on that worker; after
    /// `timeout` with nothing to read, `f(stream, Readiness::TimedOut)` (`timeout` counts from
    /// the worker's clock of its last epoll poll, as [`TcpStream::linger`]'s period, so it may
    /// end up to one scheduling round early: no clock read per park). If bytes are already
    /// there, `f` is spawned at once (`Readable`); with nothing there and a zero `timeout`, at
    /// once too (`TimedOut`). Whether bytes are there costs no syscall when the last read came
    /// up short (the socket is known drained until the next epoll edge), else one `poll(2)`
    /// with a zero timeout. `Readable` is a hint, as any epoll edge: the callee's read returns
    /// the bytes, 0 at end of stream, or the error, and in rare cases parks the fiber as any
    /// read does.
    ///
    /// If the runtime shuts down first, the stream is closed and `f` dropped without running.
    /// The socket's read and write timeouts are kept. Outside a fiber (a plain thread, or a
    /// thread of another runtime) a plain thread is started that waits in `poll(2)` and then
    /// runs `f` itself; if no thread can be started, `f` runs on the caller's thread.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use weft_fiber::net::{Readiness, TcpListener, TcpStream};
    /// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// rt.spawn(move || {
    ///     let (s, _) = l.accept().unwrap();
    ///     s.when_readable(None, |mut s, r| {
    ///         assert_eq!(r, Readiness::Readable);
    ///         let mut b = [0; 4];
    ///         s.read_exact(&mut b).unwrap();
    ///         s.write_all(&b).unwrap();
    ///     });
    ///     // this fiber ends here; the connection waits without one
    /// });
    /// let mut c = TcpStream::connect(addr).unwrap();
    /// c.write_all(b"ping").unwrap();
    /// let mut b = [0; 4];
    /// c.read_exact(&mut b).unwrap();
    /// assert_eq!(&b, b"ping");
    /// ```
    pub fn when_readable<F>(self, timeout: Option<Duration>, f: F)
    where
        F: FnOnce(TcpStream, Readiness) + Send + 'static,
    {
        match worker::current_local() {
            Some(local) if task::in_fiber() => local.park_idle(self, |s| &mut s.src, timeout, f),
            _ => self.when_readable_thread(timeout, f),
        }
    }

    /// `when_readable` outside a fiber: a thread that waits in `poll(2)`.
    fn when_readable_thread<F>(self, timeout: Option<Duration>, f: F)
    where
        F: FnOnce(TcpStream, Readiness) + Send + 'static,
    {
        let fd = self.src.raw();
        wait_thread(fd, timeout, move |r| f(self, r));
    }

    /// Parks the connection whose state `state` holds its stream ([`Parked::stream`]) without
    /// a fiber until it is readable or `timeout` passes, then runs [`Parked::resume`] in a new
    /// fiber on this worker: [`TcpStream::when_readable`] for a caller that keeps its
    /// connection's state boxed anyway. The worker keeps that box as the parked callback, so a
    /// park allocates nothing (`when_readable` boxes its closure at every park). Outside a
    /// fiber, as `when_readable`: a thread waits in `poll(2)`.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use weft_fiber::net::{Parked, Readiness, TcpListener, TcpStream};
    ///
    /// struct Echo {
    ///     stream: TcpStream,
    /// }
    ///
    /// impl Parked for Echo {
    ///     fn stream(&mut self) -> &mut TcpStream {
    ///         &mut self.stream
    ///     }
    ///     fn resume(mut self: Box<Self>, r: Readiness) {
    ///         assert_eq!(r, Readiness::Readable);
    ///         let mut b = [0; 4];
    ///         self.stream.read_exact(&mut b).unwrap();
    ///         self.stream.write_all(&b).unwrap();
    ///     }
    /// }
    ///
    /// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
    /// let l = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// rt.spawn(move || {
    ///     let (stream, _) = l.accept().unwrap();
    ///     TcpStream::park(Box::new(Echo { stream }), None);
    /// });
    /// let mut c = std::net::TcpStream::connect(addr).unwrap();
    /// c.write_all(b"ping").unwrap();
    /// let mut b = [0; 4];
    /// c.read_exact(&mut b).unwrap();
    /// assert_eq!(&b, b"ping");
    /// ```
    pub fn park<P: Parked>(mut state: Box<P>, timeout: Option<Duration>) {
        match worker::current_local() {
            Some(local) if task::in_fiber() => {
                local.park_state(state, |p| p.stream().source_mut(), timeout)
            }
            _ => {
                let fd = state.stream().src.raw();
                wait_thread(fd, timeout, move |r| crate::idle::IdleCall::call(state, r));
            }
        }
    }

    /// The stream's reactor source (for the worker's park).
    pub(crate) fn source_mut(&mut self) -> &mut Source {
        &mut self.src
    }
}

/// A connection's state that holds its stream while the connection waits without a fiber
/// ([`TcpStream::park`]).
pub trait Parked: Send + 'static {
    /// The parked connection's stream.
    fn stream(&mut self) -> &mut TcpStream;

    /// Runs in a new fiber on the parking worker once the stream is readable (a read may find
    /// bytes, the end of the stream or an error: [`Readiness::Readable`]) or once the timeout
    /// passed ([`Readiness::TimedOut`]).
    fn resume(self: Box<Self>, readiness: Readiness);
}

impl<P: Parked> crate::idle::IdleCall for P {
    fn call(mut self: Box<Self>, r: Readiness) {
        if r == Readiness::TimedOut {
            // Left by its timeout, no edge took it: the registration forgets the key.
            self.stream().src.forget_idle();
        }
        self.resume(r)
    }
}

/// Waits in a new thread, in `poll(2)`, for `fd` to turn readable or `timeout` to pass, then
/// runs `done` there; runs `done(Readable)` at once if no thread can be started (the caller's
/// read then finds out). `done` owns whatever keeps `fd` open.
fn wait_thread<F>(fd: RawFd, timeout: Option<Duration>, done: F)
where
    F: FnOnce(Readiness) + Send + 'static,
{
    let job = std::sync::Arc::new(crate::sync::lock::Lock::new(Some(done)));
    let j = job.clone();
    let started = std::thread::Builder::new()
        .name("weft-fiber-when-readable".into())
        .spawn(move || {
            let Some(done) = j.lock().take() else {
                return;
            };
            let events = POLLIN | POLLRDHUP;
            let r = match poll_fd(fd, events, timeout) {
                Ok(false) => Readiness::TimedOut,
                Ok(true) | Err(_) => Readiness::Readable,
            };
            done(r);
        });
    if started.is_err() {
        let taken = job.lock().take();
        if let Some(done) = taken {
            done(Readiness::Readable);
        }
    }
}

/// A non-blocking stream socket of `domain` connected to `target`: the fiber parks (the thread
/// polls) until the handshake ends, failing with `TimedOut` at `deadline`.
fn connect_source(
    domain: Domain,
    target: &socket2::SockAddr,
    deadline: Deadline,
) -> io::Result<Source> {
    let sock = Socket::new(domain, Type::STREAM.nonblocking(), None)?;
    let src = Source::from_nonblocking(OwnedFd::from(sock));
    let mut started = false;
    src.io_until(Dir::Write, deadline, never_drained, |_| {
        let s = SockRef::from(src.owned());
        if !started {
            started = true;
            match s.connect(target) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(errno::EINPROGRESS) => {
                    return Err(io::ErrorKind::WouldBlock.into())
                }
                // A Unix socket whose listener's backlog is full: no handshake is under way
                // to wait for (nginx gives up too); not `WouldBlock`, which would wait for one.
                Err(e) if e.raw_os_error() == Some(errno::EAGAIN) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        "the listener's backlog is full (EAGAIN)",
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        // Writable: the handshake ended one way or the other.
        match s.take_error()? {
            Some(e) => Err(e),
            None => match s.peer_addr() {
                Ok(_) => Ok(()),
                Err(e) if e.raw_os_error() == Some(errno::ENOTCONN) => {
                    Err(io::ErrorKind::WouldBlock.into())
                }
                Err(e) => Err(e),
            },
        }
    })?;
    Ok(src)
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io(Dir::Read, short_read(want), |fd| socket::recv(fd, buf))
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.src.io(Dir::Write, short_write(buf.len()), |fd| {
            socket::send(fd, buf)
        })
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let want = socket::iov_len(bufs);
        self.src.io(Dir::Write, short_write(want), |fd| {
            socket::send_vectored(fd, bufs)
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connected Unix stream socket (the client side, as a web server reaches a FastCGI
/// application such as php-fpm), parking the fiber as [`TcpStream`] does.
#[derive(Debug)]
pub struct UnixStream {
    src: Source,
}

impl UnixStream {
    /// Connects to the socket at `path`, giving up after `timeout` (`ErrorKind::TimedOut`); a
    /// listener whose backlog is full fails at once with `ErrorKind::ResourceBusy`.
    pub fn connect_timeout(path: &std::path::Path, timeout: Duration) -> io::Result<UnixStream> {
        let target = socket2::SockAddr::unix(path)?;
        let deadline = Deadline::At(Instant::now() + timeout);
        Ok(UnixStream {
            src: connect_source(Domain::UNIX, &target, deadline)?,
        })
    }

    /// Bounds each read (`None`: wait forever); a read that waits longer fails with
    /// `ErrorKind::TimedOut`.
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Read, t)
    }

    /// Bounds each write the same way.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Write, t)
    }

    /// Reads into `buf`, failing with `TimedOut` at `deadline` (ignores the read timeout).
    pub fn read_deadline(&self, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io_until(Dir::Read, Deadline::At(deadline), short_read(want), |fd| {
                socket::recv(fd, buf)
            })
    }
}

impl UnixStream {
    /// As [`TcpStream::try_read`].
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .try_io(Dir::Read, short_read(want), |fd| socket::recv(fd, buf))
    }

    /// As [`TcpStream::try_write`].
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.src.try_io(Dir::Write, short_write(buf.len()), |fd| {
            socket::send(fd, buf)
        })
    }

    /// Shuts down the read, write, or both halves.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        SockRef::from(self.src.owned()).shutdown(how)
    }
}

/// One socket a [`wait_any`] waits on, and for which directions.
pub struct Wait<'a>(crate::reactor::WaitOn<'a>);

impl<'a> Wait<'a> {
    /// `s`, for reading (`read`) and/or writing (`write`).
    pub fn tcp(s: &'a TcpStream, read: bool, write: bool) -> Wait<'a> {
        Wait(crate::reactor::WaitOn {
            src: Ok(&s.src),
            read,
            write,
        })
    }

    /// `s`, as [`Wait::tcp`].
    pub fn unix(s: &'a UnixStream, read: bool, write: bool) -> Wait<'a> {
        Wait(crate::reactor::WaitOn {
            src: Ok(&s.src),
            read,
            write,
        })
    }

    /// A descriptor that is not one of this crate's sockets: waited on with `poll(2)`, which
    /// blocks the thread (a fiber's whole worker) until it or another turns ready.
    pub fn fd(fd: std::os::fd::BorrowedFd<'a>, read: bool, write: bool) -> Wait<'a> {
        Wait(crate::reactor::WaitOn {
            src: Err(fd.as_raw_fd()),
            read,
            write,
        })
    }
}

impl std::fmt::Debug for Wait<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fd = match self.0.src {
            Ok(s) => s.raw(),
            Err(fd) => fd,
        };
        f.debug_struct("Wait")
            .field("fd", &fd)
            .field("read", &self.0.read)
            .field("write", &self.0.write)
            .finish()
    }
}

/// Waits until one of `waits` may be ready in a direction it names, for a flow of control
/// that relays between sockets (a tunnel): a hint, after which the caller tries each
/// operation again with `try_read`/`try_write` (which may still find nothing). Ends with
/// `Interrupted` once `int` fires, and with `TimedOut` at `deadline` (`None`: no limit). In a
/// fiber the fiber parks on every socket at once; in a thread (or with a [`Wait::fd`] among
/// them) the thread blocks in `poll(2)`.
pub fn wait_any(
    waits: &[Wait<'_>],
    deadline: Option<Instant>,
    int: Option<&Interrupt>,
) -> io::Result<()> {
    let inner: Vec<crate::reactor::WaitOn<'_>> = waits
        .iter()
        .map(|w| crate::reactor::WaitOn {
            src: w.0.src,
            read: w.0.read,
            write: w.0.write,
        })
        .collect();
    crate::reactor::wait_any(&inner, deadline, int)
}

impl Read for &UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io(Dir::Read, short_read(want), |fd| socket::recv(fd, buf))
    }
}

impl Write for &UnixStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.src.io(Dir::Write, short_write(buf.len()), |fd| {
            socket::send(fd, buf)
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for UnixStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `FromRawFd` for the socket types: the fd is switched to non-blocking mode on the way in.
macro_rules! socket_from_raw_fd {
    ($t:ty) => {
        impl FromRawFd for $t {
            /// Takes ownership of a socket fd, switching it to non-blocking mode.
            ///
            /// # Safety
            /// `fd` must be an open socket that nothing else owns.
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                // SAFETY: the caller guarantees `fd` is an open socket we now own.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                let _ = weft_sys::fd::set_nonblocking(&owned, true);
                Self {
                    src: Source::from_nonblocking(owned),
                }
            }
        }
    };
}

fd_traits!(TcpStream);
fd_traits!(TcpListener);
fd_traits!(UnixStream);
socket_from_raw_fd!(TcpStream);
socket_from_raw_fd!(TcpListener);
