//! The state a runtime's workers share, and their counters: the configuration, each worker's
//! mailbox, epoll and eventfd ([`Remote`]), the shutdown flag and the blocking pool
//! ([`Shared`]).
//!
//! A leaf below the scheduler: it knows nothing of tasks or registrations. The mailbox is
//! generic over its message type, which the task layer fills in (`task::Msg`, with
//! `task::Shared` naming the whole), so everything that holds the shared state — tasks,
//! fd registrations, handles — can sit above this module without this module naming them.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::pool::BlockingPool;
use crate::protocol;
use crate::readiness::Dir;
use crate::sync::lock::Lock;
use weft_sys::epoll::{Epoll, EventFd, EPOLLIN};

/// Where `weft_fiber::spawn` puts a fiber spawned from inside a fiber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpawnPolicy {
    /// On the spawning fiber's own worker (cache-warm, no cross-thread wake-up). The default.
    #[default]
    Local,
    /// On the workers in turn.
    RoundRobin,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) stack_size: usize,
    pub(crate) warm_stacks: usize,
    pub(crate) policy: SpawnPolicy,
    pub(crate) on_round: Option<fn()>,
    pub(crate) max_lingering: usize,
}

pub(crate) struct Inbox<M> {
    pub(crate) msgs: Vec<M>,
    pub(crate) closed: bool,
}

/// Single-writer counters (only the worker stores them), read by `Handle::stats`.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) spawned: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) switches: AtomicU64,
    pub(crate) live: AtomicUsize,
    pub(crate) ready: AtomicUsize,
    pub(crate) running: AtomicUsize,
    /// Connections parked without a fiber (`TcpStream::when_readable`).
    pub(crate) idle: AtomicUsize,
    /// Fibers waiting in `TcpStream::linger`.
    pub(crate) lingering: AtomicUsize,
    /// Free stacks whose pages were given back (published as the worker goes idle).
    pub(crate) stacks_discarded: AtomicU64,
    /// Free stacks whose pages are kept (warm; published as the worker goes idle).
    pub(crate) stacks_warm: AtomicUsize,
    pub(crate) reads: WorkerIo,
    pub(crate) writes: WorkerIo,
}

/// I/O counters of one direction, bumped by the fibers of one worker (on its thread).
#[derive(Debug, Default)]
pub(crate) struct WorkerIo {
    pub(crate) calls: AtomicU64,
    pub(crate) would_block: AtomicU64,
    pub(crate) skipped: AtomicU64,
}

impl WorkerStats {
    pub(crate) fn io(&self, d: Dir) -> &WorkerIo {
        match d {
            Dir::Read => &self.reads,
            Dir::Write => &self.writes,
        }
    }
}

/// Increments a single-writer counter without a locked instruction.
pub(crate) fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// What other threads see of a worker: its mailbox (of messages `M`), its epoll and its
/// counters. Aligned so two workers' hot flags never share a cache line.
#[repr(align(128))]
pub(crate) struct Remote<M> {
    pub(crate) epoll: Epoll,
    pub(crate) eventfd: EventFd,
    pub(crate) inbox: Lock<Inbox<M>>,
    pub(crate) has_msgs: protocol::AtomicBool,
    pub(crate) sleeping: protocol::AtomicBool,
    pub(crate) stats: WorkerStats,
}

impl<M> Remote<M> {
    pub(crate) fn new() -> io::Result<Remote<M>> {
        let epoll = Epoll::new()?;
        let eventfd = EventFd::new()?;
        epoll.add(eventfd.as_raw_fd(), EPOLLIN, 0)?;
        Ok(Remote {
            epoll,
            eventfd,
            inbox: Lock::new(Inbox {
                msgs: Vec::new(),
                closed: false,
            }),
            has_msgs: protocol::AtomicBool::new(false),
            sleeping: protocol::AtomicBool::new(false),
            stats: WorkerStats::default(),
        })
    }

    /// Posts `msg`; wakes the worker if it sleeps. After shutdown the message is dropped here
    /// (a spawn then reports `Cancelled`).
    pub(crate) fn send(&self, msg: M) {
        {
            let mut inbox = self.inbox.lock();
            if inbox.closed {
                drop(inbox);
                drop(msg);
                return;
            }
            inbox.msgs.push(msg);
        }
        if protocol::notify(&self.sleeping, &self.has_msgs) {
            self.eventfd.notify();
        }
    }
}

/// State shared by the workers, their tasks and every handle; `M` is the workers' message.
pub(crate) struct Shared<M> {
    pub(crate) workers: Box<[Remote<M>]>,
    next: AtomicUsize,
    pub(crate) config: Config,
    pub(crate) shutdown: AtomicBool,
    pub(crate) blocking: BlockingPool,
}

impl<M> Shared<M> {
    pub(crate) fn new(workers: Box<[Remote<M>]>, config: Config, blocking: BlockingPool) -> Self {
        Shared {
            workers,
            next: AtomicUsize::new(0),
            config,
            shutdown: AtomicBool::new(false),
            blocking,
        }
    }

    /// The next worker in turn, for round-robin placement.
    pub(crate) fn next_worker(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.workers.len()
    }
}
