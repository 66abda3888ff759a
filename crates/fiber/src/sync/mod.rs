//! Fiber-aware synchronisation: [`Mutex`], [`channel`] / [`bounded`], [`WaitGroup`].
//!
//! Each parks the waiting *fiber* (its worker runs other fibers meanwhile) and, called from a
//! plain thread, blocks that thread — so the same code works in the fiber and thread models.

pub(crate) mod lock;
mod mpsc;
mod mutex;
pub(crate) mod signal;
mod waitgroup;

pub use mpsc::{
    bounded, channel, Receiver, RecvError, RecvTimeoutError, SendError, Sender, TryRecvError,
    TrySendError,
};
pub use mutex::{Mutex, MutexGuard};
pub use waitgroup::WaitGroup;
