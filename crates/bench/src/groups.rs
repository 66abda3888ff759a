//! `weft-bench groups`: the client of "Threaded vs Process-driven HTTP server". Each of
//! `clients` clients runs `groups` groups one after the other; a group is `concurrency` GETs
//! at once, each on a fresh connection (as the paper's `wget` processes were), and ends when
//! all of them have completed. The clients run at the same time.
//!
//! A request's completion time runs from the start of its connect to the last byte of its
//! body; the body must be as long as its `Content-Length` says (else a read error).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::sync::Mutex;

use crate::client::{self, Deadlines, Failure};
use crate::response::{ReadBuf, ResponseParser};
use crate::stats::{ErrorKind, Recorder};
use crate::target::Target;

/// Read buffer of one request (a fresh one per request, as a new client process would have).
const READ_BUFFER: usize = 64 * 1024;

/// A groups run.
#[derive(Debug, Clone)]
pub struct GroupsConfig {
    /// The URL, its request asking for `Connection: close`.
    pub target: Target,
    pub clients: usize,
    pub groups: usize,
    pub concurrency: usize,
    pub threads: usize,
    pub timeout: Duration,
}

/// What a groups run measured.
#[derive(Debug, Clone)]
pub struct GroupsResult {
    /// Completion times and counts of every request of every client.
    pub recorder: Recorder,
    /// From the start of the first group to the end of the last client's last group.
    pub elapsed: Duration,
}

/// Runs the clients and returns the measurements.
pub fn run(cfg: &GroupsConfig) -> io::Result<GroupsResult> {
    let threads = cfg.threads.max(1);
    let rt = weft_fiber::Runtime::builder()
        .workers(threads)
        .name("weft-bench")
        .build()?;
    let rec = Arc::new(Mutex::new(Recorder::new()));
    let target = Arc::new(cfg.target.clone());
    let start = Instant::now();
    let clients: Vec<_> = (0..cfg.clients.max(1))
        .map(|c| {
            let (rec, target, cfg) = (rec.clone(), target.clone(), cfg.clone());
            rt.spawn_on(c % threads, move || client_loop(&cfg, &target, &rec))
        })
        .collect();
    for c in clients {
        c.join()
            .map_err(|e| io::Error::other(format!("client fiber failed: {e:?}")))?;
    }
    let elapsed = start.elapsed();
    rt.shutdown();
    let recorder = rec.lock().clone();
    Ok(GroupsResult { recorder, elapsed })
}

/// One client: its groups in sequence, each group's requests as fibers on this worker.
fn client_loop(cfg: &GroupsConfig, target: &Arc<Target>, rec: &Arc<Mutex<Recorder>>) {
    for _ in 0..cfg.groups {
        let group: Vec<_> = (0..cfg.concurrency)
            .map(|_| {
                let (target, rec, timeout) = (target.clone(), rec.clone(), cfg.timeout);
                weft_fiber::spawn(move || one_request(&target, timeout, &rec))
            })
            .collect();
        for r in group {
            // A request fiber records its own outcome; a panic would be a bug here.
            r.join().expect("request fiber");
        }
    }
}

fn one_request(t: &Target, timeout: Duration, rec: &Mutex<Recorder>) {
    let start = Instant::now();
    let d = Deadlines {
        timeout: start + timeout,
        run_end: None,
    };
    let mut rb = ReadBuf::new(READ_BUFFER);
    let mut parser = ResponseParser::new();
    let result = client::open(t, d)
        .and_then(|mut s| client::exchange_on(&mut s, &t.request, t.head, &mut parser, &mut rb, d));
    let done = Instant::now();
    match result {
        Ok(r) => {
            let ns = u64::try_from((done - start).as_nanos()).unwrap_or(u64::MAX);
            rec.lock()
                .response(r.head.status, ns, r.wire_bytes, r.body_bytes);
        }
        Err(Failure::Error(kind)) => rec.lock().error(kind),
        // A groups run has no end time, so every wait ends by its own timeout.
        Err(Failure::Cut) => rec.lock().error(ErrorKind::Timeout),
    }
}
