//! `weft-bench experiment h2`: the fibers paper's question asked of HTTP/2.
//!
//! Keller and Monien asked whether a server whose connections are fibers beats one whose
//! connections are threads. Over HTTP/2 a connection carries many requests at once, so the
//! question becomes one of multiplexed load: weft's four models (fiber, thread, process,
//! pipeline) side by side, each with `--threads 1` on core 0, at c connections x m concurrent
//! streams per connection (default c = 10, 100, 1000 and m = 1, 10, 100), measuring
//! requests/s, server CPU per request and p99 latency.
//!
//! The client is `h2load` (nghttp2-client), on core 1 with one thread: weft-bench's own client
//! speaks HTTP/1.1 only, and h2load is the standard HTTP/2 load generator; `-c C -m M` opens C
//! connections and keeps M streams open on each, exactly the load asked for. Each run is
//! timing-based: `--warm-up-time W -D D`. h2load counts only the requests of its main window
//! (D), so the server's CPU is read from `/proc` (its process tree) at that window's edges:
//! h2load prints `Main benchmark duration is started` and `... is over` on its standard
//! output, flushed line by line, and the experiment samples the server's (and h2load's own)
//! CPU as each line arrives. A process's CPU is its `utime + stime`, except that a
//! single-threaded one (a process-model child) is read from `/proc/PID/schedstat` in
//! nanoseconds: the clock-tick figure is rounded down per process, which over a thousand
//! children each running a few milliseconds a second lost most of their time ([`cpu_ns`]).
//! Requests/s and the succeeded requests come from h2load's summary (h2load divides by the
//! nominal D; the window's measured wall time is in `rows.csv` as `window_s`, longer by a few
//! percent where h2load's loop is busiest); latency percentiles from its `--log-file` (a line
//! per request of the window: start time, status, microseconds to the end of the response),
//! computed here.
//!
//! The warm-up covers connection setup (TLS handshakes, and on the process model a fork per
//! connection): by default 1 s plus 5 ms per connection. h2load's `time for connect` in the
//! summary is all zeros when every connection was set up before the window; otherwise the
//! run is flagged (`connects-in-window`). The process model over TLS sets up its connections
//! slowly under load (its master forks a child per connection and competes for the core with
//! the children already serving): at c = 1000 it may still be setting some up when the window
//! closes, and h2load 1.52 then never finishes (it waits for those connections, and aborts in
//! libev when given an inactivity timeout). Such a run is stopped 5 s after its window
//! (`hung-after-window`) and its figures taken from the log file instead of the summary: the
//! requests answered in the window, over the window's wall time.
//!
//! Over TLS (ALPN h2; the default) with a self-signed P-256 certificate made with rcgen, as
//! the `tls` experiment; `--over h2c` uses plain listeners with `--h2c` (prior knowledge).
//! Every HTTP/2 connection of the process model holds a child for as long as it is open
//! (ARCHITECTURE.md, "HTTP/2"), so `[process] max_children` is raised from its default 256 to
//! twice the largest connection count: with 256, the 744 other connections of c = 1000 wait in
//! the master for a child that frees only when a connection closes, which h2load's do not
//! during a run (their streams never start, and h2load waits for them past its window).
//!
//! Output as the other experiments: `rows.csv` (every run), `median.csv` (per model and
//! point), charts (requests/s, CPU per request, p99 per connection count) and `report.md`.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;

use super::harness::{self, each_run, Env, Setup, BIND, MODELS};
use super::*;

/// weft's SETTINGS_MAX_CONCURRENT_STREAMS: more streams per connection than this would wait
/// in h2load, and the point would measure this many.
const MAX_STREAMS: usize = 128;

/// File descriptors kept beside the connections (h2load's own, the server's listeners, logs).
const FD_MARGIN: u64 = 256;

/// Seconds h2load may take past its warm-up and window before it is stopped, in all.
const GRACE_S: u64 = 20;

/// Seconds h2load may take to print its summary after its window closed: longer, it is waiting
/// for connections still being set up, which it would wait for as long as they take.
const AFTER_WINDOW_S: u64 = 5;

/// The transport of the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// HTTPS, ALPN `h2`.
    Tls,
    /// Plain TCP, HTTP/2 with prior knowledge.
    H2c,
}

impl Over {
    fn name(self) -> &'static str {
        match self {
            Over::Tls => "tls",
            Over::H2c => "h2c",
        }
    }

    /// The ALPN (or h2c) name h2load must report.
    fn protocol(self) -> &'static str {
        match self {
            Over::Tls => "h2",
            Over::H2c => "h2c",
        }
    }
}

/// What the command line asks of the experiment, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub over: Over,
    pub path: String,
    pub duration: Duration,
    /// `None`: 1 s plus 5 ms per connection ([`Plan::warm_up_for`]).
    pub warm_up: Option<Duration>,
    pub runs: usize,
    pub models: Vec<&'static str>,
    pub conns: Vec<usize>,
    pub streams: Vec<usize>,
}

impl Plan {
    /// The warm-up before the window of a run with `conns` connections.
    pub fn warm_up_for(&self, conns: usize) -> Duration {
        self.warm_up
            .unwrap_or(Duration::from_secs(1) + Duration::from_millis(5 * conns as u64))
    }

    /// `[process] max_children` of the servers: twice the largest connection count, at least
    /// weft's default.
    pub fn max_children(&self) -> usize {
        (2 * self.conns.iter().copied().max().unwrap_or(0)).max(256)
    }

    /// Every run of the experiment.
    fn run_count(&self) -> usize {
        self.conns.len() * self.streams.len() * self.models.len() * self.runs
    }

    /// About how long the runs take: warm-up, window, and a second around each run.
    pub fn estimate(&self) -> Duration {
        let per_point: Duration = self
            .conns
            .iter()
            .map(|&c| self.warm_up_for(c) + self.duration + Duration::from_secs(1))
            .sum();
        per_point * (self.streams.len() * self.models.len() * self.runs) as u32
    }
}

/// The h2 experiment's flags, refused by the other experiments.
pub fn flags_given(a: &ExperimentArgs) -> bool {
    a.over.is_some()
        || a.path.is_some()
        || a.duration.is_some()
        || a.warm_up.is_some()
        || !a.models.is_empty()
        || !a.conns.is_empty()
        || !a.streams.is_empty()
}

/// The plan from the arguments; bad ones refused with the reason.
pub fn plan_of(a: &ExperimentArgs) -> Result<Plan, BadInput> {
    if a.link.is_some() {
        return Err(BadInput("experiment h2: --link is not supported".into()));
    }
    if !a.servers.is_empty() {
        return Err(BadInput(
            "experiment h2: --servers is not taken; pick weft's models with --models".into(),
        ));
    }
    let over = match a.over.as_deref().unwrap_or("tls") {
        "tls" => Over::Tls,
        "h2c" => Over::H2c,
        other => return Err(BadInput(format!("--over {other}: tls or h2c"))),
    };
    let path = a.path.clone().unwrap_or_else(|| "/echo".into());
    if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_whitespace() || b < 0x20) {
        return Err(BadInput(format!(
            "--path {path:?}: a path starting with / (no spaces)"
        )));
    }
    let duration = a
        .duration
        .unwrap_or(Duration::from_secs(if a.quick { 1 } else { 5 }));
    if duration < Duration::from_millis(100) {
        return Err(BadInput("--duration must be at least 100ms".into()));
    }
    if a.warm_up.is_some_and(|w| w < Duration::from_millis(1)) {
        return Err(BadInput(
            "--warm-up must be at least 1ms (the connections are set up in it)".into(),
        ));
    }
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 });
    if runs == 0 {
        return Err(BadInput("--runs must be at least 1".into()));
    }
    let mut models = Vec::new();
    let asked: Vec<&str> = if a.models.is_empty() {
        MODELS.to_vec()
    } else {
        a.models.iter().map(String::as_str).collect()
    };
    for m in asked {
        let Some(&known) = MODELS.iter().find(|&&k| k == m) else {
            return Err(BadInput(format!(
                "--models: {m:?} is not a model (fiber, thread, process, pipeline)"
            )));
        };
        if models.contains(&known) {
            return Err(BadInput(format!("--models: {m} named twice")));
        }
        models.push(known);
    }
    let list = |v: &[usize], default: &[usize], flag: &str, (max, why): (usize, &str)| {
        let v = if v.is_empty() {
            default.to_vec()
        } else {
            v.to_vec()
        };
        for (i, &x) in v.iter().enumerate() {
            if x == 0 || x > max {
                return Err(BadInput(format!("--{flag} {x}: from 1 to {max}{why}")));
            }
            if v[..i].contains(&x) {
                return Err(BadInput(format!("--{flag}: {x} named twice")));
            }
        }
        Ok(v)
    };
    // A quick run's grid is smaller by default: a smoke check within two minutes.
    let (conns, streams): (&[usize], &[usize]) = if a.quick {
        (&[10, 100], &[1, 10])
    } else {
        (&[10, 100, 1000], &[1, 10, 100])
    };
    let conns = list(&a.conns, conns, "conns", (10_000, ""))?;
    let streams = list(
        &a.streams,
        streams,
        "streams",
        (MAX_STREAMS, " (weft's SETTINGS_MAX_CONCURRENT_STREAMS)"),
    )?;
    Ok(Plan {
        over,
        path,
        duration,
        warm_up: a.warm_up,
        runs,
        models,
        conns,
        streams,
    })
}

/// The figures of h2load's summary (what it prints after the run).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// `finished in ..., X req/s`: requests done over the main window.
    pub rps: Option<f64>,
    pub total: u64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    /// `Application protocol:` (h2, h2c, http/1.1).
    pub protocol: Option<String>,
    /// `Cipher:` over TLS.
    pub cipher: Option<String>,
    /// `time for connect:` has a value other than 0us: a connection was set up (or set up
    /// again) inside the main window.
    pub connects_in_window: bool,
}

/// Parses h2load's standard output (its summary and the lines before it).
pub fn parse_summary(text: &str) -> Summary {
    let mut s = Summary::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("finished in ") {
            // finished in 2.00s, 212090.00 req/s, 13.75MB/s
            s.rps = rest
                .split(", ")
                .find_map(|p| p.strip_suffix(" req/s"))
                .and_then(|v| v.trim().parse().ok());
        } else if let Some(rest) = line.strip_prefix("requests:") {
            // requests: 10 total, 10 started, 10 done, 0 succeeded, 10 failed, 0 errored, 0 timeout
            for part in rest.split(',') {
                let mut w = part.split_whitespace();
                let (Some(n), Some(what)) = (w.next(), w.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                match what {
                    "total" => s.total = n,
                    "done" => s.done = n,
                    "succeeded" => s.succeeded = n,
                    "failed" => s.failed = n,
                    "errored" => s.errored = n,
                    "timeout" => s.timeout = n,
                    _ => {}
                }
            }
        } else if let Some(p) = line.strip_prefix("Application protocol:") {
            s.protocol = Some(p.trim().to_string());
        } else if let Some(c) = line.strip_prefix("Cipher:") {
            s.cipher = Some(c.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("time for connect:") {
            s.connects_in_window = rest
                .split_whitespace()
                .take(4)
                .any(|v| v.trim_end_matches("us") != "0");
        }
    }
    s
}

/// One line of h2load's `--log-file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine {
    /// The request's start, microseconds since the epoch.
    pub start_us: u64,
    /// The response's status; -1 for a failed stream.
    pub status: i32,
    /// Microseconds from the start to the end of the response.
    pub latency_us: u64,
}

/// Parses a log-file line (tab-separated; columns past the third, which later h2load versions
/// may add, are ignored).
pub fn parse_log_line(line: &str) -> Option<LogLine> {
    let mut f = line.split('\t');
    let start_us = f.next()?.trim().parse().ok()?;
    let status = f.next()?.trim().parse().ok()?;
    let latency_us = f.next()?.trim().parse().ok()?;
    Some(LogLine {
        start_us,
        status,
        latency_us,
    })
}

/// The latencies of a run's log file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Streams that got a response (any status).
    pub answered: u64,
    /// Of those, the 2xx and 3xx (what h2load counts as succeeded).
    pub ok: u64,
    /// Streams that failed (status -1).
    pub failed: u64,
    /// Lines that are not h2load's.
    pub unreadable: u64,
    /// Percentiles of the answered streams' latency, milliseconds (NaN: none answered).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The value at quantile `q` of `sorted` by nearest rank (NaN when empty).
pub fn nearest_rank(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

/// Latency percentiles of a log file's text.
pub fn latency_of(text: &str) -> Latency {
    let mut us = Vec::new();
    let (mut ok, mut failed, mut unreadable) = (0, 0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_log_line(line) {
            Some(l) if l.status < 0 => failed += 1,
            Some(l) => {
                ok += u64::from((200..400).contains(&l.status));
                us.push(l.latency_us);
            }
            None => unreadable += 1,
        }
    }
    us.sort_unstable();
    Latency {
        answered: us.len() as u64,
        ok,
        failed,
        unreadable,
        p50_ms: nearest_rank(&us, 0.50) / 1e3,
        p99_ms: nearest_rank(&us, 0.99) / 1e3,
        max_ms: us.last().map_or(f64::NAN, |&v| v as f64 / 1e3),
    }
}

/// h2load's line at the start of the main window.
const WINDOW_START: &str = "Main benchmark duration is started";
/// h2load's line at its end.
const WINDOW_END: &str = "Main benchmark duration is over";

/// A process as the CPU count needs it: its stat and its number of threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub stat: procstat::Stat,
    pub threads: u32,
}

/// Parses `/proc/PID/stat` with its thread count (field 20).
pub fn parse_proc(text: &str) -> Option<Proc> {
    let stat = procstat::parse_stat(text)?;
    // After the command name: state is field 3, num_threads field 20.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let threads = rest.split_ascii_whitespace().nth(20 - 3)?.parse().ok()?;
    Some(Proc { stat, threads })
}

/// Every process's stat and thread count (processes that exit meanwhile are skipped).
fn scan() -> io::Result<Vec<Proc>> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc")? {
        let Ok(e) = e else { continue };
        let name = e.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        if let Some(p) = fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|t| parse_proc(&t))
        {
            out.push(p);
        }
    }
    Ok(out)
}

/// `root` and its descendants in `procs`.
pub fn tree(root: u32, procs: &[Proc]) -> Vec<&Proc> {
    let mut out: Vec<&Proc> = procs.iter().filter(|p| p.stat.pid == root).collect();
    let mut i = 0;
    while i < out.len() {
        let parent = out[i].stat.pid;
        out.extend(
            procs
                .iter()
                .filter(|p| p.stat.ppid == parent && p.stat.pid != parent),
        );
        i += 1;
    }
    out
}

/// The CPU time of `p`, nanoseconds. `/proc/PID/stat`'s utime + stime is the process's run
/// time (all its threads, exited ones included) cut to clock ticks (10 ms): summed over a
/// thousand process-model children that each run a few milliseconds a second, the cut loses
/// most of their time. `/proc/PID/schedstat` has the exact run time (ns), but of the main
/// thread only. Both are lower bounds of the process's time; the larger is taken, and
/// schedstat is read only for a single-threaded process, where it is the whole run time unless
/// threads have exited (h2load's worker at the end of its run), which stat's figure then
/// covers. Children reaped (cutime + cstime, summed before the cut) are added either way.
fn cpu_ns(p: &Proc, hz: u64) -> u64 {
    let tick_ns = 1_000_000_000 / hz.max(1);
    let reaped = (p.stat.cutime + p.stat.cstime) * tick_ns;
    let ticks = (p.stat.utime + p.stat.stime) * tick_ns;
    let exact = if p.threads == 1 {
        fs::read_to_string(format!("/proc/{}/schedstat", p.stat.pid))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    } else {
        0
    };
    reaped + ticks.max(exact)
}

/// CPU nanoseconds of the server's and h2load's process trees, read in one pass over
/// `/proc`, and when.
fn cpu_now(server: u32, client: u32, hz: u64) -> io::Result<(u64, u64, Instant)> {
    let procs = scan()?;
    let sum = |root| tree(root, &procs).iter().map(|p| cpu_ns(p, hz)).sum();
    Ok((sum(server), sum(client), Instant::now()))
}

/// What one run measured.
#[derive(Debug, Clone)]
struct RunResult {
    summary: Summary,
    latency: Latency,
    /// Server CPU seconds and h2load's over the window, and the window's wall time.
    server_cpu_s: f64,
    client_cpu_s: f64,
    window_s: f64,
    /// No summary (h2load was stopped): the figures come from the log file.
    from_log: bool,
    /// What is wrong with the run, `+`-joined; `ok` when nothing.
    status: String,
}

impl RunResult {
    /// Requests that succeeded in the window: h2load's count, or the log's 2xx and 3xx.
    fn succeeded(&self) -> u64 {
        if self.from_log {
            self.latency.ok
        } else {
            self.summary.succeeded
        }
    }

    /// Requests that failed, errored or timed out: h2load's count, or the log's failed streams
    /// and answers other than 2xx and 3xx.
    fn failed(&self) -> u64 {
        if self.from_log {
            self.latency.failed + self.latency.answered - self.latency.ok
        } else {
            self.summary.failed + self.summary.errored + self.summary.timeout
        }
    }

    fn rps(&self) -> f64 {
        if self.from_log {
            if self.window_s > 0.0 {
                self.latency.answered as f64 / self.window_s
            } else {
                f64::NAN
            }
        } else {
            self.summary.rps.unwrap_or(f64::NAN)
        }
    }

    fn cpu_us_per_req(&self) -> f64 {
        match self.succeeded() {
            0 => f64::NAN,
            n => self.server_cpu_s * 1e6 / n as f64,
        }
    }

    fn pct(&self, cpu_s: f64) -> f64 {
        if self.window_s > 0.0 {
            cpu_s / self.window_s * 100.0
        } else {
            f64::NAN
        }
    }
}

/// What the reader of h2load's output tells its watchdog.
enum Watch {
    /// The window closed: the summary should follow within [`AFTER_WINDOW_S`].
    WindowOver,
}

/// One h2load run against `url`; `server` is the server's pid.
fn one_run(
    h2load: &Path,
    server: u32,
    url: &str,
    (conns, streams): (usize, usize),
    plan: &Plan,
    work: &Path,
    hz: u64,
) -> io::Result<RunResult> {
    let log = work.join("h2load-log.tsv");
    // h2load appends to an existing log file.
    let _ = fs::remove_file(&log);
    let warm = plan.warm_up_for(conns);
    let err_path = work.join("h2load.err");
    let mut child = Command::new(h2load)
        .arg("-t1")
        .arg(format!("-c{conns}"))
        .arg(format!("-m{streams}"))
        .arg(format!("--duration={}ms", plan.duration.as_millis()))
        .arg(format!("--warm-up-time={}ms", warm.as_millis()))
        .arg(format!("--log-file={}", log.display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&err_path)?)
        .spawn()?;
    let pid = child.id();
    // The watchdog stops h2load at its deadline: the whole run plus GRACE_S, or AFTER_WINDOW_S
    // after the window closed, whichever comes first.
    let (tell, told) = mpsc::channel::<Watch>();
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let killed = killed.clone();
        let mut deadline = Instant::now() + warm + plan.duration + Duration::from_secs(GRACE_S);
        std::thread::spawn(move || loop {
            match told.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Watch::WindowOver) => {
                    deadline = deadline.min(Instant::now() + Duration::from_secs(AFTER_WINDOW_S));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    killed.store(true, std::sync::atomic::Ordering::SeqCst);
                    // Not reaped before the watchdog is joined: the pid is still h2load's.
                    let _ = weft_sys::process::kill(
                        pid as weft_sys::process::Pid,
                        weft_sys::signal::SIGKILL,
                    );
                    return;
                }
            }
        })
    };
    let mut out = String::new();
    let (mut start, mut end) = (None, None);
    let mut sample_err = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let edge = if line.starts_with(WINDOW_START) {
                Some(&mut start)
            } else if line.starts_with(WINDOW_END) {
                Some(&mut end)
            } else {
                None
            };
            if let Some(slot) = edge {
                match cpu_now(server, pid, hz) {
                    Ok(t) => *slot = Some(t),
                    Err(e) => sample_err = Some(e),
                }
                if line.starts_with(WINDOW_END) {
                    let _ = tell.send(Watch::WindowOver);
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    drop(tell);
    let _ = watchdog.join();
    let exit = child.wait()?;
    if let Some(e) = sample_err {
        return Err(e);
    }
    let killed = killed.load(std::sync::atomic::Ordering::SeqCst);
    let summary = parse_summary(&out);
    let latency = latency_of(&fs::read_to_string(&log).unwrap_or_default());
    let _ = fs::remove_file(&log);
    let (server_cpu_s, client_cpu_s, window_s) = match (start, end) {
        (Some((s0, c0, t0)), Some((s1, c1, t1))) => (
            s1.saturating_sub(s0) as f64 / 1e9,
            c1.saturating_sub(c0) as f64 / 1e9,
            t1.saturating_duration_since(t0).as_secs_f64(),
        ),
        _ => (f64::NAN, f64::NAN, f64::NAN),
    };
    let window = start.is_some() && end.is_some();
    let mut problems = Vec::new();
    if killed && end.is_some() {
        problems.push("hung-after-window".to_string());
    } else if killed {
        problems.push("killed".to_string());
    } else if !exit.success() {
        problems.push(format!("h2load-exit-{}", exit.code().unwrap_or(-1)));
    }
    if !window {
        problems.push("no-window".into());
    }
    if summary.protocol.as_deref() != Some(plan.over.protocol()) {
        problems.push("not-h2".into());
    }
    if summary.connects_in_window {
        problems.push("connects-in-window".into());
    }
    if summary.failed + summary.errored + summary.timeout > 0 || latency.failed > 0 {
        problems.push("failed-requests".into());
    }
    let status = if problems.is_empty() {
        "ok".to_string()
    } else {
        problems.join("+")
    };
    if status != "ok" {
        let err = fs::read_to_string(&err_path).unwrap_or_default();
        let tail: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with("progress:"))
            .rev()
            .take(6)
            .collect();
        eprintln!(
            "    {status}: h2load {exit}; its last lines:\n      {}{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n      "),
            if err.trim().is_empty() {
                String::new()
            } else {
                format!("\n      stderr: {}", err.trim())
            }
        );
    }
    Ok(RunResult {
        from_log: summary.rps.is_none() && window,
        summary,
        latency,
        server_cpu_s,
        client_cpu_s,
        window_s,
        status,
    })
}

/// The server config: the experiments' cache on, room for every connection on every
/// listener, and a process-model child for each (see the module's doc).
fn server_config(max_children: usize) -> String {
    format!(
        "{}[process]\nmax_children = {max_children}\n",
        harness::CONFIG
    )
}

/// Starts weft's `model` for HTTP/2 on a free port; `Ok(None)` with a line on stderr when it
/// does not come up.
fn start_h2(
    model: &str,
    weft: &Path,
    root: &Path,
    plan: &Plan,
    env: &Env,
) -> io::Result<Option<Server>> {
    let port = free_port()?;
    let conf = env.work.join(format!("{model}-h2.toml"));
    fs::write(&conf, server_config(plan.max_children()))?;
    let mut args = harness::serve_args(&conf, root);
    args.extend(["--echo".into(), "/echo".into()]);
    if weft_sys::user::euid() == 0 {
        // The experiment runs where it is started; as root, serving as root is the choice.
        args.push("--allow-root".into());
    }
    match plan.over {
        Over::Tls => args.extend(harness::https_args(model, port, (env.cert, env.key))?),
        Over::H2c => args.extend([
            "--listen".into(),
            format!("{BIND}:{port}={model}"),
            "--h2c".into(),
        ]),
    }
    let log_path = env.work.join(format!("{model}-h2.log"));
    harness::launch(
        model,
        weft,
        &args,
        port,
        &log_path,
        env.pin,
        |status, log| {
            eprintln!(
                "# {model}: exited ({status}) before listening; skipped; its log:\n{}",
                log.trim_end()
            );
        },
    )
}

/// `h2load --version`'s line, or why there is none.
fn h2load_version(h2load: &Path) -> String {
    Command::new(h2load)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "h2load (version unknown)".into())
}

/// Runs the experiment (called by [`super::run`] for `h2`).
pub fn run(a: ExperimentArgs) -> Result<(), Box<dyn std::error::Error>> {
    let dir = out_dir(&a);
    check_overwrite(&dir, a.quick)?;
    // Bad input is refused before anything is looked for, started or written.
    let plan = plan_of(&a)?;
    let Some(h2load) = find_program("h2load") else {
        return Err(BadInput(
            "experiment h2: h2load is missing (apt-get install nghttp2-client)".into(),
        )
        .into());
    };
    let weft = built_weft(&a)?;
    // Connections on both ends: h2load's and the server's (which inherits the limit).
    let want = plan.conns.iter().copied().max().unwrap_or(0) as u64 + FD_MARGIN;
    let nofile = weft_sys::resource::raise_nofile_limit()?;
    if nofile < want {
        return Err(BadInput(format!(
            "experiment h2: the open-file limit is {nofile} (hard limit), {want} needed for \
             {} connections; raise it (ulimit -Hn) or ask for fewer (--conns)",
            want - FD_MARGIN
        ))
        .into());
    }
    let root = harness::fileset_root(&a.root, &weft)?;
    if plan.path != "/echo" && !root.join(plan.path.trim_start_matches('/')).is_file() {
        eprintln!(
            "# {}: no such file under {}: the runs will count 404s as failed",
            plan.path,
            root.display()
        );
    }
    let est = plan.estimate().as_secs();
    Setup {
        a: &a,
        root: &root,
        names: plan.models.clone(),
        runs: plan.runs,
        client: "h2load",
    }
    .run(
        |model, env| start_h2(model, &weft, &root, &plan, env),
        |list| {
            format!(
                "# h2: models {list} over {}, {} runs, about {} min {} s",
                plan.over.name(),
                plan.run_count(),
                est / 60,
                est % 60
            )
        },
        |b, env| measure(b, &plan, &h2load, env.work),
    )
}

/// A point's key: (model, connections, streams).
type Key = (String, usize, usize);
/// Every run's value of one measure, per point.
type Runs = BTreeMap<Key, Vec<f64>>;

/// The measures kept per point, by their `rows.csv` column.
const MEASURES: [&str; 5] = [
    "rps",
    "cpu_us_per_req",
    "server_cpu_pct",
    "client_cpu_pct",
    "p99_ms",
];

fn measure(
    b: &Bench,
    plan: &Plan,
    h2load: &Path,
    work: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let hz = procstat::ticks_per_second();
    let scheme = match plan.over {
        Over::Tls => "https",
        Over::H2c => "http",
    };
    let mut rows = Vec::new();
    let mut runs: BTreeMap<&str, Runs> = BTreeMap::new();
    let mut flagged: Vec<String> = Vec::new();
    let mut ciphers: Vec<String> = Vec::new();
    for &c in &plan.conns {
        for &m in &plan.streams {
            for (run, s) in each_run(b) {
                // Time for the previous run's connections to close (and, on the process
                // model, their children to exit).
                weft_fiber::sleep(Duration::from_millis(500));
                let url = format!("{scheme}://{}:{}{}", s.host, s.port, plan.path);
                let r = one_run(h2load, s.pid, &url, (c, m), plan, work, hz)?;
                let cells = [
                    r.rps(),
                    r.cpu_us_per_req(),
                    r.pct(r.server_cpu_s),
                    r.pct(r.client_cpu_s),
                    r.latency.p99_ms,
                ];
                rows.push(format!(
                    "{},{},{c},{m},{},{:.1},{},{},{:.3},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{},{}",
                    s.name,
                    plan.over.name(),
                    run + 1,
                    cells[0],
                    r.succeeded(),
                    r.failed(),
                    cells[1],
                    cells[2],
                    cells[3],
                    r.latency.p50_ms,
                    cells[4],
                    r.latency.max_ms,
                    r.window_s,
                    r.summary.protocol.as_deref().unwrap_or("none"),
                    r.status
                ));
                eprintln!(
                    "  {} c={c} m={m} run {}: {:.0} req/s, {:.2} us CPU/req, p99 {:.2} ms, \
                     client CPU {:.0}%{}",
                    s.name,
                    run + 1,
                    cells[0],
                    cells[1],
                    cells[4],
                    cells[3],
                    if r.status == "ok" {
                        String::new()
                    } else {
                        format!(", {}", r.status)
                    }
                );
                if r.status != "ok" {
                    flagged.push(format!(
                        "{} c={c} m={m} run {}: {}",
                        s.name,
                        run + 1,
                        r.status
                    ));
                }
                if let Some(cipher) = &r.summary.cipher {
                    if !ciphers.contains(cipher) {
                        ciphers.push(cipher.clone());
                    }
                }
                let k = (s.name.clone(), c, m);
                for (name, v) in MEASURES.iter().zip(cells) {
                    runs.entry(name)
                        .or_default()
                        .entry(k.clone())
                        .or_default()
                        .push(v);
                }
            }
        }
    }
    let table = write_rows(b, ROWS_HEADER, &rows)?;
    report(b, plan, h2load, &table, &runs, &flagged, &ciphers)
}

/// `rows.csv`'s columns.
pub const ROWS_HEADER: &str = "server,over,conns,streams,run,rps,succeeded,failed,\
    cpu_us_per_req,server_cpu_pct,client_cpu_pct,p50_ms,p99_ms,max_ms,window_s,protocol,status";

/// A median for the report: `n/a` when no run measured it.
fn cell(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "n/a".into()
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    b: &Bench,
    plan: &Plan,
    h2load: &Path,
    table: &charts::Rows,
    runs: &BTreeMap<&str, Runs>,
    flagged: &[String],
    ciphers: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    let med = |measure: &str, s: &str, c: usize, m: usize| {
        runs.get(measure)
            .map_or(f64::NAN, |r| harness::med(r, &(s.to_string(), c, m)))
    };
    let over = match plan.over {
        Over::Tls => format!(
            "TLS with ALPN h2 (self-signed P-256 certificate made with rcgen; cipher {})",
            if ciphers.is_empty() {
                "not reported".to_string()
            } else {
                ciphers.join(", ")
            }
        ),
        Over::H2c => "h2c (plain TCP, HTTP/2 with prior knowledge, `--h2c`)".into(),
    };
    let warm = plan.warm_up.map_or_else(
        || {
            let per: Vec<String> = plan
                .conns
                .iter()
                .map(|&c| format!("{} ms at c={c}", plan.warm_up_for(c).as_millis()))
                .collect();
            format!("1 s plus 5 ms per connection ({})", per.join(", "))
        },
        |w| format!("{} ms", w.as_millis()),
    );
    let mut md = format!(
        "# h2: the fibers paper's question asked of HTTP/2\n\n{}\
         Paper: Keller and Monien, \"Improving Http-Server Performance by Adapted \
         Multithreading\": fibers against threads, with ab and HTTP/1.0. Here HTTP/2, where one \
         connection carries many requests at once: weft's models side by side under \
         multiplexed load, c connections x m concurrent streams per connection, `GET {}` \
         over {over}. Machine: {}. weft runs `--threads 1` with `[limits] max_connections = \
         20000` and `[process] max_children = {}`: an HTTP/2 connection holds a \
         process-model child for as long as it is open, so with the default 256 the \
         connections past the 256th would wait in the master for a child and their streams \
         would never start; twice the largest c leaves room for the previous run's children \
         still exiting.\n\n\
         Client: {} (`h2load -t1 -cC -mM --warm-up-time W -D D --log-file`), one thread. \
         weft-bench's own client speaks HTTP/1.1 only; h2load is the standard HTTP/2 load \
         generator and keeps exactly m streams open on each of its c connections. Each run: a \
         warm-up for connection setup (TLS handshakes, the process model's forks) of {warm}, \
         then a {} ms window; median of {} run(s), the models' order rotated each run.\n\n\
         - req/s: h2load's summary, requests done in the window over its nominal length \
         (`window_s` in rows.csv is the window as measured here).\n\
         - server CPU per request: the CPU of the server's process tree (`/proc`: utime + \
         stime, and for single-threaded processes such as the process model's children the \
         exact run time of `/proc/PID/schedstat`) between h2load's lines `{WINDOW_START}` \
         and `{WINDOW_END}` (read as they are printed), over the requests h2load reports \
         succeeded in the window.\n\
         - p99: nearest rank over the latencies of h2load's `--log-file` (the window's \
         requests, start to end of response). Requests still in flight when the window \
         closes are in neither count, so at large c x m the longest waits are undercounted.\n\
         - client CPU: h2load's own CPU over the window, of its one core: near 100% the \
         client, not the server, sets the pace.\n\n\
         Each cell: req/s (server CPU us per request, server CPU % of its core, p99 ms).\n\n",
        quick_note(b),
        plan.path,
        b.machine,
        plan.max_children(),
        h2load_version(h2load),
        plan.duration.as_millis(),
        b.runs,
    );
    let mut csv = String::from(
        "server,conns,streams,median_rps,median_cpu_us_per_req,median_server_cpu_pct,\
         median_client_cpu_pct,median_p99_ms\n",
    );
    let servers = server_names(b);
    let streams: Vec<String> = plan.streams.iter().map(|m| m.to_string()).collect();
    for &c in &plan.conns {
        writeln!(
            md,
            "## {c} connections\n\n| model | {} |\n|---|{}",
            plan.streams
                .iter()
                .map(|m| format!("m={m}"))
                .collect::<Vec<_>>()
                .join(" | "),
            "---|".repeat(plan.streams.len())
        )?;
        for s in &names {
            let mut cells = Vec::new();
            for &m in &plan.streams {
                let [x, u, sp, cp, p99] = MEASURES.map(|k| med(k, s, c, m));
                writeln!(
                    csv,
                    "{s},{c},{m},{},{},{},{},{}",
                    cell(x, 1),
                    cell(u, 3),
                    cell(sp, 1),
                    cell(cp, 1),
                    cell(p99, 3)
                )?;
                cells.push(format!(
                    "{} ({} us, {}%, {} ms)",
                    cell(x, 0),
                    cell(u, 2),
                    cell(sp, 0),
                    cell(p99, 2)
                ));
            }
            writeln!(md, "| {s} | {} |", cells.join(" | "))?;
        }
        let tops: Vec<f64> = plan
            .streams
            .iter()
            .map(|&m| {
                names
                    .iter()
                    .map(|s| med("client_cpu_pct", s, c, m))
                    .filter(|v| v.is_finite())
                    .fold(f64::NAN, f64::max)
            })
            .collect();
        let client: Vec<String> = plan
            .streams
            .iter()
            .zip(&tops)
            .map(|(m, &top)| format!("m={m}: {}%", cell(top, 0)))
            .collect();
        writeln!(
            md,
            "\nh2load's CPU (the busiest model's run): {}{}\n",
            client.join(", "),
            if tops.iter().any(|&t| t >= 95.0) {
                ". At or near 100% of its core, h2load, not the server, set those req/s (the \
                 server's CPU % says how much of its own core it needed): compare the models \
                 there by CPU per request."
            } else {
                ""
            }
        )?;
        if names.contains(&"fiber") && names.contains(&"thread") {
            let gains: Vec<String> = plan
                .streams
                .iter()
                .map(|&m| {
                    let g = med("rps", "fiber", c, m) / med("rps", "thread", c, m) - 1.0;
                    let cpu = med("cpu_us_per_req", "fiber", c, m)
                        / med("cpu_us_per_req", "thread", c, m);
                    format!(
                        "m={m}: {} req/s, {}x the CPU per request",
                        if g.is_finite() {
                            format!("{:+.0}%", g * 100.0)
                        } else {
                            "n/a".into()
                        },
                        cell(cpu, 2)
                    )
                })
                .collect();
            writeln!(
                md,
                "fiber over thread: {} (the paper, HTTP/1.0: +50% on the 4-byte echo, +26% on \
                 the 10,541-byte page)\n",
                gains.join("; ")
            )?;
        }
        for measure in charts::H2_MEASURES {
            md.push_str(&chart(
                b,
                &charts::h2(
                    table,
                    &servers,
                    &c.to_string(),
                    &streams,
                    measure,
                    super::label(b),
                )?,
            )?);
        }
        md.push('\n');
    }
    md.push_str("## Runs flagged\n\n");
    if flagged.is_empty() {
        md.push_str(
            "None: every run spoke HTTP/2, set up all its connections before the window, and \
             had no failed request.\n",
        );
    } else {
        md.push_str(
            "`connects-in-window`: a connection was set up inside the window (the warm-up was \
             too short); `failed-requests`: h2load counted failed, errored or timed-out \
             requests; `not-h2`: another protocol was agreed; `hung-after-window`: h2load had \
             not printed its summary 5 s after its window closed (it waits for connections \
             still being set up) and was stopped: req/s is the log file's answered requests \
             over the window's wall time, CPU per request over its 2xx and 3xx; `killed`: \
             h2load was stopped before its window closed (no figures); `no-window`: h2load did \
             not print its window's edges (no CPU figures).\n\n",
        );
        for f in flagged {
            writeln!(md, "- {f}")?;
        }
    }
    harness::write_report(b, &csv, &md)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h2load 1.52.0's standard output, `-c10 -m10 -D1s --warm-up-time 1s` against weft's
    /// fiber model over TLS (the progress lines from 20% to 90% left out).
    const TLS_OUT: &str = "starting benchmark...
spawning thread #0: 10 total client(s). Timing-based test with 1s of warm-up time and 1s of main duration for measurements.
Warm-up started for thread #0.
progress: 10% of clients started
progress: 100% of clients started
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 2.00s, 212090.00 req/s, 13.75MB/s
requests: 212090 total, 212090 started, 212090 done, 212090 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 212090 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 13.75MB (14422120) total, 23.96MB (25121980) headers (space savings 48.89%), 2.08MB (2184520) data
                     min         max         mean         sd        +/- sd
time for request:      122us      4.63ms       247us       104us    98.54%
time for connect:        0us         0us         0us         0us     0.00%
time to 1st byte:        0us         0us         0us         0us     0.00%
req/s           :   21153.85    21235.29    21197.21       22.57    80.00%
";

    /// h2load 1.52.0, `-c2 -m2 -n10` over h2c to a path weft does not have (404; the progress
    /// lines from 20% to 90% left out).
    const H2C_404_OUT: &str = "starting benchmark...
spawning thread #0: 2 total client(s). 10 total requests
Application protocol: h2c
progress: 10% done
progress: 100% done

finished in 841us, 11890.61 req/s, 2.50MB/s
requests: 10 total, 10 started, 10 done, 0 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 0 2xx, 0 3xx, 10 4xx, 0 5xx
traffic: 2.16KB (2208) total, 480B (480) headers (space savings 47.25%), 1.42KB (1450) data
                     min         max         mean         sd        +/- sd
time for request:       77us       172us       120us        34us    70.00%
time for connect:      126us       247us       186us        84us   100.00%
time to 1st byte:      346us       455us       400us        77us   100.00%
req/s           :    6557.94     7663.20     7110.57      781.54   100.00%
";

    /// Lines of h2load 1.52.0's summary, `-c1000 -m100` against the process model over TLS
    /// whose connections were still being set up when the window began: `time for connect`
    /// has values.
    const SPILLED: &str = "Application protocol: h2
finished in 5.58s, 36900.00 req/s, 2.42MB/s
requests: 73800 total, 159800 started, 73800 done, 73800 succeeded, 0 failed, 0 errored, 0 timeout
time for connect:   203.03ms       1.20s    723.04ms    269.41ms    59.53%
";

    /// The first lines of the TLS run's `--log-file`.
    const LOG: &str = "1796555694947968\t200\t169
1796555694947971\t200\t218
1796555694947971\t200\t220
1796555694947971\t200\t222
1796555694947970\t200\t224
";

    #[test]
    fn h2loads_summary_is_read() {
        let s = parse_summary(TLS_OUT);
        assert_eq!(s.rps, Some(212_090.0));
        assert_eq!(
            (s.total, s.done, s.succeeded, s.failed, s.errored, s.timeout),
            (212_090, 212_090, 212_090, 0, 0, 0)
        );
        assert_eq!(s.protocol.as_deref(), Some("h2"));
        assert_eq!(s.cipher.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
        assert!(!s.connects_in_window);
        assert!(TLS_OUT.lines().any(|l| l.starts_with(WINDOW_START)));
        assert!(TLS_OUT.lines().any(|l| l.starts_with(WINDOW_END)));

        let s = parse_summary(H2C_404_OUT);
        assert_eq!(s.rps, Some(11_890.61));
        assert_eq!((s.done, s.succeeded, s.failed), (10, 0, 10));
        assert_eq!(s.protocol.as_deref(), Some("h2c"));
        assert_eq!(s.cipher, None);
        assert!(s.connects_in_window);

        let s = parse_summary(SPILLED);
        assert!(s.connects_in_window);
        assert_eq!((s.total, s.succeeded), (73_800, 73_800));

        // Killed before its summary: nothing but the protocol.
        let s = parse_summary("starting benchmark...\nApplication protocol: h2\n");
        assert_eq!((s.rps, s.succeeded), (None, 0));
    }

    #[test]
    fn h2loads_log_lines_are_read() {
        assert_eq!(
            parse_log_line("1796555694947968\t200\t169"),
            Some(LogLine {
                start_us: 1_796_555_694_947_968,
                status: 200,
                latency_us: 169
            })
        );
        // A failed stream, and a later version's extra column.
        assert_eq!(parse_log_line("17\t-1\t5").map(|l| l.status), Some(-1));
        assert_eq!(
            parse_log_line("17\t200\t5\tx").map(|l| l.latency_us),
            Some(5)
        );
        assert_eq!(parse_log_line("17 200 5"), None);
        assert_eq!(parse_log_line("17\t200"), None);

        let l = latency_of(LOG);
        assert_eq!((l.answered, l.ok, l.failed, l.unreadable), (5, 5, 0, 0));
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (0.22, 0.224, 0.224));
        let l = latency_of("1\t200\t1000\n2\t-1\t9\ngarbage\n3\t404\t3000\n");
        assert_eq!((l.answered, l.ok, l.failed, l.unreadable), (2, 1, 1, 1));
        assert_eq!((l.p50_ms, l.p99_ms), (1.0, 3.0));
        assert!(latency_of("").p99_ms.is_nan());
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 0.99), 99.0);
        assert_eq!(nearest_rank(&v, 0.50), 50.0);
        assert_eq!(nearest_rank(&v, 1.0), 100.0);
        assert_eq!(nearest_rank(&v, 0.0), 1.0);
        assert_eq!(nearest_rank(&[7], 0.99), 7.0);
        assert!(nearest_rank(&[], 0.5).is_nan());
    }

    fn args(line: &[&str]) -> ExperimentArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["weft-bench", "experiment"].iter().chain(line))
            .expect("parses");
        match cli.command {
            crate::cli::Command::Experiment(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_plans_defaults_and_flags() {
        let p = plan_of(&args(&["h2"])).unwrap();
        assert_eq!(p.over, Over::Tls);
        assert_eq!(p.path, "/echo");
        assert_eq!(p.duration, Duration::from_secs(5));
        assert_eq!((p.runs, p.warm_up), (3, None));
        assert_eq!(p.models, MODELS);
        assert_eq!(
            (p.conns.as_slice(), p.streams.as_slice()),
            (&[10, 100, 1000][..], &[1, 10, 100][..])
        );
        assert_eq!(p.warm_up_for(1000), Duration::from_secs(6));
        assert_eq!(p.max_children(), 2000);
        assert_eq!(p.run_count(), 108);
        // 3 streams x 4 models x 3 runs at each c, (1.05 + 1.5 + 6) s of warm-up and
        // 3 x (5 + 1) s: 36 x 26.55 s.
        assert_eq!(p.estimate().as_secs(), 955);

        let p = plan_of(&args(&[
            "h2",
            "--over",
            "h2c",
            "--path",
            "/haewelmann.html",
            "--duration",
            "1s",
            "--warm-up",
            "500ms",
            "--runs",
            "1",
            "--models",
            "thread,fiber",
            "--conns",
            "10,100",
            "--streams",
            "1,10",
        ]))
        .unwrap();
        assert_eq!(p.over, Over::H2c);
        assert_eq!(p.path, "/haewelmann.html");
        assert_eq!(p.models, ["thread", "fiber"]);
        assert_eq!(p.warm_up_for(100), Duration::from_millis(500));
        assert_eq!(p.max_children(), 256);
        let q = plan_of(&args(&["h2", "--quick"])).unwrap();
        assert_eq!((q.runs, q.duration), (1, Duration::from_secs(1)));
        assert_eq!(
            (q.conns.as_slice(), q.streams.as_slice()),
            (&[10, 100][..], &[1, 10][..])
        );
        assert!(
            q.estimate() < Duration::from_secs(120),
            "{:?}",
            q.estimate()
        );
    }

    #[test]
    fn bad_plans_are_refused_with_the_reason() {
        for (line, why) in [
            (&["h2", "--over", "quic"][..], "--over quic: tls or h2c"),
            (&["h2", "--path", "echo"], "--path \"echo\""),
            (
                &["h2", "--duration", "10ms"],
                "--duration must be at least 100ms",
            ),
            (&["h2", "--warm-up", "0s"], "--warm-up must be at least 1ms"),
            (&["h2", "--runs", "0"], "--runs must be at least 1"),
            (
                &["h2", "--models", "fiber,forked"],
                "\"forked\" is not a model",
            ),
            (&["h2", "--models", "fiber,fiber"], "fiber named twice"),
            (&["h2", "--conns", "0"], "--conns 0: from 1 to 10000"),
            (&["h2", "--conns", "10,10"], "--conns: 10 named twice"),
            (
                &["h2", "--streams", "200"],
                "SETTINGS_MAX_CONCURRENT_STREAMS",
            ),
            (&["h2", "--servers", "fiber"], "with --models"),
            (&["h2", "--link", "10mbit"], "--link is not supported"),
        ] {
            let err = plan_of(&args(line)).unwrap_err().0;
            assert!(err.contains(why), "{line:?}: {err}");
        }
        assert!(!flags_given(&args(&["fibers", "--runs", "2"])));
        assert!(flags_given(&args(&["fibers", "--streams", "2"])));
    }

    #[test]
    fn the_cpu_count_finds_the_tree_and_its_threads() {
        // Field 20 (num_threads) is 3 here; a name with spaces and parentheses.
        let text = "42 (we ft) (x) S 1 42 42 0 -1 4194560 1061 0 0 0 150 30 7 3 20 0 3 0 123456 \
                    12345678 456 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let p = parse_proc(text).unwrap();
        assert_eq!((p.stat.pid, p.stat.ppid, p.threads), (42, 1, 3));
        assert_eq!(p.stat.ticks(), 190);
        let me = std::process::id();
        let procs = scan().unwrap();
        let mine = tree(me, &procs);
        assert_eq!(mine[0].stat.pid, me);
        assert!(tree(0xffff_fff0, &procs).is_empty());
        // This test's own process runs threads of the test harness: stat's ticks.
        let hz = procstat::ticks_per_second();
        let (a, _, _) = cpu_now(me, me, hz).unwrap();
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(50) {
            std::hint::black_box(spin.elapsed());
        }
        let (b, _, _) = cpu_now(me, me, hz).unwrap();
        assert!(b >= a, "{a} -> {b}");
    }

    #[test]
    fn the_servers_config_gives_every_connection_a_child() {
        let text = server_config(2000);
        assert!(text.contains("[process]\nmax_children = 2000\n"), "{text}");
        assert!(text.contains("max_connections = 20000"), "{text}");
    }
}
