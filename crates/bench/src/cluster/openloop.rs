//! The timeline's client: an open loop at a fixed rate on one fiber worker, half its
//! connections keep-alive and half a connection per request, each request sent when due and
//! its latency taken from that time (no coordinated omission). Every request is a [`Sample`].

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::TcpStream;
use weft_fiber::sync::Mutex;

use super::plan::Plan;
use super::REQUEST_TIMEOUT;
use crate::client::{self, Deadlines, Failure};
use crate::load::READ_BUFFER;
use crate::response::{ReadBuf, ResponseParser};
use crate::schedule::Schedule;
use crate::stats::ErrorKind;
use crate::target::Target;

/// How a request of the open loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    /// A complete response that was not 2xx or 3xx.
    Status(u16),
    Failed(ErrorKind),
}

/// One request of the open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
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
pub(crate) fn open_loop(
    targets: [Target; 2],
    start: Instant,
    plan: &Plan,
) -> io::Result<Vec<Sample>> {
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

/// One connection of the open loop: takes the next request number until the run's end, waits
/// until it is due, sends it and records its [`Sample`] in `out`.
fn open_loop_connection(sh: &LoopShared, keepalive: bool, out: &Mutex<Vec<Sample>>) {
    let mut c = LoopConn {
        target: &sh.targets[usize::from(!keepalive)],
        keepalive,
        rb: ReadBuf::new(READ_BUFFER),
        parser: ResponseParser::new(),
        conn: None,
    };
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
        if !c.request(record) {
            break;
        }
    }
}

/// A connection's side of the open loop: its target, whether it keeps its connection, and
/// the connection (while kept) with its buffer and parser.
struct LoopConn<'a> {
    target: &'a Target,
    keepalive: bool,
    rb: ReadBuf,
    parser: ResponseParser,
    conn: Option<TcpStream>,
}

impl LoopConn<'_> {
    /// One request, on the kept connection or a new one; how it ended goes to `record`
    /// (before a connection that is not kept is closed). False when the run was cut
    /// (nothing recorded).
    fn request(&mut self, record: impl FnOnce(Outcome)) -> bool {
        let t = self.target;
        let d = Deadlines {
            timeout: Instant::now() + REQUEST_TIMEOUT,
            run_end: None,
        };
        let s = match self.conn.take() {
            Some(s) => s,
            None => match client::connect(t.addr, d) {
                Ok(s) => {
                    self.rb.clear();
                    s
                }
                Err(Failure::Error(kind)) => {
                    record(Outcome::Failed(kind));
                    return true;
                }
                Err(Failure::Cut) => return false,
            },
        };
        match client::exchange(&s, &t.request, t.head, &mut self.parser, &mut self.rb, d) {
            Ok(r) => {
                let st = r.head.status;
                record(if (200..400).contains(&st) {
                    Outcome::Ok
                } else {
                    Outcome::Status(st)
                });
                if self.keepalive && !r.head.close {
                    self.conn = Some(s);
                }
                true
            }
            Err(Failure::Error(kind)) => {
                record(Outcome::Failed(kind));
                true
            }
            Err(Failure::Cut) => false,
        }
    }
}
