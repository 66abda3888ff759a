//! Descriptors: `read`, `write` and `writev`, pipes, in-memory files, the `O_NONBLOCK` and `FD_CLOEXEC`
//! flags, whether a number is open, and closing one a forked child inherited.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{cvt, cvt_size};

/// `read(2)` into `buf`.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into the slice we borrow mutably.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `write(2)` from `buf`.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from the slice we borrow.
    cvt_size(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })
}

/// `writev(2)` of `bufs` (at most `IOV_MAX` of them: see
/// [`socket::iov_len`](crate::socket::iov_len)).
pub fn writev(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let n = bufs.len().min(1024) as libc::c_int; // IOV_MAX on Linux
                                                 // SAFETY: `IoSlice` is guaranteed ABI-compatible with `struct iovec` on Unix; the kernel
                                                 // only reads the `n` entries and the bytes they point to, all borrowed for the call.
    cvt_size(unsafe { libc::writev(fd, bufs.as_ptr().cast(), n) })
}

fn pipe2(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the two-element array we own.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just made by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe whose both ends are close-on-exec (and blocking): `(read end, write end)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    pipe2(0)
}

/// A pipe whose both ends are non-blocking and close-on-exec: `(read end, write end)`.
pub fn pipe_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    pipe2(libc::O_NONBLOCK)
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: &impl AsRawFd, on: bool) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL take and return plain integers.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new != flags {
        // SAFETY: as above.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, new) })?;
    }
    Ok(())
}

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

/// Closes a descriptor this process inherited and will never use (a forked child closing the
/// listening sockets it copied). The owning object is never dropped in this process, so the
/// number is not closed twice.
pub fn close_inherited(fd: RawFd) {
    // SAFETY: close takes no pointers; see the function's contract for double closes.
    let _ = unsafe { libc::close(fd) };
}

/// An anonymous in-memory file (`memfd_create`, close-on-exec) named `name` (shown in
/// `/proc/PID/fd`): bytes written to it can be sent with `sendfile(2)` by whoever holds a copy.
pub fn memfd(name: &str) -> io::Result<std::fs::File> {
    let name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memfd name with a NUL"))?;
    // SAFETY: `name` is a live NUL-terminated string; memfd_create copies it.
    let fd = cvt(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: the descriptor was just made and is owned by nobody else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::IoSlice;

    #[test]
    fn a_memfd_holds_what_is_written_and_is_close_on_exec() {
        use std::io::{Read, Seek, Write};
        let mut f = memfd("test").unwrap();
        f.write_all(b"in memory").unwrap();
        f.rewind().unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "in memory");
        // SAFETY: F_GETFD takes no pointer.
        let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        assert!(memfd("a\0b").is_err());
    }

    #[test]
    fn pipes_read_write_and_writev() {
        let (r, w) = pipe().unwrap();
        assert_eq!(write(w.as_raw_fd(), b"ab").unwrap(), 2);
        let bufs = [IoSlice::new(b"cd"), IoSlice::new(b"e")];
        assert_eq!(writev(w.as_raw_fd(), &bufs).unwrap(), 3);
        let mut buf = [0u8; 8];
        assert_eq!(read(r.as_raw_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"abcde");
        drop(w);
        assert_eq!(read(r.as_raw_fd(), &mut buf).unwrap(), 0, "end of stream");
        assert_eq!(
            read(-1, &mut buf).unwrap_err().raw_os_error(),
            Some(libc::EBADF)
        );
        assert!(write(-1, b"x").is_err());
        assert!(writev(-1, &bufs).is_err());
    }

    fn flags(fd: RawFd) -> (bool, bool) {
        // SAFETY: F_GETFL/F_GETFD take and return plain integers.
        let (fl, fdf) = unsafe {
            (
                libc::fcntl(fd, libc::F_GETFL),
                libc::fcntl(fd, libc::F_GETFD),
            )
        };
        (fl & libc::O_NONBLOCK != 0, fdf & libc::FD_CLOEXEC != 0)
    }

    #[test]
    fn pipe_flags_and_set_nonblocking() {
        let (r, w) = pipe().unwrap();
        assert_eq!(flags(r.as_raw_fd()), (false, true));
        assert_eq!(flags(w.as_raw_fd()), (false, true));
        let (r2, w2) = pipe_nonblocking().unwrap();
        assert_eq!(flags(r2.as_raw_fd()), (true, true));
        assert_eq!(flags(w2.as_raw_fd()), (true, true));
        let mut buf = [0u8; 1];
        let e = read(r2.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        set_nonblocking(&r, true).unwrap();
        assert_eq!(flags(r.as_raw_fd()), (true, true));
        set_nonblocking(&r, true).unwrap(); // no change: no second fcntl
        set_nonblocking(&r, false).unwrap();
        assert_eq!(flags(r.as_raw_fd()), (false, true));
        assert!(set_nonblocking(&-1, true).is_err());
    }

    #[test]
    fn open_descriptors_cloexec_and_closing_an_inherited_one() {
        let (r, w) = pipe_nonblocking().unwrap();
        // An inheritable copy, as a forked child finds its parent's descriptors.
        // SAFETY: dup takes a descriptor number and returns a new one (checked).
        let copy = cvt(unsafe { libc::dup(w.as_raw_fd()) }).unwrap();
        assert!(fd_is_open(copy));
        assert!(!flags(copy).1);
        set_cloexec(copy).unwrap();
        assert!(flags(copy).1);
        // Closed by number: with the owned write end gone too, the read end sees end of
        // stream (another test's thread may reuse the number at once, so it is not probed).
        drop(w);
        close_inherited(copy);
        let mut buf = [0u8; 1];
        assert_eq!(read(r.as_raw_fd(), &mut buf).unwrap(), 0);
        assert!(fd_is_open(r.as_raw_fd()));
        assert!(!fd_is_open(-1));
        assert!(set_cloexec(-1).is_err());
    }
}
