//! Where a request's time goes (`[timing]`, `--timing`): per-phase histograms in the status
//! JSON and a `Server-Timing` header, measured where the time is really spent.

use std::time::Duration;

use crate::common::{Builder, Model};

per_model! {
    a_body_sent_late_shows_in_the_body_phase_and_the_histograms,
    untimed_requests_carry_no_header_and_fill_no_histogram,
}

fn phases(srv: &crate::common::Server) -> serde_json::Value {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200);
    let j: serde_json::Value = serde_json::from_slice(&r.body).expect("status JSON");
    j["phases"].clone()
}

/// `name;dur=MS` from a Server-Timing value.
fn dur_ms(server_timing: &str, name: &str) -> Option<f64> {
    server_timing.split(',').find_map(|part| {
        let (n, d) = part.trim().split_once(";dur=")?;
        (n == name).then(|| d.parse().ok())?
    })
}

fn a_body_sent_late_shows_in_the_body_phase_and_the_histograms(model: Model) {
    // No body read ahead (the process model's master would wait for it before the child
    // starts its clock; `limits.client_body_buffer`): the handler's reader waits for it.
    let srv = Builder::new(model, "timing")
        .args(&["--timing", "--status"])
        .config("[limits]\nclient_body_buffer = 0\n")
        .start();
    let mut c = srv.connect();
    // The head now, the body 150 ms later: the server cannot have read it sooner.
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n");
    std::thread::sleep(Duration::from_millis(150));
    c.send(b"hello");
    let r = c.read_response().expect("echo");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello");
    let st = r
        .header("Server-Timing")
        .expect("Server-Timing header")
        .to_string();
    let body = dur_ms(&st, "body").expect("body phase");
    // The server reads the body from when it has the head; on a loaded machine it may get to
    // the head late (the accept phase then grows), so the wait shows as body read time
    // counted from the head's arrival: accept + head + body spans the client's 150 ms.
    let before = dur_ms(&st, "accept").unwrap_or(0.0) + dur_ms(&st, "head").unwrap_or(0.0);
    assert!(body + before >= 140.0, "body read took {body} ms in {st}");
    assert!(
        body >= 75.0,
        "the wait for the body is not in the body phase: {st}"
    );
    for name in ["accept", "head", "handler"] {
        assert!(dur_ms(&st, name).is_some(), "{name} missing from {st}");
    }
    // A second request on the connection has no accept phase.
    c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response().expect("echo");
    let st = r
        .header("Server-Timing")
        .expect("Server-Timing header")
        .to_string();
    assert!(dur_ms(&st, "accept").is_none(), "{st}");
    assert!(dur_ms(&st, "head").is_some(), "{st}");

    // The output phases are counted just after the last write returns, which can be after
    // the client has the response: poll.
    let names = ["head", "body", "handler", "first_byte_out", "last_byte_out"];
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let p = loop {
        let p = phases(&srv);
        if names.iter().all(|n| p[n]["count"].as_u64().unwrap() >= 2) {
            break p;
        }
        assert!(std::time::Instant::now() < end, "phases not counted: {p}");
        std::thread::sleep(Duration::from_millis(10));
    };
    // One of the body reads waited 150 ms: the histogram's top bucket holds it.
    assert!(
        p["body"]["p99_us_at_most"].as_u64().unwrap() >= 131_072,
        "{p}"
    );
}

fn untimed_requests_carry_no_header_and_fill_no_histogram(model: Model) {
    let srv = Builder::new(model, "untimed").args(&["--status"]).start();
    let r = srv.get("/echo");
    assert_eq!(r.status, 200);
    assert!(r.header("Server-Timing").is_none());
    // Nothing is measured, so the status JSON has no `phases` block (rather than one of
    // empty histograms), and the metrics no phase family.
    let r = srv.get("/_weft/status.json");
    let j: serde_json::Value = serde_json::from_slice(&r.body).expect("status JSON");
    assert!(j.get("phases").is_none(), "{j}");
    assert!(j.get("listeners").is_some(), "{j}");
    let m = srv.get("/_weft/metrics").text();
    assert!(!m.contains("weft_request_phase_seconds"), "{m}");
}
