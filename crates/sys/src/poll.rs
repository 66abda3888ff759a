//! `poll(2)`: blocking readiness waits for plain threads — one descriptor ([`poll_fd`],
//! [`poll_readable`], [`poll_writable`]), one and a wake-up ([`poll_fd_or`]), or many
//! ([`poll_readable_any`]) — and the millisecond timeout every wait here and in
//! [`epoll`](crate::epoll) passes ([`timeout_ms`]).
//!
//! The waits differ only in what a signal does: [`poll_fd`] and [`poll_fd_or`] report ready
//! (the caller retries its operation, then waits again), [`poll_readable`] and
//! [`poll_writable`] wait again, [`poll_readable_any`] reports nothing ready.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::cvt;

/// Readable.
pub const POLLIN: i16 = libc::POLLIN;
/// Writable.
pub const POLLOUT: i16 = libc::POLLOUT;
/// The peer shut down its side.
pub const POLLRDHUP: i16 = libc::POLLRDHUP;

/// A `poll`/`epoll_wait` timeout in milliseconds: rounded up (rounded down, a wait for a
/// deadline 1.9 ms away would end early and be repeated with a timeout of 0, spinning until
/// the deadline), saturating at `c_int::MAX` (about 24 days).
pub fn timeout_ms(timeout: Duration) -> libc::c_int {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
}

/// `poll(2)` of `pfds` for up to `ms` milliseconds (-1: no limit): the number of entries with
/// events, each entry's `revents` set.
fn poll(pfds: &mut [libc::pollfd], ms: libc::c_int) -> io::Result<usize> {
    // SAFETY: the kernel reads and writes exactly `pfds.len()` pollfds, in the slice we
    // borrow mutably.
    let n = cvt(unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) })?;
    Ok(n as usize)
}

fn pollfd(fd: RawFd, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Blocks the thread until `fd` reports one of `events` (or an error/hangup), or `timeout`
/// passes (`None`: no limit). Returns `Ok(false)` on timeout; a signal reads as ready.
pub fn poll_fd(fd: RawFd, events: i16, timeout: Option<Duration>) -> io::Result<bool> {
    poll_fd_or(fd, events, None, timeout)
}

/// As [`poll_fd`], and also returns `Ok(true)` when `also` turns readable (an eventfd that
/// tells the thread to stop waiting).
pub fn poll_fd_or(
    fd: RawFd,
    events: i16,
    also: Option<RawFd>,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let mut pfds = [pollfd(fd, events), pollfd(also.unwrap_or(-1), POLLIN)];
    let n = if also.is_some() { 2 } else { 1 };
    match poll(&mut pfds[..n], timeout.map_or(-1, timeout_ms)) {
        Ok(ready) => Ok(ready > 0),
        // The caller retries its operation, then waits again.
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
        Err(e) => Err(e),
    }
}

/// Blocks the thread until one of `fds` reports one of its events (or an error/hangup), or
/// `timeout` passes (`None`: no limit). Returns `Ok(false)` on timeout; a signal reads as
/// ready (the caller tries its operations again).
pub fn poll_any(fds: &[(RawFd, i16)], timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds.iter().map(|&(fd, ev)| pollfd(fd, ev)).collect();
    match poll(&mut pfds, timeout.map_or(-1, timeout_ms)) {
        Ok(ready) => Ok(ready > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
        Err(e) => Err(e),
    }
}

/// Waits until `fd` is readable or `timeout` passes. Returns true if readable.
pub fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    poll_one(fd, POLLIN, timeout)
}

/// Waits until `fd` is writable (or has an error) or `timeout` passes. Returns true if ready.
pub fn poll_writable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    poll_one(fd, POLLOUT, timeout)
}

fn poll_one(fd: RawFd, events: i16, timeout: Duration) -> io::Result<bool> {
    let mut pfd = [pollfd(fd, events)];
    let ms = timeout_ms(timeout);
    loop {
        match poll(&mut pfd, ms) {
            Ok(n) => return Ok(n > 0),
            // A signal (SIGTERM for graceful shutdown) must not read as a timeout; the wait
            // restarts with the full timeout, which can only lengthen it.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes; returns the readable ones'
/// indexes. A signal ends the wait early with none (so the caller looks at its flags at once).
pub fn poll_readable_any(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<usize>> {
    let mut pfds: Vec<libc::pollfd> = fds.iter().map(|&fd| pollfd(fd, POLLIN)).collect();
    match poll(&mut pfds, timeout_ms(timeout)) {
        Ok(_) => Ok(pfds
            .iter()
            .enumerate()
            .filter(|(_, p)| p.revents != 0)
            .map(|(i, _)| i)
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn a_timeout_in_milliseconds_rounds_up_and_saturates() {
        assert_eq!(timeout_ms(Duration::ZERO), 0);
        assert_eq!(timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1900)), 2);
        assert_eq!(timeout_ms(Duration::from_millis(100)), 100);
        assert_eq!(timeout_ms(Duration::MAX), libc::c_int::MAX);
    }

    #[test]
    fn poll_fd_waits_for_input_or_the_wake_up() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let fd = b.as_raw_fd();
        assert!(!poll_fd(fd, POLLIN, Some(Duration::ZERO)).unwrap());
        let t0 = Instant::now();
        assert!(!poll_fd(fd, POLLIN | POLLRDHUP, Some(Duration::from_millis(20))).unwrap());
        assert!(
            t0.elapsed() >= Duration::from_millis(19),
            "{:?}",
            t0.elapsed()
        );
        assert!(
            poll_fd(fd, POLLOUT, None).unwrap(),
            "an empty socket is writable"
        );
        a.write_all(b"x").unwrap();
        assert!(poll_fd(fd, POLLIN, None).unwrap());
        // The second descriptor alone ends the wait.
        let wake = crate::epoll::EventFd::new().unwrap();
        let (_c, d) = UnixStream::pair().unwrap();
        let quiet = d.as_raw_fd();
        assert!(!poll_fd_or(quiet, POLLIN, Some(wake.as_raw_fd()), Some(Duration::ZERO)).unwrap());
        wake.notify();
        assert!(poll_fd_or(quiet, POLLIN, Some(wake.as_raw_fd()), None).unwrap());
        // A negative descriptor is skipped: nothing ready.
        assert!(!poll_fd(-1, POLLIN, Some(Duration::ZERO)).unwrap());
    }

    #[test]
    fn poll_readable_and_writable() {
        let (mut a, b) = UnixStream::pair().unwrap();
        assert!(!poll_readable(b.as_raw_fd(), Duration::from_millis(1)).unwrap());
        assert!(poll_writable(b.as_raw_fd(), Duration::from_millis(1)).unwrap());
        a.write_all(b"x").unwrap();
        assert!(poll_readable(b.as_raw_fd(), Duration::from_millis(10)).unwrap());
    }

    #[test]
    fn poll_any_reports_the_ready_one() {
        let (a, b) = UnixStream::pair().unwrap();
        let (c, _d) = UnixStream::pair().unwrap();
        (&b).write_all(b"x").unwrap();
        let ready =
            poll_readable_any(&[c.as_raw_fd(), a.as_raw_fd()], Duration::from_secs(1)).unwrap();
        assert_eq!(ready, vec![1]);
        assert!(
            poll_readable_any(&[c.as_raw_fd()], Duration::from_millis(1))
                .unwrap()
                .is_empty()
        );
        assert!(poll_readable_any(&[], Duration::ZERO).unwrap().is_empty());
    }
}
