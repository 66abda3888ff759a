//! Every raw system call weft makes outside the standard library, each behind a safe wrapper.
//! One place to audit: each `unsafe` block states why its pointers and descriptors are valid.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Duration;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `sendfile(2)`: copies up to `count` bytes of `file` starting at `*offset` to `out` inside the
/// kernel, advancing `*offset`. Returns the bytes sent (0 at end of file).
pub fn sendfile(out: RawFd, file: &File, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut off =
        libc::off_t::try_from(*offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `out` is a descriptor the caller owns for the duration of the call (a borrowed
    // socket), `file` is a live `File`, and `off` is a valid, exclusively borrowed off_t.
    let n = unsafe { libc::sendfile(out, file.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// `send(2)` with `MSG_MORE`: tells the kernel more data follows (the body after a head), so
/// head and first body bytes leave in one segment. `MSG_NOSIGNAL`: a closed peer is an error,
/// not SIGPIPE.
pub fn send_more(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice of `buf.len()` bytes; `fd` is borrowed from a live
    // socket by the caller.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_MORE | libc::MSG_NOSIGNAL,
        )
    };
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
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

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
    fn sendfile_and_send_more_over_a_socket_pair() {
        let d = tmpdir("sendfile");
        std::fs::write(d.join("f"), b"0123456789").unwrap();
        let f = File::open(d.join("f")).unwrap();
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut off = 3;
        assert_eq!(sendfile(b.as_raw_fd(), &f, &mut off, 4).unwrap(), 4);
        assert_eq!(off, 7);
        assert_eq!(send_more(b.as_raw_fd(), b"!").unwrap(), 1);
        shutdown(b.as_raw_fd(), libc::SHUT_WR).unwrap();
        let mut got = Vec::new();
        a.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"3456!");
        assert!(poll_readable(a.as_raw_fd(), Duration::from_millis(10)).unwrap());
        a.write_all(b"x").unwrap();
    }

    #[test]
    fn nofile_limit_is_readable() {
        assert!(raise_nofile_limit().unwrap() > 0);
    }
}
