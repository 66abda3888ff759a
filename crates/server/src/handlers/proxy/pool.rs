//! Connections to an upstream server: a pooled one checked out (or a new one connected) for a
//! request, given back only when both sides allow another (the pool: `handlers/pool.rs`).

use super::client::{io_failure, is_timeout, Failure, Upstream};
use super::group::InFlight;
use crate::body::ReadBuf;
pub(crate) use crate::handlers::pool::Idle;
use crate::handlers::sock::Sock;

/// The idle connections of one server.
pub(super) type Pool = crate::handlers::pool::Pool<Conn>;

/// Initial read buffer of an upstream connection (it grows to the head limit if needed).
const READ_BUF: usize = 8 * 1024;

impl Upstream {
    /// A pooled connection to server `i` of the group, or a new one.
    pub(super) fn checkout(&self, i: usize) -> Result<Conn, Failure> {
        let pool = &self.group.servers[i].pool;
        if self.group.servers[i].host.is_none() {
            // An address that never changes.
            return pool.take().map_or_else(|| self.connect(i), Ok);
        }
        let now = self.group.addr(i);
        while let Some(c) = pool.take() {
            // A server whose name now resolves elsewhere (`resolve_every`): connections to
            // where it was are closed, not reused.
            if c.to == now {
                return Ok(c);
            }
        }
        self.connect(i)
    }

    /// A new connection to server `i`.
    pub(super) fn connect(&self, i: usize) -> Result<Conn, Failure> {
        let to = self.group.addr(i);
        let mut stream = to
            .connect(self.connect_timeout, self.read_timeout)
            .map_err(|e| io_failure("connecting", &e))?;
        if let (Some(t), Sock::Tcp(_)) = (&self.tls, &stream) {
            let Sock::Tcp(tcp) = stream else {
                unreachable!("matched above")
            };
            stream = Sock::tls(tcp, t.config.clone(), t.name.clone())
                .map_err(|e| io_failure("the TLS handshake", &e))?;
        }
        Ok(Conn {
            stream,
            rbuf: ReadBuf::new(READ_BUF),
            reused: false,
            keep: true,
            server: i,
            flight: None,
            to,
        })
    }

    /// Returns `conn` to its server's pool if it may carry another request.
    pub(super) fn release(&self, mut conn: Conn) {
        conn.flight = None;
        if conn.keep && conn.rbuf.is_empty() {
            conn.reused = true;
            let pool = &self.group.servers[conn.server].pool;
            pool.put(conn);
        }
    }
}

/// One connection to an upstream server.
pub(crate) struct Conn {
    pub(super) stream: Sock,
    /// Bytes received and not yet consumed.
    pub(super) rbuf: ReadBuf,
    /// It came from the pool (so it may have died while idle).
    pub(super) reused: bool,
    /// Both sides allow another request on it (so far).
    pub(super) keep: bool,
    /// Which server of the group it goes to.
    pub(super) server: usize,
    /// The request it carries, counted in flight until its response has been read.
    pub(super) flight: Option<InFlight>,
    /// The address it was made to (a server's name may resolve elsewhere later).
    pub(super) to: crate::handlers::sock::Addr,
}

impl Idle for Conn {
    fn is_open(&self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read_now(&mut b) {
            Err(e) => is_timeout(&e),
            Ok(_) => false,
        }
    }
}
