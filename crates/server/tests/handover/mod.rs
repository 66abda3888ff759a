//! Starting the `weft` binary as systemd does (sockets at descriptor 3 on, `LISTEN_*` set),
//! for the socket-activation and upgrade tests.

// Each test file uses a different part of it.
#![allow(dead_code)]

use std::ffi::CString;
use std::fs;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{self, unique_dir, Conn, INDEX_HTML};
use weft::sys_process::{self as sp, Exit};

/// Longest wait for the server to start, answer or exit.
pub const WAIT: Duration = Duration::from_secs(20);

/// A `weft serve` process started as systemd would start it; killed (and reaped) on drop, so a
/// failing test leaves no server behind.
pub struct Weft {
    pub pid: sp::Pid,
    dir: PathBuf,
    reaped: bool,
}

impl Weft {
    /// Starts `weft serve ARGS` with `fds` at 3, 4, ... and `env` (`NAME=value`) added;
    /// standard output and error go to `dir/server.log`.
    pub fn start(dir: &Path, args: &[&str], fds: &[RawFd], env: &[String]) -> Weft {
        Weft::start_exe(Path::new(env!("CARGO_BIN_EXE_weft")), dir, args, fds, env)
    }

    /// [`Weft::start`] with the executable at `exe`.
    pub fn start_exe(exe: &Path, dir: &Path, args: &[&str], fds: &[RawFd], env: &[String]) -> Weft {
        let log = fs::File::create(dir.join("server.log")).expect("create log");
        let exe = CString::new(exe.to_str().expect("UTF-8 path")).unwrap();
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

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn signal(&self, sig: libc::c_int) {
        sp::kill(self.pid, sig).expect("signal weft");
    }

    /// Waits for the process to exit (bounded); its exit.
    pub fn wait_exit(&mut self) -> Exit {
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
pub fn site(name: &str) -> PathBuf {
    let dir = unique_dir(name);
    fs::create_dir(dir.join("root")).unwrap();
    fs::write(dir.join("root/index.html"), INDEX_HTML).unwrap();
    dir
}

/// `GET /` on a new connection to `addr`, retried until the server answers (it may still be
/// starting; the socket already queues connections).
pub fn get_index(addr: SocketAddr, server: &Weft) -> common::Response {
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

impl Weft {
    /// A server process this test did not start (an upgrade's new process, reparented to the
    /// test by [`become_subreaper`] once the old one exits): killed and reaped on drop too.
    pub fn adopt(pid: sp::Pid, dir: &Path) -> Weft {
        Weft {
            pid,
            dir: dir.to_path_buf(),
            reaped: false,
        }
    }
}

/// Makes this test process the parent of orphaned descendants (an upgrade's new process
/// after the old one exits), so that a test can wait for it and kill it.
pub fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers, no pointers.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(r, 0, "prctl: {}", std::io::Error::last_os_error());
}
