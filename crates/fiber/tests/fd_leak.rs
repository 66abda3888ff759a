//! No file descriptor outlives its owner: sockets, pipes, epoll registrations, and the runtime's
//! own epoll/eventfd pairs. One test in its own binary, since it counts the whole process's fds.
// Every test here runs fibers: corosensei switches stacks with inline asm, and the runtime
// calls epoll, mmap/madvise and sigaction; miri can execute none of these.
#![cfg(not(miri))]

use std::io::{Read, Write};
use std::time::Duration;

use weft_fiber::io::pipe;
use weft_fiber::net::{TcpListener, TcpStream};
use weft_fiber::{proc, Handle, Runtime};

#[test]
fn no_fd_is_leaked_after_sockets_close() {
    let before = proc::open_fds().unwrap();
    let rt = Runtime::builder().workers(2).build().unwrap();
    let with_runtime = proc::open_fds().unwrap();
    assert_eq!(
        with_runtime,
        before + 4,
        "an epoll and an eventfd per worker"
    );

    const CONNS: usize = 300;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = rt.spawn(move || {
        for _ in 0..CONNS {
            let (mut s, _) = l.accept().unwrap();
            Handle::current().spawn(move || {
                let mut b = [0u8; 16];
                while let Ok(n @ 1..) = s.read(&mut b) {
                    s.write_all(&b[..n]).unwrap();
                }
            });
        }
        // `l` closes here
    });
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            rt.spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                c.write_all(&[i as u8; 4]).unwrap();
                let mut b = [0u8; 4];
                c.read_exact(&mut b).unwrap();
                // A timed-out read leaves a waiter and a timer behind; both must go.
                c.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
                let _ = c.read(&mut b);
                if i % 3 == 0 {
                    Some(c.into_std().unwrap()) // converted back: still closes exactly once
                } else if i % 3 == 1 {
                    drop(c); // closed on its worker
                    None
                } else {
                    drop(c.into_std().unwrap()); // converted, closed as a std stream
                    None
                }
            })
        })
        .collect();
    let streams: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    drop(streams);
    server.join().unwrap();
    let pipes = rt.block_on(|| {
        let (r, w) = pipe().unwrap();
        r.set_timeout(Some(Duration::from_millis(1))).unwrap();
        let _ = (&r).read(&mut [0u8; 1]); // registers the read end
        drop(w);
        drop(r);
        weft_fiber::proc::open_fds().unwrap()
    });
    // Server fibers see EOF and close their side; wait for them.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while proc::open_fds().unwrap() != with_runtime {
        assert!(
            std::time::Instant::now() < deadline,
            "fds still open: {} (want {with_runtime}), pipes step saw {pipes}",
            proc::open_fds().unwrap()
        );
        std::thread::yield_now();
    }
    rt.shutdown();
    assert_eq!(proc::open_fds().unwrap(), before);
}
