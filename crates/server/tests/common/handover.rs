//! Starting the `weft` binary as systemd does (sockets at descriptor 3 on, `LISTEN_*` set,
//! [`Launch::hand_over`]), for the socket-activation and upgrade tests.

use std::fs;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{unique_dir, Conn, Launch, Response, Weft, INDEX_HTML};

/// Longest wait for the server to start, answer or exit.
pub const WAIT: Duration = Duration::from_secs(20);

/// A test directory with `root/index.html`.
pub fn site(name: &str) -> PathBuf {
    let dir = unique_dir(name);
    fs::create_dir(dir.join("root")).unwrap();
    fs::write(dir.join("root/index.html"), INDEX_HTML).unwrap();
    dir
}

/// `weft serve --listen LISTEN --root DIR/root` in `dir` (a [`site`]), handed `fd` at
/// descriptor 3.
pub fn serve(dir: &Path, listen: &str, fd: RawFd) -> Launch {
    Launch::serve(dir)
        .arg("--listen")
        .arg(listen)
        .arg("--root")
        .arg(dir.join("root"))
        .hand_over(&[fd])
}

/// `GET /` on a new connection to `addr`, retried until the server answers (it may still be
/// starting; the socket already queues connections).
pub fn get_index(addr: SocketAddr, server: &Weft) -> Response {
    let end = Instant::now() + WAIT;
    loop {
        let mut c = Conn::connect(addr);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        match c.read_response() {
            Ok(r) => return r,
            Err(e) if Instant::now() > end => {
                panic!("no answer from {addr}: {e:?}; log:\n{}", server.log())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Receives one notification (bounded wait).
pub fn recv_notify(sock: &UnixDatagram, server: &Weft) -> String {
    let mut buf = [0u8; 512];
    match sock.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => panic!("no notification: {e}; log:\n{}", server.log()),
    }
}

/// Makes this test process the parent of orphaned descendants (an upgrade's new process
/// after the old one exits), so that a test can wait for it and kill it.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers, no pointers.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(r, 0, "prctl: {}", std::io::Error::last_os_error());
}
