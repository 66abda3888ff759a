//! Tunnels: a connection that a `101 Switching Protocols` took out of HTTP (a WebSocket, or
//! any `Upgrade`), relayed byte for byte between the client and the upstream until both
//! sides have closed, either fails, it idles past its timeout, or the server drains.
//!
//! One flow of control relays both ways ([`relay`]): it reads and writes each side without
//! waiting ([`End`]) and, when neither moves, waits on both at once
//! (`weft_fiber::net::wait_any`): on the fiber model the connection's fiber parks on both
//! sockets; on the thread and process models the thread polls them; on the pipeline a thread
//! of the tunnel's own does (the stages never hold a connection that long). Neither direction
//! ever waits on the other: a side that does not read stalls only what goes to it, and what
//! is held for it is bounded ([`HELD_MAX`]) before its source is no longer read.
//!
//! A side's end of stream is passed on as a half-close (`shutdown(SHUT_WR)`, after TLS's
//! `close_notify`), and the other direction goes on until it ends too, as TCP allows.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::net::End;
use crate::shutdown::Shutdown;

/// Bytes read per system call.
const CHUNK: usize = 16 * 1024;

/// Most bytes held for a side that is not taking them; past it its source is not read until
/// it takes some (TCP's own flow control then reaches the sender).
pub(crate) const HELD_MAX: usize = 64 * 1024;

thread_local! {
    /// One read buffer per thread: the relay reads into it and writes from it before it
    /// waits again, so a tunnel that waits holds only what a side did not take.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What runs once a tunnel has ended.
pub(crate) type OnEnd = Box<dyn FnOnce(&Relayed) + Send>;

/// An upgraded connection's other side and what the relay starts with; the response that
/// carries it is a `101` ([`crate::response::Body::Tunnel`]).
pub struct Tunnel {
    /// The upstream connection (owned: it never goes back to a pool).
    pub(crate) upstream: Box<dyn End + Send>,
    /// Bytes the upstream sent after its `101` head: the client gets them first.
    pub(crate) to_client: Vec<u8>,
    /// Bytes the client sent after its request head: the upstream gets them first.
    pub(crate) to_upstream: Vec<u8>,
    /// Longest time with no byte moving either way (`[[proxy]] tunnel_idle`).
    pub(crate) idle: Duration,
    /// The server's shutdown: a drain gives the tunnel the drain's idle window, then ends it.
    pub(crate) shutdown: Arc<Shutdown>,
    /// Called once the tunnel has ended, with what it relayed (metrics, the upstream's
    /// in-flight count).
    pub(crate) on_end: Option<OnEnd>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("to_client", &self.to_client.len())
            .field("to_upstream", &self.to_upstream.len())
            .field("idle", &self.idle)
            .finish()
    }
}

/// How a tunnel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Both sides closed.
    Closed,
    /// No byte moved for the idle timeout.
    Idle,
    /// The server drained and the drain's idle window passed.
    Drained,
    /// A side failed (reset, a TLS error).
    Failed(io::ErrorKind),
}

/// What a tunnel relayed: bytes to the upstream (`up`) and to the client (`down`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Relayed {
    pub(crate) up: u64,
    pub(crate) down: u64,
    pub(crate) ended: Ended,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed => f.write_str("both sides closed"),
            Ended::Idle => f.write_str("idle timeout"),
            Ended::Drained => f.write_str("server shutdown"),
            Ended::Failed(k) => write!(f, "{k}"),
        }
    }
}

/// One direction: bytes held for its destination, and whether its source ended and the end
/// was passed on.
#[derive(Default)]
struct Flow {
    held: Vec<u8>,
    off: usize,
    eof: bool,
    closed: bool,
    moved: u64,
}

impl Flow {
    fn pending(&self) -> &[u8] {
        &self.held[self.off..]
    }

    fn take(&mut self, n: usize) {
        self.off += n;
        self.moved += n as u64;
        if self.off == self.held.len() {
            self.held = Vec::new();
            self.off = 0;
        }
    }

    /// Moves what it can from `from` to `to` without waiting: true if a byte moved or an end
    /// was seen.
    fn pump(&mut self, from: &mut dyn End, to: &mut dyn End) -> io::Result<bool> {
        let mut moved = false;
        // Bounded: a fast pair of sides must not keep the other direction waiting.
        for _ in 0..16 {
            if !self.pending().is_empty() {
                match to.try_write(self.pending()) {
                    Ok(n) => {
                        self.take(n);
                        moved = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            if self.pending().len() >= HELD_MAX || self.eof {
                break;
            }
            let got = SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < CHUNK {
                    s.resize(CHUNK, 0);
                }
                let n = match from.try_read(&mut s[..]) {
                    Ok(0) => return Ok(None),
                    Ok(n) => n,
                    Err(e) => return Err(e),
                };
                // Straight on when nothing is held before it; what `to` does not take waits.
                let mut sent = 0;
                if self.pending().is_empty() {
                    match to.try_write(&s[..n]) {
                        Ok(k) => sent = k,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                    self.moved += sent as u64;
                }
                self.held.extend_from_slice(&s[sent..n]);
                Ok(Some(n))
            });
            match got {
                Ok(None) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(Some(_)) => moved = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if self.pending().is_empty() {
            // A TLS side's records out too.
            to.try_flush()?;
        }
        Ok(moved)
    }

    /// Passes the source's end on once everything before it is out.
    fn close_if_done(&mut self, to: &mut dyn End) -> io::Result<bool> {
        if self.eof && !self.closed && self.pending().is_empty() && to.try_flush()? {
            self.closed = true;
            to.close_write()?;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Relays between `client` and the tunnel's upstream until it ends; see the module docs.
pub(crate) fn relay(client: &mut dyn End, t: &mut Tunnel) -> Relayed {
    let mut up = Flow {
        held: std::mem::take(&mut t.to_upstream),
        ..Flow::default()
    };
    let mut down = Flow {
        held: std::mem::take(&mut t.to_client),
        ..Flow::default()
    };
    let ended = run(
        client,
        &mut *t.upstream,
        &mut up,
        &mut down,
        t.idle,
        &t.shutdown,
    );
    Relayed {
        up: up.moved,
        down: down.moved,
        ended,
    }
}

fn run(
    client: &mut dyn End,
    upstream: &mut dyn End,
    up: &mut Flow,
    down: &mut Flow,
    idle: Duration,
    shutdown: &Shutdown,
) -> Ended {
    let mut draining = false;
    let mut deadline = Instant::now() + idle;
    let step = |up: &mut Flow, down: &mut Flow, client: &mut dyn End, upstream: &mut dyn End| {
        let mut moved = up.pump(client, upstream)?;
        moved |= down.pump(upstream, client)?;
        moved |= up.close_if_done(upstream)?;
        moved |= down.close_if_done(client)?;
        io::Result::Ok(moved)
    };
    loop {
        if shutdown.is_set() && !draining {
            draining = true;
            deadline = deadline.min(Instant::now() + shutdown.drain_idle());
        }
        match step(up, down, client, upstream) {
            Err(e) => return Ended::Failed(e.kind()),
            Ok(true) => {
                if up.closed && down.closed {
                    return Ended::Closed;
                }
                if !draining {
                    deadline = Instant::now() + idle;
                }
                continue;
            }
            Ok(false) => {}
        }
        if up.closed && down.closed {
            return Ended::Closed;
        }
        let mut waits = Vec::with_capacity(3);
        // A `process`-model connection process learns of shutdown from its stop pipe.
        client.wait(
            up.pending().is_empty() && !up.eof,
            !down.pending().is_empty(),
            !draining,
            &mut waits,
        );
        upstream.wait(
            down.pending().is_empty() && !down.eof,
            !up.pending().is_empty(),
            false,
            &mut waits,
        );
        let int = (!draining).then(|| shutdown.interrupt());
        let r = weft_fiber::net::wait_any(&waits, Some(deadline), int);
        drop(waits);
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                // Shutdown began: the loop's head starts the drain.
                if !shutdown.is_set() {
                    return Ended::Failed(io::ErrorKind::Interrupted);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return if draining {
                    Ended::Drained
                } else {
                    Ended::Idle
                };
            }
            Err(e) => return Ended::Failed(e.kind()),
        }
    }
}
