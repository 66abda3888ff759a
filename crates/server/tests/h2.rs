//! HTTP/2 on every model, over TLS (ALPN `h2`) and over h2c with prior knowledge: the real
//! `weft` binary with certificates made here by rcgen, and real clients: curl (`--http2`,
//! `--http2-prior-knowledge`), `nghttp`, and Python's `h2` library (`h2/client.py`, which
//! also speaks raw frames through `hyperframe` and `hpack` for the protocol's limits). Each
//! test that needs a client that is not installed prints a line and skips.
//!
//! One server per model serves every test that cannot disturb another (floods end only their
//! own connection): four listeners, TLS with `h2`, TLS with `http2 = false`, plain with
//! `h2c = true`, plain without. It is started by the first test of its model and killed when
//! the test binary exits; its directory is removed then unless a test failed (the path is
//! printed). The shutdown tests start servers of their own.
//!
//! Each test is `MODEL::TEST` (`cargo test -p weft --test h2 fiber::`); within a test, every
//! check runs over TLS and over h2c.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Conn, Launch, Model, Weft};

use serde_json::Value;

/// The Python client: `client.py MODE --port PORT [--tls --ca FILE]`, one JSON object out.
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h2/client.py");
const INDEX: &[u8] = b"<!DOCTYPE html>\n<title>weft h2 test</title>\n<p>index</p>\n";
/// `[limits] max_body` of the shared servers.
const MAX_BODY: usize = 200 * 1024;
/// A CGI script: the protocol and method it was run with, then the body it was given.
const CGI_SH: &str = "#!/bin/sh\n\
    printf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
    printf 'protocol=%s method=%s body=' \"$SERVER_PROTOCOL\" \"$REQUEST_METHOD\"\n\
    if [ -n \"$CONTENT_LENGTH\" ]; then head -c \"$CONTENT_LENGTH\"; fi\n";
/// A CGI script that waits before its head and in the middle of its body: a slow upstream.
const SLOW_SH: &str = "#!/bin/sh\n\
    sleep 0.5\n\
    printf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
    printf 'first '\n\
    sleep 0.5\n\
    printf 'second'\n";
/// RFC 9113 §7 error codes.
const NO_ERROR: u64 = 0x0;
const REFUSED_STREAM: u64 = 0x7;
const ENHANCE_YOUR_CALM: u64 = 0xb;
/// SETTINGS_MAX_CONCURRENT_STREAMS.
const MAX_CONCURRENT_STREAMS: &str = "3";

// Each test is `fn TEST(model: &str)`, run by `watched` once per model (`per_model!`, the
// suite's macro in `common/`).
per_model! {
    [fiber, thread, process, pipeline] with watched:
    index_over_h2_is_http_2_for_curl_and_in_the_access_log,
    nghttp_reads_the_index_and_the_settings,
    alpn_without_http2_and_a_plain_listener_without_h2c_speak_http1,
    http1_clients_are_served_beside_h2,
    fifty_streams_at_once_on_one_connection,
    post_bodies_reach_echo_and_cgi,
    a_large_file_completes_under_the_default_window,
    head_404_range_and_conditional,
    gzip_when_compression_is_on,
    a_body_over_max_body_gets_413,
    a_413_is_a_complete_response_before_its_reset,
    max_concurrent_streams_is_128_and_the_129th_is_refused,
    rapid_reset_gets_goaway_enhance_your_calm,
    settings_and_ping_floods_get_goaway_enhance_your_calm,
    an_oversized_header_list_gets_431_or_a_reset,
    sigterm_sends_goaway_and_finishes_the_stream_in_flight,
    a_slow_cgi_stream_does_not_hold_the_others,
    a_slow_php_stream_does_not_hold_the_others,
    deadlines_are_per_stream_408_goaway_and_the_send_timeout,
    sigterm_sends_goaway_to_an_idle_connection,
    keepalive_requests_ends_a_connection_with_goaway,
}

/// Runs `test` on `model`'s name, under a [`Watch`].
fn watched(test: fn(&'static str), model: Model) {
    let _watch = Watch(model.name);
    test(model.name);
}

// ---- the shared servers --------------------------------------------------------------------

/// Where a test speaks HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// TLS with ALPN `h2`.
    Tls,
    /// Plain, h2c with prior knowledge.
    H2c,
}

const BOTH: [Via; 2] = [Via::Tls, Via::H2c];

/// A server with the test site and four listeners.
#[derive(Debug)]
struct Site {
    weft: Weft,
    model: &'static str,
    dir: PathBuf,
    /// TLS, ALPN `h2` then `http/1.1`.
    tls: SocketAddr,
    /// TLS with `http2 = false`: ALPN `http/1.1` only.
    tls_h1: SocketAddr,
    /// Plain with `h2c = true`.
    h2c: SocketAddr,
    /// Plain without h2c.
    plain: SocketAddr,
    ca: PathBuf,
    access_log: PathBuf,
    big: Vec<u8>,
    page: Vec<u8>,
}

impl Site {
    fn addr(&self, via: Via) -> SocketAddr {
        match via {
            Via::Tls => self.tls,
            Via::H2c => self.h2c,
        }
    }
}

const MODELS: [&str; 4] = ["fiber", "thread", "process", "pipeline"];
static SHARED: [OnceLock<Site>; 4] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];
static FAILED: AtomicBool = AtomicBool::new(false);

/// Marks the run failed if its test panics, and says where that model's server keeps its
/// files.
struct Watch(&'static str);

impl Drop for Watch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            FAILED.store(true, Ordering::SeqCst);
            if let Some(site) = MODELS
                .iter()
                .position(|m| *m == self.0)
                .and_then(|i| SHARED[i].get())
            {
                eprintln!(
                    "the {} server's files and error log are kept in {}",
                    self.0,
                    site.dir.display()
                );
            }
        }
    }
}

/// Kills the shared servers as the test binary exits (statics are never dropped).
extern "C" fn stop_shared() {
    for site in SHARED.iter().filter_map(OnceLock::get) {
        let pid = site.weft.pid() as libc::pid_t;
        let mut status = 0;
        // SAFETY: kill and waitpid take a pid and a valid c_int to fill; the server is this
        // process's child, not reaped before (nothing else waits for it).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
        if !FAILED.load(Ordering::SeqCst) {
            let _ = std::fs::remove_dir_all(&site.dir);
        }
    }
}

/// The shared server of `model`, started by the first test that asks.
fn shared(model: &str) -> &'static Site {
    let i = MODELS.iter().position(|m| *m == model).expect("a model");
    SHARED[i].get_or_init(|| {
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        AT_EXIT.call_once(|| {
            // SAFETY: registers a function that takes nothing and returns nothing.
            let r = unsafe { libc::atexit(stop_shared) };
            assert_eq!(r, 0, "atexit");
        });
        start_site(MODELS[i], "shared", "")
    })
}

/// 1 MiB of bytes no compressor shrinks, the same every run.
fn big_file() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..1 << 20)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// About 20 KB of text that compresses well.
fn page_file() -> Vec<u8> {
    (0..400)
        .map(|i| format!("line {i}: the quick brown fox jumps over the lazy dog\n"))
        .collect::<String>()
        .into_bytes()
}

/// Starts a server of `model` with the test site; `extra` is appended to its configuration.
fn start_site(model: &'static str, name: &str, extra: &str) -> Site {
    start_site_limits(model, name, "", extra)
}

/// [`start_site`] with `limits` added to its `[limits]` table.
fn start_site_limits(model: &'static str, name: &str, limits: &str, extra: &str) -> Site {
    let dir = common::unique_dir(&format!("h2-{model}-{name}"));
    let root = dir.join("root");
    let cgi = dir.join("cgi");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&cgi).unwrap();
    let big = big_file();
    let page = page_file();
    std::fs::write(root.join("index.html"), INDEX).unwrap();
    std::fs::write(root.join("big.bin"), &big).unwrap();
    std::fs::write(root.join("page.txt"), &page).unwrap();
    for (name, text) in [("hello.sh", CGI_SH), ("slow.sh", SLOW_SH)] {
        use std::os::unix::fs::PermissionsExt;
        let script = cgi.join(name);
        std::fs::write(&script, text).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("self-signed");
    let ca = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&ca, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let access_log = dir.join("access.log");
    let listen =
        |more: &str| format!("[[listen]]\naddr = \"127.0.0.1:0\"\nmodel = \"{model}\"\n{more}\n");
    let config = format!(
        "access_log = {log:?}\n\
         {l1}{l2}{l3}{l4}\
         [tls]\ncert = {ca:?}\nkey = {key:?}\n\n\
         [limits]\nmax_body = {MAX_BODY}\n{limits}\n\
         [compression]\nenabled = true\n\n\
         [cgi]\ndir = {cgi:?}\n\n\
         {extra}",
        log = access_log.display().to_string(),
        l1 = listen("tls = true"),
        l2 = listen("tls = true\nhttp2 = false"),
        l3 = listen("h2c = true"),
        l4 = listen(""),
        ca = ca.display().to_string(),
        key = key_path.display().to_string(),
        cgi = cgi.display().to_string(),
    );
    let weft = Launch::serve(&dir)
        .arg("--root")
        .arg(&root)
        .args(["--echo", "/echo"])
        .config(&config)
        .listeners(4)
        .start();
    let s = weft.serving();
    let schemes: Vec<&str> = s.iter().map(|s| s.scheme.as_str()).collect();
    assert_eq!(schemes, ["https", "https", "http", "http"], "{s:?}");
    Site {
        model,
        tls: s[0].addr,
        tls_h1: s[1].addr,
        h2c: s[2].addr,
        plain: s[3].addr,
        weft,
        dir,
        ca,
        access_log,
        big,
        page,
    }
}

// ---- clients -------------------------------------------------------------------------------

/// A program found on PATH, or a printed line saying the test skips without it.
fn have(program: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: {program} is not installed");
    }
    found
}

/// curl built with HTTP/2 (nghttp2).
fn have_curl() -> bool {
    if !have("curl") {
        return false;
    }
    let out = Command::new("curl").arg("--version").output().unwrap();
    let h2 = String::from_utf8_lossy(&out.stdout).contains("HTTP2");
    if !h2 {
        println!("skipped: this curl has no HTTP/2");
    }
    h2
}

/// Python 3 with the `h2` library.
fn have_python_h2() -> bool {
    if !have("python3") {
        return false;
    }
    let ok = Command::new("python3")
        .args(["-c", "import h2, hpack, hyperframe"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: Python's h2 library is not installed (pip install h2)");
    }
    ok
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// What curl said: the body, `%{http_version}`, and its exit status.
#[derive(Debug)]
struct Curl {
    ok: bool,
    version: String,
    body: Vec<u8>,
    stderr: String,
}

/// curl at `addr` (`https://localhost:PORT` when `tls`) with `args`, body kept.
fn curl(site: &Site, addr: SocketAddr, tls: bool, path: &str, args: &[&str]) -> Curl {
    let out_file = site
        .dir
        .join(format!("curl-{}.out", NEXT.fetch_add(1, Ordering::Relaxed)));
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "-w", "%{http_version}", "-o"])
        .arg(&out_file)
        .args(args);
    if tls {
        let port = addr.port();
        cmd.arg("--cacert")
            .arg(&site.ca)
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("https://localhost:{port}{path}"));
    } else {
        cmd.arg(format!("http://{addr}{path}"));
    }
    let out = cmd.output().expect("run curl");
    let body = std::fs::read(&out_file).unwrap_or_default();
    let _ = std::fs::remove_file(&out_file);
    Curl {
        ok: out.status.success(),
        version: String::from_utf8_lossy(&out.stdout).into_owned(),
        body,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// curl speaking HTTP/2 to the site over `via`.
fn curl_h2(site: &Site, via: Via, path: &str) -> Curl {
    match via {
        Via::Tls => curl(site, site.tls, true, path, &["--http2"]),
        Via::H2c => curl(site, site.h2c, false, path, &["--http2-prior-knowledge"]),
    }
}

/// The Python client's command for `mode` over `via` at `addr`.
fn python(site: &Site, via: Via, addr: SocketAddr, mode: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(CLIENT)
        .arg(mode)
        .args(["--port", &addr.port().to_string()])
        .args(args);
    if via == Via::Tls {
        cmd.arg("--tls").arg("--ca").arg(&site.ca);
    }
    cmd
}

/// Runs the Python client's `mode` to its end; its JSON.
fn run_python(site: &Site, via: Via, mode: &str, args: &[&str], input: &str) -> Value {
    let mut child = python(site, via, site.addr(via), mode, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{} {via:?} {mode}: no JSON ({e}): {}\n{}",
            site.model,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// One request for the Python client's `requests` mode.
fn req(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Value {
    let mut v = serde_json::json!({
        "method": method,
        "path": path,
        "headers": headers.iter().map(|(n, v)| [n, v]).collect::<Vec<_>>(),
    });
    if let Some(b) = body {
        v["body_hex"] = Value::String(hex(b));
    }
    v
}

/// One response the Python client read.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    data_frames: u64,
    /// END_STREAM came.
    ended: bool,
    /// RST_STREAM's code, if the stream was reset.
    reset: Option<u64>,
    /// The gzip body decoded.
    decoded: Option<Vec<u8>>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// All of `reqs` at once on one connection; the responses in order, and the whole JSON.
fn h2_requests(site: &Site, via: Via, reqs: &[Value]) -> (Vec<Resp>, Value) {
    let v = run_python(
        site,
        via,
        "requests",
        &[],
        &Value::Array(reqs.to_vec()).to_string(),
    );
    let who = format!("{} {via:?}", site.model);
    assert!(v["error"].is_null(), "{who}: {}", v["error"]);
    let alpn = if via == Via::Tls {
        "h2".into()
    } else {
        Value::Null
    };
    assert_eq!(v["alpn"], alpn, "{who}");
    let resps = v["responses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Resp {
            status: r["status"].as_u64().unwrap_or(0) as u16,
            headers: r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h[0].as_str().unwrap().to_string(),
                        h[1].as_str().unwrap().to_string(),
                    )
                })
                .collect(),
            body: unhex(r["body_hex"].as_str().unwrap()),
            data_frames: r["data_frames"].as_u64().unwrap(),
            ended: r["ended"].as_bool().unwrap(),
            reset: r["reset"].as_u64(),
            decoded: r["decoded_hex"].as_str().map(unhex),
        })
        .collect();
    (resps, v)
}

/// One request on its own connection.
fn h2_one(site: &Site, via: Via, r: Value) -> Resp {
    h2_requests(site, via, &[r]).0.remove(0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Lines of the access log that contain `needle`, waited for up to 3 s (the log is flushed
/// at least once a second).
fn log_lines(site: &Site, needle: &str) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(3);
    loop {
        let text = std::fs::read_to_string(&site.access_log).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if !lines.is_empty() || Instant::now() >= end {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The server still answers a new h2c client.
#[track_caller]
fn assert_serves(site: &Site) {
    let r = h2_one(site, Via::H2c, req("GET", "/", &[], None));
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, INDEX),
        "{}",
        site.model
    );
}

// ---- the tests -----------------------------------------------------------------------------

fn index_over_h2_is_http_2_for_curl_and_in_the_access_log(model: &str) {
    if !have_curl() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let tag = format!("curl-{via:?}");
        let c = curl_h2(site, via, &format!("/?{tag}"));
        assert!(c.ok, "{model} {via:?}: {}", c.stderr);
        assert_eq!(c.version, "2", "{model} {via:?}");
        assert_eq!(c.body, INDEX, "{model} {via:?}");
        let lines = log_lines(site, &format!("/?{tag} "));
        assert_eq!(lines.len(), 1, "{model} {via:?}: {lines:?}");
        assert!(
            lines[0].contains(&format!("\"GET /?{tag} HTTP/2.0\" 200 {} ", INDEX.len())),
            "{model} {via:?}: {}",
            lines[0]
        );
    }
}

fn nghttp_reads_the_index_and_the_settings(model: &str) {
    if !have("nghttp") {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let url = match via {
            Via::Tls => format!("https://127.0.0.1:{}/", site.tls.port()),
            // Without -u, nghttp speaks h2c with prior knowledge.
            Via::H2c => format!("http://{}/", site.h2c),
        };
        let out = Command::new("nghttp")
            .args(["-v", "-t", "10", &url])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{model} {via:?}: {text}");
        assert!(
            text.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128"),
            "{model} {via:?}: {text}"
        );
        assert!(text.contains("(:status: 200)") || text.contains(":status: 200"));
        assert!(
            text.contains(std::str::from_utf8(INDEX).unwrap()),
            "{model} {via:?}: {text}"
        );
    }
}

fn alpn_without_http2_and_a_plain_listener_without_h2c_speak_http1(model: &str) {
    let site = shared(model);
    if have_curl() {
        // Asked for h2, the listener with `http2 = false` picks http/1.1.
        let c = curl(site, site.tls_h1, true, "/", &["--http2"]);
        assert!(c.ok, "{model}: {}", c.stderr);
        assert_eq!(
            (c.version.as_str(), c.body.as_slice()),
            ("1.1", INDEX),
            "{model}"
        );
        // The plain listener without h2c is not HTTP/2 to a client with prior knowledge.
        let c = curl(site, site.plain, false, "/", &["--http2-prior-knowledge"]);
        assert!(!c.ok || c.version != "2", "{model}: {c:?}");
    }
    if have("python3") {
        let script = "import socket, ssl, sys\n\
            ctx = ssl.create_default_context(cafile=sys.argv[2])\n\
            ctx.set_alpn_protocols(['h2', 'http/1.1'])\n\
            s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1])), 10),\n\
                                server_hostname='localhost')\n\
            print(s.selected_alpn_protocol())\n";
        for (addr, want) in [(site.tls, "h2"), (site.tls_h1, "http/1.1")] {
            let out = Command::new("python3")
                .args(["-c", script, &addr.port().to_string()])
                .arg(&site.ca)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{model}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want, "{model}");
        }
    }
    // The client preface on the plain listener without h2c: an HTTP/1.1 answer, no SETTINGS.
    let mut c = Conn::connect(site.plain);
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00");
    let r = c
        .read_response()
        .unwrap_or_else(|e| panic!("{model}: no HTTP/1.1 answer to the preface: {e:?}"));
    assert_eq!(r.version, "HTTP/1.1", "{model}: {r:?}");
    assert!(r.status >= 400, "{model}: {r:?}");
}

fn http1_clients_are_served_beside_h2(model: &str) {
    let site = shared(model);
    // Plain HTTP/1.1 on the h2c listener.
    let mut c = Conn::connect(site.h2c);
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response().expect("HTTP/1.1 on the h2c listener");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, INDEX),
        "{model}: {r:?}"
    );
    // Keep-alive: a second request on the same connection.
    c.send(b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = c.read_response().expect("a second HTTP/1.1 request");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"echo"[..]),
        "{model}"
    );
    if have_curl() {
        // An HTTP/1.1 client over TLS on the listener that offers h2.
        let c = curl(site, site.tls, true, "/?curl-http1", &["--http1.1"]);
        assert!(c.ok, "{model}: {}", c.stderr);
        assert_eq!(
            (c.version.as_str(), c.body.as_slice()),
            ("1.1", INDEX),
            "{model}"
        );
        let lines = log_lines(site, "/?curl-http1 ");
        assert!(
            lines.len() == 1 && lines[0].contains("\"GET /?curl-http1 HTTP/1.1\" 200"),
            "{model}: {lines:?}"
        );
        // And plain HTTP/1.1 from curl on the h2c listener.
        let c = curl(site, site.h2c, false, "/", &["--http1.1"]);
        assert!(c.ok, "{model}: {}", c.stderr);
        assert_eq!(
            (c.version.as_str(), c.body.as_slice()),
            ("1.1", INDEX),
            "{model}"
        );
    }
}

fn fifty_streams_at_once_on_one_connection(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    let paths = ["/", "/page.txt", "/echo", "/index.html", "/missing"];
    let reqs: Vec<Value> = (0..50)
        .map(|i| req("GET", paths[i % paths.len()], &[], None))
        .collect();
    for via in BOTH {
        let (resps, v) = h2_requests(site, via, &reqs);
        assert_eq!(resps.len(), 50);
        assert_eq!(v["goaway"], Value::Null, "{model} {via:?}");
        for (i, r) in resps.iter().enumerate() {
            let (status, body): (u16, &[u8]) = match paths[i % paths.len()] {
                "/" | "/index.html" => (200, INDEX),
                "/page.txt" => (200, &site.page),
                "/echo" => (200, b"echo"),
                _ => (404, &r.body),
            };
            assert!(r.ended && r.reset.is_none(), "{model} {via:?} #{i}: {r:?}");
            assert_eq!(r.status, status, "{model} {via:?} #{i}");
            assert!(r.body == body, "{model} {via:?} #{i}: wrong body");
        }
    }
}

fn post_bodies_reach_echo_and_cgi(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    // More than a stream's 65,535-byte window: the server must open it as it reads.
    let body: Vec<u8> = (0..150_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for via in BOTH {
        let (resps, _) = h2_requests(
            site,
            via,
            &[
                req("POST", "/echo", &[], Some(&body)),
                req("POST", "/echo", &[("content-length", "5")], Some(b"hello")),
                req("POST", "/cgi-bin/hello.sh?x=1", &[], Some(b"posted")),
                req("GET", "/cgi-bin/hello.sh", &[], None),
            ],
        );
        let r = &resps[0];
        assert_eq!(r.status, 200, "{model} {via:?}: {r:?}");
        assert!(r.ended, "{model} {via:?}");
        assert!(r.body == body, "{model} {via:?}: echo gave another body");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        assert_eq!(r.header("content-length"), Some("150000"));
        assert_eq!(
            (resps[1].status, resps[1].body.as_slice()),
            (200, &b"hello"[..])
        );
        for (r, want) in [
            (&resps[2], "protocol=HTTP/2.0 method=POST body=posted"),
            (&resps[3], "protocol=HTTP/2.0 method=GET body="),
        ] {
            assert_eq!(r.status, 200, "{model} {via:?}: {r:?}");
            assert!(r.ended, "{model} {via:?}");
            assert_eq!(String::from_utf8_lossy(&r.body), want, "{model} {via:?}");
        }
    }
}

/// A CGI script slow before its head and within its body, beside static requests on the same
/// connection: they are answered first, and the script's answer is whole.
fn a_slow_cgi_stream_does_not_hold_the_others(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let who = format!("{model} {via:?}");
        let (resps, v) = h2_requests(
            site,
            via,
            &[
                req("GET", "/cgi-bin/slow.sh", &[], None),
                req("GET", "/index.html", &[], None),
                req("POST", "/echo", &[], Some(b"beside")),
                req("GET", "/page.txt", &[], None),
            ],
        );
        assert_eq!(resps[0].status, 200, "{who}: {:?}", resps[0]);
        assert_eq!(resps[0].body, b"first second", "{who}");
        assert!(resps[0].ended, "{who}");
        assert_eq!(resps[1].body, INDEX, "{who}");
        assert_eq!(resps[2].body, b"beside", "{who}");
        assert!(resps[3].body == site.page, "{who}");
        // Streams 1 (the script), 3, 5, 7: the script's ends last.
        let order = ended_order(&v);
        assert_eq!(order.len(), 4, "{who}: {order:?}");
        assert_eq!(
            order.last(),
            Some(&1),
            "{who}: the others waited: {order:?}"
        );
    }
}

/// The stream ids in the order their responses ended, as the Python client saw them.
fn ended_order(v: &Value) -> Vec<u64> {
    v["ended_order"]
        .as_array()
        .expect("ended_order")
        .iter()
        .map(|i| i.as_u64().expect("a stream id"))
        .collect()
}

/// PHP through php-fpm over HTTP/2: a script that sleeps holds only its stream, and the
/// application sees the request as HTTP/2 (and HTTPS over TLS).
fn a_slow_php_stream_does_not_hold_the_others(model: &str) {
    if !have_python_h2() {
        return;
    }
    let Some(bin) = common::php_fpm::php_fpm() else {
        eprintln!("skipped: php-fpm is not installed (apt-get install php-fpm)");
        return;
    };
    let model: &'static str = MODELS.iter().find(|m| **m == model).unwrap();
    let scripts = common::unique_dir(&format!("h2-{model}-php-scripts"));
    std::fs::create_dir_all(scripts.join("php")).unwrap();
    std::fs::write(
        scripts.join("php/slow.php"),
        "<?php\nusleep(800000);\necho 'slept';\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("php/env.php"),
        "<?php\necho $_SERVER['SERVER_PROTOCOL'], ' ', $_SERVER['HTTPS'] ?? 'plain';\n",
    )
    .unwrap();
    let fpm = common::php_fpm::PhpFpm::start(&bin, &scripts);
    let site = start_site(
        model,
        "php",
        &format!(
            "[[fastcgi]]\nprefix = \"/php/\"\nserver = \"unix:{}\"\nroot = {:?}\n",
            fpm.sock.display(),
            scripts.display().to_string()
        ),
    );
    for via in BOTH {
        let who = format!("{model} {via:?}");
        let (resps, v) = h2_requests(
            &site,
            via,
            &[
                req("GET", "/php/slow.php", &[], None),
                req("GET", "/index.html", &[], None),
                req("GET", "/php/env.php", &[], None),
            ],
        );
        assert_eq!(resps[0].status, 200, "{who}: {:?}", resps[0]);
        assert_eq!(resps[0].body, b"slept", "{who}");
        assert_eq!(resps[1].body, INDEX, "{who}");
        let https = if via == Via::Tls { "on" } else { "plain" };
        assert_eq!(
            String::from_utf8_lossy(&resps[2].body),
            format!("HTTP/2.0 {https}"),
            "{who}"
        );
        let order = ended_order(&v);
        assert_eq!(
            order.last(),
            Some(&1),
            "{who}: the others waited: {order:?}"
        );
    }
    drop(fpm);
    let _ = std::fs::remove_dir_all(&scripts);
}

/// A server whose client deadlines are short: a second's grace, the minimum rates at their
/// defaults, and a second's send timeout.
fn deadline_site(model: &'static str) -> Site {
    start_site(
        model,
        "deadlines",
        "[timeouts]\nsend = \"1s\"\nmin_rate_grace = \"1s\"\n\
         header_min_rate = 500\nbody_min_rate = 500\n",
    )
}

/// Each deadline the client owes is its stream's: a body below `body_min_rate` gets 408 on
/// its own stream while the others are answered; a head whose CONTINUATION never comes ends
/// the connection (GOAWAY) at `header_min_rate`; a window kept shut ends at `timeouts.send`.
fn deadlines_are_per_stream_408_goaway_and_the_send_timeout(model: &str) {
    if !have_python_h2() {
        return;
    }
    let model: &'static str = MODELS.iter().find(|m| **m == model).unwrap();
    let site = deadline_site(model);
    for via in BOTH {
        let who = format!("{model} {via:?}");
        // Ten bytes of a hundred, then nothing; beside it, requests that finish.
        let mut late = req(
            "POST",
            "/echo",
            &[("content-length", "100")],
            Some(&[b'x'; 10]),
        );
        late["hold"] = Value::Bool(true);
        let (resps, v) = h2_requests(
            &site,
            via,
            &[
                late,
                req("GET", "/index.html", &[], None),
                req("POST", "/echo", &[], Some(b"whole")),
            ],
        );
        assert_eq!(resps[0].status, 408, "{who}: {:?}", resps[0]);
        assert_eq!(
            (resps[1].status, resps[1].body.as_slice()),
            (200, INDEX),
            "{who}"
        );
        assert_eq!(resps[2].body, b"whole", "{who}");
        assert_eq!(v["ended_order"][2], 1, "{who}: the 408 came last: {v}");
        assert!(v["goaway"].is_null(), "{who}: the connection went on: {v}");

        // A head that never ends.
        let v = run_python(&site, via, "slow-head", &[], "");
        assert_eq!(v["goaway"]["code"], NO_ERROR, "{who}: {v}");
        assert_eq!(v["closed"], true, "{who}: {v}");
        let elapsed = v["elapsed"].as_f64().unwrap();
        assert!(elapsed >= 0.9, "{who}: cut before the grace: {v}");

        // A window kept shut, the client silent for four seconds.
        let mut c = Interactive::start(
            &site,
            via,
            "stall",
            &["--path", "/big.bin", "--silent", "4"],
            "stalled",
        );
        c.go();
        let v = c.result();
        assert_eq!(v["received"], 65535, "{who}: {v}");
        assert!(v["goaway_while_silent"].is_object(), "{who}: {v}");
        assert_eq!(v["ended"], false, "{who}");
        assert_eq!(v["closed"], true, "{who}");
    }
    let log = site.weft.log();
    for said in [
        "408 HTTP/2 stream 1: request body below timeouts.body_min_rate",
        "408 HTTP/2 request head below timeouts.header_min_rate",
        "did not open its window within timeouts.send",
    ] {
        assert!(
            log.contains(said),
            "{model}: the error log lacks {said:?}:\n{log}"
        );
    }
}

fn a_large_file_completes_under_the_default_window(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let r = h2_one(site, via, req("GET", "/big.bin", &[], None));
        assert_eq!(r.status, 200, "{model} {via:?}: {:?}", r.headers);
        assert!(r.ended && r.reset.is_none(), "{model} {via:?}");
        assert_eq!(r.header("content-length"), Some("1048576"));
        assert_eq!(r.body.len(), site.big.len(), "{model} {via:?}");
        assert!(r.body == site.big, "{model} {via:?}: bytes differ");
        // The client's window is 65,535 bytes: the server waited for it to open, many times.
        assert!(
            r.data_frames >= 16,
            "{model} {via:?}: {} frames",
            r.data_frames
        );
    }
    if have_curl() {
        for via in BOTH {
            let c = curl_h2(site, via, "/big.bin");
            assert!(c.ok, "{model} {via:?}: {}", c.stderr);
            assert_eq!(c.version, "2");
            assert!(c.body == site.big, "{model} {via:?}: curl's bytes differ");
        }
    }
}

fn head_404_range_and_conditional(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let (resps, _) = h2_requests(
            site,
            via,
            &[
                req("HEAD", "/big.bin", &[], None),
                req("GET", "/no/such/file", &[], None),
                req("GET", "/big.bin", &[("range", "bytes=1000-1999")], None),
                req("GET", "/page.txt", &[], None),
            ],
        );
        let head = &resps[0];
        assert_eq!(head.status, 200, "{model} {via:?}");
        assert_eq!(
            head.header("content-length"),
            Some("1048576"),
            "{model} {via:?}"
        );
        assert!(head.ended && head.body.is_empty() && head.data_frames == 0);
        let missing = &resps[1];
        assert_eq!(missing.status, 404, "{model} {via:?}");
        assert!(missing.ended);
        assert_eq!(
            missing.header("content-length"),
            Some(missing.body.len().to_string().as_str())
        );
        let range = &resps[2];
        assert_eq!(range.status, 206, "{model} {via:?}: {range:?}");
        assert_eq!(
            range.header("content-range"),
            Some("bytes 1000-1999/1048576")
        );
        assert_eq!(range.header("content-length"), Some("1000"));
        assert!(range.body == site.big[1000..2000], "{model} {via:?}");
        let page = &resps[3];
        assert_eq!(page.status, 200);
        let etag = page.header("etag").expect("an ETag").to_string();
        let r = h2_one(
            site,
            via,
            req("GET", "/page.txt", &[("if-none-match", &etag)], None),
        );
        assert_eq!(r.status, 304, "{model} {via:?}: {r:?}");
        assert!(r.ended && r.body.is_empty() && r.data_frames == 0, "{r:?}");
        assert_eq!(r.header("etag"), Some(etag.as_str()));
        assert_eq!(r.header("content-length"), None, "{model} {via:?}");
    }
}

fn gzip_when_compression_is_on(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        // Twice: made (or streamed) the first time, maybe from the cache the second.
        for round in 0..2 {
            let r = h2_one(
                site,
                via,
                req("GET", "/page.txt", &[("accept-encoding", "gzip")], None),
            );
            let who = format!("{model} {via:?} #{round}");
            assert_eq!(r.status, 200, "{who}");
            assert_eq!(r.header("content-encoding"), Some("gzip"), "{who}: {r:?}");
            assert!(
                r.header("vary")
                    .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
                "{who}"
            );
            assert!(
                r.body.len() < site.page.len() / 4,
                "{who}: {}",
                r.body.len()
            );
            if let Some(n) = r.header("content-length") {
                assert_eq!(n, r.body.len().to_string(), "{who}");
            }
            assert_eq!(r.decoded.as_deref(), Some(&site.page[..]), "{who}");
        }
        // Without accept-encoding: identity.
        let r = h2_one(site, via, req("GET", "/page.txt", &[], None));
        assert_eq!(r.header("content-encoding"), None);
        assert!(r.body == site.page);
    }
}

/// A body over `limits.max_body`: with its length declared (answered before the body is
/// read) and without (answered when the body passes the limit).
fn over_max_body(model: &str) -> Vec<(Via, Resp, Resp)> {
    let site = shared(model);
    let big = vec![b'a'; MAX_BODY + 50_000];
    let len = big.len().to_string();
    BOTH.iter()
        .map(|&via| {
            let (mut resps, _) = h2_requests(
                site,
                via,
                &[
                    req("POST", "/echo", &[("content-length", &len)], Some(&big)),
                    req("POST", "/echo", &[], Some(&big)),
                ],
            );
            let undeclared = resps.remove(1);
            (via, resps.remove(0), undeclared)
        })
        .collect()
}

fn a_body_over_max_body_gets_413(model: &str) {
    if !have_python_h2() {
        return;
    }
    for (via, declared, undeclared) in over_max_body(model) {
        assert_eq!(declared.status, 413, "{model} {via:?}: {declared:?}");
        assert_eq!(undeclared.status, 413, "{model} {via:?}: {undeclared:?}");
        // RFC 9113 §8.1: the rest of the body is stopped, NO_ERROR (or the stream just ends).
        for r in [&declared, &undeclared] {
            assert!(
                r.reset.is_none_or(|c| c == NO_ERROR),
                "{model} {via:?}: {r:?}"
            );
        }
    }
    assert_serves(shared(model));
}

fn a_413_is_a_complete_response_before_its_reset(model: &str) {
    if !have_python_h2() {
        return;
    }
    for (via, declared, undeclared) in over_max_body(model) {
        for r in [&declared, &undeclared] {
            assert_eq!(r.status, 413, "{model} {via:?}");
            let len: usize = r
                .header("content-length")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            assert!(
                r.ended && r.body.len() == len,
                "{model} {via:?}: the 413 was cut: {} of {len} body bytes, END_STREAM {}, \
                 reset {:?}",
                r.body.len(),
                r.ended,
                r.reset
            );
        }
    }
}

fn max_concurrent_streams_is_128_and_the_129th_is_refused(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let v = run_python(site, via, "refuse", &[], "");
        let who = format!("{model} {via:?}");
        assert_eq!(v["settings"][MAX_CONCURRENT_STREAMS], 128, "{who}: {v}");
        assert!(v["goaway"].is_null(), "{who}: {v}");
        assert_eq!(v["refused"], serde_json::json!([257]), "{who}: {v}");
        let resets: HashMap<String, Value> = serde_json::from_value(v["resets"].clone()).unwrap();
        assert_eq!(
            resets.len(),
            1,
            "{who}: only the 129th is reset: {resets:?}"
        );
        assert_eq!(resets["257"], REFUSED_STREAM);
        assert_eq!(v["unanswered"], serde_json::json!([]), "{who}: {v}");
        for i in 0..128u32 {
            let id = (2 * i + 1).to_string();
            assert_eq!(v["statuses"][&id], 200, "{who}: stream {id}");
            let want = hex(&[0x41 + (2 * i + 1) as u8 % 26]);
            assert_eq!(v["bodies"][&id], want.as_str(), "{who}: stream {id}");
        }
    }
}

fn rapid_reset_gets_goaway_enhance_your_calm(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let v = run_python(site, via, "rapid-reset", &[], "");
        assert_eq!(
            v["goaway"]["code"], ENHANCE_YOUR_CALM,
            "{model} {via:?}: {v}"
        );
        // Far fewer than the 1000 streams were taken in.
        let last = v["goaway"]["last_stream_id"].as_u64().unwrap();
        assert!(last < 1999, "{model} {via:?}: {v}");
    }
    assert_serves(site);
}

fn settings_and_ping_floods_get_goaway_enhance_your_calm(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        for mode in ["settings-flood", "ping-flood"] {
            let v = run_python(site, via, mode, &[], "");
            assert_eq!(
                v["goaway"]["code"], ENHANCE_YOUR_CALM,
                "{model} {via:?} {mode}: {v}"
            );
        }
    }
    assert_serves(site);
}

fn an_oversized_header_list_gets_431_or_a_reset(model: &str) {
    if !have_python_h2() {
        return;
    }
    let site = shared(model);
    for via in BOTH {
        let v = run_python(site, via, "big-headers", &[], "");
        let who = format!("{model} {via:?}");
        let answered = v["status"] == 431 || !v["reset"].is_null() || !v["goaway"].is_null();
        assert!(answered, "{who}: {v}");
        assert!(v["status"].is_null() || v["status"] == 431, "{who}: {v}");
        if v["goaway"].is_null() {
            assert_eq!(v["after"], 200, "{who}: the connection serves on: {v}");
        }
    }
    assert_serves(site);
}

/// A Python client in an interactive mode: it prints `ready` when set, then waits for a
/// line, then prints its JSON.
struct Interactive {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Interactive {
    fn start(site: &Site, via: Via, mode: &str, args: &[&str], ready: &str) -> Interactive {
        let mut child = python(site, via, site.addr(via), mode, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), ready, "{} {via:?} {mode}", site.model);
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

/// A server of its own, with a grace period longer than the test.
fn shutdown_site(model: &'static str) -> Site {
    start_site(model, "shutdown", "[timeouts]\nshutdown_grace = \"20s\"\n")
}

/// SIGTERM while a response is held by the client's flow control: GOAWAY NO_ERROR naming
/// the stream, the stream completes once the client opens its window, and the server exits
/// 0.
fn sigterm_sends_goaway_and_finishes_the_stream_in_flight(model: &str) {
    if !have_python_h2() {
        return;
    }
    let model: &'static str = MODELS.iter().find(|m| **m == model).unwrap();
    let mut site = shutdown_site(model);
    let stalled: Vec<(Via, Interactive)> = BOTH
        .iter()
        .map(|&via| {
            (
                via,
                Interactive::start(
                    &site,
                    via,
                    "stall",
                    &["--path", "/big.bin", "--silent", "1"],
                    "stalled",
                ),
            )
        })
        .collect();
    site.weft.signal(libc::SIGTERM);
    let results: Vec<(Via, Value)> = stalled
        .into_iter()
        .map(|(via, mut c)| {
            c.go();
            (via, c)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|(via, c)| (via, c.result()))
        .collect();
    for (via, mut v) in results {
        let who = format!("{model} {via:?}");
        let body = unhex(v["body_hex"].as_str().unwrap());
        v["body_hex"] = Value::String(format!("{} bytes", body.len()));
        assert_eq!(v["status"], 200, "{who}: {v}");
        assert_eq!(v["received"], 65535, "{who}: {v}");
        assert_eq!(
            v["goaway"],
            serde_json::json!({"code": NO_ERROR, "last_stream_id": 1}),
            "{who}: {v}"
        );
        assert!(v["reset"].is_null(), "{who}: {v}");
        assert_eq!(v["ended"], true, "{who}: {v}");
        assert!(
            body == site.big,
            "{who}: {} bytes, not the file",
            body.len()
        );
        assert_eq!(v["closed"], true, "{who}: the connection stays open");
    }
    let status = site.weft.exit_within(Duration::from_secs(10));
    assert!(status.success(), "{model}: {status:?}\n{}", site.weft.log());
    if !FAILED.load(Ordering::SeqCst) {
        let _ = std::fs::remove_dir_all(&site.dir);
    }
}

/// SIGTERM with an idle HTTP/2 connection open: GOAWAY NO_ERROR, then the close, at once.
fn sigterm_sends_goaway_to_an_idle_connection(model: &str) {
    if !have_python_h2() {
        return;
    }
    let model: &'static str = MODELS.iter().find(|m| **m == model).unwrap();
    let mut site = shutdown_site(model);
    let idle: Vec<(Via, Interactive)> = BOTH
        .iter()
        .map(|&via| (via, Interactive::start(&site, via, "idle", &[], "idle")))
        .collect();
    site.weft.signal(libc::SIGTERM);
    for (via, mut c) in idle {
        c.go();
        let v = c.result();
        let who = format!("{model} {via:?}");
        assert_eq!(v["status"], 200, "{who}: {v}");
        assert_eq!(v["closed"], true, "{who}: {v}");
        assert!(v["elapsed"].as_f64().unwrap() < 3.0, "{who}: {v}");
        assert_eq!(
            v["goaway"],
            serde_json::json!({"code": NO_ERROR, "last_stream_id": 1}),
            "{who}: {v}"
        );
    }
    let status = site.weft.exit_within(Duration::from_secs(10));
    assert!(status.success(), "{model}: {status:?}");
    if !FAILED.load(Ordering::SeqCst) {
        let _ = std::fs::remove_dir_all(&site.dir);
    }
}

/// `limits.keepalive_requests` on HTTP/2 (nginx applies it to streams): past the bound,
/// GOAWAY NO_ERROR names the last stream taken, and that stream is still answered.
fn keepalive_requests_ends_a_connection_with_goaway(model: &str) {
    if !have_python_h2() {
        return;
    }
    let model: &'static str = MODELS.iter().find(|m| **m == model).unwrap();
    let site = start_site_limits(model, "karequests", "keepalive_requests = 1", "");
    for via in BOTH {
        let v = run_python(
            &site,
            via,
            "requests",
            &["--await-goaway"],
            r#"[{"path": "/"}]"#,
        );
        let who = format!("{model} {via:?}");
        assert!(v["error"].is_null(), "{who}: {v}");
        assert_eq!(v["responses"][0]["status"], 200, "{who}: {v}");
        assert_eq!(
            v["goaway"],
            serde_json::json!({"code": NO_ERROR, "last_stream_id": 1}),
            "{who}: {v}"
        );
    }
    if !FAILED.load(Ordering::SeqCst) {
        let _ = std::fs::remove_dir_all(&site.dir);
    }
}
