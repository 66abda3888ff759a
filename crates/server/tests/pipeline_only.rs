//! Tests only the pipeline model has: its stages in the status page, the controller switch,
//! stage threads that are parked rather than created, and the smallest pools and queues
//! under many pipelining clients (every hand-off waits for room, and send's way back to
//! receive goes through the poller).

/// The model every server of this binary is started with.
const MODEL: Model = Model::PIPELINE;

mod common;

use common::{Builder, Conn, Model, Server};

const STAGES: [&str; 4] = ["accept", "receive", "process", "send"];

fn status(srv: &Server) -> serde_json::Value {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    v["listeners"][0]["pipeline"].clone()
}

/// Threads of the server process, from /proc.
fn os_threads(srv: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/task", srv.pid()))
        .expect("/proc/PID/task")
        .count()
}

/// `n` requests on one connection, pipelined in one write, mixing GET and POST bodies.
fn pipelined_batch(c: &mut Conn, n: usize, tag: usize) {
    let mut raw = Vec::new();
    for i in 0..n {
        if i % 2 == 0 {
            raw.extend_from_slice(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
        } else {
            let body = format!("body-{tag}-{i}");
            raw.extend_from_slice(
                format!(
                    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    }
    c.send(&raw);
    for i in 0..n {
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("{tag}/{i}: {e:?}"));
        assert_eq!(r.status, 200);
        if i % 2 == 0 {
            assert_eq!(r.body, b"echo");
        } else {
            assert_eq!(r.text(), format!("body-{tag}-{i}"));
        }
    }
}

#[test]
fn status_shows_each_stage_with_threads_and_queue_and_w_r_u() {
    let srv = Builder::new(MODEL, "pipe-status")
        .config("[pipeline]\nthreads_total = 10\nperiod = \"50ms\"\n")
        .args(&["--status"])
        .start();
    for _ in 0..5 {
        srv.assert_alive();
    }
    let p = status(&srv);
    assert_eq!(p["controller"], true, "{p}");
    assert_eq!(p["threads_total"], 10, "{p}");
    let mut sum = 0;
    for name in STAGES {
        let s = &p["stages"][name];
        let threads = s["threads"]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {p}"));
        assert!(threads >= 1, "{name}: {p}");
        sum += threads;
        assert!(s["queue"].is_u64(), "{name}: {p}");
        assert!(s["busy"].is_u64(), "{name}: {p}");
    }
    assert!(sum <= 10, "{p}");
    for k in ["w", "r", "u"] {
        assert!(p[k].as_f64().is_some_and(|x| x >= 0.0), "{k}: {p}");
    }
    // The history fills as the monitor samples (poll: its period is 50 ms).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while status(&srv)["history"].as_array().map_or(0, Vec::len) < 2 {
        assert!(std::time::Instant::now() < deadline, "no history: {p}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let html = srv.get("/_weft/status").text();
    for name in STAGES {
        assert!(html.contains(&format!("<td>{name}</td>")), "{html}");
    }
    // The page updates itself from the JSON (no full reload).
    assert!(html.contains("status.json?history="), "{html}");
    assert!(html.contains("<svg"), "{html}");
}

/// Samples in the status page's history, and how many of them saw load (U > 0).
fn samples(srv: &Server) -> (usize, usize) {
    let p = status(srv);
    let h = p["history"].as_array().expect("history").clone();
    let loaded = h.iter().filter(|x| x["u"].as_f64() > Some(0.0)).count();
    (h.len(), loaded)
}

/// Waits (up to 5 s) for a window of `ms` milliseconds in which no thread of the server
/// runs ([`common::quiet_window`]).
fn quiet_window(srv: &Server, ms: u64) -> Vec<u64> {
    common::quiet_window(
        || common::thread_switches(srv.pid()),
        std::time::Duration::from_millis(ms),
        std::time::Duration::from_secs(5),
    )
}

/// Once a period has passed with nothing to do (and the allocation is the initial one), the
/// load monitor sleeps, and with it every thread of the pipeline; the next request wakes it,
/// and its samples record the load that follows.
#[test]
fn the_monitor_sleeps_through_a_quiet_spell_and_wakes_for_the_next_load() {
    // c1 large enough that one request in a period shows in U (rounded to 0.001 there).
    let srv = Builder::new(MODEL, "pipe-quiet")
        .config("[pipeline]\nperiod = \"50ms\"\nc1 = 0.01\n")
        .args(&["--status"])
        .start();
    srv.assert_alive();
    // The period that saw the request, then a quiet one: asleep after about 100 ms. (A
    // monitor on its period would wake in every window.)
    let w = quiet_window(&srv, 300);
    assert_eq!(w.last(), Some(&0), "the idle pipeline woke: {w:?}");
    // Reading the status is a request too: the monitor samples it, then sleeps again.
    let (before, loaded_before) = samples(&srv);
    let w = quiet_window(&srv, 300);
    assert_eq!(
        w.last(),
        Some(&0),
        "the pipeline woke after a status read: {w:?}"
    );
    // A load of 300 ms, one request every 10 ms: six periods of it.
    let mut c = Conn::connect(srv.addr);
    for i in 0..30 {
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c.read_response().unwrap_or_else(|e| panic!("{i}: {e:?}"));
        assert_eq!(r.status, 200);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (after, loaded_after) = samples(&srv);
    // Asleep from the status read until the load, the monitor took at most the two samples
    // of that read; awake through the load, it took one a period.
    assert!(
        after - before >= 5 && loaded_after - loaded_before >= 4,
        "samples {before} -> {after}, with load {loaded_before} -> {loaded_after}"
    );
}

/// Idle keep-alive connections (due at the keep-alive timeout, 75 s, several turns of the
/// poller's 10.24 s timing wheel ahead) do not wake the pipeline: the poller with nothing else
/// to do sleeps until the first connection is actually due, not until the first occupied slot
/// comes round (40 connections woke it about 4 times a second that way).
#[test]
fn idle_keep_alive_connections_let_the_pipeline_sleep() {
    let srv = Builder::new(MODEL, "pipe-idle-ka").start();
    let mut conns: Vec<Conn> = (0..40).map(|_| Conn::connect(srv.addr)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c.read_response().unwrap_or_else(|e| panic!("{i}: {e:?}"));
        assert_eq!(r.status, 200);
        // Spread the parks over many slots of the wheel.
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    let w = quiet_window(&srv, 300);
    assert_eq!(w.last(), Some(&0), "the pipeline did not settle: {w:?}");
    let before = common::thread_switches(srv.pid());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let woke = common::thread_switches(srv.pid()) - before;
    assert_eq!(
        woke, 0,
        "40 idle keep-alive connections woke the pipeline {woke} times in 2 s"
    );
    // Still served, each on its own connection.
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c.read_response().unwrap_or_else(|e| panic!("{i}: {e:?}"));
        assert_eq!(r.status, 200);
    }
}

#[test]
fn controller_off_keeps_the_initial_allocation() {
    let srv = Builder::new(MODEL, "pipe-off")
        .config("[pipeline]\nthreads_total = 12\naccept = 1\nreceive = 1\nprocess = 1\nsend = 1\nqueue = 2\nperiod = \"20ms\"\n")
        .args(&["--status", "--pipeline-controller", "off"])
        .start();
    let clients: Vec<_> = (0..16)
        .map(|t| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                for round in 0..5 {
                    pipelined_batch(&mut c, 8, t * 100 + round);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    let p = status(&srv);
    assert_eq!(p["controller"], false, "{p}");
    for name in STAGES {
        assert_eq!(p["stages"][name]["threads"], 1, "{name}: {p}");
    }
    for h in p["history"].as_array().expect("history") {
        assert_eq!(h["threads"], serde_json::json!([1, 1, 1, 1]), "{p}");
    }
}

#[test]
fn smallest_pools_and_queues_serve_many_pipelining_clients_in_order() {
    // One thread per stage, room for one task per queue, a controller with no room to move:
    // every hand-off waits for the next stage, and none of it may deadlock or reorder.
    let srv = Builder::new(MODEL, "pipe-tiny")
        .config("[pipeline]\nthreads_total = 4\naccept = 1\nreceive = 1\nprocess = 1\nsend = 1\nqueue = 1\n")
        .start();
    let clients: Vec<_> = (0..40)
        .map(|t| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                for round in 0..10 {
                    pipelined_batch(&mut c, 6, t * 100 + round);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    srv.assert_alive();
}

#[test]
fn stage_threads_are_started_once_and_parked_not_created_under_load() {
    let srv = Builder::new(MODEL, "pipe-threads")
        .config("[pipeline]\nthreads_total = 8\nperiod = \"20ms\"\n")
        .args(&["--status"])
        .start();
    // The pipeline reports its stages once every thread has started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while status(&srv).is_null() {
        assert!(std::time::Instant::now() < deadline, "no pipeline status");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let before = os_threads(&srv);
    // Every stage starts threads_total - 3 threads.
    assert!(before >= 4 * 5, "{before} threads");
    let clients: Vec<_> = (0..24)
        .map(|t| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                for round in 0..10 {
                    pipelined_batch(&mut c, 8, t * 100 + round);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    let p = status(&srv);
    let sum: u64 = STAGES
        .iter()
        .map(|n| p["stages"][n]["threads"].as_u64().unwrap())
        .sum();
    assert!(sum <= 8, "{p}");
    assert_eq!(
        os_threads(&srv),
        before,
        "threads were created or ended under load"
    );
}

#[test]
fn an_allocation_over_threads_total_is_refused_at_start() {
    let dir = common::unique_dir("pipe-bad");
    std::fs::create_dir(dir.join("root")).unwrap();
    std::fs::write(
        dir.join("weft.toml"),
        "[pipeline]\nthreads_total = 5\naccept = 1\nreceive = 2\nprocess = 2\nsend = 2\n",
    )
    .unwrap();
    let out = common::Launch::new()
        .args(["serve", "--listen", "127.0.0.1:0=pipeline", "--root"])
        .arg(dir.join("root"))
        .arg("--config")
        .arg(dir.join("weft.toml"))
        .run(common::launch::RUN_LIMIT);
    assert!(!out.success());
    let err = out.stderr;
    assert!(err.contains("threads_total"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_panicking_handler_closes_its_connection_and_the_stage_keeps_its_thread() {
    let dir = common::unique_dir("pipe-panic");
    let cfg = weft::Config {
        root: dir.clone(),
        echo: weft::config::EchoConfig {
            path: Some("/echo".into()),
        },
        // One process thread: if the panic took it, nothing would answer afterwards.
        pipeline: weft::config::PipelineConfig {
            threads_total: 4,
            accept: 1,
            receive: 1,
            process: 1,
            send: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let server = weft::Server::builder()
        .config(cfg)
        .route("GET", "/panic", |_, _| panic!("handler bug"))
        .listen("127.0.0.1:0".parse().unwrap(), weft::Model::Pipeline)
        .build()
        .expect("build");
    let addr = server.local_addrs()[0].0;
    let handle = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());

    let mut c = Conn::connect(addr);
    c.send(b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        matches!(c.read_response(), Err(common::ReadError::Closed)),
        "a panicking handler's connection must close without a response"
    );
    for _ in 0..3 {
        let mut c = Conn::connect(addr);
        c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            c.read_response().expect("served after the panic").body,
            b"echo"
        );
    }
    handle.shutdown();
    running.join().expect("run thread").expect("run");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Threads per stage of the in-process server's pipeline listener.
fn allocation(metrics: &weft::metrics::Metrics) -> Vec<u64> {
    let j = metrics.to_json();
    let p = &j["listeners"][0]["pipeline"];
    if p.is_null() {
        return Vec::new();
    }
    STAGES
        .iter()
        .map(|n| p["stages"][n]["threads"].as_u64().expect("threads"))
        .collect()
}

#[test]
fn a_blocking_handler_grows_the_process_stage_and_the_allocation_returns_when_load_ends() {
    let dir = common::unique_dir("pipe-grow");
    let cfg = weft::Config {
        root: dir.clone(),
        pipeline: weft::config::PipelineConfig {
            threads_total: 12,
            accept: 1,
            receive: 1,
            process: 1,
            send: 1,
            period: std::time::Duration::from_millis(20),
            // The machine is shared: other work must not keep the controller from acting.
            min_idle_cpu: 0.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let server = weft::Server::builder()
        .config(cfg)
        .route("GET", "/slow", |_, _| {
            // A handler waiting on something slow (a disk, an upstream).
            std::thread::sleep(std::time::Duration::from_millis(20));
            weft::Response::text(200, "slow")
        })
        .listen("127.0.0.1:0".parse().unwrap(), weft::Model::Pipeline)
        .build()
        .expect("build");
    let addr = server.local_addrs()[0].0;
    let handle = server.shutdown_handle();
    let metrics = server.app().metrics().clone();
    assert_eq!(
        allocation(&metrics),
        Vec::<u64>::new(),
        "no pipeline before run"
    );
    let running = std::thread::spawn(move || server.run());

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    c.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
                    assert_eq!(c.read_response().expect("slow").body, b"slow");
                }
            })
        })
        .collect();
    // Generous bounds: they only keep a broken controller from hanging the test.
    let wait_for = |what: &str, f: &dyn Fn(&[u64]) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let a = allocation(&metrics);
            if a.len() == 4 && f(&a) {
                return a;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {a:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let grown = wait_for("process never grew", &|a| a[2] > 1);
    assert!(grown.iter().sum::<u64>() <= 12, "{grown:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        c.join().expect("client");
    }
    wait_for("never returned to the initial allocation", &|a| {
        a == [1, 1, 1, 1]
    });
    handle.shutdown();
    running.join().expect("run thread").expect("run");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The poller's edge-triggered waits (see `models/pipeline/poller.rs`): bytes that arrive
/// while a connection is away in a stage, or that a read left behind because it filled the
/// buffer, or that come one at a time, are all served; each case hangs (and the read times
/// out) if a wait sleeps through them.
#[test]
fn edge_triggered_waits_lose_no_bytes() {
    let big: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    let srv = Builder::new(MODEL, "pipe-edge")
        .config("[pipeline]\nthreads_total = 4\naccept = 1\nreceive = 1\nprocess = 1\nsend = 1\n")
        .file("big.bin", &big)
        .start();

    // 400 requests in one write: far more than one 4 KiB read takes, and 32 bytes each, so
    // the first read (4,096 bytes) ends exactly at the end of the 128th request and the
    // buffer is empty after it while the socket still holds the rest.
    let mut c = srv.connect();
    let one = b"GET /echo HTTP/1.1\r\nHost: xx\r\n\r\n";
    assert_eq!(one.len(), 32);
    c.send(&one.repeat(400));
    for i in 0..400 {
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("batch {i}: {e:?}"));
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"echo"[..]),
            "batch {i}"
        );
    }

    // The next request sent while the previous one is being served.
    for i in 0..200 {
        c.send(one);
        if i % 2 == 0 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        c.send(one);
        for j in 0..2 {
            let r = c
                .read_response()
                .unwrap_or_else(|e| panic!("overlap {i}/{j}: {e:?}"));
            assert_eq!(r.status, 200);
        }
    }

    // A head one byte at a time.
    for b in one.iter() {
        c.send(&[*b]);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let r = c.read_response().expect("trickled request");
    assert_eq!(r.body, b"echo");

    // A response larger than the send buffer waits for room to send; a request sent while it
    // waits is answered after it.
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    std::thread::sleep(std::time::Duration::from_millis(100));
    c.send(one);
    let r = c.read_response().expect("big response");
    assert_eq!(r.status, 200);
    assert!(r.body == big, "big.bin came back changed");
    let r = c
        .read_response()
        .expect("request sent during the big response");
    assert_eq!(r.body, b"echo");

    // A request and the client's end of stream close behind it, often in one wake-up: the
    // connection is answered and then closed, not left waiting for a request.
    for i in 0..300 {
        let mut c = srv.connect();
        c.send(one);
        c.shutdown_write();
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("half-closed {i}: {e:?}"));
        assert_eq!(r.status, 200);
        assert!(
            c.closed_within(std::time::Duration::from_secs(3)),
            "half-closed {i}: still open"
        );
    }
    srv.assert_alive();
}
