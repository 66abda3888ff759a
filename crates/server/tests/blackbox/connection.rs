//! Connection management: keep-alive, close, pipelining, `Expect`, and the header-read and
//! keep-alive timeouts.

use std::time::{Duration, Instant};

use crate::common::{Builder, Model, ReadError, Server, INDEX_HTML};

per_model! {
    http11_keeps_alive_by_default,
    http10_keep_alive_only_when_asked,
    pipelined_requests_are_answered_in_order,
    a_pipelined_body_still_on_its_way_does_not_hold_back_earlier_answers,
    not_modified_and_head_answers_in_a_pipelined_batch,
    a_slow_reader_of_a_pipelined_batch_gets_every_response_whole,
    pipelined_requests_split_across_writes,
    expect_100_continue,
    unknown_expectation_gives_417,
    slow_request_head_gets_408_and_close,
    idle_keep_alive_connection_is_closed_after_keepalive_timeout,
    a_partial_head_behind_a_pipelined_request_gets_the_header_read_timeout,
    keepalive_requests_closes_after_the_last_response,
    keepalive_time_closes_an_old_connection_after_its_next_response,
}

/// Generous bound for "the server closes promptly" (the configured timeouts are 1 s).
const PROMPTLY: Duration = Duration::from_secs(5);

fn http11_keeps_alive_by_default(model: Model) {
    let srv = Server::start(model, "ka11");
    let mut c = srv.connect();
    for i in 0..5 {
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("request {i}: {e:?}"));
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
        assert!(!r.closes(), "{r:?}");
        assert_eq!(r.version, "HTTP/1.1");
    }
    // A POST with a body in the middle keeps the connection in step.
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().unwrap().body, b"abc");
    c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.body, b"echo");
    assert!(r.closes(), "Connection: close not echoed: {r:?}");
    assert!(
        c.closed_within(PROMPTLY),
        "server kept the connection after close"
    );
}

fn http10_keep_alive_only_when_asked(model: Model) {
    let srv = Server::start(model, "ka10");
    let mut c = srv.connect();
    for _ in 0..3 {
        c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Connection"), Some("keep-alive"), "{r:?}");
        assert!(!r.until_close);
    }
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    assert!(r.closes(), "{r:?}");
    assert!(c.closed_within(PROMPTLY), "HTTP/1.0 connection not closed");

    // Without keep-alive from the start.
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    assert!(c.closed_within(PROMPTLY));

    // `Connection: close` in HTTP/1.1.
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = c.read_response().unwrap();
    assert!(r.closes());
    assert!(c.closed_within(PROMPTLY));
    srv.assert_alive();
}

fn pipelined_requests_are_answered_in_order(model: Model) {
    let srv = Builder::new(model, "pipeline")
        .file("a.txt", b"AAA")
        .start();
    let mut c = srv.connect();
    let mut batch = Vec::new();
    batch.extend_from_slice(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.extend_from_slice(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
    );
    batch.extend_from_slice(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.extend_from_slice(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nchun\r\n3\r\nked\r\n0\r\n\r\n",
    );
    batch.extend_from_slice(b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n");
    batch.extend_from_slice(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    c.send(&batch);
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"AAA"[..]));
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello world"[..]));
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Length"),
        Some(&*INDEX_HTML.len().to_string())
    );
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"chunked"[..]));
    assert_eq!(c.read_response().unwrap().status, 404);
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
    assert!(c.closed_within(PROMPTLY));
}

/// Responses of pipelined requests are gathered into one write; a request whose body has not
/// arrived yet must not hold back the answers before it (the client may wait for them).
fn a_pipelined_body_still_on_its_way_does_not_hold_back_earlier_answers(model: Model) {
    let srv = Builder::new(model, "pipebody")
        .file("a.txt", b"AAA")
        .start();
    let mut c = srv.connect();
    c.send(
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n\
          PUT /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
    );
    for i in 0..2 {
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("answer {i} held back: {e:?}"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"AAA"[..]));
    }
    c.send(b"hello");
    let r = c.read_response().unwrap();
    assert!(r.status >= 400, "{r:?}");
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().unwrap().body, b"AAA");
}

fn not_modified_and_head_answers_in_a_pipelined_batch(model: Model) {
    let srv = Builder::new(model, "pipe304").file("a.txt", b"AAA").start();
    let etag = srv.get("/a.txt").header("ETag").expect("ETag").to_string();
    let mut c = srv.connect();
    let mut batch = Vec::new();
    for _ in 0..3 {
        batch.extend_from_slice(
            format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n").as_bytes(),
        );
        batch.extend_from_slice(b"HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        batch.extend_from_slice(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    c.send(&batch);
    for round in 0..3 {
        let r = c.read_response().unwrap();
        assert_eq!((r.status, r.body.len()), (304, 0), "round {round}: {r:?}");
        let r = c.read_head_response().unwrap();
        assert_eq!((r.status, r.header("Content-Length")), (200, Some("3")));
        let r = c.read_response().unwrap();
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"AAA"[..]),
            "round {round}"
        );
    }
    srv.assert_alive();
}

/// A client that pipelines many requests for a larger file and reads slowly: the gathered
/// writes block on a full send buffer like any other, and every response arrives whole.
fn a_slow_reader_of_a_pipelined_batch_gets_every_response_whole(model: Model) {
    let body: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let srv = Builder::new(model, "pipeslow").file("b.txt", &body).start();
    let mut c = srv.connect();
    let n = 100;
    let one = b"GET /b.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /echo-none HTTP/1.1\r\nHost: x\r\n\r\n";
    c.send(&one.repeat(n));
    for i in 0..n {
        std::thread::sleep(Duration::from_millis(2));
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("response {i}: {e:?}"));
        assert_eq!((r.status, r.body.len()), (200, body.len()), "response {i}");
        assert!(r.body == body, "response {i}: body differs");
        assert_eq!(c.read_response().unwrap().status, 404, "response {i}");
    }
    srv.assert_alive();
}

fn pipelined_requests_split_across_writes(model: Model) {
    let srv = Server::start(model, "pipesplit");
    let mut c = srv.connect();
    // One byte at a time over a request boundary.
    let batch: &[u8] = b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nokGET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for b in batch {
        c.send(std::slice::from_ref(b));
    }
    assert_eq!(c.read_response().unwrap().body, b"echo");
    assert_eq!(c.read_response().unwrap().body, b"ok");
    assert_eq!(c.read_response().unwrap().body, INDEX_HTML);
}

fn expect_100_continue(model: Model) {
    let srv = Server::start(model, "expect");
    let mut c = srv.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = c.read_response().unwrap();
    assert_eq!(interim.status, 100, "{interim:?}");
    assert_eq!(interim.version, "HTTP/1.1");
    c.send(b"hello");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    // Chunked, on the same connection.
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 100);
    c.send(b"3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(c.read_response().unwrap().body, b"abc");

    // A request without a body gets no interim response.
    c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));

    // A handler that refuses without reading the body: no 100, the final status at once.
    c.send(b"POST /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 405, "{r:?}");
    srv.assert_alive();
}

fn unknown_expectation_gives_417(model: Model) {
    let srv = Server::start(model, "expect417");
    let r = srv.send(b"GET / HTTP/1.1\r\nHost: x\r\nExpect: the-unexpected\r\n\r\n");
    assert_eq!(r.status, 417, "{r:?}");
    srv.assert_alive();
    let r = srv
        .send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 200-ok\r\n\r\nabc");
    assert_eq!(r.status, 417, "{r:?}");
    srv.assert_alive();
    // Keep-alive survives a 417 to a request without a body.
    let mut c = srv.connect();
    c.send(
        b"GET / HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(c.read_response().unwrap().status, 417);
    assert_eq!(c.read_response().unwrap().body, b"echo");
}

fn timeouts_server(model: Model, name: &str) -> Server {
    Builder::new(model, name)
        .config("[timeouts]\nheader_read = \"1s\"\nkeepalive = \"1s\"\n")
        .start()
}

fn slow_request_head_gets_408_and_close(model: Model) {
    let srv = timeouts_server(model, "header408");
    let mut c = srv.connect();
    let start = Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.closes());
    assert!(
        start.elapsed() < PROMPTLY,
        "408 only after {:?}",
        start.elapsed()
    );
    assert!(c.closed_within(PROMPTLY));

    // Trickling bytes does not extend the deadline: it covers the whole head.
    let mut c = srv.connect();
    let start = Instant::now();
    let mut trickle = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ".to_vec();
    trickle.extend_from_slice(&[b'y'; 50]);
    for b in &trickle {
        // Sending stops once the deadline has surely passed, or when the server has closed.
        if start.elapsed() > Duration::from_millis(1500)
            || c.try_send(std::slice::from_ref(b)).is_err()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 408, "{r:?}");
    srv.assert_alive();
}

fn idle_keep_alive_connection_is_closed_after_keepalive_timeout(model: Model) {
    let srv = timeouts_server(model, "keepalive");
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    let start = Instant::now();
    assert!(c.closed_within(PROMPTLY), "idle connection still open");
    // The close is silent (no 408 for a connection between requests) and not immediate.
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "closed after {:?}",
        start.elapsed()
    );

    // A connection that never sends a byte is closed silently as well.
    let mut c = srv.connect();
    assert!(c.closed_within(PROMPTLY));
    srv.assert_alive();

    // An idle connection that then sends in time is still served.
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 200);
    std::thread::sleep(Duration::from_millis(300));
    c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    match c.read_response() {
        Ok(r) => assert_eq!(r.body, b"echo"),
        Err(e @ ReadError::Closed) => panic!("closed before keepalive: {e:?}"),
        Err(e) => panic!("{e:?}"),
    }
}

/// Part of a head behind a pipelined request is a head begun: it has the header-read timeout
/// from when it is seen, not the keep-alive timeout of a connection between requests, on every
/// model (the pipeline's receive once gave it the keep-alive timeout).
fn a_partial_head_behind_a_pipelined_request_gets_the_header_read_timeout(model: Model) {
    let srv = Builder::new(model, "pipelined-partial")
        .config("[timeouts]\nheader_read = \"1s\"\nkeepalive = \"60s\"\n")
        .start();
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\nX-Part");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    let start = Instant::now();
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.closes());
    assert!(
        start.elapsed() < PROMPTLY,
        "408 only after {:?} (the keep-alive timeout is 60 s)",
        start.elapsed()
    );
    assert!(
        srv.log().contains("408 request head not received in time"),
        "{}",
        srv.log()
    );
    srv.assert_alive();
}

fn keepalive_requests_closes_after_the_last_response(model: Model) {
    let srv = Builder::new(model, "ka_requests")
        .config("[limits]\nkeepalive_requests = 3\n")
        .start();
    let mut c = srv.connect();
    for i in 1..=3 {
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert_eq!(r.closes(), i == 3, "request {i}: {r:?}");
    }
    assert!(c.closed_within(PROMPTLY), "open after the last request");
    // Pipelined past the bound: the third is answered with close, the fourth never.
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4).as_slice());
    for i in 1..=3 {
        let r = c.read_response().unwrap();
        assert_eq!((r.status, r.closes()), (200, i == 3), "request {i}: {r:?}");
    }
    assert!(
        c.read_response().is_err(),
        "a fourth answer on the connection"
    );
    // A new connection starts a new count.
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(!c.read_response().unwrap().closes());
}

fn keepalive_time_closes_an_old_connection_after_its_next_response(model: Model) {
    let srv = Builder::new(model, "ka_time")
        .config("[timeouts]\nkeepalive_time = \"1s\"\n")
        .start();
    let mut c = srv.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(!c.read_response().unwrap().closes());
    // Counted in whole seconds: past the next second boundary.
    std::thread::sleep(Duration::from_millis(1100));
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.closes(), "a connection past keepalive_time kept: {r:?}");
    assert!(c.closed_within(PROMPTLY));
}
