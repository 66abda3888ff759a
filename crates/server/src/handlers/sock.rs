//! A backend's address and a connection to it, over TCP or a Unix socket, for the handlers that
//! talk to one (the reverse proxy's upstream servers, FastCGI applications). Both sockets are
//! weft-fiber's: they park the fiber on the fiber model and block the thread elsewhere.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpStream, UnixStream};

use crate::net::EndIo;

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

/// An upstream connection as a tunnel's end (a `101` answered to an upgrade: a WebSocket).
impl crate::net::End for Sock {
    fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.try_read(buf),
            Sock::Tcp(s) => s.try_read(buf),
            Sock::Tls(s) => {
                let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
                loop {
                    match s.conn.reader().read(buf) {
                        Ok(n) => return Ok(n),
                        // The TCP stream ended without close_notify: the end all the same.
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                    if s.conn.read_tls(&mut EndIo(&mut s.sock))? == 0 {
                        return Ok(0);
                    }
                    s.conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                }
            }
        }
    }

    fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.try_write(buf),
            Sock::Tcp(s) => s.try_write(buf),
            Sock::Tls(_) => {
                self.try_flush()?;
                let Sock::Tls(s) = self else {
                    unreachable!("matched above")
                };
                let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
                // rustls takes what its send buffer has room for (64 KiB by default).
                let n = s.conn.writer().write(buf)?;
                if n == 0 && !buf.is_empty() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                self.try_flush()?;
                Ok(n)
            }
        }
    }

    fn try_flush(&mut self) -> io::Result<bool> {
        let Sock::Tls(s) = self else {
            return Ok(true);
        };
        let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
        while s.conn.wants_write() {
            match s.conn.write_tls(&mut EndIo(&mut s.sock)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn close_write(&mut self) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.shutdown(std::net::Shutdown::Write),
            Sock::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Sock::Tls(_) => {
                if let Sock::Tls(s) = self {
                    s.get_mut()
                        .unwrap_or_else(|e| e.into_inner())
                        .conn
                        .send_close_notify();
                }
                let _ = self.try_flush()?;
                let Sock::Tls(s) = self else {
                    unreachable!("matched above")
                };
                let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
                s.sock.shutdown(std::net::Shutdown::Write)
            }
        }
    }

    fn wait<'a>(
        &'a mut self,
        read: bool,
        write: bool,
        _stop: bool,
        out: &mut Vec<weft_fiber::net::Wait<'a>>,
    ) {
        use weft_fiber::net::Wait;
        out.push(match self {
            Sock::Unix(s) => Wait::unix(s, read, write),
            Sock::Tcp(s) => Wait::tcp(s, read, write),
            Sock::Tls(s) => {
                let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
                let write = write || s.conn.wants_write();
                Wait::tcp(&s.sock, read, write)
            }
        });
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
