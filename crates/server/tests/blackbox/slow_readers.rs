//! Slow readers (issue 56): clients that take a large response a few bytes at a time. They
//! must hold no connection process of the process model (write completion: the master sends
//! what is left, and the child is free), keep no normal client waiting on any model, and be
//! cut by the minimum send rate (`timeouts.send_min_rate`) on every model, although each keeps
//! making progress and so never trips `timeouts.send`. The full probe (slowhttptest's slow
//! read attack, 1,000 connections) is `scripts/robustness/slow_read.sh`.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Builder, Model};

per_model! {
    except fiber_nocache:
    slow_readers_keep_no_one_waiting,
    a_reader_slower_than_the_send_min_rate_is_cut,
}

/// A sparse file far larger than any socket buffer.
const BIG: u64 = 64 * 1024 * 1024;

/// A connection with a small receive buffer that has asked for the big file, and reads
/// nothing yet: the server's sends fill its buffers at once.
fn slow_reader(addr: std::net::SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&addr.into()).unwrap();
    let s: TcpStream = sock.into();
    std::io::Write::write_all(&mut &s, b"GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    s
}

fn with_big_file(b: Builder) -> Builder {
    let big = std::fs::File::create(b.dir().join("root/big.bin")).expect("create big file");
    big.set_len(BIG).expect("size big file");
    b
}

/// More slow readers than the process model has children: each would hold one for minutes
/// (they make progress, so the send timeout never fires). The normal client is answered at
/// once beside them, and the readers still get their bytes (from the master, in the process
/// model).
fn slow_readers_keep_no_one_waiting(model: Model) {
    let srv = with_big_file(
        Builder::new(model, "slow-readers")
            .config("[timeouts]\nsend = \"60s\"\n[process]\nmax_children = 4\n"),
    )
    .start();
    let readers: Vec<TcpStream> = (0..12).map(|_| slow_reader(srv.addr)).collect();
    // Let every reader's response start and its send stall.
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..5 {
        let r = srv.get("/");
        assert_eq!(r.status, 200, "normal request {i} beside the slow readers");
    }
    // Every slow reader is still being served: a few bytes more arrive when it reads.
    for (i, mut s) in readers.into_iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("slow reader {i}: {e}"));
        assert!(n > 0, "slow reader {i} got the end of the stream");
    }
    srv.assert_alive();
}

/// A reader that takes a few bytes every 100 ms (far below the rate) is cut by the rate within
/// seconds, not at the send timeout (a minute), and the log says why. What the server had
/// already put in the socket's buffers still arrives, then the end of the stream.
fn a_reader_slower_than_the_send_min_rate_is_cut(model: Model) {
    let srv =
        with_big_file(Builder::new(model, "send-min-rate").config(
            "[timeouts]\nsend = \"60s\"\nmin_rate_grace = \"1s\"\nsend_min_rate = 2000000\n",
        ))
        .start();
    let mut s = slow_reader(srv.addr);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut received = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    while !srv.log().contains("slower than timeouts.send_min_rate") {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "the slow reader was not cut ({received} bytes):\n{}",
            srv.log()
        );
        let n = s.read(&mut buf[..64]).expect("reading slowly");
        assert!(n > 0, "the end of the stream before the cut's log line");
        received += n as u64;
        std::thread::sleep(Duration::from_millis(100));
    }
    // Now quickly: the rest of what was sent, then the end.
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the rest: {e} after {received} bytes"),
        }
    }
    assert!(received < BIG, "the whole file arrived");
    srv.assert_alive();
}
