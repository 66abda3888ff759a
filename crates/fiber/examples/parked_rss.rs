//! Resident memory per parked fiber (the paper's point that a fiber is cheap to keep around):
//! 10,000 fibers, each blocked in a read on its own loopback TCP socket (5,000 connections,
//! a reader fiber on each end). Measures the process RSS (`/proc/self/statm`) after the sockets
//! exist and again once every fiber is parked, and divides by the number of fibers: what a
//! parked fiber costs in user space — stack pages touched, task, join cell, fd registration.
//!
//! `cargo run --release -p weft-fiber --example parked_rss [FIBERS] [STACK_KIB]`

use std::io::Read;
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpListener, TcpStream};
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

fn main() {
    let mut args = std::env::args().skip(1);
    let fibers: usize = args.next().map_or(10_000, |a| a.parse().expect("FIBERS"));
    let stack_kib: usize = args.next().map_or(64, |a| a.parse().expect("STACK_KIB"));
    raise_nofile_limit();
    let rt = Runtime::builder()
        .workers(2)
        .stack_size(stack_kib * 1024)
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut ends: Vec<TcpStream> = Vec::with_capacity(fibers);
    for _ in 0..fibers / 2 {
        ends.push(TcpStream::connect(addr).unwrap());
        ends.push(listener.accept().unwrap().0);
    }
    // Warm the allocator and the runtime with one round of fibers that end at once.
    for h in (0..100).map(|_| rt.spawn(|| ())).collect::<Vec<_>>() {
        h.join().unwrap();
    }
    let before = proc::resident_bytes().unwrap();
    let handles: Vec<_> = ends
        .into_iter()
        .map(|mut s| {
            rt.spawn(move || {
                let mut buf = [0u8; 16];
                s.read(&mut buf).unwrap_or(0) // parks: nobody writes
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while rt.stats().blocked < handles.len() {
        assert!(
            Instant::now() < deadline,
            "fibers never parked: {:?}",
            rt.stats()
        );
        std::thread::yield_now();
    }
    let after = proc::resident_bytes().unwrap();
    let per = (after.saturating_sub(before)) as f64 / handles.len() as f64;
    println!(
        "parked fibers {}: resident +{} KiB, {:.0} bytes ({:.2} KiB) per parked fiber \
         (stack {} KiB, guard pages: {})",
        handles.len(),
        (after - before) / 1024,
        per,
        per / 1024.0,
        stack_kib,
        proc::guard_pages()
    );
    rt.shutdown();
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}
