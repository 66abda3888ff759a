//! Readiness tracking (src/reactor.rs): an fd known to be drained is not read again before an
//! epoll edge says it may have data — and no edge, close or timeout is lost on the way.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

mod common;

use common::{rt, thread_sleep};
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpListener, TcpStream};
use weft_fiber::IoCounters;

/// A connected pair of fiber streams: (client, server).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// Makes `s` registered with the calling fiber's worker and known drained: a read that finds
/// nothing (registration is lazy, at the first `EAGAIN`, so that a connection which never
/// waits costs no `epoll_ctl`).
fn register_drained(s: &TcpStream) {
    let t = s.read_timeout();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let e = (&*s).read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    s.set_read_timeout(t).unwrap();
}

fn delta(after: IoCounters, before: IoCounters) -> IoCounters {
    IoCounters {
        calls: after.calls - before.calls,
        would_block: after.would_block - before.would_block,
        skipped: after.skipped - before.skipped,
    }
}

/// One side of a ping-pong: reads each message into a buffer larger than the message (as a
/// server reads a request), so every read is short and marks the socket drained.
fn bounce(s: &TcpStream, rounds: usize, first: bool) {
    let mut buf = [0u8; 256];
    let msg = [7u8; 16];
    for _ in 0..rounds {
        if first {
            (&*s).write_all(&msg).unwrap();
        }
        let mut got = 0;
        while got < msg.len() {
            let n = (&*s).read(&mut buf).unwrap();
            assert!(n > 0, "peer closed early");
            got += n;
        }
        if !first {
            (&*s).write_all(&msg).unwrap();
        }
    }
}

/// Without tracking, each side read, found nothing (`EAGAIN`), parked and read again: two read
/// syscalls per message. With it, one.
fn ping_pong_reads(workers: usize) {
    const ROUNDS: usize = 2000;
    let rt = rt(workers);
    let (c, s) = pair();
    let (c, s) = (Arc::new(c), Arc::new(s));
    // Warm up: both sockets registered with their worker's epoll.
    let run = |rounds: usize| {
        let (c, s) = (c.clone(), s.clone());
        let a = rt.spawn_on(0, move || bounce(&c, rounds, true));
        let b = rt.spawn_on(workers - 1, move || bounce(&s, rounds, false));
        a.join().unwrap();
        b.join().unwrap();
    };
    run(10);
    let before = rt.stats().reads;
    run(ROUNDS);
    let d = delta(rt.stats().reads, before);
    let messages = 2 * ROUNDS as u64; // each round: a ping and a pong, each read once
    eprintln!("{workers} worker(s), {messages} messages: reads {d:?}");
    assert!(
        d.calls <= messages + messages / 20,
        "about one read syscall per message: {d:?} for {messages} messages"
    );
    assert!(d.would_block <= messages / 20, "{d:?}");
    assert!(
        d.skipped >= messages / 2,
        "drained sockets parked first: {d:?}"
    );
}

#[test]
fn ping_pong_on_one_worker_makes_one_read_per_message() {
    ping_pong_reads(1);
}

#[test]
fn ping_pong_across_two_workers_makes_one_read_per_message() {
    ping_pong_reads(2);
}

/// A writer thread sends chunks at uneven times while a fiber reads with a small buffer, so
/// bytes keep arriving between a short read and the park that follows it (the window the
/// compare-exchange against the pre-syscall snapshot closes). A lost edge would stall the
/// reader until its 10 s timeout.
#[test]
fn data_arriving_between_a_short_read_and_the_park_is_never_missed() {
    const CHUNKS: u32 = 20_000;
    let rt = rt(2);
    let (c, s) = pair();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let reader = rt.spawn(move || {
        let mut buf = [0u8; 61];
        let mut total = 0u64;
        let mut sum = 0u64;
        loop {
            match (&s).read(&mut buf) {
                Ok(0) => return (total, sum),
                Ok(n) => {
                    total += n as u64;
                    sum += buf[..n].iter().map(|&b| b as u64).sum::<u64>();
                }
                Err(e) => panic!("after {total} bytes: {e}"),
            }
        }
    });
    let mut c = c;
    let mut want = (0u64, 0u64);
    for i in 0..CHUNKS {
        let len = 1 + (i as usize * 7919) % 97;
        let chunk: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
        c.write_all(&chunk).unwrap();
        want.0 += len as u64;
        want.1 += chunk.iter().map(|&b| b as u64).sum::<u64>();
        match i % 16 {
            0 => std::thread::yield_now(),
            5 => thread_sleep(Duration::from_micros(50)),
            _ => {}
        }
    }
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(reader.join().unwrap(), want);
}

/// The same between two fibers on one worker: the writer runs while the reader is parked, so
/// every edge is processed between fiber runs.
#[test]
fn bursts_between_fibers_of_one_worker_arrive_whole() {
    let rt = rt(1);
    let (c, s) = pair();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let reader = rt.spawn(move || {
        let mut buf = [0u8; 100];
        let mut total = 0usize;
        while let Ok(n @ 1..) = (&s).read(&mut buf) {
            total += n;
        }
        total
    });
    let writer = rt.spawn(move || {
        let mut total = 0;
        for i in 0..5000usize {
            let chunk = vec![1u8; 1 + i % 300];
            (&c).write_all(&chunk).unwrap();
            total += chunk.len();
            if i % 3 == 0 {
                weft_fiber::yield_now();
            }
        }
        total
    });
    let sent = writer.join().unwrap(); // the writer's stream drops here: end of stream
    assert_eq!(reader.join().unwrap(), sent);
}

/// Bytes and the peer's close come in one edge (`EPOLLIN | EPOLLRDHUP`): the read that takes
/// the bytes is short, and the read after it must still see the end of stream instead of
/// parking for an edge that will never come (the bug the pipe tests found at first).
#[test]
fn a_close_arriving_with_the_last_bytes_is_seen_after_the_short_read() {
    let rt = rt(1);
    for _ in 0..50 {
        let (mut c, s) = pair();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let reader = rt.spawn(move || {
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            loop {
                match (&s).read(&mut buf) {
                    Ok(0) => return Ok(got),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => return Err(e.kind()),
                }
            }
        });
        // Let the reader park on a drained socket first, then send bytes and FIN together.
        thread_sleep(Duration::from_millis(2));
        c.write_all(b"last words").unwrap();
        drop(c);
        assert_eq!(reader.join().unwrap(), Ok(b"last words".to_vec()));
    }
}

#[test]
fn peer_close_wakes_a_reader_parked_on_a_drained_socket() {
    let rt = rt(1);
    let (mut c, s) = pair();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = rt.spawn(move || {
        register_drained(&s);
        tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        let first = (&s).read(&mut buf).unwrap(); // short: the socket is drained now
        let before = weft_fiber::Handle::current().stats().reads.skipped;
        let eof = (&s).read(&mut buf).unwrap(); // parks without a syscall
        let after = weft_fiber::Handle::current().stats().reads.skipped;
        (first, eof, after - before)
    });
    rx.recv().unwrap();
    c.write_all(b"x").unwrap();
    thread_sleep(Duration::from_millis(30));
    drop(c);
    let (first, eof, skipped) = reader.join().unwrap();
    assert_eq!((first, eof), (1, 0));
    assert_eq!(skipped, 1, "the second read parked first");
}

#[test]
fn timeouts_still_fire_on_a_socket_known_not_ready() {
    let rt = rt(1);
    let (mut c, s) = pair();
    let (kind, waited, skipped, late) = rt.block_on(move || {
        register_drained(&s);
        c.write_all(b"abc").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!((&s).read(&mut buf).unwrap(), 3); // short: drained
        s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        let before = weft_fiber::Handle::current().stats().reads;
        let t = Instant::now();
        let e = (&s).read(&mut buf).unwrap_err();
        let waited = t.elapsed();
        let d = delta(weft_fiber::Handle::current().stats().reads, before);
        assert_eq!(d.calls, 0, "no syscall on a drained socket: {d:?}");
        // A deadline already past still makes the syscall: bytes may be there, their edge
        // not yet seen.
        c.write_all(b"z").unwrap();
        let late = s.read_deadline(&mut buf, Instant::now() - Duration::from_millis(1));
        (e.kind(), waited, d.skipped, late.map_err(|e| e.kind()))
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    assert!(waited >= Duration::from_millis(30), "{waited:?}");
    assert_eq!(skipped, 1);
    assert!(
        matches!(late, Ok(1) | Err(ErrorKind::TimedOut)),
        "expired deadline: {late:?}"
    );
}

/// The flag is trusted only on the worker whose epoll holds the registration. A fiber on
/// another worker and a plain thread make the syscall, so they never wait for an edge that
/// goes to a worker not looking at this socket.
#[test]
fn a_drained_stream_is_read_from_another_worker_and_a_plain_thread() {
    let rt = rt(2);
    let (mut c, s) = pair();
    let s = Arc::new(s);
    c.write_all(b"1").unwrap();
    let s0 = s.clone();
    rt.spawn_on(0, move || {
        let mut buf = [0u8; 8];
        assert_eq!((&*s0).read(&mut buf).unwrap(), 1);
        // EAGAIN: registered with worker 0, marked drained.
        s0.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        assert_eq!(
            (&*s0).read(&mut buf).unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        s0.set_read_timeout(None).unwrap();
    })
    .join()
    .unwrap();
    let s1 = s.clone();
    let on_worker_1 = rt.spawn_on(1, move || {
        let mut buf = [0u8; 8];
        (&*s1).read(&mut buf).unwrap()
    });
    thread_sleep(Duration::from_millis(10));
    c.write_all(b"22").unwrap();
    assert_eq!(on_worker_1.join().unwrap(), 2);
    // And a plain thread, with the flag possibly still clear from worker 1's short read.
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        (&*s).read(&mut buf).unwrap()
    });
    thread_sleep(Duration::from_millis(10));
    c.write_all(b"333").unwrap();
    assert_eq!(t.join().unwrap(), 3);
}

/// A short write means the send buffer is full: the next write parks for `EPOLLOUT` first.
#[test]
fn a_short_write_parks_the_next_write_until_the_peer_reads() {
    const LEN: usize = 16 << 20;
    let rt = rt(2);
    let (c, mut s) = pair();
    let writer = rt.spawn_on(0, move || {
        let before = weft_fiber::Handle::current().stats().writes;
        let data = vec![5u8; LEN];
        (&c).write_all(&data).unwrap();
        delta(weft_fiber::Handle::current().stats().writes, before)
    });
    let reader = std::thread::spawn(move || {
        // Start late: the first send fills the buffer (short), the second finds it full
        // (EAGAIN: registered, drained); from then on each short send parks the next first.
        thread_sleep(Duration::from_millis(50));
        // Read slowly (a pause every 256 KiB), so the writer keeps meeting a full buffer: a
        // reader on another core that drains as fast as the writer fills lets one send move
        // megabytes at once, and then no later send is short (seen once on a quiet machine:
        // 3 calls in all).
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        let mut since_pause = 0;
        while total < LEN {
            let n = s.read(&mut buf).unwrap();
            total += n;
            since_pause += n;
            if since_pause >= 256 << 10 {
                since_pause = 0;
                thread_sleep(Duration::from_millis(1));
            }
        }
        total
    });
    assert_eq!(reader.join().unwrap(), LEN);
    let d = writer.join().unwrap();
    eprintln!("16 MiB through a full send buffer: writes {d:?}");
    assert!(
        d.skipped > 0,
        "writes after a short one parked first: {d:?}"
    );
    assert!(
        d.would_block <= d.skipped,
        "most waits skip the failing syscall: {d:?}"
    );
}

/// A reader and a writer parked on one socket at once: an edge for one direction wakes that
/// waiter alone, whichever place it has in the slot's list (the reader, queued first, is woken
/// from in front of the writer), and the other stays parked until its own edge.
#[test]
fn a_reader_and_a_writer_on_one_socket_are_woken_by_their_own_edges() {
    const LEN: usize = 32 << 20;
    let rt = rt(1);
    let (c, mut s) = pair();
    let c = Arc::new(c);
    let c2 = c.clone();
    let reader = rt.spawn_on(0, move || {
        let mut buf = [0u8; 16];
        let n = (&*c2).read(&mut buf).unwrap();
        buf[..n].to_vec()
    });
    // The reader parks first; then the writer fills the send buffer and parks behind it.
    thread_sleep(Duration::from_millis(50));
    let c3 = c.clone();
    let writer = rt.spawn_on(0, move || {
        (&*c3).write_all(&vec![9u8; LEN]).unwrap();
        LEN
    });
    thread_sleep(Duration::from_millis(50));
    assert!(!writer.is_finished(), "the send buffer never filled");
    // Readable only: the reader wakes, the writer stays parked.
    s.write_all(b"hi").unwrap();
    assert_eq!(reader.join().unwrap(), b"hi");
    assert!(!writer.is_finished(), "woken by the read edge");
    // Draining the peer makes the socket writable: the writer finishes.
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    while total < LEN {
        total += s.read(&mut buf).unwrap();
    }
    assert_eq!(writer.join().unwrap(), LEN);
}
