//! The extension-method example (`examples/echo_ext.rs`) served on all four models at once,
//! spoken to with raw HTTP: `ECHO` and `POST` of the CGI paper's 542 bytes of form data come
//! back byte for byte, in either body framing; an unregistered method, or `ECHO` on another
//! path, gets 501.
//!
//! `harness = false`: the process model forks its master when the server is built, which it
//! refuses in a process with more than one thread, and libtest runs tests on threads. Here
//! `main` builds the server first, then starts threads.

#[path = "../examples/echo_ext.rs"]
#[allow(dead_code)]
mod echo_ext;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use weft::{Config, Model, Server};

/// The paper's body: 542 bytes of url-encoded form data.
fn paper_body() -> Vec<u8> {
    let mut body = b"ECHO_ARG=".to_vec();
    while body.len() < 542 {
        body.extend_from_slice(b"hello%20world%21+");
    }
    body.truncate(542);
    body
}

/// Sends `raw` on a new connection and reads until the server closes: (status, head, body).
fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("read the response");
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(&got)));
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    (status, head, got[end + 4..].to_vec())
}

fn check(addr: SocketAddr, model: Model) -> usize {
    let body = paper_body();
    let mut checks = 0;
    for method in ["ECHO", "POST"] {
        let mut raw = format!(
            "{method} {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            echo_ext::PATH,
            body.len()
        )
        .into_bytes();
        raw.extend_from_slice(&body);
        let (status, head, got) = exchange(addr, &raw);
        assert_eq!(status, 200, "{model} {method}: {head}");
        assert_eq!(got, body, "{model} {method}");
        assert!(
            head.contains("Content-Type: application/x-www-form-urlencoded"),
            "{model}: {head}"
        );
        checks += 1;
    }
    // Chunked, in pieces.
    let mut raw = format!(
        "ECHO {} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        echo_ext::PATH
    )
    .into_bytes();
    for piece in body.chunks(100) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let (status, head, got) = exchange(addr, &raw);
    assert_eq!(
        (status, got.as_slice()),
        (200, body.as_slice()),
        "{model} chunked: {head}"
    );
    checks += 1;
    // Unregistered: another extension method, or ECHO elsewhere.
    for raw in [
        format!(
            "FROB {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            echo_ext::PATH
        ),
        "ECHO /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
            .to_string(),
    ] {
        let (status, head, _) = exchange(addr, raw.as_bytes());
        assert_eq!(status, 501, "{model}: {raw:?} got {head}");
        checks += 1;
    }
    checks
}

fn main() {
    let mut cfg = Config::default();
    cfg.static_files.enabled = false;
    cfg.threads = Some(2);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    // Built while this process has one thread: the process model's master forks here.
    let server = echo_ext::echo_service(Server::builder().config(cfg))
        .listen(any, Model::Process)
        .listen(any, Model::Thread)
        .listen(any, Model::Fiber)
        .listen(any, Model::Pipeline)
        .build()
        .expect("build the server");
    let addrs = server.local_addrs();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());
    let mut total = 0;
    for (addr, model) in &addrs {
        let n = check(*addr, *model);
        println!("echo_ext: {n} checks passed on the {model} model");
        total += n;
    }
    assert_eq!(total, 5 * addrs.len());
    stop.shutdown();
    running
        .join()
        .expect("server thread")
        .expect("server ran and stopped cleanly");
    println!(
        "test result: ok. extension method ECHO served on {} models",
        addrs.len()
    );
}
