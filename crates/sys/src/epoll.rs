//! epoll(7) and eventfd(2): one [`Epoll`] for every event loop of the workspace (the fiber
//! runtime's workers, the pipeline model's poller, the process model's master) and one
//! [`EventFd`] for every wake-up of a thread blocked in one.
//!
//! [`Epoll::wait`] goes through `syscall(2)` as `epoll_pwait` with no signal mask: libc's
//! `epoll_wait` is a thread-cancellation point (two updates of the thread's cancel state
//! around each wait, which a fiber worker pays on every poll), and `epoll_pwait` is the call
//! every architecture has. [`Epoll::wait_for_signals`] passes a mask, for a loop whose signal
//! handlers only set flags.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::cvt;
use crate::poll::timeout_ms;

/// Readable (or a peer's end of stream, with [`EPOLLRDHUP`]).
pub const EPOLLIN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
/// The peer shut down its side (or closed).
pub const EPOLLRDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Hang-up: both directions are closed (always reported).
pub const EPOLLHUP: u32 = libc::EPOLLHUP as u32;
/// An error on the descriptor (always reported).
pub const EPOLLERR: u32 = libc::EPOLLERR as u32;
/// Edge-triggered: an event once per change of readiness.
pub const EPOLLET: u32 = libc::EPOLLET as u32;
/// One event, then none until the registration is re-armed with [`Epoll::modify`].
pub const EPOLLONESHOT: u32 = libc::EPOLLONESHOT as u32;

/// One readiness event: the token registered with the descriptor and the ready `EPOLL*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// What [`Epoll::add`] or [`Epoll::modify`] registered the descriptor with.
    pub token: u64,
    /// The `EPOLL*` bits that are ready.
    pub events: u32,
}

/// A buffer for the events of one [`Epoll::wait`]: its capacity is the most one wait takes.
pub struct Events {
    buf: Box<[libc::epoll_event]>,
    len: usize,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Events {
    /// Room for `n` events per wait (at least one).
    pub fn with_capacity(n: usize) -> Events {
        let n = n.clamp(1, i32::MAX as usize);
        Events {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; n].into_boxed_slice(),
            len: 0,
        }
    }

    /// The most events one wait takes.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The events the last wait took.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the last wait took none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets the events taken.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The events the last wait took, in the kernel's order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event> + '_ {
        // Fields are copied out: `epoll_event` is packed on x86-64, so no reference to one.
        self.buf[..self.len].iter().map(|e| Event {
            token: e.u64,
            events: e.events,
        })
    }
}

/// An epoll instance, closed on drop. Interest is registered per descriptor with a
/// caller-chosen 64-bit token that comes back with each of its events.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// A new, close-on-exec epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag, no pointers; the result is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Starts watching `fd` for `events` (`EPOLLIN | EPOLLET`, ...), reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes what `fd` is watched for and its token (and re-arms a one-shot registration).
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd` (it stays open).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        // The event is ignored for DEL, but kernels before 2.6.9 want it non-null.
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a live local the kernel only reads; `self.fd` is a live epoll
        // descriptor; `fd` is a plain number to the kernel (a closed one fails with EBADF).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Waits up to `timeout` (`None`: until an event) and puts the events that are ready in
    /// `events` (at most its capacity), replacing what it held. A signal ends the wait early
    /// with no events. On an error `events` is empty.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        self.pwait(events, timeout.map_or(-1, timeout_ms), None)
    }

    /// As [`Epoll::wait`], for a loop whose signal handlers only set flags: `signals` are
    /// blocked while `pending` looks at those flags, and unblocked again only inside the wait
    /// itself (`epoll_pwait`'s mask), so a signal that comes after the look ends the wait at
    /// once instead of being noticed at the next timeout. Returns at once, with no events,
    /// when `pending` says a flag is already set. The thread's mask is as before on return.
    pub fn wait_for_signals(
        &self,
        events: &mut Events,
        timeout: Option<Duration>,
        signals: &[libc::c_int],
        pending: impl FnOnce() -> bool,
    ) -> io::Result<()> {
        let ms = timeout.map_or(-1, timeout_ms);
        let old = crate::signal::block(signals);
        let r = if pending() {
            events.clear();
            Ok(())
        } else {
            self.pwait(events, ms, Some(&old))
        };
        // A signal that came after the wait is delivered here, and its flag is seen by the
        // caller's next look.
        crate::signal::set_mask(&old);
        r
    }

    fn pwait(
        &self,
        events: &mut Events,
        ms: libc::c_int,
        mask: Option<&libc::sigset_t>,
    ) -> io::Result<()> {
        events.len = 0;
        let max = events.buf.len() as libc::c_int; // at most i32::MAX (`with_capacity`)
        let mask = mask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
        // SAFETY: epoll_pwait(epfd, events, max, timeout, mask, sigsetsize): the kernel writes
        // at most `max` entries into the buffer we borrow mutably, of exactly that length;
        // `mask` is null (not read; the thread's mask stays) or points to a live sigset_t,
        // of which the kernel reads its own sigset size (8 bytes, the start of libc's).
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait,
                self.fd.as_raw_fd(),
                events.buf.as_mut_ptr(),
                max,
                ms,
                mask,
                8usize,
            )
        };
        match crate::cvt_long(n) {
            Ok(n) => {
                events.len = n.min(events.buf.len());
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A non-blocking, close-on-exec eventfd: readable while its counter is non-zero. Used to
/// wake a thread blocked in [`Epoll::wait`] or `poll`.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new eventfd with its counter at zero.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// Makes the eventfd readable (a wake-up).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, a live local, to a live eventfd. A full counter
        // (EAGAIN) already means "readable", so the result is ignored.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Consumes pending wake-ups: the eventfd is not readable until the next
    /// [`EventFd::notify`].
    pub fn drain(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into `n`, a live, exclusively borrowed u64; an empty
        // eventfd (EAGAIN) is not an error here.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Instant;

    fn tokens(ev: &Events) -> Vec<u64> {
        ev.iter().map(|e| e.token).collect()
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn wait_reports_what_is_ready_and_times_out_with_nothing() {
        let ep = Epoll::new().unwrap();
        let ev = EventFd::new().unwrap();
        ep.add(ev.as_raw_fd(), EPOLLIN, 42).unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(events.capacity(), 4);
        // Nothing ready: a zero timeout returns at once, a short one after it passes.
        ep.wait(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(events.is_empty());
        let t0 = Instant::now();
        ep.wait(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
        assert!(events.is_empty());
        assert!(
            t0.elapsed() >= Duration::from_millis(15),
            "{:?}",
            t0.elapsed()
        );
        ev.notify();
        ep.wait(&mut events, None).unwrap();
        let got: Vec<Event> = events.iter().collect();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].events & EPOLLIN, got[0].token), (EPOLLIN, 42));
        // A buffer of one entry gets one of two ready descriptors.
        let ev2 = EventFd::new().unwrap();
        ep.add(ev2.as_raw_fd(), EPOLLIN, 43).unwrap();
        ev2.notify();
        let mut one = Events::with_capacity(0);
        assert_eq!(one.capacity(), 1);
        ep.wait(&mut one, Some(Duration::ZERO)).unwrap();
        assert_eq!(one.len(), 1);
        ep.wait(&mut events, Some(Duration::ZERO)).unwrap();
        assert_eq!(events.len(), 2);
        // Drained and deleted: nothing more.
        ev.drain();
        ep.delete(ev2.as_raw_fd()).unwrap();
        ep.wait(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(events.is_empty(), "{events:?}");
        events.clear();
        assert_eq!(events.len(), 0);
        // Registering a closed number, or twice: errors.
        assert!(ep.add(-1, EPOLLIN, 1).is_err());
        assert!(ep.add(ev.as_raw_fd(), EPOLLIN, 1).is_err());
    }

    #[test]
    fn a_descriptor_that_is_no_epoll_is_an_error_and_no_events() {
        let not = Epoll {
            fd: EventFd::new().unwrap().fd,
        };
        let mut events = Events::with_capacity(4);
        let e = not.wait(&mut events, Some(Duration::ZERO)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        assert!(events.is_empty());
        assert_eq!(not.as_fd().as_raw_fd(), not.as_raw_fd());
    }

    #[test]
    fn a_one_shot_registration_reports_once_per_arming() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let ep = Epoll::new().unwrap();
        let flags = EPOLLIN | EPOLLONESHOT;
        ep.add(b.as_raw_fd(), flags, 7).unwrap();
        let mut ev = Events::with_capacity(8);
        ep.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        assert!(ev.is_empty());
        a.write_all(b"x").unwrap();
        ep.wait(&mut ev, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(tokens(&ev), [7]);
        // One-shot: still readable, but not reported until re-armed.
        ep.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        assert!(ev.is_empty());
        ep.modify(b.as_raw_fd(), flags, 8).unwrap();
        ep.wait(&mut ev, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(tokens(&ev), [8]);

        let wake = EventFd::new().unwrap();
        ep.add(wake.as_raw_fd(), EPOLLIN, 9).unwrap();
        wake.notify();
        wake.notify();
        ep.wait(&mut ev, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(tokens(&ev), [9]);
        wake.drain();
        ep.wait(&mut ev, Some(Duration::ZERO)).unwrap();
        assert!(ev.is_empty());
        // Draining an empty eventfd is no error and changes nothing.
        wake.drain();
        assert_eq!(wake.as_fd().as_raw_fd(), wake.as_raw_fd());
    }

    /// Runs `f` on a thread of its own and gives its result, or fails the test after 10 s
    /// (a wait that slept through its signal would otherwise hang the suite).
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()).unwrap());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the wait slept through its signal")
    }

    #[test]
    fn a_signal_between_the_flag_check_and_the_wait_ends_the_wait() {
        // SIGWINCH: ignored by default, so a stray one harms no other test.
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(libc::SIGWINCH, flag.clone()).unwrap();
        let f = flag.clone();
        let (checked, empty) = within_10s(move || {
            let ep = Epoll::new().unwrap();
            let mut events = Events::with_capacity(4);
            let mut checked = false;
            // The signal comes after the look at the flag (it is blocked then, so it waits
            // for the wait): with no timeout, only the wait's own unblocking can end it.
            ep.wait_for_signals(&mut events, None, &[libc::SIGWINCH], || {
                checked = !f.load(SeqCst);
                // SAFETY: pthread_kill of the calling thread with a valid signal number.
                unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGWINCH) };
                false
            })
            .unwrap();
            (checked, events.is_empty())
        });
        assert!(checked, "the flag was set before the look");
        assert!(empty, "no events");
        assert!(flag.load(SeqCst), "the handler ran");
    }

    #[test]
    fn a_flag_already_set_returns_at_once_and_the_mask_is_restored() {
        let (empty, blocked) = within_10s(|| {
            let ep = Epoll::new().unwrap();
            let mut events = Events::with_capacity(4);
            ep.wait_for_signals(&mut events, None, &[libc::SIGWINCH], || true)
                .unwrap();
            (
                events.is_empty(),
                crate::signal::tests::blocked(libc::SIGWINCH),
            )
        });
        assert!(empty);
        assert!(!blocked, "SIGWINCH left blocked after the wait");
    }

    #[test]
    fn a_ready_descriptor_ends_a_wait_for_signals_with_no_timeout() {
        let tokens = within_10s(|| {
            let ep = Epoll::new().unwrap();
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            ep.add(a.as_raw_fd(), EPOLLIN, 42).unwrap();
            (&b).write_all(b"x").unwrap();
            let mut events = Events::with_capacity(4);
            ep.wait_for_signals(&mut events, None, &[libc::SIGWINCH], || false)
                .unwrap();
            tokens(&events)
        });
        assert_eq!(tokens, [42]);
    }
}
