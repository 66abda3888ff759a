//! The vocabulary of an I/O wait, shared by the reactor, the idle table, the worker and the
//! I/O types: which direction a wait is for ([`Dir`]), when it gives up ([`Deadline`]), and why
//! a connection parked without a fiber is handed back ([`Readiness`]).
//!
//! A leaf: plain types with no knowledge of tasks, workers or sockets, so `net` and the idle
//! table can both name them without naming each other.

use std::io;
use std::time::{Duration, Instant};

/// Readiness direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// When an operation gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Deadline {
    Never,
    After(Duration),
    At(Instant),
}

impl Deadline {
    pub(crate) fn resolve(self) -> Option<Instant> {
        match self {
            Deadline::Never => None,
            Deadline::After(d) => Some(Instant::now() + d),
            Deadline::At(t) => Some(t),
        }
    }
}

/// The error of an operation whose deadline passed first.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "operation timed out")
}

/// Why a callback given to [`crate::net::TcpStream::when_readable`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The socket reported readable: bytes arrived, the peer closed or reset, or the read
    /// side was shut down (`shutdown(SHUT_RD)`). The next read returns the bytes, 0 or the
    /// error — or, rarely, would block again (readiness is a hint, as with any epoll edge),
    /// in which case it parks the fiber as usual.
    Readable,
    /// The timeout passed with nothing to read.
    TimedOut,
}
