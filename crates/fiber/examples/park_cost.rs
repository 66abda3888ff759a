//! The cost of a park with a deadline, in instructions: N round trips between two fibers of
//! one worker, where one side waits each time with a deadline that never fires —
//! `recv_timeout` on a channel (`heap`: a timer armed in the timers' heap and cancelled) or
//! `TcpStream::linger` on a loopback connection (`fifo`: a timer in the FIFO lane, as a
//! keep-alive connection between requests). Timings on a shared machine are noise; counted
//! under callgrind, which counts user-space instructions whatever the load, the difference of
//! two runs divided by the difference of their N is the instructions per round trip:
//!
//! ```text
//! cargo build --release -p weft-fiber --example park_cost
//! for n in 20000 40000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/park_cost heap $n 2>&1 | grep 'Collected'
//! done
//! ```
//!
//! Without valgrind it prints the wall time per round trip, for a quiet machine.
//!
//! `cargo run --release -p weft-fiber --example park_cost [heap|fifo] [N]`

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpListener, TcpStream};
use weft_fiber::sync::channel;
use weft_fiber::Runtime;

/// Far enough that no deadline fires during a run.
const NEVER: Duration = Duration::from_secs(3600);

/// Round trips over channels; the receiving side of each parks with a deadline.
fn heap(n: u64) {
    let (ping_tx, ping_rx) = channel::<u64>();
    let (pong_tx, pong_rx) = channel::<u64>();
    let echo = weft_fiber::spawn(move || {
        while let Ok(v) = ping_rx.recv_timeout(NEVER) {
            pong_tx.send(v).unwrap();
        }
    });
    for i in 0..n {
        ping_tx.send(i).unwrap();
        assert_eq!(pong_rx.recv_timeout(NEVER).unwrap(), i);
    }
    drop(ping_tx);
    echo.join().unwrap();
}

/// Round trips of one byte over loopback TCP; the server side lingers before each read.
fn fifo(n: u64) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = weft_fiber::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 1];
        for _ in 0..n {
            assert!(s.linger(NEVER).unwrap(), "readable before the deadline");
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let mut b = [0u8; 1];
    for i in 0..n {
        c.write_all(&[i as u8]).unwrap();
        c.read_exact(&mut b).unwrap();
        assert_eq!(b[0], i as u8);
    }
    server.join().unwrap();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "heap".into());
    let n: u64 = args
        .next()
        .map_or(20_000, |s| s.parse().expect("N: a number"));
    let rt = Runtime::builder().workers(1).build().unwrap();
    let t = Instant::now();
    match mode.as_str() {
        "heap" => rt.block_on(move || heap(n)),
        "fifo" => rt.block_on(move || fifo(n)),
        other => panic!("mode: heap or fifo, not {other}"),
    }
    let d = t.elapsed();
    println!(
        "{mode}: {n} round trips in {d:?}, {:.0} ns each",
        d.as_nanos() as f64 / n as f64
    );
    rt.shutdown();
}
