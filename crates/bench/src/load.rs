//! `weft-bench load`: one fiber per connection on a weft-fiber runtime with `threads` workers.
//!
//! Closed loop (as wrk and ab): each connection sends its next request as soon as the previous
//! response is complete; latency runs from the send (from the connect when the request had to
//! open its connection). Open loop (`rate`, as wrk2): request `i` of the whole run is due at
//! `start + i / rate` (see [`crate::schedule`]); a connection takes the next number when free
//! and its latency runs from the due time, so a stalled server is charged for the requests it
//! kept waiting.
//!
//! A connection's loop reuses one read buffer, one response parser and the targets' prepared
//! request bytes; recording a response locks its worker's recorder, which only the fibers of
//! that worker use (uncontended: an atomic swap each way).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::sync::Mutex;

use crate::client::{self, Conn, Deadlines, Failure};
use crate::response::{ReadBuf, ResponseParser};
use crate::schedule::Schedule;
use crate::stats::Recorder;
use crate::target::Target;

/// Read buffer per connection: a 10 KiB page arrives in one read.
pub const READ_BUFFER: usize = 32 * 1024;

/// When a run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many requests in all (completed or failed).
    Requests(u64),
    /// After this long; responses still in flight then are not counted.
    Duration(Duration),
}

/// A load run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub targets: Vec<Target>,
    pub connections: usize,
    pub threads: usize,
    pub stop: Stop,
    /// Open loop at this many requests per second over all connections.
    pub rate: Option<f64>,
    /// Reuse connections (else a new connection per request, which asks for `close`).
    pub keepalive: bool,
    /// Longest wait for a connect, a write or a whole response.
    pub timeout: Duration,
    /// Print a progress line on stderr about once a second.
    pub progress: bool,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub recorder: Recorder,
    /// From the start to the end of the last connection.
    pub elapsed: Duration,
    /// Connections opened (for `https://`, each with a completed TLS handshake).
    pub connects: u64,
    /// Open loop: the requests the schedule asked for (due before the end of a timed run).
    pub scheduled: Option<u64>,
}

struct Shared {
    targets: Vec<Target>,
    /// All targets are on one address: request `i` of the run goes to target `i % n`. Else
    /// connection `k` keeps to target `k % n`, so that it can stay open.
    one_addr: bool,
    next: AtomicU64,
    limit: u64,
    end: Option<Instant>,
    schedule: Option<Schedule>,
    keepalive: bool,
    timeout: Duration,
    connects: AtomicU64,
}

impl Shared {
    /// The number of the next request, or `None` when the run is over.
    fn take(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.limit).then_some(i)
    }
}

/// Runs the load and returns its measurements.
pub fn run(cfg: &LoadConfig) -> io::Result<LoadResult> {
    assert!(!cfg.targets.is_empty(), "at least one target");
    let threads = cfg.threads.max(1);
    let rt = weft_fiber::Runtime::builder()
        .workers(threads)
        .name("weft-bench")
        .build()?;
    let recorders: Vec<Arc<Mutex<Recorder>>> = (0..threads)
        .map(|_| Arc::new(Mutex::new(Recorder::new())))
        .collect();
    let start = Instant::now();
    let (limit, end) = match cfg.stop {
        Stop::Requests(n) => (n, None),
        Stop::Duration(d) => (u64::MAX, Some(start + d)),
    };
    let one_addr = cfg.targets.iter().all(|t| t.addr == cfg.targets[0].addr);
    let shared = Arc::new(Shared {
        targets: cfg.targets.clone(),
        one_addr,
        next: AtomicU64::new(0),
        limit,
        end,
        schedule: cfg.rate.map(|r| Schedule::new(start, r)),
        keepalive: cfg.keepalive,
        timeout: cfg.timeout,
        connects: AtomicU64::new(0),
    });
    // One launcher per worker spawns that worker's connections, which all queue before any
    // runs: every connection takes part from the first request, even in a short run.
    let connections = cfg.connections.max(1);
    let launchers: Vec<_> = (0..threads)
        .map(|w| {
            let (sh, rec) = (shared.clone(), recorders[w].clone());
            rt.spawn_on(w, move || {
                let mine: Vec<_> = (w..connections)
                    .step_by(threads)
                    .map(|k| {
                        let (sh, rec) = (sh.clone(), rec.clone());
                        weft_fiber::spawn(move || connection(&sh, k, &rec))
                    })
                    .collect();
                mine.into_iter().try_for_each(|h| h.join().map(drop))?;
                Ok(Instant::now())
            })
        })
        .collect();
    if cfg.progress {
        show_progress(&launchers, &recorders, start, cfg.stop);
    }
    let mut last_end = start;
    for l in launchers {
        let end = l
            .join()
            .and_then(|r| r)
            .map_err(|e| io::Error::other(format!("connection fiber failed: {e:?}")))?;
        last_end = last_end.max(end);
    }
    let elapsed = last_end - start;
    rt.shutdown();
    let mut total = Recorder::new();
    for r in &recorders {
        total.merge(&r.lock());
    }
    Ok(LoadResult {
        recorder: total,
        elapsed,
        connects: shared.connects.load(Ordering::Relaxed),
        scheduled: shared.schedule.map(|s| match cfg.stop {
            Stop::Requests(n) => n,
            Stop::Duration(d) => s.due_within(d),
        }),
    })
}

/// Until the launchers finish, rewrites one stderr line about once a second: elapsed time,
/// requests, their rate over the last interval, errors.
fn show_progress<T>(
    launchers: &[weft_fiber::JoinHandle<T>],
    recorders: &[Arc<Mutex<Recorder>>],
    start: Instant,
    stop: Stop,
) {
    const EVERY: Duration = Duration::from_secs(1);
    const POLL: Duration = Duration::from_millis(50);
    let goal = match stop {
        Stop::Requests(n) => format!("of {n} "),
        Stop::Duration(d) => format!("in {:.0} s ", d.as_secs_f64()),
    };
    let (mut last_at, mut last_n, mut printed) = (start, 0, false);
    while !launchers.iter().all(|l| l.is_finished()) {
        // This is the main thread, not a fiber: blocking it is the point.
        weft_fiber::sleep(POLL);
        if last_at.elapsed() < EVERY {
            continue;
        }
        let (mut n, mut errors) = (0, 0);
        for r in recorders {
            let r = r.lock();
            n += r.requests;
            errors += r.errors.total();
        }
        let now = Instant::now();
        let rate = (n - last_n) as f64 / (now - last_at).as_secs_f64();
        eprint!(
            "\r  {:6.1} s  {n:>10} requests {goal} {rate:>10.0} req/s  {errors} errors ",
            (now - start).as_secs_f64()
        );
        (last_at, last_n, printed) = (now, n, true);
    }
    if printed {
        eprintln!();
    }
}

/// One connection's loop.
fn connection(sh: &Shared, k: usize, rec: &Mutex<Recorder>) {
    let mut rb = ReadBuf::new(READ_BUFFER);
    let mut parser = ResponseParser::new();
    let mut conn: Option<Conn> = None;
    let n = sh.targets.len();
    while let Some(seq) = sh.take() {
        let t = &sh.targets[if sh.one_addr {
            (seq % n as u64) as usize
        } else {
            k % n
        }];
        let start = match &sh.schedule {
            Some(s) => {
                let due = s.intended(seq);
                if sh.end.is_some_and(|end| due >= end) {
                    break;
                }
                if Instant::now() < due {
                    weft_fiber::sleep_until(due);
                }
                due
            }
            None => Instant::now(),
        };
        let now = Instant::now();
        if sh.end.is_some_and(|end| now >= end) {
            break;
        }
        let d = Deadlines {
            timeout: now + sh.timeout,
            run_end: sh.end,
        };
        let mut s = match conn.take() {
            Some(s) => s,
            None => match client::open(t, d) {
                Ok(s) => {
                    sh.connects.fetch_add(1, Ordering::Relaxed);
                    rb.clear();
                    s
                }
                Err(Failure::Cut) => break,
                Err(Failure::Error(kind)) => {
                    rec.lock().error(kind);
                    continue;
                }
            },
        };
        match client::exchange_on(&mut s, &t.request, t.head, &mut parser, &mut rb, d) {
            Ok(r) => {
                let latency = Instant::now().saturating_duration_since(start);
                let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
                rec.lock()
                    .response(r.head.status, ns, r.wire_bytes, r.body_bytes);
                if sh.keepalive && !r.head.close {
                    conn = Some(s);
                }
            }
            Err(Failure::Cut) => break,
            Err(Failure::Error(kind)) => rec.lock().error(kind),
        }
    }
}
