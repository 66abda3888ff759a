//! One request to a FastCGI application and its answer: the records out (the request body
//! buffered or streamed), the records in (STDOUT's header section parsed, the rest sent as
//! it comes, STDERR logged), the connection kept for the next request when both sides allow.

use std::io::{self, Read, Write};

use std::num::NonZeroU16;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weft_fiber::sync::{bounded, Receiver, Sender, TrySendError};
use weft_http::cgi::{find_blank_line, parse_head};
use weft_http::fastcgi::{self, DecodeError, Decoder, Event};
use weft_http::{BodyFraming, Method};

use super::route::Script;
use crate::body::RequestBody;
use crate::config::FastcgiConfig;
use crate::handlers::cgi::{meta_variables, Credentials, Outcome};
use crate::handlers::pool::{Idle, Pool};
use crate::handlers::sock::{Addr, Sock};
use crate::handlers::{is_dead_connection, is_idempotent, is_timeout};
use crate::response::{Body, BodyStream, Response};
use crate::Request;

/// Bytes per read from the application, and per piece of a streamed request body.
const PIECE: usize = 16 * 1024;
/// The one request id a connection carries at a time.
const ID: NonZeroU16 = NonZeroU16::MIN;
/// A STDERR line longer than this is logged in pieces (nginx cuts an error-log line at 2048).
const MAX_STDERR_LINE: usize = 4096;

/// A FastCGI application: where it listens, its pool of idle connections, and how requests
/// are sent to it.
pub(crate) struct Backend {
    /// `server` as configured, for logs.
    server: String,
    addr: Addr,
    connect_timeout: Duration,
    read_timeout: Duration,
    pool: Arc<Pool<Conn>>,
    /// With `max_conns`: the connections open now, counted; none: a connection per request.
    slots: Option<Arc<Slots>>,
    buffering: bool,
    max_header_bytes: usize,
    output_buffer: usize,
    /// `params`, sent after (and in place of) the CGI variables of the same name.
    params: Vec<(String, String)>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("server", &self.server)
            .finish()
    }
}

/// A connection to the application.
struct Conn {
    sock: Sock,
    /// It came from the pool (so it may have died while idle).
    reused: bool,
    /// The place it holds among `max_conns`, given back when it closes.
    slot: Option<Arc<Slots>>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            s.give();
        }
    }
}

/// Set in a `process`-model connection process: no connection is kept past its request.
static IN_CONNECTION_PROCESS: AtomicBool = AtomicBool::new(false);

/// Readies this process, a `process`-model connection process, for FastCGI: a connection kept
/// by one of these processes between its client's requests would hold a php-fpm worker that
/// every other process's requests wait for, so none is kept.
pub(crate) fn enter_connection_process() {
    IN_CONNECTION_PROCESS.store(true, Ordering::Relaxed);
}

/// The connections of a backend with `max_conns`: a bounded channel holds one token per open
/// connection (weft-fiber's, so a request that waits for one parks its fiber, or blocks its
/// thread on the other models). A request that waits says so to the pool
/// ([`Pool::wait_for`]), so that a connection finished meanwhile is closed and its place
/// given to it rather than kept idle.
struct Slots {
    tx: Sender<()>,
    rx: Receiver<()>,
}

impl Slots {
    fn new(max: usize) -> Slots {
        let (tx, rx) = bounded(max);
        Slots { tx, rx }
    }

    /// Takes a place if one is free.
    fn try_take(&self) -> bool {
        match self.tx.try_send(()) {
            Ok(()) => true,
            Err(TrySendError::Full(())) => false,
            Err(TrySendError::Disconnected(())) => unreachable!("the receiver lives in self"),
        }
    }

    /// Takes a place, waiting while all are taken.
    fn take(&self) -> Result<(), Failure> {
        self.tx
            .send(())
            .map_err(|_| Failure::new(503, "no connection to the application"))
    }

    fn give(&self) {
        let _ = self.rx.try_recv();
    }
}

impl Idle for Conn {
    fn is_open(&self) -> bool {
        let mut b = [0u8; 1];
        match self.sock.read_now(&mut b) {
            Err(e) => is_timeout(&e),
            Ok(_) => false,
        }
    }

    /// A Unix socket is taken unchecked (a system call saved per request): one whose worker
    /// closed it fails the first write with EPIPE, before anything is delivered, and the
    /// request goes again on a new connection whatever its method.
    fn is_open_to_take(&self) -> bool {
        self.sock.is_unix() || self.is_open()
    }
}

/// Why a request got no answer from the application: the status to answer, a line for the
/// log.
#[derive(Debug)]
struct Failure {
    status: u16,
    why: String,
}

impl Failure {
    fn new(status: u16, why: impl Into<String>) -> Failure {
        Failure {
            status,
            why: why.into(),
        }
    }

    fn io(what: &str, e: &io::Error) -> Failure {
        let status = match e.kind() {
            _ if is_timeout(e) => 504,
            io::ErrorKind::ResourceBusy => 503,
            _ => 502,
        };
        Failure::new(status, format!("{what}: {e}"))
    }

    fn decode(e: DecodeError) -> Failure {
        Failure::new(e.status(), format!("the application's records: {e}"))
    }
}

/// How sending the request failed.
enum Sent {
    /// The connection was dead before the application took anything (a pooled one may be).
    Dead(io::Error),
    /// Writing failed after the first write, or timed out.
    Failed(io::Error),
    /// The client's body failed; the driver answers it (400, 408, 413).
    Client,
}

impl Backend {
    pub(super) fn new(cfg: &FastcgiConfig) -> io::Result<Backend> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let addr = Addr::parse(&cfg.server, "fastcgi server").map_err(invalid)?;
        for name in cfg.params.keys() {
            if name.is_empty() || name.bytes().any(|b| b == b'=' || b.is_ascii_control()) {
                return Err(invalid(format!("fastcgi.params: `{name}` is not a name")));
            }
        }
        Ok(Backend {
            server: cfg.server.clone(),
            addr,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            pool: Pool::new(cfg.max_conns, cfg.idle_timeout),
            slots: (cfg.max_conns > 0).then(|| Arc::new(Slots::new(cfg.max_conns))),
            buffering: cfg.request_buffering,
            max_header_bytes: cfg.max_header_bytes,
            output_buffer: cfg.output_buffer,
            params: cfg
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// Runs `script` for `req`: the response (its body streaming from the application), or
    /// a local redirect.
    pub(super) fn run(
        self: &Arc<Self>,
        req: &Request,
        body: &mut RequestBody<'_>,
        script: &Script,
        root: &Path,
    ) -> Outcome {
        let t0 = std::time::Instant::now();
        let outcome = self.exchange(req, body, script, root);
        // `$upstream_response_time`: to the application's header section (or its failure).
        req.set_upstream_time(t0.elapsed());
        match outcome {
            Ok(o) => o,
            Err(Failure { status, why }) => {
                log::warn!(
                    "{}: fastcgi {} {} ({}) to {}: {why}; answering {status}",
                    req.peer_addr(),
                    req.method_str(),
                    req.target(),
                    String::from_utf8_lossy(&script.name),
                    self.server
                );
                Outcome::Response(Response::error(status))
            }
        }
    }

    /// A new connection; with `max_conns`, once one of the places is free.
    fn connect(&self) -> Result<Conn, Failure> {
        if let Some(s) = &self.slots {
            if !s.try_take() {
                if let Some(mut c) = self.pool.wait_for(|| s.take())? {
                    c.reused = true;
                    return Ok(c);
                }
            }
        }
        // From here on, dropping `slot` (a failed connect) gives the place back.
        let slot = self.slots.clone().map(|s| Held(Some(s)));
        let sock = self
            .addr
            .connect(self.connect_timeout, self.read_timeout)
            .map_err(|e| Failure::io("connecting", &e))?;
        Ok(Conn {
            sock,
            reused: false,
            slot: slot.map(Held::keep),
        })
    }

    fn checkout(&self) -> Result<Conn, Failure> {
        match self.pool.take() {
            Some(mut c) => {
                c.reused = true;
                Ok(c)
            }
            None => self.connect(),
        }
    }

    fn exchange(
        self: &Arc<Self>,
        req: &Request,
        body: &mut RequestBody<'_>,
        script: &Script,
        root: &Path,
    ) -> Result<Outcome, Failure> {
        // `get` is not GET (RFC 9110 §9.1): the application would take it for GET.
        if Method::miscased(req.method_str().as_bytes()).is_some() {
            return Err(Failure::new(
                501,
                "method in other letter case than registered is not passed on",
            ));
        }
        let framing = req.head().framing();
        // CONTENT_LENGTH is how PHP reads a body: a chunked one is read whole first, as is
        // any body with request buffering on (nginx's fastcgi_request_buffering).
        let buffered = match framing {
            BodyFraming::None => None,
            BodyFraming::Length(_) if !self.buffering => None,
            _ => match body.read_all() {
                Ok(data) => Some(data),
                // The driver answers the body's error (400, 408, 413).
                Err(_) => {
                    return Err(Failure::new(
                        400,
                        "the client's request body failed; nothing was passed on",
                    ))
                }
            },
        };
        let content_length = match (&buffered, framing) {
            (Some(d), _) => Some(d.len() as u64),
            (None, BodyFraming::Length(n)) => Some(n),
            _ => None,
        };
        let mut head = Vec::with_capacity(2048);
        fastcgi::begin_request(&mut head, ID);
        self.params(&mut head, req, content_length, script, root);
        if buffered.is_none() && framing == BodyFraming::None {
            fastcgi::end_stdin(&mut head, ID);
        }
        let replayable =
            is_idempotent(req.method()) && (framing == BodyFraming::None || buffered.is_some());
        let mut conn = self.checkout()?;
        loop {
            let sent = match &buffered {
                Some(data) => send_buffered(&conn, &head, data),
                None => send_streamed(&conn, &head, framing, body),
            };
            match sent {
                Ok(()) => {}
                // Nothing was delivered when a Unix socket's first write fails (EPIPE): any
                // request may go again; over TCP only one that may be sent twice.
                Err(Sent::Dead(e)) if conn.reused && (replayable || conn.sock.is_unix()) => {
                    log::debug!(
                        "fastcgi {}: pooled connection dead ({e}); again",
                        self.server
                    );
                    // Its place among `max_conns` first, or the new one could wait for it.
                    drop(conn);
                    conn = self.connect()?;
                    continue;
                }
                Err(Sent::Dead(e) | Sent::Failed(e)) => {
                    return Err(Failure::io("writing the request", &e))
                }
                Err(Sent::Client) => {
                    return Err(Failure::new(400, "the client's request body failed"))
                }
            }
            let mut reply = Reply::new(conn, &script.name);
            match reply.head(self) {
                Ok(h) => return self.answer(reply, h, req),
                Err(HeadError::Dead(e)) if reply.conn.reused && replayable => {
                    log::debug!(
                        "fastcgi {}: pooled connection dead ({e}); again",
                        self.server
                    );
                    drop(reply);
                    conn = self.connect()?;
                }
                Err(HeadError::Dead(e)) => return Err(Failure::io("reading the answer", &e)),
                Err(HeadError::Failed(f)) => return Err(f),
            }
        }
    }

    /// Appends the PARAMS stream: the CGI variables, the script's, then `params`.
    fn params(
        &self,
        out: &mut Vec<u8>,
        req: &Request,
        content_length: Option<u64>,
        script: &Script,
        root: &Path,
    ) {
        let mut vars: Vec<(String, Vec<u8>)> =
            meta_variables(req, content_length, Credentials::Passed)
                .into_iter()
                .map(|(k, v)| (k, v.into_vec()))
                .collect();
        let root_bytes = root.as_os_str().as_bytes();
        let mut document_uri = script.name.clone();
        document_uri.extend_from_slice(&script.path_info);
        vars.push(("SCRIPT_NAME".into(), script.name.clone()));
        vars.push((
            "SCRIPT_FILENAME".into(),
            script.filename.as_os_str().as_bytes().to_vec(),
        ));
        vars.push(("DOCUMENT_ROOT".into(), root_bytes.to_vec()));
        vars.push(("DOCUMENT_URI".into(), document_uri));
        // php-cgi refuses to run without it (cgi.force_redirect); nginx sends it too.
        vars.push(("REDIRECT_STATUS".into(), b"200".to_vec()));
        if !script.path_info.is_empty() {
            let mut translated = root_bytes.to_vec();
            translated.extend_from_slice(&script.path_info);
            vars.push(("PATH_INFO".into(), script.path_info.clone()));
            vars.push(("PATH_TRANSLATED".into(), translated));
        }
        let mut p = fastcgi::params(out, ID);
        for (k, v) in &vars {
            if !self.params.iter().any(|(name, _)| name == k) {
                p.pair(k.as_bytes(), v);
            }
        }
        for (k, v) in &self.params {
            p.pair(k.as_bytes(), v.as_bytes());
        }
        p.finish();
    }

    /// The outcome once the header section is in: a local redirect, or the response with
    /// what of its body is already there (all of it, if it ends within `output_buffer`).
    fn answer(
        self: &Arc<Self>,
        mut reply: Reply,
        head: Head,
        req: &Request,
    ) -> Result<Outcome, Failure> {
        let Head {
            mut stdout,
            head_len,
            body_start,
        } = head;
        let fields = parse_head(&stdout[..head_len])
            .map_err(|why| Failure::new(502, format!("bad header section: {why}")))?;
        let mut pending = stdout.split_off(body_start);
        drop(stdout);
        if let Some(target) = fields.local_redirect() {
            // The body is not the client's: read it to the end (bounded) to keep the connection.
            let target = target.to_string();
            let mut scratch = Vec::new();
            let mut drained = 0;
            while !reply.dec.is_done() && drained <= self.output_buffer {
                scratch.clear();
                reply.decode(&mut scratch).map_err(Failure::decode)?;
                drained += scratch.len();
                if !reply.dec.is_done() {
                    match reply.fill(true) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            }
            self.release(reply);
            return Ok(Outcome::LocalRedirect(target));
        }
        // What has arrived already, without waiting: a response that is over is sent with
        // its length (and an HTTP/1.0 client keeps its connection).
        while !reply.dec.is_done() && pending.len() <= self.output_buffer {
            reply.decode(&mut pending).map_err(Failure::decode)?;
            if reply.dec.is_done() {
                break;
            }
            match reply.fill(false) {
                Ok(0) => {
                    return Err(Failure::new(
                        502,
                        "the application closed the connection before END_REQUEST",
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => break,
                Err(e) => return Err(Failure::io("reading the answer", &e)),
            }
        }
        let mut resp = Response::new(fields.status());
        for (n, v) in fields.headers {
            resp = resp.header(n, v);
        }
        if let Some(loc) = fields.location {
            resp = resp.header("Location", loc);
        }
        resp.body = if reply.dec.is_done() {
            self.release(reply);
            if req.method() == Method::Head {
                // PHP sends no body to HEAD; the length it announced is passed on.
                match fields.content_length {
                    Some(n) => Body::Stream(BodyStream::with_len(io::empty(), n)),
                    None => Body::Empty,
                }
            } else {
                Body::Bytes(Bytes::from(pending))
            }
        } else {
            let out = Output {
                backend: self.clone(),
                reply: Some(reply),
                pending,
                pos: 0,
            };
            match fields.content_length {
                Some(n) => Body::Stream(BodyStream::with_len(out, n)),
                None => Body::Stream(BodyStream::new(out)),
            }
        };
        Ok(Outcome::Response(resp))
    }

    /// Keeps the connection of a finished reply for the next request, if nothing is left
    /// over and keeping is on (the pool closes it instead while a request waits for a place).
    fn release(&self, reply: Reply) {
        let keep = self.slots.is_some() && !IN_CONNECTION_PROCESS.load(Ordering::Relaxed);
        if keep && reply.dec.is_done() && reply.pos == reply.end {
            self.pool.put(reply.conn);
        }
    }
}

/// A place among `max_conns` taken for a connection being made: given back if dropped.
struct Held(Option<Arc<Slots>>);

impl Held {
    /// The place, now the connection's to give back.
    fn keep(mut self) -> Arc<Slots> {
        self.0.take().expect("held until kept")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.give();
        }
    }
}

/// Writes the request's records with a body read whole beforehand.
fn send_buffered(conn: &Conn, head: &[u8], data: &[u8]) -> Result<(), Sent> {
    write_head(conn, head)?;
    let mut records = Vec::with_capacity(PIECE.min(data.len()) + 64);
    for piece in data.chunks(4 * PIECE) {
        records.clear();
        fastcgi::stdin(&mut records, ID, piece);
        (&conn.sock).write_all(&records).map_err(Sent::Failed)?;
    }
    records.clear();
    fastcgi::end_stdin(&mut records, ID);
    (&conn.sock).write_all(&records).map_err(Sent::Failed)
}

/// Writes the request's records, the body as STDIN records as it arrives (`head` already ends
/// the STDIN stream for a request without a body).
fn send_streamed(
    conn: &Conn,
    head: &[u8],
    framing: BodyFraming,
    body: &mut RequestBody<'_>,
) -> Result<(), Sent> {
    write_head(conn, head)?;
    if framing == BodyFraming::None {
        return Ok(());
    }
    let mut buf = vec![0u8; PIECE];
    let mut records = Vec::with_capacity(PIECE + 64);
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(Sent::Client),
        };
        records.clear();
        fastcgi::stdin(&mut records, ID, &buf[..n]);
        (&conn.sock).write_all(&records).map_err(Sent::Failed)?;
    }
    records.clear();
    fastcgi::end_stdin(&mut records, ID);
    (&conn.sock).write_all(&records).map_err(Sent::Failed)
}

/// Writes the request's first records: a connection that fails the very first write (EPIPE,
/// a reset) was dead before anything reached the application; any later failure, or a
/// timeout, may have come after part of the request did.
fn write_head(conn: &Conn, head: &[u8]) -> Result<(), Sent> {
    let mut off = 0;
    while off < head.len() {
        match (&conn.sock).write(&head[off..]) {
            Ok(0) => return Err(Sent::Failed(io::ErrorKind::WriteZero.into())),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if off == 0 && !is_timeout(&e) => return Err(Sent::Dead(e)),
            Err(e) => return Err(Sent::Failed(e)),
        }
    }
    Ok(())
}

/// The end of the header section in the STDOUT bytes read so far.
struct Head {
    stdout: Vec<u8>,
    head_len: usize,
    body_start: usize,
}

enum HeadError {
    /// Nothing came back: the connection was dead (a pooled one may be).
    Dead(io::Error),
    Failed(Failure),
}

/// The answer to one request as it is read: the decoder, the bytes read and not yet
/// decoded, and the STDERR line being gathered.
struct Reply {
    conn: Conn,
    dec: Decoder,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    stderr: Vec<u8>,
    /// The script's URL path, for the log.
    script: String,
}

impl Reply {
    fn new(conn: Conn, script: &[u8]) -> Reply {
        Reply {
            conn,
            dec: Decoder::new(ID),
            buf: vec![0u8; PIECE].into_boxed_slice(),
            pos: 0,
            end: 0,
            stderr: Vec::new(),
            script: String::from_utf8_lossy(script).into_owned(),
        }
    }

    /// Decodes every byte read and not yet decoded: STDOUT appended to `out`, STDERR logged
    /// a line at a time.
    fn decode(&mut self, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let Reply {
            dec,
            buf,
            pos,
            end,
            stderr,
            script,
            ..
        } = self;
        while *pos < *end {
            let step = dec.decode(&buf[*pos..*end])?;
            *pos += step.consumed;
            match step.event {
                Some(Event::Stdout(b)) => out.extend_from_slice(b),
                Some(Event::Stderr(b)) => {
                    stderr.extend_from_slice(b);
                    log_lines(stderr, script, false);
                }
                Some(Event::End { app_status }) => {
                    log_lines(stderr, script, true);
                    if app_status != 0 {
                        log::warn!("fastcgi {script}: the application's exit status {app_status}");
                    }
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Reads more (every byte before must have been decoded): waiting up to the read timeout,
    /// or, without `wait`, only what is there now (`TimedOut` if nothing is).
    fn fill(&mut self, wait: bool) -> io::Result<usize> {
        debug_assert_eq!(self.pos, self.end);
        self.pos = 0;
        self.end = 0;
        let n = if wait {
            (&self.conn.sock).read(&mut self.buf)
        } else {
            self.conn.sock.read_now(&mut self.buf)
        }?;
        self.end = n;
        Ok(n)
    }

    /// Reads until the end of STDOUT's header section.
    fn head(&mut self, backend: &Backend) -> Result<Head, HeadError> {
        let failed = |status: u16, why: &str| HeadError::Failed(Failure::new(status, why));
        let mut stdout = Vec::new();
        let mut got_any = false;
        loop {
            self.decode(&mut stdout)
                .map_err(|e| HeadError::Failed(Failure::decode(e)))?;
            if let Some((head_len, body_start)) = find_blank_line(&stdout) {
                if head_len > backend.max_header_bytes {
                    return Err(failed(502, "header section too large (max_header_bytes)"));
                }
                return Ok(Head {
                    stdout,
                    head_len,
                    body_start,
                });
            }
            if stdout.len() > backend.max_header_bytes {
                return Err(failed(502, "header section too large (max_header_bytes)"));
            }
            if self.dec.is_done() {
                return Err(failed(
                    502,
                    if stdout.is_empty() {
                        "no output"
                    } else {
                        "output ended inside the header section"
                    },
                ));
            }
            match self.fill(true) {
                Ok(0) if !got_any => {
                    return Err(HeadError::Dead(io::ErrorKind::UnexpectedEof.into()))
                }
                Ok(0) => {
                    return Err(failed(
                        502,
                        "the application closed the connection before its header section ended",
                    ))
                }
                Ok(_) => got_any = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => {
                    return Err(HeadError::Failed(Failure::new(
                        504,
                        format!("no header section within {:?}", backend.read_timeout),
                    )))
                }
                Err(e) if !got_any && is_dead_connection(&e) => return Err(HeadError::Dead(e)),
                Err(e) => return Err(HeadError::Failed(Failure::io("reading the answer", &e))),
            }
        }
    }
}

/// Logs the whole lines of `stderr` (and, at the `end`, the rest), each prefixed with the
/// script; a line longer than [`MAX_STDERR_LINE`] is logged in pieces.
fn log_lines(stderr: &mut Vec<u8>, script: &str, end: bool) {
    let emit = |l: &[u8]| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if !l.is_empty() {
            log::warn!("fastcgi {script}: stderr: {}", String::from_utf8_lossy(l));
        }
    };
    let mut start = 0;
    while let Some(i) = stderr[start..].iter().position(|&b| b == b'\n') {
        emit(&stderr[start..start + i]);
        start += i + 1;
    }
    stderr.drain(..start);
    while stderr.len() >= MAX_STDERR_LINE {
        emit(&stderr[..MAX_STDERR_LINE]);
        stderr.drain(..MAX_STDERR_LINE);
    }
    if end && !stderr.is_empty() {
        emit(stderr);
        stderr.clear();
    }
}

/// The rest of a response body: what was read with the header section, then the STDOUT
/// records as they arrive. At END_REQUEST the connection goes back to the pool; dropped
/// before it (a client gone), the connection closes.
struct Output {
    backend: Arc<Backend>,
    reply: Option<Reply>,
    pending: Vec<u8>,
    pos: usize,
}

impl Read for Output {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.pending.len() {
                let n = buf.len().min(self.pending.len() - self.pos);
                buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            self.pending.clear();
            self.pos = 0;
            let Some(reply) = self.reply.as_mut() else {
                return Ok(0);
            };
            if reply.dec.is_done() {
                if let Some(r) = self.reply.take() {
                    self.backend.release(r);
                }
                return Ok(0);
            }
            reply
                .decode(&mut self.pending)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if !self.pending.is_empty() || reply.dec.is_done() {
                continue;
            }
            match reply.fill(true) {
                Ok(0) => {
                    log::warn!(
                        "fastcgi {}: {}: the application closed the connection before \
                         END_REQUEST; response cut",
                        self.backend.server,
                        reply.script
                    );
                    self.reply = None;
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!(
                        "fastcgi {}: {}: reading the answer: {e}; response cut",
                        self.backend.server,
                        reply.script
                    );
                    self.reply = None;
                    return Err(e);
                }
            }
        }
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("server", &self.backend.server)
            .finish()
    }
}
