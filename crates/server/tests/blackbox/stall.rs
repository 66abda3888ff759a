//! A client that requests a large file and stops reading must not hold anyone else up, and
//! the send timeout must end its connection (issue 4; nginx `send_timeout`).

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::Builder;

const BIG: u64 = 100 * 1024 * 1024;
const CLIENTS: usize = 50;
const REQUESTS_EACH: usize = 20;

#[test]
fn a_stalled_reader_delays_no_one_and_is_closed_by_the_send_timeout() {
    let b = Builder::new("stall").config("[timeouts]\nsend = \"3s\"\n");
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
