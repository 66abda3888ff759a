//! Memory shared across `fork`: [`Shared`] and [`SharedSlice`] hold zeroed values in an
//! anonymous `MAP_SHARED` mapping, so counters one process adds to are seen by the processes
//! forked after the mapping was made (the `process` model's master and its children).
//!
//! Only [`AtomicsOnly`] types may live there (an `unsafe trait`: all-zero bytes valid, no
//! pointers, changed only through atomics), so nothing in shared memory means something in
//! one process only. Where no mapping can be made, the values live in this process's own
//! memory (then nothing is shared) and a warning is logged.

use std::io;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

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

    /// A child made with the raw call (this test process is threaded, so the child does only
    /// async-signal-safe things: atomic adds and `_exit`) adds to shared memory; the parent
    /// sees its additions.
    #[test]
    fn shared_counters_and_tables_cross_fork() {
        let counters: Shared<[AtomicU64; 2]> = Shared::default();
        assert!(counters.mapped);
        let table: SharedSlice<AtomicU64> = SharedSlice::new(1000);
        assert!(table.mapped);
        assert_eq!(table.len(), 1000);
        assert!(table.iter().all(|c| c.load(SeqCst) == 0));
        counters[0].store(5, SeqCst);
        // SAFETY: the child performs only atomic adds and _exit, all async-signal-safe.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            counters[0].fetch_add(2, SeqCst);
            table[999].fetch_add(4, SeqCst);
            crate::process::exit_now(7);
        }
        assert_eq!(
            crate::process::wait(pid).unwrap(),
            crate::process::Exit::Code(7)
        );
        assert_eq!(counters[0].load(SeqCst), 7);
        assert_eq!(table[999].load(SeqCst), 4);
        // At least one entry, however few were asked for.
        let one: SharedSlice<AtomicU64> = SharedSlice::new(0);
        assert_eq!(one.len(), 1);
        assert!(format!("{counters:?} {one:?}").contains("mapped: true"));
    }
}
