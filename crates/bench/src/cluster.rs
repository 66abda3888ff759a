//! `weft-bench experiment cluster`: three weft instances behind HAProxy, under open-loop
//! load, through the events of a deployment's life: a drain (SIGTERM), a rolling
//! zero-downtime upgrade (SIGUSR2 of each instance in turn), a crash (SIGKILL) and restarts.
//!
//! Hosts are network namespaces ([`crate::netns`]): one per weft instance and one for the
//! client, each joined by a veth pair to a bridge in this namespace, where HAProxy runs. HAProxy
//! (`haproxy` on the PATH, the Debian package) checks each instance's health path
//! (`option httpchk`), retries idempotent requests that met a closed or refused connection
//! (`retry-on all-retryable-errors`, `option redispatch`) and sends the PROXY protocol v2 to
//! weft, which logs the real client (the client namespace's address, not HAProxy's).
//!
//! The report: requests/s and p99 over time (charts), failed requests per event, the time
//! until HAProxy stops sending to a drained or killed instance (from HAProxy's own log, time
//! stamped as it is read), what weft's access logs name as the client, and the throughput of
//! three instances against one (closed loop), with a verdict on whether the client or the
//! machine was the limit. Needs root and HAProxy; without them it says so and skips (exit 0).

use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::TcpStream;
use weft_fiber::sync::Mutex;

use crate::client::{self, Deadlines, Failure};
use crate::experiment::{self, ExperimentArgs};
use crate::load::{self, LoadConfig, Stop, READ_BUFFER};
use crate::netns::{self, Bridge, Netns};
use crate::plot;
use crate::procstat;
use crate::response::{ReadBuf, ResponseParser};
use crate::schedule::Schedule;
use crate::stats::{median, percentile, ErrorKind};
use crate::target::{BadInput, RequestSpec, Target};

/// weft instances behind the balancer.
pub const INSTANCES: usize = 3;
/// The port each instance listens on, in its own namespace.
pub const WEFT_PORT: u16 = 8080;
/// HAProxy's frontend over every instance.
pub const FRONT_ALL: u16 = 8000;
/// HAProxy's frontend over the first instance only (the scaling baseline).
pub const FRONT_ONE: u16 = 8001;
/// The scaling runs' HAProxy ([`scale_haproxy_config`]): its frontend over every instance and
/// over the first only.
pub const SCALE_ALL: u16 = 8002;
pub const SCALE_ONE: u16 = 8003;
/// weft's health path, which HAProxy checks.
pub const HEALTH: &str = "/healthz";
/// HAProxy's check interval (`inter`), and the failed (`fall`) and passed (`rise`) checks
/// that mark a server down and up: a dead instance is out within about `FALL x CHECK_INTER`.
pub const CHECK_INTER: Duration = Duration::from_millis(500);
pub const FALL: u32 = 2;
pub const RISE: u32 = 2;
/// weft's `timeouts.shutdown_grace` in the instances: a drain or an upgrade's old process
/// is gone within it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Longest wait for an instance to say it is ready (at start, or an upgrade's new process).
pub const READY_WAIT: Duration = Duration::from_secs(30);
/// A client request's timeout (connect, write, whole response).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The client's address in its namespace (host part; the network is per run).
const CLIENT_HOST: u8 = 2;
/// The bridge's address, where HAProxy listens and from which it connects to weft.
const BRIDGE_HOST: u8 = 1;

/// What happens to the instances, and when (seconds from the start of the load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGTERM: weft drains (health 503, idle connections close, open requests finish).
    Drain(usize),
    /// Start the instance again after a drain or a kill.
    Restart(usize),
    /// SIGUSR2 to every instance in turn, each waiting for the new process to be ready.
    Rolling,
    /// SIGKILL: the requests in flight on it are lost.
    Kill(usize),
}

impl Action {
    fn name(&self) -> String {
        match self {
            Action::Drain(i) => format!("drain w{} (SIGTERM)", i + 1),
            Action::Restart(i) => format!("restart w{}", i + 1),
            Action::Rolling => "rolling upgrade (SIGUSR2 each in turn)".into(),
            Action::Kill(i) => format!("kill w{} (SIGKILL)", i + 1),
        }
    }

    /// The key the CSV and the test use.
    fn key(&self) -> &'static str {
        match self {
            Action::Drain(_) => "drain",
            Action::Restart(_) => "restart",
            Action::Rolling => "rolling",
            Action::Kill(_) => "kill",
        }
    }
}

/// A run's shape.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Length of the open-loop load.
    pub secs: f64,
    /// Requests per second of the open loop (half on keep-alive connections, half on a
    /// connection per request).
    pub rate: f64,
    /// Client connections of the open loop (even: keep-alive, odd: one per request).
    pub connections: usize,
    /// Each closed-loop scaling run (one instance, then all).
    pub scale_secs: f64,
    /// Rounds of the two scaling runs (the report takes the median of the rounds' ratios).
    pub scale_rounds: usize,
    /// (seconds from the start, what).
    pub events: Vec<(f64, Action)>,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        // Each event leaves time for HAProxy to notice (FALL x CHECK_INTER = 1 s) and for the
        // drained process to exit (within SHUTDOWN_GRACE, in practice at once) before the next.
        let k = if quick { 0.45 } else { 1.0 };
        Plan {
            secs: if quick { 20.0 } else { 44.0 },
            rate: if quick { 300.0 } else { 600.0 },
            connections: 64,
            scale_secs: if quick { 2.0 } else { 4.0 },
            scale_rounds: if quick { 1 } else { 5 },
            events: vec![
                (5.0 * k, Action::Drain(0)),
                (11.0 * k, Action::Restart(0)),
                (17.0 * k, Action::Rolling),
                (29.0 * k, Action::Kill(1)),
                (36.0 * k, Action::Restart(1)),
            ],
        }
    }
}

/// The run's addresses: `10.214.N.0/24`, N from the process id so that two runs do not meet.
#[derive(Debug, Clone, Copy)]
struct Net(u8);

impl Net {
    fn host(&self, h: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 214, self.0, h)
    }
    fn instance(&self, i: usize) -> Ipv4Addr {
        self.host(11 + i as u8)
    }
}

/// One weft instance in its namespace.
struct Instance {
    name: String,
    ns: Netns,
    addr: Ipv4Addr,
    conf: PathBuf,
    log: PathBuf,
    access: PathBuf,
    notify: UnixDatagram,
    notify_path: PathBuf,
    /// The process serving now (a new one after each upgrade).
    pid: Option<i32>,
    /// Every process it has had, for reaping and the final stop.
    pids: Vec<i32>,
    /// The core it runs on ([`Layout`]); an upgrade's new process inherits it.
    core: Option<usize>,
}

fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers; `pid` is a weft process this run started (or its
    // upgrade's successor, which it learned from MAINPID), never 0 or negative.
    unsafe { libc::kill(pid, sig) };
}

/// Waits up to `wait` for `pid` (a child, or an orphan adopted as subreaper) to exit; its
/// status, or `None` if it is still running or not ours to wait for.
fn reap(pid: i32, wait: Duration) -> Option<i32> {
    let end = Instant::now() + wait;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(status);
        }
        if r < 0 || Instant::now() >= end {
            return None;
        }
        weft_fiber::sleep(Duration::from_millis(20));
    }
}

/// `exit N` or `signal N` from a wait status.
fn describe_status(status: Option<i32>) -> String {
    match status {
        Some(s) if libc::WIFEXITED(s) => format!("exit {}", libc::WEXITSTATUS(s)),
        Some(s) if libc::WIFSIGNALED(s) => format!("signal {}", libc::WTERMSIG(s)),
        Some(s) => format!("status {s}"),
        None => "not reaped".into(),
    }
}

impl Instance {
    /// Starts weft in the namespace and waits for `READY=1`.
    fn start(&mut self, weft: &Path) -> io::Result<()> {
        self.drain_notifications();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = self.ns.command(weft);
        cmd.args(["serve", "--config"])
            .arg(&self.conf)
            .env("NOTIFY_SOCKET", &self.notify_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        pin_child(&mut cmd, self.core.into_iter().collect());
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        // Reaped by pid (`reap`), as its upgraded successors are.
        drop(child);
        self.pid = Some(pid);
        self.pids.push(pid);
        let end = Instant::now() + READY_WAIT;
        loop {
            match self.recv(end)? {
                Some(m) if m.lines().any(|l| l == "READY=1") => return Ok(()),
                Some(_) => {}
                None => {
                    return Err(io::Error::other(format!(
                        "{}: not ready within {READY_WAIT:?}; see {}",
                        self.name,
                        self.log.display()
                    )))
                }
            }
        }
    }

    /// SIGUSR2, then waits until the old process names its ready successor (`MAINPID=`, sent
    /// once the new process has said it serves).
    fn upgrade(&mut self) -> io::Result<i32> {
        let old = self.pid.ok_or_else(|| io::Error::other("not running"))?;
        self.drain_notifications();
        signal(old, libc::SIGUSR2);
        let end = Instant::now() + READY_WAIT;
        loop {
            match self.recv(end)? {
                Some(m) => {
                    if let Some(p) = m.lines().find_map(|l| l.strip_prefix("MAINPID=")) {
                        let pid: i32 = p
                            .trim()
                            .parse()
                            .map_err(|_| io::Error::other(format!("MAINPID={p}")))?;
                        self.pid = Some(pid);
                        self.pids.push(pid);
                        return Ok(pid);
                    }
                }
                None => {
                    return Err(io::Error::other(format!(
                        "{}: no upgraded process within {READY_WAIT:?}; see {}",
                        self.name,
                        self.log.display()
                    )))
                }
            }
        }
    }

    fn recv(&self, end: Instant) -> io::Result<Option<String>> {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        self.notify.set_read_timeout(Some(left))?;
        let mut buf = [0u8; 512];
        match self.notify.recv(&mut buf) {
            Ok(n) => Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn drain_notifications(&self) {
        let _ = self.notify.set_nonblocking(true);
        let mut buf = [0u8; 512];
        while self.notify.recv(&mut buf).is_ok() {}
        let _ = self.notify.set_nonblocking(false);
    }

    /// Stops every process it has had: SIGTERM, then SIGKILL to what is left.
    fn stop(&mut self) {
        for &p in &self.pids {
            signal(p, libc::SIGTERM);
        }
        for &p in &self.pids {
            if reap(p, SHUTDOWN_GRACE + Duration::from_secs(1)).is_none() {
                signal(p, libc::SIGKILL);
                reap(p, Duration::from_secs(1));
            }
        }
        self.pids.clear();
        self.pid = None;
    }
}

/// HAProxy, stopped on drop; its log lines come back time-stamped from the reader thread.
struct Haproxy {
    child: Child,
    reader: Option<std::thread::JoinHandle<Vec<(Instant, String)>>>,
}

impl Haproxy {
    fn stop(&mut self) -> Vec<(Instant, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy in the foreground on configuration `cfg`, its stderr to `err`, in a process group
/// of its own, on the layout's HAProxy cores.
fn haproxy_command(bin: &Path, cfg: &Path, err: &Path, layout: &Layout) -> io::Result<Command> {
    let mut cmd = Command::new(bin);
    cmd.arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdin(Stdio::null())
        .stderr(fs::File::create(err)?)
        .process_group(0);
    pin_child(&mut cmd, layout.haproxy.clone());
    Ok(cmd)
}

/// HAProxy's configuration for the timeline: `threads` threads (`nbthread`), the backend of
/// every instance and of the first only, each behind its frontend.
pub fn haproxy_config(front: Ipv4Addr, servers: &[Ipv4Addr], threads: usize) -> String {
    let inter = CHECK_INTER.as_millis();
    let mut s = format!(
        "global
    log stdout format raw local0
    nbthread {threads}
    maxconn 4000

defaults
    mode http
    log global
    # %s: the server that answered (after retries); the reader stamps each line with its time.
    log-format \"%b/%s %ST %Ta %tsc %rc\"
    timeout connect 1s
    timeout client 30s
    timeout server 10s
    timeout http-keep-alive 30s
    # A request that met a refused or closed connection (a drained or killed instance) goes
    # to another server: up to 3 retries, the last ones redispatched.
    retries 3
    option redispatch 1
    retry-on all-retryable-errors

backend weft
    balance roundrobin
    # Only idempotent requests are retried (RFC 9110 section 9.2.2).
    http-request disable-l7-retry if !METH_GET !METH_HEAD
    option httpchk GET {HEALTH}
    http-check expect status 200
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
"
    );
    for (i, a) in servers.iter().enumerate() {
        let _ = writeln!(s, "    server w{} {a}:{WEFT_PORT}", i + 1);
    }
    let _ = write!(
        s,
        "
backend one
    option httpchk GET {HEALTH}
    http-check expect status 200
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
    server w1 {}:{WEFT_PORT}

frontend all
    bind {front}:{FRONT_ALL}
    default_backend weft

frontend one
    bind {front}:{FRONT_ONE}
    default_backend one
",
        servers[0]
    );
    s
}

/// The configuration of the HAProxy each closed-loop scaling run starts afresh: the
/// timeline's health checks and PROXY protocol v2, but balancing connections (`mode tcp`,
/// round robin per client connection), as a Kubernetes Service or an L4 balancer does, with no
/// log line per request. Why not the timeline's HTTP mode: a connection that began with a
/// PROXY header belongs to its client's session, so HAProxy 2.6 balancing each request round
/// robin opened a server connection for almost every request, and once client sessions had
/// closed even a one-server backend did so until HAProxy restarted (seen with nginx behind it
/// as well); and parsing each request costs HAProxy about three times a weft instance's CPU,
/// so on 16 cores HAProxy, not the instances, was the limit. In TCP mode each client
/// connection has one server connection for its life.
pub fn scale_haproxy_config(front: Ipv4Addr, servers: &[Ipv4Addr], threads: usize) -> String {
    let inter = CHECK_INTER.as_millis();
    let mut s = format!(
        "global
    nbthread {threads}
    maxconn 4000

defaults
    mode tcp
    no log
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    default-server check inter {inter}ms fall {FALL} rise {RISE} send-proxy-v2 check-send-proxy
    option httpchk GET {HEALTH}

backend all
    balance roundrobin
"
    );
    for (i, a) in servers.iter().enumerate() {
        let _ = writeln!(s, "    server w{} {a}:{WEFT_PORT}", i + 1);
    }
    let _ = write!(
        s,
        "
backend one
    server w1 {}:{WEFT_PORT}

frontend all
    bind {front}:{SCALE_ALL}
    default_backend all

frontend one
    bind {front}:{SCALE_ONE}
    default_backend one
",
        servers[0]
    );
    s
}

/// TCP connections the namespace's stack has accepted so far (`PassiveOpens` of its
/// `/proc/net/snmp`), read from a thread that enters it.
fn passive_opens(ns: &Netns) -> io::Result<u64> {
    std::thread::scope(|sc| {
        sc.spawn(|| -> io::Result<u64> {
            let _in = ns.enter()?;
            let text = fs::read_to_string("/proc/thread-self/net/snmp")?;
            parse_passive_opens(&text)
                .ok_or_else(|| io::Error::other("no Tcp PassiveOpens in /proc/net/snmp"))
        })
        .join()
        .map_err(|_| io::Error::other("the snmp reader panicked"))?
    })
}

/// `PassiveOpens` from the text of `/proc/net/snmp` (a `Tcp:` line of names, then one of
/// values).
pub fn parse_passive_opens(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let i = names.split_whitespace().position(|n| n == "PassiveOpens")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// weft's configuration for instance `addr`.
fn weft_config(site: &Path, access: &Path, addr: Ipv4Addr, model: &str) -> String {
    format!(
        "root = {site:?}
threads = 1
access_log = {access:?}
# Root makes the namespaces; the instances listen on their bridge addresses, a lab network.
allow_root = true

[[listen]]
addr = \"{addr}:{WEFT_PORT}\"
model = \"{model}\"
proxy_protocol = true

[timeouts]
shutdown_grace = \"{}s\"

[health]
path = \"{HEALTH}\"

[echo]
path = \"/echo\"
",
        SHUTDOWN_GRACE.as_secs()
    )
}

/// How a request of the open loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A complete response that was not 2xx or 3xx.
    Status(u16),
    Failed(ErrorKind),
}

/// One request of the open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When it was due, milliseconds from the start.
    pub at_ms: f64,
    /// From when it was due to its response (or failure).
    pub latency_ms: f64,
    pub keepalive: bool,
    pub outcome: Outcome,
}

impl Sample {
    pub fn failed(&self) -> bool {
        self.outcome != Outcome::Ok
    }
}

struct LoopShared {
    targets: [Target; 2],
    next: AtomicU64,
    schedule: Schedule,
    end: Instant,
}

/// The open loop: `connections` fibers on one worker take request numbers in turn, each sent
/// when due ([`Schedule`]); even connections keep theirs open, odd ones open one per request.
fn open_loop(targets: [Target; 2], start: Instant, plan: &Plan) -> io::Result<Vec<Sample>> {
    let rt = weft_fiber::Runtime::builder()
        .workers(1)
        .name("weft-bench")
        .build()?;
    let shared = Arc::new(LoopShared {
        targets,
        next: AtomicU64::new(0),
        schedule: Schedule::new(start, plan.rate),
        end: start + Duration::from_secs_f64(plan.secs),
    });
    let samples = Arc::new(Mutex::new(Vec::new()));
    let n = plan.connections.max(2);
    let (sh, sm) = (shared.clone(), samples.clone());
    let launcher = rt.spawn_on(0, move || {
        let mine: Vec<_> = (0..n)
            .map(|k| {
                let (sh, sm) = (sh.clone(), sm.clone());
                weft_fiber::spawn(move || open_loop_connection(&sh, k % 2 == 0, &sm))
            })
            .collect();
        for h in mine {
            let _ = h.join();
        }
    });
    launcher
        .join()
        .map_err(|e| io::Error::other(format!("load fiber failed: {e:?}")))?;
    rt.shutdown();
    let v = std::mem::take(&mut *samples.lock());
    Ok(v)
}

fn open_loop_connection(sh: &LoopShared, keepalive: bool, out: &Mutex<Vec<Sample>>) {
    let t = &sh.targets[usize::from(!keepalive)];
    let mut rb = ReadBuf::new(READ_BUFFER);
    let mut parser = ResponseParser::new();
    let mut conn: Option<TcpStream> = None;
    let start = sh.schedule.intended(0);
    loop {
        let seq = sh.next.fetch_add(1, Ordering::Relaxed);
        let due = sh.schedule.intended(seq);
        if due >= sh.end {
            break;
        }
        if Instant::now() < due {
            weft_fiber::sleep_until(due);
        }
        let d = Deadlines {
            timeout: Instant::now() + REQUEST_TIMEOUT,
            run_end: None,
        };
        let record = |outcome: Outcome| {
            let at_ms = due.saturating_duration_since(start).as_secs_f64() * 1e3;
            let latency_ms = Instant::now().saturating_duration_since(due).as_secs_f64() * 1e3;
            out.lock().push(Sample {
                at_ms,
                latency_ms,
                keepalive,
                outcome,
            });
        };
        let s = match conn.take() {
            Some(s) => s,
            None => match client::connect(t.addr, d) {
                Ok(s) => {
                    rb.clear();
                    s
                }
                Err(Failure::Error(kind)) => {
                    record(Outcome::Failed(kind));
                    continue;
                }
                Err(Failure::Cut) => break,
            },
        };
        match client::exchange(&s, &t.request, t.head, &mut parser, &mut rb, d) {
            Ok(r) => {
                let st = r.head.status;
                record(if (200..400).contains(&st) {
                    Outcome::Ok
                } else {
                    Outcome::Status(st)
                });
                if keepalive && !r.head.close {
                    conn = Some(s);
                }
            }
            Err(Failure::Error(kind)) => record(Outcome::Failed(kind)),
            Err(Failure::Cut) => break,
        }
    }
}

/// A line of HAProxy's log: a request (`backend/server status ...`) or a server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    /// A request the server answered (`status` -1 when none did), after `retries` attempts
    /// that met a refused or closed connection elsewhere.
    Request {
        server: String,
        status: i32,
        retries: u32,
    },
    /// `Server BACKEND/NAME is DOWN` (`up` false) or `is UP`.
    State {
        backend: String,
        server: String,
        up: bool,
    },
    Other,
}

/// Parses one line of HAProxy's log as configured by [`haproxy_config`].
pub fn parse_log_line(line: &str) -> LogLine {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("Server ") {
        let Some((name, state)) = rest.split_once(" is ") else {
            return LogLine::Other;
        };
        let Some((backend, server)) = name.split_once('/') else {
            return LogLine::Other;
        };
        let up = if state.starts_with("UP") {
            true
        } else if state.starts_with("DOWN") {
            false
        } else {
            return LogLine::Other;
        };
        return LogLine::State {
            backend: backend.into(),
            server: server.into(),
            up,
        };
    }
    let mut f = line.split_ascii_whitespace();
    let (Some(bs), Some(st)) = (f.next(), f.next()) else {
        return LogLine::Other;
    };
    let Some((_, server)) = bs.split_once('/') else {
        return LogLine::Other;
    };
    // `%Ta %tsc %rc`; HAProxy writes `+N` for retries that were redispatched.
    let retries = f
        .nth(2)
        .and_then(|rc| rc.trim_start_matches('+').parse().ok())
        .unwrap_or(0);
    match st.parse::<i32>() {
        Ok(status) => LogLine::Request {
            server: server.into(),
            status,
            retries,
        },
        Err(_) => LogLine::Other,
    }
}

/// The client address of a Combined Log Format line (its first field).
pub fn access_log_client(line: &str) -> Option<&str> {
    line.split_ascii_whitespace().next()
}

/// What happened at one event, for the report and `events.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventRow {
    pub at_s: f64,
    pub key: &'static str,
    pub name: String,
    /// Requests due from this event to the next that failed (keep-alive, per-request).
    pub failed_ka: u64,
    pub failed_close: u64,
    pub requests: u64,
    /// When HAProxy marked the instance down (seconds after the event).
    pub down_after_s: Option<f64>,
    /// The last request HAProxy sent to the instance (seconds after the event).
    pub last_sent_after_s: Option<f64>,
    /// Failed requests due after HAProxy marked the instance down.
    pub failed_after_down: Option<u64>,
    /// Requests HAProxy retried (on a refused or closed connection) from this event to the
    /// next, as its log counts them.
    pub retried: u64,
    pub note: String,
}

/// Requests in HAProxy's log between `from` and `to` seconds that it had to retry.
pub fn retried_between(hlog: &[(f64, LogLine, String)], from: f64, to: f64) -> u64 {
    hlog.iter()
        .filter(|(t, l, _)| {
            *t >= from && *t < to && matches!(l, LogLine::Request { retries, .. } if *retries > 0)
        })
        .count() as u64
}

/// Failures of the requests due in `[from_ms, to_ms)`: (keep-alive, per-request, all due).
pub fn failures_between(samples: &[Sample], from_ms: f64, to_ms: f64) -> (u64, u64, u64) {
    let mut r = (0, 0, 0);
    for s in samples
        .iter()
        .filter(|s| s.at_ms >= from_ms && s.at_ms < to_ms)
    {
        r.2 += 1;
        if s.failed() {
            if s.keepalive {
                r.0 += 1;
            } else {
                r.1 += 1;
            }
        }
    }
    r
}

/// CPU time of this process (all its threads, not its children), seconds.
fn self_cpu_s() -> f64 {
    // SAFETY: rusage is plain data, zeroed is valid, and getrusage only writes into it.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (busy, total) jiffies of the whole machine, from `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// From this many cores up, each part of the experiment gets cores of its own ([`Layout`]).
pub const ROOMY_CORES: usize = 8;

/// Where the experiment's processes run. On a machine where this process may use at least
/// [`ROOMY_CORES`] cores, each instance has one of them to itself (the first three;
/// `threads = 1`), HAProxy the next three fifths of the rest (as many threads), and the client
/// what is left (as many load threads): the closed loop then measures the instances, not the
/// cores they share with their balancer and client. HAProxy gets the larger share because,
/// even balancing connections, it spends about twice an instance's CPU per request and the
/// client about as much as an instance (the 16-core run, three instances: 21, 11 and 10 us
/// per request, the veth and bridge path included). On a smaller machine nothing is pinned:
/// everything shares every core, HAProxy and the client one thread each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Instance `i` runs on core `instances[i]` (empty: nothing is pinned).
    pub instances: Vec<usize>,
    /// HAProxy's cores and the client's (empty: unpinned).
    pub haproxy: Vec<usize>,
    pub client: Vec<usize>,
    pub haproxy_threads: usize,
    pub client_threads: usize,
    /// Connections of each closed-loop scaling run.
    pub connections: usize,
}

impl Layout {
    /// The layout over `cpus`, the cores this process may run on ([`allowed_cpus`]), in
    /// order: in a cpuset such as 8-23 the parts go to those, not to 0..16.
    pub fn for_cpus(cpus: &[usize]) -> Layout {
        if cpus.len() < ROOMY_CORES {
            return Layout {
                instances: Vec::new(),
                haproxy: Vec::new(),
                client: Vec::new(),
                haproxy_threads: 1,
                client_threads: 1,
                connections: 32,
            };
        }
        let rest = cpus.len() - INSTANCES;
        let h = (rest * 3).div_ceil(5);
        let (instances, others) = cpus.split_at(INSTANCES);
        let (haproxy, client) = others.split_at(h);
        Layout {
            instances: instances.to_vec(),
            haproxy_threads: haproxy.len(),
            client_threads: client.len(),
            // Enough requests in flight that no instance waits on a round trip through
            // HAProxy: 64 per client thread.
            connections: 64 * client.len(),
            haproxy: haproxy.to_vec(),
            client: client.to_vec(),
        }
    }

    /// Whether each part has cores of its own.
    pub fn pinned(&self) -> bool {
        !self.instances.is_empty()
    }

    /// Instance `i`'s core, where pinned.
    fn instance_core(&self, i: usize) -> Option<usize> {
        self.instances.get(i).copied()
    }

    /// One line for the report.
    pub fn describe(&self, cores: usize) -> String {
        if !self.pinned() {
            return format!(
                "Machine: {cores} cores, shared by the client, HAProxy and the three \
                 instances (none pinned; HAProxy and the client one thread each)."
            );
        }
        format!(
            "Machine: {cores} cores, each part on its own: instance w1, w2, w3 on core {}; \
             HAProxy on cores {} (`nbthread {}`); the client on cores {} ({} load threads, \
             the timeline's one as well).",
            self.instances
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            cpu_list(&self.haproxy),
            self.haproxy_threads,
            cpu_list(&self.client),
            self.client_threads
        )
    }
}

/// `3-10` for 3, 4, ..., 10; `1,3-4` for 1, 3, 4 (the notation of `taskset -c`).
fn cpu_list(cores: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in cores {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == c => *last = c,
            _ => runs.push((c, c)),
        }
    }
    if runs.is_empty() {
        return "none".into();
    }
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The cores this process may run on (its affinity), in order; `0..available_parallelism`
/// where the affinity cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    match weft_fiber::sys::affinity() {
        Ok(v) if !v.is_empty() => v,
        _ => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// The calling thread's affinity: `cores` (threads it starts afterwards inherit it); none
/// (a [`Layout`] part that is not pinned) leaves it as it is.
pub(crate) fn pin_self(cores: &[usize]) -> io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain data, zeroed is the empty set; CPU_SET writes inside it for
    // any core below CPU_SETSIZE (checked), and sched_setaffinity reads exactly the set we
    // pass, with its size. It is a plain system call, so it may run between fork and exec.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cores {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The child `cmd` starts runs on `cores` (set between fork and exec); none leaves it on
/// this process's.
fn pin_child(cmd: &mut Command, cores: Vec<usize>) {
    if cores.is_empty() {
        return;
    }
    // SAFETY: the closure only calls `pin_self`, which allocates nothing and makes one
    // system call: safe in the forked child before exec.
    unsafe {
        cmd.pre_exec(move || pin_self(&cores));
    }
}

/// A closed-loop run's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScaleRun {
    pub rps: f64,
    pub errors: u64,
    /// TCP connections the instances accepted during the run (HAProxy's to them).
    pub server_conns: u64,
    /// Instances behind the run's backend (1 or [`INSTANCES`]).
    pub instances: usize,
    /// The client's CPU over wall time, in cores.
    pub client_cores: f64,
    /// HAProxy's, and the weft instances' together.
    pub haproxy_cores: f64,
    pub weft_cores: f64,
    /// The whole machine's busy share of all its cores, 0..=1.
    pub machine_busy: f64,
}

/// Why the scaling cannot be judged, if it cannot: the client or HAProxy busier, for the
/// cores its threads can use, than the instances were for theirs and near all of them (then
/// it, not the instances, set the throughput), or, where nothing is pinned, the machine 80%
/// busy or more (five busy processes sharing two cores leave some idle time between them: a
/// quiet 2-core run had HAProxy's one thread at 0.79 of a core and the machine 85-89% busy).
/// Instances near all of their cores are what the figure measures.
pub fn limit(r: &ScaleRun, cores: usize, layout: &Layout) -> Option<String> {
    let (ct, ht) = (layout.client_threads as f64, layout.haproxy_threads as f64);
    let weft_share = r.weft_cores / r.instances.max(1) as f64;
    let (client_share, haproxy_share) = (r.client_cores / ct, r.haproxy_cores / ht);
    if client_share >= 0.8 && client_share >= weft_share {
        Some(format!(
            "the client is the limit (it used {:.2} cores with {ct} load threads)",
            r.client_cores
        ))
    } else if haproxy_share >= 0.8 && haproxy_share >= weft_share {
        Some(format!(
            "HAProxy is the limit (it used {:.2} cores with `nbthread {ht}`)",
            r.haproxy_cores
        ))
    } else if !layout.pinned() && r.machine_busy >= 0.8 {
        let others =
            (r.machine_busy * cores as f64 - r.client_cores - r.haproxy_cores - r.weft_cores)
                .max(0.0);
        Some(format!(
            "the machine is the limit ({:.0}% of its {cores} cores busy: the client {:.2} \
             cores, HAProxy {:.2}, the weft instances {:.2}, other processes {others:.2})",
            r.machine_busy * 100.0,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores
        ))
    } else {
        None
    }
}

/// The same-round ratios of three instances' throughput over one's, in round order.
pub fn round_ratios(scale: &[(usize, &str, ScaleRun)]) -> Vec<f64> {
    let mut rounds: Vec<usize> = scale.iter().map(|x| x.0).collect();
    rounds.dedup();
    rounds
        .into_iter()
        .filter_map(|n| {
            let of = |label: &str| {
                scale
                    .iter()
                    .find(|x| x.0 == n && x.1 == label)
                    .map(|x| x.2.rps)
            };
            Some(of("three instances")? / of("one instance")?.max(1e-9))
        })
        .collect()
}

/// The scaling target: three instances give at least this many times one's throughput.
pub const SCALE_TARGET: f64 = 2.7;

/// Runs the cluster experiment (called by `experiment::run` for the name `cluster`).
pub fn run(a: &ExperimentArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = experiment::out_dir(a);
    experiment::check_overwrite(&dir, a.quick)?;
    // Bad input is refused before anything else, also where the experiment would skip.
    let model = a.model.as_deref().unwrap_or("fiber");
    if !["fiber", "thread", "process", "pipeline"].contains(&model) {
        return Err(BadInput(format!(
            "--model {model}: one of fiber, thread, process, pipeline"
        ))
        .into());
    }
    let mut plan = Plan::new(a.quick);
    if let Some(r) = a.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err(BadInput("--rate must be a positive number".into()).into());
        }
        plan.rate = r;
    }
    if let Some(n) = a.runs {
        if n == 0 {
            return Err(BadInput("--runs must be at least 1".into()).into());
        }
        plan.scale_rounds = n;
    }
    if let Err(why) = netns::available() {
        eprintln!("# cluster: skipped: the experiment {why} for its test hosts");
        return Ok(());
    }
    let Some(haproxy) = experiment::find_program("haproxy") else {
        eprintln!(
            "# cluster: skipped: HAProxy is not installed (apt-get install haproxy, or put \
             haproxy on the PATH)"
        );
        return Ok(());
    };
    let weft = experiment::built_weft(a)?;
    let cpus = allowed_cpus();
    let ncores = cpus.len();
    let layout = Layout::for_cpus(&cpus);
    let id = std::process::id();
    let net = Net((id % 250) as u8 + 1);
    let work = std::env::temp_dir().join(format!("weft-cluster-{id}"));
    fs::create_dir_all(work.join("site"))?;
    fs::write(work.join("site/index.html"), "<p>cluster</p>\n")?;
    // An upgraded instance is its predecessor's child; once that exits it becomes ours.
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers, no pointers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error().into());
    }

    // Hosts: the bridge first, so that it is removed after the namespaces joined to it.
    let tag = id % 100_000;
    let bridge = Bridge::create(
        &format!("wcb{tag}"),
        &format!("{}/24", net.host(BRIDGE_HOST)),
    )?;
    let Some(client_ns) = Netns::create(
        &format!("weft-cluster-{id}-client"),
        &format!("wch{tag}c"),
        &format!("wcp{tag}c"),
    )?
    else {
        return Ok(());
    };
    bridge.attach(&client_ns)?;
    client_ns.address(&format!("{}/24", net.host(CLIENT_HOST)))?;
    client_ns.client_sysctls()?;
    let mut instances = Vec::new();
    for i in 0..INSTANCES {
        let Some(ns) = Netns::create(
            &format!("weft-cluster-{id}-w{}", i + 1),
            &format!("wch{tag}{i}"),
            &format!("wcp{tag}{i}"),
        )?
        else {
            return Ok(());
        };
        bridge.attach(&ns)?;
        let addr = net.instance(i);
        ns.address(&format!("{addr}/24"))?;
        let name = format!("w{}", i + 1);
        let conf = work.join(format!("{name}.toml"));
        let access = work.join(format!("{name}.access.log"));
        fs::write(&conf, weft_config(&work.join("site"), &access, addr, model))?;
        let notify_path = work.join(format!("{name}.notify"));
        let notify = UnixDatagram::bind(&notify_path)?;
        instances.push(Instance {
            log: work.join(format!("{name}.log")),
            name,
            ns,
            addr,
            conf,
            access,
            notify,
            notify_path,
            pid: None,
            pids: Vec::new(),
            core: layout.instance_core(i),
        });
    }
    let result = run_with(
        a,
        &plan,
        &weft,
        &haproxy,
        net,
        &work,
        &client_ns,
        &mut instances,
        &dir,
        ncores,
        &layout,
    );
    for inst in &mut instances {
        inst.stop();
    }
    drop(instances);
    drop(client_ns);
    drop(bridge);
    if result.is_ok() {
        let _ = fs::remove_dir_all(&work);
    } else {
        eprintln!("# cluster: logs kept in {}", work.display());
    }
    result?;
    eprintln!(
        "# wrote {}{}",
        dir.join("report.md").display(),
        if a.quick {
            " (a quick run: a smoke check, not a measurement)"
        } else {
            ""
        }
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_with(
    a: &ExperimentArgs,
    plan: &Plan,
    weft: &Path,
    haproxy_bin: &Path,
    net: Net,
    work: &Path,
    client_ns: &Netns,
    instances: &mut [Instance],
    dir: &Path,
    ncores: usize,
    layout: &Layout,
) -> Result<(), Box<dyn std::error::Error>> {
    for inst in instances.iter_mut() {
        inst.start(weft)?;
    }
    let front = net.host(BRIDGE_HOST);
    let addrs: Vec<Ipv4Addr> = instances.iter().map(|i| i.addr).collect();
    let hcfg = haproxy_config(front, &addrs, layout.haproxy_threads);
    let hpath = work.join("haproxy.cfg");
    fs::write(&hpath, &hcfg)?;
    let mut child = haproxy_command(haproxy_bin, &hpath, &work.join("haproxy.err"), layout)?
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        for line in BufReader::new(out).lines() {
            match line {
                Ok(l) => v.push((Instant::now(), l)),
                Err(_) => break,
            }
        }
        v
    });
    let mut hap = Haproxy {
        child,
        reader: Some(reader),
    };
    let url = |port: u16, close: bool| {
        Target::new(
            &format!("http://{front}:{port}/echo"),
            &RequestSpec {
                close,
                ..RequestSpec::default()
            },
        )
    };
    // Up when a request through each frontend is answered, and HAProxy has had time to see
    // every instance pass RISE checks.
    {
        let _in = client_ns.enter()?;
        let end = Instant::now() + READY_WAIT;
        for port in [FRONT_ALL, FRONT_ONE] {
            loop {
                let t = url(port, true)?;
                let probe = LoadConfig {
                    targets: vec![t],
                    connections: 1,
                    threads: 1,
                    stop: Stop::Requests(1),
                    rate: None,
                    keepalive: false,
                    timeout: Duration::from_secs(1),
                    progress: false,
                };
                let r = load::run(&probe)?;
                if r.recorder.statuses.c2 == 1 {
                    break;
                }
                if Instant::now() > end || !matches!(hap.child.try_wait(), Ok(None)) {
                    return Err(io::Error::other(format!(
                        "HAProxy does not answer on {front}:{port}; see {}",
                        work.join("haproxy.err").display()
                    ))
                    .into());
                }
                weft_fiber::sleep(Duration::from_millis(100));
            }
        }
    }
    weft_fiber::sleep(CHECK_INTER * (RISE + 1));

    // Scaling: the closed loop through one instance, then through all, in rounds.
    let spath = work.join("haproxy-scale.cfg");
    fs::write(
        &spath,
        scale_haproxy_config(front, &addrs, layout.haproxy_threads),
    )?;
    let hz = procstat::ticks_per_second();
    let mut scale = Vec::new();
    for round in 1..=plan.scale_rounds {
        for (label, port, behind) in [
            ("one instance", SCALE_ONE, 1),
            ("three instances", SCALE_ALL, INSTANCES),
        ] {
            // A fresh HAProxy for each run (see `scale_haproxy_config`).
            let mut shap = Haproxy {
                child: haproxy_command(
                    haproxy_bin,
                    &spath,
                    &work.join("haproxy-scale.err"),
                    layout,
                )?
                .stdout(Stdio::null())
                .spawn()?,
                reader: None,
            };
            let shpid = shap.child.id();
            // Up once its frontend takes a connection (a bare connect, which in TCP mode
            // HAProxy forwards before this run's count of connections begins) and its checks
            // have run.
            {
                let _in = client_ns.enter()?;
                let end = Instant::now() + READY_WAIT;
                while std::net::TcpStream::connect((front, port)).is_err() {
                    if Instant::now() > end || !matches!(shap.child.try_wait(), Ok(None)) {
                        return Err(io::Error::other(format!(
                            "the scaling HAProxy does not listen on {front}:{port}; see {}",
                            work.join("haproxy-scale.err").display()
                        ))
                        .into());
                    }
                    weft_fiber::sleep(Duration::from_millis(50));
                }
            }
            weft_fiber::sleep(CHECK_INTER * (RISE + 1));
            let cfg = LoadConfig {
                targets: vec![url(port, false)?],
                connections: layout.connections,
                threads: layout.client_threads,
                stop: Stop::Duration(Duration::from_secs_f64(plan.scale_secs)),
                rate: None,
                keepalive: true,
                timeout: REQUEST_TIMEOUT,
                progress: false,
            };
            let pids: Vec<u32> = instances
                .iter()
                .filter_map(|i| i.pid)
                .map(|p| p as u32)
                .collect();
            let before_w: Vec<_> = pids.iter().map(|&p| procstat::sample(p)).collect();
            let before_h = procstat::sample(shpid)?;
            let opens =
                || -> io::Result<u64> { instances.iter().map(|i| passive_opens(&i.ns)).sum() };
            let opens0 = opens()?;
            let (mb0, c0, t0) = (machine_ticks(), self_cpu_s(), Instant::now());
            // On a thread of its own, so that its cores and namespace are the client's
            // alone (the load's threads inherit both).
            let r = std::thread::scope(|sc| {
                sc.spawn(|| -> io::Result<load::LoadResult> {
                    pin_self(&layout.client)?;
                    let _in = client_ns.enter()?;
                    load::run(&cfg)
                })
                .join()
            })
            .map_err(|_| io::Error::other("the scaling load panicked"))??;
            let wall = t0.elapsed().as_secs_f64().max(1e-9);
            let (mb1, c1) = (machine_ticks(), self_cpu_s());
            let after_h = procstat::sample(shpid)?;
            let server_conns = opens()?.saturating_sub(opens0);
            let weft_cpu: f64 = pids
                .iter()
                .zip(before_w)
                .filter_map(|(&p, b)| {
                    let b = b.ok()?;
                    let a = procstat::sample(p).ok()?;
                    Some(procstat::ServerCpu::between(p, b, a, 1, hz).cpu_s)
                })
                .sum();
            // Stopped after the instances' CPU is read: their closing of its connections is
            // not the run's.
            shap.stop();
            let h = procstat::ServerCpu::between(shpid, before_h, after_h, 1, hz);
            let busy = (mb1.0 - mb0.0) as f64 / ((mb1.1 - mb0.1) as f64).max(1.0);
            let run = ScaleRun {
                server_conns,
                instances: behind,
                rps: r.recorder.requests as f64 / r.elapsed.as_secs_f64().max(1e-9),
                errors: r.recorder.errors.total(),
                client_cores: (c1 - c0) / wall,
                haproxy_cores: h.cpu_s / wall,
                weft_cores: weft_cpu / wall,
                machine_busy: busy,
            };
            eprintln!(
                "  round {round}, {label}: {:.0} req/s, client {:.2} cores, HAProxy {:.2}, \
                 weft {:.2}, machine {:.0}% busy, {} connections to weft",
                run.rps,
                run.client_cores,
                run.haproxy_cores,
                run.weft_cores,
                run.machine_busy * 100.0,
                run.server_conns
            );
            scale.push((round, label, run));
        }
    }

    // The open loop, with the events on the timeline.
    eprintln!(
        "# cluster: {:.0} s of open-loop load at {:.0} req/s; events: {}",
        plan.secs,
        plan.rate,
        plan.events
            .iter()
            .map(|(t, e)| format!("{t:.1} s {}", e.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let targets = [url(FRONT_ALL, false)?, url(FRONT_ALL, true)?];
    // The load's clock starts a little ahead, so that its connections exist before it.
    let start = Instant::now() + Duration::from_millis(200);
    let load = {
        let plan = plan.clone();
        let ns_name = client_ns.name.clone();
        let cores = layout.client.clone();
        std::thread::spawn(move || -> io::Result<Vec<Sample>> {
            pin_self(&cores)?;
            // The load's runtime workers are born in the client's namespace.
            Netns::enter_for_good(&ns_name)?;
            open_loop(targets, start, &plan)
        })
    };
    let mut done: Vec<(f64, Action, String)> = Vec::new();
    for &(at, action) in &plan.events {
        let when = start + Duration::from_secs_f64(at);
        weft_fiber::sleep_until(when);
        let t = start.elapsed().as_secs_f64();
        let note = match action {
            Action::Drain(i) => {
                let inst = &mut instances[i];
                let pid = inst.pid.take().ok_or("drain: not running")?;
                signal(pid, libc::SIGTERM);
                let st = reap(pid, SHUTDOWN_GRACE + Duration::from_secs(2));
                let t_exit = start.elapsed().as_secs_f64() - t;
                // One that did not exit stays listed, for the final stop.
                if st.is_some() {
                    inst.pids.retain(|&p| p != pid);
                }
                format!("{}; exited after {t_exit:.3} s", describe_status(st))
            }
            Action::Kill(i) => {
                let inst = &mut instances[i];
                let pid = inst.pid.take().ok_or("kill: not running")?;
                signal(pid, libc::SIGKILL);
                let st = reap(pid, Duration::from_secs(2));
                if st.is_some() {
                    inst.pids.retain(|&p| p != pid);
                }
                describe_status(st)
            }
            Action::Restart(i) => {
                instances[i].start(weft)?;
                format!("ready after {:.3} s", start.elapsed().as_secs_f64() - t)
            }
            Action::Rolling => {
                let mut parts = Vec::new();
                for inst in instances.iter_mut() {
                    let old = inst.pid.ok_or("upgrade: not running")?;
                    let t0 = start.elapsed().as_secs_f64();
                    let new = inst.upgrade()?;
                    let ready = start.elapsed().as_secs_f64() - t0;
                    // In turn: the next instance is upgraded once this one's old process
                    // has drained and exited.
                    let st = reap(old, SHUTDOWN_GRACE + Duration::from_secs(2));
                    if st.is_some() {
                        inst.pids.retain(|&p| p != old);
                    }
                    parts.push(format!(
                        "{} {old} -> {new} ready after {ready:.3} s, old {} after {:.3} s",
                        inst.name,
                        describe_status(st),
                        start.elapsed().as_secs_f64() - t0
                    ));
                }
                parts.join("; ")
            }
        };
        eprintln!("  {t:6.2} s {}: {note}", action.name());
        done.push((t, action, note));
    }
    let model = a.model.as_deref().unwrap_or("fiber");
    let samples = load
        .join()
        .map_err(|_| io::Error::other("the load thread panicked"))??;
    // Old processes of the rolling upgrade have drained by now; reap them.
    for inst in instances.iter_mut() {
        let cur = inst.pid;
        inst.pids
            .retain(|&p| Some(p) == cur || reap(p, Duration::from_millis(10)).is_none());
    }
    let hlog = hap.stop();
    let hlog: Vec<(f64, LogLine, String)> = hlog
        .into_iter()
        .map(|(at, l)| {
            let t = if at >= start {
                (at - start).as_secs_f64()
            } else {
                -(start - at).as_secs_f64()
            };
            (t, parse_log_line(&l), l)
        })
        .collect();
    fs::write(
        dir_file(dir, a.quick, "haproxy.log")?,
        hlog.iter()
            .map(|(t, _, l)| format!("{t:.3} {l}\n"))
            .collect::<String>(),
    )?;
    let clients: Vec<(String, u64, u64, u64, String)> = instances
        .iter()
        .map(|inst| {
            let text = fs::read_to_string(&inst.access).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let real = net.host(CLIENT_HOST).to_string();
            let bal = net.host(BRIDGE_HOST).to_string();
            let n_real = lines
                .iter()
                .filter(|l| access_log_client(l) == Some(real.as_str()))
                .count() as u64;
            let n_bal = lines
                .iter()
                .filter(|l| access_log_client(l) == Some(bal.as_str()))
                .count() as u64;
            (
                inst.name.clone(),
                lines.len() as u64,
                n_real,
                n_bal,
                lines.last().copied().unwrap_or("").to_string(),
            )
        })
        .collect();
    report(
        a, plan, dir, ncores, layout, net, model, &hcfg, &scale, &done, &samples, &hlog, &clients,
    )
}

fn dir_file(dir: &Path, quick: bool, name: &str) -> io::Result<PathBuf> {
    experiment::mark(dir, quick)?;
    Ok(dir.join(name))
}

/// The per-event rows: failures of the requests due from each event to the next, and for a
/// drain or kill, when HAProxy marked the instance down and last sent it a request (from its
/// log, until the instance's restart).
pub fn event_rows(
    done: &[(f64, Action, String)],
    samples: &[Sample],
    hlog: &[(f64, LogLine, String)],
    secs: f64,
) -> Vec<EventRow> {
    let mut rows = Vec::new();
    let first = done.first().map_or(secs, |d| d.0);
    let (ka, cl, n) = failures_between(samples, 0.0, first * 1e3);
    rows.push(EventRow {
        at_s: 0.0,
        key: "steady",
        name: "steady load, all instances up".into(),
        failed_ka: ka,
        failed_close: cl,
        requests: n,
        retried: retried_between(hlog, f64::NEG_INFINITY, first),
        ..EventRow::default()
    });
    for (k, (t, action, note)) in done.iter().enumerate() {
        let next = done.get(k + 1).map_or(secs, |d| d.0);
        let (ka, cl, n) = failures_between(samples, t * 1e3, next * 1e3);
        let mut row = EventRow {
            at_s: *t,
            key: action.key(),
            name: action.name(),
            failed_ka: ka,
            failed_close: cl,
            requests: n,
            retried: retried_between(hlog, *t, next),
            note: note.clone(),
            ..EventRow::default()
        };
        if let Action::Drain(i) | Action::Kill(i) = action {
            let name = format!("w{}", i + 1);
            // Until the instance is started again.
            let until = done[k + 1..]
                .iter()
                .find(|d| d.1 == Action::Restart(*i))
                .map_or(f64::INFINITY, |d| d.0);
            let down = hlog.iter().find_map(|(lt, l, _)| match l {
                LogLine::State {
                    backend,
                    server,
                    up: false,
                } if backend == "weft" && *server == name && *lt >= *t && *lt < until => Some(*lt),
                _ => None,
            });
            let last = hlog
                .iter()
                .filter(|(lt, l, _)| {
                    *lt >= *t
                        && *lt < until
                        && matches!(l, LogLine::Request { server, .. } if *server == name)
                })
                .map(|(lt, _, _)| *lt)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            row.down_after_s = down.map(|d| d - t);
            row.last_sent_after_s = Some(last.map_or(0.0, |l| l - t));
            row.failed_after_down = down.map(|d| {
                samples
                    .iter()
                    .filter(|s| s.at_ms >= d * 1e3 && s.at_ms < next * 1e3 && s.failed())
                    .count() as u64
            });
        }
        rows.push(row);
    }
    rows
}

#[allow(clippy::too_many_arguments)]
fn report(
    a: &ExperimentArgs,
    plan: &Plan,
    dir: &Path,
    ncores: usize,
    layout: &Layout,
    net: Net,
    model: &str,
    hcfg: &str,
    scale: &[(usize, &str, ScaleRun)],
    done: &[(f64, Action, String)],
    samples: &[Sample],
    hlog: &[(f64, LogLine, String)],
    clients: &[(String, u64, u64, u64, String)],
) -> Result<(), Box<dyn std::error::Error>> {
    experiment::mark(dir, a.quick)?;
    // Whole seconds only: a last partial second would read as a drop in throughput.
    let secs = plan.secs.floor() as usize;
    // Per second: due requests, failures, p50/p99 of the answered ones, HAProxy's requests
    // per instance.
    let mut rows = String::from(
        "t_s,due,ok,failed,failed_keepalive,failed_per_request,p50_ms,p99_ms,w1,w2,w3\n",
    );
    let mut series_rps: Vec<(f64, f64)> = Vec::new();
    let mut series_fail: Vec<(f64, f64)> = Vec::new();
    let mut series_p99: Vec<(f64, f64)> = Vec::new();
    let mut per_inst: Vec<Vec<(f64, f64)>> = vec![Vec::new(); INSTANCES];
    for s in 0..secs {
        let (lo, hi) = (s as f64 * 1e3, (s + 1) as f64 * 1e3);
        let in_s: Vec<&Sample> = samples
            .iter()
            .filter(|x| x.at_ms >= lo && x.at_ms < hi)
            .collect();
        let ok = in_s.iter().filter(|x| !x.failed()).count();
        let fk = in_s.iter().filter(|x| x.failed() && x.keepalive).count();
        let fc = in_s.iter().filter(|x| x.failed() && !x.keepalive).count();
        let mut lat: Vec<f64> = in_s
            .iter()
            .filter(|x| !x.failed())
            .map(|x| x.latency_ms)
            .collect();
        let p99 = percentile(&mut lat, 0.99);
        let p50 = percentile(&mut lat, 0.50);
        let counts: Vec<usize> = (0..INSTANCES)
            .map(|i| {
                let name = format!("w{}", i + 1);
                hlog.iter()
                    .filter(|(t, l, _)| {
                        *t >= s as f64
                            && *t < (s + 1) as f64
                            && matches!(l, LogLine::Request { server, .. } if *server == name)
                    })
                    .count()
            })
            .collect();
        let _ = writeln!(
            rows,
            "{s},{},{ok},{},{fk},{fc},{p50:.3},{p99:.3},{}",
            in_s.len(),
            fk + fc,
            counts
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let x = s as f64 + 0.5;
        series_rps.push((x, ok as f64));
        series_fail.push((x, (fk + fc) as f64));
        series_p99.push((x, p99));
        for (i, c) in counts.iter().enumerate() {
            per_inst[i].push((x, *c as f64));
        }
    }
    fs::write(dir.join("rows.csv"), rows)?;
    let mut failures = String::from("due_ms,latency_ms,connection,outcome\n");
    for s in samples.iter().filter(|s| s.failed()) {
        let _ = writeln!(
            failures,
            "{:.1},{:.1},{},{:?}",
            s.at_ms,
            s.latency_ms,
            if s.keepalive {
                "keepalive"
            } else {
                "per-request"
            },
            s.outcome
        );
    }
    fs::write(dir.join("failures.csv"), failures)?;

    let events = event_rows(done, samples, hlog, plan.secs);
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    let mut csv = String::from(
        "at_s,event,requests,failed,failed_keepalive,failed_per_request,down_after_s,last_sent_after_s,failed_after_down,retried_by_haproxy\n",
    );
    for e in &events {
        let _ = writeln!(
            csv,
            "{:.3},{},{},{},{},{},{},{},{},{}",
            e.at_s,
            e.key,
            e.requests,
            e.failed_ka + e.failed_close,
            e.failed_ka,
            e.failed_close,
            opt(e.down_after_s),
            opt(e.last_sent_after_s),
            e.failed_after_down.map_or(String::new(), |v| v.to_string()),
            e.retried
        );
    }
    fs::write(dir.join("events.csv"), csv)?;
    let mut ccsv = String::from("instance,access_log_lines,real_client,balancer\n");
    for c in clients {
        let _ = writeln!(ccsv, "{},{},{},{}", c.0, c.1, c.2, c.3);
    }
    fs::write(dir.join("clients.csv"), ccsv)?;
    let mut scsv = String::from(
        "round,backend,rps,errors,server_conns,client_cores,haproxy_cores,weft_cores,\
         machine_busy_pct\n",
    );
    for (round, label, r) in scale {
        let _ = writeln!(
            scsv,
            "{round},{label},{:.1},{},{},{:.3},{:.3},{:.3},{:.1}",
            r.rps,
            r.errors,
            r.server_conns,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores,
            r.machine_busy * 100.0
        );
    }
    fs::write(dir.join("scaling.csv"), scsv)?;

    // Charts.
    let q = if a.quick {
        " (quick run: a smoke check, not a measurement)"
    } else {
        ""
    };
    let mut thr: Vec<plot::Series> = vec![
        ("answered/s (client)".into(), series_rps),
        ("failed/s (client)".into(), series_fail),
    ];
    for (i, s) in per_inst.into_iter().enumerate() {
        thr.push((format!("w{}/s (HAProxy log)", i + 1), s));
    }
    let title = format!("cluster: requests/s over time{q}");
    fs::write(
        dir.join("throughput.svg"),
        plot::lines(&title, "seconds", "requests/s", &thr),
    )?;
    fs::write(
        dir.join("throughput.png"),
        plot::lines_png(&title, "seconds", "requests/s", &thr),
    )?;
    let lat = vec![("p99 (ms)".to_string(), series_p99)];
    let title = format!("cluster: p99 latency per second, from the due time{q}");
    fs::write(
        dir.join("p99.svg"),
        plot::lines(&title, "seconds", "ms", &lat),
    )?;
    fs::write(
        dir.join("p99.png"),
        plot::lines_png(&title, "seconds", "ms", &lat),
    )?;

    // The report.
    let mut md = format!(
        "# cluster: three weft instances behind HAProxy\n\n{}\
         Three weft instances (`{model}` model, `threads = 1`, `proxy_protocol = true`, \
         `[health] path = \"{HEALTH}\"`, `shutdown_grace = \"{}s\"`), each in its own network \
         namespace at 10.214.{}.11-13, joined by veth pairs to a bridge where HAProxy \
         listens (10.214.{}.1); the client in a namespace of its own (10.214.{}.2). HAProxy: \
         round robin, `option httpchk GET {HEALTH}` every {} ms (fall {FALL}, rise {RISE}), \
         `retry-on all-retryable-errors`, `retries 3`, `option redispatch 1` for GET/HEAD, \
         PROXY protocol v2 to weft (configuration below). {}\n\n\
         Load: weft-bench's open loop at {:.0} requests/s for {:.0} s over {} connections, \
         half keep-alive, half a new connection per request (`GET /echo`), latency from each \
         request's due time (no coordinated omission); a request fails on a connect, write or \
         read error, a timeout ({} s) or a status other than 2xx/3xx. The events happen on \
         the timeline below; \"failed\" counts the requests due from an event to the next.\n\n",
        if a.quick {
            "**Quick run (`--quick`): a shorter timeline at a lower rate, a smoke check, not a \
             measurement.**\n\n"
        } else {
            ""
        },
        SHUTDOWN_GRACE.as_secs(),
        net.0,
        net.0,
        net.0,
        CHECK_INTER.as_millis(),
        layout.describe(ncores),
        plan.rate,
        plan.secs,
        plan.connections,
        REQUEST_TIMEOUT.as_secs(),
    );
    md.push_str(
        "## Events\n\n| at (s) | event | requests due | failed (keep-alive / per request) | \
         HAProxy marked it down after (s) | last request HAProxy sent it, after (s) | failed \
         after marked down | retried by HAProxy | what happened |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for e in &events {
        let _ = writeln!(
            md,
            "| {:.2} | {} | {} | {} ({} / {}) | {} | {} | {} | {} | {} |",
            e.at_s,
            e.name,
            e.requests,
            e.failed_ka + e.failed_close,
            e.failed_ka,
            e.failed_close,
            e.down_after_s.map_or("-".into(), |v| format!("{v:.2}")),
            e.last_sent_after_s
                .map_or("-".into(), |v| format!("{v:.2}")),
            e.failed_after_down.map_or("-".into(), |v| v.to_string()),
            e.retried,
            e.note
        );
    }
    md.push_str("\nTargets:\n\n");
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    for e in &events {
        let failed = e.failed_ka + e.failed_close;
        match e.key {
            "drain" | "rolling" => {
                let _ = writeln!(
                    md,
                    "- {}: 0 failed requests: {} ({failed} failed).",
                    e.name,
                    verdict(failed == 0)
                );
            }
            "kill" => {
                let _ = writeln!(
                    md,
                    "- {}: only the requests in flight on it fail, none after HAProxy's check \
                     marks it down: {} ({failed} failed in all, {} after it was marked down).",
                    e.name,
                    verdict(e.failed_after_down == Some(0)),
                    e.failed_after_down
                        .map_or("? (never marked down)".into(), |v| v.to_string())
                );
            }
            _ => {}
        }
    }
    md.push_str(
        "\n\"Last request HAProxy sent it\" is the last line of HAProxy's log naming the \
         instance after the event (HAProxy logs a request when it ends; each line is stamped as \
         weft-bench reads it). A drained instance still answers the requests it had; HAProxy \
         learns of the drain from the health check's 503 or from the closed listener, \
         whichever comes first. A killed instance answers nothing more: HAProxy keeps choosing \
         it until its check marks it down, and each such attempt meets a refused connection \
         and is retried on another instance (\"retried by HAProxy\", the requests its log \
         shows with a retry count), so for a killed instance HAProxy stops sending at the \
         mark.\n\n",
    );

    md.push_str("## Scaling: three instances against one\n\n");
    let _ = write!(
        md,
        "Closed loop, {} keep-alive connections from {} load thread(s), `GET /echo` through \
         a HAProxy started afresh for each run (configuration below: the same checks and PROXY \
         protocol v2, balancing connections in TCP mode, no log line per request): \
         the backend with only w1, then the backend with all three, the two alternating for {} \
         round(s) of {:.0} s. \"Connections to weft\" counts the TCP connections the \
         instances accepted in the run (the client's, and the health checks').\n\n\
         | round | backend | requests/s | errors | connections to weft | client CPU (cores) \
         | HAProxy CPU (cores) | weft CPU (cores, all instances) | machine busy |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        layout.connections, layout.client_threads, plan.scale_rounds, plan.scale_secs,
    );
    for (round, label, r) in scale {
        let _ = writeln!(
            md,
            "| {round} | {label} | {:.0} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0}% |",
            r.rps,
            r.errors,
            r.server_conns,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores,
            r.machine_busy * 100.0
        );
    }
    let ratios = round_ratios(scale);
    if !ratios.is_empty() {
        let ratio = median(&ratios);
        let why = scale.iter().find_map(|x| limit(&x.2, ncores, layout));
        let _ = writeln!(
            md,
            "\nThree instances over one: **{ratio:.2}x**, the median of the rounds' ratios \
             ({}; target: at least {SCALE_TARGET}x when the client is not the limit). {}\n",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            match (&why, ratio >= SCALE_TARGET) {
                (None, true) => "Met.".to_string(),
                (Some(w), true) => format!("Met, though in a run {w}."),
                (Some(w), false) if !layout.pinned() => format!(
                    "Cannot be shown on this machine: {w}. With the client, HAProxy and the \
                     three instances on {ncores} cores, adding instances adds no CPU; the \
                     figure needs each instance (and the client) on cores of its own \
                     (from {ROOMY_CORES} cores up the experiment pins them so)."
                ),
                (Some(w), false) => format!("Not shown: {w}."),
                (None, false) => "**Not met**, and neither the client, HAProxy nor the \
                                  machine was saturated."
                    .to_string(),
            }
        );
    }

    md.push_str("## weft's log of the real client\n\n");
    md.push_str(
        "Every instance reads the PROXY v2 header HAProxy sends, so its access log names the \
         client in its namespace, not HAProxy's address on the bridge:\n\n| instance | access \
         log lines | naming the client | naming HAProxy |\n|---|---|---|---|\n",
    );
    for c in clients {
        let _ = writeln!(md, "| {} | {} | {} | {} |", c.0, c.1, c.2, c.3);
    }
    if let Some(c) = clients.iter().find(|c| !c.4.is_empty()) {
        let _ = writeln!(md, "\nA line of {}'s log:\n\n```\n{}\n```\n", c.0, c.4);
    }
    md.push_str(
        "\n## Over time\n\n![requests/s](throughput.png) ([SVG](throughput.svg))\n\n\
         ![p99](p99.png) ([SVG](p99.svg))\n\n\
         Files: `rows.csv` (per second: requests due, answered, failed, p50/p99 of the \
         answered, HAProxy's requests per instance), `events.csv`, `failures.csv` (every \
         failed request), `scaling.csv`, `clients.csv`, `haproxy.log` (seconds from the start \
         of the load, then HAProxy's line).\n\n",
    );
    let _ = write!(md, "## HAProxy's configuration\n\n```\n{hcfg}```\n");
    let _ = write!(
        md,
        "\nThe scaling runs' HAProxy (started afresh for each run):\n\n```\n{}```\n",
        scale_haproxy_config(
            net.host(BRIDGE_HOST),
            &(0..INSTANCES).map(|i| net.instance(i)).collect::<Vec<_>>(),
            layout.haproxy_threads
        )
    );
    fs::write(dir.join("report.md"), md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_ms: f64, keepalive: bool, outcome: Outcome) -> Sample {
        Sample {
            at_ms,
            latency_ms: 1.0,
            keepalive,
            outcome,
        }
    }

    #[test]
    fn haproxy_log_lines() {
        assert_eq!(
            parse_log_line("weft/w2 200 3 ---- 0"),
            LogLine::Request {
                server: "w2".into(),
                status: 200,
                retries: 0
            }
        );
        assert_eq!(
            parse_log_line("weft/<NOSRV> 503 0 SC-- 0"),
            LogLine::Request {
                server: "<NOSRV>".into(),
                status: 503,
                retries: 0
            }
        );
        assert_eq!(
            parse_log_line("weft/w3 200 2 ---- +1"),
            LogLine::Request {
                server: "w3".into(),
                status: 200,
                retries: 1
            }
        );
        assert_eq!(
            parse_log_line(
                "Server weft/w1 is DOWN, reason: Layer7 wrong status, code: 503, info: \
                 \"Service Unavailable\", check duration: 1ms. 2 active and 0 backup servers left."
            ),
            LogLine::State {
                backend: "weft".into(),
                server: "w1".into(),
                up: false
            }
        );
        assert_eq!(
            parse_log_line("Server one/w1 is UP, reason: Layer7 check passed"),
            LogLine::State {
                backend: "one".into(),
                server: "w1".into(),
                up: true
            }
        );
        for other in [
            "",
            "Proxy all started.",
            "weft/w1 abc",
            "Server weft is going DOWN",
        ] {
            assert_eq!(parse_log_line(other), LogLine::Other, "{other:?}");
        }
    }

    #[test]
    fn the_config_checks_health_retries_and_sends_proxy_v2() {
        let c = haproxy_config(
            Ipv4Addr::new(10, 214, 9, 1),
            &[Ipv4Addr::new(10, 214, 9, 11), Ipv4Addr::new(10, 214, 9, 12)],
            6,
        );
        assert!(c.contains("nbthread 6"), "{c}");
        assert!(!c.contains("no log"), "{c}");
        // The scaling runs' HAProxy: the same checks and PROXY v2, no log, a client
        // connection kept on one server.
        let sc = scale_haproxy_config(
            Ipv4Addr::new(10, 214, 9, 1),
            &[Ipv4Addr::new(10, 214, 9, 11), Ipv4Addr::new(10, 214, 9, 12)],
            8,
        );
        for want in [
            "nbthread 8",
            "no log",
            "option httpchk GET /healthz",
            "send-proxy-v2 check-send-proxy",
            "inter 500ms fall 2 rise 2",
            "mode tcp",
            "server w2 10.214.9.12:8080",
            "bind 10.214.9.1:8002",
            "bind 10.214.9.1:8003",
        ] {
            assert!(sc.contains(want), "{want}: {sc}");
        }
        assert!(!sc.contains("log stdout"), "{sc}");
        assert!(c.contains("option httpchk GET /healthz"), "{c}");
        assert!(c.contains("retry-on all-retryable-errors"), "{c}");
        assert!(c.contains("option redispatch"), "{c}");
        assert!(c.contains("send-proxy-v2 check-send-proxy"), "{c}");
        assert!(c.contains("server w2 10.214.9.12:8080"), "{c}");
        assert!(c.contains("bind 10.214.9.1:8000"), "{c}");
        assert!(c.contains("inter 500ms fall 2 rise 2"), "{c}");
    }

    #[test]
    fn events_count_failures_and_the_balancers_view() {
        // Drain of w1 at 1 s, marked down at 1.6 s, last sent at 1.2 s; kill of w2 at 3 s,
        // marked down at 3.9 s; restart of w2 at 5 s; the run ends at 6 s.
        let done = vec![
            (1.0, Action::Drain(0), String::new()),
            (3.0, Action::Kill(1), String::new()),
            (5.0, Action::Restart(1), String::new()),
        ];
        let samples = vec![
            s(500.0, true, Outcome::Ok),
            s(1500.0, true, Outcome::Ok),
            s(3100.0, false, Outcome::Failed(ErrorKind::Read)),
            s(3500.0, true, Outcome::Status(502)),
            s(4000.0, false, Outcome::Failed(ErrorKind::Connect)),
            s(5500.0, true, Outcome::Ok),
        ];
        let req = |server: &str| LogLine::Request {
            server: server.into(),
            status: 200,
            retries: 0,
        };
        let down = |server: &str| LogLine::State {
            backend: "weft".into(),
            server: server.into(),
            up: false,
        };
        let hlog = vec![
            (0.9, req("w1"), String::new()),
            (1.2, req("w1"), String::new()),
            (1.6, down("w1"), String::new()),
            (2.5, req("w2"), String::new()),
            (3.05, req("w2"), String::new()),
            (
                3.2,
                LogLine::Request {
                    server: "w3".into(),
                    status: 200,
                    retries: 1,
                },
                String::new(),
            ),
            (3.9, down("w2"), String::new()),
            // After the restart: not the killed process's.
            (5.5, req("w2"), String::new()),
        ];
        let rows = event_rows(&done, &samples, &hlog, 6.0);
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[0].key, rows[0].requests), ("steady", 1));
        let drain = &rows[1];
        assert_eq!(
            (drain.failed_ka, drain.failed_close, drain.requests),
            (0, 0, 1)
        );
        assert!((drain.down_after_s.unwrap() - 0.6).abs() < 1e-9);
        assert!((drain.last_sent_after_s.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(drain.failed_after_down, Some(0));
        let kill = &rows[2];
        assert_eq!(
            (kill.failed_ka, kill.failed_close, kill.requests),
            (1, 2, 3)
        );
        assert!((kill.down_after_s.unwrap() - 0.9).abs() < 1e-9);
        assert!((kill.last_sent_after_s.unwrap() - 0.05).abs() < 1e-9);
        // Only the request due at 4.0 s came after the mark.
        assert_eq!(kill.failed_after_down, Some(1));
        assert_eq!((drain.retried, kill.retried, rows[3].retried), (0, 1, 0));
        assert_eq!(rows[3].key, "restart");
        assert_eq!(rows[3].down_after_s, None);
    }

    #[test]
    fn access_log_clients() {
        assert_eq!(
            access_log_client("10.214.3.2 - - [25/Nov/2026:07:00:00 +0000] \"GET /echo HTTP/1.1\" 200 4 \"-\" \"-\""),
            Some("10.214.3.2")
        );
        assert_eq!(access_log_client(""), None);
    }

    #[test]
    fn the_limit_is_named_when_the_client_haproxy_or_the_machine_is_saturated() {
        let small = Layout::for_cpus(&[0, 1]);
        let free = ScaleRun {
            client_cores: 0.3,
            haproxy_cores: 0.5,
            machine_busy: 0.5,
            ..ScaleRun::default()
        };
        assert_eq!(limit(&free, 8, &small), None);
        let client = ScaleRun {
            client_cores: 0.95,
            ..free
        };
        assert!(limit(&client, 8, &small)
            .unwrap()
            .contains("client is the limit"));
        let haproxy = ScaleRun {
            haproxy_cores: 0.91,
            ..free
        };
        assert!(limit(&haproxy, 8, &small)
            .unwrap()
            .contains("HAProxy is the limit"));
        // With cores of their own, each is judged against its share: 0.95 of the client's
        // five cores, 0.91 of HAProxy's eight, are far from either's limit.
        let roomy = Layout::for_cpus(&(0..16).collect::<Vec<_>>());
        assert_eq!(limit(&client, 16, &roomy), None);
        assert_eq!(limit(&haproxy, 16, &roomy), None);
        // The 16-core run: HAProxy at 0.85 of its cores, the instances at 0.98 of theirs:
        // the instances set the throughput, which is what is measured.
        let instances_bound = ScaleRun {
            client_cores: 3.66,
            haproxy_cores: 6.77,
            weft_cores: 2.93,
            instances: 3,
            ..free
        };
        assert_eq!(limit(&instances_bound, 16, &roomy), None);
        // HTTP mode on the same machine: HAProxy at 0.98 of its cores, the instances at 0.91.
        let haproxy_bound = ScaleRun {
            haproxy_cores: 7.8,
            weft_cores: 2.72,
            ..instances_bound
        };
        assert!(limit(&haproxy_bound, 16, &roomy)
            .unwrap()
            .contains("HAProxy is the limit"));
        let busy_client = ScaleRun {
            client_cores: 4.5,
            ..free
        };
        assert!(limit(&busy_client, 16, &roomy)
            .unwrap()
            .contains("client is the limit"));
        let machine = ScaleRun {
            machine_busy: 1.0,
            haproxy_cores: 0.5,
            weft_cores: 0.4,
            ..free
        };
        let quiet_small = ScaleRun {
            client_cores: 0.46,
            haproxy_cores: 0.79,
            weft_cores: 0.49,
            instances: 1,
            machine_busy: 0.89,
            ..ScaleRun::default()
        };
        assert!(limit(&quiet_small, 2, &small)
            .unwrap()
            .contains("machine is the limit"));
        let why = limit(&machine, 2, &small).unwrap();
        assert!(why.contains("machine is the limit"), "{why}");
        // 2 cores busy, 1.2 of them the experiment's: 0.8 someone else's.
        assert!(why.contains("other processes 0.80"), "{why}");
    }

    #[test]
    fn the_layout_gives_each_part_its_own_cores_where_there_are_enough() {
        for n in [1, 2, ROOMY_CORES - 1] {
            let l = Layout::for_cpus(&(0..n).collect::<Vec<_>>());
            assert!(
                !l.pinned() && l.haproxy.is_empty() && l.client.is_empty(),
                "{l:?}"
            );
            assert_eq!((l.haproxy_threads, l.client_threads), (1, 1));
            assert_eq!(l.instance_core(0), None);
        }
        // From 0, and from 8 (a cpuset such as 8-23), and with a hole in the set.
        for cpus in [
            (0..ROOMY_CORES).collect::<Vec<_>>(),
            (0..12).collect(),
            (0..16).collect(),
            (0..64).collect(),
            (8..24).collect(),
            (0..20).filter(|c| c % 5 != 4).collect(),
        ] {
            let l = Layout::for_cpus(&cpus);
            assert!(l.pinned());
            // Instances on the first three; HAProxy and the client after them, disjoint,
            // together every other core, each at least one, HAProxy the larger share.
            let inst: Vec<usize> = (0..INSTANCES).filter_map(|i| l.instance_core(i)).collect();
            assert_eq!(inst, cpus[..INSTANCES].to_vec());
            let mut all = inst.clone();
            all.extend(&l.haproxy);
            all.extend(&l.client);
            assert_eq!(all, cpus, "{l:?}");
            assert!(
                !l.client.is_empty() && l.haproxy.len() >= l.client.len(),
                "{l:?}"
            );
            assert_eq!(l.haproxy_threads, l.haproxy.len());
            assert_eq!(l.client_threads, l.client.len());
            assert_eq!(l.connections, 64 * l.client.len());
        }
        let l = Layout::for_cpus(&(0..16).collect::<Vec<_>>());
        assert_eq!(
            (cpu_list(&l.haproxy), cpu_list(&l.client)),
            ("3-10".into(), "11-15".into())
        );
        let d = l.describe(16);
        assert!(d.contains("core 0, 1, 2;"), "{d}");
        assert!(d.contains("HAProxy on cores 3-10 (`nbthread 8`)"), "{d}");
        let l = Layout::for_cpus(&(8..24).collect::<Vec<_>>());
        assert!(
            l.describe(16).contains("core 8, 9, 10;"),
            "{}",
            l.describe(16)
        );
        assert_eq!(cpu_list(&[1, 3, 4, 7]), "1,3-4,7");
        assert_eq!(cpu_list(&[]), "none");
        // This process's own cores: some, each listed once, in order.
        let mine = allowed_cpus();
        assert!(
            !mine.is_empty() && mine.windows(2).all(|w| w[0] < w[1]),
            "{mine:?}"
        );
    }

    #[test]
    fn a_pinned_child_and_a_pinned_thread_run_on_the_cores_named() {
        // The last core this process may use (in a cpuset it need not be 0).
        let cpus = allowed_cpus();
        let core = *cpus.last().unwrap();
        let want = format!("Cpus_allowed_list:\t{core}\n");
        let mut cmd = Command::new("cat");
        cmd.arg("/proc/self/status").stdout(Stdio::piped());
        pin_child(&mut cmd, vec![core]);
        let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
        assert!(out.contains(&want), "{out}");
        // A thread's own affinity, and what a thread it starts inherits.
        let seen = std::thread::spawn(move || {
            pin_self(&[core]).unwrap();
            std::thread::spawn(|| fs::read_to_string("/proc/thread-self/status").unwrap())
                .join()
                .unwrap()
        })
        .join()
        .unwrap();
        assert!(seen.contains(&want), "{seen}");
        // No cores: the affinity stays as it was.
        let kept = std::thread::spawn(|| {
            let before = fs::read_to_string("/proc/thread-self/status").unwrap();
            pin_self(&[]).unwrap();
            let after = fs::read_to_string("/proc/thread-self/status").unwrap();
            let list = |st: &str| {
                st.lines()
                    .find(|l| l.starts_with("Cpus_allowed_list:"))
                    .map(str::to_owned)
            };
            (list(&before), list(&after))
        })
        .join()
        .unwrap();
        assert_eq!(kept.0, kept.1);
        // This thread was not touched.
        let here = fs::read_to_string("/proc/thread-self/status").unwrap();
        if cpus.len() > 1 {
            assert!(!here.contains(&want), "{here}");
        }
    }

    #[test]
    fn passive_opens_are_read_from_the_snmp_table() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax \
                    MaxConn ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 120000 -1 37 \
                    45939 2\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_passive_opens(snmp), Some(45939));
        assert_eq!(parse_passive_opens("Tcp: RtoAlgorithm\nTcp: 1\n"), None);
        assert_eq!(parse_passive_opens(""), None);
        // This process's own namespace, as the experiment reads an instance's.
        let text = fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        assert!(parse_passive_opens(&text).is_some(), "{text}");
    }

    #[test]
    fn scaling_rounds_give_same_round_ratios_and_their_median() {
        let r = |rps| ScaleRun {
            rps,
            ..ScaleRun::default()
        };
        let scale = vec![
            (1, "one instance", r(100.0)),
            (1, "three instances", r(280.0)),
            (2, "one instance", r(200.0)),
            (2, "three instances", r(500.0)),
            (3, "one instance", r(100.0)),
            (3, "three instances", r(300.0)),
        ];
        assert_eq!(round_ratios(&scale), vec![2.8, 2.5, 3.0]);
        assert_eq!(median(&round_ratios(&scale)), 2.8);
        // A round missing one of its runs gives no ratio.
        assert_eq!(round_ratios(&scale[..3]), vec![2.8]);
        assert_eq!(median(&[1.0, 4.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn the_plan_keeps_events_inside_the_run_in_order() {
        for quick in [true, false] {
            let p = Plan::new(quick);
            let mut last = 0.0;
            for (t, _) in &p.events {
                assert!(*t > last && *t < p.secs, "{p:?}");
                last = *t;
            }
            // Every instance stopped is started again before the end.
            for (t, a) in &p.events {
                if let Action::Drain(i) | Action::Kill(i) = a {
                    assert!(p
                        .events
                        .iter()
                        .any(|(u, b)| *b == Action::Restart(*i) && u > t));
                }
            }
        }
    }
}
