//! Graceful shutdown on SIGTERM: the request in flight is finished, idle keep-alive
//! connections get `timeouts.drain_idle` for a last request (answered with `Connection:
//! close`) and are closed after it, new connections are refused, and the process exits 0.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Builder, Model, INDEX_HTML};

per_model! {
    a_drain_cut_by_the_grace_period_is_logged,
    sigterm_finishes_the_request_in_flight_and_exits_zero,
    sigterm_on_an_idle_server_exits_at_once,
    an_idle_server_sleeps_until_a_client_or_a_signal_comes,
    sigterm_under_load_cuts_no_response,
    an_idle_connection_is_answered_within_the_drain_window_then_closed,
}

/// A request still in flight when the grace period ends is cut, and the log says so (on the
/// pipeline too, whose stages close what is left themselves); the server still exits.
fn a_drain_cut_by_the_grace_period_is_logged(model: Model) {
    let mut srv = Builder::new(model, "shutdown-cut")
        .config("[timeouts]\nshutdown_grace = \"500ms\"\n")
        .start();
    // A request whose body never finishes arriving.
    let mut slow = srv.connect();
    slow.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello");
    std::thread::sleep(Duration::from_millis(200));
    srv.signal(libc::SIGTERM);
    srv.wait_exit(Duration::from_secs(10))
        .expect("did not exit after the grace period");
    assert!(
        slow.closed_within(Duration::from_secs(3)),
        "the cut request's connection is still open"
    );
    let log = srv.log();
    assert!(
        log.contains("still open after the 500ms grace period")
            || log.contains("still running after the 500ms grace period"),
        "{log}"
    );
}

fn sigterm_finishes_the_request_in_flight_and_exits_zero(model: Model) {
    let mut srv = Builder::new(model, "shutdown")
        .config("[timeouts]\nshutdown_grace = \"8s\"\n")
        .start();

    // A request whose body is still arriving.
    let mut slow = srv.connect();
    slow.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello");
    // An idle keep-alive connection, between requests.
    let mut idle = srv.connect();
    idle.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(idle.read_response().unwrap().body, INDEX_HTML);
    // Let the echo handler start reading the body.
    std::thread::sleep(Duration::from_millis(200));

    srv.signal(libc::SIGTERM);

    assert!(
        idle.closed_within(Duration::from_secs(3)),
        "idle keep-alive connection still open after SIGTERM"
    );
    // New clients are refused once the listener has closed.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match TcpStream::connect_timeout(&srv.addr, Duration::from_secs(1)) {
            Err(_) => break,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(_) => panic!("still accepting connections 3 s after SIGTERM"),
        }
    }
    assert!(
        srv.wait_exit(Duration::from_millis(300)).is_none(),
        "exited with a request in flight"
    );

    slow.send(b"world");
    let r = slow.read_response().unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"helloworld"[..]));
    assert!(r.closes(), "a response during shutdown must close: {r:?}");

    let status = srv
        .wait_exit(Duration::from_secs(8))
        .expect("did not exit within the grace period");
    assert!(
        status.success(),
        "exit status {status:?}; log:\n{}",
        srv.log()
    );
}

fn sigterm_on_an_idle_server_exits_at_once(model: Model) {
    let mut srv = Builder::new(model, "shutdown-idle").start();
    srv.assert_alive();
    let start = Instant::now();
    srv.signal(libc::SIGTERM);
    let status = srv.wait_exit(Duration::from_secs(5)).expect("no exit");
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// Context switches so far of every thread of process `pid` and of the processes below it
/// (the process model's master).
fn context_switches(pid: u32) -> u64 {
    std::iter::once(pid)
        .chain(crate::common::descendants(pid).into_keys())
        .map(crate::common::thread_switches)
        .sum()
}

/// An idle server sleeps until a client or a signal comes: its accept loops wait without a
/// timeout (shutdown wakes them), the process model's master, holding no connection, waits
/// with none either, and the pipeline model's load monitor sleeps once a sampling period has
/// passed with nothing to do (and its poller, with nothing parked, has no timer), so no
/// thread of the server (or of its master) runs in a second with no client; SIGHUP and
/// SIGTERM still take effect.
fn an_idle_server_sleeps_until_a_client_or_a_signal_comes(model: Model) {
    let mut srv = Builder::new(model, "idle-sleeps").start();
    srv.assert_alive();
    // What the request left settles first (its connection's close, a stage's first run; the
    // pipeline's monitor sleeps after the quiet period that follows the one that saw the
    // request, 250 ms each): a second with no switch must come within a few. A server that
    // wakes on a timer never has one.
    let windows = crate::common::quiet_window(
        || context_switches(srv.pid()),
        Duration::from_secs(1),
        Duration::from_secs(5),
    );
    assert_eq!(
        windows.last(),
        Some(&0),
        "the idle server's threads switched in every second: {windows:?}"
    );
    srv.assert_alive();
    // A reload reaches a sleeping server (the process model's master too: its own line).
    srv.signal(libc::SIGHUP);
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let reloads = |log: &str| log.matches("configuration reloaded").count();
    let want = if model.name == "process" { 2 } else { 1 };
    while reloads(&srv.log()) < want {
        assert!(std::time::Instant::now() < end, "no reload: {}", srv.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    srv.signal(libc::SIGTERM);
    let status = srv.wait_exit(Duration::from_secs(5)).expect("no exit");
    assert!(status.success(), "{status:?}");
}

/// SIGTERM while 16 clients keep sending on keep-alive connections: every response that
/// starts arrives whole (no reset or cut in the middle of one), answers during shutdown say
/// `Connection: close`, and the server exits 0 within the grace period. A request that meets a
/// close before any byte of an answer — written onto a connection the server had just closed
/// as idle (HTTP/1.1's keep-alive race, which clients retry, RFC 9112 §9.3.1), or sent on a
/// connection still in the listen backlog when the listener closed — was never read, and is
/// counted apart.
fn sigterm_under_load_cuts_no_response(model: Model) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let mut srv = Builder::new(model, "shutdown-load")
        .config("[timeouts]\nshutdown_grace = \"8s\"\n")
        .start();
    let addr = srv.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, raced, backlog, bad) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (stop, ok, raced, backlog, bad) = (
                stop.clone(),
                ok.clone(),
                raced.clone(),
                backlog.clone(),
                bad.clone(),
            );
            std::thread::spawn(move || {
                // The connection, and whether it has carried a request.
                let mut conn: Option<(crate::common::Conn, bool)> = None;
                while !stop.load(Relaxed) {
                    let (c, reused) = match conn.as_mut() {
                        Some((c, reused)) => (c, *reused),
                        None => match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                            Ok(s) => {
                                let (c, _) =
                                    conn.insert((crate::common::Conn::from_stream(s), false));
                                (c, false)
                            }
                            // Refused: the listener has closed.
                            Err(_) => break,
                        },
                    };
                    // Closed before any byte of an answer: on a connection that had carried
                    // requests, the server closed it as idle as the request went out (the
                    // keep-alive race, which `drain_idle` is there to prevent); on a new one,
                    // it was still in the listen backlog when the listener closed. Either
                    // way the request was never read.
                    let race = if reused { &raced } else { &backlog };
                    if c.try_send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n")
                        .is_err()
                    {
                        race.fetch_add(1, Relaxed);
                        conn = None;
                        continue;
                    }
                    match c.read_response() {
                        Ok(r) if r.status == 200 && r.body == b"echo" => {
                            ok.fetch_add(1, Relaxed);
                            if r.closes() {
                                conn = None;
                            } else if let Some((_, reused)) = conn.as_mut() {
                                *reused = true;
                            }
                        }
                        Err(crate::common::ReadError::Closed) => {
                            race.fetch_add(1, Relaxed);
                            conn = None;
                        }
                        other => {
                            eprintln!("bad answer during shutdown: {other:?}");
                            bad.fetch_add(1, Relaxed);
                            conn = None;
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    let before = ok.load(Relaxed);
    srv.signal(libc::SIGTERM);
    let status = srv
        .wait_exit(Duration::from_secs(10))
        .expect("did not exit within the grace period");
    stop.store(true, Relaxed);
    for c in clients {
        c.join().expect("client thread");
    }
    assert!(status.success(), "exit status {status:?}");
    assert!(before > 0, "no request served before SIGTERM");
    assert_eq!(
        bad.load(Relaxed),
        0,
        "{} responses cut or malformed ({} whole, {} keep-alive races)",
        bad.load(Relaxed),
        ok.load(Relaxed),
        raced.load(Relaxed)
    );
    // Every keep-alive connection's next request was answered (with `Connection: close`)
    // in the drain's idle window: none met a close instead.
    assert_eq!(
        raced.load(Relaxed),
        0,
        "keep-alive requests met a close ({} whole, {} new connections in the backlog)",
        ok.load(Relaxed),
        backlog.load(Relaxed)
    );
}

/// SIGTERM with idle keep-alive connections: one that sends within `drain_idle` is answered,
/// with `Connection: close`; one that stays silent is closed once the window has passed, not
/// before.
fn an_idle_connection_is_answered_within_the_drain_window_then_closed(model: Model) {
    let mut srv = Builder::new(model, "drain-idle")
        .config("[timeouts]\nshutdown_grace = \"8s\"\ndrain_idle = \"2s\"\n")
        .start();
    let mut talks = srv.connect();
    let mut silent = srv.connect();
    for c in [&mut talks, &mut silent] {
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let r = c.read_response().unwrap();
        assert!(!r.closes(), "{r:?}");
    }
    srv.signal(libc::SIGTERM);
    let signalled = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    talks.send(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = talks
        .read_response()
        .unwrap_or_else(|e| panic!("the request in the window: {e:?}\n{}", srv.log()));
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
    assert!(r.closes(), "an answer in the drain says close: {r:?}");
    assert!(talks.closed_within(Duration::from_secs(3)));
    assert!(
        silent.closed_within(Duration::from_secs(6)),
        "the silent connection outlived the window"
    );
    let closed_after = signalled.elapsed();
    assert!(
        closed_after >= Duration::from_millis(1500),
        "the silent connection closed after {closed_after:?}, within the 2 s window"
    );
    let status = srv.wait_exit(Duration::from_secs(8)).expect("no exit");
    assert!(status.success(), "{status:?}");
}
