//! [`Interrupt`]: a one-way "stop waiting" for blocked accepts, such as a server's shutdown
//! telling its accept loops to return, without a timeout to poll a flag and without touching
//! the listening socket (which another process may be sharing, as in an upgrade).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, MutexGuard, OnceLock};

use crate::sync::lock::Lock;
use crate::task::Task;
use weft_sys::epoll::EventFd;

/// Fired once, it stays fired (until [`Interrupt::rearm`]): every [`crate::net::TcpListener::accept_interruptible`] given
/// it then fails with `ErrorKind::Interrupted` (once no connection is waiting). A fiber blocked
/// in such an accept is woken by [`Interrupt::fire`] from any thread; a plain thread blocked
/// there is woken through the interrupt's eventfd ([`Interrupt::eventfd`], made the first
/// time a thread needs it, so an interrupt only fibers wait on costs no descriptor), which
/// turns readable when it fires and stays so, for a caller's own `poll` loops too.
///
/// ```
/// use std::sync::Arc;
/// use weft_fiber::{net::TcpListener, sync::Interrupt, Runtime};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let stop = Arc::new(Interrupt::new());
/// let listener = TcpListener::bind("127.0.0.1:0").unwrap();
/// let s = stop.clone();
/// let acceptor = rt.spawn(move || loop {
///     match listener.accept_interruptible(&s) {
///         Ok((_conn, _peer)) => {} // serve it
///         Err(e) => return e.kind(),
///     }
/// });
/// stop.fire();
/// assert_eq!(acceptor.join().unwrap(), std::io::ErrorKind::Interrupted);
/// ```
#[derive(Debug, Default)]
pub struct Interrupt {
    fired: AtomicBool,
    /// Readable once fired (written, never read); made on first use.
    efd: OnceLock<EventFd>,
    /// The fibers blocked in an interruptible wait on this interrupt.
    fibers: Lock<Vec<Arc<Task>>>,
}

impl Interrupt {
    /// An interrupt not yet fired.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Fires the interrupt: wakes every fiber and thread blocked in a wait with it; waits that
    /// begin later fail at once. Callable from any thread, any number of times.
    pub fn fire(&self) {
        // Set before the list is taken: a fiber queueing itself after this sees the flag
        // under the same lock (see `enter`).
        self.fired.store(true, SeqCst);
        // Either this sees the eventfd, or `eventfd` (which made it) sees the flag: both
        // sides store, fence, then load.
        fence(SeqCst);
        if let Some(fd) = self.efd.get() {
            fd.notify();
        }
        let fibers = std::mem::take(&mut *self.lock());
        for t in fibers {
            t.unpark_owned();
        }
    }

    /// Un-fires the interrupt, for one used as a repeated wake-up (a connection told each
    /// time a job of its own is done): waits that begin after this block again until the
    /// next [`Interrupt::fire`]. A `fire` racing with this is not lost as long as the waiter
    /// re-arms *before* it looks for what the firing side published: either the flag stays
    /// set, or the look sees the work.
    pub fn rearm(&self) {
        self.fired.store(false, SeqCst);
        fence(SeqCst);
        if let Some(fd) = self.efd.get() {
            fd.drain();
            // A `fire` between the store and the drain had its wake-up consumed: put it back.
            fence(SeqCst);
            if self.is_fired() {
                fd.notify();
            }
        }
    }

    /// True once [`Interrupt::fire`] has been called (and not re-armed since).
    pub fn is_fired(&self) -> bool {
        self.fired.load(SeqCst)
    }

    /// The eventfd that turns readable when the interrupt fires (at once if it has), for a
    /// thread to `poll` beside what it waits for. Made on the first call; fails only then,
    /// when no descriptor is left.
    pub fn eventfd(&self) -> io::Result<BorrowedFd<'_>> {
        let fd = match self.efd.get() {
            Some(fd) => fd,
            None => {
                let made = EventFd::new()?;
                // Another thread may have made one meanwhile: `made` then closes here.
                let fd = self.efd.get_or_init(|| made);
                fence(SeqCst);
                if self.is_fired() {
                    fd.notify();
                }
                fd
            }
        };
        Ok(fd.as_fd())
    }

    /// Queues the calling fiber `me` for [`Interrupt::fire`] to wake, until the returned
    /// guard drops (the wait ended, however: an edge, a deadline, the interrupt, or the fiber
    /// unwound by a runtime's teardown); `None` (nothing queued) when it has fired already.
    /// Either `fire` takes the list after this push (and wakes `me`, whose next park then
    /// returns at once), or its flag store came before this lock and the load below sees it.
    pub(crate) fn enter<'a>(&'a self, me: &'a Arc<Task>) -> Option<Queued<'a>> {
        let mut fibers = self.lock();
        if self.is_fired() {
            return None;
        }
        fibers.push(me.clone());
        Some(Queued { int: self, me })
    }

    /// How many fibers are queued (for tests: a wait that ended leaves nothing behind).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Task>>> {
        self.fibers.lock()
    }
}

/// A fiber queued on an [`Interrupt`] ([`Interrupt::enter`]); dropping it takes the fiber
/// off the list again.
pub(crate) struct Queued<'a> {
    int: &'a Interrupt,
    me: &'a Arc<Task>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.int.lock().retain(|t| !Arc::ptr_eq(t, self.me));
    }
}

/// The error of a wait its [`Interrupt`] ended.
pub(crate) fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::TcpListener;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn a_wait_leaves_no_fiber_queued_however_it_ends() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let int = Arc::new(Interrupt::new());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let i = int.clone();
        let acceptor = rt.spawn(move || {
            // Ended by a connection: the fiber was queued while it waited, and is not now.
            let first = l.accept_interruptible(&i).map(|_| ());
            let after_accept = i.queued();
            // Ended by the interrupt.
            let second = l.accept_interruptible(&i).map(|_| ()).map_err(|e| e.kind());
            (first.is_ok(), after_accept, second, i.queued())
        });
        // Let the acceptor block, then check it is queued while it does.
        while int.queued() == 0 {
            pause();
        }
        let _client = std::net::TcpStream::connect(addr).unwrap();
        while int.queued() == 0 {
            pause();
        }
        int.fire();
        let (first, after_accept, second, after_interrupt) = acceptor.join().unwrap();
        assert!(first);
        assert_eq!(after_accept, 0);
        assert_eq!(second, Err(io::ErrorKind::Interrupted));
        assert_eq!(after_interrupt, 0);
        assert_eq!(int.queued(), 0);
    }

    #[allow(clippy::disallowed_methods)] // the test's own thread, not a worker
    fn pause() {
        std::thread::sleep(Duration::from_millis(1));
    }

    /// Whether `fd` polls readable right now.
    fn readable(fd: BorrowedFd<'_>) -> bool {
        weft_sys::poll::poll_fd(fd.as_raw_fd(), weft_sys::poll::POLLIN, Some(Duration::ZERO))
            .unwrap()
    }

    #[test]
    fn the_eventfd_turns_readable_when_fired_whether_made_before_or_after() {
        let before = Interrupt::new();
        let fd = before.eventfd().unwrap().as_raw_fd();
        assert!(!readable(before.eventfd().unwrap()));
        assert_eq!(before.eventfd().unwrap().as_raw_fd(), fd, "made once");
        before.fire();
        assert!(readable(before.eventfd().unwrap()));

        let after = Interrupt::new();
        after.fire();
        assert!(readable(after.eventfd().unwrap()));
    }

    #[test]
    fn a_rearmed_interrupt_is_quiet_until_fired_again() {
        let int = Interrupt::new();
        let fd = int.eventfd().unwrap().as_raw_fd();
        int.fire();
        int.rearm();
        assert!(!int.is_fired());
        assert!(!readable(int.eventfd().unwrap()));
        int.fire();
        assert!(int.is_fired());
        assert!(readable(int.eventfd().unwrap()));
        assert_eq!(int.eventfd().unwrap().as_raw_fd(), fd);
    }

    /// `read_or` in a fiber and on a plain thread: a wait ends when bytes come or when the
    /// interrupt fires (and only then), and works again after `rearm`.
    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn read_or_ends_at_bytes_or_at_the_interrupt_in_a_fiber_and_on_a_thread() {
        use crate::net::TcpStream;
        use std::io::Write as _;
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        for in_fiber in [true, false] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let server = TcpStream::from_std(l.accept().unwrap().0).unwrap();
            let int = Arc::new(Interrupt::new());
            let i = int.clone();
            // The reader says when it has finished each step.
            let (step, steps) = std::sync::mpsc::channel();
            let body = move || {
                let mut buf = [0u8; 8];
                let far = Some(std::time::Instant::now() + Duration::from_secs(20));
                // Nothing to read: the interrupt ends the wait.
                let first = server.read_or(&mut buf, far, &i).map_err(|e| e.kind());
                i.rearm();
                step.send(()).unwrap();
                // Re-armed: only the client's bytes end it.
                let second = server.read_or(&mut buf, far, &i).map(|n| buf[..n].to_vec());
                step.send(()).unwrap();
                // Fired again while nothing is there.
                let third = server.read_or(&mut buf, far, &i).map_err(|e| e.kind());
                // Re-armed, with nothing and no interrupt: the deadline.
                i.rearm();
                let soon = Some(std::time::Instant::now() + Duration::from_millis(20));
                let fourth = server.read_or(&mut buf, soon, &i).map_err(|e| e.kind());
                (first, second.unwrap(), third, fourth)
            };
            let (tx, rx) = std::sync::mpsc::channel();
            if in_fiber {
                rt.spawn(move || tx.send(body()).unwrap());
            } else {
                std::thread::spawn(move || tx.send(body()).unwrap());
            }
            pause();
            int.fire();
            steps.recv().unwrap();
            assert!(!int.is_fired());
            client.write_all(b"ab").unwrap();
            steps.recv().unwrap();
            pause();
            int.fire();
            let (first, second, third, fourth) = rx.recv().unwrap();
            assert_eq!(first, Err(io::ErrorKind::Interrupted), "fiber: {in_fiber}");
            assert_eq!(second, b"ab");
            assert_eq!(third, Err(io::ErrorKind::Interrupted));
            assert_eq!(fourth, Err(io::ErrorKind::TimedOut));
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll and fibers: not supported by miri
    fn a_fiber_unwound_by_a_runtime_teardown_leaves_the_list() {
        let int = Arc::new(Interrupt::new());
        {
            let rt = crate::Runtime::builder().workers(1).build().unwrap();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let i = int.clone();
            let _acceptor = rt.spawn(move || l.accept_interruptible(&i).map(|_| ()));
            while int.queued() == 0 {
                pause();
            }
            // The runtime drops here, with the acceptor still blocked: its teardown unwinds it.
        }
        assert_eq!(int.queued(), 0, "an unwound fiber left on the list");
    }
}
