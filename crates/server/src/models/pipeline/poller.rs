//! The waiting room: connections that wait for the socket (a request's bytes, room to send,
//! the end of a lingering close) sit here, in one epoll instance, with a deadline each.
//!
//! One thread waits in `epoll_wait` over every waiting connection and hands each ready one to
//! the stage that continues it: readable ones to receive, writable ones to send. Deadlines
//! are the config's timeouts (header read, keep-alive idle, send); on expiry the poller closes
//! the connection, or for a head cut short queues a 408 for send.
//!
//! Registrations are level-triggered and one-shot (`EPOLLONESHOT`): a connection is armed only
//! while it is here, so exactly one thread owns it at any time, and bytes that arrived before
//! it was armed are still reported (edge-triggered would lose them). Each parking gets a new
//! token (a key of the timing wheel in `wheel.rs`, which holds the parked connections and
//! their deadlines, O(1) to park, wake and expire); an event for a token no longer here is
//! stale and ignored. A connection is
//! armed under the same lock that the poller takes to remove it, so the poller can never close
//! a socket between its registration and its arming.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::wheel::Wheel;
use super::{Conn, Pipeline};
use crate::sys::{Epoll, EpollEvent, EventFd};

/// What a parked connection waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Bytes of a request head: the next request of an idle connection or the rest of a
    /// partial head (the connection's read buffer says which).
    Request,
    /// Room in the send buffer for the rest of a response.
    Writable,
    /// The peer's end of stream after the last response (bounded drain, then close).
    Linger,
}

/// The token of the wake-up eventfd.
const WAKE: u64 = u64::MAX;
/// Longest `epoll_wait`, so a stop request is seen without a wake-up.
const TICK: Duration = Duration::from_millis(100);
/// Reads of a lingering connection per wake-up before it goes back to waiting.
const LINGER_READS: usize = 16;

struct Parked {
    conn: Box<Conn>,
    wait: Wait,
}

struct Room {
    /// The parked connections, by token, with their deadlines.
    parked: Wheel<Parked>,
    /// Until when the poller thread sleeps in `epoll_wait` (a park due earlier wakes it).
    sleep_until: Instant,
    /// Connections with a request already buffered, for receive, that found its queue full.
    #[allow(clippy::vec_box)] // reason: the boxes move on into stage queues as they are
    ready: Vec<Box<Conn>>,
}

/// The epoll waiting room.
pub(crate) struct Poller {
    epoll: Epoll,
    wake: EventFd,
    room: Mutex<Room>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl Poller {
    pub(crate) fn new() -> std::io::Result<Poller> {
        let epoll = Epoll::new()?;
        let wake = EventFd::new()?;
        epoll.add(wake.raw_fd(), libc::EPOLLIN as u32, WAKE)?;
        Ok(Poller {
            epoll,
            wake,
            room: Mutex::new(Room {
                parked: Wheel::new(Instant::now()),
                sleep_until: Instant::now(),
                ready: Vec::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Room> {
        self.room.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks `conn` until its socket is ready for `wait` or `deadline` passes. A socket that
    /// cannot be watched (closed by the peer meanwhile) is closed.
    pub(crate) fn park(&self, mut conn: Box<Conn>, wait: Wait, deadline: Instant) {
        let fd = conn.stream.as_raw_fd();
        let events = match wait {
            Wait::Request | Wait::Linger => libc::EPOLLIN | libc::EPOLLRDHUP,
            Wait::Writable => libc::EPOLLOUT,
        } as u32
            | libc::EPOLLONESHOT as u32;
        let mut room = self.lock();
        let was_in_epoll = conn.in_epoll;
        conn.in_epoll = true;
        let token = room.parked.insert(Parked { conn, wait }, deadline);
        let armed = if was_in_epoll {
            self.epoll.modify(fd, events, token)
        } else {
            self.epoll.add(fd, events, token)
        };
        if let Err(e) = armed {
            let parked = room.parked.remove(token);
            drop(room);
            if let Some(Parked { conn, .. }) = parked {
                log::debug!("{}: cannot wait for the socket: {e}", conn.info.peer);
            }
            return;
        }
        let wake = room.parked.fires_at(deadline) < room.sleep_until;
        drop(room);
        if wake {
            // The poller may sleep past this deadline otherwise.
            self.wake.notify();
        }
    }

    /// Hands `conn` (a request already buffered) to receive from the poller thread, for a
    /// stage that must not wait for room in receive's queue.
    pub(crate) fn ready(&self, conn: Box<Conn>) {
        self.lock().ready.push(conn);
        self.wake.notify();
    }

    /// Wakes the poller thread (to see a stop request).
    pub(crate) fn notify(&self) {
        self.wake.notify();
    }

    /// Connections parked now.
    pub(crate) fn len(&self) -> usize {
        self.lock().parked.len()
    }

    /// Drops every parked connection (at the end of shutdown).
    pub(crate) fn clear(&self) {
        let (parked, ready) = {
            let mut room = self.lock();
            (room.parked.drain(), std::mem::take(&mut room.ready))
        };
        drop(parked);
        drop(ready);
    }
}

/// The poller thread: waits for events and deadlines until the pipeline stops.
pub(crate) fn run(p: &Pipeline) {
    let poller = &p.poller;
    let mut events: Vec<EpollEvent> = Vec::with_capacity(64);
    while !p.stopped.load(SeqCst) {
        let timeout = {
            let mut room = poller.lock();
            let now = Instant::now();
            let timeout = room
                .parked
                .next_due()
                .map_or(TICK, |d| d.saturating_duration_since(now).min(TICK));
            room.sleep_until = now + timeout;
            timeout
        };
        if let Err(e) = poller.epoll.wait(&mut events, 64, timeout) {
            log::error!("pipeline poller: epoll_wait failed: {e}");
            std::thread::sleep(TICK);
            continue;
        }
        // Awake: a park need not wake the thread until it waits again.
        poller.lock().sleep_until = Instant::now();
        for ev in &events {
            if ev.token == WAKE {
                poller.wake.drain();
                continue;
            }
            let parked = poller.lock().parked.remove(ev.token);
            if let Some(parked) = parked {
                ready(p, parked);
            }
        }
        let handoff = std::mem::take(&mut poller.lock().ready);
        for conn in handoff {
            let _ = p.receive().push(conn);
        }
        expire(p);
    }
}

/// Continues a connection whose socket is ready.
fn ready(p: &Pipeline, parked: Parked) {
    let Parked { conn, wait, .. } = parked;
    match wait {
        Wait::Request => {
            let _ = p.receive().push(conn);
        }
        Wait::Writable => {
            let _ = p.send().push(conn);
        }
        Wait::Linger => {
            let mut scratch = [0u8; 4096];
            for _ in 0..LINGER_READS {
                match (&conn.stream).read(&mut scratch) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
            let deadline = conn.linger_until.unwrap_or_else(Instant::now);
            p.poller.park(conn, Wait::Linger, deadline);
        }
    }
}

/// Ends every wait whose deadline has passed.
fn expire(p: &Pipeline) {
    let now = Instant::now();
    let mut due = Vec::new();
    p.poller.lock().parked.expire(now, &mut due);
    for Parked { conn, wait, .. } in due {
        match wait {
            Wait::Request if !conn.rbuf.is_empty() => {
                let next = super::stages::fail(conn, 408, "request head not received in time");
                p.dispatch(next, false);
            }
            // An idle connection closes silently (no 408 between requests).
            Wait::Request => {}
            Wait::Writable => log::debug!("{}: send timeout", conn.info.peer),
            Wait::Linger => {}
        }
    }
}
