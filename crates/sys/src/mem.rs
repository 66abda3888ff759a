//! Memory for fiber stacks: lazily backed anonymous mappings, guard pages (a page-table
//! marker where the kernel has `MADV_GUARD_INSTALL`, else `mprotect`), and giving pages back.
//!
//! The functions that take a range are `unsafe`: only the caller (the fiber runtime's stack
//! pool) knows that nothing lives in it any more.

use std::io;
use std::ptr;

use crate::cvt;

/// The size of a memory page in bytes (`sysconf(_SC_PAGESIZE)`; 4096 if unknown).
pub fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// `MADV_GUARD_INSTALL` (Linux 6.13): turns pages into guard pages without splitting the VMA.
/// Not yet in the `libc` crate. <https://docs.kernel.org/mm/process_addrs.html> ("guard regions")
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Reserves `len` bytes of readable, writable, lazily backed anonymous memory.
pub fn map_stack_memory(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
    // existing memory; the result is checked against MAP_FAILED.
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
pub unsafe fn unmap(ptr: *mut u8, len: usize) {
    // SAFETY: the caller guarantees the range is an unused mapping of ours.
    let ret = unsafe { libc::munmap(ptr.cast(), len) };
    debug_assert_eq!(ret, 0, "munmap failed: {}", io::Error::last_os_error());
}

/// How a guard page was installed: the result decides how many VMAs a stack costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: a page-table marker, no extra VMA.
    Marker,
    /// `mprotect(PROT_NONE)`: splits the mapping (two VMAs per stack).
    Mprotect,
}

/// Makes `ptr..ptr+len` (page aligned, inside a mapping of ours) fault on any access.
///
/// # Safety
/// The range must lie inside a mapping from [`map_stack_memory`] that holds no live data.
pub unsafe fn install_guard(ptr: *mut u8, len: usize) -> io::Result<GuardKind> {
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
pub unsafe fn install_guard_mprotect(ptr: *mut u8, len: usize) -> io::Result<GuardKind> {
    // SAFETY: the caller guarantees the range is ours and unused; mprotect only changes the
    // protection of those pages.
    cvt(unsafe { libc::mprotect(ptr.cast(), len, libc::PROT_NONE) })?;
    Ok(GuardKind::Mprotect)
}

/// Gives the physical pages of `ptr..ptr+len` back to the kernel; they read as zero later.
///
/// # Safety
/// The range must be inside a mapping of ours and hold no live data.
pub unsafe fn discard(ptr: *mut u8, len: usize) {
    // SAFETY: the caller guarantees the pages hold nothing anyone reads again.
    let _ = unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn mapped_memory_is_writable_and_discarded_pages_read_as_zero() {
        let page = page_size();
        let mem = map_stack_memory(4 * page).unwrap();
        // SAFETY: the mapping is ours, four pages long, and nothing else uses it.
        unsafe {
            mem.write(1);
            mem.add(3 * page).write(3);
            discard(mem, page);
            assert_eq!((mem.read(), mem.add(3 * page).read()), (0, 3));
            unmap(mem, 4 * page);
        }
        assert!(map_stack_memory(usize::MAX).is_err());
    }

    /// Touches the middle page of a fresh three-page mapping after `guard` made it a guard
    /// page, in a child process: the child dies of SIGSEGV (SIGBUS for some markers).
    fn guarded_middle_page_faults(
        guard: unsafe fn(*mut u8, usize) -> io::Result<GuardKind>,
    ) -> GuardKind {
        let page = page_size();
        let mem = map_stack_memory(3 * page).unwrap();
        // SAFETY: the middle page of our fresh, unused mapping.
        let kind = unsafe { guard(mem.add(page), page) }.unwrap();
        // SAFETY: the pages around the guard stay writable; the mapping is ours.
        unsafe {
            mem.write(1);
            mem.add(2 * page).write(2);
            assert_eq!(mem.read() + mem.add(2 * page).read(), 3);
        }
        // SAFETY: the child only sets a resource limit, then touches the guard page (a fault
        // that kills it) or exits: no lock, no allocation.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: a live local struct; then a write into our own mapping, which the guard
            // turns into a fault (the child dies; nothing else shares its memory).
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                std::ptr::write_volatile(mem.add(page), 9);
                libc::_exit(0);
            }
        }
        let exit = crate::process::wait(pid).unwrap();
        assert!(
            matches!(
                exit,
                crate::process::Exit::Signal(libc::SIGSEGV | libc::SIGBUS)
            ),
            "{kind:?}: {exit:?}"
        );
        // SAFETY: nothing uses the mapping any more.
        unsafe { unmap(mem, 3 * page) };
        kind
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise/fork: not supported by miri
    fn a_guard_page_faults() {
        guarded_middle_page_faults(install_guard);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/mprotect/fork: not supported by miri
    fn the_mprotect_fallback_guards_a_page_of_a_shared_mapping() {
        let kind = guarded_middle_page_faults(install_guard_mprotect);
        assert_eq!(kind, GuardKind::Mprotect);
    }
}
