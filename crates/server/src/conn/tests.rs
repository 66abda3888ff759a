//! The driver's batching of pipelined responses, over a recorded transport.

use super::gather::{Recorder, GATHER_RESPONSES};
use super::*;
use crate::app::Route;
use crate::body::RequestBody;
use crate::config::{Config, Model};
use crate::response::Response;
use crate::Request;

/// Serves `input` on an app whose `/n` answers the request's query; returns the writes.
fn serve_all(input: &[u8]) -> Vec<Vec<u8>> {
    let route = Route {
        method: None,
        path: "/n".into(),
        prefix: false,
        handler: Arc::new(|req: &Request, _: &mut RequestBody<'_>| {
            Response::text(200, format!("<{}>", req.query().unwrap_or("")))
        }),
    };
    let cfg = Config {
        root: std::env::temp_dir(),
        ..Config::default()
    };
    let app = App::new(cfg, vec![route]).unwrap();
    let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let info = ConnInfo {
        peer: addr,
        local: addr,
        listener: Arc::new(ListenerMetrics::new(addr, Model::Thread)),
        registration: None,
        accepted: None,
        proxied: Default::default(),
        client_slot: Default::default(),
        h2: Default::default(),
        tls: Default::default(),
        life: crate::conn::Life::now(),
    };
    let mut wire = Recorder {
        input: input.to_vec(),
        writes: Vec::new(),
    };
    serve(&mut wire, &app, &info).unwrap();
    wire.writes
}

fn bodies(out: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(out);
    text.split("HTTP/1.1 ")
        .skip(1)
        .map(|r| {
            let status = &r[..3];
            let body = r.split("\r\n\r\n").nth(1).unwrap_or("");
            format!("{status}{body}")
        })
        .collect()
}

#[test]
fn pipelined_responses_go_out_in_one_write_in_order() {
    let input: Vec<u8> = (0..16)
        .flat_map(|i| format!("GET /n?{i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
        .collect();
    let writes = serve_all(&input);
    assert_eq!(writes.len(), 1, "one write for the whole batch");
    let want: Vec<String> = (0..16).map(|i| format!("200<{i}>")).collect();
    assert_eq!(bodies(&writes[0]), want);
}

#[test]
fn a_close_in_the_middle_of_a_batch_ends_it_there() {
    let mut input = Vec::new();
    input.extend_from_slice(b"GET /n?a HTTP/1.1\r\nHost: x\r\n\r\n");
    input.extend_from_slice(b"HEAD /n?b HTTP/1.1\r\nHost: x\r\n\r\n");
    input.extend_from_slice(b"GET /n?c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    input.extend_from_slice(b"GET /n?d HTTP/1.1\r\nHost: x\r\n\r\n");
    let writes = serve_all(&input);
    assert_eq!(writes.len(), 1, "{writes:?}");
    let out = String::from_utf8(writes.concat()).unwrap();
    // The HEAD response has its length but no body; the batch ends with the close.
    assert_eq!(bodies(out.as_bytes()), ["200<a>", "200", "200<c>"]);
    assert!(out.contains("Content-Length: 3\r\n"), "{out}");
    assert!(!out.contains("<b>") && !out.contains("<d>"), "{out}");
    let last = out.rsplit("HTTP/1.1 ").next().unwrap();
    assert!(last.contains("Connection: close\r\n"), "{out}");
}

#[test]
fn more_pipelined_requests_than_a_batch_holds_take_more_writes() {
    let n = GATHER_RESPONSES as usize * 2 + 5;
    let input: Vec<u8> = (0..n)
        .flat_map(|i| format!("GET /n?{i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
        .collect();
    let writes = serve_all(&input);
    // Each write carries at most a batch (and the read buffer may split the input).
    assert!(writes.len() >= 3, "{} writes", writes.len());
    for w in &writes {
        assert!(bodies(w).len() <= GATHER_RESPONSES as usize + 1);
    }
    let want: Vec<String> = (0..n).map(|i| format!("200<{i}>")).collect();
    assert_eq!(bodies(&writes.concat()), want);
}

#[test]
fn a_connection_lives_for_keepalive_requests_and_keepalive_time() {
    let mut cfg = Config::default();
    cfg.limits.keepalive_requests = 3;
    let life = Life::now();
    let answers: Vec<bool> = (0..3).map(|_| life.another(&cfg)).collect();
    assert_eq!(answers, [true, true, false]);
    // 0: no bound on the count.
    cfg.limits.keepalive_requests = 0;
    let life = Life::now();
    assert!((0..5000).all(|_| life.another(&cfg)));
    // Accepted longer ago than keepalive_time: the next response is the last.
    cfg.timeouts.keepalive_time = std::time::Duration::from_secs(60);
    let now = weft_http::date::now_secs();
    assert!(Life::since(now - 58).another(&cfg));
    assert!(!Life::since(now - 61).another(&cfg));
    // 0: no bound on the age.
    cfg.timeouts.keepalive_time = std::time::Duration::ZERO;
    assert!(Life::since(0).another(&cfg));
}
