//! The two lock-free handshakes of the scheduler, kept apart so loom can model-check them
//! (`RUSTFLAGS="--cfg loom" cargo test -p weft-fiber --release --lib loom_models`).
//!
//! 1. Park/unpark: a fiber that decided to park suspends first, and only then does its worker
//!    move it `RUNNING -> PARKED`; an unpark in between finds `RUNNING` and leaves `NOTIFIED`,
//!    so the worker requeues the fiber instead. Exactly one side enqueues it: no wake-up is
//!    lost and none is doubled.
//! 2. Sleep/notify: a worker announces `sleeping` before its last look at `has_msgs`; a sender
//!    sets `has_msgs` before it looks at `sleeping` — the store-buffering (Dekker) pattern. A
//!    `SeqCst` fence between the store and the load on each side orders the two fences, so
//!    either the worker sees the message or the sender sees the sleeper and writes the
//!    eventfd. (The first version relied on `SeqCst` accesses alone, which is correct in the
//!    C++ model but which loom models as acquire/release and reported as a lost wake-up; the
//!    fences make the argument explicit and checkable, and cost nothing next to the syscalls
//!    on both paths.)

#[cfg(loom)]
use loom::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU8};
#[cfg(not(loom))]
use std::sync::atomic::fence;
use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8};

pub(crate) const SCHEDULED: u8 = 0;
pub(crate) const RUNNING: u8 = 1;
pub(crate) const NOTIFIED: u8 = 2;
pub(crate) const PARKED: u8 = 3;
pub(crate) const DONE: u8 = 4;

/// Unpark: `PARKED -> SCHEDULED` (true: the caller must enqueue the task) or
/// `RUNNING -> NOTIFIED` (false); any other state: nothing to do (false).
pub(crate) fn unpark(state: &AtomicU8) -> bool {
    let mut s = state.load(Ordering::Acquire);
    loop {
        let next = match s {
            PARKED => SCHEDULED,
            RUNNING => NOTIFIED,
            _ => return false,
        };
        match state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return next == SCHEDULED,
            Err(actual) => s = actual,
        }
    }
}

/// The worker, after a fiber suspended to park: true if it is parked now; false if it was
/// unparked while still running — then it is `SCHEDULED` and the worker must requeue it.
pub(crate) fn park(state: &AtomicU8) -> bool {
    if state
        .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return true;
    }
    state.store(SCHEDULED, Ordering::Relaxed);
    false
}

/// The worker, about to block in `epoll_wait`: true if it may sleep (no message pending).
/// When false it has taken `sleeping` back.
pub(crate) fn announce_sleep(sleeping: &AtomicBool, has_msgs: &AtomicBool) -> bool {
    sleeping.store(true, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if has_msgs.load(Ordering::SeqCst) {
        sleeping.store(false, Ordering::Relaxed);
        return false;
    }
    true
}

/// A sender, after queueing a message: true if it must write the worker's eventfd.
pub(crate) fn notify(sleeping: &AtomicBool, has_msgs: &AtomicBool) -> bool {
    has_msgs.store(true, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    sleeping.swap(false, Ordering::SeqCst)
}

/// The `READY` bit of a readiness word: an edge came since the fd last showed itself drained.
pub(crate) const READY: u32 = 1;
/// The `CLOSED` bit: the edge said the direction is closed for good (peer close, hang-up,
/// error), so the next syscall will not block — a read returns 0 or the error. A short read
/// leaves it set (the data and the close often come in one edge, and no later edge repeats the
/// close); only an `EAGAIN`, which contradicts it, clears it. The other 30 bits count edges.
pub(crate) const CLOSED: u32 = 2;
const TICK: u32 = 4;

/// Whether a readiness word says the syscall is worth making.
pub(crate) fn is_ready(word: u32) -> bool {
    word & (READY | CLOSED) != 0
}

/// An epoll edge: bump the tick, set `READY` (and `CLOSED` if `closed`), in one atomic
/// read-modify-write.
pub(crate) fn ready_event(word: &AtomicU32, closed: bool) {
    let set = if closed { READY | CLOSED } else { READY };
    let _ = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
        Some((w | set).wrapping_add(TICK))
    });
}

/// A syscall made after `snap` was loaded showed the fd drained: a short transfer (clears
/// `READY`) or `EAGAIN` (clears `READY` and `CLOSED`). Nothing changes if an edge arrived
/// since: the word moved on and stays ready.
pub(crate) fn ready_clear(word: &AtomicU32, snap: u32, would_block: bool) {
    let new = if would_block {
        snap & !(READY | CLOSED)
    } else {
        snap & !READY
    };
    if new != snap {
        let _ = word.compare_exchange(snap, new, Ordering::AcqRel, Ordering::Relaxed);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// A fiber checks its condition and parks; a waker sets the condition and unparks. The
    /// fiber must end up enqueued exactly once when it parked, never when it did not.
    #[test]
    fn park_unpark_never_loses_or_doubles_a_wake_up() {
        loom::model(|| {
            let state = Arc::new(AtomicU8::new(RUNNING));
            let cond = Arc::new(AtomicBool::new(false));
            let enqueued = Arc::new(AtomicUsize::new(0));
            let waker = {
                let (state, cond, enqueued) = (state.clone(), cond.clone(), enqueued.clone());
                thread::spawn(move || {
                    cond.store(true, Ordering::SeqCst);
                    if unpark(&state) {
                        enqueued.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            let saw = cond.load(Ordering::SeqCst);
            if !saw && !park(&state) {
                enqueued.fetch_add(1, Ordering::SeqCst); // requeued by the worker
            }
            waker.join().unwrap();
            let n = enqueued.load(Ordering::SeqCst);
            if saw {
                assert_eq!(n, 0);
            } else {
                assert_eq!(n, 1, "parked fiber must be enqueued exactly once");
                assert_eq!(state.load(Ordering::SeqCst), SCHEDULED);
            }
        });
    }

    /// Two wakers race for one parked fiber: one enqueue.
    #[test]
    fn concurrent_unparks_enqueue_once() {
        loom::model(|| {
            let state = Arc::new(AtomicU8::new(PARKED));
            let enqueued = Arc::new(AtomicUsize::new(0));
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    let (state, enqueued) = (state.clone(), enqueued.clone());
                    thread::spawn(move || {
                        if unpark(&state) {
                            enqueued.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(enqueued.load(Ordering::SeqCst), 1);
        });
    }

    /// A reader drains the fd while data arrives and its edge is processed: whatever the
    /// interleaving, data left unread means the word says `READY` (the next read makes the
    /// syscall instead of parking for an edge that already came).
    #[test]
    fn readiness_is_never_cleared_over_unread_data() {
        loom::model(|| {
            let word = Arc::new(AtomicU32::new(READY));
            // Bytes in the socket: the "kernel" adds one, the reader takes all.
            let queued = Arc::new(AtomicUsize::new(0));
            let peer = {
                let (word, queued) = (word.clone(), queued.clone());
                thread::spawn(move || {
                    queued.fetch_add(1, Ordering::SeqCst); // data arrives ...
                    ready_event(&word, false); // ... and its edge reaches the worker
                })
            };
            let snap = word.load(Ordering::Acquire);
            let got = queued.swap(0, Ordering::SeqCst); // the read syscall
            ready_clear(&word, snap, got == 0); // EAGAIN, or a short read
            peer.join().unwrap();
            if queued.load(Ordering::SeqCst) > 0 {
                assert!(
                    is_ready(word.load(Ordering::SeqCst)),
                    "unread data, not ready"
                );
            }
        });
    }

    /// Data and the peer's close come in one edge; the short read that takes the data must
    /// not hide the end of stream from the next read.
    #[test]
    fn a_close_survives_the_short_read_of_its_edge() {
        loom::model(|| {
            let word = Arc::new(AtomicU32::new(0));
            let peer = {
                let word = word.clone();
                thread::spawn(move || ready_event(&word, true)) // data + FIN, one edge
            };
            let reader = {
                let word = word.clone();
                thread::spawn(move || {
                    let snap = word.load(Ordering::Acquire);
                    if is_ready(snap) {
                        ready_clear(&word, snap, false); // the read returned the data, short
                    }
                })
            };
            peer.join().unwrap();
            reader.join().unwrap();
            assert!(is_ready(word.load(Ordering::SeqCst)), "the close was lost");
        });
    }

    /// The worker either sees the pending message or is signalled.
    #[test]
    fn a_sleeping_worker_is_always_notified() {
        loom::model(|| {
            let sleeping = Arc::new(AtomicBool::new(false));
            let has_msgs = Arc::new(AtomicBool::new(false));
            let sender = {
                let (sleeping, has_msgs) = (sleeping.clone(), has_msgs.clone());
                thread::spawn(move || notify(&sleeping, &has_msgs))
            };
            let sleeps = announce_sleep(&sleeping, &has_msgs);
            let signalled = sender.join().unwrap();
            assert!(
                !sleeps || signalled,
                "worker slept on a message without a signal"
            );
        });
    }
}
