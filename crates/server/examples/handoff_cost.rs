//! What it costs the `process` model's master to hand one connection with a complete request
//! head to another process, measured both ways the design could go (issue 29):
//!
//! - `fork`: fork a child that has the connection (and the head bytes, copied with the
//!   address space), let it exit, reap it: the whole life of a hand-off in the fork design;
//! - `scm_rights`: send the socket and the head bytes to a long-lived child over a Unix
//!   `SOCK_SEQPACKET` socket (`SCM_RIGHTS`), and get the socket back the same way when the
//!   child is done with it: the round trip of the fd-passing design.
//!
//! `fork` is measured with the master's heap as small as this program's and with `--heap-mib`
//! of touched heap (a fork copies the page tables, so its cost grows with the master's size).
//!
//! `cargo run --release -p weft --example handoff_cost -- [--iters N] [--rounds R] [--heap-mib M]`
//! prints the median and the 90th percentile of each round, in microseconds.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// A request head of a typical size.
const HEAD: &[u8] =
    b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n\r\n";

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let iters = arg("--iters", 2000);
    let rounds = arg("--rounds", 3);
    let heap_mib = arg("--heap-mib", 64);

    // One loopback connection stands for the client's: its server side is what is handed off.
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let _client = TcpStream::connect(listener.local_addr()?)?;
    let (conn, _) = listener.accept()?;

    for round in 1..=rounds {
        report(round, "fork, small master", &fork_round(&conn, iters)?);
        let heap = touched_heap(heap_mib);
        report(
            round,
            &format!("fork, {heap_mib} MiB master"),
            &fork_round(&conn, iters)?,
        );
        drop(heap);
        report(round, "scm_rights round trip", &scm_round(&conn, iters)?);
    }
    Ok(())
}

fn touched_heap(mib: usize) -> Vec<u8> {
    let mut v = vec![0u8; mib << 20];
    for page in v.chunks_mut(4096) {
        page[0] = 1;
    }
    v
}

fn report(round: usize, what: &str, samples: &[f64]) {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| s[((s.len() - 1) as f64 * q) as usize];
    println!(
        "round {round}  {what:<24} median {:>8.1} us  p90 {:>8.1} us  (n = {})",
        at(0.5),
        at(0.9),
        s.len()
    );
}

fn cvt(r: isize) -> io::Result<isize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// fork, the child reads the head bytes it inherited and exits at once, waitpid.
fn fork_round(conn: &TcpStream, iters: usize) -> io::Result<Vec<f64>> {
    let head = HEAD.to_vec();
    let fd = conn.as_raw_fd();
    let mut out = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        // SAFETY: this program is single-threaded (no thread is ever started), so the child
        // gets a consistent copy of every lock; it only reads memory and calls _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let code = i32::from(!head.is_empty() && fd >= 0);
            // SAFETY: _exit is async-signal-safe and never returns.
            unsafe { libc::_exit(1 - code) };
        }
        let mut status = 0;
        // SAFETY: `status` is a valid c_int; `pid` is our own unreaped child.
        cvt(unsafe { libc::waitpid(pid, &mut status, 0) } as isize)?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(status, 0, "child status");
    }
    Ok(out)
}

/// Sends `fd` and `data` in one message on the Unix socket `sock`.
fn send_fd(sock: RawFd, fd: RawFd, data: &[u8]) -> io::Result<()> {
    // Room for one descriptor's control message, aligned as cmsghdr requires.
    let mut space = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE computes a size from a constant; no pointers.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: `msg` points at `space`, which is large enough for CMSG_SPACE(4) bytes (checked
    // by the assert), so CMSG_FIRSTHDR is non-null and CMSG_DATA has room for one RawFd.
    unsafe {
        assert!(msg.msg_controllen <= std::mem::size_of_val(&space));
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
    }
    // SAFETY: `msg` and everything it points at live across the call.
    cvt(unsafe { libc::sendmsg(sock, &msg, 0) })?;
    Ok(())
}

/// Receives one message with one descriptor from `sock` into `buf`.
fn recv_fd(sock: RawFd, buf: &mut [u8]) -> io::Result<(OwnedFd, usize)> {
    let mut space = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as in `send_fd`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    // SAFETY: `msg` points at live buffers of the lengths it states.
    let n = cvt(unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) })? as usize;
    // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes; CMSG_FIRSTHDR
    // returns null or a header inside them, and an SCM_RIGHTS header carries at least one fd.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other("no descriptor in the message"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        // The descriptor is new in this process and owned by nobody else.
        Ok((OwnedFd::from_raw_fd(fd), n))
    }
}

/// A long-lived child: receives the socket and head, sends the socket back; the master
/// measures the round trip.
fn scm_round(conn: &TcpStream, iters: usize) -> io::Result<Vec<f64>> {
    let mut pair = [0; 2];
    // SAFETY: `pair` has room for the two descriptors socketpair writes.
    cvt(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } as isize)?;
    // SAFETY: as in `fork_round`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the master's end is not used in the child; holding it would keep the
        // child's recvmsg from ever seeing the master close.
        unsafe { libc::close(pair[0]) };
        let sock = pair[1];
        let mut buf = [0u8; 4096];
        let code = loop {
            match recv_fd(sock, &mut buf) {
                Ok((fd, n)) => {
                    if n != HEAD.len() || send_fd(sock, fd.as_raw_fd(), b"i").is_err() {
                        break 1;
                    }
                }
                Err(_) => break 0,
            }
        };
        // SAFETY: _exit is async-signal-safe and never returns.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: the child's end is not used in this process.
    unsafe { libc::close(pair[1]) };
    let sock = pair[0];
    let mut out = Vec::with_capacity(iters);
    let mut buf = [0u8; 16];
    for _ in 0..iters {
        let t = Instant::now();
        send_fd(sock, conn.as_raw_fd(), HEAD)?;
        let (back, _) = recv_fd(sock, &mut buf)?;
        drop(back);
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // SAFETY: closing our end makes the child's recvmsg return 0 bytes without a descriptor.
    unsafe { libc::close(sock) };
    let mut status = 0;
    // SAFETY: as in `fork_round`.
    cvt(unsafe { libc::waitpid(pid, &mut status, 0) } as isize)?;
    Ok(out)
}
