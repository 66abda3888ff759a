//! Every raw system call weft makes outside the standard library, each behind a safe wrapper.
//! One place to audit: each `unsafe` block states why its pointers and descriptors are valid.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

// One `cvt` and one `sendfile` for both crates: the fiber runtime's syscall layer.
use weft_fiber::sys::cvt;

/// True if `fd` is an open descriptor of this process (`fcntl(F_GETFD)`).
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD takes no pointer; on a closed number it fails with EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Sets `FD_CLOEXEC` on `fd`, so that no program this process starts inherits it.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD takes no pointer; an invalid `fd` fails with EBADF.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

/// `sendfile(2)`: copies up to `count` bytes of `file` starting at `*offset` to `out` inside the
/// kernel, advancing `*offset`. Returns the bytes sent (0 at end of file).
pub fn sendfile(out: RawFd, file: &File, offset: &mut u64, count: usize) -> io::Result<usize> {
    weft_fiber::sys::sendfile(out, file.as_raw_fd(), offset, count)
}

/// `send(2)` that never blocks (`MSG_DONTWAIT`, whatever the socket's mode), with `flags`
/// added: `MSG_MORE` tells the kernel more data follows at once (the body after a head), so
/// head and first body bytes leave in one segment. `MSG_NOSIGNAL`: a closed peer is an
/// error, not SIGPIPE.
pub fn send_nowait(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes; `fd` is borrowed from a live
    // socket by the caller.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            flags | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `sendmsg(2)` of `bufs`, never blocking, as [`send_nowait`].
pub fn sendmsg_nowait(fd: RawFd, bufs: &[std::io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain old data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with iovec on Unix; sendmsg only reads them.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
    // SAFETY: `msg` points at `bufs`, valid for the call; `fd` is borrowed from a live socket.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `shutdown(2)` with `how` = `libc::SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`. Used to wake a
/// thread blocked reading an idle connection during graceful shutdown.
pub fn shutdown(fd: RawFd, how: libc::c_int) -> io::Result<()> {
    // SAFETY: shutdown takes no pointers; an fd that was closed meanwhile yields EBADF/ENOTSOCK,
    // which the caller ignores (registry entries are removed before their socket is closed).
    cvt(unsafe { libc::shutdown(fd, how) }).map(drop)
}

/// A `poll`/`epoll_wait` timeout in milliseconds: rounded up (rounded down, a wait for a
/// deadline 1.9 ms away would end early and be repeated with a timeout of 0, spinning until
/// the deadline), saturating at `c_int::MAX` (about 24 days).
pub(crate) fn timeout_ms(timeout: Duration) -> libc::c_int {
    let ms = timeout.as_nanos().div_ceil(1_000_000);
    libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
}

/// Waits until `fd` is readable or `timeout` passes. Returns true if readable.
pub fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    poll_one(fd, libc::POLLIN, timeout)
}

/// Waits until `fd` is writable (or has an error) or `timeout` passes. Returns true if ready.
pub fn poll_writable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    poll_one(fd, libc::POLLOUT, timeout)
}

fn poll_one(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ms = timeout_ms(timeout);
    loop {
        // SAFETY: `pfd` is one valid pollfd, and nfds = 1 matches it.
        match cvt(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Ok(n) => return Ok(n > 0),
            // A signal (SIGTERM for graceful shutdown) must not read as a timeout; the wait
            // restarts with the full timeout, which can only lengthen it.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// An epoll(7) instance. Interest is registered per descriptor with a caller-chosen 64-bit
/// token that comes back with each event.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// One readiness event: the token registered with the descriptor and the ready `EPOLL*` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpollEvent {
    pub token: u64,
    pub events: u32,
}

impl Epoll {
    /// A new, close-on-exec epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Starts watching `fd` for `events` (`EPOLLIN | EPOLLONESHOT`, ...), reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes what `fd` is watched for (and re-arms a one-shot registration).
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call; `self.fd` is a
        // live epoll descriptor; `fd` is borrowed from a live socket by the caller (a closed
        // one fails with EBADF).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Waits up to `timeout` for events and replaces the contents of `out` with them (at most
    /// `max`). A signal ends the wait early with no events.
    pub fn wait(&self, out: &mut Vec<EpollEvent>, max: usize, timeout: Duration) -> io::Result<()> {
        let mut raw = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let max = max.clamp(1, raw.len());
        let ms = timeout_ms(timeout);
        out.clear();
        // SAFETY: `raw` has room for `max` events (max <= raw.len()), and the kernel writes at
        // most that many; `self.fd` is a live epoll descriptor.
        let r = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                raw.as_mut_ptr(),
                max as libc::c_int,
                ms,
            )
        };
        match cvt(r) {
            Ok(n) => {
                out.extend(raw[..n as usize].iter().map(|e| EpollEvent {
                    token: e.u64,
                    events: e.events,
                }));
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// An eventfd(2) used to wake a thread blocked in [`Epoll::wait`].
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor that
        // nothing else owns.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// The descriptor, to register with an [`Epoll`].
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the eventfd readable (a wake-up).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, a valid u64, to a live eventfd. A full counter
        // (EAGAIN) already means "readable", so the result is ignored.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Consumes pending wake-ups.
    pub fn drain(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into `n`, a valid, exclusively borrowed u64; an empty
        // eventfd (EAGAIN) is not an error here.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
    }
}

/// Connections waiting in the accept queue of the listening socket `fd` (Linux reports it as
/// `tcpi_unacked` of `TCP_INFO` for a socket in the LISTEN state).
pub fn accept_backlog(fd: RawFd) -> io::Result<u32> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a valid, exclusively borrowed tcp_info and `len` its size; the kernel
    // writes at most `len` bytes. `fd` is borrowed from a live socket by the caller.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    })?;
    Ok(info.tcpi_unacked)
}

/// `struct open_how` of openat2(2) (libc's is non-exhaustive); the kernel reads exactly the
/// size passed, and these three u64 fields are the whole version-0 struct.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// How [`open_beneath`] resolves a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// The kernel refuses any resolution that leaves `dir` (`..`, absolute symlinks, symlinks
    /// pointing outside): `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    Beneath,
    /// Plain `openat`: symlinks may point anywhere.
    Follow,
}

/// Opens `rel` (relative, already normalised) under the directory `dir`, read-only,
/// non-blocking (a FIFO must not hang the opener), close-on-exec.
pub fn open_beneath(dir: &File, rel: &[u8], resolve: Resolve) -> io::Result<File> {
    let path = CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    let fd = match resolve {
        Resolve::Beneath => {
            let how = OpenHow {
                flags: flags as u64,
                mode: 0,
                resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
            };
            // SAFETY: `path` is a NUL-terminated string alive for the call; `how` is a valid
            // open_how and its exact size is passed; `dir` is a live directory descriptor.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dir.as_raw_fd(),
                    path.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            r as RawFd
        }
        Resolve::Follow => {
            // SAFETY: as above: a valid C string and a live directory descriptor.
            cvt(unsafe { libc::openat(dir.as_raw_fd(), path.as_ptr(), flags) })?
        }
    };
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit read from the kernel with only the soft limit raised.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// A user's ids and name from the password database (`getpwnam_r`: files, LDAP, whatever NSS
/// is configured with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// Looks up user `name`; `Ok(None)` if there is none.
pub fn lookup_user(name: &str) -> io::Result<Option<UserIds>> {
    let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: an all-zero passwd (null pointers, zero ids) is a valid value to be filled.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `cname` is a NUL-terminated string; `pw`, `buf` (of `buf.len()` bytes) and
        // `out` are valid for writes for the whole call; the strings `pw` points to live in
        // `buf`, which outlives their use below.
        let r = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pw,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut out,
            )
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        if out.is_null() {
            return Ok(None);
        }
        return Ok(Some(UserIds {
            name: name.to_string(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        }));
    }
}

/// Looks up group `name`'s id; `Ok(None)` if there is none.
pub fn lookup_group(name: &str) -> io::Result<Option<libc::gid_t>> {
    let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: an all-zero group (null pointers, zero id) is a valid value to be filled.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in `lookup_user`: every pointer is valid for the call's duration.
        let r = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut gr,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut out,
            )
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        return Ok((!out.is_null()).then_some(gr.gr_gid));
    }
}

/// The real and effective user ids and the real and effective group ids.
pub fn ids() -> (libc::uid_t, libc::uid_t, libc::gid_t, libc::gid_t) {
    // SAFETY: these four calls take no arguments and cannot fail.
    unsafe {
        (
            libc::getuid(),
            libc::geteuid(),
            libc::getgid(),
            libc::getegid(),
        )
    }
}

/// Becomes `user` with group `gid` for good: the supplementary groups from the group database
/// (`initgroups`, as nginx), then `setgid` and `setuid` (real, effective and saved ids, so
/// nothing can be regained), in that order since after `setuid` the others are refused.
/// glibc applies each call to every thread of the process.
pub fn become_user(user: &UserIds, gid: libc::gid_t) -> io::Result<()> {
    let cname = CString::new(user.name.as_str())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `cname` is NUL-terminated; initgroups reads the group database and sets this
    // process's supplementary groups; it takes no other pointer.
    cvt(unsafe { libc::initgroups(cname.as_ptr(), gid) })?;
    // SAFETY: setgid and setuid take plain ids.
    cvt(unsafe { libc::setgid(gid) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::setuid(user.uid) })?;
    Ok(())
}

/// True if the process can make itself root again (`setuid(0)` succeeds): after
/// [`become_user`] to anyone else, it must not. Only called to verify a drop; if it does
/// succeed, the caller stops the process.
pub fn can_regain_root() -> bool {
    // SAFETY: setuid takes a plain id; as a non-root process without CAP_SETUID it fails and
    // changes nothing.
    unsafe { libc::setuid(0) == 0 }
}

/// Whether this process may search directory `path` (look up names in it: what serving files
/// from it needs), by `access(2)` with `X_OK` as the real user (after [`become_user`], the
/// served one).
pub fn searchable(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access reads it only.
    cvt(unsafe { libc::access(c.as_ptr(), libc::X_OK) }).map(drop)
}

/// The supplementary groups of this process.
pub fn groups() -> io::Result<Vec<libc::gid_t>> {
    // SAFETY: with size 0 getgroups only returns the count and writes nothing.
    let n = cvt(unsafe { libc::getgroups(0, std::ptr::null_mut()) })?;
    let mut out = vec![0 as libc::gid_t; n as usize];
    // SAFETY: `out` has room for `n` gids.
    let n = cvt(unsafe { libc::getgroups(n, out.as_mut_ptr()) })?;
    out.truncate(n as usize);
    Ok(out)
}

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`: the time of the kernel's last tick, read without
/// the TSC (cheaper than `Instant::now` on a VM; the response cache reads it per request).
pub fn coarse_monotonic_ms() -> u64 {
    coarse_ms(libc::CLOCK_MONOTONIC_COARSE, false)
}

/// The resolution of [`coarse_monotonic_ms`] in whole milliseconds, rounded up (one tick).
pub fn coarse_monotonic_resolution_ms() -> u64 {
    coarse_ms(libc::CLOCK_MONOTONIC_COARSE, true).max(1)
}

fn coarse_ms(clock: libc::clockid_t, resolution: bool) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both calls write one timespec into the one we lend them.
    let ret = unsafe {
        if resolution {
            libc::clock_getres(clock, &mut ts)
        } else {
            libc::clock_gettime(clock, &mut ts)
        }
    };
    if ret != 0 {
        // Not available (never on Linux since 2.6.32): a 10 ms tick is a safe over-estimate.
        return if resolution { 10 } else { 0 };
    }
    let ms = u64::try_from(ts.tv_sec).unwrap_or(0) * 1000;
    ms + u64::try_from(ts.tv_nsec).unwrap_or(0).div_ceil(1_000_000)
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of CPU times in `/proc`.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(100)
}

/// Bytes per memory page (`sysconf(_SC_PAGESIZE)`), the unit of resident sizes in `/proc`.
pub fn page_size() -> u64 {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_timeout_in_milliseconds_rounds_up_and_saturates() {
        use std::time::Duration;
        assert_eq!(timeout_ms(Duration::ZERO), 0);
        assert_eq!(timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1900)), 2);
        assert_eq!(timeout_ms(Duration::from_millis(100)), 100);
        assert_eq!(timeout_ms(Duration::MAX), libc::c_int::MAX);
    }

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("weft-sys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn open_beneath_refuses_escapes() {
        let d = tmpdir("beneath");
        std::fs::create_dir_all(d.join("root/sub")).unwrap();
        std::fs::write(d.join("root/sub/f.txt"), b"inside").unwrap();
        std::fs::write(d.join("secret.txt"), b"outside").unwrap();
        std::os::unix::fs::symlink(d.join("secret.txt"), d.join("root/out-abs")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", d.join("root/out-rel")).unwrap();
        std::os::unix::fs::symlink("sub/f.txt", d.join("root/in-rel")).unwrap();
        let root = File::open(d.join("root")).unwrap();
        let mut s = String::new();
        open_beneath(&root, b"sub/f.txt", Resolve::Beneath)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "inside");
        assert!(open_beneath(&root, b"in-rel", Resolve::Beneath).is_ok());
        for bad in [
            &b"../secret.txt"[..],
            b"out-abs",
            b"out-rel",
            b"sub/../../secret.txt",
        ] {
            assert!(
                open_beneath(&root, bad, Resolve::Beneath).is_err(),
                "{:?}",
                bad
            );
        }
        assert!(open_beneath(&root, b"out-rel", Resolve::Follow).is_ok());
        assert!(open_beneath(&root, b"a\0b", Resolve::Follow).is_err());
    }

    #[test]
    fn sendfile_and_send_nowait_over_a_socket_pair() {
        let d = tmpdir("sendfile");
        std::fs::write(d.join("f"), b"0123456789").unwrap();
        let f = File::open(d.join("f")).unwrap();
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut off = 3;
        assert_eq!(sendfile(b.as_raw_fd(), &f, &mut off, 4).unwrap(), 4);
        assert_eq!(off, 7);
        assert_eq!(send_nowait(b.as_raw_fd(), b"!", libc::MSG_MORE).unwrap(), 1);
        shutdown(b.as_raw_fd(), libc::SHUT_WR).unwrap();
        let mut got = Vec::new();
        a.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"3456!");
        assert!(poll_readable(a.as_raw_fd(), Duration::from_millis(10)).unwrap());
        a.write_all(b"x").unwrap();
    }

    #[test]
    fn epoll_reports_a_readable_socket_once_per_arming() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let ep = Epoll::new().unwrap();
        let flags = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
        ep.add(b.as_raw_fd(), flags, 7).unwrap();
        let mut ev = Vec::new();
        ep.wait(&mut ev, 8, Duration::from_millis(0)).unwrap();
        assert!(ev.is_empty());
        a.write_all(b"x").unwrap();
        ep.wait(&mut ev, 8, Duration::from_secs(1)).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].token, 7);
        // One-shot: still readable, but not reported until re-armed.
        ep.wait(&mut ev, 8, Duration::from_millis(0)).unwrap();
        assert!(ev.is_empty());
        ep.modify(b.as_raw_fd(), flags, 8).unwrap();
        ep.wait(&mut ev, 8, Duration::from_secs(1)).unwrap();
        assert_eq!(ev.iter().map(|e| e.token).collect::<Vec<_>>(), [8]);

        let wake = EventFd::new().unwrap();
        ep.add(wake.raw_fd(), libc::EPOLLIN as u32, 9).unwrap();
        wake.notify();
        ep.wait(&mut ev, 8, Duration::from_secs(1)).unwrap();
        assert_eq!(ev.iter().map(|e| e.token).collect::<Vec<_>>(), [9]);
        wake.drain();
        ep.wait(&mut ev, 8, Duration::from_millis(0)).unwrap();
        assert!(ev.is_empty());
    }

    #[test]
    fn accept_backlog_counts_unaccepted_connections() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(accept_backlog(l.as_raw_fd()).unwrap(), 0);
        let _c1 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // The handshake completes in the kernel; poll until both are queued.
        let mut n = 0;
        for _ in 0..100 {
            n = accept_backlog(l.as_raw_fd()).unwrap();
            if n == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(n, 2);
        let _ = l.accept().unwrap();
        assert_eq!(accept_backlog(l.as_raw_fd()).unwrap(), 1);
    }

    #[test]
    fn nofile_limit_is_readable() {
        assert!(raise_nofile_limit().unwrap() > 0);
    }
}
