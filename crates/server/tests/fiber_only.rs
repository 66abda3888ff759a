//! Tests only the fiber model has to pass: 10,000 concurrent keep-alive connections, each then
//! served one request (thread-per-connection would need 10,000 threads), and the built-in
//! handlers on the smallest fiber stack weft documents (issue 4).

/// The model every server of this binary is started with.
const MODEL: Model = Model::FIBER;

mod common;

use std::time::{Duration, Instant};

use common::{Builder, Conn, Model};

const CONNECTIONS: usize = 10_000;

fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` holds the limits just read, with the soft limit raised to the hard one.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    lim.rlim_cur
}

fn open_connections(srv: &common::Server) -> u64 {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    // The status request's own connection is open while it is answered.
    v["listeners"][0]["connections_open"]
        .as_u64()
        .expect("count")
        - 1
}

#[test]
fn ten_thousand_keep_alive_connections_each_served_once() {
    let limit = raise_nofile();
    assert!(
        limit as usize > CONNECTIONS + 100,
        "open-file limit {limit} too low for this test"
    );
    let srv = Builder::new(MODEL, "scale")
        .config("[limits]\nmax_connections = 20000\n")
        .args(&["--status"])
        .start();
    let mut conns: Vec<Conn> = (0..CONNECTIONS).map(|_| srv.connect()).collect();
    // Every connection is accepted and held (as a fiber or a parked idle connection).
    let deadline = Instant::now() + Duration::from_secs(30);
    // Exactly: a previous status request's connection may still be closing, so poll until
    // the count settles on the test's connections.
    loop {
        let open = open_connections(&srv);
        if open == CONNECTIONS as u64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} connections open, not {CONNECTIONS}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, c) in conns.iter_mut().enumerate() {
        echo(c, &format!("connection {i}"));
    }
    // Still all open after their request (keep-alive).
    assert_eq!(open_connections(&srv), CONNECTIONS as u64);
    drop(conns);
    srv.assert_alive();
}

/// The stack the built-in handlers fit in: 12 KiB measured in release builds (8 KiB
/// overflows), 28 KiB in debug builds, which this test runs (24 KiB overflows since the
/// HTTPS, compression, sites and guards code joined the request path; unoptimised frames
/// keep every local). BENCHMARKS.md records the probe; the default is 64 KiB.
const SMALLEST_STACK: usize = if cfg!(debug_assertions) {
    28 * 1024
} else {
    12 * 1024
};

#[test]
fn built_in_handlers_fit_the_smallest_documented_stack() {
    let srv = Builder::new(MODEL, "small-stack")
        .file("page.html", &[b'x'; 10_541])
        .mkdir("dir")
        .config(&format!("[fiber]\nstack_size = {SMALLEST_STACK}\n"))
        .args(&["--status"])
        .start();
    let cases: [(&[u8], u16); 12] = [
        (b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", 200),
        (b"GET /page.html HTTP/1.1\r\nHost: t\r\nRange: bytes=5-10\r\n\r\n", 206),
        (b"GET /page.html HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n", 304),
        (b"GET /dir HTTP/1.1\r\nHost: t\r\n\r\n", 301),
        (b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n", 404),
        (b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n", 200),
        (b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200),
        (b"GET /_weft/status.json HTTP/1.1\r\nHost: t\r\n\r\n", 200),
        (b"GET /_weft/status HTTP/1.1\r\nHost: t\r\n\r\n", 200),
        (b"GET /_weft/metrics HTTP/1.1\r\nHost: t\r\n\r\n", 200),
        (b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"FOO / HTTP/1.1\r\nHost: t\r\n\r\n", 501),
    ];
    for (raw, status) in cases {
        let r = srv.send(raw);
        assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(raw));
    }
    srv.assert_alive();
    assert!(!srv.log().contains("stack overflow"), "{}", srv.log());
}

#[test]
fn one_acceptor_dispatching_to_two_workers_serves_every_connection() {
    let srv = Builder::new(MODEL, "dispatch")
        .config("threads = 2\n[fiber]\naccept = \"dispatch\"\n")
        .start();
    let mut conns: Vec<Conn> = (0..8).map(|_| srv.connect()).collect();
    for round in 0..3 {
        for (i, c) in conns.iter_mut().enumerate() {
            echo(c, &format!("conn {i} round {round}"));
        }
    }
    srv.assert_alive();
}

/// Keep-alive connections whose next request comes within the linger period (served by the
/// fiber that waited), after it (parked without a fiber, then woken), and with lingering off:
/// each request is answered in turn on the same connection.
#[test]
fn keep_alive_requests_are_served_before_during_and_after_the_linger_period() {
    for linger in ["200ms", "0s"] {
        let srv = Builder::new(MODEL, "linger")
            .config(&format!("[fiber]\nlinger = \"{linger}\"\n"))
            .start();
        let mut c = srv.connect();
        for (i, gap) in [0u64, 50, 400, 10, 300].into_iter().enumerate() {
            std::thread::sleep(Duration::from_millis(gap));
            echo(&mut c, &format!("linger {linger}, request {i}"));
        }
        srv.assert_alive();
    }
}

/// Sends `GET /echo` on `c` and checks the answer is `200 echo`; `what` names the request in a
/// failure.
fn echo(c: &mut Conn, what: &str) {
    c.send(b"GET /echo HTTP/1.1\r\nHost: test\r\n\r\n");
    let r = c
        .read_response()
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]), "{what}");
}

/// Clients that connect and have not sent yet hold no fiber: each waits for its first bytes
/// parked without a fiber, stack or buffers, as an idle keep-alive connection does (a burst of
/// 10,000 such clients held 64 MB of buffers and stacks). Read from the dashboard's own figures.
#[test]
fn new_connections_wait_for_their_first_bytes_without_a_fiber() {
    const SILENT: usize = 300;
    let srv = Builder::new(MODEL, "first-bytes")
        .args(&["--status", "--threads", "1"])
        .start();
    let mut silent: Vec<Conn> = (0..SILENT).map(|_| srv.connect()).collect();
    // The figures are sampled once a second: wait for a sample that has them all open.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (fibers, parked) = loop {
        let r = srv.get("/_weft/status.json?history=1");
        let j: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
        let l = &j["history"]["listeners"][0];
        let last = |k: &str| {
            l["model_figures"][k]
                .as_array()
                .and_then(|a| a.last()?.as_u64())
        };
        let open = l["connections_open"]
            .as_array()
            .and_then(|a| a.last()?.as_u64());
        if let (Some(open), Some(fibers), Some(parked)) =
            (open, last("fibers"), last("parked_without_fiber"))
        {
            if open >= SILENT as u64 {
                break (fibers, parked);
            }
        }
        assert!(
            Instant::now() < deadline,
            "never sampled {SILENT} open: {j}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(parked >= SILENT as u64, "{parked} parked without a fiber");
    // The acceptors' and the status request's, not one per silent client.
    assert!(
        fibers < 20,
        "{fibers} fibers alive for {SILENT} silent clients"
    );
    // Each is served once it sends.
    for c in silent.iter_mut().step_by(50) {
        echo(c, "late");
    }
}
