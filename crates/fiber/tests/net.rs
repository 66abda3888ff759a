//! Fiber-aware sockets and pipes: echo, timeouts, sendfile, vectored writes, plain-thread use,
//! child-process stdio, and the 10,000-connection echo of issue 3.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

mod common;

use common::{rt, thread_sleep};
use std::fs::File;
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::io::{pipe, PipeReader, PipeWriter};
use weft_fiber::net::{TcpListener, TcpStream};
use weft_fiber::sync::{Interrupt, WaitGroup};
use weft_fiber::{Handle, Runtime};

/// An echo server: one fiber per connection, spread over the workers.
fn echo_server(rt: &Runtime, listener: TcpListener, conns: usize) -> weft_fiber::JoinHandle<()> {
    rt.spawn(move || {
        for _ in 0..conns {
            let (mut s, _) = listener.accept().unwrap();
            Handle::current().spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    })
}

#[test]
fn echo_between_fibers_on_two_workers() {
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = echo_server(&rt, l, 200);
    let hs: Vec<_> = (0..200u32)
        .map(|i| {
            rt.spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_nodelay(true).unwrap();
                assert!(c.nodelay().unwrap());
                assert_eq!(c.peer_addr().unwrap(), addr);
                let msg = format!("hello {i}").into_bytes();
                for _ in 0..5 {
                    c.write_all(&msg).unwrap();
                    let mut back = vec![0; msg.len()];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    server.join().unwrap();
}

#[test]
fn raw_fd_round_trips() {
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd};
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_l.local_addr().unwrap();
    // SAFETY: the fd comes from `into_raw_fd`, so nothing else owns it.
    let l = unsafe { TcpListener::from_raw_fd(std_l.into_raw_fd()) };
    let c = std::net::TcpStream::connect(addr).unwrap();
    // SAFETY: as above.
    let c = unsafe { TcpStream::from_raw_fd(c.into_raw_fd()) };
    let (s, _) = l.accept().unwrap();
    assert_eq!(s.as_raw_fd(), s.as_fd().as_raw_fd());
    (&c).write_all(b"raw").unwrap();
    let mut b = [0u8; 3];
    (&s).read_exact(&mut b).unwrap();
    assert_eq!(&b, b"raw");
    let fd = c.into_raw_fd();
    // SAFETY: `fd` was just released by `into_raw_fd`; we close it exactly once.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
    let l = l.into_std().unwrap();
    assert_eq!(l.local_addr().unwrap(), addr);
}

#[test]
fn the_same_types_block_a_plain_thread() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, peer) = l.accept().unwrap();
        assert_eq!(peer, s.peer_addr().unwrap());
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"thread model").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut back = String::new();
    c.read_to_string(&mut back).unwrap();
    assert_eq!(back, "thread model");
    t.join().unwrap();
}

#[test]
fn read_timeout_in_a_fiber_and_on_a_thread() {
    let rt = rt(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let _peer = std::thread::spawn(move || {
        let (_s, _) = l.accept().unwrap();
        std::thread::park_timeout(Duration::from_secs(2)); // connected, silent
    });
    let c = Arc::new(TcpStream::connect(addr).unwrap());
    c.set_read_timeout(Some(Duration::from_millis(40))).unwrap();
    assert_eq!(c.read_timeout(), Some(Duration::from_millis(40)));
    assert!(c.set_read_timeout(Some(Duration::ZERO)).is_err());
    let c2 = c.clone();
    let (err, waited) = rt.block_on(move || {
        let t = Instant::now();
        let e = (&*c2).read(&mut [0u8; 8]).unwrap_err();
        (e.kind(), t.elapsed())
    });
    assert_eq!(err, ErrorKind::TimedOut);
    assert!(waited >= Duration::from_millis(40), "{waited:?}");
    let t = Instant::now();
    let e = (&*c).read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(t.elapsed() >= Duration::from_millis(40));
    let e = c
        .read_deadline(&mut [0u8; 8], Instant::now() + Duration::from_millis(5))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
}

#[test]
fn write_timeout_when_the_peer_stops_reading() {
    let rt = rt(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (done_tx, done_rx) = weft_fiber::sync::channel::<()>();
    let _peer = std::thread::spawn(move || {
        let (_s, _) = l.accept().unwrap();
        let _ = done_rx.recv(); // holds the socket open, never reads
    });
    let (kind, sent) = rt.block_on(move || {
        let c = TcpStream::connect(addr).unwrap();
        c.set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0usize;
        loop {
            match (&c).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) => return (e.kind(), sent),
            }
        }
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    assert!(sent > 0);
    drop(done_tx);
}

#[test]
fn accept_timeout_and_connect_refused() {
    let rt = rt(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    l.set_accept_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let kind = rt.block_on(move || l.accept().unwrap_err().kind());
    assert_eq!(kind, ErrorKind::TimedOut);
    // The listener is gone now: nothing listens on `addr`.
    let kind = rt.block_on(move || TcpStream::connect(addr).unwrap_err().kind());
    assert_eq!(kind, ErrorKind::ConnectionRefused);
    let kind = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        .unwrap_err()
        .kind();
    assert_eq!(kind, ErrorKind::ConnectionRefused);
}

/// Accepts with `int` until it fails: the connections taken and the error's kind.
fn accept_until_interrupted(l: &TcpListener, int: &Interrupt) -> (usize, ErrorKind) {
    let mut taken = 0;
    loop {
        match l.accept_interruptible(int) {
            Ok(_) => taken += 1,
            Err(e) => return (taken, e.kind()),
        }
    }
}

#[test]
fn an_interrupt_fired_from_another_thread_ends_blocked_accepts_on_every_worker() {
    let rt = rt(2);
    let int = Arc::new(Interrupt::new());
    let mut acceptors = Vec::new();
    let mut addrs = Vec::new();
    for w in 0..2 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        addrs.push(l.local_addr().unwrap());
        let int = int.clone();
        acceptors.push(rt.spawn_on(w, move || accept_until_interrupted(&l, &int)));
    }
    // Each acceptor takes a connection, then blocks again (no timeout is set).
    let clients: Vec<_> = addrs
        .iter()
        .map(|a| std::net::TcpStream::connect(a).unwrap())
        .collect();
    thread_sleep(Duration::from_millis(50));
    assert!(!int.is_fired());
    int.fire();
    for a in acceptors {
        let r = a.join_timeout(Duration::from_secs(10));
        let r = r.unwrap_or_else(|_| panic!("an acceptor slept through the interrupt"));
        assert_eq!(r.unwrap(), (1, ErrorKind::Interrupted));
    }
    drop(clients);
}

#[test]
fn a_fired_interrupt_still_hands_over_a_waiting_connection_then_fails_at_once() {
    let rt = rt(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let int = Interrupt::new();
    int.fire();
    int.fire(); // idempotent
    let _client = std::net::TcpStream::connect(addr).unwrap();
    let (taken, kind) = rt.block_on(move || accept_until_interrupted(&l, &int));
    assert_eq!((taken, kind), (1, ErrorKind::Interrupted));
}

#[test]
fn an_unfired_interrupt_leaves_the_accept_timeout_in_force() {
    let rt = rt(1);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_accept_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let int = Interrupt::new();
    let (taken, kind) = rt.block_on(move || accept_until_interrupted(&l, &int));
    assert_eq!((taken, kind), (0, ErrorKind::TimedOut));
}

#[test]
fn an_interrupt_ends_an_accept_blocked_on_a_plain_thread() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let int = Arc::new(Interrupt::new());
    let (tx, rx) = std::sync::mpsc::channel();
    let i = int.clone();
    std::thread::spawn(move || tx.send(accept_until_interrupted(&l, &i)).unwrap());
    let _client = std::net::TcpStream::connect(addr).unwrap();
    thread_sleep(Duration::from_millis(50));
    int.fire();
    let r = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(
        r.expect("the thread slept through the interrupt"),
        (1, ErrorKind::Interrupted)
    );
}

#[test]
fn large_transfers_park_on_a_full_send_buffer() {
    const LEN: usize = 8 << 20;
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = rt.spawn_on(0, move || {
        let (mut s, _) = l.accept().unwrap();
        let mut total = 0usize;
        let mut sum = 0u64;
        let mut buf = vec![0u8; 7000];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            sum += buf[..n].iter().map(|&b| b as u64).sum::<u64>();
            total += n;
            if total.is_multiple_of(7) {
                weft_fiber::yield_now();
            }
        }
        (total, sum)
    });
    let writer = rt.spawn_on(1, move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
        c.write_all(&data).unwrap();
        data.iter().map(|&b| b as u64).sum::<u64>()
    });
    let want = writer.join().unwrap();
    assert_eq!(reader.join().unwrap(), (LEN, want));
}

#[test]
fn sendfile_and_vectored_writes() {
    let dir = std::env::temp_dir().join(format!("weft-fiber-sendfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("data.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(&path, &data).unwrap();

    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let p = path.clone();
    let server = rt.spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let n = s
            .write_vectored(&[IoSlice::new(b"HEAD\r\n"), IoSlice::new(b"\r\n")])
            .unwrap();
        assert_eq!(n, 8);
        let n = (&s)
            .write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])
            .unwrap();
        assert_eq!(n, 4);
        let f = File::open(&p).unwrap();
        assert_eq!(s.write_more(b"MORE").unwrap(), 4);
        s.sendfile_all(&f, 1000, 2_500_000).unwrap();
        let e = s.sendfile_all(&f, 2_999_990, 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
        assert_eq!(s.sendfile(&f, 5_000_000, 10).unwrap(), 0);
        s.shutdown(Shutdown::Write).unwrap();
    });
    let got = rt.block_on(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let mut v = Vec::new();
        c.read_to_end(&mut v).unwrap();
        v
    });
    server.join().unwrap();
    let mut want = b"HEAD\r\n\r\nabcdMORE".to_vec();
    want.extend_from_slice(&data[1000..2_501_000]);
    want.extend_from_slice(&data[2_999_990..]);
    assert_eq!(got.len(), want.len());
    assert!(got == want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stream_moves_between_workers_and_threads() {
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = echo_server(&rt, l, 1);
    // Registered in worker 0's epoll by a read that blocks there ...
    let c = rt
        .spawn_on(0, move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
            let e = c.read(&mut [0u8; 1]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            c.set_read_timeout(None).unwrap();
            c
        })
        .join()
        .unwrap();
    // ... then read by a fiber on worker 1, woken across threads by worker 0's event, while a
    // plain thread writes to the same stream.
    let c = Arc::new(c);
    let c2 = c.clone();
    let reader = rt.spawn_on(1, move || {
        let mut b = [0u8; 3];
        (&*c2).read_exact(&mut b).unwrap();
        b
    });
    thread_sleep(Duration::from_millis(10));
    (&*c).write_all(b"one").unwrap();
    assert_eq!(&reader.join().unwrap(), b"one");
    // The last reference drops on this plain thread: the registration is released through
    // worker 0's inbox.
    drop(c);
    server.join().unwrap();
}

#[test]
fn pipes_between_fibers_with_timeouts() {
    let rt = rt(1);
    let (r, w) = pipe().unwrap();
    r.set_timeout(Some(Duration::from_millis(30))).unwrap();
    let reader = rt.spawn(move || {
        let mut r = r;
        let mut b = [0u8; 5];
        r.read_exact(&mut b).unwrap();
        let timed_out = r.read(&mut b).unwrap_err().kind();
        let mut rest = Vec::new();
        r.set_timeout(None).unwrap();
        r.read_to_end(&mut rest).unwrap();
        (b, timed_out, rest)
    });
    let writer = rt.spawn(move || {
        let mut w = w;
        w.write_all(b"fiber").unwrap();
        weft_fiber::sleep(Duration::from_millis(60));
        let n = (&w)
            .write_vectored(&[IoSlice::new(b"x"), IoSlice::new(b"y")])
            .unwrap();
        assert_eq!(n, 2);
    });
    writer.join().unwrap();
    let (b, kind, rest) = reader.join().unwrap();
    assert_eq!(&b, b"fiber");
    assert_eq!(kind, ErrorKind::TimedOut);
    assert_eq!(rest, b"xy");
}

#[test]
fn a_full_pipe_parks_the_writer_and_times_out() {
    let rt = rt(1);
    let (r, w) = pipe().unwrap();
    let kind = rt.block_on(move || {
        let big = vec![0u8; 1 << 20];
        let e = w
            .write_deadline(&big, Instant::now() + Duration::from_millis(10))
            .and_then(|_| w.write_deadline(&big, Instant::now() + Duration::from_millis(10)))
            .unwrap_err();
        e.kind()
    });
    assert_eq!(kind, ErrorKind::TimedOut);
    drop(r);
}

#[test]
fn child_process_stdio_through_fibers() {
    let rt = rt(2);
    let out = rt.block_on(|| {
        let mut child = Command::new("sh")
            .args(["-c", "tr a-z A-Z; echo done >&2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = PipeWriter::try_from(child.stdin.take().unwrap()).unwrap();
        let stdout = PipeReader::try_from(child.stdout.take().unwrap()).unwrap();
        let stderr = PipeReader::try_from(child.stderr.take().unwrap()).unwrap();
        let feeder = weft_fiber::spawn(move || {
            let mut stdin = stdin;
            for _ in 0..2000 {
                stdin.write_all(b"hello cgi\n").unwrap(); // 20 KB: more than a pipe holds
            }
        });
        let errs = weft_fiber::spawn(move || {
            let mut s = String::new();
            (&stderr).read_to_string(&mut s).unwrap();
            s
        });
        let mut s = String::new();
        (&stdout).read_to_string(&mut s).unwrap();
        feeder.join().unwrap();
        let status = weft_fiber::spawn_blocking(move || child.wait().unwrap());
        assert!(status.success());
        (s, errs.join().unwrap())
    });
    assert_eq!(out.0.len(), 20_000);
    assert!(out.0.lines().all(|l| l == "HELLO CGI"));
    assert_eq!(out.1, "done\n");
}

fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the live local.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit reads the live local; raising the soft limit to the hard one is allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    lim.rlim_cur
}

const TEN_K: usize = 10_000;
const CHILD_ENV: &str = "WEFT_FIBER_ECHO_CLIENT";

/// Issue 3: 10,000 concurrent loopback connections, each echoed by its own fiber, on 2 workers.
///
/// Both ends in one process would need 20,000 fds plus a few, over this machine's hard limit of
/// 20,000, so the 10,000 clients run in a child process (this test binary re-executed with
/// `WEFT_FIBER_ECHO_CLIENT`; the clients are fibers too). Every connection stays open until all
/// 10,000 have done one round trip, so the server holds 10,000 connection fibers at once.
#[test]
fn ten_thousand_concurrent_connections_echo_through_fibers() {
    let limit = raise_nofile_limit();
    assert!(
        limit as usize > TEN_K + 100,
        "RLIMIT_NOFILE hard limit {limit}"
    );
    let rt = rt(2);
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_reuse_address(true).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.listen(4096).unwrap();
    let l = TcpListener::from_std(sock.into()).unwrap();
    let addr = l.local_addr().unwrap();
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (live2, peak2) = (live.clone(), peak.clone());
    let started = Instant::now();
    let server = rt.spawn(move || {
        let wg = WaitGroup::new();
        for _ in 0..TEN_K {
            let (mut s, _) = l.accept().unwrap();
            let (live, peak, wg) = (live2.clone(), peak2.clone(), wg.clone());
            wg.add(1);
            Handle::current().spawn(move || {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let mut buf = [0u8; 64];
                let mut echoed = 0;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            s.write_all(&buf[..n]).unwrap();
                            echoed += n;
                        }
                    }
                }
                live.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(echoed, 16);
                wg.done();
            });
        }
        wg.wait();
    });
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "echo_client_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, addr.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("clients ok {TEN_K}")), "{stdout}");
    server.join().unwrap();
    assert_eq!(
        peak.load(Ordering::SeqCst),
        TEN_K,
        "all connections open at once"
    );
    let s = rt.stats();
    eprintln!(
        "10k connections: {:?}, fiber switches per worker {:?}",
        started.elapsed(),
        s.per_worker_switches
    );
}

/// The client half of the test above; does nothing unless started by it.
#[test]
fn echo_client_child() {
    let Ok(addr) = std::env::var(CHILD_ENV) else {
        return;
    };
    raise_nofile_limit();
    let addr: SocketAddr = addr.parse().unwrap();
    let rt = rt(2);
    let go = WaitGroup::new();
    go.add(1);
    let ok = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(TEN_K);
    // Connect in waves so the listen backlog never overflows (SYN retries would take seconds).
    for wave in 0..TEN_K / 500 {
        let connected = WaitGroup::new();
        for i in 0..500 {
            let id = (wave * 500 + i) as u64;
            let (go, ok, connected) = (go.clone(), ok.clone(), connected.clone());
            connected.add(1);
            handles.push(rt.spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut b = [0u8; 8];
                c.write_all(&id.to_le_bytes()).unwrap();
                c.read_exact(&mut b).unwrap();
                assert_eq!(u64::from_le_bytes(b), id);
                connected.done();
                go.wait();
                c.write_all(&(!id).to_le_bytes()).unwrap();
                c.read_exact(&mut b).unwrap();
                assert_eq!(u64::from_le_bytes(b), !id);
                ok.fetch_add(1, Ordering::SeqCst);
            }));
        }
        connected.wait();
    }
    go.done();
    for h in handles {
        h.join().unwrap();
    }
    println!("clients ok {}", ok.load(Ordering::SeqCst));
}

/// `write_waited` adds up the time writes waited for room, in a fiber and on a thread; writes
/// that find room add nothing.
#[test]
fn write_waited_counts_only_the_waits_for_room() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let s = std::sync::Arc::new(weft_fiber::net::TcpStream::from_std(s).unwrap());
    (&*s).write_all(b"small").unwrap();
    assert_eq!(s.write_waited(), std::time::Duration::ZERO);
    let mut got = [0u8; 5];
    peer.read_exact(&mut got).unwrap();

    let rt = common::rt(1);
    let s2 = s.clone();
    // The reader starts 100 ms after the write has begun: the fiber's write of 16 MiB fills
    // the buffers and then waits for it. How much of the 100 ms is a wait depends on how
    // quickly the buffers fill on a loaded machine, so the bounds are loose: some of it, and
    // never more than the write took.
    let started = std::sync::Arc::new(std::sync::Barrier::new(2));
    let go = started.clone();
    let reader = std::thread::spawn(move || {
        go.wait();
        // (park_timeout may wake early: parked until the time is up.)
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        while std::time::Instant::now() < until {
            std::thread::park_timeout(until - std::time::Instant::now());
        }
        let mut all = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        while all < 16 << 20 {
            all += peer.read(&mut buf).unwrap();
        }
    });
    let took = rt.block_on(move || {
        started.wait();
        let t = std::time::Instant::now();
        (&*s2).write_all(&vec![7u8; 16 << 20]).unwrap();
        t.elapsed()
    });
    reader.join().unwrap();
    let waited = s.write_waited();
    assert!(
        waited >= std::time::Duration::from_millis(10) && waited <= took,
        "waited {waited:?} of a write that took {took:?}"
    );
}
