//! The embeddable server: build an application from a config and routes, bind its listeners,
//! run each listener's model, and shut down gracefully.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};
use weft_sys::process::Pid;

use crate::activation::UpgradeError;
use crate::activation::{self, Activation, Upgrader};
use crate::app::{App, LiveApp, ReloadError, ReloadFn, Route};
use crate::body::RequestBody;
use crate::config::{Config, ConfigError, Listen, Model};
use crate::metrics::ListenerMetrics;
use crate::models;
use crate::{Request, Response};

/// Builds a [`Server`].
#[derive(Default)]
pub struct ServerBuilder {
    cfg: Config,
    routes: Vec<Route>,
    listen: Vec<(SocketAddr, Option<Model>)>,
    model: Option<Model>,
    reload: Option<ReloadFn>,
    activation: Activation,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("cfg", &self.cfg)
            .field("routes", &self.routes)
            .field("listen", &self.listen)
            .field("model", &self.model)
            .field("reloadable", &self.reload.is_some())
            .field("activation", &self.activation)
            .finish()
    }
}

impl ServerBuilder {
    /// Uses `cfg` for everything not set on the builder.
    pub fn config(mut self, cfg: Config) -> Self {
        self.cfg = cfg;
        self
    }

    /// Serves static files from `root`.
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.cfg.root = root.into();
        self
    }

    /// Mounts `handler` for `method` (`"*"`: any method) at exactly `path`. Routes are tried in
    /// the order added, after the health check (`[health] path`) and before the built-in echo
    /// and status handlers and the static files.
    pub fn route<F>(mut self, method: &str, path: &str, handler: F) -> Self
    where
        F: Fn(&Request, &mut RequestBody<'_>) -> Response + Send + Sync + 'static,
    {
        let method = (method != "*").then(|| method.to_string());
        self.routes.push(Route {
            method,
            path: path.into(),
            prefix: false,
            handler: Arc::new(handler),
        });
        self
    }

    /// Mounts `handler` for `method` (`"*"`: any) at every path starting with `prefix`.
    pub fn route_prefix<F>(mut self, method: &str, prefix: &str, handler: F) -> Self
    where
        F: Fn(&Request, &mut RequestBody<'_>) -> Response + Send + Sync + 'static,
    {
        let method = (method != "*").then(|| method.to_string());
        self.routes.push(Route {
            method,
            path: prefix.into(),
            prefix: true,
            handler: Arc::new(handler),
        });
        self
    }

    /// Listens on `addr` with `model`.
    pub fn listen(mut self, addr: SocketAddr, model: Model) -> Self {
        self.listen.push((addr, Some(model)));
        self
    }

    /// Listens on `addr` with the builder's model ([`ServerBuilder::model`], else the default).
    pub fn listen_addr(mut self, addr: SocketAddr) -> Self {
        self.listen.push((addr, None));
        self
    }

    /// The model of listeners added without one.
    pub fn model(mut self, model: Model) -> Self {
        self.model = Some(model);
        self
    }

    /// How to re-read the configuration when the server is told to reload (SIGHUP, or
    /// [`ShutdownHandle::reload`]): new connections get the new settings, open ones keep theirs.
    /// Its errors may be a [`ConfigError`] or text (`String` converts into one).
    pub fn reload_with<F, E>(mut self, read: F) -> Self
    where
        F: Fn() -> Result<Config, E> + Send + Sync + 'static,
        E: Into<ConfigError>,
    {
        self.reload = Some(Box::new(move || read().map_err(Into::into)));
        self
    }

    /// Listening sockets handed over (systemd's socket activation, or the previous process
    /// of an upgrade; see [`Activation::from_env`]): a listener takes those named as it is or
    /// bound to its address instead of binding its own.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// Builds the application and binds every listener.
    pub fn build(self) -> io::Result<Server> {
        let mut activation = self.activation;
        let mut cfg = self.cfg;
        if !self.listen.is_empty() {
            let default = self.model.unwrap_or(Model::DEFAULT);
            cfg.listen = self
                .listen
                .iter()
                .map(|&(addr, m)| Listen {
                    addr,
                    model: m.unwrap_or(default),
                    name: None,
                    proxy_protocol: false,
                    tls: false,
                    redirect_https: false,
                    http2: true,
                    h2c: false,
                    backlog: crate::config::default_backlog(),
                    conn_per_ip: None,
                    congestion: None,
                })
                .collect();
        } else if let Some(m) = self.model {
            for l in &mut cfg.listen {
                l.model = m;
            }
        }
        let listens = cfg.listeners();
        crate::config::listen_conflicts(&listens)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if listens.iter().any(|l| l.model == Model::Pipeline) {
            cfg.pipeline
                .validate()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        let workers = cfg.threads.unwrap_or_else(default_workers).max(1);
        let app = App::new(cfg, self.routes)?.into_shared();
        let mut bound = Vec::new();
        for l in listens {
            // The fiber model gives each worker its own SO_REUSEPORT socket on the same port.
            let per_worker = app.cfg.fiber.accept == crate::config::AcceptMode::Reuseport;
            let sockets = if l.model == Model::Fiber && per_worker {
                workers
            } else {
                1
            };
            let handed = activation.take_for(&l);
            let listeners = if handed.is_empty() {
                bind(l.addr, sockets, l.backlog).map_err(|e| {
                    let why = match unclaimed_hint(&activation.listeners, &l, &e) {
                        Some(hint) => format!("address in use: {hint}"),
                        None => e.to_string(),
                    };
                    io::Error::new(e.kind(), format!("cannot listen on {}: {why}", l.addr))
                })?
            } else {
                adopt(handed, sockets, &l)?
            };
            if let Some(cc) = &l.congestion {
                set_congestion(&listeners, cc).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot listen on {}: {e}", l.addr))
                })?;
            }
            let addr = listeners[0].local_addr()?;
            let metrics = app.metrics.add_listener(addr, l.model);
            metrics.set_proxy_protocol(l.proxy_protocol);
            metrics.set_conn_per_ip(l.conn_per_ip, bound.len());
            metrics.set_tls(l.tls, l.redirect_https);
            metrics.set_http2(l.http2, l.h2c);
            if l.tls {
                crate::conn::note_https_port(addr.port());
            }
            bound.push(Bound {
                listeners,
                addr,
                model: l.model,
                metrics,
            });
        }
        for s in activation.listeners.drain(..) {
            log::warn!(
                "socket {} ({}) was handed over but no listener is configured for it; closed",
                s.addr,
                s.name
            );
        }
        // Copies of every socket for an upgrade, taken before the process model's master takes
        // its own (the master closes these copies: it must not hold the others' sockets).
        let mut copies = Vec::new();
        for b in &bound {
            for l in &b.listeners {
                let name = listens_name(&app.cfg.listeners(), b.addr);
                copies.push((std::os::fd::OwnedFd::from(l.try_clone()?), name));
            }
        }
        let copy_fds: Vec<std::os::fd::RawFd> = copies
            .iter()
            .map(|(f, _)| std::os::fd::AsRawFd::as_raw_fd(f))
            .collect();
        let upgrader = Arc::new(Upgrader::new(copies)?);
        // Every listener is bound or taken over and the application (its access log, CGI
        // directory, document root) is open: from here on the server runs as `user`, the
        // process master and everything it forks included. Keys and certificates must be read
        // before this point.
        crate::acme::prepare(&app.cfg)?;
        crate::privdrop::drop_privileges(&app.cfg)?;
        let live = Arc::new(LiveApp::new(app, self.reload));
        let master = start_process_master(&live, &mut bound, &copy_fds)?;
        if let Some(pid) = master {
            live.current().metrics.set_master(pid as u32);
        }
        Ok(Server {
            live,
            bound,
            master,
            activation,
            upgrader,
        })
    }
}

/// Forks the `process` model's master for the process listeners (now, while the process has
/// one thread: building a server must come before starting threads when it has a process
/// listener). The master takes those sockets; this process keeps them only for their
/// addresses, and `copies` (of every listener, for an upgrade), which the master closes.
/// Returns the master's pid.
fn start_process_master(
    live: &Arc<LiveApp>,
    bound: &mut [Bound],
    copies: &[std::os::fd::RawFd],
) -> io::Result<Option<Pid>> {
    use std::os::fd::AsRawFd;
    if !bound.iter().any(|b| b.model == Model::Process) {
        return Ok(None);
    }
    let mut process = Vec::new();
    let mut others = copies.to_vec();
    for b in bound.iter_mut() {
        if b.model == Model::Process {
            for l in std::mem::take(&mut b.listeners) {
                process.push((l, b.metrics.clone()));
            }
        } else {
            others.extend(b.listeners.iter().map(|l| l.as_raw_fd()));
        }
    }
    let pid = models::process::start_master(process, live.clone(), &others).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot start the process model: {e} (build the server before starting threads)"
            ),
        )
    })?;
    Ok(Some(pid))
}

/// One core's worth of workers by default.
fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Uses handed-over sockets for `l`, which wants `count` (the fiber model's one per worker): too
/// few are shared (copies of the same socket, so every worker accepts), too many are all kept
/// by the fiber model (each socket has its own queue; a closed one would reset the
/// connections waiting in it) and by the other models beyond the first closed with a warning.
fn adopt(mut handed: Vec<TcpListener>, count: usize, l: &Listen) -> io::Result<Vec<TcpListener>> {
    log::info!(
        "{}: serving on {} handed-over socket(s)",
        l.addr,
        handed.len()
    );
    if l.model == Model::Fiber {
        let mut i = 0;
        while handed.len() < count {
            let copy = handed[i].try_clone()?;
            handed.push(copy);
            i += 1;
        }
    } else if handed.len() > 1 {
        log::warn!(
            "{}: {} sockets handed over, the {} model uses one; closing the others",
            l.addr,
            handed.len(),
            l.model
        );
        handed.truncate(1);
    }
    Ok(handed)
}

/// Where binding `l` failed because a socket handed over (systemd's socket activation) holds
/// its port without matching it, says so and how to match it: the usual mistake is a unit's
/// `ListenStream` and the config's `[[listen]] addr` that differ (`127.0.0.1:8080` and
/// `0.0.0.0:8080`), which would otherwise read as another process on the port.
fn unclaimed_hint(handed: &[activation::Inherited], l: &Listen, e: &io::Error) -> Option<String> {
    if e.kind() != io::ErrorKind::AddrInUse {
        return None;
    }
    let s = handed.iter().find(|s| s.addr.port() == l.addr.port())?;
    Some(format!(
        "it is the socket handed over on {} (FileDescriptorName={}), which no [[listen]] \
         claims: give this listener addr = \"{}\" or name = \"{}\"",
        s.addr, s.name, s.addr, s.name
    ))
}

/// The name a socket bound to `addr` is handed over with: its listener's `name`, else
/// systemd's word for none.
fn listens_name(listens: &[Listen], addr: SocketAddr) -> String {
    listens
        .iter()
        .find(|l| l.addr == addr)
        .and_then(|l| l.name.clone())
        .unwrap_or_else(|| activation::UNNAMED.into())
}

/// Sets the congestion control `name` on listening sockets (`[[listen]] congestion`): the
/// connections they accept inherit it.
fn set_congestion(listeners: &[TcpListener], name: &str) -> io::Result<()> {
    listeners
        .iter()
        .try_for_each(|l| congestion_on(socket2::SockRef::from(l), name))
}

/// Whether this kernel gives this user the congestion control `name` (`weft check`): tried
/// on a socket that is never bound.
pub(crate) fn congestion_available(name: &str) -> io::Result<()> {
    let probe = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    congestion_on(socket2::SockRef::from(&probe), name)
}

/// `TCP_CONGESTION` = `name` on `sock`; a name the kernel does not have, or may not give this
/// user, fails saying which setting to look at.
fn congestion_on(sock: socket2::SockRef<'_>, name: &str) -> io::Result<()> {
    sock.set_tcp_congestion(name.as_bytes()).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(weft_sys::errno::ENOENT) => {
                "not available on this kernel (net.ipv4.tcp_available_congestion_control)"
            }
            Some(weft_sys::errno::EPERM) => {
                "not allowed for this user (net.ipv4.tcp_allowed_congestion_control)"
            }
            _ => "refused",
        };
        io::Error::new(e.kind(), format!("congestion = {name:?}: {why}: {e}"))
    })
}

/// Binds `count` sockets to `addr` with a queue of `backlog` (with `SO_REUSEPORT` when more
/// than one; port 0 resolves once and the others join that port).
///
/// A port another process listens on is refused with `AddrInUse` whatever `count` is. One
/// socket without `SO_REUSEPORT` gets that from the kernel; a `SO_REUSEPORT` group would not,
/// since Linux lets any process of the same user join it (two servers would silently share
/// the port), so the port is probed first with a plain bind ([`probe_port`]). The probe, not
/// one socket shared by all workers, because per-worker sockets are what the fiber model's
/// accept path is measured with (BENCHMARKS.md, `fiber.accept`); what is left is a window of
/// microseconds in which two servers started at the same instant could both pass the probe.
fn bind(addr: SocketAddr, count: usize, backlog: u32) -> io::Result<Vec<TcpListener>> {
    if count > 1 && addr.port() != 0 {
        probe_port(addr)?;
    }
    let mut out: Vec<TcpListener> = Vec::with_capacity(count);
    for _ in 0..count {
        let at = out.first().map_or(Ok(addr), |l| l.local_addr())?;
        let socket = Socket::new(Domain::for_address(at), Type::STREAM, None)?;
        socket.set_reuse_address(true)?;
        if count > 1 {
            socket.set_reuse_port(true)?;
        }
        if at.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        // Accepted connections inherit TCP_NODELAY from the listener (Linux copies it), which
        // saves a setsockopt per connection: responses go out without Nagle's wait.
        socket.set_tcp_nodelay(true)?;
        socket.bind(&at.into()).map_err(in_use_message)?;
        socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
        out.push(socket.into());
    }
    Ok(out)
}

/// Fails with `AddrInUse` if a socket listens on `addr` (or on the wildcard address of its
/// port): a plain bind, with `SO_REUSEADDR` so that connections in TIME_WAIT from an earlier
/// run do not count, conflicts with any listening socket, `SO_REUSEPORT` or not. The socket is
/// closed again at once, never listened on. `weft check` uses it too.
pub(crate) fn probe_port(addr: SocketAddr) -> io::Result<()> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into()).map_err(in_use_message)
}

/// Says what `EADDRINUSE` means here (the OS text is "Address already in use").
fn in_use_message(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::AddrInUse {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            "address in use (another process listens on this port)",
        )
    } else {
        e
    }
}

#[derive(Debug)]
struct Bound {
    listeners: Vec<TcpListener>,
    addr: SocketAddr,
    model: Model,
    metrics: Arc<ListenerMetrics>,
}

/// An accept loop to wait for at shutdown.
enum Acceptor {
    /// A thread: the thread model's accept loop, or the watcher of the process model's master.
    Thread(std::thread::JoinHandle<io::Result<()>>),
    Fiber(weft_fiber::JoinHandle<io::Result<()>>),
}

/// A server with its listeners bound, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    live: Arc<LiveApp>,
    bound: Vec<Bound>,
    /// The `process` model's master (forked in `build`).
    master: Option<Pid>,
    /// Told once the listeners serve (the upgrade's ready pipe, systemd).
    activation: Activation,
    upgrader: Arc<Upgrader>,
}

/// Stops or reloads a running server from another thread (or a signal handler thread).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    live: Arc<LiveApp>,
    master: Option<Pid>,
    upgrader: Arc<Upgrader>,
}

impl ShutdownHandle {
    /// Stops accepting, lets in-flight requests finish, closes idle connections.
    pub fn shutdown(&self) {
        self.upgrader.close();
        self.live.current().shutdown.begin();
    }

    /// Zero-downtime upgrade: starts the program on disk with this process's arguments and
    /// listening sockets, waits for it to report ready, then drains this server (as
    /// [`ShutdownHandle::shutdown`]) and returns the new process's pid. On failure this server
    /// serves on and the error says why. Blocks up to [`activation::UPGRADE_READY_TIMEOUT`].
    pub fn upgrade(&self) -> Result<Pid, UpgradeError> {
        let pid = self.upgrader.start(activation::UPGRADE_READY_TIMEOUT)?;
        // systemd follows the new process as the service's main one.
        activation::notify(&[sd_notify::NotifyState::MainPid(pid as u32)]);
        // Logged before the drain begins: once it has, this process may finish and exit
        // before a line written after it (a caller's) reaches the log.
        log::info!("upgraded: process {pid} serves; draining");
        self.shutdown();
        Ok(pid)
    }

    /// Re-reads the configuration (see [`ServerBuilder::reload_with`]); new connections get
    /// it, open ones keep theirs. The `process` model's master is told to reload too.
    pub fn reload(&self) -> Result<(), ReloadError> {
        if let Some(pid) = self.master {
            // The master is our child, not reaped while the server runs.
            let _ = weft_sys::process::kill(pid, weft_sys::signal::SIGHUP);
        }
        self.live.reload()?;
        // The new generation's health checks run here, where the first one's did.
        self.live.current().start_checks();
        Ok(())
    }

    /// Opens the access log file again at its configured path (after logrotate renamed it);
    /// the `process` model's master is told to as well, for the connections it forks next.
    pub fn reopen_logs(&self) -> io::Result<()> {
        if let Some(pid) = self.master {
            // The master is our child, not reaped while the server runs.
            let _ = weft_sys::process::kill(pid, weft_sys::signal::SIGUSR1);
        }
        match &self.live.current().access_log {
            Some(l) => l.reopen(),
            None => Ok(()),
        }
    }
}

impl Server {
    /// A builder with the default configuration.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The bound addresses (with port 0 resolved) and their models.
    pub fn local_addrs(&self) -> Vec<(SocketAddr, Model)> {
        self.bound.iter().map(|b| (b.addr, b.model)).collect()
    }

    /// True if the listener bound to `addr` serves HTTPS.
    pub fn is_tls(&self, addr: SocketAddr) -> bool {
        self.bound.iter().any(|b| b.addr == addr && b.metrics.tls())
    }

    /// The application new connections get now (config, metrics).
    pub fn app(&self) -> Arc<App> {
        self.live.current()
    }

    /// A handle that stops or reloads the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            live: self.live.clone(),
            master: self.master,
            upgrader: self.upgrader.clone(),
        }
    }

    /// Serves until shutdown, then waits up to the grace period for open connections.
    pub fn run(self) -> io::Result<()> {
        let app = self.live.current();
        let needs_fibers = self.bound.iter().any(|b| b.model == Model::Fiber);
        let runtime = if needs_fibers {
            let workers = app.cfg.threads.unwrap_or_else(default_workers).max(1);
            Some(
                weft_fiber::Runtime::builder()
                    .workers(workers)
                    .stack_size(crate::models::fiber::fiber_stack(
                        app.cfg.fiber.stack_size,
                        self.bound
                            .iter()
                            .any(|b| b.model == Model::Fiber && b.metrics.tls())
                            // A TLS client's handshake (an https:// upstream) needs it too.
                            || app.cfg.proxies_to_https(),
                    ))
                    // Each response's Date comes from a clock read once per scheduling round.
                    .on_round(weft_http::date::new_round)
                    .max_lingering(app.cfg.fiber.linger_max)
                    .name("weft-fiber")
                    .build()?,
            )
        } else {
            None
        };
        if let Some(l) = &app.access_log {
            l.start_flusher()?;
        }
        app.start_checks();
        crate::keeper::start(self.live.clone(), self.master)?;
        if app.cfg.status.enabled {
            let fiber = runtime.as_ref().map(|rt| rt.handle().clone());
            app.metrics.start_sampler(fiber, app.shutdown.clone())?;
        }
        let mut acceptors = Vec::new();
        let mut activation = self.activation;
        if let Some(pid) = self.master {
            let app = app.clone();
            let t = std::thread::Builder::new()
                .name("weft-process-master".into())
                .spawn(move || models::process::watch_master(pid, app))?;
            acceptors.push(Acceptor::Thread(t));
        }
        for b in self.bound {
            match b.model {
                // Served by the master process.
                Model::Process => {}
                Model::Pipeline => {
                    let live = self.live.clone();
                    let listener = b.listeners.into_iter().next().expect("one socket");
                    let t = std::thread::Builder::new()
                        .name(format!("weft-pipeline-{}", b.addr))
                        .spawn(move || models::pipeline::run(listener, live, b.metrics))?;
                    acceptors.push(Acceptor::Thread(t));
                }
                Model::Thread => {
                    let live = self.live.clone();
                    let listener = b.listeners.into_iter().next().expect("one socket");
                    let t = std::thread::Builder::new()
                        .name(format!("weft-accept-{}", b.addr))
                        .spawn(move || models::thread::run(listener, live, b.metrics))?;
                    acceptors.push(Acceptor::Thread(t));
                }
                Model::Fiber => {
                    let rt = runtime.as_ref().expect("runtime built for fiber listeners");
                    for (worker, listener) in b.listeners.into_iter().enumerate() {
                        let live = self.live.clone();
                        let m = b.metrics.clone();
                        let handle = rt.handle().clone();
                        // Handed-over sockets may outnumber the workers.
                        let worker = worker % rt.handle().workers();
                        acceptors.push(Acceptor::Fiber(rt.spawn_on(worker, move || {
                            models::fiber::accept_loop(listener, live, m, handle)
                        })));
                    }
                }
            }
        }
        // Every listener is bound and its acceptor started: connections are served from here on.
        activation.ready();
        let mut result = Ok(());
        for a in acceptors {
            let outcome = match a {
                Acceptor::Thread(t) => t.join().map_err(|_| ()),
                Acceptor::Fiber(f) => f.join().map_err(|_| ()),
            };
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    log::error!("listener failed: {e}");
                    app.shutdown.begin();
                    result = Err(e);
                }
                Err(()) => {
                    app.shutdown.begin();
                    result = Err(io::Error::other("an acceptor panicked"));
                }
            }
        }
        // Nothing accepts any more, whatever ended the acceptors: connections to the port are
        // refused from here on rather than queued on the copies kept for an upgrade.
        self.upgrader.close();
        let grace = self.live.current().cfg.timeouts.shutdown_grace;
        let end = Instant::now() + grace;
        while app.metrics.open_connections() > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let left = app.metrics.open_connections();
        if left > 0 {
            log::warn!("{left} connections still open after the {grace:?} grace period; exiting");
        }
        if let Some(l) = &app.access_log {
            l.flush();
        }
        if let Some(rt) = runtime {
            rt.shutdown();
        }
        result
    }
}

/// Starts a thread that begins graceful shutdown on SIGINT or SIGTERM, reloads the
/// configuration on SIGHUP, reopens the access log on SIGUSR1 (nginx's signals) and upgrades to
/// the binary on disk on SIGUSR2 (each told to systemd when it supervises the server).
pub fn shutdown_on_signals(handle: ShutdownHandle) -> io::Result<()> {
    use sd_notify::NotifyState;
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2])?;
    // Set once an upgrade handed the service over: this process then drains without telling
    // systemd it stops (the new main process serves on).
    let handed_over = Arc::new(AtomicBool::new(false));
    std::thread::Builder::new()
        .name("weft-signals".into())
        .spawn(move || {
            let mut stopping = false;
            for sig in signals.forever() {
                match sig {
                    SIGUSR1 => match handle.reopen_logs() {
                        Ok(()) => log::info!("signal {sig}: access log reopened"),
                        Err(e) => log::error!(
                            "signal {sig}: cannot reopen the access log, still writing the old \
                             file: {e}"
                        ),
                    },
                    // After a handover the new process is the one systemd follows and reloads.
                    SIGHUP if !stopping && !handed_over.load(SeqCst) => {
                        let mut state = vec![NotifyState::Reloading];
                        // systemd's Type=notify-reload wants the time the reload started.
                        state.extend(NotifyState::monotonic_usec_now().ok());
                        activation::notify(&state);
                        match handle.reload() {
                            Ok(()) => log::info!("signal {sig}: configuration reloaded"),
                            Err(e) => {
                                log::error!("signal {sig}: reload failed, configuration kept: {e}")
                            }
                        }
                        activation::notify(&[NotifyState::Ready]);
                    }
                    SIGHUP => {}
                    SIGUSR2 if !stopping => {
                        // The wait for the new process must not hold up SIGTERM.
                        let (handle, handed_over) = (handle.clone(), handed_over.clone());
                        let spawned = std::thread::Builder::new()
                            .name("weft-upgrade".into())
                            .spawn(move || match handle.upgrade() {
                                // `upgrade` logged it before the drain began.
                                Ok(_) => handed_over.store(true, SeqCst),
                                Err(e) => log::error!(
                                    "signal {sig}: upgrade failed, this process serves on: {e}"
                                ),
                            });
                        if let Err(e) = spawned {
                            log::error!("signal {sig}: upgrade failed: {e}");
                        }
                    }
                    SIGUSR2 => {}
                    _ if !stopping => {
                        log::info!("signal {sig}: shutting down (a second signal exits at once)");
                        stopping = true;
                        if !handed_over.load(SeqCst) {
                            activation::notify(&[NotifyState::Stopping]);
                        }
                        handle.shutdown();
                    }
                    _ => {
                        log::warn!(
                            "signal {sig} again: exiting without waiting for open connections"
                        );
                        std::process::exit(1);
                    }
                }
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_connections_inherit_the_listeners_congestion_control() {
        let listeners = bind("127.0.0.1:0".parse().unwrap(), 1, 16).unwrap();
        set_congestion(&listeners, "reno").unwrap();
        let addr = listeners[0].local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let (accepted, _) = listeners[0].accept().unwrap();
        let cc = socket2::SockRef::from(&accepted).tcp_congestion().unwrap();
        assert_eq!(String::from_utf8_lossy(&cc).trim_end_matches('\0'), "reno");
        let e = set_congestion(&listeners, "no-such-algorithm").unwrap_err();
        assert!(
            e.to_string().contains("not available on this kernel"),
            "{e}"
        );
    }
}
