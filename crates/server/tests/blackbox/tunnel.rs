//! Tunnels through the reverse proxy (a WebSocket, or any `Upgrade`): a request that asks to
//! switch protocols goes upstream with its `Upgrade`, the upstream's `101` comes back, and the
//! bytes flow both ways at once until each side closes (a half-close passed on), on every
//! model. A `101` the request did not ask for is refused (502), and an upgrade the upstream
//! declines keeps HTTP framing on the same connection. An idle tunnel closes after
//! `tunnel_idle`; open tunnels show in the metrics.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;

use std::time::Duration;

use crate::common::{Builder, Model, Server};

per_model! {
    except fiber_nocache:
    a_tunnel_relays_both_ways_at_once_and_passes_a_half_close_on,
    a_101_the_request_did_not_ask_for_is_refused,
    a_declined_upgrade_keeps_http_framing,
    an_idle_tunnel_closes_and_open_ones_are_counted,
    sigterm_ends_a_tunnel_after_the_drain_window_and_the_server_exits,
    a_tunnel_counts_against_conn_per_ip,
}

/// What the test upstream does with a request that asks to upgrade.
#[derive(Clone, Copy)]
enum Answer {
    /// `101`, a greeting, then every byte echoed back; its end answered with its own.
    Echo,
    /// `101` whatever the request asked.
    AlwaysSwitch,
    /// `426` with a body, keeping the connection.
    Decline,
}

/// A test upstream on a free port answering each connection as `answer` says; the request
/// heads it received come out of the channel.
fn upstream(answer: Answer) -> (String, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let tx = tx.clone();
            std::thread::spawn(move || serve(s, answer, tx));
        }
    });
    (addr, rx)
}

fn serve(mut s: TcpStream, answer: Answer, heads: mpsc::Sender<String>) {
    loop {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut b) {
                Ok(1) => head.push(b[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let asked = head.to_ascii_lowercase().contains("\r\nupgrade: echo\r\n");
        let _ = heads.send(head);
        match answer {
            Answer::Decline => {
                let _ =
                    s.write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2\r\n\r\nno");
                continue;
            }
            Answer::AlwaysSwitch => {}
            Answer::Echo if asked => {}
            Answer::Echo => {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain");
                continue;
            }
        }
        let _ = s.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhi!",
        );
        // Echo until the end, then end this side too.
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        return;
    }
}

/// The server in front: `/ws/` forwarded to `up`.
fn front(model: Model, up: &str, extra: &str) -> Server {
    Builder::new(model, "tunnel-front")
        .config(&format!(
            "[[proxy]]\nprefix = \"/ws/\"\nupstream = \"http://{up}\"\n{extra}"
        ))
        .args(&["--status"])
        .start()
}

/// Reads a response head (to its blank line) off `s`.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            other => panic!("head cut short after {head:?}: {other:?}"),
        }
    }
    String::from_utf8_lossy(&head).to_string()
}

const ASK: &[u8] = b"GET /ws/chat HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\
                     Upgrade: echo\r\n\r\n";

fn a_tunnel_relays_both_ways_at_once_and_passes_a_half_close_on(model: Model) {
    let (up, heads) = upstream(Answer::Echo);
    let f = front(model, &up, "");
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // Bytes of the new protocol right behind the request, before the 101: they go first.
    let mut first = ASK.to_vec();
    first.extend_from_slice(b"early");
    s.write_all(&first).unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head:?}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nupgrade: echo\r\n"), "{head:?}");
    assert!(lower.contains("\r\nconnection: upgrade\r\n"), "{head:?}");
    assert!(!lower.contains("content-length"), "{head:?}");
    let sent_up = heads.recv_timeout(Duration::from_secs(5)).unwrap();
    let sent_lower = sent_up.to_ascii_lowercase();
    assert!(sent_lower.contains("\r\nupgrade: echo\r\n"), "{sent_up:?}");
    assert!(
        sent_lower.contains("\r\nconnection: upgrade\r\n"),
        "{sent_up:?}"
    );
    let mut greet = [0u8; 8];
    s.read_exact(&mut greet).unwrap();
    assert_eq!(&greet, b"hi!early");
    // 8 MiB up while the echo comes down: neither direction waits for the other.
    let data: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut w = s.try_clone().unwrap();
    let up_data = data.clone();
    let writer = std::thread::spawn(move || {
        for c in up_data.chunks(100_000) {
            w.write_all(c).unwrap();
        }
        // Our end: passed on upstream, whose own end comes back after the echo.
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::with_capacity(data.len());
    s.read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "the echo differs");
}

fn a_101_the_request_did_not_ask_for_is_refused(model: Model) {
    let (up, _heads) = upstream(Answer::AlwaysSwitch);
    let f = front(model, &up, "");
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /ws/x HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 502 "), "{head:?}");
    // The same connection still speaks HTTP: the 101 did not make it a tunnel.
    let n = head
        .to_ascii_lowercase()
        .split("content-length: ")
        .nth(1)
        .and_then(|v| v.split("\r\n").next()?.parse::<usize>().ok())
        .expect("a length");
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).unwrap();
    s.write_all(b"GET /_weft/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let next = read_head(&mut s);
    assert!(next.starts_with("HTTP/1.1 200 "), "{next:?}");
    // A request over HTTP/1.0 cannot upgrade either.
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /ws/x HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n")
        .unwrap();
    assert!(read_head(&mut s).starts_with("HTTP/1.1 502 "));
}

fn a_declined_upgrade_keeps_http_framing(model: Model) {
    let (up, heads) = upstream(Answer::Decline);
    let f = front(model, &up, "");
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for _ in 0..2 {
        s.write_all(ASK).unwrap();
        let head = read_head(&mut s);
        assert!(head.starts_with("HTTP/1.1 426 "), "{head:?}");
        let mut body = [0u8; 2];
        s.read_exact(&mut body).unwrap();
        assert_eq!(&body, b"no");
        assert!(heads.recv_timeout(Duration::from_secs(5)).is_ok());
    }
}

/// `weft_upstream_tunnels` (open) and `weft_upstream_tunnels_total` of the front's upstream.
fn tunnel_counts(f: &Server) -> (u64, u64) {
    let m = String::from_utf8_lossy(&f.get("/_weft/metrics").body).to_string();
    let value = |name: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(u64::MAX)
    };
    (
        value("weft_upstream_tunnels"),
        value("weft_upstream_tunnels_total"),
    )
}

fn an_idle_tunnel_closes_and_open_ones_are_counted(model: Model) {
    let (up, _heads) = upstream(Answer::Echo);
    let f = front(model, &up, "tunnel_idle = \"1s\"\n");
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(ASK).unwrap();
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    let mut greet = [0u8; 3];
    s.read_exact(&mut greet).unwrap();
    assert_eq!(tunnel_counts(&f), (1, 1));
    // Traffic keeps it open past the idle timeout.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        s.write_all(b"ping").unwrap();
        let mut pong = [0u8; 4];
        s.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"ping");
    }
    // Then a second of silence ends it: both sides closed.
    let t = std::time::Instant::now();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tunnel_counts(&f).0 != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tunnel_counts(&f), (0, 1));
}

fn sigterm_ends_a_tunnel_after_the_drain_window_and_the_server_exits(model: Model) {
    let (up, _heads) = upstream(Answer::Echo);
    let mut f = Builder::new(model, "tunnel-drain")
        .config(&format!(
            "[timeouts]\ndrain_idle = \"1s\"\nshutdown_grace = \"10s\"\n\
             [[proxy]]\nprefix = \"/ws/\"\nupstream = \"http://{up}\"\n"
        ))
        .start();
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(ASK).unwrap();
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    let mut greet = [0u8; 3];
    s.read_exact(&mut greet).unwrap();
    f.signal(libc::SIGTERM);
    // Within the drain window the tunnel still carries bytes.
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(b"still").unwrap();
    let mut back = [0u8; 5];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"still");
    // Then it is closed, and the server exits well before its grace period.
    let t = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        f.wait_exit(Duration::from_secs(5)).is_some(),
        "still running 5 s after its tunnel closed"
    );
}

fn a_tunnel_counts_against_conn_per_ip(model: Model) {
    let (up, _heads) = upstream(Answer::Echo);
    let f = Builder::new(model, "tunnel-per-ip")
        .config(&format!(
            "[limits]\nconn_per_ip = 1\n[[proxy]]\nprefix = \"/ws/\"\nupstream = \"http://{up}\"\n"
        ))
        .start();
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(ASK).unwrap();
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
    // The tunnel is this client's one connection: a second is refused while it lasts.
    let r = f.get("/index.html");
    assert_eq!(r.status, 503, "{r:?}");
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while f.get("/index.html").status != 200 {
        assert!(std::time::Instant::now() < deadline, "{}", f.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}
