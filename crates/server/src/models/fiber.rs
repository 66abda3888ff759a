//! The `fiber` model (the fibers paper): every connection runs `conn::serve` on its own
//! stackful fiber; fibers are scheduled M:N on one worker thread per core, and a fiber yields
//! exactly when a read finds nothing or a write or sendfile would block.
//!
//! Accepting: each worker runs one acceptor fiber on its own `SO_REUSEPORT` socket, so the
//! kernel spreads connections over the workers and a connection's fiber lives on the worker
//! that accepted it (no cross-thread hand-off on the hot path).

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;

use weft_fiber::net::{Parked, Readiness, TcpListener as FiberListener, TcpStream as FiberStream};

use super::{AcceptGate, ACCEPT_BACKOFF};
use crate::app::{App, LiveApp};
use crate::config::AcceptMode;
use crate::conn::{self, ConnInfo, Served, Start};
use crate::metrics::{ListenerMetrics, OpenGuard};
use crate::minrate::SendRate;

/// Runs one acceptor fiber (call it on the worker that owns `listener`) until shutdown.
pub fn accept_loop(
    listener: TcpListener,
    live: Arc<LiveApp>,
    lm: Arc<ListenerMetrics>,
    rt: weft_fiber::Handle,
) -> io::Result<()> {
    // The shutdown state and the fiber settings are the same in every generation.
    let app = live.current();
    let dispatch = app.cfg.fiber.accept == AcceptMode::Dispatch;
    let mut next_worker = 0usize;
    // Dropped after the listener (declared before it).
    let _listening = app.shutdown.listening();
    let listen_fd = listener.as_raw_fd();
    let listener = FiberListener::from_std(listener)?;
    // No timeout: shutdown ends the wait (an idle acceptor sleeps until a client comes).
    let stop = app.shutdown.interrupt();
    let mut gate = AcceptGate::new(app.cfg.limits.max_connections, Some(app.shutdown.clone()));
    while !app.shutdown.is_set() {
        if gate.at_capacity(&lm, || super::backlog_waits(listen_fd)) {
            weft_fiber::sleep(ACCEPT_BACKOFF);
            continue;
        }
        match listener.accept_interruptible(stop) {
            Ok((stream, peer)) => {
                // Another worker may have filled the last slot while this one waited in
                // accept: hold the new connection unserved (as if still in the backlog) until
                // a slot frees, so the limit is never exceeded.
                while gate.at_capacity(&lm, || true) && !app.shutdown.is_set() {
                    weft_fiber::sleep(ACCEPT_BACKOFF);
                }
                // The generation this connection keeps for its whole life.
                let app = live.current();
                let accepted = app.cfg.timing.on().then(std::time::Instant::now);
                let local = super::local_addr(&lm, || stream.local_addr());
                let guard = OpenGuard::new(lm.clone());
                let lm = lm.clone();
                let conn = move || {
                    let key = crate::models::listener_key(&lm);
                    let registration = Some(app.shutdown.register_on(stream.as_raw_fd(), key));
                    let info = ConnInfo {
                        peer,
                        local,
                        listener: lm,
                        registration,
                        accepted,
                        proxied: Default::default(),
                        client_slot: Default::default(),
                        h2: conn::H2Park::slot(),
                        tls: Default::default(),
                        life: crate::conn::Life::now(),
                    };
                    let state = Box::new(ConnState {
                        app,
                        info,
                        tls: None,
                        parked: None,
                        first: First::Accepted,
                        _guard: guard,
                    });
                    serve(stream, state, Start::Fresh);
                };
                if dispatch {
                    next_worker = (next_worker + 1) % rt.workers();
                    rt.spawn_on(next_worker, conn);
                } else {
                    weft_fiber::spawn(conn);
                }
            }
            // Shutdown (the loop's condition ends it), or a signal.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if gate.failed(&lm, &e) {
                    weft_fiber::sleep(ACCEPT_BACKOFF);
                }
            }
        }
    }
    Ok(())
}

/// What a connection keeps between requests besides its socket: a few hundred bytes, boxed so
/// an idle connection parked without a fiber costs one pointer in the reactor's entry.
struct ConnState {
    app: Arc<App>,
    info: ConnInfo,
    /// The TLS session of a connection on a TLS listener, kept while the connection is
    /// parked (the socket alone cannot resume it).
    tls: Option<Box<crate::tls::Session>>,
    /// The socket, while the connection waits without a fiber ([`FiberStream::park`]): this
    /// box is then what the worker keeps, and a park allocates nothing.
    parked: Option<FiberStream>,
    /// Where a new connection stands before its first bytes ([`serve`]).
    first: First,
    _guard: OpenGuard,
}

/// A new connection waits for its first bytes parked without a fiber, as an idle keep-alive
/// connection waits for its next request: a burst of clients that connect before they send
/// (10,000 at once from a load generator, or clients slow to send) holds no fiber stack and no
/// buffers meanwhile (BENCHMARKS.md, "Ten thousand busy connections").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    /// Accepted, not waited for yet.
    Accepted,
    /// Waited for (readable, or its first bytes are being read): its prelude runs next.
    Waited,
    /// Its prelude ran: later turns resume it.
    Served,
}

impl Parked for ConnState {
    fn stream(&mut self) -> &mut FiberStream {
        self.parked
            .as_mut()
            .expect("a parked connection holds its socket")
    }

    fn resume(mut self: Box<Self>, readiness: Readiness) {
        let stream = self
            .parked
            .take()
            .expect("a parked connection holds its socket");
        let start = if self.first == First::Served {
            Start::Resumed
        } else {
            Start::Fresh
        };
        match readiness {
            Readiness::Readable => serve(stream, self, start),
            Readiness::TimedOut => close(stream, self),
        }
    }
}

/// Serves `stream` until it closes or falls idle; an idle connection waits for its next
/// request in the reactor without a fiber, stack or buffers (`fiber.park_idle`), or in a
/// parked fiber.
fn serve(mut stream: FiberStream, mut state: Box<ConnState>, mut start: Start) {
    if start == Start::Fresh {
        if state.first == First::Accepted {
            // Parked until the first bytes (at once if they are here: one poll(2)), or closed
            // silently at the header-read timeout, as a read that saw nothing would be.
            state.first = First::Waited;
            let wait = conn::idle_timeout(Start::Fresh, &state.app.cfg.timeouts);
            state.parked = Some(stream);
            return FiberStream::park(state, Some(wait));
        }
        state.first = First::Served;
    }
    if start == Start::Fresh && state.info.listener.tls() {
        // The handshake runs in this fiber, yielding where the socket would block.
        match start_tls(&mut stream, &state.app, &state.info) {
            Some(session) => state.tls = Some(session),
            None => return close(stream, state),
        }
    }
    let result = loop {
        let ConnState { app, info, tls, .. } = &mut *state;
        let mut rated = Rated::new(&mut stream, &app.cfg.timeouts);
        let result = match tls {
            Some(session) => serve_tls(&mut rated, session, app, info, start),
            None => serve_on(&mut rated, app, info, start),
        };
        // Requests already decrypted are served now: the socket will not signal them.
        if matches!(result, Ok(Served::Idle))
            && tls.as_mut().is_some_and(|s| crate::tls::pending(s))
        {
            start = Start::Resumed;
            continue;
        }
        break result;
    };
    let app = &state.app;
    match result {
        Ok(Served::Idle) => {
            // A parked TLS connection keeps its session's keys, not its buffers.
            if let Some(session) = state.tls.as_deref_mut() {
                session.trim();
            }
            // The fiber already waited through the linger period.
            let keepalive = app
                .cfg
                .timeouts
                .keepalive
                .saturating_sub(conn::linger_period(&app.cfg));
            state.parked = Some(stream);
            FiberStream::park(state, Some(keepalive));
        }
        Ok(Served::Closed) => close(stream, state),
        Err(e) => {
            log::debug!("{}: connection ended: {e}", state.info.peer);
            close(stream, state);
        }
    }
}

/// The TLS handshake, out of line: the session and the handshake's buffers stay off the
/// frame that plain connections run in (every fiber's stack holds it; `fiber.stack_size`).
#[inline(never)]
fn start_tls(
    stream: &mut FiberStream,
    app: &App,
    info: &ConnInfo,
) -> Option<Box<crate::tls::Session>> {
    conn::start_tls(stream, app, info).map(Box::new)
}

/// [`serve_on`] through the connection's TLS session; out of line for the same reason.
#[inline(never)]
fn serve_tls(
    stream: &mut Rated<'_>,
    session: &mut crate::tls::Session,
    app: &App,
    info: &ConnInfo,
    start: Start,
) -> io::Result<Served> {
    serve_on(
        &mut crate::tls::TlsStream::new(stream, session),
        app,
        info,
        start,
    )
}

/// One turn of the driver: until the connection closes or (with `fiber.park_idle`) falls idle.
fn serve_on<T: crate::net::Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
    start: Start,
) -> io::Result<Served> {
    if app.cfg.fiber.park_idle {
        conn::serve_until_idle(stream, app, info, start)
    } else {
        conn::serve(stream, app, info).map(|()| Served::Closed)
    }
}

/// Drops the connection's registration before its socket closes, so graceful shutdown never
/// touches a descriptor number that was reused.
fn close(stream: FiberStream, state: Box<ConnState>) {
    drop(state);
    drop(stream);
}

/// A fiber connection's socket under the minimum send rate (`timeouts.send_min_rate`). A send
/// waits for room at most [`RATE_SLICE`] at a time (the socket's own write timeout: a send
/// that finds room costs nothing more than a look at its result); when a slice passes with no
/// room, the rule is worked out from the time the socket's sends waited
/// ([`FiberStream::write_waited`]) and what the client's kernel has taken
/// (`weft_sys::socket::bytes_acked`, a system call on this slow path only), and the send is
/// cut once the rule's time is spent, or at the send timeout as before.
pub(crate) struct Rated<'a> {
    s: &'a mut FiberStream,
    rule: Option<SendRate>,
    /// The send timeout the driver set.
    timeout: Option<Duration>,
}

/// The longest one wait for room lasts before a [`Rated`] send looks at the rule again.
const RATE_SLICE: Duration = Duration::from_secs(1);

impl<'a> Rated<'a> {
    /// For one turn of the driver: the send timeout is the one the socket kept from the last
    /// turn (as a slice, which stands for the configured timeout; a fresh connection's socket
    /// gets its slice when the driver sets its timeout).
    #[inline]
    fn new(s: &'a mut FiberStream, t: &crate::config::Timeouts) -> Rated<'a> {
        let rule = crate::minrate::send_rate(t);
        let timeout = match (&rule, s.write_timeout()) {
            (Some(_), Some(w)) if w == t.send.min(RATE_SLICE) => Some(t.send),
            (_, w) => w,
        };
        Rated { s, rule, timeout }
    }

    /// Gives the socket [`Rated::slice`] as its write timeout, unless it has it already.
    fn apply_slice(&mut self) -> io::Result<()> {
        let slice = self.slice();
        if self.s.write_timeout() == slice {
            return Ok(());
        }
        FiberStream::set_write_timeout(self.s, slice)
    }

    /// The socket's write timeout: the driver's, in slices while there is a rule.
    fn slice(&self) -> Option<Duration> {
        match (&self.rule, self.timeout) {
            (Some(_), Some(t)) => Some(t.min(RATE_SLICE)),
            (Some(_), None) => Some(RATE_SLICE),
            (None, t) => t,
        }
    }

    /// Runs the send `op` (one system call's worth: a timeout means it sent nothing); one
    /// whose slice passed with no room goes on in [`Rated::after_slices`].
    #[inline]
    fn send<R>(&mut self, mut op: impl FnMut(&mut FiberStream) -> io::Result<R>) -> io::Result<R> {
        match op(self.s) {
            Err(e) if self.rule.is_some() && crate::net::timed_out(&e) => {
                self.after_slices(e, &mut op)
            }
            r => r,
        }
    }

    /// A send whose slice passed with no room (`first`, the timeout): works the rule out from
    /// the waits and what the client took, and tries again for another slice, until there is
    /// room, the rule's time is spent, or the send timeout has passed since the wait began.
    #[cold]
    #[inline(never)]
    fn after_slices<R>(
        &mut self,
        first: io::Error,
        op: &mut impl FnMut(&mut FiberStream) -> io::Result<R>,
    ) -> io::Result<R> {
        let Some(rule) = self.rule else {
            return Err(first);
        };
        let slice = self.slice().unwrap_or(RATE_SLICE);
        let began = Instant::now();
        let since = began.checked_sub(slice).unwrap_or(began);
        let mut e = first;
        let r = loop {
            let now = Instant::now();
            // (Where the kernel cannot say what the client took, the send timeout alone.)
            let left = match weft_sys::socket::bytes_acked(self.s.as_raw_fd()) {
                Ok(taken) => rule.left(taken, self.s.write_waited()),
                Err(_) => Duration::MAX,
            };
            if left.is_zero() {
                break Err(rule.slow_reader());
            }
            let mut next = left.min(RATE_SLICE);
            if let Some(t) = self.timeout {
                let stuck = now.saturating_duration_since(since);
                if stuck >= t {
                    break Err(e);
                }
                next = next.min(t - stuck);
            }
            FiberStream::set_write_timeout(self.s, Some(next.max(Duration::from_millis(1))))?;
            match op(self.s) {
                Err(again) if crate::net::timed_out(&again) => e = again,
                r => break r,
            }
        };
        FiberStream::set_write_timeout(self.s, self.slice())?;
        r
    }
}

impl Read for Rated<'_> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s.read(buf)
    }
}

impl Write for Rated<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send(|s| s.write(buf))
    }
    #[inline]
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.send(|s| s.write_vectored(bufs))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl crate::net::Transport for Rated<'_> {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
        // A tunnel's relay has its own idle timeout: the driver's timeout, not the slices.
        let _ = self.s.set_write_timeout(self.timeout);
        crate::net::Transport::tunnel_end(self.s)
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        crate::net::Transport::set_read_timeout(self.s, timeout)
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.timeout = timeout.map(|d| d.max(Duration::from_millis(1)));
        self.apply_slice()
    }

    fn set_send_rate(&mut self, rule: Option<SendRate>) {
        self.rule = rule;
        let _ = self.apply_slice();
    }

    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &weft_fiber::sync::Interrupt,
    ) -> io::Result<usize> {
        crate::net::Transport::read_or(self.s, buf, timeout, wake)
    }

    #[inline]
    fn linger(&mut self, period: Duration) -> bool {
        crate::net::Transport::linger(self.s, period)
    }

    #[inline]
    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            match self.send(|s| s.write_more(head))? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => head = &head[n..],
            }
        }
        Ok(())
    }

    /// A `sendfile` call at a time, each under the rule.
    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        send_file_in_calls(len, |sent, chunk| {
            self.send(|s| s.sendfile(file, offset + sent, chunk))
        })
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        crate::net::Transport::shutdown_write(self.s)
    }
}

impl crate::net::Transport for FiberStream {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
        Some(Box::new(self))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        FiberStream::set_read_timeout(self, timeout.map(|d| d.max(Duration::from_millis(1))))
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        FiberStream::set_write_timeout(self, timeout.map(|d| d.max(Duration::from_millis(1))))
    }

    fn read_or(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        wake: &weft_fiber::sync::Interrupt,
    ) -> io::Result<usize> {
        FiberStream::read_or(self, buf, Some(std::time::Instant::now() + timeout), wake)
    }

    fn linger(&mut self, period: Duration) -> bool {
        // An error (not pollable): false, and the park that follows settles it.
        FiberStream::linger(self, period).unwrap_or(false)
    }

    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            match self.write_more(head) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => head = &head[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        // `sendfile_all`, counting what went out for an error's `net::cut`.
        send_file_in_calls(len, |sent, chunk| self.sendfile(file, offset + sent, chunk))
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
}

/// Sends `len` bytes of a file with `call(sent so far, bytes left)`, one `sendfile` at a time,
/// until all are out; an error says how many went before it ([`crate::net::cut`]), and a file
/// shorter than the range is `UnexpectedEof`.
fn send_file_in_calls(
    len: u64,
    mut call: impl FnMut(u64, usize) -> io::Result<usize>,
) -> io::Result<()> {
    let mut sent = 0u64;
    while sent < len {
        let chunk = usize::try_from(len - sent).unwrap_or(usize::MAX);
        match call(sent, chunk) {
            Ok(0) => {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ended before the requested range",
                );
                return Err(crate::net::cut(sent, e));
            }
            Ok(n) => sent += n as u64,
            Err(e) => return Err(crate::net::cut(sent, e)),
        }
    }
    Ok(())
}

/// The least fiber stack when a fiber listener serves TLS: rustls' handshake (key exchange,
/// signing, certificate encoding) runs on the connection's fiber and needs more than the
/// plain driver's default 64 KiB (an unoptimised build more than twice as much). Stack
/// pages are touched lazily; what a handshake touched goes back by the stack pool's decay.
pub(crate) const TLS_FIBER_STACK: usize = if cfg!(debug_assertions) {
    256 * 1024
} else {
    128 * 1024
};

/// The fiber stack size: `configured`, raised to [`TLS_FIBER_STACK`] when a fiber runs TLS
/// (a fiber listener serves it, or a proxy talks it to an `https://` upstream).
pub(crate) fn fiber_stack(configured: usize, fiber_tls: bool) -> usize {
    if fiber_tls {
        configured.max(TLS_FIBER_STACK)
    } else {
        configured
    }
}

#[cfg(test)]
mod tls_stack_tests {
    use super::{fiber_stack, TLS_FIBER_STACK};

    #[test]
    fn fiber_stack_is_raised_only_for_tls() {
        assert_eq!(fiber_stack(64 * 1024, false), 64 * 1024);
        assert_eq!(fiber_stack(64 * 1024, true), TLS_FIBER_STACK);
        assert_eq!(fiber_stack(1 << 20, true), 1 << 20);
    }
}
