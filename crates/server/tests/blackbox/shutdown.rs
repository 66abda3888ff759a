//! Graceful shutdown on SIGTERM: the request in flight is finished, idle keep-alive
//! connections are closed at once, new connections are refused, and the process exits 0.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Builder, INDEX_HTML};

#[test]
fn sigterm_finishes_the_request_in_flight_and_exits_zero() {
    let mut srv = Builder::new("shutdown")
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

#[test]
fn sigterm_on_an_idle_server_exits_at_once() {
    let mut srv = Builder::new("shutdown-idle").start();
    srv.assert_alive();
    let start = Instant::now();
    srv.signal(libc::SIGTERM);
    let status = srv.wait_exit(Duration::from_secs(5)).expect("no exit");
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
}
