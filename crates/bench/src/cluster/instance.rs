//! One weft instance in its namespace: its configuration, start (waiting for `READY=1` on its
//! notify socket), zero-downtime upgrade (SIGUSR2, then `MAINPID=` of the successor), signals,
//! reaping and the final stop.

use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::pin::pin_child;
use super::{HEALTH, READY_WAIT, SHUTDOWN_GRACE, WEFT_PORT};
use crate::netns::Netns;

/// One weft instance in its namespace.
pub(crate) struct Instance {
    pub(crate) name: String,
    pub(crate) ns: Netns,
    pub(crate) addr: Ipv4Addr,
    pub(crate) conf: PathBuf,
    pub(crate) log: PathBuf,
    pub(crate) access: PathBuf,
    pub(crate) notify: UnixDatagram,
    pub(crate) notify_path: PathBuf,
    /// The process serving now (a new one after each upgrade).
    pub(crate) pid: Option<i32>,
    /// Every process it has had, for reaping and the final stop.
    pub(crate) pids: Vec<i32>,
    /// The core it runs on ([`Layout`]); an upgrade's new process inherits it.
    pub(crate) core: Option<usize>,
}

pub(crate) fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers; `pid` is a weft process this run started (or its
    // upgrade's successor, which it learned from MAINPID), never 0 or negative.
    unsafe { libc::kill(pid, sig) };
}

/// Waits up to `wait` for `pid` (a child, or an orphan adopted as subreaper) to exit; its
/// status, or `None` if it is still running or not ours to wait for.
pub(crate) fn reap(pid: i32, wait: Duration) -> Option<i32> {
    let end = Instant::now() + wait;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into our local; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(status);
        }
        if r < 0 || Instant::now() >= end {
            return None;
        }
        weft_fiber::sleep(Duration::from_millis(20));
    }
}

/// `exit N` or `signal N` from a wait status.
pub(crate) fn describe_status(status: Option<i32>) -> String {
    match status {
        Some(s) if libc::WIFEXITED(s) => format!("exit {}", libc::WEXITSTATUS(s)),
        Some(s) if libc::WIFSIGNALED(s) => format!("signal {}", libc::WTERMSIG(s)),
        Some(s) => format!("status {s}"),
        None => "not reaped".into(),
    }
}

impl Instance {
    /// Starts weft in the namespace and waits for `READY=1`.
    pub(crate) fn start(&mut self, weft: &Path) -> io::Result<()> {
        self.drain_notifications();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = self.ns.command(weft);
        cmd.args(["serve", "--config"])
            .arg(&self.conf)
            .env("NOTIFY_SOCKET", &self.notify_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        pin_child(&mut cmd, self.core.into_iter().collect());
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        // Reaped by pid (`reap`), as its upgraded successors are.
        drop(child);
        self.pid = Some(pid);
        self.pids.push(pid);
        let end = Instant::now() + READY_WAIT;
        loop {
            match self.recv(end)? {
                Some(m) if m.lines().any(|l| l == "READY=1") => return Ok(()),
                Some(_) => {}
                None => {
                    return Err(io::Error::other(format!(
                        "{}: not ready within {READY_WAIT:?}; see {}",
                        self.name,
                        self.log.display()
                    )))
                }
            }
        }
    }

    /// SIGUSR2, then waits until the old process names its ready successor (`MAINPID=`, sent
    /// once the new process has said it serves).
    pub(crate) fn upgrade(&mut self) -> io::Result<i32> {
        let old = self.pid.ok_or_else(|| io::Error::other("not running"))?;
        self.drain_notifications();
        signal(old, libc::SIGUSR2);
        let end = Instant::now() + READY_WAIT;
        loop {
            match self.recv(end)? {
                Some(m) => {
                    if let Some(p) = m.lines().find_map(|l| l.strip_prefix("MAINPID=")) {
                        let pid: i32 = p
                            .trim()
                            .parse()
                            .map_err(|_| io::Error::other(format!("MAINPID={p}")))?;
                        self.pid = Some(pid);
                        self.pids.push(pid);
                        return Ok(pid);
                    }
                }
                None => {
                    return Err(io::Error::other(format!(
                        "{}: no upgraded process within {READY_WAIT:?}; see {}",
                        self.name,
                        self.log.display()
                    )))
                }
            }
        }
    }

    fn recv(&self, end: Instant) -> io::Result<Option<String>> {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        self.notify.set_read_timeout(Some(left))?;
        let mut buf = [0u8; 512];
        match self.notify.recv(&mut buf) {
            Ok(n) => Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn drain_notifications(&self) {
        let _ = self.notify.set_nonblocking(true);
        let mut buf = [0u8; 512];
        while self.notify.recv(&mut buf).is_ok() {}
        let _ = self.notify.set_nonblocking(false);
    }

    /// Stops every process it has had: SIGTERM, then SIGKILL to what is left.
    pub(crate) fn stop(&mut self) {
        for &p in &self.pids {
            signal(p, libc::SIGTERM);
        }
        for &p in &self.pids {
            if reap(p, SHUTDOWN_GRACE + Duration::from_secs(1)).is_none() {
                signal(p, libc::SIGKILL);
                reap(p, Duration::from_secs(1));
            }
        }
        self.pids.clear();
        self.pid = None;
    }
}

/// weft's configuration for instance `addr`.
pub(crate) fn weft_config(site: &Path, access: &Path, addr: Ipv4Addr, model: &str) -> String {
    format!(
        "root = {site:?}
threads = 1
access_log = {access:?}
# Root makes the namespaces; the instances listen on their bridge addresses, a lab network.
allow_root = true

[[listen]]
addr = \"{addr}:{WEFT_PORT}\"
model = \"{model}\"
proxy_protocol = true

[timeouts]
shutdown_grace = \"{}s\"

[health]
path = \"{HEALTH}\"

[echo]
path = \"/echo\"
",
        SHUTDOWN_GRACE.as_secs()
    )
}
