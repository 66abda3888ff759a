//! The status page (`/_weft/status`, HTML), its JSON (`/_weft/status.json`) and Prometheus
//! metrics (`/_weft/metrics`), answered only to clients the config allows (loopback default).
//!
//! The page is a dashboard in one self-contained file (`dashboard.html`: no external script,
//! style or font, so it works on a host without internet): its script fetches
//! `status.json?history=N` every second and draws the last five minutes (the server's
//! `metrics::history`) as SVG charts written by hand, a few hundred lines where a charting
//! library would be a vendored dependency many times the page's size. The counters since start
//! are rendered into the page by the server as well, for a reader without JavaScript.

use std::sync::atomic::Ordering::Relaxed;

use weft_http::Method;

use crate::config::Cidr;
use crate::metrics::{history as metrics_history, Metrics};
use crate::response::Response;
use crate::Request;

/// The status page's prefix.
pub const PREFIX: &str = "/_weft/";

/// The dashboard page, with `<!--COUNTERS-->` where the server's tables go.
const DASHBOARD: &str = include_str!("dashboard.html");

/// Seconds of history in `status.json?history=N` (none without the parameter).
fn history_seconds(req: &Request) -> Option<usize> {
    let query = req.query()?;
    query.split('&').find_map(|kv| {
        let n = kv.strip_prefix("history=")?;
        Some(
            n.parse::<usize>()
                .unwrap_or(0)
                .min(metrics_history::SAMPLES),
        )
    })
}

/// Answers a request under [`PREFIX`].
pub fn handle(req: &Request, metrics: &Metrics, allow: &[Cidr]) -> Response {
    if !allow.iter().any(|c| c.contains(req.peer_addr().ip())) {
        log::info!(
            "{}: status page refused (not in status.allow)",
            req.peer_addr()
        );
        return Response::error(403);
    }
    if !matches!(req.method(), Method::Get | Method::Head) {
        return Response::error(405).header("Allow", "GET, HEAD");
    }
    let page = match req.path() {
        "/_weft/status.json" => {
            let json = match history_seconds(req) {
                Some(n) => metrics.to_json_with_history(n),
                None => metrics.to_json(),
            };
            Response::new(200)
                .header("Content-Type", "application/json")
                .header("Cache-Control", "no-store")
                .body(json.to_string())
        }
        "/_weft/metrics" => Response::new(200)
            .header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .body(metrics.to_prometheus()),
        "/_weft/status" => Response::new(200)
            .header("Content-Type", "text/html; charset=utf-8")
            .header("Cache-Control", "no-store")
            .body(DASHBOARD.replace("<!--COUNTERS-->", &counters_html(metrics))),
        _ => Response::error(404),
    };
    // Preconditions only where the answer is 2xx (RFC 9110 §13.2.1), not on a 404.
    if page.status == 200 {
        if let Some(failed) = super::unvalidated_preconditions(req) {
            return failed;
        }
    }
    page
}

/// The counters since start as tables (the dashboard's `counters since start`).
fn counters_html(m: &Metrics) -> String {
    let mut rows = String::new();
    let mut reports = String::new();
    for l in m.listeners() {
        if let Some(r) = l.report() {
            reports.push_str(&format!("<h2>{} ({})</h2>\n{}", l.addr, l.model, r.html()));
        }
        let r: Vec<u64> = (0..5).map(|class| l.responses(class)).collect();
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            l.addr,
            l.model,
            l.requests(),
            l.h2_requests.load(Relaxed),
            r[1],
            r[2],
            r[3],
            r[4],
            l.bytes_out(),
            l.accepted.load(Relaxed),
            l.open.load(Relaxed),
        ));
    }
    let mut cache = cache_html(m);
    cache.push_str(&upstreams_html(m));
    cache.push_str(&certificates_html(m));
    format!(
        "<p>uptime {} s</p>\n\
         <table><tr><th>listener</th><th>model</th><th>requests</th><th>HTTP/2</th><th>2xx</th><th>3xx</th><th>4xx</th><th>5xx</th>\
         <th>bytes out</th><th>accepted</th><th>open</th></tr>\n{rows}</table>\n{cache}{reports}\n",
        m.started.elapsed().as_secs()
    )
}

/// The upstream groups' servers, as the JSON's `upstreams` block has them (nothing without
/// groups).
#[inline(never)]
/// A response time in ms from the JSON (an upper bucket bound), `-` before any answer.
fn ms(v: &serde_json::Value) -> String {
    v.as_f64().map_or_else(|| "-".into(), |ms| format!("{ms}"))
}

fn upstreams_html(m: &Metrics) -> String {
    let groups = m.upstreams_json();
    let Some(groups) = groups.as_array() else {
        return String::new();
    };
    let text = |v: &serde_json::Value| {
        v.as_str()
            .unwrap_or("")
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut rows = String::new();
    for g in groups {
        for s in g["servers"].as_array().into_iter().flatten() {
            rows.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>\n",
                text(&g["name"]),
                text(&s["server"]),
                if s["up"] == true { "up" } else { "down" },
                s["requests"],
                s["failures"],
                s["in_flight"],
                s["tunnels"],
                ms(&s["response_ms"]["p50"]),
                ms(&s["response_ms"]["p99"]),
            ));
        }
    }
    format!(
        "<h2>upstreams</h2>\n<table><tr><th>group</th><th>server</th><th>state</th>\
         <th>requests</th><th>failures</th><th>in flight</th><th>tunnels</th>\
         <th>p50 ms</th><th>p99 ms</th></tr>\n\
         {rows}</table>\n"
    )
}

/// The served certificates: name, where each came from, days left (nothing without TLS).
fn certificates_html(m: &Metrics) -> String {
    let certs = m.certificates_json();
    let Some(certs) = certs.as_array().filter(|c| !c.is_empty()) else {
        return String::new();
    };
    let mut rows = String::new();
    for c in certs {
        let left = c["expires_in_s"].as_i64().map_or_else(
            || "-".to_string(),
            |s| format!("{:.1}", s as f64 / 86_400.0),
        );
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{left}</td></tr>\n",
            c["name"]
                .as_str()
                .unwrap_or("")
                .replace('&', "&amp;")
                .replace('<', "&lt;"),
            c["source"].as_str().unwrap_or(""),
        ));
    }
    format!(
        "<h2>certificates</h2>\n<table><tr><th>name</th><th>source</th><th>days left</th></tr>\n\
         {rows}</table>\n"
    )
}

/// The response cache's figures, as the JSON's `cache` block has them.
#[inline(never)]
fn cache_html(m: &Metrics) -> String {
    match m.cache_stats() {
        Some(c) => format!(
            "<h2>response cache</h2>\n<table><tr><th>hits</th><th>misses</th><th>fills</th>\
             <th>evictions</th><th>entries</th><th>bytes</th><th>max bytes</th>\
             <th>max object bytes</th></tr>\n<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>\n",
            c.hits,
            c.misses,
            c.fills,
            c.evictions,
            c.entries,
            c.bytes,
            c.max_bytes,
            c.max_object_bytes
        ),
        None => "<h2>response cache</h2>\n<p>off</p>\n".into(),
    }
}
