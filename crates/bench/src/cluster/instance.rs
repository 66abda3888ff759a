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
use super::{Setup, HEALTH, READY_WAIT, SHUTDOWN_GRACE, WEFT_PORT};
use crate::netns::Netns;
use weft_sys::process::{self, Exit};
use weft_sys::signal::{Signal, SIGKILL, SIGTERM, SIGUSR2};

/// One weft instance in its namespace.
pub(crate) struct Instance {
    /// `w1`, `w2`, ...: its name in HAProxy's configuration and in the report.
    pub(crate) name: String,
    pub(crate) ns: Netns,
    pub(crate) addr: Ipv4Addr,
    conf: PathBuf,
    log: PathBuf,
    /// weft's access log.
    pub(crate) access: PathBuf,
    notify: UnixDatagram,
    notify_path: PathBuf,
    /// The process serving now (a new one after each upgrade).
    pub(crate) pid: Option<i32>,
    /// Every process it has had, for reaping and the final stop.
    pids: Vec<i32>,
    /// The core it runs on ([`Layout`](super::pin::Layout)); an upgrade's new process
    /// inherits it.
    core: Option<usize>,
}

/// Sends `sig` to process `pid`: a weft process this run started (or its upgrade's
/// successor, which it learned from MAINPID).
pub(crate) fn signal(pid: i32, sig: Signal) {
    let _ = process::kill(pid, sig);
}

/// Waits up to `wait` for `pid` (a child, or an orphan adopted as subreaper) to exit; how it
/// ended, or `None` if it is still running or not ours to wait for.
fn reap(pid: i32, wait: Duration) -> Option<Exit> {
    let end = Instant::now() + wait;
    loop {
        match process::try_wait_child(pid) {
            Ok(Some((_, exit))) => return Some(exit),
            Ok(None) if Instant::now() < end => weft_fiber::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// `exit N` or `signal N`, or `not reaped`.
pub(crate) fn describe_status(status: Option<Exit>) -> String {
    status.map_or_else(|| "not reaped".into(), |e| e.to_string())
}

impl Instance {
    /// Instance `i` (`w1` for 0) in namespace `ns` at `addr`: its configuration, logs and
    /// notify socket in the setup's work folder, its core from the layout; not started.
    pub(crate) fn new(i: usize, ns: Netns, addr: Ipv4Addr, setup: &Setup) -> io::Result<Instance> {
        let work = &setup.work;
        let name = format!("w{}", i + 1);
        let conf = work.join(format!("{name}.toml"));
        let access = work.join(format!("{name}.access.log"));
        let config = weft_config(&work.join("site"), &access, addr, &setup.model);
        fs::write(&conf, config)?;
        let notify_path = work.join(format!("{name}.notify"));
        let notify = UnixDatagram::bind(&notify_path)?;
        Ok(Instance {
            log: work.join(format!("{name}.log")),
            name,
            ns,
            addr,
            conf,
            access,
            notify,
            notify_path,
            pid: None,
            pids: Vec::new(),
            core: setup.layout.instance_core(i),
        })
    }

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
        self.wait_for("not ready", |m| {
            Ok(m.lines().any(|l| l == "READY=1").then_some(()))
        })
    }

    /// SIGUSR2, then waits until the old process names its ready successor (`MAINPID=`, sent
    /// once the new process has said it serves).
    pub(crate) fn upgrade(&mut self) -> io::Result<i32> {
        let old = self.pid.ok_or_else(|| io::Error::other("not running"))?;
        self.drain_notifications();
        signal(old, SIGUSR2);
        let pid: i32 = self.wait_for("no upgraded process", |m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MAINPID="))
                .map(|p| {
                    p.trim()
                        .parse()
                        .map_err(|_| io::Error::other(format!("MAINPID={p}")))
                })
                .transpose()
        })?;
        self.pid = Some(pid);
        self.pids.push(pid);
        Ok(pid)
    }

    /// Waits up to [`READY_WAIT`] for a notification that `found` takes (`Some`); where none
    /// comes, an error that says the instance is `missing` that.
    fn wait_for<T>(
        &self,
        missing: &str,
        mut found: impl FnMut(&str) -> io::Result<Option<T>>,
    ) -> io::Result<T> {
        let end = Instant::now() + READY_WAIT;
        while let Some(m) = self.recv(end)? {
            if let Some(v) = found(&m)? {
                return Ok(v);
            }
        }
        Err(io::Error::other(format!(
            "{}: {missing} within {READY_WAIT:?}; see {}",
            self.name,
            self.log.display()
        )))
    }

    /// The next notification, or `None` once `end` has passed.
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

    /// Drops the notifications already sent (by a process before this start or upgrade).
    fn drain_notifications(&self) {
        let _ = self.notify.set_nonblocking(true);
        let mut buf = [0u8; 512];
        while self.notify.recv(&mut buf).is_ok() {}
        let _ = self.notify.set_nonblocking(false);
    }

    /// Waits up to `wait` for process `pid` of this instance to exit; its status. One that
    /// exited is forgotten; one that did not stays listed, for the final stop.
    pub(crate) fn reap_one(&mut self, pid: i32, wait: Duration) -> Option<Exit> {
        let st = reap(pid, wait);
        if st.is_some() {
            self.pids.retain(|&p| p != pid);
        }
        st
    }

    /// Forgets the processes other than the serving one that have exited (a rolling
    /// upgrade's old ones, once drained).
    pub(crate) fn reap_old(&mut self) {
        let cur = self.pid;
        self.pids
            .retain(|&p| Some(p) == cur || reap(p, Duration::from_millis(10)).is_none());
    }

    /// Stops every process it has had: SIGTERM, then SIGKILL to what is left.
    pub(crate) fn stop(&mut self) {
        for &p in &self.pids {
            signal(p, SIGTERM);
        }
        for &p in &self.pids {
            if reap(p, SHUTDOWN_GRACE + Duration::from_secs(1)).is_none() {
                signal(p, SIGKILL);
                reap(p, Duration::from_secs(1));
            }
        }
        self.pids.clear();
        self.pid = None;
    }
}

/// weft's configuration for instance `addr`.
fn weft_config(site: &Path, access: &Path, addr: Ipv4Addr, model: &str) -> String {
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
