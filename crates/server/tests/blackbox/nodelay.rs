//! The CGI paper's unexplained 122 ms stall: a client that writes a POST's head and body in
//! two writes, with Nagle's algorithm on as libwww had it, waiting on a delayed ACK. weft sets
//! TCP_NODELAY on every accepted connection and reads the body as soon as it arrives, so the
//! answer comes well inside one delayed-ACK period (40 ms on Linux). A behaviour check with a
//! generous margin, not a benchmark.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::common::{Conn, Model, Server};

per_model! {
    except fiber_nocache:
    a_post_in_two_writes_is_answered_without_a_delayed_ack_wait,
    the_server_sets_tcp_nodelay_on_accepted_connections,
}

/// The pause between the two writes (the client's own work between them).
pub const PAUSE: Duration = Duration::from_millis(5);

/// The paper's body: 542 bytes of url-encoded form data.
fn paper_body() -> Vec<u8> {
    let mut body = b"ECHO_ARG=".to_vec();
    while body.len() < 542 {
        body.extend_from_slice(b"hello%20world%21+");
    }
    body.truncate(542);
    body
}

/// Sends `head` then, after [`PAUSE`], `body` on one connection per try (Nagle on), and
/// returns the sorted times from the body's write to the complete response.
fn two_write_posts(srv: &Server, head: &[u8], body: &[u8], tries: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..tries {
        let mut c = Conn::connect(srv.addr);
        c.stream.set_nodelay(false).unwrap();
        c.stream.write_all(head).unwrap();
        std::thread::sleep(PAUSE);
        let t = Instant::now();
        c.stream.write_all(body).unwrap();
        let r = c.read_response().expect("a response");
        times.push(t.elapsed());
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, body);
    }
    times.sort();
    times
}

fn a_post_in_two_writes_is_answered_without_a_delayed_ack_wait(model: Model) {
    let srv = Server::start(model, "nodelay-echo");
    let body = paper_body();
    // The paper's ten header lines.
    let head = format!(
        "POST /echo HTTP/1.0\r\nAccept: application/x-corba\r\nAccept: */*; q=0.300\r\n\
         Accept: application/octet-stream; q=0.100\r\nAccept: text/plain\r\nAccept: text/html\r\n\
         From: nje@socrates.ansa.co.uk\r\nUser-Agent: Echo client/0 libwww/2.17\r\n\
         Content-length: {}\r\nContent-type: application/x-www-form-urlencoded\r\n\r\n",
        body.len()
    );
    let times = two_write_posts(&srv, head.as_bytes(), &body, 10);
    let median = times[times.len() / 2];
    assert!(
        median < Duration::from_millis(30),
        "median {median:?} of {times:?}"
    );
}

/// The server's end of an accepted connection, duplicated into this process through
/// `pidfd_getfd(2)`: found by its socket inode (`/proc/net/tcp`) among the descriptors of the
/// server and its descendants (the process model serves in a child). `None` where the kernel
/// or the permissions do not allow it.
fn server_side_socket(srv: &Server, client_port: u16) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let want_local = format!("0100007F:{:04X}", srv.addr.port());
    let want_remote = format!("0100007F:{client_port:04X}");
    let inode = tcp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&want_local.as_str()) && f.get(2) == Some(&want_remote.as_str()))
            .then(|| f.get(9).map(|s| s.to_string()))
            .flatten()
    })?;
    let link = format!("socket:[{inode}]");
    // The server and every process whose parent chain leads to it.
    let mut tree = vec![srv.pid()];
    for _ in 0..3 {
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
            let ppid: u32 = after
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if tree.contains(&ppid) && !tree.contains(&pid) {
                tree.push(pid);
            }
        }
    }
    for pid in tree {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).ok()?;
            if target.to_string_lossy() != link {
                continue;
            }
            let num: i32 = fd.file_name().to_string_lossy().parse().ok()?;
            let pid = libc::pid_t::try_from(pid).ok()?;
            // SAFETY: pidfd_open takes a pid and flags, no pointers.
            let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if pidfd < 0 {
                return None;
            }
            // SAFETY: pidfd_getfd takes descriptors and flags, no pointers.
            let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, num, 0) };
            // SAFETY: `pidfd` is the descriptor pidfd_open just returned, closed once.
            unsafe { libc::close(pidfd as i32) };
            if dup < 0 {
                return None;
            }
            // SAFETY: `dup` is a new descriptor this process owns from here on.
            return Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(dup as i32) });
        }
    }
    None
}

fn the_server_sets_tcp_nodelay_on_accepted_connections(model: Model) {
    use std::os::fd::AsRawFd;
    let srv = Server::start(model, "nodelay-sockopt");
    let mut c = Conn::connect(srv.addr);
    c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().expect("echo").status, 200);
    let port = c.stream.local_addr().unwrap().port();
    let Some(sock) = server_side_socket(&srv, port) else {
        eprintln!("pidfd_getfd unavailable here: the server's socket option cannot be read");
        return;
    };
    let mut on: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `on`, which lives across the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut on as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "getsockopt: {}", std::io::Error::last_os_error());
    assert_eq!(
        on, 1,
        "TCP_NODELAY is off on the server's end of the connection"
    );
}
