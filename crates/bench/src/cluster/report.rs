//! What a run writes: [`write()`] puts the data files and charts ([`super::data`]) and
//! `report.md` in the results folder. The report: the setup, the events with their failures
//! and HAProxy's view, the targets met or not, the scaling runs and their verdict, what weft's
//! access logs name as the client, and both HAProxy configurations.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;

use super::data;
use super::events::{event_rows, EventRow};
use super::haproxy::scale_haproxy_config;
use super::logs::{ClientTally, Stamped};
use super::openloop::Sample;
use super::pin::ROOMY_CORES;
use super::scaling::{limit, round_ratios, Scaled, SCALE_TARGET};
use super::timeline::Done;
use super::{Setup, CHECK_INTER, FALL, HEALTH, INSTANCES, REQUEST_TIMEOUT, RISE, SHUTDOWN_GRACE};
use crate::experiment;
use crate::stats::median;

/// What a run measured, for its files.
pub(crate) struct Results {
    /// The timeline HAProxy's configuration.
    pub(crate) hcfg: String,
    pub(crate) scale: Vec<Scaled>,
    pub(crate) done: Vec<Done>,
    pub(crate) samples: Vec<Sample>,
    pub(crate) hlog: Vec<Stamped>,
    pub(crate) clients: Vec<ClientTally>,
}

/// Writes the run's data files, charts and `report.md` into the setup's results folder.
pub(crate) fn write(s: &Setup, r: &Results) -> Result<(), Box<dyn Error>> {
    let dir = &s.dir;
    experiment::mark(dir, s.quick)?;
    let seconds = data::seconds(s.plan.secs, &r.samples, &r.hlog);
    fs::write(dir.join("rows.csv"), data::rows_csv(&seconds))?;
    fs::write(dir.join("failures.csv"), data::failures_csv(&r.samples))?;
    let events = event_rows(&r.done, &r.samples, &r.hlog, s.plan.secs);
    fs::write(dir.join("events.csv"), data::events_csv(&events))?;
    fs::write(dir.join("clients.csv"), data::clients_csv(&r.clients))?;
    fs::write(dir.join("scaling.csv"), data::scaling_csv(&r.scale))?;
    data::charts(dir, s.quick)?;
    let mut md = intro(s);
    events_section(&mut md, &events);
    scaling_section(&mut md, s, &r.scale);
    clients_section(&mut md, &r.clients);
    files_section(&mut md, s, &r.hcfg);
    fs::write(dir.join("report.md"), md)?;
    Ok(())
}

/// The title, the setup (instances, namespaces, HAProxy, cores) and the load.
fn intro(s: &Setup) -> String {
    let (plan, net) = (&s.plan, s.net.0);
    format!(
        "# cluster: three weft instances behind HAProxy\n\n{}\
         Three weft instances (`{}` model, `threads = 1`, `proxy_protocol = true`, \
         `[health] path = \"{HEALTH}\"`, `shutdown_grace = \"{}s\"`), each in its own network \
         namespace at 10.214.{net}.11-13, joined by veth pairs to a bridge where HAProxy \
         listens (10.214.{net}.1); the client in a namespace of its own (10.214.{net}.2). \
         HAProxy: round robin, `option httpchk GET {HEALTH}` every {} ms (fall {FALL}, rise \
         {RISE}), `retry-on all-retryable-errors`, `retries 3`, `option redispatch 1` for \
         GET/HEAD, PROXY protocol v2 to weft (configuration below). {}\n\n\
         Load: weft-bench's open loop at {:.0} requests/s for {:.0} s over {} connections, \
         half keep-alive, half a new connection per request (`GET /echo`), latency from each \
         request's due time (no coordinated omission); a request fails on a connect, write or \
         read error, a timeout ({} s) or a status other than 2xx/3xx. The events happen on \
         the timeline below; \"failed\" counts the requests due from an event to the next.\n\n",
        if s.quick {
            "**Quick run (`--quick`): a shorter timeline at a lower rate, a smoke check, not a \
             measurement.**\n\n"
        } else {
            ""
        },
        s.model,
        SHUTDOWN_GRACE.as_secs(),
        CHECK_INTER.as_millis(),
        s.layout.describe(s.ncores),
        plan.rate,
        plan.secs,
        plan.connections,
        REQUEST_TIMEOUT.as_secs(),
    )
}

/// The events' table, the targets each met or not, and how to read HAProxy's view.
fn events_section(md: &mut String, events: &[EventRow]) {
    md.push_str(
        "## Events\n\n| at (s) | event | requests due | failed (keep-alive / per request) | \
         HAProxy marked it down after (s) | last request HAProxy sent it, after (s) | failed \
         after marked down | retried by HAProxy | what happened |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for e in events {
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
    for e in events {
        targets(md, e);
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
}

/// The target of event `e`, met or not: none failed through a drain or a rolling upgrade;
/// through a kill, none after HAProxy marked the instance down.
fn targets(md: &mut String, e: &EventRow) {
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
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

/// The scaling runs' table and the ratio of three instances over one, with its verdict.
fn scaling_section(md: &mut String, s: &Setup, scale: &[Scaled]) {
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
        s.layout.connections, s.layout.client_threads, s.plan.scale_rounds, s.plan.scale_secs,
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
        let _ = writeln!(
            md,
            "\nThree instances over one: **{ratio:.2}x**, the median of the rounds' ratios \
             ({}; target: at least {SCALE_TARGET}x when the client is not the limit). {}\n",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            scaling_verdict(s, scale, ratio)
        );
        md.push_str("![scaling](scaling.png) ([SVG](scaling.svg))\n");
    }
}

/// Whether the ratio `ratio` meets the target, and where it does not, whether the client,
/// HAProxy or the machine (the first run's [`limit`]) kept it from showing.
fn scaling_verdict(s: &Setup, scale: &[Scaled], ratio: f64) -> String {
    let ncores = s.ncores;
    let why = scale.iter().find_map(|x| limit(&x.2, ncores, &s.layout));
    match (&why, ratio >= SCALE_TARGET) {
        (None, true) => "Met.".to_string(),
        (Some(w), true) => format!("Met, though in a run {w}."),
        (Some(w), false) if !s.layout.pinned() => format!(
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
}

/// What each instance's access log names as the client, with a line of one.
fn clients_section(md: &mut String, clients: &[ClientTally]) {
    md.push_str("## weft's log of the real client\n\n");
    md.push_str(
        "Every instance reads the PROXY v2 header HAProxy sends, so its access log names the \
         client in its namespace, not HAProxy's address on the bridge:\n\n| instance | access \
         log lines | naming the client | naming HAProxy |\n|---|---|---|---|\n",
    );
    for c in clients {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            c.instance, c.lines, c.real, c.balancer
        );
    }
    if let Some(c) = clients.iter().find(|c| !c.last_line.is_empty()) {
        let _ = writeln!(
            md,
            "\nA line of {}'s log:\n\n```\n{}\n```\n",
            c.instance, c.last_line
        );
    }
}

/// The charts, the list of files, and both HAProxy configurations (`hcfg`, the timeline's).
fn files_section(md: &mut String, s: &Setup, hcfg: &str) {
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
            s.net.bridge(),
            &(0..INSTANCES)
                .map(|i| s.net.instance(i))
                .collect::<Vec<_>>(),
            s.layout.haproxy_threads
        )
    );
}
