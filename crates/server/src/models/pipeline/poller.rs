//! The waiting room: connections that wait for the socket (a request's bytes, room to send,
//! the end of a lingering close) sit here, in one epoll instance, with a deadline each.
//!
//! One thread waits in `epoll_wait` over every waiting connection and hands each ready one to
//! the stage that continues it: readable ones to receive, writable ones to send. Deadlines
//! are the config's timeouts (header read, keep-alive idle, send); on expiry the poller closes
//! the connection, or for a head cut short queues a 408 for send.
//!
//! A connection is registered once, at its first wait, edge-triggered (`EPOLLET`) for input,
//! under a key that stays its own until it closes (an entry of the slab in `wheel.rs`, which
//! also holds the parked connections on a timing wheel of their deadlines: O(1) to park, wake
//! and expire). Waiting for the next request then costs no system call. The rules that keep
//! edge-triggering from losing bytes:
//! - an event for a connection that is away in a stage marks its entry ready; its next wait
//!   for a request takes the mark and goes straight back to receive instead of parking;
//! - a connection parks for a request only when its last read found the socket empty (short
//!   or `EAGAIN`; `Conn::maybe_unread` otherwise), so any byte that arrives later makes an
//!   edge;
//! - a wake-up that reports the peer's end of stream (`EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`)
//!   also marks the entry ready: the end may have come in the same edge as the bytes, and a
//!   short read of those bytes does not show it;
//! - waits for room to send and for a lingering close re-arm with `EPOLL_CTL_MOD`, which
//!   reports a socket that is ready already (these are rare: a response larger than the send
//!   buffer, a close).
//!
//! A connection is parked under the lock the poller takes to remove it, so exactly one thread
//! owns it at any time; an event for a released key (a closed connection) is stale and
//! ignored.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Conn, Phase, Pipeline};
use crate::models::wheel::Wheel;

use weft_sys::epoll::{
    Epoll, EventFd, Events, EPOLLERR, EPOLLET, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP,
};

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
/// Longest `epoll_wait` while events come (see `run`), and the pause after a failed one.
const TICK: Duration = Duration::from_millis(100);
/// `sleep_until` while nothing is parked: later than any deadline, so every park wakes the
/// poller to set its timer.
const IDLE_HORIZON: Duration = Duration::from_secs(10 * 365 * 86_400);
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
        epoll.add(wake.as_raw_fd(), EPOLLIN, WAKE)?;
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
    /// cannot be watched (closed by the peer meanwhile) is closed. Gives `conn` back when bytes
    /// of its next request may be waiting already: it goes to receive instead.
    pub(crate) fn park(
        self: &Arc<Self>,
        mut conn: Box<Conn>,
        wait: Wait,
        deadline: Instant,
    ) -> Option<Box<Conn>> {
        let fd = conn.stream.as_raw_fd();
        let base = EPOLLIN | EPOLLRDHUP | EPOLLET;
        let events = match wait {
            Wait::Request | Wait::Linger => base,
            Wait::Writable => base | EPOLLOUT,
        };
        let mut room = self.lock();
        let (key, armed) = match conn.reg.as_ref() {
            Some(reg) => {
                let key = reg.key;
                let armed = match wait {
                    Wait::Request => {
                        let unread = std::mem::take(&mut conn.maybe_unread);
                        if room.parked.take_ready(key) || unread {
                            return Some(conn);
                        }
                        Ok(())
                    }
                    Wait::Writable | Wait::Linger => self.epoll.modify(fd, events, key),
                };
                (key, armed)
            }
            None => {
                let key = room.parked.alloc();
                conn.reg = Some(Registration {
                    key,
                    poller: self.clone(),
                });
                (key, self.epoll.add(fd, events, key))
            }
        };
        if let Err(e) = armed {
            drop(room);
            log::debug!("{}: cannot wait for the socket: {e}", conn.info.peer);
            return None;
        }
        if let Err(parked) = room.parked.park(key, Parked { conn, wait }, deadline) {
            drop(room);
            log::error!("{}: parked twice", parked.conn.info.peer);
            return None;
        }
        let wake = room.parked.fires_at(deadline) < room.sleep_until;
        drop(room);
        if wake {
            // The poller may sleep past this deadline otherwise.
            self.wake.notify();
        }
        None
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

/// A connection's entry in the poller, from its first wait until it closes.
pub(crate) struct Registration {
    key: u64,
    poller: Arc<Poller>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // A parked connection is owned by the poller and never dropped with its entry held;
        // anything handed back is dropped after the lock.
        let left = self.poller.lock().parked.release(self.key);
        drop(left);
    }
}

/// The poller thread: waits for events and deadlines until the pipeline stops.
pub(crate) fn run(p: &Pipeline) {
    let poller = &p.poller;
    let mut events = Events::with_capacity(64);
    // The last wait ended with no event (its timeout, or a signal).
    let mut quiet = false;
    while !p.stopped.load(SeqCst) {
        // Until the first parked deadline or an event (a stop request, and a park due sooner
        // than `sleep_until`, write the wake-up eventfd). While events come, at most `TICK`:
        // a park due later than that needs no wake-up, and under load the set of parked
        // connections is often empty for a moment. After a `TICK` without one, no cap, and no
        // timer at all when nothing is parked: an idle poller sleeps until something comes.
        let timeout = {
            let mut room = poller.lock();
            let now = Instant::now();
            let cap = if quiet { super::SLEEP } else { TICK };
            // Quiet, the exact first deadline (a slot holding only connections due in a later
            // turn would wake the poller once a turn for nothing); busy, the first occupied
            // slot (no walk over its entries on every turn).
            let next = if quiet {
                room.parked.next_due_exact()
            } else {
                room.parked.next_due()
            };
            let (until, timeout) = match next {
                Some(d) => {
                    let t = d.saturating_duration_since(now).min(cap);
                    (now.checked_add(t).unwrap_or(d), t)
                }
                None if quiet => (now + IDLE_HORIZON, super::SLEEP),
                None => (now + TICK, TICK),
            };
            room.sleep_until = until;
            timeout
        };
        if let Err(e) = poller.epoll.wait(&mut events, Some(timeout)) {
            log::error!("pipeline poller: epoll_wait failed: {e}");
            std::thread::sleep(TICK);
            continue;
        }
        // Only a wait that ended with nothing at all: a turn woken by a park or a hand-off
        // alone stays busy (with many connections parked, an exact answer on every such turn
        // would walk them all each time a slow client parks).
        quiet = events.is_empty();
        // Awake: a park need not wake the thread until it waits again.
        poller.lock().sleep_until = Instant::now();
        let mut handed = false;
        for ev in events.iter() {
            if ev.token == WAKE {
                poller.wake.drain();
                continue;
            }
            // The peer's end of stream, or an error: there is input to read (its end).
            let end = ev.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR) != 0;
            let input = end || ev.events & EPOLLIN != 0;
            let output = ev.events & (EPOLLOUT | EPOLLHUP | EPOLLERR) != 0;
            let parked = {
                let mut room = poller.lock();
                let wait = room.parked.get(ev.token).map(|pk| pk.wait);
                // Input not taken by this wake-up (the connection is away in a stage, or
                // waits to send) is kept for its next wait for a request.
                if input && !matches!(wait, Some(Wait::Request | Wait::Linger)) {
                    room.parked.set_ready(ev.token);
                }
                let wanted = match wait {
                    Some(Wait::Request | Wait::Linger) => input,
                    Some(Wait::Writable) => output,
                    None => false,
                };
                if wanted {
                    let parked = room.parked.remove(ev.token);
                    // The peer's end of stream (or an error) may have come in the same edge
                    // as the bytes receive will read: a short read does not show it, so the
                    // next wait for a request goes back to receive to find it.
                    if end {
                        room.parked.set_ready(ev.token);
                    }
                    parked
                } else {
                    None
                }
            };
            if let Some(parked) = parked {
                ready(p, parked);
                handed = true;
            }
        }
        let handoff = std::mem::take(&mut poller.lock().ready);
        handed |= !handoff.is_empty();
        for conn in handoff {
            let _ = p.receive().push(super::Task::Conn(conn));
        }
        if handed {
            p.rouse.work();
        }
        expire(p);
    }
}

/// Continues a connection whose socket is ready.
fn ready(p: &Pipeline, parked: Parked) {
    let Parked { conn, wait, .. } = parked;
    match wait {
        Wait::Request => {
            let _ = p.receive().push(super::Task::Conn(conn));
        }
        Wait::Writable => {
            let _ = p.send().push(super::Task::Conn(conn));
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
            let deadline = match conn.phase {
                Phase::Linger(until) => until,
                _ => Instant::now(),
            };
            // A wait to linger never hands the connection back.
            drop(p.poller.park(conn, Wait::Linger, deadline));
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
            // A prelude past its deadline (PROXY header, TLS handshake): receive steps it
            // again and its stage says what the lateness means.
            Wait::Request if !conn.prelude.is_open() => {
                p.dispatch(super::Next::Receive(conn), false)
            }
            // A body read ahead, or a head below its minimum rate (issue 24).
            Wait::Request
                if matches!(conn.phase, Phase::Body { .. } | Phase::Ready(_))
                    || (conn.late.is_some() && !conn.rbuf.is_empty()) =>
            {
                let why = conn.late.unwrap_or("request body not received in time");
                let next = super::stages::fail(conn, 408, &crate::conn::Reason::Rule(why));
                p.dispatch(next, false);
            }
            Wait::Request if !conn.rbuf.is_empty() => {
                let late = crate::conn::Reason::Rule(crate::conn::head_late(false));
                let next = super::stages::fail(conn, 408, &late);
                p.dispatch(next, false);
            }
            // An idle connection closes silently (no 408 between requests).
            Wait::Request => {}
            Wait::Writable => {
                let why: &dyn std::fmt::Display = match (conn.stalled, &conn.send_rate) {
                    (Some((_, true)), Some(rule)) => &rule.slow_reader(),
                    _ => &"send timeout",
                };
                match &conn.phase {
                    super::Phase::Send(out) => super::stages::log_cut(&conn, out, why),
                    _ => log::debug!("{}: {why}", conn.info.peer),
                }
            }
            Wait::Linger => {}
        }
    }
}
