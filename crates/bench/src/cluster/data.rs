//! A run's data files and charts: per second (`rows.csv`, and the requests/s and p99 charts
//! drawn from it), every failed request (`failures.csv`), the events (`events.csv`), the
//! access logs' clients (`clients.csv`) and the scaling runs (`scaling.csv`).

use std::fmt::Write as _;

use std::io;
use std::path::Path;

use super::events::EventRow;
use super::logs::{ClientTally, LogLine, Stamped};
use super::openloop::Sample;
use super::scaling::Scaled;
use super::INSTANCES;
use crate::experiment::{
    self,
    charts::{Chart, Rows},
};
use crate::plot;
use crate::stats::percentile;
use crate::target::BadInput;

/// One second of the timeline: the requests due in it and how they ended, the p50 and p99
/// of those answered, and the requests HAProxy's log shows for each instance.
pub(crate) struct Second {
    due: usize,
    ok: usize,
    failed_ka: usize,
    failed_close: usize,
    p50: f64,
    p99: f64,
    per_instance: Vec<usize>,
}

impl Second {
    /// Second `s` (from `s` to `s + 1` seconds after the start).
    fn of(s: usize, samples: &[Sample], hlog: &[Stamped]) -> Second {
        let (lo, hi) = (s as f64 * 1e3, (s + 1) as f64 * 1e3);
        let in_s: Vec<&Sample> = samples
            .iter()
            .filter(|x| x.at_ms >= lo && x.at_ms < hi)
            .collect();
        let mut lat: Vec<f64> = in_s
            .iter()
            .filter(|x| !x.failed())
            .map(|x| x.latency_ms)
            .collect();
        let p99 = percentile(&mut lat, 0.99);
        let p50 = percentile(&mut lat, 0.50);
        let per_instance = (0..INSTANCES)
            .map(|i| {
                let name = format!("w{}", i + 1);
                hlog.iter()
                    .filter(|(t, l, _)| {
                        *t >= s as f64
                            && *t < (s + 1) as f64
                            && matches!(l, LogLine::Request { server, .. } if *server == name)
                    })
                    .count()
            })
            .collect();
        Second {
            due: in_s.len(),
            ok: in_s.iter().filter(|x| !x.failed()).count(),
            failed_ka: in_s.iter().filter(|x| x.failed() && x.keepalive).count(),
            failed_close: in_s.iter().filter(|x| x.failed() && !x.keepalive).count(),
            p50,
            p99,
            per_instance,
        }
    }
}

/// The timeline's whole seconds, of `secs` (a last partial second would read as a drop in
/// throughput).
pub(crate) fn seconds(secs: f64, samples: &[Sample], hlog: &[Stamped]) -> Vec<Second> {
    (0..secs.floor() as usize)
        .map(|s| Second::of(s, samples, hlog))
        .collect()
}

/// `rows.csv`: per second, due requests, failures, p50/p99 of the answered ones, HAProxy's
/// requests per instance.
pub(crate) fn rows_csv(seconds: &[Second]) -> String {
    let mut rows = String::from(
        "t_s,due,ok,failed,failed_keepalive,failed_per_request,p50_ms,p99_ms,w1,w2,w3\n",
    );
    for (s, x) in seconds.iter().enumerate() {
        let _ = writeln!(
            rows,
            "{s},{},{},{},{},{},{:.3},{:.3},{}",
            x.due,
            x.ok,
            x.failed_ka + x.failed_close,
            x.failed_ka,
            x.failed_close,
            x.p50,
            x.p99,
            x.per_instance
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    rows
}

/// Writes the charts of the run: every chart `replot` draws from the folder's CSVs (requests/s
/// and p99 over time from `rows.csv`, the scaling rounds from `scaling.csv`).
pub(crate) fn charts(dir: &Path, quick: bool) -> io::Result<()> {
    let charts = experiment::charts::charts_of("cluster", dir, quick)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
    for c in &charts {
        experiment::charts::draw(dir, c)?;
    }
    Ok(())
}

/// Requests/s over time (answered, failed, and each instance's from HAProxy's log) and p99
/// per second, from `rows.csv`.
pub(crate) fn charts_from_rows(rows: &Rows, quick: bool) -> Result<Vec<Chart>, BadInput> {
    let q = if quick {
        " (quick run: a smoke check, not a measurement)"
    } else {
        ""
    };
    // Each second's point at its middle.
    let series = |name: &str, col: &str| -> Result<plot::Series, BadInput> {
        let pts = rows.pairs(&[], "t_s", col)?;
        Ok((
            name.to_string(),
            pts.into_iter().map(|(s, y)| (s + 0.5, y)).collect(),
        ))
    };
    let mut thr = vec![
        series("answered/s (client)", "ok")?,
        series("failed/s (client)", "failed")?,
    ];
    for i in 0..INSTANCES {
        thr.push(series(
            &format!("w{}/s (HAProxy log)", i + 1),
            &format!("w{}", i + 1),
        )?);
    }
    let lat = vec![series("p99 (ms)", "p99_ms")?];
    Ok(vec![
        Chart {
            stem: "throughput".into(),
            figure: plot::Figure::lines(
                &format!("cluster: requests/s over time{q}"),
                "seconds",
                "requests/s",
                &thr,
            ),
        },
        Chart {
            stem: "p99".into(),
            figure: plot::Figure::lines(
                &format!("cluster: p99 latency per second, from the due time{q}"),
                "seconds",
                "ms",
                &lat,
            ),
        },
    ])
}

/// `failures.csv`: every failed request, when it was due, its latency, its kind of connection and outcome.
pub(crate) fn failures_csv(samples: &[Sample]) -> String {
    let mut failures = String::from("due_ms,latency_ms,connection,outcome\n");
    for s in samples.iter().filter(|s| s.failed()) {
        let _ = writeln!(
            failures,
            "{:.1},{:.1},{},{:?}",
            s.at_ms,
            s.latency_ms,
            if s.keepalive {
                "keepalive"
            } else {
                "per-request"
            },
            s.outcome
        );
    }
    failures
}

/// `events.csv`: a row per event ([`EventRow`]).
pub(crate) fn events_csv(events: &[EventRow]) -> String {
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    let mut csv = String::from(
        "at_s,event,requests,failed,failed_keepalive,failed_per_request,down_after_s,last_sent_after_s,failed_after_down,retried_by_haproxy\n",
    );
    for e in events {
        let _ = writeln!(
            csv,
            "{:.3},{},{},{},{},{},{},{},{},{}",
            e.at_s,
            e.key,
            e.requests,
            e.failed_ka + e.failed_close,
            e.failed_ka,
            e.failed_close,
            opt(e.down_after_s),
            opt(e.last_sent_after_s),
            e.failed_after_down.map_or(String::new(), |v| v.to_string()),
            e.retried
        );
    }
    csv
}

/// `clients.csv`: whom each instance's access log names.
pub(crate) fn clients_csv(clients: &[ClientTally]) -> String {
    let mut ccsv = String::from("instance,access_log_lines,real_client,balancer\n");
    for c in clients {
        let _ = writeln!(ccsv, "{},{},{},{}", c.instance, c.lines, c.real, c.balancer);
    }
    ccsv
}

/// `scaling.csv`: a row per scaling run.
pub(crate) fn scaling_csv(scale: &[Scaled]) -> String {
    let mut scsv = String::from(
        "round,backend,rps,errors,server_conns,client_cores,haproxy_cores,weft_cores,\
         machine_busy_pct\n",
    );
    for (round, label, r) in scale {
        let _ = writeln!(
            scsv,
            "{round},{label},{:.1},{},{},{:.3},{:.3},{:.3},{:.1}",
            r.rps,
            r.errors,
            r.server_conns,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores,
            r.machine_busy * 100.0
        );
    }
    scsv
}
