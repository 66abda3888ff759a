//! A tiny keep-alive HTTP responder on the runtime, to count the system calls of the fiber
//! connection loop (read a request, write a response, read again) under `wrk`. It answers
//! every request head (`\r\n\r\n`) with a 5-byte body, serves for SECS seconds, then prints
//! the requests served and the runtime's I/O counters.
//!
//! ```sh
//! cargo build --release -p weft-fiber --example tiny_http
//! strace -c -f -o /tmp/strace.txt target/release/examples/tiny_http 127.0.0.1:8099 12 1 &
//! sleep 1; wrk -t1 -c50 -d10s http://127.0.0.1:8099/
//! ```
//!
//! `tiny_http [ADDR] [SECS] [WORKERS]` (defaults: 127.0.0.1:8099, 12, 1).

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weft_fiber::net::TcpListener;
use weft_fiber::Runtime;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

/// Serves one connection until the peer closes; returns when it does.
fn serve(mut s: weft_fiber::net::TcpStream, served: &AtomicU64) {
    let mut buf = vec![0u8; 4096];
    let mut have = 0;
    loop {
        match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        let mut start = 0;
        while let Some(end) = find_head_end(&buf[start..have]) {
            start += end;
            if s.write_all(RESPONSE).is_err() {
                return;
            }
            served.fetch_add(1, Ordering::Relaxed);
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if have == buf.len() {
            return; // a head larger than the buffer: not ours to handle
        }
    }
}

fn find_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8099".into());
    let secs: u64 = args.next().map_or(12, |a| a.parse().expect("SECS"));
    let workers: usize = args.next().map_or(1, |a| a.parse().expect("WORKERS"));
    let rt = Runtime::builder().workers(workers).build().unwrap();
    let served = Arc::new(AtomicU64::new(0));
    for w in 0..workers {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        sock.set_reuse_address(true).unwrap();
        sock.set_reuse_port(true).unwrap();
        sock.bind(&addr.parse::<std::net::SocketAddr>().expect("ADDR").into())
            .expect("bind");
        sock.listen(1024).unwrap();
        let l = TcpListener::from_std(sock.into()).unwrap();
        let served = served.clone();
        rt.spawn_on(w, move || loop {
            let Ok((s, _)) = l.accept() else { continue };
            let _ = s.set_nodelay(true);
            let served = served.clone();
            weft_fiber::spawn(move || serve(s, &served));
        });
    }
    // The main thread just waits: a plain-thread sleep is what it is for.
    #[allow(clippy::disallowed_methods)]
    std::thread::sleep(Duration::from_secs(secs));
    let n = served.load(Ordering::Relaxed);
    println!("requests {n}");
    println!("{:?}", rt.stats());
    std::process::exit(0);
}
