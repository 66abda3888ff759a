//! The files a run writes: per-second rows, failures, events, clients and scaling as CSV,
//! the charts, and `report.md`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::events::event_rows;
use super::haproxy::scale_haproxy_config;
use super::hosts::{Net, BRIDGE_HOST};
use super::logs::LogLine;
use super::openloop::Sample;
use super::pin::{Layout, ROOMY_CORES};
use super::plan::{Action, Plan};
use super::scaling::{limit, round_ratios, ScaleRun, SCALE_TARGET};
use super::{CHECK_INTER, FALL, HEALTH, INSTANCES, REQUEST_TIMEOUT, RISE, SHUTDOWN_GRACE};
use crate::experiment::{self, ExperimentArgs};
use crate::plot;
use crate::stats::{median, percentile};

#[allow(clippy::too_many_arguments)]
pub(crate) fn report(
    a: &ExperimentArgs,
    plan: &Plan,
    dir: &Path,
    ncores: usize,
    layout: &Layout,
    net: Net,
    model: &str,
    hcfg: &str,
    scale: &[(usize, &str, ScaleRun)],
    done: &[(f64, Action, String)],
    samples: &[Sample],
    hlog: &[(f64, LogLine, String)],
    clients: &[(String, u64, u64, u64, String)],
) -> Result<(), Box<dyn std::error::Error>> {
    experiment::mark(dir, a.quick)?;
    // Whole seconds only: a last partial second would read as a drop in throughput.
    let secs = plan.secs.floor() as usize;
    // Per second: due requests, failures, p50/p99 of the answered ones, HAProxy's requests
    // per instance.
    let mut rows = String::from(
        "t_s,due,ok,failed,failed_keepalive,failed_per_request,p50_ms,p99_ms,w1,w2,w3\n",
    );
    let mut series_rps: Vec<(f64, f64)> = Vec::new();
    let mut series_fail: Vec<(f64, f64)> = Vec::new();
    let mut series_p99: Vec<(f64, f64)> = Vec::new();
    let mut per_inst: Vec<Vec<(f64, f64)>> = vec![Vec::new(); INSTANCES];
    for s in 0..secs {
        let (lo, hi) = (s as f64 * 1e3, (s + 1) as f64 * 1e3);
        let in_s: Vec<&Sample> = samples
            .iter()
            .filter(|x| x.at_ms >= lo && x.at_ms < hi)
            .collect();
        let ok = in_s.iter().filter(|x| !x.failed()).count();
        let fk = in_s.iter().filter(|x| x.failed() && x.keepalive).count();
        let fc = in_s.iter().filter(|x| x.failed() && !x.keepalive).count();
        let mut lat: Vec<f64> = in_s
            .iter()
            .filter(|x| !x.failed())
            .map(|x| x.latency_ms)
            .collect();
        let p99 = percentile(&mut lat, 0.99);
        let p50 = percentile(&mut lat, 0.50);
        let counts: Vec<usize> = (0..INSTANCES)
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
        let _ = writeln!(
            rows,
            "{s},{},{ok},{},{fk},{fc},{p50:.3},{p99:.3},{}",
            in_s.len(),
            fk + fc,
            counts
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let x = s as f64 + 0.5;
        series_rps.push((x, ok as f64));
        series_fail.push((x, (fk + fc) as f64));
        series_p99.push((x, p99));
        for (i, c) in counts.iter().enumerate() {
            per_inst[i].push((x, *c as f64));
        }
    }
    fs::write(dir.join("rows.csv"), rows)?;
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
    fs::write(dir.join("failures.csv"), failures)?;

    let events = event_rows(done, samples, hlog, plan.secs);
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    let mut csv = String::from(
        "at_s,event,requests,failed,failed_keepalive,failed_per_request,down_after_s,last_sent_after_s,failed_after_down,retried_by_haproxy\n",
    );
    for e in &events {
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
    fs::write(dir.join("events.csv"), csv)?;
    let mut ccsv = String::from("instance,access_log_lines,real_client,balancer\n");
    for c in clients {
        let _ = writeln!(ccsv, "{},{},{},{}", c.0, c.1, c.2, c.3);
    }
    fs::write(dir.join("clients.csv"), ccsv)?;
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
    fs::write(dir.join("scaling.csv"), scsv)?;

    // Charts.
    let q = if a.quick {
        " (quick run: a smoke check, not a measurement)"
    } else {
        ""
    };
    let mut thr: Vec<plot::Series> = vec![
        ("answered/s (client)".into(), series_rps),
        ("failed/s (client)".into(), series_fail),
    ];
    for (i, s) in per_inst.into_iter().enumerate() {
        thr.push((format!("w{}/s (HAProxy log)", i + 1), s));
    }
    let title = format!("cluster: requests/s over time{q}");
    fs::write(
        dir.join("throughput.svg"),
        plot::lines(&title, "seconds", "requests/s", &thr),
    )?;
    fs::write(
        dir.join("throughput.png"),
        plot::lines_png(&title, "seconds", "requests/s", &thr),
    )?;
    let lat = vec![("p99 (ms)".to_string(), series_p99)];
    let title = format!("cluster: p99 latency per second, from the due time{q}");
    fs::write(
        dir.join("p99.svg"),
        plot::lines(&title, "seconds", "ms", &lat),
    )?;
    fs::write(
        dir.join("p99.png"),
        plot::lines_png(&title, "seconds", "ms", &lat),
    )?;

    // The report.
    let mut md = format!(
        "# cluster: three weft instances behind HAProxy\n\n{}\
         Three weft instances (`{model}` model, `threads = 1`, `proxy_protocol = true`, \
         `[health] path = \"{HEALTH}\"`, `shutdown_grace = \"{}s\"`), each in its own network \
         namespace at 10.214.{}.11-13, joined by veth pairs to a bridge where HAProxy \
         listens (10.214.{}.1); the client in a namespace of its own (10.214.{}.2). HAProxy: \
         round robin, `option httpchk GET {HEALTH}` every {} ms (fall {FALL}, rise {RISE}), \
         `retry-on all-retryable-errors`, `retries 3`, `option redispatch 1` for GET/HEAD, \
         PROXY protocol v2 to weft (configuration below). {}\n\n\
         Load: weft-bench's open loop at {:.0} requests/s for {:.0} s over {} connections, \
         half keep-alive, half a new connection per request (`GET /echo`), latency from each \
         request's due time (no coordinated omission); a request fails on a connect, write or \
         read error, a timeout ({} s) or a status other than 2xx/3xx. The events happen on \
         the timeline below; \"failed\" counts the requests due from an event to the next.\n\n",
        if a.quick {
            "**Quick run (`--quick`): a shorter timeline at a lower rate, a smoke check, not a \
             measurement.**\n\n"
        } else {
            ""
        },
        SHUTDOWN_GRACE.as_secs(),
        net.0,
        net.0,
        net.0,
        CHECK_INTER.as_millis(),
        layout.describe(ncores),
        plan.rate,
        plan.secs,
        plan.connections,
        REQUEST_TIMEOUT.as_secs(),
    );
    md.push_str(
        "## Events\n\n| at (s) | event | requests due | failed (keep-alive / per request) | \
         HAProxy marked it down after (s) | last request HAProxy sent it, after (s) | failed \
         after marked down | retried by HAProxy | what happened |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for e in &events {
        let _ = writeln!(
            md,
            "| {:.2} | {} | {} | {} ({} / {}) | {} | {} | {} | {} | {} |",
            e.at_s,
            e.name,
            e.requests,
            e.failed_ka + e.failed_close,
            e.failed_ka,
            e.failed_close,
            e.down_after_s.map_or("-".into(), |v| format!("{v:.2}")),
            e.last_sent_after_s
                .map_or("-".into(), |v| format!("{v:.2}")),
            e.failed_after_down.map_or("-".into(), |v| v.to_string()),
            e.retried,
            e.note
        );
    }
    md.push_str("\nTargets:\n\n");
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    for e in &events {
        let failed = e.failed_ka + e.failed_close;
        match e.key {
            "drain" | "rolling" => {
                let _ = writeln!(
                    md,
                    "- {}: 0 failed requests: {} ({failed} failed).",
                    e.name,
                    verdict(failed == 0)
                );
            }
            "kill" => {
                let _ = writeln!(
                    md,
                    "- {}: only the requests in flight on it fail, none after HAProxy's check \
                     marks it down: {} ({failed} failed in all, {} after it was marked down).",
                    e.name,
                    verdict(e.failed_after_down == Some(0)),
                    e.failed_after_down
                        .map_or("? (never marked down)".into(), |v| v.to_string())
                );
            }
            _ => {}
        }
    }
    md.push_str(
        "\n\"Last request HAProxy sent it\" is the last line of HAProxy's log naming the \
         instance after the event (HAProxy logs a request when it ends; each line is stamped as \
         weft-bench reads it). A drained instance still answers the requests it had; HAProxy \
         learns of the drain from the health check's 503 or from the closed listener, \
         whichever comes first. A killed instance answers nothing more: HAProxy keeps choosing \
         it until its check marks it down, and each such attempt meets a refused connection \
         and is retried on another instance (\"retried by HAProxy\", the requests its log \
         shows with a retry count), so for a killed instance HAProxy stops sending at the \
         mark.\n\n",
    );

    md.push_str("## Scaling: three instances against one\n\n");
    let _ = write!(
        md,
        "Closed loop, {} keep-alive connections from {} load thread(s), `GET /echo` through \
         a HAProxy started afresh for each run (configuration below: the same checks and PROXY \
         protocol v2, balancing connections in TCP mode, no log line per request): \
         the backend with only w1, then the backend with all three, the two alternating for {} \
         round(s) of {:.0} s. \"Connections to weft\" counts the TCP connections the \
         instances accepted in the run (the client's, and the health checks').\n\n\
         | round | backend | requests/s | errors | connections to weft | client CPU (cores) \
         | HAProxy CPU (cores) | weft CPU (cores, all instances) | machine busy |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        layout.connections, layout.client_threads, plan.scale_rounds, plan.scale_secs,
    );
    for (round, label, r) in scale {
        let _ = writeln!(
            md,
            "| {round} | {label} | {:.0} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0}% |",
            r.rps,
            r.errors,
            r.server_conns,
            r.client_cores,
            r.haproxy_cores,
            r.weft_cores,
            r.machine_busy * 100.0
        );
    }
    let ratios = round_ratios(scale);
    if !ratios.is_empty() {
        let ratio = median(&ratios);
        let why = scale.iter().find_map(|x| limit(&x.2, ncores, layout));
        let _ = writeln!(
            md,
            "\nThree instances over one: **{ratio:.2}x**, the median of the rounds' ratios \
             ({}; target: at least {SCALE_TARGET}x when the client is not the limit). {}\n",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            match (&why, ratio >= SCALE_TARGET) {
                (None, true) => "Met.".to_string(),
                (Some(w), true) => format!("Met, though in a run {w}."),
                (Some(w), false) if !layout.pinned() => format!(
                    "Cannot be shown on this machine: {w}. With the client, HAProxy and the \
                     three instances on {ncores} cores, adding instances adds no CPU; the \
                     figure needs each instance (and the client) on cores of its own \
                     (from {ROOMY_CORES} cores up the experiment pins them so)."
                ),
                (Some(w), false) => format!("Not shown: {w}."),
                (None, false) => "**Not met**, and neither the client, HAProxy nor the \
                                  machine was saturated."
                    .to_string(),
            }
        );
    }

    md.push_str("## weft's log of the real client\n\n");
    md.push_str(
        "Every instance reads the PROXY v2 header HAProxy sends, so its access log names the \
         client in its namespace, not HAProxy's address on the bridge:\n\n| instance | access \
         log lines | naming the client | naming HAProxy |\n|---|---|---|---|\n",
    );
    for c in clients {
        let _ = writeln!(md, "| {} | {} | {} | {} |", c.0, c.1, c.2, c.3);
    }
    if let Some(c) = clients.iter().find(|c| !c.4.is_empty()) {
        let _ = writeln!(md, "\nA line of {}'s log:\n\n```\n{}\n```\n", c.0, c.4);
    }
    md.push_str(
        "\n## Over time\n\n![requests/s](throughput.png) ([SVG](throughput.svg))\n\n\
         ![p99](p99.png) ([SVG](p99.svg))\n\n\
         Files: `rows.csv` (per second: requests due, answered, failed, p50/p99 of the \
         answered, HAProxy's requests per instance), `events.csv`, `failures.csv` (every \
         failed request), `scaling.csv`, `clients.csv`, `haproxy.log` (seconds from the start \
         of the load, then HAProxy's line).\n\n",
    );
    let _ = write!(md, "## HAProxy's configuration\n\n```\n{hcfg}```\n");
    let _ = write!(
        md,
        "\nThe scaling runs' HAProxy (started afresh for each run):\n\n```\n{}```\n",
        scale_haproxy_config(
            net.host(BRIDGE_HOST),
            &(0..INSTANCES).map(|i| net.instance(i)).collect::<Vec<_>>(),
            layout.haproxy_threads
        )
    );
    fs::write(dir.join("report.md"), md)?;
    Ok(())
}
