//! Fiber-aware Unix pipes and child-process stdio (for CGI): [`pipe`], [`PipeReader`],
//! [`PipeWriter`], with `From` conversions from `std::process::{ChildStdin, ChildStdout,
//! ChildStderr}`.
//!
//! As with sockets, an operation that would block parks the fiber (or blocks a plain thread in
//! `poll(2)`), bounded by an optional timeout (`ErrorKind::TimedOut`).
//!
//! ```
//! use std::io::{Read, Write};
//! use std::process::{Command, Stdio};
//! let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
//! let out = rt.block_on(|| {
//!     let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped())
//!         .spawn().unwrap();
//!     let mut stdin = weft_fiber::io::PipeWriter::try_from(child.stdin.take().unwrap()).unwrap();
//!     let mut stdout = weft_fiber::io::PipeReader::try_from(child.stdout.take().unwrap()).unwrap();
//!     stdin.write_all(b"hello").unwrap();
//!     drop(stdin);
//!     let mut s = String::new();
//!     stdout.read_to_string(&mut s).unwrap();
//!     weft_fiber::spawn_blocking(move || child.wait()).unwrap();
//!     s
//! });
//! assert_eq!(out, "hello");
//! ```

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::OwnedFd;
use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use crate::reactor::{short_read, short_write, Source};
use crate::readiness::{Deadline, Dir};
use weft_sys::fd;
use weft_sys::socket::iov_len;

/// A new pipe, both ends non-blocking and close-on-exec: `(reader, writer)`.
pub fn pipe() -> io::Result<(PipeReader, PipeWriter)> {
    let (r, w) = fd::pipe_nonblocking()?;
    Ok((
        PipeReader {
            src: Source::from_nonblocking(r),
        },
        PipeWriter {
            src: Source::from_nonblocking(w),
        },
    ))
}

/// The reading end of a pipe.
#[derive(Debug)]
pub struct PipeReader {
    src: Source,
}

/// The writing end of a pipe.
#[derive(Debug)]
pub struct PipeWriter {
    src: Source,
}

impl PipeReader {
    /// Takes over a pipe's read end (switching it to non-blocking mode).
    pub fn from_fd(fd: OwnedFd) -> io::Result<PipeReader> {
        Ok(PipeReader {
            src: Source::new(fd)?,
        })
    }

    /// Bounds each read (`None`: wait forever).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Read, t)
    }

    /// Reads into `buf`, failing with `TimedOut` at `deadline`.
    pub fn read_deadline(&self, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io_until(Dir::Read, Deadline::At(deadline), short_read(want), |fd| {
                fd::read(fd, buf)
            })
    }

    /// Gives the fd back (still non-blocking).
    pub fn into_fd(self) -> OwnedFd {
        self.src.into_fd()
    }
}

impl PipeWriter {
    /// Takes over a pipe's write end (switching it to non-blocking mode).
    pub fn from_fd(fd: OwnedFd) -> io::Result<PipeWriter> {
        Ok(PipeWriter {
            src: Source::new(fd)?,
        })
    }

    /// Bounds each write (`None`: wait forever).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.src.set_timeout(Dir::Write, t)
    }

    /// Writes from `buf`, failing with `TimedOut` at `deadline`.
    pub fn write_deadline(&self, buf: &[u8], deadline: Instant) -> io::Result<usize> {
        self.src.io_until(
            Dir::Write,
            Deadline::At(deadline),
            short_write(buf.len()),
            |fd| fd::write(fd, buf),
        )
    }

    /// Gives the fd back (still non-blocking).
    pub fn into_fd(self) -> OwnedFd {
        self.src.into_fd()
    }
}

impl Read for &PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        self.src
            .io(Dir::Read, short_read(want), |fd| fd::read(fd, buf))
    }
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for &PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.src
            .io(Dir::Write, short_write(buf.len()), |fd| fd::write(fd, buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let want = iov_len(bufs);
        self.src
            .io(Dir::Write, short_write(want), |fd| fd::writev(fd, bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TryFrom<ChildStdin> for PipeWriter {
    type Error = io::Error;
    fn try_from(c: ChildStdin) -> io::Result<PipeWriter> {
        PipeWriter::from_fd(OwnedFd::from(c))
    }
}

impl TryFrom<ChildStdout> for PipeReader {
    type Error = io::Error;
    fn try_from(c: ChildStdout) -> io::Result<PipeReader> {
        PipeReader::from_fd(OwnedFd::from(c))
    }
}

impl TryFrom<ChildStderr> for PipeReader {
    type Error = io::Error;
    fn try_from(c: ChildStderr) -> io::Result<PipeReader> {
        PipeReader::from_fd(OwnedFd::from(c))
    }
}

fd_traits!(PipeReader);
fd_traits!(PipeWriter);
