//! A SPECweb99-like workload (Li et al., the open KETA pipeline paper, §5): static files, and
//! optionally a dynamic share.
//!
//! * The file set: `25 + (400000/122000 x connections)/5` directories (truncated), each with
//!   36 files in four classes of nine: class 0 is 102..922 bytes in steps of 102.4, class 1
//!   1..9 KiB, class 2 10..90 KiB, class 3 100..900 KiB. File `i` of class `c` is
//!   `dirNNNNN/class{c}_{i}`.
//! * A request picks its class with the frequencies 35/50/14/1 %, its directory by Zipf with
//!   alpha = 1 (directory 0 the most popular), and its file within the class by Zipf over the
//!   popularity order 4, 3, 5, 2, 6, 1, 7, 8, 0 (file 4 the most popular, all nine asked for).
//! * A client opens a keep-alive connection, sends 5 requests one after the other, closes it
//!   and opens the next. Each connection is paced at 400 kbit/s: after a response, the next
//!   request waits until the connection's bytes so far, at 400 kbit/s, would have taken since
//!   the connect; after the last one the connection is held until its schedule ends too. A
//!   connection conforms when its bit rate (bytes received over its whole life, paced end
//!   included) is at least 320 kbit/s.
//!
//! * With `dynamic` > 0, that share of operations (SPECweb99: 30%) asks for the picked
//!   file's path under `dynamic_prefix` instead: content the server makes or fetches (a
//!   handler, CGI, or an upstream such as `weft-bench backend`), sized like the file.
//!
//! The run reports the mean response time, the weighted bandwidth (all connections' bits over
//! all their time: the byte-weighted mean of their bit rates), the conforming connections,
//! operations per second and errors; a step mode (`steps`: few clients, all, few again) adds a
//! per-second timeline for controller studies.
//!
//! Random numbers come from a seeded SplitMix64, so that a run's request sequence repeats.

use std::fs;
use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use weft_fiber::sync::Mutex;

use crate::client::{self, Deadlines, Failure};
use crate::response::{ReadBuf, ResponseParser};
use crate::stats::{Errors, Percentiles, Recorder};
use crate::target::{split_url, BadInput};

/// Requests per keep-alive connection.
pub const REQUESTS_PER_CONNECTION: usize = 5;
/// Each connection's pace, bits per second.
pub const PACE_BPS: f64 = 400_000.0;
/// A connection conforms at this bit rate or more.
pub const CONFORMING_BPS: f64 = 320_000.0;
/// Class frequencies in percent.
pub const CLASS_PERCENT: [f64; 4] = [35.0, 50.0, 14.0, 1.0];
/// Files of a class from the most popular to the least.
pub const FILE_POPULARITY: [usize; 9] = [4, 3, 5, 2, 6, 1, 7, 8, 0];

/// Directories for `connections` simultaneous connections: `25 + (400000/122000 x
/// connections)/5`, truncated.
pub fn directories(connections: usize) -> usize {
    (25.0 + (400_000.0 / 122_000.0 * connections as f64) / 5.0) as usize
}

/// Size in bytes of file `file` (0..9) of class `class` (0..4).
pub fn file_size(class: usize, file: usize) -> u64 {
    let k = (file + 1) as f64;
    match class {
        0 => (102.4 * k).round() as u64,
        1 => (file as u64 + 1) * 1024,
        2 => (file as u64 + 1) * 10 * 1024,
        3 => (file as u64 + 1) * 100 * 1024,
        _ => panic!("class {class} out of 0..4"),
    }
}

/// Path of a file relative to the file set's root.
pub fn file_path(dir: usize, class: usize, file: usize) -> String {
    format!("dir{dir:05}/class{class}_{file}")
}

/// Writes the file set for `connections` connections under `root` (files already of the
/// right size are kept); returns the number of directories.
pub fn write_fileset(root: &Path, connections: usize) -> io::Result<usize> {
    let dirs = directories(connections);
    write_dirs(root, dirs)?;
    Ok(dirs)
}

/// Writes directories `0..dirs` of the file set under `root`.
pub fn write_dirs(root: &Path, dirs: usize) -> io::Result<()> {
    let biggest = file_size(3, 8) as usize;
    // Printable, deterministic content, the same for every file (a prefix of it).
    let content: Vec<u8> = (0..biggest).map(|i| b'a' + (i % 26) as u8).collect();
    for d in 0..dirs {
        let dir = root.join(format!("dir{d:05}"));
        fs::create_dir_all(&dir)?;
        for c in 0..4 {
            for f in 0..9 {
                let p = root.join(file_path(d, c, f));
                let size = file_size(c, f);
                if fs::metadata(&p).is_ok_and(|m| m.len() == size) {
                    continue;
                }
                let mut out = fs::File::create(&p)?;
                out.write_all(&content[..size as usize])?;
            }
        }
    }
    Ok(())
}

/// SplitMix64: small, fast, seedable, good enough for sampling.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Draws indices 0..n with given weights (a cumulative table and a binary search).
#[derive(Debug, Clone)]
pub struct Discrete {
    cdf: Vec<f64>,
}

impl Discrete {
    /// Weights need not sum to 1; at least one must be positive.
    pub fn new(weights: &[f64]) -> Discrete {
        let total: f64 = weights.iter().sum();
        assert!(total > 0.0, "weights must have a positive sum");
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Discrete { cdf }
    }

    /// Zipf over `n` ranks: rank `k` (from 0) has weight `1 / (k + 1)^alpha`.
    pub fn zipf(n: usize, alpha: f64) -> Discrete {
        let w: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(alpha)).collect();
        Discrete::new(&w)
    }

    /// Probability of index `i`.
    pub fn probability(&self, i: usize) -> f64 {
        self.cdf[i] - if i == 0 { 0.0 } else { self.cdf[i - 1] }
    }

    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.next_f64();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// The request mix: which file each request asks for.
#[derive(Debug, Clone)]
pub struct Mix {
    pub dirs: Discrete,
    pub classes: Discrete,
    pub files: Discrete,
}

impl Mix {
    pub fn new(dirs: usize) -> Mix {
        Mix {
            dirs: Discrete::zipf(dirs, 1.0),
            classes: Discrete::new(&CLASS_PERCENT),
            files: Discrete::zipf(9, 1.0),
        }
    }

    /// (directory, class, file) of the next request.
    pub fn pick(&self, rng: &mut Rng) -> (usize, usize, usize) {
        let class = self.classes.sample(rng);
        let dir = self.dirs.sample(rng);
        let file = FILE_POPULARITY[self.files.sample(rng)];
        (dir, class, file)
    }
}

/// The pace in bits per second for `kbit` kbit/s; 0 means unpaced (infinitely fast).
pub fn pace_bps(kbit: f64) -> Result<f64, BadInput> {
    if !kbit.is_finite() || kbit < 0.0 {
        return Err(BadInput(format!(
            "--pace-kbit {kbit}: needs a rate of 0 (unpaced) or more"
        )));
    }
    Ok(if kbit == 0.0 {
        f64::INFINITY
    } else {
        kbit * 1000.0
    })
}

/// When a paced connection may send its next request: the bytes it has received so far, at
/// `bps` bits per second, counted from its start.
pub fn paced_until(start: Instant, bytes: u64, bps: f64) -> Instant {
    start + Duration::from_secs_f64(bytes as f64 * 8.0 / bps)
}

/// A connection's bit rate: `bytes` over its life, which lasts at least as long as its pace
/// allows (`elapsed` or the paced time, the longer).
pub fn bit_rate(bytes: u64, elapsed: Duration, bps: f64) -> f64 {
    let bits = bytes as f64 * 8.0;
    let secs = elapsed.as_secs_f64().max(bits / bps);
    if secs == 0.0 {
        0.0
    } else {
        bits / secs
    }
}

/// Whether a connection with this bit rate conforms.
pub fn conforms(bit_rate: f64) -> bool {
    bit_rate >= CONFORMING_BPS
}

/// A SPECweb99-like run.
#[derive(Debug, Clone)]
pub struct SpecwebConfig {
    /// Where to connect.
    pub addr: SocketAddr,
    /// `Host` header value.
    pub authority: String,
    /// Path prefix of the file set, ending in `/`.
    pub prefix: String,
    /// Directories in the file set.
    pub dirs: usize,
    /// Clients during each step (one step: a plain run).
    pub steps: Vec<usize>,
    /// Length of each step.
    pub step_duration: Duration,
    pub threads: usize,
    pub timeout: Duration,
    pub seed: u64,
    /// Pace of each connection, bits per second.
    pub pace_bps: f64,
    /// Share of operations (0.0 to 1.0) that are dynamic: a GET of the same file's path under
    /// `dynamic_prefix` (SPECweb99: 30%), served by whatever the server maps there.
    pub dynamic: f64,
    /// Path prefix of dynamic operations, ending in `/`.
    pub dynamic_prefix: String,
}

impl SpecwebConfig {
    /// A plain run on `url` (the file set's root) for `connections` clients.
    pub fn new(url: &str, connections: usize, duration: Duration) -> Result<Self, BadInput> {
        let (authority, hostport, path) = split_url(url)?;
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| BadInput(format!("{url}: cannot resolve {hostport}: {e}")))?
            .next()
            .ok_or_else(|| BadInput(format!("{url}: {hostport} resolved to nothing")))?;
        let mut prefix = path.split('?').next().unwrap_or("/").to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Ok(SpecwebConfig {
            addr,
            authority: authority.to_string(),
            prefix,
            dirs: directories(connections),
            steps: vec![connections.max(1)],
            step_duration: duration,
            threads: 1,
            timeout: Duration::from_secs(10),
            seed: 1,
            pace_bps: PACE_BPS,
            dynamic: 0.0,
            dynamic_prefix: "/dyn/".into(),
        })
    }
}

/// Per-second counters of a run.
#[derive(Debug)]
struct Timeline {
    ops: Vec<AtomicU64>,
    bytes: Vec<AtomicU64>,
    latency_us: Vec<AtomicU64>,
    conns: Vec<AtomicU64>,
    conforming: Vec<AtomicU64>,
    errors: Vec<AtomicU64>,
}

impl Timeline {
    fn new(secs: usize) -> Timeline {
        let v = || (0..secs).map(|_| AtomicU64::new(0)).collect();
        Timeline {
            ops: v(),
            bytes: v(),
            latency_us: v(),
            conns: v(),
            conforming: v(),
            errors: v(),
        }
    }

    fn add(v: &[AtomicU64], sec: usize, n: u64) {
        if let Some(a) = v.get(sec) {
            a.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// One second of a run's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    pub second: usize,
    pub clients: usize,
    pub ops: u64,
    pub mbit_per_s: f64,
    pub mean_ms: f64,
    pub connections: u64,
    pub conforming: u64,
    pub errors: u64,
}

/// What a SPECweb99-like run measured.
#[derive(Debug, Clone, Serialize)]
pub struct SpecwebReport {
    pub clients: Vec<usize>,
    pub dirs: usize,
    pub duration_s: f64,
    pub requests: u64,
    pub ops_per_s: f64,
    pub mean_response_ms: f64,
    pub latency_us: Percentiles,
    /// All finished connections' bits over all their time, kbit/s.
    pub weighted_kbit_per_s: f64,
    /// Bytes received per second over the run, Mbit/s.
    pub throughput_mbit_per_s: f64,
    /// Connections that finished (all their requests, or an error).
    pub connections: u64,
    pub conforming: u64,
    pub conforming_pct: f64,
    pub errors: Errors,
    pub timeline: Vec<Second>,
}

impl SpecwebReport {
    pub fn human(&self) -> String {
        let e = self.errors.total();
        format!(
            "SPECweb99-like: clients {:?}, {} directories, {:.1} s\n  \
             {} requests, {:.1} ops/s, mean response {:.2} ms (p99 {:.2} ms)\n  \
             weighted bandwidth {:.1} kbit/s, throughput {:.2} Mbit/s\n  \
             connections {}: {} conforming ({:.1}%)\n  errors {e}\n",
            self.clients,
            self.dirs,
            self.duration_s,
            self.requests,
            self.ops_per_s,
            self.mean_response_ms,
            self.latency_us.p99 / 1e3,
            self.weighted_kbit_per_s,
            self.throughput_mbit_per_s,
            self.connections,
            self.conforming,
            self.conforming_pct,
        )
    }

    /// The timeline as CSV, with a header line.
    pub fn timeline_csv(&self) -> String {
        let mut s =
            String::from("second,clients,ops,mbit_per_s,mean_ms,connections,conforming,errors\n");
        for t in &self.timeline {
            s.push_str(&format!(
                "{},{},{},{:.3},{:.3},{},{},{}\n",
                t.second,
                t.clients,
                t.ops,
                t.mbit_per_s,
                t.mean_ms,
                t.connections,
                t.conforming,
                t.errors
            ));
        }
        s
    }
}

struct Shared {
    cfg: SpecwebConfig,
    mix: Mix,
    start: Instant,
    end: Instant,
    timeline: Timeline,
    /// Sum of finished connections' bits and their lifetimes in microseconds.
    conn_bits: AtomicU64,
    conn_us: AtomicU64,
}

impl Shared {
    fn new(cfg: &SpecwebConfig, start: Instant) -> Shared {
        let total = cfg.step_duration * cfg.steps.len() as u32;
        Shared {
            cfg: cfg.clone(),
            mix: Mix::new(cfg.dirs.max(1)),
            start,
            end: start + total,
            timeline: Timeline::new(run_seconds(total.as_secs_f64())),
            conn_bits: AtomicU64::new(0),
            conn_us: AtomicU64::new(0),
        }
    }

    /// Clients active at `t`.
    fn clients_at(&self, t: Instant) -> usize {
        let step = (t.saturating_duration_since(self.start).as_secs_f64()
            / self.cfg.step_duration.as_secs_f64().max(1e-9)) as usize;
        self.cfg.steps[step.min(self.cfg.steps.len() - 1)]
    }

    /// The timeline slot of `t`: its second since the start, where a response or connection
    /// that ends after the run's end (by a scheduling delay past the deadline) counts in the
    /// run's last second, so that the timeline adds up to the run's totals.
    fn second(&self, t: Instant) -> usize {
        let last = self.timeline.ops.len().saturating_sub(1);
        (t.saturating_duration_since(self.start).as_secs() as usize).min(last)
    }
}

/// Runs the workload.
pub fn run(cfg: &SpecwebConfig) -> io::Result<SpecwebReport> {
    assert!(!cfg.steps.is_empty(), "at least one step");
    let threads = cfg.threads.max(1);
    let rt = weft_fiber::Runtime::builder()
        .workers(threads)
        .name("weft-bench")
        .build()?;
    let start = Instant::now();
    let shared = Arc::new(Shared::new(cfg, start));
    let total = shared.end - start;
    let recorders: Vec<Arc<Mutex<Recorder>>> = (0..threads)
        .map(|_| Arc::new(Mutex::new(Recorder::new())))
        .collect();
    let max_clients = cfg.steps.iter().copied().max().unwrap_or(1).max(1);
    let launchers: Vec<_> = (0..threads)
        .map(|w| {
            let (sh, rec) = (shared.clone(), recorders[w].clone());
            rt.spawn_on(w, move || {
                let mine: Vec<_> = (w..max_clients)
                    .step_by(threads)
                    .map(|k| {
                        let (sh, rec) = (sh.clone(), rec.clone());
                        weft_fiber::spawn(move || client_loop(&sh, k, &rec))
                    })
                    .collect();
                mine.into_iter().try_for_each(|h| h.join().map(drop))
            })
        })
        .collect();
    for l in launchers {
        l.join()
            .and_then(|r| r)
            .map_err(|e| io::Error::other(format!("client fiber failed: {e:?}")))?;
    }
    let elapsed = start.elapsed().min(total).as_secs_f64();
    rt.shutdown();
    let mut rec = Recorder::new();
    for r in &recorders {
        rec.merge(&r.lock());
    }
    Ok(report(&shared, &rec, elapsed))
}

/// The seconds a run of `secs` seconds starts: a last, partial second is one of them.
fn run_seconds(secs: f64) -> usize {
    (secs.ceil() as usize).max(1)
}

fn report(sh: &Shared, rec: &Recorder, elapsed: f64) -> SpecwebReport {
    let tl = &sh.timeline;
    let load = |v: &[AtomicU64], i: usize| v[i].load(Ordering::Relaxed);
    let secs = run_seconds(elapsed).min(tl.ops.len());
    let timeline = (0..secs)
        .map(|i| {
            let ops = load(&tl.ops, i);
            Second {
                second: i,
                clients: sh.clients_at(sh.start + Duration::from_secs(i as u64)),
                ops,
                mbit_per_s: load(&tl.bytes, i) as f64 * 8.0 / 1e6,
                mean_ms: if ops == 0 {
                    0.0
                } else {
                    load(&tl.latency_us, i) as f64 / ops as f64 / 1e3
                },
                connections: load(&tl.conns, i),
                conforming: load(&tl.conforming, i),
                errors: load(&tl.errors, i),
            }
        })
        .collect();
    let connections: u64 = tl.conns.iter().map(|a| a.load(Ordering::Relaxed)).sum();
    let conforming: u64 = tl
        .conforming
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .sum();
    let bits = sh.conn_bits.load(Ordering::Relaxed) as f64;
    let us = sh.conn_us.load(Ordering::Relaxed) as f64;
    let lat = rec.latency_us();
    SpecwebReport {
        clients: sh.cfg.steps.clone(),
        dirs: sh.cfg.dirs,
        duration_s: elapsed,
        requests: rec.requests,
        ops_per_s: rec.requests as f64 / elapsed.max(1e-9),
        mean_response_ms: lat.mean / 1e3,
        latency_us: lat,
        weighted_kbit_per_s: if us > 0.0 { bits / us * 1e3 } else { 0.0 },
        throughput_mbit_per_s: rec.bytes as f64 * 8.0 / elapsed.max(1e-9) / 1e6,
        connections,
        conforming,
        conforming_pct: if connections == 0 {
            0.0
        } else {
            conforming as f64 * 100.0 / connections as f64
        },
        errors: rec.errors,
        timeline,
    }
}

/// One client: paced keep-alive connections of 5 requests, while the run lasts and the step
/// has room for it.
fn client_loop(sh: &Shared, k: usize, rec: &Mutex<Recorder>) {
    let mut rng = Rng::new(sh.cfg.seed ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut rb = ReadBuf::new(64 * 1024);
    let mut parser = ResponseParser::new();
    let idle = Duration::from_millis(50);
    loop {
        let now = Instant::now();
        if now >= sh.end {
            return;
        }
        if k >= sh.clients_at(now) {
            weft_fiber::sleep(idle.min(sh.end - now));
            continue;
        }
        connection(sh, &mut rng, &mut rb, &mut parser, rec);
    }
}

/// One paced connection; records its requests and, when it finished, its bit rate.
fn connection(
    sh: &Shared,
    rng: &mut Rng,
    rb: &mut ReadBuf,
    parser: &mut ResponseParser,
    rec: &Mutex<Recorder>,
) {
    let cfg = &sh.cfg;
    let start = Instant::now();
    let d = Deadlines {
        timeout: start + cfg.timeout,
        run_end: Some(sh.end),
    };
    let fail = |kind| {
        rec.lock().error(kind);
        Timeline::add(&sh.timeline.errors, sh.second(Instant::now()), 1);
        Timeline::add(&sh.timeline.conns, sh.second(Instant::now()), 1);
    };
    let s = match client::connect(cfg.addr, d) {
        Ok(s) => s,
        Err(Failure::Cut) => return,
        Err(Failure::Error(kind)) => return fail(kind),
    };
    rb.clear();
    let mut bytes = 0u64;
    for i in 0..REQUESTS_PER_CONNECTION {
        if i > 0 {
            let due = paced_until(start, bytes, cfg.pace_bps);
            if due >= sh.end {
                // Paced past the end of the run: the client waits it out, idle.
                return weft_fiber::sleep_until(sh.end);
            }
            if Instant::now() < due {
                weft_fiber::sleep_until(due);
            }
        }
        let (dir, class, file) = sh.mix.pick(rng);
        // The draw is made only when dynamic operations are on, so that a static run's
        // sequence stays what it was.
        let prefix = if cfg.dynamic > 0.0 && rng.next_f64() < cfg.dynamic {
            &cfg.dynamic_prefix
        } else {
            &cfg.prefix
        };
        let last = i + 1 == REQUESTS_PER_CONNECTION;
        let request = format!(
            "GET {}{} HTTP/1.1\r\nHost: {}\r\n{}\r\n",
            prefix,
            file_path(dir, class, file),
            cfg.authority,
            if last { "Connection: close\r\n" } else { "" }
        );
        let sent = Instant::now();
        let d = Deadlines {
            timeout: sent + cfg.timeout,
            run_end: Some(sh.end),
        };
        match client::exchange(&s, request.as_bytes(), false, parser, rb, d) {
            Ok(r) => {
                let done = Instant::now();
                let ns = u64::try_from((done - sent).as_nanos()).unwrap_or(u64::MAX);
                rec.lock()
                    .response(r.head.status, ns, r.wire_bytes, r.body_bytes);
                let sec = sh.second(done);
                Timeline::add(&sh.timeline.ops, sec, 1);
                Timeline::add(&sh.timeline.bytes, sec, r.wire_bytes);
                Timeline::add(&sh.timeline.latency_us, sec, ns / 1000);
                bytes += r.wire_bytes;
                if r.head.close && !last {
                    // The server ended the connection early: it counts as it stands.
                    break;
                }
            }
            Err(Failure::Cut) => return,
            Err(Failure::Error(kind)) => return fail(kind),
        }
    }
    drop(s);
    // The connection lasts until its pace allows it to end.
    let paced_end = paced_until(start, bytes, cfg.pace_bps);
    if paced_end > sh.end {
        return weft_fiber::sleep_until(sh.end);
    }
    if Instant::now() < paced_end {
        weft_fiber::sleep_until(paced_end);
    }
    let life = start.elapsed();
    let rate = bit_rate(bytes, life, cfg.pace_bps);
    let sec = sh.second(Instant::now());
    Timeline::add(&sh.timeline.conns, sec, 1);
    if conforms(rate) {
        Timeline::add(&sh.timeline.conforming, sec, 1);
    }
    sh.conn_bits.fetch_add(bytes * 8, Ordering::Relaxed);
    sh.conn_us.fetch_add(
        u64::try_from(life.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAWS: usize = 1_000_000;

    fn frequencies(d: &Discrete, rng: &mut Rng) -> Vec<f64> {
        let mut n = vec![0usize; d.len()];
        for _ in 0..DRAWS {
            n[d.sample(rng)] += 1;
        }
        n.into_iter().map(|c| c as f64 / DRAWS as f64).collect()
    }

    /// "Within 1%" of theory, as 1e6 draws can show it: the total variation distance (the
    /// share of draws that would have to move) at most 1%; every outcome of probability 5%
    /// or more within 1% of its own probability (at 1e6 draws its standard error is at most
    /// 0.44% of it); every outcome within 0.2 percentage point (4 standard errors at most).
    fn close(observed: &[f64], expected: &[f64]) {
        let tv: f64 = observed
            .iter()
            .zip(expected)
            .map(|(o, e)| (o - e).abs())
            .sum::<f64>()
            / 2.0;
        assert!(tv <= 0.01, "total variation {tv}");
        for (i, (o, e)) in observed.iter().zip(expected).enumerate() {
            assert!((o - e).abs() <= 0.002, "outcome {i}: {o} vs {e}");
            if *e >= 0.05 {
                assert!((o - e).abs() / e <= 0.01, "outcome {i}: {o} vs {e}");
            }
        }
    }

    #[test]
    fn directory_formula() {
        assert_eq!(directories(0), 25);
        assert_eq!(directories(1), 25);
        assert_eq!(directories(300), 221);
        assert_eq!(directories(600), 418);
        assert_eq!(directories(1000), 680);
    }

    #[test]
    fn file_sizes() {
        let c0: Vec<u64> = (0..9).map(|f| file_size(0, f)).collect();
        assert_eq!(c0, [102, 205, 307, 410, 512, 614, 717, 819, 922]);
        assert_eq!(file_size(1, 0), 1024);
        assert_eq!(file_size(1, 8), 9 * 1024);
        assert_eq!(file_size(2, 0), 10 * 1024);
        assert_eq!(file_size(3, 8), 900 * 1024);
        assert_eq!(file_path(7, 2, 3), "dir00007/class2_3");
    }

    #[test]
    fn class_frequencies() {
        let m = Mix::new(10);
        let f = frequencies(&m.classes, &mut Rng::new(42));
        close(&f, &[0.35, 0.50, 0.14, 0.01]);
    }

    #[test]
    fn zipf_frequencies() {
        let n = 221;
        let d = Discrete::zipf(n, 1.0);
        let h: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
        let expected: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64 * h)).collect();
        for (i, e) in expected.iter().enumerate() {
            assert!((d.probability(i) - e).abs() < 1e-12);
        }
        close(&frequencies(&d, &mut Rng::new(7)), &expected);
    }

    #[test]
    fn files_within_a_class_by_popularity() {
        let m = Mix::new(25);
        let mut rng = Rng::new(3);
        let mut n = [0usize; 9];
        for _ in 0..DRAWS {
            n[m.pick(&mut rng).2] += 1;
        }
        let h: f64 = (1..=9).map(|k| 1.0 / k as f64).sum();
        let mut expected = [0.0; 9];
        for (rank, &file) in FILE_POPULARITY.iter().enumerate() {
            expected[file] = 1.0 / ((rank + 1) as f64 * h);
        }
        let observed: Vec<f64> = n.iter().map(|&c| c as f64 / DRAWS as f64).collect();
        close(&observed, &expected);
        // All nine are asked for; file 4 most, file 0 least.
        assert!(n.iter().all(|&c| c > 0));
        assert_eq!(n.iter().enumerate().max_by_key(|x| x.1).unwrap().0, 4);
        assert_eq!(n.iter().enumerate().min_by_key(|x| x.1).unwrap().0, 0);
    }

    #[test]
    fn seeded_rng_repeats() {
        let a: Vec<u64> = {
            let mut r = Rng::new(9);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(9);
        assert!(a.iter().all(|&x| x == r.next_u64()));
        assert_ne!(Rng::new(10).next_u64(), a[0]);
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.next_f64())));
    }

    #[test]
    fn pacing_schedule() {
        let t0 = Instant::now();
        // 50,000 bytes at 400 kbit/s take exactly one second.
        assert_eq!(
            paced_until(t0, 50_000, PACE_BPS) - t0,
            Duration::from_secs(1)
        );
        assert_eq!(paced_until(t0, 0, PACE_BPS), t0);
        assert_eq!(
            paced_until(t0, 5_000, PACE_BPS) - t0,
            Duration::from_millis(100)
        );
    }

    #[test]
    fn conformance() {
        // A fast server: the connection is held to its pace, exactly 400 kbit/s.
        let r = bit_rate(50_000, Duration::from_millis(10), PACE_BPS);
        assert!((r - 400_000.0).abs() < 1e-6);
        assert!(conforms(r));
        // 50,000 bytes in 1.25 s: 320 kbit/s, just conforming; in 1.26 s, not.
        let r = bit_rate(50_000, Duration::from_millis(1250), PACE_BPS);
        assert!((r - 320_000.0).abs() < 1e-6);
        assert!(conforms(r));
        assert!(!conforms(bit_rate(
            50_000,
            Duration::from_millis(1260),
            PACE_BPS
        )));
        assert_eq!(bit_rate(0, Duration::ZERO, PACE_BPS), 0.0);
    }

    #[test]
    fn unpaced_connections_send_at_once_and_conform_at_any_speed() {
        assert_eq!(pace_bps(400.0).unwrap(), PACE_BPS);
        let bps = pace_bps(0.0).unwrap();
        let start = Instant::now();
        assert_eq!(paced_until(start, 10_000_000, bps), start);
        // Unpaced, the rate is the measured one: 50,000 bytes in 1 s is 400 kbit/s.
        let r = bit_rate(50_000, Duration::from_secs(1), bps);
        assert!((r - 400_000.0).abs() < 1e-6);
        assert!(pace_bps(-1.0).is_err());
        assert!(pace_bps(f64::NAN).is_err());
    }

    #[test]
    fn the_timeline_adds_up_to_the_run_even_past_its_end() {
        let at = |sh: &Shared, ms: u64| sh.second(sh.start + Duration::from_millis(ms));
        let cfg = SpecwebConfig::new("http://127.0.0.1:1/", 3, Duration::from_secs(2)).unwrap();
        let sh = Shared::new(&cfg, Instant::now());
        // A response that ends a moment after the run's end counts in its last second.
        for ms in [0, 1500, 2000, 2003, 9000] {
            Timeline::add(&sh.timeline.ops, at(&sh, ms), 1);
        }
        assert_eq!((at(&sh, 999), at(&sh, 1000), at(&sh, 2003)), (0, 1, 1));
        let r = report(&sh, &Recorder::new(), 2.0);
        let ops: Vec<u64> = r.timeline.iter().map(|s| s.ops).collect();
        assert_eq!(ops, [1, 4]);
        // A partial last second is a second of the timeline.
        let cfg = SpecwebConfig {
            step_duration: Duration::from_millis(2400),
            ..cfg
        };
        let sh = Shared::new(&cfg, Instant::now());
        Timeline::add(&sh.timeline.ops, at(&sh, 2100), 1);
        let r = report(&sh, &Recorder::new(), 2.4);
        let ops: Vec<u64> = r.timeline.iter().map(|s| s.ops).collect();
        assert_eq!(ops, [0, 0, 1]);
    }

    #[test]
    fn fileset() {
        let dir = std::env::temp_dir().join(format!("weft-specweb-{}", std::process::id()));
        write_dirs(&dir, 2).unwrap();
        for (c, f) in [(0, 0), (1, 4), (3, 8)] {
            let len = fs::metadata(dir.join(file_path(1, c, f))).unwrap().len();
            assert_eq!(len, file_size(c, f));
        }
        assert_eq!(fs::read_dir(dir.join("dir00000")).unwrap().count(), 36);
        assert!(!dir.join("dir00002").exists());
        // Written again: kept, not rewritten (same sizes).
        write_dirs(&dir, 2).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
