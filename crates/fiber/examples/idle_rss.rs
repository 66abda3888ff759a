//! Resident memory per idle connection: N loopback connections (client ends in a child
//! process, so the server process holds only its own ends), each parked either without a fiber
//! (`TcpStream::when_readable`, the default) or by a fiber blocked in a read (`fiber`, as the
//! `parked_rss` example). Measures the process RSS (`/proc/self/statm`) once the N server
//! streams exist and again once every connection is parked, and divides by N: what the runtime
//! keeps per idle connection in user space (kernel socket buffers and epoll items are not in
//! RSS). Then sends each connection a byte and checks that every one is echoed.
//!
//! `cargo run --release -p weft-fiber --example idle_rss [N] [when_readable|fiber]`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{Readiness, TcpListener, TcpStream};
use weft_fiber::{proc, Runtime};

fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the live local; raising the soft limit to the hard one is allowed.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// The child: connect N, wait for "go", send a byte on each, read each echo.
fn client(addr: SocketAddr, n: usize) {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(std::net::TcpStream::connect(addr).expect("connect"));
    }
    println!("connected");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    for c in &mut conns {
        c.write_all(b"!").unwrap();
    }
    for c in &mut conns {
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
    }
    println!("echoed");
    line.clear();
    let _ = std::io::stdin().read_line(&mut line); // until the parent is done
}

fn echo(s: &TcpStream, echoed: &AtomicUsize) {
    let mut b = [0u8; 16];
    if let Ok(n @ 1..) = (&*s).read(&mut b) {
        let _ = (&*s).write_all(&b[..n]);
        echoed.fetch_add(1, Ordering::Relaxed);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    raise_nofile_limit();
    if args.get(1).map(String::as_str) == Some("--client") {
        return client(args[2].parse().unwrap(), args[3].parse().unwrap());
    }
    let n: usize = args.get(1).map_or(10_000, |a| a.parse().expect("N"));
    let mode = args
        .get(2)
        .map_or("when_readable", String::as_str)
        .to_string();
    assert!(
        mode == "when_readable" || mode == "fiber",
        "mode: when_readable or fiber"
    );
    let rt = Runtime::builder().workers(2).build().unwrap();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.listen(4096).unwrap();
    let l = TcpListener::from_std(sock.into()).unwrap();
    let addr = l.local_addr().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--client", &addr.to_string(), &n.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // One batch per worker, made before the first measurement.
    let mut batches: Vec<Vec<TcpStream>> = (0..2).map(|_| Vec::with_capacity(n / 2 + 1)).collect();
    for i in 0..n {
        batches[i % 2].push(l.accept().unwrap().0); // a plain thread: blocks in poll(2)
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "connected");
    // Warm the runtime and the allocator with fibers that end at once.
    for h in (0..100).map(|_| rt.spawn(|| ())).collect::<Vec<_>>() {
        h.join().unwrap();
    }
    let echoed = Arc::new(AtomicUsize::new(0));
    let before = proc::resident_bytes().unwrap();
    let t = Instant::now();
    for (w, batch) in batches.into_iter().enumerate() {
        if mode == "fiber" {
            // A fiber per connection, parked in its read (as `parked_rss`).
            for s in batch {
                let echoed = echoed.clone();
                rt.spawn_on(w, move || echo(&s, &echoed));
            }
        } else {
            // One fiber per worker parks its batch, as a connection fiber parks its own
            // stream before it ends (spawning 10,000 short fibers at once would instead
            // measure the stack pool's warm stacks, up to 1024 per worker).
            let echoed = echoed.clone();
            rt.spawn_on(w, move || {
                for s in batch {
                    let echoed = echoed.clone();
                    s.when_readable(None, move |s, r| {
                        assert_eq!(r, Readiness::Readable);
                        echo(&s, &echoed);
                    });
                }
            });
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = rt.stats();
        let parked = if mode == "fiber" {
            s.blocked == n
        } else {
            s.idle == n && s.spawned == s.finished
        };
        if parked {
            break;
        }
        assert!(Instant::now() < deadline, "never parked: {s:?}");
        std::thread::yield_now();
    }
    let parking = t.elapsed();
    let after = proc::resident_bytes().unwrap();
    let per = after.saturating_sub(before) as f64 / n as f64;
    println!(
        "{mode}: {n} idle connections parked in {parking:.0?}: resident +{} KiB, {per:.0} bytes \
         ({:.2} KiB) per idle connection",
        after.saturating_sub(before) / 1024,
        per / 1024.0,
    );
    let stdin = child.stdin.as_mut().unwrap();
    let t = Instant::now();
    stdin.write_all(b"go\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "echoed");
    println!(
        "{mode}: each sent a byte: {} echoed in {:.0?}; {:?}",
        echoed.load(Ordering::Relaxed),
        t.elapsed(),
        rt.stats()
    );
    drop(child.stdin.take());
    child.wait().unwrap();
    rt.shutdown();
}
