//! Zero-downtime upgrade, black-box, on every model: under load from several client threads
//! (keep-alive connections and a new connection per request), SIGUSR2 starts a new `weft`
//! process on the same listening socket, the old one drains and exits, and no request is lost
//! and no connection refused. The old process's drain answers each keep-alive connection's
//! next request with `Connection: close` within `timeouts.drain_idle`, so no keep-alive request
//! meets a close (the client would retry one on a new connection, as HTTP clients do, RFC 9112
//! §9.3.1, and the test counts and refuses it); anything else counts as a failure too.
//!
//! HTTP/2 (h2c) on every model: SIGUSR2 with a stream held by the client's flow control and
//! an idle connection open sends both GOAWAY NO_ERROR, the stream completes, the old process
//! closes both and exits, and the new one serves. Python's `h2` library (`h2/client.py`, as
//! `h2.rs` drives it) is the client; without it these tests print a line and skip.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::handover::{self, become_subreaper, recv_notify, serve, site, WAIT};
use common::{Conn, Launch, ReadError, Weft, INDEX_HTML};

use serde_json::{json, Value};

/// Requests per client thread at most (the load is bounded whatever happens).
const MAX_REQUESTS: u64 = 20_000;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
const REQUEST_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    retried: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, why: String) {
        self.failures.lock().unwrap().push(why);
    }
}

fn connect(addr: SocketAddr, tally: &Tally) -> Option<Conn> {
    match TcpStream::connect_timeout(&addr, WAIT) {
        Ok(s) => Some(Conn::from_stream(s)),
        Err(e) => {
            tally.fail(format!("connect: {e}"));
            None
        }
    }
}

fn check(r: &common::Response, tally: &Tally) -> bool {
    if r.status == 200 && r.body == INDEX_HTML {
        tally.ok.fetch_add(1, SeqCst);
        true
    } else {
        tally.fail(format!("bad response: {} {:?}", r.status, r.text()));
        false
    }
}

/// Requests over keep-alive connections until `stop`.
fn keepalive_client(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let mut conn: Option<(Conn, bool)> = None; // (connection, has served a request)
    let mut done = 0;
    while !stop.load(SeqCst) && done < MAX_REQUESTS {
        let (c, reused) = match conn.take() {
            Some(c) => c,
            None => match connect(addr, tally) {
                Some(c) => (c, false),
                None => return,
            },
        };
        let mut c = c;
        let sent = c.try_send(REQUEST);
        let read = match sent {
            Ok(()) => c.read_response(),
            Err(_) => Err(ReadError::Closed),
        };
        match read {
            Ok(r) => {
                done += 1;
                if !check(&r, tally) {
                    return;
                }
                if !r.closes() {
                    conn = Some((c, true));
                }
            }
            // The server closed an idle keep-alive connection as the request went out.
            Err(ReadError::Closed) if reused => {
                tally.retried.fetch_add(1, SeqCst);
            }
            Err(e) => {
                tally.fail(format!("keep-alive request (reused: {reused}): {e:?}"));
                return;
            }
        }
    }
}

/// One new connection per request until `stop`.
fn new_connection_client(addr: SocketAddr, stop: &AtomicBool, tally: &Tally) {
    let mut done = 0;
    while !stop.load(SeqCst) && done < MAX_REQUESTS {
        let Some(mut c) = connect(addr, tally) else {
            return;
        };
        if let Err(e) = c.stream.write_all(REQUEST_CLOSE) {
            tally.fail(format!("send on a new connection: {e}"));
            return;
        }
        match c.read_response() {
            Ok(r) => {
                done += 1;
                if !check(&r, tally) {
                    return;
                }
            }
            Err(e) => {
                tally.fail(format!("request on a new connection: {e:?}"));
                return;
            }
        }
    }
}

/// Waits (bounded) until the clients have had `n` more answers than `from`.
fn wait_answers(tally: &Tally, from: u64, n: u64, what: &str) {
    let end = Instant::now() + WAIT;
    while tally.ok.load(SeqCst) < from + n {
        let failures = tally.failures.lock().unwrap().clone();
        assert!(failures.is_empty(), "{what}: {failures:?}");
        assert!(Instant::now() < end, "{what}: the clients got no answers");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The process `old` started on SIGUSR2: the old process names it (systemd's MAINPID), among
/// the notifications (the new one says READY=1 too).
fn upgraded(notify: &UnixDatagram, old: &Weft) -> Weft {
    for _ in 0..4 {
        let msg = recv_notify(notify, old);
        if let Some(pid) = msg.trim().strip_prefix("MAINPID=") {
            return Weft::adopt(pid.parse().expect("pid"), old.dir());
        }
    }
    panic!("no MAINPID; old log:\n{}", old.log());
}

fn upgrade_under_load(model: &str) {
    become_subreaper();
    let dir = site(&format!("upgrade-{model}"));
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(WAIT)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut old = serve(&dir, &format!("{addr}={model}"), listener.as_raw_fd())
        .args(["--threads", "2"])
        .env("NOTIFY_SOCKET", &notify_path)
        .start();
    // From here only weft holds the socket: were it ever closed, connecting would be refused.
    drop(listener);
    assert_eq!(recv_notify(&notify, &old).trim(), "READY=1");

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut clients = Vec::new();
    for i in 0..5 {
        let (stop, tally) = (stop.clone(), tally.clone());
        clients.push(std::thread::spawn(move || {
            if i < 3 {
                keepalive_client(addr, &stop, &tally)
            } else {
                new_connection_client(addr, &stop, &tally)
            }
        }));
    }
    // Stops the clients whatever the outcome, so a failed assertion joins no endless thread.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());

    wait_answers(&tally, 0, 200, "before the upgrade");
    old.signal(libc::SIGUSR2);
    let mut new = upgraded(&notify, &old);
    let new_pid = new.pid();
    assert_ne!(new_pid, old.pid());
    let exit = old.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "old log:\n{}", old.log());
    // The new process alone serves now.
    let after_exit = tally.ok.load(SeqCst);
    wait_answers(&tally, after_exit, 200, "after the old process exited");
    stop.store(true, SeqCst);
    for c in clients {
        c.join().expect("client thread");
    }
    let failures = tally.failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} failures, e.g. {:?}; log:\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        old.log()
    );
    let log = old.log();
    assert!(
        log.contains(&format!("upgraded: process {new_pid} serves; draining")),
        "log:\n{log}"
    );
    eprintln!(
        "{model}: {} answers, {} keep-alive retries",
        tally.ok.load(SeqCst),
        tally.retried.load(SeqCst)
    );
    // The old process's drain answered every keep-alive connection's next request (with
    // `Connection: close`) in its idle window: no request met a close instead.
    assert_eq!(
        tally.retried.load(SeqCst),
        0,
        "keep-alive requests met the old process's close; log:\n{}",
        old.log()
    );
    new.signal(libc::SIGTERM);
    let exit = new.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "log:\n{}", new.log());
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn upgrade_under_load_fiber() {
    upgrade_under_load("fiber");
}

#[test]
fn upgrade_under_load_thread() {
    upgrade_under_load("thread");
}

#[test]
fn upgrade_under_load_process() {
    upgrade_under_load("process");
}

#[test]
fn upgrade_under_load_pipeline() {
    upgrade_under_load("pipeline");
}

/// The Python client of `h2.rs`: `client.py MODE --port PORT`, one JSON object out.
const H2_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h2/client.py");
/// RFC 9113 §7: GOAWAY's code for a graceful close.
const NO_ERROR: u64 = 0x0;

/// Python 3 with the `h2` library, or a printed line saying the test skips.
fn have_python_h2() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import h2, hpack, hyperframe"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: python3 with the h2 library is not installed (pip install h2)");
    }
    ok
}

/// The Python client's command for `mode` at `addr` (h2c).
fn python(addr: SocketAddr, mode: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(H2_CLIENT)
        .arg(mode)
        .args(["--port", &addr.port().to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    cmd
}

/// A Python client in an interactive mode: it prints `ready` when set, then waits for a
/// line, then prints its JSON.
struct Interactive {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Interactive {
    fn start(addr: SocketAddr, mode: &str, args: &[&str], ready: &str) -> Interactive {
        let mut child = python(addr, mode, args).spawn().expect("run python3");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), ready, "{mode}");
        Interactive { child, stdout }
    }

    fn go(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    fn result(mut self) -> Value {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut text).unwrap();
        let _ = self.child.wait();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("no JSON ({e}): {text}"))
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// SIGUSR2 with HTTP/2 connections open on an h2c listener: a `GET /big.bin` held by the
/// client's flow control after its first 65,535 bytes, and an idle connection (one request
/// answered). Both get GOAWAY NO_ERROR naming stream 1; the held stream completes with the
/// whole file once the client opens its windows; the old process closes both connections
/// (the idle one at once) and exits 0 long before its grace ends; the new process serves
/// HTTP/2 with prior knowledge and HTTP/1.1 on the same socket.
fn upgrade_sends_h2_goaway(model: &str) {
    if !have_python_h2() {
        return;
    }
    become_subreaper();
    let dir = site(&format!("upgrade-h2-{model}"));
    // Larger than the client's 65,535-byte windows, and not the same byte over and over.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(dir.join("root/big.bin"), &big).unwrap();
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(WAIT)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A grace longer than the test: the old process must close and exit because its
    // connections are done, not because the grace ran out.
    let mut old = serve(&dir, &format!("{addr}={model}"), listener.as_raw_fd())
        .arg("--h2c")
        .config("[timeouts]\nshutdown_grace = \"30s\"\n")
        .env("NOTIFY_SOCKET", &notify_path)
        .start();
    drop(listener);
    assert_eq!(recv_notify(&notify, &old).trim(), "READY=1");

    let mut stalled = Interactive::start(
        addr,
        "stall",
        &["--path", "/big.bin", "--silent", "1"],
        "stalled",
    );
    let mut idle = Interactive::start(addr, "idle", &[], "idle");
    old.signal(libc::SIGUSR2);
    let started = Instant::now();
    let mut new = upgraded(&notify, &old);
    let new_pid = new.pid();
    assert_ne!(new_pid, old.pid());
    idle.go();
    stalled.go();

    let v = idle.result();
    assert_eq!(
        v["status"],
        200,
        "{model} idle: {v}; old log:\n{}",
        old.log()
    );
    assert_eq!(
        v["goaway"],
        json!({"code": NO_ERROR, "last_stream_id": 1}),
        "{model} idle: {v}; old log:\n{}",
        old.log()
    );
    assert_eq!(
        v["closed"],
        true,
        "{model} idle: {v}; old log:\n{}",
        old.log()
    );
    assert!(
        v["elapsed"].as_f64().unwrap() < 3.0,
        "{model} idle: not closed at once: {v}"
    );

    // The GOAWAY may come only once the client opens its window (`goaway_while_silent` is
    // not asked for): a connection whose stream waits on flow control is not woken by the
    // drain, under SIGUSR2 as under SIGTERM (h2.rs).
    let mut v = stalled.result();
    let body = unhex(v["body_hex"].as_str().unwrap());
    v["body_hex"] = Value::String(format!("{} bytes", body.len()));
    let who = format!("{model} stalled");
    assert_eq!(v["status"], 200, "{who}: {v}; old log:\n{}", old.log());
    assert_eq!(v["received"], 65535, "{who}: {v}");
    assert_eq!(
        v["goaway"],
        json!({"code": NO_ERROR, "last_stream_id": 1}),
        "{who}: {v}; old log:\n{}",
        old.log()
    );
    assert!(v["reset"].is_null(), "{who}: {v}; old log:\n{}", old.log());
    assert_eq!(v["ended"], true, "{who}: {v}; old log:\n{}", old.log());
    assert!(body == big, "{who}: {} bytes, not the file", body.len());
    assert_eq!(v["closed"], true, "{who}: the connection stays open: {v}");

    let exit = old.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "old log:\n{}", old.log());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{model}: the old process exited only after {:?}; old log:\n{}",
        started.elapsed(),
        old.log()
    );
    let old_log = old.log();
    assert!(
        old_log.contains(&format!("upgraded: process {new_pid} serves; draining")),
        "{old_log}"
    );

    // The new process alone serves now: h2c on a new connection, and HTTP/1.1.
    let mut fresh = python(addr, "requests", &[]).spawn().expect("run python3");
    fresh
        .stdin
        .take()
        .unwrap()
        .write_all(json!([{"path": "/"}]).to_string().as_bytes())
        .unwrap();
    let out = fresh.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{model} requests: no JSON ({e})"));
    assert!(v["error"].is_null(), "{model} h2c after the upgrade: {v}");
    assert!(v["goaway"].is_null(), "{model} h2c after the upgrade: {v}");
    let r = &v["responses"][0];
    assert_eq!(r["status"], 200, "{model} h2c after the upgrade: {v}");
    assert_eq!(r["ended"], true, "{model} h2c after the upgrade: {v}");
    assert!(
        unhex(r["body_hex"].as_str().unwrap()) == INDEX_HTML,
        "{model} h2c after the upgrade: {v}"
    );
    let r = handover::get_index(addr, &new);
    assert_eq!((r.status, &r.body[..]), (200, INDEX_HTML), "{model}");

    new.signal(libc::SIGTERM);
    let exit = new.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "new log:\n{}", new.log());
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn upgrade_sends_h2_goaway_fiber() {
    upgrade_sends_h2_goaway("fiber");
}

#[test]
fn upgrade_sends_h2_goaway_thread() {
    upgrade_sends_h2_goaway("thread");
}

#[test]
fn upgrade_sends_h2_goaway_process() {
    upgrade_sends_h2_goaway("process");
}

#[test]
fn upgrade_sends_h2_goaway_pipeline() {
    upgrade_sends_h2_goaway("pipeline");
}

#[test]
fn a_new_process_that_fails_to_start_leaves_the_old_one_serving() {
    become_subreaper();
    let dir = site("upgrade-fails");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let root = dir.join("root");
    let config = dir.join("weft.toml");
    fs::write(&config, format!("root = {:?}\n", root.to_str().unwrap())).unwrap();
    let mut old = Launch::serve(&dir)
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg(format!("{addr}=thread"))
        .hand_over(&[listener.as_raw_fd()])
        .start();
    drop(listener);
    assert_eq!(handover::get_index(addr, &old).status, 200);
    // The new process reads the same arguments, so the same file: now one it refuses.
    fs::write(&config, "no_such_key = 1\n").unwrap();
    old.signal(libc::SIGUSR2);
    let end = Instant::now() + WAIT;
    while !old.log().contains("upgrade failed, this process serves on") {
        assert!(
            Instant::now() < end,
            "no failure logged; log:\n{}",
            old.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = old.log();
    assert!(
        log.contains("ended before it was ready (it exited: Code(1))"),
        "{log}"
    );
    // The old process still serves, on the same socket, new connections and old.
    for _ in 0..3 {
        let mut c = Conn::connect(addr);
        c.send(REQUEST_CLOSE);
        let r = c.read_response().expect("answer after the failed upgrade");
        assert_eq!(r.status, 200);
    }
    old.signal(libc::SIGTERM);
    let exit = old.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "log:\n{}", old.log());
}

#[test]
fn the_binary_on_disk_is_started_not_the_running_one() {
    become_subreaper();
    let dir = site("upgrade-on-disk");
    // The server runs from its own name for the binary (a hard link: no copy), which is then
    // replaced, as an install does, by a script that leaves a mark and runs the real binary.
    let exe = dir.join("weft");
    let real = common::launch::exe();
    if fs::hard_link(real, &exe).is_err() {
        fs::copy(real, &exe).unwrap();
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let notify_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(WAIT)).unwrap();
    let mut old = serve(&dir, &format!("{addr}=thread"), listener.as_raw_fd())
        .exe(&exe)
        .env("NOTIFY_SOCKET", &notify_path)
        .start();
    drop(listener);
    assert_eq!(recv_notify(&notify, &old).trim(), "READY=1");
    let marker = dir.join("started-from-disk");
    let script = dir.join("weft.new");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            marker.display(),
            real.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fs::rename(&script, &exe).unwrap();
    old.signal(libc::SIGUSR2);
    let mut new = upgraded(&notify, &old);
    let exit = old.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "log:\n{}", old.log());
    assert!(
        marker.exists(),
        "the replaced file was not run; log:\n{}",
        old.log()
    );
    assert_eq!(handover::get_index(addr, &new).status, 200);
    new.signal(libc::SIGTERM);
    let exit = new.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "log:\n{}", new.log());
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_process_models_master_survives_a_sigusr2_meant_for_the_server() {
    let dir = site("upgrade-stray-usr2");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut server = serve(&dir, &format!("{addr}=process"), listener.as_raw_fd()).start();
    drop(listener);
    assert_eq!(handover::get_index(addr, &server).status, 200);
    // The master is the server's only child (no request is in flight to fork others).
    let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.pid()))
        .expect("children of the server");
    let master: u32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no master in {children:?}"));
    common::launch::signal(master, libc::SIGUSR2);
    // Still serving, through the same master (a dead master ends the server).
    for _ in 0..3 {
        let mut c = Conn::connect(addr);
        c.send(REQUEST_CLOSE);
        assert_eq!(c.read_response().expect("answer").status, 200);
    }
    assert!(
        fs::metadata(format!("/proc/{master}")).is_ok(),
        "master gone; log:\n{}",
        server.log()
    );
    assert!(!server.log().contains("master exited"), "{}", server.log());
    server.signal(libc::SIGTERM);
    let exit = server.exit_within(WAIT);
    assert_eq!(exit.code(), Some(0), "log:\n{}", server.log());
}
