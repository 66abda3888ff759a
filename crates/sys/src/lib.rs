//! weft's system-call layer: every raw system call of the workspace's crates (the fiber
//! runtime, the server, the load generator) behind a safe wrapper, on Linux.
//!
//! The other crates make no raw call and hold no `unsafe` block about one: they call these
//! functions, which check return values and turn `errno` into `io::Error`. Each `unsafe`
//! block here says why the call is sound (`// SAFETY:`, a workspace lint); the pointers passed
//! are always to live locals or to memory the caller owns or lends for the call. Each wrapper
//! has a test in its module.
//!
//! The few `unsafe fn`s (stack memory, the alternate signal stack, a signal handler's
//! arguments) are unsafe because their soundness depends on what the caller does with memory,
//! which only the caller (the fiber runtime's stack pool and overflow guard) can promise.
//!
//! Modules, by subject:
//! - [`epoll`]: one [`Epoll`](epoll::Epoll) (the fiber workers, the pipeline's poller, the
//!   process model's master) and one [`EventFd`](epoll::EventFd).
//! - [`poll`]: `poll(2)` for one descriptor, one and a wake-up, or many.
//! - [`socket`]: accept, send and receive without SIGPIPE, sendfile, shutdown, the accept
//!   queue's length.
//! - [`fd`]: read, write, pipes, descriptor flags.
//! - [`fs`]: opening a path beneath a directory (`openat2`), search permission.
//! - [`mem`]: memory for fiber stacks and their guard pages.
//! - [`shm`]: typed memory shared across `fork`.
//! - [`signal`]: signal numbers, handlers, the alternate signal stack.
//! - [`process`]: fork, wait, kill, the parent-death signal, spawning with inherited sockets,
//!   namespaces.
//! - [`user`]: user and group lookups, dropping privileges.
//! - [`resource`]: the open-file limit, CPU time and affinity, resident memory.
//! - [`clock`]: the kernel's coarse monotonic clock.
//! - [`errno`]: the error numbers other crates match on.
//!
//! Linux only. The API is for the workspace's own crates, not a stable one.

#![warn(missing_docs)]

pub mod clock;
pub mod epoll;
pub mod errno;
pub mod fd;
pub mod fs;
pub mod mem;
pub mod poll;
pub mod process;
pub mod resource;
pub mod shm;
pub mod signal;
pub mod socket;
pub mod user;

use std::io;

/// Turns the `-1` a system call returns on failure into the thread's `errno` as an
/// `io::Error`; any other value is the call's result.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// As [`cvt`], for calls that return a byte count (`ssize_t`).
pub(crate) fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A result from `syscall(2)`, which returns a `long` (-1 with `errno` set on failure).
pub(crate) fn cvt_long(ret: libc::c_long) -> io::Result<usize> {
    cvt_size(ret as libc::ssize_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvt_turns_minus_one_into_errno_and_passes_the_rest() {
        assert_eq!(cvt(7).unwrap(), 7);
        assert_eq!(cvt(0).unwrap(), 0);
        // SAFETY: closing an fd number that is not open touches no memory (EBADF).
        let e = cvt(unsafe { libc::close(-1) }).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert_eq!(cvt_size(12).unwrap(), 12);
        // SAFETY: as above.
        let e = cvt_long(unsafe { libc::syscall(libc::SYS_close, -1) }).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
