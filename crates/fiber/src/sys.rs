//! Every raw system call of the runtime, behind safe wrappers (Linux).
//!
//! The rest of the crate holds no `unsafe` for syscalls: it calls these functions, which check
//! return values and turn `errno` into `io::Error`. Each `unsafe` block says why the call is
//! sound; the pointer arguments are always to live locals or to memory the caller owns.
//!
//! The module is public but hidden from the docs, and only [`cvt`], [`sendfile`] and
//! [`affinity`] are `pub`: weft's server crate (and, for `affinity`, its benchmark tool) needs
//! the same wrappers, and takes them from here so that each exists once. They are for the workspace's own crates, not a stable API.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

/// Turns the `-1` a system call returns on failure into the thread's `errno` as an
/// `io::Error`; any other value is the call's result.
pub fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A byte count from `syscall(2)`, which returns a `long` (-1 with `errno` set on failure).
fn cvt_syscall(ret: libc::c_long) -> io::Result<usize> {
    cvt_size(ret as libc::ssize_t)
}

/// The size of a memory page.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n <= 0 {
        4096
    } else {
        n as usize
    }
}

// ---------------------------------------------------------------------------------------------
// Memory for fiber stacks
// ---------------------------------------------------------------------------------------------

/// `MADV_GUARD_INSTALL` (Linux 6.13): turns pages into guard pages without splitting the VMA.
/// Not yet in the `libc` crate. <https://docs.kernel.org/mm/process_addrs.html> ("guard regions")
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Reserves `len` bytes of readable, writable, lazily backed anonymous memory.
pub(crate) fn map_stack_memory(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address the kernel chooses touches no existing
    // memory; the result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// Unmaps memory returned by [`map_stack_memory`].
///
/// # Safety
/// `ptr..ptr+len` must be a mapping from [`map_stack_memory`] that nothing references any more.
pub(crate) unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: the caller guarantees the range is an unused mapping of ours.
    let ret = unsafe { libc::munmap(ptr.cast(), len) };
    debug_assert_eq!(ret, 0, "munmap failed: {}", io::Error::last_os_error());
}

/// How a guard page was installed: the result decides how many VMAs a stack costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: a page-table marker, no extra VMA.
    Marker,
    /// `mprotect(PROT_NONE)`: splits the mapping (two VMAs per stack).
    Mprotect,
}

/// Makes `ptr..ptr+len` (page aligned, inside a mapping of ours) fault on any access.
///
/// # Safety
/// The range must lie inside a mapping from [`map_stack_memory`] that holds no live data.
pub(crate) unsafe fn install_guard(ptr: *mut u8, len: usize) -> io::Result<GuardKind> {
    // SAFETY: the caller guarantees the range is ours and unused; madvise on it only changes
    // how the pages fault.
    let ret = unsafe { libc::madvise(ptr.cast(), len, MADV_GUARD_INSTALL) };
    if ret == 0 {
        return Ok(GuardKind::Marker);
    }
    // Older kernels: EINVAL. Fall back to the classic protection change.
    // SAFETY: the caller's guarantee is ours to pass on.
    unsafe { install_guard_mprotect(ptr, len) }
}

/// The pre-6.13 way to make a guard page: `mprotect(PROT_NONE)` (splits the VMA).
///
/// # Safety
/// As for [`install_guard`].
pub(crate) unsafe fn install_guard_mprotect(ptr: *mut u8, len: usize) -> io::Result<GuardKind> {
    // SAFETY: the caller guarantees the range is ours and unused; mprotect only changes the
    // protection of those pages.
    cvt(unsafe { libc::mprotect(ptr.cast(), len, libc::PROT_NONE) })?;
    Ok(GuardKind::Mprotect)
}

/// Gives the physical pages of `ptr..ptr+len` back to the kernel; they read as zero later.
///
/// # Safety
/// The range must be inside a mapping of ours and hold no live data.
pub(crate) unsafe fn discard(ptr: *mut u8, len: usize) {
    // SAFETY: the caller guarantees the pages hold nothing anyone reads again.
    let _ = unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
}

// ---------------------------------------------------------------------------------------------
// epoll and eventfd
// ---------------------------------------------------------------------------------------------

pub(crate) use libc::epoll_event as EpollEvent;

pub(crate) const EPOLLIN: u32 = libc::EPOLLIN as u32;
pub(crate) const EPOLLOUT: u32 = libc::EPOLLOUT as u32;
pub(crate) const EPOLLRDHUP: u32 = libc::EPOLLRDHUP as u32;
pub(crate) const EPOLLHUP: u32 = libc::EPOLLHUP as u32;
pub(crate) const EPOLLERR: u32 = libc::EPOLLERR as u32;
pub(crate) const EPOLLET: u32 = libc::EPOLLET as u32;

pub(crate) fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: no pointer arguments; the returned fd is checked and then owned.
    let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn epoll_add(epfd: RawFd, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut ev = EpollEvent { events, u64: data };
    // SAFETY: `ev` is a live local the kernel only reads.
    cvt(unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    Ok(())
}

pub(crate) fn epoll_del(epfd: RawFd, fd: RawFd) -> io::Result<()> {
    let mut ev = EpollEvent { events: 0, u64: 0 };
    // SAFETY: `ev` is a live local (ignored for DEL, but must be non-null on old kernels).
    cvt(unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, &mut ev) })?;
    Ok(())
}

/// Waits for events; `timeout_ms` of -1 waits forever. EINTR reads as zero events.
///
/// Through `syscall(2)` as the socket calls below (libc's `epoll_wait` is a cancellation
/// point: two updates of the thread's cancel state around each of the worker's polls), and as
/// `epoll_pwait` with no signal mask, which is `epoll_wait` on every architecture (some have
/// only the former).
pub(crate) fn epoll_wait(epfd: RawFd, events: &mut [EpollEvent], timeout_ms: i32) -> usize {
    let max = events.len().min(i32::MAX as usize) as libc::c_int;
    // SAFETY: epoll_pwait(epfd, events, max, timeout, NULL, sigsetsize): the kernel writes at
    // most `max` entries into the buffer we borrow mutably; a null mask is not read (the size
    // argument is then unused).
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            epfd,
            events.as_mut_ptr(),
            max,
            timeout_ms,
            std::ptr::null::<libc::sigset_t>(),
            8usize,
        )
    };
    if n < 0 {
        0
    } else {
        n as usize
    }
}

pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointer arguments; the returned fd is checked and then owned.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local. EAGAIN (counter saturated) still leaves the
    // eventfd readable, which is all a wake-up needs.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

pub(crate) fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live local.
    let _ = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

// ---------------------------------------------------------------------------------------------
// Blocking readiness for plain threads
// ---------------------------------------------------------------------------------------------

pub(crate) const POLLIN: i16 = libc::POLLIN;
pub(crate) const POLLOUT: i16 = libc::POLLOUT;
pub(crate) const POLLRDHUP: i16 = libc::POLLRDHUP;

/// Blocks the thread until `fd` reports one of `events` (or an error/hangup), or `timeout`
/// passes. Returns `Ok(false)` on timeout.
pub(crate) fn poll_fd(fd: RawFd, events: i16, timeout: Option<Duration>) -> io::Result<bool> {
    poll_fd_or(fd, events, None, timeout)
}

/// As [`poll_fd`], and also returns `Ok(true)` when `also` turns readable (an eventfd that
/// tells the thread to stop waiting).
pub(crate) fn poll_fd_or(
    fd: RawFd,
    events: i16,
    also: Option<RawFd>,
    timeout: Option<Duration>,
) -> io::Result<bool> {
    let mut pfds = [
        libc::pollfd {
            fd,
            events,
            revents: 0,
        },
        libc::pollfd {
            fd: also.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let nfds: libc::nfds_t = if also.is_some() { 2 } else { 1 };
    let ms = match timeout {
        None => -1,
        // Round up so a deadline is never reported early.
        Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int,
    };
    // SAFETY: `pfds` is a live local array of two pollfds and `nfds` is at most 2, so the
    // kernel reads and writes only within it.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), nfds, ms) };
    match n {
        -1 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(true) // the caller retries its operation, then waits again
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

// ---------------------------------------------------------------------------------------------
// Sockets, pipes, files
// ---------------------------------------------------------------------------------------------

/// `accept4` with `SOCK_NONBLOCK | SOCK_CLOEXEC`: one system call instead of three.
pub(crate) fn accept(fd: RawFd) -> io::Result<(OwnedFd, SocketAddr)> {
    let mut new_fd: RawFd = -1;
    // SAFETY: `try_init` hands us storage and a length of the right size for any socket
    // address; accept4 writes at most `*len` bytes into it.
    let ((), addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            new_fd = cvt(libc::accept4(
                fd,
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ))?;
            Ok(())
        })?
    };
    // SAFETY: accept4 succeeded, so `new_fd` is a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(new_fd) };
    let addr = addr
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "accepted a non-IP socket"))?;
    Ok((owned, addr))
}

/// The CPUs the calling thread may run on (its affinity), in increasing order.
pub fn affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data for which all zeroes is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live, writable cpu_set_t of exactly the size passed; pid 0 is the
    // calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    cvt(rc)?;
    // SAFETY: CPU_ISSET reads bit `c` of `set`, and `c` is below the set's size in bits.
    Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>())
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// `sendfile(2)`: copies up to `len` bytes of `in_fd` (a file) from `*offset` to `out_fd` (a
/// socket or pipe) inside the kernel, advancing `*offset` by what was sent. Returns the bytes
/// sent: 0 when `*offset` is at or past the end of the file; `WouldBlock` when a non-blocking
/// `out_fd` is full. An offset past `i64::MAX` is `InvalidInput`.
pub fn sendfile(out_fd: RawFd, in_fd: RawFd, offset: &mut u64, len: usize) -> io::Result<usize> {
    let mut off = i64::try_from(*offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
    // Linux sends at most 0x7ffff000 bytes per call anyway.
    let len = len.min(0x7fff_f000);
    // SAFETY: `off` is a live local the kernel reads and updates; the fds are plain numbers
    // to the kernel (a closed or wrong one fails with EBADF or EINVAL, touching no memory).
    let n = cvt_size(unsafe { libc::sendfile(out_fd, in_fd, &mut off, len) })?;
    *offset = off as u64;
    Ok(n)
}

/// A pipe whose both ends are non-blocking and close-on-exec: `(read end, write end)`.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: &impl AsRawFd, on: bool) -> io::Result<()> {
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

/// `read(2)` into `buf`.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into the slice we borrow mutably.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `recv(2)` into `buf`: for sockets, the direct path (`read(2)` goes through the VFS layer
/// first: `vfs_read`, `sock_read_iter`, about 100 ns more per call in a profile of the server).
///
/// The socket calls here go through `syscall(2)` rather than libc's wrappers: those are
/// thread-cancellation points, which in a multi-threaded process cost two atomic updates of
/// the thread's cancel state around every call, and nothing here uses cancellation.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recvfrom(fd, buf, len, flags, NULL, NULL): the kernel writes at most
    // `buf.len()` bytes into the slice we borrow mutably and no address (both pointers null).
    cvt_syscall(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })
}

/// `write(2)` from `buf`.
pub(crate) fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from the slice we borrow.
    cvt_size(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })
}

/// `send(2)` with `MSG_NOSIGNAL`: a peer that went away is `EPIPE`, not a process-wide SIGPIPE.
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, 0)
}

/// `send(2)` with `MSG_NOSIGNAL | extra` (e.g. `MSG_MORE`).
pub(crate) fn send_flags(fd: RawFd, buf: &[u8], extra: libc::c_int) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | extra;
    // SAFETY: sendto(fd, buf, len, flags, NULL, 0): the kernel reads at most `buf.len()`
    // bytes from the slice we borrow, and no address.
    cvt_syscall(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            flags,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    })
}

/// `sendmsg(2)` of `bufs` with `MSG_NOSIGNAL` (a `writev` that cannot raise SIGPIPE).
pub(crate) fn send_vectored(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `struct iovec` on Unix; the kernel only reads it.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(1024) as _;
    // SAFETY: sendmsg(fd, &msg, flags): `msg` is a live local pointing at `bufs`, borrowed
    // for the call; the kernel only reads the iovecs and the bytes they name.
    cvt_syscall(unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            fd,
            &msg as *const libc::msghdr,
            libc::MSG_NOSIGNAL,
        )
    })
}

/// Bytes a vectored write of `bufs` offers (the iovecs [`send_vectored`] and [`writev`] pass:
/// at most `IOV_MAX`).
pub(crate) fn iov_len(bufs: &[io::IoSlice<'_>]) -> usize {
    bufs.iter().take(1024).map(|b| b.len()).sum()
}

/// `writev(2)` of `bufs`.
pub(crate) fn writev(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let n = bufs.len().min(1024) as libc::c_int; // IOV_MAX on Linux
                                                 // SAFETY: `IoSlice` is guaranteed ABI-compatible with `struct iovec` on Unix; the kernel
                                                 // only reads the `n` entries and the bytes they point to, all borrowed for the call.
    cvt_size(unsafe { libc::writev(fd, bufs.as_ptr().cast(), n) })
}

// ---------------------------------------------------------------------------------------------
// Process-wide signal plumbing for the stack-overflow guard
// ---------------------------------------------------------------------------------------------

/// A SIGSEGV/SIGBUS action as the kernel sees it.
pub(crate) type SigAction = libc::sigaction;
pub(crate) type SigInfo = libc::siginfo_t;

/// Installs `handler` (SA_SIGINFO | SA_ONSTACK) for `sig`, returning the previous action.
pub(crate) fn sigaction_install(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int, *mut SigInfo, *mut libc::c_void),
) -> io::Result<SigAction> {
    // SAFETY: sigaction is a plain C struct; all-zero is a valid "no handler, empty mask".
    let mut new: SigAction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: as above, zeroed is valid; it is written by the kernel.
    let mut old: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: sa_mask is a live field of our local; sigemptyset only writes it.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: both structs are live locals; the handler is an `extern "C"` fn that lives for the
    // whole program.
    cvt(unsafe { libc::sigaction(sig, &new, &mut old) })?;
    Ok(old)
}

/// Restores `action` for `sig`. Async-signal-safe.
pub(crate) fn sigaction_restore(sig: libc::c_int, action: &SigAction) {
    // SAFETY: `action` is a valid sigaction read by the kernel; sigaction(2) is
    // async-signal-safe.
    unsafe { libc::sigaction(sig, action, ptr::null_mut()) };
}

/// Resets `sig` to its default action. Async-signal-safe.
pub(crate) fn sigaction_default(sig: libc::c_int) {
    // SAFETY: zeroed sigaction with SIG_DFL (0) is the default action.
    let mut dfl: SigAction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    sigaction_restore(sig, &dfl);
}

/// The faulting address of a SIGSEGV/SIGBUS.
///
/// # Safety
/// `info` must be the pointer the kernel passed to an SA_SIGINFO handler for SIGSEGV/SIGBUS.
pub(crate) unsafe fn fault_address(info: *const SigInfo) -> usize {
    // SAFETY: the caller guarantees `info` is the kernel's siginfo for a memory fault, for which
    // si_addr is defined.
    unsafe { (*info).si_addr() as usize }
}

/// Writes `msg` to stderr with one `write(2)`. Async-signal-safe: no allocation, no lock.
pub(crate) fn write_stderr(msg: &[u8]) {
    // SAFETY: the kernel reads `msg.len()` bytes from a live slice.
    let _ = unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Ends the process with SIGABRT. Async-signal-safe.
pub(crate) fn abort() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Returns the thread's alternate signal stack if one is enabled.
pub(crate) fn sigaltstack_enabled() -> bool {
    // SAFETY: zeroed stack_t is a valid output buffer.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: null new-stack means "query only"; `old` is a live local.
    let ret = unsafe { libc::sigaltstack(ptr::null(), &mut old) };
    ret == 0 && old.ss_flags & libc::SS_DISABLE == 0
}

/// Sets `ptr..ptr+len` as the thread's alternate signal stack.
///
/// # Safety
/// The memory must stay mapped, and be used for nothing else, until
/// [`sigaltstack_disable`] runs on the same thread.
pub(crate) unsafe fn sigaltstack_set(ptr: *mut u8, len: usize) -> io::Result<()> {
    let st = libc::stack_t {
        ss_sp: ptr.cast(),
        ss_flags: 0,
        ss_size: len,
    };
    // SAFETY: `st` is a live local; the caller guarantees the memory it names stays ours.
    cvt(unsafe { libc::sigaltstack(&st, ptr::null_mut()) })?;
    Ok(())
}

/// Turns the thread's alternate signal stack off.
pub(crate) fn sigaltstack_disable() {
    let st = libc::stack_t {
        ss_sp: ptr::null_mut(),
        ss_flags: libc::SS_DISABLE,
        ss_size: 0,
    };
    // SAFETY: `st` is a live local; disabling has no memory preconditions.
    unsafe { libc::sigaltstack(&st, ptr::null_mut()) };
}

/// The resident set size of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> io::Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc/self/statm"))?;
    Ok(pages * page_size() as u64)
}

/// The number of open file descriptors of this process, from `/proc/self/fd`.
pub fn open_fds() -> io::Result<usize> {
    // read_dir itself holds one descriptor while it runs; do not count it.
    Ok(std::fs::read_dir("/proc/self/fd")?
        .count()
        .saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn affinity_lists_the_cpus_this_thread_may_run_on() {
        let cpus = affinity().expect("sched_getaffinity");
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
        // This thread runs on one of them now.
        // SAFETY: sched_getcpu takes no arguments and only returns a number.
        let now = unsafe { libc::sched_getcpu() };
        assert!(now >= 0 && cpus.contains(&(now as usize)), "{now} {cpus:?}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // epoll: not supported by miri
    fn epoll_wait_reports_what_is_ready_and_times_out_with_nothing() {
        let ep = epoll_create().unwrap();
        let ev = eventfd().unwrap();
        epoll_add(ep.as_raw_fd(), ev.as_raw_fd(), libc::EPOLLIN as u32, 42).unwrap();
        let mut events = [EpollEvent { events: 0, u64: 0 }; 4];
        // Nothing ready: a zero timeout returns at once, a short one after it passes.
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut events, 0), 0);
        let t0 = std::time::Instant::now();
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut events, 20), 0);
        assert!(
            t0.elapsed() >= std::time::Duration::from_millis(15),
            "{:?}",
            t0.elapsed()
        );
        eventfd_signal(ev.as_raw_fd());
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut events, -1), 1);
        let (flags, data) = (events[0].events, events[0].u64);
        assert_eq!(
            (flags & libc::EPOLLIN as u32, data),
            (libc::EPOLLIN as u32, 42)
        );
        // A buffer of one entry gets one of two ready descriptors.
        let ev2 = eventfd().unwrap();
        epoll_add(ep.as_raw_fd(), ev2.as_raw_fd(), libc::EPOLLIN as u32, 43).unwrap();
        eventfd_signal(ev2.as_raw_fd());
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut events[..1], 0), 1);
        assert_eq!(epoll_wait(ep.as_raw_fd(), &mut events, 0), 2);
        // A descriptor that is not an epoll: an error, read as no events.
        assert_eq!(epoll_wait(ev.as_raw_fd(), &mut events, 0), 0);
    }

    #[test]
    fn cvt_turns_minus_one_into_errno_and_passes_the_rest() {
        assert_eq!(cvt(7).unwrap(), 7);
        assert_eq!(cvt(0).unwrap(), 0);
        // SAFETY: closing an fd number that is not open touches no memory (EBADF).
        let e = cvt(unsafe { libc::close(-1) }).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // sendfile: not supported by miri
    fn sendfile_sends_a_range_and_advances_the_offset() {
        let path = std::env::temp_dir().join(format!("weft-fiber-sendfile-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut off = 3;
        assert_eq!(
            sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut off, 4).unwrap(),
            4
        );
        assert_eq!(off, 7);
        // Past the end: nothing sent, the offset stays.
        let mut end = 10;
        assert_eq!(
            sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut end, 4).unwrap(),
            0
        );
        assert_eq!(end, 10);
        let mut huge = u64::MAX;
        let e = sendfile(b.as_raw_fd(), f.as_raw_fd(), &mut huge, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = sendfile(-1, f.as_raw_fd(), &mut 0, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        (&b).write_all(b"!").unwrap();
        drop(b);
        let mut got = Vec::new();
        a.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"3456!");
    }
}
