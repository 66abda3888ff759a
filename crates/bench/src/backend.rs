//! An emulated application server for the dynamic share of the SPECweb99-like load: it answers
//! every request after a fixed delay, as a backend that waits on a database or a disk would,
//! so that a web server in front of it (a reverse proxy) has handlers that block.
//!
//! * One OS thread per connection, HTTP/1.1 keep-alive (HTTP/1.0 with `Connection:
//!   keep-alive`); a request body given by `Content-Length` is read and discarded; a chunked
//!   body gets 501 and the connection closes; HEAD gets the head only. A connection idle, or
//!   a peer not reading, for [`IO_TIMEOUT`] is closed.
//! * The response body's size follows the SPECweb99 file named by the path's last segment
//!   (`.../class2_3` is 40 KiB, as [`specweb::file_size`] has it), 1 KiB for any other path:
//!   a dynamic page as large as the static file it renders.
//! * Bad requests get 400 and the connection closes; nothing a client sends panics it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use weft_http::{BodyFraming, Limits, Method, Parser, Version};

use crate::specweb;

/// Body size for a path that names no SPECweb99 file.
pub const DEFAULT_BODY: u64 = 1024;
/// Largest body the backend sends (the largest SPECweb99 file).
pub const MAX_BODY: u64 = 900 * 1024;
/// Longest wait for a read or a write on a connection before it is closed.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The backend's settings.
#[derive(Debug, Clone, Default)]
pub struct BackendConfig {
    /// Wait before each response.
    pub delay: Duration,
    /// Counts the responses sent (200s).
    pub served: Arc<AtomicU64>,
}

/// Sleeps this OS thread: the backend's threads are its own, not fiber workers.
fn pause(d: Duration) {
    #[allow(clippy::disallowed_methods)]
    thread::sleep(d);
}

/// Body size for `path`: the size of the SPECweb99 file its last segment names
/// (`classC_I`), or [`DEFAULT_BODY`].
pub fn body_size(path: &str) -> u64 {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("");
    let Some(rest) = name.strip_prefix("class") else {
        return DEFAULT_BODY;
    };
    let Some((c, i)) = rest.split_once('_') else {
        return DEFAULT_BODY;
    };
    match (c.parse::<usize>(), i.parse::<usize>()) {
        (Ok(c), Ok(i)) if c < 4 && i < 9 => specweb::file_size(c, i).min(MAX_BODY),
        _ => DEFAULT_BODY,
    }
}

/// Serves on `listener` until the process ends; one thread per connection.
pub fn serve(listener: TcpListener, cfg: BackendConfig) -> io::Result<()> {
    let body: Arc<[u8]> = vec![b'x'; MAX_BODY as usize].into();
    loop {
        let (s, _) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) if e.raw_os_error() == Some(weft_sys::errno::EBADF) => return Err(e),
            Err(e) if e.raw_os_error() == Some(weft_sys::errno::EINVAL) => return Err(e),
            Err(e) => {
                // Out of descriptors, memory or buffers: the connections open go on; wait.
                eprintln!("weft-bench backend: accept: {e}; waiting 100 ms");
                pause(Duration::from_millis(100));
                continue;
            }
        };
        let (cfg, body) = (cfg.clone(), body.clone());
        let spawned = thread::Builder::new().stack_size(64 * 1024).spawn(move || {
            if let Err(e) = connection(s, &cfg, &body) {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset
                        | io::ErrorKind::BrokenPipe
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) {
                    eprintln!("weft-bench backend: connection: {e}");
                }
            }
        });
        if let Err(e) = spawned {
            // The connection (moved into the closure) is closed; later ones may fit.
            eprintln!("weft-bench backend: no thread for a connection: {e}; waiting 100 ms");
            pause(Duration::from_millis(100));
        }
    }
}

/// One keep-alive connection: request after request until the client closes or asks to.
fn connection(mut s: TcpStream, cfg: &BackendConfig, body: &[u8]) -> io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut have = 0usize;
    let mut parser = Parser::new(Limits::default());
    loop {
        parser.reset();
        let head_len = loop {
            match parser.parse(&buf[..have]) {
                Ok(Some(n)) => break n,
                Ok(None) if have == buf.len() => return reply_close(&mut s, 431),
                Ok(None) => {}
                Err(_) => return reply_close(&mut s, 400),
            }
            let n = s.read(&mut buf[have..])?;
            if n == 0 {
                return Ok(());
            }
            have += n;
        };
        let head = parser.head();
        let size = body_size(head.path(&buf)) as usize;
        let keep = head.keep_alive();
        let http10 = head.version() == Version::Http10;
        let send_body = head.method() != Method::Head;
        let mut skip = match head.framing() {
            BodyFraming::None => 0,
            BodyFraming::Length(n) => n,
            BodyFraming::Chunked => return reply_close(&mut s, 501),
        };
        // Drop the head and as much of the body as is here; read and drop the rest.
        let mut used = head_len;
        let here = skip.min((have - used) as u64) as usize;
        used += here;
        skip -= here as u64;
        buf.copy_within(used..have, 0);
        have -= used;
        while skip > 0 {
            let want = skip.min(buf.len() as u64) as usize;
            let n = s.read(&mut buf[..want])?;
            if n == 0 {
                return Ok(());
            }
            skip -= n as u64;
        }
        // This connection's own OS thread (not a fiber worker): the delay blocks only it.
        #[allow(clippy::disallowed_methods)]
        pause(cfg.delay);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {size}\r\n{}\r\n",
            match (keep, http10) {
                (false, _) => "Connection: close\r\n",
                (true, true) => "Connection: keep-alive\r\n",
                (true, false) => "",
            }
        );
        s.write_all(head.as_bytes())?;
        if send_body {
            s.write_all(&body[..size])?;
        }
        cfg.served.fetch_add(1, Ordering::Relaxed);
        if !keep {
            return Ok(());
        }
    }
}

fn reply_close(s: &mut TcpStream, status: u16) -> io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        431 => "Request Header Fields Too Large",
        _ => "Not Implemented",
    };
    eprintln!("weft-bench backend: {status} {reason}; closing the connection");
    write!(
        s,
        "HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    // Closing with unread bytes would send a reset that can destroy the answer before the
    // client reads it: end the sending side, then read what the client still sends (for a
    // moment) before closing.
    s.shutdown(Shutdown::Write)?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut sink = [0u8; 4096];
    let mut left = 1 << 20;
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n.min(left),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::time::Instant;

    #[test]
    fn body_sizes_follow_the_file_set() {
        assert_eq!(body_size("/dyn/dir00001/class0_0"), 102);
        assert_eq!(body_size("/dyn/dir00001/class2_3"), 40 * 1024);
        assert_eq!(body_size("/dyn/dir00001/class3_8?x=1"), 900 * 1024);
        assert_eq!(body_size("/dyn/dir00001/class4_0"), DEFAULT_BODY);
        assert_eq!(body_size("/dyn/dir00001/class1_9"), DEFAULT_BODY);
        assert_eq!(body_size("/dyn/classx_1"), DEFAULT_BODY);
        assert_eq!(body_size("/"), DEFAULT_BODY);
        assert_eq!(body_size(""), DEFAULT_BODY);
    }

    fn start(delay: Duration) -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            serve(
                l,
                BackendConfig {
                    delay,
                    ..Default::default()
                },
            )
        });
        addr
    }

    /// Reads one response head; returns its status line and its Content-Length value.
    fn head(r: &mut io::BufReader<TcpStream>) -> (String, Option<String>) {
        let mut status = String::new();
        r.read_line(&mut status).unwrap();
        let mut len = None;
        let mut line = String::new();
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = Some(v.trim().to_string());
            }
        }
        (status, len)
    }

    /// Reads one response; returns its status and body length.
    fn response(r: &mut io::BufReader<TcpStream>) -> (u16, usize) {
        let (line, len) = head(r);
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let len = len.map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        (status, len)
    }

    #[test]
    fn answers_after_the_delay_keeps_alive_and_discards_bodies() {
        let addr = start(Duration::from_millis(30));
        let s = TcpStream::connect(addr).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = io::BufReader::new(s);
        let t = Instant::now();
        w.write_all(b"GET /dyn/dir00000/class1_2 HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert_eq!(response(&mut r), (200, 3 * 1024));
        assert!(t.elapsed() >= Duration::from_millis(30));
        // A POST body split from its head (the rest arrives later), a 40 KB body larger
        // than the read buffer, a HEAD, then a pipelined GET on the same connection.
        w.set_nodelay(true).unwrap();
        w.write_all(b"POST /dyn/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab")
            .unwrap();
        pause(Duration::from_millis(50));
        w.write_all(b"cde").unwrap();
        w.write_all(b"POST /dyn/y HTTP/1.1\r\nHost: a\r\nContent-Length: 40000\r\n\r\n")
            .unwrap();
        w.write_all(&[b'z'; 40_000]).unwrap();
        w.write_all(b"HEAD /dyn/dir00000/class2_0 HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        w.write_all(b"GET /dyn/dir00000/class0_0 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .unwrap();
        assert_eq!(response(&mut r), (200, DEFAULT_BODY as usize));
        assert_eq!(response(&mut r), (200, DEFAULT_BODY as usize));
        // HEAD: the length of the body it would have, and no body (the next response's
        // status line follows at once).
        let (line, len) = head(&mut r);
        assert_eq!(line, "HTTP/1.1 200 OK\r\n");
        assert_eq!(len.as_deref(), Some("10240"));
        assert_eq!(response(&mut r), (200, 102));
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "closed after Connection: close");
    }

    #[test]
    fn bad_requests_get_400_or_501_and_a_close() {
        let addr = start(Duration::ZERO);
        for (req, status) in [
            (&b"GARBAGE\r\n\r\n"[..], 400),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                501,
            ),
        ] {
            let s = TcpStream::connect(addr).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = io::BufReader::new(s);
            w.write_all(req).unwrap();
            assert_eq!(response(&mut r).0, status);
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty());
        }
    }
}
