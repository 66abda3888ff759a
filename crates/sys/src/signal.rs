//! Signals: the numbers the workspace's crates send and handle, process-wide handlers
//! (`sigaction`) for the fiber runtime's stack-overflow report, the thread's alternate signal
//! stack, the two async-signal-safe calls that report (`write` to stderr, `abort`), and the
//! signal mask around [`Epoll::wait_for_signals`](crate::epoll::Epoll::wait_for_signals).
//!
//! Sending a signal is [`process::kill`](crate::process::kill).

use std::ffi::c_void;
use std::io;
use std::ptr;

use crate::cvt;

pub use libc::{
    SIGABRT, SIGBUS, SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGSEGV, SIGTERM, SIGUSR1, SIGUSR2,
    SIGWINCH,
};

/// A signal number (`SIGTERM`, ...).
pub type Signal = libc::c_int;

/// A signal's action as the kernel sees it (what [`sigaction_install`] returns).
pub type SigAction = libc::sigaction;

/// What the kernel tells an `SA_SIGINFO` handler about a signal.
pub type SigInfo = libc::siginfo_t;

/// An `SA_SIGINFO` signal handler.
pub type Handler = extern "C" fn(Signal, *mut SigInfo, *mut c_void);

/// Installs `handler` (`SA_SIGINFO | SA_ONSTACK`: it runs on the thread's alternate signal
/// stack) for `sig`, returning the previous action.
pub fn sigaction_install(sig: Signal, handler: Handler) -> io::Result<SigAction> {
    // SAFETY: sigaction is a plain C struct; all-zero is a valid "no handler, empty mask".
    let mut new: SigAction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler as usize;
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: as above; it is written by the kernel.
    let mut old: SigAction = unsafe { std::mem::zeroed() };
    // SAFETY: sa_mask is a live field of our local; sigemptyset only writes it.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: both structs are live locals; the handler is an `extern "C"` fn that lives for
    // the whole program.
    cvt(unsafe { libc::sigaction(sig, &new, &mut old) })?;
    Ok(old)
}

/// Restores `action` for `sig`. Async-signal-safe.
pub fn sigaction_restore(sig: Signal, action: &SigAction) {
    // SAFETY: `action` is a valid sigaction the kernel reads; sigaction(2) is
    // async-signal-safe.
    unsafe { libc::sigaction(sig, action, ptr::null_mut()) };
}

/// Resets `sig` to its default action. Async-signal-safe.
pub fn sigaction_default(sig: Signal) {
    // SAFETY: a zeroed sigaction with SIG_DFL (0) is the default action.
    let mut dfl: SigAction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    sigaction_restore(sig, &dfl);
}

/// Calls the handler of `prev` (an action [`sigaction_install`] replaced) with a handler's
/// arguments, if it is an `SA_SIGINFO` handler; false (nothing called) for the default
/// action, "ignore", or a handler without `SA_SIGINFO` (whose arguments differ).
///
/// # Safety
/// `sig`, `info` and `ctx` must be the arguments the kernel passed to the `SA_SIGINFO`
/// handler that calls this (the previous handler may read through both pointers).
pub unsafe fn sigaction_forward(
    prev: &SigAction,
    sig: Signal,
    info: *mut SigInfo,
    ctx: *mut c_void,
) -> bool {
    if prev.sa_sigaction == libc::SIG_DFL
        || prev.sa_sigaction == libc::SIG_IGN
        || prev.sa_flags & libc::SA_SIGINFO == 0
    {
        return false;
    }
    // SAFETY: the action was installed with SA_SIGINFO, so its handler field holds a
    // function of exactly this signature (neither SIG_DFL nor SIG_IGN, checked above).
    let f: Handler = unsafe { std::mem::transmute::<usize, Handler>(prev.sa_sigaction) };
    f(sig, info, ctx);
    true
}

/// The faulting address of a SIGSEGV or SIGBUS.
///
/// # Safety
/// `info` must be the pointer the kernel passed to an `SA_SIGINFO` handler for SIGSEGV or
/// SIGBUS (or point to a siginfo of such a fault).
pub unsafe fn fault_address(info: *const SigInfo) -> usize {
    // SAFETY: the caller guarantees `info` is a siginfo for a memory fault, for which si_addr
    // is defined.
    unsafe { (*info).si_addr() as usize }
}

/// Writes `msg` to stderr with one `write(2)`. Async-signal-safe: no allocation, no lock.
pub fn write_stderr(msg: &[u8]) {
    // SAFETY: the kernel reads `msg.len()` bytes from a live slice.
    let _ = unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Ends the process with SIGABRT. Async-signal-safe.
pub fn abort() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// True if the calling thread has an alternate signal stack enabled.
pub fn sigaltstack_enabled() -> bool {
    // SAFETY: a zeroed stack_t is a valid output buffer.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new stack means "query only"; `old` is a live local.
    let ret = unsafe { libc::sigaltstack(ptr::null(), &mut old) };
    ret == 0 && old.ss_flags & libc::SS_DISABLE == 0
}

/// Sets `ptr..ptr+len` as the calling thread's alternate signal stack.
///
/// # Safety
/// The memory must stay mapped, and be used for nothing else, until
/// [`sigaltstack_disable`] runs on the same thread.
pub unsafe fn sigaltstack_set(ptr: *mut u8, len: usize) -> io::Result<()> {
    let st = libc::stack_t {
        ss_sp: ptr.cast(),
        ss_flags: 0,
        ss_size: len,
    };
    // SAFETY: `st` is a live local; the caller guarantees the memory it names stays ours.
    cvt(unsafe { libc::sigaltstack(&st, ptr::null_mut()) })?;
    Ok(())
}

/// Turns the calling thread's alternate signal stack off.
pub fn sigaltstack_disable() {
    let st = libc::stack_t {
        ss_sp: ptr::null_mut(),
        ss_flags: libc::SS_DISABLE,
        ss_size: 0,
    };
    // SAFETY: `st` is a live local; disabling has no memory preconditions.
    unsafe { libc::sigaltstack(&st, ptr::null_mut()) };
}

/// Blocks `signals` in the calling thread; returns the mask it had (for [`set_mask`]). An
/// invalid number is left out.
pub(crate) fn block(signals: &[Signal]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before any other use.
    let mut block: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pthread_sigmask fills it before it is read.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to live locals; sigaddset fails only for an invalid signal number,
    // which leaves that signal out; pthread_sigmask reads `block` and writes `old`.
    unsafe {
        libc::sigemptyset(&mut block);
        for &sig in signals {
            libc::sigaddset(&mut block, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
    }
    old
}

/// Sets the calling thread's signal mask to `mask` (one [`block`] returned).
pub(crate) fn set_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a live sigset_t the kernel only reads.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, ptr::null_mut()) };
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

    /// True if `sig` is blocked in the calling thread.
    pub(crate) fn blocked(sig: Signal) -> bool {
        // SAFETY: sigset_t is plain data, filled by pthread_sigmask before it is read.
        let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a null new mask only reads the current one into `now`, a live local.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, ptr::null(), &mut now) };
        // SAFETY: `now` was filled above.
        unsafe { libc::sigismember(&now, sig) == 1 }
    }

    #[test]
    fn block_then_set_mask_restores_the_thread_mask() {
        std::thread::spawn(|| {
            assert!(!blocked(SIGWINCH));
            let old = block(&[SIGWINCH, -1]);
            assert!(blocked(SIGWINCH));
            set_mask(&old);
            assert!(!blocked(SIGWINCH));
        })
        .join()
        .unwrap();
    }

    static SEEN: AtomicI32 = AtomicI32::new(0);
    static FORWARDED: AtomicI32 = AtomicI32::new(0);

    extern "C" fn note(sig: Signal, _: *mut SigInfo, _: *mut c_void) {
        SEEN.store(sig, SeqCst);
    }

    extern "C" fn forward_note(sig: Signal, _: *mut SigInfo, _: *mut c_void) {
        FORWARDED.store(sig, SeqCst);
    }

    fn raise_here(sig: Signal) {
        // SAFETY: pthread_kill of the calling thread with a valid signal number; a signal
        // sent to the calling thread is delivered before the call returns.
        unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
    }

    /// SIGUSR2 (no other test of the crate uses it): a handler is installed, runs, is
    /// forwarded to from the next one, and the default action comes back.
    #[test]
    fn a_handler_is_installed_runs_is_forwarded_to_and_is_restored() {
        let dfl = sigaction_install(SIGUSR2, note).unwrap();
        assert_eq!(dfl.sa_sigaction, libc::SIG_DFL);
        raise_here(SIGUSR2);
        assert_eq!(SEEN.swap(0, SeqCst), SIGUSR2);
        // The next handler replaces `note`, and hands a signal back to it.
        let prev = sigaction_install(SIGUSR2, forward_note).unwrap();
        raise_here(SIGUSR2);
        assert_eq!((FORWARDED.load(SeqCst), SEEN.load(SeqCst)), (SIGUSR2, 0));
        // SAFETY: a null siginfo and context: `note` reads neither.
        assert!(unsafe { sigaction_forward(&prev, SIGUSR2, ptr::null_mut(), ptr::null_mut()) });
        assert_eq!(SEEN.swap(0, SeqCst), SIGUSR2);
        // The default action is not called.
        // SAFETY: as above; nothing is called.
        assert!(!unsafe { sigaction_forward(&dfl, SIGUSR2, ptr::null_mut(), ptr::null_mut()) });
        sigaction_restore(SIGUSR2, &prev);
        raise_here(SIGUSR2);
        assert_eq!(SEEN.swap(0, SeqCst), SIGUSR2, "`note` is back");
        sigaction_default(SIGUSR2);
        let now = sigaction_install(SIGUSR2, note).unwrap();
        assert_eq!(now.sa_sigaction, libc::SIG_DFL);
        sigaction_restore(SIGUSR2, &dfl);
        assert!(sigaction_install(-1, note).is_err());
    }

    #[test]
    fn the_fault_address_is_read_from_the_siginfo() {
        // SAFETY: siginfo_t is plain data; all-zero is a siginfo with si_addr null.
        let info: SigInfo = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live siginfo whose address field (zero) is defined.
        assert_eq!(unsafe { fault_address(&info) }, 0);
    }

    #[test]
    fn write_stderr_and_abort_in_a_child() {
        let (r, w) = crate::fd::pipe().unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: the child makes only async-signal-safe calls (dup2, setrlimit, write,
        // abort, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: plain descriptor numbers and a live local struct.
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                if libc::dup2(w.as_raw_fd(), 2) < 0 {
                    libc::_exit(1);
                }
            }
            write_stderr(b"to stderr");
            abort();
        }
        drop(w);
        let exit = crate::process::wait(pid).unwrap();
        assert_eq!(exit, crate::process::Exit::Signal(SIGABRT));
        let mut got = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(r), &mut got).unwrap();
        assert_eq!(got, "to stderr");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // sigaltstack/mmap: not supported by miri
    fn an_alternate_signal_stack_is_set_and_disabled() {
        std::thread::spawn(|| {
            sigaltstack_disable();
            assert!(!sigaltstack_enabled());
            let len = 64 * 1024;
            let mem = crate::mem::map_stack_memory(len).unwrap();
            // SAFETY: a fresh mapping of ours, used for nothing else until it is disabled.
            unsafe { sigaltstack_set(mem, len) }.unwrap();
            assert!(sigaltstack_enabled());
            sigaltstack_disable();
            assert!(!sigaltstack_enabled());
            // Smaller than MINSIGSTKSZ: refused.
            // SAFETY: as above (and refused, so never used).
            assert!(unsafe { sigaltstack_set(mem, 1024) }.is_err());
            // SAFETY: the kernel no longer uses the mapping.
            unsafe { crate::mem::unmap(mem, len) };
        })
        .join()
        .unwrap();
    }
}
