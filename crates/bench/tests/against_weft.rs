//! Black-box tests of the `weft-bench` binary against a real weft server, run in this test
//! process through the `weft` library on 127.0.0.1 port 0 (no binary to locate, no fixed
//! port). They check counts and errors only: no timing assertion.

use std::fs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::thread::JoinHandle;

use serde_json::Value;

/// The page the static-file requests ask for: the fibers paper's 10,541 bytes.
const PAGE_LEN: usize = 10_541;
/// What weft's built-in `GET /echo` answers.
const ECHO_BODY: &[u8] = b"echo";

/// A weft server (fiber model) serving a temporary root; stopped and removed on drop.
struct Weft {
    addr: SocketAddr,
    dir: PathBuf,
    stop: weft::ShutdownHandle,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Weft {
    fn start(name: &str) -> Weft {
        Weft::start_with(name, weft::Config::default())
    }

    fn start_with(name: &str, mut cfg: weft::Config) -> Weft {
        // The root below is not the sample site, where echo is mounted by default.
        cfg.echo.path.get_or_insert_with(|| "/echo".into());
        let dir = std::env::temp_dir().join(format!("weft-bench-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let page: Vec<u8> = (0..PAGE_LEN).map(|i| b'a' + (i % 26) as u8).collect();
        fs::write(dir.join("page.html"), page).unwrap();
        let server = weft::Server::builder()
            .config(cfg)
            .root(&dir)
            .listen("127.0.0.1:0".parse().unwrap(), weft::Model::Fiber)
            .build()
            .expect("start weft");
        let addr = server.local_addrs()[0].0;
        let stop = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        Weft {
            addr,
            dir,
            stop,
            thread,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Weft {
    fn drop(&mut self) {
        self.stop.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Runs `weft-bench ARGS --json` and returns its report.
fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(args)
        .arg("--json")
        .output()
        .expect("run weft-bench");
    assert!(
        out.status.success(),
        "weft-bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[track_caller]
fn assert_no_errors(r: &Value) {
    for kind in ["connect", "read", "write", "timeout", "status"] {
        assert_eq!(r["errors"][kind], 0, "{kind} errors in {r:#}");
    }
}

#[test]
fn load_counts_every_request_of_two_urls() {
    let w = Weft::start("load");
    let r = bench(&[
        "load",
        "-n",
        "300",
        "-c",
        "8",
        &w.url("/echo"),
        &w.url("/page.html"),
    ]);
    assert_no_errors(&r);
    assert_eq!(r["requests"], 300, "{r:#}");
    assert_eq!(r["statuses"]["2xx"], 300);
    // Keep-alive: one connection each, never reopened.
    assert_eq!(r["connects"], 8);
    // Round-robin: requests 0, 2, 4, ... to /echo, the odd ones to the page.
    let body = 150 * (ECHO_BODY.len() + PAGE_LEN);
    assert_eq!(r["body_bytes"], body, "{r:#}");
    assert!(r["bytes"].as_u64().unwrap() > body as u64);
    assert_eq!(r["mode"], "closed");
    assert!(r["scheduled"].is_null(), "no schedule in closed loop");
    let p = &r["latency_us"];
    assert!(p["min"].as_f64().unwrap() <= p["p50"].as_f64().unwrap());
    assert!(p["p50"].as_f64().unwrap() <= p["max"].as_f64().unwrap());
}

#[test]
fn a_connection_per_request_open_loop_and_server_cpu() {
    let w = Weft::start("noka");
    let me = std::process::id().to_string();
    let r = bench(&[
        "load",
        "-n",
        "60",
        "-c",
        "3",
        "--no-keepalive",
        "--server-pid",
        &me,
        &w.url("/page.html"),
    ]);
    assert_no_errors(&r);
    assert_eq!(r["requests"], 60);
    assert_eq!(r["connects"], 60, "a new connection per request: {r:#}");
    assert_eq!(r["body_bytes"], 60 * PAGE_LEN);
    // The server runs in this process: its CPU is measured (the amount is not checked).
    assert_eq!(r["server"]["pid"].to_string(), me);
    assert!(r["server"]["cpu_us_per_request"].as_f64().unwrap() >= 0.0);

    let r = bench(&[
        "load",
        "-n",
        "200",
        "-c",
        "4",
        "--rate",
        "4000",
        &w.url("/echo"),
    ]);
    assert_no_errors(&r);
    assert_eq!(
        (r["requests"].as_u64(), r["mode"].as_str()),
        (Some(200), Some("open"))
    );
}

#[test]
fn post_with_headers_and_a_body_file() {
    let w = Weft::start("post");
    let body = w.dir.join("body.bin");
    fs::write(&body, vec![b'x'; 542]).unwrap();
    let r = bench(&[
        "load",
        "-n",
        "20",
        "-c",
        "2",
        "-m",
        "POST",
        "-H",
        "X-Test: 1",
        "--body-file",
        body.to_str().unwrap(),
        &w.url("/echo"),
    ]);
    assert_no_errors(&r);
    // The echo handler answers a POST with its body.
    assert_eq!(r["body_bytes"], 20 * 542, "{r:#}");
}

#[test]
fn groups_client() {
    let w = Weft::start("groups");
    let r = bench(&[
        "groups",
        &w.url("/page.html"),
        "--clients",
        "2",
        "--groups",
        "3",
        "--concurrency",
        "4",
    ]);
    assert_no_errors(&r);
    assert_eq!(r["requests"], 2 * 3 * 4);
    assert_eq!(r["body_bytes"], 2 * 3 * 4 * PAGE_LEN);
    assert!(r["avg_ms"].as_f64().unwrap() > 0.0);
    assert!(r["p50_ms"].as_f64().unwrap() <= r["max_ms"].as_f64().unwrap());
}

#[test]
fn refused_connections_and_missing_files_are_counted() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = bench(&[
        "load",
        "-n",
        "5",
        "-c",
        "1",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert_eq!(r["errors"]["connect"], 5, "{r:#}");
    assert_eq!(r["requests"], 0);

    let w = Weft::start("missing");
    let r = bench(&["load", "-n", "10", "-c", "2", &w.url("/no-such-file")]);
    assert_eq!(r["requests"], 10);
    assert_eq!(
        r["errors"]["status"], 10,
        "404s count as status errors: {r:#}"
    );
    assert_eq!(r["statuses"]["4xx"], 10);
    assert_eq!(r["connects"], 2, "a 404 keeps the connection open");
}

/// A raw server on a std listener for the framings weft does not send: a chunked body on a
/// keep-alive connection (`/chunked`) and an HTTP/1.0 body ended by the close (`/close`).
fn raw_server() -> SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let close = buf.starts_with(b"GET /close ");
                    buf.drain(..end + 4);
                    let reply: &[u8] = if close {
                        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"
                    } else {
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                          5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
                    };
                    if s.write_all(reply).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn chunked_and_close_delimited_bodies() {
    let addr = raw_server();
    let r = bench(&[
        "load",
        "-n",
        "40",
        "-c",
        "2",
        &format!("http://{addr}/chunked"),
    ]);
    assert_no_errors(&r);
    assert_eq!(r["requests"], 40);
    assert_eq!(r["body_bytes"], 40 * "hello, world".len(), "{r:#}");
    assert_eq!(r["connects"], 2, "chunked bodies keep the connection");

    let r = bench(&[
        "load",
        "-n",
        "10",
        "-c",
        "2",
        &format!("http://{addr}/close"),
    ]);
    assert_no_errors(&r);
    assert_eq!(r["body_bytes"], 10 * "until the close".len(), "{r:#}");
    assert_eq!(
        r["connects"], 10,
        "an HTTP/1.0 answer closes the connection"
    );
}

#[test]
fn specweb_paced_connections_on_a_file_set() {
    let w = Weft::start("specweb");
    weft_bench::specweb::write_dirs(&w.dir.join("specweb"), 1).unwrap();
    let r = bench(&[
        "specweb",
        &w.url("/specweb/"),
        "--connections",
        "3",
        "--dirs",
        "1",
        "--duration",
        "2s",
    ]);
    assert_no_errors(&r);
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    // Every client's first request goes out at once; a connection has at most 5 requests.
    assert!(n("requests") >= 3, "{r}");
    // A finished connection made at least one request (no connect failed).
    assert!(n("connections") <= n("requests"), "{r}");
    assert!(n("conforming") <= n("connections"), "{r}");
    assert_eq!(r["clients"], serde_json::json!([3]));
    assert_eq!(n("dirs"), 1);
    let timeline = r["timeline"].as_array().unwrap();
    let ops: u64 = timeline.iter().map(|s| s["ops"].as_u64().unwrap()).sum();
    assert_eq!(ops, n("requests"));
}

#[test]
fn specweb_dynamic_share_goes_through_the_proxy_to_the_backend() {
    // The emulated application server, in this process on port 0, answering at once.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let backend = l.local_addr().unwrap();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cfg = weft_bench::backend::BackendConfig {
        delay: std::time::Duration::ZERO,
        served: served.clone(),
    };
    std::thread::spawn(move || weft_bench::backend::serve(l, cfg));
    let count = || served.load(std::sync::atomic::Ordering::Relaxed);
    let cfg = weft::Config::from_toml(&format!(
        "[[proxy]]\nprefix = \"/dyn/\"\nupstream = \"http://{backend}\"\n"
    ))
    .unwrap();
    let w = Weft::start_with("specweb-dynamic", cfg);
    weft_bench::specweb::write_dirs(&w.dir.join("specweb"), 1).unwrap();
    let run = |pct: &str| {
        bench(&[
            "specweb",
            &w.url("/specweb/"),
            "--connections",
            "4",
            "--dirs",
            "1",
            "--duration",
            "1s",
            "--pace-kbit",
            "0",
            "--dynamic",
            pct,
        ])
    };
    // All dynamic: every answer comes from the backend through the proxy (a path under
    // /dyn/ is no file, so a wrong route would be a 404 and count as an error).
    let r = run("100");
    assert_no_errors(&r);
    let requests = r["requests"].as_u64().unwrap();
    assert!(requests > 0, "{r}");
    // Each of the 4 clients may have had one more request in flight when the run ended.
    assert!(
        count() >= requests && count() <= requests + 4,
        "{} served for {requests}",
        count()
    );
    // A mix: every request answered, about 30% of them by the backend (with hundreds of
    // requests in a second, fewer than 10% or more than 60% would be far off the draw).
    let before = count();
    let r = run("30");
    assert_no_errors(&r);
    let requests = r["requests"].as_u64().unwrap();
    let dynamic = count() - before;
    assert!(requests >= 100, "{r}");
    assert!(
        dynamic * 10 >= requests && dynamic * 10 <= requests * 6,
        "{dynamic} of {requests} dynamic"
    );
    // The option's range is checked.
    let out = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["specweb", &w.url("/specweb/"), "--dynamic", "101"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--dynamic 101"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
