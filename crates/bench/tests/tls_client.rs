//! `weft-bench load` on `https://` URLs against a rustls server in this test process: the
//! handshakes the server completed match the connections the client reports (one per
//! connection with keep-alive, one per request without), resumption only when asked, and a
//! certificate the client cannot trust is one clear error. Counts and messages only, no
//! timing.

mod tls;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::Ordering;

use serde_json::Value;

use tls::{Cert, TlsServer, BODY};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-bench-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `load --json ARGS` and returns its report; panics with stderr when it fails.
fn load_json(args: &[&str]) -> Value {
    let mut all = vec!["load", "--json", "--timeout", "20s"];
    all.extend_from_slice(args);
    let out = bench(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn failure(args: &[&str]) -> String {
    let mut all = vec!["load", "-n", "2", "-c", "1", "--timeout", "20s"];
    all.extend_from_slice(args);
    let out = bench(&all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "expected a failure: {err}");
    err
}

#[test]
fn keep_alive_runs_one_handshake_per_connection_and_close_one_per_request() {
    let d = dir("counts");
    let cert = Cert::new(&d, "server", &["localhost", "127.0.0.1"]);
    let server = TlsServer::start(&cert);
    let ca = cert.cert_pem.to_str().unwrap();
    let url = server.url("127.0.0.1", "/page");

    let r = load_json(&["-n", "30", "-c", "3", "--cacert", ca, &url]);
    assert_eq!(r["requests"], 30);
    assert_eq!(r["statuses"]["2xx"], 30);
    assert_eq!(r["body_bytes"], 30 * BODY.len() as u64);
    assert_eq!(r["connects"], 3, "{r}");
    // The client's pre-run check is one more handshake.
    assert_eq!(server.handshakes.load(Ordering::SeqCst), 3 + 1);

    let r = load_json(&[
        "-n",
        "20",
        "-c",
        "2",
        "--no-keepalive",
        "--cacert",
        ca,
        &url,
    ]);
    assert_eq!(r["statuses"]["2xx"], 20);
    assert_eq!(r["connects"], 20, "{r}");
    assert_eq!(server.handshakes.load(Ordering::SeqCst), 4 + 1 + 20);
    // Every one a full handshake: resumption is off unless asked for.
    assert_eq!(server.resumed.load(Ordering::SeqCst), 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tls_resume_resumes_sessions_on_new_connections() {
    let d = dir("resume");
    let cert = Cert::new(&d, "server", &["localhost"]);
    let server = TlsServer::start(&cert);
    let ca = cert.cert_pem.to_str().unwrap();
    let url = server.url("localhost", "/");
    let r = load_json(&[
        "-n",
        "20",
        "-c",
        "1",
        "--no-keepalive",
        "--tls-resume",
        "--cacert",
        ca,
        &url,
    ]);
    assert_eq!(r["statuses"]["2xx"], 20);
    assert_eq!(r["connects"], 20);
    let (all, resumed) = (
        server.handshakes.load(Ordering::SeqCst),
        server.resumed.load(Ordering::SeqCst),
    );
    assert_eq!(all, 21);
    // The check's and the first connection's handshakes are full; the run's later
    // connections resume from the tickets the earlier ones received.
    assert!((1..=19).contains(&resumed), "{resumed} of {all}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_untrusted_certificate_is_one_clear_error_and_insecure_accepts_it() {
    let d = dir("verify");
    let cert = Cert::new(&d, "server", &["localhost"]);
    let other = Cert::new(&d, "other", &["localhost"]);
    let server = TlsServer::start(&cert);
    let url = server.url("localhost", "/");

    // The system's CAs do not know a self-signed certificate.
    let err = failure(&[&url]);
    assert!(err.contains("TLS handshake failed"), "{err}");
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(
        err.contains("--cacert") && err.contains("--insecure"),
        "{err}"
    );
    assert!(err.contains(&url), "{err}");

    // Another certificate as the CA: refused, the advice names --cacert.
    let err = failure(&["--cacert", other.cert_pem.to_str().unwrap(), &url]);
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(err.contains("does not chain to --cacert"), "{err}");

    // The right CA but a name the certificate does not carry.
    let ip_url = server.url("127.0.0.1", "/");
    let err = failure(&["--cacert", cert.cert_pem.to_str().unwrap(), &ip_url]);
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(err.to_lowercase().contains("name"), "{err}");

    // A --cacert file that holds no certificate.
    let junk = d.join("junk.pem");
    std::fs::write(&junk, "junk").unwrap();
    let err = failure(&["--cacert", junk.to_str().unwrap(), &url]);
    assert!(err.contains("no PEM certificate"), "{err}");

    // --insecure: the same server, every request answered.
    let before = server.handshakes.load(Ordering::SeqCst);
    let r = load_json(&["-n", "5", "-c", "1", "-k", &url]);
    assert_eq!(r["statuses"]["2xx"], 5);
    assert_eq!(server.handshakes.load(Ordering::SeqCst), before + 2);
    // And the options do not go together.
    let out = bench(&["load", "-k", "--cacert", "x", &url]);
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn groups_take_https_urls_too() {
    let d = dir("groups");
    let cert = Cert::new(&d, "server", &["127.0.0.1"]);
    let server = TlsServer::start(&cert);
    let url = server.url("127.0.0.1", "/");
    let out = bench(&[
        "groups",
        "--json",
        "--clients",
        "1",
        "--groups",
        "2",
        "--concurrency",
        "3",
        "--cacert",
        cert.cert_pem.to_str().unwrap(),
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["statuses"]["2xx"], 6, "{r}");
    // A fresh connection per request, plus the check's.
    assert_eq!(server.handshakes.load(Ordering::SeqCst), 7);
    let _ = std::fs::remove_dir_all(&d);
}

/// `weft-bench tls-shim` towards `server`, on a free port; killed on drop.
struct Shim {
    child: std::process::Child,
    addr: String,
}

impl Shim {
    fn start(server: &TlsServer, extra: &[&str]) -> Shim {
        use std::io::BufRead;
        let connect = format!("127.0.0.1:{}", server.addr.port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
            .args(["tls-shim", "--listen", "127.0.0.1:0", "--connect", &connect])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "weft-bench tls-shim: plain tcp://127.0.0.1:PORT -> TLS ..."
        let addr = line
            .split("tcp://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        Shim { child, addr }
    }

    /// Sends `request`, half-closes, and reads until the shim closes.
    fn exchange(&self, request: &[u8]) -> Vec<u8> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        s.write_all(request).unwrap();
        let mut got = Vec::new();
        // The read ends when the shim passes the server's close on (or on the timeout, which
        // fails the comparisons below).
        let _ = s.read_to_end(&mut got);
        got
    }

    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

#[test]
fn the_tls_shim_forwards_plain_bytes_through_tls_both_ways() {
    let d = dir("shim");
    let cert = Cert::new(&d, "server", &["127.0.0.1"]);
    let server = TlsServer::start(&cert);
    let shim = Shim::start(&server, &["--cacert", cert.cert_pem.to_str().unwrap()]);
    // Two pipelined requests in one write, the second asking to close.
    let a = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    let b = b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let both = [&a[..], &b[..]].concat();
    let got = shim.exchange(&both);
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert_eq!(
        text.matches(std::str::from_utf8(BODY).unwrap()).count(),
        2,
        "{text}"
    );
    assert!(text.ends_with(std::str::from_utf8(BODY).unwrap()), "{text}");
    // The server saw exactly the bytes the client sent, in order.
    assert_eq!(*server.requests.lock().unwrap(), both);
    assert_eq!(server.handshakes.load(Ordering::SeqCst), 1);
    let err = shim.stop();
    assert!(!err.contains("tls-shim:"), "{err}");

    // A server certificate the shim does not trust: the client's connection closes with no
    // bytes, and the shim says why.
    let other = Cert::new(&d, "other", &["127.0.0.1"]);
    let shim = Shim::start(&server, &["--cacert", other.cert_pem.to_str().unwrap()]);
    assert_eq!(shim.exchange(a), b"");
    let err = shim.stop();
    assert!(err.contains("invalid peer certificate"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
