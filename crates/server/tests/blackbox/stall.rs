//! A client that requests a large file and stops reading must not hold anyone else up, and
//! the send timeout must end its connection (issue 4; nginx `send_timeout`).

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::{Builder, Model};

per_model! {
    a_stalled_reader_delays_no_one_and_is_closed_by_the_send_timeout,
    the_send_timeout_bounds_a_stalled_reader_of_cached_bodies,
}

const BIG: u64 = 100 * 1024 * 1024;
const CLIENTS: usize = 50;
const REQUESTS_EACH: usize = 20;

fn a_stalled_reader_delays_no_one_and_is_closed_by_the_send_timeout(model: Model) {
    let b = Builder::new(model, "stall").config("[timeouts]\nsend = \"3s\"\n");
    // Sparse: 100 MB of zeros without writing them.
    let big = std::fs::File::create(b.dir().join("root/big.bin")).expect("create big file");
    big.set_len(BIG).expect("size big file");
    let srv = b.start();

    let mut stalled = srv.connect();
    stalled.send(b"GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n");
    let mut first = [0u8; 4096];
    let n = stalled
        .stream
        .read(&mut first)
        .expect("first bytes of the big response");
    assert!(
        first[..n].starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{:?}",
        String::from_utf8_lossy(&first[..n])
    );
    // From here on the stalled client reads nothing: the server's send buffer fills up.

    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = crate::common::Conn::connect(addr);
                for _ in 0..REQUESTS_EACH {
                    c.send(b"GET /echo HTTP/1.1\r\nHost: test\r\n\r\n");
                    let r = c.read_response().expect("echo response");
                    assert_eq!(r.status, 200);
                    assert_eq!(r.body, b"echo");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("echo client");
    }
    let echo_done = started.elapsed();

    // The stalled connection must still be open (the send timeout has not fired yet), which
    // shows the echo clients were served while it was stuck, not after it was dropped.
    stalled.stream.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    let still_open = match stalled.stream.peek(&mut probe) {
        Ok(n) => n > 0,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    };
    assert!(
        still_open,
        "the stalled connection was closed before the echo clients finished ({echo_done:?})"
    );
    stalled.stream.set_nonblocking(false).unwrap();

    // Now read what is buffered: the server gave up after the send timeout (which bounds the
    // wait between two writes, so a partial write can take up to twice that), so the stream
    // ends (EOF or reset) long before 100 MB arrive.
    std::thread::sleep(Duration::from_secs(8));
    stalled
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = n as u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match stalled.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => received += k as u64,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the stalled connection: {e} after {received} bytes"),
        }
    }
    assert!(
        received < BIG,
        "the whole file arrived: the send timeout did not end the stalled connection"
    );
    srv.assert_alive();
}

/// The send timeout bounds each wait without progress, whatever writes the response (cached
/// bodies go out with vectored writes, files with sendfile): a reader that stops is dropped
/// about `timeouts.send` after the server's buffer filled, not two or three times that (the
/// thread model's blocking writes under SO_SNDTIMEO restarted the timer with each call).
fn the_send_timeout_bounds_a_stalled_reader_of_cached_bodies(model: Model) {
    // 2 MiB, within the response cache's object limit: once settled it is served from memory.
    let body: Vec<u8> = (0..2u32 << 20).map(|i| (i % 251) as u8).collect();
    let b = Builder::new(model, "stall-cached")
        .config("[timeouts]\nsend = \"3s\"\n")
        .file("two.bin", &body);
    // The cache takes a file once it has not changed for a second.
    std::thread::sleep(Duration::from_millis(1100));
    let srv = b.start();
    assert_eq!(srv.get("/two.bin").body.len(), body.len());
    assert_eq!(srv.get("/two.bin").body.len(), body.len());
    let stalled = std::net::TcpStream::connect(srv.addr).unwrap();
    // A small receive window: the server's writes block soon.
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt reads `small`, a valid c_int, for its size.
    unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&stalled),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let started = Instant::now();
    let request = b"GET /two.bin HTTP/1.1\r\nHost: test\r\n\r\n".repeat(16);
    std::io::Write::write_all(&mut &stalled, &request).unwrap();
    // Never read: wait for the server's line about the cut.
    while !srv.log().contains("response cut short") {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the stalled reader was never dropped:\n{}",
            srv.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    // Filling the buffers takes a moment; the wait after that is one send timeout (3 s), not
    // two (6 s).
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(4700),
        "dropped after {took:?}"
    );
    drop(stalled);
    srv.assert_alive();
}
