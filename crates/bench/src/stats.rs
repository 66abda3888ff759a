//! What a run records: latencies in an HDR histogram (nanoseconds, 3 significant digits, so
//! every percentile is within 0.1% of the recorded value), completed requests and bytes, and
//! errors by kind. One [`Recorder`] per worker thread; they are merged at the end.
//!
//! Also the crate's statistics of plain samples: `median` (of an experiment's runs, of the
//! cluster's same-round ratios) and `percentile` (of the cluster's latencies in a second).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Significant decimal digits the histograms keep (wrk2 and HdrHistogram's default).
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Largest latency recorded as itself, nanoseconds (one hour); longer ones count as this.
/// Fixed bounds keep a histogram at one size (about 256 KiB) whatever it records.
pub const MAX_LATENCY_NS: u64 = 3_600 * 1_000_000_000;

/// Errors by kind, as wrk counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    /// The connection could not be opened.
    pub connect: u64,
    /// A read failed, the connection ended early, or the response was malformed.
    pub read: u64,
    /// Sending the request failed.
    pub write: u64,
    /// A connect, read or write waited longer than the timeout.
    pub timeout: u64,
    /// A complete response whose status was not 2xx or 3xx (also counted as a request).
    pub status: u64,
}

impl Errors {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.status
    }

    fn add(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.status += o.status;
    }
}

/// Where a request failed (before a complete response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Connect,
    Read,
    Write,
    Timeout,
}

/// Completed requests by status class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatusClasses {
    #[serde(rename = "1xx")]
    pub c1: u64,
    #[serde(rename = "2xx")]
    pub c2: u64,
    #[serde(rename = "3xx")]
    pub c3: u64,
    #[serde(rename = "4xx")]
    pub c4: u64,
    #[serde(rename = "5xx")]
    pub c5: u64,
}

/// One worker's (or the whole run's) measurements.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency of each completed request, nanoseconds.
    pub latency: Histogram<u64>,
    /// Completed requests (a response was read, whatever its status).
    pub requests: u64,
    /// Bytes of responses read, heads included.
    pub bytes: u64,
    /// Body bytes of responses.
    pub body_bytes: u64,
    /// Sum of latencies, nanoseconds (for an exact mean).
    pub latency_sum_ns: u128,
    pub errors: Errors,
    pub statuses: StatusClasses,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// An empty recorder; its histogram grows as larger values come.
    pub fn new() -> Recorder {
        Recorder {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
                .expect("valid histogram bounds"),
            requests: 0,
            bytes: 0,
            body_bytes: 0,
            latency_sum_ns: 0,
            errors: Errors::default(),
            statuses: StatusClasses::default(),
        }
    }

    /// A completed request.
    pub fn response(&mut self, status: u16, latency_ns: u64, wire: u64, body: u64) {
        self.requests += 1;
        self.bytes += wire;
        self.body_bytes += body;
        self.latency.saturating_record(latency_ns.max(1));
        self.latency_sum_ns += u128::from(latency_ns);
        match status / 100 {
            1 => self.statuses.c1 += 1,
            2 => self.statuses.c2 += 1,
            3 => self.statuses.c3 += 1,
            4 => self.statuses.c4 += 1,
            _ => self.statuses.c5 += 1,
        }
        if !(200..400).contains(&status) {
            self.errors.status += 1;
        }
    }

    /// A request that failed before its response was complete.
    pub fn error(&mut self, kind: ErrorKind) {
        match kind {
            ErrorKind::Connect => self.errors.connect += 1,
            ErrorKind::Read => self.errors.read += 1,
            ErrorKind::Write => self.errors.write += 1,
            ErrorKind::Timeout => self.errors.timeout += 1,
        }
    }

    /// Adds `other`'s measurements to these.
    pub fn merge(&mut self, other: &Recorder) {
        self.latency
            .add(&other.latency)
            .expect("histograms with the same bounds always merge");
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.body_bytes += other.body_bytes;
        self.latency_sum_ns += other.latency_sum_ns;
        self.errors.add(&other.errors);
        let (s, o) = (&mut self.statuses, &other.statuses);
        s.c1 += o.c1;
        s.c2 += o.c2;
        s.c3 += o.c3;
        s.c4 += o.c4;
        s.c5 += o.c5;
    }

    /// The latency distribution in microseconds.
    pub fn latency_us(&self) -> Percentiles {
        Percentiles::of(&self.latency, self.latency_sum_ns)
    }
}

/// Latency figures in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub min: f64,
    /// Exact mean (from the sum, not the histogram's buckets).
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// The figures of a histogram of nanoseconds; zeros when it is empty.
    pub fn of(h: &Histogram<u64>, sum_ns: u128) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        Percentiles {
            min: us(h.min()),
            mean: sum_ns as f64 / h.len() as f64 / 1e3,
            stdev: h.stdev() / 1e3,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// The median of `v` (the mean of the middle two for an even count), NaNs left out; NaN when
/// nothing is left.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Percentile `q` (0..=1) of `v` (sorted here): the smallest value with at least that share
/// of `v` at or below it; NaN when empty.
pub(crate) fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[1.0, 4.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        // A failed run's NaN is left out, not sorted in.
        assert_eq!(median(&[f64::NAN, 5.0, 1.0]), 3.0);
        assert!(median(&[f64::NAN]).is_nan());
    }

    #[test]
    fn percentiles_of_samples() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        v.reverse();
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert!(percentile(&mut [], 0.99).is_nan());
    }

    /// Within the histogram's precision (3 significant digits: 0.1%).
    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= want * 0.001 + 1e-9
    }

    #[test]
    fn percentiles_of_known_data() {
        // 1..=10,000 µs, each once: the q-quantile is q * 10,000 µs.
        let mut r = Recorder::new();
        for us in 1..=10_000u64 {
            r.response(200, us * 1000, 100, 10);
        }
        let p = r.latency_us();
        for (got, want) in [
            (p.min, 1.0),
            (p.p50, 5_000.0),
            (p.p90, 9_000.0),
            (p.p99, 9_900.0),
            (p.p999, 9_990.0),
            (p.max, 10_000.0),
            (p.mean, 5_000.5),
        ] {
            assert!(close(got, want), "got {got}, want {want}: {p:?}");
        }
        assert!(close(p.stdev, 2886.75), "stdev {}", p.stdev);
        assert_eq!(
            (r.requests, r.bytes, r.body_bytes),
            (10_000, 1_000_000, 100_000)
        );
    }

    #[test]
    fn skewed_distribution_and_merge() {
        // 990 fast requests (100 µs) and 10 slow ones (50 ms), split over two recorders as
        // two workers would record them: p99 is still fast, p99.9 and max are slow.
        let (mut a, mut b) = (Recorder::new(), Recorder::new());
        for i in 0..990 {
            [&mut a, &mut b][i % 2].response(200, 100_000, 1, 0);
        }
        for _ in 0..10 {
            b.response(503, 50_000_000, 1, 0);
        }
        a.error(ErrorKind::Connect);
        b.error(ErrorKind::Timeout);
        a.merge(&b);
        let p = a.latency_us();
        assert!(close(p.p50, 100.0) && close(p.p99, 100.0), "{p:?}");
        assert!(close(p.p999, 50_000.0) && close(p.max, 50_000.0), "{p:?}");
        assert_eq!(a.requests, 1000);
        assert_eq!(a.statuses.c2, 990);
        assert_eq!(a.statuses.c5, 10);
        assert_eq!(
            a.errors,
            Errors {
                connect: 1,
                timeout: 1,
                status: 10,
                ..Errors::default()
            }
        );
        assert_eq!(a.errors.total(), 12);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Recorder::new().latency_us(), Percentiles::default());
    }
}
