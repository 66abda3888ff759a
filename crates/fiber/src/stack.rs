//! Fiber stacks: carved from large lazily-backed mappings, one guard page below each, reused
//! through a per-worker free list.
//!
//! Why not `corosensei::DefaultStack` (one `mmap` + `mprotect` per stack): each such stack is two
//! VMAs, and `vm.max_map_count` is 65,530 here, so a process could hold about 32,000 fibers; a
//! fresh mapping also costs about 11 µs against ~5 ns for a reused stack (issue 3). Here a chunk
//! of stacks is one mapping, and the guard page of each stack is installed with
//! `madvise(MADV_GUARD_INSTALL)` (Linux 6.13+), which marks page-table entries and splits no VMA;
//! older kernels fall back to `mprotect(PROT_NONE)` (two VMAs per stack, as DefaultStack).
//!
//! Pages are touched lazily, so a parked fiber costs only the stack pages it actually used. A
//! stack returned while more than `warm_limit` stacks are already free has its pages given back
//! with `MADV_DONTNEED`, bounding the resident memory a pool keeps after a burst. Below that
//! limit, warm stacks decay: the worker calls [`StackPool::decay`] once a period while it has
//! spare warm stacks, which gives back those no `get` reached during the whole period (a
//! low-water mark, as allocators decay dirty pages), so a burst repeated within the period
//! keeps its stacks resident and a burst that is over gives them back.

use std::cell::RefCell;
use std::io;
use std::num::NonZeroUsize;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};

use corosensei::stack::{Stack, StackPointer};

use weft_sys::mem::{self, GuardKind};

static GUARD_KIND: AtomicU8 = AtomicU8::new(0);

/// How this process installs fiber guard pages: `"madvise-guard"` (no extra VMA per stack),
/// `"mprotect"` (two VMAs per stack), or `"unknown"` before the first fiber ran.
pub fn guard_pages() -> &'static str {
    match GUARD_KIND.load(Ordering::Relaxed) {
        1 => "madvise-guard",
        2 => "mprotect",
        _ => "unknown",
    }
}

/// A pool of equally sized stacks owned by one worker thread.
#[derive(Debug, Clone)]
pub(crate) struct StackPool {
    inner: Rc<RefCell<PoolInner>>,
}

#[derive(Debug)]
struct PoolInner {
    /// Usable bytes per stack (page multiple).
    usable: usize,
    /// Guard bytes below each stack (one page).
    guard: usize,
    /// Stacks per mapping.
    per_chunk: usize,
    /// Every mapping, unmapped when the pool (and every stack) is gone.
    chunks: Vec<(usize, usize)>,
    /// The next never-used slot of the newest chunk, and the chunk's end.
    bump: usize,
    bump_end: usize,
    /// Lowest addresses (guard start) of free stacks; the last pushed is reused first (warm).
    free: Vec<usize>,
    /// `free[..discarded]` have had their pages given back; the rest are warm.
    discarded: usize,
    /// Stacks given back so far (for tests).
    discards: u64,
    /// Fewest warm free stacks since the last `decay`: the oldest this many were not reused
    /// in the period.
    low_water: usize,
    warm_limit: usize,
    guard_kind: Option<GuardKind>,
}

impl StackPool {
    /// A pool of stacks with at least `size` usable bytes each.
    pub(crate) fn new(size: usize, warm_limit: usize) -> StackPool {
        let page = mem::page_size();
        let usable = size.max(corosensei::stack::MIN_STACK_SIZE).div_ceil(page) * page;
        let slot = usable + page;
        // About 4 MiB per mapping: few VMAs, little address space wasted for small pools.
        let per_chunk = ((4 << 20) / slot).clamp(1, 64);
        StackPool {
            inner: Rc::new(RefCell::new(PoolInner {
                usable,
                guard: page,
                per_chunk,
                chunks: Vec::new(),
                bump: 0,
                bump_end: 0,
                free: Vec::new(),
                discarded: 0,
                discards: 0,
                low_water: 0,
                warm_limit,
                guard_kind: None,
            })),
        }
    }

    /// Takes a stack from the free list, or carves a new one.
    pub(crate) fn get(&self) -> io::Result<PooledStack> {
        let mut p = self.inner.borrow_mut();
        let lo = match p.free.pop() {
            Some(lo) => {
                // Popped below the warm part: a discarded stack, paged in again on use.
                p.discarded = p.discarded.min(p.free.len());
                p.low_water = p.low_water.min(p.warm());
                lo
            }
            None => p.carve()?,
        };
        Ok(PooledStack {
            lo,
            guard_end: lo + p.guard,
            top: lo + p.guard + p.usable,
            pool: self.clone(),
        })
    }

    /// How guard pages are installed on this machine (after the first stack was carved).
    #[cfg(test)]
    fn guard_kind(&self) -> Option<GuardKind> {
        self.inner.borrow().guard_kind
    }

    /// Free stacks currently held.
    #[cfg(test)]
    fn free_len(&self) -> usize {
        self.inner.borrow().free.len()
    }

    /// Returns a stack. At most `warm_limit` free stacks keep their pages: past it, the one
    /// that falls out of the warm window (the oldest warm one) is discarded, never the stack
    /// just returned — it is the next one `get` hands out, so discarding it would make every
    /// request after a burst of fibers fault its stack back in (seen: half the throughput).
    fn put(&self, lo: usize) {
        let mut p = self.inner.borrow_mut();
        p.free.push(lo);
        let keep = p.warm_limit;
        p.discard_beyond(keep);
    }

    /// Gives back the pages of the oldest warm free stacks beyond the newest `keep`. Returns
    /// how many it discarded.
    #[cfg(test)]
    fn trim(&self, keep: usize) -> usize {
        self.inner.borrow_mut().discard_beyond(keep)
    }

    /// Whether more than `keep` free stacks are warm (something for [`StackPool::decay`]).
    pub(crate) fn warm_beyond(&self, keep: usize) -> bool {
        self.inner.borrow().warm() > keep
    }

    /// Gives back the pages of the warm free stacks that no `get` reached since the previous
    /// call (the oldest ones: the free list is reused from its newest end), keeping at least
    /// the newest `keep` warm, and starts the next period. The worker calls it once a period
    /// as it goes idle: a burst's warm stacks stay resident while bursts keep coming, and are
    /// given back one period after they stop. Returns how many it discarded.
    pub(crate) fn decay(&self, keep: usize) -> usize {
        let mut p = self.inner.borrow_mut();
        let warm = p.warm();
        let used = warm - p.low_water.min(warm);
        let n = p.discard_beyond(used.max(keep));
        p.low_water = p.warm();
        n
    }

    /// Stacks whose pages were given back so far.
    pub(crate) fn discards(&self) -> u64 {
        self.inner.borrow().discards
    }

    /// Free stacks whose pages are kept.
    pub(crate) fn warm_len(&self) -> usize {
        self.inner.borrow().warm()
    }
}

impl PoolInner {
    /// Free stacks whose pages are (still) resident.
    fn warm(&self) -> usize {
        self.free.len() - self.discarded
    }

    /// Discards the oldest warm free stacks until at most `keep` are warm.
    fn discard_beyond(&mut self, keep: usize) -> usize {
        let mut n = 0;
        while self.warm() > keep {
            let cold = self.free[self.discarded];
            // SAFETY: the usable part of a free stack belongs to no fiber any more.
            unsafe { mem::discard((cold + self.guard) as *mut u8, self.usable) };
            self.discarded += 1;
            self.discards += 1;
            n += 1;
        }
        n
    }

    fn carve(&mut self) -> io::Result<usize> {
        let slot = self.usable + self.guard;
        if self.bump == self.bump_end {
            let len = slot * self.per_chunk;
            let base = mem::map_stack_memory(len)? as usize;
            self.chunks.push((base, len));
            self.bump = base;
            self.bump_end = base + len;
        }
        let lo = self.bump;
        // SAFETY: `lo..lo+guard` is the first page of a never-used slot of our own mapping.
        let kind = unsafe { mem::install_guard(lo as *mut u8, self.guard)? };
        self.guard_kind = Some(kind);
        GUARD_KIND.store(kind as u8 + 1, Ordering::Relaxed);
        self.bump += slot;
        Ok(lo)
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        for &(base, len) in &self.chunks {
            // SAFETY: every stack holds an `Rc` to the pool, so when the pool goes no stack of
            // these mappings is in use.
            unsafe { mem::unmap(base as *mut u8, len) };
        }
    }
}

/// One stack of a [`StackPool`]; returns itself to the pool when dropped.
#[derive(Debug)]
pub(crate) struct PooledStack {
    lo: usize,
    guard_end: usize,
    top: usize,
    pool: StackPool,
}

impl PooledStack {
    /// The guard page range `[start, end)`: a fault there is this stack's overflow.
    pub(crate) fn guard_range(&self) -> (usize, usize) {
        (self.lo, self.guard_end)
    }
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        self.pool.put(self.lo);
    }
}

// SAFETY: `top` and `guard_end` bound a mapped, writable, page-aligned region that this value
// owns exclusively until it is dropped (it is taken off the free list), with a guard page below.
unsafe impl Stack for PooledStack {
    fn base(&self) -> StackPointer {
        NonZeroUsize::new(self.top).expect("stack top is never null")
    }

    fn limit(&self) -> StackPointer {
        NonZeroUsize::new(self.guard_end).expect("stack limit is never null")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn reuses_the_last_returned_stack() {
        let pool = StackPool::new(64 * 1024, 8);
        let a = pool.get().unwrap();
        let a_lo = a.guard_range().0;
        let b = pool.get().unwrap();
        assert_ne!(a_lo, b.guard_range().0);
        drop(a);
        assert_eq!(pool.free_len(), 1);
        let c = pool.get().unwrap();
        assert_eq!(c.guard_range().0, a_lo);
        assert!(c.base().get() - c.limit().get() >= 64 * 1024);
        assert!(pool.guard_kind().is_some());
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn stacks_beyond_the_warm_limit_are_discarded_and_still_usable() {
        let pool = StackPool::new(16 * 1024, 1);
        let stacks: Vec<_> = (0..70).map(|_| pool.get().unwrap()).collect(); // > one chunk
        for s in &stacks {
            // SAFETY: writes inside the usable part of a stack we own.
            unsafe { *((s.base().get() - 8) as *mut u64) = 7 };
        }
        drop(stacks);
        assert_eq!(pool.free_len(), 70);
        let s = pool.get().unwrap();
        // SAFETY: reads inside the usable part of a stack we own; discarded pages read as zero.
        let v = unsafe { *((s.base().get() - 8) as *const u64) };
        assert!(v == 0 || v == 7);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn after_a_burst_a_steady_get_and_put_discards_nothing() {
        let pool = StackPool::new(16 * 1024, 4);
        let burst: Vec<_> = (0..100).map(|_| pool.get().unwrap()).collect();
        drop(burst);
        assert_eq!(pool.free_len(), 100);
        // The burst's return gave back all but the warm four.
        assert_eq!(pool.discards(), 96);
        // A fiber per request from now on: the same warm stack, never discarded again.
        let first = pool.get().unwrap().guard_range().0;
        for _ in 0..1000 {
            let s = pool.get().unwrap();
            assert_eq!(s.guard_range().0, first);
        }
        assert_eq!(pool.discards(), 96);
        // Taking more than the warm ones reaches discarded stacks, and they still work.
        let many: Vec<_> = (0..10).map(|_| pool.get().unwrap()).collect();
        for s in &many {
            // SAFETY: writes inside the usable part of a stack we own.
            unsafe { *((s.base().get() - 8) as *mut u64) = 9 };
        }
        drop(many);
        assert_eq!(pool.free_len(), 100);
        assert_eq!(pool.discards(), 96 + 6);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn trimming_discards_the_oldest_warm_stacks_and_keeps_the_newest() {
        let pool = StackPool::new(16 * 1024, 50);
        let burst: Vec<_> = (0..80).map(|_| pool.get().unwrap()).collect();
        let newest = burst[0].guard_range().0; // returned last below, so reused first
        for s in burst.iter().rev() {
            // SAFETY: writes inside the usable part of a stack we own.
            unsafe { *((s.base().get() - 8) as *mut u64) = 5 };
        }
        drop(burst.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(pool.discards(), 30, "the warm limit kept 50");
        assert_eq!(pool.trim(4), 46);
        assert_eq!(pool.discards(), 76);
        assert_eq!(pool.trim(4), 0, "nothing more to give back");
        assert_eq!(pool.free_len(), 80);
        // The newest stays warm and is handed out first, its bytes intact.
        let s = pool.get().unwrap();
        assert_eq!(s.guard_range().0, newest);
        // SAFETY: reads inside the usable part of a stack we own.
        assert_eq!(unsafe { *((s.base().get() - 8) as *const u64) }, 5);
        // Past the warm four, discarded stacks read as zero and still work.
        let more: Vec<_> = (0..10).map(|_| pool.get().unwrap()).collect();
        // SAFETY: reads inside the usable part of a stack we own.
        let last = unsafe { *((more[9].base().get() - 8) as *const u64) };
        assert_eq!(last, 0);
    }

    /// Regression: trimming to the idle keep at every idle moment made a burst of fibers that
    /// repeats after a pause fault every stack in again (the `spawn` example 10x slower).
    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn a_burst_repeated_within_a_decay_period_keeps_its_stacks_warm() {
        let pool = StackPool::new(16 * 1024, 1024);
        let burst =
            |pool: &StackPool| drop((0..200).map(|_| pool.get().unwrap()).collect::<Vec<_>>());
        burst(&pool);
        assert_eq!(pool.decay(8), 0, "the first period starts with no history");
        for _ in 0..5 {
            burst(&pool);
            assert_eq!(
                pool.decay(8),
                0,
                "every warm stack was reused in the period"
            );
        }
        assert_eq!(pool.discards(), 0);
        assert!(pool.warm_beyond(8));
    }

    #[test]
    #[cfg_attr(miri, ignore)] // mmap/madvise: not supported by miri
    fn decay_gives_back_the_stacks_no_get_reached_in_the_period() {
        let pool = StackPool::new(16 * 1024, 1024);
        let burst: Vec<_> = (0..100).map(|_| pool.get().unwrap()).collect();
        let newest = burst[0].guard_range().0;
        for s in burst.iter().rev() {
            // SAFETY: writes inside the usable part of a stack we own.
            unsafe { *((s.base().get() - 8) as *mut u64) = 3 };
        }
        drop(burst.into_iter().rev().collect::<Vec<_>>()); // `newest` returned last
        assert_eq!(pool.decay(4), 0, "starts the period");
        // A lighter load in the next period: 30 stacks at once at most.
        for _ in 0..10 {
            drop((0..30).map(|_| pool.get().unwrap()).collect::<Vec<_>>());
        }
        assert_eq!(pool.decay(4), 70, "the 70 the period did not reach");
        assert!(pool.warm_beyond(29) && !pool.warm_beyond(30));
        // Idle for a whole period: all but the kept newest four go.
        assert_eq!(pool.decay(4), 26);
        assert!(!pool.warm_beyond(4));
        assert_eq!(pool.decay(4), 0, "nothing more to give back");
        let s = pool.get().unwrap();
        assert_eq!(s.guard_range().0, newest);
        // SAFETY: reads inside the usable part of a stack we own.
        assert_eq!(unsafe { *((s.base().get() - 8) as *const u64) }, 3);
    }
}
