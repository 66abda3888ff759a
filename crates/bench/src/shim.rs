//! `weft-bench tls-shim`: plain TCP in, TLS out. A tool that speaks only plain HTTP (an
//! HTTP/1.1 conformance probe, a raw-socket test) reaches an HTTPS server through it
//! unchanged: every byte it sends is encrypted towards the server, every byte the server sends
//! comes back decrypted, and closes travel both ways (the client's end of input becomes
//! `close_notify` and a half-close; the server's end becomes a half-close towards the client).
//!
//! Each accepted connection gets two plain threads: one copies client bytes into the TLS
//! connection, one reads TLS records from the server and writes their plaintext to the
//! client. The rustls connection between them is behind a mutex that neither holds across a
//! read of its own socket. The server's certificate is verified as by `weft-bench load`
//! (`--cacert`, `--insecure`); a failed handshake closes the client's connection and prints a
//! line naming the reason.

// Plain OS threads only, never fibers: a std mutex cannot stall a fiber worker here.
#![allow(clippy::disallowed_types)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use crate::target::BadInput;

/// Default for `--idle-timeout`: a connection whose client or server has sent nothing for this
/// long is closed (nginx's `proxy_read_timeout` is 60 s as well).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default for `--connect-timeout` (nginx's `proxy_connect_timeout`: 60 s; a local server
/// answers in well under this).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the shim forwards where.
#[derive(Debug, Clone)]
pub struct ShimConfig {
    /// Where the TLS server is.
    pub connect: SocketAddr,
    /// The name sent in SNI and verified against the certificate.
    pub name: ServerName<'static>,
    pub tls: Arc<ClientConfig>,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
}

impl ShimConfig {
    /// `connect` is `HOST:PORT`; `name` defaults to HOST.
    pub fn new(
        connect: &str,
        name: Option<&str>,
        tls: Arc<ClientConfig>,
    ) -> Result<ShimConfig, BadInput> {
        let addr = connect
            .to_socket_addrs()
            .map_err(|e| BadInput(format!("--connect {connect}: {e}")))?
            .next()
            .ok_or_else(|| BadInput(format!("--connect {connect}: resolved to nothing")))?;
        let host = match connect.rfind(':') {
            Some(i) => &connect[..i],
            None => connect,
        };
        Ok(ShimConfig {
            connect: addr,
            name: crate::tls::server_name(name.unwrap_or(host))?,
            tls,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }
}

/// Accepts on `listener` forever, a pair of threads per connection.
pub fn serve(listener: TcpListener, cfg: ShimConfig) -> io::Result<()> {
    let cfg = Arc::new(cfg);
    for plain in listener.incoming() {
        let plain = match plain {
            Ok(s) => s,
            // A connection reset before accept, or out of fds for a moment: keep serving.
            Err(e) => {
                eprintln!("tls-shim: accept: {e}");
                continue;
            }
        };
        let cfg = cfg.clone();
        std::thread::spawn(move || forward(plain, &cfg));
    }
    Ok(())
}

/// Writes every queued TLS record to `sock`.
fn flush(conn: &mut ClientConnection, mut sock: &TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        conn.write_tls(&mut sock)?;
    }
    Ok(())
}

/// Forwards one client connection until both directions have ended; a failure is a line on
/// stderr (printed before the client's connection closes) and the close.
pub fn forward(plain: TcpStream, cfg: &ShimConfig) {
    let peer = plain
        .peer_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    let report = |e: &io::Error| eprintln!("tls-shim: {peer} -> {}: {e}", cfg.connect);
    let tls_sock = match TcpStream::connect_timeout(&cfg.connect, cfg.connect_timeout) {
        Ok(s) => s,
        Err(e) => return report(&e),
    };
    if let Err(e) = pipe(&plain, &tls_sock, cfg) {
        report(&e);
        // Unblock the other direction: nothing more can go through.
        let _ = plain.shutdown(Shutdown::Both);
        let _ = tls_sock.shutdown(Shutdown::Both);
    }
}

fn pipe(plain: &TcpStream, tls_sock: &TcpStream, cfg: &ShimConfig) -> io::Result<()> {
    // A response comes out as several writes (one per TLS read): the last, small one must not
    // wait for the client's delayed acknowledgement of the others.
    plain.set_nodelay(true)?;
    tls_sock.set_nodelay(true)?;
    for s in [plain, tls_sock] {
        s.set_read_timeout(Some(cfg.idle_timeout))?;
        s.set_write_timeout(Some(cfg.idle_timeout))?;
    }
    let conn = ClientConnection::new(cfg.tls.clone(), cfg.name.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let conn = Arc::new(Mutex::new(conn));
    // The ClientHello.
    flush(&mut conn.lock().expect("tls state"), tls_sock)?;
    let up = {
        let (plain, tls_sock, conn) = (plain.try_clone()?, tls_sock.try_clone()?, conn.clone());
        std::thread::spawn(move || client_to_server(&plain, &tls_sock, &conn))
    };
    // On an error the caller reports it and shuts both sockets down, which ends `up` too.
    server_to_client(plain, tls_sock, &conn)?;
    up.join()
        .unwrap_or_else(|_| Err(io::Error::other("thread panicked")))
}

/// Client bytes into the TLS connection; at the client's end of input, `close_notify` and a
/// half-close towards the server.
fn client_to_server(
    mut plain: &TcpStream,
    tls_sock: &TcpStream,
    conn: &Mutex<ClientConnection>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match plain.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The other direction shut the sockets down after an error: that one reports.
            Err(_) if tls_sock.peer_addr().is_err() => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut c = conn.lock().expect("tls state");
        if n == 0 {
            c.send_close_notify();
            let r = flush(&mut c, tls_sock);
            let _ = tls_sock.shutdown(Shutdown::Write);
            return r.or(Ok(()));
        }
        // Before the handshake ends rustls keeps the bytes and sends them once it has.
        c.writer().write_all(&buf[..n])?;
        flush(&mut c, tls_sock)?;
    }
}

/// TLS records from the server, their plaintext to the client; at the server's end of
/// stream, a half-close towards the client.
fn server_to_client(
    mut plain: &TcpStream,
    mut tls_sock: &TcpStream,
    conn: &Mutex<ClientConnection>,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024 + 512];
    let mut out = Vec::new();
    loop {
        let n = match tls_sock.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let ended = {
            let mut c = conn.lock().expect("tls state");
            let mut closed = n == 0;
            let mut rd = &buf[..n];
            // Everything read goes to rustls (it takes at most one record's worth per call).
            while !rd.is_empty() {
                c.read_tls(&mut rd)?;
                let state = c.process_new_packets().map_err(|e| {
                    let _ = flush(&mut c, tls_sock);
                    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
                })?;
                closed |= state.peer_has_closed();
                if state.plaintext_bytes_to_read() > 0 {
                    let at = out.len();
                    out.resize(at + state.plaintext_bytes_to_read(), 0);
                    c.reader().read_exact(&mut out[at..])?;
                }
            }
            if n == 0 {
                // rustls records the end; a close without close_notify is an end all the same.
                c.read_tls(&mut &[][..])?;
                let _ = c.process_new_packets();
            }
            // Handshake replies, and the plaintext the client wrote before the handshake ended.
            flush(&mut c, tls_sock)?;
            closed
        };
        if !out.is_empty() {
            plain.write_all(&out)?;
            out.clear();
        }
        if ended {
            let _ = plain.shutdown(Shutdown::Write);
            return Ok(());
        }
    }
}
