//! The one way the tests start the `weft` binary. [`Launch`] says how (arguments, a
//! configuration file, environment, sockets handed over as systemd hands them, a descriptor
//! limit); [`Launch::start`] returns the running server, a [`Weft`], once it has printed the
//! address of each listener it waits for, and [`Launch::run`] runs a command to its end.
//!
//! A [`Weft`] writes its error log to `server.log` in its directory, is killed (and reaped) when
//! it drops, and leaves its directory for a test that failed, printing the path, so that the
//! log can be read.

use std::ffi::{CString, OsStr, OsString};
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for the server to print the addresses it serves on.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// A limit for [`Launch::run`] of a command that ends by itself (one that must not serve, a
/// help text): reached only by a server that started when it should not have.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The `weft` binary Cargo built for these tests.
pub fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_weft"))
}

/// Sends `sig` to process `pid`; panics if it cannot (the process is gone).
pub fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("pid fits");
    // SAFETY: kill takes no pointers.
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(r, 0, "kill {pid}: {}", io::Error::last_os_error());
}

/// How to start `weft`.
#[derive(Debug)]
#[must_use]
pub struct Launch {
    exe: PathBuf,
    /// The server's directory (its log, its configuration file); none for [`Launch::run`].
    dir: Option<PathBuf>,
    owns_dir: bool,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    /// Handed over at descriptors 3, 4, ... (`LISTEN_FDS`, `LISTEN_PID`).
    fds: Option<Vec<RawFd>>,
    /// RLIMIT_NOFILE (soft and hard) for the process.
    nofile: Option<u64>,
    /// How many `weft: serving ...` lines [`Launch::start`] waits for.
    listeners: usize,
}

impl Launch {
    /// `weft` with no arguments yet, for [`Launch::run`].
    pub fn new() -> Launch {
        Launch {
            exe: exe().to_path_buf(),
            dir: None,
            owns_dir: false,
            args: Vec::new(),
            env: Vec::new(),
            fds: None,
            nofile: None,
            listeners: 0,
        }
    }

    /// `weft serve` with debug logging, its log in `dir/server.log`; [`Launch::start`] waits
    /// for one listener. `dir` stays the test's to remove unless [`Launch::owns_dir`] hands it
    /// to the server.
    pub fn serve(dir: &Path) -> Launch {
        Launch {
            dir: Some(dir.to_path_buf()),
            listeners: 1,
            ..Launch::new()
        }
        .arg("serve")
        .env("WEFT_LOG", "debug")
    }

    /// Removes the directory when the server drops after a test that passed (it is kept, and
    /// its path printed, after one that panicked).
    pub fn owns_dir(mut self) -> Launch {
        self.owns_dir = true;
        self
    }

    /// Puts `arg` before every argument given so far (a wrapper's first: the program it runs).
    pub fn pre_arg(mut self, arg: impl AsRef<OsStr>) -> Launch {
        self.args.insert(0, arg.as_ref().to_os_string());
        self
    }

    /// Runs the executable at `exe` instead of the one Cargo built.
    pub fn exe(mut self, exe: &Path) -> Launch {
        self.exe = exe.to_path_buf();
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Launch {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Writes `toml` as `weft.toml` in the server's directory and passes `--config` with it.
    pub fn config(self, toml: &str) -> Launch {
        let path = self
            .dir
            .as_ref()
            .expect("a configuration file goes in the server's directory")
            .join("weft.toml");
        fs::write(&path, toml).expect("write config");
        self.arg("--config").arg(path)
    }

    /// Sets an environment variable of the process.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.env
            .push((name.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Hands `fds` over as systemd's socket activation does: at descriptors 3, 4, ... with
    /// `LISTEN_FDS` and `LISTEN_PID` set, in an environment of `PATH` and what [`Launch::env`]
    /// adds. Standard output joins the log, as systemd's journal takes both. The listening
    /// sockets are the test's, already queueing connections, so [`Launch::start`] waits for
    /// no address.
    pub fn hand_over(mut self, fds: &[RawFd]) -> Launch {
        self.fds = Some(fds.to_vec());
        self.listeners = 0;
        self
    }

    /// Starts the process with at most `n` open descriptors (soft and hard limit, so that it
    /// cannot raise it).
    pub fn nofile(mut self, n: u64) -> Launch {
        self.nofile = Some(n);
        self
    }

    /// How many listeners [`Launch::start`] waits for (each printed as `weft: serving ...`).
    pub fn listeners(mut self, n: usize) -> Launch {
        self.listeners = n;
        self
    }

    /// Starts the server and waits until it has printed the address of each listener it waits
    /// for; panics with its log if it does not.
    pub fn start(self) -> Weft {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Launch::start`], or why the server did not start: how it ended, and its log.
    // The child is reaped by pid (`Weft::kill`, `Weft::wait_exit`), as one started with
    // sockets handed over or adopted is, not through its `Child`.
    #[allow(clippy::zombie_processes)]
    pub fn try_start(self) -> Result<Weft, String> {
        let dir = self
            .dir
            .clone()
            .expect("Launch::serve gives the server its directory");
        let log = fs::File::create(dir.join("server.log")).expect("create server log");
        if let Some(fds) = &self.fds {
            let pid = self.spawn_handing_over(fds, &log);
            return Ok(Weft::adopt(pid, &dir).owning_dir(self.owns_dir));
        }
        let mut cmd = self.command();
        cmd.stdout(Stdio::piped()).stderr(Stdio::from(log));
        let mut child = cmd.spawn().expect("spawn weft");
        let stdout = child.stdout.take().expect("stdout");
        let mut weft = Weft::adopt(child.id(), &dir).owning_dir(self.owns_dir);
        let (tx, rx) = mpsc::channel();
        // The reader keeps draining standard output, so the server never blocks on a full
        // pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(serving) = Serving::parse(&line) {
                    let _ = tx.send(serving);
                }
            }
        });
        let end = Instant::now() + START_TIMEOUT;
        while weft.serving.len() < self.listeners {
            match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(serving) => weft.serving.push(serving),
                Err(_) => {
                    weft.kill();
                    let how = weft.exit.map_or("no exit status".into(), |s| s.to_string());
                    let log = weft.log();
                    // A server that did not start leaves its files whoever owns them.
                    weft.owns_dir = false;
                    return Err(format!(
                        "weft did not print its addresses ({how}); its log:\n{log}"
                    ));
                }
            }
        }
        Ok(weft)
    }

    /// Runs the command to its end (killed after `limit`: a server that started instead of
    /// failing) with its output captured.
    pub fn run(self, limit: Duration) -> Ran {
        let dir = super::unique_dir("run");
        let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
        let mut child = self
            .command()
            .stdout(fs::File::create(&out_path).expect("stdout file"))
            .stderr(fs::File::create(&err_path).expect("stderr file"))
            .spawn()
            .expect("spawn weft");
        let end = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text =
            |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
        let ran = Ran {
            status,
            stdout: text(&out_path),
            stderr: text(&err_path),
        };
        let _ = fs::remove_dir_all(&dir);
        ran
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(n, v)| (n, v)))
            .stdin(Stdio::null());
        if let Some(n) = self.nofile {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: runs in the forked child before exec; setrlimit is async-signal-safe and
            // reads only `lim`, a plain value copied into the closure.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                });
            }
        }
        cmd
    }

    fn spawn_handing_over(&self, fds: &[RawFd], log: &fs::File) -> u32 {
        assert!(
            self.nofile.is_none(),
            "no descriptor limit with sockets handed over"
        );
        let cstr = |bytes: &[u8]| CString::new(bytes).expect("no NUL");
        let var =
            |name: &OsStr, value: &OsStr| cstr(&[name.as_bytes(), b"=", value.as_bytes()].concat());
        let exe = cstr(self.exe.as_os_str().as_bytes());
        let mut argv = vec![exe.clone()];
        argv.extend(self.args.iter().map(|a| cstr(a.as_bytes())));
        let mut envp = vec![var("LISTEN_FDS".as_ref(), fds.len().to_string().as_ref())];
        if let Some(path) = std::env::var_os("PATH") {
            envp.push(var("PATH".as_ref(), &path));
        }
        envp.extend(self.env.iter().map(|(n, v)| var(n, v)));
        let pid = weft::sys_process::spawn_with_fds(&exe, &argv, &envp, fds, Some(log.as_raw_fd()))
            .expect("spawn weft");
        u32::try_from(pid).expect("a pid")
    }
}

/// One listener, as the server prints it: `weft: serving ROOT on SCHEME://ADDR/ (model: M)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serving {
    /// `http` or `https`.
    pub scheme: String,
    pub addr: SocketAddr,
    pub model: String,
}

impl Serving {
    fn parse(line: &str) -> Option<Serving> {
        let rest = line.strip_prefix("weft: serving ")?;
        let (_, url) = rest.rsplit_once(" on ")?;
        let (scheme, rest) = url.split_once("://")?;
        let (addr, rest) = rest.split_once('/')?;
        let model = rest.strip_prefix(" (model: ")?.strip_suffix(')')?;
        Some(Serving {
            scheme: scheme.to_string(),
            addr: addr.parse().ok()?,
            model: model.to_string(),
        })
    }
}

/// What a command that ran to its end left.
#[derive(Debug)]
pub struct Ran {
    /// `None`: it was killed at the limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// The exit code; `None` if it was killed (at the limit or by a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// A running `weft`: killed and reaped on drop, so a failing test leaves no server behind.
#[derive(Debug)]
pub struct Weft {
    pid: u32,
    serving: Vec<Serving>,
    dir: PathBuf,
    owns_dir: bool,
    reaped: bool,
    /// How it ended, once reaped.
    exit: Option<ExitStatus>,
}

impl Weft {
    /// A server process this test did not start itself (an upgrade's new process, a child of
    /// the test once the old one has exited if the test is a subreaper): killed and reaped on
    /// drop too; its log is `dir/server.log`.
    pub fn adopt(pid: u32, dir: &Path) -> Weft {
        Weft {
            pid,
            serving: Vec::new(),
            dir: dir.to_path_buf(),
            owns_dir: false,
            reaped: false,
            exit: None,
        }
    }

    fn owning_dir(mut self, owns: bool) -> Weft {
        self.owns_dir = owns;
        self
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The listeners it printed, in order.
    pub fn serving(&self) -> &[Serving] {
        &self.serving
    }

    /// The address of the first listener of `scheme` (`http` or `https`).
    pub fn addr_of(&self, scheme: &str) -> SocketAddr {
        self.serving
            .iter()
            .find(|s| s.scheme == scheme)
            .unwrap_or_else(|| panic!("no {scheme} listener in {:?}", self.serving))
            .addr
    }

    /// The server's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's error log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Sends `sig` to the server.
    pub fn signal(&self, sig: libc::c_int) {
        signal(self.pid, sig);
    }

    /// Waits up to `timeout` for the process to exit; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_reap() {
                return Some(status);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `timeout` for the process to exit; panics with its log if it does not.
    #[track_caller]
    pub fn exit_within(&mut self, timeout: Duration) -> ExitStatus {
        self.wait_exit(timeout)
            .unwrap_or_else(|| panic!("weft did not exit in {timeout:?}; its log:\n{}", self.log()))
    }

    /// Kills the process (SIGKILL) and reaps it, if it has not been reaped yet.
    pub fn kill(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: kill takes no pointers; the pid is not reaped yet, so it is still ours.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: `status` is a valid c_int for waitpid to fill.
            let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, 0) };
            if r > 0 {
                self.exit = Some(ExitStatus::from_raw(status));
            }
            // Else not a child (an adopted process whose parent lives on): nothing to reap.
            if r > 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                self.reaped = true;
                return;
            }
        }
    }

    fn try_reap(&mut self) -> Option<ExitStatus> {
        if !self.reaped {
            let mut status: libc::c_int = 0;
            // SAFETY: `status` is a valid c_int for waitpid to fill.
            let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, libc::WNOHANG) };
            if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                panic!("waitpid {}: {}", self.pid, io::Error::last_os_error());
            }
            if r > 0 {
                self.exit = Some(ExitStatus::from_raw(status));
                self.reaped = true;
            }
        }
        self.exit
    }
}

impl Drop for Weft {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "test failed; the server's files and error log are kept in {}",
                self.dir.display()
            );
        } else if self.owns_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
