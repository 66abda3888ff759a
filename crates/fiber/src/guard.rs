//! Stack-overflow detection: a fiber that runs into its guard page ends the process with
//! `weft-fiber: stack overflow in fiber <id>` instead of corrupting memory or dying silently.
//!
//! A SIGSEGV/SIGBUS handler runs on the thread's alternate signal stack (the fiber's own stack
//! is exhausted). Before each resume the worker stores the fiber's guard-page range and id in a
//! thread-local `Cell` (a `#[thread_local]` slot with const init and no destructor, so reading it
//! in the handler allocates nothing and takes no lock). A fault inside that range writes the
//! message with one `write(2)` and `abort()`s; any other fault goes to the previously installed
//! handler (Rust's own stack-overflow reporter, or the default action).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::io;
use std::sync::OnceLock;

use weft_sys::mem::{map_stack_memory, unmap};
use weft_sys::signal::{self, SigAction, SigInfo, SIGBUS, SIGSEGV};

thread_local! {
    /// (guard start, guard end, usable stack bytes, fiber id) of the fiber this thread runs.
    static RUNNING: Cell<(usize, usize, usize, u64)> = const { Cell::new((0, 0, 0, 0)) };
}

/// Records the fiber about to run on this thread. `guard` is (start, end, usable size).
pub(crate) fn enter(guard: (usize, usize, usize), id: u64) {
    RUNNING.with(|r| r.set((guard.0, guard.1, guard.2, id)));
}

static PREVIOUS: OnceLock<[SigAction; 2]> = OnceLock::new();

/// Installs the process-wide handler once (the first runtime built does it).
pub(crate) fn install_process_handler() -> io::Result<()> {
    if PREVIOUS.get().is_some() {
        return Ok(());
    }
    static INSTALLING: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    INSTALLING.call_once(|| {
        let segv = signal::sigaction_install(SIGSEGV, handler);
        let bus = signal::sigaction_install(SIGBUS, handler);
        match (segv, bus) {
            (Ok(a), Ok(b)) => {
                let _ = PREVIOUS.set([a, b]);
            }
            (Err(e), _) | (_, Err(e)) => result = Err(e),
        }
    });
    result
}

extern "C" fn handler(sig: c_int, info: *mut SigInfo, ctx: *mut c_void) {
    // SAFETY: the kernel calls an SA_SIGINFO handler for SIGSEGV/SIGBUS with a valid siginfo.
    let addr = unsafe { signal::fault_address(info) };
    let (lo, hi, size, id) = RUNNING.with(|r| r.get());
    if lo <= addr && addr < hi {
        let mut buf = [0u8; 160];
        let mut w = Buf {
            buf: &mut buf,
            len: 0,
        };
        w.put(b"weft-fiber: stack overflow in fiber ");
        w.num(id);
        w.put(b" (stack of ");
        w.num(size as u64);
        w.put(b" bytes; raise Builder::stack_size); aborting\n");
        let len = w.len;
        signal::write_stderr(&buf[..len]);
        signal::abort();
    }
    chain(sig, info, ctx);
}

/// Hands a fault that is not a fiber overflow to the handler that was there before ours.
fn chain(sig: c_int, info: *mut SigInfo, ctx: *mut c_void) {
    let idx = usize::from(sig == SIGBUS);
    let forwarded = PREVIOUS.get().is_some_and(|prev| {
        // SAFETY: `sig`, `info` and `ctx` are the kernel's arguments to `handler`, our
        // SA_SIGINFO handler for this signal.
        unsafe { signal::sigaction_forward(&prev[idx], sig, info, ctx) }
    });
    if !forwarded {
        // Default (or a handler we cannot call): restore the default action and return; the
        // faulting instruction runs again and the kernel applies it (core dump / kill).
        signal::sigaction_default(sig);
    }
}

/// A fixed buffer writer usable in a signal handler (no allocation, no formatting machinery).
struct Buf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Buf<'_> {
    fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn num(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..]);
    }
}

/// Size of the alternate signal stack a worker installs when its thread has none.
const ALTSTACK_SIZE: usize = 64 * 1024;

/// Gives a worker thread an alternate signal stack if it has none (Rust's runtime gives its
/// own threads one when it installed its overflow handler; embedders may not), and takes it
/// away again on drop.
#[derive(Debug)]
pub(crate) struct ThreadGuard {
    ours: Option<*mut u8>,
    len: usize,
}

impl ThreadGuard {
    pub(crate) fn install() -> ThreadGuard {
        if signal::sigaltstack_enabled() {
            return ThreadGuard { ours: None, len: 0 };
        }
        ThreadGuard::install_sized(ALTSTACK_SIZE)
    }

    fn install_sized(len: usize) -> ThreadGuard {
        let Ok(mem) = map_stack_memory(len) else {
            return ThreadGuard { ours: None, len: 0 };
        };
        // SAFETY: `mem` is a fresh mapping of `len` bytes that we keep mapped and unused
        // otherwise until `drop` disables the alternate stack on this same thread.
        match unsafe { signal::sigaltstack_set(mem, len) } {
            Ok(()) => ThreadGuard {
                ours: Some(mem),
                len,
            },
            Err(_) => {
                // SAFETY: the mapping was never handed to the kernel as a signal stack.
                unsafe { unmap(mem, len) };
                ThreadGuard { ours: None, len: 0 }
            }
        }
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        if let Some(mem) = self.ours {
            signal::sigaltstack_disable();
            // SAFETY: the kernel no longer uses the memory as this thread's signal stack.
            unsafe { unmap(mem, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_formatting_needs_no_allocator() {
        let mut buf = [0u8; 40];
        let mut w = Buf {
            buf: &mut buf,
            len: 0,
        };
        w.put(b"fiber ");
        w.num(0);
        w.put(b" ");
        w.num(18_446_744_073_709_551_615);
        let len = w.len;
        assert_eq!(&buf[..len], b"fiber 0 18446744073709551615");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // sigaltstack/mmap: not supported by miri
    fn a_thread_without_an_altstack_gets_one() {
        std::thread::spawn(|| {
            signal::sigaltstack_disable();
            assert!(!signal::sigaltstack_enabled());
            let g = ThreadGuard::install();
            assert!(g.ours.is_some());
            assert!(signal::sigaltstack_enabled());
            drop(g);
            assert!(!signal::sigaltstack_enabled());
            // Smaller than MINSIGSTKSZ: the kernel refuses it and the mapping is given back.
            let g = ThreadGuard::install_sized(1024);
            assert!(g.ours.is_none());
        })
        .join()
        .unwrap();
    }
}
