//! The status page, its JSON and the Prometheus metrics: served from loopback with `--status`,
//! absent without it.

use crate::common::{Builder, Model, Server};

per_model! {
    status_pages_with_status_flag,
    status_page_shows_the_cache_figures_of_the_json,
    status_pages_absent_without_flag,
    status_pages_refused_to_clients_outside_allow,
    status_pages_evaluate_preconditions,
    pipelined_responses_are_each_counted_with_their_bytes,
    guards_and_compression_are_counted_across_processes,
}

/// The status JSON counts what the guards refused and what compression took in and gave out,
/// in every model (the `process` model's children count into shared memory).
fn guards_and_compression_are_counted_across_processes(model: Model) {
    let text = "weft compresses this line well. ".repeat(200);
    let srv = Builder::new(model, "status-guards")
        .config("[compression]\nenabled = true\n[limits]\nconn_per_ip = 1\n")
        .args(&["--status"])
        .file("big.txt", text.as_bytes())
        .start();
    let mut held = srv.connect();
    held.send(b"GET /big.txt HTTP/1.1\r\nHost: test\r\nAccept-Encoding: gzip\r\n\r\n");
    let r = held.read_response().expect("the compressed file");
    assert_eq!(
        (r.status, r.header("Content-Encoding")),
        (200, Some("gzip"))
    );
    assert!(r.body.len() < text.len() / 4, "{} bytes", r.body.len());
    // A second connection from the same address is one too many.
    let mut other = srv.connect();
    other.send(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_eq!(other.read_response().expect("refused").status, 503);
    // Counted just after the answers: poll, on the connection held.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        held.send(b"GET /_weft/status.json HTTP/1.1\r\nHost: test\r\n\r\n");
        let r = held.read_response().expect("status.json");
        let j: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
        let (z_in, z_out) = (
            j["compression"]["bytes_in"].as_u64().unwrap(),
            j["compression"]["bytes_out"].as_u64().unwrap(),
        );
        let refused = j["guards"]["conn_rejected"].as_u64().unwrap();
        if refused >= 1 && z_in >= text.len() as u64 {
            assert!(z_out > 0 && z_out < z_in / 4, "{z_out} of {z_in}");
            assert_eq!(j["version"], 1);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "refused {refused}, compressed {z_in} -> {z_out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

const PATHS: [&str; 3] = ["/_weft/status", "/_weft/status.json", "/_weft/metrics"];

/// Total requests over all listeners in `/_weft/status.json`.
fn requests(srv: &Server) -> u64 {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    let listeners = v["listeners"].as_array().expect("listeners array");
    assert_eq!(listeners.len(), 1);
    assert_eq!(listeners[0]["model"], srv.model.name);
    assert_eq!(listeners[0]["addr"], srv.addr.to_string());
    listeners
        .iter()
        .map(|l| l["requests"].as_u64().expect("requests count"))
        .sum()
}

fn status_pages_with_status_flag(model: Model) {
    let srv = Builder::new(model, "status").args(&["--status"]).start();
    let r = srv.get("/_weft/status");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r
        .header("Content-Type")
        .is_some_and(|t| t.starts_with("text/html")));
    assert!(r.text().contains("<html"), "{}", r.text());

    let before = requests(&srv);
    for _ in 0..3 {
        srv.assert_alive();
    }
    assert_eq!(srv.get("/missing").status, 404);
    // A response is counted just after it is written, so the count may lag the client a
    // little: poll. The three GETs, the 404 and the status.json request before them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut after = requests(&srv);
    while after < before + 5 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = requests(&srv);
    }
    assert!(
        after >= before + 5,
        "requests went from {before} to {after}"
    );

    let r = srv.get("/_weft/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r
        .header("Content-Type")
        .is_some_and(|t| t.starts_with("text/plain")));
    let text = r.text();
    assert!(
        text.contains("# TYPE weft_requests_total counter"),
        "{text}"
    );
    let ok_line = text
        .lines()
        .find(|l| l.starts_with("weft_requests_total{") && l.contains("class=\"2xx\""))
        .unwrap_or_else(|| panic!("no 2xx line in {text}"));
    let n: u64 = ok_line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 4, "{ok_line}");
    assert!(text.contains("class=\"4xx\"} "), "{text}");

    assert_eq!(srv.get("/_weft/nothing").status, 404);
    let r = srv.send(b"POST /_weft/status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.status, 405);
}

fn status_page_shows_the_cache_figures_of_the_json(model: Model) {
    let srv = Builder::new(model, "status-cache")
        .args(&["--status"])
        .start();
    // Two lookups (misses: a file this new is not cached yet, see `cache.rs`).
    for _ in 0..2 {
        assert_eq!(srv.get("/index.html").status, 200);
    }
    let r = srv.get("/_weft/status.json");
    let j: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    let cache = &j["cache"];
    // Status requests never touch the cache, so the page read next shows the same figures.
    let page = srv.get("/_weft/status").text();
    assert!(page.contains("<h2>response cache</h2>"), "{page}");
    if cache["enabled"] == true {
        let row: String = [
            "hits",
            "misses",
            "fills",
            "evictions",
            "entries",
            "bytes",
            "max_bytes",
            "max_object_bytes",
        ]
        .iter()
        .map(|k| format!("<td>{}</td>", cache[k].as_u64().expect(k)))
        .collect();
        assert!(page.contains(&row), "{row} not in {page}");
        // Connection processes count in their own copy of the cache.
        if model.name != "process" {
            assert!(cache["misses"].as_u64().unwrap() >= 2, "{cache}");
        }
    } else {
        assert!(
            page.contains("<h2>response cache</h2>\n<p>off</p>"),
            "{page}"
        );
    }
}

fn status_pages_absent_without_flag(model: Model) {
    let srv = Server::start(model, "nostatus");
    for p in PATHS {
        assert_eq!(srv.get(p).status, 404, "{p}");
    }
    srv.assert_alive();
}

fn status_pages_refused_to_clients_outside_allow(model: Model) {
    let srv = Builder::new(model, "status-deny")
        .config("[status]\nenabled = true\nallow = [\"10.0.0.0/8\"]\n")
        .start();
    for p in PATHS {
        assert_eq!(srv.get(p).status, 403, "{p}");
    }
}

/// The status pages are answers weft computes without validators: only `*` matches, and a 404
/// under the prefix ignores preconditions (RFC 9110 §13.2.1).
fn status_pages_evaluate_preconditions(model: Model) {
    let srv = Builder::new(model, "status-preconditions")
        .args(&["--status"])
        .start();
    for (path, fields, want) in [
        ("/_weft/status.json", "If-Match: *", 200),
        ("/_weft/status.json", "If-Match: \"x\"", 412),
        ("/_weft/metrics", "If-None-Match: *", 304),
        ("/_weft/nothing", "If-Match: \"x\"", 404),
    ] {
        let r = srv.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{fields}\r\n\r\n").as_bytes());
        assert_eq!(r.status, want, "{path} {fields}: {r:?}");
    }
}

/// `responses` of `class` and `bytes_out` of the one listener in `/_weft/status.json`.
fn class_and_bytes(srv: &Server, class: &str) -> (u64, u64) {
    let r = srv.get("/_weft/status.json");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    let l = &v["listeners"][0];
    (
        l["responses"][class].as_u64().expect("a class count"),
        l["bytes_out"].as_u64().expect("bytes_out"),
    )
}

/// Pipelined responses go out gathered in one write and are counted together: every one of
/// them, by its own status, with its bytes.
fn pipelined_responses_are_each_counted_with_their_bytes(model: Model) {
    let srv = Builder::new(model, "status-pipelined")
        .args(&["--status"])
        .start();
    let (ok0, _) = class_and_bytes(&srv, "2xx");
    let (missing0, bytes0) = class_and_bytes(&srv, "4xx");
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let batch = [
        get("/echo"),
        get("/echo"),
        get("/missing"),
        get("/echo"),
        get("/missing"),
        get("/echo"),
    ]
    .concat();
    let mut c = srv.connect();
    c.send(batch.as_bytes());
    let mut answered = 0u64;
    for want in [200, 200, 404, 200, 404, 200] {
        let r = c.read_response().unwrap();
        assert_eq!(r.status, want, "{r:?}");
        answered += wire_len(&r);
    }
    // Counted just after the write: poll.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (missing, _) = class_and_bytes(&srv, "4xx");
        let (ok, bytes) = class_and_bytes(&srv, "2xx");
        // 2xx also counts the status.json answers read in between.
        if missing - missing0 == 2 && ok - ok0 >= 4 {
            assert!(
                bytes - bytes0 >= answered,
                "bytes_out grew by {} for {answered} bytes of answers",
                bytes - bytes0
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "4xx {missing0} -> {missing}, 2xx {ok0} -> {ok}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Bytes of `r` on the wire (its head as parsed, one space between the status line's parts).
fn wire_len(r: &crate::common::Response) -> u64 {
    let line = r.version.len() + 1 + 3 + 1 + r.reason.len() + 2;
    let fields: usize = r
        .headers
        .iter()
        .map(|(n, v)| n.len() + 2 + v.len() + 2)
        .sum();
    (line + fields + 2 + r.body.len()) as u64
}
