//! Fiber-aware synchronisation: [`Mutex`], [`channel`] / [`bounded`], [`WaitGroup`], and
//! [`Interrupt`] to end blocked accepts.
//!
//! Each parks the waiting *fiber* (its worker runs other fibers meanwhile) and, called from a
//! plain thread, blocks that thread — so the same code works in the fiber and thread models.

pub(crate) mod lock;
mod mpsc;
mod mutex;
pub(crate) mod signal;
mod waitgroup;

pub use crate::interrupt::Interrupt;
pub use mpsc::{
    bounded, channel, Receiver, RecvError, RecvTimeoutError, SendError, Sender, TryRecvError,
    TrySendError,
};
pub use mutex::{Mutex, MutexGuard};
pub use waitgroup::WaitGroup;

/// Plain-thread tests of the primitives (no runtime, no inline asm): the part of the crate
/// `cargo miri test --lib` can run.
#[cfg(test)]
mod thread_tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn mutex_across_threads() {
        let m = Arc::new(Mutex::new(0u32));
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 200);
    }

    #[test]
    fn bounded_channel_and_wait_group_across_threads() {
        let (tx, rx) = bounded::<u32>(1);
        let wg = WaitGroup::new();
        wg.add(2);
        let ts: Vec<_> = (0..2)
            .map(|i| {
                let (tx, wg) = (tx.clone(), wg.clone());
                std::thread::spawn(move || {
                    for j in 0..20 {
                        tx.send(i * 100 + j).unwrap();
                    }
                    wg.done();
                })
            })
            .collect();
        drop(tx);
        let mut got: Vec<u32> = rx.iter().collect();
        wg.wait();
        for t in ts {
            t.join().unwrap();
        }
        got.sort();
        assert_eq!(got.len(), 40);
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Disconnected)
        );
    }
}
