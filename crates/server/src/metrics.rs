//! Counters per listener, read by the status page and the Prometheus endpoint. Relaxed atomics:
//! each counter is exact on its own; a snapshot across counters is not a transaction.
//!
//! A listener's counters live in shared memory ([`crate::sys_process::Shared`]): in the
//! `process` model every connection is served by a child that exits afterwards, so the parent
//! and all children must add to the same counters for the status page to see them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::cache::{ResponseCache, Stats as CacheStats};
use crate::config::Model;
use crate::sys_process::{AtomicsOnly, Shared};

/// Counters of one listening socket (its [`Counters`], reached through `Deref`).
#[derive(Debug)]
pub struct ListenerMetrics {
    pub addr: SocketAddr,
    pub model: Model,
    counters: Shared<Counters>,
}

/// The counters proper, in memory shared with forked children.
#[derive(Debug)]
pub struct Counters {
    /// Responses by status class: index 0 = 1xx … 4 = 5xx.
    pub responses: [AtomicU64; 5],
    pub bytes_out: AtomicU64,
    pub accepted: AtomicU64,
    pub open: AtomicU64,
}

// SAFETY: only AtomicU64 fields; all-zero is every counter at 0.
unsafe impl AtomicsOnly for Counters {}

impl std::ops::Deref for ListenerMetrics {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.counters
    }
}

impl ListenerMetrics {
    /// Fresh counters for a listener.
    pub fn new(addr: SocketAddr, model: Model) -> ListenerMetrics {
        ListenerMetrics {
            addr,
            model,
            counters: Shared::new(),
        }
    }

    /// Counts one response.
    pub fn response(&self, status: u16, bytes: u64) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].fetch_add(1, Relaxed);
        self.bytes_out.fetch_add(bytes, Relaxed);
    }

    /// Total responses.
    pub fn requests(&self) -> u64 {
        self.responses.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Marks a connection open for as long as it lives.
#[derive(Debug)]
pub struct OpenGuard(Arc<ListenerMetrics>);

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

/// Every listener's counters.
#[derive(Debug)]
pub struct Metrics {
    pub started: Instant,
    listeners: Mutex<Vec<Arc<ListenerMetrics>>>,
    /// The response cache, when it is on.
    cache: std::sync::OnceLock<Arc<ResponseCache>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            started: Instant::now(),
            listeners: Mutex::new(Vec::new()),
            cache: std::sync::OnceLock::new(),
        }
    }
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

impl Metrics {
    /// Registers a listener and returns its counters.
    pub fn add_listener(&self, addr: SocketAddr, model: Model) -> Arc<ListenerMetrics> {
        let m = Arc::new(ListenerMetrics::new(addr, model));
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(m.clone());
        m
    }

    /// Reports `cache`'s counters with the listeners' (the first cache set stays).
    pub fn set_cache(&self, cache: Option<Arc<ResponseCache>>) {
        if let Some(c) = cache {
            let _ = self.cache.set(c);
        }
    }

    /// The response cache's counters (`None` when the cache is off).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.get().map(|c| c.stats())
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

    /// The status as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let listeners: Vec<_> = self
            .listeners()
            .iter()
            .map(|l| {
                let mut by_class = serde_json::Map::new();
                for (i, c) in CLASSES.iter().enumerate() {
                    by_class.insert((*c).into(), l.responses[i].load(Relaxed).into());
                }
                serde_json::json!({
                    "addr": l.addr.to_string(),
                    "model": l.model.name(),
                    "requests": l.requests(),
                    "responses": by_class,
                    "bytes_out": l.bytes_out.load(Relaxed),
                    "connections_accepted": l.accepted.load(Relaxed),
                    "connections_open": l.open.load(Relaxed),
                })
            })
            .collect();
        let mut status = serde_json::json!({
            "server": concat!("weft/", env!("CARGO_PKG_VERSION")),
            "uptime_seconds": self.started.elapsed().as_secs(),
            "listeners": listeners,
        });
        status["cache"] = match self.cache_stats() {
            Some(c) => serde_json::json!({
                "enabled": true,
                "hits": c.hits,
                "misses": c.misses,
                "evictions": c.evictions,
                "fills": c.fills,
                "bytes": c.bytes,
                "entries": c.entries,
                "max_bytes": c.max_bytes,
                "max_object_bytes": c.max_object_bytes,
            }),
            None => serde_json::json!({ "enabled": false }),
        };
        status
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
                    l.responses[i].load(Relaxed)
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
            &|l| l.bytes_out.load(Relaxed),
        );
        family(
            "weft_connections_accepted_total",
            "counter",
            "Connections accepted.",
            &|l| l.accepted.load(Relaxed),
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
                    "Static-file requests the cache could not answer (absent or changed).",
                    c.misses,
                ),
                (
                    "weft_cache_evictions_total",
                    "counter",
                    "Entries evicted to stay within cache.max_bytes.",
                    c.evictions,
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
        let _ = writeln!(
            out,
            "# HELP weft_uptime_seconds Seconds since start.\n# TYPE weft_uptime_seconds gauge\nweft_uptime_seconds {}",
            self.started.elapsed().as_secs()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
