//! The reverse proxy against real upstreams started by the test: an in-test HTTP server on a
//! std `TcpListener` (it answers with the request head it received, counts its accepted
//! connections, or misbehaves on purpose), a second weft server, and Python's `http.server`.
//! What was forwarded (hop-by-hop fields removed, X-Forwarded-*, Via, exactly one framing
//! field), pooling, 502 and 504, and 100 MB bodies streamed both ways with the serving
//! process's peak memory measured before and after.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::common::{chunked, find, Builder, Conn, Model, Server};

per_model! {
    except fiber_nocache:
    forwarded_head_has_no_hop_by_hop_fields_and_gains_forwarding_fields,
    host_upstream_mode_and_http10_client,
    post_bodies_go_upstream_with_exactly_one_framing_field,
    chunked_and_close_delimited_responses_are_relayed,
    weft_upstream_serves_files_head_and_echo,
    python_http_server_upstream,
    pooled_upstream_connections_are_reused,
    upstream_that_closes_after_each_response_is_reconnected,
    dead_pooled_connection_is_retried_only_for_idempotent_requests_without_body,
    upstream_that_never_completes_the_handshake_is_504,
    unreachable_or_malformed_upstream_is_502,
    silent_upstream_is_504,
    fallback_forwards_what_is_not_a_file,
    trace_is_refused_and_not_forwarded,
    header_names_with_underscores_are_not_forwarded_unless_allowed,
    a_method_in_other_letter_case_is_refused_as_when_served_directly,
    preconditions_are_forwarded_for_the_upstream_to_evaluate,
    dot_segments_cannot_leave_a_prefix,
    hundred_megabytes_download_streams_through,
    hundred_megabytes_upload_streams_through,
    an_absolute_form_authority_replaces_host_upstream,
    request_buffering_keeps_bad_bodies_from_the_upstream,
    idle_pooled_connections_close_on_time_without_another_request,
    a_response_the_upstream_cuts_is_logged_with_the_bytes_sent,
}

/// How long an upstream connection waits for its next request (bounds every test thread).
const UPSTREAM_IDLE: Duration = Duration::from_secs(10);

/// A request head as the upstream received it.
#[derive(Debug)]
struct Head {
    /// The whole head, request line to the last field line (no final empty line).
    raw: String,
    line: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }
}

/// One connection accepted by the in-test upstream.
struct UpConn {
    stream: TcpStream,
    buf: Vec<u8>,
    stop: Arc<AtomicBool>,
    /// Requests answered on this connection before the current one.
    served: usize,
}

impl UpConn {
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The next request head; `None` when the proxy closed the connection.
    fn read_head(&mut self) -> Option<Head> {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if !self.fill() {
                return None;
            }
        };
        let raw = String::from_utf8(self.buf[..end].to_vec()).expect("head is text");
        self.buf.drain(..end + 4);
        let mut lines = raw.split("\r\n");
        let line = lines.next().unwrap_or("").to_string();
        let headers = lines
            .map(|l| {
                let (n, v) = l.split_once(':').expect("field line with a colon");
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        Some(Head { raw, line, headers })
    }

    /// Exactly `n` bytes, given to `sink` as they arrive.
    fn read_exact_to(&mut self, mut n: usize, sink: &mut dyn FnMut(&[u8])) {
        while n > 0 {
            if self.buf.is_empty() {
                assert!(self.fill(), "proxy closed inside a body");
            }
            let k = n.min(self.buf.len());
            sink(&self.buf[..k]);
            self.buf.drain(..k);
            n -= k;
        }
    }

    fn read_line(&mut self) -> String {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8(self.buf[..i].to_vec()).expect("text line");
                self.buf.drain(..i + 2);
                return line;
            }
            assert!(self.fill(), "proxy closed inside a chunked body");
        }
    }

    /// Reads the body `head` announces, handing it to `sink`; returns its length.
    fn read_body(&mut self, head: &Head, sink: &mut dyn FnMut(&[u8])) -> usize {
        let mut total = 0;
        let mut counted = |b: &[u8]| {
            total += b.len();
            sink(b);
        };
        if head
            .header("Transfer-Encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            loop {
                let size = usize::from_str_radix(&self.read_line(), 16).expect("chunk size");
                if size == 0 {
                    while !self.read_line().is_empty() {}
                    break;
                }
                self.read_exact_to(size, &mut counted);
                assert_eq!(self.read_line(), "", "chunk not followed by CRLF");
            }
        } else if let Some(n) = head.header("Content-Length") {
            self.read_exact_to(n.parse().expect("length"), &mut counted);
        }
        total
    }

    fn read_body_vec(&mut self, head: &Head) -> Vec<u8> {
        let mut body = Vec::new();
        self.read_body(head, &mut |b| body.extend_from_slice(b));
        body
    }

    fn write(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// `200` with `extra` header lines and `body`.
    fn ok(&mut self, extra: &str, body: &[u8]) -> bool {
        let head = format!(
            "HTTP/1.1 200 OK\r\n{extra}Content-Length: {}\r\n\r\n",
            body.len()
        );
        self.write(head.as_bytes()) && self.write(body)
    }

    /// Holds the connection without answering until the test ends (at most 10 s).
    fn hold(&mut self) {
        let end = Instant::now() + UPSTREAM_IDLE;
        while !self.stop.load(SeqCst) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

type Handler = dyn Fn(&mut UpConn, &Head) -> bool + Send + Sync;

/// An HTTP/1.1 server on a std `TcpListener`, one thread per connection, answering each
/// request with `handler` (which returns false to close the connection).
struct Upstream {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    fn start(handler: impl Fn(&mut UpConn, &Head) -> bool + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let accepts = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (count, stopped) = (accepts.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                count.fetch_add(1, SeqCst);
                let (handler, stop) = (handler.clone(), stopped.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(UPSTREAM_IDLE));
                    let _ = stream.set_write_timeout(Some(UPSTREAM_IDLE));
                    let mut c = UpConn {
                        stream,
                        buf: Vec::new(),
                        stop,
                        served: 0,
                    };
                    while let Some(head) = c.read_head() {
                        if !handler(&mut c, &head) {
                            break;
                        }
                        c.served += 1;
                    }
                });
            }
        });
        Upstream {
            addr,
            accepts,
            stop,
        }
    }

    /// Answers every request with `200` and a body of the head it received, a blank line and
    /// the request body; the response carries hop-by-hop fields the proxy must drop.
    fn echo() -> Upstream {
        Upstream::start(|c, head| {
            let body = c.read_body_vec(head);
            let mut out = head.raw.clone().into_bytes();
            out.extend_from_slice(b"\r\n\r\n");
            out.extend_from_slice(&body);
            c.ok(
                "Connection: X-Up-Hop\r\nX-Up-Hop: secret\r\nKeep-Alive: timeout=5\r\n\
                 Proxy-Connection: keep-alive\r\nUpgrade: h2c\r\nVia: 1.1 origin\r\n\
                 X-Up-End: ok\r\n",
                &out,
            )
        })
    }

    fn accepts(&self) -> usize {
        self.accepts.load(SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

/// Splits an echoed body into the forwarded head and the forwarded request body.
fn echoed(body: &[u8]) -> (Head, Vec<u8>) {
    let end = find(body, b"\r\n\r\n").expect("echoed head");
    let raw = String::from_utf8(body[..end].to_vec()).unwrap();
    let mut lines = raw.split("\r\n");
    let line = lines.next().unwrap().to_string();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_string(), v.trim().to_string())
        })
        .collect();
    (Head { raw, line, headers }, body[end + 4..].to_vec())
}

/// A proxy server with `/up/` forwarded to `upstream` through `--proxy`.
fn proxy_to(model: Model, name: &str, upstream: &str) -> Server {
    Builder::new(model, name)
        .args(&["--proxy", &format!("/up/=http://{upstream}")])
        .start()
}

/// A proxy server whose config holds `[[proxy]] prefix = "/up/"` with `extra` keys.
fn proxy_config(model: Model, name: &str, upstream: &str, extra: &str) -> Server {
    Builder::new(model, name)
        .config(&format!(
            "[[proxy]]\nprefix = \"/up/\"\nupstream = \"http://{upstream}\"\n{extra}\n"
        ))
        .start()
}

/// An address on which nothing listens.
fn closed_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn forwarded_head_has_no_hop_by_hop_fields_and_gains_forwarding_fields(model: Model) {
    let up = Upstream::echo();
    let s = proxy_to(model, "proxy-headers", &up.addr.to_string());
    let r = s.send(
        b"GET /up/path?q=1&r=%20 HTTP/1.1\r\nHost: front.example:8080\r\n\
          Connection: keep-alive, X-Req-Hop\r\nX-Req-Hop: drop me\r\nKeep-Alive: 300\r\n\
          Proxy-Connection: keep-alive\r\nTE: trailers\r\nUpgrade: websocket\r\n\
          Proxy-Authorization: Basic c2VjcmV0\r\nX-Forwarded-For: 203.0.113.9\r\n\
          X-Forwarded-Proto: https\r\nX-Forwarded-Host: spoofed.example\r\n\
          Via: 1.0 client-proxy\r\nX-Custom: kept\r\nUser-Agent: weft-test\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let (fwd, body) = echoed(&r.body);
    assert!(body.is_empty());
    assert_eq!(fwd.line, "GET /up/path?q=1&r=%20 HTTP/1.1");
    assert_eq!(fwd.header("Host"), Some("front.example:8080"));
    assert_eq!(
        fwd.header("X-Forwarded-For"),
        Some("203.0.113.9, 127.0.0.1")
    );
    assert_eq!(fwd.header("X-Forwarded-Proto"), Some("http"));
    assert_eq!(fwd.header("X-Forwarded-Host"), Some("front.example:8080"));
    assert_eq!(fwd.header("Via"), Some("1.0 client-proxy, 1.1 weft"));
    assert_eq!(fwd.header("X-Custom"), Some("kept"));
    assert_eq!(fwd.header("User-Agent"), Some("weft-test"));
    for one in [
        "Host",
        "X-Forwarded-For",
        "X-Forwarded-Proto",
        "X-Forwarded-Host",
        "Via",
    ] {
        assert_eq!(fwd.count(one), 1, "{one} in {}", fwd.raw);
    }
    for hop in [
        "Connection",
        "X-Req-Hop",
        "Keep-Alive",
        "Proxy-Connection",
        "TE",
        "Upgrade",
        "Proxy-Authorization",
        "Transfer-Encoding",
        "Content-Length",
    ] {
        assert_eq!(fwd.count(hop), 0, "{hop} forwarded: {}", fwd.raw);
    }
    // And on the way back.
    assert_eq!(r.header("X-Up-End"), Some("ok"));
    assert_eq!(r.header("Via"), Some("1.1 origin, 1.1 weft"));
    for hop in ["X-Up-Hop", "Keep-Alive", "Proxy-Connection", "Upgrade"] {
        assert_eq!(r.header_count(hop), 0, "{hop} relayed: {r:?}");
    }
    assert_eq!(r.header_count("Content-Length"), 1);
}

fn host_upstream_mode_and_http10_client(model: Model) {
    let up = Upstream::echo();
    let s = proxy_config(
        model,
        "proxy-host",
        &up.addr.to_string(),
        "host = \"upstream\"",
    );
    let r = s.get("/up/x");
    let (fwd, _) = echoed(&r.body);
    assert_eq!(fwd.header("Host"), Some(up.addr.to_string().as_str()));
    assert_eq!(fwd.header("X-Forwarded-Host"), Some("test"));
    // An HTTP/1.0 client without Host: the upstream still gets HTTP/1.1 and a Host.
    let r = s.send(b"GET /up/old HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    let (fwd, _) = echoed(&r.body);
    assert_eq!(fwd.line, "GET /up/old HTTP/1.1");
    assert_eq!(fwd.header("Host"), Some(up.addr.to_string().as_str()));
    assert_eq!(fwd.header("Via"), Some("1.0 weft"));
    assert_eq!(fwd.count("X-Forwarded-Host"), 0);
}

fn post_bodies_go_upstream_with_exactly_one_framing_field(model: Model) {
    let up = Upstream::echo();
    let s = proxy_to(model, "proxy-post", &up.addr.to_string());
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();

    let mut req = format!(
        "POST /up/form HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        data.len()
    )
    .into_bytes();
    req.extend_from_slice(&data);
    let r = s.send(&req);
    assert_eq!(r.status, 200);
    let (fwd, body) = echoed(&r.body);
    assert_eq!(fwd.line, "POST /up/form HTTP/1.1");
    assert_eq!(
        fwd.header("Content-Length"),
        Some(data.len().to_string().as_str())
    );
    assert_eq!(fwd.count("Content-Length"), 1);
    assert_eq!(fwd.count("Transfer-Encoding"), 0);
    assert_eq!(fwd.header("Content-Type"), Some("application/octet-stream"));
    assert!(body == data, "Content-Length body changed on the way");

    // Chunked in, read whole (request_buffering, the default), sent with its length; Expect
    // answered by the proxy.
    let mut req = b"POST /up/chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
                    Expect: 100-continue\r\nConnection: close\r\n\r\n"
        .to_vec();
    req.extend_from_slice(&chunked(&data, 777));
    let mut c = s.connect();
    c.send(&req);
    let interim = c.read_response().expect("100 Continue");
    assert_eq!(interim.status, 100);
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 200);
    let (fwd, body) = echoed(&r.body);
    assert_eq!(
        fwd.header("Content-Length"),
        Some(data.len().to_string().as_str())
    );
    assert_eq!(fwd.count("Content-Length"), 1);
    assert_eq!(fwd.count("Transfer-Encoding"), 0);
    assert_eq!(fwd.count("Expect"), 0);
    assert!(body == data, "chunked body changed on the way");
    // Streamed (request_buffering = false): chunked in, chunked out, never both framings.
    let streaming = proxy_config(
        model,
        "proxy-post-stream",
        &up.addr.to_string(),
        "request_buffering = false",
    );
    let mut c = streaming.connect();
    c.send(&req);
    assert_eq!(c.read_response().expect("100 Continue").status, 100);
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 200);
    let (fwd, body) = echoed(&r.body);
    assert_eq!(fwd.header("Transfer-Encoding"), Some("chunked"));
    assert_eq!(fwd.count("Transfer-Encoding"), 1);
    assert_eq!(fwd.count("Content-Length"), 0);
    assert_eq!(fwd.count("Expect"), 0);
    assert!(body == data, "chunked body changed on the way");

    // An empty POST keeps its `Content-Length: 0`.
    let r = s.send(
        b"POST /up/empty HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    let (fwd, body) = echoed(&r.body);
    assert_eq!(fwd.header("Content-Length"), Some("0"));
    assert!(body.is_empty());

    // A request the parser finds ambiguous never reaches the upstream.
    let before = up.accepts();
    let r = s.send(
        b"POST /up/smuggle HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\
          Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    assert_eq!(up.accepts(), before);
}

fn chunked_and_close_delimited_responses_are_relayed(model: Model) {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let body = data.clone();
    let up = Upstream::start(move |c, head| {
        c.read_body_vec(head);
        if head.line.starts_with("GET /up/close") {
            let _ = c.write(b"HTTP/1.0 200 OK\r\nContent-Type: x/y\r\n\r\n");
            let _ = c.write(&body);
            return false;
        }
        let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        out.extend_from_slice(&chunked(&body, 10_000));
        c.write(&out)
    });
    let s = proxy_to(model, "proxy-chunked", &up.addr.to_string());
    let r = s.get("/up/chunked");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
    assert!(r.body == data, "chunked body changed on the way");
    let r = s.get("/up/close");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("x/y"));
    assert!(r.body == data, "close-delimited body changed on the way");
    // To an HTTP/1.0 client a body of unknown length ends with the connection.
    let r = s.send(b"GET /up/chunked HTTP/1.0\r\n\r\n");
    assert!(r.until_close, "{:?}", r.headers);
    assert!(r.body == data);
}

fn weft_upstream_serves_files_head_and_echo(model: Model) {
    let file: Vec<u8> = (0..100_000u32).map(|i| (i % 199) as u8).collect();
    let upstream = Builder::new(model, "proxy-weft-up")
        .file("up/file.bin", &file)
        .start();
    // The proxy's own echo is unmounted so that /echo goes to the upstream's.
    let s = Builder::new(model, "proxy-weft")
        .config(&format!(
            "[echo]\npath = \"\"\n[[proxy]]\nprefix = \"/up/\"\nupstream = \"http://{0}\"\n\
             [[proxy]]\nprefix = \"/echo\"\nupstream = \"http://{0}\"\n",
            upstream.addr
        ))
        .start();
    let mut c = s.connect();
    c.send(b"GET /up/file.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == file);
    assert_eq!(r.header("Via"), Some("1.1 weft"));
    c.send(b"HEAD /up/file.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Length"),
        Some(file.len().to_string().as_str())
    );
    c.send(b"GET /up/missing HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 404);
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: text/x\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    // The upstream's own headers come through (its echo never reflects the client's type).
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    let mut req = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(&chunked(&file[..50_000], 4096));
    c.send(&req);
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body == file[..50_000]);
    // Every request went over the same keep-alive client connection: so did the upstream's.
    c.send(b"GET /up/file.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(c.read_response().unwrap().body == file);
}

/// `python3` from `PATH`, or a usual place.
fn python3() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/usr/local/bin".into()])
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `python3 -m http.server` on a free port serving `dir`; its address.
fn python_http_server(py: &Path, dir: &Path) -> (Killed, SocketAddr) {
    let mut child = Command::new(py)
        .args([
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python3 -m http.server");
    let out = child.stdout.take().unwrap();
    let child = Killed(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = line
                .split_once(" port ")
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .and_then(|p| p.parse::<u16>().ok())
            {
                let _ = tx.send(port);
            }
        }
    });
    let port = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("http.server printed its port");
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

fn python_http_server_upstream(model: Model) {
    let Some(py) = python3() else {
        eprintln!("python3 not found: skipping the http.server upstream test");
        return;
    };
    let b = Builder::new(model, "proxy-python");
    let docs = b.dir().join("python-docs");
    std::fs::create_dir_all(docs.join("up")).unwrap();
    let file: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8 + 32).collect();
    std::fs::write(docs.join("up/data.txt"), &file).unwrap();
    let (_python, addr) = python_http_server(&py, &docs);
    let s = b.args(&["--proxy", &format!("/up/=http://{addr}")]).start();
    // http.server speaks HTTP/1.0 and closes after each response: each request below needs
    // a fresh upstream connection, over one client connection.
    let mut c = s.connect();
    for _ in 0..3 {
        c.send(b"GET /up/data.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body == file);
        assert_eq!(r.header("Via"), Some("1.0 weft"));
    }
    c.send(b"HEAD /up/data.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Length"),
        Some(file.len().to_string().as_str())
    );
    c.send(b"GET /up/missing.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 404);
    // http.server has no POST: its 501 comes back as it is.
    c.send(b"POST /up/data.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(c.read_response().unwrap().status, 501);
}

fn pooled_upstream_connections_are_reused(model: Model) {
    let up = Upstream::echo();
    let s = proxy_to(model, "proxy-pool", &up.addr.to_string());
    const N: usize = 20;
    let mut c = s.connect();
    for i in 0..N {
        c.send(format!("GET /up/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200);
        assert!(r.text().starts_with(&format!("GET /up/{i} HTTP/1.1")));
    }
    // The process model has one process, hence one pool, per client connection.
    if model.name != "process" {
        for i in 0..N {
            let r = s.get(&format!("/up/fresh{i}"));
            assert_eq!(r.status, 200);
        }
    }
    let accepts = up.accepts();
    assert!(
        accepts <= 2,
        "{accepts} upstream connections for sequential requests"
    );
}

fn upstream_that_closes_after_each_response_is_reconnected(model: Model) {
    // Keep-alive by the headers, closed right after: the pooled connection is dead when the
    // next request comes, which must still be answered.
    let up = Upstream::start(|c, head| {
        c.read_body_vec(head);
        c.ok("", head.line.as_bytes());
        false
    });
    let s = proxy_to(model, "proxy-reconnect", &up.addr.to_string());
    let mut c = s.connect();
    for i in 0..5 {
        c.send(format!("GET /up/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap();
        assert_eq!((r.status, r.text()), (200, format!("GET /up/{i} HTTP/1.1")));
        std::thread::sleep(Duration::from_millis(20));
    }
    c.send(b"POST /up/p HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "POST /up/p HTTP/1.1"));
    assert_eq!(up.accepts(), 6);
}

fn dead_pooled_connection_is_retried_only_for_idempotent_requests_without_body(model: Model) {
    // Each connection answers its first request and then drops the next one unanswered, as
    // an upstream closing an idle connection just when a request arrives would.
    let up = Upstream::start(|c, head| {
        c.read_body_vec(head);
        c.served == 0 && c.ok("", head.line.as_bytes())
    });
    let s = proxy_to(model, "proxy-retry", &up.addr.to_string());
    let mut c = s.connect();
    c.send(b"GET /up/a HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().unwrap().text(), "GET /up/a HTTP/1.1");
    // The pooled connection dies under this GET: sent again on a new one.
    c.send(b"GET /up/b HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, "GET /up/b HTTP/1.1"));
    assert_eq!(up.accepts(), 2);
    // A POST is never sent twice: 502.
    c.send(b"POST /up/c HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx");
    assert_eq!(c.read_response().unwrap().status, 502);
    assert_eq!(up.accepts(), 2);
}

fn upstream_that_never_completes_the_handshake_is_504(model: Model) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // SAFETY: listen(2) on a socket this test owns; it only shrinks the accept queue (to one
    // connection), so that once it is full the kernel drops further SYNs.
    let r = unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 0) };
    assert_eq!(r, 0);
    // Fill the queue (nobody accepts); later connects hang in the handshake.
    let fillers: Vec<TcpStream> = (0..4)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok())
        .collect();
    if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
        eprintln!("this kernel completes handshakes past a full accept queue: skipping");
        return;
    }
    let s = proxy_config(
        model,
        "proxy-connect-504",
        &addr.to_string(),
        "connect_timeout = \"300ms\"",
    );
    let r = s.get("/up/x");
    assert_eq!(r.status, 504);
    assert!(s.log().contains("connecting"), "{}", s.log());
    drop(fillers);
}

fn unreachable_or_malformed_upstream_is_502(model: Model) {
    let s = proxy_to(model, "proxy-502", &closed_addr().to_string());
    let r = s.get("/up/x");
    assert_eq!(r.status, 502);
    s.assert_alive();

    for bad in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
        b"I am not HTTP\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Len",
        b"",
    ] {
        let up = Upstream::start(move |c, _| {
            let _ = c.write(bad);
            false
        });
        let s = proxy_to(model, "proxy-bad-upstream", &up.addr.to_string());
        let r = s.get("/up/x");
        assert_eq!(r.status, 502, "{:?}", String::from_utf8_lossy(bad));
    }
}

fn silent_upstream_is_504(model: Model) {
    let up = Upstream::start(|c, _| {
        c.hold();
        false
    });
    let s = proxy_config(
        model,
        "proxy-504",
        &up.addr.to_string(),
        "read_timeout = \"300ms\"",
    );
    let r = s.get("/up/slow");
    assert_eq!(r.status, 504);
    assert!(s.log().contains("no response within"), "{}", s.log());
    s.assert_alive();
}

fn fallback_forwards_what_is_not_a_file(model: Model) {
    let up = Upstream::echo();
    let s = Builder::new(model, "proxy-fallback")
        .file("static.txt", b"static\n")
        .args(&["--proxy", &format!("*=http://{}", up.addr)])
        .start();
    s.assert_alive();
    assert_eq!(s.get("/static.txt").body, b"static\n");
    let r = s.get("/app/page?x=1");
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("GET /app/page?x=1 HTTP/1.1"));
    let r = s.send(
        b"POST /static.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    );
    let (fwd, body) = echoed(&r.body);
    assert_eq!(
        (fwd.line.as_str(), body.as_slice()),
        ("POST /static.txt HTTP/1.1", &b"ok"[..])
    );
    let r = s.send(b"PURGE /cache HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(r.text().starts_with("PURGE /cache HTTP/1.1"));
}

/// TRACE is answered 405 by the proxy, as nginx does, and never reaches the upstream: an
/// upstream that answers it would echo the request back with the credentials a browser
/// attached to it (cross-site tracing). Both forms of mount: a prefix and the fallback.
fn trace_is_refused_and_not_forwarded(model: Model) {
    let up = Upstream::echo();
    let s = Builder::new(model, "proxy-trace")
        .args(&["--proxy", &format!("/up/=http://{}", up.addr)])
        .args(&["--proxy", &format!("*=http://{}", up.addr)])
        .start();
    for target in ["/up/x", "/elsewhere"] {
        let r = s.send(
            format!(
                "TRACE {target} HTTP/1.1\r\nHost: t\r\nCookie: session=secret\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert_eq!(r.status, 405, "{target}: {r:?}");
        assert!(!r.text().contains("secret"), "{target}: echoed: {r:?}");
    }
    // Other methods still go through, on the same mounts.
    let r = s.send(b"OPTIONS /up/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(r.text().starts_with("OPTIONS /up/x HTTP/1.1"), "{r:?}");
    assert_eq!(up.accepts(), 1, "only the OPTIONS reached the upstream");
    assert!(s.log().contains("TRACE is not forwarded"), "{}", s.log());
}

/// Field names with `_` never reach the upstream by default (nginx's `underscores_in_headers
/// off`): the probe's `Transfer_Encoding: chunked` and `Content_Length: 41`, which an upstream
/// that reads `_` as `-` would frame the request by (smuggling a second request in the body),
/// and `X_Forwarded_For`, which it would take for the address a proxy in front set. The
/// request itself goes through with its own framing; `underscores_in_headers = true` keeps
/// such fields.
fn header_names_with_underscores_are_not_forwarded_unless_allowed(model: Model) {
    let up = Upstream::echo();
    let probe = b"POST /up/x HTTP/1.1\r\nHost: u\r\nContent-Length: 5\r\n\
                  Transfer_Encoding: chunked\r\nContent_Length: 41\r\n\
                  X_Forwarded_For: 198.51.100.7\r\nX-Kept: yes\r\nConnection: close\r\n\r\n\
                  hello";
    let s = proxy_to(model, "proxy-underscores", &up.addr.to_string());
    let r = s.send(probe);
    assert_eq!(r.status, 200, "{r:?}");
    let (fwd, body) = echoed(&r.body);
    assert_eq!(body, b"hello");
    for name in ["Transfer_Encoding", "Content_Length", "X_Forwarded_For"] {
        assert_eq!(fwd.header(name), None, "{name} went upstream:\n{}", fwd.raw);
    }
    assert!(!fwd.raw.contains("198.51.100.7"), "{}", fwd.raw);
    assert_eq!(fwd.header("Content-Length"), Some("5"));
    assert_eq!(fwd.header("X-Kept"), Some("yes"));
    drop(s);
    let s = proxy_config(
        model,
        "proxy-underscores-kept",
        &up.addr.to_string(),
        "underscores_in_headers = true",
    );
    let r = s.send(probe);
    assert_eq!(r.status, 200, "{r:?}");
    let (fwd, _) = echoed(&r.body);
    assert_eq!(
        fwd.header("X_Forwarded_For"),
        Some("198.51.100.7"),
        "{}",
        fwd.raw
    );
    assert_eq!(fwd.header("Content-Length"), Some("5"));
}

/// `get` is not GET (RFC 9110 §9.1): weft answers it 501 when it serves the request itself,
/// and the proxy refuses it the same way instead of forwarding it to an upstream that might
/// fold its case, on a prefix mount and on the fallback. Extension methods still go through.
fn a_method_in_other_letter_case_is_refused_as_when_served_directly(model: Model) {
    let up = Upstream::echo();
    let direct = Builder::new(model, "miscased-direct").start();
    let r = direct.send(b"get / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 501, "served directly: {r:?}");
    drop(direct);
    let s = Builder::new(model, "proxy-miscased")
        .args(&["--proxy", &format!("/up/=http://{}", up.addr)])
        .args(&["--proxy", &format!("*=http://{}", up.addr)])
        .start();
    for (method, target) in [
        ("get", "/up/x"),
        ("Post", "/up/x"),
        ("delete", "/elsewhere"),
    ] {
        let r = s.send(
            format!("{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(r.status, 501, "{method} {target}: {r:?}");
    }
    assert_eq!(up.accepts(), 0, "a miscased method reached the upstream");
    let r = s.send(b"PURGE /up/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(r.text().starts_with("PURGE /up/x HTTP/1.1"), "{r:?}");
    assert!(s.log().contains("other letter case"), "{}", s.log());
}

/// Preconditions belong to the origin server (RFC 9110 §13.2.1): a proxied request reaches the
/// upstream with its precondition fields as sent and weft evaluates none of them, while a file
/// weft serves itself answers them (412 here).
fn preconditions_are_forwarded_for_the_upstream_to_evaluate(model: Model) {
    let up = Upstream::echo();
    let s = Builder::new(model, "proxy-preconditions")
        .file("static.txt", b"static\n")
        .args(&["--proxy", &format!("*=http://{}", up.addr)])
        .start();
    let conds = "If-Match: \"nope\"\r\nIf-None-Match: *\r\n\
                 If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n";
    for (method, path) in [
        ("PUT", "/static.txt"),
        ("DELETE", "/static.txt"),
        ("GET", "/app"),
    ] {
        let r = s.send(
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{conds}Content-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(r.status, 200, "{method} {path}: {r:?}");
        let (fwd, _) = echoed(&r.body);
        assert_eq!(fwd.line, format!("{method} {path} HTTP/1.1"));
        assert_eq!(fwd.header("If-Match"), Some("\"nope\""));
        assert_eq!(fwd.header("If-None-Match"), Some("*"));
        assert_eq!(
            fwd.header("If-Unmodified-Since"),
            Some("Thu, 01 Jan 1970 00:00:00 GMT")
        );
    }
    let r = s.send(
        format!("GET /static.txt HTTP/1.1\r\nHost: t\r\n{conds}Connection: close\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(r.status, 412, "{r:?}");
}

fn dot_segments_cannot_leave_a_prefix(model: Model) {
    let up = Upstream::echo();
    let s = proxy_to(model, "proxy-dots", &up.addr.to_string());
    for path in ["/up/../index.html", "/up/%2e%2e/index.html"] {
        let r = s.get(path);
        // Served (or refused) locally: `/index.html` is not under `/up/`.
        assert!(
            !r.text().contains("HTTP/1.1\r\n"),
            "{path} forwarded: {r:?}"
        );
    }
    assert_eq!(up.accepts(), 0);
}

/// `VmHWM` (peak resident memory) of `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmHWM")
}

/// The process serving the test's one open connection: the server itself, or on the process
/// model its connection process (a child of the master, itself the server's child).
fn serving_pid(s: &Server) -> u32 {
    if s.model.name != "process" {
        return s.pid();
    }
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if parent_of(pid).and_then(parent_of) == Some(s.pid()) {
            found.push(pid);
        }
    }
    assert_eq!(found.len(), 1, "connection processes: {found:?}");
    found[0]
}

const HUNDRED_MB: u64 = 100 * 1024 * 1024;
/// "A few MB": the most the serving process's peak memory may grow while 100 MB go through.
const MAX_GROWTH_KIB: u64 = 8 * 1024;

/// Reads a response whose body is `Content-Length` bytes, counting (not keeping) the body;
/// returns (status, body bytes, sum of the body bytes).
fn read_counted(c: &mut Conn) -> (u16, u64, u64) {
    let stream = &mut c.stream;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).expect("head"), 1, "closed in head");
        head.push(byte[0]);
    }
    let text = String::from_utf8(head).unwrap();
    let status: u16 = text[9..12].parse().unwrap();
    let len: u64 = text
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        })
        .map(|(_, v)| v.trim().parse().unwrap())
        .expect("Content-Length");
    let (mut got, mut sum) = (0u64, 0u64);
    let mut buf = vec![0u8; 256 * 1024];
    let deadline = Instant::now() + Duration::from_secs(120);
    while got < len {
        assert!(Instant::now() < deadline, "body too slow: {got} of {len}");
        let want = usize::try_from(len - got)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = stream.read(&mut buf[..want]).expect("body");
        assert!(n > 0, "closed after {got} of {len} bytes");
        sum += buf[..n].iter().map(|&b| u64::from(b)).sum::<u64>();
        got += n as u64;
    }
    (status, got, sum)
}

/// The body of the download test: byte i is `i % 251`.
fn pattern_sum(len: u64) -> u64 {
    let full = len / 251;
    full * (0..251u64).sum::<u64>() + (0..len % 251).sum::<u64>()
}

fn hundred_megabytes_download_streams_through(model: Model) {
    let up = Upstream::start(|c, head| {
        c.read_body_vec(head);
        let len: u64 = head
            .line
            .split_whitespace()
            .nth(1)
            .and_then(|t| t.rsplit('/').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if !c.write(format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n").as_bytes()) {
            return false;
        }
        let block: Vec<u8> = (0..251 * 256).map(|i| (i % 251) as u8).collect();
        let mut left = len;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(block.len());
            if !c.write(&block[..n]) {
                return false;
            }
            left -= n as u64;
        }
        true
    });
    // The process model's child must keep the connection for the measurement: with write
    // completion on, a reader that stalls 20 ms (a loaded machine) gets the rest of the
    // warm-up megabyte from the master, the child exits, and the next request gets another.
    let s = proxy_config(
        model,
        "proxy-download",
        &up.addr.to_string(),
        "[process]\nwrite_completion = false",
    );
    let mut c = s.connect();
    // A first megabyte warms the connection's buffers up before the measurement.
    c.send(b"GET /up/1048576 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(read_counted(&mut c), (200, 1 << 20, pattern_sum(1 << 20)));
    let pid = serving_pid(&s);
    let before = peak_rss_kib(pid);
    c.send(format!("GET /up/{HUNDRED_MB} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    assert_eq!(
        read_counted(&mut c),
        (200, HUNDRED_MB, pattern_sum(HUNDRED_MB))
    );
    let after = peak_rss_kib(pid);
    eprintln!("100 MB download through the proxy: peak RSS {before} KiB before, {after} KiB after");
    assert!(
        after.saturating_sub(before) <= MAX_GROWTH_KIB,
        "peak RSS grew from {before} KiB to {after} KiB for a 100 MB download"
    );
}

fn hundred_megabytes_upload_streams_through(model: Model) {
    let up = Upstream::start(|c, head| {
        let mut sum = 0u64;
        let n = c.read_body(head, &mut |b| {
            sum += b.iter().map(|&x| u64::from(x)).sum::<u64>();
        });
        c.ok("", format!("{n} {sum}").as_bytes())
    });
    let s = proxy_config(
        model,
        "proxy-upload",
        &up.addr.to_string(),
        // Streamed, not buffered (request_buffering would hold all of it in memory).
        &format!(
            "request_buffering = false\n[limits]\nmax_body = {}",
            2 * HUNDRED_MB
        ),
    );
    let block: Vec<u8> = (0..251 * 256).map(|i| (i % 251) as u8).collect();
    let mut c = s.connect();
    let upload = |c: &mut Conn, len: u64| -> String {
        c.send(
            format!("POST /up/upload HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n")
                .as_bytes(),
        );
        let mut left = len;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(block.len());
            c.send(&block[..n]);
            left -= n as u64;
        }
        let r = c.read_response().expect("upload response");
        assert_eq!(r.status, 200, "{r:?}");
        r.text()
    };
    assert_eq!(
        upload(&mut c, 1 << 20),
        format!("{} {}", 1 << 20, pattern_sum(1 << 20))
    );
    let pid = serving_pid(&s);
    let before = peak_rss_kib(pid);
    assert_eq!(
        upload(&mut c, HUNDRED_MB),
        format!("{HUNDRED_MB} {}", pattern_sum(HUNDRED_MB))
    );
    let after = peak_rss_kib(pid);
    eprintln!("100 MB upload through the proxy: peak RSS {before} KiB before, {after} KiB after");
    assert!(
        after.saturating_sub(before) <= MAX_GROWTH_KIB,
        "peak RSS grew from {before} KiB to {after} KiB for a 100 MB upload"
    );
}

fn an_absolute_form_authority_replaces_host_upstream(model: Model) {
    // RFC 9112 §3.2.2: `GET http://other/x` with `Host: a` is a request for `other`.
    let up = Upstream::echo();
    let s = proxy_to(model, "proxy-absolute", &up.addr.to_string());
    let r = s.send(
        b"GET http://other.example:8080/up/x?q=1 HTTP/1.1\r\nHost: a.example\r\n\
          Connection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let (fwd, _) = echoed(&r.body);
    assert_eq!(fwd.line, "GET /up/x?q=1 HTTP/1.1");
    assert_eq!(fwd.header("Host"), Some("other.example:8080"));
    assert_eq!(fwd.count("Host"), 1);
    assert_eq!(fwd.header("X-Forwarded-Host"), Some("other.example:8080"));
    // host = "upstream": the upstream's authority goes as Host, the request's host as
    // X-Forwarded-Host.
    let s = proxy_config(
        model,
        "proxy-absolute-up",
        &up.addr.to_string(),
        "host = \"upstream\"",
    );
    let r = s.send(
        b"GET http://other.example/up/y HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
    );
    let (fwd, _) = echoed(&r.body);
    assert_eq!(fwd.header("Host"), Some(up.addr.to_string().as_str()));
    assert_eq!(fwd.header("X-Forwarded-Host"), Some("other.example"));
    // Still required in HTTP/1.1 beside an absolute-form target (RFC 9112 §3.2).
    let before = up.accepts();
    let r = s.send(b"GET http://other.example/up/z HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 400);
    assert_eq!(up.accepts(), before);
}

fn request_buffering_keeps_bad_bodies_from_the_upstream(model: Model) {
    let up = Upstream::echo();
    let s = proxy_config(
        model,
        "proxy-buffering",
        &up.addr.to_string(),
        "[limits]\nmax_body = 1000\n[timeouts]\nmin_rate_grace = \"1s\"\nbody_min_rate = 100\n",
    );
    // Good bodies go through, chunked ones with their length (nginx does the same).
    let mut req = b"POST /up/ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
                    Connection: close\r\n\r\n"
        .to_vec();
    req.extend_from_slice(&chunked(b"hello, upstream", 4));
    let r = s.send(&req);
    assert_eq!(r.status, 200);
    let (fwd, body) = echoed(&r.body);
    assert_eq!(fwd.header("Content-Length"), Some("15"));
    assert_eq!(fwd.count("Transfer-Encoding"), 0);
    assert_eq!(body, b"hello, upstream");

    let before = up.accepts();
    // Broken chunked framing after a good chunk: 400, and nothing went upstream.
    let r = s.send(
        b"POST /up/bad HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nabcde\r\nzz\r\n",
    );
    assert_eq!(r.status, 400);
    // A chunked body over limits.max_body: 413.
    let mut req =
        b"POST /up/big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(&chunked(&[b'x'; 1500], 500));
    let r = s.send(&req);
    assert_eq!(r.status, 413);
    // A body that stops coming: 408 from the minimum rate.
    let mut c = s.connect();
    c.send(b"POST /up/slow HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\nabc");
    let r = c.read_response().expect("408 for the slow body");
    assert_eq!(r.status, 408);
    assert_eq!(up.accepts(), before, "a bad request reached the upstream");
    let log = s.log();
    assert!(log.contains("nothing went upstream"), "{log}");
}

/// An idle pooled upstream connection is closed once `idle_timeout` has passed, whether or not
/// another request comes (as nginx's upstream `keepalive_timeout`), so the upstream is not left
/// holding it, nor the proxy a connection the upstream closed.
fn idle_pooled_connections_close_on_time_without_another_request(model: Model) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // One request, answered keep-alive.
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                s.read(&mut b).unwrap(),
                1,
                "the proxy closed before its request"
            );
            head.push(b[0]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        let answered = Instant::now();
        // Then nothing: the proxy's close (EOF) or the read timeout ends this.
        let end = s.read(&mut b);
        let _ = tx.send((end.map_err(|e| e.kind()), answered.elapsed()));
    });
    let s = proxy_config(
        model,
        "proxy-idle-close",
        &addr.to_string(),
        "idle_timeout = \"1s\"",
    );
    let r = s.get("/up/x");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    let (end, after) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(end, Ok(0), "not closed by the proxy (after {after:?})");
    // A process-model connection process takes its pool with it when its client leaves.
    let kept = model.name != "process";
    assert!(
        (!kept || after >= Duration::from_millis(900)) && after < Duration::from_secs(8),
        "closed {after:?} after the answer (idle_timeout 1 s)"
    );
}

/// An upstream that ends a response early: the client's body is cut (never presented as
/// whole) and the access log has the body bytes that went out, as nginx's.
fn a_response_the_upstream_cuts_is_logged_with_the_bytes_sent(model: Model) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).unwrap_or(0) == 0 {
                return;
            }
            head.push(b[0]);
        }
        // 100,000 promised, 30,000 sent, then the connection ends.
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
        let _ = s.write_all(&[b'x'; 30_000]);
    });
    let b = Builder::new(model, "proxy-cut-log");
    let log = b.dir().join("access.log");
    let mut srv = b
        .config(&format!(
            "[[proxy]]\nprefix = \"/up/\"\nupstream = \"http://{addr}\"\n"
        ))
        .args(&["--access-log", log.to_str().unwrap()])
        .start();
    let stream = TcpStream::connect(srv.addr).unwrap();
    let client = stream.local_addr().unwrap();
    let mut c = Conn::from_stream(stream);
    c.send(b"GET /up/cut HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(
        c.read_response().is_err(),
        "a cut body must not read as a whole response"
    );
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("\"GET /up/cut HTTP/1.1\" 200 30000 "),
        "{text}\n{}",
        srv.log()
    );
    // The warning names the client whose response was cut, as every other line of a request.
    let warn = format!("{client}: proxy http://{addr}: response body cut");
    assert!(srv.log().contains(&warn), "no {warn:?} in\n{}", srv.log());
}
