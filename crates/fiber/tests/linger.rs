//! `TcpStream::linger`: a fiber waiting a short while for its connection's next bytes, with
//! its timer in the FIFO lane of the worker's timers — woken by bytes, peer close and
//! `shutdown(SHUT_RD)`, ended empty-handed after its period (leaving nothing queued on the
//! registration, so the connection can be parked without a fiber next), many at once with
//! periods out of order (those go to the heap lane), the per-worker limit on lingering fibers,
//! and the plain-thread answer.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

mod common;

use common::{connect_n, rt_named, thread_sleep};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use weft_fiber::net::{Readiness, TcpListener, TcpStream};

/// What one lingering fiber saw: its index, `linger`'s answer, the bytes it then read (only
/// when the answer was true) and how long the linger took.
type Lingered = (usize, bool, usize, Duration);

/// Accepts `n` connections on `rt`, each in its own fiber that lingers for `period(i)` and
/// reports through the receiver. Returns the client ends and the receiver.
fn linger_each(
    rt: &weft_fiber::Runtime,
    n: usize,
    period: fn(usize) -> Duration,
) -> (Vec<std::net::TcpStream>, mpsc::Receiver<Lingered>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(move || {
        for i in 0..n {
            let (mut s, _) = l.accept().unwrap();
            let tx = tx.clone();
            weft_fiber::spawn(move || {
                let t = Instant::now();
                let readable = s.linger(period(i)).unwrap();
                let mut b = [0u8; 1];
                let got = if readable { s.read(&mut b).unwrap() } else { 0 };
                tx.send((i, readable, got, t.elapsed())).unwrap();
            });
        }
    });
    let clients = connect_n(addr, n);
    (clients, rx)
}

#[test]
fn bytes_peer_close_and_shutdown_read_end_a_linger_early() {
    let rt = rt_named(1, "linger");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let long = Duration::from_secs(30);
    let server = rt.spawn(move || {
        let mut seen = Vec::new();
        // Bytes: the wait ends when they come, long before the period.
        let (mut s, _) = l.accept().unwrap();
        let t = Instant::now();
        seen.push(s.linger(long).unwrap());
        let mut b = [0u8; 5];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"hello");
        // Bytes already there: true at once.
        weft_fiber::sleep(Duration::from_millis(50));
        seen.push(s.linger(long).unwrap());
        assert_eq!(s.read(&mut b).unwrap(), 1);
        // The peer's close: true, and the read sees the end of the stream.
        seen.push(s.linger(long).unwrap());
        assert_eq!(s.read(&mut b).unwrap(), 0);
        // shutdown(SHUT_RD) from another thread wakes a second connection's linger.
        let (mut s2, _) = l.accept().unwrap();
        let raw = std::os::fd::AsRawFd::as_raw_fd(&s2);
        let handle = std::thread::spawn(move || {
            thread_sleep(Duration::from_millis(50));
            // SAFETY: `raw` stays open: the fiber holding it is parked in `linger` until
            // this call wakes it.
            unsafe { libc::shutdown(raw, libc::SHUT_RD) };
        });
        seen.push(s2.linger(long).unwrap());
        handle.join().unwrap();
        assert_eq!(s2.read(&mut b).unwrap(), 0);
        (seen, t.elapsed())
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    thread_sleep(Duration::from_millis(50));
    c.write_all(b"hello").unwrap();
    c.write_all(b"!").unwrap();
    thread_sleep(Duration::from_millis(100));
    c.shutdown(Shutdown::Write).unwrap();
    let _c2 = std::net::TcpStream::connect(addr).unwrap();
    let (seen, took) = server.join().unwrap();
    assert_eq!(seen, vec![true, true, true, true]);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn a_quiet_connection_ends_its_linger_after_the_period_and_can_park_without_a_fiber() {
    let rt = rt_named(1, "linger");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let t = Instant::now();
        let readable = s.linger(Duration::from_millis(60)).unwrap();
        let waited = t.elapsed();
        // Parking checks (in debug builds) that no fiber is still queued on the registration.
        s.when_readable(Some(Duration::from_secs(30)), move |mut s, r| {
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            tx.send((readable, waited, r, b)).unwrap();
        });
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    // After the linger: the connection parked in the table, and (once the fiber that parked
    // it has returned: the table counts it first) no fiber left.
    let t = Instant::now();
    loop {
        let s = rt.stats();
        if s.idle == 1 && s.blocked + s.ready + s.running == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "never parked without a fiber: {s:?}"
        );
        thread_sleep(Duration::from_millis(5));
    }
    c.write_all(b"late").unwrap();
    let (readable, waited, r, b) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(!readable);
    // The period runs on the worker's round clock, which an idle worker reads as it wakes:
    // here no round is long, so the wait is the period within a few milliseconds.
    assert!(waited >= Duration::from_millis(50), "{waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!((r, &b), (Readiness::Readable, b"late"));
}

#[test]
fn many_lingers_with_periods_out_of_order_each_get_their_own_answer() {
    // Periods alternate long and short, so a short one armed after a long one cannot join
    // the FIFO lane in order and goes to the heap: both lanes fire, each at its deadline.
    const N: usize = 120;
    let rt = rt_named(2, "linger");
    let (mut clients, rx) = linger_each(&rt, N, |i| {
        if i % 2 == 0 {
            Duration::from_millis(2000)
        } else {
            Duration::from_millis(200)
        }
    });
    // After the short periods ended and well within the long ones, every client whose index
    // is a multiple of 4 writes: those (long periods) read it; the other long ones end empty.
    // A period runs on the worker's round clock, so it may end up to one scheduling round
    // early: with 120 fibers accepted and spawned at once (slow in a debug build) a round
    // took 12 ms in one CI run. The bounds below leave room for rounds far longer.
    thread_sleep(Duration::from_millis(600));
    for (i, c) in clients.iter_mut().enumerate() {
        if i % 4 == 0 {
            c.write_all(b"x").unwrap();
        }
    }
    let mut seen: Vec<_> = (0..N)
        .map(|_| rx.recv_timeout(Duration::from_secs(20)).unwrap())
        .collect();
    seen.sort_by_key(|s| s.0);
    for (i, readable, got, took) in seen {
        match i % 4 {
            0 => assert!(readable && got == 1, "{i}: {readable} {got} {took:?}"),
            2 => {
                assert!(!readable, "{i}");
                assert!(took >= Duration::from_millis(1400), "{i}: {took:?}");
            }
            _ => {
                assert!(!readable, "{i}");
                assert!(took >= Duration::from_millis(100), "{i}: {took:?}");
                assert!(took < Duration::from_millis(1400), "{i}: {took:?}");
            }
        }
    }
}

#[test]
fn outside_a_fiber_linger_says_read() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let mut s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    // A plain thread has no worker to wait on: the caller's read blocks as usual.
    assert!(s.linger(Duration::from_millis(10)).unwrap());
}

#[test]
fn past_the_lingering_limit_linger_answers_at_once() {
    const N: usize = 4;
    const MAX: usize = 2;
    let rt = weft_fiber::Runtime::builder()
        .workers(1)
        .max_lingering(MAX)
        .name("linger")
        .build()
        .unwrap();
    // Each fiber reaches its linger without parking before it, in spawn order.
    let (mut clients, rx) = linger_each(&rt, N, |_| Duration::from_secs(60));
    // The first MAX linger; the others are told "nothing came" at once, not after 60 s.
    for _ in MAX..N {
        let (i, readable, _, took) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(i >= MAX, "fiber {i} should have lingered");
        assert!(!readable);
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    assert_eq!(rt.stats().lingering, MAX);
    for c in &mut clients[..MAX] {
        c.write_all(b"x").unwrap();
    }
    let mut woke: Vec<_> = (0..MAX)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .map(|(i, readable, got, _)| (i, readable, got))
        .collect();
    woke.sort();
    assert_eq!(woke, vec![(0, true, 1), (1, true, 1)]);
    let t = Instant::now();
    while rt.stats().lingering != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "lingering count stuck"
        );
        thread_sleep(Duration::from_millis(1));
    }
}
