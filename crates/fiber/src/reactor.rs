//! The reactor half of the runtime: per-fd registrations in a worker's epoll, and [`Source`],
//! the non-blocking fd every I/O type wraps.
//!
//! An fd is registered once, lazily — the first time an operation on it would block inside a
//! fiber — in the epoll of that fiber's worker, edge-triggered for both directions
//! (`EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`): one `epoll_ctl` per connection instead of one
//! per wait (one-shot would re-arm on every block). Each registration (`IoSlot`) has a sequence
//! number per direction, bumped by every event, and a list of parked fibers per direction.
//!
//! An operation snapshots the sequence, tries the syscall, and on `EAGAIN` parks unless the
//! sequence moved meanwhile (then it simply retries) — so an edge that arrives between the
//! syscall and the park is never lost. A deadline adds a timer; when it fires first the
//! operation fails with `ErrorKind::TimedOut`. Outside a fiber the same operation blocks the
//! thread in `poll(2)` instead, with the same deadline; the epoll registration is not involved.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::runtime::Shared;
use crate::sync::lock::Lock;
use crate::sys;
use crate::task::{self, Task};
use crate::worker::{self, Local};

/// Readiness direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

#[derive(Default)]
struct Waiters {
    readers: Vec<Arc<Task>>,
    writers: Vec<Arc<Task>>,
}

impl Waiters {
    fn list(&mut self, d: Dir) -> &mut Vec<Arc<Task>> {
        match d {
            Dir::Read => &mut self.readers,
            Dir::Write => &mut self.writers,
        }
    }
}

/// One fd's registration in one worker's epoll.
pub(crate) struct IoSlot {
    fd: RawFd,
    pub(crate) shared: Arc<Shared>,
    pub(crate) worker: usize,
    read_seq: AtomicU32,
    write_seq: AtomicU32,
    waiters: Lock<Waiters>,
}

impl IoSlot {
    fn seq(&self, d: Dir) -> u32 {
        match d {
            Dir::Read => self.read_seq.load(Ordering::Acquire),
            Dir::Write => self.write_seq.load(Ordering::Acquire),
        }
    }

    fn epfd(&self) -> RawFd {
        self.shared.workers[self.worker].epoll.as_raw_fd()
    }

    /// Called by the owning worker for each epoll event of this fd.
    pub(crate) fn on_event(&self, flags: u32) {
        let readable =
            flags & (sys::EPOLLIN | sys::EPOLLRDHUP | sys::EPOLLHUP | sys::EPOLLERR) != 0;
        let writable = flags & (sys::EPOLLOUT | sys::EPOLLHUP | sys::EPOLLERR) != 0;
        let mut w = self.waiters.lock();
        if readable {
            self.read_seq.fetch_add(1, Ordering::AcqRel);
            for t in w.readers.drain(..) {
                t.unpark_owned();
            }
        }
        if writable {
            self.write_seq.fetch_add(1, Ordering::AcqRel);
            for t in w.writers.drain(..) {
                t.unpark_owned();
            }
        }
    }
}

/// When an operation gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Deadline {
    Never,
    After(Duration),
    At(Instant),
}

impl Deadline {
    fn resolve(self) -> Option<Instant> {
        match self {
            Deadline::Never => None,
            Deadline::After(d) => Some(Instant::now() + d),
            Deadline::At(t) => Some(t),
        }
    }
}

pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "operation timed out")
}

/// A non-blocking fd with per-direction timeouts that waits in the current fiber or thread.
pub(crate) struct Source {
    raw: RawFd,
    fd: Option<OwnedFd>,
    slot: OnceLock<Arc<IoSlot>>,
    /// Timeouts in nanoseconds; 0 means none.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("fd", &self.raw)
            .field("registered", &self.slot.get().is_some())
            .finish()
    }
}

impl Source {
    /// Wraps `fd`, switching it to non-blocking mode.
    pub(crate) fn new(fd: OwnedFd) -> io::Result<Source> {
        sys::set_nonblocking(&fd, true)?;
        Ok(Source::from_nonblocking(fd))
    }

    /// Wraps an fd that is already non-blocking.
    pub(crate) fn from_nonblocking(fd: OwnedFd) -> Source {
        Source {
            raw: fd.as_raw_fd(),
            fd: Some(fd),
            slot: OnceLock::new(),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
        }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.raw
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
    /// bounded by the direction's timeout.
    pub(crate) fn io<R>(&self, d: Dir, op: impl FnMut(RawFd) -> io::Result<R>) -> io::Result<R> {
        let deadline = match self.timeout(d) {
            None => Deadline::Never,
            Some(t) => Deadline::After(t),
        };
        self.io_until(d, deadline, op)
    }

    /// As [`Source::io`] with an explicit deadline.
    pub(crate) fn io_until<R>(
        &self,
        d: Dir,
        deadline: Deadline,
        mut op: impl FnMut(RawFd) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut resolved: Option<Option<Instant>> = None;
        loop {
            let snap = self.slot.get().map_or(0, |s| s.seq(d));
            match op(self.raw) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let dl = *resolved.get_or_insert_with(|| deadline.resolve());
                    self.wait(d, snap, dl)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// Waits until the fd may be ready in direction `d` (after a `WouldBlock` seen when the
    /// sequence was `snap`), or fails with `TimedOut` at `deadline`.
    pub(crate) fn wait(&self, d: Dir, snap: u32, deadline: Option<Instant>) -> io::Result<()> {
        match worker::current_local() {
            Some(local) if task::in_fiber() => self.wait_fiber(local, d, snap, deadline),
            _ => self.wait_thread(d, deadline),
        }
    }

    fn wait_thread(&self, d: Dir, deadline: Option<Instant>) -> io::Result<()> {
        let timeout = match deadline {
            None => None,
            Some(at) => {
                let now = Instant::now();
                if now >= at {
                    return Err(timed_out());
                }
                Some(at - now)
            }
        };
        let events = match d {
            Dir::Read => sys::POLLIN,
            Dir::Write => sys::POLLOUT,
        };
        if sys::poll_fd(self.raw, events, timeout)? {
            Ok(())
        } else {
            Err(timed_out())
        }
    }

    fn wait_fiber(
        &self,
        local: &Local,
        d: Dir,
        snap: u32,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        let slot = self.registration(local)?;
        let me = task::with_current(Arc::clone).expect("in a fiber");
        {
            let mut w = slot.waiters.lock();
            if slot.seq(d) != snap {
                return Ok(());
            }
            w.list(d).push(me.clone());
        }
        loop {
            task::park(deadline);
            if slot.seq(d) != snap {
                return Ok(()); // the event took us off the waiter list
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                let mut w = slot.waiters.lock();
                if slot.seq(d) != snap {
                    return Ok(());
                }
                w.list(d).retain(|t| !Arc::ptr_eq(t, &me));
                return Err(timed_out());
            }
        }
    }

    /// The fd's registration, made now in `local`'s epoll if there is none yet.
    fn registration(&self, local: &Local) -> io::Result<&Arc<IoSlot>> {
        if let Some(s) = self.slot.get() {
            return Ok(s);
        }
        let slot = self.register_in(local)?;
        Ok(self.install(slot))
    }

    /// Adds the fd to `local`'s epoll; the returned slot has one reference leaked into epoll.
    fn register_in(&self, local: &Local) -> io::Result<Arc<IoSlot>> {
        let slot = Arc::new(IoSlot {
            fd: self.raw,
            shared: local.shared.clone(),
            worker: local.index,
            read_seq: AtomicU32::new(0),
            write_seq: AtomicU32::new(0),
            waiters: Lock::new(Waiters::default()),
        });
        // The epoll's reference: reclaimed in `deregister` (or below, on failure).
        let raw = Arc::into_raw(slot.clone());
        let events = sys::EPOLLIN | sys::EPOLLOUT | sys::EPOLLRDHUP | sys::EPOLLET;
        if let Err(e) = sys::epoll_add(slot.epfd(), self.raw, events, raw as u64) {
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
            let _ = sys::epoll_del(lost.epfd(), self.raw);
            // SAFETY: `lost` was made by `register_in`, which leaked exactly one reference at
            // this address into the epoll it was just removed from.
            worker::release_slot(unsafe { Arc::from_raw(Arc::as_ptr(&lost)) });
        }
        self.slot.get().expect("set above")
    }

    fn deregister(&mut self) {
        if let Some(slot) = self.slot.take() {
            let _ = sys::epoll_del(slot.epfd(), slot.fd);
            // SAFETY: a registered slot always has exactly one reference leaked into epoll by
            // `registration`, at this same address; after EPOLL_CTL_DEL no new event carries
            // it, and `release_slot` defers the drop past any batch already taken.
            let leaked = unsafe { Arc::from_raw(Arc::as_ptr(&slot)) };
            worker::release_slot(leaked);
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
            src.wait(Dir::Read, 0, None).unwrap_err()
        });
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn a_lost_registration_race_is_undone() {
        let rt = crate::Runtime::builder().workers(2).build().unwrap();
        let (r, _w) = sys::pipe().unwrap();
        let src = Arc::new(Source::from_nonblocking(r));
        // Worker 1 registers first ...
        let s = src.clone();
        let winner = rt
            .spawn_on(1, move || {
                let local = worker::current_local().unwrap();
                Arc::as_ptr(s.registration(local).unwrap()) as usize
            })
            .join()
            .unwrap();
        // ... then worker 0 registers the same fd in its own epoll and loses the install.
        let s = src.clone();
        let kept = rt
            .spawn_on(0, move || {
                let local = worker::current_local().unwrap();
                let mine = s.register_in(local).unwrap();
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
