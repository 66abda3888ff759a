//! 10,000 idle connections parked without a fiber (`TcpStream::when_readable`): each is sent a
//! byte (all callbacks run, echo, and park again), then each times out and is closed; no fd
//! outlives the test. In its own binary because it counts the whole process's descriptors.
//!
//! The clients run in a child process (this binary re-executed with `WEFT_FIBER_IDLE_CLIENT`):
//! both ends in one process would need 20,000+ fds, and the hard `RLIMIT_NOFILE` here is
//! 20,000.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{Readiness, TcpListener};
use weft_fiber::{proc, Handle, Runtime};

const N: usize = 10_000;
const CHILD_ENV: &str = "WEFT_FIBER_IDLE_CLIENT";

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

fn wait_until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

impl std::fmt::Debug for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "readable {}, timed out {}, wrong {}",
            self.readable.load(Ordering::SeqCst),
            self.timed_out.load(Ordering::SeqCst),
            self.wrong.load(Ordering::SeqCst)
        )
    }
}

#[derive(Default)]
struct Counts {
    readable: AtomicUsize,
    timed_out: AtomicUsize,
    wrong: AtomicUsize,
}

#[test]
fn ten_thousand_parked_connections_wake_echo_time_out_and_close() {
    let limit = raise_nofile_limit();
    assert!(limit as usize > N + 100, "RLIMIT_NOFILE hard limit {limit}");
    let fds_before = proc::open_fds().unwrap();
    let rt = Runtime::builder().workers(2).build().unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.listen(4096).unwrap();
    let l = TcpListener::from_std(sock.into()).unwrap();
    let addr = l.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let acceptor = rt.spawn(move || {
        for _ in 0..N {
            let (s, _) = l.accept().unwrap();
            let c = c.clone();
            // A short fiber per connection, round-robin over the workers, parks it and ends.
            Handle::current().spawn(move || {
                // A long timeout: 10,000 heap entries that die when the bytes come first.
                s.when_readable(Some(Duration::from_secs(120)), move |mut s, r| {
                    let mut b = [0u8; 1];
                    if r != Readiness::Readable || s.read(&mut b).ok() != Some(1) {
                        c.wrong.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    s.write_all(&b).unwrap();
                    c.readable.fetch_add(1, Ordering::SeqCst);
                    // Park again, now to time out; the callback then closes the stream.
                    s.when_readable(Some(Duration::from_millis(200)), move |_s, r| {
                        if r == Readiness::TimedOut {
                            c.timed_out.fetch_add(1, Ordering::SeqCst);
                        } else {
                            c.wrong.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                });
            });
        }
    });
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "idle_client_child", "--nocapture"])
        .env(CHILD_ENV, addr.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    // The child's own lines, between the test harness's.
    let mut next_line = || loop {
        let l = lines.next().expect("child output").unwrap();
        if !l.starts_with("running") && !l.is_empty() && !l.starts_with("test ") {
            return l;
        }
    };
    assert_eq!(next_line(), "connected");
    acceptor.join().unwrap();
    wait_until("10,000 parked", 30, || rt.stats().idle == N);
    // No fiber holds an idle connection (a join completes inside the fiber just before its
    // worker counts it finished, hence the wait).
    wait_until("no fiber left", 10, || {
        let s = rt.stats();
        s.blocked + s.ready + s.running == 0 && s.spawned == s.finished
    });
    assert_eq!(
        proc::open_fds().unwrap(),
        fds_before + 4 + N + 2,
        "an epoll and an eventfd per worker, the sockets, the child's stdin and stdout"
    );

    let t = Instant::now();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let what = format!("every callback ({counts:?})");
    wait_until(&what, 60, || {
        let done =
            counts.readable.load(Ordering::SeqCst) + counts.wrong.load(Ordering::SeqCst) == N;
        if !done && t.elapsed() > Duration::from_secs(20) {
            panic!("{counts:?} {:?}", rt.stats());
        }
        done
    });
    let woke = t.elapsed();
    wait_until("every timeout", 60, || {
        counts.timed_out.load(Ordering::SeqCst) + counts.wrong.load(Ordering::SeqCst) == N
    });
    assert_eq!(counts.wrong.load(Ordering::SeqCst), 0);
    assert_eq!(next_line(), format!("clients ok {N}"));
    lines.by_ref().for_each(drop); // the harness's last lines, up to end of output
    assert!(child.wait().unwrap().success());
    drop((lines, child)); // closes our ends of its stdout and stdin
    wait_until("table empty", 10, || rt.stats().idle == 0);
    eprintln!(
        "10k parked connections: all woken and echoed in {woke:?}, all timed out after; {:?}",
        rt.stats()
    );
    rt.shutdown();
    wait_until("fds back", 10, || proc::open_fds().unwrap() == fds_before);
}

/// The client half of the test above; does nothing unless started by it.
#[test]
fn idle_client_child() {
    let Ok(addr) = std::env::var(CHILD_ENV) else {
        return;
    };
    raise_nofile_limit();
    let addr: SocketAddr = addr.parse().unwrap();
    let mut conns: Vec<std::net::TcpStream> = (0..N)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    println!("connected");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    assert_eq!(go, "go\n");
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&[i as u8]).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(b[0], i as u8);
    }
    // The server closes each connection when its second wait times out.
    for c in &mut conns {
        assert_eq!(c.read(&mut [0u8; 1]).unwrap(), 0);
    }
    println!("clients ok {}", conns.len());
}
