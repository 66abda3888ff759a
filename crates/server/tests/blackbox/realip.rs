//! The client's real address behind a load balancer: a `proxy_protocol` listener takes the
//! address from the PROXY header (v1 text, v2 binary) and closes a connection without one;
//! `real_ip_from` trusts `X-Forwarded-For` from the listed proxies. The access log,
//! `status.allow`, CGI's `REMOTE_ADDR` and the reverse proxy's `X-Forwarded-For` all see the
//! real address.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::{Builder, Conn, Model, ReadError, Server};

per_model! {
    except fiber_nocache:
    proxy_protocol_v1_address_reaches_cgi_status_allow_and_the_access_log,
    proxy_protocol_v2_ipv4_ipv6_and_local,
    a_connection_without_or_with_a_bad_proxy_header_is_closed_and_logged,
    a_proxy_header_that_never_completes_times_out,
    real_ip_from_trusts_the_rightmost_untrusted_forwarded_address,
    an_untrusted_peer_cannot_forge_its_address,
    the_reverse_proxy_forwards_the_real_address,
}

/// Prints the client address variables.
const ADDR_SH: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
                       echo \"$REMOTE_ADDR $REMOTE_PORT\"\n";

/// A server with `/cgi-bin/addr.sh`, the status pages and an access log, started with `args`.
fn start(model: Model, name: &str, args: &[&str]) -> (Server, PathBuf) {
    let b = Builder::new(model, name);
    let cgi = b.dir().join("cgi");
    fs::create_dir_all(&cgi).unwrap();
    let script = cgi.join("addr.sh");
    fs::write(&script, ADDR_SH).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let log = b.dir().join("access.log");
    let mut all = vec![
        "--cgi",
        cgi.to_str().unwrap(),
        "--status",
        "--access-log",
        log.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let all: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    let all: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
    (b.args(&all).start(), log)
}

/// Sends `raw` on a new connection; the response.
fn exchange(srv: &Server, raw: &[u8]) -> Result<crate::common::Response, ReadError> {
    let mut c = Conn::connect(srv.addr);
    c.send(raw);
    c.read_response()
}

/// Waits (bounded) until the access log holds a line starting with `prefix`.
fn logged(log: &std::path::Path, prefix: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        let text = fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|l| l.starts_with(prefix)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits (bounded) until the server's error log contains `text`.
fn error_logged(srv: &Server, text: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if srv.log().contains(text) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn v2(fam: u8, cmd: u8, body: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.push(0x20 | cmd);
    h.push(fam);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(body);
    h
}

fn proxy_protocol_v1_address_reaches_cgi_status_allow_and_the_access_log(model: Model) {
    let (srv, log) = start(model, "pp-v1", &["--proxy-protocol"]);
    let r = exchange(
        &srv,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 80\r\n\
          GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text().trim(), "203.0.113.7 4242");
    assert!(
        logged(&log, "203.0.113.7 - - ["),
        "{}",
        fs::read_to_string(&log).unwrap_or_default()
    );
    // status.allow (loopback only) judges the real client, not the balancer's address.
    let r = exchange(
        &srv,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 80\r\nGET /_weft/status.json HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.status, 403, "{r:?}");
    let r = exchange(
        &srv,
        b"PROXY TCP4 127.0.0.1 127.0.0.1 4242 80\r\nGET /_weft/status.json HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.status, 200, "{r:?}");
    // Keep-alive: the header comes once; the next request on the connection is plain.
    let mut c = Conn::connect(srv.addr);
    c.send(
        b"PROXY TCP6 2001:db8::9 ::1 5555 80\r\nGET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(
        c.read_response().expect("first").text().trim(),
        "2001:db8::9 5555"
    );
    c.send(b"GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(
        c.read_response().expect("second").text().trim(),
        "2001:db8::9 5555"
    );
}

fn proxy_protocol_v2_ipv4_ipv6_and_local(model: Model) {
    let (srv, _log) = start(model, "pp-v2", &["--proxy-protocol"]);
    let get = b"GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let mut raw = v2(
        0x11,
        1,
        &[198, 51, 100, 20, 127, 0, 0, 1, 0x1f, 0x90, 0, 80],
    );
    raw.extend_from_slice(get);
    assert_eq!(
        exchange(&srv, &raw).expect("v4").text().trim(),
        "198.51.100.20 8080"
    );
    let mut body = [0u8; 36];
    body[0] = 0x20;
    body[1] = 0x01;
    body[15] = 7;
    body[31] = 1;
    body[32..34].copy_from_slice(&1234u16.to_be_bytes());
    body[34..36].copy_from_slice(&80u16.to_be_bytes());
    let mut raw = v2(0x21, 1, &body);
    raw.extend_from_slice(get);
    assert_eq!(
        exchange(&srv, &raw).expect("v6").text().trim(),
        "2001::7 1234"
    );
    // LOCAL (the balancer's own health check): the connection's address stands.
    let mut raw = v2(0x00, 0, &[]);
    raw.extend_from_slice(get);
    let r = exchange(&srv, &raw).expect("local");
    assert!(r.text().starts_with("127.0.0.1 "), "{r:?}");
}

fn a_connection_without_or_with_a_bad_proxy_header_is_closed_and_logged(model: Model) {
    let (srv, _log) = start(model, "pp-bad", &["--proxy-protocol"]);
    let r = exchange(&srv, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(matches!(r, Err(ReadError::Closed)), "{r:?}");
    assert!(
        error_logged(&srv, "no PROXY protocol header; connection closed"),
        "{}",
        srv.log()
    );
    let r = exchange(
        &srv,
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\nGET / HTTP/1.1\r\n\r\n",
    );
    assert!(matches!(r, Err(ReadError::Closed)), "{r:?}");
    assert!(
        error_logged(&srv, "malformed PROXY v1 header; connection closed"),
        "{}",
        srv.log()
    );
    // The listener serves on.
    let r = exchange(
        &srv,
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 80\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.status, 200);
}

fn a_proxy_header_that_never_completes_times_out(model: Model) {
    let b = Builder::new(model, "pp-timeout").config("[timeouts]\nheader_read = \"300ms\"\n");
    let srv = b.args(&["--proxy-protocol"]).start();
    let mut c = Conn::connect(srv.addr);
    c.send(b"PROXY TCP4 1.2.3.4");
    assert!(matches!(c.read_response(), Err(ReadError::Closed)));
    assert!(error_logged(&srv, "no PROXY header"), "{}", srv.log());
}

fn real_ip_from_trusts_the_rightmost_untrusted_forwarded_address(model: Model) {
    let (srv, log) = start(
        model,
        "realip-xff",
        &["--real-ip-from", "127.0.0.0/8,10.0.0.0/8"],
    );
    let r = exchange(
        &srv,
        b"GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
          X-Forwarded-For: 6.6.6.6, 198.51.100.4, 10.1.2.3\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.text().trim(), "198.51.100.4 0");
    assert!(logged(&log, "198.51.100.4 - - ["));
    let r = exchange(
        &srv,
        b"GET /_weft/status.json HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.4\r\n\r\n",
    )
    .expect("response");
    assert_eq!(r.status, 403, "{r:?}");
    // Without the header the peer itself is the client.
    let r = exchange(
        &srv,
        b"GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .expect("response");
    assert!(r.text().starts_with("127.0.0.1 "), "{r:?}");
}

fn an_untrusted_peer_cannot_forge_its_address(model: Model) {
    let (srv, _log) = start(model, "realip-untrusted", &["--real-ip-from", "10.0.0.0/8"]);
    let r = exchange(
        &srv,
        b"GET /cgi-bin/addr.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
          X-Forwarded-For: 198.51.100.4\r\n\r\n",
    )
    .expect("response");
    assert!(r.text().starts_with("127.0.0.1 "), "{r:?}");
}

fn the_reverse_proxy_forwards_the_real_address(model: Model) {
    // An upstream that answers its one request with the head it received.
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_addr = up.local_addr().unwrap();
    let upstream = std::thread::spawn(move || {
        let (mut s, _) = up.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "upstream: closed early");
            head.extend_from_slice(&buf[..n]);
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            head.len()
        );
        s.write_all(resp.as_bytes()).unwrap();
        s.write_all(&head).unwrap();
    });
    let proxy = format!("/up=http://{up_addr}");
    let (srv, _log) = start(model, "pp-proxy", &["--proxy-protocol", "--proxy", &proxy]);
    let r = exchange(
        &srv,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 4242 80\r\n\
          GET /up/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .expect("response");
    upstream.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let head = r.text();
    assert!(
        head.lines()
            .any(|l| l.eq_ignore_ascii_case("X-Forwarded-For: 203.0.113.7")),
        "{head}"
    );
}
