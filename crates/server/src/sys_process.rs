//! Every raw process call weft makes: fork, waitpid, kill, the parent-death signal, `_exit`,
//! the thread count that makes fork safe, and anonymous shared memory for counters that the
//! processes of the `process` model add to together. One place to audit; each `unsafe` block
//! says why it is sound.
//!
//! fork(2) copies only the calling thread: in a process with other threads, a lock one of
//! them held stays locked forever in the child. So [`fork`] refuses unless the process has
//! exactly one thread, checked from `/proc/self/stat` on every call (a few microseconds
//! against the fork's hundred or so), which makes it a safe function.

use std::io;
use std::ops::Deref;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// A process id.
pub type Pid = libc::pid_t;

use weft_fiber::sys::cvt;

/// The number of threads of this process (field 20 of `/proc/self/stat`).
pub fn thread_count() -> io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))?;
    // After ')': field 3 (state) is the first; num_threads is field 20.
    rest.split_ascii_whitespace()
        .nth(17)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))
}

/// Which side of a fork this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// In the new process.
    Child,
    /// In the calling process; the child's id.
    Parent(Pid),
}

/// fork(2), only from a single-threaded process (else an error of kind `Unsupported`).
pub fn fork() -> io::Result<Forked> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("fork refused: the process has {threads} threads (fork needs exactly one)"),
        ));
    }
    // SAFETY: the process has exactly one thread (checked just above, and only this thread
    // could start another), so the child gets a consistent copy of every lock and allocator
    // state; fork takes no pointers.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// exit status
    Code(i32),
    /// killed by this signal
    Signal(i32),
}

impl Exit {
    fn from_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// waitpid(2) without blocking: `pid` (or -1 for any child). `Ok(None)`: none has ended yet;
/// `ECHILD` (no children at all) also reads as `Ok(None)`.
pub fn try_wait(pid: Pid) -> io::Result<Option<(Pid, Exit)>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid c_int for waitpid to fill.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        match r {
            0 => return Ok(None),
            -1 => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ECHILD) => return Ok(None),
                    _ => return Err(e),
                }
            }
            pid => return Ok(Some((pid, Exit::from_status(status)))),
        }
    }
}

/// pidfd_open(2): a descriptor that polls readable once `pid` (a child not yet reaped) has
/// exited. Fails with `ENOSYS` on kernels before 5.3.
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no pointers; the result is checked below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor (close-on-exec, as pidfd_open makes them) nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// waitpid(2), blocking until `pid` ends (restarted after signals).
pub fn wait(pid: Pid) -> io::Result<Exit> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: as in `try_wait`.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(Exit::from_status(status));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// kill(2). A process that is already gone (ESRCH) is not an error.
pub fn kill(pid: Pid, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes no pointers. Callers pass only ids of their own unreaped children,
    // which the kernel cannot reuse until they are reaped.
    match cvt(unsafe { libc::kill(pid, sig) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// kill(2) of a whole process group: `sig` to every process in group `pgid` (a CGI script and
/// whatever it started). A group that is already empty (ESRCH) is not an error.
pub fn kill_group(pgid: Pid, sig: libc::c_int) -> io::Result<()> {
    if pgid <= 1 {
        // kill(0) or kill(-1) would signal our own group or every process we may signal.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes no pointers. Callers pass the id of a child they started as the
    // leader of its own group (`process_group(0)`), unreaped or reaped just before: while the
    // leader is unreaped, or any member of its group lives, the id cannot be reused, so the
    // group is the one that child made (with no member left the call fails with ESRCH).
    match cvt(unsafe { libc::kill(-pgid, sig) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// Asks the kernel to send `sig` to this process when the thread that forked it exits
/// (prctl `PR_SET_PDEATHSIG`), then checks that the parent is still `parent`: if it died
/// before the request took effect, the signal would never come, so this returns false.
pub fn die_with_parent(sig: libc::c_int, parent: Pid) -> io::Result<bool> {
    // SAFETY: PR_SET_PDEATHSIG takes the signal number as an integer argument, no pointers.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) })?;
    Ok(parent_pid() == parent)
}

/// getppid(2).
pub fn parent_pid() -> Pid {
    // SAFETY: getppid cannot fail and takes no arguments.
    unsafe { libc::getppid() }
}

/// getpid(2).
pub fn pid() -> Pid {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

/// Ends this process at once with `code`: no destructors, no atexit handlers, no flushing of
/// buffers the process inherited from its parent (a forked child must not write those twice).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns; nothing is left to unwind.
    unsafe { libc::_exit(code) }
}

/// Closes a descriptor this process inherited and will never use (a forked child closing the
/// listening sockets it copied). The owning object is never dropped in this process, so the
/// number is not closed twice.
pub fn close_inherited(fd: RawFd) {
    // SAFETY: close takes no pointers; see the function's contract for double closes.
    let _ = unsafe { libc::close(fd) };
}

/// Waits until one of `fds` is readable or `timeout` passes; returns the readable ones' indexes.
/// A signal ends the wait early with none (so the caller looks at its flags at once).
pub fn poll_readable_any(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<usize>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = crate::sys::timeout_ms(timeout);
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structures.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(Vec::new())
        } else {
            Err(e)
        };
    }
    Ok(pfds
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
        .map(|(i, _)| i)
        .collect())
}

/// A flag other processes can wait on with `poll`: an eventfd, readable while raised. The
/// `process` model's master raises it while connection processes are scarce or shutdown has
/// begun; lingering children wait on it beside their connection instead of looking every few
/// milliseconds. Inherited across fork, closed on exec.
#[derive(Debug)]
pub struct PollFlag {
    efd: crate::sys::EventFd,
    raised: bool,
}

impl PollFlag {
    pub fn new() -> io::Result<PollFlag> {
        Ok(PollFlag {
            efd: crate::sys::EventFd::new()?,
            raised: false,
        })
    }

    /// Raises or lowers the flag (nothing when it is already so). A write leaves the counter
    /// non-zero (readable), a read sets it to 0; either's only failure here, EAGAIN on a full
    /// or an empty counter, already leaves the state asked for.
    pub fn set(&mut self, on: bool) {
        if on == self.raised {
            return;
        }
        if on {
            self.efd.notify();
        } else {
            self.efd.drain();
        }
        self.raised = on;
    }

    pub fn is_raised(&self) -> bool {
        self.raised
    }

    pub fn raw_fd(&self) -> RawFd {
        self.efd.raw_fd()
    }
}

/// An epoll instance (the `process` model's master waits on its listeners, the connections it
/// holds with one). Closed on drop.
#[derive(Debug)]
pub struct Epoll {
    fd: std::os::fd::OwnedFd,
}

impl Epoll {
    /// epoll_create1(2).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned to us and is owned by nothing else.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// The descriptor (a forked child closes its copy).
    pub fn raw_fd(&self) -> RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    /// Watches `fd` for input (level-triggered), reported with `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call; a bad `fd` is
        // an error return, not undefined behaviour.
        cvt(unsafe { libc::epoll_ctl(self.raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
    }

    /// Stops watching `fd` (it stays open).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: EPOLL_CTL_DEL ignores the event, but kernels before 2.6.9 want it non-null;
        // `ev` is valid for the call.
        cvt(unsafe { libc::epoll_ctl(self.raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) }).map(drop)
    }

    /// Waits up to `timeout` and appends the tokens of ready descriptors to `out` (cleared
    /// first). A signal ends the wait early with none.
    pub fn wait(&self, out: &mut Vec<u64>, timeout: Duration) -> io::Result<()> {
        let ms = crate::sys::timeout_ms(timeout);
        self.pwait(out, ms, None)
    }

    /// As [`Epoll::wait`] (`None`: no timeout), for a loop whose signal handlers only set
    /// flags: `signals` are blocked while `pending` looks at those flags, and unblocked again
    /// only inside the wait itself (`epoll_pwait`), so a signal that comes after the look
    /// ends the wait at once instead of being noticed at the next timeout. Returns at once,
    /// with no events, when `pending` says a flag is already set.
    pub fn wait_for_signals(
        &self,
        out: &mut Vec<u64>,
        timeout: Option<Duration>,
        signals: &[libc::c_int],
        pending: impl FnOnce() -> bool,
    ) -> io::Result<()> {
        let ms = timeout.map_or(-1, crate::sys::timeout_ms);
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before any other use.
        let mut block: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; pthread_sigmask fills it before it is read.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to live locals; sigaddset fails only for an invalid signal
        // number, which leaves that signal out.
        unsafe {
            libc::sigemptyset(&mut block);
            for &sig in signals {
                libc::sigaddset(&mut block, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        }
        let r = if pending() {
            out.clear();
            Ok(())
        } else {
            self.pwait(out, ms, Some(&old))
        };
        // SAFETY: `old` is the mask pthread_sigmask returned above. A signal that came after
        // the wait is delivered here, and its flag is seen by the caller's next look.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        r
    }

    fn pwait(
        &self,
        out: &mut Vec<u64>,
        ms: libc::c_int,
        mask: Option<&libc::sigset_t>,
    ) -> io::Result<()> {
        const MAX: usize = 256;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; MAX];
        out.clear();
        let mask = mask.map_or(std::ptr::null(), |m| m as *const libc::sigset_t);
        // SAFETY: `evs` has room for MAX events, the count passed; `mask` is null (the
        // thread's mask stays) or points to a live sigset_t.
        let r = unsafe { libc::epoll_pwait(self.raw_fd(), evs.as_mut_ptr(), MAX as i32, ms, mask) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        out.extend(evs[..r as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Types that may live in memory shared between processes.
///
/// # Safety
/// All-zero bytes must be a valid value; the type holds no pointers, descriptors or anything
/// else that means something only in one process, needs no `Drop`, and is changed only through
/// atomics (lock-free, hence address-free, on every target weft builds for).
pub unsafe trait AtomicsOnly: Sync {}

// SAFETY: a zeroed AtomicU64 is 0; it is a plain lock-free atomic.
unsafe impl AtomicsOnly for AtomicU64 {}
// SAFETY: an array of `AtomicsOnly` values is one too.
unsafe impl<T: AtomicsOnly, const N: usize> AtomicsOnly for [T; N] {}

/// A `T` in an anonymous `MAP_SHARED` mapping: a process forked after it was made sees the
/// same memory, so counters one child adds to are seen by its parent and siblings. Falls back
/// to ordinary memory if the mapping cannot be made (then nothing is shared).
pub struct Shared<T: AtomicsOnly> {
    ptr: NonNull<T>,
    mapped: bool,
}

impl<T: AtomicsOnly> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("mapped", &self.mapped)
            .finish()
    }
}

// SAFETY: `T: Sync` and only shared references are handed out; the mapping is owned.
unsafe impl<T: AtomicsOnly> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: AtomicsOnly> Sync for Shared<T> {}

impl<T: AtomicsOnly> Shared<T> {
    /// A zeroed `T` in shared memory.
    pub fn new() -> Shared<T> {
        let size = std::mem::size_of::<T>().max(1);
        // SAFETY: an anonymous mapping of `size` bytes with no address hint; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if let Some(ptr) = NonNull::new(p.cast::<T>()) {
                // Page-aligned, hence aligned for T; zero-filled by the kernel, which
                // `AtomicsOnly` makes a valid T.
                return Shared { ptr, mapped: true };
            }
        }
        log::warn!("cannot map shared memory: {}", io::Error::last_os_error());
        Shared::on_heap()
    }

    /// A zeroed `T` in this process's own memory (when no shared mapping can be made).
    fn on_heap() -> Shared<T> {
        // Zeroed on the heap, not built on the stack and moved (a listener's counters are
        // 64 KiB).
        let layout = std::alloc::Layout::new::<T>();
        let b: Box<T> = if layout.size() == 0 {
            // SAFETY: `AtomicsOnly` makes all-zero bytes (here: none) a valid T.
            Box::new(unsafe { std::mem::MaybeUninit::<T>::zeroed().assume_init() })
        } else {
            // SAFETY: `layout` is T's and not zero-sized; the allocation is checked for null;
            // `AtomicsOnly` makes its all-zero bytes a valid T, and a block from the global
            // allocator with T's layout is what `Box::from_raw` takes.
            unsafe {
                let p = std::alloc::alloc_zeroed(layout).cast::<T>();
                if p.is_null() {
                    std::alloc::handle_alloc_error(layout);
                }
                Box::from_raw(p)
            }
        };
        Shared {
            ptr: NonNull::from(Box::leak(b)),
            mapped: false,
        }
    }
}

impl<T: AtomicsOnly> Default for Shared<T> {
    fn default() -> Self {
        Shared::new()
    }
}

impl<T: AtomicsOnly> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` points to a valid, initialised T that lives until `drop`.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: AtomicsOnly> Drop for Shared<T> {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: the mapping was made in `new` with this address and size and is unmapped
            // once; other processes keep their own copy of the mapping.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), std::mem::size_of::<T>().max(1));
            }
        } else {
            // SAFETY: made by `Box::leak` in `new`, released once.
            drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
        }
    }
}

/// `len` zeroed `T`s in one anonymous `MAP_SHARED` mapping: [`Shared`] for a table whose size
/// is set at run time (the per-client table of `limits_ip`). Falls back to ordinary memory as
/// [`Shared`] does.
pub struct SharedSlice<T: AtomicsOnly> {
    ptr: NonNull<T>,
    len: usize,
    mapped: bool,
}

impl<T: AtomicsOnly> std::fmt::Debug for SharedSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSlice")
            .field("len", &self.len)
            .field("mapped", &self.mapped)
            .finish()
    }
}

// SAFETY: `T: Sync` and only shared references are handed out; the mapping is owned.
unsafe impl<T: AtomicsOnly> Send for SharedSlice<T> {}
// SAFETY: as above.
unsafe impl<T: AtomicsOnly> Sync for SharedSlice<T> {}

impl<T: AtomicsOnly> SharedSlice<T> {
    /// `len` zeroed `T`s (at least one) in shared memory.
    pub fn new(len: usize) -> SharedSlice<T> {
        let len = len.max(1);
        let bytes = std::mem::size_of::<T>()
            .checked_mul(len)
            .expect("a shared table that fits the address space")
            .max(1);
        // SAFETY: an anonymous mapping of `bytes` bytes with no address hint; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if let Some(ptr) = NonNull::new(p.cast::<T>()) {
                // Page-aligned, hence aligned for T; zero-filled, which `AtomicsOnly` makes
                // valid Ts.
                return SharedSlice {
                    ptr,
                    len,
                    mapped: true,
                };
            }
        }
        log::warn!("cannot map shared memory: {}", io::Error::last_os_error());
        let v: Vec<T> = (0..len)
            // SAFETY: `AtomicsOnly` makes all-zero bytes a valid T.
            .map(|_| unsafe { std::mem::MaybeUninit::<T>::zeroed().assume_init() })
            .collect();
        let b = v.into_boxed_slice();
        let ptr = NonNull::from(Box::leak(b)).cast::<T>();
        SharedSlice {
            ptr,
            len,
            mapped: false,
        }
    }
}

impl<T: AtomicsOnly> Deref for SharedSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` valid, initialised Ts that live until `drop`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: AtomicsOnly> Drop for SharedSlice<T> {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: the mapping was made in `new` with this address and size and is unmapped
            // once; other processes keep their own copy of the mapping.
            unsafe {
                libc::munmap(
                    self.ptr.as_ptr().cast(),
                    (std::mem::size_of::<T>() * self.len).max(1),
                );
            }
        } else {
            // SAFETY: made from a boxed slice of `len` Ts by `Box::leak` in `new`, released once.
            drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            });
        }
    }
}

/// The environment variable that [`spawn_with_fds`] fills with the child's own pid (systemd's
/// `LISTEN_PID`, which a process checks against `getpid` before it takes `LISTEN_FDS`).
pub const LISTEN_PID: &str = "LISTEN_PID";

/// Starts `exe` with `argv` and `env` (each `NAME=value`) in a new process whose descriptors
/// 3, 4, ... are `fds` (in order, inheritable) and whose `LISTEN_PID` is its own pid, as
/// systemd's socket activation passes sockets. Every other descriptor of this process is
/// `O_CLOEXEC` (the standard library and socket2 open them so), so the new program gets only
/// these. Works from a process with threads: between fork and exec the child makes only
/// async-signal-safe calls (fcntl, dup2, close, getpid, sigprocmask, execve, _exit) and
/// touches only memory prepared before the fork. `output`, if given, becomes the child's
/// standard output and error (else it shares this process's). Returns the child's pid; a
/// failed exec ends the child with status 127.
pub fn spawn_with_fds(
    exe: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    env: &[std::ffi::CString],
    fds: &[RawFd],
    output: Option<RawFd>,
) -> io::Result<Pid> {
    use std::ffi::c_char;
    // `LISTEN_PID=` and room for any pid's digits and the terminating NUL, filled in the child.
    let mut listen_pid = format!("{LISTEN_PID}=").into_bytes();
    let digits_at = listen_pid.len();
    listen_pid.resize(digits_at + 24, 0);
    let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp: Vec<*const c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(listen_pid.as_ptr().cast());
    envp.push(std::ptr::null());
    // Where each descriptor is parked above the target range first, so that moving one into
    // place never overwrites another still to be moved.
    let mut parked: Vec<RawFd> = vec![-1; fds.len()];
    let first_free = 3 + fds.len() as RawFd;
    // SAFETY: fork takes no arguments. In the child only async-signal-safe functions run until
    // execve or _exit, on memory allocated above (no allocation, no lock, no unwinding), which
    // is what POSIX allows after fork in a multithreaded process.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: (the whole block) each call is async-signal-safe; the pointers are into
            // `listen_pid`, `parked`, `argv_ptrs` and `envp`, which this copy of the address
            // space owns and nothing else uses; the descriptors in `fds` are open (the caller
            // holds them) and the rest are numbers this block just created.
            unsafe {
                if let Some(out) = output {
                    // First: `out` may have a number that the sockets are moved onto below.
                    if libc::dup2(out, 1) < 0 || libc::dup2(out, 2) < 0 {
                        libc::_exit(127);
                    }
                }
                for (i, &fd) in fds.iter().enumerate() {
                    let p = libc::fcntl(fd, libc::F_DUPFD, first_free);
                    if p < 0 {
                        libc::_exit(127);
                    }
                    *parked.as_mut_ptr().add(i) = p;
                }
                for (i, &p) in parked.iter().enumerate() {
                    // dup2 leaves the new number without FD_CLOEXEC: it survives exec.
                    if libc::dup2(p, 3 + i as RawFd) < 0 {
                        libc::_exit(127);
                    }
                    libc::close(p);
                }
                let mut pid = libc::getpid() as u64;
                let mut tmp = [0u8; 20];
                let mut n = 0;
                loop {
                    tmp[n] = b'0' + (pid % 10) as u8;
                    n += 1;
                    pid /= 10;
                    if pid == 0 {
                        break;
                    }
                }
                let out = listen_pid.as_mut_ptr().add(digits_at);
                for j in 0..n {
                    *out.add(j) = tmp[n - 1 - j];
                }
                *out.add(n) = 0;
                // The signal mask survives exec; this thread's may block some (none of
                // weft's do, but an embedder's might).
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                libc::execve(exe.as_ptr(), argv_ptrs.as_ptr(), envp.as_ptr());
                libc::_exit(127)
            }
        }
        pid => Ok(pid),
    }
}

/// A pipe whose both ends are `O_CLOEXEC`: (read end, write end).
pub fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the two-element array it is given.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both numbers were just created by pipe2 and are owned by nothing else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    /// Where no shared mapping can be made, the counters are zeroed heap memory (a large block
    /// and a zero-sized one) that counts and is given back on drop.
    #[test]
    fn heap_fallback_is_zeroed_counts_and_frees() {
        let big: Shared<[AtomicU64; 8192]> = Shared::on_heap();
        assert!(!big.mapped);
        assert!(big.iter().all(|c| c.load(SeqCst) == 0));
        big[8191].fetch_add(3, SeqCst);
        assert_eq!(big[8191].load(SeqCst), 3);
        drop(big);
        let none: Shared<[AtomicU64; 0]> = Shared::on_heap();
        assert!(none.is_empty());
        drop(none);
    }

    #[test]
    fn counts_threads() {
        let n = thread_count().unwrap();
        assert!(n >= 1);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        assert!(thread_count().unwrap() > n.min(1));
        drop(tx);
        t.join().unwrap();
    }

    #[test]
    fn fork_refuses_a_threaded_process() {
        // The test harness runs tests on threads, so this process always has more than one.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let e = fork().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        drop(tx);
        t.join().unwrap();
    }

    /// A child made with the raw call (this test process is threaded, so the child does only
    /// async-signal-safe things: an atomic add and `_exit`) adds to shared memory; the parent
    /// reaps it, sees its exit code and its addition, and has no child left.
    #[test]
    fn shared_counters_cross_fork_and_children_are_reaped() {
        let counters: Shared<[AtomicU64; 2]> = Shared::new();
        assert!(counters.mapped);
        counters[0].store(5, SeqCst);
        // SAFETY: the child performs only an atomic add and _exit, both async-signal-safe.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            counters[0].fetch_add(2, SeqCst);
            exit_now(7);
        }
        assert_eq!(wait(pid).unwrap(), Exit::Code(7));
        assert_eq!(counters[0].load(SeqCst), 7);
        assert_eq!(try_wait(pid).unwrap(), None, "reaped once, nothing left");
    }

    #[test]
    fn kill_and_signal_status() {
        // SAFETY: the child only calls pause and _exit (async-signal-safe).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: pause takes no arguments.
            unsafe { libc::pause() };
            exit_now(0);
        }
        kill(pid, libc::SIGKILL).unwrap();
        assert_eq!(wait(pid).unwrap(), Exit::Signal(libc::SIGKILL));
        assert_eq!(try_wait(pid).unwrap(), None, "reaped once, nothing left");
    }

    #[test]
    fn poll_any_reports_the_ready_one() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        (&b).write_all(b"x").unwrap();
        let ready =
            poll_readable_any(&[c.as_raw_fd(), a.as_raw_fd()], Duration::from_secs(1)).unwrap();
        assert_eq!(ready, vec![1]);
        assert!(
            poll_readable_any(&[c.as_raw_fd()], Duration::from_millis(1))
                .unwrap()
                .is_empty()
        );
        assert_eq!(parent_pid() > 0, pid() > 0);
    }

    /// Runs `f` on a thread of its own and gives its result, or fails the test after 10 s
    /// (a wait that slept through its signal would otherwise hang the suite).
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()).unwrap());
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the wait slept through its signal")
    }

    #[test]
    fn a_signal_between_the_flag_check_and_the_wait_ends_the_wait() {
        // SIGWINCH: ignored by default, so a stray one harms no other test.
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(libc::SIGWINCH, flag.clone()).unwrap();
        let f = flag.clone();
        let (checked, out) = within_10s(move || {
            let ep = Epoll::new().unwrap();
            let mut out = vec![7];
            let mut checked = false;
            // The signal comes after the look at the flag (it is blocked then, so it waits
            // for the wait): with no timeout, only the wait's own unblocking can end it.
            ep.wait_for_signals(&mut out, None, &[libc::SIGWINCH], || {
                checked = !f.load(SeqCst);
                // SAFETY: pthread_kill of the calling thread with a valid signal number.
                unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGWINCH) };
                false
            })
            .unwrap();
            (checked, out)
        });
        assert!(checked, "the flag was set before the look");
        assert!(out.is_empty(), "no events: {out:?}");
        assert!(flag.load(SeqCst), "the handler ran");
    }

    #[test]
    fn a_flag_already_set_returns_at_once_and_the_mask_is_restored() {
        let (out, blocked) = within_10s(|| {
            let ep = Epoll::new().unwrap();
            let mut out = vec![7];
            ep.wait_for_signals(&mut out, None, &[libc::SIGWINCH], || true)
                .unwrap();
            // SAFETY: sigset_t is plain data, filled by pthread_sigmask before it is read.
            let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: a null new mask only reads the current one into `now`.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now) };
            // SAFETY: `now` was filled above.
            let blocked = unsafe { libc::sigismember(&now, libc::SIGWINCH) };
            (out, blocked)
        });
        assert!(out.is_empty());
        assert_eq!(blocked, 0, "SIGWINCH left blocked after the wait");
    }

    #[test]
    fn a_raised_flag_is_readable_until_it_is_lowered() {
        let (ready, quiet) = within_10s(|| {
            let mut flag = PollFlag::new().unwrap();
            let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
            let fds = [std::os::fd::AsRawFd::as_raw_fd(&a), flag.raw_fd()];
            // Raised twice: one raise; lowered: not readable any more.
            flag.set(true);
            flag.set(true);
            assert!(flag.is_raised());
            let ready = poll_readable_any(&fds, Duration::from_secs(5)).unwrap();
            flag.set(false);
            assert!(!flag.is_raised());
            let quiet = poll_readable_any(&fds, Duration::from_millis(50)).unwrap();
            (ready, quiet)
        });
        assert_eq!(ready, [1]);
        assert!(quiet.is_empty(), "{quiet:?}");
    }

    #[test]
    fn a_ready_descriptor_ends_a_wait_with_no_timeout() {
        let tokens = within_10s(|| {
            let ep = Epoll::new().unwrap();
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            ep.add(std::os::fd::AsRawFd::as_raw_fd(&a), 42).unwrap();
            std::io::Write::write_all(&mut &b, b"x").unwrap();
            let mut out = Vec::new();
            ep.wait_for_signals(&mut out, None, &[libc::SIGWINCH], || false)
                .unwrap();
            out
        });
        assert_eq!(tokens, [42]);
    }
}
