//! HTTP/2 over a blocking transport (thread, fiber and process models; TLS with ALPN `h2`
//! and h2c with prior knowledge): weft-http's sans-I/O [`Connection`] fed from the socket,
//! each request turned into the request every handler sees, each response framed back.
//!
//! A request's field section is written out as an HTTP/1.1 head and parsed by the same
//! [`Parser`] every HTTP/1.1 request goes through, so HTTP/2 requests meet the same rules
//! (host, target, field syntax, limits) and reach the same routing, handlers, logs and
//! metrics; the head is marked [`Version::Http2`]. Its body is read whole first, within
//! `limits.max_body` and flow control, and handed to the handler as a body of known length.
//!
//! Each request's handler runs when its body is whole, and the responses' bodies go out
//! interleaved, as flow control lets them, in turns of at most [`TURN_BYTES`] per stream. A
//! handler that answers from memory or files (static files, the response cache, weft's own
//! routes) runs in the connection's own flow of control. One that may wait on another process
//! (CGI, the proxy, an embedder's route: `App::may_block`) runs away from it, on a fiber of
//! its own in the fiber model and on a thread of its own elsewhere ([`Away`]), and a streamed
//! body it answers with is read there too; the connection meanwhile waits on its socket *or*
//! on their wake-up (`Transport::read_or`), so a slow script holds only its own stream
//! (ARCHITECTURE.md, "HTTP/2").

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_fiber::sync::{bounded, Interrupt, Receiver, Sender, TryRecvError};
use weft_http::h2::{self, Connection, ErrorCode, Event, RequestHead2, StreamId};
use weft_http::{Method, Parser, Version};

use crate::app::App;
use crate::body::ReadBuf;
use crate::minrate::MinRate;
use crate::net::Transport;
use crate::response::{Body, Response};
use crate::Request;

use super::head::{mark_busy, mark_idle};
use super::timing::Times;
use super::{ConnInfo, OnIdle, Served, Start};

/// Body bytes one stream sends in a turn before the next stream's turn.
const TURN_BYTES: usize = 64 * 1024;
/// Body bytes queued for the socket before it is written.
const WRITE_BATCH: usize = 256 * 1024;
/// Bytes read from the socket at once.
const READ_CHUNK: usize = 16 * 1024;
/// Handlers one connection runs on threads of their own at once (outside the fiber model,
/// where a thread is dear); a request past them runs in the connection's flow of control.
const AWAY_THREADS: usize = 16;
/// Bytes of a streamed body read away per piece, and pieces queued for the connection: what
/// a stream's producer may run ahead of its client.
const PIECE_BYTES: usize = 16 * 1024;
const PIECES: usize = 4;

/// The HTTP/2 settings and limits of `app`'s configuration.
/// Requests a retiring connection takes past its bound while others are still open, before
/// GOAWAY goes out whatever is open (a client that always keeps streams open would otherwise
/// never see it): the streams one connection may have open at once.
const RETIRE_STREAMS: u32 = 128;

pub(crate) fn settings(app: &App) -> h2::Config {
    let cfg = &app.cfg;
    h2::Config {
        max_header_list_size: u32::try_from(cfg.limits.max_head_bytes).unwrap_or(u32::MAX),
        ..h2::Config::default()
    }
}

thread_local! {
    /// `server` and `date` HPACK-encoded, and the second that `date` stands for: every
    /// response of that second on this thread starts with the same bytes.
    static HEAD_START: std::cell::RefCell<(u64, Vec<u8>)> =
        const { std::cell::RefCell::new((u64::MAX, Vec::new())) };
}

/// Storage a connection's finished requests leave for its next ones (kept while the
/// connection is served, freed when it parks or ends).
#[derive(Default)]
struct Spare {
    heads: Vec<Vec<u8>>,
    // Boxes, so that a response in progress moves as a pointer and its box is reused.
    #[allow(clippy::vec_box)]
    outs: Vec<Box<Outgoing>>,
}

/// Spare buffers of each kind kept.
const SPARES: usize = 8;

/// A response on its way out.
struct Outgoing {
    req: Option<Request>,
    status: u16,
    source: Source,
    /// Bytes read from a file or a reader, not yet framed; `chunk_at` of them went.
    chunk: Vec<u8>,
    chunk_at: usize,
    /// Body bytes framed so far.
    sent: u64,
    /// The request's body is still coming and will not be read: RST_STREAM NO_ERROR once
    /// the response is out.
    reset_after: bool,
    /// Since when its turns found its window shut.
    stalled: Option<Instant>,
    /// Its last turn stopped because its producer (a handler away) had nothing yet.
    waiting: bool,
    /// Its request's clock readings, and when its head was framed (`[timing]`).
    times: Times,
    head_out: Option<Instant>,
}

/// Where a response body's bytes come from.
enum Source {
    Bytes(Bytes),
    File {
        file: Arc<std::fs::File>,
        pos: u64,
        end: u64,
    },
    Read {
        reader: Box<dyn Read + Send>,
        left: Option<u64>,
    },
    /// A streamed body read by its handler's fiber or thread ([`pipe`]).
    Piped(Receiver<Piece>),
    /// Every byte framed, END_STREAM included.
    Done,
}

/// What a handler away hands back of a streamed body.
enum Piece {
    Data(Vec<u8>),
    /// The whole body went (its declared length, if it had one, checked).
    End,
    Failed(io::Error),
}

/// The handlers of one connection that run away from its flow of control (`App::may_block`),
/// and what they hand back.
struct Away {
    /// Fired whenever something is handed back; the connection's reads end at it.
    wake: Interrupt,
    done: Mutex<Vec<Finished>>,
}

/// A handler away, done: its answer, or `None` if it never gave one (it panicked, or its
/// fiber or thread could not start).
struct Finished {
    id: StreamId,
    answer: Option<Box<Answer>>,
}

struct Answer {
    req: Request,
    resp: Response,
    times: Times,
    /// The pieces of a streamed body, and its length if known.
    piped: Option<(Receiver<Piece>, Option<u64>)>,
}

/// A handler's claim to hand back its stream: handed back with [`Ticket::answer`], or as
/// unanswered when dropped without (a panic unwinding, a job never run), so the connection
/// never waits for a stream nobody serves.
struct Ticket {
    away: Arc<Away>,
    id: StreamId,
    answered: bool,
}

impl Ticket {
    fn hand_back(&self, answer: Option<Box<Answer>>) {
        let id = self.id;
        self.away
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Finished { id, answer });
        self.away.wake.fire();
    }

    fn answer(mut self, answer: Answer) -> Arc<Away> {
        self.answered = true;
        self.hand_back(Some(Box::new(answer)));
        self.away.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.answered {
            self.hand_back(None);
        }
    }
}

/// A handler that may block, run away from its connection: the response, and a streamed
/// body's pieces after it (`staged`: on a thread of its own, so that a slow client of a
/// streamed body does not hold a thread of the model's pool).
fn run_away(
    app: Arc<App>,
    ticket: Ticket,
    req: Request,
    body: Vec<u8>,
    mut times: Times,
    staged: bool,
) {
    let mut rbuf = ReadBuf::new(0);
    if !body.is_empty() {
        rbuf.push(&body);
    }
    drop(body);
    let mut keep_alive = false;
    let limits = app.cfg.limits.http();
    let mut resp = super::handle(
        &mut NoSocket,
        &mut rbuf,
        &app,
        &req,
        &limits,
        &mut times,
        &mut keep_alive,
    );
    let s = match std::mem::take(&mut resp.body) {
        Body::Stream(s) => s,
        body => {
            // Not streamed: framed from memory or a file by the connection, as any response.
            resp.body = body;
            return drop(ticket.answer(Answer {
                req,
                resp,
                times,
                piped: None,
            }));
        }
    };
    let len = s.known_len();
    let mut reader = s.into_reader();
    let (tx, rx) = bounded(PIECES);
    let away = ticket.answer(Answer {
        req,
        resp,
        times,
        piped: Some((rx, len)),
    });
    let mut piping = move || pipe(&mut *reader, len, &tx, &away.wake);
    if !staged {
        return piping();
    }
    let spawned = std::thread::Builder::new()
        .name("weft-h2-body".into())
        .spawn(piping);
    if let Err(e) = spawned {
        // The pieces' sender went with it: the connection resets the stream.
        log::error!("cannot start a thread for a streamed body: {e}");
    }
}

/// Reads a streamed body (`len` bytes, or to its end) in pieces for the connection, as its
/// client takes them (at most [`PIECES`] ahead); stops when the stream is gone.
fn pipe(reader: &mut dyn Read, len: Option<u64>, tx: &Sender<Piece>, wake: &Interrupt) {
    let mut left = len;
    loop {
        let piece = if left == Some(0) {
            Piece::End
        } else {
            let want = left.map_or(PIECE_BYTES, |l| (l as usize).min(PIECE_BYTES));
            let mut buf = vec![0u8; want];
            match reader.read(&mut buf) {
                Ok(0) if left.is_none() => Piece::End,
                Ok(0) => Piece::Failed(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the body ended before its length",
                )),
                Ok(n) => {
                    buf.truncate(n);
                    if let Some(l) = &mut left {
                        *l -= n as u64;
                    }
                    Piece::Data(buf)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Piece::Failed(e),
            }
        };
        let last = !matches!(piece, Piece::Data(_));
        if tx.send(piece).is_err() {
            // The stream ended (reset, or the connection went): the rest is not wanted.
            return;
        }
        wake.fire();
        if last {
            return;
        }
    }
}

/// A request whose body is still arriving.
struct Incoming {
    head: RequestHead2,
    body: Vec<u8>,
    too_large: bool,
    /// Its clock readings (`[timing]`): the head when the HEADERS came.
    times: Times,
    /// Once its body is awaited: when its last DATA came (its HEADERS, before any), which
    /// `timeouts.body_read` runs from, and its body's minimum rate (`body_min_rate`). Unset
    /// for a request answered at once (no clock read for it).
    due: Option<(Instant, MinRate)>,
}

impl Incoming {
    /// When the rest of its body is late, and whether the minimum rate (rather than
    /// `timeouts.body_read`) says so.
    fn deadline(&self, t: &crate::config::Timeouts) -> Option<(Instant, bool)> {
        let (last, rate) = self.due?;
        Some(rate.earliest(self.body.len() as u64, last + t.body_read))
    }
}

enum State {
    /// Boxed: a request without a body (most) never takes this state.
    Receiving(Box<Incoming>),
    /// Its handler runs away ([`Away`]); its answer comes back through [`Driver::collect`].
    Running,
    /// Answered before its body ended (413): the rest of the body is dropped.
    Discarding,
    Sending(Box<Outgoing>),
}

struct Stream {
    id: StreamId,
    state: State,
}

/// Where a model that holds idle connections without a flow of control (the fiber model's
/// park) keeps an idle HTTP/2 connection's state between turns of the driver. Models whose
/// connections keep their flow of control to the end have none ([`H2Park::default`]): their
/// HTTP/2 connections never return [`Served::Idle`].
#[derive(Debug, Default)]
pub(crate) struct H2Park(Option<Mutex<Option<Box<Parked>>>>);

/// An idle HTTP/2 connection's state: its `Connection` (settings, windows, the client's HPACK
/// table), buffers freed.
#[derive(Debug)]
pub(crate) struct Parked {
    conn: Connection,
    going_away: bool,
    /// Requests taken past `limits.keepalive_requests` or `timeouts.keepalive_time`: GOAWAY
    /// goes out once none of them is open (after the last response, as HTTP/1.1's
    /// `Connection: close`), or at once past [`RETIRE_STREAMS`] of them.
    retiring: u32,
    /// A request of this connection has been timed (the accept phase is the first's).
    timed_one: bool,
}

impl H2Park {
    /// A slot: this model parks idle HTTP/2 connections.
    pub(crate) fn slot() -> H2Park {
        H2Park(Some(Mutex::new(None)))
    }

    /// The parked state, if the connection is an idle HTTP/2 one.
    pub(crate) fn take(&self) -> Option<Box<Parked>> {
        let slot = self.0.as_ref()?;
        slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn put(&self, parked: Box<Parked>) {
        if let Some(slot) = &self.0 {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(parked);
        }
    }
}

/// A handler's run, handed to a model's own pool ([`Stage`]).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A model's pool that runs every stream's handler (the pipeline's process stage): takes a
/// job, or gives it back when it has no room now.
pub(crate) type Stage = dyn Fn(Job) -> Result<(), Job> + Send + Sync;

/// Serves an HTTP/2 connection whose first bytes (the client's preface, maybe more) are
/// `early`, until either side ends it, or (with [`OnIdle::Return`] where the model parks, see
/// [`H2Park`]) until it falls idle.
pub(crate) fn serve<T: Transport>(
    stream: &mut T,
    early: &[u8],
    app: &App,
    info: &ConnInfo,
    on_idle: OnIdle,
) -> io::Result<Served> {
    serve_staged(stream, early, app, info, on_idle, None)
}

/// As [`serve`]; with `stage`, every stream's handler runs there (the connection's flow of
/// control frames requests and responses, as a pipeline's receive and send stages would).
pub(crate) fn serve_staged<T: Transport>(
    stream: &mut T,
    early: &[u8],
    app: &App,
    info: &ConnInfo,
    on_idle: OnIdle,
    stage: Option<&Stage>,
) -> io::Result<Served> {
    info.listener.h2_connections.fetch_add(1, Relaxed);
    let parked = Box::new(Parked {
        conn: Connection::new(settings(app)),
        going_away: false,
        retiring: 0,
        timed_one: false,
    });
    run(stream, parked, early, app, info, on_idle, stage)
}

/// Goes on serving a parked HTTP/2 connection whose client has sent again.
pub(crate) fn resume<T: Transport>(
    stream: &mut T,
    parked: Box<Parked>,
    app: &App,
    info: &ConnInfo,
    on_idle: OnIdle,
) -> io::Result<Served> {
    run(stream, parked, &[], app, info, on_idle, None)
}

/// The driver's working storage between requests: kept per thread while no connection uses
/// it, so a connection that parks between batches of requests (every few milliseconds under
/// load) finds warm buffers when it comes back instead of allocating and zeroing them.
struct Scratch {
    parser: Parser,
    head_buf: Vec<u8>,
    spare: Spare,
    fields: Fields,
    streams: Vec<Stream>,
    buf: Vec<u8>,
}

/// Sets kept per thread.
const SCRATCH_POOL: usize = 8;

thread_local! {
    #[allow(clippy::vec_box)]
    static SCRATCH: std::cell::RefCell<Vec<Box<Scratch>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn run<T: Transport>(
    stream: &mut T,
    parked: Box<Parked>,
    early: &[u8],
    app: &App,
    info: &ConnInfo,
    on_idle: OnIdle,
    stage: Option<&Stage>,
) -> io::Result<Served> {
    let limits = app.cfg.limits.http();
    let scratch = match SCRATCH.with(|p| p.borrow_mut().pop()) {
        Some(s) if s.parser.limits() == &limits => s,
        _ => Box::new(Scratch {
            parser: Parser::new(limits),
            head_buf: Vec::new(),
            spare: Spare::default(),
            fields: Fields::default(),
            streams: Vec::new(),
            buf: vec![0u8; READ_CHUNK],
        }),
    };
    let Scratch {
        parser,
        head_buf,
        spare,
        fields,
        streams,
        buf,
    } = *scratch;
    let mut d = Driver {
        parked,
        streams,
        parser,
        head_buf,
        spare,
        fields,
        times: Times::default(),
        app,
        info,
        stalled_since: None,
        park: false,
        away: None,
        away_threads: 0,
        head_since: None,
        head_bytes: 0,
        stage,
    };
    let mut buf = buf;
    let result = drive(&mut d, &mut buf, stream, early, on_idle);
    let Driver {
        parked,
        mut streams,
        parser,
        head_buf,
        spare,
        fields,
        park,
        ..
    } = d;
    if park {
        let mut parked = parked;
        parked.conn.shrink();
        info.h2.put(parked);
    }
    // Streams still held are the connection's end (cut and logged already): their storage
    // does not go back.
    streams.clear();
    SCRATCH.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < SCRATCH_POOL {
            p.push(Box::new(Scratch {
                parser,
                head_buf,
                spare,
                fields,
                streams,
                buf,
            }));
        }
    });
    result
}

fn drive<T: Transport>(
    d: &mut Driver<'_>,
    buf: &mut [u8],
    stream: &mut T,
    early: &[u8],
    on_idle: OnIdle,
) -> io::Result<Served> {
    let (app, info) = (d.app, d.info);
    let parks = matches!(on_idle, OnIdle::Return { .. }) && info.h2.0.is_some();
    // Resumed because the socket turned readable: read before parking again.
    let mut read_since_resume = !early.is_empty();
    let t = &app.cfg.timeouts;
    let lingering = app.cfg.timeouts.lingering_time;
    if !early.is_empty() {
        if !d.receive(stream, early) {
            super::driver::drain_close(stream, lingering);
            return Ok(Served::Closed);
        }
        d.note_head(early.len());
    }
    loop {
        let retired =
            d.parked.retiring > 0 && (d.streams.is_empty() || d.parked.retiring > RETIRE_STREAMS);
        if !d.parked.going_away && (app.shutdown.closing() || retired) {
            d.parked.conn.go_away();
            d.parked.going_away = true;
        }
        d.collect();
        let more = d.pump();
        if !d.flush(stream) {
            d.cut_all("the client stopped reading");
            return Ok(Served::Closed);
        }
        if d.parked.conn.is_finished() {
            return Ok(Served::Closed);
        }
        if more {
            continue;
        }
        // Nothing to send until the client says more: read, within the deadline of what it
        // owes.
        let now = Instant::now();
        if d.streams.is_empty() && d.head_since.is_none() {
            if !mark_idle(info, Start::Resumed) && !d.parked.going_away {
                d.parked.conn.go_away();
                d.parked.going_away = true;
                continue;
            }
            if parks && read_since_resume && d.parked.conn.is_idle() && !d.parked.going_away {
                // Kept as its state alone until the client sends again (`run` parks it; the
                // model's turn lingers for the next bytes first, as for HTTP/1.1).
                d.park = true;
                return Ok(Served::Idle);
            }
        }
        // The earliest of what the client owes: a head, a stream's body, an open window;
        // idle, or with only this side's work awaited, the keep-alive period.
        let wait = d
            .deadline(now)
            .map_or(t.keepalive, |at| at.saturating_duration_since(now));
        if wait.is_zero() {
            if d.expire(stream, now) {
                super::driver::drain_close(stream, lingering);
                return Ok(Served::Closed);
            }
            continue;
        }
        let got = match &d.away {
            // Some handler may hand back work: its wake-up ends the wait too.
            Some(away) => stream.read_or(buf, wait, &away.wake),
            None => {
                stream.set_read_timeout(Some(wait))?;
                stream.read(buf)
            }
        };
        match got {
            Ok(0) => {
                if app.shutdown.is_set() && d.streams.is_empty() {
                    // Shutdown closed the read side of this idle connection: GOAWAY tells
                    // the client no stream was lost (RFC 9113 §6.8).
                    d.parked.conn.go_away();
                    d.flush(stream);
                    return Ok(Served::Closed);
                }
                d.cut_all("the client closed the connection");
                return Ok(Served::Closed);
            }
            Ok(n) => {
                mark_busy(info);
                read_since_resume = true;
                if !d.receive(stream, &buf[..n]) {
                    // GOAWAY for an error is written: unread bytes must not reset it away.
                    super::driver::drain_close(stream, lingering);
                    return Ok(Served::Closed);
                }
                d.note_head(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::net::timed_out(&e) => {
                if d.expire(stream, Instant::now()) {
                    super::driver::drain_close(stream, lingering);
                    return Ok(Served::Closed);
                }
            }
            Err(e) => {
                log::debug!("{}: HTTP/2 read: {e}", info.peer);
                d.cut_all("the connection failed");
                return Ok(Served::Closed);
            }
        }
    }
}

struct Driver<'a> {
    /// What outlives a turn: the connection's state.
    parked: Box<Parked>,
    streams: Vec<Stream>,
    parser: Parser,
    /// The HTTP/1.1 head each request's fields are written into.
    head_buf: Vec<u8>,
    /// Storage of finished responses for the next ones.
    spare: Spare,
    /// The fields of the response being framed.
    fields: Fields,
    /// The clock readings of the request being answered (`[timing]`).
    times: Times,
    app: &'a App,
    info: &'a ConnInfo,
    /// Since when every response in progress has waited on the client's flow-control window.
    stalled_since: Option<Instant>,
    /// The connection fell idle: `run` parks its state.
    park: bool,
    /// Made when the first handler runs away ([`Driver::send_away`]).
    away: Option<Arc<Away>>,
    /// Since when a request head is partly received (`Connection::head_in_progress`), and
    /// the bytes read since: `timeouts.header_read` and `header_min_rate` bound it.
    head_since: Option<Instant>,
    head_bytes: u64,
    /// Handlers away on threads of their own, not yet handed back.
    away_threads: usize,
    /// Where every stream's handler runs, for a model that has such a pool.
    stage: Option<&'a Stage>,
}

impl Driver<'_> {
    fn find(&mut self, id: StreamId) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Feeds received bytes to the connection and takes its events. False once the
    /// connection has ended with an error (its GOAWAY written).
    fn receive<T: Transport>(&mut self, stream: &mut T, bytes: &[u8]) -> bool {
        if let Err(e) = self.parked.conn.recv(bytes, Instant::now()) {
            log::info!("{}: HTTP/2 connection error: {}", self.info.peer, e.reason);
            self.cut_all("the connection failed");
            self.flush(stream);
            return false;
        }
        self.dispatch();
        true
    }

    /// Whether a response in progress waits on the client's flow-control window.
    fn window_shut(&self) -> bool {
        self.streams
            .iter()
            .any(|s| matches!(&s.state, State::Sending(out) if out.stalled.is_some()))
    }

    /// After `n` bytes were read and taken: whether a request head is partly received now,
    /// and since when.
    fn note_head(&mut self, n: usize) {
        if self.parked.conn.head_in_progress() {
            if self.head_since.is_none() {
                self.head_since = Some(Instant::now());
                self.head_bytes = 0;
            }
            self.head_bytes += n as u64;
        } else {
            self.head_since = None;
        }
    }

    /// When the head in progress is late, and whether the minimum rate says so.
    fn head_deadline(&self) -> Option<(Instant, bool)> {
        let t = &self.app.cfg.timeouts;
        self.head_since
            .map(|since| MinRate::head(t, since).earliest(self.head_bytes, since + t.header_read))
    }

    /// The earliest time something the client owes is late: the head in progress, a
    /// stream's body (`timeouts.body_read` since its last DATA, or `body_min_rate`), the
    /// window of every response in progress (`timeouts.send`). `None`: it owes nothing
    /// (idle, or only handlers away are awaited).
    fn deadline(&mut self, now: Instant) -> Option<Instant> {
        let t = &self.app.cfg.timeouts;
        let mut at = self.head_deadline().map(|(at, _)| at);
        let mut earlier = |x: Instant| at = Some(at.map_or(x, |a: Instant| a.min(x)));
        if self.window_shut() {
            earlier(*self.stalled_since.get_or_insert(now) + t.send);
        }
        for s in &self.streams {
            if let State::Receiving(inc) = &s.state {
                if let Some((late, _)) = inc.deadline(t) {
                    earlier(late);
                }
            }
        }
        at
    }

    /// Acts on what is late at `now`: a stream whose body is late gets 408 (its own, the
    /// others go on); a late head, a window kept shut past `timeouts.send`, or an idle
    /// connection past `timeouts.keepalive` ends the connection (true; GOAWAY written).
    fn expire<T: Transport>(&mut self, stream: &mut T, now: Instant) -> bool {
        let t = &self.app.cfg.timeouts;
        let peer = self.info.peer;
        let end = if let Some((at, by_rate)) = self.head_deadline().filter(|(at, _)| now >= *at) {
            // Nothing else may come while a head is unfinished: the connection goes.
            log::info!(
                "{peer}: 408 HTTP/2 request head {} ({} bytes in {:?})",
                if by_rate {
                    "below timeouts.header_min_rate"
                } else {
                    "not received within timeouts.header_read"
                },
                self.head_bytes,
                at - self.head_since.unwrap_or(at),
            );
            self.cut_all("the client's next request head was late");
            true
        } else if self.window_shut()
            && self
                .stalled_since
                .is_some_and(|since| now >= since + t.send)
        {
            self.cut_all("the client did not open its window within timeouts.send");
            true
        } else {
            let mut i = 0;
            while i < self.streams.len() {
                let id = self.streams[i].id;
                let late = match &self.streams[i].state {
                    State::Receiving(inc) => inc.deadline(t).filter(|(at, _)| now >= *at),
                    _ => None,
                };
                let Some((_, by_rate)) = late else {
                    i += 1;
                    continue;
                };
                let State::Receiving(inc) = self.streams.swap_remove(i).state else {
                    unreachable!()
                };
                log::info!(
                    "{peer}: 408 HTTP/2 stream {id}: request body {} ({} bytes)",
                    if by_rate {
                        "below timeouts.body_min_rate"
                    } else {
                        "not received within timeouts.body_read"
                    },
                    inc.body.len()
                );
                self.answer_early(id, *inc, false, 408);
            }
            // Idle past the keep-alive period.
            self.streams.is_empty() && self.head_since.is_none()
        };
        if end {
            self.parked.conn.go_away();
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            self.flush(stream);
        }
        end
    }

    /// Takes what the handlers away have handed back: each answer's head framed (its body
    /// then goes out as any other's), each stream reset meanwhile logged as cut.
    fn collect(&mut self) {
        let Some(away) = &self.away else {
            return;
        };
        // Before the look: a hand-back after this fires again, so none is missed.
        away.wake.rearm();
        let done = std::mem::take(&mut *away.done.lock().unwrap_or_else(|e| e.into_inner()));
        // Handlers on threads of their own are counted (`AWAY_THREADS`); on fibers or in a
        // model's stage they are not.
        let threads = !weft_fiber::in_fiber() && self.stage.is_none();
        for f in done {
            if threads {
                self.away_threads -= 1;
            }
            let live = self
                .find(f.id)
                .filter(|&i| matches!(self.streams[i].state, State::Running));
            match (live, f.answer) {
                (Some(i), Some(answer)) => {
                    self.streams.swap_remove(i);
                    let Answer {
                        req,
                        resp,
                        times,
                        piped,
                    } = *answer;
                    self.times = times;
                    self.respond_with(f.id, Some(req), resp, piped);
                }
                (Some(i), None) => {
                    self.streams.swap_remove(i);
                    log::error!(
                        "{}: 500 HTTP/2 stream {}: its handler ended without an answer",
                        self.info.peer,
                        f.id
                    );
                    self.respond(f.id, None, Response::error(500));
                }
                (None, Some(answer)) => {
                    super::log_cut(
                        self.app,
                        self.info.peer,
                        Some(&answer.req),
                        answer.resp.status,
                        0,
                        &"the client reset the stream",
                    );
                    self.info.listener.response(answer.resp.status, 0);
                    self.info.listener.h2_requests.fetch_add(1, Relaxed);
                }
                (None, None) => {}
            }
        }
    }

    /// Whether [`Driver::send_away`] takes `req` (it may block, or the model runs every
    /// handler in a stage): decided before the request is moved, so the common request
    /// (answered here) pays one routing look and nothing more.
    fn runs_away(&self, req: &Request) -> bool {
        if self.stage.is_some() {
            return true;
        }
        (weft_fiber::in_fiber() || self.away_threads < AWAY_THREADS) && self.app.may_block(req)
    }

    /// Runs the handler of `req` away from the connection ([`Away`]); gives the request back
    /// when the application is not shared (it cannot go to another fiber or thread).
    fn send_away(
        &mut self,
        id: StreamId,
        req: Request,
        body: Vec<u8>,
        times: Times,
    ) -> Option<(Request, Vec<u8>, Times)> {
        let in_fiber = weft_fiber::in_fiber();
        let Some(app) = self.app.shared() else {
            return Some((req, body, times));
        };
        let away = self
            .away
            .get_or_insert_with(|| {
                Arc::new(Away {
                    wake: Interrupt::new(),
                    done: Mutex::new(Vec::new()),
                })
            })
            .clone();
        let ticket = Ticket {
            away,
            id,
            answered: false,
        };
        let staged = self.stage.is_some();
        let job = move || run_away(app, ticket, req, body, times, staged);
        self.streams.push(Stream {
            id,
            state: State::Running,
        });
        if let Some(stage) = self.stage {
            // A full stage: the handler runs here, and hands back as any other.
            if let Err(job) = stage(Box::new(job)) {
                job();
            }
        } else if in_fiber {
            // Detached: the ticket hands back its end, whatever it is.
            drop(weft_fiber::spawn(job));
        } else {
            self.away_threads += 1;
            let spawned = std::thread::Builder::new()
                .name("weft-h2-stream".into())
                .spawn(job);
            if let Err(e) = spawned {
                // The job (and its ticket) dropped unrun: handed back as unanswered.
                log::error!(
                    "{}: cannot start a thread for a stream: {e}",
                    self.info.peer
                );
            }
        }
        None
    }

    /// Takes the connection's events: new requests, body bytes, resets.
    fn dispatch(&mut self) {
        while let Some(ev) = self.parked.conn.poll_event() {
            match ev {
                Event::Request {
                    id,
                    head,
                    end_stream,
                    too_large,
                } => {
                    // `keepalive_requests` and `keepalive_time` (nginx applies both to
                    // HTTP/2 connections too): past either, the connection retires.
                    if !self.info.life.another(&self.app.cfg) {
                        self.parked.retiring = self.parked.retiring.saturating_add(1);
                    }
                    let declared = head.content_length;
                    let mut incoming = Incoming {
                        head,
                        body: Vec::new(),
                        too_large,
                        times: self.head_times(),
                        due: None,
                    };
                    if too_large {
                        log::info!(
                            "{}: 431 HTTP/2 request header list too large",
                            self.info.peer
                        );
                    }
                    if let Some(n) = declared.filter(|&n| n > self.app.cfg.limits.max_body) {
                        log::info!(
                            "{}: 413 Content-Length {n} over limit {}",
                            self.info.peer,
                            self.app.cfg.limits.max_body
                        );
                        self.answer_early(id, incoming, end_stream, 413);
                        continue;
                    }
                    if end_stream {
                        self.run(id, &mut incoming);
                    } else {
                        if let Some(n) = declared {
                            incoming.body.reserve_exact(n.min(64 * 1024) as usize);
                        }
                        let now = Instant::now();
                        incoming.due = Some((now, MinRate::body(&self.app.cfg.timeouts, now)));
                        self.streams.push(Stream {
                            id,
                            state: State::Receiving(Box::new(incoming)),
                        });
                    }
                }
                Event::Data {
                    id,
                    data,
                    end_stream,
                } => {
                    let n = data.len();
                    let Some(i) = self.find(id) else {
                        self.parked.conn.release(id, n);
                        continue;
                    };
                    match &mut self.streams[i].state {
                        State::Receiving(inc) => {
                            if inc.body.len() as u64 + n as u64 > self.app.cfg.limits.max_body {
                                log::info!(
                                    "{}: 413 HTTP/2 request body over limit {}",
                                    self.info.peer,
                                    self.app.cfg.limits.max_body
                                );
                                let State::Receiving(inc) = std::mem::replace(
                                    &mut self.streams[i].state,
                                    State::Discarding,
                                ) else {
                                    unreachable!()
                                };
                                self.streams.swap_remove(i);
                                self.parked.conn.release(id, n);
                                self.answer_early(id, *inc, end_stream, 413);
                                continue;
                            }
                            if let Some((last, _)) = &mut inc.due {
                                *last = Instant::now();
                            }
                            if inc.body.is_empty() && end_stream {
                                // The whole body in one frame: its buffer becomes the body.
                                inc.body = data;
                            } else {
                                inc.body.extend_from_slice(&data);
                                self.parked.conn.recycle_data(data);
                            }
                            self.parked.conn.release(id, n);
                            if end_stream {
                                let State::Receiving(mut inc) = self.streams.swap_remove(i).state
                                else {
                                    unreachable!()
                                };
                                self.run(id, &mut inc);
                            }
                        }
                        State::Discarding => {
                            self.parked.conn.release(id, n);
                            if end_stream {
                                self.streams.swap_remove(i);
                            }
                        }
                        State::Sending(_) | State::Running => self.parked.conn.release(id, n),
                    }
                }
                Event::Trailers { id } => {
                    if let Some(i) = self.find(id) {
                        if matches!(self.streams[i].state, State::Receiving(_)) {
                            let State::Receiving(mut inc) = self.streams.swap_remove(i).state
                            else {
                                unreachable!()
                            };
                            self.run(id, &mut inc);
                        } else if matches!(self.streams[i].state, State::Discarding) {
                            self.streams.swap_remove(i);
                        }
                    }
                }
                Event::Reset { id, .. } => {
                    if let Some(i) = self.find(id) {
                        // A handler away hands back into nothing: `collect` logs it.
                        let s = self.streams.swap_remove(i);
                        if let State::Sending(out) = s.state {
                            self.finish(out, Some("the client reset the stream"));
                        }
                    }
                }
                Event::GoAway { .. } => {
                    self.parked.going_away = true;
                }
            }
        }
    }

    /// Answers `status` to a request whose body will not be read, and stops its body.
    fn answer_early(&mut self, id: StreamId, inc: Incoming, end_stream: bool, status: u16) {
        let req = self.request(&inc.head, 0).ok();
        self.parked.conn.recycle(inc.head);
        let resp = Response::error(status);
        self.respond(id, req, resp);
        if !end_stream {
            // RFC 9113 §8.1: a complete response, then RST_STREAM NO_ERROR for the rest of
            // the body; once the response's last DATA is queued.
            match self.find(id).map(|i| &mut self.streams[i].state) {
                Some(State::Sending(out)) => out.reset_after = true,
                _ => self.parked.conn.reset(id, ErrorCode::NoError),
            }
        }
    }

    /// The request the handlers see for `head` with a body of `body_len` bytes; `Err` is the
    /// status a head the HTTP/1.1 rules refuse gets.
    fn request(&mut self, head: &RequestHead2, body_len: u64) -> Result<Request, u16> {
        write_head(head, body_len, &mut self.head_buf);
        self.parser.reset();
        match self.parser.parse(&self.head_buf) {
            Ok(Some(n)) if n == self.head_buf.len() => {}
            Ok(_) => return Err(400),
            Err(e) => {
                log::info!(
                    "{}: {} HTTP/2 request: {}",
                    self.info.peer,
                    e.status(),
                    e.reason()
                );
                return Err(e.status());
            }
        }
        let mut parsed = self.parser.take_head();
        parsed.set_version(Version::Http2);
        let info = self.info;
        let mut peer = info.client();
        let real_ip_from = &self.app.cfg.real_ip_from;
        if !real_ip_from.is_empty() {
            peer = super::handle::real_ip_of(&parsed, &self.head_buf, peer, real_ip_from);
        }
        // The head's bytes go with the request; a spare buffer takes their place.
        let spare = self.spare.heads.pop().unwrap_or_default();
        let bytes = std::mem::replace(&mut self.head_buf, spare);
        Ok(Request::with_tls(
            bytes,
            parsed,
            peer,
            info.local,
            info.tls.get().cloned(),
        ))
    }

    /// Runs the handler of a request whose body is whole and starts its response.
    fn run(&mut self, id: StreamId, inc: &mut Incoming) {
        let head = std::mem::take(&mut inc.head);
        if inc.too_large {
            let req = self.request(&head, 0).ok();
            self.parked.conn.recycle(head);
            self.respond(id, req, Response::error(431));
            return;
        }
        let body = std::mem::take(&mut inc.body);
        let req = self.request(&head, body.len() as u64);
        self.parked.conn.recycle(head);
        let mut req = match req {
            Ok(req) => req,
            Err(status) => {
                // Logged as a head refused before it was read, with the line it made.
                let line = self.head_buf.split(|&b| b == b'\n').next().unwrap_or(b"");
                super::log_refused(self.app, self.info.client().ip(), line, status);
                self.respond(id, None, super::failure(status));
                return;
            }
        };
        let mut keep_alive = false;
        let resp = match super::redirect(self.app, self.info, &req, &mut keep_alive) {
            Some(r) => r,
            None => {
                let times = &mut inc.times;
                if let Some(head) = times.head {
                    // The body's wait, from the HEADERS to its end.
                    times.add_body_wait(head.elapsed());
                }
                let body = if self.runs_away(&req) {
                    let times = std::mem::take(times);
                    let Some((back, body, times)) = self.send_away(id, req, body, times) else {
                        return;
                    };
                    req = back;
                    inc.times = times;
                    body
                } else {
                    body
                };
                let times = &mut inc.times;
                let mut rbuf = ReadBuf::new(0);
                if !body.is_empty() {
                    rbuf.push(&body);
                }
                super::handle(
                    &mut NoSocket,
                    &mut rbuf,
                    self.app,
                    &req,
                    &self.app.cfg.limits.http(),
                    times,
                    &mut keep_alive,
                )
            }
        };
        self.times = std::mem::take(&mut inc.times);
        self.respond(id, Some(req), resp);
    }

    /// The clock readings of a request whose HEADERS just came (`[timing]`; none when off):
    /// its head takes no time of its own, it came whole in the frames just read.
    fn head_times(&mut self) -> Times {
        if !self.app.cfg.timing.on() {
            return Times::default();
        }
        let now = Instant::now();
        let times = Times {
            start: Some(now),
            head: Some(now),
            first: !std::mem::replace(&mut self.parked.timed_one, true),
            ..Times::default()
        };
        times.record_head(self.info);
        times
    }

    /// Frames the head of `resp` on stream `id` and queues its body.
    fn respond(&mut self, id: StreamId, req: Option<Request>, resp: Response) {
        self.respond_with(id, req, resp, None);
    }

    /// As [`Driver::respond`]; `piped`: the body is streamed by the handler's fiber or
    /// thread ([`pipe`]), with its length if known.
    fn respond_with(
        &mut self,
        id: StreamId,
        req: Option<Request>,
        mut resp: Response,
        piped: Option<(Receiver<Piece>, Option<u64>)>,
    ) {
        let head_only = req.as_ref().is_some_and(|r| r.method() == Method::Head);
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        let times = std::mem::take(&mut self.times);
        if self.app.cfg.timing.server_timing && times.head.is_some() {
            fields.push_lines(&times.server_timing(self.info));
        }
        let extra = super::extra_headers(self.app, self.info);
        let status = resp.status;
        let no_body = (100..200).contains(&status) || status == 204 || status == 304;
        let mut prepared = None;
        let source = match std::mem::take(&mut resp.body) {
            Body::Prepared(entry) => {
                fields.push_lines(extra);
                let source = Source::Bytes(entry.body().clone());
                prepared = Some(entry);
                source
            }
            body => {
                if let Err(name) = fields.push_handler(&resp.headers) {
                    log::error!(
                        "{}: 500 handler header {name:?} cannot be sent",
                        self.info.peer
                    );
                    crate::response::recycle_headers(std::mem::take(&mut resp.headers));
                    return self.respond(id, req, Response::error(500));
                }
                fields.push_lines(extra);
                if !no_body {
                    let len = match (&piped, &body) {
                        (Some((_, len)), _) => *len,
                        (None, Body::Stream(s)) => s.known_len(),
                        (None, other) => Some(other.len()),
                    };
                    if let Some(len) = len {
                        fields.push_decimal(b"content-length", len);
                    }
                }
                match body {
                    _ if piped.is_some() => Source::Piped(piped.expect("checked").0),
                    Body::Empty => Source::Done,
                    Body::Bytes(b) => Source::Bytes(b),
                    Body::File { file, offset, len } => Source::File {
                        file,
                        pos: offset,
                        end: offset + len,
                    },
                    Body::Stream(s) => {
                        let left = s.known_len();
                        Source::Read {
                            reader: s.into_reader(),
                            left,
                        }
                    }
                    Body::Prepared(_) => unreachable!("taken above"),
                    // HTTP/2 has no Upgrade: the proxy never tunnels one of its streams.
                    Body::Tunnel(_) => Source::Done,
                }
            }
        };
        crate::response::recycle_headers(std::mem::take(&mut resp.headers));
        let source = if head_only || no_body {
            Source::Done
        } else {
            match source {
                Source::Bytes(b) if b.is_empty() => Source::Done,
                Source::File { pos, end, .. } if pos == end => Source::Done,
                s => s,
            }
        };
        let done = matches!(source, Source::Done);
        HEAD_START.with(|memo| {
            let mut memo = memo.borrow_mut();
            let (secs, date) = weft_http::date::now_stamped();
            if memo.0 != secs || memo.1.is_empty() {
                memo.1.clear();
                let mut enc = weft_http::h2::hpack::Encoder::new();
                enc.field(b"server", b"weft", &mut memo.1);
                enc.field(b"date", &date, &mut memo.1);
                memo.0 = secs;
            }
            let entry_block = prepared.as_ref().map_or(&[][..], |e| e.h2_block());
            self.parked.conn.send_headers_encoded(
                id,
                status,
                &[&memo.1, entry_block],
                fields.iter(),
                done,
            );
        });
        self.fields = fields;
        let fresh = Outgoing {
            req,
            status,
            source,
            chunk: Vec::new(),
            chunk_at: 0,
            sent: 0,
            reset_after: false,
            stalled: None,
            waiting: false,
            head_out: times.head.map(|_| Instant::now()),
            times,
        };
        let out = match self.spare.outs.pop() {
            Some(mut out) => {
                let chunk = std::mem::take(&mut out.chunk);
                *out = Outgoing { chunk, ..fresh };
                out
            }
            None => Box::new(fresh),
        };
        if done {
            self.finish(out, None);
        } else {
            self.streams.push(Stream {
                id,
                state: State::Sending(out),
            });
        }
    }

    /// Frames what flow control allows of the responses in progress, a turn each, up to
    /// [`WRITE_BATCH`]. True if more could go at once (the batch filled).
    fn pump(&mut self) -> bool {
        let mut batch = 0;
        let mut progressed = false;
        let mut i = 0;
        while i < self.streams.len() {
            let id = self.streams[i].id;
            let State::Sending(out) = &mut self.streams[i].state else {
                i += 1;
                continue;
            };
            let before = out.sent;
            let result = turn(&mut self.parked.conn, id, out);
            batch += (out.sent - before) as usize;
            progressed |= out.sent > before;
            match result {
                // Progress, or a producer away with nothing yet: not the client's doing.
                Ok(false) if out.sent > before || out.waiting => {
                    out.stalled = None;
                    i += 1;
                }
                Ok(false) => {
                    // Its window is shut: a stream whose client keeps it shut past
                    // `timeouts.send` is given up, whatever the others do.
                    let now = Instant::now();
                    let since = *out.stalled.get_or_insert(now);
                    if now - since < self.app.cfg.timeouts.send {
                        i += 1;
                        continue;
                    }
                    let State::Sending(out) = self.streams.swap_remove(i).state else {
                        unreachable!()
                    };
                    self.parked.conn.reset(id, ErrorCode::Cancel);
                    self.finish(
                        out,
                        Some("the client kept the stream's window shut past timeouts.send"),
                    );
                }
                Ok(true) => {
                    let State::Sending(out) = self.streams.swap_remove(i).state else {
                        unreachable!()
                    };
                    progressed = true;
                    if out.reset_after {
                        self.parked.conn.reset(id, ErrorCode::NoError);
                    }
                    self.finish(out, None);
                }
                Err(e) => {
                    let State::Sending(out) = self.streams.swap_remove(i).state else {
                        unreachable!()
                    };
                    self.parked.conn.reset(id, ErrorCode::Internal);
                    self.finish(out, Some(&format!("its body failed: {e}")));
                }
            }
            if batch >= WRITE_BATCH {
                return true;
            }
        }
        if progressed {
            self.stalled_since = None;
        }
        progressed
    }

    /// Writes what the connection has queued. False if the socket failed.
    fn flush<T: Transport>(&mut self, stream: &mut T) -> bool {
        while !self.parked.conn.output().is_empty() {
            match stream.write(self.parked.conn.output()) {
                Ok(0) => return false,
                Ok(n) => self.parked.conn.written(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("{}: HTTP/2 write: {e}", self.info.peer);
                    return false;
                }
            }
        }
        stream.flush().is_ok()
    }

    /// A response done (`cut`: why it ended early): counted and logged.
    fn finish(&mut self, mut out: Box<Outgoing>, cut: Option<&str>) {
        self.info.listener.response(out.status, out.sent);
        self.info.listener.h2_requests.fetch_add(1, Relaxed);
        if let Some(why) = cut {
            super::log_cut(
                self.app,
                self.info.peer,
                out.req.as_ref(),
                out.status,
                out.sent,
                &why,
            );
        } else if let Some(req) = &out.req {
            out.times.record_out(self.info, out.head_out);
            super::log_access(self.app, req, out.status, out.sent);
        }
        // The request's storage and the box go to the next request of this connection.
        if let Some(mut req) = out.req.take() {
            let (fields, bytes) = req.take_storage();
            self.parser.recycle_fields(fields);
            if self.spare.heads.len() < SPARES {
                self.spare.heads.push(bytes);
            }
        }
        if self.spare.outs.len() < SPARES {
            out.source = Source::Done;
            out.chunk.clear();
            self.spare.outs.push(out);
        }
    }

    /// Every response in progress ends here (the connection is going).
    fn cut_all(&mut self, why: &str) {
        for s in std::mem::take(&mut self.streams) {
            if let State::Sending(out) = s.state {
                self.finish(out, Some(why));
            }
        }
    }
}

/// One stream's turn: frames up to [`TURN_BYTES`] of its body as flow control allows. True
/// once all of it (END_STREAM) went.
fn turn(conn: &mut Connection, id: StreamId, out: &mut Outgoing) -> io::Result<bool> {
    let mut budget = TURN_BYTES;
    out.waiting = false;
    loop {
        let cap = conn.send_capacity(id).min(budget);
        if cap == 0 {
            return Ok(false);
        }
        // Bytes in memory go straight from their buffer.
        if let Source::Bytes(b) = &mut out.source {
            let n = cap.min(b.len());
            let last = n == b.len();
            let took = conn.send_data(id, &b[..n], last);
            out.sent += took as u64;
            let _ = b.split_to(took);
            if last && took == n {
                out.source = Source::Done;
                return Ok(true);
            }
            budget -= took;
            if took == 0 {
                return Ok(false);
            }
            continue;
        }
        if out.chunk_at == out.chunk.len() {
            out.chunk.clear();
            out.chunk_at = 0;
            if !fill(&mut out.source, &mut out.chunk, TURN_BYTES)? {
                out.waiting = true;
                return Ok(false);
            }
        }
        let rest = &out.chunk[out.chunk_at..];
        let n = cap.min(rest.len());
        let last = n == rest.len() && matches!(out.source, Source::Done);
        let took = conn.send_data(id, &rest[..n], last);
        out.chunk_at += took;
        out.sent += took as u64;
        if last && took == n {
            return Ok(true);
        }
        if took == 0 {
            return Ok(false);
        }
        budget -= took;
    }
}

/// Reads up to `max` more body bytes from a file or reader into `chunk`; the source becomes
/// [`Source::Done`] once it has given its last byte. False: a piped source has nothing yet.
fn fill(source: &mut Source, chunk: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    match source {
        Source::Piped(rx) => match rx.try_recv() {
            Ok(Piece::Data(data)) => {
                *chunk = data;
                Ok(true)
            }
            Ok(Piece::End) => {
                *source = Source::Done;
                Ok(true)
            }
            Ok(Piece::Failed(e)) => Err(e),
            Err(TryRecvError::Empty) => Ok(false),
            Err(TryRecvError::Disconnected) => {
                Err(io::Error::other("the handler ended before its body's end"))
            }
        },
        Source::File { file, pos, end } => {
            use std::os::unix::fs::FileExt;
            let want = (*end - *pos).min(max as u64) as usize;
            chunk.resize(want, 0);
            let mut got = 0;
            while got < want {
                match file.read_at(&mut chunk[got..], *pos + got as u64) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the file shrank while it was sent",
                        ))
                    }
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            *pos += want as u64;
            if *pos == *end {
                *source = Source::Done;
            }
            Ok(true)
        }
        Source::Read { reader, left } => {
            let want = left.map_or(max, |l| (l as usize).min(max));
            chunk.resize(want.max(1), 0);
            loop {
                match reader.read(&mut chunk[..want.max(1)]) {
                    Ok(0) if want == 0 || left.is_none() => {
                        chunk.clear();
                        *source = Source::Done;
                        return Ok(true);
                    }
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the body ended before its length",
                        ))
                    }
                    Ok(n) => {
                        chunk.truncate(n);
                        if let Some(l) = left {
                            *l -= n as u64;
                            if *l == 0 {
                                *source = Source::Done;
                            }
                        }
                        return Ok(true);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Source::Bytes(_) | Source::Done => {
            chunk.clear();
            *source = Source::Done;
            Ok(true)
        }
    }
}

/// Writes `head` as the HTTP/1.1 head the handlers' rules read: request line, `host` from
/// `:authority`, the fields (cookies joined as RFC 9113 §8.2.3 says), and the body's length.
pub(crate) fn write_head(head: &RequestHead2, body_len: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(head.get(&head.method));
    out.push(b' ');
    out.extend_from_slice(head.get(&head.path));
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let authority = head.get(&head.authority);
    if !authority.is_empty() {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(authority);
        out.extend_from_slice(b"\r\n");
    }
    let mut cookies = false;
    for (name, value) in &head.fields {
        let name = head.get(name);
        let value = head.get(value);
        match name {
            b"host" if !authority.is_empty() => continue,
            // The body's length is the stream's; a client's `expect` has nothing to wait for
            // (the body is here before the handler runs).
            b"content-length" | b"expect" => continue,
            // Joined into one line after the others.
            b"cookie" => continue,
            _ => {}
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in &head.fields {
        if head.get(name) != b"cookie" {
            continue;
        }
        if cookies {
            out.truncate(out.len() - 2);
            out.extend_from_slice(b"; ");
        } else {
            out.extend_from_slice(b"cookie: ");
            cookies = true;
        }
        out.extend_from_slice(head.get(value));
        out.extend_from_slice(b"\r\n");
    }
    if body_len > 0 {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(body_len.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// A response's fields as HTTP/2 sends them: lower-case names, no connection-specific ones.
#[derive(Default)]
struct Fields {
    bytes: Vec<u8>,
    /// (name start, name end, value end); values start at name end.
    spans: Vec<(u32, u32, u32)>,
}

impl Fields {
    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        let start = self.bytes.len() as u32;
        self.bytes.extend(name.iter().map(u8::to_ascii_lowercase));
        let mid = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.spans.push((start, mid, self.bytes.len() as u32));
    }

    /// A field whose value is `n` in decimal.
    fn push_decimal(&mut self, name: &[u8], n: u64) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len() as u32;
        weft_http::response::write_decimal(n, &mut self.bytes);
        self.spans.push((start, mid, self.bytes.len() as u32));
    }

    /// `Name: value\r\n` lines (a cache entry's head, HSTS): all but connection-specific ones.
    fn push_lines(&mut self, lines: &[u8]) {
        for line in lines.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = &line[..colon];
            if !connection_specific(name) {
                self.push(name, line[colon + 1..].trim_ascii());
            }
        }
    }

    /// A handler's headers, less those the driver writes; `Err` names one that cannot be sent.
    fn push_handler(&mut self, headers: &[crate::response::HeaderPair]) -> Result<(), String> {
        for (name, value) in headers {
            let n = name.as_bytes();
            if connection_specific(n)
                || n.eq_ignore_ascii_case(b"content-length")
                || n.eq_ignore_ascii_case(b"date")
                || n.eq_ignore_ascii_case(b"server")
            {
                continue;
            }
            // The checks the HTTP/1.1 head encoder applies (`response::write_header`).
            if !weft_http::response::valid_name(n) || !weft_http::response::valid_value(value) {
                return Err(name.to_string());
            }
            self.push(n, value.trim_ascii());
        }
        Ok(())
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans.iter().map(|&(a, b, c)| {
            (
                &self.bytes[a as usize..b as usize],
                &self.bytes[b as usize..c as usize],
            )
        })
    }
}

/// Fields HTTP/2 forbids in a message (RFC 9113 §8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// The transport a handler's body reader gets for an HTTP/2 request: the whole body is in
/// its read buffer already, so nothing is ever read or written here.
struct NoSocket;

impl Read for NoSocket {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Ok(0)
    }
}

impl Write for NoSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for NoSocket {
    fn set_read_timeout(&mut self, _timeout: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
    fn set_write_timeout(&mut self, _timeout: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, path: &str, authority: &str, fields: &[(&str, &str)]) -> RequestHead2 {
        let mut h = RequestHead2::default();
        let put = |buf: &mut Vec<u8>, s: &str| {
            let a = buf.len() as u32;
            buf.extend_from_slice(s.as_bytes());
            a..buf.len() as u32
        };
        h.method = put(&mut h.buf, method);
        h.scheme = put(&mut h.buf, "https");
        h.authority = put(&mut h.buf, authority);
        h.path = put(&mut h.buf, path);
        for (n, v) in fields {
            let n = put(&mut h.buf, n);
            let v = put(&mut h.buf, v);
            h.fields.push((n, v));
        }
        h
    }

    #[test]
    fn a_request_is_written_as_the_http1_head_the_parser_reads() {
        let h = head(
            "POST",
            "/a?b=c",
            "example.com",
            &[
                ("cookie", "a=1"),
                ("accept", "*/*"),
                ("cookie", "b=2"),
                ("host", "other.example"),
                ("content-length", "3"),
            ],
        );
        let mut out = Vec::new();
        write_head(&h, 3, &mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "POST /a?b=c HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\n\
             cookie: a=1; b=2\r\ncontent-length: 3\r\n\r\n"
        );
        let mut p = Parser::new(weft_http::Limits::default());
        assert_eq!(p.parse(&out).unwrap(), Some(out.len()));
    }

    #[test]
    fn without_authority_the_host_field_stands() {
        let h = head("GET", "/", "", &[("host", "h.example")]);
        let mut out = Vec::new();
        write_head(&h, 0, &mut out);
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: h.example\r\n\r\n");
    }

    #[test]
    fn connection_specific_fields_are_not_sent() {
        let mut f = Fields::default();
        f.push_lines(b"Content-Type: text/html\r\nConnection: close\r\nETag: \"x\"\r\n");
        let got: Vec<_> = f.iter().collect();
        assert_eq!(
            got,
            vec![
                (&b"content-type"[..], &b"text/html"[..]),
                (b"etag", b"\"x\"")
            ]
        );
    }

    #[test]
    fn a_handler_header_with_a_newline_is_refused() {
        let mut f = Fields::default();
        let bad = vec![(
            std::borrow::Cow::Borrowed("X-A"),
            std::borrow::Cow::Borrowed(&b"a\r\nb"[..]),
        )];
        assert_eq!(f.push_handler(&bad), Err("X-A".to_string()));
    }
}
