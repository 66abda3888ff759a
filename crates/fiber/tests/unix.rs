//! `UnixStream`: the client side of a Unix stream socket, in a fiber and on a plain thread.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft_fiber::net::UnixStream;

fn socket_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-fiber-unix-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s.sock")
}

/// An echo server on `path` for one connection, on a thread of its own.
fn echo_once(path: &PathBuf) -> std::thread::JoinHandle<()> {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        s.write_all(&b).unwrap();
    })
}

#[test]
fn a_fiber_connects_writes_and_reads() {
    let path = socket_path("fiber");
    let server = echo_once(&path);
    let rt = weft_fiber::Runtime::builder().workers(1).build().unwrap();
    let p = path.clone();
    let got = rt.block_on(move || {
        let mut c = UnixStream::connect_timeout(&p, Duration::from_secs(5)).unwrap();
        c.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        b
    });
    assert_eq!(&got, b"ping");
    server.join().unwrap();
}

#[test]
fn a_thread_connects_and_a_read_deadline_passes() {
    let path = socket_path("thread");
    let l = UnixListener::bind(&path).unwrap();
    let c = UnixStream::connect_timeout(&path, Duration::from_secs(5)).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    let mut b = [0u8; 8];
    let t0 = Instant::now();
    let e = c
        .read_deadline(&mut b, Instant::now() + Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert!(t0.elapsed() >= Duration::from_millis(40));
    peer.write_all(b"hi").unwrap();
    let n = c
        .read_deadline(&mut b, Instant::now() + Duration::from_secs(5))
        .unwrap();
    assert_eq!(&b[..n], b"hi");
    drop(peer);
    assert_eq!(
        (&c).read(&mut b).unwrap(),
        0,
        "end of stream once the peer closed"
    );
}

#[test]
fn no_listener_is_an_error_not_a_hang() {
    let path = socket_path("none");
    let e = UnixStream::connect_timeout(&path, Duration::from_secs(5)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    // A socket file nobody listens on any more.
    drop(UnixListener::bind(&path).unwrap());
    let e = UnixStream::connect_timeout(&path, Duration::from_secs(5)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
}

#[test]
fn a_full_backlog_is_refused_at_once_not_waited_on() {
    // A listener that never accepts, with the smallest backlog: the connections past it fail
    // with ResourceBusy (EAGAIN) at once, where waiting would last the whole timeout.
    let path = socket_path("backlog");
    let l = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    l.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
    l.listen(0).unwrap();
    let mut held = Vec::new();
    let t0 = Instant::now();
    let refused = loop {
        match UnixStream::connect_timeout(&path, Duration::from_secs(5)) {
            Ok(c) => held.push(c),
            Err(e) => break e,
        }
        assert!(held.len() < 64, "the backlog never filled");
    };
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ResourceBusy,
        "{refused}"
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}
