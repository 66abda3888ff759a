//! The dashboard (`/_weft/status`) as an operator sees it: headless Chromium loads the page from
//! a server of each model under a known load, waits for two of the page's own updates, and the
//! numbers it rendered are checked against the load. The page must need nothing from outside
//! the server (no CDN): every `src` and `href` it holds is relative. `promtool check metrics`
//! (Prometheus) passes `/_weft/metrics`. Where Chromium or promtool is missing (`.ci/run`
//! installs both where apt-get allows) the test says "skipped".

#[macro_use]
mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Builder, Model, Server};

/// The offered load: requests per second to `/` and to a missing path.
const OK_PER_S: u64 = 40;
const MISSING_PER_S: u64 = 10;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// A client that sends `per_s` requests a second for `path`, paced, on one keep-alive
/// connection, until `stop`; counts the answers.
fn paced(srv: &Server, path: &'static str, per_s: u64, stop: Arc<AtomicBool>) -> Arc<AtomicU64> {
    let sent = Arc::new(AtomicU64::new(0));
    let count = sent.clone();
    let mut conn = srv.connect();
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let due = start + Duration::from_micros(n * 1_000_000 / per_s);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            conn.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
            if conn.read_response().is_err() {
                return;
            }
            n += 1;
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    sent
}

/// The `data-value` of the element with `id` in the rendered DOM (None if absent or empty).
fn value(dom: &str, id: &str) -> Option<f64> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let tag_end = at + dom[at..].find('>')?;
    let tag = &dom[dom[..at].rfind('<')?..tag_end];
    let v = tag.split("data-value=\"").nth(1)?.split('"').next()?;
    v.parse().ok()
}

fn dashboard_renders_the_load(model: Model) {
    let Some(browser) = chromium() else {
        println!("skipped: chromium is not installed (apt-get install chromium)");
        return;
    };
    let srv = Builder::new(model, "dashboard")
        .args(&["--status", "--timing"])
        .start();
    let stop = Arc::new(AtomicBool::new(false));
    let ok = paced(&srv, "/", OK_PER_S, stop.clone());
    let missing = paced(&srv, "/no-such-file", MISSING_PER_S, stop.clone());
    // Enough whole seconds of load in the server's history for the page's 5-second means.
    std::thread::sleep(Duration::from_millis(6500));
    let dir = common::unique_dir("dashboard-profile");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            &format!("--user-data-dir={}", dir.display()),
            // Timers run on virtual time; the page's fetches still wait for the server.
            "--virtual-time-budget=4000",
            "--dump-dom",
            &format!("http://{}/_weft/status", srv.addr),
        ])
        .stderr(Stdio::null())
        .output()
        .expect("run chromium");
    stop.store(true, Ordering::Relaxed);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let updates = dom
        .split("data-updates=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(updates >= 2, "the page updated {updates} times\n{dom}");
    // No fetch failed at the end (the page writes why into its error field).
    assert!(dom.contains("<span id=\"error\"></span>"), "{dom}");
    // The offered rates, within what a loaded 2-core machine keeps of a paced client.
    let rps = value(&dom, "l0-rps").expect("requests/s tile");
    let want = (OK_PER_S + MISSING_PER_S) as f64;
    assert!(
        rps > want * 0.5 && rps < want * 1.5 + 2.0,
        "requests/s rendered {rps}, offered {want}"
    );
    let not_found = value(&dom, "l0-4xx").expect("4xx/s tile");
    assert!(
        not_found > MISSING_PER_S as f64 * 0.4 && not_found < MISSING_PER_S as f64 * 1.6 + 2.0,
        "4xx/s rendered {not_found}, offered {MISSING_PER_S}"
    );
    // Every answer so far is counted (the page's own requests too).
    let total = value(&dom, "l0-requests").expect("requests tile");
    let answered = ok.load(Ordering::Relaxed) + missing.load(Ordering::Relaxed);
    assert!(
        total >= answered as f64 * 0.9,
        "{total} counted, {answered} answered"
    );
    // Timed: the latency tiles hold a bucket bound, in microseconds.
    let p99 = value(&dom, "l0-p99").expect("p99 tile");
    assert!((1.0..5e6).contains(&p99), "p99 {p99} µs");
    assert!(value(&dom, "cpu-percent").is_some(), "CPU tile\n{dom}");
    assert!(value(&dom, "resident").is_some_and(|b| b > 1e6), "{dom}");
    // The model's own chart, with a line per figure and a legend.
    assert!(
        dom.contains(&format!("{} model", model.name)),
        "no chart of the {} model\n{dom}",
        model.name
    );
    let _ = std::fs::remove_dir_all(dir);
}

per_model! {
    except fiber_nocache:
    dashboard_renders_the_load,
}

/// The page loads nothing from elsewhere: no absolute URL in any `src` or `href`, no
/// `@import`, so it works where the host has no internet.
#[test]
fn the_page_is_self_contained() {
    let srv = Builder::new(Model::FIBER, "dashboard-self-contained")
        .args(&["--status"])
        .start();
    let page = srv.get("/_weft/status").text();
    for attr in ["src=\"", "href=\""] {
        for at in page.match_indices(attr).map(|(i, _)| i + attr.len()) {
            let url = &page[at..at + page[at..].find('"').unwrap()];
            assert!(
                !url.contains("//") && !url.starts_with('/'),
                "{attr}{url} reaches outside the server"
            );
        }
    }
    assert!(
        !page.contains("@import") && !page.contains("url("),
        "{page}"
    );
}

/// `promtool check metrics` finds nothing wrong in `/_weft/metrics`, with every block filled
/// (timing on, a TLS listener would add nothing new to the names).
#[test]
fn promtool_accepts_the_metrics() {
    if Command::new("promtool").arg("--version").output().is_err() {
        println!("skipped: promtool is not installed (apt-get install prometheus)");
        return;
    }
    let srv = Builder::new(Model::FIBER, "dashboard-promtool")
        .args(&["--status", "--timing"])
        .start();
    for path in ["/", "/missing"] {
        srv.get(path);
    }
    let metrics = srv.get("/_weft/metrics").body;
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    check.stdin.take().unwrap().write_all(&metrics).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// The Grafana dashboard in `deploy/grafana/` asks only for series `/_weft/metrics` has: every
/// metric name in its queries is a family the server reports (with `--timing`, which its
/// latency panel needs), and every label it groups by is one those families carry.
#[test]
fn the_grafana_dashboard_uses_the_metrics_weft_reports() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/weft-dashboard.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("valid JSON");
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("expr").to_string())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let srv = Builder::new(Model::FIBER, "dashboard-grafana")
        .args(&["--status", "--timing"])
        .start();
    srv.get("/");
    // A response's phases are recorded just after it is written: poll for them.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let mut metrics = srv.get("/_weft/metrics").text();
    while !metrics.contains("weft_request_phase_seconds_bucket") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
        metrics = srv.get("/_weft/metrics").text();
    }
    let families: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let words = |e: &str| -> Vec<String> {
        e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    for e in &exprs {
        for w in words(e) {
            if !(w.starts_with("weft_") || w.starts_with("process_")) {
                continue;
            }
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| w.strip_suffix(s).filter(|f| families.contains(f)))
                .unwrap_or(&w);
            assert!(
                families.contains(&family),
                "`{w}` in `{e}` is not reported\n{metrics}"
            );
        }
        // Labels grouped by: each must appear on some series.
        for by in e.split("by (").skip(1) {
            for label in by.split(')').next().unwrap().split(',') {
                let label = label.trim();
                assert!(
                    metrics.contains(&format!("{label}=\"")),
                    "label `{label}` in `{e}` is on no series"
                );
            }
        }
    }
    assert!(metrics.contains("phase=\"last_byte_out\""), "{metrics}");
}
