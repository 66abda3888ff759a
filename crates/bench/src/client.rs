//! One HTTP exchange on a fiber-aware socket: connect (and for `https://` run the TLS
//! handshake, [`crate::tls`]), send a prepared request, read the response with the
//! connection's reusable buffer and parser. Every wait is bounded by a deadline, and failures
//! are sorted into the kinds a report counts.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use weft_fiber::net::TcpStream;

use crate::response::{read_response, ReadBuf, ResponseError, ResponseParser, Summary};
use crate::stats::ErrorKind;
use crate::target::Target;
use crate::tls::TlsStream;

/// How an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Counted as an error of this kind.
    Error(ErrorKind),
    /// The run's end came first (`deadline` was the end of a timed run): not an error, the
    /// request is simply not counted.
    Cut,
}

/// The deadlines of one exchange: the request's own timeout, and the end of a timed run.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub timeout: Instant,
    pub run_end: Option<Instant>,
}

impl Deadlines {
    fn first(&self) -> Instant {
        self.run_end.map_or(self.timeout, |e| e.min(self.timeout))
    }

    /// A `TimedOut` from a wait bounded by [`Deadlines::first`]: the request's timeout, or
    /// the run ending while it was in flight.
    fn timed_out(&self) -> Failure {
        match self.run_end {
            Some(end) if end < self.timeout => Failure::Cut,
            _ => Failure::Error(ErrorKind::Timeout),
        }
    }

    fn classify(&self, e: &io::Error, kind: ErrorKind) -> Failure {
        if e.kind() == io::ErrorKind::TimedOut {
            self.timed_out()
        } else {
            Failure::Error(kind)
        }
    }
}

/// Opens a connection to `addr`, waiting until the first deadline.
pub fn connect(addr: SocketAddr, d: Deadlines) -> Result<TcpStream, Failure> {
    let left = d.first().saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(d.timed_out());
    }
    TcpStream::connect_timeout(&addr, left).map_err(|e| d.classify(&e, ErrorKind::Connect))
}

/// Sends `request` and reads its response.
pub fn exchange(
    s: &TcpStream,
    request: &[u8],
    head_request: bool,
    parser: &mut ResponseParser,
    rb: &mut ReadBuf,
    d: Deadlines,
) -> Result<Summary, Failure> {
    let until = d.first();
    let mut sent = 0;
    while sent < request.len() {
        match s.write_deadline(&request[sent..], until) {
            Ok(0) => return Err(Failure::Error(ErrorKind::Write)),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(d.classify(&e, ErrorKind::Write)),
        }
    }
    parser.reset(head_request);
    read_response(parser, rb, |buf| s.read_deadline(buf, until)).map_err(|e| match e {
        ResponseError::Io(e) => d.classify(&e, ErrorKind::Read),
        ResponseError::Truncated | ResponseError::Closed | ResponseError::Malformed(_) => {
            Failure::Error(ErrorKind::Read)
        }
    })
}

/// An open connection: plain, or TLS over the same fiber socket. The plain arm calls the
/// functions above directly, so an `http://` run pays one match per exchange and nothing else.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// Opens a connection to `t`: connects, and for an `https://` target runs the TLS handshake,
/// all before the first deadline. A failed handshake counts as a connect error.
pub fn open(t: &Target, d: Deadlines) -> Result<Conn, Failure> {
    let s = connect(t.addr, d)?;
    match &t.tls {
        None => Ok(Conn::Plain(s)),
        // As browsers and curl: a TLS connection's small writes (the last handshake flight,
        // an alert) are not held back for an acknowledgement.
        Some(tls) => s
            .set_nodelay(true)
            .and_then(|()| TlsStream::handshake(s, tls, d.first()))
            .map(|s| Conn::Tls(Box::new(s)))
            .map_err(|e| d.classify(&e, ErrorKind::Connect)),
    }
}

/// Sends `request` on `c` and reads its response.
pub fn exchange_on(
    c: &mut Conn,
    request: &[u8],
    head_request: bool,
    parser: &mut ResponseParser,
    rb: &mut ReadBuf,
    d: Deadlines,
) -> Result<Summary, Failure> {
    match c {
        Conn::Plain(s) => exchange(s, request, head_request, parser, rb, d),
        Conn::Tls(s) => exchange_tls(s, request, head_request, parser, rb, d),
    }
}

fn exchange_tls(
    s: &mut TlsStream,
    request: &[u8],
    head_request: bool,
    parser: &mut ResponseParser,
    rb: &mut ReadBuf,
    d: Deadlines,
) -> Result<Summary, Failure> {
    let until = d.first();
    s.write_all_deadline(request, until)
        .map_err(|e| d.classify(&e, ErrorKind::Write))?;
    parser.reset(head_request);
    read_response(parser, rb, |buf| s.read_deadline(buf, until)).map_err(|e| match e {
        ResponseError::Io(e) => d.classify(&e, ErrorKind::Read),
        ResponseError::Truncated | ResponseError::Closed | ResponseError::Malformed(_) => {
            Failure::Error(ErrorKind::Read)
        }
    })
}

/// One connection and handshake to `t` before a run, so that a certificate the client does
/// not trust is one clear error instead of a run of connect errors. `Ok` also when the
/// connection itself fails (refused, timed out): the run counts those as usual.
pub fn check_handshake(t: &Target, timeout: std::time::Duration) -> io::Result<()> {
    if t.tls.is_none() {
        return Ok(());
    }
    let rt = weft_fiber::Runtime::builder()
        .workers(1)
        .name("weft-bench-check")
        .build()?;
    let t2 = t.clone();
    let r = rt
        .spawn_on(0, move || {
            let until = Instant::now() + timeout;
            let Ok(s) = TcpStream::connect_timeout(&t2.addr, timeout) else {
                return Ok(());
            };
            let tls = t2.tls.as_ref().expect("an https target");
            TlsStream::handshake(s, tls, until).map(|mut s| s.close(until))
        })
        .join()
        .map_err(|e| io::Error::other(format!("handshake check failed: {e:?}")))?;
    rt.shutdown();
    r
}
