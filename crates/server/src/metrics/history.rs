//! The dashboard's memory: the server's figures sampled every second, the last [`SAMPLES`]
//! kept (five minutes), in shared memory, so that the `process` model's connection processes,
//! which answer its status requests, read what the server process samples.
//!
//! Layout: a block for the server and one per listener (at most [`MAX_LISTENERS`]), each
//! [`SAMPLES`] rows of fixed fields (counters as they stood, gauges as they were); a listener's
//! block is written only once the listener exists, so unused blocks cost address space, not
//! memory. Slot 0 counts the samples written: the sampler fills row `n % SAMPLES` of every
//! block, then publishes `n + 1`; a reader takes the rows below the count it read, less the
//! oldest (the one the sampler may be filling again).
//!
//! Rates (requests per second, bytes per second, CPU) are the differences between
//! consecutive rows over the time between them; latency quantiles come from the difference of
//! the `last_byte_out` histogram (`[timing]`) between two samples, so each is that second's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::{ListenerMetrics, Metrics, Phase, CLASSES, PHASE_BUCKETS};
use crate::config::Model;
use weft_sys::shm::SharedSlice;

/// Samples kept: five minutes at one a second.
pub const SAMPLES: usize = 300;
/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Listeners the history follows (the first ones registered).
pub const MAX_LISTENERS: usize = 16;
/// Version of the status JSON's layout (`version`), raised when a field changes meaning or
/// goes; new fields do not raise it.
pub const JSON_VERSION: u64 = 1;

/// The server's fields in a row.
mod server {
    pub const TIME_MS: usize = 0;
    pub const CPU_US: usize = 1;
    pub const RESIDENT: usize = 2;
    pub const FDS: usize = 3;
    pub const CACHE_HITS: usize = 4;
    pub const CACHE_MISSES: usize = 5;
    pub const LIMIT_CONN: usize = 6;
    pub const LIMIT_REQ: usize = 7;
    pub const COMPRESSED_IN: usize = 8;
    pub const COMPRESSED_OUT: usize = 9;
    pub const FIELDS: usize = 10;
}

/// A listener's fields in a row.
mod listener {
    pub const REQUESTS: usize = 0;
    /// 1xx to 5xx: `CLASS + 0` to `CLASS + 4`.
    pub const CLASS: usize = 1;
    pub const BYTES_OUT: usize = 6;
    pub const OPEN: usize = 7;
    pub const ACCEPTED: usize = 8;
    pub const TLS_HANDSHAKES: usize = 9;
    pub const TLS_RESUMED: usize = 10;
    /// p50, p90, p99 of the second's responses, in µs (0: none that second, or no timing).
    pub const LATENCY: usize = 11;
    /// Connections waiting for a request (the shutdown registry's idle marks).
    pub const IDLE: usize = 14;
    /// The model's gauges ([`super::model_figures`]).
    pub const MODEL: usize = 15;
    pub const MODEL_FIELDS: usize = 8;
    pub const FIELDS: usize = MODEL + MODEL_FIELDS;
}

/// The latency quantiles sampled, as their JSON names.
const QUANTILES: [(f64, &str); 3] = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")];

/// The names of a model's gauges in a listener's row, in order (at most
/// `listener::MODEL_FIELDS`).
pub fn model_figures(model: Model) -> &'static [&'static str] {
    match model {
        // The runtime's, shared by every fiber listener.
        Model::Fiber => &[
            "fibers",
            "running",
            "ready",
            "parked",
            "parked_without_fiber",
            "lingering",
            "workers",
            "stack_bytes",
        ],
        Model::Thread => &["threads"],
        Model::Process => &[
            "connection_processes",
            "lingering_processes",
            "held_by_master",
            "sent_by_master",
        ],
        Model::Pipeline => &[
            "accept_threads",
            "receive_threads",
            "process_threads",
            "send_threads",
            "accept_queue",
            "receive_queue",
            "process_queue",
            "send_queue",
        ],
    }
}

/// The samples, in shared memory.
#[derive(Debug)]
pub struct History {
    /// Slot 0: samples written; then the server's block, then each listener's.
    slots: SharedSlice<AtomicU64>,
}

impl Default for History {
    fn default() -> Self {
        let len = 1 + SAMPLES * (server::FIELDS + MAX_LISTENERS * listener::FIELDS);
        History {
            slots: SharedSlice::new(len),
        }
    }
}

impl History {
    fn slot(&self, block: Option<usize>, row: usize, field: usize) -> &AtomicU64 {
        let at = match block {
            None => 1 + row * server::FIELDS + field,
            Some(l) => {
                1 + SAMPLES * server::FIELDS
                    + l * SAMPLES * listener::FIELDS
                    + row * listener::FIELDS
                    + field
            }
        };
        &self.slots[at]
    }

    /// Samples written so far.
    pub fn written(&self) -> u64 {
        self.slots[0].load(Ordering::Acquire)
    }

    /// The rows a reader may take, oldest first: at most the last `n` (sample numbers).
    fn readable(&self, n: usize) -> std::ops::Range<u64> {
        let written = self.written();
        // The oldest row kept may be being filled again.
        let kept = written.min(SAMPLES as u64 - 1);
        let from = written - kept.min(n as u64);
        from..written
    }

    fn get(&self, block: Option<usize>, sample: u64, field: usize) -> u64 {
        self.slot(block, (sample % SAMPLES as u64) as usize, field)
            .load(Ordering::Relaxed)
    }
}

/// What the sampler remembers between samples: each listener's `last_byte_out` histogram.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    last_out: Vec<[u64; PHASE_BUCKETS]>,
}

impl Sampler {
    /// Writes one row: the counters and gauges of `m` now. `fiber`: the fiber runtime's
    /// counters, where fiber listeners exist. `registry`: the shutdown registry, whose idle
    /// marks give the idle connections.
    pub(crate) fn sample(
        &mut self,
        m: &Metrics,
        fiber: Option<&weft_fiber::Stats>,
        registry: Option<&crate::shutdown::Shutdown>,
    ) {
        let h = &m.history;
        let n = h.written();
        let row = (n % SAMPLES as u64) as usize;
        let put = |block: Option<usize>, field: usize, v: u64| {
            h.slot(block, row, field).store(v, Ordering::Relaxed)
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        put(None, server::TIME_MS, now);
        let (cpu, resident, fds) = m.usage();
        put(None, server::CPU_US, (cpu * 1e6) as u64);
        put(None, server::RESIDENT, resident);
        put(None, server::FDS, fds);
        let cache = m.cache_stats();
        put(None, server::CACHE_HITS, cache.map_or(0, |c| c.hits));
        put(None, server::CACHE_MISSES, cache.map_or(0, |c| c.misses));
        let (conn, req) = m.refusals();
        put(None, server::LIMIT_CONN, conn);
        put(None, server::LIMIT_REQ, req);
        let (z_in, z_out) = super::compression_totals();
        put(None, server::COMPRESSED_IN, z_in);
        put(None, server::COMPRESSED_OUT, z_out);
        let ls = m.listeners();
        let idle = registry
            .map(crate::shutdown::Shutdown::idle_by_listener)
            .unwrap_or_default();
        self.last_out
            .resize(ls.len().min(MAX_LISTENERS), [0; PHASE_BUCKETS]);
        for (i, l) in ls.iter().take(MAX_LISTENERS).enumerate() {
            let b = Some(i);
            put(b, listener::REQUESTS, l.requests());
            for class in 0..CLASSES.len() {
                put(b, listener::CLASS + class, l.responses(class));
            }
            put(b, listener::BYTES_OUT, l.bytes_out());
            put(b, listener::OPEN, l.open.load(Ordering::Relaxed));
            put(b, listener::IDLE, idle.get(&l.key()).copied().unwrap_or(0));
            put(b, listener::ACCEPTED, l.accepted.load(Ordering::Relaxed));
            put(
                b,
                listener::TLS_HANDSHAKES,
                l.tls_handshakes.load(Ordering::Relaxed),
            );
            put(
                b,
                listener::TLS_RESUMED,
                l.tls_resumed.load(Ordering::Relaxed),
            );
            let out = l.phases[Phase::LastByteOut as usize].stats(Phase::LastByteOut);
            let mut second = out;
            for (d, (now, before)) in second
                .buckets
                .iter_mut()
                .zip(out.buckets.iter().zip(&self.last_out[i]))
            {
                *d = now.saturating_sub(*before);
            }
            second.count = second.buckets.iter().sum();
            self.last_out[i] = out.buckets;
            for (k, (q, _)) in QUANTILES.iter().enumerate() {
                put(
                    b,
                    listener::LATENCY + k,
                    second.quantile_us(*q).unwrap_or(0),
                );
            }
            // Every field, so a row reused leaves no older figure behind.
            let values = model_values(l, fiber);
            for k in 0..listener::MODEL_FIELDS {
                put(b, listener::MODEL + k, values.get(k).copied().unwrap_or(0));
            }
        }
        m.history.slots[0].store(n + 1, Ordering::Release);
    }
}

/// A listener's model gauges now, in [`model_figures`]' order.
fn model_values(l: &ListenerMetrics, fiber: Option<&weft_fiber::Stats>) -> Vec<u64> {
    match l.model {
        Model::Fiber => fiber.map_or_else(Vec::new, |s| {
            let alive = s.spawned.saturating_sub(s.finished);
            // Stacks of the fibers alive and the warm free ones: what fiber stacks can hold
            // resident (at most; a stack's untouched pages are not).
            let stacks = (alive + s.stacks_warm as u64) * s.stack_size as u64;
            vec![
                alive,
                s.running as u64,
                s.ready as u64,
                s.blocked as u64,
                s.idle as u64,
                s.lingering as u64,
                s.workers as u64,
                stacks,
            ]
        }),
        Model::Thread => vec![l.open.load(Ordering::Relaxed)],
        Model::Process => l
            .model_gauges
            .iter()
            .take(model_figures(Model::Process).len())
            .map(|g| g.load(Ordering::Relaxed))
            .collect(),
        Model::Pipeline => l.report().map_or_else(Vec::new, |r| r.gauges()),
    }
}

/// The last `n` seconds of history as the status JSON's `history` block (see
/// docs/status-json.md): per second, rates from consecutive samples and gauges as sampled.
#[inline(never)]
pub(crate) fn json(m: &Metrics, n: usize) -> Value {
    let h = &m.history;
    // n rates need n + 1 samples.
    let rows: Vec<u64> = h.readable(n.saturating_add(1)).collect();
    let pairs: Vec<(u64, u64)> = rows.windows(2).map(|w| (w[0], w[1])).collect();
    let secs = |(a, b): (u64, u64)| {
        let ms = h
            .get(None, b, server::TIME_MS)
            .saturating_sub(h.get(None, a, server::TIME_MS));
        (ms as f64 / 1e3).max(1e-3)
    };
    let rate = |block: Option<usize>, field: usize| -> Value {
        pairs
            .iter()
            .map(|&(a, b)| {
                let d = h
                    .get(block, b, field)
                    .saturating_sub(h.get(block, a, field));
                round(d as f64 / secs((a, b)))
            })
            .collect::<Vec<_>>()
            .into()
    };
    let gauge = |block: Option<usize>, field: usize| -> Value {
        pairs
            .iter()
            .map(|&(_, b)| h.get(block, b, field))
            .collect::<Vec<_>>()
            .into()
    };
    // part / whole over each second, null where whole did not change.
    let ratio = |block: Option<usize>, part: usize, whole: &dyn Fn(Option<usize>, u64) -> u64| {
        pairs
            .iter()
            .map(|&(a, b)| {
                let p = h.get(block, b, part).saturating_sub(h.get(block, a, part));
                let w = whole(block, b).saturating_sub(whole(block, a));
                if w == 0 {
                    Value::Null
                } else {
                    round(p as f64 / w as f64)
                }
            })
            .collect::<Vec<_>>()
            .into()
    };
    let mut out = Map::new();
    out.insert("interval_ms".into(), (INTERVAL.as_millis() as u64).into());
    out.insert("t_ms".into(), gauge(None, server::TIME_MS));
    let cpu: Vec<Value> = pairs
        .iter()
        .map(|&(a, b)| {
            let us = h
                .get(None, b, server::CPU_US)
                .saturating_sub(h.get(None, a, server::CPU_US));
            round(us as f64 / 1e6 / secs((a, b)) * 100.0)
        })
        .collect();
    out.insert("cpu_percent".into(), cpu.into());
    out.insert("resident_bytes".into(), gauge(None, server::RESIDENT));
    out.insert("open_fds".into(), gauge(None, server::FDS));
    let lookups = |block: Option<usize>, s: u64| {
        h.get(block, s, server::CACHE_HITS) + h.get(block, s, server::CACHE_MISSES)
    };
    out.insert(
        "cache_hit_ratio".into(),
        ratio(None, server::CACHE_HITS, &lookups),
    );
    out.insert(
        "limit_conn_rejected_per_s".into(),
        rate(None, server::LIMIT_CONN),
    );
    out.insert(
        "limit_req_rejected_per_s".into(),
        rate(None, server::LIMIT_REQ),
    );
    let compressed_in = |block: Option<usize>, s: u64| h.get(block, s, server::COMPRESSED_IN);
    out.insert(
        "compression_ratio".into(),
        ratio(None, server::COMPRESSED_OUT, &compressed_in),
    );
    let mut listeners = Vec::new();
    for (i, l) in m.listeners().iter().take(MAX_LISTENERS).enumerate() {
        let b = Some(i);
        let mut e = Map::new();
        e.insert("addr".into(), l.addr.to_string().into());
        e.insert("model".into(), l.model.name().into());
        e.insert("requests_per_s".into(), rate(b, listener::REQUESTS));
        let mut classes = Map::new();
        for (k, name) in CLASSES.iter().enumerate() {
            classes.insert((*name).into(), rate(b, listener::CLASS + k));
        }
        e.insert("responses_per_s".into(), classes.into());
        e.insert("bytes_out_per_s".into(), rate(b, listener::BYTES_OUT));
        e.insert("connections_open".into(), gauge(b, listener::OPEN));
        // The process model's connections are marked in the processes that serve them: its
        // idle ones are in its figures (`held_by_master`, `lingering_processes`).
        if l.model != Model::Process {
            e.insert("connections_idle".into(), gauge(b, listener::IDLE));
        }
        e.insert("accepted_per_s".into(), rate(b, listener::ACCEPTED));
        e.insert(
            "tls_handshakes_per_s".into(),
            rate(b, listener::TLS_HANDSHAKES),
        );
        let handshakes = |block: Option<usize>, s: u64| h.get(block, s, listener::TLS_HANDSHAKES);
        e.insert(
            "tls_resumed_ratio".into(),
            ratio(b, listener::TLS_RESUMED, &handshakes),
        );
        let mut latency = Map::new();
        for (k, (_, name)) in QUANTILES.iter().enumerate() {
            let v: Vec<Value> = pairs
                .iter()
                .map(|&(_, s)| match h.get(b, s, listener::LATENCY + k) {
                    0 => Value::Null,
                    us => us.into(),
                })
                .collect();
            latency.insert((*name).into(), v.into());
        }
        e.insert("latency_us_at_most".into(), latency.into());
        let mut figures = Map::new();
        for (k, name) in model_figures(l.model).iter().enumerate() {
            figures.insert((*name).into(), gauge(b, listener::MODEL + k));
        }
        e.insert("model_figures".into(), figures.into());
        listeners.push(Value::Object(e));
    }
    out.insert("listeners".into(), listeners.into());
    Value::Object(out)
}

/// `x` to three decimals, as a JSON number.
fn round(x: f64) -> Value {
    json!((x * 1e3).round() / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn metrics_with(model: Model) -> (Metrics, std::sync::Arc<ListenerMetrics>) {
        let m = Metrics::default();
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let l = m.add_listener(addr, model);
        (m, l)
    }

    /// Writes a sample as if `at_ms` were the clock.
    fn sample_at(s: &mut Sampler, m: &Metrics, at_ms: u64) {
        s.sample(m, None, None);
        let last = m.history.written() - 1;
        let row = (last % SAMPLES as u64) as usize;
        m.history
            .slot(None, row, server::TIME_MS)
            .store(at_ms, Ordering::Relaxed);
    }

    #[test]
    fn rates_come_from_consecutive_samples_over_the_time_between_them() {
        let (m, l) = metrics_with(Model::Thread);
        let mut s = Sampler::default();
        sample_at(&mut s, &m, 10_000);
        for _ in 0..30 {
            l.response(200, 100);
        }
        l.response(404, 50);
        l.response(503, 50);
        sample_at(&mut s, &m, 12_000);
        let j = json(&m, 10);
        assert_eq!(j["t_ms"], json!([12_000]));
        let e = &j["listeners"][0];
        assert_eq!(e["model"], "thread");
        // 32 responses over two seconds.
        assert_eq!(e["requests_per_s"], json!([16.0]));
        assert_eq!(e["responses_per_s"]["2xx"], json!([15.0]));
        assert_eq!(e["responses_per_s"]["4xx"], json!([0.5]));
        assert_eq!(e["responses_per_s"]["5xx"], json!([0.5]));
        assert_eq!(e["bytes_out_per_s"], json!([1550.0]));
        assert_eq!(j["limit_req_rejected_per_s"], json!([0.0]));
        assert_eq!(j["compression_ratio"], json!([null]));
        // No TLS handshake, no cache, no timing: no ratio, no latency.
        assert_eq!(e["tls_resumed_ratio"], json!([null]));
        assert_eq!(j["cache_hit_ratio"], json!([null]));
        assert_eq!(e["latency_us_at_most"]["p99"], json!([null]));
        assert_eq!(e["model_figures"]["threads"], json!([0]));
        assert!(j["resident_bytes"][0].as_u64().unwrap() > 0);
        assert!(j["open_fds"][0].as_u64().unwrap() > 0);
    }

    #[test]
    fn latency_is_each_seconds_own_and_the_resumption_ratio_each_seconds_handshakes() {
        let (m, l) = metrics_with(Model::Process);
        let mut s = Sampler::default();
        let out = &l.phases[Phase::LastByteOut as usize];
        // Before the first sample: not counted in the first second.
        for _ in 0..100 {
            out.record(Duration::from_millis(50));
        }
        sample_at(&mut s, &m, 1_000);
        for _ in 0..98 {
            out.record(Duration::from_micros(300));
        }
        for _ in 0..2 {
            out.record(Duration::from_millis(3));
        }
        l.tls_handshakes.fetch_add(4, Ordering::Relaxed);
        l.tls_resumed.fetch_add(3, Ordering::Relaxed);
        l.model_gauges[0].store(7, Ordering::Relaxed);
        sample_at(&mut s, &m, 2_000);
        sample_at(&mut s, &m, 3_000);
        let j = json(&m, 10);
        let e = &j["listeners"][0];
        // 300 µs lies in [256, 512), 3 ms in [2048, 4096).
        assert_eq!(e["latency_us_at_most"]["p50"], json!([512, null]));
        assert_eq!(e["latency_us_at_most"]["p90"], json!([512, null]));
        assert_eq!(e["latency_us_at_most"]["p99"], json!([4096, null]));
        assert_eq!(e["tls_handshakes_per_s"], json!([4.0, 0.0]));
        assert_eq!(e["tls_resumed_ratio"], json!([0.75, null]));
        assert_eq!(e["model_figures"]["connection_processes"], json!([7, 7]));
    }

    #[test]
    fn idle_connections_are_the_registrys_idle_marks_per_listener() {
        let m = Metrics::default();
        let a = m.add_listener("127.0.0.1:1".parse().unwrap(), Model::Fiber);
        let b = m.add_listener("127.0.0.1:2".parse().unwrap(), Model::Process);
        let registry = std::sync::Arc::new(crate::shutdown::Shutdown::default());
        let idle = registry.register_on(-1, a.key());
        let busy = registry.register_on(-1, a.key());
        let other = registry.register_on(-1, b.key());
        idle.set_idle(true);
        other.set_idle(true);
        busy.set_idle(false);
        let mut s = Sampler::default();
        for at in [1_000, 2_000] {
            s.sample(&m, None, Some(&registry));
            let row = ((m.history.written() - 1) % SAMPLES as u64) as usize;
            m.history
                .slot(None, row, server::TIME_MS)
                .store(at, Ordering::Relaxed);
        }
        let j = json(&m, 5);
        assert_eq!(j["listeners"][0]["connections_idle"], json!([1]));
        // The process model's are counted in its own processes: not given.
        assert!(j["listeners"][1].get("connections_idle").is_none());
    }

    #[test]
    fn the_history_keeps_the_last_five_minutes_and_never_the_row_being_written() {
        let (m, _l) = metrics_with(Model::Fiber);
        let mut s = Sampler::default();
        for i in 0..(SAMPLES as u64 + 50) {
            sample_at(&mut s, &m, 1_000 * i);
        }
        let j = json(&m, 10_000);
        let t = j["t_ms"].as_array().unwrap();
        // SAMPLES - 1 rows readable, one fewer rates.
        assert_eq!(t.len(), SAMPLES - 2);
        assert_eq!(t.last().unwrap(), &json!(1_000 * (SAMPLES as u64 + 49)));
        assert_eq!(t[0], json!(1_000 * 52));
        // Without a runtime's counters the fiber figures read 0.
        assert_eq!(j["listeners"][0]["model_figures"]["fibers"][0], json!(0));
        // A short window: the last ones.
        assert_eq!(json(&m, 2)["t_ms"].as_array().unwrap().len(), 2);
        assert_eq!(json(&m, 0)["t_ms"], json!([]));
    }

    #[test]
    fn an_empty_history_is_empty_series() {
        let (m, _l) = metrics_with(Model::Pipeline);
        let j = json(&m, 300);
        assert_eq!(j["t_ms"], json!([]));
        assert_eq!(j["listeners"][0]["requests_per_s"], json!([]));
        assert_eq!(
            j["listeners"][0]["model_figures"]
                .as_object()
                .unwrap()
                .len(),
            8
        );
    }
}
