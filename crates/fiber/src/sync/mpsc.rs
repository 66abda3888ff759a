//! Multi-producer, single-consumer channels that park fibers (or block threads).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lock::Lock;
use super::signal::Signal;
use crate::sched::{self, Waker};

struct State<T> {
    queue: VecDeque<T>,
    /// The receiver, parked on an empty queue.
    receiver: Option<Waker>,
    /// Senders parked on a full bounded queue, first come first served.
    senders_waiting: VecDeque<Arc<Signal>>,
    senders: usize,
    receiver_alive: bool,
}

struct Chan<T> {
    state: Lock<State<T>>,
    cap: Option<usize>,
}

/// An unbounded channel: `send` never waits.
///
/// ```
/// let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
/// let (tx, rx) = weft_fiber::sync::channel();
/// rt.spawn(move || for i in 0..3 { tx.send(i).unwrap() });
/// assert_eq!(rx.iter().collect::<Vec<_>>(), [0, 1, 2]); // from a plain thread
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    make(None)
}

/// A channel holding at most `cap` messages (at least 1): `send` waits while it is full.
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    make(Some(cap.max(1)))
}

fn make<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Lock::new(State {
            queue: VecDeque::new(),
            receiver: None,
            senders_waiting: VecDeque::new(),
            senders: 1,
            receiver_alive: true,
        }),
        cap,
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// The receiver is gone; the message comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why `try_send` did not send.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// A bounded channel is full.
    Full(T),
    /// The receiver is gone.
    Disconnected(T),
}

/// Every sender is gone and the queue is empty.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

/// Why `try_recv` returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// Nothing queued right now.
    Empty,
    /// Every sender is gone and the queue is empty.
    Disconnected,
}

/// Why `recv_timeout` returned nothing.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// The timeout passed.
    Timeout,
    /// Every sender is gone and the queue is empty.
    Disconnected,
}

impl<T> Sender<T> {
    /// Sends `v`, waiting while a bounded channel is full.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        let mut v = v;
        loop {
            match self.try_send(v) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(x)) => return Err(SendError(x)),
                Err(TrySendError::Full(x)) => {
                    let sig = {
                        let mut s = self.chan.state.lock();
                        if !s.receiver_alive {
                            return Err(SendError(x));
                        }
                        if s.queue.len() < self.chan.cap.unwrap_or(usize::MAX) {
                            v = x; // room appeared since try_send
                            continue;
                        }
                        let sig = Signal::for_current();
                        s.senders_waiting.push_back(sig.clone());
                        sig
                    };
                    sig.wait(None);
                    v = x;
                }
            }
        }
    }

    /// Sends `v` if there is room, without waiting.
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        let receiver = {
            let mut s = self.chan.state.lock();
            if !s.receiver_alive {
                return Err(TrySendError::Disconnected(v));
            }
            if s.queue.len() >= self.chan.cap.unwrap_or(usize::MAX) {
                return Err(TrySendError::Full(v));
            }
            s.queue.push_back(v);
            s.receiver.take()
        };
        if let Some(w) = receiver {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.state.lock().senders += 1;
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let receiver = {
            let mut s = self.chan.state.lock();
            s.senders -= 1;
            if s.senders == 0 {
                s.receiver.take()
            } else {
                None
            }
        };
        if let Some(w) = receiver {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Takes the next message, waiting for one; fails once every sender is gone and the
    /// queue is drained.
    pub fn recv(&self) -> Result<T, RecvError> {
        match self.recv_deadline(None) {
            Ok(v) => Ok(v),
            Err(_) => Err(RecvError),
        }
    }

    /// As [`Receiver::recv`], giving up after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_deadline(Some(Instant::now() + timeout))
    }

    /// Takes a message if one is queued.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let (v, sender) = {
            let mut s = self.chan.state.lock();
            match s.queue.pop_front() {
                Some(v) => (v, s.senders_waiting.pop_front()),
                None if s.senders == 0 => return Err(TryRecvError::Disconnected),
                None => return Err(TryRecvError::Empty),
            }
        };
        if let Some(sig) = sender {
            sig.fire();
        }
        Ok(v)
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        loop {
            {
                let mut s = self.chan.state.lock();
                if let Some(v) = s.queue.pop_front() {
                    let sender = s.senders_waiting.pop_front();
                    drop(s);
                    if let Some(sig) = sender {
                        sig.fire();
                    }
                    return Ok(v);
                }
                if s.senders == 0 {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    s.receiver = None;
                    return Err(RecvTimeoutError::Timeout);
                }
                s.receiver = Some(Waker::current());
            }
            sched::park(deadline);
        }
    }

    /// Messages until every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (queued, senders) = {
            let mut s = self.chan.state.lock();
            s.receiver_alive = false;
            (
                std::mem::take(&mut s.queue),
                std::mem::take(&mut s.senders_waiting),
            )
        };
        drop(queued);
        for sig in senders {
            sig.fire();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receiver is gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a channel whose senders are all gone")
    }
}

impl std::error::Error for RecvError {}
