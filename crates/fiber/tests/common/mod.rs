//! Helpers shared by the weft-fiber integration tests (each test binary uses some of them).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use weft_fiber::Runtime;

/// A runtime of `workers` workers with the default thread names.
pub fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).build().unwrap()
}

/// A runtime of `workers` workers whose threads are named `name-0`, `name-1`, ...
pub fn rt_named(workers: usize, name: &str) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .name(name)
        .build()
        .unwrap()
}

/// Test threads are plain threads: blocking them is fine (the ban is for fiber code).
#[allow(clippy::disallowed_methods)]
pub fn thread_sleep(d: Duration) {
    std::thread::sleep(d);
}

/// `n` plain-thread clients connected to `addr` (accepted or not yet).
pub fn connect_n(addr: SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect()
}
