//! systemd integration, black-box: socket activation (a listening socket handed to the `weft`
//! binary at descriptor 3 with `LISTEN_PID`/`LISTEN_FDS`/`LISTEN_FDNAMES`, as systemd does) and
//! `sd_notify` (READY=1, RELOADING=1, STOPPING=1 received on a `NOTIFY_SOCKET` datagram socket
//! the test binds).

mod common;

/// Read by `common` (its `Builder` is not used here).
const MODEL: &str = "thread";

use std::ffi::CString;
use std::fs;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{unique_dir, Conn, INDEX_HTML};
use weft::sys_process::{self as sp, Exit};

/// Longest wait for the server to start, answer or exit.
const WAIT: Duration = Duration::from_secs(20);

/// A `weft serve` process started as systemd would start it; killed (and reaped) on drop, so a
/// failing test leaves no server behind.
struct Weft {
    pid: sp::Pid,
    dir: PathBuf,
    reaped: bool,
}

impl Weft {
    /// Starts `weft serve ARGS` with `fds` at 3, 4, ... and `env` (`NAME=value`) added;
    /// standard output and error go to `dir/server.log`.
    fn start(dir: &Path, args: &[&str], fds: &[RawFd], env: &[String]) -> Weft {
        let log = fs::File::create(dir.join("server.log")).expect("create log");
        let exe = CString::new(env!("CARGO_BIN_EXE_weft")).unwrap();
        let mut argv = vec![exe.clone(), CString::new("serve").unwrap()];
        argv.extend(args.iter().map(|a| CString::new(*a).unwrap()));
        let mut envp: Vec<CString> = vec![
            CString::new("WEFT_LOG=debug").unwrap(),
            CString::new(format!("LISTEN_FDS={}", fds.len())).unwrap(),
        ];
        if let Ok(path) = std::env::var("PATH") {
            envp.push(CString::new(format!("PATH={path}")).unwrap());
        }
        envp.extend(env.iter().map(|e| CString::new(e.as_str()).unwrap()));
        let pid =
            sp::spawn_with_fds(&exe, &argv, &envp, fds, Some(log.as_raw_fd())).expect("spawn weft");
        Weft {
            pid,
            dir: dir.to_path_buf(),
            reaped: false,
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn signal(&self, sig: libc::c_int) {
        sp::kill(self.pid, sig).expect("signal weft");
    }

    /// Waits for the process to exit (bounded); its exit.
    fn wait_exit(&mut self) -> Exit {
        let end = Instant::now() + WAIT;
        while Instant::now() < end {
            if let Some((_, exit)) = sp::try_wait(self.pid).expect("waitpid") {
                self.reaped = true;
                return exit;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("weft did not exit in {WAIT:?}; its log:\n{}", self.log());
    }
}

impl Drop for Weft {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = sp::kill(self.pid, libc::SIGKILL);
            let _ = sp::wait(self.pid);
        }
    }
}

/// A test directory with `root/index.html`.
fn site(name: &str) -> PathBuf {
    let dir = unique_dir(name);
    fs::create_dir(dir.join("root")).unwrap();
    fs::write(dir.join("root/index.html"), INDEX_HTML).unwrap();
    dir
}

/// `GET /` on a new connection to `addr`, retried until the server answers (it may still be
/// starting; the socket already queues connections).
fn get_index(addr: SocketAddr, server: &Weft) -> common::Response {
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

#[test]
fn a_socket_handed_over_is_matched_by_address_and_served() {
    let dir = site("activation-addr");
    // The test binds; weft must serve on this very socket (it cannot bind the port itself
    // while the test holds it, having no SO_REUSEPORT on this one).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cgi = dir.join("cgi");
    fs::create_dir(&cgi).unwrap();
    let script = cgi.join("env.sh");
    fs::write(
        &script,
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
         echo \"fds=${LISTEN_FDS-unset} pid=${LISTEN_PID-unset} names=${LISTEN_FDNAMES-unset}\"\n",
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let root = dir.join("root");
    let server = Weft::start(
        &dir,
        &[
            "--listen",
            &format!("{addr}=thread"),
            "--root",
            root.to_str().unwrap(),
            "--cgi",
            cgi.to_str().unwrap(),
        ],
        &[listener.as_raw_fd()],
        &["LISTEN_FDNAMES=http".into()],
    );
    let r = get_index(addr, &server);
    assert_eq!(r.status, 200, "log:\n{}", server.log());
    assert_eq!(r.body, INDEX_HTML);
    // The variables were taken and removed: a CGI script (a child of weft) sees none.
    let mut c = Conn::connect(addr);
    c.send(b"GET /cgi-bin/env.sh HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.read_response().expect("cgi response");
    assert_eq!(r.status, 200, "log:\n{}", server.log());
    assert_eq!(r.text().trim(), "fds=unset pid=unset names=unset");
    assert!(
        server.log().contains("handed-over socket"),
        "log:\n{}",
        server.log()
    );
}

#[test]
fn a_socket_handed_over_is_matched_by_name_on_the_fiber_model() {
    let dir = site("activation-name");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A different address in the configuration: only the name ties the socket to it.
    let root = dir.join("root");
    fs::write(
        dir.join("weft.toml"),
        format!(
            "root = {:?}\n[[listen]]\naddr = \"127.0.0.1:9\"\nmodel = \"fiber\"\nname = \"web\"\n",
            root.to_str().unwrap()
        ),
    )
    .unwrap();
    let config = dir.join("weft.toml");
    let server = Weft::start(
        &dir,
        &["--config", config.to_str().unwrap(), "--threads", "2"],
        &[listener.as_raw_fd()],
        &["LISTEN_FDNAMES=web".into()],
    );
    // Several connections: with two workers sharing the one socket, all are served.
    for _ in 0..4 {
        let r = get_index(addr, &server);
        assert_eq!(r.status, 200, "log:\n{}", server.log());
        assert_eq!(r.body, INDEX_HTML);
    }
}

#[test]
fn a_descriptor_that_is_not_a_listening_socket_stops_the_start_with_a_clear_error() {
    let dir = site("activation-bad");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let root = dir.join("root");
    let mut server = Weft::start(
        &dir,
        &["--listen", "127.0.0.1:0", "--root", root.to_str().unwrap()],
        &[udp.as_raw_fd()],
        &[],
    );
    assert_eq!(server.wait_exit(), Exit::Code(1));
    assert!(
        server
            .log()
            .contains("descriptor 3 (unknown) is not a listening stream socket"),
        "log:\n{}",
        server.log()
    );
}

#[test]
fn names_that_do_not_match_the_count_stop_the_start() {
    let dir = site("activation-names");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let root = dir.join("root");
    let mut server = Weft::start(
        &dir,
        &["--listen", "127.0.0.1:0", "--root", root.to_str().unwrap()],
        &[listener.as_raw_fd()],
        &["LISTEN_FDNAMES=a:b".into()],
    );
    assert_eq!(server.wait_exit(), Exit::Code(1));
    assert!(
        server
            .log()
            .contains("socket activation: invalid LISTEN_FDNAMES"),
        "log:\n{}",
        server.log()
    );
}

/// Receives one notification (bounded wait).
fn recv_notify(sock: &UnixDatagram, server: &Weft) -> String {
    let mut buf = [0u8; 512];
    match sock.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => panic!("no notification: {e}; log:\n{}", server.log()),
    }
}

#[test]
fn sd_notify_tells_ready_reloading_and_stopping() {
    let dir = site("activation-notify");
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let root = dir.join("root");
    let mut server = Weft::start(
        &dir,
        &[
            "--listen",
            &format!("{addr}=thread"),
            "--root",
            root.to_str().unwrap(),
        ],
        &[listener.as_raw_fd()],
        &[format!("NOTIFY_SOCKET={}", path.display())],
    );
    assert_eq!(recv_notify(&sock, &server).trim(), "READY=1");
    assert_eq!(get_index(addr, &server).status, 200);
    server.signal(libc::SIGHUP);
    let reloading = recv_notify(&sock, &server);
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading}");
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading}"
    );
    assert_eq!(recv_notify(&sock, &server).trim(), "READY=1");
    server.signal(libc::SIGTERM);
    assert_eq!(recv_notify(&sock, &server).trim(), "STOPPING=1");
    assert_eq!(server.wait_exit(), Exit::Code(0));
}
