//! The reports of a run, as JSON (`--json`, one object) or as a short human summary.

use std::fmt::Write as _;

use serde::Serialize;

use crate::procstat::ServerCpu;
use crate::stats::{Errors, Percentiles, Recorder, StatusClasses};

/// The report of `weft-bench load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub urls: Vec<String>,
    /// `closed` (next request when the last one completed) or `open` (fixed rate).
    pub mode: &'static str,
    /// Requests per second asked for (open loop).
    pub rate: Option<f64>,
    pub connections: usize,
    pub threads: usize,
    pub keepalive: bool,
    pub duration_s: f64,
    /// Completed requests (a whole response was read, whatever its status).
    pub requests: u64,
    pub requests_per_s: f64,
    /// Open loop: requests the schedule asked for; fewer completed (and no errors) means the
    /// connections could not keep up with the rate.
    pub scheduled: Option<u64>,
    /// Connections opened.
    pub connects: u64,
    /// Response bytes read, heads included.
    pub bytes: u64,
    pub bytes_per_s: f64,
    /// Body bytes of the responses (decoded length of chunked bodies).
    pub body_bytes: u64,
    /// Latency of the completed requests; in open loop from each request's intended time.
    pub latency_us: Percentiles,
    pub errors: Errors,
    pub statuses: StatusClasses,
    /// The server's CPU, when `--server-pid` was given.
    pub server: Option<ServerCpu>,
}

impl LoadReport {
    /// The report's figures from a run's measurements.
    #[allow(clippy::too_many_arguments)] // one call site; each is a labelled field
    pub fn new(
        urls: Vec<String>,
        rate: Option<f64>,
        connections: usize,
        threads: usize,
        keepalive: bool,
        rec: &Recorder,
        elapsed_s: f64,
        connects: u64,
    ) -> LoadReport {
        let per_s = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        LoadReport {
            urls,
            mode: if rate.is_some() { "open" } else { "closed" },
            rate,
            connections,
            threads,
            keepalive,
            duration_s: elapsed_s,
            requests: rec.requests,
            requests_per_s: per_s(rec.requests),
            scheduled: None,
            connects,
            bytes: rec.bytes,
            bytes_per_s: per_s(rec.bytes),
            body_bytes: rec.body_bytes,
            latency_us: rec.latency_us(),
            errors: rec.errors,
            statuses: rec.statuses,
            server: None,
        }
    }

    /// The human summary.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let loop_kind = match self.rate {
            Some(r) => format!("open loop at {r} req/s (latency from intended send times)"),
            None => "closed loop".into(),
        };
        let _ = writeln!(
            o,
            "weft-bench load: {} connections, {} thread{}, {loop_kind}, {}, {:.2} s",
            self.connections,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.keepalive {
                "keep-alive"
            } else {
                "a connection per request"
            },
            self.duration_s
        );
        for u in &self.urls {
            let _ = writeln!(o, "  {u}");
        }
        let scheduled = match self.scheduled {
            Some(n) => format!("of {n} scheduled, "),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "  requests   {:>12}  {:>12.1} req/s   ({scheduled}{} connections opened)",
            self.requests, self.requests_per_s, self.connects
        );
        let _ = writeln!(
            o,
            "  transfer   {:>12}  {:>12}/s",
            bytes(self.bytes as f64),
            bytes(self.bytes_per_s)
        );
        o.push_str(&latency_line("latency   ", &self.latency_us, 1.0, "µs"));
        o.push_str(&errors_line(&self.errors, &self.statuses));
        if let Some(s) = &self.server {
            o.push_str(&server_line(s));
        }
        o
    }
}

/// The report of `weft-bench groups`.
#[derive(Debug, Clone, Serialize)]
pub struct GroupsReport {
    pub url: String,
    pub clients: usize,
    pub groups: usize,
    pub concurrency: usize,
    /// Completed requests; `clients x groups x concurrency` when none failed.
    pub requests: u64,
    /// From the first group's start to the last group's end.
    pub total_s: f64,
    /// Average request completion time (connect to last body byte), milliseconds.
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub body_bytes: u64,
    pub errors: Errors,
    pub statuses: StatusClasses,
    pub server: Option<ServerCpu>,
}

impl GroupsReport {
    /// The report's figures from a run's measurements.
    pub fn new(
        url: String,
        clients: usize,
        groups: usize,
        concurrency: usize,
        rec: &Recorder,
        total_s: f64,
    ) -> GroupsReport {
        let p = rec.latency_us();
        GroupsReport {
            url,
            clients,
            groups,
            concurrency,
            requests: rec.requests,
            total_s,
            avg_ms: p.mean / 1e3,
            p50_ms: p.p50 / 1e3,
            p99_ms: p.p99 / 1e3,
            max_ms: p.max / 1e3,
            body_bytes: rec.body_bytes,
            errors: rec.errors,
            statuses: rec.statuses,
            server: None,
        }
    }

    /// The human summary.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "weft-bench groups: {} clients x {} groups x {} concurrent GETs, a connection each",
            self.clients, self.groups, self.concurrency
        );
        let _ = writeln!(o, "  {}", self.url);
        let _ = writeln!(
            o,
            "  requests   {:>12}  in {:.3} s, {} of body",
            self.requests,
            self.total_s,
            bytes(self.body_bytes as f64)
        );
        let _ = writeln!(
            o,
            "  completion avg {:.3} ms  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            self.avg_ms, self.p50_ms, self.p99_ms, self.max_ms
        );
        o.push_str(&errors_line(&self.errors, &self.statuses));
        if let Some(s) = &self.server {
            o.push_str(&server_line(s));
        }
        o
    }
}

fn latency_line(label: &str, p: &Percentiles, scale: f64, unit: &str) -> String {
    format!(
        "  {label} min {:.0}  mean {:.0}  p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0} {unit}\n",
        p.min * scale,
        p.mean * scale,
        p.p50 * scale,
        p.p90 * scale,
        p.p99 * scale,
        p.p999 * scale,
        p.max * scale
    )
}

fn errors_line(e: &Errors, s: &StatusClasses) -> String {
    let statuses = format!(
        "status classes: 2xx {}, 3xx {}, 4xx {}, 5xx {}{}",
        s.c2,
        s.c3,
        s.c4,
        s.c5,
        if s.c1 > 0 {
            format!(", 1xx {}", s.c1)
        } else {
            String::new()
        }
    );
    if e.total() == 0 {
        format!("  errors     none ({statuses})\n")
    } else {
        format!(
            "  errors     {} (connect {}, read {}, write {}, timeout {}, status {}; {statuses})\n",
            e.total(),
            e.connect,
            e.read,
            e.write,
            e.timeout,
            e.status
        )
    }
}

fn server_line(s: &ServerCpu) -> String {
    format!(
        "  server CPU {:.2} µs/request, {:.1}% of a core ({:.2} s CPU, pid {} and its descendants)\n",
        s.cpu_us_per_request, s.utilization_pct, s.cpu_s, s.pid
    )
}

/// `n` bytes in B, KiB, MiB or GiB.
fn bytes(n: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_units() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1023.0), "1023 B");
        assert_eq!(bytes(10_541.0), "10.29 KiB");
        assert_eq!(
            bytes(3.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
            "3072.00 GiB"
        );
    }

    #[test]
    fn summaries_show_the_counts() {
        let mut r = Recorder::new();
        r.response(200, 1_000_000, 100, 4);
        r.response(404, 3_000_000, 100, 4);
        let l = LoadReport::new(vec!["http://x/".into()], None, 2, 1, true, &r, 2.0, 2);
        assert_eq!(
            (l.requests, l.requests_per_s, l.bytes_per_s),
            (2, 1.0, 100.0)
        );
        let text = l.human();
        assert!(
            text.contains("errors     1 (connect 0, read 0, write 0, timeout 0, status 1"),
            "{text}"
        );
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(json["errors"]["status"], 1);
        assert_eq!(json["statuses"]["4xx"], 1);
        let max = json["latency_us"]["max"].as_f64().unwrap();
        assert!((max - 3000.0).abs() <= 3.0, "max {max} µs");
        let g = GroupsReport::new("http://x/".into(), 2, 1, 1, &r, 0.5);
        assert_eq!((g.requests, g.avg_ms), (2, 2.0));
        assert!(g.human().contains("avg 2.000 ms"), "{}", g.human());
    }
}
