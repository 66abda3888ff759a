//! Connections to an upstream: a pooled one checked out (or a new one connected) for a
//! request, given back only when both sides allow another (the pool: `handlers/pool.rs`).

use std::time::Instant;

use weft_fiber::net::TcpStream;

use super::client::{io_failure, is_timeout, Failure, Upstream};
use crate::body::ReadBuf;
pub(crate) use crate::handlers::pool::Idle;

/// The idle connections of one upstream.
pub(super) type Pool = crate::handlers::pool::Pool<Conn>;

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

impl Idle for Conn {
    fn is_open(&self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read_deadline(&mut b, Instant::now()) {
            Err(e) => is_timeout(&e),
            Ok(_) => false,
        }
    }
}
