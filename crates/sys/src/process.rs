//! Processes: fork (refused while the process has other threads), waiting for and signalling
//! children and process groups, the parent-death signal, `_exit`, pidfds, starting a program
//! with inherited sockets (systemd's `LISTEN_FDS` protocol), a flag other processes poll,
//! the child subreaper, and network namespaces.
//!
//! fork(2) copies only the calling thread: in a process with other threads, a lock one of
//! them held stays locked forever in the child. So [`fork`] refuses unless the process has
//! exactly one thread, checked from `/proc/self/stat` on every call (a few microseconds
//! against the fork's hundred or so), which makes it a safe function. [`spawn_with_fds`]
//! forks from any process, and makes only async-signal-safe calls until `execve`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;

use crate::cvt;
use crate::epoll::EventFd;
use crate::signal::Signal;

/// A process id.
pub type Pid = libc::pid_t;

/// The number of threads of this process (field 20 of `/proc/self/stat`).
pub fn thread_count() -> io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))?;
    // After ')': field 3 (state) is the first; num_threads is field 20.
    rest.split_ascii_whitespace()
        .nth(17)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("malformed /proc/self/stat"))
}

/// Which side of a fork this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// In the new process.
    Child,
    /// In the calling process; the child's id.
    Parent(Pid),
}

/// fork(2), only from a single-threaded process (else an error of kind `Unsupported`).
pub fn fork() -> io::Result<Forked> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("fork refused: the process has {threads} threads (fork needs exactly one)"),
        ));
    }
    // SAFETY: the process has exactly one thread (checked just above, and only this thread
    // could start another), so the child gets a consistent copy of every lock and allocator
    // state; fork takes no pointers.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// exit status
    Code(i32),
    /// killed by this signal
    Signal(i32),
}

impl Exit {
    fn from_status(status: libc::c_int) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

impl std::fmt::Display for Exit {
    /// `exit N` or `signal N`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// waitpid(2) without blocking: `pid` (or -1 for any child). `Ok(None)`: none has ended yet;
/// `ECHILD` (no such child, or none at all) also reads as `Ok(None)`.
pub fn try_wait(pid: Pid) -> io::Result<Option<(Pid, Exit)>> {
    match try_wait_child(pid) {
        Err(e) if e.raw_os_error() == Some(libc::ECHILD) => Ok(None),
        r => r,
    }
}

/// As [`try_wait`], but `pid` not being a child of this process (`ECHILD`: never was, or
/// already reaped) is an error, for a caller that must tell "still running" from "not ours".
pub fn try_wait_child(pid: Pid) -> io::Result<Option<(Pid, Exit)>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live c_int for waitpid to fill.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        match r {
            0 => return Ok(None),
            -1 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            pid => return Ok(Some((pid, Exit::from_status(status)))),
        }
    }
}

/// pidfd_open(2): a descriptor that polls readable once `pid` (a child not yet reaped) has
/// exited. Fails with `ENOSYS` on kernels before 5.3.
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no pointers; the result is checked below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor (close-on-exec, as pidfd_open makes them) nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// waitpid(2), blocking until `pid` ends (restarted after signals).
pub fn wait(pid: Pid) -> io::Result<Exit> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: as in `try_wait_child`.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(Exit::from_status(status));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// kill(2). A process that is already gone (ESRCH) is not an error.
pub fn kill(pid: Pid, sig: Signal) -> io::Result<()> {
    if pid <= 0 {
        // kill(0) or kill(-n) would signal a whole process group: `kill_group` says so.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes no pointers. Callers pass ids of processes they started (their own
    // unreaped children, which the kernel cannot reuse until they are reaped, or a successor
    // they learned of from the process itself).
    match cvt(unsafe { libc::kill(pid, sig) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// kill(2) of a whole process group: `sig` to every process in group `pgid` (a CGI script and
/// whatever it started). A group that is already empty (ESRCH) is not an error.
pub fn kill_group(pgid: Pid, sig: Signal) -> io::Result<()> {
    if pgid <= 1 {
        // kill(0) or kill(-1) would signal our own group or every process we may signal.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes no pointers. Callers pass the id of a child they started as the
    // leader of its own group (`process_group(0)`), unreaped or reaped just before: while the
    // leader is unreaped, or any member of its group lives, the id cannot be reused, so the
    // group is the one that child made (with no member left the call fails with ESRCH).
    match cvt(unsafe { libc::kill(-pgid, sig) }) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        r => r.map(drop),
    }
}

/// Asks the kernel to send `sig` to this process when the thread that forked it exits
/// (prctl `PR_SET_PDEATHSIG`), then checks that the parent is still `parent`: if it died
/// before the request took effect, the signal would never come, so this returns false.
pub fn die_with_parent(sig: Signal, parent: Pid) -> io::Result<bool> {
    // SAFETY: PR_SET_PDEATHSIG takes the signal number as an integer argument, no pointers.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) })?;
    Ok(parent_pid() == parent)
}

/// getppid(2).
pub fn parent_pid() -> Pid {
    // SAFETY: getppid cannot fail and takes no arguments.
    unsafe { libc::getppid() }
}

/// getpid(2).
pub fn pid() -> Pid {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

/// Ends this process at once with `code`: no destructors, no atexit handlers, no flushing of
/// buffers the process inherited from its parent (a forked child must not write those twice).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns; nothing is left to unwind.
    unsafe { libc::_exit(code) }
}

/// A flag other processes can wait on with `poll`: an eventfd, readable while raised. The
/// `process` model's master raises it while connection processes are scarce or shutdown has
/// begun; lingering children wait on it beside their connection instead of looking every few
/// milliseconds. Inherited across fork, closed on exec.
#[derive(Debug)]
pub struct PollFlag {
    efd: EventFd,
    raised: bool,
}

impl PollFlag {
    /// A lowered flag.
    pub fn new() -> io::Result<PollFlag> {
        Ok(PollFlag {
            efd: EventFd::new()?,
            raised: false,
        })
    }

    /// Raises or lowers the flag (nothing when it is already so). A write leaves the counter
    /// non-zero (readable), a read sets it to 0; either's only failure here, EAGAIN on a full
    /// or an empty counter, already leaves the state asked for.
    pub fn set(&mut self, on: bool) {
        if on == self.raised {
            return;
        }
        if on {
            self.efd.notify();
        } else {
            self.efd.drain();
        }
        self.raised = on;
    }

    /// True while raised.
    pub fn is_raised(&self) -> bool {
        self.raised
    }

    /// The descriptor to `poll` for input: readable while the flag is raised.
    pub fn raw_fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }
}

/// The environment variable that [`spawn_with_fds`] fills with the child's own pid (systemd's
/// `LISTEN_PID`, which a process checks against `getpid` before it takes `LISTEN_FDS`).
pub const LISTEN_PID: &str = "LISTEN_PID";

/// Starts `exe` with `argv` and `env` (each `NAME=value`) in a new process whose descriptors
/// 3, 4, ... are `fds` (in order, inheritable) and whose `LISTEN_PID` is its own pid, as
/// systemd's socket activation passes sockets. Every other descriptor of this process is
/// `O_CLOEXEC` (the standard library and socket2 open them so), so the new program gets only
/// these. Works from a process with threads: between fork and exec the child makes only
/// async-signal-safe calls (fcntl, dup2, close, getpid, sigprocmask, execve, _exit) and
/// touches only memory prepared before the fork. `output`, if given, becomes the child's
/// standard output and error (else it shares this process's). Returns the child's pid; a
/// failed exec ends the child with status 127.
pub fn spawn_with_fds(
    exe: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    env: &[std::ffi::CString],
    fds: &[RawFd],
    output: Option<RawFd>,
) -> io::Result<Pid> {
    use std::ffi::c_char;
    // `LISTEN_PID=` and room for any pid's digits and the terminating NUL, filled in the child.
    let mut listen_pid = format!("{LISTEN_PID}=").into_bytes();
    let digits_at = listen_pid.len();
    listen_pid.resize(digits_at + 24, 0);
    let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp: Vec<*const c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(listen_pid.as_ptr().cast());
    envp.push(std::ptr::null());
    // Where each descriptor is parked above the target range first, so that moving one into
    // place never overwrites another still to be moved.
    let mut parked: Vec<RawFd> = vec![-1; fds.len()];
    let first_free = 3 + fds.len() as RawFd;
    // SAFETY: fork takes no arguments. In the child only async-signal-safe functions run until
    // execve or _exit, on memory allocated above (no allocation, no lock, no unwinding), which
    // is what POSIX allows after fork in a multithreaded process.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: (the whole block) each call is async-signal-safe; the pointers are into
            // `listen_pid`, `parked`, `argv_ptrs` and `envp`, which this copy of the address
            // space owns and nothing else uses; the descriptors in `fds` are open (the caller
            // holds them) and the rest are numbers this block just created.
            unsafe {
                if let Some(out) = output {
                    // First: `out` may have a number that the sockets are moved onto below.
                    if libc::dup2(out, 1) < 0 || libc::dup2(out, 2) < 0 {
                        libc::_exit(127);
                    }
                }
                for (i, &fd) in fds.iter().enumerate() {
                    let p = libc::fcntl(fd, libc::F_DUPFD, first_free);
                    if p < 0 {
                        libc::_exit(127);
                    }
                    *parked.as_mut_ptr().add(i) = p;
                }
                for (i, &p) in parked.iter().enumerate() {
                    // dup2 leaves the new number without FD_CLOEXEC: it survives exec.
                    if libc::dup2(p, 3 + i as RawFd) < 0 {
                        libc::_exit(127);
                    }
                    libc::close(p);
                }
                let mut pid = libc::getpid() as u64;
                let mut tmp = [0u8; 20];
                let mut n = 0;
                loop {
                    tmp[n] = b'0' + (pid % 10) as u8;
                    n += 1;
                    pid /= 10;
                    if pid == 0 {
                        break;
                    }
                }
                let out = listen_pid.as_mut_ptr().add(digits_at);
                for j in 0..n {
                    *out.add(j) = tmp[n - 1 - j];
                }
                *out.add(n) = 0;
                // The signal mask survives exec; this thread's may block some (none of
                // weft's do, but an embedder's might).
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                libc::execve(exe.as_ptr(), argv_ptrs.as_ptr(), envp.as_ptr());
                libc::_exit(127)
            }
        }
        pid => Ok(pid),
    }
}

/// Makes this process the subreaper of its descendants (prctl `PR_SET_CHILD_SUBREAPER`): an
/// orphan among them (a process whose parent exited, such as an upgraded server's successor)
/// becomes this process's child, to wait for, instead of init's.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes plain integers, no pointers.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

/// Moves the calling thread into the network namespace `ns` (an open `/proc/PID/ns/net` or
/// `/var/run/netns/NAME` file): `setns(CLONE_NEWNET)`. Needs `CAP_SYS_ADMIN`.
pub fn enter_net_namespace(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes a descriptor (borrowed, so open for the call) and a flag; it changes
    // only the calling thread's network namespace and reads no memory of ours.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Sets, in the process `cmd` starts, its CPU affinity to `cores` between fork and exec
/// (see [`resource::set_affinity`](crate::resource::set_affinity)); none leaves it as this
/// process's.
pub fn pin_command(cmd: &mut Command, cores: Vec<usize>) {
    use std::os::unix::process::CommandExt;
    if cores.is_empty() {
        return;
    }
    let set = crate::resource::CpuSet::of(&cores);
    // SAFETY: the closure only calls `CpuSet::apply`, which allocates nothing (the set was
    // built before the fork) and makes one system call: safe in the forked child before exec.
    unsafe {
        cmd.pre_exec(move || set.apply());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::SIGKILL;
    use std::ffi::CString;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn counts_threads() {
        let n = thread_count().unwrap();
        assert!(n >= 1);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        assert!(thread_count().unwrap() > n.min(1));
        drop(tx);
        t.join().unwrap();
    }

    #[test]
    fn fork_refuses_a_threaded_process() {
        // The test harness runs tests on threads, so this process always has more than one.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        let e = fork().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        drop(tx);
        t.join().unwrap();
    }

    /// A child made with the raw call (this test process is threaded, so the child only
    /// calls async-signal-safe functions).
    fn raw_fork(child: impl FnOnce() -> i32) -> Pid {
        // SAFETY: every caller's `child` makes only async-signal-safe calls, then `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            exit_now(child());
        }
        pid
    }

    #[test]
    fn exit_codes_and_signals_are_waited_for_once() {
        let child = raw_fork(|| 7);
        assert_eq!(wait(child).unwrap(), Exit::Code(7));
        assert_eq!(try_wait(child).unwrap(), None, "reaped once, nothing left");
        let e = try_wait_child(child).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ECHILD));
        assert!(wait(child).is_err());
        let child = raw_fork(|| {
            // SAFETY: pause takes no arguments.
            unsafe { libc::pause() };
            0
        });
        assert_eq!(try_wait_child(child).unwrap(), None, "still running");
        kill(child, SIGKILL).unwrap();
        assert_eq!(wait(child).unwrap(), Exit::Signal(SIGKILL));
        assert_eq!(Exit::Signal(9).to_string(), "signal 9");
        assert_eq!(Exit::Code(0).to_string(), "exit 0");
        // No such process (a pid past any `pid_max`): no error; a group id is refused.
        kill(Pid::MAX, SIGKILL).unwrap();
        assert_eq!(
            kill(0, SIGKILL).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(pid(), std::process::id() as Pid);
        assert!(parent_pid() > 0);
    }

    #[test]
    fn a_pidfd_turns_readable_when_its_child_exits() {
        let pid = raw_fork(|| {
            // SAFETY: pause takes no arguments.
            unsafe { libc::pause() };
            0
        });
        let fd = pidfd_open(pid).unwrap();
        let ready = |ms| crate::poll::poll_readable(fd.as_raw_fd(), Duration::from_millis(ms));
        assert!(!ready(0).unwrap());
        kill(pid, SIGKILL).unwrap();
        assert!(ready(5000).unwrap());
        assert_eq!(wait(pid).unwrap(), Exit::Signal(SIGKILL));
        assert!(pidfd_open(-1).is_err());
    }

    #[test]
    fn a_group_is_signalled_whole_and_an_empty_one_is_no_error() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let pgid = child.id() as Pid;
        kill_group(pgid, SIGKILL).unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(SIGKILL));
        // Both members held the pipe's write end: end of stream once neither lives.
        let ready = crate::poll::poll_readable(out.as_raw_fd(), Duration::from_secs(10));
        assert!(ready.unwrap(), "a member of the group outlived the kill");
        assert_eq!(crate::fd::read(out.as_raw_fd(), &mut [0u8; 8]).unwrap(), 0);
        kill_group(pgid, SIGKILL).unwrap();
        for bad in [0, 1, -5] {
            assert_eq!(
                kill_group(bad, SIGKILL).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn a_child_asks_to_die_with_its_parent_and_becomes_a_subreaper() {
        let me = pid();
        // Each is a prctl (a plain system call) in a forked child.
        let child = raw_fork(
            move || match (die_with_parent(SIGKILL, me), become_subreaper()) {
                (Ok(true), Ok(())) => 0,
                _ => 1,
            },
        );
        assert_eq!(wait(child).unwrap(), Exit::Code(0));
        // A parent that is not ours any more: false.
        let child = raw_fork(|| match die_with_parent(SIGKILL, 1) {
            Ok(false) => 0,
            _ => 1,
        });
        assert_eq!(wait(child).unwrap(), Exit::Code(0));
        assert!(die_with_parent(-1, me).is_err());
    }

    #[test]
    fn entering_a_network_namespace_needs_a_namespace() {
        let own = std::fs::File::open("/proc/thread-self/ns/net").unwrap();
        let not = std::fs::File::open("/proc/self/statm").unwrap();
        std::thread::spawn(move || {
            // Our own namespace: allowed with CAP_SYS_ADMIN, else EPERM; nothing changes.
            match enter_net_namespace(own.as_fd()) {
                Ok(()) => {}
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
            }
            let e = enter_net_namespace(not.as_fd()).unwrap_err();
            assert!(
                matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EPERM)),
                "{e}"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_raised_flag_is_readable_until_it_is_lowered() {
        let mut flag = PollFlag::new().unwrap();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fds = [a.as_raw_fd(), flag.raw_fd()];
        let any = crate::poll::poll_readable_any;
        assert!(any(&fds, Duration::ZERO).unwrap().is_empty());
        // Raised twice: one raise; lowered: not readable any more.
        flag.set(true);
        flag.set(true);
        assert!(flag.is_raised());
        assert_eq!(any(&fds, Duration::from_secs(5)).unwrap(), [1]);
        flag.set(false);
        flag.set(false);
        assert!(!flag.is_raised());
        assert!(any(&fds, Duration::from_millis(50)).unwrap().is_empty());
    }

    /// A program started with two descriptors gets them as 3 and 4 (and no other of ours),
    /// `LISTEN_PID` set to its own pid, the output descriptor as stdout and stderr, and the
    /// arguments and environment given.
    #[test]
    fn spawn_with_fds_passes_descriptors_as_systemd_does() {
        let (r1, _w1) = crate::fd::pipe().unwrap();
        let (r2, _w2) = crate::fd::pipe().unwrap();
        let (out_r, out_w) = crate::fd::pipe().unwrap();
        let exe = CString::new("/bin/sh").unwrap();
        let script = "echo \"$1 $LISTEN_PID $$ $WEFT_T\"; \
                      for fd in 3 4 5; do [ -e /proc/self/fd/$fd ] && echo has $fd; done; \
                      echo err >&2";
        let argv: Vec<CString> = ["sh", "-c", script, "sh", "arg"]
            .iter()
            .map(|a| CString::new(*a).unwrap())
            .collect();
        let env = [CString::new("WEFT_T=env").unwrap()];
        let pid = spawn_with_fds(
            &exe,
            &argv,
            &env,
            &[r1.as_raw_fd(), r2.as_raw_fd()],
            Some(out_w.as_raw_fd()),
        )
        .unwrap();
        drop(out_w);
        let mut out = String::new();
        std::fs::File::from(out_r).read_to_string(&mut out).unwrap();
        assert_eq!(wait(pid).unwrap(), Exit::Code(0));
        // `$$` of `sh -c` is the spawned process itself: the pid LISTEN_PID names.
        assert_eq!(
            out,
            format!("arg {pid} {pid} env\nhas 3\nhas 4\nerr\n"),
            "{out}"
        );
        // A program that cannot be run: the child ends with 127.
        let missing = CString::new("/nonexistent/weft").unwrap();
        let pid = spawn_with_fds(&missing, &argv, &[], &[], None).unwrap();
        assert_eq!(wait(pid).unwrap(), Exit::Code(127));
    }
}
