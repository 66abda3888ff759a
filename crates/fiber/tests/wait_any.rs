//! `net::wait_any`: one flow of control waiting on several sockets at once (a tunnel relaying
//! both ways), in a fiber (parked on every registration) and on a plain thread (`poll(2)`).

mod common;

use common::rt;
use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{wait_any, TcpStream, Wait};
use weft_fiber::sync::Interrupt;

/// A connected pair: the fiber-side stream and the plain peer.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (TcpStream::from_std(s).unwrap(), c)
}

/// Reads with `try_read` until it would block; the bytes read.
fn drain(s: &TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn try_read_would_block_then_wait_any_wakes_on_the_second_socket() {
    let rt = rt(1);
    let (a, _pa) = pair();
    let (b, mut pb) = pair();
    let (a, b) = (Arc::new(a), Arc::new(b));
    let (a2, b2) = (a.clone(), b.clone());
    let writer = std::thread::spawn(move || {
        std::thread::park_timeout(Duration::from_millis(50));
        pb.write_all(b"to b").unwrap();
        pb
    });
    let (got, waited) = rt.block_on(move || {
        // Nothing there yet: both reads would block, which clears their readiness.
        for s in [&a2, &b2] {
            assert_eq!(
                s.try_read(&mut [0u8; 8]).unwrap_err().kind(),
                ErrorKind::WouldBlock
            );
        }
        let t = Instant::now();
        let waits = [Wait::tcp(&a2, true, false), Wait::tcp(&b2, true, false)];
        wait_any(&waits, Some(Instant::now() + Duration::from_secs(5)), None).unwrap();
        (drain(&b2), t.elapsed())
    });
    assert_eq!(got, b"to b");
    assert!(
        waited >= Duration::from_millis(30),
        "woke early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "slept to the deadline");
    // The same on a plain thread: poll(2).
    let mut pb = writer.join().unwrap();
    pb.write_all(b"again").unwrap();
    let waits = [Wait::tcp(&a, true, false), Wait::tcp(&b, true, false)];
    wait_any(&waits, Some(Instant::now() + Duration::from_secs(5)), None).unwrap();
    assert_eq!(drain(&b), b"again");
}

#[test]
fn wait_any_times_out_and_is_interrupted_in_a_fiber_and_a_thread() {
    let rt = rt(1);
    let (a, _pa) = pair();
    let (b, _pb) = pair();
    let (a, b) = (Arc::new(a), Arc::new(b));
    let int = Arc::new(Interrupt::new());
    let (a2, b2, int2) = (a.clone(), b.clone(), int.clone());
    let firer = {
        let int = int.clone();
        std::thread::spawn(move || {
            std::thread::park_timeout(Duration::from_millis(150));
            int.fire();
        })
    };
    let kinds = rt.block_on(move || {
        let _ = drain(&a2);
        let _ = drain(&b2);
        let waits = [Wait::tcp(&a2, true, false), Wait::tcp(&b2, true, false)];
        let t = Instant::now();
        let timed = wait_any(&waits, Some(t + Duration::from_millis(30)), Some(&int2));
        let after = t.elapsed();
        let cut = wait_any(&waits, Some(t + Duration::from_secs(5)), Some(&int2));
        (timed.unwrap_err().kind(), after, cut.unwrap_err().kind())
    });
    assert_eq!(kinds.0, ErrorKind::TimedOut);
    assert!(kinds.1 >= Duration::from_millis(30), "{:?}", kinds.1);
    assert_eq!(kinds.2, ErrorKind::Interrupted);
    firer.join().unwrap();
    // A thread: the fired interrupt ends the wait at once; a re-armed one lets it time out.
    let waits = [Wait::tcp(&a, true, false), Wait::tcp(&b, true, false)];
    let e = wait_any(&waits, None, Some(&int)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Interrupted);
    int.rearm();
    let t = Instant::now();
    let e = wait_any(&waits, Some(t + Duration::from_millis(20)), Some(&int)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(t.elapsed() >= Duration::from_millis(20));
}

#[test]
fn a_full_send_buffer_waits_for_write_while_reads_are_watched() {
    let rt = rt(1);
    let (a, mut pa) = pair();
    let (b, mut pb) = pair();
    let (a, b) = (Arc::new(a), Arc::new(b));
    let a2 = a.clone();
    let b2 = b.clone();
    let done = rt.spawn(move || {
        // Fill a's send buffer: its peer does not read yet.
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0usize;
        loop {
            match a2.try_write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        // Wait for a writable or b readable: b's peer writes first.
        let waits = [Wait::tcp(&a2, false, true), Wait::tcp(&b2, true, false)];
        wait_any(&waits, Some(Instant::now() + Duration::from_secs(5)), None).unwrap();
        let first = drain(&b2);
        (sent, first)
    });
    std::thread::park_timeout(Duration::from_millis(30));
    pb.write_all(b"b first").unwrap();
    let (sent, first) = done.join().unwrap();
    assert_eq!(first, b"b first");
    assert!(sent > 0);
    // Now the writer side: the peer reads, and a wait for a's write side returns.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; sent];
        std::io::Read::read_exact(&mut pa, &mut buf).unwrap();
    });
    let a3 = a.clone();
    rt.block_on(move || {
        let waits = [Wait::tcp(&a3, false, true)];
        wait_any(&waits, Some(Instant::now() + Duration::from_secs(5)), None).unwrap();
        assert!(a3.try_write(b"more").unwrap() > 0);
    });
    reader.join().unwrap();
}
