//! Idle keep-alive connections to an upstream: checked out (or a new one connected) for a
//! request, given back only when both sides allow another.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_fiber::net::TcpStream;

use super::client::{io_failure, is_timeout, Failure, Upstream};
use crate::body::ReadBuf;

/// Initial read buffer of an upstream connection (it grows to the head limit if needed).
const READ_BUF: usize = 8 * 1024;

impl Upstream {
    /// A pooled connection, or a new one.
    pub(super) fn checkout(&self) -> Result<Conn, Failure> {
        match self.pool.take() {
            Some(c) => Ok(c),
            None => self.connect(),
        }
    }

    pub(super) fn connect(&self) -> Result<Conn, Failure> {
        let stream = TcpStream::connect_timeout(&self.addr, self.connect_timeout)
            .map_err(|e| io_failure("connecting", &e))?;
        let setup = stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(Some(self.read_timeout)))
            .and_then(|()| stream.set_write_timeout(Some(self.read_timeout)));
        setup.map_err(|e| io_failure("setting up the connection", &e))?;
        Ok(Conn {
            stream,
            rbuf: ReadBuf::new(READ_BUF),
            reused: false,
            keep: true,
        })
    }

    /// Returns `conn` to the pool if it may carry another request.
    pub(super) fn release(&self, mut conn: Conn) {
        if conn.keep && conn.rbuf.is_empty() {
            conn.reused = true;
            self.pool.put(conn);
        }
    }
}

/// One connection to an upstream.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    /// Bytes received and not yet consumed.
    pub(super) rbuf: ReadBuf,
    /// It came from the pool (so it may have died while idle).
    pub(super) reused: bool,
    /// Both sides allow another request on it (so far).
    pub(super) keep: bool,
}

/// Idle connections of one upstream, most recently used last.
pub(super) struct Pool {
    idle: Mutex<Vec<(Conn, Instant)>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    /// An empty pool keeping at most `max_idle` connections, each for `idle_timeout`.
    pub(super) fn new(max_idle: usize, idle_timeout: Duration) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            max_idle,
            idle_timeout,
        }
    }

    /// The most recently used idle connection that is still open. The lock is held only to
    /// take or put an entry, never across I/O (so never across a fiber's park).
    fn take(&self) -> Option<Conn> {
        loop {
            let (conn, since) = self.lock().pop()?;
            if since.elapsed() >= self.idle_timeout {
                // Every other entry is older still.
                let stale = std::mem::take(&mut *self.lock());
                drop(stale);
                return None;
            }
            if conn.is_open() {
                return Some(conn);
            }
        }
    }

    fn put(&self, conn: Conn) {
        if self.max_idle == 0 {
            return;
        }
        let evicted = {
            let mut idle = self.lock();
            let fresh = idle
                .iter()
                .position(|(_, since)| since.elapsed() < self.idle_timeout)
                .unwrap_or(idle.len());
            let mut evicted: Vec<(Conn, Instant)> = idle.drain(..fresh).collect();
            if idle.len() >= self.max_idle {
                evicted.push(idle.remove(0));
            }
            idle.push((conn, Instant::now()));
            evicted
        };
        drop(evicted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Conn, Instant)>> {
        // A panic while holding it cannot leave the list inconsistent: keep using it.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Conn {
    /// True if the upstream has not closed the connection (nor sent anything unasked),
    /// checked without waiting.
    fn is_open(&self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read_deadline(&mut b, Instant::now()) {
            Err(e) => is_timeout(&e),
            Ok(_) => false,
        }
    }
}
