//! Counters per listener, read by the status page and the Prometheus endpoint. Relaxed atomics:
//! each counter is exact on its own; a snapshot across counters is not a transaction.
//!
//! A listener's counters live in shared memory ([`weft_sys::shm::Shared`]): in the
//! `process` model every connection is served by a child that exits afterwards, so the parent
//! and all children must add to the same counters for the status page to see them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::cache::{ResponseCache, Stats as CacheStats};
use crate::config::Model;
use weft_sys::shm::{AtomicsOnly, Shared};

pub mod history;
pub use history::History;

/// Live figures a model adds to its listener's status (the pipeline's stages and controller).
pub trait ModelReport: Send + Sync + std::fmt::Debug {
    /// The figures as JSON, under the model's name in the listener's entry.
    fn json(&self) -> serde_json::Value;
    /// The figures as an HTML fragment for the status page.
    fn html(&self) -> String;

    /// The gauges the dashboard's history keeps, in the order
    /// [`history::model_figures`] names them for the model.
    fn gauges(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// Counters of one listening socket (its [`Counters`], reached through `Deref`).
#[derive(Debug)]
pub struct ListenerMetrics {
    /// The listener's bound address.
    pub addr: SocketAddr,
    /// The concurrency model serving it.
    pub model: Model,
    counters: Shared<Counters>,
    report: std::sync::OnceLock<Arc<dyn ModelReport>>,
    /// Connections start with a PROXY protocol header (`[[listen]] proxy_protocol`).
    proxy_protocol: std::sync::atomic::AtomicBool,
    /// Connections start with a TLS handshake (`[[listen]] tls`).
    tls: std::sync::atomic::AtomicBool,
    /// Plain requests are redirected to https (`[[listen]] redirect_https`).
    redirect_https: std::sync::atomic::AtomicBool,
    /// HTTP/2 is offered in ALPN on this TLS listener (`[[listen]] http2`).
    http2: std::sync::atomic::AtomicBool,
    /// A plain connection that begins with the HTTP/2 preface speaks HTTP/2 (`[[listen]]
    /// h2c`).
    h2c: std::sync::atomic::AtomicBool,
    /// `[[listen]] conn_per_ip` (`u64::MAX`: not set) and the table zone it counts in.
    conn_per_ip: AtomicU64,
    conn_zone: std::sync::atomic::AtomicU32,
}

/// The counters proper, in memory shared with forked children.
#[derive(Debug)]
pub struct Counters {
    /// Responses and their bytes, one stripe per thread (threads share a stripe beyond
    /// [`STRIPES`]): every response adds to them, and one cache line that every worker wrote
    /// would pass between the cores at each write. Read as their sums.
    stripes: [ResponseStripe; STRIPES],
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Idle keep-alive connections closed to make room at `limits.max_connections`.
    pub reclaimed: AtomicU64,
    /// Connections that spoke HTTP/2 (ALPN h2 or the h2c preface).
    pub h2_connections: AtomicU64,
    /// Responses sent over HTTP/2 (one per stream answered; also in the status counts).
    pub h2_requests: AtomicU64,
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// Of those, how many resumed a session (a ticket or a session ID).
    pub tls_resumed: AtomicU64,
    /// Gauges of the model that have no other home in this process (the `process` model's
    /// master writes them: [`history::model_figures`]).
    pub model_gauges: [AtomicU64; 8],
    /// Where requests' time went (`[timing]`), one histogram per [`Phase`].
    pub phases: [PhaseHistogram; PHASES],
}

// SAFETY: only AtomicU64 fields (directly or in arrays of `ResponseStripe` and
// `PhaseHistogram`, themselves only AtomicU64s); all-zero is every counter at 0.
unsafe impl AtomicsOnly for Counters {}

/// One thread's share of a listener's response counters, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct ResponseStripe {
    /// Responses by status code: index `code - 100` for 100..=599 (a code a handler set
    /// outside that range counts at the nearer end).
    by_status: [AtomicU64; STATUS_CODES],
    /// Bytes of responses written (head and body).
    bytes_out: AtomicU64,
}

/// Stripes of response counters per listener (4 KiB each; pages no thread wrote to stay
/// unbacked).
pub const STRIPES: usize = 16;

/// This thread's stripe: threads take the next one in turn on their first response.
#[inline]
fn stripe() -> usize {
    thread_local! {
        static STRIPE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    STRIPE.with(|s| {
        let i = s.get();
        if i < STRIPES {
            return i;
        }
        let i = NEXT.fetch_add(1, Relaxed) % STRIPES;
        s.set(i);
        i
    })
}

/// Status codes counted one by one: 100 to 599.
pub const STATUS_CODES: usize = 500;

/// The phases of a request that `[timing]` measures (the CGI paper's breakdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Connection accepted to the first byte of its first request.
    AcceptToFirstByte,
    /// First byte of a request to its head received and parsed.
    Head,
    /// Waiting for and reading request-body bytes (inside the handler's reads).
    BodyRead,
    /// The handler (or the CGI script's fork, exec and run) less its body reads.
    Handler,
    /// Head parsed to the first response byte handed to the kernel.
    FirstByteOut,
    /// Head parsed to the last response byte handed to the kernel.
    LastByteOut,
}

/// How many [`Phase`]s there are.
pub const PHASES: usize = 6;

impl Phase {
    /// Every phase, in request order.
    pub const ALL: [Phase; PHASES] = [
        Phase::AcceptToFirstByte,
        Phase::Head,
        Phase::BodyRead,
        Phase::Handler,
        Phase::FirstByteOut,
        Phase::LastByteOut,
    ];

    /// The phase's name in the status JSON, the metrics and `Server-Timing`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::AcceptToFirstByte => "accept",
            Phase::Head => "head",
            Phase::BodyRead => "body",
            Phase::Handler => "handler",
            Phase::FirstByteOut => "first_byte_out",
            Phase::LastByteOut => "last_byte_out",
        }
    }
}

/// Buckets of a phase histogram: bucket 0 counts durations under 1 µs, bucket `i` in
/// 1..=30 those in [2^(i-1), 2^i) µs, bucket 31 everything from 2^30 µs (18 minutes) on.
pub const PHASE_BUCKETS: usize = 32;

/// A log2 histogram of durations, in shared memory like the other counters.
#[derive(Debug)]
pub struct PhaseHistogram {
    /// Durations counted per bucket (see [`PHASE_BUCKETS`]).
    pub buckets: [AtomicU64; PHASE_BUCKETS],
    /// Durations counted.
    pub count: AtomicU64,
    /// Their sum, in nanoseconds.
    pub sum_ns: AtomicU64,
}

impl PhaseHistogram {
    /// Its counts now, as `phase`'s (an upstream server's response times use this type too).
    pub(crate) fn stats(&self, phase: Phase) -> PhaseStats {
        let mut st = PhaseStats {
            phase,
            count: self.count.load(Relaxed),
            mean_us: 0.0,
            buckets: [0; PHASE_BUCKETS],
        };
        for (b, c) in st.buckets.iter_mut().zip(&self.buckets) {
            *b = c.load(Relaxed);
        }
        if st.count > 0 {
            st.mean_us = self.sum_ns.load(Relaxed) as f64 / st.count as f64 / 1e3;
        }
        st
    }

    /// Counts one duration.
    pub(crate) fn record(&self, d: std::time::Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }
}

/// The bucket of a duration of `us` microseconds.
fn bucket_of(us: u64) -> usize {
    let b = (u64::BITS - us.leading_zeros()) as usize; // 0 for 0 µs, 1 for 1 µs, 2 for 2-3 ...
    b.min(PHASE_BUCKETS - 1)
}

/// The exclusive upper bound of bucket `i` in microseconds (`None`: unbounded).
pub fn bucket_upper_us(i: usize) -> Option<u64> {
    (i + 1 < PHASE_BUCKETS).then(|| 1u64 << i)
}

/// A phase's histogram summed over listeners.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseStats {
    /// The phase.
    pub phase: Phase,
    /// Durations counted.
    pub count: u64,
    /// Their mean, in microseconds.
    pub mean_us: f64,
    /// Durations per bucket (see [`PHASE_BUCKETS`]).
    pub buckets: [u64; PHASE_BUCKETS],
}

impl PhaseStats {
    /// The upper bound (µs) of the bucket holding quantile `q` (0..1): the true value lies
    /// within a factor of two below it. `None` when nothing was counted.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_upper_us(i).unwrap_or(u64::MAX));
            }
        }
        None
    }
}

impl std::ops::Deref for ListenerMetrics {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.counters
    }
}

impl ListenerMetrics {
    /// The key its connections are registered under in the shutdown registry (its address in
    /// memory: one per listener for the process's life).
    pub(crate) fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Fresh counters for a listener.
    pub(crate) fn new(addr: SocketAddr, model: Model) -> ListenerMetrics {
        ListenerMetrics {
            addr,
            model,
            counters: Shared::new(),
            report: std::sync::OnceLock::new(),
            proxy_protocol: std::sync::atomic::AtomicBool::new(false),
            tls: std::sync::atomic::AtomicBool::new(false),
            redirect_https: std::sync::atomic::AtomicBool::new(false),
            http2: std::sync::atomic::AtomicBool::new(true),
            h2c: std::sync::atomic::AtomicBool::new(false),
            conn_per_ip: AtomicU64::new(u64::MAX),
            conn_zone: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// The connections per client address this listener allows and the zone of the
    /// client table they are counted in: its own `[[listen]] conn_per_ip` in a zone of its
    /// own, else `server` (`limits.conn_per_ip`) in the server's zone 0.
    pub(crate) fn conn_per_ip(&self, server: usize) -> (usize, u32) {
        match self.conn_per_ip.load(Relaxed) {
            u64::MAX => (server, 0),
            own => (
                usize::try_from(own).unwrap_or(usize::MAX),
                self.conn_zone.load(Relaxed),
            ),
        }
    }

    /// Sets [`ListenerMetrics::conn_per_ip`] for the `index`th listener (once, when it is
    /// bound).
    pub(crate) fn set_conn_per_ip(&self, limit: Option<u32>, index: usize) {
        if let Some(limit) = limit {
            self.conn_per_ip.store(u64::from(limit), Relaxed);
            let index = u32::try_from(index).unwrap_or(u32::MAX >> 1) & (u32::MAX >> 1);
            self.conn_zone.store(LISTENER_ZONES | index, Relaxed);
        }
    }

    /// Whether connections to this listener start with a PROXY protocol header.
    pub fn proxy_protocol(&self) -> bool {
        self.proxy_protocol.load(Relaxed)
    }

    /// True if this listener serves HTTPS.
    pub fn tls(&self) -> bool {
        self.tls.load(Relaxed)
    }

    /// True if this plain listener answers every request with a redirect to https.
    pub fn redirect_https(&self) -> bool {
        self.redirect_https.load(Relaxed)
    }

    /// Sets [`ListenerMetrics::tls`] and [`ListenerMetrics::redirect_https`] (once, when the
    /// listener is bound).
    pub(crate) fn set_tls(&self, tls: bool, redirect_https: bool) {
        self.tls.store(tls, Relaxed);
        self.redirect_https.store(redirect_https, Relaxed);
    }

    /// True if ALPN offers `h2` on this TLS listener.
    pub fn http2(&self) -> bool {
        self.http2.load(Relaxed)
    }

    /// True if this plain listener takes HTTP/2 with prior knowledge (h2c).
    pub fn h2c(&self) -> bool {
        self.h2c.load(Relaxed)
    }

    /// Sets [`ListenerMetrics::http2`] and [`ListenerMetrics::h2c`] (once, when the listener
    /// is bound).
    pub(crate) fn set_http2(&self, http2: bool, h2c: bool) {
        self.http2.store(http2, Relaxed);
        self.h2c.store(h2c, Relaxed);
    }

    /// Sets [`ListenerMetrics::proxy_protocol`] (once, when the listener is bound).
    pub(crate) fn set_proxy_protocol(&self, on: bool) {
        self.proxy_protocol.store(on, Relaxed);
    }

    /// Adds the model's live figures to this listener's status (the first one set stays).
    pub(crate) fn set_report(&self, report: Arc<dyn ModelReport>) {
        let _ = self.report.set(report);
    }

    /// The model's live figures, if it reports any.
    pub fn report(&self) -> Option<&Arc<dyn ModelReport>> {
        self.report.get()
    }

    /// Counts one response.
    pub(crate) fn response(&self, status: u16, bytes: u64) {
        self.responses_of(status, 1, bytes);
    }

    /// Counts `n` responses of `status`, `bytes` in all. Once per write, out of line: inlined,
    /// it costs the connection loop around it registers.
    #[inline(never)]
    pub(crate) fn responses_of(&self, status: u16, n: u64, bytes: u64) {
        // One counter per code; the classes are their sums (`responses`), not counted apart.
        let code = usize::from(status).clamp(100, 100 + STATUS_CODES - 1) - 100;
        let stripe = &self.stripes[stripe()];
        stripe.by_status[code].fetch_add(n, Relaxed);
        stripe.bytes_out.fetch_add(bytes, Relaxed);
    }

    /// Counts `d` in `phase`'s histogram.
    pub(crate) fn phase(&self, phase: Phase, d: std::time::Duration) {
        self.phases[phase as usize].record(d);
    }

    /// Total responses.
    pub fn requests(&self) -> u64 {
        self.stripes
            .iter()
            .flat_map(|s| &s.by_status)
            .map(|c| c.load(Relaxed))
            .sum()
    }

    /// Responses of status class `class` (0 = 1xx … 4 = 5xx): the sum of its codes' counters
    /// (a code outside 100..=599 counts at the nearer end, so in the 1xx or 5xx class).
    pub fn responses(&self, class: usize) -> u64 {
        let codes = STATUS_CODES / 5;
        self.stripes
            .iter()
            .flat_map(|s| &s.by_status[class * codes..(class + 1) * codes])
            .map(|c| c.load(Relaxed))
            .sum()
    }

    /// Responses of status `code` (100..=599; a code outside counts at the nearer end).
    pub fn status_count(&self, code: u16) -> u64 {
        let i = usize::from(code).clamp(100, 100 + STATUS_CODES - 1) - 100;
        self.stripes
            .iter()
            .map(|s| s.by_status[i].load(Relaxed))
            .sum()
    }

    /// Bytes of responses written (head and body).
    pub fn bytes_out(&self) -> u64 {
        self.stripes.iter().map(|s| s.bytes_out.load(Relaxed)).sum()
    }
}

/// Responses of one connection counted as they are encoded and added to its listener's
/// counters in one step when their write goes out (and at the latest when the tally is
/// dropped): a batch of pipelined responses of one status is two atomic additions, not two
/// per response.
pub(crate) struct Tally<'a> {
    listener: &'a ListenerMetrics,
    status: u16,
    n: u64,
    bytes: u64,
}

impl<'a> Tally<'a> {
    pub(crate) fn new(listener: &'a ListenerMetrics) -> Tally<'a> {
        Tally {
            listener,
            status: 0,
            n: 0,
            bytes: 0,
        }
    }

    /// Counts a response of `status` and `bytes`.
    #[inline]
    pub(crate) fn add(&mut self, status: u16, bytes: u64) {
        if self.n > 0 && status != self.status {
            self.flush();
        }
        self.status = status;
        self.n += 1;
        self.bytes += bytes;
    }

    /// Adds what was counted to the listener's counters.
    #[inline]
    pub(crate) fn flush(&mut self) {
        if self.n > 0 {
            self.listener.responses_of(self.status, self.n, self.bytes);
            self.n = 0;
            self.bytes = 0;
        }
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Marks a connection open for as long as it lives.
#[derive(Debug)]
pub(crate) struct OpenGuard(Arc<ListenerMetrics>);

impl OpenGuard {
    /// Counts an accepted connection as open.
    pub fn new(m: Arc<ListenerMetrics>) -> OpenGuard {
        m.accepted.fetch_add(1, Relaxed);
        m.open.fetch_add(1, Relaxed);
        OpenGuard(m)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

/// Bytes given to the compressors and the bytes they gave back, over every process (the
/// `process` model's children compress too): made when the first [`Metrics`] is, before any
/// fork.
static COMPRESSION: std::sync::LazyLock<Shared<[AtomicU64; 2]>> =
    std::sync::LazyLock::new(Shared::new);

/// Counts a compression: `input` bytes in, `output` bytes out (identity variants excluded).
pub(crate) fn count_compression(input: u64, output: u64) {
    COMPRESSION[0].fetch_add(input, Relaxed);
    COMPRESSION[1].fetch_add(output, Relaxed);
}

/// Bytes compressed so far: (in, out).
pub(crate) fn compression_totals() -> (u64, u64) {
    (COMPRESSION[0].load(Relaxed), COMPRESSION[1].load(Relaxed))
}

/// Every listener's counters.
#[derive(Debug)]
pub struct Metrics {
    /// When the metrics were made (the server's start; `uptime_seconds`).
    pub started: Instant,
    /// The server's process, whose `process_*` figures `/_weft/metrics` reports: taken when
    /// the metrics are made, before the `process` model forks, so a connection process that
    /// answers the request reports the server, not itself.
    server_pid: u32,
    listeners: Mutex<Vec<Arc<ListenerMetrics>>>,
    /// The response cache, when it is on (replaced when a reload replaces the cache).
    cache: Mutex<Option<Arc<ResponseCache>>>,
    /// Whether requests are timed (`[timing]`): the status JSON carries `phases` only then,
    /// rather than histograms that nothing fills.
    timing: AtomicBool,
    /// The per-client table, whose rejections `/_weft/metrics` reports.
    clients: Mutex<Option<Arc<dyn Exposed>>>,
    /// The `[[upstream]]` groups of the current generation.
    upstreams: Mutex<Option<Arc<dyn Exposed>>>,
    /// The certificates the current generation serves (`crate::tls::Certificates`).
    certificates: Mutex<Option<Arc<dyn Exposed>>>,
    /// The dashboard's last minutes ([`history`]), in shared memory.
    pub(crate) history: History,
    /// The `process` model's master, whose CPU (its children's included), memory and
    /// descriptors the dashboard adds to the server's (0: none).
    master_pid: std::sync::atomic::AtomicU32,
    /// A sampler thread runs ([`Metrics::start_sampler`]).
    sampling: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        // Mapped now, before the `process` model forks, so its children count into it.
        std::sync::LazyLock::force(&COMPRESSION);
        Metrics {
            started: Instant::now(),
            server_pid: std::process::id(),
            listeners: Mutex::new(Vec::new()),
            cache: Mutex::new(None),
            timing: AtomicBool::new(false),
            clients: Mutex::new(None),
            upstreams: Mutex::new(None),
            certificates: Mutex::new(None),
            history: History::default(),
            master_pid: std::sync::atomic::AtomicU32::new(0),
            sampling: AtomicBool::new(false),
        }
    }
}

/// Counters kept by a part of the server above this module (the per-client table of
/// `limits_ip`), which `/_weft/metrics` reports with the rest.
pub(crate) trait Exposed: Send + Sync + std::fmt::Debug {
    /// Appends the counters in the Prometheus text format.
    fn prometheus(&self, out: &mut String);

    /// The same for the status JSON, if it shows them (`Null`: not).
    fn json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Connections refused by `limits.conn_per_ip` and requests refused by `[rate_limit]`,
    /// for the dashboard's history (the per-client table's; others have none).
    fn refusals(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// The high bit of a zone marks a listener's own connection count (`[[listen]] conn_per_ip`;
/// the low bits are its index). Zone 0 is the server's; a site's request rate is 1 + its index.
pub(crate) const LISTENER_ZONES: u32 = 1 << 31;

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

impl Metrics {
    /// Notes the `process` model's master, whose figures the dashboard adds to the server's.
    pub(crate) fn set_master(&self, pid: u32) {
        self.master_pid.store(pid, Relaxed);
    }

    /// Starts the dashboard's sampler ([`history`]): a thread that samples every
    /// [`history::INTERVAL`] until `stop` is set (once per `Metrics`; later calls do nothing).
    /// `fiber`: the fiber runtime, where fiber listeners exist.
    pub(crate) fn start_sampler(
        self: &Arc<Self>,
        fiber: Option<weft_fiber::Handle>,
        stop: Arc<crate::shutdown::Shutdown>,
    ) -> std::io::Result<()> {
        if self.sampling.swap(true, Relaxed) {
            return Ok(());
        }
        let m = self.clone();
        std::thread::Builder::new()
            .name("weft-sampler".into())
            .spawn(move || {
                let mut sampler = history::Sampler::default();
                let mut next = Instant::now();
                while !stop.is_set() {
                    let stats = fiber.as_ref().map(weft_fiber::Handle::stats);
                    sampler.sample(&m, stats.as_ref(), Some(&stop));
                    next += history::INTERVAL;
                    let now = Instant::now();
                    if next <= now {
                        // Fell behind (a stopped process): start again from now.
                        next = now + history::INTERVAL;
                    }
                    std::thread::sleep(next - now);
                }
            })
            .map(drop)
    }

    /// Registers a listener and returns its counters.
    pub(crate) fn add_listener(&self, addr: SocketAddr, model: Model) -> Arc<ListenerMetrics> {
        let m = Arc::new(ListenerMetrics::new(addr, model));
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(m.clone());
        m
    }

    /// Reports `cache`'s counters with the listeners' (`None`: the cache is off).
    pub(crate) fn set_cache(&self, cache: Option<Arc<ResponseCache>>) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = cache;
    }

    /// Connections refused by `limits.conn_per_ip` and requests by `[rate_limit]`, so far.
    pub(crate) fn refusals(&self) -> (u64, u64) {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or((0, 0), |c| c.refusals())
    }

    /// Reports the per-client table's counters (`limits_ip`).
    pub(crate) fn set_clients(&self, table: Arc<dyn Exposed>) {
        *self.clients.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
    }

    /// The upstream groups' servers as the status JSON has them (`Null` without groups).
    pub(crate) fn upstreams_json(&self) -> serde_json::Value {
        self.upstreams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(serde_json::Value::Null, |u| u.json())
    }

    /// Reports the upstream groups' servers (set again on every reload).
    pub(crate) fn set_upstreams(&self, groups: Arc<dyn Exposed>) {
        *self.upstreams.lock().unwrap_or_else(|e| e.into_inner()) = Some(groups);
    }

    /// Reports the served certificates (set again on every reload; `None`: no TLS).
    pub(crate) fn set_certificates(&self, certs: Option<Arc<dyn Exposed>>) {
        *self.certificates.lock().unwrap_or_else(|e| e.into_inner()) = certs;
    }

    /// The served certificates as the status JSON has them (`Null` without TLS).
    pub(crate) fn certificates_json(&self) -> serde_json::Value {
        self.certificates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(serde_json::Value::Null, |c| c.json())
    }

    /// Notes whether requests are timed (set again on every reload).
    pub(crate) fn set_timing(&self, on: bool) {
        self.timing.store(on, Relaxed);
    }

    /// True if requests are timed, so that the phase histograms are being filled.
    pub fn timing(&self) -> bool {
        self.timing.load(Relaxed)
    }

    /// The response cache's counters (`None` when the cache is off).
    pub(crate) fn cache_stats(&self) -> Option<CacheStats> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner()).clone();
        cache.map(|c| c.stats())
    }

    /// All listeners.
    pub fn listeners(&self) -> Vec<Arc<ListenerMetrics>> {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Total open connections over all listeners.
    pub fn open_connections(&self) -> u64 {
        self.listeners().iter().map(|l| l.open.load(Relaxed)).sum()
    }

    /// Each phase's histogram summed over every listener.
    pub fn phase_stats(&self) -> Vec<PhaseStats> {
        let ls = self.listeners();
        Phase::ALL
            .iter()
            .map(|&phase| {
                let mut st = PhaseStats {
                    phase,
                    count: 0,
                    mean_us: 0.0,
                    buckets: [0; PHASE_BUCKETS],
                };
                let mut sum_ns = 0u64;
                for l in &ls {
                    let h = &l.phases[phase as usize];
                    st.count += h.count.load(Relaxed);
                    sum_ns = sum_ns.saturating_add(h.sum_ns.load(Relaxed));
                    for (b, c) in st.buckets.iter_mut().zip(&h.buckets) {
                        *b += c.load(Relaxed);
                    }
                }
                if st.count > 0 {
                    st.mean_us = sum_ns as f64 / st.count as f64 / 1e3;
                }
                st
            })
            .collect()
    }

    /// The status as JSON. Built in parts, each in its own frame: the status page runs on a
    /// connection's fiber, whose stack may be small (`fiber.stack_size`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut status = serde_json::json!({
            "version": history::JSON_VERSION,
            "server": concat!("weft/", env!("CARGO_PKG_VERSION")),
            "model_figures": self.model_figures_json(),
            "uptime_seconds": self.started.elapsed().as_secs(),
        });
        status["process"] = self.process_json();
        let (conn_rejected, req_rejected) = self.refusals();
        status["guards"] = serde_json::json!({
            "conn_rejected": conn_rejected,
            "req_rejected": req_rejected,
        });
        let (bytes_in, bytes_out) = compression_totals();
        status["compression"] = serde_json::json!({
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
        });
        status["listeners"] = self.listeners_json();
        status["cache"] = self.cache_json();
        let upstreams = self
            .upstreams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|u| u.json());
        if let Some(v) = upstreams.filter(|v| !v.is_null()) {
            status["upstreams"] = v;
        }
        let certificates = self.certificates_json();
        if !certificates.is_null() {
            status["certificates"] = certificates;
        }
        if self.timing() {
            status["phases"] = self.phases_json();
        }
        status
    }

    /// The status JSON with the last `seconds` of the dashboard's history (`history`).
    pub fn to_json_with_history(&self, seconds: usize) -> serde_json::Value {
        let mut status = self.to_json();
        status["history"] = history::json(self, seconds);
        status
    }

    /// CPU seconds (the connection processes the master reaped included), resident bytes and
    /// open descriptors of the server process and the `process` model's master.
    pub(crate) fn usage(&self) -> (f64, u64, u64) {
        let mut pids = vec![self.server_pid];
        pids.extend(Some(self.master_pid.load(Relaxed)).filter(|&p| p != 0));
        let mut total = (0.0, 0, 0);
        for p in pids.into_iter().filter_map(|p| ProcessStats::read(p).ok()) {
            total.0 += p.cpu_seconds + p.children_cpu_seconds;
            total.1 += p.resident_bytes;
            total.2 += p.open_fds;
        }
        total
    }

    /// The names of each model's gauges in the history (`model_figures` of a listener's
    /// history), by model.
    #[inline(never)]
    fn model_figures_json(&self) -> serde_json::Value {
        let mut by_model = serde_json::Map::new();
        for l in self.listeners() {
            by_model.insert(
                l.model.name().into(),
                history::model_figures(l.model).to_vec().into(),
            );
        }
        by_model.into()
    }

    /// The server's CPU, memory and descriptors (with the `process` model's master and,
    /// for CPU, the connection processes it reaped).
    #[inline(never)]
    fn process_json(&self) -> serde_json::Value {
        let (cpu, resident, fds) = self.usage();
        serde_json::json!({
            "cpu_seconds": (cpu * 1e3).round() / 1e3,
            "resident_bytes": resident,
            "open_fds": fds,
        })
    }

    #[inline(never)]
    fn listeners_json(&self) -> serde_json::Value {
        let listeners: Vec<_> = self
            .listeners()
            .iter()
            .map(|l| {
                let mut by_class = serde_json::Map::new();
                for (i, c) in CLASSES.iter().enumerate() {
                    by_class.insert((*c).into(), l.responses(i).into());
                }
                let mut entry = serde_json::json!({
                    "addr": l.addr.to_string(),
                    "model": l.model.name(),
                    "requests": l.requests(),
                    "responses": by_class,
                    "bytes_out": l.bytes_out(),
                    "connections_accepted": l.accepted.load(Relaxed),
                    "connections_open": l.open.load(Relaxed),
                    "connections_reclaimed": l.reclaimed.load(Relaxed),
                    "http2": {
                        "connections": l.h2_connections.load(Relaxed),
                        "requests": l.h2_requests.load(Relaxed),
                    },
                    "tls": {
                        "enabled": l.tls(),
                        "handshakes": l.tls_handshakes.load(Relaxed),
                        "resumed": l.tls_resumed.load(Relaxed),
                    },
                });
                if let Some(r) = l.report() {
                    entry[l.model.name()] = r.json();
                }
                entry
            })
            .collect();
        listeners.into()
    }

    #[inline(never)]
    fn cache_json(&self) -> serde_json::Value {
        match self.cache_stats() {
            Some(c) => serde_json::json!({
                "enabled": true,
                "hits": c.hits,
                "misses": c.misses,
                "evictions": c.evictions,
                "fills": c.fills,
                "compressions": c.compressions,
                "variant_hits": c.variant_hits,
                "bytes": c.bytes,
                "entries": c.entries,
                "max_bytes": c.max_bytes,
                "max_object_bytes": c.max_object_bytes,
            }),
            None => serde_json::json!({ "enabled": false }),
        }
    }

    #[inline(never)]
    fn phases_json(&self) -> serde_json::Value {
        let mut phases = serde_json::Map::new();
        for p in self.phase_stats() {
            let mut one = serde_json::Map::new();
            one.insert("count".into(), p.count.into());
            one.insert("mean_us".into(), ((p.mean_us * 10.0).round() / 10.0).into());
            for (key, q) in [
                ("p50_us_at_most", 0.5),
                ("p90_us_at_most", 0.9),
                ("p99_us_at_most", 0.99),
            ] {
                one.insert(key.into(), p.quantile_us(q).into());
            }
            phases.insert(p.phase.name().into(), one.into());
        }
        phases.into()
    }

    /// The counters in Prometheus text exposition format (0.0.4).
    pub fn to_prometheus(&self) -> String {
        use std::fmt::Write;
        let ls = self.listeners();
        let mut out = String::new();
        let label =
            |l: &ListenerMetrics| format!("listener=\"{}\",model=\"{}\"", l.addr, l.model.name());
        out.push_str(
            "# HELP weft_requests_total Responses sent, by listener, model and status class.\n",
        );
        out.push_str("# TYPE weft_requests_total counter\n");
        for l in &ls {
            for (i, c) in CLASSES.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "weft_requests_total{{{},class=\"{c}\"}} {}",
                    label(l),
                    l.responses(i)
                );
            }
        }
        let mut family =
            |name: &str, kind: &str, help: &str, get: &dyn Fn(&ListenerMetrics) -> u64| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                for l in &ls {
                    let _ = writeln!(out, "{name}{{{}}} {}", label(l), get(l));
                }
            };
        family(
            "weft_bytes_out_total",
            "counter",
            "Response bytes written, heads included.",
            &|l| l.bytes_out(),
        );
        family(
            "weft_connections_accepted_total",
            "counter",
            "Connections accepted.",
            &|l| l.accepted.load(Relaxed),
        );
        family(
            "weft_connections_reclaimed_total",
            "counter",
            "Idle keep-alive connections closed to make room at limits.max_connections.",
            &|l| l.reclaimed.load(Relaxed),
        );
        family(
            "weft_http2_connections_total",
            "counter",
            "Connections that spoke HTTP/2 (ALPN h2 or h2c).",
            &|l| l.h2_connections.load(Relaxed),
        );
        family(
            "weft_http2_requests_total",
            "counter",
            "Responses sent over HTTP/2 (also counted in weft_requests_total).",
            &|l| l.h2_requests.load(Relaxed),
        );
        family(
            "weft_tls_handshakes_total",
            "counter",
            "TLS handshakes completed.",
            &|l| l.tls_handshakes.load(Relaxed),
        );
        family(
            "weft_tls_resumed_total",
            "counter",
            "TLS handshakes that resumed a session (ticket or session ID).",
            &|l| l.tls_resumed.load(Relaxed),
        );
        family(
            "weft_open_connections",
            "gauge",
            "Connections open now.",
            &|l| l.open.load(Relaxed),
        );
        if let Some(c) = self.cache_stats() {
            for (name, kind, help, v) in [
                (
                    "weft_cache_hits_total",
                    "counter",
                    "Static-file requests answered from the response cache.",
                    c.hits,
                ),
                (
                    "weft_cache_misses_total",
                    "counter",
                    "Files served that the cache did not hold (absent or changed; a 404 is not one).",
                    c.misses,
                ),
                (
                    "weft_cache_evictions_total",
                    "counter",
                    "Entries evicted to stay within cache.max_bytes.",
                    c.evictions,
                ),
                (
                    "weft_cache_compressions_total",
                    "counter",
                    "Compressed variants made from cached files (once per file version).",
                    c.compressions,
                ),
                (
                    "weft_cache_variant_hits_total",
                    "counter",
                    "Static-file requests answered from a cached compressed variant.",
                    c.variant_hits,
                ),
                (
                    "weft_cache_bytes",
                    "gauge",
                    "Bytes the cache's entries take (bodies, heads, keys, overhead).",
                    c.bytes,
                ),
                (
                    "weft_cache_entries",
                    "gauge",
                    "Entries in the cache.",
                    c.entries,
                ),
            ] {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
                );
            }
        }
        // What the modules above report: the per-client table, the upstream groups, the
        // certificates.
        for part in [&self.clients, &self.upstreams, &self.certificates] {
            if let Some(p) = part.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                p.prometheus(&mut out);
            }
        }
        let stats = self.phase_stats();
        if stats.iter().any(|p| p.count > 0) {
            out.push_str("# HELP weft_request_phase_seconds Time of each phase of a request ([timing]).\n# TYPE weft_request_phase_seconds histogram\n");
            for p in &stats {
                let name = p.phase.name();
                let mut cumulative = 0;
                for (i, n) in p.buckets.iter().enumerate() {
                    cumulative += n;
                    let le = match bucket_upper_us(i) {
                        Some(us) => format!("{}", us as f64 / 1e6),
                        None => "+Inf".into(),
                    };
                    let _ = writeln!(
                        out,
                        "weft_request_phase_seconds_bucket{{phase=\"{name}\",le=\"{le}\"}} {cumulative}"
                    );
                }
                let _ = writeln!(
                    out,
                    "weft_request_phase_seconds_sum{{phase=\"{name}\"}} {}\nweft_request_phase_seconds_count{{phase=\"{name}\"}} {}",
                    p.mean_us * p.count as f64 / 1e6,
                    p.count
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP weft_uptime_seconds Seconds since start.\n# TYPE weft_uptime_seconds gauge\nweft_uptime_seconds {}",
            self.started.elapsed().as_secs()
        );
        let _ = writeln!(
            out,
            "# HELP weft_log_lines_suppressed_total Error-log lines at WARN or ERROR not written: \
             more than {} in {} s from one place (a client can cause them per connection).\n\
             # TYPE weft_log_lines_suppressed_total counter\nweft_log_lines_suppressed_total {}",
            crate::log::BURST,
            crate::log::WINDOW_MS / 1000,
            crate::log::suppressed_lines()
        );
        // Named as the Prometheus client libraries' process collector and promhttp's `code`
        // label name them, so stock dashboards and alerts work unchanged.
        out.push_str(
            "# HELP weft_http_responses_total Responses sent, by listener, model and status code.\n\
             # TYPE weft_http_responses_total counter\n",
        );
        for l in &ls {
            for code in 100..100 + STATUS_CODES as u16 {
                let n = l.status_count(code);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "weft_http_responses_total{{{},code=\"{}\"}} {n}",
                        label(l),
                        code
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP weft_build_info The weft build serving.\n# TYPE weft_build_info gauge\n\
             weft_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        match ProcessStats::read(self.server_pid) {
            Ok(p) => {
                for (name, kind, help, v) in [
                    (
                        "process_cpu_seconds_total",
                        "counter",
                        "Total user and system CPU time spent in seconds.",
                        p.cpu_seconds,
                    ),
                    (
                        "process_resident_memory_bytes",
                        "gauge",
                        "Resident memory size in bytes.",
                        p.resident_bytes as f64,
                    ),
                    (
                        "process_virtual_memory_bytes",
                        "gauge",
                        "Virtual memory size in bytes.",
                        p.virtual_bytes as f64,
                    ),
                    (
                        "process_open_fds",
                        "gauge",
                        "Number of open file descriptors.",
                        p.open_fds as f64,
                    ),
                    (
                        "process_start_time_seconds",
                        "gauge",
                        "Start time of the process since unix epoch in seconds.",
                        p.start_time_seconds,
                    ),
                ] {
                    let _ = writeln!(
                        out,
                        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
                    );
                }
            }
            Err(e) => log::warn!("metrics: cannot read /proc for process_*: {e}"),
        }
        out
    }
}

/// The server process's figures from `/proc` (Linux), as the Prometheus process collector
/// reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcessStats {
    /// User and system CPU time.
    pub cpu_seconds: f64,
    /// User and system CPU time of its children that it waited for.
    pub children_cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads `/proc/PID/stat`, `/proc/PID/fd` and the boot time from `/proc/stat`.
    pub fn read(pid: u32) -> std::io::Result<ProcessStats> {
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The command name (field 2) may hold spaces and parentheses: fields 3 on follow the
        // last `)`.
        let rest = stat.rsplit_once(')').ok_or_else(|| bad("stat"))?.1;
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        // proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24 (1-based; f[0] is 3).
        let field = |n: usize| -> std::io::Result<u64> {
            f.get(n - 3)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad("stat field"))
        };
        let ticks = weft_sys::resource::clock_ticks_per_second() as f64;
        let boot = std::fs::read_to_string("/proc/stat")?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())
            .ok_or_else(|| bad("btime"))?;
        let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
        Ok(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            children_cpu_seconds: (field(16)? + field(17)?) as f64 / ticks,
            resident_bytes: field(24)? * weft_sys::mem::page_size() as u64,
            virtual_bytes: field(23)?,
            open_fds,
            start_time_seconds: boot as f64 + field(22)? as f64 / ticks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_adds_runs_of_one_status_and_the_rest_when_dropped() {
        let m = Metrics::default();
        let l = m.add_listener("127.0.0.1:1".parse().unwrap(), Model::Fiber);
        let code = |s: u16| l.status_count(s);
        let mut t = Tally::new(&l);
        t.add(200, 10);
        t.add(200, 20);
        assert_eq!(l.requests(), 0, "counted when the write goes out");
        // Another status adds the run before it.
        t.add(404, 5);
        assert_eq!((code(200), l.bytes_out()), (2, 30));
        t.add(404, 5);
        t.flush();
        assert_eq!((code(404), l.bytes_out()), (2, 40));
        t.flush();
        assert_eq!(l.requests(), 4, "a second flush adds nothing");
        t.add(503, 1);
        drop(t);
        assert_eq!((code(503), l.requests(), l.bytes_out()), (1, 5, 41));
    }

    #[test]
    fn responses_counted_on_many_threads_sum_exactly() {
        let m = Metrics::default();
        let l = m.add_listener("127.0.0.1:1".parse().unwrap(), Model::Fiber);
        // More threads than stripes, so some share one.
        let threads = STRIPES + 4;
        std::thread::scope(|s| {
            for t in 0..threads {
                let l = &l;
                s.spawn(move || {
                    for _ in 0..1000 {
                        l.response(200, 10);
                    }
                    l.response(404, t as u64);
                });
            }
        });
        let n = threads as u64;
        assert_eq!(l.status_count(200), 1000 * n);
        assert_eq!(l.status_count(404), n);
        assert_eq!(l.requests(), 1001 * n);
        assert_eq!((l.responses(1), l.responses(3)), (1000 * n, n));
        assert_eq!(l.bytes_out(), 10_000 * n + n * (n - 1) / 2);
        let p = m.to_prometheus();
        assert!(p.contains(&format!("code=\"200\"}} {}", 1000 * n)), "{p}");
    }

    #[test]
    fn counts_and_exports() {
        let m = Metrics::default();
        let l = m.add_listener("127.0.0.1:1".parse().unwrap(), Model::Thread);
        l.response(200, 100);
        l.response(404, 10);
        l.response(503, 1);
        {
            let _g = OpenGuard::new(l.clone());
            assert_eq!(m.open_connections(), 1);
        }
        assert_eq!(m.open_connections(), 0);
        let j = m.to_json();
        assert_eq!(j["listeners"][0]["requests"], 3);
        assert_eq!(j["listeners"][0]["responses"]["4xx"], 1);
        assert_eq!(j["listeners"][0]["bytes_out"], 111);
        // Requests are not timed: no phase block at all (not one of empty histograms).
        assert!(j.get("phases").is_none(), "{j}");
        let p = m.to_prometheus();
        assert!(
            p.contains(
                "weft_requests_total{listener=\"127.0.0.1:1\",model=\"thread\",class=\"2xx\"} 1\n"
            ),
            "{p}"
        );
        assert!(p.contains(
            "weft_connections_accepted_total{listener=\"127.0.0.1:1\",model=\"thread\"} 1\n"
        ));
        assert!(
            !p.contains("weft_request_phase_seconds"),
            "no phase timed: {p}"
        );
        for code in [200, 404, 503] {
            let line = format!(
                "weft_http_responses_total{{listener=\"127.0.0.1:1\",model=\"thread\",code=\"{code}\"}} 1\n"
            );
            assert!(p.contains(&line), "{line} in {p}");
        }
        assert!(!p.contains("code=\"500\""), "{p}");
        assert!(p.contains(&format!(
            "weft_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )));
    }

    #[test]
    fn process_figures_of_this_process_are_plausible() {
        let p = ProcessStats::read(std::process::id()).unwrap();
        assert!(
            p.resident_bytes > 0 && p.virtual_bytes >= p.resident_bytes,
            "{p:?}"
        );
        // stdin, stdout, stderr at least.
        assert!(p.open_fds >= 3, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and not before the test binary was built (a day's slack).
        assert!(
            p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0,
            "{p:?}"
        );
        assert!(p.cpu_seconds >= 0.0, "{p:?}");
        let text = Metrics::default().to_prometheus();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} in {text}"
            );
        }
    }

    #[test]
    fn phase_histograms_bucket_by_powers_of_two() {
        use std::time::Duration;
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 3);
        assert_eq!(bucket_of(u64::MAX), PHASE_BUCKETS - 1);
        let m = Metrics::default();
        m.set_timing(true);
        let a = m.add_listener("127.0.0.1:1".parse().unwrap(), Model::Fiber);
        let b = m.add_listener("127.0.0.1:2".parse().unwrap(), Model::Thread);
        // 90 fast heads (3 µs: bucket [2, 4)) and 10 slow ones (1000 µs: bucket [512, 1024)).
        for _ in 0..45 {
            a.phase(Phase::Head, Duration::from_micros(3));
            b.phase(Phase::Head, Duration::from_micros(3));
        }
        for _ in 0..10 {
            a.phase(Phase::Head, Duration::from_micros(1000));
        }
        let head = m.phase_stats()[Phase::Head as usize];
        assert_eq!(head.count, 100);
        assert!((head.mean_us - 102.7).abs() < 0.01, "{}", head.mean_us);
        assert_eq!(head.quantile_us(0.5), Some(4));
        assert_eq!(head.quantile_us(0.9), Some(4));
        assert_eq!(head.quantile_us(0.95), Some(1024));
        assert_eq!(
            m.phase_stats()[Phase::Handler as usize].quantile_us(0.5),
            None
        );
        let j = m.to_json();
        assert_eq!(j["phases"]["head"]["count"], 100);
        assert_eq!(j["phases"]["head"]["p99_us_at_most"], 1024);
        let p = m.to_prometheus();
        assert!(
            p.contains("weft_request_phase_seconds_bucket{phase=\"head\",le=\"0.000004\"} 90\n"),
            "{p}"
        );
        assert!(
            p.contains("weft_request_phase_seconds_count{phase=\"head\"} 100\n"),
            "{p}"
        );
    }
}
