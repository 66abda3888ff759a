//! A backend's address and a connection to it, over TCP or a Unix socket, for the handlers that
//! talk to one (the reverse proxy's upstream servers, FastCGI applications). Both sockets are
//! weft-fiber's: they park the fiber on the fiber model and block the thread elsewhere.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpStream, UnixStream};

/// Where a backend listens: `unix:/PATH` or `HOST:PORT` (resolved when it is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Addr {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Addr {
    /// Reads `unix:/PATH` (an absolute path) or `HOST:PORT`; `what` names it in the error.
    pub(crate) fn parse(s: &str, what: &str) -> Result<Addr, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!(
                    "{what} `{s}`: a Unix socket's path must be absolute"
                ));
            }
            return Ok(Addr::Unix(PathBuf::from(path)));
        }
        if s.is_empty() || s.contains('/') {
            return Err(format!("{what} `{s}`: expected unix:/PATH or HOST:PORT"));
        }
        s.to_socket_addrs()
            .map_err(|e| format!("{what} `{s}`: {e}"))?
            .next()
            .map(Addr::Tcp)
            .ok_or_else(|| format!("{what} `{s}`: no address"))
    }

    /// Connects within `connect_timeout`; reads and writes then wait at most `io_timeout`.
    pub(crate) fn connect(
        &self,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> io::Result<Sock> {
        match self {
            Addr::Unix(p) => UnixStream::connect_timeout(p, connect_timeout).and_then(|s| {
                s.set_read_timeout(Some(io_timeout))?;
                s.set_write_timeout(Some(io_timeout))?;
                Ok(Sock::Unix(s))
            }),
            Addr::Tcp(a) => TcpStream::connect_timeout(a, connect_timeout).and_then(|s| {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(io_timeout))?;
                s.set_write_timeout(Some(io_timeout))?;
                Ok(Sock::Tcp(s))
            }),
        }
    }
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addr::Unix(p) => write!(f, "unix:{}", p.display()),
            Addr::Tcp(a) => write!(f, "{a}"),
        }
    }
}

/// A connection to a backend.
pub(crate) enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
    /// TLS over TCP (an `https://` upstream). Locked so that `&Sock` reads and writes as the
    /// plain ones do; one request uses a connection at a time, so the lock is never contended.
    Tls(Box<std::sync::Mutex<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>>),
}

impl std::fmt::Debug for Sock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sock::Unix(_) => "Sock::Unix",
            Sock::Tcp(_) => "Sock::Tcp",
            Sock::Tls(_) => "Sock::Tls",
        })
    }
}

impl Sock {
    /// Starts TLS on `tcp` as a client of `name` with `config`: the handshake, within the
    /// socket's timeouts. The error says why (an unknown issuer, a name the certificate does
    /// not hold).
    pub(crate) fn tls(
        tcp: TcpStream,
        config: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    ) -> io::Result<Sock> {
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Sock::Tls(Box::new(std::sync::Mutex::new(s))))
    }

    /// Reads what is there now, without waiting (`TimedOut` if nothing is). Over TLS it only
    /// looks: anything readable on an idle connection (a close_notify, the end) reads as the
    /// end (`Ok(0)`).
    pub(crate) fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read_deadline(buf, Instant::now()),
            Sock::Tcp(s) => s.read_deadline(buf, Instant::now()),
            Sock::Tls(s) => {
                use std::os::fd::{AsFd, AsRawFd};
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                let fd = s.sock.as_fd().as_raw_fd();
                if weft_sys::poll::poll_readable_any(&[fd], Duration::ZERO)?.is_empty() {
                    Err(io::ErrorKind::TimedOut.into())
                } else {
                    Ok(0)
                }
            }
        }
    }

    /// Whether it is a Unix socket (a peer that closed it fails the next write before anything
    /// is delivered, so a pooled one needs no check before use).
    pub(crate) fn is_unix(&self) -> bool {
        matches!(self, Sock::Unix(_))
    }
}

impl Read for &Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => (&*s).read(buf),
            Sock::Tcp(s) => (&*s).read(buf),
            Sock::Tls(s) => s.lock().unwrap_or_else(|e| e.into_inner()).read(buf),
        }
    }
}

impl Write for &Sock {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => (&*s).write(data),
            Sock::Tcp(s) => (&*s).write(data),
            Sock::Tls(s) => s.lock().unwrap_or_else(|e| e.into_inner()).write(data),
        }
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Sock::Unix(s) => (&*s).write_all(data),
            Sock::Tcp(s) => (&*s).write_all(data),
            Sock::Tls(s) => {
                let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.write_all(data)?;
                // rustls holds records until flushed.
                s.flush()
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sock::Tls(s) => s.lock().unwrap_or_else(|e| e.into_inner()).flush(),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_unix_paths_or_host_ports() {
        assert_eq!(
            Addr::parse("unix:/run/app.sock", "server").unwrap(),
            Addr::Unix(PathBuf::from("/run/app.sock"))
        );
        assert_eq!(
            Addr::parse("127.0.0.1:9000", "server").unwrap(),
            Addr::Tcp("127.0.0.1:9000".parse().unwrap())
        );
        assert!(Addr::parse("unix:run/app.sock", "server")
            .unwrap_err()
            .contains("absolute"));
        for bad in ["", "http://x:1", "nohost"] {
            assert!(Addr::parse(bad, "server").is_err(), "{bad}");
        }
        assert_eq!(
            Addr::parse("127.0.0.1:9000", "s").unwrap().to_string(),
            "127.0.0.1:9000"
        );
    }
}
