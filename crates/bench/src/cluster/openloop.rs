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

pub(crate) struct LoopShared {
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

pub(crate) fn open_loop_connection(sh: &LoopShared, keepalive: bool, out: &Mutex<Vec<Sample>>) {
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
