//! The reactor half of the runtime: per-fd registrations in a worker's epoll, and [`Source`],
//! the non-blocking fd every I/O type wraps.
//!
//! An fd is registered once, lazily — the first time an operation on it would block inside a
//! fiber — in the epoll of that fiber's worker, edge-triggered for both directions
//! (`EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`): one `epoll_ctl` per connection instead of one
//! per wait (one-shot would re-arm on every block). Each registration (`IoSlot`) keeps a
//! readiness word per direction (an event tick, a `READY` bit and a sticky `CLOSED` bit, see
//! `protocol`), the fibers
//! parked on it, and at most one connection parked without a fiber
//! ([`crate::net::TcpStream::when_readable`]).
//!
//! **Readiness tracking** (as nginx and tokio do with edge-triggered epoll): an operation
//! snapshots the word, makes the syscall, and when the syscall shows the fd drained — `EAGAIN`,
//! a read that returned fewer bytes than asked (but not 0: end of stream stays readable), a
//! send that took fewer bytes than offered — it clears `READY` against the snapshot. An edge
//! sets it again. An operation that finds the word not ready parks first and makes the syscall
//! only after the next edge, so a keep-alive connection makes one `read` per request instead of
//! a read that fails with `EAGAIN` before each park. An edge with `EPOLLRDHUP`/`EPOLLHUP`/
//! `EPOLLERR` also sets `CLOSED`, which a short read does not clear: the bytes and the peer's
//! close usually arrive in one edge, and the read after the short one must see the end of
//! stream (found by the pipe and child-stdio tests). Only `EAGAIN` clears `CLOSED`. `sendfile`, `accept` and `connect` clear
//! only on `EAGAIN` (a short `sendfile` may mean the file ended, with room left in the socket).
//!
//! No wake-up is lost: the clear is a compare-exchange against the pre-syscall snapshot, so an
//! edge that came after the syscall keeps the word ready; a waiter checks the word and queues
//! itself under the slot's lock, which the worker holds while it sets the word and drains the
//! queue. The flag is trusted (a syscall skipped) only by a fiber on the worker whose epoll
//! holds the registration — that worker is the one that will see the next edge between two
//! fiber runs. A fiber on another worker, or a plain thread, always makes the syscall (it still
//! clears the flag on `EAGAIN`, which is correct from any thread).
//!
//! A deadline adds a timer; when it fires first the operation fails with
//! `ErrorKind::TimedOut`. Outside a fiber the same operation blocks the thread in `poll(2)`
//! instead, with the same deadline; the epoll registration is not involved.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::idle::IdleKey;
use crate::interrupt::{interrupted, Interrupt};
use crate::protocol::{self, is_ready, AtomicU32, READY};
use crate::readiness::{timed_out, Deadline, Dir};
use crate::sched::{self, Sched};
use crate::state::bump;
use crate::sync::lock::Lock;
use crate::task::{self, Msg, Shared, Task};
use weft_sys::epoll::{Epoll, EPOLLERR, EPOLLET, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};
use weft_sys::poll::{poll_fd, poll_fd_or, POLLIN, POLLOUT, POLLRDHUP};

/// What waits on one registration. Kept small: an idle keep-alive connection holds one.
#[derive(Default)]
struct Waiters {
    /// Parked fibers with the direction each waits for (usually one or none).
    tasks: Vec<(Dir, Arc<Task>)>,
    /// A connection parked without a fiber, spawned again on the next read edge.
    idle: Option<IdleKey>,
}

/// One fd's registration in one worker's epoll.
pub(crate) struct IoSlot {
    pub(crate) shared: Arc<Shared>,
    worker: u32,
    fd: RawFd,
    read: AtomicU32,
    write: AtomicU32,
    waiters: Lock<Waiters>,
}

impl IoSlot {
    fn word(&self, d: Dir) -> &AtomicU32 {
        match d {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
        }
    }

    fn state(&self, d: Dir) -> u32 {
        self.word(d).load(Ordering::Acquire)
    }

    pub(crate) fn worker(&self) -> usize {
        self.worker as usize
    }

    /// Whether `sched` is that of the worker whose epoll holds this registration.
    pub(crate) fn is_home(&self, sched: &Sched) -> bool {
        self.worker() == sched.index && Arc::ptr_eq(&self.shared, &sched.shared)
    }

    fn epoll(&self) -> &Epoll {
        &self.shared.workers[self.worker()].epoll
    }

    /// Whether the fd is readable now, for a caller about to park a connection on it. The
    /// word answers when it says drained; when it only says "maybe" (no read came up short
    /// since the last edge, e.g. a read of exactly the bytes there were), a `poll(2)` with a
    /// zero timeout settles it and, if nothing is there, marks the word drained — one cheap,
    /// non-destructive syscall (unlike a `MSG_PEEK` read, it leaves a pending `SO_ERROR` for
    /// the callee's read) instead of spawning a fiber whose read would find nothing.
    pub(crate) fn readable_now(&self, sched: &Sched) -> bool {
        let snap = self.state(Dir::Read);
        if !is_ready(snap) {
            return false;
        }
        let io = &sched.stats().reads;
        bump(&io.calls);
        match poll_fd(self.fd, POLLIN | POLLRDHUP, Some(Duration::ZERO)) {
            Ok(false) => {
                bump(&io.would_block);
                protocol::ready_clear(&self.read, snap, true);
                // An edge since the snapshot kept the word ready: take it as readable.
                is_ready(self.state(Dir::Read))
            }
            Ok(true) | Err(_) => true,
        }
    }

    /// Parks the (exclusively owned) connection `key` on this registration, to be spawned on
    /// the next read edge. The caller runs on this slot's worker and saw `readable_now()`
    /// false in the same fiber run: only this thread sets `READY` (between fiber runs), so no edge
    /// can slip between that check and this call.
    pub(crate) fn set_idle(&self, key: IdleKey) {
        let mut w = self.waiters.lock();
        // Nothing else can wait on an owned stream: give the waiter list's memory back, an
        // idle connection keeps only the slot itself.
        debug_assert!(w.tasks.is_empty());
        w.tasks = Vec::new();
        w.idle = Some(key);
    }

    /// Called by the owning worker for each epoll event of this fd. Returns the connection
    /// parked without a fiber, if the event makes it readable: the worker spawns it after the
    /// event batch (spawning may drop a stream, and no slot may be freed inside a batch).
    pub(crate) fn on_event(&self, flags: u32) -> Option<IdleKey> {
        let read_closed = flags & (EPOLLRDHUP | EPOLLHUP | EPOLLERR) != 0;
        let write_closed = flags & (EPOLLHUP | EPOLLERR) != 0;
        let readable = read_closed || flags & EPOLLIN != 0;
        let writable = write_closed || flags & EPOLLOUT != 0;
        let mut w = self.waiters.lock();
        if readable {
            protocol::ready_event(&self.read, read_closed);
        }
        if writable {
            protocol::ready_event(&self.write, write_closed);
        }
        if !w.tasks.is_empty() {
            // In order; each woken waiter's reference goes to the run queue as it is.
            let hit = |d: &Dir| match d {
                Dir::Read => readable,
                Dir::Write => writable,
            };
            let mut i = 0;
            while i < w.tasks.len() {
                if hit(&w.tasks[i].0) {
                    // The last (usually the only) waiter without `remove`'s shift.
                    let (_, t) = if i + 1 == w.tasks.len() {
                        w.tasks.pop().expect("i is an index")
                    } else {
                        w.tasks.remove(i)
                    };
                    t.unpark_owned();
                } else {
                    i += 1;
                }
            }
        }
        if readable {
            w.idle.take()
        } else {
            None
        }
    }
}

/// Queues the calling fiber `me` on `slot` for direction `d` and parks it with `park` until an
/// edge comes (true; at once if the word is ready already) or, after a wake-up, `expired` says
/// its deadline passed (false, with `me` taken off the waiter list again). Other wake-ups park
/// it again.
fn park_on(
    slot: &IoSlot,
    d: Dir,
    me: &Arc<Task>,
    mut park: impl FnMut(),
    expired: impl Fn() -> bool,
) -> bool {
    // The word as it was when we queued: an edge bumps its tick (a clear by another fiber
    // cannot make it differ, since it is not ready).
    let queued_at = {
        let mut w = slot.waiters.lock();
        let now = slot.state(d);
        if is_ready(now) {
            return true;
        }
        w.tasks.push((d, me.clone()));
        now
    };
    loop {
        park();
        if slot.state(d) != queued_at {
            return true; // the event took us off the waiter list
        }
        if expired() {
            let mut w = slot.waiters.lock();
            if slot.state(d) != queued_at {
                return true;
            }
            w.tasks.retain(|(_, t)| !Arc::ptr_eq(t, me));
            return false;
        }
    }
}

/// What is left until `deadline` (`None`: no limit), or `TimedOut` once it has passed.
fn time_left(deadline: Option<Instant>) -> io::Result<Option<Duration>> {
    match deadline {
        None => Ok(None),
        Some(at) => {
            let now = Instant::now();
            if now >= at {
                return Err(timed_out());
            }
            Ok(Some(at - now))
        }
    }
}

/// One fd of a [`wait_any`] and the directions it waits for.
pub(crate) struct WaitOn<'a> {
    /// The fd's source (registered in the worker's epoll when waited on in a fiber), or a
    /// bare fd (only polled).
    pub(crate) src: Result<&'a Source, RawFd>,
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// Waits until one of `waits` may be ready in a direction it asks for (a hint: the caller
/// tries its operations again, which may still find nothing), or `int` fires
/// (`Interrupted`), or `deadline` passes (`TimedOut`). In a fiber whose waits are all
/// sources the fiber parks on each registration at once; elsewhere (a thread, or a bare fd
/// among them) the thread blocks in `poll(2)`.
pub(crate) fn wait_any(
    waits: &[WaitOn<'_>],
    deadline: Option<Instant>,
    int: Option<&Interrupt>,
) -> io::Result<()> {
    if let Some(local) = sched::fiber_sched() {
        let sources: Option<Vec<&Source>> = waits.iter().map(|w| w.src.ok()).collect();
        if let Some(sources) = sources {
            return wait_any_fiber(local, waits, &sources, deadline, int);
        }
    }
    wait_any_thread(waits, deadline, int)
}

fn wait_any_thread(
    waits: &[WaitOn<'_>],
    deadline: Option<Instant>,
    int: Option<&Interrupt>,
) -> io::Result<()> {
    let timeout = time_left(deadline)?;
    let mut fds: Vec<(RawFd, i16)> = waits
        .iter()
        .map(|w| {
            let fd = match w.src {
                Ok(s) => s.raw(),
                Err(fd) => fd,
            };
            let mut ev = 0;
            if w.read {
                ev |= POLLIN | POLLRDHUP;
            }
            if w.write {
                ev |= POLLOUT;
            }
            (fd, ev)
        })
        .collect();
    if let Some(i) = int {
        fds.push((i.eventfd()?.as_raw_fd(), POLLIN));
    }
    let ready = weft_sys::poll::poll_any(&fds, timeout)?;
    if int.is_some_and(Interrupt::is_fired) {
        Err(interrupted())
    } else if ready {
        Ok(())
    } else {
        Err(timed_out())
    }
}

fn wait_any_fiber(
    local: &Sched,
    waits: &[WaitOn<'_>],
    sources: &[&Source],
    deadline: Option<Instant>,
    int: Option<&Interrupt>,
) -> io::Result<()> {
    let me = task::with_current(Arc::clone).expect("in a fiber");
    // Each (registration, direction) queued on, with its word when queued: an edge changes it.
    let mut queued: Vec<(&Arc<IoSlot>, Dir, u32)> = Vec::with_capacity(waits.len() * 2);
    let mut ready = false;
    'queue: for (w, src) in waits.iter().zip(sources) {
        for (want, d) in [(w.read, Dir::Read), (w.write, Dir::Write)] {
            if !want {
                continue;
            }
            let slot = src.registration(local, d)?;
            let mut list = slot.waiters.lock();
            let now = slot.state(d);
            if is_ready(now) {
                ready = true;
                break 'queue;
            }
            list.tasks.push((d, me.clone()));
            queued.push((slot, d, now));
        }
    }
    let mut result = Ok(());
    if !ready {
        // Off the interrupt's list when this returns or unwinds.
        let on_int = match int.map(|i| i.enter(&me)) {
            Some(None) => Err(interrupted()),
            q => Ok(q.flatten()),
        };
        result = match on_int {
            Err(e) => Err(e),
            Ok(guard) => {
                let r = loop {
                    if queued.iter().any(|&(s, d, at)| s.state(d) != at) {
                        break Ok(());
                    }
                    if int.is_some_and(Interrupt::is_fired) {
                        break Err(interrupted());
                    }
                    if deadline.is_some_and(|at| Instant::now() >= at) {
                        break Err(timed_out());
                    }
                    sched::park(deadline);
                };
                drop(guard);
                r
            }
        };
    }
    // Off every list an edge did not take it from.
    for (slot, _, _) in &queued {
        slot.waiters
            .lock()
            .tasks
            .retain(|(_, t)| !Arc::ptr_eq(t, &me));
    }
    // An edge seen while leaving still counts.
    if result.is_err() && queued.iter().any(|&(s, d, at)| s.state(d) != at) {
        result = Ok(());
    }
    result
}

/// A fiber counted as lingering on its worker (`Stats::lingering`) while this lives.
struct Lingering<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Lingering<'a> {
    /// Counts one more lingering fiber on `sched`'s worker, unless it has its most already.
    fn enter(sched: &'a Sched) -> Option<Lingering<'a>> {
        let n = &sched.stats().lingering;
        // Single writer (this worker's thread): a plain load and store.
        let now = n.load(Ordering::Relaxed);
        if now >= sched.shared.config.max_lingering {
            return None;
        }
        n.store(now + 1, Ordering::Relaxed);
        Some(Lingering(n))
    }
}

impl Drop for Lingering<'_> {
    fn drop(&mut self) {
        let n = self.0;
        n.store(n.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    }
}

/// Whether a result shows the fd drained in its direction (see the module docs). Operations
/// with no such notion pass [`never_drained`].
pub(crate) fn never_drained<R>(_: &R) -> bool {
    false
}

/// A read that returned fewer bytes than `want` (but some: 0 is end of stream, which stays
/// readable for the next read).
pub(crate) fn short_read(want: usize) -> impl Fn(&usize) -> bool {
    move |&n| n > 0 && n < want
}

/// A write that took fewer bytes than `want`: the send buffer (or pipe) is full.
pub(crate) fn short_write(want: usize) -> impl Fn(&usize) -> bool {
    move |&n| n < want
}

/// A non-blocking fd with per-direction timeouts that waits in the current fiber or thread.
pub(crate) struct Source {
    fd: Option<OwnedFd>,
    /// Microseconds writes have waited for room, in all, saturating at about 71 minutes
    /// ([`Source::write_waited`]); 32 bits keep a connection's socket at 40 bytes.
    write_waited: AtomicU32,
    slot: OnceLock<Arc<IoSlot>>,
    /// Timeouts in nanoseconds; 0 means none.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("fd", &self.raw())
            .field("registered", &self.slot.get().is_some())
            .finish()
    }
}

impl Source {
    /// Wraps `fd`, switching it to non-blocking mode.
    pub(crate) fn new(fd: OwnedFd) -> io::Result<Source> {
        weft_sys::fd::set_nonblocking(&fd, true)?;
        Ok(Source::from_nonblocking(fd))
    }

    /// Wraps an fd that is already non-blocking.
    pub(crate) fn from_nonblocking(fd: OwnedFd) -> Source {
        Source {
            fd: Some(fd),
            write_waited: AtomicU32::new(0),
            slot: OnceLock::new(),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
        }
    }

    /// The time writes (and `sendfile` calls) on this fd have waited for room, in all: a
    /// minimum send rate counts it against the bytes sent. Only waits read the clock.
    pub(crate) fn write_waited(&self) -> Duration {
        Duration::from_micros(u64::from(self.write_waited.load(Ordering::Relaxed)))
    }

    /// The descriptor's number (-1 after [`Source::into_fd`]).
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    pub(crate) fn owned(&self) -> &OwnedFd {
        self.fd.as_ref().expect("fd present until into_fd")
    }

    fn timeout_cell(&self, d: Dir) -> &AtomicU64 {
        match d {
            Dir::Read => &self.read_timeout,
            Dir::Write => &self.write_timeout,
        }
    }

    /// Sets the timeout of each operation in direction `d`; `Some(0)` is rejected like std.
    pub(crate) fn set_timeout(&self, d: Dir, t: Option<Duration>) -> io::Result<()> {
        let nanos = match t {
            None => 0,
            Some(t) if t.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout",
                ))
            }
            Some(t) => u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
        };
        self.timeout_cell(d).store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn timeout(&self, d: Dir) -> Option<Duration> {
        match self.timeout_cell(d).load(Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Runs `op` until it does not return `WouldBlock`, waiting for readiness in between,
    /// bounded by the direction's timeout. `drained` tells from a result that the fd has
    /// nothing more to give (or take) for now.
    pub(crate) fn io<R>(
        &self,
        d: Dir,
        drained: impl Fn(&R) -> bool,
        op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> io::Result<R> {
        let deadline = match self.timeout(d) {
            None => Deadline::Never,
            Some(t) => Deadline::After(t),
        };
        self.io_until(d, deadline, drained, op)
    }

    /// As [`Source::io`] with an explicit deadline.
    #[inline]
    pub(crate) fn io_until<R>(
        &self,
        d: Dir,
        deadline: Deadline,
        drained: impl Fn(&R) -> bool,
        op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> io::Result<R> {
        self.io_until_or(d, deadline, None, drained, op)
    }

    /// As [`Source::io_until`], and a wait also ends, with `ErrorKind::Interrupted`, when
    /// `int` fires (a ready fd is still served first).
    pub(crate) fn io_until_or<R>(
        &self,
        d: Dir,
        deadline: Deadline,
        int: Option<&Interrupt>,
        drained: impl Fn(&R) -> bool,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> io::Result<R> {
        let local = sched::fiber_sched();
        let mut resolved: Option<Option<Instant>> = None;
        loop {
            let slot = self.slot.get();
            let snap = slot.map_or(READY, |s| s.state(d));
            if !is_ready(snap) {
                if let (Some(l), Some(s)) = (local, slot) {
                    let dl = *resolved.get_or_insert_with(|| deadline.resolve());
                    // An expired deadline still gets one syscall: the data may be there and
                    // its edge not yet seen.
                    if s.is_home(l) && dl.is_none_or(|at| Instant::now() < at) {
                        bump(&l.stats().io(d).skipped);
                        self.wait(d, dl, int)?;
                        continue;
                    }
                }
            }
            if let Some(l) = local {
                bump(&l.stats().io(d).calls);
            }
            match op(self.raw()) {
                Ok(r) => {
                    if let Some(s) = slot {
                        if drained(&r) {
                            protocol::ready_clear(s.word(d), snap, false);
                        }
                    }
                    return Ok(r);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(l) = local {
                        bump(&l.stats().io(d).would_block);
                    }
                    if let Some(s) = slot {
                        protocol::ready_clear(s.word(d), snap, true);
                    }
                    let dl = *resolved.get_or_insert_with(|| deadline.resolve());
                    self.wait(d, dl, int)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `op` once, without waiting: `WouldBlock` comes back to the caller (with the
    /// readiness word cleared, so a [`wait_any`] that follows parks until the next edge).
    pub(crate) fn try_io<R>(
        &self,
        d: Dir,
        drained: impl Fn(&R) -> bool,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let slot = self.slot.get();
            let snap = slot.map_or(READY, |s| s.state(d));
            match op(self.raw()) {
                Ok(r) => {
                    if let Some(s) = slot {
                        if drained(&r) {
                            protocol::ready_clear(s.word(d), snap, false);
                        }
                    }
                    return Ok(r);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(s) = slot {
                        protocol::ready_clear(s.word(d), snap, true);
                    }
                    return Err(e);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until the fd may be ready in direction `d` (after a syscall showed it drained,
    /// or its readiness word did), or fails with `TimedOut` at `deadline` or with
    /// `Interrupted` when `int` fires first.
    pub(crate) fn wait(
        &self,
        d: Dir,
        deadline: Option<Instant>,
        int: Option<&Interrupt>,
    ) -> io::Result<()> {
        let began = (d == Dir::Write).then(Instant::now);
        let r = match sched::fiber_sched() {
            Some(local) => self.wait_fiber(local, d, deadline, int),
            None => self.wait_thread(d, deadline, int),
        };
        if let Some(began) = began {
            let micros = u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX);
            let _ = self
                .write_waited
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                    Some(w.saturating_add(micros))
                });
        }
        r
    }

    fn wait_thread(
        &self,
        d: Dir,
        deadline: Option<Instant>,
        int: Option<&Interrupt>,
    ) -> io::Result<()> {
        let timeout = time_left(deadline)?;
        let events = match d {
            Dir::Read => POLLIN,
            Dir::Write => POLLOUT,
        };
        // The interrupt's eventfd stays readable once fired, so a fired one ends the poll at
        // once and is seen below.
        let also = match int {
            Some(i) => Some(i.eventfd()?.as_raw_fd()),
            None => None,
        };
        let ready = poll_fd_or(self.raw(), events, also, timeout)?;
        if int.is_some_and(Interrupt::is_fired) {
            Err(interrupted())
        } else if ready {
            Ok(())
        } else {
            Err(timed_out())
        }
    }

    fn wait_fiber(
        &self,
        local: &Sched,
        d: Dir,
        deadline: Option<Instant>,
        int: Option<&Interrupt>,
    ) -> io::Result<()> {
        let slot = self.registration(local, d)?;
        let me = task::with_current(Arc::clone).expect("in a fiber");
        // Off the interrupt's list when this returns or unwinds.
        let queued = match int.map(|i| i.enter(&me)) {
            Some(None) => return Err(interrupted()),
            queued => queued.flatten(),
        };
        let edge = park_on(
            slot,
            d,
            &me,
            || sched::park(deadline),
            || {
                deadline.is_some_and(|at| Instant::now() >= at)
                    || int.is_some_and(Interrupt::is_fired)
            },
        );
        drop(queued);
        if edge {
            Ok(())
        } else if int.is_some_and(Interrupt::is_fired) {
            Err(interrupted())
        } else {
            Err(timed_out())
        }
    }

    /// Waits in the calling fiber for the fd to turn readable, for about `period` (measured
    /// on the worker's round clock, so up to one round less): true when it may be readable
    /// (bytes, the end of the stream or an error to read; also outside a fiber, where the
    /// caller's read blocks the thread as usual), false when `period` passed with nothing or,
    /// at once, when the worker has `max_lingering` fibers lingering already.
    /// For a connection between two requests: a busy one keeps its fiber and buffers across
    /// the gap (no timer queue operation and no clock read per wait: the fiber's linger timer
    /// stays queued from one wait to the next, `timer.rs`), a quiet one is handed back to the
    /// caller to park more cheaply.
    pub(crate) fn linger(&mut self, period: Duration) -> io::Result<bool> {
        let Some(local) = sched::fiber_sched() else {
            return Ok(true);
        };
        // Borrowed, not cloned, once the registration is home (every wait after the first).
        let slot = match self.slot.get() {
            Some(s) if s.is_home(local) => s,
            _ => {
                self.home_registration(local)?;
                self.slot.get().expect("registered just now")
            }
        };
        if slot.readable_now(local) {
            return Ok(true);
        }
        let Some(_lingering) = Lingering::enter(local) else {
            return Ok(false);
        };
        // On the round clock's nanosecond scale: integer arithmetic, no `Instant` per wait.
        let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
        let due = local.round_nanos().saturating_add(period);
        let woke = task::with_current(|me| {
            park_on(
                slot,
                Dir::Read,
                me,
                || sched::park_fifo(local, due, me),
                || local.round_nanos() >= due,
            )
        });
        Ok(woke.expect("in a fiber"))
    }

    /// The fd's registration, made now in `local`'s epoll if there is none yet (with
    /// direction `drained` not ready: the syscall that sent us here found it drained, and
    /// `EPOLL_CTL_ADD` reports whatever readiness came since as an event).
    fn registration(&self, local: &Sched, drained: Dir) -> io::Result<&Arc<IoSlot>> {
        if let Some(s) = self.slot.get() {
            return Ok(s);
        }
        let slot = self.register_in(local, drained)?;
        Ok(self.install(slot))
    }

    /// The fd's registration in `local`'s own epoll, moving it there from another worker's if
    /// needed. Needs `&mut self`: nothing may wait on the old registration meanwhile.
    pub(crate) fn home_registration(&mut self, local: &Sched) -> io::Result<Arc<IoSlot>> {
        if let Some(s) = self.slot.get() {
            if s.is_home(local) {
                return Ok(s.clone());
            }
            self.deregister();
        }
        // The read state is unknown: start not ready; EPOLL_CTL_ADD reports it as an edge.
        let slot = self.register_in(local, Dir::Read)?;
        Ok(self.install(slot).clone())
    }

    /// Adds the fd to `local`'s epoll; the returned slot has one reference leaked into epoll.
    fn register_in(&self, local: &Sched, drained: Dir) -> io::Result<Arc<IoSlot>> {
        let (r, w) = match drained {
            Dir::Read => (0, READY),
            Dir::Write => (READY, 0),
        };
        let slot = Arc::new(IoSlot {
            shared: local.shared.clone(),
            worker: local.index as u32,
            fd: self.raw(),
            read: AtomicU32::new(r),
            write: AtomicU32::new(w),
            waiters: Lock::new(Waiters::default()),
        });
        // The epoll's reference: reclaimed in `deregister` (or below, on failure).
        let raw = Arc::into_raw(slot.clone());
        let events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        if let Err(e) = slot.epoll().add(self.raw(), events, raw as u64) {
            // SAFETY: `raw` came from `Arc::into_raw` just above and was not handed to epoll.
            drop(unsafe { Arc::from_raw(raw) });
            return Err(e);
        }
        Ok(slot)
    }

    /// Makes `slot` the fd's registration, unless another fiber (on another worker) won the
    /// race: then `slot` is removed from its epoll again and the winner returned.
    fn install(&self, slot: Arc<IoSlot>) -> &Arc<IoSlot> {
        if let Err(lost) = self.slot.set(slot) {
            let _ = lost.epoll().delete(self.raw());
            // SAFETY: `lost` was made by `register_in`, which leaked exactly one reference at
            // this address into the epoll it was just removed from.
            release_slot(unsafe { Arc::from_raw(Arc::as_ptr(&lost)) });
        }
        self.slot.get().expect("set above")
    }

    /// Forgets the parked connection of this fd that left by its timeout (no edge took it).
    /// Called by the connection's own callback before it runs, so nothing can have parked the
    /// fd again meanwhile; a stale key an edge took in between misses in the idle table (its
    /// generation moved on).
    pub(crate) fn forget_idle(&self) {
        if let Some(s) = self.slot.get() {
            s.waiters.lock().idle = None;
        }
    }

    fn deregister(&mut self) {
        if let Some(slot) = self.slot.take() {
            let _ = slot.epoll().delete(slot.fd);
            // SAFETY: a registered slot always has exactly one reference leaked into epoll by
            // `registration`, at this same address; after EPOLL_CTL_DEL no new event carries
            // it, and `release_slot` defers the drop past any batch already taken.
            let leaked = unsafe { Arc::from_raw(Arc::as_ptr(&slot)) };
            release_slot(leaked);
        }
    }

    /// Deregisters and gives the fd back (still non-blocking).
    pub(crate) fn into_fd(mut self) -> OwnedFd {
        self.deregister();
        self.fd.take().expect("fd present until into_fd")
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.deregister();
        // `fd` closes after the epoll registration is gone.
    }
}

/// Releases a registration's epoll reference: directly when on its worker (or when the worker
/// is gone), else through the worker's inbox, so it never frees a slot inside an event batch.
fn release_slot(slot: Arc<IoSlot>) {
    let (shared, index) = (slot.shared.clone(), slot.worker());
    if sched::current_for(&shared, index).is_some() {
        drop(slot);
    } else {
        shared.workers[index].send(Msg::Release(slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn a_failed_registration_reports_the_error() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let e = rt.block_on(|| {
            // Regular files cannot be added to an epoll set (EPERM).
            let f = std::fs::File::open("/proc/self/statm").unwrap();
            let src = Source::from_nonblocking(OwnedFd::from(f));
            src.wait(Dir::Read, None, None).unwrap_err()
        });
        assert_eq!(e.raw_os_error(), Some(weft_sys::errno::EPERM));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn a_lost_registration_race_is_undone() {
        let rt = crate::Runtime::builder().workers(2).build().unwrap();
        let (r, _w) = weft_sys::fd::pipe_nonblocking().unwrap();
        let src = Arc::new(Source::from_nonblocking(r));
        // Worker 1 registers first ...
        let s = src.clone();
        let winner = rt
            .spawn_on(1, move || {
                let local = sched::current().unwrap();
                Arc::as_ptr(s.registration(local, Dir::Read).unwrap()) as usize
            })
            .join()
            .unwrap();
        // ... then worker 0 registers the same fd in its own epoll and loses the install.
        let s = src.clone();
        let kept = rt
            .spawn_on(0, move || {
                let local = sched::current().unwrap();
                let mine = s.register_in(local, Dir::Read).unwrap();
                let mine_ptr = Arc::as_ptr(&mine) as usize;
                let kept = Arc::as_ptr(s.install(mine)) as usize;
                assert_ne!(kept, mine_ptr);
                kept
            })
            .join()
            .unwrap();
        assert_eq!(kept, winner);
        drop(src); // deregistered from a plain thread: released through worker 1's inbox
    }
}
