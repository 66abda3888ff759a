//! The `process` model (the threads-vs-processes paper): requests are served by forked
//! children, each running the same `conn::serve` loop as every other model; a child serves one
//! connection and exits.
//!
//! Idle clients cannot exhaust the children (issue 29). The master holds every connection that
//! only holds a socket, in one epoll, as the fiber model parks idle connections without a
//! stack: a new connection until its request head has arrived, and a keep-alive connection
//! between requests. Only a whole head (or bytes that can no longer be a valid one: the child
//! answers those with 400/414/431 as every model does) gets a child, forked at that moment; the
//! child inherits the head bytes with the address space. The master keeps its copy of the
//! descriptor. A child lingers for the next request up to the keep-alive timeout while
//! children are plentiful (so a keep-alive connection costs one fork, as in the paper), but
//! once three quarters of `process.max_children` are live it gives its connection back at
//! once (exit status [`EXIT_IDLE`]): Apache event MPM's shortened keep-alive under pressure.
//! The master applies `timeouts.header_read` to the heads it reads (408 and one log line for a
//! partial head, a silent close for a connection that sent nothing) and
//! `timeouts.keepalive` to the idle connections it holds.
//!
//! Fork or pass the descriptor: `examples/handoff_cost.rs` measured an `SCM_RIGHTS` round trip
//! to a long-lived child at about a tenth of a fork (BENCHMARKS.md, "Process model
//! hand-off"). A fork per hand-off was kept: without pressure a connection is handed off once,
//! as before, and a child per connection keeps the paper's isolation (a crash or leak dies
//! with its connection) and picks up a reloaded configuration with no pool to recycle.
//!
//! fork is safe only from a single-threaded process, so the process listeners of a server are
//! run by a master process forked when the server is built, before any thread exists
//! ([`start_master`]); the server's own process goes on to run its other models' threads.
//!
//! What a child inherits, and what is done about it:
//! - every listening socket, the master's epoll and every other connection the master holds:
//!   closed at once in the child (a copy would keep a socket open after the master closed
//!   it); sockets of other models are closed in the master;
//! - the counters: listener counters and cache hit/miss/eviction counters live in shared
//!   memory (`weft_sys::shm::Shared`), so every child adds to the same numbers and the status
//!   page shows the model's totals; open connections are counted by the master (from accept
//!   to its close of its copy), as is the number of live children the lingering ones read;
//! - the response cache: empty at fork, private to the child, gone at exit (a child serves one
//!   connection, so only that connection's repeated requests hit it; sharing one would need
//!   shared-memory allocation and cross-process locking, which the paper's forked server
//!   does not have either);
//! - the access log: the buffer is empty at fork; the child flushes it once a second and
//!   before it exits (appends of whole lines to the same file);
//! - signals: SIGTERM/SIGINT set the shutdown flag (master and child alike); the master closes
//!   the connections it holds, sends SIGTERM to its children and waits for them within
//!   `timeouts.shutdown_grace`, then kills the rest. Each child asks for SIGTERM when the
//!   master dies, the master when the server's process dies, so a killed server leaves no
//!   orphans. In a child the two signals also write to a pipe of its own ([`stop_pipe`]),
//!   which its reads wait on beside the connection: a connection idle in its child (TLS and
//!   HTTP/2 stay with theirs to the end) is woken at shutdown as the other models' are, and
//!   closed (HTTP/2 with GOAWAY) at once, not at the keep-alive timeout.
//!
//! A limit on live children (`process.max_children`, and `limits.max_connections`): a whole
//! head that finds none free waits in the master, in arrival order. Every child is reaped when
//! SIGCHLD interrupts the master's wait (`Epoll::wait_for_signals`: the master looks at its
//! signal flags with the signals blocked until the wait begins), so none is left a zombie. A
//! master whose last wait saw nothing happen sleeps until the earliest deadline of the
//! connections it holds (`Held::due`), or with none until a client or a signal comes.
//! The master stops accepting a few descriptors short of the open-file limit, since each
//! held connection costs it one.
//!
//! Slow readers cannot hold the children either (issue 56): a child whose client stops taking
//! its response for 20 ms hands what is left to the master (write completion,
//! [`super::completion`]), which sends it from the same epoll loop under `timeouts.send` and
//! `timeouts.send_min_rate` ([`Stage::Send`]), then holds the connection idle or half-closes
//! and drains it ([`Stage::Closing`]). `process.write_completion = false` turns it off.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_http::Parser;

use super::completion::{self, Sent};
use super::wheel::Wheel;
use super::{AcceptGate, ACCEPT_BACKOFF};
use crate::app::{App, LiveApp};
use crate::conn::{self, ConnInfo, Served};
use crate::metrics::ListenerMetrics;
use crate::net::{BlockingStream, Transport};
use weft_sys::epoll::{Epoll, Events, EPOLLIN, EPOLLOUT};
use weft_sys::fd::close_inherited;
use weft_sys::poll::poll_readable_any;
use weft_sys::process::{self as sp, Exit, Forked, Pid, PollFlag};
use weft_sys::shm::{AtomicsOnly, Shared};
use weft_sys::signal::{SIGCHLD, SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGUSR1, SIGUSR2};

/// How often the master looks for exited children while it waits at shutdown.
const REAP_EVERY: Duration = Duration::from_millis(10);
/// Forks the master of the process listeners. Returns its pid in the calling process; in the
/// master, serves until shutdown and exits (never returns). `close_in_master`: descriptors of
/// the other models' sockets, which the master must not hold.
pub(crate) fn start_master(
    listeners: Vec<(TcpListener, Arc<ListenerMetrics>)>,
    live: Arc<LiveApp>,
    close_in_master: &[RawFd],
) -> io::Result<Pid> {
    let server = sp::pid();
    match sp::fork()? {
        Forked::Parent(pid) => Ok(pid),
        Forked::Child => {
            let code = match sp::die_with_parent(SIGTERM, server) {
                Ok(true) => {
                    for &fd in close_in_master {
                        close_inherited(fd);
                    }
                    match master(listeners, &live) {
                        Ok(()) => 0,
                        Err(e) => {
                            log::error!("process model master: {e}");
                            1
                        }
                    }
                }
                Ok(false) => 0,
                Err(e) => {
                    log::error!("process model master: {e}");
                    1
                }
            };
            if let Some(l) = &live.current().access_log {
                l.flush();
            }
            sp::exit_now(code)
        }
    }
}

/// Exit status of a connection process that gives its connection back to the master, idle
/// between requests with nothing buffered (0: the connection is finished).
const EXIT_IDLE: i32 = 3;
/// Exit status of a connection process that handed the rest of a response to the master
/// (write completion): the master sends it, then holds or closes the connection; if the
/// hand-back never arrived, the master closes the connection (its client would otherwise
/// wait for bytes that will never come).
const EXIT_HANDED: i32 = 4;
/// How long a lingering connection process first waits on its connection alone, and again
/// when the master's flag is raised but neither the live count nor its shutdown flag says why
/// yet (the moment between the master's count and its lowering of the flag, or between the
/// flag and the SIGTERM that follows it at shutdown).
const LINGER_SLICE: Duration = Duration::from_millis(20);

/// What the master and its children count together, in shared memory.
#[derive(Default)]
struct Counts {
    /// Live children (`u64::MAX` while crowded: [`Master::crowd`]), which lingering children
    /// read to see the pressure.
    live: AtomicU64,
    /// Children lingering for their connection's next request ([`ChildStream::linger`]): the
    /// master waits for those to give their connections back before it picks the longest
    /// idle to close ([`Master::reclaim`]).
    lingering: AtomicU64,
}

// SAFETY: two AtomicU64 fields (zeroed, each is 0); no pointers, no Drop, changed only
// through the atomics.
unsafe impl AtomicsOnly for Counts {}

/// How long [`Master::reclaim`] waits at most for lingering children to give their
/// connections back (each does within [`LINGER_SLICE`] of the master's flag, unless stopped).
const RECLAIM_WAIT: Duration = Duration::from_millis(250);

/// Live children from which a lingering one gives its connection back: Apache event MPM's
/// rule, with children this scarce an idle connection goes back to the master at once
/// instead of holding one.
fn pressure_mark(max_children: usize) -> u64 {
    (max_children - max_children / 4).max(1) as u64
}
/// Connections accepted per listener wake-up, so one busy listener cannot starve the rest.
const ACCEPT_BURST: usize = 64;
/// epoll token of a held connection (with its descriptor); a listener's is its index.
const CONN_TAG: u64 = 1 << 62;
/// epoll token of write completion's socket ([`Master::chan`]).
const CHAN_TAG: u64 = 1 << 61;

/// Write completion's socket pair (`(master's end, children's end)`; [`completion`]), or
/// none, with a warning (children then send every response to its end themselves).
fn hand_back_channel() -> Option<(OwnedFd, OwnedFd)> {
    match std::os::unix::net::UnixDatagram::pair() {
        Ok((recv, send)) => Some((recv.into(), send.into())),
        Err(e) => {
            log::warn!("process model: no write completion (socket pair: {e})");
            None
        }
    }
}

/// A live child: the connection it serves.
struct Child {
    conn: RawFd,
}

/// Where a connection the master holds stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Its prelude (`conn::Prelude`: PROXY header, the first bytes of TLS, the count) is not
    /// done; its deadline is the prelude's.
    Prelude,
    /// Reading a request head (none, or part of one, has arrived); answered 408 past the
    /// deadline if a part has arrived, closed silently if none has.
    Head { deadline: Instant },
    /// Idle between requests; closed at the deadline (the keep-alive timeout).
    Idle { deadline: Instant },
    /// A whole head whose body (at most `limits.client_body_buffer` bytes) is still arriving:
    /// the master reads it too, so a slow body holds no child (issue 24). Answered 408 at the
    /// deadline: the body-read timeout since the last bytes, or the minimum rate's.
    Body { due: conn::BodyDue, head_len: usize },
    /// A whole head (or bytes a child must answer with an error) waits for a free child.
    Queued,
    /// A child serves it; the master keeps its copy of the descriptor and takes the
    /// connection back if the child exits with [`EXIT_IDLE`].
    Served,
    /// The master sends the rest of a response its child handed back ([`Held::job`]; write
    /// completion), waiting for the socket to be writable; then the connection is idle, or
    /// closing.
    Send,
    /// Half-closed after the last response the master sent for it: what the client still
    /// sends is read and dropped until its end or the deadline (`timeouts.lingering_time`),
    /// so that unread input cannot make the kernel reset the response away.
    Closing { deadline: Instant },
}

/// A connection the master holds.
struct Held {
    stream: TcpStream,
    peer: SocketAddr,
    lm: Arc<ListenerMetrics>,
    /// Head bytes read so far; a forked child inherits them with the address space.
    buf: Vec<u8>,
    stage: Stage,
    accepted: Option<Instant>,
    /// The connection has been served before (its next child records no accept phase).
    resumed: bool,
    /// The Unix second of its accept (`timeouts.keepalive_time` runs from it across the
    /// children that serve it in turns).
    born: u64,
    /// Its prelude, stepped by the master until a child takes over (a TLS handshake) or
    /// requests may be read.
    prelude: conn::Prelude,
    /// What its PROXY protocol header said (`[[listen]] proxy_protocol`): `None` until it has
    /// been read; then the client's address, or `None` for a header that named none.
    proxied: Option<Option<SocketAddr>>,
    /// When the head being received must be whole: the header-read deadline and the
    /// minimum rate from its first byte (`conn::head_step`'s rules, as every model's).
    head_due: conn::HeadDue,
    /// Its count against `limits.conn_per_ip`, held by the master for the connection's whole
    /// life (children serve it in turns); released when the master closes it.
    client_slot: Option<crate::limits_ip::ConnSlot>,
    /// Its entry in the master's deadlines ([`Master::timers`]), parked under [`Held::due`]
    /// while it has one.
    timer: u64,
    /// The rest of a response the master sends for its child ([`Stage::Send`]).
    job: Option<Box<completion::Job>>,
}

impl Held {
    /// When the connection is due to be closed if nothing more arrives (its stage's deadline,
    /// or sooner under a minimum rate), with the reason its 408 gives; `None` for one queued
    /// for a child or with a child.
    fn due(&self) -> Option<(Instant, &'static str)> {
        match self.stage {
            // What its lateness means is the prelude's to say ([`Master::advance`]).
            Stage::Prelude => self.prelude.deadline().map(|d| (d, "")),
            // Nothing yet: the wait for a request (closed without a word past it).
            Stage::Head { deadline } => match self.head_due.due(self.buf.len()) {
                Some((d, slow)) if !self.buf.is_empty() => Some((d, conn::head_late(slow))),
                _ => Some((deadline, conn::head_late(false))),
            },
            Stage::Idle { deadline } => Some((deadline, "idle connection closed")),
            Stage::Body { due, head_len } => Some(due.due(self.buf.len().saturating_sub(head_len))),
            Stage::Send => self
                .job
                .as_ref()
                .map(|j| j.due(weft_sys::socket::bytes_acked(self.stream.as_raw_fd()).ok())),
            Stage::Closing { deadline } => Some((deadline, "")),
            Stage::Queued | Stage::Served => None,
        }
    }

    /// The client's address: the PROXY header's where the listener takes one.
    fn client(&self) -> std::net::IpAddr {
        self.proxied.flatten().unwrap_or(self.peer).ip()
    }
}

/// Everything the master keeps; forked children close the descriptors in it.
struct Master {
    epoll: Epoll,
    held: HashMap<RawFd, Held>,
    /// The held connections' deadlines, by descriptor: expiring them costs what expires, not
    /// a scan of every connection held (the pipeline's poller keeps its own the same way).
    timers: Wheel<RawFd>,
    queue: VecDeque<RawFd>,
    children: HashMap<Pid, Child>,
    /// Live and lingering children ([`Counts`]).
    counts: Shared<Counts>,
    /// Raised while at least [`pressure_mark`] children live, and from the start of shutdown
    /// on: lingering children wait on it beside their connection.
    pressure: PollFlag,
    /// The master's own pidfd (none on a kernel without pidfds), inherited by every child:
    /// readable once the master has exited, so a lingering child whose master died stops
    /// waiting even if the SIGTERM it asked for landed just before its `poll`.
    exited: Option<std::os::fd::OwnedFd>,
    /// Shutdown has begun: the children were told to stop.
    stopping: bool,
    /// A full listener has a client waiting: lingering children give their idle connections
    /// back at once ([`Master::reclaim`]).
    crowded: bool,
    /// When the listener first found itself full with a client waiting, for
    /// [`RECLAIM_WAIT`]; none while no listener is.
    crowded_since: Option<Instant>,
    max_children: usize,
    /// `limits.max_connections`, per listener.
    max_conns: u64,
    parser: Parser,
    /// Descriptors the master may use for connections (see [`descriptor_room`]).
    fd_room: usize,
    /// Write completion's socket ([`completion`]): the master receives hand-backs on the
    /// first, children inherit the second to send them; none if it could not be made.
    chan: Option<(OwnedFd, OwnedFd)>,
    /// Hand-backs received from children not yet reaped, by connection.
    jobs: HashMap<RawFd, completion::Job>,
    /// Descriptors of files the master holds for write completion.
    job_fds: usize,
}

fn master(listeners: Vec<(TcpListener, Arc<ListenerMetrics>)>, live: &LiveApp) -> io::Result<()> {
    let mut app = live.current();
    // For the status JSON of the connection processes it forks (the server process notes it
    // for its own sampler).
    app.metrics.set_master(sp::pid() as u32);
    register_shutdown_signals(&app)?;
    // SIGHUP (forwarded by the server process): re-read the configuration between accepts;
    // children forked afterwards serve with it.
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGHUP, hup.clone())?;
    // SIGUSR1 (forwarded too): reopen the access log, so children forked afterwards write to
    // the new file; a child keeps the file it was forked with (one connection's life). The
    // children inherit this handler, so a SIGUSR1 sent to the process group kills none.
    let usr1 = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGUSR1, usr1.clone())?;
    // SIGUSR2 (sent by the server process's certificate keeper, `keeper`): build the
    // running configuration again, file unread, for the certificates it stored.
    let usr2 = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGUSR2, usr2.clone())?;
    // SIGCHLD interrupts the master's epoll_wait (never restarted after a handler), so an
    // exited child is reaped, its connection taken back or closed, and a queued request given
    // its slot at once. The handler writes to no descriptor, so the children that inherit it
    // cannot write into one they reused. These handlers only set flags, which the master
    // looks at with the signals blocked until its wait begins (`wait_for_signals`), so none
    // is missed however long it sleeps.
    let chld = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(SIGCHLD, chld.clone())?;
    let epoll = Epoll::new()?;
    for (i, (l, _)) in listeners.iter().enumerate() {
        l.set_nonblocking(true)?;
        epoll.add(l.as_raw_fd(), EPOLLIN, i as u64)?;
    }
    let fds: Vec<RawFd> = listeners.iter().map(|(l, _)| l.as_raw_fd()).collect();
    // Dropped with the listeners.
    let listening = app.shutdown.listening();
    let max_children = app
        .cfg
        .process
        .max_children
        .min(app.cfg.limits.max_connections)
        .max(1);
    let mut gate = AcceptGate::new(app.cfg.limits.max_connections, None);
    let mut m = Master {
        epoll,
        held: HashMap::new(),
        timers: Wheel::new(Instant::now()),
        queue: VecDeque::new(),
        children: HashMap::new(),
        counts: Shared::new(),
        // Before `descriptor_room`, which counts the descriptors open.
        pressure: PollFlag::new()?,
        exited: sp::pidfd_open(sp::pid()).ok(),
        stopping: false,
        crowded: false,
        crowded_since: None,
        max_children,
        max_conns: app.cfg.limits.max_connections as u64,
        parser: Parser::new(app.cfg.limits.http()),
        chan: app
            .cfg
            .process
            .write_completion
            .then(hand_back_channel)
            .flatten(),
        jobs: HashMap::new(),
        job_fds: 0,
        fd_room: 0,
    };
    // After the channel is open: it counts among the descriptors open.
    m.fd_room = descriptor_room();
    if let Some((recv, _)) = &m.chan {
        m.epoll.add(recv.as_raw_fd(), EPOLLIN, CHAN_TAG)?;
    }
    let mut armed = vec![true; listeners.len()];
    let mut ready = Events::with_capacity(MAX_EVENTS);
    let mut last_sweep = Instant::now();
    // The last wait saw nothing happen.
    let mut quiet = false;
    while !app.shutdown.is_set() {
        if hup.swap(false, Relaxed) {
            match live.reload() {
                Ok(()) => log::info!("process model master: configuration reloaded"),
                Err(e) => log::error!("process model master: reload failed, kept: {e}"),
            }
            app = live.current();
            m.parser = Parser::new(app.cfg.limits.http());
        }
        if usr2.swap(false, Relaxed) {
            match live.refresh() {
                Ok(()) => log::info!("process model master: certificates swapped in"),
                Err(e) => log::error!("process model master: certificates not swapped in: {e}"),
            }
            app = live.current();
        }
        if usr1.swap(false, Relaxed) {
            if let Some(Err(e)) = app.access_log.as_ref().map(|l| l.reopen()) {
                log::error!("process model master: cannot reopen the access log: {e}");
            }
        }
        chld.store(false, Relaxed);
        m.reap(&app, false);
        m.dispatch(&app, &fds, &mut gate);
        m.publish(&listeners);
        // Before the listeners are re-armed: a connection it closes frees room now, and a
        // quiet master might otherwise sleep with a listener left out.
        if last_sweep.elapsed() >= SWEEP_EVERY {
            m.sweep(&app);
            last_sweep = Instant::now();
        }
        // A listener the master cannot accept from now leaves the epoll set (level-triggered,
        // it would wake the master at once, again and again) until a connection closes.
        let mut crowded = false;
        for (i, (l, lm)) in listeners.iter().enumerate() {
            if lm.open.load(Relaxed) >= m.max_conns && super::backlog_waits(l.as_raw_fd()) {
                m.reclaim(lm);
                crowded = true;
            }
            let want = m.has_room(&mut gate) && !gate.at_capacity(lm, || false);
            if want != armed[i] {
                let r = if want {
                    m.epoll.add(l.as_raw_fd(), EPOLLIN, i as u64)
                } else {
                    m.epoll.delete(l.as_raw_fd())
                };
                if r.is_ok() {
                    armed[i] = want;
                }
            }
        }
        // While connections come and go it sweeps their deadlines every SWEEP_EVERY. After a
        // wait in which nothing happened (no event, no signal: nothing can have moved a
        // deadline) it sleeps until the earliest deadline, and with none (no connection held,
        // or all with children) until a client, a child's exit or a signal comes.
        m.crowd(crowded);
        // A full listener with a client waiting looks again each SWEEP_EVERY as idle
        // connections come back from children and close.
        let timeout = if quiet && !crowded {
            m.earliest_due()
                .map(|d| d.saturating_duration_since(Instant::now()).max(SWEEP_EVERY))
        } else {
            Some(SWEEP_EVERY)
        };
        let flagged = || {
            app.shutdown.is_set()
                || hup.load(Relaxed)
                || usr1.load(Relaxed)
                || usr2.load(Relaxed)
                || chld.load(Relaxed)
        };
        m.epoll
            .wait_for_signals(&mut ready, timeout, &MASTER_SIGNALS, flagged)?;
        quiet = ready.is_empty() && !flagged();
        for token in ready.iter().map(|e| e.token) {
            if token == CHAN_TAG {
                m.receive_hand_backs(&app);
            } else if token & CONN_TAG != 0 {
                m.read_head(&app, (token & !CONN_TAG) as RawFd);
            } else {
                let (listener, lm) = &listeners[token as usize];
                m.accept(listener, lm, &app, &mut gate);
            }
        }
    }
    // Stop accepting: the kernel refuses new connections once the sockets are closed.
    drop(listeners);
    drop(listening);
    let end = Instant::now() + app.cfg.timeouts.shutdown_grace;
    m.drain(&app, &mut gate, &mut ready, end)?;
    // What is still unanswered closes now; children finish within the rest of the grace.
    let waiting: Vec<RawFd> = m
        .held
        .iter()
        .filter(|(_, h)| h.stage != Stage::Served)
        .map(|(&fd, _)| fd)
        .collect();
    if !waiting.is_empty() {
        log::warn!(
            "{} connections still open after the {:?} grace period; closing them",
            waiting.len(),
            app.cfg.timeouts.shutdown_grace
        );
    }
    for fd in waiting {
        m.close(fd);
    }
    m.stop_children(&app, end.saturating_duration_since(Instant::now()));
    Ok(())
}

/// How often the master looks for expired head and keep-alive deadlines while connections
/// come and go (after a quiet wait it sleeps until the earliest one).
const SWEEP_EVERY: Duration = Duration::from_millis(50);
/// The signals whose handlers set the master's flags.
const MASTER_SIGNALS: [weft_sys::signal::Signal; 6] =
    [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD];

/// Events the master takes from its epoll per wait.
const MAX_EVENTS: usize = 256;

/// Descriptors the master keeps free for its own use: the `/proc/self/stat` read of each
/// fork, an accept, log files reopened.
const FD_SPARE: usize = 8;

/// How many descriptors the master may give to connections: the open-file limit
/// less what is open now and [`FD_SPARE`]. The master stops accepting at this mark instead of
/// running into EMFILE, where it could no longer fork (a fork reads `/proc/self/stat`) and the
/// connections it holds would wait for a child forever.
fn descriptor_room() -> usize {
    let limit = weft_sys::resource::raise_nofile_limit().unwrap_or(1024);
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count());
    usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_sub(open + FD_SPARE)
}

impl Master {
    /// After a fork or a reap: the live count the lingering children read, and the flag
    /// that wakes them when it reaches the pressure mark (or once shutdown has begun).
    fn children_changed(&mut self) {
        let n = self.children.len() as u64;
        // Crowded: every lingering child reads the pressure mark as reached.
        self.counts
            .live
            .store(if self.crowded { u64::MAX } else { n }, Relaxed);
        self.pressure
            .set(self.stopping || self.crowded || n >= pressure_mark(self.max_children));
    }

    /// The master's figures for the dashboard (`metrics::history::model_figures`), the same
    /// for each of its listeners: connection processes, those lingering, connections the
    /// master holds, and responses whose rest it sends (write completion).
    fn publish(&self, listeners: &[(TcpListener, Arc<ListenerMetrics>)]) {
        let figures = [
            self.children.len() as u64,
            self.counts.lingering.load(Relaxed),
            // Each child serves one of the connections held.
            self.held.len().saturating_sub(self.children.len()) as u64,
            self.jobs.len() as u64,
        ];
        for (_, lm) in listeners {
            for (gauge, v) in lm.model_gauges.iter().zip(figures) {
                gauge.store(v, Relaxed);
            }
        }
    }

    /// Whether lingering children are to hand their idle connections back at once: while a
    /// full listener has a client waiting ([`Master::reclaim`]).
    fn crowd(&mut self, on: bool) {
        if !on {
            self.crowded_since = None;
        }
        if self.crowded != on {
            self.crowded = on;
            self.children_changed();
        }
    }

    /// A listener at `limits.max_connections` with a client in its backlog makes room, as the
    /// other models do ([`AcceptGate::at_capacity`]): closes up to
    /// [`crate::shutdown::reclaim_batch`] of the idle keep-alive connections the master holds
    /// for that listener, longest idle first (lingering children hand theirs back meanwhile,
    /// [`Master::crowd`], to be closed in turn). While children still linger it waits for
    /// them, up to [`RECLAIM_WAIT`], so the longest idle is chosen among all the idle
    /// connections, not among those that happen to be back first. Returns how many it closed.
    fn reclaim(&mut self, lm: &Arc<ListenerMetrics>) -> usize {
        let since = *self.crowded_since.get_or_insert_with(Instant::now);
        if self.counts.lingering.load(Relaxed) > 0 && since.elapsed() < RECLAIM_WAIT {
            return 0;
        }
        let mut idle: Vec<(Instant, RawFd)> = self
            .held
            .iter()
            .filter(|(_, h)| Arc::ptr_eq(&h.lm, lm))
            .filter_map(|(&fd, h)| match h.stage {
                Stage::Idle { deadline } => Some((deadline, fd)),
                Stage::Head { deadline } if h.buf.is_empty() && h.resumed => Some((deadline, fd)),
                _ => None,
            })
            .collect();
        // The earliest idle deadline is the longest idle (one keep-alive timeout for all, from
        // the connection's last data: `Master::child_ended`).
        idle.sort_unstable();
        let closed = idle
            .len()
            .min(crate::shutdown::reclaim_batch(self.max_conns));
        for &(_, fd) in &idle[..closed] {
            self.close(fd);
        }
        lm.reclaimed.fetch_add(closed as u64, Relaxed);
        closed
    }

    /// Shutdown's word to the children: the flag raised (a lingering child wakes and looks
    /// at its shutdown flag, which its own SIGTERM sets) and SIGTERM to each.
    fn tell_children_to_stop(&mut self) {
        self.stopping = true;
        self.pressure.set(true);
        for &pid in self.children.keys() {
            let _ = sp::kill(pid, SIGTERM);
        }
    }

    /// Whether another connection fits in the master's descriptors (with a warning if not).
    fn has_room(&self, gate: &mut AcceptGate) -> bool {
        // Room kept for the descriptors of one more hand-back, received before it is counted.
        let used = self.held.len() + self.job_fds + weft_sys::socket::MAX_PASSED_FDS;
        if used < self.fd_room {
            return true;
        }
        gate.warn(|| {
            format!("{used} descriptors of connections open (open-file limit); not accepting")
        });
        false
    }

    /// Accepts what the listener has (at most [`ACCEPT_BURST`]) and holds each connection
    /// until its head has arrived.
    fn accept(
        &mut self,
        listener: &TcpListener,
        lm: &Arc<ListenerMetrics>,
        app: &App,
        gate: &mut AcceptGate,
    ) {
        for _ in 0..ACCEPT_BURST {
            if gate.at_capacity(lm, || false) || !self.has_room(gate) {
                return;
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    // Taken at accept, so the `accept` phase includes the wait for the head
                    // and the fork (the CGI paper's question).
                    let accepted = app.cfg.timing.on().then(Instant::now);
                    let fd = stream.as_raw_fd();
                    if let Err(e) = stream
                        .set_nonblocking(true)
                        .and_then(|()| self.epoll.add(fd, EPOLLIN, CONN_TAG | fd as u64))
                    {
                        log::warn!("{peer}: cannot watch the connection: {e}");
                        continue;
                    }
                    lm.accepted.fetch_add(1, Relaxed);
                    lm.open.fetch_add(1, Relaxed);
                    let timer = self.timers.alloc();
                    self.held.insert(
                        fd,
                        Held {
                            stream,
                            peer,
                            lm: lm.clone(),
                            buf: Vec::new(),
                            stage: Stage::Prelude,
                            accepted,
                            resumed: false,
                            born: weft_http::date::now_secs(),
                            prelude: conn::Prelude::new(lm, &app.cfg.timeouts, Instant::now()),
                            proxied: None,
                            head_due: conn::HeadDue::default(),
                            client_slot: None,
                            timer,
                            job: None,
                        },
                    );
                    // A plain listener's connection is counted at once.
                    self.advance(app, fd);
                    self.arm(fd);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    if gate.failed(lm, &e) {
                        std::thread::sleep(ACCEPT_BACKOFF);
                    }
                    return;
                }
            }
        }
    }

    /// Reads what a held connection sent and puts it under its new deadline.
    fn read_head(&mut self, app: &App, fd: RawFd) {
        self.read(app, fd);
        self.arm(fd);
    }

    /// Puts held connection `fd` under its current deadline ([`Held::due`]; none while it is
    /// queued for a child or with one).
    fn arm(&mut self, fd: RawFd) {
        let Some(h) = self.held.get(&fd) else {
            return;
        };
        self.timers.remove(h.timer);
        if let Some((deadline, _)) = h.due() {
            let _ = self.timers.park(h.timer, fd, deadline);
        }
    }

    /// Reads what a held connection sent; steps its prelude, and queues it for a child once
    /// its head is whole (or is bad or too large: the child answers it as every model does).
    fn read(&mut self, app: &App, fd: RawFd) {
        let Some(h) = self.held.get_mut(&fd) else {
            return;
        };
        match h.stage {
            Stage::Send => return self.send_rest(app, fd),
            Stage::Closing { .. } => return self.discard(fd),
            _ => {}
        }
        let max = match h.stage {
            Stage::Body { head_len, .. } => head_len + app.cfg.limits.client_body_buffer,
            Stage::Prelude => conn::proxy_read_max(&app.cfg),
            Stage::Head { .. } | Stage::Idle { .. } => app.cfg.limits.max_head_bytes + 1,
            Stage::Queued | Stage::Served | Stage::Send | Stage::Closing { .. } => return,
        };
        let had = h.buf.len();
        let want = (max - had.min(max)).min(conn::READ_BUF);
        if want == 0 {
            return;
        }
        // Read on the stack and keep only what came: a thousand slow heads of a few dozen
        // bytes each cost the master a few dozen bytes each, not a read buffer each.
        let mut chunk = [0u8; conn::READ_BUF];
        match (&h.stream).read(&mut chunk[..want]) {
            Ok(0) => {
                if matches!(h.stage, Stage::Body { .. }) {
                    // The client closed its side before the end of the body: a child serves
                    // the request as the other models do (a handler that reads the body
                    // meets its end and answers 400; one that does not answers as usual).
                    return self.enqueue(fd);
                } else if let Some(why) = h.prelude.ended(had) {
                    why.log(h.peer, None);
                }
                return self.close(fd);
            }
            Ok(n) => h.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return,
            Err(e) => {
                log::debug!("{}: connection ended: {e}", h.peer);
                return self.close(fd);
            }
        }
        match &mut h.stage {
            Stage::Prelude => self.advance(app, fd),
            Stage::Body { due, head_len } => {
                let now = Instant::now();
                due.progressed(&app.cfg.timeouts, now);
                let head_len = *head_len;
                self.parser.reset();
                let waits = matches!(self.parser.parse(&h.buf), Ok(Some(_)))
                    && due.step(self.parser.head(), &h.buf[head_len..], &app.cfg, now)
                        != conn::BodyStep::Ready;
                if !waits {
                    self.enqueue(fd);
                }
            }
            Stage::Idle { .. } => {
                h.stage = Stage::Head {
                    deadline: Instant::now() + app.cfg.timeouts.header_read,
                };
                h.head_due = conn::HeadDue::default();
                self.parse_head(app, fd);
            }
            _ => self.parse_head(app, fd),
        }
    }

    /// Steps a held connection's prelude as far as its bytes allow: a TLS connection goes to
    /// a child with its first bytes (part of a ClientHello), since the child runs the handshake
    /// and keeps the connection to its end (a TLS session cannot be handed back to the master
    /// between requests); a plain one goes on to its first head.
    fn advance(&mut self, app: &App, fd: RawFd) {
        loop {
            let Some(h) = self.held.get_mut(&fd) else {
                return;
            };
            let now = Instant::now();
            match h.prelude.step(&h.buf, &app.cfg, now) {
                conn::Step::Read { .. } => return,
                conn::Step::Proxied { len, client } => {
                    h.buf.drain(..len);
                    h.proxied = Some(client);
                }
                conn::Step::Admit => {
                    let client = h.client();
                    if !self.admit(app, fd, client) {
                        return;
                    }
                    if let Some(h) = self.held.get_mut(&fd) {
                        h.prelude.counted();
                    }
                }
                conn::Step::Handshake { .. } => {
                    // The master keeps the count for the connection's life, so it counts a
                    // TLS connection before its child takes over (over the limit, it is closed:
                    // the master cannot answer before a handshake).
                    let client = h.client();
                    if h.client_slot.is_none() && !self.admit(app, fd, client) {
                        return;
                    }
                    return self.enqueue(fd);
                }
                // An h2c connection (its preface read): its child serves it to the end, as a
                // TLS one, since the HTTP/2 state cannot come back to the master.
                conn::Step::Open(conn::Protocol::Http2) => return self.enqueue(fd),
                conn::Step::Open(conn::Protocol::Http1) => {
                    h.stage = Stage::Head {
                        deadline: now + app.cfg.timeouts.header_read,
                    };
                    if !h.buf.is_empty() {
                        self.parse_head(app, fd);
                    }
                    return;
                }
                conn::Step::Answer(status, why) => {
                    answer_held(app, h, status, &why);
                    return self.close(fd);
                }
                conn::Step::Close(why) => {
                    why.log(h.peer, None);
                    return self.close(fd);
                }
            }
        }
    }

    /// Takes the head rules (`conn::head_step`, every model's) over what a held connection
    /// has sent so far: a whole head with a small body to come waits for the body; a whole one
    /// goes to a child, and so does a bad one or one too large (the child answers it as every
    /// model does); one past its deadline is answered 408 here.
    fn parse_head(&mut self, app: &App, fd: RawFd) {
        let Some(h) = self.held.get_mut(&fd) else {
            return;
        };
        let t = &app.cfg.timeouts;
        self.parser.reset();
        match conn::head_step(&mut self.parser, &h.buf, &mut h.head_due, t, Instant::now) {
            conn::HeadStep::Complete { head_len } => {
                h.head_due = conn::HeadDue::default();
                let (body, now) = (&h.buf[head_len..], Instant::now());
                match conn::BodyDue::begin(self.parser.head(), body, &app.cfg, now) {
                    Some(due) => h.stage = Stage::Body { due, head_len },
                    None => self.enqueue(fd),
                }
            }
            conn::HeadStep::Fail(408, why) => {
                answer_held(app, h, 408, &conn::Reason::Rule(why));
                self.close(fd);
            }
            conn::HeadStep::Fail(..) => self.enqueue(fd),
            conn::HeadStep::Partial { .. } | conn::HeadStep::Empty => {}
        }
    }

    /// Queues held connection `fd` for a child; the master stops watching it.
    fn enqueue(&mut self, fd: RawFd) {
        if let Some(h) = self.held.get_mut(&fd) {
            h.stage = Stage::Queued;
            self.timers.remove(h.timer);
            let _ = self.epoll.delete(fd);
            self.queue.push_back(fd);
        }
    }

    /// Forks a child for each queued connection while fewer than `max_children` live.
    fn dispatch(&mut self, app: &Arc<App>, listener_fds: &[RawFd], gate: &mut AcceptGate) {
        while self.children.len() < self.max_children {
            let Some(fd) = self.queue.pop_front() else {
                return;
            };
            if !self.held.get(&fd).is_some_and(|h| h.stage == Stage::Queued) {
                continue;
            }
            match self.fork_child(fd, app, listener_fds) {
                Ok(pid) => {
                    let h = self.held.get_mut(&fd).expect("queued connections are held");
                    h.stage = Stage::Served;
                    // The child has its copy; the master needs none until it comes back.
                    h.buf = Vec::new();
                    self.children.insert(pid, Child { conn: fd });
                    self.children_changed();
                }
                Err(e) => {
                    let h = &self.held[&fd];
                    let lm = h.lm.clone();
                    gate.warn(|| format!("{}: cannot fork a connection process: {e}", lm.addr));
                    // A TLS client could not read a plaintext answer: it gets the close alone.
                    if !lm.tls() {
                        answer_held(
                            app,
                            h,
                            503,
                            &conn::Reason::Rule("no connection process could be forked"),
                        );
                    }
                    self.close(fd);
                    std::thread::sleep(ACCEPT_BACKOFF);
                }
            }
        }
        if !self.queue.is_empty() {
            let which = if self.max_children == app.cfg.process.max_children {
                "process.max_children"
            } else {
                "limits.max_connections"
            };
            let (n, q) = (self.max_children, self.queue.len());
            gate.warn(|| {
                format!("{n} connection processes live ({which}); {q} requests wait for one")
            });
        }
    }

    /// Forks the child that serves connection `fd`; in the master returns its pid. The child
    /// never returns.
    fn fork_child(&mut self, fd: RawFd, app: &Arc<App>, listener_fds: &[RawFd]) -> io::Result<Pid> {
        let master = sp::pid();
        match sp::fork()? {
            Forked::Parent(pid) => Ok(pid),
            Forked::Child => {
                // A child holds only its own connection: a copy of another one (or of a
                // listener) would keep that socket open after the master closed it.
                for &l in listener_fds {
                    close_inherited(l);
                }
                close_inherited(self.epoll.as_raw_fd());
                for (&other, h) in self.held.iter().filter(|(&o, _)| o != fd) {
                    close_inherited(other);
                    h.job
                        .iter()
                        .flat_map(|j| j.raw_fds())
                        .for_each(close_inherited);
                }
                for j in self.jobs.values() {
                    j.raw_fds().for_each(close_inherited);
                }
                if let Some((recv, _)) = &self.chan {
                    close_inherited(recv.as_raw_fd());
                }
                // A child whose master is gone must not serve on: it gets SIGTERM (graceful).
                if !matches!(sp::die_with_parent(SIGTERM, master), Ok(true)) {
                    sp::exit_now(0);
                }
                let h = self.held.remove(&fd).expect("the connection is held");
                let master_fd = self.exited.as_ref().map(AsRawFd::as_raw_fd);
                let code = serve_child(
                    h,
                    app,
                    &self.counts,
                    &self.pressure,
                    master_fd,
                    self.max_children,
                    self.chan.as_ref().map(|(_, send)| send.as_raw_fd()),
                );
                sp::exit_now(code)
            }
        }
    }

    /// Reaps exited children; takes back connections they gave back idle and closes the
    /// rest. `quiet`: at shutdown, where signal deaths are expected.
    fn reap(&mut self, app: &App, quiet: bool) {
        loop {
            match sp::try_wait(-1) {
                Ok(Some((pid, exit))) => {
                    // A child queues its hand-back before it exits, so once its exit is seen
                    // the message is there to take (while the child still counts as live, as
                    // `receive_hand_backs` asks).
                    if exit == Exit::Code(EXIT_HANDED) {
                        self.receive_hand_backs(app);
                    }
                    if let Some(c) = self.children.remove(&pid) {
                        self.children_changed();
                        self.child_ended(c.conn, exit, app);
                    }
                    match exit {
                        Exit::Code(0 | EXIT_IDLE | EXIT_HANDED) => {}
                        Exit::Signal(SIGKILL | SIGTERM) if quiet => {}
                        other => log::warn!("connection process {pid} ended with {other:?}"),
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    log::error!("waitpid: {e}");
                    return;
                }
            }
        }
    }

    fn child_ended(&mut self, fd: RawFd, exit: Exit, app: &App) {
        let job = self.jobs.remove(&fd);
        if let Some(j) = &job {
            self.job_fds -= j.fds();
        }
        let back = matches!(exit, Exit::Code(EXIT_IDLE | EXIT_HANDED));
        // The child made the socket blocking (its flags are shared with the master's copy):
        // the master's reads and sends must never wait.
        if back
            && self
                .held
                .get(&fd)
                .is_some_and(|h| h.stream.set_nonblocking(true).is_err())
        {
            return self.close(fd);
        }
        if exit == Exit::Code(EXIT_HANDED) {
            return match job {
                // Sent even while draining: the response was promised.
                Some(job) => self.start_send(app, fd, job),
                None => {
                    if let Some(h) = self.held.get(&fd) {
                        log::warn!(
                            "{}: a response's rest never reached the master; closed",
                            h.peer
                        );
                    }
                    self.close(fd)
                }
            };
        }
        let idle = exit == Exit::Code(EXIT_IDLE) && !app.shutdown.is_set();
        if idle {
            if let Some(h) = self.held.get_mut(&fd) {
                // Idle since its last data, which may be a while if the child lingered: the
                // keep-alive timeout runs from then, not from the hand-back.
                let idle = weft_sys::socket::idle_for(fd).unwrap_or_default();
                h.stage = Stage::Idle {
                    deadline: Instant::now() + app.cfg.timeouts.keepalive.saturating_sub(idle),
                };
                h.resumed = true;
                if self.epoll.add(fd, EPOLLIN, CONN_TAG | fd as u64).is_ok() {
                    self.arm(fd);
                    return;
                }
            }
        }
        self.close(fd);
    }

    /// Takes the hand-backs children queued ([`completion`]); each waits for its child's
    /// exit ([`Master::child_ended`]).
    fn receive_hand_backs(&mut self, app: &App) {
        let Some(chan) = self.chan.as_ref().map(|(recv, _)| recv.as_raw_fd()) else {
            return;
        };
        loop {
            match completion::receive(chan, &app.cfg.timeouts) {
                Ok(Some(back)) => {
                    let theirs = self
                        .children
                        .get(&back.pid)
                        .is_some_and(|c| c.conn == back.conn);
                    if !theirs {
                        log::warn!(
                            "a hand-back from process {} for a connection it does not serve; dropped",
                            back.pid
                        );
                        continue;
                    }
                    self.job_fds += back.job.fds();
                    if let Some(old) = self.jobs.insert(back.conn, back.job) {
                        self.job_fds -= old.fds();
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    log::warn!("write completion: {e}");
                    if e.kind() != io::ErrorKind::InvalidData {
                        return;
                    }
                }
            }
        }
    }

    /// Takes connection `fd` back from its child with the rest of a response to send.
    fn start_send(&mut self, app: &App, fd: RawFd, job: completion::Job) {
        let Some(h) = self.held.get_mut(&fd) else {
            return;
        };
        self.job_fds += job.fds();
        h.job = Some(Box::new(job));
        h.stage = Stage::Send;
        h.resumed = true;
        if let Err(e) = self.epoll.add(fd, EPOLLOUT, CONN_TAG | fd as u64) {
            log::warn!("{}: cannot watch the connection: {e}", h.peer);
            return self.close(fd);
        }
        self.send_rest(app, fd);
        self.arm(fd);
    }

    /// Sends what the socket of connection `fd` takes of its job; once all is out, the
    /// connection waits for its next request, or is half-closed and drained.
    fn send_rest(&mut self, app: &App, fd: RawFd) {
        let Some(h) = self.held.get_mut(&fd) else {
            return;
        };
        let Some(job) = h.job.as_mut() else {
            return;
        };
        match job.step(h.stream.as_raw_fd(), &app.cfg.timeouts) {
            Ok(Sent::Blocked) => {}
            Ok(Sent::Done) => {
                let job = h.job.take().expect("a job is being sent");
                self.job_fds -= job.fds();
                let now = Instant::now();
                h.stage = if job.then_close || app.shutdown.is_set() {
                    let _ = h.stream.shutdown(std::net::Shutdown::Write);
                    Stage::Closing {
                        deadline: now + app.cfg.timeouts.lingering_time,
                    }
                } else {
                    Stage::Idle {
                        deadline: now + app.cfg.timeouts.keepalive,
                    }
                };
                if self
                    .epoll
                    .modify(fd, EPOLLIN, CONN_TAG | fd as u64)
                    .is_err()
                {
                    self.close(fd);
                }
            }
            Err(e) => {
                log::info!(
                    "{}: response cut short: {e} ({} bytes unsent by the master)",
                    h.peer,
                    job.left()
                );
                self.close(fd);
            }
        }
    }

    /// Reads and drops what a half-closed connection still sends; closes it at its end.
    fn discard(&mut self, fd: RawFd) {
        let Some(h) = self.held.get(&fd) else {
            return;
        };
        let mut scratch = [0u8; 4096];
        for _ in 0..16 {
            match (&h.stream).read(&mut scratch) {
                Ok(n) if n > 0 => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                _ => return self.close(fd),
            }
        }
    }

    /// Ends connections past their deadline: a partial head gets 408, an idle connection or
    /// one that never sent a byte is closed.
    /// The earliest time a held connection is due to be closed (see [`Held::due`]).
    fn earliest_due(&self) -> Option<Instant> {
        self.timers.next_due_exact()
    }

    fn sweep(&mut self, app: &App) {
        let now = Instant::now();
        let mut fired = Vec::new();
        self.timers.expire(now, &mut fired);
        // Each connection past a deadline, with the reason its 408 gives.
        let mut expired = Vec::with_capacity(fired.len());
        for fd in fired {
            match self.held.get(&fd).and_then(Held::due) {
                Some((d, why)) if d <= now => expired.push((fd, why)),
                // Its deadline moved since it was armed.
                _ => self.arm(fd),
            }
        }
        for (fd, why) in expired {
            let h = &self.held[&fd];
            let answers = match h.stage {
                // The prelude says what its lateness means (no 408: not an HTTP client yet).
                Stage::Prelude => {
                    self.advance(app, fd);
                    self.arm(fd);
                    continue;
                }
                Stage::Head { .. } => !h.buf.is_empty(),
                Stage::Body { .. } => true,
                Stage::Send => {
                    // The access-log line went out with the child (counting what it handed
                    // over); this says why the rest did not go, and how much.
                    let left = h.job.as_ref().map_or(0, |j| j.left());
                    log::info!(
                        "{}: response cut short: {why} ({left} bytes unsent by the master)",
                        h.peer
                    );
                    false
                }
                _ => false,
            };
            if answers {
                answer_held(app, h, 408, &conn::Reason::Rule(why));
            }
            self.close(fd);
        }
    }

    /// Counts held connection `fd` against `limits.conn_per_ip` by `client`; over it, answers
    /// 503 and closes it (false).
    fn admit(&mut self, app: &App, fd: RawFd, client: std::net::IpAddr) -> bool {
        let Some(h) = self.held.get_mut(&fd) else {
            return false;
        };
        match conn::count(app, &h.lm, client) {
            Ok(slot) => {
                h.client_slot = Some(slot);
                true
            }
            Err(why) => {
                if h.lm.tls() {
                    // A TLS client cannot read a plaintext answer before its handshake (and
                    // the master never holds a session): it gets the close alone, which is
                    // no response to count or log as one.
                    log::info!("{}: {why}; closed", h.peer);
                    let _ = h.stream.shutdown(std::net::Shutdown::Write);
                } else {
                    // The other models' answer, and their log lines.
                    answer_held(app, h, 503, &why);
                }
                self.close(fd);
                false
            }
        }
    }

    /// Forgets and closes a held connection.
    fn close(&mut self, fd: RawFd) {
        if let Some(j) = self.jobs.remove(&fd) {
            self.job_fds -= j.fds();
        }
        if let Some(h) = self.held.remove(&fd) {
            if let Some(j) = &h.job {
                self.job_fds -= j.fds();
            }
            self.timers.release(h.timer);
            let _ = self.epoll.delete(fd);
            h.lm.open.fetch_sub(1, Relaxed);
            drop(h);
        }
    }

    /// SIGTERM to every child, then waits up to `grace` for them; kills and reaps the rest.
    /// Graceful shutdown's first part, as nginx drains: idle keep-alive connections close at
    /// once and children are told to finish, but a request whose head has begun, or a
    /// connection accepted that has not sent yet (it may have been accepted just before an
    /// upgrade handed the port over), is still read and answered by a child, until `end` (or
    /// its header-read deadline).
    fn drain(
        &mut self,
        app: &Arc<App>,
        gate: &mut AcceptGate,
        ready: &mut Events,
        end: Instant,
    ) -> io::Result<()> {
        self.tell_children_to_stop();
        // Idle connections get the idle window (`timeouts.drain_idle`) for a last request,
        // which a child answers with `Connection: close` (the flag is set in what it
        // inherits); those still silent after it are closed.
        let idle_end = Instant::now() + app.shutdown.drain_idle();
        let mut idle_closed = false;
        let is_idle = |h: &Held| match h.stage {
            Stage::Idle { .. } => true,
            Stage::Head { .. } => h.buf.is_empty() && h.resumed,
            Stage::Prelude
            | Stage::Body { .. }
            | Stage::Queued
            | Stage::Served
            | Stage::Send
            | Stage::Closing { .. } => false,
        };
        let pending = |m: &Master| {
            m.held.values().any(|h| {
                !is_idle(h)
                    && matches!(
                        h.stage,
                        Stage::Prelude
                            | Stage::Head { .. }
                            | Stage::Body { .. }
                            | Stage::Queued
                            | Stage::Send
                    )
            })
        };
        loop {
            let now = Instant::now();
            if !idle_closed && now >= idle_end {
                let idle: Vec<RawFd> = self
                    .held
                    .iter()
                    .filter(|(_, h)| is_idle(h))
                    .map(|(&fd, _)| fd)
                    .collect();
                for fd in idle {
                    self.close(fd);
                }
                idle_closed = true;
            }
            let idle_left = !idle_closed && self.held.values().any(is_idle);
            if now >= end || !(pending(self) || idle_left) {
                break;
            }
            self.reap(app, false);
            // The listeners are closed: a child has none of them to close.
            self.dispatch(app, &[], gate);
            self.sweep(app);
            let mut wait = SWEEP_EVERY.min(end - now);
            if !idle_closed {
                wait = wait.min(idle_end.saturating_duration_since(now));
            }
            self.epoll.wait(ready, Some(wait))?;
            for token in ready.iter().map(|e| e.token) {
                if token == CHAN_TAG {
                    self.receive_hand_backs(app);
                } else if token & CONN_TAG != 0 {
                    self.read_head(app, (token & !CONN_TAG) as RawFd);
                }
            }
        }
        Ok(())
    }

    fn stop_children(&mut self, app: &App, grace: Duration) {
        self.tell_children_to_stop();
        let end = Instant::now() + grace;
        while !self.children.is_empty() && Instant::now() < end {
            self.reap(app, true);
            if !self.children.is_empty() {
                std::thread::sleep(REAP_EVERY);
            }
        }
        if !self.children.is_empty() {
            log::warn!(
                "{} connection processes still running after the {grace:?} grace period; killing them",
                self.children.len()
            );
            let pids: Vec<Pid> = self.children.keys().copied().collect();
            for pid in pids {
                let _ = sp::kill(pid, SIGKILL);
                let _ = sp::wait(pid);
                if let Some(c) = self.children.remove(&pid) {
                    self.close(c.conn);
                }
            }
        }
        let rest: Vec<RawFd> = self.held.keys().copied().collect();
        for fd in rest {
            self.close(fd);
        }
    }
}

/// Answers `status` (408, 503) on a connection the master holds and is about to close, with
/// the log lines every model writes (`conn::refuse`). The access-log line is written out at
/// once: a line left in the master's buffer would be copied into every child forked after it
/// and written again by each (the children flush what they inherit). Best effort: a client
/// that sends this slowly has room for a few hundred bytes; what it sent since is read
/// (bounded: the socket is non-blocking) so that the close sends no reset that could destroy
/// the answer.
fn answer_held(app: &App, h: &Held, status: u16, why: &conn::Reason) {
    let mut wbuf = Vec::new();
    let out = conn::refuse(
        app,
        h.peer,
        h.client(),
        Some(&h.buf),
        status,
        why,
        &mut wbuf,
    );
    debug_assert!(matches!(out.tail, conn::Tail::None));
    if let Some(l) = &app.access_log {
        l.flush();
    }
    let sent = (&h.stream).write(&wbuf).unwrap_or(0);
    h.lm.response(status, sent as u64);
    let _ = h.stream.shutdown(std::net::Shutdown::Write);
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        if !matches!((&h.stream).read(&mut scratch), Ok(n) if n > 0) {
            break;
        }
    }
}

/// The child: serves the connection from the head the master read until it closes or falls
/// idle; returns the exit status ([`EXIT_IDLE`]: the master takes the connection back).
fn serve_child(
    h: Held,
    app: &Arc<App>,
    counts: &Shared<Counts>,
    pressure: &PollFlag,
    master_fd: Option<RawFd>,
    max_children: usize,
    hand_back: Option<RawFd>,
) -> i32 {
    app.enter_connection_process();
    // The master's listening sockets are not this process's to count (it closes its copies).
    app.shutdown.forget_listeners();
    // A shutdown signal from here on wakes the reads; one that came before set the flag,
    // which they look at first.
    let stop = stop_pipe()
        .map_err(|e| log::warn!("{}: no shutdown wake-up for reads: {e}", h.peer))
        .ok();
    if let Some(l) = &app.access_log {
        if let Err(e) = l.start_flusher() {
            log::warn!("access log flusher: {e}");
        }
    }
    let Held {
        stream,
        peer,
        lm,
        buf,
        accepted,
        resumed,
        born,
        proxied,
        client_slot,
        ..
    } = h;
    // The master keeps the connection's count and releases it when it closes the connection;
    // this process's copy must not.
    std::mem::forget(client_slot);
    let fd = stream.as_raw_fd();
    let _ = stream.set_nonblocking(false);
    let local = super::local_addr(&lm, || stream.local_addr());
    let lm_tls = lm.tls();
    let mut stream = ChildStream {
        inner: BlockingStream::new(stream),
        head: buf,
        pos: 0,
        counts,
        pressure: pressure_mark(max_children),
        pressure_fd: pressure.raw_fd(),
        master_fd,
        app,
        gave_back: false,
        stop,
        read_timeout: None,
        drain_end: None,
        hand_back: None,
        deferred: None,
        handed: false,
    };
    // Write completion for plain connections: a TLS session cannot leave its process.
    if !lm_tls {
        stream.hand_back = hand_back;
        stream
            .inner
            .set_stall(stream.hand_back.map(|_| completion::STALL));
    }
    let info = ConnInfo {
        peer,
        local,
        listener: lm,
        registration: Some(app.shutdown.register(fd)),
        // The accept phase belongs to a connection's first request only.
        accepted: if resumed { None } else { accepted },
        // The master read the PROXY protocol header, if the listener expects one.
        proxied: proxied.map(std::sync::OnceLock::from).unwrap_or_default(),
        // Counted by the master.
        client_slot: std::sync::OnceLock::from(crate::limits_ip::ConnSlot::Untracked),
        tls: Default::default(),
        // An HTTP/2 connection stays with its child to the end (the master cannot take it).
        h2: Default::default(),
        // Its age runs from the master's accept; its requests are counted per turn (a child
        // that hands the connection back tells the master no count).
        life: conn::Life::since(born),
    };
    let served = if info.listener.tls() {
        conn::serve_tls(&mut stream, app, &info).map(|()| Served::Closed)
    } else {
        conn::serve_lingering(&mut stream, app, &info, app.cfg.timeouts.keepalive)
    };
    let mut code = match served {
        Ok(Served::Idle) if stream.gave_back && !app.shutdown.is_set() => EXIT_IDLE,
        Ok(_) => 0,
        Err(e) => {
            log::debug!("{peer}: connection ended: {e}");
            0
        }
    };
    // What is still deferred as the connection ends goes to the master, which closes it
    // after (or is sent now, if it cannot).
    if stream.deferred.is_some() && !stream.hand_over(true) {
        let _ = stream.complete();
    }
    if stream.handed {
        // The master has the connection: it sends the rest, then holds or closes it.
        code = EXIT_HANDED;
    }
    if code == 0 {
        // The master still holds a copy of the descriptor: the client sees the end now, not
        // when the master closes its copy.
        let _ = weft_sys::socket::shutdown(fd, std::net::Shutdown::Write);
    }
    drop(info);
    drop(stream);
    if let Some(l) = &app.access_log {
        l.flush();
    }
    code
}

/// A lingering connection process's wait for its next request on `conn` (`[conn, flag]`):
/// true when the connection turns readable; false once `give_up` says so (asked before every
/// wait), when `master` (the master's pidfd) shows it exited, or at `end`. The first slice
/// waits on the connection and the master alone (a client that keeps its connection busy
/// sends within it, and that wait is the cheapest); after it the child also watches the
/// master's flag, which the master raises when children are scarce or shutdown begins. A
/// plain `poll`, no signal mask: the flag, not SIGTERM's interruption, is what wakes the wait
/// at shutdown, and the master's pidfd, not the SIGTERM it sends as it dies (which could land
/// between `give_up` and the `poll`), is what wakes it when the master is gone.
fn wait_for_request(
    [conn, flag]: [RawFd; 2],
    master: Option<RawFd>,
    end: Instant,
    mut give_up: impl FnMut() -> bool,
) -> bool {
    // Leave the flag out for a slice: at first, and when it is raised with no reason seen yet
    // (rather than spin on it).
    let mut slice = true;
    // The connection, the master's pidfd where there is one, the flag.
    let mut fds = vec![conn];
    fds.extend(master);
    fds.push(flag);
    let (first, all) = (&fds[..fds.len() - 1], &fds[..]);
    loop {
        if give_up() {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let ready = if slice {
            slice = false;
            poll_readable_any(first, left.min(LINGER_SLICE))
        } else {
            poll_readable_any(all, left)
        };
        match ready {
            // The master's pidfd is fds[1] where there is one.
            Ok(r) if master.is_some() && r.contains(&1) => return false,
            Ok(r) if r.first() == Some(&0) => return true,
            Ok(r) if !r.is_empty() => slice = true,
            Ok(_) => {}
            Err(_) => return true,
        }
    }
}

/// A connection process's wake-up at shutdown: the read end of a pipe that SIGTERM and SIGINT
/// (the master's word at shutdown, or its death: `die_with_parent`) write a byte to, after
/// their inherited handler has set the shutdown flag (signal-hook runs a signal's actions in
/// the order they were registered). Readable, and left so, once shutdown has begun, whichever
/// thread took the signal. A read that polls it beside the connection cannot sleep through
/// shutdown, as a look at the flag before a blocking read could (the signal landing between
/// the two; and TLS makes a read the signal interrupted again). The read end stays open for
/// the process's life (the handlers write to the pair until it exits).
fn stop_pipe() -> io::Result<std::os::fd::BorrowedFd<'static>> {
    let (read, write) = UnixStream::pair()?;
    signal_hook::low_level::pipe::register(SIGTERM, write.try_clone()?)?;
    signal_hook::low_level::pipe::register(SIGINT, write)?;
    let read: &'static OwnedFd = Box::leak(Box::new(OwnedFd::from(read)));
    Ok(std::os::fd::AsFd::as_fd(read))
}

/// A connection process's transport: first the head bytes the master read, then the socket;
/// between requests it lingers for the keep-alive timeout unless children are scarce. Its reads
/// wake at shutdown ([`ChildStream::wait_for_bytes`]).
struct ChildStream<'a> {
    inner: BlockingStream,
    head: Vec<u8>,
    pos: usize,
    counts: &'a Shared<Counts>,
    /// Live children from which lingering gives the connection back.
    pressure: u64,
    /// The master's flag, readable while that many live or shutdown has begun
    /// ([`PollFlag`]).
    pressure_fd: RawFd,
    /// The master's pidfd (`Master::exited`), readable once it has exited.
    master_fd: Option<RawFd>,
    app: &'a App,
    /// The last linger ended because children were scarce (not by the timeout).
    gave_back: bool,
    /// [`stop_pipe`], until the reads have seen shutdown (none if it could not be made: the
    /// reads block on the connection alone).
    stop: Option<std::os::fd::BorrowedFd<'a>>,
    /// The reads' timeout, which [`ChildStream::wait_for_bytes`] applies (`None`: no limit).
    read_timeout: Option<Duration>,
    /// The end of the drain's idle window (`timeouts.drain_idle`), from when this process
    /// first saw shutdown.
    drain_end: Option<Instant>,
    /// Write completion ([`super::completion`]): the master's end of the hand-back socket,
    /// none where the rest of a response cannot go to the master (TLS).
    hand_back: Option<RawFd>,
    /// What is left to send since a send found no room for [`completion::STALL`].
    deferred: Option<completion::Deferred>,
    /// The rest went to the master: this process no longer touches the connection.
    handed: bool,
}

impl ChildStream<'_> {
    /// Waits, within the read timeout, until the connection has bytes (or its end) or shutdown
    /// begins. At shutdown it does to the connection what `Shutdown::begin` does in the other
    /// models: for the drain's idle window (`timeouts.drain_idle`) the connection still waits
    /// for a request (answered with `Connection: close`, as every response once shutdown has
    /// begun); then ([`crate::shutdown::Shutdown::close_idle`]) a connection idle between
    /// requests has its read side shut, so the read returns what the client sent before, then
    /// the end of the stream, and the driver closes it (HTTP/2 with GOAWAY); a busy one reads
    /// on. From then on reads wait on the connection alone.
    fn wait_for_bytes(&mut self) -> io::Result<()> {
        let Some(stop) = self.stop.map(|s| s.as_raw_fd()) else {
            return Ok(());
        };
        let fd = self.inner.raw_fd();
        let end = self.read_timeout.map(|t| Instant::now() + t);
        loop {
            let now = Instant::now();
            let left = end.map_or(Duration::MAX, |e| e.saturating_duration_since(now));
            if self.app.shutdown.is_set() {
                let shutdown = &self.app.shutdown;
                let drain_end = *self
                    .drain_end
                    .get_or_insert_with(|| now + shutdown.drain_idle());
                if now >= drain_end {
                    shutdown.close_idle();
                    self.stop = None;
                    return Ok(());
                }
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "read timeout"));
                }
                // The pipe stays readable from here on: the connection alone, until the
                // window ends.
                if !poll_readable_any(&[fd], left.min(drain_end - now))?.is_empty() {
                    return Ok(());
                }
                continue;
            }
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "read timeout"));
            }
            // Nothing ready: the pipe (shutdown), a signal or the timeout, which the loop's
            // next turn tells apart.
            if poll_readable_any(&[fd, stop], left)?.first() == Some(&0) {
                return Ok(());
            }
        }
    }
}

/// The error a connection process's send meets after it handed the rest to the master.
fn handed_over() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the connection went to the master",
    )
}

impl ChildStream<'_> {
    /// Sends what `bufs` hold (`more`: a head, a body follows): as the socket takes it while
    /// the client keeps up; into the [`completion::Deferred`] once a send found no room for
    /// [`completion::STALL`] (and from then on, so the order stays).
    fn send_bytes(&mut self, bufs: &[io::IoSlice<'_>], more: bool) -> io::Result<usize> {
        if self.handed {
            return Err(handed_over());
        }
        let len = weft_sys::socket::iov_len(bufs) as u64;
        if self.deferred.is_some() {
            if self.deferred.as_ref().is_some_and(|d| d.room_for(len)) {
                return self.deferred.as_mut().unwrap().push_bytes(bufs);
            }
            // More than a hand-back holds: the child sends what it has, and goes on.
            self.complete()?;
        }
        let sent = if more {
            self.inner
                .send_more(bufs.first().map_or(&[][..], |b| &b[..]))
        } else {
            self.inner.write_vectored(bufs)
        };
        match sent {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.hand_back.is_some() => {
                let mut d = completion::Deferred::default();
                if !d.room_for(len) {
                    // Too large to hold: this one waits as any send does.
                    self.inner.set_stall(None);
                    let r = if more {
                        self.inner
                            .send_more(bufs.first().map_or(&[][..], |b| &b[..]))
                    } else {
                        self.inner.write_vectored(bufs)
                    };
                    self.inner.set_stall(Some(completion::STALL));
                    return r;
                }
                let n = d.push_bytes(bufs)?;
                self.deferred = Some(d);
                Ok(n)
            }
            r => r,
        }
    }

    /// Sends what was deferred, blocking as any send (the connection is about to be read,
    /// or to become a tunnel, or the hand-back failed).
    fn complete(&mut self) -> io::Result<()> {
        let Some(d) = self.deferred.take() else {
            return Ok(());
        };
        self.inner.set_stall(None);
        let inner = &mut self.inner;
        let sent = d.send_with(|f, off, len| inner.send_file(f, off, len));
        if self.hand_back.is_some() {
            self.inner.set_stall(Some(completion::STALL));
        }
        sent
    }

    /// Hands what was deferred to the master (the connection to be closed after it, or held
    /// idle); true once it is the master's. On failure the child keeps it (and says why).
    fn hand_over(&mut self, then_close: bool) -> bool {
        let (Some(chan), Some(d)) = (self.hand_back, &self.deferred) else {
            return false;
        };
        // At shutdown the child finishes its response itself, within the grace, as before
        // write completion: the master is about to stop.
        if self.app.shutdown.is_set() {
            return false;
        }
        match d.hand_back(chan, sp::pid(), self.inner.raw_fd(), then_close) {
            Ok(()) => {
                self.deferred = None;
                self.handed = true;
                true
            }
            Err(e) => {
                log::warn!("cannot hand a response's rest to the master: {e}");
                false
            }
        }
    }
}

impl Read for ChildStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.handed {
            return Ok(0);
        }
        if self.pos < self.head.len() {
            let n = buf.len().min(self.head.len() - self.pos);
            buf[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.head.len() {
                self.head = Vec::new();
                self.pos = 0;
            }
            return Ok(n);
        }
        // The client may be waiting for the response before it sends more.
        self.complete()?;
        self.wait_for_bytes()?;
        self.inner.read(buf)
    }
}

impl Write for ChildStream<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send_bytes(&[io::IoSlice::new(buf)], false)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.send_bytes(bufs, false)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Transport for ChildStream<'_> {
    fn tunnel_end(&mut self) -> Option<Box<dyn crate::net::End + '_>> {
        // The 101 first, as a tunnel's first bytes.
        self.complete().ok()?;
        Some(Box::new(crate::net::Prefixed {
            pre: &self.head[self.pos..],
            end: self.inner.raw_end(self.stop),
        }))
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        // As the socket's own: zero is taken for a millisecond.
        self.read_timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        self.inner.set_read_timeout(timeout)
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_write_timeout(timeout)
    }

    fn set_send_rate(&mut self, rule: Option<crate::minrate::SendRate>) {
        self.inner.set_send_rate(rule);
    }

    /// Waits for the next request, giving up (to hand the connection back to the master) as
    /// soon as children are scarce, or when the master has exited ([`wait_for_request`]).
    /// Once shutdown has begun the driver's read waits instead, within the drain's idle
    /// window ([`ChildStream::wait_for_bytes`]).
    fn linger(&mut self, period: Duration) -> bool {
        self.gave_back = false;
        if self.pos < self.head.len() {
            return true;
        }
        // The client has not taken the last response: the master sends the rest and holds
        // the connection for the next request; this process is free.
        if self.deferred.is_some() && !self.app.shutdown.is_set() {
            if self.hand_over(false) {
                self.gave_back = true;
                return false;
            }
            if self.complete().is_err() {
                return false;
            }
        }
        let (counts, pressure, shutdown) = (self.counts, self.pressure, &self.app.shutdown);
        // Draining: the driver's read waits for the next request within the drain's idle
        // window ([`ChildStream::wait_for_bytes`]), then closes.
        if shutdown.is_set() {
            return true;
        }
        let gave_back = &mut self.gave_back;
        let mut draining = false;
        let fds = [self.inner.raw_fd(), self.pressure_fd];
        // Counted while it waits, so a master making room waits for this connection too.
        counts.lingering.fetch_add(1, Relaxed);
        let request = wait_for_request(fds, self.master_fd, Instant::now() + period, || {
            if shutdown.is_set() {
                draining = true;
                return true;
            }
            *gave_back = counts.live.load(Relaxed) >= pressure;
            *gave_back
        });
        counts.lingering.fetch_sub(1, Relaxed);
        request || draining
    }

    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            match self.send_bytes(&[io::IoSlice::new(head)], true)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => head = &head[n..],
            }
        }
        Ok(())
    }

    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        if self.handed {
            return Err(handed_over());
        }
        if let Some(d) = &mut self.deferred {
            if d.room_for(0) {
                return d.push_file(file, offset, len);
            }
            self.complete()?;
        }
        match self.inner.send_file(file, offset, len) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.hand_back.is_some() => {
                let sent = crate::net::body_bytes_before(&e);
                let mut d = completion::Deferred::default();
                d.push_file(file, offset + sent, len - sent)
                    .map_err(|e| crate::net::cut(sent, e))?;
                self.deferred = Some(d);
                Ok(())
            }
            r => r,
        }
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        if self.handed {
            return Ok(());
        }
        // A response that closes the connection: the master sends the rest and closes it.
        if self.deferred.is_some() && self.hand_over(true) {
            return Ok(());
        }
        self.complete()?;
        self.inner.shutdown_write()
    }
}

/// SIGTERM and SIGINT set the shutdown flag; nothing else runs in the handler.
fn register_shutdown_signals(app: &App) -> io::Result<()> {
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, app.shutdown.flag())?;
    }
    // SIGUSR2 (upgrade) is the server process's; sent to the whole group (`systemctl kill`
    // without `--kill-whom=main`), its default action would end the master and every
    // connection. A handler that only sets an unread flag survives fork (the children) and
    // is reset by exec (CGI scripts).
    signal_hook::flag::register(
        signal_hook::consts::SIGUSR2,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    )?;
    Ok(())
}

/// Waits for the master in the server's process: sends it SIGTERM once shutdown begins and
/// returns when it has exited (an error if it failed or died before shutdown).
pub(crate) fn watch_master(pid: Pid, app: Arc<App>) -> io::Result<()> {
    // Sleeps until the master exits (its pidfd) or shutdown begins (the interrupt's eventfd);
    // on a kernel without pidfds, or with no descriptor for either, it looks every few ms.
    let exited = sp::pidfd_open(pid).ok();
    let stop = app
        .shutdown
        .interrupt()
        .eventfd()
        .ok()
        .map(|fd| fd.as_raw_fd());
    let mut signalled = false;
    loop {
        if let Some((_, exit)) = sp::try_wait(pid)? {
            return match exit {
                Exit::Code(0) if app.shutdown.is_set() => Ok(()),
                // Stopped gracefully by a signal of its own: one sent to the whole process
                // group (which reaches this process too, a moment later or earlier), or to
                // the master alone. Either way the server stops as asked, not as a failure.
                Exit::Code(0) => {
                    log::info!("the process model's master was told to stop; shutting down");
                    app.shutdown.begin();
                    Ok(())
                }
                other => Err(io::Error::other(format!(
                    "the process model's master exited with {other:?}"
                ))),
            };
        }
        if app.shutdown.is_set() && !signalled {
            sp::kill(pid, SIGTERM)?;
            signalled = true;
        }
        match (&exited, stop) {
            // The eventfd stays readable once shutdown began: left out after the SIGTERM.
            (Some(e), Some(s)) if !signalled => {
                poll_readable_any(&[e.as_raw_fd(), s], Duration::MAX)?;
            }
            (Some(e), _) if signalled => {
                poll_readable_any(&[e.as_raw_fd()], Duration::MAX)?;
            }
            _ => std::thread::sleep(REAP_EVERY * 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    /// A connection pair and a flag pair, none readable yet.
    fn quiet_fds() -> (UnixStream, UnixStream, UnixStream, UnixStream) {
        let (conn, client) = UnixStream::pair().expect("socketpair");
        let (flag, raiser) = UnixStream::pair().expect("socketpair");
        (conn, client, flag, raiser)
    }

    /// A connection (the server's end, the client's) and an app for a [`ChildStream`].
    fn child_parts() -> (TcpStream, TcpStream, App) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(l.local_addr().unwrap()).expect("connect");
        let (server, _) = l.accept().expect("accept");
        let cfg = crate::config::Config {
            root: std::env::temp_dir(),
            ..Default::default()
        };
        (server, client, App::new(cfg, Vec::new()).expect("app"))
    }

    /// A [`ChildStream`] on `server` with `stop` for its [`stop_pipe`].
    fn child_stream<'a>(
        server: TcpStream,
        app: &'a App,
        live: &'a Shared<Counts>,
        flag: &PollFlag,
        stop: &'a UnixStream,
    ) -> ChildStream<'a> {
        ChildStream {
            inner: BlockingStream::new(server),
            head: Vec::new(),
            pos: 0,
            counts: live,
            pressure: 1,
            pressure_fd: flag.raw_fd(),
            master_fd: None,
            app,
            gave_back: false,
            stop: Some(std::os::fd::AsFd::as_fd(stop)),
            read_timeout: None,
            drain_end: None,
            hand_back: None,
            deferred: None,
            handed: false,
        }
    }

    #[test]
    fn a_child_hands_the_rest_of_a_response_to_the_master_when_its_client_falls_behind() {
        use std::io::Read as _;
        let (server, mut client, app) = child_parts();
        let live = Shared::new();
        let flag = PollFlag::new().unwrap();
        let (stop, _stop_w) = UnixStream::pair().unwrap();
        let (master_end, child_end) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.hand_back = Some(child_end.as_raw_fd());
        s.inner.set_stall(Some(completion::STALL));
        // A client that reads nothing: the head and the first chunks fill the socket's
        // buffers, a send then finds no room for STALL and the rest is deferred, in order.
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        s.write_head(head).unwrap();
        let chunk: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        let mut chunks = 0usize;
        while s.deferred.is_none() {
            s.write_all(&chunk).unwrap();
            chunks += 1;
            assert!(chunks < 2_000, "the socket never filled");
        }
        // A few more, all deferred (within what a hand-back holds).
        for _ in 0..4 {
            s.write_all(&chunk).unwrap();
            chunks += 1;
        }
        assert!(s.deferred.is_some() && !s.handed);
        // Between requests the child hands it over and gives the connection back.
        assert!(!s.linger(Duration::from_secs(5)));
        assert!(s.gave_back && s.handed && s.deferred.is_none());
        // From then on it does not touch the connection.
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 0);
        assert_eq!(
            s.write(b"late").unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        // The master's end has one hand-back, for this connection, to be held idle after.
        let back = completion::receive(master_end.as_raw_fd(), &app.cfg.timeouts)
            .unwrap()
            .expect("a hand-back");
        assert_eq!(back.pid, sp::pid());
        assert_eq!(back.conn, s.inner.raw_fd());
        assert!(!back.job.then_close);
        // The master sends the rest; the client gets every byte, in order.
        let fd = s.inner.raw_fd();
        weft_sys::fd::set_nonblocking(&s.inner.raw_end(None).fd, true).unwrap();
        let total = head.len() + chunks * chunk.len();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            while got.len() < total {
                let n = client.read(&mut buf).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        let mut job = back.job;
        while job.step(fd, &app.cfg.timeouts).unwrap() == Sent::Blocked {
            weft_sys::poll::poll_writable(fd, Duration::from_secs(5)).unwrap();
        }
        let got = reader.join().unwrap();
        assert_eq!(&got[..head.len()], head);
        assert!(got[head.len()..]
            .chunks(chunk.len())
            .all(|c| c == &chunk[..]));
    }

    /// A lingering child counts itself while it waits, so a master making room at the
    /// connection limit waits for its connection too ([`Master::reclaim`]), and it gives the
    /// connection back once the master says it is crowded.
    #[test]
    fn a_lingering_child_is_counted_until_it_gives_its_connection_back() {
        let (server, _client, app) = child_parts();
        let counts: Shared<Counts> = Shared::new();
        let mut flag = PollFlag::new().unwrap();
        let (stop, _stop_w) = UnixStream::pair().unwrap();
        let mut s = child_stream(server, &app, &counts, &flag, &stop);
        std::thread::scope(|t| {
            let master = t.spawn(|| {
                let end = Instant::now() + Duration::from_secs(5);
                while counts.lingering.load(Relaxed) == 0 {
                    assert!(
                        Instant::now() < end,
                        "the lingering child was never counted"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                // The master's word when crowded (`Master::crowd`).
                counts.live.store(u64::MAX, Relaxed);
                flag.set(true);
                flag
            });
            assert!(!s.linger(Duration::from_secs(30)));
            assert!(s.gave_back, "the linger ran out instead of giving back");
            drop(master.join().unwrap());
        });
        assert_eq!(counts.lingering.load(Relaxed), 0);
    }

    #[test]
    fn at_shutdown_a_child_sends_the_rest_itself() {
        let (server, _client, app) = child_parts();
        let live = Shared::new();
        let flag = PollFlag::new().unwrap();
        let (stop, _stop_w) = UnixStream::pair().unwrap();
        let (master_end, child_end) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.hand_back = Some(child_end.as_raw_fd());
        s.inner.set_stall(Some(completion::STALL));
        s.set_write_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let chunk = vec![7u8; 64 * 1024];
        while s.deferred.is_none() {
            s.write_all(&chunk).unwrap();
        }
        app.shutdown.flag().store(true, Relaxed);
        // The driver reads on within the drain window; the close sends the rest itself (here
        // into a client that reads nothing: the send timeout), nothing to the master.
        assert!(s.linger(Duration::from_secs(5)));
        let e = s.shutdown_write().unwrap_err();
        assert!(crate::net::timed_out(&e), "{e}");
        assert!(!s.handed && s.deferred.is_none());
        assert!(
            completion::receive(master_end.as_raw_fd(), &app.cfg.timeouts)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_child_without_a_master_channel_sends_everything_itself() {
        let (server, client, app) = child_parts();
        let live = Shared::new();
        let flag = PollFlag::new().unwrap();
        let (stop, _stop_w) = UnixStream::pair().unwrap();
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.set_write_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        // No reader, no channel: the send waits its timeout and fails, nothing deferred.
        let e = s.write_all(&vec![0u8; 32 << 20]).unwrap_err();
        assert!(crate::net::timed_out(&e), "{e}");
        assert!(s.deferred.is_none() && !s.handed);
        drop(client.shutdown(std::net::Shutdown::Both));
    }

    /// The shutdown signal as a connection process's handlers give it: the flag, then a byte
    /// in its [`stop_pipe`].
    fn signal(app: &App, pipe: &mut UnixStream) {
        app.shutdown.flag().store(true, Relaxed);
        pipe.write_all(b"X").unwrap();
    }

    /// What a connection process's reads do once the shutdown signal has come: an idle
    /// connection's read gives what the client sent before, then the end, and a read that
    /// waits is woken to the end at once; a busy connection's reads go on.
    #[test]
    fn a_childs_read_ends_an_idle_connection_at_shutdown_and_a_busy_one_reads_on() {
        let (live, flag) = (Shared::new(), PollFlag::new().unwrap());
        let mut buf = [0u8; 64];
        // Idle, with bytes the client sent before the signal.
        let (server, mut client, app) = child_parts();
        let app = Arc::new(app);
        let (stop, mut pipe) = UnixStream::pair().unwrap();
        let idle = app.shutdown.register(server.as_raw_fd());
        assert!(idle.set_idle(true));
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        client.write_all(b"abc").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        signal(&app, &mut pipe);
        assert_eq!(s.read(&mut buf).unwrap(), 3, "the bytes sent before");
        assert_eq!(s.read(&mut buf).unwrap(), 0, "then the end");
        drop((s, idle));

        // Idle, the signal coming while the read waits.
        let (server, _client, app) = child_parts();
        let app = Arc::new(app);
        let (stop, mut pipe) = UnixStream::pair().unwrap();
        let idle = app.shutdown.register(server.as_raw_fd());
        assert!(idle.set_idle(true));
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let start = Instant::now();
        let signaller = std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                signal(&app, &mut pipe);
            });
            s.read(&mut buf)
        });
        assert_eq!(signaller.unwrap(), 0);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        drop((s, idle));

        // Busy: not shut; a read waits for the client's bytes and times out as usual.
        let (server, mut client, app) = child_parts();
        let app = Arc::new(app);
        let (stop, mut pipe) = UnixStream::pair().unwrap();
        let busy = app.shutdown.register(server.as_raw_fd());
        assert!(busy.set_idle(false));
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        signal(&app, &mut pipe);
        let got = std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                client.write_all(b"more").unwrap();
            });
            s.read(&mut buf)
        });
        assert_eq!(&buf[..got.unwrap()], b"more");
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let e = s.read(&mut buf).unwrap_err();
        assert!(crate::net::timed_out(&e), "{e}");
        drop((s, busy));
    }

    #[test]
    fn a_childs_read_times_out_on_its_own_without_shutdown() {
        let (server, _client, app) = child_parts();
        let (stop, _pipe) = UnixStream::pair().unwrap();
        let (live, flag) = (Shared::new(), PollFlag::new().unwrap());
        let mut s = child_stream(server, &app, &live, &flag, &stop);
        s.head = b"GET".to_vec();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 8];
        // The master's head bytes first, without a wait.
        assert_eq!(s.read(&mut buf).unwrap(), 3);
        let start = Instant::now();
        let e = s.read(&mut buf).unwrap_err();
        assert!(crate::net::timed_out(&e), "{e}");
        assert!(start.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn a_lingering_child_stops_waiting_when_its_master_exits_without_a_signal() {
        let (conn, _client, flag, _raiser) = quiet_fds();
        let mut master = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn a stand-in master");
        let pidfd = sp::pidfd_open(master.id() as Pid).expect("pidfd_open");
        let pid = master.id();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            sp::kill(pid as Pid, SIGKILL).expect("kill the stand-in master");
        });
        let start = Instant::now();
        let fds = [conn.as_raw_fd(), flag.as_raw_fd()];
        // Nothing tells the wait to give up (as when the SIGTERM came before the poll); only
        // the pidfd can end it before its 30 s.
        let got = wait_for_request(
            fds,
            Some(pidfd.as_raw_fd()),
            start + Duration::from_secs(30),
            || false,
        );
        let waited = start.elapsed();
        killer.join().unwrap();
        let _ = master.wait();
        assert!(!got, "a dead master reads as no request");
        assert!(
            waited < Duration::from_secs(10),
            "the wait ran {waited:?} after the master died"
        );
    }

    #[test]
    fn a_request_ends_the_wait_and_a_living_master_does_not() {
        let (conn, mut client, flag, _raiser) = quiet_fds();
        let me = sp::pidfd_open(sp::pid()).expect("pidfd_open");
        let fds = [conn.as_raw_fd(), flag.as_raw_fd()];
        // No request, a living master: the wait lasts until its end.
        let start = Instant::now();
        let end = start + Duration::from_millis(150);
        assert!(!wait_for_request(fds, Some(me.as_raw_fd()), end, || false));
        assert!(
            Instant::now() >= end,
            "ended {:?} early",
            end - Instant::now()
        );
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let start = Instant::now();
        assert!(wait_for_request(
            fds,
            Some(me.as_raw_fd()),
            start + Duration::from_secs(30),
            || false
        ));
        assert!(wait_for_request(
            fds,
            None,
            start + Duration::from_secs(30),
            || false
        ));
    }

    #[test]
    fn the_raised_flag_wakes_the_wait_to_ask_whether_to_give_up() {
        let (conn, _client, flag, mut raiser) = quiet_fds();
        let fds = [conn.as_raw_fd(), flag.as_raw_fd()];
        let asked = std::cell::Cell::new(0);
        let raise = std::thread::spawn(move || {
            // After the first slice, so the flag is in the poll set.
            std::thread::sleep(LINGER_SLICE * 3);
            raiser.write_all(b"!").unwrap();
            raiser
        });
        let start = Instant::now();
        // Gives up on the first question after the flag was raised.
        let got = wait_for_request(fds, None, start + Duration::from_secs(30), || {
            asked.set(asked.get() + 1);
            asked.get() > 2
        });
        let _raiser = raise.join().unwrap();
        assert!(!got);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited {:?}",
            start.elapsed()
        );
        // Asked before the slice, before the wait with the flag, and once the flag woke it.
        assert_eq!(asked.get(), 3);
    }
}
