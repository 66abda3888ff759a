//! Listening sockets handed to this process, readiness, and the zero-downtime upgrade.
//!
//! One protocol carries sockets in, whoever hands them over: systemd's socket activation
//! (`LISTEN_PID` = this pid, `LISTEN_FDS` = how many, descriptors from 3 on, `LISTEN_FDNAMES`
//! = their names, colon-separated). The previous weft process of an upgrade (SIGUSR2) starts
//! the binary on disk the same way, so one code path takes both, and adds
//! [`READY_FD`]: a pipe the new process writes one byte to once it serves, after which the old
//! one drains and exits.
//!
//! A socket is matched to a configured listener by name (`[[listen]] name`, systemd's
//! `FileDescriptorName=`) or by its bound address; a listener with no socket handed over binds
//! its own. Readiness and state changes also go to systemd's `NOTIFY_SOCKET` (`sd_notify`),
//! when it is set.

use std::ffi::{CString, OsString};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use sd_notify::NotifyState;
use socket2::{Socket, Type};

use crate::config::Listen;
use weft_sys::process::{self as sp, Pid};

/// Names the descriptor a new process of an upgrade writes one byte to when it is ready.
pub const READY_FD: &str = "WEFT_UPGRADE_READY_FD";

/// Values a server hands to the one its upgrade starts, in the new process's environment
/// (the TLS session-ticket secret), taken out of the environment by [`Activation::from_env`].
const CARRIED: &[&str] = &["WEFT_TICKET_SECRET"];

/// What [`Activation::from_env`] found of [`CARRIED`].
static CARRIED_IN: Mutex<Vec<(&str, String)>> = Mutex::new(Vec::new());

/// What the next upgrade hands on ([`carry`]).
static CARRIED_OUT: Mutex<Vec<(&str, String)>> = Mutex::new(Vec::new());

/// The value of `name` (one of [`CARRIED`]) that the server before this one handed over at
/// an upgrade, if any.
pub(crate) fn carried(name: &str) -> Option<String> {
    let got = CARRIED_IN.lock().unwrap_or_else(|e| e.into_inner());
    got.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
}

/// Hands `value` on as `name` (one of [`CARRIED`]) to the server an upgrade starts.
pub(crate) fn carry(name: &'static str, value: String) {
    debug_assert!(CARRIED.contains(&name));
    let mut out = CARRIED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    out.retain(|(n, _)| *n != name);
    out.push((name, value));
}
/// The name of a socket passed without one (as systemd's `sd_listen_fds_with_names` says).
pub(crate) const UNNAMED: &str = "unknown";

/// A listening socket this process was given.
#[derive(Debug)]
pub struct Inherited {
    /// The socket, listening already.
    pub listener: TcpListener,
    /// Its bound address.
    pub addr: SocketAddr,
    /// Its `LISTEN_FDNAMES` entry (`unknown` when none was given).
    pub name: String,
}

/// What the process that started this one handed over: listening sockets and, after an
/// upgrade, the pipe to report readiness on.
#[derive(Debug, Default)]
pub struct Activation {
    /// The listening sockets, in the order they were passed.
    pub listeners: Vec<Inherited>,
    ready: Option<OwnedFd>,
}

impl Activation {
    /// Takes the sockets of `LISTEN_FDS` (only when `LISTEN_PID` is this process) and the
    /// upgrade's ready pipe, and removes the variables so that no child (a CGI script, a later
    /// upgrade) mistakes them for its own. Call it before starting threads: it changes the
    /// environment. An error (a count that does not match its names, a descriptor that is not
    /// a listening TCP socket) is for the caller to report and stop on.
    pub fn from_env() -> io::Result<Activation> {
        let ours = std::env::var(sp::LISTEN_PID)
            .ok()
            .and_then(|p| p.parse::<Pid>().ok())
            == Some(sp::pid());
        // Variables meant for another process (a parent that leaked them) are ignored, names
        // and all, as sd_listen_fds does.
        let fds = if ours {
            sd_notify::listen_fds_with_names().map(|fds| fds.collect())
        } else {
            Ok(Vec::new())
        };
        let ready = std::env::var(READY_FD).ok();
        for var in [sp::LISTEN_PID, "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD] {
            std::env::remove_var(var);
        }
        for &name in CARRIED {
            if let Some(v) = std::env::var_os(name) {
                std::env::remove_var(name);
                if ours {
                    let v = v.to_string_lossy().into_owned();
                    CARRIED_IN
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((name, v));
                }
            }
        }
        let fds: Vec<(RawFd, String)> =
            fds.map_err(|e| io::Error::new(e.kind(), format!("socket activation: {e}")))?;
        let mut listeners = Vec::with_capacity(fds.len());
        for (fd, name) in fds {
            // SAFETY: sd-notify checked that `fd` is open (and set FD_CLOEXEC on it); the
            // LISTEN_FDS protocol hands the descriptors from 3 on to this process, and the
            // variables are removed above, so no other call takes ownership of it again.
            let socket = unsafe { Socket::from_raw_fd(fd) };
            listeners.push(inherited(socket, fd, name)?);
        }
        let ready = match ready {
            Some(v) if ours => {
                let fd: RawFd = v
                    .parse()
                    .map_err(|_| io::Error::other(format!("{READY_FD}: bad descriptor `{v}`")))?;
                if fd != 3 + listeners.len() as RawFd || !weft_sys::fd::fd_is_open(fd) {
                    return Err(io::Error::other(format!(
                        "{READY_FD}={fd}: not the open descriptor after the sockets"
                    )));
                }
                // SAFETY: `fd` is open (checked above); the upgrade protocol hands it to this
                // process alone (the variable is removed above, so it is taken once).
                Some(unsafe { OwnedFd::from_raw_fd(fd) })
            }
            _ => None,
        };
        if let Some(fd) = &ready {
            weft_sys::fd::set_cloexec(fd.as_raw_fd())?;
        }
        Ok(Activation { listeners, ready })
    }

    /// Reports that this process serves: one byte down the upgrade's ready pipe (then closed)
    /// and `READY=1` to systemd.
    pub(crate) fn ready(&mut self) {
        if let Some(fd) = self.ready.take() {
            if let Err(e) = std::io::Write::write_all(&mut std::fs::File::from(fd), b"R") {
                log::error!("upgrade: cannot tell the old process this one is ready: {e}");
            }
        }
        notify(&[NotifyState::Ready]);
    }

    /// Takes the sockets that belong to `l`: those named as it is, or bound to its address. A
    /// listener on port 0 takes those of one port on its IP: an upgrade hands over the port
    /// that its previous process resolved, and clients already use it.
    pub(crate) fn take_for(&mut self, l: &Listen) -> Vec<TcpListener> {
        let mut out = Vec::new();
        let mut port = (l.addr.port() != 0).then_some(l.addr.port());
        let mut i = 0;
        while i < self.listeners.len() {
            let s = &self.listeners[i];
            let same_addr =
                s.addr.ip() == l.addr.ip() && *port.get_or_insert(s.addr.port()) == s.addr.port();
            if l.name.as_deref() == Some(s.name.as_str()) || same_addr {
                out.push(self.listeners.remove(i).listener);
            } else {
                i += 1;
            }
        }
        out
    }
}

/// Checks that a handed-over descriptor is a listening TCP socket.
fn inherited(socket: Socket, fd: RawFd, name: String) -> io::Result<Inherited> {
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket activation: descriptor {fd} ({name}) {why}"),
        )
    };
    let not_listening = "is not a listening stream socket (use ListenStream= and Accept=no)";
    // A descriptor that is no socket at all fails these calls (ENOTSOCK).
    let stream = socket
        .r#type()
        .map_err(|e| bad(&format!("{not_listening}: {e}")))?;
    let listening = socket
        .is_listener()
        .map_err(|e| bad(&format!("{not_listening}: {e}")))?;
    if stream != Type::STREAM || !listening {
        return Err(bad(not_listening));
    }
    let addr = socket
        .local_addr()
        .map_err(|e| bad(&format!("has no address: {e}")))?
        .as_socket()
        .ok_or_else(|| bad("is not an IP socket"))?;
    Ok(Inherited {
        listener: socket.into(),
        addr,
        name,
    })
}

/// Sends `state` to systemd when `NOTIFY_SOCKET` is set (a failure is logged, not fatal: the
/// server serves the same without a service manager).
pub(crate) fn notify(state: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        log::warn!("sd_notify: {e}");
    }
}

/// How long a new process of an upgrade may take to report ready before it is stopped.
pub const UPGRADE_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a new process that closed its ready pipe unready may take to exit before it is
/// killed.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Starts the binary on disk with this process's arguments and listening sockets.
#[derive(Debug)]
pub(crate) struct Upgrader {
    exe: CString,
    argv: Vec<CString>,
    /// Copies of every listening socket (the process model's included, which its master
    /// accepts on) and the name each is handed over with.
    /// Emptied at shutdown, so that connections to a server that is going away are refused
    /// rather than queued where nothing will accept them.
    sockets: Mutex<Vec<(OwnedFd, String)>>,
    busy: AtomicBool,
}

/// Why an upgrade (`ShutdownHandle::upgrade`, SIGUSR2) did not happen; this server serves on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpgradeError {
    /// Another upgrade is under way.
    InProgress,
    /// The server is shutting down: its listening sockets are closed.
    ShuttingDown,
    /// The new process could not be started (the program on disk, its environment, a pipe).
    Start(String),
    /// The new process started but did not report ready (in time, or at all); it was
    /// stopped. The text says what was seen, and how it exited where it did.
    NotReady(String),
}

impl std::fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpgradeError::InProgress => f.write_str("an upgrade is already in progress"),
            UpgradeError::ShuttingDown => f.write_str("the server is shutting down"),
            UpgradeError::Start(why) | UpgradeError::NotReady(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for UpgradeError {}

impl Upgrader {
    /// Records the executable's path now (`/proc/self/exe`: once the file is replaced, the
    /// link reads "... (deleted)", while the path names the new binary) and the arguments.
    pub(crate) fn new(sockets: Vec<(OwnedFd, String)>) -> io::Result<Upgrader> {
        let args: Vec<OsString> = std::env::args_os().collect();
        let exe = match std::env::current_exe() {
            Ok(p) => p.into_os_string(),
            Err(_) => args.first().cloned().unwrap_or_default(),
        };
        let c = |s: &OsString| {
            CString::new(s.as_bytes()).map_err(|_| io::Error::other("argument with a NUL byte"))
        };
        Ok(Upgrader {
            exe: c(&exe)?,
            argv: args.iter().map(c).collect::<io::Result<_>>()?,
            sockets: Mutex::new(sockets),
            busy: AtomicBool::new(false),
        })
    }

    /// Starts the new process and waits up to `timeout` for it to report ready. On any
    /// failure the new process is stopped (if it started) and this one serves on; the error
    /// says why.
    pub(crate) fn start(&self, timeout: Duration) -> Result<Pid, UpgradeError> {
        if self.busy.swap(true, SeqCst) {
            return Err(UpgradeError::InProgress);
        }
        let result = self.start_once(timeout);
        self.busy.store(false, SeqCst);
        result
    }

    /// Closes this process's copies of the listening sockets (at shutdown): no upgrade after.
    pub(crate) fn close(&self) {
        self.sockets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn start_once(&self, timeout: Duration) -> Result<Pid, UpgradeError> {
        let sockets = self.sockets.lock().unwrap_or_else(|e| e.into_inner());
        if sockets.is_empty() {
            return Err(UpgradeError::ShuttingDown);
        }
        let start = UpgradeError::Start;
        let (read, write) = weft_sys::fd::pipe().map_err(|e| start(format!("pipe: {e}")))?;
        let n = sockets.len();
        // systemd's separator may not appear in a name.
        let names: Vec<String> = sockets.iter().map(|(_, s)| s.replace(':', "_")).collect();
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| {
                ![sp::LISTEN_PID, "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD]
                    .iter()
                    .chain(CARRIED)
                    .any(|v| k.as_bytes() == v.as_bytes())
            })
            .filter_map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        for (k, v) in [
            ("LISTEN_FDS", n.to_string()),
            ("LISTEN_FDNAMES", names.join(":")),
            (READY_FD, (3 + n).to_string()),
        ] {
            env.push(CString::new(format!("{k}={v}")).map_err(|e| start(e.to_string()))?);
        }
        for (k, v) in CARRIED_OUT.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            env.push(CString::new(format!("{k}={v}")).map_err(|e| start(e.to_string()))?);
        }
        let mut fds: Vec<RawFd> = sockets.iter().map(|(f, _)| f.as_raw_fd()).collect();
        fds.push(write.as_raw_fd());
        let pid = sp::spawn_with_fds(&self.exe, &self.argv, &env, &fds, None)
            .map_err(|e| start(format!("cannot start {}: {e}", self.exe.to_string_lossy())))?;
        drop(sockets);
        // Only the new process holds the write end now: end of file means it is gone.
        drop(write);
        let mut read = std::fs::File::from(read);
        // Reaps the new process, stopping it if it does not end by itself soon (a process
        // that closed the pipe is on its way out; one that is late is stopped at once).
        let failed = |why: String, wait: Duration| {
            let end = std::time::Instant::now() + wait;
            let exit = loop {
                match sp::try_wait(pid) {
                    Ok(Some((_, exit))) => break Ok(exit),
                    Ok(None) if std::time::Instant::now() < end => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        let _ = sp::kill(pid, weft_sys::signal::SIGKILL);
                        break sp::wait(pid);
                    }
                    Err(e) => break Err(e),
                }
            };
            UpgradeError::NotReady(match exit {
                // spawn_with_fds's status for an exec that failed.
                Ok(sp::Exit::Code(127)) => format!(
                    "{why} (exit 127: {} could not be run, or failed at once)",
                    self.exe.to_string_lossy()
                ),
                Ok(exit) => format!("{why} (it exited: {exit:?})"),
                Err(_) => why,
            })
        };
        match weft_sys::poll::poll_readable(read.as_raw_fd(), timeout) {
            Ok(true) => {}
            Ok(false) => {
                let why = format!("the new process was not ready in {timeout:?}");
                return Err(failed(why, Duration::ZERO));
            }
            Err(e) => {
                let why = format!("waiting for the new process: {e}");
                return Err(failed(why, Duration::ZERO));
            }
        }
        let mut byte = [0u8; 1];
        match read.read(&mut byte) {
            Ok(1) => Ok(pid),
            Ok(_) => Err(failed(
                "the new process ended before it was ready".into(),
                EXIT_WAIT,
            )),
            Err(e) => Err(failed(
                format!("reading the new process's ready pipe: {e}"),
                Duration::ZERO,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upgrade that cannot begin says why with a type the caller can match, and starts
    /// nothing: one after shutdown closed the sockets, one while another is under way.
    #[test]
    fn an_upgrade_that_cannot_begin_says_why() {
        let up = Upgrader::new(Vec::new()).unwrap();
        assert_eq!(up.start(Duration::ZERO), Err(UpgradeError::ShuttingDown));
        up.busy.store(true, SeqCst);
        assert_eq!(up.start(Duration::ZERO), Err(UpgradeError::InProgress));
        assert_eq!(
            UpgradeError::InProgress.to_string(),
            "an upgrade is already in progress"
        );
    }
}
