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

/// Fired once, it stays fired: every [`crate::net::TcpListener::accept_interruptible`] given
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

    /// True once [`Interrupt::fire`] has been called.
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
