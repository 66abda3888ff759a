//! What happened at each event of the timeline ([`EventRow`]): the requests due until the next
//! event that failed, and for a drain or a kill, when HAProxy marked the instance down and
//! last sent it a request, from its log.

use super::logs::{LogLine, Stamped};
use super::openloop::Sample;
use super::plan::Action;
use super::timeline::Done;

/// What happened at one event, for the report and `events.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EventRow {
    pub at_s: f64,
    pub key: &'static str,
    pub name: String,
    /// Requests due from this event to the next that failed (keep-alive, per-request).
    pub failed_ka: u64,
    pub failed_close: u64,
    pub requests: u64,
    /// When HAProxy marked the instance down (seconds after the event).
    pub down_after_s: Option<f64>,
    /// The last request HAProxy sent to the instance (seconds after the event).
    pub last_sent_after_s: Option<f64>,
    /// Failed requests due after HAProxy marked the instance down.
    pub failed_after_down: Option<u64>,
    /// Requests HAProxy retried (on a refused or closed connection) from this event to the
    /// next, as its log counts them.
    pub retried: u64,
    pub note: String,
}

/// Requests in HAProxy's log between `from` and `to` seconds that it had to retry.
fn retried_between(hlog: &[Stamped], from: f64, to: f64) -> u64 {
    hlog.iter()
        .filter(|(t, l, _)| {
            *t >= from && *t < to && matches!(l, LogLine::Request { retries, .. } if *retries > 0)
        })
        .count() as u64
}

/// Failures of the requests due in `[from_ms, to_ms)`: (keep-alive, per-request, all due).
fn failures_between(samples: &[Sample], from_ms: f64, to_ms: f64) -> (u64, u64, u64) {
    let mut r = (0, 0, 0);
    for s in samples
        .iter()
        .filter(|s| s.at_ms >= from_ms && s.at_ms < to_ms)
    {
        r.2 += 1;
        if s.failed() {
            if s.keepalive {
                r.0 += 1;
            } else {
                r.1 += 1;
            }
        }
    }
    r
}

/// The per-event rows: failures of the requests due from each event to the next (before the
/// first: the steady row), and for a drain or kill, HAProxy's view ([`balancer_view`]).
pub(crate) fn event_rows(
    done: &[Done],
    samples: &[Sample],
    hlog: &[Stamped],
    secs: f64,
) -> Vec<EventRow> {
    let first = done.first().map_or(secs, |d| d.0);
    let (failed_ka, failed_close, requests) = failures_between(samples, 0.0, first * 1e3);
    let mut rows = vec![EventRow {
        at_s: 0.0,
        key: "steady",
        name: "steady load, all instances up".into(),
        failed_ka,
        failed_close,
        requests,
        retried: retried_between(hlog, f64::NEG_INFINITY, first),
        ..EventRow::default()
    }];
    for (k, (t, action, note)) in done.iter().enumerate() {
        let next = done.get(k + 1).map_or(secs, |d| d.0);
        let (failed_ka, failed_close, requests) = failures_between(samples, t * 1e3, next * 1e3);
        let mut row = EventRow {
            at_s: *t,
            key: action.key(),
            name: action.name(),
            failed_ka,
            failed_close,
            requests,
            retried: retried_between(hlog, *t, next),
            note: note.clone(),
            ..EventRow::default()
        };
        if let Action::Drain(i) | Action::Kill(i) = action {
            // Until the instance is started again.
            let until = done[k + 1..]
                .iter()
                .find(|d| d.1 == Action::Restart(*i))
                .map_or(f64::INFINITY, |d| d.0);
            let name = format!("w{}", i + 1);
            balancer_view(&mut row, &name, until, next, samples, hlog);
        }
        rows.push(row);
    }
    rows
}

/// For instance `name`, stopped at the row's event: when HAProxy marked it down and last sent
/// it a request, from its log up to `until` (the instance's restart), and how many requests
/// due from the mark to `next` (the next event) failed.
fn balancer_view(
    row: &mut EventRow,
    name: &str,
    until: f64,
    next: f64,
    samples: &[Sample],
    hlog: &[Stamped],
) {
    let t = row.at_s;
    let down = hlog.iter().find_map(|(lt, l, _)| match l {
        LogLine::State {
            backend,
            server,
            up: false,
        } if backend == "weft" && server == name && *lt >= t && *lt < until => Some(*lt),
        _ => None,
    });
    let last = hlog
        .iter()
        .filter(|(lt, l, _)| {
            *lt >= t
                && *lt < until
                && matches!(l, LogLine::Request { server, .. } if server == name)
        })
        .map(|(lt, _, _)| *lt)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    row.down_after_s = down.map(|d| d - t);
    row.last_sent_after_s = Some(last.map_or(0.0, |l| l - t));
    row.failed_after_down = down.map(|d| {
        samples
            .iter()
            .filter(|s| s.at_ms >= d * 1e3 && s.at_ms < next * 1e3 && s.failed())
            .count() as u64
    });
}

#[cfg(test)]
mod tests {
    use super::super::openloop::Outcome;
    use super::*;
    use crate::stats::ErrorKind;

    fn s(at_ms: f64, keepalive: bool, outcome: Outcome) -> Sample {
        Sample {
            at_ms,
            latency_ms: 1.0,
            keepalive,
            outcome,
        }
    }

    #[test]
    fn events_count_failures_and_the_balancers_view() {
        // Drain of w1 at 1 s, marked down at 1.6 s, last sent at 1.2 s; kill of w2 at 3 s,
        // marked down at 3.9 s; restart of w2 at 5 s; the run ends at 6 s.
        let done = vec![
            (1.0, Action::Drain(0), String::new()),
            (3.0, Action::Kill(1), String::new()),
            (5.0, Action::Restart(1), String::new()),
        ];
        let samples = vec![
            s(500.0, true, Outcome::Ok),
            s(1500.0, true, Outcome::Ok),
            s(3100.0, false, Outcome::Failed(ErrorKind::Read)),
            s(3500.0, true, Outcome::Status(502)),
            s(4000.0, false, Outcome::Failed(ErrorKind::Connect)),
            s(5500.0, true, Outcome::Ok),
        ];
        let req = |server: &str| LogLine::Request {
            server: server.into(),
            status: 200,
            retries: 0,
        };
        let down = |server: &str| LogLine::State {
            backend: "weft".into(),
            server: server.into(),
            up: false,
        };
        let hlog = vec![
            (0.9, req("w1"), String::new()),
            (1.2, req("w1"), String::new()),
            (1.6, down("w1"), String::new()),
            (2.5, req("w2"), String::new()),
            (3.05, req("w2"), String::new()),
            (
                3.2,
                LogLine::Request {
                    server: "w3".into(),
                    status: 200,
                    retries: 1,
                },
                String::new(),
            ),
            (3.9, down("w2"), String::new()),
            // After the restart: not the killed process's.
            (5.5, req("w2"), String::new()),
        ];
        let rows = event_rows(&done, &samples, &hlog, 6.0);
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[0].key, rows[0].requests), ("steady", 1));
        let drain = &rows[1];
        assert_eq!(
            (drain.failed_ka, drain.failed_close, drain.requests),
            (0, 0, 1)
        );
        assert!((drain.down_after_s.unwrap() - 0.6).abs() < 1e-9);
        assert!((drain.last_sent_after_s.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(drain.failed_after_down, Some(0));
        let kill = &rows[2];
        assert_eq!(
            (kill.failed_ka, kill.failed_close, kill.requests),
            (1, 2, 3)
        );
        assert!((kill.down_after_s.unwrap() - 0.9).abs() < 1e-9);
        assert!((kill.last_sent_after_s.unwrap() - 0.05).abs() < 1e-9);
        // Only the request due at 4.0 s came after the mark.
        assert_eq!(kill.failed_after_down, Some(1));
        assert_eq!((drain.retried, kill.retried, rows[3].retried), (0, 1, 0));
        assert_eq!(rows[3].key, "restart");
        assert_eq!(rows[3].down_after_s, None);
    }
}
