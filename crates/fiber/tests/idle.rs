//! Connections parked without a fiber (`TcpStream::when_readable`): woken by bytes, peer
//! close and `shutdown(SHUT_RD)`, timed out, spawned at once when already readable, moved
//! between workers, dropped at runtime shutdown, and the plain-thread fallback; and the same
//! for a state that holds its stream (`TcpStream::park`).
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

mod common;

use common::{connect_n, rt_named, thread_sleep};
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{Readiness, TcpListener};
use weft_fiber::{Handle, Runtime};

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread_sleep(Duration::from_millis(1));
    }
}

/// What a callback saw: its readiness, the first read, the worker thread it ran on.
type Seen = (Readiness, Result<usize, ErrorKind>, String);

/// Parks `n` accepted server ends with `when_readable(timeout)`, each from its own short fiber
/// (spread over the workers); every callback reports through `tx`. Returns the client ends.
fn park_n(
    rt: &Runtime,
    n: usize,
    timeout: Option<Duration>,
    tx: mpsc::Sender<Seen>,
) -> Vec<std::net::TcpStream> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let parked = Arc::new(AtomicUsize::new(0));
    let p = parked.clone();
    // Accept while the clients connect (the listen backlog is 128).
    let acceptor = rt.spawn(move || {
        for _ in 0..n {
            let (s, _) = l.accept().unwrap();
            let (tx, p) = (tx.clone(), p.clone());
            weft_fiber::spawn(move || {
                s.when_readable(timeout, move |s, r| {
                    // A timed-out connection has nothing to read: its read would park.
                    let got = match r {
                        Readiness::Readable => (&s).read(&mut [0u8; 16]).map_err(|e| e.kind()),
                        Readiness::TimedOut => Err(ErrorKind::TimedOut),
                    };
                    let name = std::thread::current().name().unwrap_or("").to_string();
                    tx.send((r, got, name)).unwrap();
                });
                p.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    let clients = connect_n(addr, n);
    acceptor.join().unwrap();
    wait_until("all parked", || parked.load(Ordering::SeqCst) == n);
    clients
}

#[test]
fn parked_connections_hold_no_fiber_and_wake_on_a_byte() {
    let rt = rt_named(2, "idle");
    let (tx, rx) = mpsc::channel();
    let mut clients = park_n(&rt, 200, None, tx);
    wait_until("entries in the table", || rt.stats().idle == 200);
    let s = rt.stats();
    assert_eq!(
        s.blocked + s.ready + s.running,
        0,
        "no fiber per connection: {s:?}"
    );
    assert!(rx.try_recv().is_err(), "nothing ran before a byte came");
    for c in &mut clients {
        c.write_all(b"!").unwrap();
    }
    for _ in 0..200 {
        let (r, got, name) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!((r, got), (Readiness::Readable, Ok(1)));
        assert!(name.starts_with("idle-"), "{name}");
    }
    wait_until("table empty", || rt.stats().idle == 0);
}

#[test]
fn timeouts_fire_and_a_timed_out_connection_can_park_again() {
    let rt = rt_named(2, "idle");
    let (tx, rx) = mpsc::channel();
    let t = Instant::now();
    let mut clients = park_n(&rt, 50, Some(Duration::from_millis(40)), tx.clone());
    // Half get a byte at once: those run Readable; the others time out.
    for c in clients.iter_mut().step_by(2) {
        c.write_all(b"x").unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..50 {
        seen.push(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    }
    let timed_out = seen
        .iter()
        .filter(|(r, _, _)| *r == Readiness::TimedOut)
        .count();
    assert_eq!(timed_out, 25, "{seen:?}");
    assert!(seen
        .iter()
        .all(|(r, got, _)| *r == Readiness::TimedOut || *got == Ok(1)));
    assert!(t.elapsed() >= Duration::from_millis(40));
    drop(clients);

    // A callback that times out parks the stream again; then a byte wakes it.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (tx2, rx2) = mpsc::channel::<Vec<Readiness>>();
    rt.spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.when_readable(Some(Duration::from_millis(10)), move |s, r1| {
            assert_eq!(r1, Readiness::TimedOut);
            s.when_readable(Some(Duration::from_secs(30)), move |mut s, r2| {
                let mut b = [0u8; 4];
                s.read_exact(&mut b).unwrap();
                assert_eq!(&b, b"late");
                tx2.send(vec![r1, r2]).unwrap();
            });
        });
    });
    thread_sleep(Duration::from_millis(50));
    c.write_all(b"late").unwrap();
    assert_eq!(
        rx2.recv_timeout(Duration::from_secs(10)).unwrap(),
        vec![Readiness::TimedOut, Readiness::Readable]
    );
}

#[test]
fn peer_close_and_shutdown_read_wake_a_parked_connection() {
    let rt = rt_named(1, "idle");
    let (tx, rx) = mpsc::channel();
    let clients = park_n(&rt, 2, None, tx);
    // The peer closes the first: Readable, the read sees end of stream.
    let mut clients = clients.into_iter();
    drop(clients.next());
    let (r, got, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((r, got), (Readiness::Readable, Ok(0)));

    // Graceful shutdown: another thread shuts the read side down (weft's shutdown registry
    // does this for idle connections). The parked connection runs and reads 0.
    let _keep = clients.next();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (fd_tx, fd_rx) = mpsc::channel();
    let (tx2, rx2) = mpsc::channel();
    rt.spawn(move || {
        let (s, _) = l.accept().unwrap();
        fd_tx.send(s.as_raw_fd()).unwrap();
        s.when_readable(None, move |s, r| {
            let got = (&s).read(&mut [0u8; 8]).map_err(|e| e.kind());
            tx2.send((r, got)).unwrap();
        });
    });
    let fd = fd_rx.recv().unwrap();
    wait_until("parked", || rt.stats().idle == 2);
    let t = std::thread::spawn(move || {
        // SAFETY: `fd` stays open until the callback has run (it owns the stream), which is
        // after this call; shutdown does not close the descriptor.
        assert_eq!(unsafe { libc::shutdown(fd, libc::SHUT_RD) }, 0);
    });
    t.join().unwrap();
    assert_eq!(
        rx2.recv_timeout(Duration::from_secs(10)).unwrap(),
        (Readiness::Readable, Ok(0))
    );
}

#[test]
fn an_already_readable_connection_runs_at_once() {
    let rt = rt_named(1, "idle");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (tx, rx) = mpsc::channel();
    let h = rt.spawn(move || {
        let (s, _) = l.accept().unwrap();
        // Register and drain, then let a byte arrive and its edge be seen.
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        assert_eq!(
            (&s).read(&mut [0u8; 4]).unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        s.set_read_timeout(None).unwrap();
        c.write_all(b"now").unwrap();
        weft_fiber::sleep(Duration::from_millis(20)); // the worker polls epoll meanwhile
        let spawned = Handle::current().stats().spawned;
        s.when_readable(None, move |mut s, r| {
            let mut b = [0u8; 3];
            s.read_exact(&mut b).unwrap();
            tx.send((r, b)).unwrap();
        });
        let st = Handle::current().stats();
        (st.idle, st.spawned - spawned, c)
    });
    let (idle, spawned, _c) = h.join().unwrap();
    assert_eq!((idle, spawned), (0, 1), "spawned at once, never parked");
    assert_eq!(rx.recv().unwrap(), (Readiness::Readable, *b"now"));

    // A zero timeout on a drained socket: TimedOut at once.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let _ = (&s).read(&mut [0u8; 4]);
        s.when_readable(Some(Duration::ZERO), move |_, r| tx.send(r).unwrap());
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        Readiness::TimedOut
    );
}

/// A stream registered with worker 1's epoll and parked from a fiber on worker 0 moves its
/// registration: the callback runs on worker 0, woken by worker 0's epoll.
#[test]
fn parking_moves_the_registration_to_the_calling_worker() {
    let rt = rt_named(2, "idle");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let s = rt
        .spawn_on(1, move || {
            s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
            let _ = (&s).read(&mut [0u8; 4]); // EAGAIN: registered with worker 1
            s.set_read_timeout(None).unwrap();
            s
        })
        .join()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    rt.spawn_on(0, move || {
        s.when_readable(None, move |s, r| {
            let got = (&s).read(&mut [0u8; 4]).unwrap();
            let name = std::thread::current().name().unwrap().to_string();
            tx.send((r, got, name)).unwrap();
        })
    })
    .join()
    .unwrap();
    c.write_all(b"hi").unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        (Readiness::Readable, 2, "idle-0".to_string())
    );
}

/// Runtime shutdown with connections parked: each stream is closed (its peer reads end of
/// stream) and each callback dropped without running.
#[test]
fn shutdown_drops_parked_connections_without_running_them() {
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    const N: usize = 100;
    let rt = rt_named(2, "idle");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut clients = connect_n(addr, N);
    let ran = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (r, d) = (ran.clone(), dropped.clone());
    rt.block_on(move || {
        for i in 0..N {
            let (s, _) = l.accept().unwrap();
            let (r, guard) = (r.clone(), CountDrop(d.clone()));
            let timeout = (i % 2 == 0).then(|| Duration::from_secs(3600));
            weft_fiber::spawn(move || {
                s.when_readable(timeout, move |_, _| {
                    let _guard = guard;
                    r.fetch_add(1, Ordering::SeqCst);
                });
            });
        }
    });
    wait_until("all parked", || rt.stats().idle == N);
    rt.shutdown();
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no callback ran");
    assert_eq!(dropped.load(Ordering::SeqCst), N, "every callback dropped");
    for c in &mut clients {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c.read(&mut [0u8; 1]).unwrap(), 0, "server end closed");
    }
}

/// Outside a fiber: a plain thread waits in poll(2) and runs the callback itself.
#[test]
fn from_a_plain_thread_a_polling_thread_runs_the_callback() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    s.when_readable(Some(Duration::from_secs(30)), move |mut s, r| {
        let mut b = [0u8; 2];
        s.read_exact(&mut b).unwrap();
        let name = std::thread::current().name().unwrap().to_string();
        tx.send((r, name)).unwrap();
        s.shutdown(Shutdown::Both).unwrap();
    });
    c.write_all(b"ok").unwrap();
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        (Readiness::Readable, "weft-fiber-when-readable".to_string())
    );
    // And its timeout.
    let (s2, _) = {
        let _c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let pair = l.accept().unwrap();
        std::mem::forget(_c2); // keep the peer open for the test's life
        pair
    };
    s2.when_readable(Some(Duration::from_millis(20)), move |_, r| {
        tx2.send((r, String::new())).unwrap();
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap().0,
        Readiness::TimedOut
    );
}

#[test]
fn a_panicking_callback_ends_only_its_own_fiber() {
    // One worker, so the callbacks after the panic run on the very thread it unwound.
    let rt = rt_named(1, "idle");
    let (tx, rx) = mpsc::channel::<usize>();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = rt.spawn(move || {
        for i in 0..3usize {
            let (s, _) = l.accept().unwrap();
            let tx = tx.clone();
            s.when_readable(None, move |s, _| {
                if i == 1 {
                    panic!("callback {i} panics (expected by the test)");
                }
                let n = (&s).read(&mut [0u8; 16]).unwrap();
                tx.send(n).unwrap();
            });
        }
    });
    let mut clients = connect_n(addr, 3);
    acceptor.join().unwrap();
    wait_until("all parked", || rt.stats().idle == 3);
    for c in &mut clients {
        c.write_all(b"ab").unwrap();
    }
    let got: Vec<usize> = (0..2)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    assert_eq!(got, [2, 2]);
    wait_until("every fiber ended, the panicked one too", || {
        let s = rt.stats();
        s.finished == s.spawned
    });
    // The worker still runs fibers after the unwinding.
    assert_eq!(rt.spawn(|| 7).join().unwrap(), 7);
}

/// Parks `n` connections on a one-worker runtime, then blocks the worker while a byte goes to
/// every client, so one epoll batch wakes them all. Each callback reports the address of one
/// of its locals (which stack it ran on) and may hold the worker with `hold(i)` (the order it
/// ran in). Returns the runtime, the clients and the reports.
fn wake_all_in_one_batch(
    n: usize,
    hold: fn(usize),
) -> (Runtime, Vec<std::net::TcpStream>, mpsc::Receiver<usize>) {
    let rt = rt_named(1, "idle");
    let (tx, rx) = mpsc::channel();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mut clients = connect_n(addr, n);
    let order = Arc::new(AtomicUsize::new(0));
    rt.block_on(move || {
        for _ in 0..n {
            let (s, _) = l.accept().unwrap();
            let (tx, order) = (tx.clone(), order.clone());
            s.when_readable(None, move |s, _| {
                let mut b = [0u8; 1];
                let got = (&s).read(&mut b).unwrap();
                assert_eq!(got, 1);
                tx.send(std::ptr::addr_of!(b) as usize).unwrap();
                hold(order.fetch_add(1, Ordering::SeqCst));
            });
        }
    });
    wait_until("all parked", || rt.stats().idle == n);
    let (held_tx, held_rx) = mpsc::channel();
    rt.spawn(move || {
        held_tx.send(()).unwrap();
        // Holds the worker (a plain thread sleep inside a fiber) while the bytes go out.
        thread_sleep(Duration::from_millis(200));
    });
    held_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    for c in &mut clients {
        c.write_all(b"x").unwrap();
    }
    (rt, clients, rx)
}

#[test]
fn connections_woken_in_one_batch_run_one_after_another_on_one_warm_stack() {
    const N: usize = 100;
    let (_rt, _clients, rx) = wake_all_in_one_batch(N, |_| {});
    let mut stacks = std::collections::HashSet::new();
    for _ in 0..N {
        stacks.insert(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    }
    // Each woken connection gets its stack when it first runs and gives it back as it ends,
    // so all of them reuse the one the first took; a stack bound at wake-up time would make
    // this N stacks.
    assert_eq!(
        stacks.len(),
        1,
        "woken connections ran on {} stacks",
        stacks.len()
    );
}

#[test]
fn shutdown_closes_woken_connections_that_had_not_run_yet() {
    const N: usize = 50;
    // The first callback holds the worker long enough for the shutdown below to begin; the
    // other N - 1 connections are then queued, woken but never run.
    let (rt, mut clients, rx) = wake_all_in_one_batch(N, |i| {
        if i == 0 {
            thread_sleep(Duration::from_millis(300));
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    rt.shutdown();
    assert!(rx.try_recv().is_err(), "only the first callback ran");
    for c in &mut clients {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Closed: end of stream, or a reset where the byte sent was never read.
        match c.read(&mut [0u8; 1]) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("server end still open: {other:?}"),
        }
    }
}

/// A connection's state that holds its stream, parked with `TcpStream::park`: each wake
/// reports its readiness and what it read, then parks the state again (as a server's
/// keep-alive connection does) until its peer closes or its timeout passes.
struct Echoer {
    stream: weft_fiber::net::TcpStream,
    timeout: Option<Duration>,
    tx: mpsc::Sender<(Readiness, Vec<u8>, String)>,
}

impl weft_fiber::net::Parked for Echoer {
    fn stream(&mut self) -> &mut weft_fiber::net::TcpStream {
        &mut self.stream
    }

    fn resume(mut self: Box<Self>, r: Readiness) {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let mut got = vec![0u8; 16];
        let n = match r {
            Readiness::Readable => self.stream.read(&mut got).unwrap(),
            Readiness::TimedOut => 0,
        };
        got.truncate(n);
        self.tx.send((r, got.clone(), name)).unwrap();
        if r == Readiness::Readable && n > 0 {
            self.stream.write_all(&got).unwrap();
            let timeout = self.timeout;
            weft_fiber::net::TcpStream::park(self, timeout);
        }
    }
}

#[test]
fn a_parked_state_wakes_on_bytes_parks_again_and_times_out() {
    let rt = rt_named(1, "park");
    let (tx, rx) = mpsc::channel();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let timeout = Some(Duration::from_secs(1));
    rt.spawn(move || {
        for _ in 0..2 {
            let (stream, _) = l.accept().unwrap();
            let state = Box::new(Echoer {
                stream,
                timeout,
                tx: tx.clone(),
            });
            weft_fiber::net::TcpStream::park(state, timeout);
        }
    });
    let mut busy = std::net::TcpStream::connect(addr).unwrap();
    let _quiet = std::net::TcpStream::connect(addr).unwrap();
    wait_until("both parked", || rt.stats().idle == 2);
    for word in [&b"one"[..], b"two"] {
        busy.write_all(word).unwrap();
        let mut echo = vec![0u8; word.len()];
        busy.read_exact(&mut echo).unwrap();
        assert_eq!(echo, word);
    }
    // Each wake reported; the busy one parked again after each answer, and both time out in
    // the end (the quiet one possibly before the busy one's words: order by kind only). A
    // timed-out state is dropped, closing its socket.
    let seen: Vec<_> = (0..4)
        .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
        .collect();
    let read: Vec<&[u8]> = seen
        .iter()
        .filter(|s| s.0 == Readiness::Readable)
        .map(|s| s.1.as_slice())
        .collect();
    assert_eq!(read, [&b"one"[..], b"two"]);
    assert_eq!(
        seen.iter().filter(|s| s.0 == Readiness::TimedOut).count(),
        2
    );
    assert!(seen.iter().all(|s| s.2.starts_with("park")), "{seen:?}");
    wait_until("table empty", || rt.stats().idle == 0);
    assert_eq!(busy.read(&mut [0u8; 1]).unwrap(), 0, "server end closed");
}

#[test]
fn a_parked_state_outside_a_fiber_is_run_by_a_polling_thread() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (stream, _) = l.accept().unwrap();
    let (tx, rx) = mpsc::channel();
    let state = Box::new(Echoer {
        stream,
        timeout: Some(Duration::from_millis(50)),
        tx,
    });
    weft_fiber::net::TcpStream::park(state, Some(Duration::from_secs(30)));
    c.write_all(b"hi").unwrap();
    let (r, got, name) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((r, got.as_slice()), (Readiness::Readable, &b"hi"[..]));
    assert_eq!(name, "weft-fiber-when-readable");
    let mut echo = [0u8; 2];
    c.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"hi");
    // Parked again from that thread, with the state's 50 ms timeout.
    let (r, got, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((r, got.len()), (Readiness::TimedOut, 0));
}
