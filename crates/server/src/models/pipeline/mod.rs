//! The `pipeline` model (the pipeline paper, open KETA): a request's handling split into four
//! stages — accept, receive, process, send — each a pool of OS threads with a bounded queue,
//! and a feedback controller that moves threads between the stages.
//!
//! ```text
//!            listen backlog          queue            queue            queue
//! client ──> [accept] ──────────> [receive] ──────> [process] ──────> [send] ──> client
//!                                   ^   |  head          handler,         |  vectored write /
//!                      readable     |   |  incomplete    cache, body      |  sendfile, partial:
//!                 ┌──────────────── poller (one epoll) <──────────────────┘  wait writable;
//!                 └── timeouts: header read (408), keep-alive idle, send, linger
//! ```
//!
//! - A connection's state ([`Conn`]: socket, read buffer, parser, parsed request, response in
//!   progress) is one boxed struct passed from stage to stage; exactly one thread owns it.
//! - Keep-alive connections skip accept: after a response they wait in the poller and re-enter
//!   at receive; pipelined requests already buffered go straight back to receive, so they are
//!   served in order.
//! - Sockets are non-blocking. Receive and send never block a thread on a socket: they park
//!   the connection in the poller (see `poller.rs`: one edge-triggered registration per
//!   connection, so waiting for the next request costs no system call). Process may
//!   block while a handler reads a request body (bounded by the body-read timeout): reading
//!   bodies in receive would mean buffering them whole before the handler runs, and
//!   `Expect: 100-continue` needs the handler to ask for the body first.
//! - A full queue makes the stage before it wait (accept's waiting fills the kernel's listen
//!   backlog); the one backward edge (send → receive, for buffered pipelined requests) never
//!   waits, it goes through the poller when receive's queue is full, so stages cannot deadlock.
//! - Every stage starts `threads_total` − 3 threads and parks those beyond its allocation; the
//!   controller (`controller.rs`, a pure function) changes allocations from the load monitor's
//!   samples (`monitor.rs`) every `[pipeline] period`.
//! - HTTP is `conn`'s: parsing, routing, body framing and limits, response encoding.

pub mod controller;
mod h2;
mod monitor;
mod poller;
mod queue;
mod stages;
mod tls;

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicBool, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use self::controller::Stage;
use self::poller::{Poller, Wait};
use crate::app::{App, LiveApp};
use crate::body::ReadBuf;
use crate::conn::{ConnInfo, Tail};
use crate::metrics::{ListenerMetrics, OpenGuard};
use crate::models::AcceptGate;
use crate::Request;

/// How often the monitor thread looks at the shutdown flag within a period.
const SHUTDOWN_POLL: Duration = Duration::from_millis(25);
/// The longest wait of a thread that sleeps until something comes (an accept thread until a
/// client or shutdown, the poller until an event or its next deadline, the monitor through a
/// quiet spell): the `poll`/`epoll_wait` timeout, in milliseconds, saturates at about 24 days.
const SLEEP: Duration = Duration::MAX;

/// One connection's state, passed between stages in a box.
pub(crate) struct Conn {
    /// First field: its shutdown registration is dropped before the socket closes.
    info: ConnInfo,
    /// The configuration generation the connection was accepted with (a reload changes new
    /// connections only).
    app: Arc<App>,
    stream: std::net::TcpStream,
    _guard: OpenGuard,
    parser: weft_http::Parser,
    rbuf: ReadBuf,
    /// The encoded head (and small body) of the response in progress.
    wbuf: Vec<u8>,
    /// `Fresh` until its first request has been received (the idle wait before it uses the
    /// header-read timeout and a drain does not end it), as the blocking driver's turns.
    start: crate::conn::Start,
    /// Its prelude (PROXY header, TLS handshake, the count against `limits.conn_per_ip`),
    /// driven by receive until requests may be read.
    prelude: crate::conn::Prelude,
    /// When the head being received must be complete, from its first byte: the header-read
    /// deadline and the minimum-rate rule (`minrate.rs`).
    head_due: crate::conn::HeadDue,
    /// What a 408 at the parked deadline says, when a minimum rate or the body-read timeout
    /// set that deadline (the header-read timeout's reason otherwise).
    late: Option<&'static str>,
    /// Where the connection is in its current request: what one stage hands the next.
    phase: Phase,
    /// Clock readings of the request in progress (`[timing]`).
    times: crate::conn::Times,
    /// The socket's entry in the poller (registered at its first wait).
    reg: Option<poller::Registration>,
    /// The last read filled the buffer: the socket may hold more (see `poller.rs`).
    maybe_unread: bool,
    /// The TLS session of a connection on a TLS listener (`tls.rs`).
    tls: Option<Box<tls::Session>>,
    /// The minimum send rate (`timeouts.send_min_rate`), and the time send waited for
    /// writability on this connection (in the poller), which counts against it.
    send_rate: Option<crate::minrate::SendRate>,
    send_waited: std::time::Duration,
    /// Since when send has waited for writability (parked in the poller), and whether the
    /// rate, not the send timeout, set that wait's deadline.
    stalled: Option<(Instant, bool)>,
}

/// Where a connection is in its current request. Each state holds what only it needs, so a
/// request cannot be both on its way to process and answered, nor a body awaited without its
/// request.
enum Phase {
    /// Waiting for a request head, or receiving one (its deadlines: `Conn::head_due`).
    Head,
    /// Receive reads ahead the small body of `req` before process (issue 24); `due` is the
    /// body-read deadline since its last bytes and its minimum-rate rule.
    Body {
        req: Request,
        due: crate::conn::BodyDue,
    },
    /// A request with its head (and any body read ahead), from receive to process.
    Ready(Request),
    /// The response in progress, from process (or a failed head) to send.
    Send(Out),
    /// A lingering close, until it gives up waiting for the client's end of stream.
    Linger(Instant),
}

/// A response being sent: `wbuf` (the head) then `tail`.
struct Out {
    tail: Tail,
    total: u64,
    sent: u64,
    keep_alive: bool,
    status: u16,
    body_len: u64,
    /// When its first byte went out (`[timing]`).
    first_out: Option<Instant>,
    /// For the access log (none for an error before a request was parsed).
    req: Option<Request>,
}

/// What a stage's queue carries: a connection, or (in process's queue only) the handler of
/// an HTTP/2 stream whose connection left the stages for a thread that frames its requests and
/// responses (`h2.rs`).
pub(crate) enum Task {
    Conn(Box<Conn>),
    Stream(crate::conn::Job),
}

/// Where a connection goes after a stage's step.
enum Next {
    /// Into receive's queue (from accept; waits for room).
    Receive(Box<Conn>),
    /// Back to receive with a request already buffered (from send; never waits).
    Reparse(Box<Conn>),
    Process(Box<Conn>),
    Send(Box<Conn>),
    /// Into the poller until the socket is ready or the deadline passes.
    Park(Box<Conn>, Wait, Instant),
    Close(Box<Conn>),
    /// An HTTP/2 connection, out of the stages to a thread of its own (`h2.rs`).
    Http2(Box<Conn>),
    /// A `101`'s tunnel, out of the stages to a thread of its own (`stages::detach_tunnel`).
    Tunnel(Box<Conn>),
    /// Gone from the stages (an HTTP/2 stream's handler, done).
    Detached,
}

/// Everything the pipeline's threads share.
pub(crate) struct Pipeline {
    /// The first generation: shutdown state, counters and the pipeline's own settings,
    /// which a reload does not change.
    app: Arc<App>,
    /// The generation new connections get.
    live: Arc<LiveApp>,
    lm: Arc<ListenerMetrics>,
    /// Each stage's queue and permits, indexed by `Stage as usize`.
    stages: [Arc<queue::Stage<Task>>; 4],
    poller: Arc<Poller>,
    /// Wakes the monitor from a quiet spell when work comes.
    rouse: Rouse,
    /// The listening socket while accepting (taken out at shutdown, closing it once the
    /// accept threads let go).
    listener: Mutex<Option<Arc<TcpListener>>>,
    /// Set at the very end: every thread exits.
    stopped: AtomicBool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("addr", &self.lm.addr)
            .finish_non_exhaustive()
    }
}

/// How the load monitor sleeps through a quiet spell (no request, nothing queued or running,
/// and the controller back at its initial allocation) and is woken when work comes back.
/// Work enters the stages at three places: a connection accepted, a parked connection whose
/// socket turned ready (the poller), and a request already buffered behind a response (send's
/// way back to receive); each calls [`Rouse::work`] after its hand-off. The monitor stores
/// `asleep`, fences, looks at the queues once more and sleeps on `efd`; `work` fences and then
/// loads `asleep`: every hand-off after the monitor's fence finds it asleep and writes `efd`.
/// The monitor never gates work (every stage keeps a thread), so what it could miss, the last
/// steps of a request that entered before its fence, would only delay a controller step.
#[derive(Debug)]
struct Rouse {
    asleep: AtomicBool,
    efd: weft_sys::epoll::EventFd,
}

impl Rouse {
    fn new() -> io::Result<Rouse> {
        Ok(Rouse {
            asleep: AtomicBool::new(false),
            efd: weft_sys::epoll::EventFd::new()?,
        })
    }

    /// Work was handed to a stage: wakes the monitor if it sleeps.
    #[inline]
    fn work(&self) {
        fence(SeqCst);
        if self.asleep.load(Relaxed) && self.asleep.swap(false, Relaxed) {
            self.efd.notify();
        }
    }
}

impl Pipeline {
    fn stage(&self, stage: Stage) -> &queue::Stage<Task> {
        &self.stages[stage as usize]
    }

    fn receive(&self) -> &queue::Stage<Task> {
        self.stage(Stage::Receive)
    }

    fn send(&self) -> &queue::Stage<Task> {
        self.stage(Stage::Send)
    }

    /// Takes an HTTP/2 connection out of the stages: a thread of its own frames its
    /// requests and responses, and queues each stream's handler in process (`h2.rs`).
    fn detach_h2(&self, conn: Box<Conn>) {
        let process = self.stages[Stage::Process as usize].clone();
        h2::detach(conn, move |job| match process.try_push(Task::Stream(job)) {
            Ok(()) => Ok(()),
            Err(Task::Stream(job)) => Err(job),
            Err(Task::Conn(_)) => unreachable!("a stream was pushed"),
        });
    }

    /// Hands a connection on. `from_send`: the step was send's, which must not wait for room
    /// in receive's queue (that would close a cycle of waiting stages).
    fn dispatch(&self, next: Next, from_send: bool) {
        // A push into a closed stage (final shutdown) gives the connection back: it closes.
        match next {
            Next::Receive(c) => {
                drop(self.receive().push(Task::Conn(c)));
                self.rouse.work();
            }
            Next::Reparse(c) if from_send => {
                if let Err(Task::Conn(c)) = self.receive().try_push(Task::Conn(c)) {
                    self.poller.ready(c);
                }
                self.rouse.work();
            }
            Next::Reparse(c) => {
                drop(self.receive().push(Task::Conn(c)));
                self.rouse.work();
            }
            Next::Process(c) => drop(self.stage(Stage::Process).push(Task::Conn(c))),
            Next::Send(c) => drop(self.send().push(Task::Conn(c))),
            Next::Park(c, wait, deadline) => {
                // Bytes may be waiting: back to receive, without waiting for room in its
                // queue (this may be a receive thread).
                if let Some(c) = self.poller.park(c, wait, deadline) {
                    self.dispatch(Next::Reparse(c), true);
                }
            }
            Next::Close(c) => drop(c),
            Next::Http2(c) => self.detach_h2(c),
            Next::Tunnel(c) => stages::detach_tunnel(c),
            Next::Detached => {}
        }
    }

    /// The listening socket's accept queue length (0 once it is closed).
    fn accept_backlog(&self) -> usize {
        let l = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        l.as_ref()
            .and_then(|l| weft_sys::socket::accept_backlog(l.as_raw_fd()).ok())
            .map_or(0, |n| n as usize)
    }
}

/// Serves `listener` with the pipeline until shutdown, then lets open connections finish
/// (within the grace period) and stops every thread.
pub fn run(listener: TcpListener, live: Arc<LiveApp>, lm: Arc<ListenerMetrics>) -> io::Result<()> {
    let app = live.current();
    let pc = app.cfg.pipeline.clone();
    pc.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    listener.set_nonblocking(true)?;
    let initial = pc.initial();
    // Turns readable when shutdown begins: accept threads and a sleeping monitor wait on it
    // beside what they wait for, with no timeout to look at the flag.
    let stop = app.shutdown.interrupt().eventfd()?.as_raw_fd();
    // Dropped once the accept threads, which hold the listener, have ended.
    let listening = app.shutdown.listening();
    let p = Arc::new(Pipeline {
        stages: std::array::from_fn(|k| Arc::new(queue::Stage::new(pc.queue, initial[k]))),
        poller: Arc::new(Poller::new()?),
        rouse: Rouse::new()?,
        listener: Mutex::new(Some(Arc::new(listener))),
        stopped: AtomicBool::new(false),
        app: app.clone(),
        live,
        lm: lm.clone(),
    });
    let per_stage = pc.threads_total.saturating_sub(3).max(1);
    let mut threads = Vec::new();
    let mut accept_threads = Vec::new();
    for stage in Stage::ALL {
        for idx in 0..per_stage {
            let p = p.clone();
            let name = format!("weft-{}-{idx}", stage.name());
            let t = std::thread::Builder::new()
                .name(name)
                // Handlers run on process threads: `[thread] stack_size`, as the thread model's.
                .stack_size(app.cfg.thread.stack_size)
                .spawn(move || {
                    if stage == Stage::Accept {
                        accept_worker(&p, idx, stop)
                    } else {
                        worker(&p, stage, idx)
                    }
                })?;
            if stage == Stage::Accept {
                accept_threads.push(t);
            } else {
                threads.push(t);
            }
        }
    }
    {
        let p = p.clone();
        threads.push(
            std::thread::Builder::new()
                .name("weft-poller".into())
                .spawn(move || poller::run(&p))?,
        );
    }
    let report = Arc::new(monitor::Report::new(&p, &pc));
    lm.set_report(report.clone());

    // This thread is the load monitor and controller.
    monitor::run(&p, &pc, &report, SHUTDOWN_POLL, stop);

    // Shutdown: stop accepting and close the listener.
    p.stage(Stage::Accept).close();
    drop(p.listener.lock().unwrap_or_else(|e| e.into_inner()).take());
    for t in accept_threads {
        let _ = t.join();
    }
    drop(listening);
    // Let in-flight requests finish; idle connections were woken by the shutdown registry.
    let grace = app.cfg.timeouts.shutdown_grace;
    let end = Instant::now() + grace;
    while lm.open.load(std::sync::atomic::Ordering::Relaxed) > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Said here, as the server says it for the other models: the stages close what is left
    // now, so none is open by the time the server looks.
    let left = lm.open.load(std::sync::atomic::Ordering::Relaxed);
    if left > 0 {
        log::warn!(
            "{}: {left} connections still open after the {grace:?} grace period; closing them",
            lm.addr
        );
    }
    p.stopped.store(true, SeqCst);
    for s in &p.stages {
        s.close();
    }
    p.poller.notify();
    for t in threads {
        let _ = t.join();
    }
    p.poller.clear();
    Ok(())
}

/// A receive, process or send thread: takes tasks while it holds a permit.
fn worker(p: &Pipeline, which: Stage, idx: usize) {
    let stage = p.stage(which);
    while let Some(task) = stage.pop(idx) {
        let t0 = stage.begin();
        // A panicking handler ends its own connection (dropped while unwinding), not the
        // stage's thread: threads are never replaced at run time.
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match task {
            // An HTTP/2 stream's handler: it hands its answer back to its connection's thread.
            Task::Stream(job) => {
                job();
                Next::Detached
            }
            Task::Conn(conn) => match which {
                Stage::Receive => stages::receive(conn),
                Stage::Process => stages::process(conn),
                // Accept threads run `accept_worker`; none pops a connection.
                Stage::Send | Stage::Accept => stages::send(p, conn),
            },
        }));
        stage.end(t0);
        match step {
            Ok(next) => p.dispatch(next, which == Stage::Send),
            Err(_) => log::error!(
                "pipeline {} stage: a task panicked; its connection is closed",
                which.name()
            ),
        }
    }
}

/// An accept thread: accepts while it holds a permit, until shutdown (`stop` turns readable).
fn accept_worker(p: &Pipeline, idx: usize, stop: std::os::fd::RawFd) {
    let Some(listener) = p.listener.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    let mut gate = AcceptGate::new(
        p.app.cfg.limits.max_connections,
        Some(p.app.shutdown.clone()),
    );
    while p.stage(Stage::Accept).wait_permit(idx) && !p.app.shutdown.is_set() {
        if let Some(conn) = stages::accept(p, &listener, &mut gate, stop) {
            p.dispatch(Next::Receive(conn), false);
        }
    }
}
