//! The `process` model (the threads-vs-processes paper): one forked child per accepted
//! connection, which serves that connection's keep-alive loop with the same `conn::serve` as
//! every other model and exits. The parent only accepts, forks and reaps.
//!
//! fork is safe only from a single-threaded process, so the process listeners of a server are
//! run by a master process forked when the server is built, before any thread exists
//! ([`start_master`]); the server's own process goes on to run its other models' threads.
//!
//! What a child inherits, and what is done about it:
//! - every listening socket: closed at once in the child (a child must not keep a port
//!   accepting after the master has gone); sockets of other models are closed in the master;
//! - the counters: listener counters and cache hit/miss/eviction counters live in shared
//!   memory (`sys_process::Shared`), so every child adds to the same numbers and the status
//!   page shows the model's totals; open connections are counted by the master (one per live
//!   child);
//! - the response cache: empty at fork, private to the child, gone at exit (a child serves one
//!   connection, so only that connection's repeated requests hit it; sharing one would need
//!   shared-memory allocation and cross-process locking, which the paper's forked server
//!   does not have either);
//! - the access log: the buffer is empty at fork; the child flushes it once a second and
//!   before it exits (appends of whole lines to the same file);
//! - signals: SIGTERM/SIGINT set the shutdown flag (master and child alike); the master sends
//!   SIGTERM to its children and waits for them within `timeouts.shutdown_grace`, then kills
//!   the rest. Each child asks for SIGTERM when the master dies, the master when the server's
//!   process dies, so a killed server leaves no orphans.
//!
//! A limit on live children (`process.max_children`, and `limits.max_connections`); every
//! child is reaped (`waitpid` after each accept and every poll interval), so none is left a
//! zombie for longer than [`ACCEPT_POLL`].

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AcceptGate, ACCEPT_BACKOFF, ACCEPT_POLL};
use crate::app::{App, LiveApp};
use crate::conn::{self, ConnInfo};
use crate::metrics::ListenerMetrics;
use crate::net::BlockingStream;
use crate::sys_process::{self as sp, Exit, Forked, Pid};

/// How often the master looks for exited children while it waits at shutdown.
const REAP_EVERY: Duration = Duration::from_millis(10);
/// Answer to a client whose child could not be forked.
const UNAVAILABLE: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

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
            let code = match sp::die_with_parent(libc::SIGTERM, server) {
                Ok(true) => {
                    for &fd in close_in_master {
                        sp::close_inherited(fd);
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

/// A live child and the listener it counts against.
struct Child {
    lm: Arc<ListenerMetrics>,
}

fn master(listeners: Vec<(TcpListener, Arc<ListenerMetrics>)>, live: &LiveApp) -> io::Result<()> {
    let mut app = live.current();
    register_shutdown_signals(&app)?;
    // SIGHUP (forwarded by the server process): re-read the configuration between accepts;
    // children forked afterwards serve with it.
    let hup = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(libc::SIGHUP, hup.clone())?;
    for (l, _) in &listeners {
        l.set_nonblocking(true)?;
    }
    let fds: Vec<RawFd> = listeners.iter().map(|(l, _)| l.as_raw_fd()).collect();
    let max_children = app
        .cfg
        .process
        .max_children
        .min(app.cfg.limits.max_connections)
        .max(1);
    let mut gate = AcceptGate::new(app.cfg.limits.max_connections);
    let mut children: HashMap<Pid, Child> = HashMap::new();
    while !app.shutdown.is_set() {
        if hup.swap(false, Relaxed) {
            match live.reload() {
                Ok(()) => log::info!("process model master: configuration reloaded"),
                Err(e) => log::error!("process model master: reload failed, kept: {e}"),
            }
            app = live.current();
        }
        reap(&mut children, false);
        if children.len() >= max_children {
            let which = if max_children == app.cfg.process.max_children {
                "process.max_children"
            } else {
                "limits.max_connections"
            };
            gate.warn(|| {
                format!("{max_children} connection processes live ({which}); not accepting")
            });
            std::thread::sleep(REAP_EVERY);
            continue;
        }
        let ready = sp::poll_readable_any(&fds, ACCEPT_POLL)?;
        for i in ready {
            let (listener, lm) = &listeners[i];
            if gate.at_capacity(lm) || children.len() >= max_children {
                continue;
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    if let Some(pid) = fork_child(stream, peer, lm, &app, &fds, &mut gate) {
                        lm.accepted.fetch_add(1, Relaxed);
                        lm.open.fetch_add(1, Relaxed);
                        children.insert(pid, Child { lm: lm.clone() });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    if gate.failed(lm, &e) {
                        std::thread::sleep(ACCEPT_BACKOFF);
                    }
                }
            }
        }
    }
    // Stop accepting: the kernel refuses new connections once the sockets are closed.
    drop(listeners);
    stop_children(&mut children, app.cfg.timeouts.shutdown_grace);
    Ok(())
}

/// Forks a child for one accepted connection; in the parent returns its pid (or `None`, with
/// the client told 503, if fork failed). The child never returns.
fn fork_child(
    stream: std::net::TcpStream,
    peer: std::net::SocketAddr,
    lm: &Arc<ListenerMetrics>,
    app: &Arc<App>,
    listener_fds: &[RawFd],
    gate: &mut AcceptGate,
) -> Option<Pid> {
    let master = sp::pid();
    // Taken before the fork, so the `accept` phase includes it (the CGI paper's question).
    let accepted = app.cfg.timing.on().then(std::time::Instant::now);
    match sp::fork() {
        Ok(Forked::Parent(pid)) => Some(pid),
        Ok(Forked::Child) => {
            for &fd in listener_fds {
                sp::close_inherited(fd);
            }
            // A child whose master is gone must not serve on: it gets SIGTERM (graceful).
            if !matches!(sp::die_with_parent(libc::SIGTERM, master), Ok(true)) {
                sp::exit_now(0);
            }
            serve_child(stream, peer, lm, app, accepted);
            sp::exit_now(0)
        }
        Err(e) => {
            gate.warn(|| format!("{}: cannot fork a connection process: {e}", lm.addr));
            let mut s = stream;
            let _ = s.set_nonblocking(true);
            let _ = s.write(UNAVAILABLE);
            lm.response(503, UNAVAILABLE.len() as u64);
            std::thread::sleep(ACCEPT_BACKOFF);
            None
        }
    }
}

/// The child: serves the connection's keep-alive loop, then flushes its log.
fn serve_child(
    stream: std::net::TcpStream,
    peer: std::net::SocketAddr,
    lm: &Arc<ListenerMetrics>,
    app: &Arc<App>,
    accepted: Option<std::time::Instant>,
) {
    app.enter_connection_process();
    if let Some(l) = &app.access_log {
        if let Err(e) = l.start_flusher() {
            log::warn!("access log flusher: {e}");
        }
    }
    let _ = stream.set_nonblocking(false);
    let local = super::local_addr(lm, || stream.local_addr());
    let mut stream = BlockingStream::new(stream);
    let info = ConnInfo {
        peer,
        local,
        listener: lm.clone(),
        registration: Some(app.shutdown.register(stream.raw_fd())),
        accepted,
        proxied: Default::default(),
    };
    if let Err(e) = conn::serve(&mut stream, app, &info) {
        log::debug!("{peer}: connection ended: {e}");
    }
    drop(info);
    drop(stream);
    if let Some(l) = &app.access_log {
        l.flush();
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

/// Reaps exited children; `quiet`: at shutdown, where signal deaths are expected.
fn reap(children: &mut HashMap<Pid, Child>, quiet: bool) {
    loop {
        match sp::try_wait(-1) {
            Ok(Some((pid, exit))) => {
                if let Some(c) = children.remove(&pid) {
                    c.lm.open.fetch_sub(1, Relaxed);
                }
                match exit {
                    Exit::Code(0) => {}
                    Exit::Signal(libc::SIGKILL | libc::SIGTERM) if quiet => {}
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

/// SIGTERM to every child, then waits up to `grace` for them; kills and reaps the rest.
fn stop_children(children: &mut HashMap<Pid, Child>, grace: Duration) {
    for &pid in children.keys() {
        let _ = sp::kill(pid, libc::SIGTERM);
    }
    let end = Instant::now() + grace;
    while !children.is_empty() && Instant::now() < end {
        reap(children, true);
        if !children.is_empty() {
            std::thread::sleep(REAP_EVERY);
        }
    }
    if !children.is_empty() {
        log::warn!(
            "{} connection processes still running after the {grace:?} grace period; killing them",
            children.len()
        );
        for (&pid, c) in children.iter() {
            let _ = sp::kill(pid, libc::SIGKILL);
            let _ = sp::wait(pid);
            c.lm.open.fetch_sub(1, Relaxed);
        }
        children.clear();
    }
}

/// Waits for the master in the server's process: sends it SIGTERM once shutdown begins and
/// returns when it has exited (an error if it failed or died before shutdown).
pub(crate) fn watch_master(pid: Pid, app: Arc<App>) -> io::Result<()> {
    let mut signalled = false;
    loop {
        if let Some((_, exit)) = sp::try_wait(pid)? {
            return match exit {
                Exit::Code(0) if app.shutdown.is_set() => Ok(()),
                other => Err(io::Error::other(format!(
                    "the process model's master exited with {other:?}"
                ))),
            };
        }
        if app.shutdown.is_set() && !signalled {
            sp::kill(pid, libc::SIGTERM)?;
            signalled = true;
        }
        std::thread::sleep(REAP_EVERY * 2);
    }
}
